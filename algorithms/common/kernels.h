/*
 * kernels.h -- device helpers the families share, implemented in .cu files
 * (algorithms/common/), with C linkage.
 * Each launcher enqueues on `stream` and returns the launch's cudaError_t
 * (cudaGetLastError after the launch); none synchronises unless it says so.
 */
#ifndef CONVTUNE_KERNELS_H
#define CONVTUNE_KERNELS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include <cuda_runtime_api.h>

#include "convtune.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Lets `kernel` launch with `bytes` of dynamic shared memory: nothing to
 * do up to what it already allows (48 KiB less its static shared memory,
 * unless raised before); past it, cudaErrorInvalidConfiguration where
 * the current device's opt-in limit, less the kernel's static shared
 * memory, is lower, else the kernel's limit raised to that (never
 * lowered: other plans share the kernel).  Call when a plan is made, not
 * during graph capture. */
cudaError_t conv_kernel_allow_smem(const void *kernel, size_t bytes);

/* What a launch plan (conv_*_plan) returns when it cannot run a problem:
 * false, with `reason` in `why` where the caller gave room for one. */
static inline bool conv_refuse(char *why, size_t why_size, const char *reason) {
  if (why != NULL && why_size > 0) snprintf(why, why_size, "%s", reason);
  return false;
}

/* The grid of a persistent kernel of `threads` threads and `smem_bytes`
 * of dynamic shared memory, launched as `slices` side by side
 * (blockIdx.y), each slice's blocks walking `work` items: after
 * conv_kernel_allow_smem, the blocks the GPU holds at once (blocks per SM
 * x sm_count) shared among the slices, at least one a slice and no more
 * than `work`, as *blocks (blocks a slice).  cudaErrorInvalidConfiguration
 * where not one block fits an SM. */
cudaError_t conv_kernel_persistent_blocks(const void *kernel, int threads, size_t smem_bytes,
                                          int sm_count, int64_t slices, int64_t work,
                                          unsigned *blocks /* OUT */);

/* y[n][k][i] = act(y[n][k][i] + bias[k]) for the problem's epilogue over the
 * output tensor (y[n][i][k] for NHWC); a no-op for CONV_EPILOGUE_NONE. */
cudaError_t conv_bias_act(const conv_problem *problem, float *y, const float *bias,
                          cudaStream_t stream);

/* conv_bias_act for y of the problem's dtype: fp32 as above; a half y is
 * read, the bias added (and ReLU applied) in fp32, and rounded back.
 * epilogue_half.cu. */
cudaError_t conv_bias_act_any_dtype(const conv_problem *problem, void *y, const float *bias,
                                    cudaStream_t stream);

/* For a half problem (CONV_DTYPE_F16 or BF16) whose GEMM summed into an
 * fp32 buffer: y[i] = act(acc[i] + bias[channel of i]) in fp32, rounded
 * once to the problem's dtype, over the problem's output (NCHW or NHWC,
 * problem->n images: a caller running a chunk passes a copy with n set to
 * it, acc and y at the chunk); the epilogue comes before the one rounding.
 * With CONV_EPILOGUE_NONE a plain rounding (bias may be NULL).  acc and y
 * must not overlap; cudaErrorInvalidValue for an fp32 problem (its
 * epilogue is conv_bias_act, in place). */
cudaError_t conv_bias_act_round(const conv_problem *problem, const float *acc, void *y,
                                const float *bias, cudaStream_t stream);

/* dst[i] = src[i] rounded to nearest even to `dtype` (F16 or BF16; inf
 * past fp16's range), for i < count: an fp32 accumulation buffer's one
 * rounding.  cudaErrorInvalidValue for CONV_DTYPE_F32. */
cudaError_t conv_round_floats(const float *src, conv_dtype dtype, void *dst, int64_t count,
                              cudaStream_t stream);

/* out[k][t][c] = w[k][c][t] for k < K, c < channels, t < taps: filters
 * from K C R S order to K R S C (taps = R S, at most
 * CONV_FILTER_TO_KRSC_MAX_TAPS), out not overlapping w;
 * cudaErrorInvalidValue past those.  filter_layout.cu. */
#define CONV_FILTER_TO_KRSC_MAX_TAPS 4608
cudaError_t conv_filter_to_krsc(const float *w, int64_t k, int64_t channels, int64_t taps,
                                float *out, cudaStream_t stream);

#ifdef __cplusplus
}
#endif
#endif /* CONVTUNE_KERNELS_H */
