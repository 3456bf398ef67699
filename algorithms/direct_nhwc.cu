/*
 * direct_nhwc.cu -- see direct_nhwc.h.
 */
#include "algorithms/direct_nhwc.h"
#include "algorithms/common/elements.cuh"
#include "algorithms/common/epilogue.cuh"
#include "algorithms/common/launch_checks.h"
#include "algorithms/common/launch_plan.cuh"
#include "algorithms/common/pdl.cuh"

#include <string.h>

namespace {

const int kMaxThreads = 256;

/* What the kernel reads, in a small parameter block (see direct_channel.cu's
 * simple_args for why not conv_direct_launch's 300 bytes). */
struct nhwc_args {
  const void *x, *w; /* elements of the kernel's T */
  const float *bias;
  void *y;
  int c, h, w_, p, q, r, s;
  int stride_h, stride_w, pad_h, pad_w, dil_h, dil_w;
  int epilogue;
};

/* The K outputs of a pixel, each rounded once, as 16-byte stores where K
 * is a multiple of 8, 4-byte stores of pairs where it is even. */
template <typename T, int K>
__device__ __forceinline__ void store_pixel(T *out, const float (&acc)[K]) {
  if constexpr (K % 8 == 0) {
#pragma unroll
    for (int k = 0; k < K; k += 8) conv_store_elements<8>(out + k, acc + k);
  } else if constexpr (K % 2 == 0) {
#pragma unroll
    for (int k = 0; k < K; k += 2) conv_store_elements<2>(out + k, acc + k);
  } else {
#pragma unroll
    for (int k = 0; k < K; k++) out[k] = conv_element_from_float<T>(acc[k]);
  }
}

/* Thread (q, p) of grid plane n computes output pixel (n, p, q), all K
 * channels.  VEC8: C is a multiple of 8, a pixel's channels are read as
 * 16-byte loads. */
template <typename T, int K, bool VEC8>
__global__ void __launch_bounds__(kMaxThreads) nhwc_pixel_kernel(const nhwc_args A) {
  extern __shared__ __align__(16) float filt[]; /* [r][s][c][K], fp32 */
  const T *X = static_cast<const T *>(A.x), *W = static_cast<const T *>(A.w);
  conv_pdl_enter();
  const int rsc = A.r * A.s * A.c;
  const int threads = blockDim.x * blockDim.y, tid = threadIdx.y * blockDim.x + threadIdx.x;
  /* w is K R S C: w[k][j] with j = (r*s + s')*c + c', staged at j*K + k. */
  for (int i = tid; i < rsc * K; i += threads) {
    const int j = i / K, k = i - j * K;
    filt[i] = conv_element_to_float(__ldg(W + (int64_t)k * rsc + j));
  }
  __syncthreads();
  const int q = (int)(blockIdx.x * blockDim.x + threadIdx.x);
  const int p = (int)(blockIdx.y * blockDim.y + threadIdx.y);
  const int n = (int)blockIdx.z;
  if (q >= A.q || p >= A.p) return;
  float acc[K];
#pragma unroll
  for (int k = 0; k < K; k++) acc[k] = 0.0f;
  const int iy0 = p * A.stride_h - A.pad_h, ix0 = q * A.stride_w - A.pad_w;
  for (int r = 0; r < A.r; r++) {
    const int iy = iy0 + r * A.dil_h;
    if ((unsigned)iy >= (unsigned)A.h) continue;
    for (int s = 0; s < A.s; s++) {
      const int ix = ix0 + s * A.dil_w;
      if ((unsigned)ix >= (unsigned)A.w_) continue;
      const T *px = X + (((int64_t)n * A.h + iy) * A.w_ + ix) * A.c;
      const float *f = filt + (r * A.s + s) * A.c * K;
      if constexpr (VEC8) {
        for (int c0 = 0; c0 < A.c; c0 += 8) {
          float v[8];
          conv_load_elements<8>(px + c0, v);
#pragma unroll
          for (int e = 0; e < 8; e++)
#pragma unroll
            for (int k = 0; k < K; k++) acc[k] = fmaf(v[e], f[(c0 + e) * K + k], acc[k]);
        }
      } else {
        for (int c = 0; c < A.c; c++) {
          const float v = conv_element_to_float(__ldg(px + c));
#pragma unroll
          for (int k = 0; k < K; k++) acc[k] = fmaf(v, f[c * K + k], acc[k]);
        }
      }
    }
  }
  if (A.epilogue != CONV_EPILOGUE_NONE) {
#pragma unroll
    for (int k = 0; k < K; k++) acc[k] = conv_epilogue_apply(A.epilogue, acc[k], __ldg(A.bias + k));
  }
  store_pixel<T, K>(static_cast<T *>(A.y) + (((int64_t)n * A.p + p) * A.q + q) * K, acc);
}

template <typename T, int K>
const void *kernel_for(bool vec8) {
  return vec8 ? (const void *)nhwc_pixel_kernel<T, K, true>
              : (const void *)nhwc_pixel_kernel<T, K, false>;
}

template <typename T>
const void *kernel_for(int k, bool vec8) {
  switch (k) {
    case 1: return kernel_for<T, 1>(vec8);
    case 2: return kernel_for<T, 2>(vec8);
    case 4: return kernel_for<T, 4>(vec8);
    case 8: return kernel_for<T, 8>(vec8);
    case 16: return kernel_for<T, 16>(vec8);
    case 32: return kernel_for<T, 32>(vec8);
    default: return nullptr;
  }
}

}  // namespace

extern "C" bool conv_direct_nhwc_plan(const conv_problem *pb, const conv_direct_launch *common,
                                      conv_direct_launch *L, char *why, size_t why_size) {
  conv_direct_launch l = *common;
  const conv_direct_tiling *t = &l.tiling;
  if (pb->layout != CONV_LAYOUT_NHWC || pb->direction != CONV_FORWARD)
    CONV_REJECT("nhwc layout: NHWC forward convolutions only");
  if (pb->dtype == CONV_DTYPE_F32) CONV_REJECT("nhwc layout: fp16 and bf16 only");
  if (l.groups != 1) CONV_REJECT("nhwc layout: one group only, not %d", l.groups);
  if (t->px != 1 || t->py != 1 || t->kb != l.k)
    CONV_REJECT("nhwc layout: px and py are 1, kb is the output channels (%d)", l.k);
  const bool vec8 = l.c % 8 == 0;
  l.kernel = pb->dtype == CONV_DTYPE_F16 ? kernel_for<__half>(l.k, vec8)
                                         : kernel_for<__nv_bfloat16>(l.k, vec8);
  if (l.kernel == nullptr)
    CONV_REJECT("nhwc layout: 1, 2, 4, 8, 16 or 32 output channels, not %d", l.k);
  l.smem_bytes = sizeof(float) * (size_t)l.r * l.s * l.c * l.k;
  if (l.smem_bytes > CONV_DIRECT_NHWC_SMEM_MAX)
    CONV_REJECT("nhwc layout: filters need %zu bytes of shared memory, more than %zu",
                l.smem_bytes, (size_t)CONV_DIRECT_NHWC_SMEM_MAX);
  if (l.n > 65535) CONV_REJECT("nhwc layout: %d images, more than 65535", l.n);
  l.vector_loads = vec8;
  l.grid[0] = (unsigned)conv_ceil_div(l.q, t->tx);
  l.grid[1] = (unsigned)conv_ceil_div(l.p, t->ty);
  l.grid[2] = (unsigned)l.n;
  *L = l;
  return true;
}

extern "C" cudaError_t conv_direct_nhwc_forward(const conv_direct_launch *L, const void *x,
                                                const void *w, const float *bias, void *y,
                                                cudaStream_t stream) {
  const nhwc_args args = {x,        w,          bias,       y,         L->c,      L->h,
                          L->w,     L->p,       L->q,       L->r,      L->s,      L->stride_h,
                          L->stride_w, L->pad_h, L->pad_w,  L->dil_h,  L->dil_w,  L->epilogue};
  return conv_launch(L->pdl, (void (*)(nhwc_args))L->kernel,
                     dim3(L->grid[0], L->grid[1], L->grid[2]),
                     dim3((unsigned)L->tiling.tx, (unsigned)L->tiling.ty), L->smem_bytes, stream,
                     args);
}
