/*
 * dynamic_unfold_gemm.h -- the unfold kernel of the dynamic_unfold_gemm
 * family (dynamic_unfold_gemm.cu), with C linkage.
 */
#ifndef CONVTUNE_DYNAMIC_UNFOLD_GEMM_H
#define CONVTUNE_DYNAMIC_UNFOLD_GEMM_H

#include <cuda_runtime_api.h>

#include "algorithms/common/views.h"

#ifdef __cplusplus
extern "C" {
#endif

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
#endif /* CONVTUNE_DYNAMIC_UNFOLD_GEMM_H */
