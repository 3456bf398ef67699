/*
 * stem_gemm.h -- kernels of the `stem_gemm` candidate: an NCHW forward
 * convolution with a short reduction (C R S <= 256: a network's stem, such
 * as resnet50's 7x7 stride-2 convolution of 3 channels) in TF32 mode, on
 * Hopper's warpgroup tensor cores (wgmma, sm_90a only).  C linkage;
 * implemented in stem_gemm.cu, driven by stem_gemm.c.
 *
 * A stem's GEMM is long and thin: N Ho Wo output positions by K output
 * channels, reduced over only C R S products (147 for resnet50's), so its
 * cost is in the gathers and the output, not in the multiply.  Each block
 * keeps every filter in shared memory (TF32-rounded, in wgmma's K-major
 * layout) and walks tiles of 128 output positions of one output row:
 *   - the tile's input rows (the receptive field of the row segment, zero
 *     where it covers the padding) are copied in with 4-byte cp.async, the
 *     next tile's while this one multiplies;
 *   - the inputs are wgmma's register operand: a thread gathers its
 *     im2col fragments from those rows through a table of each reduction
 *     index's offset, rounding them to TF32;
 *   - two warpgroups multiply 64 positions each by all K output channels
 *     and store straight to y (32-byte runs of positions).
 * The grid is as many blocks as the GPU holds at once (persistent), so the
 * filters are read once per block rather than once per tile.
 */
#ifndef CONVTUNE_STEM_GEMM_H
#define CONVTUNE_STEM_GEMM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#include "convtune.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A candidate config: the output channels of the tile (the wgmma's N: 64
 * or 128, at least K) and the k8 steps whose fragments a thread gathers
 * before issuing their wgmmas. */
typedef struct conv_stem_tiling {
  int channels, batch;
} conv_stem_tiling;

/* Everything a launch needs, derived once by conv_stem_plan (and the grid
 * by conv_stem_configure). */
typedef struct conv_stem_launch {
  conv_stem_tiling tiling;
  const void *kernel;
  int n, c, h, w, k, r, s, out_h, out_w, epilogue;
  int stride_h, stride_w, pad_h, pad_w, dil_h, dil_w;
  int reduction;      /* C R S                                               */
  int steps;          /* k8 steps: C R S over 8, rounded up to the batch's  */
  int segments;       /* 128-position segments of an output row              */
  int tiles;          /* N Ho segments                                       */
  int field_rows;     /* input rows an output row reads: (R - 1) dil_h + 1   */
  int field_width;    /* input columns a segment reads: 127 stride_w +
                       * (S - 1) dil_w + 1                                  */
  int patch_floats;   /* one tile's input rows, then zeros for the padded
                       * reduction indices (127 stride_w + 1), 16-byte
                       * rounded                                            */
  unsigned grid;      /* persistent blocks (conv_stem_configure)             */
  int threads;        /* two warpgroups: 256                                 */
  size_t smem_bytes;
} conv_stem_launch;

/* The compiled tilings: writes up to `max`, returns how many there are. */
int conv_stem_tilings(conv_stem_tiling *out, int max);

/* Checks `tiling` against a valid problem and fills *launch (all but the
 * grid).  False, with the reason in `why`, when it cannot run it: not an
 * fp32 NCHW forward convolution in TF32 mode, more than one group, C R S
 * past 256, K past the tiling's channels, shared memory past 200 KiB,
 * sizes past 32-bit indexing, or a tiling not compiled.  Says nothing of
 * the device: the kernels exist for compute capability 9.0 only. */
bool conv_stem_plan(const conv_problem *problem, const conv_stem_tiling *tiling,
                    conv_stem_launch *launch /* OUT */, char *why, size_t why_size);

/* Lets the kernel use its shared memory and sizes the grid to the blocks
 * the device holds at once (at most one per tile); cudaErrorInvalid-
 * Configuration when not one block fits.  Call once per plan; not during
 * capture. */
cudaError_t conv_stem_configure(conv_stem_launch *launch, int sm_count);

/* y = conv(x, w) with the problem's epilogue, on `stream`. */
cudaError_t conv_stem_forward(const conv_stem_launch *launch, const float *x, const float *w,
                              const float *bias, float *y, cudaStream_t stream);

#ifdef __cplusplus
}
#endif
#endif /* CONVTUNE_STEM_GEMM_H */
