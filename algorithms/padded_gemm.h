/*
 * padded_gemm.h -- kernels of the `padded_gemm` candidate: an NCHW forward
 * 3x3 convolution (stride 1, padding 1, one group) in TF32 mode as one
 * implicit GEMM on Hopper's warpgroup tensor cores (wgmma, sm_90a only).
 * C linkage; implemented in padded_gemm.cu, driven by padded_gemm.c.
 *
 * The GEMM's columns are the positions of the images' zero-padded grids,
 * stacked: N (H + 2) rows of W + 2.  Output position q reads input
 * position q + r (W + 2) + s at tap (r, s), so each tap's B operand is the
 * same staged tile shifted by a whole number of positions, and no im2col
 * is built; positions in the padding are computed and dropped (7% of the
 * work at 56x56, 13% at 28x28).  TF32 wgmma takes both operands K-major
 * (the reduction contiguous), which NCHW is not for either, so a producer
 * warpgroup transposes while it stages, a stage ahead of the consumer:
 *   A  64 filter rows x 8 channels per tap: each thread loads 9 float4s of
 *      one row (4 channels x 9 taps, contiguous in KCRS), rounds them to
 *      TF32 and stores one float4 (4 channels) per tap.
 *   B  8 channels of each staged position: 4-byte cp.async copies, 4
 *      channels per 16 bytes, zero-filled in the padding.  Not rounded:
 *      the tensor cores truncate them to TF32.  Rounding them (loaded
 *      into registers, or in place once the copies land: either way the
 *      producer waits on its loads) made the kernel 1.2-1.6x slower;
 *      truncation leaves resnet50's TF32
 *      output 1.1e-3 from fp64 (relative L2) where cuDNN's is 6.0e-4.
 * The consumer warpgroup only issues the stage's 9 wgmma m64nNk8 and
 * hands the stage back (mbarriers both ways); its output tile leaves
 * through shared memory, a row of consecutive positions at a time.
 *
 * Measured on an H100 (BENCHMARKS.md, resnet50 at batch 16, each layer
 * alone beside PyTorch's cuDNN): the 56x56 3x3 layer in 0.033 ms against
 * 0.044 (1.31x), the 28x28 one in 0.027 against 0.030 (1.12x); cuDNN's
 * engines stay ahead at 14x14 and 7x7 (a 9x9 padded grid for 49 outputs).
 * Staging through the load/store unit, which cuDNN's channels-last
 * engines avoid with TMA, holds it near 140 TFLOPS.
 */
#ifndef CONVTUNE_PADDED_GEMM_H
#define CONVTUNE_PADDED_GEMM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#include "convtune.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A candidate config: the positions of one block's tile (the wgmma's N,
 * 128 or 256) and the stages in flight (3 or 4). */
typedef struct conv_padded_tiling {
  int positions, stages;
} conv_padded_tiling;

/* Everything a launch needs, derived once by conv_padded_plan. */
typedef struct conv_padded_launch {
  conv_padded_tiling tiling;
  const void *kernel;
  int n, c, h, w, k, epilogue;
  int pitch;          /* W + 2: positions of a padded row                  */
  int padded_rows;    /* H + 2: padded rows of an image                    */
  int positions;      /* N (H + 2) (W + 2): the GEMM's columns             */
  int staged;         /* positions a stage holds: the tile's, the halo of
                       * its last taps (2 (W + 2) + 2), rounded up to 8     */
  int stage_floats;   /* one stage: the filters, then the inputs           */
  unsigned grid[2];   /* {position tiles, K / 64}                          */
  int threads;        /* a producer and a consumer warpgroup: 256          */
  size_t smem_bytes;
  bool krsc_filters;  /* w is K R S C (conv_problem_krsc_filters)          */
} conv_padded_launch;

/* The compiled tilings, larger tiles first: writes up to `max`, returns how
 * many there are. */
int conv_padded_tilings(conv_padded_tiling *out, int max);

/* Checks `tiling` against a valid problem and fills *launch.  False, with
 * the reason in `why`, when it cannot run it: not an fp32 NCHW forward
 * convolution in TF32 mode, not 3x3 with stride 1, padding 1, dilation 1
 * and one group, C not a multiple of 8 or K of 64, rows wider than a stage
 * holds (W > 93), sizes past 32-bit indexing, or a tiling not compiled.
 * Says nothing of the device: the kernels exist for compute capability 9.0
 * only. */
bool conv_padded_plan(const conv_problem *problem, const conv_padded_tiling *tiling,
                      conv_padded_launch *launch /* OUT */, char *why, size_t why_size);

/* Lets the launch's kernel use the shared memory it needs past 48 KiB;
 * cudaErrorInvalidConfiguration when that is past the current device's
 * limit.  Call once per plan; not during capture. */
cudaError_t conv_padded_configure(const conv_padded_launch *launch);

/* y = conv(x, w) with the problem's epilogue, on `stream`. */
cudaError_t conv_padded_forward(const conv_padded_launch *launch, const float *x, const float *w,
                                const float *bias, float *y, cudaStream_t stream);

#ifdef __cplusplus
}
#endif
#endif /* CONVTUNE_PADDED_GEMM_H */
