/*
 * patch_filter.cu -- the kernels of patch_filter.h and their planning.
 *
 * Grid: `blocks` resident blocks; block b takes image groups b, b +
 * blocks, ... in order.  FMA: thread t owns output channels 8 (t / C) ..
 * + 8 of input channel t % C, so the 32 lanes of a warp share their dy
 * values (broadcast loads) and read 32 consecutive x planes (an odd
 * pitch: no bank conflicts).  MMA: warp w owns output channels 32 (w %
 * (K / 32)) .. + 32 of input channels 8 (w / (K / 32)) .. + 8, all taps.
 */
#include <climits>
#include <cstdint>

#include "algorithms/common/kernels.h"
#include "algorithms/common/launch_checks.h"
#include "algorithms/common/mma_tf32.cuh"
#include "algorithms/common/pdl.cuh"
#include "algorithms/patch_filter.h"
#include "algorithms/common/staging.cuh"

namespace {

constexpr int kOut = 8;  /* output channels a thread owns */
constexpr int kTaps = 9; /* 3x3                           */

struct pf_params {
  const float *x, *dy;
  float *partial; /* blocks x k c 9 */
  int n, c, k, groups, images, x_pitch, stage_floats;
  bool dy_vec; /* dy 16-byte aligned: copied as float4s */
};

/* Starts copying the float4 at `src` (4 floats, 16-byte aligned in shared
 * memory), by one 16-byte copy where dy is 16-byte aligned, else by four. */
__device__ __forceinline__ void copy_quad(const pf_params &a, float *dst, const float *src) {
  if (a.dy_vec) {
    cp_async16(dst, src, 16);
    return;
  }
#pragma unroll
  for (int j = 0; j < 4; j++) cp_async4(dst + j, src + j, 4);
}

/* The MMA kernel's staged planes: x with a zero border of one, dy rows at
 * a pitch that puts a fragment's 32 lanes (row g, column t) on 32 banks. */
template <int HW>
struct mma_planes {
  static constexpr int kPix = HW * HW, kPad = HW + 2, kX = kPad * kPad, kDy = kPix + 4;
};

/* Starts copying the images [first, first + images) of one group (those
 * below n) into `stage`: x planes of hw*hw floats at an odd pitch (4-byte
 * copies), then dy as it is in memory (float4s: k hw hw floats an image, a
 * multiple of 4). */
template <int HW>
__device__ __forceinline__ void stage_group(const pf_params &a, float *stage, int first) {
  constexpr int kPlane = HW * HW;
  const int count = min(a.images, a.n - first);
  float *const xs = stage;
  float *const ds = stage + a.images * a.c * a.x_pitch;
  const int x_floats = count * a.c * kPlane;
  const float *const x = a.x + (int64_t)first * a.c * kPlane;
  for (int i = (int)threadIdx.x; i < x_floats; i += (int)blockDim.x) {
    const int plane = i / kPlane, j = i - plane * kPlane;
    cp_async4(xs + plane * a.x_pitch + j, x + i, 4);
  }
  const int dy_quads = count * a.k * kPlane / 4;
  const float *const dy = a.dy + (int64_t)first * a.k * kPlane;
  for (int i = (int)threadIdx.x; i < dy_quads; i += (int)blockDim.x)
    copy_quad(a, ds + 4 * i, dy + 4 * i);
}

/* The MMA kernel's stage: x planes into the interiors of bordered planes
 * (4-byte copies; the borders, zeroed once a block, are never written),
 * then dy rows at their pitch (float4s). */
template <int HW>
__device__ __forceinline__ void stage_group_mma(const pf_params &a, float *stage, int first) {
  using P = mma_planes<HW>;
  const int count = min(a.images, a.n - first);
  float *const xs = stage;
  float *const ds = stage + a.images * a.c * P::kX;
  const int x_floats = count * a.c * P::kPix;
  const float *const x = a.x + (int64_t)first * a.c * P::kPix;
  for (int i = (int)threadIdx.x; i < x_floats; i += (int)blockDim.x) {
    const int plane = i / P::kPix, j = i - plane * P::kPix;
    cp_async4(xs + plane * P::kX + (j / HW + 1) * P::kPad + j % HW + 1, x + i, 4);
  }
  constexpr int kQuads = P::kPix / 4;
  const int dy_quads = count * a.k * kQuads;
  const float *const dy = a.dy + (int64_t)first * a.k * P::kPix;
  for (int i = (int)threadIdx.x; i < dy_quads; i += (int)blockDim.x) {
    const int row = i / kQuads, quad = i - row * kQuads;
    copy_quad(a, ds + row * P::kDy + 4 * quad, dy + 4 * i);
  }
}

/* Walks this block's image groups, b, b + blocks, ... in order, with
 * STAGES - 1 groups' copies in flight: stage(buffer, first image) starts
 * a group's copies into a buffer, add(buffer, images) adds up a staged
 * group (its last one may be short).  Both kernels' pipeline. */
template <int STAGES, class Stage, class Add>
__device__ __forceinline__ void walk_groups(const pf_params &a, float *smem, Stage stage, Add add) {
  const int blocks = (int)gridDim.x, b = (int)blockIdx.x;
  const int mine = (a.groups - b + blocks - 1) / blocks;
#pragma unroll
  for (int st = 0; st < STAGES - 1; st++) {
    if (st < mine) stage(smem + st * a.stage_floats, (b + st * blocks) * a.images);
    cp_async_commit();
  }
  for (int g = 0; g < mine; g++) {
    /* Group g is in, and every thread is done with the buffer the next
     * copies overwrite (read for group g - 1). */
    cp_async_wait<STAGES - 2>();
    __syncthreads();
    const int ahead = g + STAGES - 1;
    if (ahead < mine) stage(smem + ahead % STAGES * a.stage_floats, (b + ahead * blocks) * a.images);
    cp_async_commit();
    const int first = (b + g * blocks) * a.images;
    add(smem + g % STAGES * a.stage_floats, min(a.images, a.n - first));
  }
  cp_async_wait<0>();
}

/* acc += one image's products for this thread: xs its input channel's
 * plane, ds its first output channel's dy plane.  Every pixel and tap is
 * unrolled, so a tap on the padding is no instruction at all. */
template <int HW>
__device__ __forceinline__ void add_image(float (&acc)[kOut][kTaps], const float *xs,
                                          const float *ds) {
  constexpr int kPlane = HW * HW;
#pragma unroll
  for (int p = 0; p < HW; p++)
#pragma unroll
    for (int q = 0; q < HW; q++) {
      float d[kOut];
#pragma unroll
      for (int i = 0; i < kOut; i++) d[i] = ds[i * kPlane + p * HW + q];
#pragma unroll
      for (int r = 0; r < 3; r++)
#pragma unroll
        for (int s = 0; s < 3; s++) {
          const int ih = p + r - 1, iw = q + s - 1;
          if (ih < 0 || ih >= HW || iw < 0 || iw >= HW) continue;
          const float v = xs[ih * HW + iw];
#pragma unroll
          for (int i = 0; i < kOut; i++) acc[i][r * 3 + s] = fmaf(d[i], v, acc[i][r * 3 + s]);
        }
    }
}

template <int HW, int STAGES>
__global__ void __launch_bounds__(CONV_PATCH_FILTER_THREADS_MAX)
    patch_filter_kernel(pf_params a) {
  constexpr int kPlane = HW * HW;
  extern __shared__ float4 smem_float4[];
  float *const smem = reinterpret_cast<float *>(smem_float4);
  const int c = (int)threadIdx.x % a.c, k0 = (int)threadIdx.x / a.c * kOut;
  float acc[kOut][kTaps];
#pragma unroll
  for (int i = 0; i < kOut; i++)
#pragma unroll
    for (int t = 0; t < kTaps; t++) acc[i][t] = 0.0f;

  walk_groups<STAGES>(
      a, smem, [&](float *stage, int first) { stage_group<HW>(a, stage, first); },
      [&](const float *stage, int count) {
        const float *const ds = stage + a.images * a.c * a.x_pitch;
        for (int img = 0; img < count; img++)
          add_image<HW>(acc, stage + (img * a.c + c) * a.x_pitch,
                        ds + ((int64_t)img * a.k + k0) * kPlane);
      });
  /* dw's layout, k c r s: this block's sums. */
  float *const out =
      a.partial + (int64_t)blockIdx.x * a.k * a.c * kTaps + ((int64_t)k0 * a.c + c) * kTaps;
#pragma unroll
  for (int i = 0; i < kOut; i++)
#pragma unroll
    for (int t = 0; t < kTaps; t++) out[(int64_t)i * a.c * kTaps + t] = acc[i][t];
}

/* acc += one image's products for a warp: the GEMM dW (32 x 72) += dY
 * (32 x pixels) X (pixels x 72), one k-step per 8 pixels.  `arow` is dy at
 * the lane's row g and column t; `xs` the image's x planes; bx[nt] the
 * lane's column g of n8 tile nt as a plane offset (its channel, tap row
 * and tap column).  Pixel t of a step (p, q) sits at p kPad + q more. */
template <int HW>
__device__ __forceinline__ void add_image_mma(float (&acc)[2][9][4], const float *arow,
                                              const float *xs, const int (&bx)[9], int t) {
  using P = mma_planes<HW>;
#pragma unroll
  for (int ks = 0; ks < P::kPix / 8; ks++) {
    /* Pixels 8 ks + t and 8 ks + t + 4 (t < 4): on 8-wide rows both in row
     * ks, columns t and t + 4; on 4-wide rows rows 2 ks and 2 ks + 1. */
    const int off0 = HW == 8 ? ks * P::kPad : 2 * ks * P::kPad;
    const int off1 = HW == 8 ? ks * P::kPad + 4 : (2 * ks + 1) * P::kPad;
    uint32_t af[2][4], bf[9][2];
#pragma unroll
    for (int mt = 0; mt < 2; mt++) mma_a_fragment<P::kDy>(arow + mt * 16 * P::kDy + ks * 8, af[mt]);
#pragma unroll
    for (int nt = 0; nt < 9; nt++) {
      bf[nt][0] = tf32_round(xs[bx[nt] + off0 + t]);
      bf[nt][1] = tf32_round(xs[bx[nt] + off1 + t]);
    }
#pragma unroll
    for (int mt = 0; mt < 2; mt++)
#pragma unroll
      for (int nt = 0; nt < 9; nt++) mma_tf32(acc[mt][nt], af[mt], bf[nt]);
  }
}

template <int HW, int STAGES>
__global__ void __launch_bounds__(256, 2) patch_filter_mma_kernel(pf_params a) {
  using P = mma_planes<HW>;
  extern __shared__ float4 smem_float4[];
  float *const smem = reinterpret_cast<float *>(smem_float4);
  /* The x borders: zero once, never written by a copy. */
  for (int st = 0; st < STAGES; st++)
    for (int i = (int)threadIdx.x; i < a.images * a.c * P::kX; i += (int)blockDim.x)
      smem[st * a.stage_floats + i] = 0.0f;
  __syncthreads();
  const int warp = (int)threadIdx.x / 32, lane = (int)threadIdx.x % 32;
  const int g = lane / 4, t = lane % 4;
  const int k_warps = a.k / 32, m0 = warp % k_warps * 32, c0 = warp / k_warps * 8;
  int bx[9];
#pragma unroll
  for (int nt = 0; nt < 9; nt++) {
    const int n = nt * 8 + g, c = c0 + n / 9, tap = n % 9;
    bx[nt] = c * P::kX + tap / 3 * P::kPad + tap % 3;
  }
  float acc[2][9][4];
#pragma unroll
  for (int mt = 0; mt < 2; mt++)
#pragma unroll
    for (int nt = 0; nt < 9; nt++)
#pragma unroll
      for (int v = 0; v < 4; v++) acc[mt][nt][v] = 0.0f;

  walk_groups<STAGES>(
      a, smem, [&](float *stage, int first) { stage_group_mma<HW>(a, stage, first); },
      [&](const float *stage, int count) {
        const float *const ds = stage + a.images * a.c * P::kX;
        for (int img = 0; img < count; img++)
          add_image_mma<HW>(acc, ds + (img * a.k + m0 + g) * P::kDy + t,
                            stage + img * a.c * P::kX, bx, t);
      });
  /* dw's layout, k c r s: column n of the warp's 72 is (c0 + n / 9, tap n % 9). */
  float *const out = a.partial + (int64_t)blockIdx.x * a.k * a.c * 9 + (int64_t)c0 * 9;
#pragma unroll
  for (int mt = 0; mt < 2; mt++)
#pragma unroll
    for (int nt = 0; nt < 9; nt++)
#pragma unroll
      for (int v = 0; v < 4; v++) {
        const int k = m0 + mt * 16 + g + (v >= 2 ? 8 : 0), n = nt * 8 + 2 * t + (v & 1);
        out[(int64_t)k * a.c * 9 + n] = acc[mt][nt][v];
      }
}

/* dw[j] = the blocks' sums of j, added in block order. */
__global__ void sum_blocks(const float *__restrict__ partial, int blocks, int count,
                           float *__restrict__ dw) {
  const int j = (int)(blockIdx.x * blockDim.x + threadIdx.x);
  if (j >= count) return;
  float sum = 0.0f;
  for (int b = 0; b < blocks; b++) sum += partial[(int64_t)b * count + j];
  dw[j] = sum;
}

struct pf_instance {
  int kind, hw, stages;
  const void *kernel;
};

#define PF_FMA(hw, st) {CONV_PATCH_FILTER_FMA, hw, st, (const void *)patch_filter_kernel<hw, st>}
#define PF_MMA(hw, st) \
  {CONV_PATCH_FILTER_MMA, hw, st, (const void *)patch_filter_mma_kernel<hw, st>}
const pf_instance kInstances[] = {PF_FMA(4, 2), PF_FMA(4, 3), PF_FMA(8, 2), PF_FMA(8, 3),
                                  PF_MMA(4, 2), PF_MMA(4, 3), PF_MMA(8, 2), PF_MMA(8, 3)};
#undef PF_FMA
#undef PF_MMA

const void *find_kernel(int kind, int hw, int stages) {
  for (const pf_instance &i : kInstances)
    if (i.kind == kind && i.hw == hw && i.stages == stages) return i.kernel;
  return nullptr;
}

}  // namespace

extern "C" bool conv_patch_filter_plan(const conv_problem *pb, const conv_patch_filter_tiling *t,
                                       conv_patch_filter_launch *L, char *why, size_t why_size) {
  if (pb == NULL || t == NULL || L == NULL) CONV_REJECT("NULL argument");
  if (pb->layout != CONV_LAYOUT_NCHW || pb->direction != CONV_BACKWARD_FILTER)
    CONV_REJECT("NCHW backward-filter passes only");
  if (pb->r != 3 || pb->s != 3 || pb->pad_h != 1 || pb->pad_w != 1 || pb->stride_h != 1 ||
      pb->stride_w != 1 || pb->dil_h != 1 || pb->dil_w != 1 || pb->groups != 1)
    CONV_REJECT("3x3 filters with padding 1, stride 1, no dilation, one group only");
  if (pb->h != pb->w || (pb->h != 4 && pb->h != 8)) CONV_REJECT("4x4 or 8x8 images only");
  if (pb->k % kOut != 0) CONV_REJECT("K = %lld: not a multiple of %d", (long long)pb->k, kOut);
  const int64_t threads = pb->k / kOut * pb->c;
  if (threads % 32 != 0 || threads > CONV_PATCH_FILTER_THREADS_MAX)
    CONV_REJECT("(K / 8) * C = %lld threads: not a multiple of 32 up to %d", (long long)threads,
                CONV_PATCH_FILTER_THREADS_MAX);
  if (t->images != 1 && t->images != 2 && t->images != 4 && t->images != 8)
    CONV_REJECT("%d images a stage: 1, 2, 4 or 8 only", t->images);
  const bool mma = t->kind == CONV_PATCH_FILTER_MMA;
  if (mma && pb->math != CONV_MATH_TF32) CONV_REJECT("TF32 tensor cores: TF32 mode only");
  if (mma && (pb->k % 32 != 0 || pb->c % 8 != 0 || pb->k / 32 * (pb->c / 8) > 8))
    CONV_REJECT("tensor cores: K a multiple of 32 and C of 8, (K / 32) (C / 8) warps up to 8");
  const void *kernel = find_kernel(t->kind, (int)pb->h, t->stages);
  if (kernel == nullptr)
    CONV_REJECT("no kernel compiled for kind %d, %d stages", t->kind, t->stages);
  if (t->images * pb->c % 4 != 0)
    CONV_REJECT("%d images of %lld channels: dy would not start 16-byte aligned", t->images,
                (long long)pb->c);
  const int64_t plane = pb->h * pb->w;
  const int64_t x_pitch = mma ? (pb->h + 2) * (pb->w + 2) : plane + 1;
  const int64_t dy_pitch = mma ? plane + 4 : plane;
  const int64_t stage = (int64_t)t->images * (pb->c * x_pitch + pb->k * dy_pitch);
  const size_t smem = (size_t)stage * t->stages * sizeof(float);
  if (smem > CONV_PATCH_FILTER_SMEM_MAX)
    CONV_REJECT("%zu bytes of shared memory: past %zu", smem, (size_t)CONV_PATCH_FILTER_SMEM_MAX);
  if (!conv_fits_int(pb->n * pb->c * plane) || !conv_fits_int(pb->n * pb->k * plane) ||
      !conv_fits_int(pb->n + t->images))
    CONV_REJECT("sizes past 32-bit indexing");
  conv_patch_filter_launch l = {};
  l.tiling = *t;
  l.kernel = kernel;
  l.n = (int)pb->n, l.c = (int)pb->c, l.k = (int)pb->k, l.hw = (int)pb->h;
  l.threads = (int)threads; /* for MMA too: (K / 8) C = 32 (K / 32) (C / 8) */
  l.groups = (int)((pb->n + t->images - 1) / t->images);
  l.x_pitch = (int)x_pitch, l.dy_pitch = (int)dy_pitch;
  l.stage_floats = (int)stage;
  l.smem_bytes = smem;
  *L = l;
  return true;
}

extern "C" cudaError_t conv_patch_filter_configure(conv_patch_filter_launch *L, int sm_count) {
  if (L == NULL || L->kernel == NULL) return cudaErrorInvalidValue;
  const cudaError_t e = conv_kernel_persistent_blocks(L->kernel, L->threads, L->smem_bytes,
                                                      sm_count, 1, L->groups, &L->blocks);
  if (e != cudaSuccess) return e;
  L->workspace_bytes = (size_t)L->blocks * L->k * L->c * kTaps * sizeof(float);
  return cudaSuccess;
}

extern "C" cudaError_t conv_patch_filter_run(const conv_patch_filter_launch *L, const float *x,
                                             const float *dy, float *dw, void *workspace,
                                             cudaStream_t stream) {
  if (L == NULL || L->kernel == NULL || L->blocks == 0 || x == NULL || dy == NULL || dw == NULL ||
      workspace == NULL)
    return cudaErrorInvalidValue;
  pf_params a;
  a.x = x, a.dy = dy, a.partial = static_cast<float *>(workspace);
  a.n = L->n, a.c = L->c, a.k = L->k, a.groups = L->groups, a.images = L->tiling.images;
  a.x_pitch = L->x_pitch, a.stage_floats = L->stage_floats;
  a.dy_vec = (uintptr_t)dy % 16 == 0;
  const cudaError_t e = conv_launch(false, (void (*)(pf_params))L->kernel, dim3(L->blocks),
                                    dim3((unsigned)L->threads), L->smem_bytes, stream, a);
  if (e != cudaSuccess) return e;
  const int count = L->k * L->c * kTaps;
  sum_blocks<<<(count + 255) / 256, 256, 0, stream>>>(a.partial, (int)L->blocks, count, dw);
  return cudaGetLastError();
}
