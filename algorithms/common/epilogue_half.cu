/*
 * epilogue_half.cu -- bias and ReLU applied in place to a half (fp16 or
 * bf16) NCHW or NHWC output, in fp32: for the cuDNN configs that run a
 * half problem's epilogue after the convolution
 * (CONV_CUDNN_KNOB_UNFUSED_EPILOGUE).  fp32 outputs go to conv_bias_act.
 */
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "algorithms/common/elements.cuh"
#include "algorithms/common/epilogue.cuh"
#include "algorithms/common/kernels.h"
#include "algorithms/common/launch_plan.cuh"

namespace {

/* One element per thread step; 64-bit indices: this pass is not where a
 * half model's time goes, and it must be right for any size. */
template <typename T>
__global__ void bias_act_half_kernel(T *__restrict__ y, const float *__restrict__ bias,
                                     int64_t count, int64_t k, int64_t plane, bool channels_last,
                                     int epilogue) {
  const int64_t step = (int64_t)gridDim.x * blockDim.x;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < count; i += step) {
    const int64_t channel = channels_last ? i % k : (i / plane) % k;
    const float v = conv_epilogue_apply(epilogue, conv_element_to_float(y[i]), __ldg(bias + channel));
    y[i] = conv_element_from_float<T>(v);
  }
}

template <typename T>
cudaError_t launch(const conv_problem *p, void *y, const float *bias, cudaStream_t stream) {
  const int64_t plane =
      conv_output_size(p->h, p->r, p->stride_h, p->pad_h, p->dil_h) *
      conv_output_size(p->w, p->s, p->stride_w, p->pad_w, p->dil_w);
  const int64_t count = p->n * p->k * plane;
  if (count <= 0) return cudaSuccess;
  const int threads = 256;
  const int64_t wanted = (count + threads - 1) / threads;
  const unsigned blocks = (unsigned)(wanted < (1 << 16) ? wanted : (1 << 16));
  bias_act_half_kernel<T><<<blocks, threads, 0, stream>>>(
      static_cast<T *>(y), bias, count, p->k, plane, p->layout == CONV_LAYOUT_NHWC, p->epilogue);
  return cudaGetLastError();
}

}  // namespace

extern "C" cudaError_t conv_bias_act_any_dtype(const conv_problem *problem, void *y,
                                               const float *bias, cudaStream_t stream) {
  if (problem == NULL) return cudaErrorInvalidValue;
  if (problem->epilogue == CONV_EPILOGUE_NONE) return cudaSuccess;
  if (y == NULL || bias == NULL) return cudaErrorInvalidValue;
  switch (problem->dtype) {
    case CONV_DTYPE_F32: return conv_bias_act(problem, static_cast<float *>(y), bias, stream);
    case CONV_DTYPE_F16: return launch<__half>(problem, y, bias, stream);
    case CONV_DTYPE_BF16: return launch<__nv_bfloat16>(problem, y, bias, stream);
  }
  return cudaErrorInvalidValue;
}
