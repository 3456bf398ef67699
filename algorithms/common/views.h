/*
 * views.h -- the problem views several families share (views.c):
 *
 * - a stride-1 backward-data pass seen as the forward convolution that
 *   computes it (direct_channel runs it; data_gather, fft and patch leave
 *   such passes to it);
 * - the sizes of a dynamic problem (CONV_OP_DYNAMIC; convtune.h, conv_op)
 *   as the dynamic op's kernels read them: the dynamic_direct and
 *   dynamic_unfold_gemm families and the tuner's reference kernels
 *   (tuner/reference_dynamic.cu).
 *
 * Tensors, all contiguous: x[b][c][h][w], y[b][c][p][q] and the weights
 * wt[b][g][tap][p][q] with tap = i*k + j; channel c is in group c / cg.
 * Every tensor of a valid problem has fewer than 2^31 elements, so int
 * extents and element offsets below 2^31 are exact.
 */
#ifndef CONVTUNE_VIEWS_H
#define CONVTUNE_VIEWS_H

#include <stdbool.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#include "convtune.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A stride-1 NCHW backward-data problem as the forward convolution that
 * computes its dx: dy convolved with the filters mirrored in both axes,
 * input and output channels swapped within each group, and padding
 * dil*(r-1) - pad, which makes the output dx's size (the transposed
 * convolution).  Run with transposed_filter set, the forward kernels read
 * the pass's own filter that way.  False when `problem` is no such pass
 * (another direction or layout, a stride above 1, or padding past the
 * dilated filter's reach, which would need cropping).  The view keeps the
 * problem's dtype, which each family checks as it checks its own. */
bool conv_direct_backward_data_view(const conv_problem *problem, conv_problem *forward /* OUT */);

typedef struct conv_dynamic_dims {
  int b, c, h, w;
  int groups, cg; /* groups and channels per group                */
  int k, taps;    /* window side and k*k                          */
  int dil, stride, pad;
  int p, q;       /* output height and width                      */
} conv_dynamic_dims;

/* The dims of a problem conv_problem_validate accepts with op
 * CONV_OP_DYNAMIC; false for anything else (nothing written). */
static inline bool conv_dynamic_dims_make(const conv_problem *pb, conv_dynamic_dims *d) {
  if (pb == NULL || pb->op != CONV_OP_DYNAMIC) return false;
  int64_t p = 0, q = 0;
  if (conv_problem_output_dims(pb, &p, &q) != CONV_OK) return false;
  d->b = (int)pb->n, d->c = (int)pb->c, d->h = (int)pb->h, d->w = (int)pb->w;
  d->groups = (int)pb->groups, d->cg = (int)(pb->c / pb->groups);
  d->k = (int)pb->r, d->taps = (int)(pb->r * pb->r);
  d->dil = (int)pb->dil_h, d->stride = (int)pb->stride_h, d->pad = (int)pb->pad_h;
  d->p = (int)p, d->q = (int)q;
  return true;
}

#ifdef __cplusplus
}
#endif
#endif /* CONVTUNE_VIEWS_H */
