/*
 * patchify.cu -- the kernel of patchify.h and its planning.
 *
 * Grid: one block per (image, band of `rows` output rows).  Threads: one
 * work item each (kt output channels x 4 columns of a row), rounded up to
 * whole warps; consecutive threads take consecutive column groups of one
 * channel group, so that their float4 input reads and output writes are
 * consecutive.
 */
#include "algorithms/launch_checks.h"
#include "algorithms/patchify.h"

namespace {

constexpr int kMaxThreads = 512;
constexpr int kMaxRows = 16;
constexpr size_t kSmemMax = 48u << 10; /* the default limit: no opt-in needed */

struct pf_params {
  int c, h, w, k, p, q, r, s, taps;
  int channel_groups, column_groups, filter_ld, input_ld, rows, row_tiles, epilogue;
};

/* Not fmaxf: it would turn a NaN (an unwritten, poisoned output) into 0. */
__device__ __forceinline__ float epilogue_of(float v, const float *bias, int k, int epilogue) {
  if (epilogue == CONV_EPILOGUE_NONE) return v;
  v += bias[k];
  return epilogue == CONV_EPILOGUE_BIAS_RELU && v < 0.f ? 0.f : v;
}

/* w ([k][taps], contiguous) into ws ([tap][filter_ld]) for `channels`
 * channels, zero past the last: read in order, so that the loads coalesce. */
__device__ __forceinline__ void stage_filters(const pf_params &prm, const float *__restrict__ w,
                                              int channels, float *ws) {
  const int count = channels * prm.taps;
  for (int i = (int)threadIdx.x; i < count; i += (int)blockDim.x) {
    const int k = i / prm.taps, tap = i - k * prm.taps;
    ws[tap * prm.filter_ld + k] = k < prm.k ? __ldg(w + i) : 0.f;
  }
}

/* The input rows of output row `row` into xs ([tap][input_ld]): element
 * (c, row * r + fr, col) is tap (c, fr, col % s) of output column col / s.
 * Read a row at a time in order; columns past q are zero. */
__device__ __forceinline__ void stage_inputs(const pf_params &prm, const float *__restrict__ ximage,
                                             int row, float *xs) {
  const int cols = prm.q * prm.s, lines = prm.c * prm.r;
  for (int i = (int)threadIdx.x; i < lines * cols; i += (int)blockDim.x) {
    const int line = i / cols, col = i - line * cols;
    const int c = line / prm.r, fr = line - c * prm.r;
    const int column = col / prm.s, fs = col - column * prm.s;
    xs[(line * prm.s + fs) * prm.input_ld + column] =
        __ldg(ximage + ((size_t)c * prm.h + row * prm.r + fr) * prm.w + col);
  }
  const int pad = prm.input_ld - prm.q;
  for (int i = (int)threadIdx.x; i < prm.taps * pad; i += (int)blockDim.x) {
    const int tap = i / pad;
    xs[tap * prm.input_ld + prm.q + (i - tap * pad)] = 0.f;
  }
}

/* One output channel's 4 columns: acc += f * in. */
__device__ __forceinline__ void accumulate(float (&acc)[4], float f, float4 in) {
  acc[0] = fmaf(f, in.x, acc[0]);
  acc[1] = fmaf(f, in.y, acc[1]);
  acc[2] = fmaf(f, in.z, acc[2]);
  acc[3] = fmaf(f, in.w, acc[3]);
}

template <int KT>
__global__ static void __launch_bounds__(kMaxThreads)
    patchify_kernel(const pf_params prm, const float *__restrict__ x, const float *__restrict__ w,
                    const float *__restrict__ bias, float *__restrict__ y) {
  extern __shared__ __align__(16) float smem[];
  float *ws = smem;
  float *xs = smem + prm.taps * prm.filter_ld;
  stage_filters(prm, w, prm.channel_groups * KT, ws);
  const int image = (int)blockIdx.x / prm.row_tiles;
  const int row0 = ((int)blockIdx.x - image * prm.row_tiles) * prm.rows;
  const float *ximage = x + (size_t)image * prm.c * prm.h * prm.w;
  const int item = (int)threadIdx.x;
  const int group = item / prm.column_groups, column = (item - group * prm.column_groups) * 4;
  const bool active = group < prm.channel_groups;
  for (int row = row0; row < min(row0 + prm.rows, prm.p); row++) {
    __syncthreads(); /* the last row's inputs read (and, first, the filters staged) */
    stage_inputs(prm, ximage, row, xs);
    __syncthreads();
    if (!active) continue;
    float acc[KT][4];
#pragma unroll
    for (int t = 0; t < KT; t++) acc[t][0] = acc[t][1] = acc[t][2] = acc[t][3] = 0.f;
#pragma unroll 4
    for (int tap = 0; tap < prm.taps; tap++) {
      const float4 in = *reinterpret_cast<const float4 *>(xs + tap * prm.input_ld + column);
#pragma unroll
      for (int t = 0; t < KT; t += 4) {
        const float4 f =
            *reinterpret_cast<const float4 *>(ws + tap * prm.filter_ld + group * KT + t);
        accumulate(acc[t], f.x, in);
        accumulate(acc[t + 1], f.y, in);
        accumulate(acc[t + 2], f.z, in);
        accumulate(acc[t + 3], f.w, in);
      }
    }
    const bool whole = column + 4 <= prm.q && prm.q % 4 == 0;
#pragma unroll
    for (int t = 0; t < KT; t++) {
      const int k = group * KT + t;
      if (k >= prm.k) break;
      float *out = y + (((size_t)image * prm.k + k) * prm.p + row) * prm.q + column;
      float v[4];
#pragma unroll
      for (int j = 0; j < 4; j++) v[j] = epilogue_of(acc[t][j], bias, k, prm.epilogue);
      if (whole) {
        *reinterpret_cast<float4 *>(out) = make_float4(v[0], v[1], v[2], v[3]);
      } else {
        for (int j = 0; j < 4 && column + j < prm.q; j++) out[j] = v[j];
      }
    }
  }
}

typedef void (*pf_kernel_fn)(const pf_params, const float *, const float *, const float *,
                             float *);

pf_kernel_fn find_kernel(int kt) {
  return kt == 4 ? patchify_kernel<4> : kt == 8 ? patchify_kernel<8> : nullptr;
}

}  // namespace

extern "C" bool conv_patchify_takes(const conv_problem *pb) {
  return pb->op == CONV_OP_CONVOLUTION && pb->direction == CONV_FORWARD &&
         pb->layout == CONV_LAYOUT_NCHW && pb->groups == 1 && pb->stride_h == pb->r &&
         pb->stride_w == pb->s && pb->pad_h == 0 && pb->pad_w == 0 && pb->dil_h == 1 &&
         pb->dil_w == 1 && pb->c * pb->r * pb->s <= CONV_PATCHIFY_TAPS_MAX;
}

extern "C" bool conv_patchify_plan(const conv_problem *pb, const conv_patchify_tiling *t,
                                   conv_patchify_launch *L, char *why, size_t why_size) {
  if (!conv_patchify_takes(pb)) CONV_REJECT("not a patchify problem");
  if (t->kt != 4 && t->kt != 8) CONV_REJECT("kt %d: not 4 or 8", t->kt);
  if (t->rows < 1 || t->rows > kMaxRows) CONV_REJECT("rows %d: not in [1, %d]", t->rows, kMaxRows);
  const int64_t p = pb->h / pb->r, q = pb->w / pb->s;
  const int64_t dims[] = {pb->c * pb->h * pb->w, pb->k * p * q, pb->n * p};
  for (int64_t d : dims)
    if (!conv_fits_int(d)) CONV_REJECT("a size past 32-bit indexing");
  conv_patchify_launch l = {};
  l.tiling = *t;
  l.kernel = (const void *)find_kernel(t->kt);
  l.n = (int)pb->n, l.c = (int)pb->c, l.h = (int)pb->h, l.w = (int)pb->w, l.k = (int)pb->k;
  l.p = (int)p, l.q = (int)q, l.r = (int)pb->r, l.s = (int)pb->s;
  l.taps = (int)(pb->c * pb->r * pb->s);
  l.channel_groups = (int)((pb->k + t->kt - 1) / t->kt);
  l.column_groups = (int)((q + 3) / 4);
  const int64_t items = (int64_t)l.channel_groups * l.column_groups;
  if (items > kMaxThreads) CONV_REJECT("%lld work items a row: past %d threads", (long long)items, kMaxThreads);
  /* +4: the transposing stores of the filters spread over 8 banks, not 1. */
  l.filter_ld = l.channel_groups * t->kt + 4;
  l.input_ld = l.column_groups * 4;
  l.row_tiles = (int)((p + t->rows - 1) / t->rows);
  l.epilogue = (int)pb->epilogue;
  l.grid = (unsigned)(pb->n * l.row_tiles);
  l.threads = (unsigned)((items + 31) / 32 * 32);
  l.smem_bytes = (size_t)l.taps * (size_t)(l.filter_ld + l.input_ld) * sizeof(float);
  if (l.smem_bytes > kSmemMax) CONV_REJECT("%zu bytes of shared memory: past %zu", l.smem_bytes, kSmemMax);
  *L = l;
  return true;
}

extern "C" cudaError_t conv_patchify_forward(const conv_patchify_launch *L, const float *x,
                                             const float *w, const float *bias, float *y,
                                             cudaStream_t stream) {
  if (L == NULL || L->kernel == NULL) return cudaErrorInvalidValue;
  pf_params prm;
  prm.c = L->c, prm.h = L->h, prm.w = L->w, prm.k = L->k, prm.p = L->p, prm.q = L->q;
  prm.r = L->r, prm.s = L->s, prm.taps = L->taps;
  prm.channel_groups = L->channel_groups, prm.column_groups = L->column_groups;
  prm.filter_ld = L->filter_ld, prm.input_ld = L->input_ld;
  prm.rows = L->tiling.rows, prm.row_tiles = L->row_tiles, prm.epilogue = L->epilogue;
  ((pf_kernel_fn)L->kernel)<<<L->grid, L->threads, L->smem_bytes, stream>>>(prm, x, w, bias, y);
  return cudaGetLastError();
}
