/*
 * im2col.h -- unrolls convolution windows into GEMM operands, for the
 * im2col + GEMM candidate.  C linkage; implemented in im2col.cu.
 */
#ifndef CONVTUNE_IM2COL_H
#define CONVTUNE_IM2COL_H

#include <stdint.h>

#include <cuda_runtime_api.h>

#include "convtune.h"

#ifdef __cplusplus
extern "C" {
#endif

/* For images [n0, n0 + images) of the NCHW input x (the whole tensor) and
 * group `group`, writes per image the (cg*r*s) x (p*q) row-major matrix
 *   col[img][(ci*r + ri)*s + si][oh*q + ow] = x[n0+img][group*cg + ci][ih][iw]
 * with ih = oh*stride_h - pad_h + ri*dil_h (iw likewise) and 0 where (ih, iw)
 * falls in the padding.  Rows follow the filter's (c_in_group, r, s) order,
 * so that filter-group times col is the group's output.  cg = c / groups;
 * col holds images * cg*r*s * p*q floats, laid out [image][crs][pq].
 * `problem` must be valid.  Enqueues on `stream`; returns the launch's error. */
cudaError_t conv_im2col(const conv_problem *problem, const float *x, int64_t n0, int64_t images,
                        int64_t group, float *col, cudaStream_t stream);

/* The "wide" layout the GEMM backward passes use: for images
 * [n0, n0 + images) and every group at once,
 *   col[(ci*r + ri)*s + si][img][oh*q + ow] = x[n0+img][ci][ih][iw]
 * (ci over all c channels, so group g's rows start at g*cg*r*s), that is
 * one (c*r*s) x (images*p*q) row-major matrix whose rows run over every
 * image of the chunk: a GEMM then sums over images and pixels at once.
 * The chunk's col must hold fewer than 2^31 floats (else
 * cudaErrorInvalidValue, as for every wide launcher below). */
cudaError_t conv_im2col_wide(const conv_problem *problem, const float *x, int64_t n0,
                             int64_t images, float *col, cudaStream_t stream);

/* The inverse direction of conv_im2col_wide, summing instead of copying:
 * dx[n0+img][ci][ih][iw] = the sum of col[(ci*r + ri)*s + si][img][pixel]
 * over every tap (ri, si) whose output pixel reads (ih, iw), and 0 where
 * none does.  Overwrites images [n0, n0 + images) of x; each element is
 * one thread's sum in tap order (deterministic). */
cudaError_t conv_col2im_wide(const conv_problem *problem, const float *col, int64_t n0,
                             int64_t images, float *x, cudaStream_t stream);

/* dst[ch][img][j] = src[n0+img][ch][j] for ch < channels, j < plane: a
 * batch of (channels x plane) images as one channels x (images*plane)
 * matrix, the wide layout of dy. */
cudaError_t conv_channels_wide(const float *src, int64_t channels, int64_t plane, int64_t n0,
                               int64_t images, float *dst, cudaStream_t stream);

/* The channels-last form, for the gemm_nhwc candidate: for images
 * [n0, n0 + images) of the NHWC input x (the whole tensor), one row per
 * output pixel, its window in the KRSC filter's (r, s, c) order:
 *   col[(img*p + oh)*q + ow][(ri*s + si)*c + ci] = x[n0+img][ih][iw][ci]
 * with ih, iw as above and 0 in the padding.  Whole channel runs are
 * copied, as float4s where c allows.  groups must be 1 and the col buffer
 * fewer than 2^31 floats.  Enqueues on `stream`. */
cudaError_t conv_im2col_nhwc(const conv_problem *problem, const float *x, int64_t n0,
                             int64_t images, float *col, cudaStream_t stream);

#ifdef __cplusplus
}
#endif
#endif /* CONVTUNE_IM2COL_H */
