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
 * * w[g*kg + k][c][r][s].  One thread per dx element gathers its sum (no
 * atomics, one write per element), so consecutive threads write
 * consecutive pixels.
 */
#ifndef CONVTUNE_DATA_GATHER_H
#define CONVTUNE_DATA_GATHER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#include "algorithms/divisor.h"
#include "convtune.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Everything a pass needs, derived once by conv_data_gather_plan(). */
typedef struct conv_data_gather_launch {
  int threads;        /* per block; the config                        */
  const void *kernel; /* compiled for the filter size and stride      */
  int n, c, h, w, k, p, q, r, s;
  int stride_h, stride_w, pad_h, pad_w, dil_h, dil_w;
  int cg, kg;
  conv_divisor by_w, by_h, by_c; /* a dx index into (n, c, iy, ix)     */
  conv_divisor by_cg;            /* a channel into (group, channel)    */
  unsigned blocks;
} conv_data_gather_launch;

/* Whether a kernel is compiled for an r x s filter (square 1, 2, 3, 4, 5
 * or 7). */
bool conv_data_gather_compiled(int64_t r, int64_t s);

/* Checks `threads` against a valid fp32 NCHW CONV_BACKWARD_DATA `problem`
 * and fills *launch.  False, with the reason in `why`, for a filter size
 * with no kernel, a thread count that is not a multiple of 32 in
 * [32, 512], sizes past 32-bit indexing or a grid too large. */
bool conv_data_gather_plan(const conv_problem *problem, int threads,
                           conv_data_gather_launch *launch /* OUT */, char *why, size_t why_size);

/* dx from dy and w on `stream`. */
cudaError_t conv_data_gather_run(const conv_data_gather_launch *launch, const float *dy,
                                 const float *w, float *dx, cudaStream_t stream);

#ifdef __cplusplus
}
#endif
#endif /* CONVTUNE_DATA_GATHER_H */
