/*
 * dynamic_direct.h -- the dynamic op's direct kernels (CONV_OP_DYNAMIC;
 * convtune.h, conv_op), in all three directions.  C linkage; implemented
 * in dynamic_direct.cu, driven by the `dynamic_direct` candidate
 * (dynamic_direct.c).
 *
 * A block owns a tw x th tile of pixels of one image and one group, one
 * pixel a thread, and a chunk of cb of the group's channels:
 *   FORWARD          each thread loads its output pixel's k*k filter into
 *                    registers once and applies it to every channel of the
 *                    chunk (the op's reuse: a filter serves C/G channels);
 *                    the block stages the input tiles (with their halo)
 *                    of two channels at a time in shared memory, so
 *                    neighbouring windows share their loads, with
 *                    cp.async into two buffers: the next two channels
 *                    arrive while these are summed.  Or (the RESIDENT
 *                    form, below) all of the chunk's channels staged at
 *                    once and the filter loaded a row of taps at a time.
 *   BACKWARD_DATA    each thread owns one dx pixel and gathers from the
 *                    outputs whose windows read it (no atomics): which
 *                    taps reach it, and their weights, are found once and
 *                    reused for every channel of the chunk.  With stride
 *                    1 the dy tiles around the dx tile are staged as in
 *                    forward; with stride 2 dy is read through L1.
 *   BACKWARD_FILTER  each thread owns the k*k weight gradients of one
 *                    output pixel and sums over the group's channels in
 *                    registers, in a fixed order (no atomics:
 *                    deterministic); the input tiles are staged as in
 *                    forward.  The chunk is the whole group.
 * Kernels are compiled for k = 1, 3, 5, 7, stride 1, 2, and dilation 1,
 * 2 (constant tap offsets) or any.
 */
#ifndef CONVTUNE_DYNAMIC_DIRECT_H
#define CONVTUNE_DYNAMIC_DIRECT_H

#include <stdbool.h>
#include <stddef.h>

#include <cuda_runtime_api.h>

#include "algorithms/common/views.h"
#include "convtune.h"

#ifdef __cplusplus
extern "C" {
#endif

/* How a forward block walks its channels and window (backward passes
 * take CONV_DYN_DIRECT_STEPS only):
 *   STEPS     the thread's whole k*k filter in registers; the chunk's
 *             channels staged two at a time, double-buffered.
 *   RESIDENT  every channel of the chunk (at most
 *             CONV_DYN_DIRECT_RESIDENT_MAX) staged at once; the thread
 *             walks its window a row of taps at a time, with that row's
 *             filters in registers and the next row's loading meanwhile.
 *             k filter registers a pixel instead of k*k: for k = 7, 14
 *             instead of 98, so three times the warps fit a
 *             multiprocessor to hide the filters' loads (the op's largest
 *             operand), at the cost of more shared memory a block. */
typedef enum conv_dyn_direct_form {
  CONV_DYN_DIRECT_STEPS = 0,
  CONV_DYN_DIRECT_RESIDENT = 1,
} conv_dyn_direct_form;

#define CONV_DYN_DIRECT_RESIDENT_MAX 16
/* Shared memory a RESIDENT block may take (its kernels opt in past the
 * default 48 KiB; conv_dyn_direct_configure). */
#define CONV_DYN_DIRECT_SMEM_MAX (96 * 1024)

/* A candidate config: tile width and height (threads), channels a block,
 * pixels a thread (1, or in forward with dilation 1 or 2, 2 side by
 * side: their windows overlap, so each row of the tile is read once, as
 * float2s, for both) and the form (conv_dyn_direct_form). */
typedef struct conv_dyn_direct_tiling {
  int tw, th, cb, px;
  int form;
} conv_dyn_direct_tiling;

typedef struct conv_dyn_direct_launch {
  conv_dyn_direct_tiling tiling;
  conv_dynamic_dims d;
  conv_direction direction;
  int tiles_x, tiles_y; /* over q, p (forward, filter) or w, h (data)  */
  int chunks;           /* of cb channels per group                    */
  int in_w, in_h;       /* the staged input tile, halo included        */
  size_t smem_bytes;
  unsigned blocks;
} conv_dyn_direct_launch;

/* Whether kernels exist for a k x k window (1, 3, 5 or 7). */
bool conv_dyn_direct_compiled(int64_t k);

/* Checks `tiling` against a valid dynamic `problem` and fills *launch.
 * False, with the reason in `why`, for a window without kernels, a tile
 * that is not 1..256 threads with tw a multiple of 8 (whole sectors of a
 * row), cb outside [1, C/G] (or not C/G for backward-filter), a RESIDENT
 * form outside forward with k = 3, 5 or 7 and dilation 1 or 2, or with cb
 * past CONV_DYN_DIRECT_RESIDENT_MAX, staged tiles past their shared
 * memory (STEPS: 4 tiles in 48 KiB; RESIDENT: cb tiles in
 * CONV_DYN_DIRECT_SMEM_MAX), or a grid past 2^31 - 1 blocks. */
bool conv_dyn_direct_plan(const conv_problem *problem, const conv_dyn_direct_tiling *tiling,
                          conv_dyn_direct_launch *launch /* OUT */, char *why, size_t why_size);

/* Lets the launch's kernel take the shared memory it plans (once per
 * plan, before the first run; a no-op where it fits the default). */
cudaError_t conv_dyn_direct_configure(const conv_dyn_direct_launch *launch);

/* The pass on `stream`: forward reads x and wt and writes y; backward-data
 * reads dy (y) and wt and writes dx (x); backward-filter reads x and dy
 * (y) and writes dwt (wt).  The tensors it does not write are const. */
cudaError_t conv_dyn_direct_run(const conv_dyn_direct_launch *launch, float *x, float *wt,
                                float *y, cudaStream_t stream);

#ifdef __cplusplus
}
#endif
#endif /* CONVTUNE_DYNAMIC_DIRECT_H */
