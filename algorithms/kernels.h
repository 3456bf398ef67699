/*
 * kernels.h -- device helpers implemented in .cu files, with C linkage.
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

/* conv_kernel_allow_smem, then how many blocks of `threads` threads and
 * `smem_bytes` of dynamic shared memory the GPU holds at once:
 * *resident = blocks per SM x sm_count, for persistent kernels that size
 * their grid to it.  cudaErrorInvalidConfiguration where not one block
 * fits an SM. */
cudaError_t conv_kernel_resident_blocks(const void *kernel, int threads, size_t smem_bytes,
                                        int sm_count, int64_t *resident /* OUT */);

/* The plain direct convolution every candidate is validated against: one
 * thread per output, products accumulated in double, epilogue applied, in
 * the problem's layout.
 * Obviously correct rather than fast.  `problem` must be valid. */
cudaError_t conv_reference_forward(const conv_problem *problem, const float *x, const float *w,
                                   const float *bias, float *y, cudaStream_t stream);

/* The same for the backward passes: dx from dy and w (a CONV_BACKWARD_DATA
 * problem), dw from x and dy (CONV_BACKWARD_FILTER).  Each computes its own
 * sums (a gather over the outputs a pixel fed; a sum over images and
 * output pixels), not the forward loop run backwards. */
cudaError_t conv_reference_backward_data(const conv_problem *problem, const float *dy,
                                         const float *w, float *dx, cudaStream_t stream);
cudaError_t conv_reference_backward_filter(const conv_problem *problem, const float *x,
                                           const float *dy, float *dw, cudaStream_t stream);

/* The dynamic op's (CONV_OP_DYNAMIC; reference_dynamic.cu), which the
 * three entry points above call for a dynamic problem: y from x and the
 * weights wt, dx from dy and wt, dwt from x and dy, in double.  A problem
 * of another direction is cudaErrorInvalidValue. */
cudaError_t conv_reference_dynamic_forward(const conv_problem *problem, const float *x,
                                           const float *wt, float *y, cudaStream_t stream);
cudaError_t conv_reference_dynamic_backward_data(const conv_problem *problem, const float *dy,
                                                 const float *wt, float *dx, cudaStream_t stream);
cudaError_t conv_reference_dynamic_backward_filter(const conv_problem *problem, const float *x,
                                                   const float *dy, float *dwt,
                                                   cudaStream_t stream);

/* y[n][k][i] = act(y[n][k][i] + bias[k]) for the problem's epilogue over the
 * output tensor (y[n][i][k] for NHWC); a no-op for CONV_EPILOGUE_NONE. */
cudaError_t conv_bias_act(const conv_problem *problem, float *y, const float *bias,
                          cudaStream_t stream);

/* out[k][t][c] = w[k][c][t] for k < K, c < channels, t < taps: filters
 * from K C R S order to K R S C (taps = R S, at most
 * CONV_FILTER_TO_KRSC_MAX_TAPS), out not overlapping w;
 * cudaErrorInvalidValue past those.  filter_layout.cu. */
#define CONV_FILTER_TO_KRSC_MAX_TAPS 4608
cudaError_t conv_filter_to_krsc(const float *w, int64_t k, int64_t channels, int64_t taps,
                                float *out, cudaStream_t stream);

/* Fills dst[0..count) with uniform values in [lo, hi) from a counter-based
 * hash of (seed, index): the same seed gives the same data. */
cudaError_t conv_fill_uniform(float *dst, int64_t count, uint64_t seed, float lo, float hi,
                              cudaStream_t stream);

/* Fills dst with a NaN bit pattern so that unwritten outputs fail validation. */
cudaError_t conv_fill_poison(float *dst, int64_t count, cudaStream_t stream);

/* Keeps `stream` busy for about `microseconds` (one thread spinning on the
 * GPU's global timer).  Enqueued before a timed section, it lets the host
 * queue the start event and the work behind it, so that the timing does
 * not include the host's launch latency. */
cudaError_t conv_hold_stream(unsigned microseconds, cudaStream_t stream);

/* Device scratch conv_relative_l2 needs. */
#define CONV_COMPARE_SCRATCH_BYTES 64

/* ||y - ref||_2 / ||ref||_2 accumulated in double, and the number of
 * non-finite y values.  Synchronises `stream` and writes both results to
 * host memory.  `scratch` is device memory of CONV_COMPARE_SCRATCH_BYTES. */
cudaError_t conv_relative_l2(const float *y, const float *ref, int64_t count, void *scratch,
                             cudaStream_t stream, double *rel_error /* OUT */,
                             int64_t *nonfinite /* OUT */);

#ifdef __cplusplus
}
#endif
#endif /* CONVTUNE_KERNELS_H */
