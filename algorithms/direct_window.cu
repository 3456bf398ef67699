/*
 * direct_window.cu -- the WINDOW layout of direct_channel: see
 * direct_channel.h for what it is, direct_window.h for its entry points.
 *
 * Thread (tcol, trow) of an image plane owns PY x PX outputs of KB output
 * channels.  With stride 1 its outputs are spaced by the dilation d:
 * columns q0 + j*d, where q0 = (tcol / d) * PX*d + tcol % d, so d
 * neighbouring threads interleave and a warp still reads neighbouring
 * columns.  Output column q0 + j*d with tap s reads input column
 * q0 - pad + (j + s)*d: entry j + s of a window of PX + S - 1 inputs spaced
 * by d.  With stride 2 (undilated) the outputs are contiguous and the
 * window entry is 2j + s.  Rows likewise.  Every window index is a
 * compile-time constant, so the window lives in registers whatever the
 * dilation, and each input value is loaded once per thread.
 *
 * Element types: x, w and y are T (float, __half, __nv_bfloat16), read
 * as fp32; sums and the epilogue are fp32 and each output is rounded to T
 * once.  The vector loads and stores are fp32's; half kernels load and
 * store element by element.
 */
#include "algorithms/direct_window.h"
#include "algorithms/common/elements.cuh"
#include "algorithms/common/epilogue.cuh"
#include "algorithms/common/pdl.cuh"

#include <stdio.h>

#include <type_traits>

namespace {

const int kMaxThreads = 256;

/* Blocks of kMaxThreads that must fit on one SM together, which caps the
 * registers per thread at 65536 / (256 * blocks).  The compiler hoists a
 * channel's window loads ahead of their FMAs; the cap must leave room for
 * the window, or it spills.  Fewer blocks are fine: each thread keeps
 * dozens of loads in flight. */
__host__ __device__ constexpr int min_blocks(int live) {
  return live <= 64 ? 4 : live <= 80 ? 3 : live <= 128 ? 2 : 1;
}

/* Filters with up to 49 weights per channel (7x7 with one output channel,
 * 3x3 with four) are read into registers once per channel; larger ones tap
 * by tap from shared memory. */
template <int R, int S, int KB>
__host__ __device__ constexpr int tap_registers() {
  return R * S * KB <= 49 ? R * S * KB : 0;
}

/* A thread's input window: NWX columns by NWY rows. */
template <int S, int STRIDE, int PX>
__host__ __device__ constexpr int window_columns() {
  return (PX - 1) * STRIDE + S;
}
template <int R, int STRIDE, int PY>
__host__ __device__ constexpr int window_rows() {
  return (PY - 1) * STRIDE + R;
}

/* Accumulators, taps, the whole window, and about 24 for addresses and
 * indices. */
template <int R, int S, int STRIDE, int PX, int PY, int KB>
__host__ __device__ constexpr int live_registers() {
  return PX * PY * KB + tap_registers<R, S, KB>() +
         window_columns<S, STRIDE, PX>() * window_rows<R, STRIDE, PY>() + 24;
}

/* First output of thread t: groups of `spacing` threads own PER_THREAD
 * outputs each, interleaved. */
template <int PER_THREAD, bool UNIT_SPACING>
__device__ __forceinline__ int first_output(int t, const conv_divisor &spacing) {
  if (UNIT_SPACING) return t * PER_THREAD;
  const int group = (int)conv_divide((uint32_t)t, spacing);
  return group * PER_THREAD * (int)spacing.divisor + (t - group * (int)spacing.divisor);
}

/* Copies the block's filters w[k0 .. k0+KB)[cg][R][S] into shared memory as
 * [cg][R][S][KB], so that the KB weights of one tap are adjacent (one
 * broadcast vector read). */
template <int TAPS, int KB, typename T>
__device__ __forceinline__ void stage_filters(const conv_direct_launch &L, const T *w, int k0,
                                              float *dst) {
  const int total = L.cg * TAPS * KB;
  const int threads = blockDim.x * blockDim.y;
  for (int i = threadIdx.y * blockDim.x + threadIdx.x; i < total; i += threads) {
    const int kk = i % KB, ctap = i / KB;
    const int c = ctap / TAPS, tap = ctap - c * TAPS;
    dst[i] = conv_element_to_float(__ldg(w + conv_direct_weight_offset(L, k0 + kk, c, tap)));
  }
}

/* The KB weights of one tap, read from shared memory. */
template <int KB>
__device__ __forceinline__ void load_tap(const float *src, float (&wv)[KB]) {
  if constexpr (KB % 4 == 0) {
#pragma unroll
    for (int kk = 0; kk < KB; kk += 4) {
      const float4 v = *reinterpret_cast<const float4 *>(src + kk);
      wv[kk] = v.x, wv[kk + 1] = v.y, wv[kk + 2] = v.z, wv[kk + 3] = v.w;
    }
  } else {
#pragma unroll
    for (int kk = 0; kk < KB; kk++) wv[kk] = src[kk];
  }
}

/* One output row's PX values at `out` (the row's first output): a vector
 * where the columns are contiguous and aligned, else one store each. */
template <int PX, bool VECTOR, typename T>
__device__ __forceinline__ void store_row(T *out, int col_spacing, const float (&v)[PX]) {
  if constexpr (!std::is_same<T, float>::value) {
#pragma unroll
    for (int j = 0; j < PX; j++) out[j * col_spacing] = conv_element_from_float<T>(v[j]);
  } else if constexpr (VECTOR && PX == 4) {
    *reinterpret_cast<float4 *>(out) = make_float4(v[0], v[1], v[2], v[3]);
  } else if constexpr (VECTOR && PX == 2) {
    *reinterpret_cast<float2 *>(out) = make_float2(v[0], v[1]);
  } else {
#pragma unroll
    for (int j = 0; j < PX; j++) out[j * col_spacing] = v[j];
  }
}

/* The output value: the accumulator as it is, or with the problem's
 * epilogue (bias, bias + ReLU). */
template <bool EPILOGUE>
__device__ __forceinline__ float output_value(const conv_direct_launch &L, float acc, float bias) {
  return EPILOGUE ? conv_epilogue_apply(L.epilogue, acc, bias) : acc;
}

/* Epilogue and stores of a thread's outputs, all inside the output tensor:
 * straight-line code, no checks.  `out` is output (n, k0, p0, q0). */
template <int PX, int PY, int KB, bool EPILOGUE, bool VECTOR, typename T>
__device__ __forceinline__ void store_inside(const conv_direct_launch &L, T *out,
                                             int64_t row_step, int col_spacing,
                                             const float (&bk)[KB],
                                             const float (&acc)[PY][PX][KB]) {
  const int64_t out_plane = (int64_t)L.p * L.q;
#pragma unroll
  for (int kk = 0; kk < KB; kk++)
#pragma unroll
    for (int i = 0; i < PY; i++) {
      float v[PX];
#pragma unroll
      for (int j = 0; j < PX; j++) v[j] = output_value<EPILOGUE>(L, acc[i][j][kk], bk[kk]);
      store_row<PX, VECTOR>(out + kk * out_plane + i * row_step, col_spacing, v);
    }
}

/* The same for threads at the bottom or right edge: each output checked. */
template <int PX, int PY, int KB, bool EPILOGUE, typename T>
__device__ __forceinline__ void store_edge(const conv_direct_launch &L, T *out, int p0, int q0,
                                           int row_spacing, int col_spacing,
                                           const float (&bk)[KB],
                                           const float (&acc)[PY][PX][KB]) {
  const int64_t out_plane = (int64_t)L.p * L.q;
#pragma unroll
  for (int kk = 0; kk < KB; kk++)
#pragma unroll
    for (int i = 0; i < PY; i++)
#pragma unroll
      for (int j = 0; j < PX; j++)
        if (p0 + i * row_spacing < L.p && q0 + j * col_spacing < L.q)
          out[kk * out_plane + (int64_t)i * row_spacing * L.q + j * col_spacing] =
              conv_element_from_float<T>(output_value<EPILOGUE>(L, acc[i][j][kk], bk[kk]));
}

/* Where a thread's window lies in an input plane: window row my is image
 * row iy0 + my*row_dil, and which of its columns are inside the image. */
template <int NWX>
struct window_place {
  int iy0, row_dil, h;
  int64_t row_step; /* elements between window rows    */
  int col_step;     /* elements between window columns */
  bool col_inside[NWX];
};

/* Loads window row my of one input channel (`window`: the channel's row
 * 0, column 0), zeros outside the image.  LEAD < 0: one load per column.
 * LEAD >= 0 (undilated, width a multiple of 4, 16-byte aligned tensor):
 * window column LEAD starts an aligned float4, so the row is LEAD single
 * loads, whole float4s, and single loads for the rest.  An aligned float4
 * lies wholly inside or wholly outside the row, so its first column's
 * check covers it. */
template <int NWX, int LEAD, typename T>
__device__ __forceinline__ void load_row(const window_place<NWX> &at, const T *window, int my,
                                         float (&win)[NWX]) {
  static_assert(LEAD < 0 || std::is_same<T, float>::value, "float4 loads are fp32's");
  const bool row_inside = (unsigned)(at.iy0 + my * at.row_dil) < (unsigned)at.h;
  const T *row = window + my * at.row_step;
  constexpr int VECTORS = LEAD < 0 ? 0 : (NWX - LEAD) / 4;
  constexpr int FIRST = LEAD < 0 ? 0 : LEAD, AFTER = FIRST + 4 * VECTORS;
  if constexpr (VECTORS > 0) {
#pragma unroll
    for (int v = 0; v < VECTORS; v++) {
      const int m = FIRST + 4 * v;
      float4 f = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
      if (row_inside && at.col_inside[m]) f = __ldg(reinterpret_cast<const float4 *>(row + m));
      win[m] = f.x, win[m + 1] = f.y, win[m + 2] = f.z, win[m + 3] = f.w;
    }
  }
#pragma unroll
  for (int m = 0; m < NWX; m++)
    if (m < FIRST || m >= AFTER)
      win[m] = row_inside && at.col_inside[m] ? conv_element_to_float(__ldg(row + m * at.col_step))
                                              : 0.0f;
}

/* Adds the products of window row my: with filter row r it feeds output
 * row i = (my - r) / STRIDE, and window column j*STRIDE + s meets tap s in
 * output column j.  `filt`: the channel's taps, [R][S][KB]; `taps`: the
 * same in registers when tap_registers() says so. */
template <int R, int S, int STRIDE, int PX, int PY, int KB, int NWX, int NT>
__device__ __forceinline__ void accumulate_row(int my, const float (&win)[NWX], const float *filt,
                                               const float (&taps)[NT],
                                               float (&acc)[PY][PX][KB]) {
#pragma unroll
  for (int i = 0; i < PY; i++) {
    const int r = my - i * STRIDE;
    if (r < 0 || r >= R) continue;
#pragma unroll
    for (int s = 0; s < S; s++) {
      float wv[KB];
      if constexpr (tap_registers<R, S, KB>() > 0) {
#pragma unroll
        for (int kk = 0; kk < KB; kk++) wv[kk] = taps[(r * S + s) * KB + kk];
      } else {
        load_tap<KB>(filt + (r * S + s) * KB, wv);
      }
#pragma unroll
      for (int j = 0; j < PX; j++)
#pragma unroll
        for (int kk = 0; kk < KB; kk++)
          acc[i][j][kk] = fmaf(wv[kk], win[j * STRIDE + s], acc[i][j][kk]);
    }
  }
}

/* Stores a thread's outputs: straight-line code for threads whose outputs
 * all lie inside the output tensor (nearly all), checks for the others. */
template <int PX, int PY, int KB, bool EPILOGUE, typename T>
__device__ __forceinline__ void store_outputs(const conv_direct_launch &L, T *out, int p0,
                                              int q0, int row_spacing, int col_spacing,
                                              const float (&bk)[KB],
                                              const float (&acc)[PY][PX][KB]) {
  const bool inside = p0 + (PY - 1) * row_spacing < L.p && q0 + (PX - 1) * col_spacing < L.q;
  const int64_t row_step = (int64_t)row_spacing * L.q;
  if (inside && L.vector_stores)
    store_inside<PX, PY, KB, EPILOGUE, true>(L, out, row_step, col_spacing, bk, acc);
  else if (inside)
    store_inside<PX, PY, KB, EPILOGUE, false>(L, out, row_step, col_spacing, bk, acc);
  else
    store_edge<PX, PY, KB, EPILOGUE>(L, out, p0, q0, row_spacing, col_spacing, bk, acc);
}

/* UNIT_DIL: dilation 1 (always so with stride 2), so window offsets are
 * compile-time and every load addresses its row pointer plus a constant.
 * LEAD: see load_row; >= 0 only with UNIT_DIL. */
template <typename T, int R, int S, int STRIDE, int PX, int PY, int KB, bool UNIT_DIL, int LEAD>
__global__ void __launch_bounds__(kMaxThreads,
                                  min_blocks(live_registers<R, S, STRIDE, PX, PY, KB>()))
    window_kernel(const conv_direct_launch L, const void *__restrict__ xv,
                  const void *__restrict__ wv, const float *__restrict__ bias,
                  void *__restrict__ yv) {
  constexpr int NWX = window_columns<S, STRIDE, PX>(), NWY = window_rows<R, STRIDE, PY>();
  constexpr int TAPS = R * S;
  const T *x = static_cast<const T *>(xv), *w = static_cast<const T *>(wv);
  T *y = static_cast<T *>(yv);

  conv_pdl_enter();
  extern __shared__ float4 smem4[]; /* float4: the vector tap reads need 16-byte alignment */
  float *filt = reinterpret_cast<float *>(smem4);

  /* The plane: output-channel chunk fastest, so that blocks reading the
   * same input run together and share it through L2. */
  const uint32_t chunk_group = conv_divide(blockIdx.x, L.by_kchunks);
  const int kc = (int)(blockIdx.x - chunk_group * (uint32_t)L.kchunks);
  const int n = (int)conv_divide(chunk_group, L.by_groups);
  const int g = (int)chunk_group - n * L.groups;
  const int k0 = g * L.kg + kc * KB;
  stage_filters<TAPS, KB>(L, w, k0, filt);
  __syncthreads();

  const int q0 = first_output<PX, UNIT_DIL || STRIDE != 1>(
      blockIdx.z * blockDim.x + threadIdx.x, L.by_col_spacing);
  const int p0 = first_output<PY, UNIT_DIL || STRIDE != 1>(
      blockIdx.y * blockDim.y + threadIdx.y, L.by_row_spacing);
  if (q0 >= L.q || p0 >= L.p) return; /* no barrier follows */

  /* Window entry (my, m) is input row iy0 + my*dil_h, column ix0 + m*dil_w
   * (dilations are 1 with stride 2). */
  window_place<NWX> at;
  const int dx = UNIT_DIL ? 1 : L.dil_w, dy = UNIT_DIL ? 1 : L.dil_h;
  const int ix0 = q0 * STRIDE - L.pad_w, iy0 = p0 * STRIDE - L.pad_h;
  at.iy0 = iy0, at.row_dil = dy, at.h = L.h;
  at.row_step = (int64_t)dy * L.w;
  at.col_step = dx;
#pragma unroll
  for (int m = 0; m < NWX; m++) at.col_inside[m] = (unsigned)(ix0 + m * dx) < (unsigned)L.w;

  float acc[PY][PX][KB] = {};

  const int64_t plane_elems = (int64_t)L.h * L.w;
  /* The window of (n, g, first channel): may start outside the tensor;
   * only in-image entries are ever read. */
  const T *window = x + ((int64_t)n * L.c + (int64_t)g * L.cg) * plane_elems +
                    (int64_t)iy0 * L.w + ix0;
#pragma unroll 1 /* the body is unrolled already; more would only spill */
  for (int c = 0; c < L.cg; c++, window += plane_elems) {
    const float *fc = filt + c * TAPS * KB;
    constexpr int NT = tap_registers<R, S, KB>() > 0 ? TAPS * KB : 1;
    float taps[NT];
    if constexpr (NT > 1) {
#pragma unroll
      for (int t = 0; t < NT; t++) taps[t] = fc[t];
    }
    /* Row by row, so that a row's FMAs start while later rows still load. */
#pragma unroll
    for (int my = 0; my < NWY; my++) {
      float win[NWX];
      load_row<NWX, LEAD>(at, window, my, win);
      accumulate_row<R, S, STRIDE, PX, PY, KB>(my, win, fc, taps, acc);
    }
  }

  const int row_spacing = UNIT_DIL || STRIDE != 1 ? 1 : L.row_spacing;
  const int col_spacing = UNIT_DIL || STRIDE != 1 ? 1 : L.col_spacing;
  float bk[KB];
#pragma unroll
  for (int kk = 0; kk < KB; kk++)
    bk[kk] = L.epilogue == CONV_EPILOGUE_NONE ? 0.0f : __ldg(bias + k0 + kk);
  T *out = y + (((int64_t)n * L.k + k0) * L.p + p0) * L.q + q0;
  if (L.epilogue == CONV_EPILOGUE_NONE)
    store_outputs<PX, PY, KB, false>(L, out, p0, q0, row_spacing, col_spacing, bk, acc);
  else
    store_outputs<PX, PY, KB, true>(L, out, p0, q0, row_spacing, col_spacing, bk, acc);
}

struct instance {
  int size, stride, px, py, kb;
  bool unit_dil;
  int lead; /* load_row's LEAD: < 0 for single loads */
  conv_dtype dtype;
  const void *fn;
};

/* Stride 1 has a kernel for dilation 1 and one for any dilation; stride 2
 * is undilated only. */
template <typename T, int K, int ST, int PX, int PY, int KB, bool UNIT_DIL, int LEAD>
const void *kernel_address() {
  if constexpr (ST != 1 && !UNIT_DIL)
    return nullptr;
  else
    return (const void *)window_kernel<T, K, K, ST, PX, PY, KB, UNIT_DIL, LEAD>;
}

#define TYPED_KERNEL(T, D, K, ST, PX, PY, KB)                                            \
  {K, ST, PX, PY, KB, true, -1, D, kernel_address<T, K, ST, PX, PY, KB, true, -1>()},    \
      {K, ST, PX, PY, KB, false, -1, D, kernel_address<T, K, ST, PX, PY, KB, false, -1>()},
#define KERNEL(K, ST, PX, PY, KB) TYPED_KERNEL(float, CONV_DTYPE_F32, K, ST, PX, PY, KB)
/* The blockings compiled for every filter size and stride: one output
 * channel per thread for depthwise and N->1 convolutions, 4-16 where
 * several output channels share each input (3->16). */
#define BLOCKINGS(K, ST)                                                                      \
  KERNEL(K, ST, 1, 1, 1) KERNEL(K, ST, 1, 2, 1) KERNEL(K, ST, 1, 4, 1) KERNEL(K, ST, 1, 8, 1) \
  KERNEL(K, ST, 2, 4, 1) KERNEL(K, ST, 2, 8, 1) KERNEL(K, ST, 4, 4, 1)                        \
  KERNEL(K, ST, 2, 2, 4) KERNEL(K, ST, 1, 4, 4) KERNEL(K, ST, 2, 2, 8) KERNEL(K, ST, 1, 2, 8) \
  KERNEL(K, ST, 2, 1, 16) KERNEL(K, ST, 1, 2, 16) KERNEL(K, ST, 2, 2, 16)

/* float4 loads: the one-channel blockings whose threads start their
 * windows 4 columns apart (px * stride == 4), compiled for "same" padding,
 * (K - 1) / 2, the padding of nearly every such layer.  With 16 output
 * channels a thread (3 -> 64, 7x7 stride 2) measured slower with float4
 * loads than without, so those stay scalar. */
#define VECTOR_KERNEL(K, ST, PX, PY, KB)                                                   \
  {K, ST, PX, PY, KB, true, (K - 1) / 2 % 4, CONV_DTYPE_F32,                               \
   kernel_address<float, K, ST, PX, PY, KB, true, (K - 1) / 2 % 4>()},
#define VECTOR_BLOCKINGS(K) \
  VECTOR_KERNEL(K, 1, 4, 4, 1) VECTOR_KERNEL(K, 2, 2, 4, 1) VECTOR_KERNEL(K, 2, 2, 8, 1)

/* The half types: the one-channel blockings (depthwise, N->1: the layers
 * that are memory-bound twice over in half), scalar loads and stores. */
#define HALF_BLOCKINGS(T, D, K, ST)                                                        \
  TYPED_KERNEL(T, D, K, ST, 1, 1, 1) TYPED_KERNEL(T, D, K, ST, 1, 2, 1)                   \
  TYPED_KERNEL(T, D, K, ST, 1, 4, 1) TYPED_KERNEL(T, D, K, ST, 1, 8, 1)                   \
  TYPED_KERNEL(T, D, K, ST, 2, 4, 1) TYPED_KERNEL(T, D, K, ST, 2, 8, 1)                   \
  TYPED_KERNEL(T, D, K, ST, 4, 4, 1)
#define HALF_TYPE(T, D)                                                                    \
  HALF_BLOCKINGS(T, D, 3, 1) HALF_BLOCKINGS(T, D, 3, 2) HALF_BLOCKINGS(T, D, 5, 1)         \
  HALF_BLOCKINGS(T, D, 5, 2) HALF_BLOCKINGS(T, D, 7, 1) HALF_BLOCKINGS(T, D, 7, 2)

const instance kInstances[] = {
    BLOCKINGS(3, 1) BLOCKINGS(3, 2) BLOCKINGS(5, 1) BLOCKINGS(5, 2) BLOCKINGS(7, 1) BLOCKINGS(7, 2)
    VECTOR_BLOCKINGS(3) VECTOR_BLOCKINGS(5) VECTOR_BLOCKINGS(7)
    HALF_TYPE(__half, CONV_DTYPE_F16) HALF_TYPE(__nv_bfloat16, CONV_DTYPE_BF16)
};

#undef HALF_TYPE
#undef HALF_BLOCKINGS
#undef VECTOR_BLOCKINGS
#undef VECTOR_KERNEL
#undef BLOCKINGS
#undef KERNEL
#undef TYPED_KERNEL

const void *find_kernel(int size, int stride, bool unit_dil, int lead,
                        const conv_direct_tiling &t, conv_dtype dtype) {
  for (const instance &in : kInstances)
    if (in.size == size && in.stride == stride && in.unit_dil == unit_dil && in.lead == lead &&
        in.px == t.px && in.py == t.py && in.kb == t.kb && in.dtype == dtype)
      return in.fn;
  return nullptr;
}

}  // namespace

extern "C" int64_t conv_direct_window_threads(int64_t outputs, int per_thread, int64_t spacing) {
  const int64_t span = (int64_t)per_thread * spacing; /* outputs of one group of threads */
  return (outputs + span - 1) / span * spacing;
}

extern "C" bool conv_direct_window_plan(const conv_direct_launch *common,
                                        conv_direct_launch *launch, char *why, size_t why_size) {
  conv_direct_launch l = *common;
  const conv_direct_tiling &t = l.tiling;
  if (l.r != l.s || (l.r != 3 && l.r != 5 && l.r != 7))
    CONV_REJECT("window layout: filters 3x3, 5x5 or 7x7 only, not %dx%d", l.r, l.s);
  if (l.stride_h != l.stride_w || l.stride_h > 2)
    CONV_REJECT("window layout: equal strides of 1 or 2 only");
  const int stride = l.stride_h;
  if (stride == 2 && (l.dil_h != 1 || l.dil_w != 1))
    CONV_REJECT("window layout: stride 2 must be undilated");
  const bool unit_dil = l.dil_h == 1 && l.dil_w == 1;
  const conv_dtype dtype = (conv_dtype)l.dtype;
  l.kernel = find_kernel(l.r, stride, unit_dil, -1, t, dtype);
  if (l.kernel == nullptr) CONV_REJECT("no kernel compiled for this layout/px/py/kb and type");
  /* The float4 kernel, where one is compiled: window column pad % 4 of
   * every thread is then a multiple of 4 (conv_plan_execute's pointers are
   * 16-byte aligned). */
  l.vector_loads = false;
  if (dtype == CONV_DTYPE_F32 && unit_dil && t.px * stride == 4 && l.w % 4 == 0) {
    const void *vector = find_kernel(l.r, stride, true, l.pad_w % 4, t, dtype);
    l.vector_loads = vector != nullptr;
    if (vector != nullptr) l.kernel = vector;
  }

  l.col_spacing = conv_direct_window_spacing(stride, l.dil_w);
  l.row_spacing = conv_direct_window_spacing(stride, l.dil_h);
  l.vector_stores = dtype == CONV_DTYPE_F32 && l.col_spacing == 1 && t.px > 1 && l.q % t.px == 0;
  l.by_kchunks = conv_divisor_make(l.kchunks);
  l.by_groups = conv_divisor_make(l.groups);
  l.by_col_spacing = conv_divisor_make(l.col_spacing);
  l.by_row_spacing = conv_divisor_make(l.row_spacing);
  const int64_t columns = conv_direct_window_threads(l.q, t.px, l.col_spacing);
  const int64_t rows = conv_direct_window_threads(l.p, t.py, l.row_spacing);
  const int64_t planes = (int64_t)l.n * l.groups * l.kchunks;
  const int64_t row_blocks = (rows + t.ty - 1) / t.ty, col_blocks = (columns + t.tx - 1) / t.tx;
  if (planes > INT32_MAX || row_blocks > 65535 || col_blocks > 65535)
    CONV_REJECT("grid %lld x %lld x %lld: too large for one launch", (long long)planes,
           (long long)row_blocks, (long long)col_blocks);
  l.grid[0] = (unsigned)planes;
  l.grid[1] = (unsigned)row_blocks;
  l.grid[2] = (unsigned)col_blocks;
  l.smem_bytes = sizeof(float) * (size_t)t.kb * l.cg * l.r * l.s;
  if (l.smem_bytes > CONV_DIRECT_WINDOW_SMEM_MAX)
    CONV_REJECT("window layout: filters need %zu bytes of shared memory, more than %zu",
                       l.smem_bytes, (size_t)CONV_DIRECT_WINDOW_SMEM_MAX);
  *launch = l;
  return true;
}
