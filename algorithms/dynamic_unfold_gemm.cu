/*
 * dynamic_unfold_gemm.cu -- dynamic_unfold_gemm's unfold kernel (dynamic_unfold_gemm.h).
 * One thread per element of u, consecutive threads on consecutive taps and
 * channels of one pixel: u is written in order, x read with the stride of
 * the window, which the caches absorb (the baseline's cost is the k*k-fold
 * copy itself).
 */
#include "algorithms/dynamic_unfold_gemm.h"

__global__ static void dynamic_unfold_kernel(const conv_dynamic_dims d, const float *__restrict__ x,
                                             int b0, int64_t count, float *__restrict__ u) {
  const int64_t step = (int64_t)gridDim.x * blockDim.x;
  const int64_t plane = (int64_t)d.p * d.q;
  for (int64_t o = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; o < count; o += step) {
    const int tap = (int)(o % d.taps);
    const int ci = (int)(o / d.taps % d.cg);
    const int64_t pixel = o / ((int64_t)d.taps * d.cg) % plane;
    const int64_t bg = o / ((int64_t)d.taps * d.cg * plane); /* image within the chunk, group */
    const int g = (int)(bg % d.groups), b = b0 + (int)(bg / d.groups);
    const int p = (int)(pixel / d.q), q = (int)(pixel % d.q);
    const int ih = p * d.stride - d.pad + tap / d.k * d.dil;
    const int iw = q * d.stride - d.pad + tap % d.k * d.dil;
    const int c = g * d.cg + ci;
    u[o] = ih >= 0 && ih < d.h && iw >= 0 && iw < d.w
               ? __ldg(x + (((int64_t)b * d.c + c) * d.h + ih) * d.w + iw)
               : 0.0f;
  }
}

extern "C" cudaError_t conv_dynamic_unfold(const conv_dynamic_dims *d, const float *x, int b0,
                                           int images, float *u, cudaStream_t stream) {
  if (d == NULL || x == NULL || u == NULL || b0 < 0 || images < 1 || b0 + images > d->b)
    return cudaErrorInvalidValue;
  const int64_t count = (int64_t)images * d->c * d->taps * d->p * d->q;
  const int threads = 256;
  int64_t blocks = (count + threads - 1) / threads;
  if (blocks > (1 << 20)) blocks = 1 << 20; /* the grid-stride loop covers the rest */
  dynamic_unfold_kernel<<<(unsigned)blocks, threads, 0, stream>>>(*d, x, b0, count, u);
  return cudaGetLastError();
}
