/*
 * patchify.h -- convolutions whose filter tiles the input: stride equal to
 * the filter, no padding, no dilation, one group, NCHW, few taps a pixel
 * (C x R x S at most CONV_PATCHIFY_TAPS_MAX).  ConvNeXt's stem (3 channels,
 * 4x4 stride 4) is the case: as a GEMM it is 48 deep, so cuDNN's engines
 * and im2col + cuBLAS spend most of their time around the arithmetic.
 * C linkage; implemented in patchify.cu, driven by the `patchify`
 * candidate (patchify.c).
 *
 * A block computes `rows` output rows of one image, one row at a time: it
 * stages the block's filters once, transposed to [tap][channel], and each
 * output row's input rows as [tap][column] (the windows do not overlap, so
 * that is the input reordered, no larger).  Each thread then accumulates
 * `kt` output channels of 4 consecutive columns in registers, reading one
 * float4 of inputs and kt / 4 float4s of filters a tap.
 */
#ifndef CONVTUNE_PATCHIFY_H
#define CONVTUNE_PATCHIFY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#include "convtune.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Taps a pixel (C x R x S) the staged rows hold. */
#define CONV_PATCHIFY_TAPS_MAX 64

/* A candidate config. */
typedef struct conv_patchify_tiling {
  int kt;   /* output channels a thread: 4 or 8               */
  int rows; /* output rows a block computes, one after another */
} conv_patchify_tiling;

/* Everything a launch needs, derived once by conv_patchify_plan(). */
typedef struct conv_patchify_launch {
  conv_patchify_tiling tiling;
  const void *kernel; /* the compiled kernel, found once */
  int n, c, h, w, k, p, q, r, s;
  int taps;           /* c * r * s                                     */
  int channel_groups; /* k / kt, rounded up                            */
  int column_groups;  /* q / 4, rounded up                             */
  int filter_ld;      /* floats a staged tap row of filters            */
  int input_ld;       /* floats a staged tap row of inputs: 4 x groups */
  int row_tiles;      /* p / rows, rounded up                          */
  int epilogue;       /* conv_epilogue                                 */
  unsigned grid, threads;
  size_t smem_bytes;
} conv_patchify_launch;

/* True when `problem` (valid) is a forward NCHW convolution this family
 * takes: stride equal to the filter, no padding or dilation, one group,
 * at most CONV_PATCHIFY_TAPS_MAX taps. */
bool conv_patchify_takes(const conv_problem *problem);

/* Checks `tiling` against a problem conv_patchify_takes() and fills
 * *launch; false, with the reason in `why`, when it cannot run (kt not 4
 * or 8, rows out of [1, 16], sizes past 32-bit indexing, too much shared
 * memory). */
bool conv_patchify_plan(const conv_problem *problem, const conv_patchify_tiling *tiling,
                        conv_patchify_launch *launch /* OUT */, char *why, size_t why_size);

/* y = conv(x, w) with the problem's epilogue, on `stream`. */
cudaError_t conv_patchify_forward(const conv_patchify_launch *launch, const float *x,
                                  const float *w, const float *bias, float *y,
                                  cudaStream_t stream);

#ifdef __cplusplus
}
#endif
#endif /* CONVTUNE_PATCHIFY_H */
