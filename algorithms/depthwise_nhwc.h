/*
 * depthwise_nhwc.h -- direct depthwise convolution on channels-last (NHWC)
 * tensors.  C linkage; implemented in depthwise_nhwc.cu, driven by the
 * `depthwise_nhwc` candidate (depthwise_nhwc.c).
 *
 * Channels are innermost in NHWC, so the threads of a warp take
 * consecutive channels of one output pixel: their input loads and output
 * stores are consecutive addresses, as float4s where the channel count
 * allows.  A thread computes `vec` channels (4 or 1) of `px` consecutive
 * output pixels of a row.  The block's filters are staged once in shared
 * memory, tap-major, so that the vec channels of a tap are one load.
 *
 * Two kernel forms:
 *   WINDOW   square 3x3, 5x5 and 7x7 filters, stride 1 or 2, no column
 *            dilation: filter width, stride and px are compile-time, and a
 *            thread loads each input column of its px outputs' window once
 *            per filter row.
 *   GENERIC  any filter, stride and dilation; one load per tap and output.
 *
 * Multiplier (K = m * C): output channel k reads input channel k / m; only
 * m = 1 takes vec = 4.
 */
#ifndef CONVTUNE_DEPTHWISE_NHWC_H
#define CONVTUNE_DEPTHWISE_NHWC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#include "algorithms/divisor.h"
#include "convtune.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A candidate config: how one launch is cut up. */
typedef struct conv_dwnhwc_tiling {
  int vec;    /* channels per thread: 4 (float4) or 1                  */
  int px;     /* consecutive output pixels of a row per thread: 1, 2, 4 */
  int tc, tq; /* threads per block along channel groups and pixels     */
} conv_dwnhwc_tiling;

/* Everything a launch needs, derived once by conv_dwnhwc_plan(). */
typedef struct conv_dwnhwc_launch {
  conv_dwnhwc_tiling tiling;
  const void *kernel; /* the compiled kernel, found once */
  int n, c, h, w, k, p, q, r, s;
  int stride_h, stride_w, pad_h, pad_w, dil_h, dil_w;
  int multiplier;     /* k / c */
  int epilogue;       /* conv_epilogue */
  int block_channels; /* tc * vec: output channels a block covers */
  int rows;           /* output rows a block covers, one after another */
  int q_tiles;        /* blocks along a row: q / (tq * px), rounded up */
  conv_divisor by_q_tiles, by_p;
  unsigned grid[2];   /* n * p * q_tiles, channel blocks */
  size_t smem_bytes;  /* the block's filters */
} conv_dwnhwc_launch;

/* Checks `tiling` against a valid fp32 NHWC forward depthwise `problem` and
 * fills *launch.  Returns false, with the reason in `why`, when the tiling
 * cannot run it (vec 4 with channels not a multiple of 4 or a multiplier,
 * threads out of range, sizes past 32-bit indexing, too much shared
 * memory, a grid too large). */
bool conv_dwnhwc_plan(const conv_problem *problem, const conv_dwnhwc_tiling *tiling,
                      conv_dwnhwc_launch *launch /* OUT */, char *why, size_t why_size);

/* y = depthwise conv(x, w) with the problem's epilogue, on `stream`. */
cudaError_t conv_dwnhwc_forward(const conv_dwnhwc_launch *launch, const float *x, const float *w,
                                const float *bias, float *y, cudaStream_t stream);

#ifdef __cplusplus
}
#endif
#endif /* CONVTUNE_DEPTHWISE_NHWC_H */
