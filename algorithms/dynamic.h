/*
 * dynamic.h -- the sizes of a dynamic problem (CONV_OP_DYNAMIC; convtune.h,
 * conv_op) as the dynamic op's kernels read them: the reference kernels
 * (reference_dynamic.cu) and the dynamic_direct and dynamic_unfold_gemm
 * families; and dynamic_unfold_gemm's unfold kernel (dynamic_unfold.cu),
 * with C linkage.
 *
 * Tensors, all contiguous: x[b][c][h][w], y[b][c][p][q] and the weights
 * wt[b][g][tap][p][q] with tap = i*k + j; channel c is in group c / cg.
 * Every tensor of a valid problem has fewer than 2^31 elements, so int
 * extents and element offsets below 2^31 are exact.
 */
#ifndef CONVTUNE_DYNAMIC_H
#define CONVTUNE_DYNAMIC_H

#include <stdbool.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#include "convtune.h"

#ifdef __cplusplus
extern "C" {
#endif

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

/* Unfolds images [b0, b0 + images) of x into
 * u[b - b0][g][p*Q + q][ci][i*k + j] = x[b][g*cg + ci][p*stride - pad + i*dil][q*stride - pad + j*dil]
 * (0 outside the image): for every output pixel, its group's window as a
 * k*k x cg column-major matrix, the layout dynamic_unfold_gemm's batched
 * GEMMs read with a uniform stride.  `d` must come from
 * conv_dynamic_dims_make. */
cudaError_t conv_dynamic_unfold(const conv_dynamic_dims *d, const float *x, int b0, int images,
                                float *u, cudaStream_t stream);

#ifdef __cplusplus
}
#endif
#endif /* CONVTUNE_DYNAMIC_H */
