/*
 * filter_reduce.cu -- see filter_reduce.h.
 */
#include "algorithms/filter_reduce.h"
#include "algorithms/common/launch_checks.h"
#include "algorithms/common/launch_plan.cuh"
#include "algorithms/common/pdl.cuh"
#include "algorithms/algorithm.h"

#include <stdio.h>

namespace {

const int kMaxThreads = 256;
const int kSumThreads = 256;
const int kMaxTapThreads = 1024;

/* The x values a thread's COLS pixels read along one input row, with
 * VECTOR (S = 3, stride 2, padding 1 along rows, COLS even): columns
 * 2*q0 - 1 .. 2*q0 + 2*COLS - 1, as one float and COLS/2 float4s (2*q0 is
 * a multiple of 4 and rows start 16-byte aligned: the plan and run()
 * check), where the scalar path issues COLS*S loads.  0 in the padding. */
template <int COLS>
__device__ __forceinline__ void load_stride2_row(const float *__restrict__ xr, int q0, int w,
                                                 float (&v)[2 * COLS + 1]) {
  const int first = 2 * q0;
  v[0] = first > 0 ? __ldg(xr + first - 1) : 0.0f;
  if (first + 2 * COLS <= w) {
#pragma unroll
    for (int i = 0; i < COLS / 2; i++) {
      const float4 f = __ldg(reinterpret_cast<const float4 *>(xr + first) + i);
      v[1 + 4 * i] = f.x, v[2 + 4 * i] = f.y, v[3 + 4 * i] = f.z, v[4 + 4 * i] = f.w;
    }
  } else {
#pragma unroll
    for (int i = 0; i < 2 * COLS; i++) v[1 + i] = first + i < w ? __ldg(xr + first + i) : 0.0f;
  }
}

/* Block (band, pair): the R x S sums of pair (k, c) over one band of one
 * image, written to out[(pair * R*S + tap) * bands + band] (with one band,
 * dw itself).  Threads walk the band's pixels in order, COLS neighbouring
 * pixels of a row each, so that a warp reads neighbouring dy values and,
 * at stride 1, neighbouring x values; the x values a pixel's taps share
 * with its neighbours come from L1.  COLS > 1 gives each thread COLS
 * pixels' loads to issue at once (the pass is bound by memory latency) and
 * spreads a pixel's index arithmetic over them; VECTOR reads them by
 * load_stride2_row. */
template <int R, int S, int COLS, bool VECTOR>
__global__ void __launch_bounds__(kMaxThreads)
    band_kernel(const conv_filter_reduce_launch L, const float *__restrict__ x,
                const float *__restrict__ dy, float *__restrict__ out) {
  constexpr int TAPS = R * S;
  conv_pdl_enter();
  const int pair = (int)blockIdx.y, band = (int)blockIdx.x;
  const int k = pair / L.cg, c = pair - k * L.cg;
  const int g = k / L.kg;
  const int n = band / L.bands_per_image;
  const int p0 = (band - n * L.bands_per_image) * L.tiling.rows;
  const int units = min(L.tiling.rows, L.p - p0) * L.units_per_row;
  const float *xc = x + ((int64_t)n * L.c + (int64_t)g * L.cg + c) * L.h * L.w;
  const float *dyb = dy + (((int64_t)n * L.k + k) * L.p + p0) * L.q;

  float acc[TAPS];
#pragma unroll
  for (int t = 0; t < TAPS; t++) acc[t] = 0.0f;
  for (int i = threadIdx.x; i < units; i += blockDim.x) {
    const int row = (int)conv_divide((uint32_t)i, L.by_units);
    const int q0 = (i - row * L.units_per_row) * COLS;
    float d[COLS];
#pragma unroll
    for (int j = 0; j < COLS; j++) d[j] = q0 + j < L.q ? __ldg(dyb + row * L.q + q0 + j) : 0.0f;
    const int iy0 = (p0 + row) * L.stride_h - L.pad_h, ix0 = q0 * L.stride_w - L.pad_w;
#pragma unroll
    for (int r = 0; r < R; r++) {
      const int iy = iy0 + r * L.dil_h;
      if ((unsigned)iy >= (unsigned)L.h) continue;
      const float *xr = xc + (int64_t)iy * L.w;
      if constexpr (VECTOR) {
        float v[2 * COLS + 1];
        load_stride2_row<COLS>(xr, q0, L.w, v);
#pragma unroll
        for (int j = 0; j < COLS; j++) {
          if (q0 + j >= L.q) break;
#pragma unroll
          for (int s = 0; s < S; s++) acc[r * S + s] = fmaf(d[j], v[2 * j + s], acc[r * S + s]);
        }
      } else {
#pragma unroll
        for (int j = 0; j < COLS; j++) {
          if (q0 + j >= L.q) break; /* past the row's last pixel */
#pragma unroll
          for (int s = 0; s < S; s++) {
            const int ix = ix0 + j * L.stride_w + s * L.dil_w;
            if ((unsigned)ix < (unsigned)L.w)
              acc[r * S + s] = fmaf(d[j], __ldg(xr + ix), acc[r * S + s]);
          }
        }
      }
    }
  }

  /* The block's sum per tap: within each warp by a butterfly, then over the
   * warps in their order. */
  __shared__ float warp_sums[kMaxThreads / 32][TAPS];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
  for (int t = 0; t < TAPS; t++) {
    float v = acc[t];
#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
    if (lane == 0) warp_sums[warp][t] = v;
  }
  __syncthreads();
  const int warps = (int)blockDim.x >> 5;
  for (int t = threadIdx.x; t < TAPS; t += blockDim.x) {
    float v = 0.0f;
    for (int w = 0; w < warps; w++) v += warp_sums[w][t];
    out[((int64_t)pair * TAPS + t) * L.bands + band] = v;
  }
}

/* dw[i] = the sum of partial[i * bands .. (i + 1) * bands), one warp per i:
 * each lane sums every 32nd band in order, then a butterfly. */
__global__ void __launch_bounds__(kSumThreads)
    sum_bands(const float *__restrict__ partial, int64_t outputs, int bands,
              float *__restrict__ dw) {
  conv_pdl_enter();
  const int64_t i = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
  const int lane = threadIdx.x & 31;
  if (i >= outputs) return; /* the whole warp: i is the same for its lanes */
  const float *src = partial + i * bands;
  float v = 0.0f;
  for (int b = lane; b < bands; b += 32) v += src[b];
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
  if (lane == 0) dw[i] = v;
}

/* Pixels a per-tap thread loads at once: the pass is bound by memory
 * latency, so a thread issues all their loads before its first FMA. */
const int kTapBatch = 8;

/* What the per-tap kernel reads, in 128 bytes of parameters rather than
 * conv_filter_reduce_launch's: a kernel's first read of each 64-byte line
 * of its parameters misses the SM's constant cache, and at 4096 products
 * a tap those reads are on the way to its first loads (direct_channel's
 * simple_args measured the same).  Offsets are 32-bit: the plan keeps
 * per-tap passes to tensors of at most 2^30 elements. */
struct tap_args {
  const float *x, *dy;
  float *dw;
  int n, h, w, pixels;          /* images, input plane, output pixels      */
  int x_image, dy_image, taps;  /* elements per image of x and dy; r * s   */
  int stride_h, stride_w, pad_h, pad_w, dil_h, dil_w;
  conv_divisor by_s, by_cg, by_kg, by_q; /* tap, pair, output channel, pixel */
};

tap_args tap_args_of(const conv_filter_reduce_launch &L, const float *x, const float *dy,
                     float *dw) {
  tap_args a = {x, dy, dw, L.n, L.h, L.w, L.p * L.q, L.c * L.h * L.w, L.k * L.p * L.q, L.r * L.s,
                L.stride_h, L.stride_w, L.pad_h, L.pad_w, L.dil_h, L.dil_w,
                L.by_s, L.by_cg, L.by_kg, L.by_units /* cols is 1: a unit is a pixel */};
  return a;
}

/* Block (tap, pair): dw of one tap of pair (k, c), the sum over every
 * image and output pixel, each thread taking every blockDim.x-th pixel,
 * then the block's sum in a fixed order (each warp by a butterfly, then
 * the warps' sums by the first warp's).  Any filter size: the tap is the
 * block's. */
__global__ void __launch_bounds__(kMaxTapThreads) tap_kernel(const tap_args A) {
  conv_pdl_enter();
  const int tap = (int)blockIdx.x, pair = (int)blockIdx.y;
  const int r = (int)conv_divide((uint32_t)tap, A.by_s), s = tap - r * (int)A.by_s.divisor;
  const int cg = (int)A.by_cg.divisor, q = (int)A.by_q.divisor;
  const int k = (int)conv_divide((uint32_t)pair, A.by_cg), c = pair - k * cg;
  const int g = (int)conv_divide((uint32_t)k, A.by_kg);
  const int row_offset = r * A.dil_h - A.pad_h, col_offset = s * A.dil_w - A.pad_w;
  const float *xc = A.x + (g * cg + c) * A.h * A.w;
  const float *dyk = A.dy + k * A.pixels;
  float acc = 0.0f;
  for (int n = 0; n < A.n; n++, xc += A.x_image, dyk += A.dy_image) {
    for (int first = (int)threadIdx.x; first < A.pixels; first += kTapBatch * (int)blockDim.x) {
      float d[kTapBatch], v[kTapBatch];
#pragma unroll
      for (int j = 0; j < kTapBatch; j++) {
        const int i = first + j * (int)blockDim.x;
        const int row = (int)conv_divide((uint32_t)i, A.by_q);
        const int iy = row * A.stride_h + row_offset;
        const int ix = (i - row * q) * A.stride_w + col_offset;
        const bool inside =
            i < A.pixels && (unsigned)iy < (unsigned)A.h && (unsigned)ix < (unsigned)A.w;
        d[j] = inside ? __ldg(dyk + i) : 0.0f;
        v[j] = inside ? __ldg(xc + iy * A.w + ix) : 0.0f;
      }
#pragma unroll
      for (int j = 0; j < kTapBatch; j++) acc = fmaf(d[j], v[j], acc);
    }
  }
  __shared__ float warp_sums[kMaxTapThreads / 32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, offset);
  if (lane == 0) warp_sums[warp] = acc;
  __syncthreads();
  if (warp == 0) {
    float v = lane < (int)(blockDim.x >> 5) ? warp_sums[lane] : 0.0f;
#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
    if (lane == 0) A.dw[pair * A.taps + tap] = v;
  }
}

typedef void (*band_fn)(conv_filter_reduce_launch, const float *, const float *, float *);

struct instance {
  int r, s;
  band_fn fn[3];     /* 1, 2 and 4 columns per thread */
  band_fn vector[3]; /* the same with float4 loads (3x3 only; none for 1 column) */
};

#define FR_INSTANCE(n)                                                                \
  {                                                                                   \
    n, n, {band_kernel<n, n, 1, false>, band_kernel<n, n, 2, false>,                  \
           band_kernel<n, n, 4, false>},                                              \
        { nullptr, nullptr, nullptr }                                                 \
  }
/* Square filters of the depthwise and few-channel layers in use; the 3x3
 * one also with the stride-2 float4 loads. */
const instance kInstances[] = {
    FR_INSTANCE(1), FR_INSTANCE(2),
    {3, 3, {band_kernel<3, 3, 1, false>, band_kernel<3, 3, 2, false>, band_kernel<3, 3, 4, false>},
     {nullptr, band_kernel<3, 3, 2, true>, band_kernel<3, 3, 4, true>}},
    FR_INSTANCE(4), FR_INSTANCE(5), FR_INSTANCE(7)};
#undef FR_INSTANCE

band_fn find_kernel(int64_t r, int64_t s, int cols, bool vector) {
  const int slot = cols == 1 ? 0 : cols == 2 ? 1 : cols == 4 ? 2 : -1;
  if (slot < 0) return nullptr;
  for (const instance &in : kInstances)
    if (in.r == r && in.s == s) return vector ? in.vector[slot] : in.fn[slot];
  return nullptr;
}

/* Whether the float4 loads serve this layer: three taps at stride 2 with
 * padding 1 along rows, rows of a multiple of 4 floats. */
bool vector_loads_fit(const conv_problem *pb) {
  return pb->s == 3 && pb->stride_w == 2 && pb->pad_w == 1 && pb->dil_w == 1 && pb->w % 4 == 0;
}

}  // namespace

extern "C" bool conv_filter_reduce_compiled(int64_t r, int64_t s) {
  return find_kernel(r, s, 1, false) != nullptr;
}

extern "C" bool conv_filter_reduce_plan(const conv_problem *pb, const conv_filter_reduce_tiling *t,
                                        conv_filter_reduce_launch *L, char *why,
                                        size_t why_size) {
  if (pb->direction != CONV_BACKWARD_FILTER || pb->layout != CONV_LAYOUT_NCHW)
    CONV_REJECT("only NCHW backward-filter passes");
  if (t->per_tap != 0 && t->per_tap != 1) CONV_REJECT("per_tap %d: not 0 or 1", t->per_tap);
  const int max_threads = t->per_tap ? kMaxTapThreads : kMaxThreads;
  if (t->threads < 32 || t->threads > max_threads || t->threads % 32 != 0)
    CONV_REJECT("%d threads: not a multiple of 32 in [32, %d]", t->threads, max_threads);
  if (t->per_tap && (t->rows != 0 || t->cols != 1 || t->vector != 0))
    CONV_REJECT("per-tap blocks take rows 0, cols 1 and vector 0");
  if (!t->per_tap && t->rows < 1) CONV_REJECT("%d rows per band", t->rows);
  if (t->cols != 1 && t->cols != 2 && t->cols != 4)
    CONV_REJECT("%d columns per thread: not 1, 2 or 4", t->cols);
  if (t->vector != 0 && t->vector != 1) CONV_REJECT("vector %d: not 0 or 1", t->vector);
  if (t->vector && !vector_loads_fit(pb))
    CONV_REJECT("float4 loads need a 3-wide filter at stride 2, padding 1 and dilation 1 along "
                "rows of a multiple of 4 floats");
  conv_shape shape;
  if (conv_problem_shape(pb, &shape) != CONV_OK) CONV_REJECT("invalid problem");
  const band_fn kernel = find_kernel(pb->r, pb->s, t->cols, t->vector);
  if (kernel == nullptr)
    CONV_REJECT("no kernel compiled for a %lld x %lld filter, %d columns%s", (long long)pb->r,
                (long long)pb->s, t->cols, t->vector ? " and float4 loads" : "");
  const int64_t dims[] = {pb->n, pb->c, pb->h, pb->w, pb->k, shape.p, shape.q,
                          pb->h * pb->w, shape.p * shape.q, pb->pad_h, pb->pad_w,
                          pb->stride_h * shape.p, pb->stride_w * shape.q,
                          pb->dil_h * pb->r, pb->dil_w * pb->s, (int64_t)t->rows * shape.q};
  for (int64_t d : dims)
    if (!conv_fits_int(d)) CONV_REJECT("a size past 32-bit indexing");
  if (t->per_tap && pb->n * shape.p * shape.q > CONV_FILTER_REDUCE_PER_TAP_MAX)
    CONV_REJECT("per-tap blocks: %lld products a tap, more than %d",
                (long long)(pb->n * shape.p * shape.q), CONV_FILTER_REDUCE_PER_TAP_MAX);
  if (t->per_tap && (shape.x_elems > INT32_MAX / 2 || shape.y_elems > INT32_MAX / 2))
    CONV_REJECT("per-tap blocks: a tensor past 2^30 elements (32-bit offsets)");

  conv_filter_reduce_launch l = {};
  l.tiling = *t;
  l.kernel = (const void *)kernel;
  l.scalar_kernel = (const void *)find_kernel(pb->r, pb->s, t->cols, false);
  conv_launch_set_geometry(l, pb, shape.p, shape.q);
  l.cg = (int)shape.c_per_group, l.kg = (int)shape.k_per_group;
  if ((int64_t)l.k * l.cg > 65535) CONV_REJECT("%lld filter planes: more than one grid column takes", (long long)l.k * l.cg);
  l.pairs = l.k * l.cg;
  l.units_per_row = (l.q + t->cols - 1) / t->cols;
  l.by_units = conv_divisor_make(l.units_per_row);
  if (t->per_tap) {
    l.by_s = conv_divisor_make(l.s);
    l.by_cg = conv_divisor_make(l.cg);
    l.by_kg = conv_divisor_make(l.kg);
    l.kernel = (const void *)tap_kernel;
    l.scalar_kernel = l.kernel;
    l.bands_per_image = 1, l.bands = 1; /* the grid is taps x pairs, dw written directly */
    *L = l;
    return true;
  }
  l.bands_per_image = (l.p + t->rows - 1) / t->rows;
  if ((int64_t)l.n * l.bands_per_image > INT32_MAX) CONV_REJECT("too many bands for one launch");
  l.bands = l.n * l.bands_per_image;
  if (l.bands > 1) {
    const double bytes = (double)l.bands * (double)shape.w_elems * sizeof(float);
    if (bytes > (double)CONV_FILTER_REDUCE_WORKSPACE_MAX)
      CONV_REJECT("%d bands' partial sums need %.0f MiB, more than %zu", l.bands, bytes / (1 << 20),
             CONV_FILTER_REDUCE_WORKSPACE_MAX >> 20);
    l.workspace_bytes = (size_t)bytes;
  }
  *L = l;
  return true;
}

extern "C" cudaError_t conv_filter_reduce_run(const conv_filter_reduce_launch *L, const float *x,
                                              const float *dy, float *dw, void *workspace,
                                              cudaStream_t stream) {
  if (L == NULL || L->kernel == NULL || x == NULL || dy == NULL || dw == NULL ||
      (L->bands > 1 && workspace == NULL))
    return cudaErrorInvalidValue;
  if (L->tiling.per_tap)
    return conv_launch(L->pdl, tap_kernel, dim3((unsigned)(L->r * L->s), (unsigned)L->pairs),
                       dim3((unsigned)L->tiling.threads), 0, stream, tap_args_of(*L, x, dy, dw));
  float *sums = L->bands > 1 ? (float *)workspace : dw;
  const bool aligned = ((uintptr_t)x & 15u) == 0;
  const band_fn kernel = (band_fn)(aligned ? L->kernel : L->scalar_kernel);
  const cudaError_t e =
      conv_launch(L->pdl, kernel, dim3((unsigned)L->bands, (unsigned)L->pairs),
                  dim3((unsigned)L->tiling.threads), 0, stream, *L, x, dy, sums);
  if (e != cudaSuccess || L->bands == 1) return e;
  const int64_t outputs = (int64_t)L->pairs * L->r * L->s;
  const int64_t blocks = (outputs * 32 + kSumThreads - 1) / kSumThreads;
  return conv_launch(L->pdl, sum_bands, dim3((unsigned)blocks), dim3(kSumThreads), 0, stream,
                     (const float *)sums, outputs, L->bands, dw);
}
