/*
 * launch_plan.cuh -- host code that the kernel files' plan, configure and
 * tilings functions share, written over each family's own launch struct
 * (a template reads the fields by name, so the structs stay the plain C
 * ones their headers declare).  Included by .cu files only.
 */
#ifndef CONVTUNE_LAUNCH_PLAN_CUH
#define CONVTUNE_LAUNCH_PLAN_CUH

#include <cstddef>
#include <cstdint>

#include <cuda_runtime_api.h>

#include "algorithms/common/kernels.h"
#include "convtune.h"

/* a / b rounded up, for a >= 0 and b > 0. */
static inline int64_t conv_ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

/* The output size along one axis of `in` inputs, a filter of `filter`
 * taps, stride, padding (each side) and dilation. */
static inline int64_t conv_output_size(int64_t in, int64_t filter, int64_t stride, int64_t pad,
                                       int64_t dil) {
  return (in + 2 * pad - dil * (filter - 1) - 1) / stride + 1;
}

/* The compiled tilings, in the table's order: writes up to `max` of
 * them and returns how many there are. */
template <class Instance, size_t N, class Tiling>
static inline int conv_list_tilings(const Instance (&instances)[N], Tiling *out, int max) {
  for (int i = 0; i < (int)N && i < max; i++) out[i] = instances[i].tiling;
  return (int)N;
}

/* The first checks of a plan for the TF32 wgmma GEMMs (padded_gemm,
 * stem_gemm): no NULL argument, and an fp32 NCHW forward convolution in
 * TF32 mode, all that they take; else false with the reason in `why`. */
static inline bool conv_plan_tf32_nchw_forward(const conv_problem *p, const void *tiling,
                                               const void *launch, char *why, size_t why_size) {
  if (p == NULL || tiling == NULL || launch == NULL)
    return conv_refuse(why, why_size, "NULL argument");
  if (p->op != CONV_OP_CONVOLUTION || p->direction != CONV_FORWARD || p->dtype != CONV_DTYPE_F32 ||
      p->layout != CONV_LAYOUT_NCHW || p->math != CONV_MATH_TF32)
    return conv_refuse(why, why_size, "only fp32 NCHW forward convolutions in TF32 mode");
  return true;
}

/* Copies the problem's sizes, strides, padding and dilations, with its
 * output's p x q, into the int fields of those names of a launch (the
 * kernels index with 32-bit ints: the plan has checked that they fit). */
template <class Launch>
static inline void conv_launch_set_geometry(Launch &l, const conv_problem *pb, int64_t p,
                                            int64_t q) {
  l.n = (int)pb->n, l.c = (int)pb->c, l.h = (int)pb->h, l.w = (int)pb->w, l.k = (int)pb->k;
  l.p = (int)p, l.q = (int)q, l.r = (int)pb->r, l.s = (int)pb->s;
  l.stride_h = (int)pb->stride_h, l.stride_w = (int)pb->stride_w;
  l.pad_h = (int)pb->pad_h, l.pad_w = (int)pb->pad_w;
  l.dil_h = (int)pb->dil_h, l.dil_w = (int)pb->dil_w;
}

/* A configure() for a launch whose kernel may take more than 48 KiB of
 * dynamic shared memory: conv_kernel_allow_smem for its kernel and
 * smem_bytes. */
template <class Launch>
static inline cudaError_t conv_launch_allow_smem(const Launch *L) {
  if (L == NULL || L->kernel == NULL) return cudaErrorInvalidValue;
  return conv_kernel_allow_smem(L->kernel, L->smem_bytes);
}

#endif /* CONVTUNE_LAUNCH_PLAN_CUH */
