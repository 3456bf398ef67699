/*
 * patch_filter.cu -- the kernels of patch_filter.h and their planning.
 *
 * Grid: `blocks` resident blocks; block b takes image groups b, b +
 * blocks, ... in order.  Thread t owns output channels 8 (t / C) .. + 8
 * of input channel t % C, so the 32 lanes of a warp share their dy values
 * (broadcast loads) and read 32 consecutive x planes (an odd pitch: no
 * bank conflicts).
 */
#include <climits>
#include <cstdint>

#include "algorithms/launch_checks.h"
#include "algorithms/patch_filter.h"
#include "algorithms/staging.cuh"

namespace {

constexpr int kOut = 8;  /* output channels a thread owns */
constexpr int kTaps = 9; /* 3x3                           */

struct pf_params {
  const float *x, *dy;
  float *partial; /* blocks x k c 9 */
  int n, c, k, groups, images, x_pitch, stage_floats;
};

/* Starts copying the images [first, first + images) of one group (those
 * below n) into `stage`: x planes of hw*hw floats at an odd pitch (4-byte
 * copies), then dy as it is in memory (16-byte copies: k hw hw floats an
 * image, a multiple of 4). */
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
    cp_async16(ds + 4 * i, dy + 4 * i, 16);
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

  /* This block's groups: b, b + blocks, ...; `mine` of them. */
  const int blocks = (int)gridDim.x, b = (int)blockIdx.x;
  const int mine = (a.groups - b + blocks - 1) / blocks;
#pragma unroll
  for (int st = 0; st < STAGES - 1; st++) {
    if (st < mine) stage_group<HW>(a, smem + st * a.stage_floats, (b + st * blocks) * a.images);
    cp_async_commit();
  }
  for (int g = 0; g < mine; g++) {
    /* Group g is in, and every thread is done with the stage the next
     * copies overwrite (read for group g - 1). */
    cp_async_wait<STAGES - 2>();
    __syncthreads();
    const int ahead = g + STAGES - 1;
    if (ahead < mine)
      stage_group<HW>(a, smem + ahead % STAGES * a.stage_floats, (b + ahead * blocks) * a.images);
    cp_async_commit();
    const float *const stage = smem + g % STAGES * a.stage_floats;
    const int first = (b + g * blocks) * a.images, count = min(a.images, a.n - first);
    const float *const ds = stage + a.images * a.c * a.x_pitch;
    for (int img = 0; img < count; img++)
      add_image<HW>(acc, stage + (img * a.c + c) * a.x_pitch,
                    ds + ((int64_t)img * a.k + k0) * kPlane);
  }
  cp_async_wait<0>();
  /* dw's layout, k c r s: this block's sums. */
  float *const out = a.partial + (int64_t)b * a.k * a.c * kTaps + ((int64_t)k0 * a.c + c) * kTaps;
#pragma unroll
  for (int i = 0; i < kOut; i++)
#pragma unroll
    for (int t = 0; t < kTaps; t++) out[(int64_t)i * a.c * kTaps + t] = acc[i][t];
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
  int hw, stages;
  const void *kernel;
};

#define PF_INSTANCE(hw, st) {hw, st, (const void *)patch_filter_kernel<hw, st>}
const pf_instance kInstances[] = {PF_INSTANCE(4, 2), PF_INSTANCE(4, 3), PF_INSTANCE(8, 2),
                                  PF_INSTANCE(8, 3)};
#undef PF_INSTANCE

const void *find_kernel(int hw, int stages) {
  for (const pf_instance &i : kInstances)
    if (i.hw == hw && i.stages == stages) return i.kernel;
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
  const void *kernel = find_kernel((int)pb->h, t->stages);
  if (kernel == nullptr) CONV_REJECT("no kernel compiled for %d stages", t->stages);
  if (t->images * pb->c % 4 != 0)
    CONV_REJECT("%d images of %lld channels: dy would not start 16-byte aligned", t->images,
                (long long)pb->c);
  const int64_t plane = pb->h * pb->w, x_pitch = plane + 1;
  const int64_t stage = (int64_t)t->images * (pb->c * x_pitch + pb->k * plane);
  const size_t smem = (size_t)stage * t->stages * sizeof(float);
  if (smem > CONV_PATCH_FILTER_SMEM_MAX)
    CONV_REJECT("%zu bytes of shared memory: past %zu", smem, (size_t)CONV_PATCH_FILTER_SMEM_MAX);
  if (!conv_fits_int(pb->n * pb->c * plane) || !conv_fits_int(pb->n * pb->k * plane) ||
      !conv_fits_int(pb->n + t->images))
    CONV_REJECT("sizes past 32-bit indexing");
  conv_patch_filter_launch l = {};
  l.tiling = *t;
  l.kernel = kernel;
  l.sum_kernel = (const void *)sum_blocks;
  l.n = (int)pb->n, l.c = (int)pb->c, l.k = (int)pb->k, l.hw = (int)pb->h;
  l.threads = (int)threads;
  l.groups = (int)((pb->n + t->images - 1) / t->images);
  l.x_pitch = (int)x_pitch;
  l.stage_floats = (int)stage;
  l.smem_bytes = smem;
  *L = l;
  return true;
}

extern "C" cudaError_t conv_patch_filter_configure(conv_patch_filter_launch *L, int sm_count) {
  if (L == NULL || L->kernel == NULL || sm_count < 1) return cudaErrorInvalidValue;
  cudaError_t e = cudaSuccess;
  if (L->smem_bytes > (48u << 10)) {
    int device = 0, optin = 0;
    e = cudaGetDevice(&device);
    if (e == cudaSuccess)
      e = cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device);
    if (e != cudaSuccess) return e;
    if ((size_t)optin < L->smem_bytes) return cudaErrorInvalidConfiguration;
    /* The device's limit, never this plan's own need: the attribute
     * belongs to the kernel, which other plans share. */
    e = cudaFuncSetAttribute(L->kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, optin);
    if (e != cudaSuccess) return e;
  }
  int per_sm = 0;
  e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, L->kernel, L->threads, L->smem_bytes);
  if (e != cudaSuccess) return e;
  if (per_sm < 1) return cudaErrorInvalidConfiguration;
  const int64_t resident = (int64_t)per_sm * sm_count;
  L->blocks = (unsigned)(resident < L->groups ? resident : L->groups);
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
  void *args[] = {&a};
  cudaError_t e = cudaLaunchKernel(L->kernel, dim3(L->blocks), dim3((unsigned)L->threads), args,
                                   L->smem_bytes, stream);
  if (e == cudaSuccess) {
    const int count = L->k * L->c * kTaps;
    sum_blocks<<<(count + 255) / 256, 256, 0, stream>>>(a.partial, (int)L->blocks, count, dw);
    e = cudaGetLastError();
  }
  /* As after a <<<>>> launch: the error is returned, not left pending. */
  if (e != cudaSuccess) (void)cudaGetLastError();
  return e;
}
