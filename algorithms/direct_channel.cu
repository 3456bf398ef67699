/*
 * direct_channel.cu -- see direct_channel.h.
 */
#include "algorithms/direct_channel.h"
#include "algorithms/direct_nhwc.h"
#include "algorithms/direct_window.h"
#include "algorithms/common/elements.cuh"
#include "algorithms/common/epilogue.cuh"
#include "algorithms/common/launch_plan.cuh"
#include "algorithms/common/pdl.cuh"
#include "algorithms/algorithm.h"

#include <stdio.h>

namespace {

const int kMaxThreads = 256;

__host__ __device__ inline int round_up4(int v) { return (v + 3) & ~3; }

/* The block's place in the problem: image, group, output-channel chunk and
 * output tile.  The channel chunk varies fastest, so that blocks reading the
 * same input tile run together and share it through L2. */
struct block_place {
  int n, g, kc, p0, q0;
};

__device__ inline block_place place_of_block(const conv_direct_launch &L) {
  int64_t bid = blockIdx.x;
  block_place b;
  b.kc = (int)(bid % L.kchunks);
  bid /= L.kchunks;
  const int tiles = L.tiles_p * L.tiles_q;
  const int tile = (int)(bid % tiles);
  bid /= tiles;
  b.g = (int)(bid % L.groups);
  b.n = (int)(bid / L.groups);
  b.p0 = (tile / L.tiles_q) * L.tile_rows;
  b.q0 = (tile % L.tiles_q) * L.tile_cols;
  return b;
}

/* Copies the block's filters, [kb][cg][r][s] padded to s_pitch with zeros,
 * into shared memory. */
__device__ inline void stage_filters(const conv_direct_launch &L, int kb, const float *w, int k0,
                                     float *dst) {
  const int rows = kb * L.cg * L.r;
  const int total = rows * L.s_pitch;
  for (int i = threadIdx.x; i < total; i += blockDim.x) {
    const int row = i / L.s_pitch, s = i - row * L.s_pitch;
    const int kc = row / L.r, r = row - kc * L.r; /* row = (kk * cg + c) * L.r + r */
    const int kk = kc / L.cg, c = kc - kk * L.cg;
    dst[i] = s < L.s ? w[conv_direct_weight_offset(L, k0 + kk, c, r * L.s + s)] : 0.0f;
  }
}

/* Element e of v, without dynamic register indexing (which would spill). */
__device__ inline float lane_of(const float4 &v, int e) {
  return e == 0 ? v.x : e == 1 ? v.y : e == 2 ? v.z : v.w;
}

/* Copies rows [gy0, gy0 + halo_rows) x columns [gx0, gx0 + halo_cols) of
 * one input plane into dst (row pitch L.pitch), with zeros where the window
 * leaves the image and in the columns past halo_cols.  (Unrolling this loop
 * to keep more loads in flight measured no faster on an H200: the registers
 * it takes cost more occupancy than it gains.) */
__device__ inline void stage_plane(const conv_direct_launch &L, const float *plane, int gy0,
                                   int gx0, float *dst) {
  const int rows = L.halo_rows, cols = L.halo_cols;
  if (L.vector_loads) {
    /* w % 4 == 0: every aligned float4 of a row is wholly inside or outside
     * the image, so one bounds check covers four values. */
    const int a0 = gx0 & ~3; /* floor to a multiple of 4, negatives included */
    const int chunks = (gx0 + cols - a0 + 3) >> 2;
    /* Lanes 8 apart store different elements first: consecutive lanes
     * store 4 words apart, so this keeps each warp's stores in 32 banks. */
    const int rot = (threadIdx.x >> 3) & 3;
    for (int i = threadIdx.x; i < rows * chunks; i += blockDim.x) {
      const int row = i / chunks, gy = gy0 + row, gx = a0 + 4 * (i - row * chunks);
      float4 v = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
      if (gy >= 0 && gy < L.h && gx >= 0 && gx < L.w)
        v = __ldg(reinterpret_cast<const float4 *>(plane + (int64_t)gy * L.w + gx));
      float *out = dst + row * L.pitch;
#pragma unroll
      for (int k = 0; k < 4; k++) {
        const int e = (k + rot) & 3;
        const int col = gx + e - gx0;
        if (col >= 0 && col < cols) out[col] = lane_of(v, e);
      }
    }
  } else {
    for (int i = threadIdx.x; i < rows * cols; i += blockDim.x) {
      const int row = i / cols, col = i - row * cols;
      const int gy = gy0 + row, gx = gx0 + col;
      const bool inside = gy >= 0 && gy < L.h && gx >= 0 && gx < L.w;
      dst[row * L.pitch + col] = inside ? __ldg(plane + (int64_t)gy * L.w + gx) : 0.0f;
    }
  }
  const int tail = L.pitch - cols;
  for (int i = threadIdx.x; i < rows * tail; i += blockDim.x) {
    const int row = i / tail;
    dst[row * L.pitch + cols + (i - row * tail)] = 0.0f;
  }
}

/* GENERIC: any stride and dilation.  Thread (tx, ty) owns rows
 * p0 + ty*PY + i and interleaved columns q0 + tx + j*tx_count. */
template <int PX, int PY, int KB>
__device__ inline void accumulate_generic(const conv_direct_launch &L, const float *tile,
                                          const float *filt, float (&acc)[PY][PX][KB]) {
  const int tx_count = L.tiling.tx;
  const int tx = threadIdx.x % tx_count, ty = threadIdx.x / tx_count;
  const int kstride = L.cg * L.r * L.s_pitch; /* between output channels */
#pragma unroll
  for (int i = 0; i < PY; i++) {
    for (int r = 0; r < L.r; r++) {
      const float *row = tile + ((ty * PY + i) * L.stride_h + r * L.dil_h) * L.pitch;
      const float *wr = filt + r * L.s_pitch;
      for (int s = 0; s < L.s; s++) {
        float wv[KB];
#pragma unroll
        for (int kk = 0; kk < KB; kk++) wv[kk] = wr[kk * kstride + s];
        const float *in = row + tx * L.stride_w + s * L.dil_w;
#pragma unroll
        for (int j = 0; j < PX; j++) {
          const float xv = in[j * tx_count * L.stride_w];
#pragma unroll
          for (int kk = 0; kk < KB; kk++) acc[i][j][kk] = fmaf(wv[kk], xv, acc[i][j][kk]);
        }
      }
    }
  }
}

/* UNIT: stride 1, dilation 1.  Thread (tx, ty) owns rows p0 + ty*PY + i and
 * the 4 contiguous columns q0 + 4*tx + j.  Each staged input row is read
 * once, as a sliding window of two float4 (the second becomes the next
 * step's first), and feeds every output row i whose filter row r = ir - i
 * exists; filters are read 4 taps per float4, broadcast to the warp. */
template <int PY, int KB, bool CHECK_ROWS, bool ALL_TAPS>
__device__ inline void unit_taps(const conv_direct_launch &L, const float *filt, int kstride,
                                 int ir, int s4, const float4 &a, const float4 &b,
                                 float (&acc)[PY][4][KB]) {
  const float xv[8] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
  /* Taps past the filter's width are skipped, not multiplied by the zero
   * padding: 0 * inf would put a NaN where no input reaches. */
  const int taps = ALL_TAPS ? 4 : L.s - s4;
#pragma unroll
  for (int i = 0; i < PY; i++) {
    const int r = ir - i;
    if (CHECK_ROWS && (r < 0 || r >= L.r)) continue;
#pragma unroll
    for (int kk = 0; kk < KB; kk++) {
      const float4 w4 =
          *reinterpret_cast<const float4 *>(filt + kk * kstride + r * L.s_pitch + s4);
      const float wv[4] = {w4.x, w4.y, w4.z, w4.w};
#pragma unroll
      for (int t = 0; t < 4; t++) {
        if (!ALL_TAPS && t >= taps) break;
#pragma unroll
        for (int j = 0; j < 4; j++) acc[i][j][kk] = fmaf(wv[t], xv[j + t], acc[i][j][kk]);
      }
    }
  }
}

/* One staged input row against every filter tap of the rows it feeds. */
template <int PY, int KB, bool CHECK_ROWS>
__device__ inline void unit_row(const conv_direct_launch &L, const float *row, const float *filt,
                                int kstride, int ir, float (&acc)[PY][4][KB]) {
  const int full = L.s & ~3;
  float4 a = *reinterpret_cast<const float4 *>(row);
#pragma unroll(KB * PY <= 8 ? 2 : 1) /* ILP for light blockings, registers for heavy */
  for (int s4 = 0; s4 < full; s4 += 4) {
    const float4 b = *reinterpret_cast<const float4 *>(row + s4 + 4);
    unit_taps<PY, KB, CHECK_ROWS, true>(L, filt, kstride, ir, s4, a, b, acc);
    a = b;
  }
  if (full < L.s) {
    const float4 b = *reinterpret_cast<const float4 *>(row + full + 4);
    unit_taps<PY, KB, CHECK_ROWS, false>(L, filt, kstride, ir, full, a, b, acc);
  }
}

template <int PY, int KB>
__device__ inline void accumulate_unit(const conv_direct_launch &L, const float *tile,
                                       const float *filt, float (&acc)[PY][4][KB]) {
  const int tx = threadIdx.x % L.tiling.tx, ty = threadIdx.x / L.tiling.tx;
  const int kstride = L.cg * L.r * L.s_pitch;
  const float *base = tile + ty * PY * L.pitch + 4 * tx;
  const int rows = PY + L.r - 1;
  /* Input rows PY-1 .. R-1 feed all PY output rows: no per-row checks there. */
  int ir = 0;
  for (; ir < min(PY - 1, rows); ir++)
    unit_row<PY, KB, true>(L, base + ir * L.pitch, filt, kstride, ir, acc);
  for (; ir < L.r; ir++) unit_row<PY, KB, false>(L, base + ir * L.pitch, filt, kstride, ir, acc);
  for (; ir < rows; ir++) unit_row<PY, KB, true>(L, base + ir * L.pitch, filt, kstride, ir, acc);
}

/* Blocks of 256 threads that must fit on one SM together: this caps the
 * registers per thread (65536 / (256 * blocks)).  Memory-bound blockings
 * need the occupancy to keep loads in flight; heavy ones need the registers
 * for their accumulators.  (Measured on an H200: 6 blocks for the light
 * blockings beat 4 and 5 on depthwise 3x3 and 31x31.) */
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
const int kMaxBlocksPerSM = 1024 / kMaxThreads; /* sm_75: 1024 threads per SM */
#else
const int kMaxBlocksPerSM = 1536 / kMaxThreads; /* sm_86/89: 1536; sm_80/90: 2048 */
#endif
constexpr int min_blocks(int accumulators) {
  return accumulators <= 16 ? (6 < kMaxBlocksPerSM ? 6 : kMaxBlocksPerSM)
                            : accumulators <= 32 ? 3 : 2;
}

template <int LAYOUT, int PX, int PY, int KB>
__global__ void __launch_bounds__(kMaxThreads, min_blocks(PX *PY *KB))
    direct_kernel(const conv_direct_launch L, const float *__restrict__ x,
                  const float *__restrict__ w, const float *__restrict__ bias,
                  float *__restrict__ y) {
  conv_pdl_enter();
  extern __shared__ float4 smem4[]; /* float4: the float4 reads need 16-byte alignment */
  float *smem = reinterpret_cast<float *>(smem4);
  const block_place b = place_of_block(L);
  const int k0 = b.g * L.kg + b.kc * KB; /* first output channel of the block */
  float *filt = smem;
  const int filt_floats = KB * L.cg * L.r * L.s_pitch; /* a multiple of 4 */
  float *tiles = smem + filt_floats;
  const int tile_floats = L.halo_rows * L.pitch;

  stage_filters(L, KB, w, k0, filt);
  const int gy0 = b.p0 * L.stride_h - L.pad_h, gx0 = b.q0 * L.stride_w - L.pad_w;
  const int64_t plane = (int64_t)L.h * L.w;
  const float *xg = x + ((int64_t)b.n * L.c + (int64_t)b.g * L.cg) * plane;

  float acc[PY][PX][KB] = {};

  for (int c0 = 0; c0 < L.cg; c0 += L.stage_channels) {
    const int staged = min(L.stage_channels, L.cg - c0);
    if (c0 > 0) __syncthreads(); /* the previous channels' tiles are still being read */
    for (int cs = 0; cs < staged; cs++)
      stage_plane(L, xg + (int64_t)(c0 + cs) * plane, gy0, gx0, tiles + cs * tile_floats);
    __syncthreads();
    for (int cs = 0; cs < staged; cs++) {
      const float *t = tiles + cs * tile_floats;
      const float *f = filt + (c0 + cs) * L.r * L.s_pitch;
      if constexpr (LAYOUT == CONV_DIRECT_UNIT)
        accumulate_unit<PY, KB>(L, t, f, acc);
      else
        accumulate_generic<PX, PY, KB>(L, t, f, acc);
    }
  }

  const int tx = threadIdx.x % L.tiling.tx, ty = threadIdx.x / L.tiling.tx;
  const int64_t out_plane = (int64_t)L.p * L.q;
#pragma unroll
  for (int kk = 0; kk < KB; kk++) {
    const int k = k0 + kk;
    const float bk = conv_epilogue_bias(L.epilogue, bias, k);
    float *yk = y + ((int64_t)b.n * L.k + k) * out_plane;
#pragma unroll
    for (int i = 0; i < PY; i++) {
      const int p = b.p0 + ty * PY + i;
      if (p >= L.p) continue;
      float *yrow = yk + (int64_t)p * L.q;
      if constexpr (LAYOUT == CONV_DIRECT_UNIT) {
        static_assert(PX == 4, "the unit layout computes 4 columns per thread");
        const int q = b.q0 + 4 * tx;
        float v[4];
#pragma unroll
        for (int j = 0; j < 4; j++) v[j] = conv_epilogue_apply(L.epilogue, acc[i][j][kk], bk);
        if ((L.q & 3) == 0 && q + 3 < L.q) {
          *reinterpret_cast<float4 *>(yrow + q) = make_float4(v[0], v[1], v[2], v[3]);
        } else {
#pragma unroll
          for (int j = 0; j < 4; j++)
            if (q + j < L.q) yrow[q + j] = v[j];
        }
      } else {
#pragma unroll
        for (int j = 0; j < PX; j++) {
          const int q = b.q0 + tx + j * L.tiling.tx;
          if (q < L.q) yrow[q] = conv_epilogue_apply(L.epilogue, acc[i][j][kk], bk);
        }
      }
    }
  }
}

/* SIMPLE's parameters: what its kernel reads of the launch, and the
 * tensors, in 120 bytes.  A kernel's parameters live in constant memory;
 * its first read of each 64-byte line misses the SM's constant cache, and
 * these reads feed the addresses of its first loads, so at 4096 outputs
 * the lines of conv_direct_launch's 300 bytes that it would touch show in
 * the time (seed3_msd_small's backward-data as a CUDA graph's node on an
 * H100: 1.06 us with conv_direct_launch, 0.89-0.91 us with these). */
struct simple_args {
  const void *x, *w; /* elements of the kernel's T */
  const float *bias;
  void *y;
  int c, h, w_, k, p, q, cg, kg;
  int stride_h, stride_w, pad_h, pad_w, dil_h, dil_w;
  conv_divisor by_k, by_kg;
  int epilogue;
  bool transposed_filter;
};

simple_args simple_args_of(const conv_direct_launch &L, const void *x, const void *w,
                           const float *bias, void *y) {
  return simple_args{x,          w,          bias,       y,         L.c,       L.h,
                     L.w,        L.k,        L.p,        L.q,       L.cg,      L.kg,
                     L.stride_h, L.stride_w, L.pad_h,    L.pad_w,   L.dil_h,   L.dil_w,
                     L.by_k,     L.by_kg,    L.epilogue, L.transposed_filter};
}

/* SIMPLE: thread (q, p) of grid plane (n, k) computes output (n, k, p, q)
 * alone.  At 4096 outputs the kernel is its instructions' latency, so it
 * has few: offsets in 32 bits (conv_direct_plan checks the tensors'
 * sizes), the image and channel from the grid, the taps at compile-time
 * offsets from the channel's first (mirrored for the transposed filter, see
 * conv_direct_weight_offset), and every load of a channel issued before its
 * first FMA.  ONE_CHANNEL: one input channel per group, straight-line
 * code.  UNIT_DIL: dilation 1, a row's loads at compile-time offsets from
 * its first.  T: the element type of x, w and y (float, __half,
 * __nv_bfloat16), read as fp32; the sum and the epilogue are fp32 and the
 * output is rounded to T once. */
template <typename T, int R, int S, bool EPILOGUE, bool ONE_CHANNEL, bool UNIT_DIL>
__global__ void __launch_bounds__(kMaxThreads) simple_kernel(const simple_args A) {
  constexpr int TAPS = R * S;
  const T *X = static_cast<const T *>(A.x), *W = static_cast<const T *>(A.w);
  conv_pdl_enter();
  const int q = (int)(blockIdx.x * blockDim.x + threadIdx.x);
  const int p = (int)(blockIdx.y * blockDim.y + threadIdx.y);
  const int n = (int)conv_divide(blockIdx.z, A.by_k), k = (int)blockIdx.z - n * A.k;
  const int g = (int)conv_divide((uint32_t)k, A.by_kg);
  if (q >= A.q || p >= A.p) return;
  const int plane = A.h * A.w_;
  /* Offsets of channel c's input plane and first tap. */
  int x_offset = (n * A.c + g * A.cg) * plane;
  const bool flip = A.transposed_filter;
  int w_offset = flip ? (g * A.cg * A.kg + k - g * A.kg) * TAPS : k * A.cg * TAPS;
  const int w_step = flip ? A.kg * TAPS : TAPS;
  const int iy0 = p * A.stride_h - A.pad_h, ix0 = q * A.stride_w - A.pad_w;
  const int dil_h = UNIT_DIL ? 1 : A.dil_h, dil_w = UNIT_DIL ? 1 : A.dil_w;
  bool col_inside[S];
#pragma unroll
  for (int s = 0; s < S; s++) col_inside[s] = (unsigned)(ix0 + s * dil_w) < (unsigned)A.w_;
  const int channels = ONE_CHANNEL ? 1 : A.cg;
  float acc = 0.0f;
#pragma unroll 1
  for (int c = 0; c < channels; c++, x_offset += plane, w_offset += w_step) {
    float taps[TAPS], in[TAPS];
    const T *wc = W + w_offset;
#pragma unroll
    for (int t = 0; t < TAPS; t++) taps[t] = conv_element_to_float(__ldg(wc + t));
#pragma unroll
    for (int r = 0; r < R; r++) {
      /* The row's first input: may lie outside the tensor, and is then
       * never read. */
      const int iy = iy0 + r * dil_h;
      const bool row_inside = (unsigned)iy < (unsigned)A.h;
      const T *row = X + (x_offset + iy * A.w_ + ix0);
#pragma unroll
      for (int s = 0; s < S; s++)
        in[r * S + s] =
            row_inside && col_inside[s] ? conv_element_to_float(__ldg(row + s * dil_w)) : 0.0f;
    }
    if (flip) {
#pragma unroll
      for (int t = 0; t < TAPS; t++) acc = fmaf(taps[TAPS - 1 - t], in[t], acc);
    } else {
#pragma unroll
      for (int t = 0; t < TAPS; t++) acc = fmaf(taps[t], in[t], acc);
    }
  }
  T *out = static_cast<T *>(A.y) + ((n * A.k + k) * A.p + p) * A.q + q;
  *out = conv_element_from_float<T>(
      EPILOGUE ? conv_epilogue_apply(A.epilogue, acc, __ldg(A.bias + k)) : acc);
}

template <typename T, int K, bool ONE_CHANNEL, bool UNIT_DIL>
const void *simple_kernel_for(bool epilogue) {
  return epilogue ? (const void *)simple_kernel<T, K, K, true, ONE_CHANNEL, UNIT_DIL>
                  : (const void *)simple_kernel<T, K, K, false, ONE_CHANNEL, UNIT_DIL>;
}

/* 1x1 filters have no dilation to speak of. */
template <typename T, int K>
const void *simple_kernel_for(bool epilogue, bool one_channel, bool unit_dil) {
  if (one_channel)
    return unit_dil || K == 1 ? simple_kernel_for<T, K, true, true>(epilogue)
                              : simple_kernel_for<T, K, true, false>(epilogue);
  return unit_dil || K == 1 ? simple_kernel_for<T, K, false, true>(epilogue)
                            : simple_kernel_for<T, K, false, false>(epilogue);
}

template <typename T>
const void *find_simple_kernel(int r, int s, bool epilogue, bool one_channel, bool unit_dil) {
  if (r != s) return nullptr;
  switch (r) {
    case 1: return simple_kernel_for<T, 1>(epilogue, one_channel, unit_dil);
    case 3: return simple_kernel_for<T, 3>(epilogue, one_channel, unit_dil);
    case 5: return simple_kernel_for<T, 5>(epilogue, one_channel, unit_dil);
    case 7: return simple_kernel_for<T, 7>(epilogue, one_channel, unit_dil);
    default: return nullptr;
  }
}

const void *find_simple_kernel(conv_dtype dtype, int r, int s, bool epilogue, bool one_channel,
                               bool unit_dil) {
  switch (dtype) {
    case CONV_DTYPE_F32: return find_simple_kernel<float>(r, s, epilogue, one_channel, unit_dil);
    case CONV_DTYPE_F16: return find_simple_kernel<__half>(r, s, epilogue, one_channel, unit_dil);
    case CONV_DTYPE_BF16:
      return find_simple_kernel<__nv_bfloat16>(r, s, epilogue, one_channel, unit_dil);
  }
  return nullptr;
}

/* The tiled layouts' kernels take these arguments; the window layout's
 * take x, w and y untyped (window_fn), being instantiated per element type. */
typedef void (*kernel_fn)(const conv_direct_launch, const float *, const float *, const float *,
                          float *);
typedef void (*window_fn)(const conv_direct_launch, const void *, const void *, const float *,
                          void *);

struct instance {
  int layout, px, py, kb;
  const void *fn;
};

#define UNIT(PY, KB) \
  {CONV_DIRECT_UNIT, 4, PY, KB, (const void *)direct_kernel<CONV_DIRECT_UNIT, 4, PY, KB>}
#define GENERIC(PX, PY, KB) \
  {CONV_DIRECT_GENERIC, PX, PY, KB, (const void *)direct_kernel<CONV_DIRECT_GENERIC, PX, PY, KB>}

/* What is compiled.  More register blocking per thread means fewer
 * shared-memory reads per FMA but more registers and larger tiles. */
const instance kInstances[] = {
    UNIT(1, 1),        UNIT(2, 1),        UNIT(4, 1),       UNIT(8, 1),
    UNIT(1, 4),        UNIT(2, 4),        UNIT(4, 4),       UNIT(1, 8),
    UNIT(2, 8),        UNIT(1, 16),       GENERIC(1, 1, 1),
    GENERIC(2, 1, 1),  GENERIC(2, 2, 1),  GENERIC(4, 2, 1), GENERIC(4, 4, 1),
    GENERIC(1, 1, 4),  GENERIC(2, 2, 4),  GENERIC(1, 1, 8), GENERIC(2, 1, 8),
    GENERIC(1, 1, 16), GENERIC(2, 1, 16),
};

#undef UNIT
#undef GENERIC

const void *find_kernel(const conv_direct_tiling *t) {
  for (const instance &in : kInstances)
    if (in.layout == t->layout && in.px == t->px && in.py == t->py && in.kb == t->kb) return in.fn;
  return nullptr;
}

}  // namespace

/* The tiled layouts (GENERIC, UNIT): one block per output tile, with the
 * input tile staged in shared memory. */
static bool plan_tiled(const conv_direct_launch *common, conv_direct_launch *L, char *why,
                       size_t why_size) {
  conv_direct_launch l = *common;
  const conv_direct_tiling *t = &l.tiling;
  l.kernel = find_kernel(t);
  if (l.kernel == nullptr) CONV_REJECT("no kernel compiled for this layout/px/py/kb");
  const bool unit = l.stride_h == 1 && l.stride_w == 1 && l.dil_h == 1 && l.dil_w == 1;
  if (t->layout == CONV_DIRECT_UNIT && !unit)
    CONV_REJECT("unit layout needs stride 1, dilation 1");

  l.tile_rows = t->ty * t->py;
  l.tile_cols = t->tx * t->px;
  l.tiles_p = conv_ceil_div(l.p, l.tile_rows);
  l.tiles_q = conv_ceil_div(l.q, l.tile_cols);
  l.s_pitch = round_up4(l.s);
  if (t->layout == CONV_DIRECT_UNIT) {
    l.halo_rows = l.tile_rows + l.r - 1;
    l.halo_cols = l.tile_cols + l.s - 1;
    l.pitch = l.tile_cols + l.s_pitch; /* the last float4 window reads this far */
  } else {
    l.halo_rows = (l.tile_rows - 1) * l.stride_h + (l.r - 1) * l.dil_h + 1;
    l.halo_cols = (l.tile_cols - 1) * l.stride_w + (l.s - 1) * l.dil_w + 1;
    l.pitch = round_up4(l.halo_cols);
  }
  l.vector_loads = (l.w & 3) == 0;

  const size_t filt_bytes = sizeof(float) * (size_t)t->kb * l.cg * l.r * l.s_pitch;
  const size_t tile_bytes = sizeof(float) * (size_t)l.halo_rows * l.pitch;
  if (filt_bytes + tile_bytes > CONV_DIRECT_SMEM_MAX)
    CONV_REJECT("needs %zu bytes of shared memory, more than %zu", filt_bytes + tile_bytes,
           (size_t)CONV_DIRECT_SMEM_MAX);
  /* Stage as many input channels at once as fit in 48 KiB (at least one):
   * fewer barriers, more loads in flight, still several blocks per SM. */
  const size_t stage_budget = (size_t)48 << 10;
  size_t fit = stage_budget > filt_bytes ? (stage_budget - filt_bytes) / tile_bytes : 0;
  l.stage_channels = fit < 1 ? 1 : (fit > (size_t)l.cg ? l.cg : (int)fit);
  l.smem_bytes = filt_bytes + tile_bytes * (size_t)l.stage_channels;

  const int64_t blocks = (int64_t)l.n * l.groups * l.kchunks * l.tiles_p * l.tiles_q;
  if (blocks > INT32_MAX)
    CONV_REJECT("%lld blocks: too many for one launch", (long long)blocks);
  l.grid[0] = (unsigned)blocks;
  l.grid[1] = l.grid[2] = 1;
  *L = l;
  return true;
}

/* SIMPLE: blocks of tx x ty threads over each output plane, a plane per
 * (image, output channel) along the grid's z. */
static bool plan_simple(const conv_direct_launch *common, const conv_shape *shape,
                        conv_dtype dtype, conv_direct_launch *L, char *why, size_t why_size) {
  conv_direct_launch l = *common;
  const conv_direct_tiling *t = &l.tiling;
  if (t->px != 1 || t->py != 1 || t->kb != 1)
    CONV_REJECT("simple layout: px, py and kb are 1");
  l.kernel = find_simple_kernel(dtype, l.r, l.s, l.epilogue != CONV_EPILOGUE_NONE, l.cg == 1,
                               l.dil_h == 1 && l.dil_w == 1);
  if (l.kernel == nullptr)
    CONV_REJECT("simple layout: filters 1x1, 3x3, 5x5 or 7x7 only, not %dx%d", l.r, l.s);
  const int64_t outputs = (int64_t)l.n * l.k * l.p * l.q;
  if (outputs > CONV_DIRECT_SIMPLE_MAX_OUTPUTS)
    CONV_REJECT("simple layout: %lld outputs, more than %lld", (long long)outputs,
                (long long)CONV_DIRECT_SIMPLE_MAX_OUTPUTS);
  /* Half the 32-bit range: a row's first input, padding included, stays
   * within it. */
  if (shape->x_elems > INT32_MAX / 2 || shape->w_elems > INT32_MAX / 2)
    CONV_REJECT("simple layout: a tensor past 2^30 elements (32-bit offsets)");
  const int64_t planes = (int64_t)l.n * l.k;
  if (planes > 65535)
    CONV_REJECT("simple layout: %lld output planes, more than 65535", (long long)planes);
  l.by_k = conv_divisor_make(l.k);
  l.by_kg = conv_divisor_make(l.kg);
  l.smem_bytes = 0;
  l.grid[0] = (unsigned)conv_ceil_div(l.q, t->tx);
  l.grid[1] = (unsigned)conv_ceil_div(l.p, t->ty);
  l.grid[2] = (unsigned)planes;
  *L = l;
  return true;
}

extern "C" bool conv_direct_plan(const conv_problem *pb, const conv_direct_tiling *t,
                                 conv_direct_launch *L, char *why, size_t why_size) {
  if (t->layout != CONV_DIRECT_GENERIC && t->layout != CONV_DIRECT_UNIT &&
      t->layout != CONV_DIRECT_WINDOW && t->layout != CONV_DIRECT_SIMPLE &&
      t->layout != CONV_DIRECT_NHWC)
    CONV_REJECT("no layout %d", t->layout);
  if ((t->layout == CONV_DIRECT_NHWC) != (pb->layout == CONV_LAYOUT_NHWC))
    CONV_REJECT("the nhwc layout runs NHWC problems, the others NCHW ones");
  if (t->tx < 1 || t->ty < 1 || t->tx * t->ty > kMaxThreads)
    CONV_REJECT("%d x %d threads: not in [1, %d]", t->tx, t->ty, kMaxThreads);

  conv_shape shape;
  if (conv_problem_shape(pb, &shape) != CONV_OK) CONV_REJECT("invalid problem");
  const int64_t p = shape.p, q = shape.q;
  const int64_t dims[] = {pb->n, pb->c, pb->h, pb->w, pb->k, p, q, pb->r, pb->s,
                          pb->h * pb->w, p * q, pb->pad_h, pb->pad_w, pb->stride_h * pb->h,
                          pb->stride_w * pb->w, pb->dil_h * pb->r, pb->dil_w * pb->s};
  for (int64_t d : dims)
    if (!conv_fits_int(d)) CONV_REJECT("a size past 32-bit indexing");

  conv_direct_launch l = {};
  l.tiling = *t;
  conv_launch_set_geometry(l, pb, p, q);
  l.groups = (int)pb->groups;
  l.cg = (int)shape.c_per_group, l.kg = (int)shape.k_per_group;
  l.epilogue = (int)pb->epilogue;
  l.dtype = (int)pb->dtype;
  if (l.kg % t->kb != 0)
    CONV_REJECT("kb %d does not divide %d output channels per group", t->kb, l.kg);
  l.kchunks = l.kg / t->kb;
  if (t->layout == CONV_DIRECT_SIMPLE) return plan_simple(&l, &shape, pb->dtype, L, why, why_size);
  if (t->layout == CONV_DIRECT_NHWC) return conv_direct_nhwc_plan(pb, &l, L, why, why_size);
  if (t->layout == CONV_DIRECT_WINDOW) return conv_direct_window_plan(&l, L, why, why_size);
  if (pb->dtype != CONV_DTYPE_F32)
    CONV_REJECT("the %s layout is fp32 only (half types: the simple and window layouts)",
                t->layout == CONV_DIRECT_UNIT ? "unit" : "generic");
  return plan_tiled(&l, L, why, why_size);
}

extern "C" void conv_direct_threads_needed(const conv_problem *pb, const conv_direct_tiling *t,
                                           int64_t *columns, int64_t *rows) {
  conv_shape shape;
  if (conv_problem_shape(pb, &shape) != CONV_OK || t->px < 1 || t->py < 1) {
    *columns = *rows = 0;
    return;
  }
  if (t->layout == CONV_DIRECT_WINDOW) {
    *columns = conv_direct_window_threads(
        shape.q, t->px, conv_direct_window_spacing((int)pb->stride_w, (int)pb->dil_w));
    *rows = conv_direct_window_threads(
        shape.p, t->py, conv_direct_window_spacing((int)pb->stride_h, (int)pb->dil_h));
  } else {
    *columns = (shape.q + t->px - 1) / t->px;
    *rows = (shape.p + t->py - 1) / t->py;
  }
}

extern "C" cudaError_t conv_direct_configure(const conv_direct_launch *L) {
  if (L == NULL || L->kernel == NULL) return cudaErrorInvalidValue;
  /* The window and NHWC layouts stay within the default 48 KiB; SIMPLE
   * uses none. */
  if (L->tiling.layout == CONV_DIRECT_WINDOW || L->tiling.layout == CONV_DIRECT_SIMPLE ||
      L->tiling.layout == CONV_DIRECT_NHWC)
    return cudaSuccess;
  /* Always the same value, never this plan's own need: the attribute
   * belongs to the kernel, which other plans share, and lowering it would
   * make their launches fail. */
  return cudaFuncSetAttribute(L->kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                              (int)CONV_DIRECT_SMEM_MAX);
}

extern "C" cudaError_t conv_direct_forward(const conv_direct_launch *L, const float *x,
                                           const float *w, const float *bias, float *y,
                                           cudaStream_t stream) {
  if (L == NULL || L->kernel == NULL || x == NULL || w == NULL || y == NULL ||
      (L->epilogue != CONV_EPILOGUE_NONE && bias == NULL))
    return cudaErrorInvalidValue;
  const dim3 grid(L->grid[0], L->grid[1], L->grid[2]);
  const dim3 block2d((unsigned)L->tiling.tx, (unsigned)L->tiling.ty);
  if (L->tiling.layout == CONV_DIRECT_SIMPLE)
    return conv_launch(L->pdl, (void (*)(simple_args))L->kernel, grid, block2d, 0, stream,
                       simple_args_of(*L, x, w, bias, y));
  if (L->tiling.layout == CONV_DIRECT_NHWC) return conv_direct_nhwc_forward(L, x, w, bias, y, stream);
  /* The window layout indexes threads in two dimensions, the tiled ones in
   * one. */
  if (L->tiling.layout == CONV_DIRECT_WINDOW)
    return conv_launch(L->pdl, (window_fn)L->kernel, grid, block2d, L->smem_bytes, stream, *L,
                       (const void *)x, (const void *)w, bias, (void *)y);
  const dim3 block((unsigned)(L->tiling.tx * L->tiling.ty));
  return conv_launch(L->pdl, (kernel_fn)L->kernel, grid, block, L->smem_bytes, stream, *L, x, w,
                     bias, y);
}
