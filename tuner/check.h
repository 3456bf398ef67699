/*
 * check.h -- what the tuner judges candidates with, implemented in .cu
 * files with C linkage: the plain reference kernels (reference.cu,
 * reference_dynamic.cu), random and poisoned buffers, the relative error,
 * and a stream holder for timing (check.cu).  Each launcher enqueues on
 * `stream` and returns the launch's cudaError_t; none synchronises unless
 * it says so.
 */
#ifndef CONVTUNE_TUNER_CHECK_H
#define CONVTUNE_TUNER_CHECK_H

#include <stdint.h>

#include <cuda_runtime_api.h>

#include "convtune.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The plain direct convolution every candidate is validated against: one
 * thread per output, products accumulated in double, epilogue applied, in
 * the problem's layout.  x and w hold elements of the problem's dtype,
 * each read as a double (exactly); the bias is fp32; y, the reference, is
 * fp32 whatever the dtype: the double sum rounded once to float, which a
 * half candidate's output (rounded to its type) is compared with.
 * Obviously correct rather than fast.  `problem` must be valid. */
cudaError_t conv_reference_forward(const conv_problem *problem, const void *x, const void *w,
                                   const float *bias, float *y, cudaStream_t stream);

/* The same for the backward passes: dx from dy and w (a CONV_BACKWARD_DATA
 * problem), dw from x and dy (CONV_BACKWARD_FILTER).  Each computes its own
 * sums (a gather over the outputs a pixel fed; a sum over images and
 * output pixels), not the forward loop run backwards.  Inputs in the
 * problem's dtype, the output fp32, as for the forward pass. */
cudaError_t conv_reference_backward_data(const conv_problem *problem, const void *dy,
                                         const void *w, float *dx, cudaStream_t stream);
cudaError_t conv_reference_backward_filter(const conv_problem *problem, const void *x,
                                           const void *dy, float *dw, cudaStream_t stream);

/* The dynamic op's (CONV_OP_DYNAMIC, fp32 only; reference_dynamic.cu),
 * which the three entry points above call for a dynamic problem: y from x
 * and the weights wt, dx from dy and wt, dwt from x and dy, in double.  A
 * problem of another direction is cudaErrorInvalidValue. */
cudaError_t conv_reference_dynamic_forward(const conv_problem *problem, const float *x,
                                           const float *wt, float *y, cudaStream_t stream);
cudaError_t conv_reference_dynamic_backward_data(const conv_problem *problem, const float *dy,
                                                 const float *wt, float *dx, cudaStream_t stream);
cudaError_t conv_reference_dynamic_backward_filter(const conv_problem *problem, const float *x,
                                                   const float *dy, float *dwt,
                                                   cudaStream_t stream);

/* Fills dst[0..count), elements of `dtype`, with uniform values in [lo, hi)
 * from a counter-based hash of (seed, index): the same seed gives the same
 * data.  Each value is drawn as a float and rounded to the type (which may
 * round it up to hi), so the values are what the reference reads. */
cudaError_t conv_fill_uniform(void *dst, conv_dtype dtype, int64_t count, uint64_t seed, float lo,
                              float hi, cudaStream_t stream);

/* Fills dst[0..count), elements of `dtype`, with a NaN bit pattern (every
 * byte 0xFF: a NaN in all three types) so that unwritten outputs fail
 * validation. */
cudaError_t conv_fill_poison(void *dst, conv_dtype dtype, int64_t count, cudaStream_t stream);

/* dst[i] = src[i] converted from `from` to `to` for i < count: exact
 * into a wider type, rounded to nearest even into a narrower one (inf past
 * fp16's range).  dst must not overlap src.  The GPU tests round their
 * random inputs to a half type and read half outputs with it. */
cudaError_t conv_convert(const void *src, conv_dtype from, void *dst, conv_dtype to,
                         int64_t count, cudaStream_t stream);

/* Keeps `stream` busy for about `microseconds` (one thread spinning on the
 * GPU's global timer).  Enqueued before a timed section, it lets the host
 * queue the start event and the work behind it, so that the timing does
 * not include the host's launch latency. */
cudaError_t conv_hold_stream(unsigned microseconds, cudaStream_t stream);

/* Device scratch conv_relative_l2 needs. */
#define CONV_COMPARE_SCRATCH_BYTES 64

/* ||y - ref||_2 / ||ref||_2 accumulated in double, y's elements of
 * `dtype` read exactly, ref fp32, and the number of non-finite y values
 * (NaN, an unwritten poisoned element, or inf: an fp16 output that
 * overflowed, a wrong result wherever ref is finite, as it always is
 * here).  Synchronises `stream` and writes both results to host memory.
 * `scratch` is device memory of CONV_COMPARE_SCRATCH_BYTES. */
cudaError_t conv_relative_l2(const void *y, conv_dtype dtype, const float *ref, int64_t count,
                             void *scratch, cudaStream_t stream, double *rel_error /* OUT */,
                             int64_t *nonfinite /* OUT */);

#ifdef __cplusplus
}
#endif
#endif /* CONVTUNE_TUNER_CHECK_H */
