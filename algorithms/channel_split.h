/*
 * channel_split.h -- a direct convolution for small outputs with many
 * input channels (batch-1 inference: an 8 x 8 board with 256 channels, a
 * 56 x 56 layer with 64), where a GEMM has too few output tiles to fill
 * the GPU.  C linkage; implemented in channel_split.cu, driven by the
 * `channel_split` candidate.
 *
 * The sum over input channels and taps is split: each block adds up
 * `c_per_split` input channels for a tile of output pixels and `k_tile`
 * output channels, so pixels x channel tiles x splits blocks keep the SMs
 * busy.  With one split the block applies the epilogue and writes y; with
 * more, each writes its partial sums to the workspace and a second kernel
 * adds the splits in a fixed order (deterministic), adds the bias and
 * applies the activation.  Both kernels are captured into the plan's graph.
 *
 * Strict fp32 FMAs, no tensor cores: valid in both math modes.  A thread
 * keeps 8 output channels of one pixel in registers; the block's filters
 * for a few input channels at a time sit in shared memory (channel
 * fastest, so that a warp reads them as broadcasts) and each thread reads
 * its input taps from global memory through L1.
 */
#ifndef CONVTUNE_CHANNEL_SPLIT_H
#define CONVTUNE_CHANNEL_SPLIT_H

#include <stdbool.h>
#include <stddef.h>

#include <cuda_runtime_api.h>

#include "convtune.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Threads per block, and output channels per thread. */
#define CONV_SPLIT_THREADS 256
#define CONV_SPLIT_K_PER_THREAD 8
/* Shared memory for staged filters, in floats (32 KiB). */
#define CONV_SPLIT_STAGE_FLOATS 8192

/* A candidate config: output channels per block (16, 32 or 64) and how
 * many parts the input channels are split into. */
typedef struct conv_split_tiling {
  int k_tile;
  int splits;
} conv_split_tiling;

/* Everything a launch needs, derived once by conv_split_plan(). */
typedef struct conv_split_launch {
  conv_split_tiling tiling;
  const void *kernel; /* the partial-sum kernel compiled for the filter size */
  int n, c, h, w, k, p, q, r, s;
  int stride_h, stride_w, pad_h, pad_w, dil_h, dil_w;
  int epilogue;
  int pixels_per_block;  /* CONV_SPLIT_THREADS / (k_tile / 8)              */
  int c_per_split;       /* input channels a block sums                    */
  int stage_channels;    /* input channels whose filters are staged at once */
  int k_pitch;           /* floats per staged tap: k_tile + 4              */
  unsigned grid[3];      /* pixel tiles, channel tiles, n * splits         */
  size_t smem_bytes;
  size_t workspace_bytes; /* splits * n * k * p * q floats; 0 for 1 split  */
} conv_split_launch;

/* Whether the family applies at all: one group, an output small enough
 * that a GEMM would leave SMs idle (n * p * q <= 8192 pixels) and at
 * least 8 output channels. */
bool conv_split_applicable(const conv_problem *problem);

/* Checks `tiling` against a valid problem and fills *launch; false, with
 * the reason in `why`, when it cannot run it (a k_tile not offered, more
 * splits than input channels or than needed, filters too large to stage
 * one channel, sizes past 32-bit indexing). */
bool conv_split_plan(const conv_problem *problem, const conv_split_tiling *tiling,
                     conv_split_launch *launch /* OUT */, char *why, size_t why_size);

/* y = conv(x, w) with the problem's epilogue on `stream`: one kernel, or
 * two with the workspace (launch->workspace_bytes, 16-byte aligned) between. */
cudaError_t conv_split_forward(const conv_split_launch *launch, const float *x, const float *w,
                               const float *bias, float *y, float *workspace,
                               cudaStream_t stream);

#ifdef __cplusplus
}
#endif
#endif /* CONVTUNE_CHANNEL_SPLIT_H */
