/*
 * implicit_gemm.h -- kernels of the `implicit_gemm` candidate: an NCHW
 * forward convolution as one GEMM on TF32 tensor cores (mma.sync
 * m16n8k8), reading the im2col matrix straight from x.  C linkage;
 * implemented in implicit_gemm.cu, driven by implicit_gemm.c.
 *
 * Per group, y (K x N*P*Q) = w (K x C*R*S) times im2col(x) (C*R*S x
 * N*P*Q).  In NCHW both operands and the result are contiguous along
 * their long side: a filter row along C*R*S, an im2col row (one input
 * channel and tap) along output pixels, which are consecutive input
 * columns at stride 1.  So a block stages a BM x 16 slice of w and a
 * 16 x BN slice of im2col by cp.async (16-byte copies where rows allow,
 * else 4-byte copies with zero fill for padding, placed by a table of
 * the reduction's taps built once per block), several slices in
 * flight, and its warps multiply them, rounded to TF32 as cuDNN and
 * cuBLAS round.  Pixels of all images form one axis, so small images
 * (7x7 at batch 16) still fill wide tiles, and no transposes to
 * channels-last are needed, which is what cuDNN's TF32 engines spend on
 * NCHW tensors.
 */
#ifndef CONVTUNE_IMPLICIT_GEMM_H
#define CONVTUNE_IMPLICIT_GEMM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#include "algorithms/common/divisor.h"
#include "convtune.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A candidate config: the block tile (bm output channels x bn pixels),
 * each warp's tile (wm x wn) and the slices in flight (stages).  Only the
 * combinations conv_igemm_tilings lists are compiled. */
typedef struct conv_igemm_tiling {
  int bm, bn, wm, wn, stages;
} conv_igemm_tiling;

/* The most shared memory a launch may ask for (Hopper's opt-in limit);
 * conv_igemm_configure refuses launches past the device's own. */
#define CONV_IGEMM_SMEM_MAX ((size_t)227 << 10)

/* Everything a launch needs, derived once by conv_igemm_plan. */
typedef struct conv_igemm_launch {
  conv_igemm_tiling tiling;
  const void *kernel;
  int c_per_group, k_per_group, groups, h, w, p, q, r, s;
  int stride_h, stride_w, pad_h, pad_w, dil_h, dil_w;
  int reduction;      /* C/groups * R * S: the GEMM's inner dimension       */
  int pixels;         /* N * P * Q: its columns                            */
  int m_tiles;        /* blocks along one group's output channels          */
  int epilogue;       /* conv_epilogue                                     */
  bool vector_filters; /* reduction % 4 == 0: w's rows staged as float4s   */
  bool vector_inputs;  /* 1x1, stride 1, no padding, H*W % 4 == 0: im2col
                        * rows are x's channel planes, staged as float4s  */
  conv_divisor by_taps, by_s, by_pq, by_q;
  unsigned blocks;    /* m_tiles * groups * pixel tiles                    */
  int threads;
  size_t smem_bytes;  /* the stages, and the tap table but for float4 inputs */
} conv_igemm_launch;

/* The compiled tilings, large tiles first: writes up to `max`, returns
 * how many there are. */
int conv_igemm_tilings(conv_igemm_tiling *out, int max);

/* Checks `tiling` against a valid problem and fills *launch.  False, with
 * the reason in `why`, when it cannot run it: not an fp32 NCHW forward
 * convolution in TF32 mode, a tiling not compiled, sizes past 32-bit
 * indexing. */
bool conv_igemm_plan(const conv_problem *problem, const conv_igemm_tiling *tiling,
                     conv_igemm_launch *launch /* OUT */, char *why, size_t why_size);

/* Lets the launch's kernel use the shared memory it needs past 48 KiB;
 * cudaErrorInvalidConfiguration when that is past the current device's
 * limit.  Call once per plan; not during capture. */
cudaError_t conv_igemm_configure(const conv_igemm_launch *launch);

/* y = conv(x, w) with the problem's epilogue, on `stream`. */
cudaError_t conv_igemm_forward(const conv_igemm_launch *launch, const float *x, const float *w,
                               const float *bias, float *y, cudaStream_t stream);

#ifdef __cplusplus
}
#endif
#endif /* CONVTUNE_IMPLICIT_GEMM_H */
