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
