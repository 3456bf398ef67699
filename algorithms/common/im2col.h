/*
 * im2col.h -- unrolls convolution windows into GEMM operands, for the
 * im2col + GEMM candidate.  C linkage; implemented in im2col.cu.
 *
 * x, col and dx hold elements of the problem's dtype (fp32, fp16 or bf16,
 * copied bit for bit; "floats" below counts elements), except col2im's
 * col, which is fp32 in every type: the GEMM's sums, rounded once after
 * col2im has added them up.
 */
#ifndef CONVTUNE_IM2COL_H
#define CONVTUNE_IM2COL_H

#include <stdbool.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#include "algorithms/common/divisor.h"
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
 * `problem` must be valid.  Enqueues on `stream`; returns the launch's error,
 * or cudaErrorInvalidValue for one image's block of col (or plane of x) at
 * 2^31 floats or more, which the kernel does not index. */
cudaError_t conv_im2col(const conv_problem *problem, const void *x, int64_t n0, int64_t images,
                        int64_t group, void *col, cudaStream_t stream);

/* The "wide" layout the GEMM backward passes use: for images
 * [n0, n0 + images) and every group at once,
 *   col[(ci*r + ri)*s + si][img][oh*q + ow] = x[n0+img][ci][ih][iw]
 * (ci over all c channels, so group g's rows start at g*cg*r*s), that is
 * one (c*r*s) x (images*p*q) row-major matrix whose rows run over every
 * image of the chunk: a GEMM then sums over images and pixels at once.
 *
 * A chunk's sizes and divisors are worked out once, by conv_wide_plan in
 * a plan's prepare(), so that each chunk of each execute is one launch.
 * Plain data; the kernels index in 32 bits. */
typedef struct conv_wide_launch {
  int c, h, w, r, s, p, q;
  int pad_h, pad_w, stride_h, stride_w, dil_h, dil_w;
  int images;
  conv_dtype dtype;     /* the element type of x, dx and im2col's col     */
  int64_t image_floats; /* c*h*w: from one image of x (dx) to the next   */
  uint32_t col_total;   /* col elements: im2col's threads                 */
  uint32_t x_total;     /* x elements of the chunk: col2im's threads      */
  conv_divisor by_pq, by_images, by_rs, by_s, by_q, by_w, by_h, by_c, by_stride_h,
      by_stride_w;
} conv_wide_launch;

/* Plans the wide kernels for chunks of `images` images of a valid
 * problem (in its dtype); false where a chunk's col or x would hold 2^31
 * elements or more. */
bool conv_wide_plan(const conv_problem *problem, int64_t images, conv_wide_launch *out /* OUT */);

/* The plan of dy's wide layout, dst[ch][img][j] = src[n0+img][ch][j] for
 * ch < channels, j < plane, elements of `dtype`: a batch of
 * (channels x plane) images as one channels x (images*plane) matrix.  It
 * is the im2col of a 1x1 filter on 1 x plane images, so conv_im2col_wide
 * runs it. */
bool conv_channels_wide_plan(int64_t channels, int64_t plane, int64_t images, conv_dtype dtype,
                             conv_wide_launch *out /* OUT */);

/* col = the wide im2col of images [n0, n0 + images) of x (the whole
 * tensor), on `stream`; n0 must leave room for the chunk in x. */
cudaError_t conv_im2col_wide(const conv_wide_launch *launch, const void *x, int64_t n0,
                             void *col, cudaStream_t stream);

/* The inverse direction of conv_im2col_wide, summing instead of copying:
 * dx[n0+img][ci][ih][iw] = the sum of col[(ci*r + ri)*s + si][img][pixel]
 * over every tap (ri, si) whose output pixel reads (ih, iw), and 0 where
 * none does.  Overwrites images [n0, n0 + images) of x; each element is
 * one thread's fp32 sum in tap order (deterministic), rounded once to the
 * launch's dtype.  col is fp32 in every dtype. */
cudaError_t conv_col2im_wide(const conv_wide_launch *launch, const float *col, int64_t n0,
                             void *x, cudaStream_t stream);

/* The channels-last form, for the gemm_nhwc candidate: for images
 * [n0, n0 + images) of the NHWC input x (the whole tensor), one row per
 * output pixel, its window in the KRSC filter's (r, s, c) order:
 *   col[(img*p + oh)*q + ow][(ri*s + si)*c + ci] = x[n0+img][ih][iw][ci]
 * with ih, iw as above and 0 in the padding.  Whole channel runs are
 * copied, 16 bytes at a time where c allows.  groups must be 1 and the col
 * buffer fewer than 2^31 elements.  Enqueues on `stream`. */
cudaError_t conv_im2col_nhwc(const conv_problem *problem, const void *x, int64_t n0,
                             int64_t images, void *col, cudaStream_t stream);

#ifdef __cplusplus
}
#endif
#endif /* CONVTUNE_IM2COL_H */
