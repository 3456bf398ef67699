/*
 * filter_reduce.h -- backward-filter kernels for convolutions with few
 * channels per group (depthwise, 1->1, 16->1, 3->16), where cuDNN's
 * engines reduce over N x P x Q with little of the GPU.  C linkage;
 * implemented in filter_reduce.cu, driven by the `filter_reduce` candidate.
 *
 * dw[k][c][r][s] = sum over n, p, q of dy[n][k][p][q] * x[n][g*cg + c][p*sh
 * - ph + r*dh][q*sw - pw + s*dw], a sum of N x P x Q products per filter tap.
 * Each block takes one (k, c) pair of one image's band of `rows` output
 * rows: its threads walk the band's pixels, `cols` neighbours of a row at
 * a time, each keeping r x s sums in registers, and the block adds them
 * up in a fixed order.  With more than one band per pair (N x ceil(P /
 * rows) of them), a second kernel sums the bands' partial sums, one warp
 * per tap, again in a fixed order.
 *
 * Passes of few products per tap (seed3_msd_small: 4096) have a third way,
 * `per_tap`: one block per tap and pair, summing over every image and
 * pixel, in one launch and with no partial sums.
 *
 * Either way the result does not depend on scheduling (no atomics), so
 * the family is deterministic.
 */
#ifndef CONVTUNE_FILTER_REDUCE_H
#define CONVTUNE_FILTER_REDUCE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#include "algorithms/common/divisor.h"
#include "convtune.h"

#ifdef __cplusplus
extern "C" {
#endif

/* How one pass is cut up; a candidate config. */
typedef struct conv_filter_reduce_tiling {
  int rows;    /* output rows per band (one block's share of an image)  */
  int threads; /* per block: a multiple of 32, at most 256 (1024 per tap) */
  int cols;    /* neighbouring output pixels per thread: 1, 2 or 4      */
  /* 1: a row's x values as float4s, for 3-wide filters at stride 2 along
   * rows with padding 1 (the depthwise downsampling layers), cols 2 or 4
   * and rows of a multiple of 4 floats; 0: one float at a time. */
  int vector;
  /* 1: one block of `threads` (up to 1024) per tap and pair, for passes of
   * at most CONV_FILTER_REDUCE_PER_TAP_MAX products per tap; rows 0, cols
   * 1, vector 0.  0: bands. */
  int per_tap;
} conv_filter_reduce_tiling;

/* Most products per tap (N x P x Q) a per-tap block sums: 64 a thread. */
#define CONV_FILTER_REDUCE_PER_TAP_MAX 65536

/* Everything a pass needs, derived once by conv_filter_reduce_plan(). */
typedef struct conv_filter_reduce_launch {
  conv_filter_reduce_tiling tiling;
  const void *kernel; /* the band kernel compiled for the filter size */
  /* The same with scalar loads: run() takes it for an x that is not
   * 16-byte aligned, which the float4 loads need. */
  const void *scalar_kernel;
  int n, c, h, w, k, p, q, r, s;
  int stride_h, stride_w, pad_h, pad_w, dil_h, dil_w;
  int cg, kg;          /* channels per group, in and out              */
  int pairs;           /* k * cg: one (output, input channel) pair per dw plane */
  int bands_per_image; /* ceil(p / rows)                               */
  int bands;           /* n * bands_per_image: partial sums per tap    */
  int units_per_row;   /* ceil(q / cols): a row's threads' shares      */
  conv_divisor by_units; /* a band's share index into row and column   */
  /* Per-tap blocks: a tap into filter row and column, a pair into output
   * and input channel, an output channel into its group. */
  conv_divisor by_s, by_cg, by_kg;
  size_t workspace_bytes; /* the partial sums: bands x k*cg*r*s floats, 0 with one band */
  /* Launched with programmatic dependent launch (pdl.cuh): false from
   * conv_filter_reduce_plan, set by the candidate (conv_device_pdl). */
  bool pdl;
} conv_filter_reduce_launch;

/* Most partial sums a plan keeps in its workspace, in bytes. */
#define CONV_FILTER_REDUCE_WORKSPACE_MAX ((size_t)256 << 20)

/* Whether a kernel is compiled for an r x s filter (square 1, 2, 3, 4, 5
 * or 7: the depthwise and few-channel layers in use). */
bool conv_filter_reduce_compiled(int64_t r, int64_t s);

/* Checks `tiling` against a valid fp32 NCHW CONV_BACKWARD_FILTER `problem`
 * and fills *launch.  False, with the reason in `why`, when it cannot run
 * it: a filter size with no compiled kernel,
 * a thread count out of range, rows below 1, cols not 1, 2 or 4, vector
 * loads where the layer is not one they are for, per-tap blocks with other
 * rows, cols or vector than 0, 1, 0 or on a pass of more products than
 * they take, sizes past 32-bit indexing, a grid or workspace too large. */
bool conv_filter_reduce_plan(const conv_problem *problem, const conv_filter_reduce_tiling *tiling,
                             conv_filter_reduce_launch *launch /* OUT */, char *why,
                             size_t why_size);

/* dw from x and dy on `stream`: the per-tap kernel, or the band kernel and,
 * with more than one band, the sum of the partial sums, kept in
 * `workspace` (launch->workspace_bytes). */
cudaError_t conv_filter_reduce_run(const conv_filter_reduce_launch *launch, const float *x,
                                   const float *dy, float *dw, void *workspace,
                                   cudaStream_t stream);

#ifdef __cplusplus
}
#endif
#endif /* CONVTUNE_FILTER_REDUCE_H */
