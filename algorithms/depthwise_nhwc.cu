/*
 * depthwise_nhwc.cu -- the kernels of depthwise_nhwc.h but the tile form's
 * (depthwise_nhwc_tile.cu), and the planning and launch of every form.
 *
 * Grid: x = one block per (image, band of `rows` output rows, tile of
 * tq * px output columns; the tile form's: thread_cols * px), y = blocks
 * of tc * vec output channels.  Each
 * block first stages its channels' filters in shared memory, tap-major
 * ([tap][channel]), then each thread walks the band's rows.
 *
 * Element types: x, w and y are T (float, __half or __nv_bfloat16); the
 * registers (V: float4 or float, `vec` channels), the staged filters and
 * the sums are fp32 whatever T, and each output is rounded to T once, after
 * the epilogue.  A half thread's 4 channels are one 8-byte load; the
 * rolling form's ring holds input rows in T, converted as they are read.
 */
#include <stdio.h>

#include "algorithms/depthwise_nhwc.h"
#include "algorithms/depthwise_nhwc_kernels.cuh"
#include "algorithms/common/launch_checks.h"
#include "algorithms/common/launch_plan.cuh"
#include "core/core.h"

namespace {

using namespace conv_dwnhwc_detail;

constexpr int kMaxRows = 16;

__device__ __forceinline__ float4 zero_of(float4) { return make_float4(0.f, 0.f, 0.f, 0.f); }
__device__ __forceinline__ float zero_of(float) { return 0.f; }

__device__ __forceinline__ float4 fma_of(float4 x, float4 w, float4 acc) {
  return make_float4(fmaf(x.x, w.x, acc.x), fmaf(x.y, w.y, acc.y), fmaf(x.z, w.z, acc.z),
                     fmaf(x.w, w.w, acc.w));
}
__device__ __forceinline__ float fma_of(float x, float w, float acc) { return fmaf(x, w, acc); }

/* A thread's V channels read from elements of T, as fp32 (through the
 * read-only cache); 4 half channels are one 8-byte load. */
__device__ __forceinline__ float4 load_v(const float *p, float4) {
  return __ldg(reinterpret_cast<const float4 *>(p));
}
__device__ __forceinline__ float load_v(const float *p, float) { return __ldg(p); }
template <typename H>
__device__ __forceinline__ float4 load_v(const H *p, float4) {
  float v[4];
  conv_load_elements<4>(p, v);
  return make_float4(v[0], v[1], v[2], v[3]);
}
template <typename H>
__device__ __forceinline__ float load_v(const H *p, float) {
  return conv_element_to_float(__ldg(p));
}

/* V channels written to elements of T, each rounded once. */
__device__ __forceinline__ void store_v(float *p, float4 v) {
  *reinterpret_cast<float4 *>(p) = v;
}
__device__ __forceinline__ void store_v(float *p, float v) { *p = v; }
template <typename H>
__device__ __forceinline__ void store_v(H *p, float4 v) {
  const float f[4] = {v.x, v.y, v.z, v.w};
  conv_store_elements<4>(p, f);
}
template <typename H>
__device__ __forceinline__ void store_v(H *p, float v) {
  *p = conv_element_from_float<H>(v);
}

/* The epilogue of a thread's V channels, `bias` at the first: no bias read
 * for CONV_EPILOGUE_NONE, where it may be NULL. */
__device__ __forceinline__ float4 epilogue_of(float4 v, const float *bias, int epilogue) {
  if (epilogue == CONV_EPILOGUE_NONE) return v;
  return make_float4(conv_epilogue_apply(epilogue, v.x, bias[0]),
                     conv_epilogue_apply(epilogue, v.y, bias[1]),
                     conv_epilogue_apply(epilogue, v.z, bias[2]),
                     conv_epilogue_apply(epilogue, v.w, bias[3]));
}
__device__ __forceinline__ float epilogue_of(float v, const float *bias, int epilogue) {
  return epilogue == CONV_EPILOGUE_NONE ? v : conv_epilogue_apply(epilogue, v, bias[0]);
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

/* The filters staged and visible to the whole block. */
__device__ __forceinline__ void stage_filters(const dw_params &prm, const float *__restrict__ w,
                                              float *sw) {
  stage_filters_async(prm, w, sw);
  cp_async_wait<0>();
  __syncthreads();
}

/* Half filters converted to fp32 on the way (cp.async cannot convert):
 * the layout of stage_filters_async, loads in order, no barrier. */
template <typename H>
__device__ __forceinline__ void stage_filters_async_or_now(const dw_params &prm,
                                                           const H *__restrict__ w, float *sw) {
  for_each_filter_element(prm, w, sw, [](float *dst, const H *src, bool inside) {
    *dst = inside ? conv_element_to_float(__ldg(src)) : 0.0f;
  });
}
__device__ __forceinline__ void stage_filters_async_or_now(const dw_params &prm,
                                                           const float *__restrict__ w,
                                                           float *sw) {
  stage_filters_async(prm, w, sw);
}

/* The same for half filters, visible to the whole block. */
template <typename H>
__device__ __forceinline__ void stage_filters(const dw_params &prm, const H *__restrict__ w,
                                              float *sw) {
  stage_filters_async_or_now(prm, w, sw);
  __syncthreads();
}

template <typename T, typename V>
__device__ __forceinline__ void store_outputs(const dw_params &prm, const dw_place &at, int row,
                                              const V *acc, int count, const float *bias,
                                              T *__restrict__ y) {
  T *out = y + ((size_t)(at.image * prm.p + row) * prm.q + at.col0) * prm.k + at.channel;
  for (int j = 0; j < count; j++)
    store_v(out + (size_t)j * prm.k, epilogue_of(acc[j], bias, prm.epilogue));
}

/* window[t] = input column first_col + t of row xrow (zero outside the
 * image), one V of the thread's channels each. */
template <typename T, typename V, int SPAN>
__device__ __forceinline__ void load_window(const dw_params &prm, const T *xrow, int first_col,
                                            V (&window)[SPAN]) {
#pragma unroll
  for (int t = 0; t < SPAN; t++) {
    const int iw = first_col + t;
    window[t] = iw >= 0 && iw < prm.w ? load_v(xrow + (size_t)iw * prm.c, V()) : zero_of(V());
  }
}

/* acc[j] += filter row fr's taps against the window, output j starting
 * at window entry j * STRIDE. */
template <typename V, int K, int STRIDE, int PX, int SPAN>
__device__ __forceinline__ void add_filter_row(const dw_params &prm, const float *sw, int fr,
                                               int local_channel, const V (&window)[SPAN],
                                               V (&acc)[PX]) {
#pragma unroll
  for (int fs = 0; fs < K; fs++) {
    const V tap = *reinterpret_cast<const V *>(sw + (fr * K + fs) * prm.filter_ld + local_channel);
#pragma unroll
    for (int j = 0; j < PX; j++) acc[j] = fma_of(window[j * STRIDE + fs], tap, acc[j]);
  }
}

/* WINDOW: compile-time square filter K x K, column stride and PX; each
 * input column of the thread's window is loaded once per filter row, and
 * the filter rows are unrolled so that the next row's loads are in flight
 * while this row's products are summed. */
template <typename T, typename V, int K, int STRIDE, int PX>
__global__ static void __launch_bounds__(kMaxThreads)
    dw_window_kernel(const dw_params prm, const void *__restrict__ xv,
                     const void *__restrict__ wv, const float *__restrict__ bias,
                     void *__restrict__ yv, int tq) {
  constexpr int VEC = sizeof(V) / sizeof(float), SPAN = (PX - 1) * STRIDE + K;
  const T *x = static_cast<const T *>(xv), *w = static_cast<const T *>(wv);
  T *y = static_cast<T *>(yv);
  extern __shared__ float sw[];
  stage_filters(prm, w, sw);
  const dw_place at = place_thread<VEC, PX>(prm, tq);
  if (at.channel >= prm.k || at.col0 >= prm.q) return;
  const int in_channel = at.channel / prm.multiplier;
  const int outputs = min(PX, prm.q - at.col0);
  const int first_col = at.col0 * STRIDE - prm.pad_w;
  const T *ximage = x + (size_t)at.image * prm.h * prm.w * prm.c + in_channel;
  for (int row = at.row0; row < min(at.row0 + prm.rows, prm.p); row++) {
    V acc[PX];
#pragma unroll
    for (int j = 0; j < PX; j++) acc[j] = zero_of(V());
#pragma unroll
    for (int fr = 0; fr < K; fr++) {
      const int ih = row * prm.stride_h - prm.pad_h + fr * prm.dil_h;
      if (ih < 0 || ih >= prm.h) continue;
      V window[SPAN];
      load_window(prm, ximage + (size_t)ih * prm.w * prm.c, first_col, window);
      add_filter_row<V, K, STRIDE>(prm, sw, fr, at.local_channel, window, acc);
    }
    store_outputs(prm, at, row, acc, outputs, bias == nullptr ? nullptr : bias + at.channel, y);
  }
}

/* PAIRS: the window form two output rows at a time, for stride 1 and no
 * dilation down the columns.  Input row i of a pair's K + 1 serves filter
 * row i of its first output row and filter row i - 1 of its second, so a
 * thread loads each input column once for both: K + 1 loads a column
 * where the window form makes 2K (8 against 14 for 7x7).  ConvNeXt's
 * 14x14 layers are latency-bound on those loads at the occupancy the
 * window form's registers leave (convnext-notes.md). */
template <typename T, typename V, int K, int PX>
__global__ static void __launch_bounds__(kMaxThreads)
    dw_pairs_kernel(const dw_params prm, const void *__restrict__ xv,
                    const void *__restrict__ wv, const float *__restrict__ bias,
                    void *__restrict__ yv, int tq) {
  constexpr int VEC = sizeof(V) / sizeof(float), SPAN = PX - 1 + K;
  const T *x = static_cast<const T *>(xv), *w = static_cast<const T *>(wv);
  T *y = static_cast<T *>(yv);
  extern __shared__ float sw[];
  stage_filters(prm, w, sw);
  const dw_place at = place_thread<VEC, PX>(prm, tq);
  if (at.channel >= prm.k || at.col0 >= prm.q) return;
  const int in_channel = at.channel / prm.multiplier;
  const int outputs = min(PX, prm.q - at.col0);
  const int first_col = at.col0 - prm.pad_w;
  const T *ximage = x + (size_t)at.image * prm.h * prm.w * prm.c + in_channel;
  const int row_end = min(at.row0 + prm.rows, prm.p);
  for (int row = at.row0; row < row_end; row += 2) {
    V first[PX], second[PX];
#pragma unroll
    for (int j = 0; j < PX; j++) first[j] = second[j] = zero_of(V());
#pragma unroll
    for (int i = 0; i <= K; i++) {
      const int ih = row - prm.pad_h + i;
      if (ih < 0 || ih >= prm.h) continue;
      V window[SPAN];
      load_window(prm, ximage + (size_t)ih * prm.w * prm.c, first_col, window);
      /* Both rows' taps a column at a time (not add_filter_row twice):
       * that order keeps the 7x7 float4 builds at 76-80 registers. */
#pragma unroll
      for (int fs = 0; fs < K; fs++) {
        if (i < K) {
          const V tap =
              *reinterpret_cast<const V *>(sw + (i * K + fs) * prm.filter_ld + at.local_channel);
#pragma unroll
          for (int j = 0; j < PX; j++) first[j] = fma_of(window[j + fs], tap, first[j]);
        }
        if (i > 0) {
          const V tap = *reinterpret_cast<const V *>(sw + ((i - 1) * K + fs) * prm.filter_ld +
                                                     at.local_channel);
#pragma unroll
          for (int j = 0; j < PX; j++) second[j] = fma_of(window[j + fs], tap, second[j]);
        }
      }
    }
    const float *b = bias == nullptr ? nullptr : bias + at.channel;
    store_outputs(prm, at, row, first, outputs, b, y);
    if (row + 1 < row_end) store_outputs(prm, at, row + 1, second, outputs, b, y);
  }
}

/* 4 channels of T copied to shared memory by cp.async (16 bytes of fp32,
 * 8 of a half type); src_bytes 0 zero-fills them. */
__device__ __forceinline__ void cp_async_channels4(float *dst, const float *src, bool inside) {
  cp_async16(dst, src, inside ? 16 : 0);
}
template <typename H>
__device__ __forceinline__ void cp_async_channels4(H *dst, const H *src, bool inside) {
  cp_async8(dst, src, inside ? 8 : 0);
}

/* 4 channels of T read from shared memory as fp32. */
__device__ __forceinline__ float4 shared_channels4(const float *p) {
  return *reinterpret_cast<const float4 *>(p);
}
template <typename H>
__device__ __forceinline__ float4 shared_channels4(const H *p) {
  float v[4];
  conv_unpack_elements<4, H>(*reinterpret_cast<const conv_bits_of<4, H> *>(p), v);
  return make_float4(v[0], v[1], v[2], v[3]);
}

/* Starts copying input row `ih` of the block's column tile and channels
 * into ring slot `slot` ([in_cols][block_channels] elements of T); rows and
 * columns outside the image, and channels past the last, are zero-filled. */
template <typename T>
__device__ __forceinline__ void rolling_load_row(const dw_params &prm, const T *ximage,
                                                 const T *x, int ih, int first_col,
                                                 int first_channel, int in_cols, T *slot) {
  const int groups = (int)blockDim.x; /* float4 channel groups a block */
  const int tid = (int)(threadIdx.y * blockDim.x + threadIdx.x), threads = blockDim.x * blockDim.y;
  const bool row_inside = ih >= 0 && ih < prm.h;
  for (int i = tid; i < in_cols * groups; i += threads) {
    const int col = i / groups, g = i - col * groups;
    const int iw = first_col + col, ch = first_channel + g * 4;
    const bool inside = row_inside && iw >= 0 && iw < prm.w && ch < prm.k;
    const T *src = inside ? ximage + ((size_t)ih * prm.w + iw) * prm.c + ch : x;
    cp_async_channels4(slot + col * prm.block_channels + g * 4, src, inside);
  }
}

/* ROLLING: stride 1, no dilation, square K x K, float4 channels.  A block
 * walks down its band of output rows keeping the K input rows the current
 * output row needs in a ring of K + 1 shared-memory rows, the extra one
 * filling (cp.async) with the next row while this one is computed.  Each
 * input element then comes from L2 once per block, where the other forms
 * load it once per filter row and output row it serves and rely on L1,
 * which the windows of a large image's resident blocks overflow. */
template <typename T, int K, int PX>
__global__ static void __launch_bounds__(kMaxThreads)
    dw_rolling_kernel(const dw_params prm, const void *__restrict__ xv,
                      const void *__restrict__ wv, const float *__restrict__ bias,
                      void *__restrict__ yv, int tq) {
  constexpr int SPAN = PX + K - 1, SLOTS = K + 1;
  const T *x = static_cast<const T *>(xv), *w = static_cast<const T *>(wv);
  T *y = static_cast<T *>(yv);
  extern __shared__ __align__(16) float smem[];
  float *sw = smem;
  /* filter_ld is a multiple of 4: the ring starts 16-byte aligned. */
  T *ring = reinterpret_cast<T *>(smem + K * K * prm.filter_ld);
  const int in_cols = tq * PX + K - 1, slot_elems = in_cols * prm.block_channels;
  const dw_place at = place_thread<4, PX>(prm, tq);
  const int first_col = at.col0 - (int)threadIdx.y * PX - prm.pad_w;
  const int first_channel = (int)blockIdx.y * prm.block_channels;
  const T *ximage = x + (size_t)at.image * prm.h * prm.w * prm.c;
  const int row_end = min(at.row0 + prm.rows, prm.p), ih0 = at.row0 - prm.pad_h;
  for (int t = 0; t < K; t++)
    rolling_load_row(prm, ximage, x, ih0 + t, first_col, first_channel, in_cols,
                     ring + t * slot_elems);
  cp_async_commit();
  /* Waited for with the first row's inputs, in the loop (half filters are
   * converted by plain stores, which the loop's first barrier publishes). */
  stage_filters_async_or_now(prm, w, sw);
  /* No early return: every thread takes part in the loads and barriers. */
  const bool active = at.channel < prm.k && at.col0 < prm.q;
  const int outputs = min(PX, prm.q - at.col0);
  for (int row = at.row0; row < row_end; row++) {
    const int step = row - at.row0, base = step % SLOTS;
    if (row + 1 < row_end)
      rolling_load_row(prm, ximage, x, ih0 + step + K, first_col, first_channel, in_cols,
                       ring + ((step + K) % SLOTS) * slot_elems);
    cp_async_commit();
    cp_async_wait<1>(); /* this row's inputs have landed; the next's may not */
    __syncthreads();
    if (active) {
      float4 acc[PX];
#pragma unroll
      for (int j = 0; j < PX; j++) acc[j] = zero_of(float4());
#pragma unroll
      for (int fr = 0; fr < K; fr++) {
        const int slot = base + fr < SLOTS ? base + fr : base + fr - SLOTS;
        const T *srow = ring + slot * slot_elems +
                        (int)threadIdx.y * PX * prm.block_channels + at.local_channel;
        float4 window[SPAN];
#pragma unroll
        for (int t = 0; t < SPAN; t++) window[t] = shared_channels4(srow + t * prm.block_channels);
#pragma unroll
        for (int fs = 0; fs < K; fs++) {
          const float4 tap = *reinterpret_cast<const float4 *>(
              sw + (fr * K + fs) * prm.filter_ld + at.local_channel);
#pragma unroll
          for (int j = 0; j < PX; j++) acc[j] = fma_of(window[j + fs], tap, acc[j]);
        }
      }
      store_outputs(prm, at, row, acc, outputs, bias == nullptr ? nullptr : bias + at.channel, y);
    }
    __syncthreads(); /* before the next step's load reuses this step's first slot */
  }
}

/* GENERIC: any filter, stride and dilation. */
template <typename T, typename V, int PX>
__global__ static void __launch_bounds__(kMaxThreads)
    dw_generic_kernel(const dw_params prm, const void *__restrict__ xv,
                      const void *__restrict__ wv, const float *__restrict__ bias,
                      void *__restrict__ yv, int tq) {
  constexpr int VEC = sizeof(V) / sizeof(float);
  const T *x = static_cast<const T *>(xv), *w = static_cast<const T *>(wv);
  T *y = static_cast<T *>(yv);
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
      const T *xrow = x + (size_t)(at.image * prm.h + ih) * prm.w * prm.c + in_channel;
      for (int fs = 0; fs < prm.s; fs++) {
        const V tap = *reinterpret_cast<const V *>(sw + (fr * prm.s + fs) * prm.filter_ld +
                                                   at.local_channel);
#pragma unroll
        for (int j = 0; j < PX; j++) {
          const int iw = (at.col0 + j) * prm.stride_w - prm.pad_w + fs * prm.dil_w;
          if (iw >= 0 && iw < prm.w)
            acc[j] = fma_of(load_v(xrow + (size_t)iw * prm.c, V()), tap, acc[j]);
        }
      }
    }
    store_outputs(prm, at, row, acc, outputs, bias == nullptr ? nullptr : bias + at.channel, y);
  }
}

struct dw_instance {
  int form, s, stride, px, vec; /* window and rolling: s x s; generic: s = 0 */
  conv_dtype dtype;
  dw_kernel_fn kernel;
};

/* Each element type's thread-loads and row-pairs kernels; the rolling
 * kernels are fp32's alone. */
#define W CONV_DWNHWC_THREAD_LOADS
#define DW_WINDOWS(T, D, S, ST)                                                          \
  {W, S, ST, 1, 4, D, dw_window_kernel<T, float4, S, ST, 1>},                           \
      {W, S, ST, 2, 4, D, dw_window_kernel<T, float4, S, ST, 2>},                       \
      {W, S, ST, 4, 4, D, dw_window_kernel<T, float4, S, ST, 4>},                       \
      {W, S, ST, 8, 4, D, dw_window_kernel<T, float4, S, ST, 8>},                       \
      {W, S, ST, 1, 1, D, dw_window_kernel<T, float, S, ST, 1>},                        \
      {W, S, ST, 2, 1, D, dw_window_kernel<T, float, S, ST, 2>},                        \
      {W, S, ST, 4, 1, D, dw_window_kernel<T, float, S, ST, 4>},                        \
      {W, S, ST, 8, 1, D, dw_window_kernel<T, float, S, ST, 8>}
#define P CONV_DWNHWC_ROW_PAIRS
#define DW_PAIRS(T, D, S)                                                                \
  {P, S, 1, 1, 4, D, dw_pairs_kernel<T, float4, S, 1>},                                 \
      {P, S, 1, 2, 4, D, dw_pairs_kernel<T, float4, S, 2>},                             \
      {P, S, 1, 4, 4, D, dw_pairs_kernel<T, float4, S, 4>},                             \
      {P, S, 1, 1, 1, D, dw_pairs_kernel<T, float, S, 1>},                              \
      {P, S, 1, 2, 1, D, dw_pairs_kernel<T, float, S, 2>},                              \
      {P, S, 1, 4, 1, D, dw_pairs_kernel<T, float, S, 4>}
#define DW_GENERIC(T, D)                                                                 \
  {W, 0, 0, 1, 4, D, dw_generic_kernel<T, float4, 1>},                                  \
      {W, 0, 0, 2, 4, D, dw_generic_kernel<T, float4, 2>},                              \
      {W, 0, 0, 4, 4, D, dw_generic_kernel<T, float4, 4>},                              \
      {W, 0, 0, 8, 4, D, dw_generic_kernel<T, float4, 8>},                              \
      {W, 0, 0, 1, 1, D, dw_generic_kernel<T, float, 1>},                               \
      {W, 0, 0, 2, 1, D, dw_generic_kernel<T, float, 2>},                               \
      {W, 0, 0, 4, 1, D, dw_generic_kernel<T, float, 4>},                               \
      {W, 0, 0, 8, 1, D, dw_generic_kernel<T, float, 8>}
#define R CONV_DWNHWC_ROLLING
#define DW_ROLLING(T, D, S)                                                              \
  {R, S, 1, 2, 4, D, dw_rolling_kernel<T, S, 2>},                                       \
      {R, S, 1, 4, 4, D, dw_rolling_kernel<T, S, 4>},                                   \
      {R, S, 1, 8, 4, D, dw_rolling_kernel<T, S, 8>}
#define DW_TYPE(T, D)                                                                    \
  DW_WINDOWS(T, D, 3, 1), DW_WINDOWS(T, D, 3, 2), DW_WINDOWS(T, D, 5, 1),               \
      DW_WINDOWS(T, D, 5, 2), DW_WINDOWS(T, D, 7, 1), DW_WINDOWS(T, D, 7, 2),           \
      DW_ROLLING(T, D, 3), DW_ROLLING(T, D, 5), DW_ROLLING(T, D, 7),                    \
      DW_PAIRS(T, D, 3), DW_PAIRS(T, D, 5), DW_PAIRS(T, D, 7), DW_GENERIC(T, D)

const dw_instance kInstances[] = {
    DW_TYPE(float, CONV_DTYPE_F32),
    DW_TYPE(__half, CONV_DTYPE_F16),
    DW_TYPE(__nv_bfloat16, CONV_DTYPE_BF16),
};
#undef DW_WINDOWS
#undef DW_ROLLING
#undef DW_PAIRS
#undef DW_GENERIC
#undef DW_TYPE
#undef W
#undef P
#undef R

/* The tile form's kernels are depthwise_nhwc_tile.cu's (tile_kernel). */
dw_kernel_fn find_kernel(int form, int s, int stride, int px, int vec, conv_dtype dtype,
                         int out_rows) {
  if (form == CONV_DWNHWC_TILE) return stride == 1 ? tile_kernel(s, out_rows, px, dtype) : nullptr;
  for (const dw_instance &in : kInstances)
    if (in.form == form && in.s == s && in.stride == stride && in.px == px && in.vec == vec &&
        in.dtype == dtype)
      return in.kernel;
  return nullptr;
}

/* The tile form's block of `positions` threads (per channel pair) as
 * thread_rows x thread_cols: the divisor pair whose tile reads the fewest
 * input pixels per output it keeps (its halo of K - 1 rows and columns
 * over the outputs inside the image), leaving out shapes with a whole
 * thread row or column past the image.  False if none fits. */
bool tile_threads(int positions, int out_rows, int out_cols, int64_t p, int64_t q, int64_t k,
                  int *thread_rows, int *thread_cols) {
  double best = 0;
  for (int cols = 1; cols <= positions; cols++) {
    if (positions % cols != 0) continue;
    const int rows = positions / cols;
    if ((int64_t)(cols - 1) * out_cols >= q || (int64_t)(rows - 1) * out_rows >= p) continue;
    const int64_t tile_h = (int64_t)rows * out_rows, tile_w = (int64_t)cols * out_cols;
    const double read = (double)(tile_h + k - 1) * (double)(tile_w + k - 1);
    const double kept = (double)(tile_h < p ? tile_h : p) * (double)(tile_w < q ? tile_w : q);
    if (best == 0 || read / kept <= best) {
      best = read / kept;
      *thread_rows = rows;
      *thread_cols = cols;
    }
  }
  return best > 0;
}

}  // namespace

extern "C" bool conv_dwnhwc_plan(const conv_problem *pb, const conv_dwnhwc_tiling *t,
                                 conv_dwnhwc_launch *L, char *why, size_t why_size) {
  if (pb->layout != CONV_LAYOUT_NHWC || pb->groups != pb->c)
    CONV_REJECT("not an NHWC depthwise problem");
  if (pb->dtype != CONV_DTYPE_F32 && pb->dtype != CONV_DTYPE_F16 && pb->dtype != CONV_DTYPE_BF16)
    CONV_REJECT("dtype %d: not f32, f16 or bf16", (int)pb->dtype);
  if (t->form != CONV_DWNHWC_THREAD_LOADS && t->form != CONV_DWNHWC_ROLLING &&
      t->form != CONV_DWNHWC_ROW_PAIRS && t->form != CONV_DWNHWC_TILE)
    CONV_REJECT("form %d: not %d, %d, %d or %d", t->form, CONV_DWNHWC_THREAD_LOADS,
                CONV_DWNHWC_ROLLING, CONV_DWNHWC_ROW_PAIRS, CONV_DWNHWC_TILE);
  const bool tile = t->form == CONV_DWNHWC_TILE;
  if (!tile && t->vec != 1 && t->vec != 4) CONV_REJECT("vec %d: not 1 or 4", t->vec);
  if (!tile && t->px != 1 && t->px != 2 && t->px != 4 && t->px != 8)
    CONV_REJECT("px %d: not 1, 2, 4 or 8", t->px);
  if (t->rows < 1 || t->rows > kMaxRows) CONV_REJECT("rows %d: not in [1, %d]", t->rows, kMaxRows);
  if (t->tc < 1 || t->tq < 1 || t->tc * t->tq > kMaxThreads)
    CONV_REJECT("%d x %d threads: not in [1, %d]", t->tc, t->tq, kMaxThreads);
  const int64_t multiplier = pb->k / pb->c;
  if (t->vec == 4 && (multiplier != 1 || pb->c % 4 != 0))
    CONV_REJECT("vec 4 needs a multiple of 4 channels and no channel multiplier");
  const int64_t p = conv_output_size(pb->h, pb->r, pb->stride_h, pb->pad_h, pb->dil_h);
  const int64_t q = conv_output_size(pb->w, pb->s, pb->stride_w, pb->pad_w, pb->dil_w);
  /* The tile form copies channels 16 bytes at a time: the image's and the
   * block's channels in whole runs of 16 bytes. */
  const int64_t chunk = 16 / (int64_t)conv_dtype_bytes(pb->dtype);
  const int64_t dims[] = {pb->n * pb->h * pb->w * pb->c, pb->n * p * q * pb->k, pb->r * pb->s,
                          pb->pad_h, pb->pad_w, pb->stride_h * p, pb->stride_w * q,
                          pb->dil_h * pb->r, pb->dil_w * pb->s};
  for (int64_t d : dims)
    if (!conv_fits_int(d)) CONV_REJECT("a size past 32-bit indexing");

  const bool square = (pb->s == 3 || pb->s == 5 || pb->s == 7) && pb->r == pb->s;
  const bool window = square && pb->dil_w == 1 && (pb->stride_w == 1 || pb->stride_w == 2);
  const bool rolling = t->form == CONV_DWNHWC_ROLLING;
  if (rolling && !(square && pb->stride_h == 1 && pb->stride_w == 1 && pb->dil_h == 1 &&
                   pb->dil_w == 1 && t->vec == 4))
    CONV_REJECT("the rolling form takes square 3, 5 or 7 filters, stride 1, no dilation, vec 4");
  const bool pairs = t->form == CONV_DWNHWC_ROW_PAIRS;
  if (pairs && !(square && pb->stride_h == 1 && pb->stride_w == 1 && pb->dil_h == 1 &&
                 pb->dil_w == 1 && t->px <= 4 && t->rows >= 2))
    CONV_REJECT("the row-pairs form takes square 3, 5 or 7 filters, stride 1, no dilation, "
                "px up to 4 and bands of 2 rows or more");
  if (tile && !(square && pb->stride_h == 1 && pb->stride_w == 1 && pb->dil_h == 1 &&
                pb->dil_w == 1 && multiplier == 1 && t->vec == 2 && (t->px == 4 || t->px == 7) &&
                t->rows <= 2 && pb->c % chunk == 0 && (2 * t->tc) % chunk == 0))
    CONV_REJECT("the tile form takes square 3, 5 or 7 filters, stride 1, no dilation, no "
                "multiplier, channels in 16-byte runs (block's too), vec 2, px 4 or 7 and 1 or "
                "2 rows a thread");
  conv_dwnhwc_launch l = {};
  if (tile && !tile_threads(t->tq, t->rows, t->px, p, q, pb->r, &l.thread_rows, &l.thread_cols))
    CONV_REJECT("%d thread positions: a whole row or column of them past a %lldx%lld output",
                t->tq, (long long)p, (long long)q);
  l.tiling = *t;
  l.kernel = (const void *)find_kernel(t->form, window ? (int)pb->s : 0,
                                       window ? (int)pb->stride_w : 0, t->px, t->vec, pb->dtype,
                                       tile ? t->rows : 0);
  if (l.kernel == NULL) CONV_REJECT("no kernel compiled for this filter and tiling");
  conv_launch_set_geometry(l, pb, p, q);
  l.multiplier = (int)multiplier;
  l.epilogue = (int)pb->epilogue;
  l.block_channels = t->tc * t->vec;
  const int64_t tile_cols = tile ? (int64_t)l.thread_cols * t->px : (int64_t)t->tq * t->px;
  l.q_tiles = (int)((q + tile_cols - 1) / tile_cols);
  l.rows = tile ? l.thread_rows * t->rows : t->rows;
  const int64_t p_tiles = (p + l.rows - 1) / l.rows;
  const int64_t blocks_x = pb->n * p_tiles * l.q_tiles;
  const int64_t blocks_y = (pb->k + l.block_channels - 1) / l.block_channels;
  if (!conv_fits_int(blocks_x) || blocks_y > 65535) CONV_REJECT("grid too large");
  l.by_q_tiles = conv_divisor_make(l.q_tiles);
  l.by_p = conv_divisor_make((int)p_tiles);
  l.grid[0] = (unsigned)blocks_x;
  l.grid[1] = (unsigned)blocks_y;
  l.filter_ld = l.block_channels + 4; /* keeps float4 rows aligned */
  l.smem_bytes = (size_t)l.filter_ld * (size_t)(pb->r * pb->s) * sizeof(float);
  if (rolling) /* and the ring of r + 1 input rows of the block's column tile, in the type */
    l.smem_bytes += (size_t)(pb->r + 1) * (size_t)(t->tq * t->px + pb->s - 1) *
                    (size_t)l.block_channels * conv_dtype_bytes(pb->dtype);
  if (tile) /* and the input tile its outputs read, in the type */
    l.smem_bytes += (size_t)(l.rows + pb->r - 1) * (size_t)(tile_cols + pb->s - 1) *
                    (size_t)l.block_channels * conv_dtype_bytes(pb->dtype);
  const size_t smem_max = rolling || tile ? CONV_DWNHWC_SMEM_MAX : (48u << 10);
  if (l.smem_bytes > smem_max)
    CONV_REJECT("%zu bytes of shared memory: past %zu", l.smem_bytes, smem_max);
  *L = l;
  return true;
}

extern "C" cudaError_t conv_dwnhwc_configure(const conv_dwnhwc_launch *L) {
  if (L == NULL || L->kernel == NULL) return cudaErrorInvalidValue;
  if (L->tiling.form != CONV_DWNHWC_ROLLING && L->tiling.form != CONV_DWNHWC_TILE)
    return cudaSuccess; /* within 48 KiB */
  /* Always the same value, never this plan's own need: the attribute
   * belongs to the kernel, which other plans share. */
  return cudaFuncSetAttribute(L->kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                              (int)CONV_DWNHWC_SMEM_MAX);
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
  prm.filter_ld = L->filter_ld;
  prm.rows = L->rows;
  prm.epilogue = L->epilogue;
  prm.by_q_tiles = L->by_q_tiles, prm.by_p_tiles = L->by_p;
  const dim3 grid(L->grid[0], L->grid[1]), block((unsigned)L->tiling.tc, (unsigned)L->tiling.tq);
  const int columns = L->tiling.form == CONV_DWNHWC_TILE ? L->thread_cols : L->tiling.tq;
  ((dw_kernel_fn)L->kernel)<<<grid, block, L->smem_bytes, stream>>>(prm, x, w, bias, y, columns);
  return cudaGetLastError();
}
