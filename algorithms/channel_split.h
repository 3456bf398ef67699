/*
 * channel_split.h -- a direct convolution for small outputs with many
 * input channels (batch-1 inference: an 8 x 8 board with 256 channels, a
 * 56 x 56 layer with 64), where a GEMM has too few output tiles to fill
 * the GPU.  C linkage; implemented in channel_split.cu, driven by the
 * `channel_split` candidate.
 *
 * The sum over input channels and taps is split: each block adds up
 * `c_per_split` input channels for a tile of output pixels and `k_tile`
 * output channels, so pixel tiles x channel tiles x splits blocks keep the
 * SMs busy.  With one split the block applies the epilogue and writes y; with
 * more, each writes its partial sums to the workspace and a second kernel
 * adds the splits in a fixed order (deterministic), adds the bias and
 * applies the activation.  Both kernels are captured into the plan's graph.
 *
 * Strict fp32 FMAs, no tensor cores: valid in both math modes.  A thread
 * keeps 8 output channels of 1, 2 or 4 pixels of one output row in
 * registers.  For a few input channels at a time the block stages their
 * filters (output channel fastest, so that a warp reads them as
 * broadcasts) and its input window, zero-padded, in shared memory: the
 * loads of a stage go out together, and the sums read taps without bounds
 * checks.  A block's tile is whole rows of tx * pixels columns (tx threads
 * a row, at most all of them), as many rows as the threads allow.
 */
#ifndef CONVTUNE_CHANNEL_SPLIT_H
#define CONVTUNE_CHANNEL_SPLIT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#include "algorithms/common/divisor.h"
#include "convtune.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Most threads a block, and output channels per thread. */
#define CONV_SPLIT_MAX_THREADS 256
#define CONV_SPLIT_K_PER_THREAD 8
/* Shared memory for staged filters and input windows, in floats (32 KiB). */
#define CONV_SPLIT_STAGE_FLOATS 8192

/* A candidate config: output channels per block (16, 32 or 64), output
 * pixels per thread (1, 2 or 4) and how many parts the input channels are
 * split into. */
typedef struct conv_split_tiling {
  int k_tile;
  int pixels;
  int splits;
} conv_split_tiling;

/* Everything a launch needs, derived once by conv_split_plan(). */
typedef struct conv_split_launch {
  conv_split_tiling tiling;
  const void *kernel; /* the partial-sum kernel compiled for the filter size */
  int n, c, h, w, k, p, q, r, s;
  int stride_h, stride_w, pad_h, pad_w, dil_h, dil_w;
  int epilogue;
  int tx, ty;            /* threads along an output row, rows a block      */
  int tiles_q;           /* column tiles of tx * pixels outputs            */
  int window_h, window_w; /* the input window a block stages per channel  */
  int threads;           /* (k_tile / 8) * tx * ty                         */
  int c_per_split;       /* input channels a block sums                    */
  int stage_channels;    /* input channels staged at once                  */
  int k_pitch;           /* floats per staged tap: k_tile + 4              */
  conv_divisor by_span, by_plane, by_window_w; /* stage_channels * r * s,
                                                  window_h * window_w, window_w */
  unsigned grid[3];      /* pixel tiles, channel tiles, n * splits         */
  size_t smem_bytes;
  size_t workspace_bytes; /* splits * n * k * p * q floats; 0 for 1 split  */
} conv_split_launch;

/* Whether the family applies at all: one group, an output small enough
 * that a GEMM would leave SMs idle (n * p * q <= 8192 pixels) and at
 * least 8 output channels. */
bool conv_split_applicable(const conv_problem *problem);

/* The block tile for a p x q output: tx threads along a row, ty rows
 * (conv_split_plan's choice, for tests). */
void conv_split_block_tile(int64_t p, int64_t q, const conv_split_tiling *tiling, int *tx,
                           int *ty);

/* Checks `tiling` against a valid problem and fills *launch; false, with
 * the reason in `why`, when it cannot run it (a k_tile or pixel count not
 * offered, more pixels a thread or splits than needed, more splits than
 * input channels, one channel's filters and window too large to stage,
 * sizes past 32-bit indexing). */
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
