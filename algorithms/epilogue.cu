/*
 * epilogue.cu -- bias and ReLU applied in place to an NCHW output, for
 * candidates whose library cannot fuse a per-channel bias (cuBLASLt's bias
 * runs along the other axis of our GEMM).
 */
#include "algorithms/kernels.h"

namespace {

struct bias_act_params {
  int64_t count;   /* n * k * p * q */
  int64_t k;       /* channels */
  int64_t plane;   /* p * q: elements sharing one bias value */
};

}  // namespace

template <bool RELU>
__global__ static void bias_act_kernel(const bias_act_params prm, float *__restrict__ y,
                                       const float *__restrict__ bias) {
  const int64_t step = (int64_t)gridDim.x * blockDim.x;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < prm.count; i += step) {
    float v = y[i] + bias[(i / prm.plane) % prm.k];
    /* Not fmaxf: it would turn a NaN (an unwritten, poisoned output) into 0
     * and hide it from validation. */
    if (RELU && v < 0.0f) v = 0.0f;
    y[i] = v;
  }
}

template <bool RELU>
static cudaError_t bias_act_launch(const bias_act_params &prm, float *y, const float *bias,
                                   cudaStream_t stream) {
  const int threads = 256;
  /* Memory-bound: a few waves of blocks saturate bandwidth; the grid-stride
   * loop covers any size. */
  const int64_t max_blocks = 1 << 16;
  int64_t blocks = (prm.count + threads - 1) / threads;
  if (blocks > max_blocks) blocks = max_blocks;
  bias_act_kernel<RELU><<<(unsigned)blocks, threads, 0, stream>>>(prm, y, bias);
  return cudaGetLastError();
}

extern "C" cudaError_t conv_bias_act(const conv_problem *problem, float *y, const float *bias,
                                     cudaStream_t stream) {
  if (problem == NULL) return cudaErrorInvalidValue;
  if (problem->epilogue == CONV_EPILOGUE_NONE) return cudaSuccess;
  if (y == NULL || bias == NULL) return cudaErrorInvalidValue;

  const int64_t p = (problem->h + 2 * problem->pad_h - problem->dil_h * (problem->r - 1) - 1) /
                        problem->stride_h +
                    1;
  const int64_t q = (problem->w + 2 * problem->pad_w - problem->dil_w * (problem->s - 1) - 1) /
                        problem->stride_w +
                    1;
  bias_act_params prm;
  prm.k = problem->k;
  prm.plane = p * q;
  prm.count = problem->n * problem->k * prm.plane;
  if (prm.count <= 0) return cudaSuccess;

  switch (problem->epilogue) {
    case CONV_EPILOGUE_BIAS:
      return bias_act_launch<false>(prm, y, bias, stream);
    case CONV_EPILOGUE_BIAS_RELU:
      return bias_act_launch<true>(prm, y, bias, stream);
    case CONV_EPILOGUE_NONE:
      break;
  }
  return cudaErrorInvalidValue;
}
