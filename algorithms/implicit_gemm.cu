/*
 * implicit_gemm.cu -- the kernel of implicit_gemm.h and its planning.
 *
 * Grid: one block per (output-channel tile, group, pixel tile), the
 * output-channel tiles of one pixel tile adjacent, so that the blocks
 * reading the same input slice run together and find it in L2.  A block
 * walks the reduction (input channel x tap) in slices of kSlice, `stages`
 * slices in flight by cp.async; each warp multiplies its wm x wn share of
 * the block tile with mma.sync m16n8k8, and the block writes the tile
 * through shared memory with the epilogue.
 */
#include <climits>
#include <cstdint>

#include "algorithms/common/epilogue.cuh"
#include "algorithms/implicit_gemm.h"
#include "algorithms/common/kernels.h"
#include "algorithms/common/launch_checks.h"
#include "algorithms/common/launch_plan.cuh"
#include "algorithms/common/mma_tf32.cuh"
#include "algorithms/common/pdl.cuh"
#include "algorithms/common/staging.cuh"

namespace {

constexpr int kSlice = 16;            /* reduction elements a stage holds        */
constexpr int kPitchA = kSlice + 4;   /* a filter row in shared memory: 32 banks  */
constexpr int kPadB = 8;              /* an im2col row: bn + 8 floats, 32 banks  */
constexpr int kNowhere = INT_MIN / 2; /* a pixel past the end: every tap misses  */

/* The launch's numbers, by value: the kernel never reads host memory. */
struct ig_params {
  const float *x, *w, *bias;
  float *y;
  int c_per_group, k_per_group, groups, h, w_in, p, q, s;
  int stride_h, stride_w, pad_h, pad_w, dil_h, dil_w;
  int reduction, pixels, m_tiles, epilogue;
  int hw, pq, x_image, y_image; /* floats of a channel plane, of an output plane, of
                                 * one image of x and of y */
  bool vector_filters, vector_inputs;
  conv_divisor by_taps, by_s, by_pq, by_q;
};

/* Where this thread's im2col column (one output pixel, or four for float4
 * staging) reads x: `base` is the offset of its image's group plus, for
 * float4 staging, of the pixel, else of the input at tap (0, 0) (which
 * may lie in the padding: only in-bounds taps are read); ih0 and iw0 are
 * that tap's input row and column, kNowhere past the last pixel. */
struct ig_column {
  int base, ih0, iw0;
  bool valid;
};

template <int BN>
__device__ __forceinline__ ig_column column_of(const ig_params &a, int pixel0, int group) {
  const int nn = a.vector_inputs ? (int)threadIdx.x % (BN / 4) * 4 : (int)threadIdx.x % BN;
  const int pixel = pixel0 + nn;
  ig_column col = {0, kNowhere, kNowhere, false};
  if (pixel >= a.pixels) return col;
  const int image = (int)conv_divide((uint32_t)pixel, a.by_pq);
  const int pq = pixel - image * a.pq;
  col.valid = true;
  col.base = image * a.x_image + group * a.c_per_group * a.hw;
  if (a.vector_inputs) {
    col.base += pq;
    return col;
  }
  const int op = (int)conv_divide((uint32_t)pq, a.by_q);
  col.ih0 = op * a.stride_h - a.pad_h;
  col.iw0 = (pq - op * a.q) * a.stride_w - a.pad_w;
  col.base += col.ih0 * a.w_in + col.iw0;
  return col;
}

/* The tap table: for reduction index i = (c, r, s), x's offset from a
 * column's tap (0, 0) (c H W + r dil_h W + s dil_w) and the tap's row and
 * column shift (r dil_h, s dil_w; 16 bits each).  Built once a block, so
 * that staging an element is a table read and two bounds checks rather
 * than two divisions, which made the kernel issue-bound. */
__device__ __forceinline__ void build_tap_table(const ig_params &a, int2 *table) {
  const int taps = (int)a.by_taps.divisor;
  for (int i = (int)threadIdx.x; i < a.reduction; i += (int)blockDim.x) {
    const int c = (int)conv_divide((uint32_t)i, a.by_taps), tap = i - c * taps;
    const int r = (int)conv_divide((uint32_t)tap, a.by_s), s = tap - r * a.s;
    const int dh = r * a.dil_h, dw = s * a.dil_w;
    table[i] = make_int2(c * a.hw + dh * a.w_in + dw, dh << 16 | dw);
  }
}

/* Starts copying filter rows [0, rows) of the block, reduction elements
 * [k0, k0 + kSlice), into `as` (zeros past either end). */
template <int BM, int THREADS>
__device__ __forceinline__ void stage_filters(const ig_params &a, float *as, const float *w_rows,
                                              int rows, int k0) {
  if (a.vector_filters) {
    constexpr int kCopies = BM * kSlice / 4;
    static_assert(kCopies % THREADS == 0, "whole rounds of float4 copies");
#pragma unroll
    for (int j = 0; j < kCopies / THREADS; j++) {
      const int i = (int)threadIdx.x + j * THREADS;
      const int m = i / (kSlice / 4), kk = i % (kSlice / 4) * 4;
      const bool ok = m < rows && k0 + kk < a.reduction;
      cp_async16(as + m * kPitchA + kk, ok ? w_rows + (int64_t)m * a.reduction + k0 + kk : a.w,
                 ok ? 16 : 0);
    }
    return;
  }
  constexpr int kCopies = BM * kSlice;
  static_assert(kCopies % THREADS == 0, "whole rounds of copies");
#pragma unroll
  for (int j = 0; j < kCopies / THREADS; j++) {
    const int i = (int)threadIdx.x + j * THREADS;
    const int m = i / kSlice, kk = i % kSlice;
    const bool ok = m < rows && k0 + kk < a.reduction;
    cp_async4(as + m * kPitchA + kk, ok ? w_rows + (int64_t)m * a.reduction + k0 + kk : a.w,
              ok ? 4 : 0);
  }
}

/* Starts copying im2col rows [k0, k0 + kSlice) of the block's pixels into
 * `bs`: each thread keeps its column and takes every (THREADS / columns)-th
 * row, so that consecutive threads read consecutive pixels. */
template <int BN, int THREADS>
__device__ __forceinline__ void stage_inputs(const ig_params &a, float *bs, const ig_column &col,
                                             const int2 *table, int k0) {
  constexpr int kPitchB = BN + kPadB;
  if (a.vector_inputs) {
    constexpr int kColumns = BN / 4, kRowStep = THREADS / kColumns;
    static_assert(THREADS % kColumns == 0 && kSlice % kRowStep == 0, "whole rows of float4s");
    const int nn = (int)threadIdx.x % kColumns * 4, kk0 = (int)threadIdx.x / kColumns;
#pragma unroll
    for (int j = 0; j < kSlice / kRowStep; j++) {
      const int kk = kk0 + j * kRowStep, c = k0 + kk;
      const bool ok = col.valid && c < a.reduction;
      cp_async16(bs + kk * kPitchB + nn, ok ? a.x + col.base + (int64_t)c * a.hw : a.x,
                 ok ? 16 : 0);
    }
    return;
  }
  constexpr int kRowStep = THREADS / BN;
  static_assert(THREADS % BN == 0 && kSlice % kRowStep == 0, "whole rows of copies");
  const int nn = (int)threadIdx.x % BN, kk0 = (int)threadIdx.x / BN;
#pragma unroll
  for (int j = 0; j < kSlice / kRowStep; j++) {
    const int kk = kk0 + j * kRowStep, index = k0 + kk;
    const int2 tap = index < a.reduction ? table[index] : make_int2(0, kNowhere);
    const int ih = col.ih0 + (tap.y >> 16), iw = col.iw0 + (tap.y & 0xFFFF);
    const bool ok = (unsigned)ih < (unsigned)a.h && (unsigned)iw < (unsigned)a.w_in;
    cp_async4(bs + kk * kPitchB + nn, ok ? a.x + (col.base + tap.x) : a.x, ok ? 4 : 0);
  }
}

/* acc += one staged slice for a warp: `as` at its first row (plus the
 * lane's g row and t column), `bs` at its first column (plus t row and g
 * column), as mma.m16n8k8's fragments expect. */
template <int MT, int NT, int BN>
__device__ __forceinline__ void multiply_slice(float (&acc)[MT][NT][4], const float *as,
                                               const float *bs) {
  constexpr int kPitchB = BN + kPadB;
#pragma unroll
  for (int k8 = 0; k8 < kSlice; k8 += 8) {
    uint32_t af[MT][4], bf[NT][2];
#pragma unroll
    for (int mt = 0; mt < MT; mt++) mma_a_fragment<kPitchA>(as + mt * 16 * kPitchA + k8, af[mt]);
#pragma unroll
    for (int nt = 0; nt < NT; nt++) {
      const float *p = bs + k8 * kPitchB + nt * 8;
      bf[nt][0] = tf32_round(p[0]);
      bf[nt][1] = tf32_round(p[4 * kPitchB]);
    }
#pragma unroll
    for (int mt = 0; mt < MT; mt++)
#pragma unroll
      for (int nt = 0; nt < NT; nt++) mma_tf32(acc[mt][nt], af[mt], bf[nt]);
  }
}

/* Writes the block's output tile from shared memory with the epilogue: a
 * thread takes 4 consecutive pixels of a channel, so a warp writes whole
 * runs of y (scattered 8-byte stores from the fragments halved the write
 * bandwidth, which set the time of layers with short reductions). */
template <int BM, int BN, int THREADS>
__device__ __forceinline__ void store_tile(const ig_params &a, const float *ctile, int group,
                                           int m0, int pixel0) {
  constexpr int kQuads = BN / 4;
  const int k_first = group * a.k_per_group;
  for (int i = (int)threadIdx.x; i < BM * kQuads; i += THREADS) {
    const int m = i / kQuads, n = i % kQuads * 4;
    const int pixel = pixel0 + n;
    if (m0 + m >= a.k_per_group || pixel >= a.pixels) continue;
    const int k = k_first + m0 + m;
    const float b = a.epilogue == CONV_EPILOGUE_NONE ? 0.0f : a.bias[k];
    const float4 v = conv_epilogue_apply4(
        a.epilogue, *reinterpret_cast<const float4 *>(ctile + m * (BN + kPadB) + n), b);
    const int image = (int)conv_divide((uint32_t)pixel, a.by_pq);
    const int pq = pixel - image * a.pq;
    float *y = a.y + (int64_t)image * a.y_image + (int64_t)k * a.pq + pq;
    if (a.pq % 4 == 0) { /* the 4 pixels are one image's, 16-byte aligned */
      *reinterpret_cast<float4 *>(y) = v;
      continue;
    }
    const float values[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
    for (int j = 0; j < 4; j++) {
      const int pj = pixel + j;
      if (pj >= a.pixels) break;
      const int image_j = (int)conv_divide((uint32_t)pj, a.by_pq);
      a.y[(int64_t)image_j * a.y_image + (int64_t)k * a.pq + (pj - image_j * a.pq)] = values[j];
    }
  }
}

template <int BM, int BN, int WM, int WN>
__host__ __device__ constexpr int threads_of() {
  return BM / WM * (BN / WN) * 32;
}

/* The stages, or the output tile that reuses them after the last one,
 * whichever is larger (the tap table comes after the stages). */
template <int BM, int BN, int WM, int WN, int STAGES>
__host__ __device__ constexpr size_t stages_bytes() {
  return (size_t)STAGES * (BM * kPitchA + kSlice * (BN + kPadB)) * sizeof(float);
}
template <int BM, int BN>
__host__ __device__ constexpr size_t ctile_bytes() {
  return (size_t)BM * (BN + kPadB) * sizeof(float);
}

/* No register cap: a cap of 128 (two blocks of 256 threads an SM) made
 * the 64x32 warp tiles spill. */
template <int BM, int BN, int WM, int WN, int STAGES>
__global__ void __launch_bounds__(threads_of<BM, BN, WM, WN>(), 1)
    igemm_kernel(ig_params a) {
  constexpr int kThreads = threads_of<BM, BN, WM, WN>(), kWarpsM = BM / WM;
  constexpr int MT = WM / 16, NT = WN / 8;
  constexpr int kStageA = BM * kPitchA, kStage = kStageA + kSlice * (BN + kPadB);
  static_assert(WM % 16 == 0 && WN % 8 == 0 && BM % WM == 0 && BN % WN == 0, "warp tiles");
  extern __shared__ float4 smem_float4[];
  float *const smem = reinterpret_cast<float *>(smem_float4);

  const int m_tile = (int)blockIdx.x % a.m_tiles, rest = (int)blockIdx.x / a.m_tiles;
  const int group = rest % a.groups, pixel0 = rest / a.groups * BN;
  const int m0 = m_tile * BM, rows = min(BM, a.k_per_group - m0);
  const float *const w_rows = a.w + (int64_t)(group * a.k_per_group + m0) * a.reduction;
  const ig_column col = column_of<BN>(a, pixel0, group);
  int2 *const table = reinterpret_cast<int2 *>(smem + STAGES * kStage);
  if (!a.vector_inputs) {
    build_tap_table(a, table);
    __syncthreads();
  }
  const int steps = (a.reduction + kSlice - 1) / kSlice;

#pragma unroll
  for (int st = 0; st < STAGES - 1; st++) {
    if (st < steps) {
      stage_filters<BM, kThreads>(a, smem + st * kStage, w_rows, rows, st * kSlice);
      stage_inputs<BN, kThreads>(a, smem + st * kStage + kStageA, col, table, st * kSlice);
    }
    cp_async_commit();
  }

  float acc[MT][NT][4];
#pragma unroll
  for (int mt = 0; mt < MT; mt++)
#pragma unroll
    for (int nt = 0; nt < NT; nt++)
#pragma unroll
      for (int v = 0; v < 4; v++) acc[mt][nt][v] = 0.0f;

  const int warp = (int)threadIdx.x / 32, lane = (int)threadIdx.x % 32;
  const int g = lane / 4, t = lane % 4;
  const int wm0 = warp % kWarpsM * WM, wn0 = warp / kWarpsM * WN;
  for (int step = 0; step < steps; step++) {
    /* This step's slice is in, and every warp is done with the buffer the
     * next copies overwrite (read in the previous step). */
    cp_async_wait<STAGES - 2>();
    __syncthreads();
    const int ahead = step + STAGES - 1;
    if (ahead < steps) {
      float *const next = smem + ahead % STAGES * kStage;
      stage_filters<BM, kThreads>(a, next, w_rows, rows, ahead * kSlice);
      stage_inputs<BN, kThreads>(a, next + kStageA, col, table, ahead * kSlice);
    }
    cp_async_commit();
    const float *const as = smem + step % STAGES * kStage;
    multiply_slice<MT, NT, BN>(acc, as + (wm0 + g) * kPitchA + t,
                               as + kStageA + t * (BN + kPadB) + wn0 + g);
  }
  cp_async_wait<0>();
  __syncthreads(); /* every warp is done with the stages the tile reuses */
  mma_tile_to_shared<MT, NT>(acc, smem, BN + kPadB, wm0, wn0, g, t);
  __syncthreads();
  store_tile<BM, BN, kThreads>(a, smem, group, m0, pixel0);
}

struct ig_instance {
  conv_igemm_tiling tiling;
  const void *kernel;
  int threads;
  size_t stages_bytes, ctile_bytes;
};

#define IG_INSTANCE(bm, bn, wm, wn, st)                                            \
  {{bm, bn, wm, wn, st}, (const void *)igemm_kernel<bm, bn, wm, wn, st>,          \
   threads_of<bm, bn, wm, wn>(), stages_bytes<bm, bn, wm, wn, st>(), ctile_bytes<bm, bn>()}

/* Large tiles first: they read each operand least often. */
const ig_instance kInstances[] = {
    IG_INSTANCE(128, 128, 64, 32, 3), IG_INSTANCE(64, 128, 32, 64, 3),
    IG_INSTANCE(128, 64, 64, 32, 3),  IG_INSTANCE(128, 64, 32, 32, 3),
    IG_INSTANCE(64, 128, 32, 32, 3),  IG_INSTANCE(64, 64, 32, 32, 3),
    IG_INSTANCE(32, 64, 32, 32, 3),   IG_INSTANCE(64, 32, 32, 32, 3),
};
constexpr int kInstanceCount = (int)(sizeof kInstances / sizeof kInstances[0]);


const ig_instance *find_instance(const conv_igemm_tiling *t) {
  for (int i = 0; i < kInstanceCount; i++) {
    const conv_igemm_tiling &c = kInstances[i].tiling;
    if (c.bm == t->bm && c.bn == t->bn && c.wm == t->wm && c.wn == t->wn &&
        c.stages == t->stages)
      return &kInstances[i];
  }
  return nullptr;
}

}  // namespace

extern "C" int conv_igemm_tilings(conv_igemm_tiling *out, int max) {
  return conv_list_tilings(kInstances, out, max);
}

extern "C" bool conv_igemm_plan(const conv_problem *pb, const conv_igemm_tiling *t,
                                conv_igemm_launch *L, char *why, size_t why_size) {
  if (pb == NULL || t == NULL || L == NULL) CONV_REJECT("NULL argument");
  if (pb->math != CONV_MATH_TF32) CONV_REJECT("TF32 tensor cores: TF32 mode only");
  if (pb->layout != CONV_LAYOUT_NCHW || pb->direction != CONV_FORWARD)
    CONV_REJECT("NCHW forward convolutions only");
  const ig_instance *instance = find_instance(t);
  if (instance == nullptr) CONV_REJECT("no kernel compiled for this tiling");
  const int64_t p = conv_output_size(pb->h, pb->r, pb->stride_h, pb->pad_h, pb->dil_h);
  const int64_t q = conv_output_size(pb->w, pb->s, pb->stride_w, pb->pad_w, pb->dil_w);
  const int64_t c_per_group = pb->c / pb->groups, k_per_group = pb->k / pb->groups;
  const int64_t reduction = c_per_group * pb->r * pb->s;
  const int64_t pixels = pb->n * p * q;
  const int64_t m_tiles = (k_per_group + t->bm - 1) / t->bm;
  const int64_t blocks = m_tiles * pb->groups * ((pixels + t->bn - 1) / t->bn);
  if ((pb->r - 1) * pb->dil_h >= 32768 || (pb->s - 1) * pb->dil_w >= 32768)
    CONV_REJECT("dilated filter past the tap table's 16-bit shifts");
  if (!conv_fits_int(pb->n * pb->c * pb->h * pb->w) || !conv_fits_int(pb->n * pb->k * p * q) ||
      !conv_fits_int(pb->k * reduction) || !conv_fits_int(blocks))
    CONV_REJECT("sizes past 32-bit indexing");
  conv_igemm_launch l = {};
  l.tiling = *t;
  l.kernel = instance->kernel;
  l.threads = instance->threads;
  l.c_per_group = (int)c_per_group, l.k_per_group = (int)k_per_group;
  l.groups = (int)pb->groups;
  l.h = (int)pb->h, l.w = (int)pb->w, l.p = (int)p, l.q = (int)q;
  l.r = (int)pb->r, l.s = (int)pb->s;
  l.stride_h = (int)pb->stride_h, l.stride_w = (int)pb->stride_w;
  l.pad_h = (int)pb->pad_h, l.pad_w = (int)pb->pad_w;
  l.dil_h = (int)pb->dil_h, l.dil_w = (int)pb->dil_w;
  l.reduction = (int)reduction, l.pixels = (int)pixels, l.m_tiles = (int)m_tiles;
  l.epilogue = (int)pb->epilogue;
  l.vector_filters = reduction % 4 == 0;
  l.vector_inputs = pb->r == 1 && pb->s == 1 && pb->stride_h == 1 && pb->stride_w == 1 &&
                    pb->pad_h == 0 && pb->pad_w == 0 && (pb->h * pb->w) % 4 == 0;
  l.by_taps = conv_divisor_make((int)(pb->r * pb->s));
  l.by_s = conv_divisor_make((int)pb->s);
  l.by_pq = conv_divisor_make((int)(p * q));
  l.by_q = conv_divisor_make((int)q);
  l.blocks = (unsigned)blocks;
  l.smem_bytes = instance->stages_bytes + (l.vector_inputs ? 0 : sizeof(int2) * (size_t)reduction);
  if (l.smem_bytes < instance->ctile_bytes) l.smem_bytes = instance->ctile_bytes;
  if (l.smem_bytes > CONV_IGEMM_SMEM_MAX)
    CONV_REJECT("%zu bytes of shared memory (stages and tap table): past %zu", l.smem_bytes,
                (size_t)CONV_IGEMM_SMEM_MAX);
  *L = l;
  return true;
}

extern "C" cudaError_t conv_igemm_configure(const conv_igemm_launch *L) {
  return conv_launch_allow_smem(L);
}

extern "C" cudaError_t conv_igemm_forward(const conv_igemm_launch *L, const float *x,
                                          const float *w, const float *bias, float *y,
                                          cudaStream_t stream) {
  if (L == NULL || L->kernel == NULL) return cudaErrorInvalidValue;
  ig_params a;
  a.x = x, a.w = w, a.bias = bias, a.y = y;
  a.c_per_group = L->c_per_group, a.k_per_group = L->k_per_group, a.groups = L->groups;
  a.h = L->h, a.w_in = L->w, a.p = L->p, a.q = L->q, a.s = L->s;
  a.stride_h = L->stride_h, a.stride_w = L->stride_w, a.pad_h = L->pad_h, a.pad_w = L->pad_w;
  a.dil_h = L->dil_h, a.dil_w = L->dil_w;
  a.reduction = L->reduction, a.pixels = L->pixels, a.m_tiles = L->m_tiles;
  a.epilogue = L->epilogue;
  a.hw = L->h * L->w, a.pq = L->p * L->q;
  a.x_image = L->c_per_group * L->groups * a.hw;
  a.y_image = L->k_per_group * L->groups * a.pq;
  a.vector_filters = L->vector_filters, a.vector_inputs = L->vector_inputs;
  a.by_taps = L->by_taps, a.by_s = L->by_s, a.by_pq = L->by_pq, a.by_q = L->by_q;
  return conv_launch(false, (void (*)(ig_params))L->kernel, dim3(L->blocks),
                     dim3((unsigned)L->threads), L->smem_bytes, stream, a);
}
