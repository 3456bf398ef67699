/*
 * data_gather.h -- backward-data kernels for strided convolutions with few
 * channels per group (depthwise 3x3 stride 2 and the like), which
 * direct_channel's transposed view cannot run (it needs stride 1).  C
 * linkage; implemented in data_gather.cu, driven by the `data_gather`
 * candidate.
 *
 * dx[n][g*cg + c][iy][ix] = sum over the group's output channels k and the
 * taps (r, s) whose output pixel exists, p = (iy + ph - r*dh) / sh and
 * q = (ix + pw - s*dw) / sw, both divisions exact, of dy[n][g*kg + k][p][q]
 * * w[g*kg + k][c][r][s].  A thread gathers the sums of its dx elements
 * (no atomics, one write per element), consecutive threads on consecutive
 * pixels.  Two kernels:
 *   ELEMENT  one dx element a thread, any stride: each tap's output pixel
 *            is tested for existence.
 *   QUAD     stride 2 only: a 2x2 block of dx a thread, one element of
 *            each stride phase.  Which taps reach a phase depends only on
 *            the phase and the padding's and dilation's parity, the same
 *            for every thread, so of r x s taps a thread tests only those
 *            that reach one of its elements, and loads each weight once.
 */
#ifndef CONVTUNE_DATA_GATHER_H
#define CONVTUNE_DATA_GATHER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#include "algorithms/common/divisor.h"
#include "convtune.h"

#ifdef __cplusplus
extern "C" {
#endif

enum { CONV_GATHER_ELEMENT = 0, CONV_GATHER_QUAD = 1 };

/* How a pass is cut up; a candidate config. */
typedef struct conv_data_gather_tiling {
  int kernel;  /* CONV_GATHER_ELEMENT or CONV_GATHER_QUAD */
  int threads; /* per block                               */
} conv_data_gather_tiling;

/* Everything a pass needs, derived once by conv_data_gather_plan(). */
typedef struct conv_data_gather_launch {
  conv_data_gather_tiling tiling;
  const void *kernel; /* compiled for the filter size and stride      */
  int n, c, h, w, k, p, q, r, s;
  int stride_h, stride_w, pad_h, pad_w, dil_h, dil_w;
  int cg, kg;
  /* A thread's index into (n, c, row, column) of its element or block:
   * ELEMENT: rows h, columns w; QUAD: rows ceil(h/2), columns ceil(w/2). */
  int rows, cols;
  uint32_t threads_needed;
  conv_divisor by_cols, by_rows, by_c;
  conv_divisor by_cg; /* a channel into (group, channel)    */
  unsigned blocks;
} conv_data_gather_launch;

/* Whether a kernel is compiled for an r x s filter (square 1, 2, 3, 4, 5
 * or 7). */
bool conv_data_gather_compiled(int64_t r, int64_t s);

/* Checks `tiling` against a valid fp32 NCHW CONV_BACKWARD_DATA `problem`
 * and fills *launch.  False, with the reason in `why`, for a filter size
 * with no kernel, QUAD at a stride other than 2, a thread count that is
 * not a multiple of 32 in [32, 512], or sizes past 32-bit indexing. */
bool conv_data_gather_plan(const conv_problem *problem, const conv_data_gather_tiling *tiling,
                           conv_data_gather_launch *launch /* OUT */, char *why, size_t why_size);

/* dx from dy and w on `stream`. */
cudaError_t conv_data_gather_run(const conv_data_gather_launch *launch, const float *dy,
                                 const float *w, float *dx, cudaStream_t stream);

#ifdef __cplusplus
}
#endif
#endif /* CONVTUNE_DATA_GATHER_H */
