/*
 * direct_channel.h -- direct convolution kernels for convolutions with few
 * channels per group: depthwise (one input channel per group) and dense
 * convolutions with small C x K.  C linkage; implemented in
 * direct_channel.cu, driven by the `direct_channel` candidate.
 *
 * A block computes a tile of output pixels for `kb` output channels of one
 * image and group.  It stages the input tile with its halo, for a few input
 * channels at a time, and the block's filters in shared memory; each thread
 * accumulates px x py output pixels for its kb channels in registers.
 *
 * Four kernel layouts:
 *   GENERIC  any stride and dilation.  A thread's px columns are
 *            interleaved (q0 + tx + j*tx_count), so that a warp reads
 *            consecutive shared-memory words and writes coalesced rows.
 *   UNIT     stride 1 and dilation 1 only; px is 4.  A thread's 4 columns
 *            are contiguous, read as float4 windows, and each input row it
 *            loads serves all py output rows that need it: this is what
 *            keeps large filters (31x31) busy on FMAs instead of on
 *            shared-memory loads.
 *   WINDOW   square 3x3, 5x5 and 7x7 filters; stride 1 with any dilation,
 *            or stride 2 undilated (direct_window.cu).  Filter size, stride
 *            and blocking are compile-time, so the taps are unrolled FMAs on
 *            registers, and there is no input tile in shared memory: each
 *            thread reads its own input window from global memory (through
 *            L1, where neighbouring threads share the halo), as float4s
 *            where the window's columns allow it.  A thread's
 *            outputs are spaced by the dilation, so that output j and tap s
 *            meet in window entry j*stride + s whatever the dilation.  Only
 *            the filters are staged in shared memory.
 *   SIMPLE   square 1x1, 3x3, 5x5 and 7x7 filters, any stride and
 *            dilation, passes of at most CONV_DIRECT_SIMPLE_MAX_OUTPUTS
 *            outputs: one output per thread, no shared memory, filter taps
 *            and inputs straight from global memory, all in flight at once.
 *            For passes so small (seed3_msd_small: 4096 outputs) that a
 *            thread's few dozen instructions before its first load are the
 *            time: 32-bit offsets, the image and channel from the grid, no
 *            division but two multiply-shifts.
 *   NHWC     channels-last fp16 and bf16 forward convolutions of one group
 *            and 1, 2, 4, 8, 16 or 32 output channels, any filter, stride and
 *            dilation: a thread per output pixel, all its channels
 *            (direct_nhwc.cu).  The other layouts refuse NHWC problems.
 */
#ifndef CONVTUNE_DIRECT_CHANNEL_H
#define CONVTUNE_DIRECT_CHANNEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#include "algorithms/common/divisor.h"
#include "convtune.h"
#include "core/core.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum conv_direct_layout {
  CONV_DIRECT_GENERIC = 0,
  CONV_DIRECT_UNIT = 1,
  CONV_DIRECT_WINDOW = 2,
  CONV_DIRECT_SIMPLE = 3,
  CONV_DIRECT_NHWC = 4,
} conv_direct_layout;

/* How one launch is cut up; a candidate config. */
typedef struct conv_direct_tiling {
  int layout;     /* conv_direct_layout                                  */
  int px, py, kb; /* per thread: columns, rows, output channels (SIMPLE: 1) */
  int tx, ty;     /* threads per block along columns and rows            */
} conv_direct_tiling;

/* The tiling one of the family's configs names: its six values, in the
 * order of conv_direct_tiling's fields. */
conv_direct_tiling conv_direct_tiling_of(const conv_config *config);

/* Everything a launch needs, derived once by conv_direct_plan(). */
typedef struct conv_direct_launch {
  conv_direct_tiling tiling;
  const void *kernel;  /* the compiled kernel for the tiling, found once */
  int n, c, h, w, k, p, q, r, s;
  int stride_h, stride_w, pad_h, pad_w, dil_h, dil_w;
  int groups;
  int cg, kg;          /* channels per group, in and out                 */
  int epilogue;        /* conv_epilogue                                  */
  int dtype;           /* conv_dtype of x, w and y                       */
  int kchunks;         /* kg / kb                                        */
  /* GENERIC and UNIT: one block per output tile, grid[0] blocks.        */
  int tile_rows, tile_cols;  /* output pixels per block                  */
  int tiles_p, tiles_q;
  int halo_rows, halo_cols;  /* staged input per channel (cols: loaded)  */
  int pitch;           /* floats per staged row, a multiple of 4         */
  int s_pitch;         /* floats per filter row in shared memory         */
  int stage_channels;  /* input channels staged at once                  */
  /* GENERIC and UNIT: w % 4 == 0, rows are staged as float4.  WINDOW: the
   * kernel reads its window as aligned float4s (undilated, w % 4 == 0,
   * px * stride == 4, kb == 1, and a kernel compiled for pad_w % 4). */
  bool vector_loads;
  /* WINDOW: grid = {images x groups x kchunks, row blocks, column blocks},
   * blocks of tx x ty threads. */
  int row_spacing, col_spacing; /* between a thread's outputs            */
  conv_divisor by_kchunks, by_groups, by_row_spacing, by_col_spacing;
  bool vector_stores;  /* a thread's px columns are one aligned vector   */
  /* SIMPLE: grid = {column blocks, row blocks, images x output channels};
   * these split the grid's z into image and channel, the channel into
   * group and channel within it. */
  conv_divisor by_k, by_kg;
  /* A backward-data pass run as a forward convolution (see
   * conv_direct_backward_data_view): w is the pass's filter, read flipped
   * and with input and output channels swapped. */
  bool transposed_filter;
  /* Launched with programmatic dependent launch (pdl.cuh): false
   * from conv_direct_plan, set by the candidate (conv_device_pdl). */
  bool pdl;
  unsigned grid[3];
  size_t smem_bytes;
} conv_direct_launch;

#ifdef __CUDACC__
/* Offset in w of the launch's filter tap `tap` (r * s + s') of output
 * channel k and input channel c (within its group), as the forward kernels
 * see the filter.  With transposed_filter, the launch's k is the pass's
 * input channel (group g = k / kg, index k - g*kg) and c its output channel
 * within group g, and the tap is mirrored in both axes: the transposed
 * convolution's filter, read in place rather than copied. */
__device__ __forceinline__ int64_t conv_direct_weight_offset(const conv_direct_launch &L, int k,
                                                             int c, int tap) {
  const int taps = L.r * L.s;
  if (!L.transposed_filter) return ((int64_t)k * L.cg + c) * taps + tap;
  const int g = k / L.kg;
  return (((int64_t)g * L.cg + c) * L.kg + (k - g * L.kg)) * taps + (taps - 1 - tap);
}
#endif

/* Largest shared memory one block may use (the opt-in limit is larger;
 * staying here leaves room for two blocks per SM on sm_80+). */
#define CONV_DIRECT_SMEM_MAX ((size_t)96 << 10)

/* The most outputs for which the SIMPLE layout is offered: past a million
 * a thread per output no longer beats a window of them.  Up to
 * CONV_DIRECT_SIMPLE_FIRST_OUTPUTS its configs come first (it won every
 * such layer measured: seed3_msd_small, mobilenet_v2's depthwise layers
 * at batch 1 up to 14x14x576 on an H100), past it last. */
#define CONV_DIRECT_SIMPLE_MAX_OUTPUTS ((int64_t)1 << 20)
#define CONV_DIRECT_SIMPLE_FIRST_OUTPUTS ((int64_t)1 << 17)

/* Checks `tiling` against a valid forward `problem` (NCHW: fp32, and fp16
 * and bf16 with the simple and window layouts; NHWC: the NHWC layout) and
 * fills *launch.  Returns false, with the reason in `why`, when the tiling
 * cannot run this problem (the unit or generic layout for a half type, a
 * layout for the other memory layout, wrong layout for the stride or filter, kb not dividing
 * K/groups, not compiled, too much shared memory, sizes past 32-bit
 * indexing, a grid too large). */
bool conv_direct_plan(const conv_problem *problem, const conv_direct_tiling *tiling,
                      conv_direct_launch *launch /* OUT */, char *why, size_t why_size);

/* How many threads a tiling needs along output columns and rows: one per
 * px (py) outputs, and for the WINDOW layout whole groups of `spacing`
 * threads, whose outputs interleave. */
void conv_direct_threads_needed(const conv_problem *problem, const conv_direct_tiling *tiling,
                                int64_t *columns /* OUT */, int64_t *rows /* OUT */);

/* Raises the dynamic shared-memory limit of the launch's kernel to
 * CONV_DIRECT_SMEM_MAX.  Call once per plan, before conv_direct_forward;
 * not during graph capture. */
cudaError_t conv_direct_configure(const conv_direct_launch *launch);

/* y = conv(x, w) with the problem's epilogue (bias, bias + ReLU), on `stream`;
 * x, w and y hold elements of the problem's dtype (typed float, as
 * conv_exec's pointers are). */
cudaError_t conv_direct_forward(const conv_direct_launch *launch, const float *x, const float *w,
                                const float *bias, float *y, cudaStream_t stream);

#ifdef __cplusplus
}
#endif
#endif /* CONVTUNE_DIRECT_CHANNEL_H */
