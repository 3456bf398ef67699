/*
 * depthwise_nhwc.h -- direct depthwise convolution on channels-last (NHWC)
 * tensors.  C linkage; implemented in depthwise_nhwc.cu (the tile form's
 * kernels in depthwise_nhwc_tile.cu), driven by the `depthwise_nhwc`
 * candidate (depthwise_nhwc.c).
 *
 * Channels are innermost in NHWC, so the threads of a warp take
 * consecutive channels of one output pixel: their input loads and output
 * stores are consecutive addresses, as float4s where the channel count
 * allows.  A thread computes `vec` channels (4 or 1) of `px` consecutive
 * output pixels of a row.  The block's filters are staged once in shared
 * memory, tap-major, so that the vec channels of a tap are one load.
 *
 * Kernel forms:
 *   thread loads (CONV_DWNHWC_THREAD_LOADS): each thread loads its own
 *   inputs from global memory (through L1), in one of two kernels:
 *     WINDOW   square 3x3, 5x5 and 7x7 filters, stride 1 or 2, no column
 *              dilation: filter size, stride and px are compile-time, the
 *              filter rows unrolled, and a thread loads each input column
 *              of its px outputs' window once per filter row;
 *     GENERIC  any filter, stride and dilation; one load per tap and output.
 *   ROLLING (CONV_DWNHWC_ROLLING): square 3x3, 5x5 and 7x7, stride 1, no
 *            dilation, float4 channels: a block walks down its band of
 *            output rows with the input rows they need in a shared-memory
 *            ring, the next row arriving by cp.async while this one is
 *            computed, so that each input element leaves L2 once a block.
 *   ROW PAIRS (CONV_DWNHWC_ROW_PAIRS): the window kernel computing two
 *            output rows at once (square 3x3, 5x5 and 7x7, stride 1, no
 *            dilation, px up to 4, bands of 2 rows or more): each input
 *            row a thread loads serves both, K + 1 loads a column for two
 *            rows where the window kernel makes 2K.
 *   TILE (CONV_DWNHWC_TILE): square 3x3, 5x5 and 7x7, stride 1, no
 *            dilation or multiplier, channels in whole 16-byte runs (4
 *            fp32, 8 half), two channels a thread: a block copies the
 *            input tile its outputs read into shared memory once
 *            (cp.async, in the type), and each thread computes `rows`
 *            (1 or 2) x px (4 or 7) outputs in registers, reading each
 *            input pixel of its window once and each tap once per output
 *            row.  Its tq thread positions a channel pair are laid out as
 *            the rows x columns of threads that read the fewest input
 *            pixels per output (conv_dwnhwc_launch's thread_rows and
 *            thread_cols).
 *
 * Multiplier (K = m * C): output channel k reads input channel k / m; only
 * m = 1 takes vec = 4.
 *
 * Element types: x, w and y in the problem's dtype (fp32, fp16, bf16); the
 * sums, the staged filters and the fp32 bias in fp32, each output rounded
 * to the type once after the epilogue; the rolling form's ring of input
 * rows holds the type.
 */
#ifndef CONVTUNE_DEPTHWISE_NHWC_H
#define CONVTUNE_DEPTHWISE_NHWC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#include "algorithms/common/divisor.h"
#include "convtune.h"

#ifdef __cplusplus
extern "C" {
#endif

enum {
  CONV_DWNHWC_THREAD_LOADS = 0,
  CONV_DWNHWC_ROLLING = 1,
  CONV_DWNHWC_ROW_PAIRS = 2,
  CONV_DWNHWC_TILE = 3
};

/* The rolling and tile forms' shared-memory cap (opted into per kernel). */
#define CONV_DWNHWC_SMEM_MAX ((size_t)96 << 10)

/* A candidate config: how one launch is cut up. */
typedef struct conv_dwnhwc_tiling {
  int vec;    /* channels per thread: 4 (float4) or 1; the tile form's 2  */
  int px;     /* consecutive output pixels of a row per thread: 1, 2, 4, 8;
               * the tile form's 4 or 7                                   */
  int tc, tq; /* threads per block along channel groups and pixels        */
  int rows;   /* output rows a block covers, one after another: 1 to 16;
               * more rows share one staging of the filters, fewer make
               * more blocks.  The tile form: output rows a thread, 1 or 2 */
  int form;   /* CONV_DWNHWC_THREAD_LOADS, _ROLLING, _ROW_PAIRS or _TILE   */
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
  int filter_ld;      /* floats per tap row of the staged filters      */
  int rows;           /* output rows a block covers, one after another
                       * (tile: thread_rows * tiling rows)              */
  int q_tiles;        /* blocks along a row: q / (tq * px), rounded up
                       * (tile: q / (thread_cols * px))                 */
  conv_divisor by_q_tiles, by_p;
  unsigned grid[2];   /* n * p * q_tiles, channel blocks */
  size_t smem_bytes;  /* the block's filters (and rolling: input rows;
                       * tile: the input tile)                          */
  int thread_rows, thread_cols; /* tile: tq as rows x columns; else 0  */
} conv_dwnhwc_launch;

/* Checks `tiling` against a valid NHWC forward depthwise `problem` and
 * fills *launch.  Returns false, with the reason in `why`, when the tiling
 * cannot run it (vec 4 with channels not a multiple of 4 or a multiplier,
 * threads out of range, sizes past 32-bit indexing, too much shared
 * memory, a grid too large). */
bool conv_dwnhwc_plan(const conv_problem *problem, const conv_dwnhwc_tiling *tiling,
                      conv_dwnhwc_launch *launch /* OUT */, char *why, size_t why_size);

/* Lets the launch's kernel use the shared memory its form may need; call
 * once on the device before conv_dwnhwc_forward (prepare does). */
cudaError_t conv_dwnhwc_configure(const conv_dwnhwc_launch *launch);

/* y = depthwise conv(x, w) with the problem's epilogue, on `stream`; x, w
 * and y hold elements of the problem's dtype (the exec's pointers, typed
 * float as conv_exec's are). */
cudaError_t conv_dwnhwc_forward(const conv_dwnhwc_launch *launch, const float *x, const float *w,
                                const float *bias, float *y, cudaStream_t stream);

#ifdef __cplusplus
}
#endif
#endif /* CONVTUNE_DEPTHWISE_NHWC_H */
