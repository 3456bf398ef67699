/*
 * padded_gemm.cu -- the padded_gemm candidate's kernel and launch (see
 * padded_gemm.h): a 3x3 NCHW convolution as a TF32 wgmma GEMM over the
 * images' padded grid, one producer and one consumer warpgroup a block.
 *
 * wgmma exists only for the arch-specific target sm_90a, so this file is
 * compiled for it alone (CMakeLists.txt) and padded_gemm.c offers the
 * candidate on compute capability 9.0 only.
 */
#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstring>

#include "algorithms/common/epilogue.cuh"
#include "algorithms/common/kernels.h"
#include "algorithms/common/launch_plan.cuh"
#include "algorithms/common/mma_tf32.cuh"
#include "algorithms/padded_gemm.h"
#include "algorithms/common/pdl.cuh"
#include "algorithms/common/staging.cuh"
#include "algorithms/common/wgmma.cuh"

#if defined(__CUDA_ARCH__) && !defined(__CUDA_ARCH_FEAT_SM90_ALL)
#error "padded_gemm.cu is compiled for sm_90a only"
#endif

namespace {

constexpr int kRows = 64;   /* filter rows (output channels) of a block: the wgmma's M */
constexpr int kTaps = 9;    /* 3 x 3 */
constexpr int kChunk = 8;   /* input channels a stage holds: the wgmma's K */
constexpr int kFilterFloats = kTaps * kChunk * kRows; /* a stage's A operand */
constexpr int kThreads = 256;                         /* producer + consumer warpgroup */
constexpr int kMaxPitch = 95;                         /* W + 2 a stage's positions allow */

/* The launch's numbers, by value: the kernel never reads host memory. */
struct pg_params {
  const float *x, *w, *bias;
  float *y;
  int n, h, wd, hw, x_image, y_image; /* sizes; floats of an input and an output image */
  int pitch, padded_rows, staged, crs, chunks, stage_floats, epilogue;
  bool vector_filters;                /* w 16-byte aligned: filter rows as float4s */
};

/* Rounds to TF32 as the tensor cores' inputs (mma_tf32.cuh's tf32_round). */
__device__ __forceinline__ float to_tf32(float v) { return __uint_as_float(tf32_round(v)); }

__device__ __forceinline__ void mbar_init(uint32_t bar, int count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}
__device__ __forceinline__ void mbar_wait(uint32_t bar, int parity) {
  asm volatile(
      "{\n.reg .pred p;\nWAIT_%=:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n"
      "@!p bra WAIT_%=;\n}\n" ::"r"(bar),
      "r"(parity)
      : "memory");
}
__device__ __forceinline__ void mbar_arrive(uint32_t bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}
/* Arrives on `bar` once this thread's earlier cp.async copies are done. */
__device__ __forceinline__ void mbar_arrive_copies(uint32_t bar) {
  asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(bar) : "memory");
}

/* d += A B for the warpgroup: A (64 x 8) and B (8 x 8 NT) through
 * descriptors; d in m16n8 fragments (warp w: rows 16 w + lane / 4 and + 8,
 * tile t: columns 8 t + 2 (lane % 4) and + 1). */
template <int NT>
__device__ __forceinline__ void wgmma_tf32(float (&d)[NT][4], uint64_t a, uint64_t b);

template <>
__device__ __forceinline__ void wgmma_tf32<16>(float (&d)[16][4], uint64_t a, uint64_t b) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k8.f32.tf32.tf32 {" WGMMA_REGS_NT16 "}, "
      "%64, %65, p, 1, 1;\n}\n"
      : WGMMA_D_NT16
      : "l"(a), "l"(b), "n"(1));
}

template <>
__device__ __forceinline__ void wgmma_tf32<32>(float (&d)[32][4], uint64_t a, uint64_t b) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n256k8.f32.tf32.tf32 {" WGMMA_REGS_NT32 "}, "
      "%128, %129, p, 1, 1;\n}\n"
      : WGMMA_D_NT32
      : "l"(a), "l"(b), "n"(1));
}

/* The producer warpgroup: per chunk of 8 input channels, waits for its
 * stage to be free, starts the inputs' copies, stores the filters it
 * loaded a chunk earlier (their load latency overlaps the previous
 * chunk's copies) and arrives on the stage's "full" barrier twice per
 * thread (stores now, copies when they land). */
template <int NT, int STAGES, bool KRSC>
__device__ __forceinline__ void produce(const pg_params &a, float *smem, uint32_t full0,
                                        uint32_t empty0, int q0, int k0) {
  constexpr int N = 8 * NT;
  constexpr int kSlots = (N + 2 * kMaxPitch + 2 + 31) / 32; /* 8 positions per warp a slot */
  const int tid = (int)threadIdx.x, lane = tid % 32, warp = tid / 32;
  /* Inputs: lane -> (position 8 slot + lane / 4, channel lane % 4) of the
   * warp's slots; where each reads x, relative to the chunk's first channel. */
  int x_offset[kSlots];
  uint32_t inside = 0;
#pragma unroll
  for (int j = 0; j < kSlots; j++) {
    const int u = (warp + 4 * j) * 8 + lane / 4, pos = q0 + u;
    const int row = pos / a.pitch, col = pos - row * a.pitch;
    const int b = row / a.padded_rows, i = row - b * a.padded_rows - 1, jj = col - 1;
    const bool ok = u < a.staged && b < a.n && i >= 0 && i < a.h && jj >= 0 && jj < a.wd;
    inside |= (ok ? 1u : 0u) << j;
    x_offset[j] = ok ? b * a.x_image + (lane % 4) * a.hw + i * a.wd + jj : 0;
  }
  /* Filters: thread -> (row tid / 2, channels 4 (tid % 2) + [0, 4)): 9
   * float4s of w, contiguous (K C R S) or one a tap (K R S C: the tap's 4
   * channels), and one float4 per tap into the stage. */
  const int row = tid / 2, half = tid % 2;
  const int channels = a.crs / kTaps;
  const float *w_row =
      a.w + (int64_t)(k0 + row) * a.crs + 4 * half * (KRSC ? 1 : kTaps);
  auto load_filters = [&](int chunk, float4(&v)[kTaps]) {
    if (chunk >= a.chunks) return;
    if (KRSC) {
      const float *src = w_row + chunk * kChunk;
#pragma unroll
      for (int i = 0; i < kTaps; i++)
        v[i] = a.vector_filters
                   ? __ldg(reinterpret_cast<const float4 *>(src + i * channels))
                   : make_float4(__ldg(src + i * channels), __ldg(src + i * channels + 1),
                                 __ldg(src + i * channels + 2), __ldg(src + i * channels + 3));
      return;
    }
    const float *src = w_row + (int64_t)chunk * kChunk * kTaps;
    if (a.vector_filters) {
#pragma unroll
      for (int i = 0; i < kTaps; i++) v[i] = __ldg(reinterpret_cast<const float4 *>(src) + i);
    } else {
#pragma unroll
      for (int i = 0; i < kTaps; i++)
        v[i] = make_float4(__ldg(src + 4 * i), __ldg(src + 4 * i + 1), __ldg(src + 4 * i + 2),
                           __ldg(src + 4 * i + 3));
    }
  };
  auto fill = [&](int chunk, const float4(&v)[kTaps]) {
    const int s = chunk % STAGES;
    if (chunk >= STAGES) mbar_wait(empty0 + 8 * s, ((chunk / STAGES) & 1) ^ 1);
    float *const stage = smem + s * a.stage_floats;
    float *const inputs = stage + kFilterFloats;
#pragma unroll
    for (int h4 = 0; h4 < 2; h4++) {
      const float *xs = a.x + (int64_t)(chunk * kChunk + 4 * h4) * a.hw;
#pragma unroll
      for (int j = 0; j < kSlots; j++) {
        if ((warp + 4 * j) * 8 >= a.staged) break;
        const int u = (warp + 4 * j) * 8 + lane / 4;
        cp_async4(inputs + (h4 * a.staged + u) * 4 + lane % 4, xs + x_offset[j],
                  (inside >> j & 1) ? 4 : 0);
      }
    }
    mbar_arrive_copies(full0 + 8 * s);
    /* v holds w[row][4 half + c][tap] at float 9 c + tap (K C R S), or
     * v[tap] the tap's 4 channels (K R S C): A's layout is
     * [tap][channels 4 half + [0, 4)][row][4].  Indices stay constants in
     * both branches, so that v stays in registers. */
    if (KRSC) {
#pragma unroll
      for (int tap = 0; tap < kTaps; tap++)
        *reinterpret_cast<float4 *>(stage + ((tap * 2 + half) * kRows + row) * 4) =
            make_float4(to_tf32(v[tap].x), to_tf32(v[tap].y), to_tf32(v[tap].z),
                        to_tf32(v[tap].w));
    } else {
      const float *f = reinterpret_cast<const float *>(v);
#pragma unroll
      for (int tap = 0; tap < kTaps; tap++)
        *reinterpret_cast<float4 *>(stage + ((tap * 2 + half) * kRows + row) * 4) =
            make_float4(to_tf32(f[tap]), to_tf32(f[kTaps + tap]), to_tf32(f[2 * kTaps + tap]),
                        to_tf32(f[3 * kTaps + tap]));
    }
    fence_proxy_async();
    mbar_arrive(full0 + 8 * s);
  };
  float4 ping[kTaps], pong[kTaps];
  load_filters(0, ping);
  for (int chunk = 0; chunk < a.chunks; chunk += 2) {
    load_filters(chunk + 1, pong);
    fill(chunk, ping);
    if (chunk + 1 == a.chunks) break;
    load_filters(chunk + 2, ping);
    fill(chunk + 1, pong);
  }
}

/* The consumer warpgroup: per chunk, once its stage is full, the 9 taps'
 * wgmmas; a stage is handed back when the next chunk's are issued and the
 * previous group is done. */
template <int NT, int STAGES>
__device__ __forceinline__ void consume(const pg_params &a, float *smem, uint32_t full0,
                                        uint32_t empty0, float (&acc)[NT][4]) {
  const uint32_t smem_base = (uint32_t)__cvta_generic_to_shared(smem);
#pragma unroll
  for (int t = 0; t < NT; t++) acc[t][0] = acc[t][1] = acc[t][2] = acc[t][3] = 0.0f;
  for (int chunk = 0; chunk < a.chunks; chunk++) {
    const int s = chunk % STAGES;
    mbar_wait(full0 + 8 * s, (chunk / STAGES) & 1);
    fence_proxy_async();
    const uint32_t filters = smem_base + s * a.stage_floats * 4;
    const uint32_t inputs = filters + kFilterFloats * 4;
    wgmma_acc_fence(acc);
    wgmma_fence();
#pragma unroll
    for (int r = 0; r < 3; r++)
#pragma unroll
      for (int q = 0; q < 3; q++) {
        const uint64_t da =
            wgmma_smem_matrix(filters + (r * 3 + q) * 2 * kRows * 16, kRows * 16, 128);
        const uint64_t db =
            wgmma_smem_matrix(inputs + (r * a.pitch + q) * 16, a.staged * 16, 128);
        wgmma_tf32<NT>(acc, da, db);
      }
    wgmma_commit();
    wgmma_wait<1>();
    if (chunk > 0 && threadIdx.x == 128) mbar_arrive(empty0 + 8 * ((chunk - 1) % STAGES));
  }
  wgmma_wait<0>();
  wgmma_acc_fence(acc);
}

/* Block (position tile blockIdx.x, output channels 64 blockIdx.y + [0, 64)):
 * warpgroup 0 stages, warpgroup 1 multiplies and stores. */
template <int NT, int STAGES, bool KRSC>
__global__ void __launch_bounds__(kThreads, 1) padded_gemm_kernel(pg_params a) {
  constexpr int N = 8 * NT, kPitchOut = N + 4;
  extern __shared__ float4 smem4[];
  float *const smem = reinterpret_cast<float *>(smem4);
  __shared__ __align__(8) uint64_t barriers[2 * STAGES];
  const uint32_t full0 = (uint32_t)__cvta_generic_to_shared(barriers);
  const uint32_t empty0 = full0 + 8 * STAGES;
  const int q0 = (int)blockIdx.x * N, k0 = (int)blockIdx.y * kRows;
  if (threadIdx.x == 0)
    for (int s = 0; s < STAGES; s++) mbar_init(full0 + 8 * s, 256), mbar_init(empty0 + 8 * s, 1);
  __syncthreads();
  if (threadIdx.x < 128) {
    produce<NT, STAGES, KRSC>(a, smem, full0, empty0, q0, k0);
    return;
  }
  float acc[NT][4];
  consume<NT, STAGES>(a, smem, full0, empty0, acc);
  /* Every stage is consumed: the output tile (64 rows x N positions) goes
   * through shared memory so that stores run along positions. */
  asm volatile("bar.sync 1, 128;\n" ::: "memory");
  const int ct = (int)threadIdx.x - 128, lane = ct % 32, warp = ct / 32;
#pragma unroll
  for (int t = 0; t < NT; t++) {
    float *p = smem + (warp * 16 + lane / 4) * kPitchOut + 8 * t + 2 * (lane % 4);
    p[0] = acc[t][0], p[1] = acc[t][1];
    p[8 * kPitchOut] = acc[t][2], p[8 * kPitchOut + 1] = acc[t][3];
  }
  asm volatile("bar.sync 1, 128;\n" ::: "memory");
  for (int qq = ct; qq < N; qq += 128) {
    const int pos = q0 + qq, row = pos / a.pitch, col = pos - row * a.pitch;
    const int b = row / a.padded_rows, i = row - b * a.padded_rows;
    if (b >= a.n || i >= a.h || col >= a.wd) continue;
    float *y = a.y + (int64_t)b * a.y_image + (int64_t)k0 * a.hw + i * a.wd + col;
#pragma unroll 8
    for (int kk = 0; kk < kRows; kk++) {
      const float bias = a.epilogue == CONV_EPILOGUE_NONE ? 0.0f : __ldg(a.bias + k0 + kk);
      y[(int64_t)kk * a.hw] = conv_epilogue_apply(a.epilogue, smem[kk * kPitchOut + qq], bias);
    }
  }
}

/* A tiling's kernels: for K C R S filters, and for K R S C ones. */
struct pg_instance {
  conv_padded_tiling tiling;
  const void *kernel, *kernel_krsc;
};

#define PG_KERNELS(NT, STAGES) \
  (const void *)padded_gemm_kernel<NT, STAGES, false>, \
      (const void *)padded_gemm_kernel<NT, STAGES, true>
const pg_instance kInstances[] = {
    {{256, 4}, PG_KERNELS(32, 4)},
    {{256, 3}, PG_KERNELS(32, 3)},
    {{128, 4}, PG_KERNELS(16, 4)},
};
#undef PG_KERNELS
constexpr int kInstanceCount = (int)(sizeof kInstances / sizeof kInstances[0]);
}  // namespace

extern "C" int conv_padded_tilings(conv_padded_tiling *out, int max) {
  return conv_list_tilings(kInstances, out, max);
}

extern "C" bool conv_padded_plan(const conv_problem *p, const conv_padded_tiling *tiling,
                                 conv_padded_launch *L, char *why, size_t why_size) {
  if (!conv_plan_tf32_nchw_forward(p, tiling, L, why, why_size)) return false;
  if (p->groups != 1 || p->r != 3 || p->s != 3 || p->stride_h != 1 || p->stride_w != 1 ||
      p->pad_h != 1 || p->pad_w != 1 || p->dil_h != 1 || p->dil_w != 1)
    return conv_refuse(why, why_size,
                       "only 3x3 filters, stride 1, padding 1, dilation 1, one group");
  if (p->c % kChunk != 0 || p->k % kRows != 0)
    return conv_refuse(why, why_size, "C must be a multiple of 8 and K of 64");
  const pg_instance *inst = NULL;
  for (int i = 0; i < kInstanceCount; i++)
    if (kInstances[i].tiling.positions == tiling->positions &&
        kInstances[i].tiling.stages == tiling->stages)
      inst = &kInstances[i];
  if (inst == NULL) return conv_refuse(why, why_size, "tiling not compiled");
  if (p->w + 2 > kMaxPitch)
    return conv_refuse(why, why_size, "rows wider than 93 (a stage's halo)");
  const int64_t pitch = p->w + 2, padded_rows = p->h + 2;
  const int64_t positions = p->n * padded_rows * pitch;
  if (positions + 2 * pitch + 2 + tiling->positions > INT_MAX ||
      p->n * p->c * p->h * p->w > INT_MAX || p->n * p->k * p->h * p->w > INT_MAX ||
      p->k * p->c * kTaps > INT_MAX)
    return conv_refuse(why, why_size, "sizes past 32-bit indexing");
  if (p->k / kRows > 65535)
    return conv_refuse(why, why_size, "more than 65535 blocks of output channels");
  memset(L, 0, sizeof *L);
  L->tiling = *tiling;
  /* The plan's problem is canonical (conv_problem_import): KRSC here is an
   * order that differs from K C R S (conv_problem_krsc_filters). */
  L->krsc_filters = p->filter_layout == CONV_FILTER_KRSC;
  L->kernel = L->krsc_filters ? inst->kernel_krsc : inst->kernel;
  L->n = (int)p->n, L->c = (int)p->c, L->h = (int)p->h, L->w = (int)p->w, L->k = (int)p->k;
  L->epilogue = (int)p->epilogue;
  L->pitch = (int)pitch, L->padded_rows = (int)padded_rows, L->positions = (int)positions;
  L->staged = (int)((tiling->positions + 2 * pitch + 2 + 7) / 8 * 8);
  L->stage_floats = (kFilterFloats + 2 * L->staged * 4 + 31) / 32 * 32;
  L->grid[0] = (unsigned)((positions + tiling->positions - 1) / tiling->positions);
  L->grid[1] = (unsigned)(p->k / kRows);
  L->threads = kThreads;
  const size_t stages = (size_t)tiling->stages * L->stage_floats * sizeof(float);
  const size_t out_tile = (size_t)kRows * (tiling->positions + 4) * sizeof(float);
  L->smem_bytes = stages > out_tile ? stages : out_tile;
  return true;
}

extern "C" cudaError_t conv_padded_configure(const conv_padded_launch *L) {
  return conv_launch_allow_smem(L);
}

extern "C" cudaError_t conv_padded_forward(const conv_padded_launch *L, const float *x,
                                           const float *w, const float *bias, float *y,
                                           cudaStream_t stream) {
  if (L == NULL || L->kernel == NULL) return cudaErrorInvalidValue;
  pg_params a;
  a.x = x, a.w = w, a.bias = bias, a.y = y;
  a.n = L->n, a.h = L->h, a.wd = L->w, a.hw = L->h * L->w;
  a.x_image = L->c * a.hw, a.y_image = L->k * a.hw;
  a.pitch = L->pitch, a.padded_rows = L->padded_rows, a.staged = L->staged;
  a.crs = L->c * kTaps, a.chunks = L->c / kChunk, a.stage_floats = L->stage_floats;
  a.epilogue = L->epilogue;
  a.vector_filters = ((uintptr_t)w & 15) == 0;
  return conv_launch(false, (void (*)(pg_params))L->kernel, dim3(L->grid[0], L->grid[1]),
                     dim3((unsigned)L->threads), L->smem_bytes, stream, a);
}
