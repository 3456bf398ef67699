/*
 * direct_window.h -- the WINDOW layout of the direct_channel kernels (see
 * direct_channel.h), for direct_channel.cu.  C linkage; implemented in
 * direct_window.cu.
 */
#ifndef CONVTUNE_DIRECT_WINDOW_H
#define CONVTUNE_DIRECT_WINDOW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "algorithms/direct_channel.h"
#include "algorithms/common/launch_checks.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Completes `common` (sizes, groups, epilogue, kchunks already filled by
 * conv_direct_plan) for the WINDOW layout and writes it to *launch.
 * Returns false with the reason in `why` when no window kernel fits the
 * problem: filter not square 3, 5 or 7, strides unequal or above 2, a
 * dilated stride-2 problem, a blocking not compiled, filters past
 * CONV_DIRECT_WINDOW_SMEM_MAX, or a grid too large. */
bool conv_direct_window_plan(const conv_direct_launch *common, conv_direct_launch *launch /* OUT */,
                             char *why, size_t why_size);

/* Threads a window tiling needs along output columns (rows): whole groups
 * of `spacing` threads, each thread owning `per_thread` outputs spaced by
 * `spacing`, together covering `outputs`. */
int64_t conv_direct_window_threads(int64_t outputs, int per_thread, int64_t spacing);

/* Spacing between a window thread's outputs along one axis: the dilation
 * with stride 1 (outputs interleave with their neighbours'), else 1. */
static inline int conv_direct_window_spacing(int stride, int dilation) {
  return stride == 1 ? dilation : 1;
}

/* For the planning functions of direct_channel.cu and direct_window.cu:
 * writes the reason to `why` and returns false. */
/* Only the filters are in shared memory: the default 48 KiB suffice. */
#define CONV_DIRECT_WINDOW_SMEM_MAX ((size_t)48 << 10)

#ifdef __cplusplus
}
#endif
#endif /* CONVTUNE_DIRECT_WINDOW_H */
