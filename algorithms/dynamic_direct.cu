/*
 * dynamic_direct.cu -- see dynamic_direct.h.
 */
#include "algorithms/dynamic_direct.h"
#include "algorithms/launch_checks.h"

#include <stdio.h>

namespace {

const int kMaxThreads = 256;
const size_t kMaxShared = 48 * 1024; /* without opting in to more */

/* A block's place: its image, group, channel chunk and tile. */
struct block_place {
  int b, g, c0, c1; /* channels [c0, c1) */
  int x0, y0;       /* the tile's first column and row (of the pass's pixels) */
};

__device__ __forceinline__ block_place place_of_block(const conv_dyn_direct_launch &L) {
  unsigned i = blockIdx.x;
  block_place at;
  const int tx = (int)(i % (unsigned)L.tiles_x);
  i /= (unsigned)L.tiles_x;
  const int ty = (int)(i % (unsigned)L.tiles_y);
  i /= (unsigned)L.tiles_y;
  const int chunk = (int)(i % (unsigned)L.chunks);
  i /= (unsigned)L.chunks;
  at.g = (int)(i % (unsigned)L.d.groups);
  at.b = (int)(i / (unsigned)L.d.groups);
  at.c0 = at.g * L.d.cg + chunk * L.tiling.cb;
  at.c1 = min(at.c0 + L.tiling.cb, (at.g + 1) * L.d.cg);
  at.x0 = tx * L.tiling.tw;
  at.y0 = ty * L.tiling.th;
  return at;
}

/* Stages channel plane xc's input tile for output tile (y0, x0) into
 * `tile` (in_h x in_w, zeros outside the image).  The caller syncs. */
template <int S>
__device__ __forceinline__ void stage_tile(const conv_dyn_direct_launch &L, const float *xc,
                                           int y0, int x0, float *tile) {
  const int top = y0 * S - L.d.pad, left = x0 * S - L.d.pad;
  const int count = L.in_h * L.in_w;
  const int threads = blockDim.x * blockDim.y;
  for (int i = threadIdx.y * blockDim.x + threadIdx.x; i < count; i += threads) {
    const int r = i / L.in_w, col = i - r * L.in_w;
    const int ih = top + r, iw = left + col;
    tile[i] = ih >= 0 && ih < L.d.h && iw >= 0 && iw < L.d.w ? __ldg(xc + ih * L.d.w + iw) : 0.0f;
  }
}

/* FORWARD: the thread's filter in registers, applied to every channel of
 * the chunk against the staged tile. */
template <int K, int S>
__global__ void __launch_bounds__(kMaxThreads)
    forward_kernel(const conv_dyn_direct_launch L, const float *__restrict__ x,
                   const float *__restrict__ wt, float *__restrict__ y) {
  extern __shared__ float tile[];
  const block_place at = place_of_block(L);
  const int q = at.x0 + threadIdx.x, p = at.y0 + threadIdx.y;
  const bool inside = p < L.d.p && q < L.d.q;
  const int plane = L.d.p * L.d.q, pixel = p * L.d.q + q;
  float f[K * K];
  const float *wp = wt + (at.b * L.d.groups + at.g) * (K * K) * plane + pixel;
#pragma unroll
  for (int t = 0; t < K * K; t++) f[t] = inside ? __ldg(wp + t * plane) : 0.0f;
  const int dil = L.d.dil;
  for (int c = at.c0; c < at.c1; c++) {
    stage_tile<S>(L, x + (at.b * L.d.c + c) * L.d.h * L.d.w, at.y0, at.x0, tile);
    __syncthreads();
    if (inside) {
      const float *t0 = tile + threadIdx.y * S * L.in_w + threadIdx.x * S;
      float acc = 0.0f;
#pragma unroll
      for (int i = 0; i < K; i++)
#pragma unroll
        for (int j = 0; j < K; j++) acc = fmaf(f[i * K + j], t0[i * dil * L.in_w + j * dil], acc);
      y[(at.b * L.d.c + c) * plane + pixel] = acc;
    }
    __syncthreads(); /* the tile is restaged for the next channel */
  }
}

/* Output index along one axis that tap `tap` of input index `in` came
 * from, or -1. */
template <int S>
__device__ __forceinline__ int source_of(int in, int tap, int pad, int dil, int outputs) {
  const int t = in + pad - tap * dil;
  if (t < 0) return -1;
  const int o = t / S;
  return o * S == t && o < outputs ? o : -1;
}

/* BACKWARD_DATA: one dx pixel a thread; its taps' sources and weights are
 * found once and serve every channel of the chunk. */
template <int K, int S>
__global__ void __launch_bounds__(kMaxThreads)
    backward_data_kernel(const conv_dyn_direct_launch L, const float *__restrict__ dy,
                         const float *__restrict__ wt, float *__restrict__ dx) {
  const block_place at = place_of_block(L);
  const int iw = at.x0 + threadIdx.x, ih = at.y0 + threadIdx.y;
  if (ih >= L.d.h || iw >= L.d.w) return; /* no barrier below */
  const int plane = L.d.p * L.d.q;
  int rows[K], cols[K];
#pragma unroll
  for (int i = 0; i < K; i++) rows[i] = source_of<S>(ih, i, L.d.pad, L.d.dil, L.d.p);
#pragma unroll
  for (int j = 0; j < K; j++) cols[j] = source_of<S>(iw, j, L.d.pad, L.d.dil, L.d.q);
  float wv[K * K];
  const float *wg = wt + (at.b * L.d.groups + at.g) * (K * K) * plane;
#pragma unroll
  for (int i = 0; i < K; i++)
#pragma unroll
    for (int j = 0; j < K; j++)
      wv[i * K + j] = rows[i] >= 0 && cols[j] >= 0
                          ? __ldg(wg + (i * K + j) * plane + rows[i] * L.d.q + cols[j])
                          : 0.0f;
  for (int c = at.c0; c < at.c1; c++) {
    const float *dyc = dy + (at.b * L.d.c + c) * plane;
    float acc = 0.0f;
#pragma unroll
    for (int i = 0; i < K; i++) {
      if (rows[i] < 0) continue;
#pragma unroll
      for (int j = 0; j < K; j++)
        /* Skipped, not multiplied by 0: dy may hold an Inf elsewhere. */
        if (cols[j] >= 0) acc = fmaf(wv[i * K + j], __ldg(dyc + rows[i] * L.d.q + cols[j]), acc);
    }
    dx[(at.b * L.d.c + c) * L.d.h * L.d.w + ih * L.d.w + iw] = acc;
  }
}

/* BACKWARD_FILTER: the k*k gradients of one output pixel in registers,
 * summed over the group's channels in order. */
template <int K, int S>
__global__ void __launch_bounds__(kMaxThreads)
    backward_filter_kernel(const conv_dyn_direct_launch L, const float *__restrict__ x,
                           const float *__restrict__ dy, float *__restrict__ dwt) {
  extern __shared__ float tile[];
  const block_place at = place_of_block(L);
  const int q = at.x0 + threadIdx.x, p = at.y0 + threadIdx.y;
  const bool inside = p < L.d.p && q < L.d.q;
  const int plane = L.d.p * L.d.q, pixel = p * L.d.q + q;
  float acc[K * K];
#pragma unroll
  for (int t = 0; t < K * K; t++) acc[t] = 0.0f;
  const int dil = L.d.dil;
  for (int c = at.c0; c < at.c1; c++) {
    stage_tile<S>(L, x + (at.b * L.d.c + c) * L.d.h * L.d.w, at.y0, at.x0, tile);
    __syncthreads();
    if (inside) {
      const float g = __ldg(dy + (at.b * L.d.c + c) * plane + pixel);
      const float *t0 = tile + threadIdx.y * S * L.in_w + threadIdx.x * S;
#pragma unroll
      for (int i = 0; i < K; i++)
#pragma unroll
        for (int j = 0; j < K; j++)
          acc[i * K + j] = fmaf(g, t0[i * dil * L.in_w + j * dil], acc[i * K + j]);
    }
    __syncthreads();
  }
  if (!inside) return;
  float *out = dwt + (at.b * L.d.groups + at.g) * (K * K) * plane + pixel;
#pragma unroll
  for (int t = 0; t < K * K; t++) out[t * plane] = acc[t];
}

template <int K, int S>
cudaError_t launch(const conv_dyn_direct_launch &L, float *x, float *wt, float *y,
                   cudaStream_t stream) {
  const dim3 block((unsigned)L.tiling.tw, (unsigned)L.tiling.th);
  switch (L.direction) {
    case CONV_FORWARD:
      forward_kernel<K, S><<<L.blocks, block, L.smem_bytes, stream>>>(L, x, wt, y);
      break;
    case CONV_BACKWARD_DATA:
      backward_data_kernel<K, S><<<L.blocks, block, 0, stream>>>(L, y, wt, x);
      break;
    case CONV_BACKWARD_FILTER:
      backward_filter_kernel<K, S><<<L.blocks, block, L.smem_bytes, stream>>>(L, x, y, wt);
      break;
    default:
      return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

template <int K>
cudaError_t launch_k(const conv_dyn_direct_launch &L, float *x, float *wt, float *y,
                     cudaStream_t stream) {
  return L.d.stride == 1 ? launch<K, 1>(L, x, wt, y, stream) : launch<K, 2>(L, x, wt, y, stream);
}

int ceil_div(int a, int b) { return (a + b - 1) / b; }

}  // namespace

extern "C" bool conv_dyn_direct_compiled(int64_t k) { return k == 1 || k == 3 || k == 5 || k == 7; }

extern "C" bool conv_dyn_direct_plan(const conv_problem *pb, const conv_dyn_direct_tiling *t,
                                     conv_dyn_direct_launch *L, char *why, size_t why_size) {
  conv_dyn_direct_launch l = {};
  if (pb == NULL || t == NULL || L == NULL) CONV_REJECT("NULL argument");
  if (!conv_dynamic_dims_make(pb, &l.d)) CONV_REJECT("not a valid dynamic problem");
  if (!conv_dyn_direct_compiled(l.d.k)) CONV_REJECT("no kernel for a %dx%d window", l.d.k, l.d.k);
  if (l.d.stride != 1 && l.d.stride != 2) CONV_REJECT("stride %d is not 1 or 2", l.d.stride);
  if (t->tw < 8 || t->tw % 8 != 0 || t->th < 1 || t->tw * t->th > kMaxThreads)
    CONV_REJECT("tile %dx%d: tw a multiple of 8, at most %d threads", t->tw, t->th, kMaxThreads);
  if (t->cb < 1 || t->cb > l.d.cg) CONV_REJECT("cb = %d is not in [1, %d]", t->cb, l.d.cg);
  l.direction = pb->direction;
  if (l.direction == CONV_BACKWARD_FILTER && t->cb != l.d.cg)
    CONV_REJECT("backward-filter sums the whole group: cb must be %d", l.d.cg);
  l.tiling = *t;
  const bool data = l.direction == CONV_BACKWARD_DATA;
  l.tiles_x = ceil_div(data ? l.d.w : l.d.q, t->tw);
  l.tiles_y = ceil_div(data ? l.d.h : l.d.p, t->th);
  l.chunks = ceil_div(l.d.cg, t->cb);
  const int64_t blocks =
      (int64_t)l.tiles_x * l.tiles_y * l.chunks * l.d.groups * (int64_t)l.d.b;
  if (!conv_fits_int(blocks)) CONV_REJECT("%lld blocks: past 2^31 - 1", (long long)blocks);
  l.blocks = (unsigned)blocks;
  if (!data) {
    const int64_t span = (int64_t)(l.d.k - 1) * l.d.dil + 1;
    const int64_t in_w = (int64_t)(t->tw - 1) * l.d.stride + span;
    const int64_t in_h = (int64_t)(t->th - 1) * l.d.stride + span;
    const int64_t bytes = in_w * in_h * (int64_t)sizeof(float);
    if (bytes > (int64_t)kMaxShared)
      CONV_REJECT("staged tile %lldx%lld needs %lld bytes of shared memory, over %zu",
                  (long long)in_h, (long long)in_w, (long long)bytes, kMaxShared);
    l.in_w = (int)in_w, l.in_h = (int)in_h;
    l.smem_bytes = (size_t)bytes;
  }
  *L = l;
  return true;
}

extern "C" cudaError_t conv_dyn_direct_run(const conv_dyn_direct_launch *L, float *x, float *wt,
                                           float *y, cudaStream_t stream) {
  if (L == NULL || x == NULL || wt == NULL || y == NULL) return cudaErrorInvalidValue;
  switch (L->d.k) {
    case 1: return launch_k<1>(*L, x, wt, y, stream);
    case 3: return launch_k<3>(*L, x, wt, y, stream);
    case 5: return launch_k<5>(*L, x, wt, y, stream);
    case 7: return launch_k<7>(*L, x, wt, y, stream);
  }
  return cudaErrorInvalidValue;
}
