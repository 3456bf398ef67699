/*
 * patch_filter.h -- kernels of the `patch_filter` candidate: the
 * backward-filter pass of a 3x3 "same" convolution on many small patches
 * (4x4 or 8x8, N large: the seed's B x P patches folded into N), where
 * cuDNN's engines reach 13-16 TFLOPS in strict fp32.  C linkage;
 * implemented in patch_filter.cu, driven by patch_filter.c.
 *
 *   dw[k][c][r][s] = sum over n, p, q of dy[n][k][p][q] * x[n][c][p+r-1][q+s-1]
 *
 * A thread owns 8 output channels of one input channel, all 9 taps: 72
 * sums in registers.  A block holds every (8 output channels, input
 * channel) pair of the problem and walks images: each stage copies a few
 * images' x and dy into shared memory by cp.async, stages in flight, and
 * each thread adds every pixel's products, the patch size compile-time so
 * that the taps falling on the zero padding are left out (31% of them on
 * 4x4 patches, 16% on 8x8).  Blocks stay resident and take image groups
 * in a fixed order; each writes its sums to the workspace, and a second
 * kernel adds the blocks' sums up in block order: no atomics, the result
 * does not depend on scheduling (deterministic).  Two kernels:
 *
 *   FMA  plain fp32 multiply-adds (strict fp32, and TF32 mode, which
 *        allows them), as above.
 *   MMA  TF32 tensor cores (mma.sync m16n8k8), TF32 mode only, K a
 *        multiple of 32 and C of 8: per image the GEMM dW (K x 9C) +=
 *        dY (K x pixels) X (pixels x 9C), X read from zero-bordered x
 *        planes at a fixed offset per tap (taps on the padding cost a
 *        multiply here); a warp owns 32 output channels of 8 input
 *        channels, all taps: the same 72 sums a thread.
 */
#ifndef CONVTUNE_PATCH_FILTER_H
#define CONVTUNE_PATCH_FILTER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#include "convtune.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum conv_patch_filter_kind {
  CONV_PATCH_FILTER_FMA = 0,
  CONV_PATCH_FILTER_MMA = 1 /* TF32 mode only */
} conv_patch_filter_kind;

/* A candidate config: the kernel, images a stage holds, stages in flight. */
typedef struct conv_patch_filter_tiling {
  int kind;   /* conv_patch_filter_kind */
  int images; /* 1, 2, 4 or 8           */
  int stages; /* 2 or 3                 */
} conv_patch_filter_tiling;

/* The most shared memory a block may use (Hopper's opt-in limit). */
#define CONV_PATCH_FILTER_SMEM_MAX ((size_t)227 << 10)
/* The most threads a block may have: (K / 8) * C. */
#define CONV_PATCH_FILTER_THREADS_MAX 512

/* Everything a pass needs, derived by conv_patch_filter_plan (and the
 * grid by conv_patch_filter_configure). */
typedef struct conv_patch_filter_launch {
  conv_patch_filter_tiling tiling;
  const void *kernel;
  int n, c, k, hw;   /* hw: the patch side, 4 or 8                        */
  int threads;       /* (k / 8) * c: a thread (FMA) or a lane (MMA) each */
  int groups;        /* ceil(n / images): image groups the blocks walk    */
  int x_pitch;       /* floats of a staged x plane: FMA hw*hw + 1 (odd: no
                      * bank conflicts), MMA (hw + 2)^2 (a zero border)  */
  int dy_pitch;      /* floats of a staged dy plane: FMA hw*hw, MMA hw*hw + 4 */
  int stage_floats;  /* one stage: images x (c x_pitch + k dy_pitch)     */
  size_t smem_bytes;
  unsigned blocks;   /* resident blocks (conv_patch_filter_configure)     */
  size_t workspace_bytes; /* blocks x k c 9 partial sums                  */
} conv_patch_filter_launch;

/* Checks `tiling` against a valid problem and fills *launch but its grid
 * and workspace.  False, with the reason in `why`, when it cannot run it:
 * not an fp32 NCHW backward-filter pass of a 3x3 filter with padding 1,
 * stride 1, no dilation, one group, on 4x4 or 8x8 images; K not a
 * multiple of 8; (K / 8) * C not a multiple of 32 or past
 * CONV_PATCH_FILTER_THREADS_MAX; MMA in strict mode, or with K not a
 * multiple of 32 or C of 8; a tiling not compiled; too much shared
 * memory; sizes past 32-bit indexing. */
bool conv_patch_filter_plan(const conv_problem *problem, const conv_patch_filter_tiling *tiling,
                            conv_patch_filter_launch *launch /* OUT */, char *why,
                            size_t why_size);

/* Raises the kernel's shared-memory limit as needed and sets the grid (as
 * many blocks as fit on the device at once, at most one per image group)
 * and the workspace.  cudaErrorInvalidConfiguration: no block fits this
 * device.  Call once per plan; not during graph capture. */
cudaError_t conv_patch_filter_configure(conv_patch_filter_launch *launch, int sm_count);

/* dw = the backward-filter pass of x and dy, on `stream`; `workspace`
 * holds launch->workspace_bytes.  dy is copied as float4s where it is
 * 16-byte aligned, else 4 bytes at a time. */
cudaError_t conv_patch_filter_run(const conv_patch_filter_launch *launch, const float *x,
                                  const float *dy, float *dw, void *workspace,
                                  cudaStream_t stream);

#ifdef __cplusplus
}
#endif
#endif /* CONVTUNE_PATCH_FILTER_H */
