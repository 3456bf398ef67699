/*
 * epilogue.cu -- bias and ReLU applied in place to an NCHW or NHWC output, for
 * candidates whose library cannot fuse a per-channel bias (cuBLASLt's bias
 * runs along the other axis of our GEMM); and, for half problems, the same
 * from an fp32 buffer into the output with the one rounding after it.
 */
#include "algorithms/common/divisor.h"
#include "algorithms/common/elements.cuh"
#include "algorithms/common/kernels.h"
#include "algorithms/common/launch_plan.cuh"

namespace {

struct bias_act_params {
  int64_t count;      /* n * k * p * q */
  int64_t k;          /* channels */
  int64_t plane;      /* p * q: elements sharing one bias value (NCHW) */
  bool channels_last; /* NHWC: the channel is the innermost index */
};

/* The fast form: `vectors` groups of 1 or 4 floats, none straddling two
 * planes, fewer than 2^31 of them, so that the channel of a group is two
 * 32-bit multiply-shift divisions (64-bit division per element made the
 * pass compute-bound, at half the speed of PyTorch's bias add). */
struct bias_act_vector_params {
  uint32_t vectors;
  conv_divisor by_plane_vectors; /* plane / V */
  conv_divisor by_k;
};

}  // namespace

/* Not fmaxf: it would turn a NaN (an unwritten, poisoned output) into 0
 * and hide it from validation. */
template <bool RELU>
__device__ __forceinline__ float bias_act(float v, float b) {
  v += b;
  return RELU && v < 0.0f ? 0.0f : v;
}

/* act(v + b) for an epilogue chosen at run time (conv_epilogue_apply's
 * rule; NONE leaves v as it is). */
__device__ __forceinline__ static float bias_act_value(int epilogue, float v, float b) {
  if (epilogue == CONV_EPILOGUE_NONE) return v;
  return epilogue == CONV_EPILOGUE_BIAS_RELU ? bias_act<true>(v, b) : bias_act<false>(v, b);
}

template <bool RELU>
__global__ static void bias_act_kernel(const bias_act_params prm, float *__restrict__ y,
                                       const float *__restrict__ bias) {
  const int64_t step = (int64_t)gridDim.x * blockDim.x;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < prm.count; i += step)
    y[i] = bias_act<RELU>(y[i], bias[prm.channels_last ? i % prm.k : (i / prm.plane) % prm.k]);
}

template <bool RELU>
__device__ __forceinline__ void bias_act_vector(float4 &v, float b) {
  v.x = bias_act<RELU>(v.x, b);
  v.y = bias_act<RELU>(v.y, b);
  v.z = bias_act<RELU>(v.z, b);
  v.w = bias_act<RELU>(v.w, b);
}

template <bool RELU>
__device__ __forceinline__ void bias_act_vector(float &v, float b) {
  v = bias_act<RELU>(v, b);
}

/* VEC: float4 (planes of a multiple of 4 floats) or float. */
template <bool RELU, typename VEC>
__global__ static void bias_act_vector_kernel(const bias_act_vector_params prm,
                                              VEC *__restrict__ y,
                                              const float *__restrict__ bias) {
  const uint32_t step = gridDim.x * blockDim.x;
  for (uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < prm.vectors; i += step) {
    const uint32_t row = conv_divide(i, prm.by_plane_vectors);
    const uint32_t channel = row - conv_divide(row, prm.by_k) * prm.by_k.divisor;
    VEC v = y[i];
    bias_act_vector<RELU>(v, __ldg(bias + channel));
    y[i] = v;
  }
}

/* NHWC: channels are innermost, so a group of VEC floats (k a multiple of
 * 4 for float4) holds consecutive channels of one pixel. */
template <bool RELU>
__device__ __forceinline__ void bias_act_channels(float4 &v, const float *bias) {
  v.x = bias_act<RELU>(v.x, __ldg(bias));
  v.y = bias_act<RELU>(v.y, __ldg(bias + 1));
  v.z = bias_act<RELU>(v.z, __ldg(bias + 2));
  v.w = bias_act<RELU>(v.w, __ldg(bias + 3));
}

template <bool RELU>
__device__ __forceinline__ void bias_act_channels(float &v, const float *bias) {
  v = bias_act<RELU>(v, __ldg(bias));
}

template <bool RELU, typename VEC>
__global__ static void bias_act_nhwc_kernel(const bias_act_vector_params prm, VEC *__restrict__ y,
                                            const float *__restrict__ bias) {
  const uint32_t step = gridDim.x * blockDim.x;
  const uint32_t k_vectors = prm.by_k.divisor;
  for (uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < prm.vectors; i += step) {
    const uint32_t channel_vector = i - conv_divide(i, prm.by_k) * k_vectors;
    VEC v = y[i];
    bias_act_channels<RELU>(v, bias + channel_vector * (sizeof(VEC) / sizeof(float)));
    y[i] = v;
  }
}

/* Memory-bound: a few waves of blocks saturate bandwidth; the grid-stride
 * loops cover any size. */
static unsigned bias_act_blocks(int64_t items, int threads) {
  const int64_t max_blocks = 1 << 16;
  const int64_t blocks = (items + threads - 1) / threads;
  return (unsigned)(blocks > max_blocks ? max_blocks : blocks);
}

/* The fast forms' launch: y as groups of VEC, the NCHW kernel dividing a
 * group's index by the plane's groups and by k, the NHWC one by k's
 * groups (a plane of one). */
template <bool RELU, typename VEC, bool CHANNELS_LAST>
static void bias_act_vector_launch(const bias_act_params &prm, float *y, const float *bias,
                                   cudaStream_t stream) {
  const int width = (int)(sizeof(VEC) / sizeof(float)), threads = 256;
  bias_act_vector_params v;
  v.vectors = (uint32_t)(prm.count / width);
  v.by_plane_vectors = conv_divisor_make(CHANNELS_LAST ? 1 /* unused */ : (int)(prm.plane / width));
  v.by_k = conv_divisor_make((int)(CHANNELS_LAST ? prm.k / width : prm.k));
  const auto kernel =
      CHANNELS_LAST ? bias_act_nhwc_kernel<RELU, VEC> : bias_act_vector_kernel<RELU, VEC>;
  kernel<<<bias_act_blocks(v.vectors, threads), threads, 0, stream>>>(
      v, reinterpret_cast<VEC *>(y), bias);
}

template <bool RELU>
static cudaError_t bias_act_launch(const bias_act_params &prm, float *y, const float *bias,
                                   cudaStream_t stream) {
  const int threads = 256;
  const bool aligned = (uintptr_t)y % sizeof(float4) == 0;
  if (prm.channels_last && prm.count < ((int64_t)1 << 31)) {
    if (prm.k % 4 == 0 && aligned)
      bias_act_vector_launch<RELU, float4, true>(prm, y, bias, stream);
    else
      bias_act_vector_launch<RELU, float, true>(prm, y, bias, stream);
  } else if (prm.count >= ((int64_t)1 << 31)) /* past 32-bit indices: the plain form */
    bias_act_kernel<RELU><<<bias_act_blocks(prm.count, threads), threads, 0, stream>>>(prm, y,
                                                                                        bias);
  else if (prm.plane % 4 == 0 && aligned)
    bias_act_vector_launch<RELU, float4, false>(prm, y, bias, stream);
  else
    bias_act_vector_launch<RELU, float, false>(prm, y, bias, stream);
  return cudaGetLastError();
}

extern "C" cudaError_t conv_bias_act(const conv_problem *problem, float *y, const float *bias,
                                     cudaStream_t stream) {
  if (problem == NULL) return cudaErrorInvalidValue;
  if (problem->epilogue == CONV_EPILOGUE_NONE) return cudaSuccess;
  if (y == NULL || bias == NULL) return cudaErrorInvalidValue;

  const int64_t p = conv_output_size(problem->h, problem->r, problem->stride_h, problem->pad_h,
                                     problem->dil_h);
  const int64_t q = conv_output_size(problem->w, problem->s, problem->stride_w, problem->pad_w,
                                     problem->dil_w);
  bias_act_params prm;
  prm.k = problem->k;
  prm.plane = p * q;
  prm.count = problem->n * problem->k * prm.plane;
  prm.channels_last = problem->layout == CONV_LAYOUT_NHWC;
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

/* ---------------------------------------------------------------- half outputs */

namespace {

/* conv_bias_act_round's sizes: the channel of element i is
 * (i / plane) % k (NCHW) or i % k (NHWC, plane 1). */
struct bias_act_round_params {
  int64_t count, k, plane;
  int epilogue;
};

}  // namespace

/* One thread an element, a grid-stride loop; 64-bit indices (a pass over
 * the output once, memory-bound). */
template <typename T>
__global__ static void bias_act_round_kernel(const bias_act_round_params prm,
                                             const float *__restrict__ acc, T *__restrict__ y,
                                             const float *__restrict__ bias) {
  const int64_t step = (int64_t)gridDim.x * blockDim.x;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < prm.count; i += step) {
    const float b =
        prm.epilogue == CONV_EPILOGUE_NONE ? 0.0f : __ldg(bias + (i / prm.plane) % prm.k);
    y[i] = conv_element_from_float<T>(bias_act_value(prm.epilogue, acc[i], b));
  }
}

static cudaError_t bias_act_round_launch(const bias_act_round_params &prm, conv_dtype dtype,
                                         const float *acc, void *y, const float *bias,
                                         cudaStream_t stream) {
  if (dtype == CONV_DTYPE_F32 || acc == NULL || y == NULL) return cudaErrorInvalidValue;
  if (prm.count <= 0) return cudaSuccess;
  const int threads = 256;
  return conv_with_element_type(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    bias_act_round_kernel<T><<<bias_act_blocks(prm.count, threads), threads, 0, stream>>>(
        prm, acc, static_cast<T *>(y), bias);
    return cudaGetLastError();
  });
}

extern "C" cudaError_t conv_bias_act_round(const conv_problem *problem, const float *acc,
                                           void *y, const float *bias, cudaStream_t stream) {
  if (problem == NULL) return cudaErrorInvalidValue;
  if (problem->epilogue != CONV_EPILOGUE_NONE && bias == NULL) return cudaErrorInvalidValue;
  const int64_t p = conv_output_size(problem->h, problem->r, problem->stride_h, problem->pad_h,
                                     problem->dil_h);
  const int64_t q = conv_output_size(problem->w, problem->s, problem->stride_w, problem->pad_w,
                                     problem->dil_w);
  bias_act_round_params prm;
  prm.k = problem->k > 0 ? problem->k : 1;
  prm.plane = problem->layout == CONV_LAYOUT_NHWC || p * q <= 0 ? 1 : p * q;
  prm.count = problem->n * problem->k * p * q;
  prm.epilogue = problem->epilogue;
  return bias_act_round_launch(prm, problem->dtype, acc, y, bias, stream);
}

extern "C" cudaError_t conv_round_floats(const float *src, conv_dtype dtype, void *dst,
                                         int64_t count, cudaStream_t stream) {
  bias_act_round_params prm;
  prm.count = count, prm.k = 1, prm.plane = 1, prm.epilogue = CONV_EPILOGUE_NONE;
  return bias_act_round_launch(prm, dtype, src, dst, NULL, stream);
}
