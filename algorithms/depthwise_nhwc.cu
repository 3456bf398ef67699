/*
 * depthwise_nhwc.cu -- the kernels of depthwise_nhwc.h and their planning.
 *
 * Grid: x = one block per (image, band of `rows` output rows, tile of
 * tq * px output columns), y = blocks of tc * vec output channels.  Each
 * block first stages its channels' filters in shared memory, tap-major
 * ([tap][channel]), then each thread walks the band's rows.
 */
#include <stdio.h>

#include "algorithms/depthwise_nhwc.h"
#include "algorithms/launch_checks.h"

namespace {

constexpr int kMaxThreads = 256;

/* The launch's numbers, by value: the kernel never reads host memory. */
struct dw_params {
  int c, h, w, k, p, q, r, s;
  int stride_h, stride_w, pad_h, pad_w, dil_h, dil_w;
  int multiplier, block_channels, rows, epilogue;
  conv_divisor by_q_tiles, by_p_tiles;
};

__device__ __forceinline__ float4 zero_of(float4) { return make_float4(0.f, 0.f, 0.f, 0.f); }
__device__ __forceinline__ float zero_of(float) { return 0.f; }

__device__ __forceinline__ float4 fma_of(float4 x, float4 w, float4 acc) {
  return make_float4(fmaf(x.x, w.x, acc.x), fmaf(x.y, w.y, acc.y), fmaf(x.z, w.z, acc.z),
                     fmaf(x.w, w.w, acc.w));
}
__device__ __forceinline__ float fma_of(float x, float w, float acc) { return fmaf(x, w, acc); }

/* Not fmaxf: it would turn a NaN (an unwritten, poisoned output) into 0. */
__device__ __forceinline__ float epilogue_of(float v, float b, int epilogue) {
  if (epilogue == CONV_EPILOGUE_NONE) return v;
  v += b;
  return epilogue == CONV_EPILOGUE_BIAS_RELU && v < 0.f ? 0.f : v;
}
__device__ __forceinline__ float4 epilogue_of(float4 v, const float *bias, int epilogue) {
  if (epilogue == CONV_EPILOGUE_NONE) return v;
  return make_float4(epilogue_of(v.x, bias[0], epilogue), epilogue_of(v.y, bias[1], epilogue),
                     epilogue_of(v.z, bias[2], epilogue), epilogue_of(v.w, bias[3], epilogue));
}
__device__ __forceinline__ float epilogue_of(float v, const float *bias, int epilogue) {
  return epilogue == CONV_EPILOGUE_NONE ? v : epilogue_of(v, bias[0], epilogue);
}

/* Where a block and its thread are: image, first output row, first output
 * column, first output channel (local to the block and global). */
struct dw_place {
  int image, row0, col0, local_channel, channel;
};

template <int VEC, int PX>
__device__ __forceinline__ dw_place place_thread(const dw_params &prm, int tq) {
  const uint32_t band = conv_divide(blockIdx.x, prm.by_q_tiles);
  const uint32_t tile = blockIdx.x - band * prm.by_q_tiles.divisor;
  const uint32_t image = conv_divide(band, prm.by_p_tiles);
  dw_place at;
  at.image = (int)image;
  at.row0 = (int)(band - image * prm.by_p_tiles.divisor) * prm.rows;
  at.col0 = ((int)tile * tq + (int)threadIdx.y) * PX;
  at.local_channel = (int)threadIdx.x * VEC;
  at.channel = (int)blockIdx.y * prm.block_channels + at.local_channel;
  return at;
}

/* The block's filters, tap-major, zero past the last output channel. */
__device__ __forceinline__ void stage_filters(const dw_params &prm, const float *__restrict__ w,
                                              float *sw) {
  const int taps = prm.r * prm.s, count = taps * prm.block_channels;
  const int first = (int)blockIdx.y * prm.block_channels;
  const int tid = (int)(threadIdx.y * blockDim.x + threadIdx.x), threads = blockDim.x * blockDim.y;
  for (int i = tid; i < count; i += threads) {
    const int tap = i / prm.block_channels, kk = i - tap * prm.block_channels;
    sw[i] = first + kk < prm.k ? w[(first + kk) * taps + tap] : 0.f;
  }
  __syncthreads();
}

template <typename V>
__device__ __forceinline__ void store_outputs(const dw_params &prm, const dw_place &at, int row,
                                              const V *acc, int count, const float *bias,
                                              float *__restrict__ y) {
  float *out = y + ((size_t)(at.image * prm.p + row) * prm.q + at.col0) * prm.k + at.channel;
  for (int j = 0; j < count; j++)
    *reinterpret_cast<V *>(out + (size_t)j * prm.k) = epilogue_of(acc[j], bias, prm.epilogue);
}

/* WINDOW: compile-time filter width S, column stride and PX; each input
 * column of the thread's window is loaded once per filter row. */
template <typename V, int S, int STRIDE, int PX>
__global__ static void __launch_bounds__(kMaxThreads)
    dw_window_kernel(const dw_params prm, const float *__restrict__ x,
                     const float *__restrict__ w, const float *__restrict__ bias,
                     float *__restrict__ y, int tq) {
  constexpr int VEC = sizeof(V) / sizeof(float), SPAN = (PX - 1) * STRIDE + S;
  extern __shared__ float sw[];
  stage_filters(prm, w, sw);
  const dw_place at = place_thread<VEC, PX>(prm, tq);
  if (at.channel >= prm.k || at.col0 >= prm.q) return;
  const int in_channel = at.channel / prm.multiplier;
  const int outputs = min(PX, prm.q - at.col0);
  const int first_col = at.col0 * STRIDE - prm.pad_w;
  for (int row = at.row0; row < min(at.row0 + prm.rows, prm.p); row++) {
    V acc[PX];
#pragma unroll
    for (int j = 0; j < PX; j++) acc[j] = zero_of(V());
    for (int fr = 0; fr < prm.r; fr++) {
      const int ih = row * prm.stride_h - prm.pad_h + fr * prm.dil_h;
      if (ih < 0 || ih >= prm.h) continue;
      const float *xrow = x + (size_t)(at.image * prm.h + ih) * prm.w * prm.c + in_channel;
      V window[SPAN];
#pragma unroll
      for (int t = 0; t < SPAN; t++) {
        const int iw = first_col + t;
        window[t] = iw >= 0 && iw < prm.w
                        ? __ldg(reinterpret_cast<const V *>(xrow + (size_t)iw * prm.c))
                        : zero_of(V());
      }
#pragma unroll
      for (int fs = 0; fs < S; fs++) {
        const V tap =
            *reinterpret_cast<const V *>(sw + (fr * S + fs) * prm.block_channels + at.local_channel);
#pragma unroll
        for (int j = 0; j < PX; j++) acc[j] = fma_of(window[j * STRIDE + fs], tap, acc[j]);
      }
    }
    store_outputs(prm, at, row, acc, outputs, bias == nullptr ? nullptr : bias + at.channel, y);
  }
}

/* GENERIC: any filter, stride and dilation. */
template <typename V, int PX>
__global__ static void __launch_bounds__(kMaxThreads)
    dw_generic_kernel(const dw_params prm, const float *__restrict__ x,
                      const float *__restrict__ w, const float *__restrict__ bias,
                      float *__restrict__ y, int tq) {
  constexpr int VEC = sizeof(V) / sizeof(float);
  extern __shared__ float sw[];
  stage_filters(prm, w, sw);
  const dw_place at = place_thread<VEC, PX>(prm, tq);
  if (at.channel >= prm.k || at.col0 >= prm.q) return;
  const int in_channel = at.channel / prm.multiplier;
  const int outputs = min(PX, prm.q - at.col0);
  for (int row = at.row0; row < min(at.row0 + prm.rows, prm.p); row++) {
    V acc[PX];
#pragma unroll
    for (int j = 0; j < PX; j++) acc[j] = zero_of(V());
    for (int fr = 0; fr < prm.r; fr++) {
      const int ih = row * prm.stride_h - prm.pad_h + fr * prm.dil_h;
      if (ih < 0 || ih >= prm.h) continue;
      const float *xrow = x + (size_t)(at.image * prm.h + ih) * prm.w * prm.c + in_channel;
      for (int fs = 0; fs < prm.s; fs++) {
        const V tap = *reinterpret_cast<const V *>(sw + (fr * prm.s + fs) * prm.block_channels +
                                                   at.local_channel);
#pragma unroll
        for (int j = 0; j < PX; j++) {
          const int iw = (at.col0 + j) * prm.stride_w - prm.pad_w + fs * prm.dil_w;
          if (iw >= 0 && iw < prm.w)
            acc[j] = fma_of(__ldg(reinterpret_cast<const V *>(xrow + (size_t)iw * prm.c)), tap,
                            acc[j]);
        }
      }
    }
    store_outputs(prm, at, row, acc, outputs, bias == nullptr ? nullptr : bias + at.channel, y);
  }
}

typedef void (*dw_kernel_fn)(const dw_params, const float *, const float *, const float *,
                             float *, int);

struct dw_instance {
  int s, stride, px, vec; /* s == 0: the generic kernel */
  dw_kernel_fn kernel;
};

#define DW_WINDOWS(S, ST)                                                                \
  {S, ST, 1, 4, dw_window_kernel<float4, S, ST, 1>},                                    \
      {S, ST, 2, 4, dw_window_kernel<float4, S, ST, 2>},                                \
      {S, ST, 4, 4, dw_window_kernel<float4, S, ST, 4>},                                \
      {S, ST, 1, 1, dw_window_kernel<float, S, ST, 1>},                                 \
      {S, ST, 2, 1, dw_window_kernel<float, S, ST, 2>},                                 \
      {S, ST, 4, 1, dw_window_kernel<float, S, ST, 4>}

const dw_instance kInstances[] = {
    DW_WINDOWS(3, 1), DW_WINDOWS(3, 2), DW_WINDOWS(5, 1),
    DW_WINDOWS(5, 2), DW_WINDOWS(7, 1), DW_WINDOWS(7, 2),
    {0, 0, 1, 4, dw_generic_kernel<float4, 1>}, {0, 0, 2, 4, dw_generic_kernel<float4, 2>},
    {0, 0, 4, 4, dw_generic_kernel<float4, 4>}, {0, 0, 1, 1, dw_generic_kernel<float, 1>},
    {0, 0, 2, 1, dw_generic_kernel<float, 2>},  {0, 0, 4, 1, dw_generic_kernel<float, 4>},
};
#undef DW_WINDOWS

dw_kernel_fn find_kernel(int s, int stride, int px, int vec) {
  for (const dw_instance &in : kInstances)
    if (in.s == s && in.stride == stride && in.px == px && in.vec == vec) return in.kernel;
  return nullptr;
}

}  // namespace

/* Rows per block: a band of output rows shares the staged filters. */
static int rows_per_block(const conv_problem *pb) { return pb->h >= 16 ? 4 : 1; }

extern "C" bool conv_dwnhwc_plan(const conv_problem *pb, const conv_dwnhwc_tiling *t,
                                 conv_dwnhwc_launch *L, char *why, size_t why_size) {
  if (pb->layout != CONV_LAYOUT_NHWC || pb->groups != pb->c)
    CONV_REJECT("not an NHWC depthwise problem");
  if (t->vec != 1 && t->vec != 4) CONV_REJECT("vec %d: not 1 or 4", t->vec);
  if (t->px != 1 && t->px != 2 && t->px != 4) CONV_REJECT("px %d: not 1, 2 or 4", t->px);
  if (t->tc < 1 || t->tq < 1 || t->tc * t->tq > kMaxThreads)
    CONV_REJECT("%d x %d threads: not in [1, %d]", t->tc, t->tq, kMaxThreads);
  const int64_t multiplier = pb->k / pb->c;
  if (t->vec == 4 && (multiplier != 1 || pb->c % 4 != 0))
    CONV_REJECT("vec 4 needs a multiple of 4 channels and no channel multiplier");
  const int64_t p = (pb->h + 2 * pb->pad_h - pb->dil_h * (pb->r - 1) - 1) / pb->stride_h + 1;
  const int64_t q = (pb->w + 2 * pb->pad_w - pb->dil_w * (pb->s - 1) - 1) / pb->stride_w + 1;
  const int64_t dims[] = {pb->n * pb->h * pb->w * pb->c, pb->n * p * q * pb->k, pb->r * pb->s,
                          pb->pad_h, pb->pad_w, pb->stride_h * p, pb->stride_w * q,
                          pb->dil_h * pb->r, pb->dil_w * pb->s};
  for (int64_t d : dims)
    if (!conv_fits_int(d)) CONV_REJECT("a size past 32-bit indexing");

  const bool window = (pb->s == 3 || pb->s == 5 || pb->s == 7) && pb->dil_w == 1 &&
                      (pb->stride_w == 1 || pb->stride_w == 2);
  conv_dwnhwc_launch l = {};
  l.tiling = *t;
  l.kernel = (const void *)find_kernel(window ? (int)pb->s : 0, window ? (int)pb->stride_w : 0,
                                       t->px, t->vec);
  if (l.kernel == NULL) CONV_REJECT("no kernel compiled for this filter and tiling");
  l.n = (int)pb->n, l.c = (int)pb->c, l.h = (int)pb->h, l.w = (int)pb->w, l.k = (int)pb->k;
  l.p = (int)p, l.q = (int)q, l.r = (int)pb->r, l.s = (int)pb->s;
  l.stride_h = (int)pb->stride_h, l.stride_w = (int)pb->stride_w;
  l.pad_h = (int)pb->pad_h, l.pad_w = (int)pb->pad_w;
  l.dil_h = (int)pb->dil_h, l.dil_w = (int)pb->dil_w;
  l.multiplier = (int)multiplier;
  l.epilogue = (int)pb->epilogue;
  l.block_channels = t->tc * t->vec;
  l.q_tiles = (int)((q + (int64_t)t->tq * t->px - 1) / ((int64_t)t->tq * t->px));
  l.rows = rows_per_block(pb);
  const int64_t p_tiles = (p + l.rows - 1) / l.rows;
  const int64_t blocks_x = pb->n * p_tiles * l.q_tiles;
  const int64_t blocks_y = (pb->k + l.block_channels - 1) / l.block_channels;
  if (!conv_fits_int(blocks_x) || blocks_y > 65535) CONV_REJECT("grid too large");
  l.by_q_tiles = conv_divisor_make(l.q_tiles);
  l.by_p = conv_divisor_make((int)p_tiles);
  l.grid[0] = (unsigned)blocks_x;
  l.grid[1] = (unsigned)blocks_y;
  l.smem_bytes = (size_t)l.block_channels * (size_t)(pb->r * pb->s) * sizeof(float);
  if (l.smem_bytes > (48u << 10)) CONV_REJECT("filters of %zu bytes: past 48 KiB", l.smem_bytes);
  *L = l;
  return true;
}

extern "C" cudaError_t conv_dwnhwc_forward(const conv_dwnhwc_launch *L, const float *x,
                                           const float *w, const float *bias, float *y,
                                           cudaStream_t stream) {
  if (L == NULL || L->kernel == NULL) return cudaErrorInvalidValue;
  dw_params prm;
  prm.c = L->c, prm.h = L->h, prm.w = L->w, prm.k = L->k, prm.p = L->p, prm.q = L->q;
  prm.r = L->r, prm.s = L->s;
  prm.stride_h = L->stride_h, prm.stride_w = L->stride_w;
  prm.pad_h = L->pad_h, prm.pad_w = L->pad_w, prm.dil_h = L->dil_h, prm.dil_w = L->dil_w;
  prm.multiplier = L->multiplier, prm.block_channels = L->block_channels;
  prm.rows = L->rows;
  prm.epilogue = L->epilogue;
  prm.by_q_tiles = L->by_q_tiles, prm.by_p_tiles = L->by_p;
  const dim3 grid(L->grid[0], L->grid[1]), block((unsigned)L->tiling.tc, (unsigned)L->tiling.tq);
  ((dw_kernel_fn)L->kernel)<<<grid, block, L->smem_bytes, stream>>>(prm, x, w, bias, y,
                                                                    L->tiling.tq);
  return cudaGetLastError();
}
