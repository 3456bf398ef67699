/*
 * patch.h -- kernels of the `patch` candidate: one filter bank applied to
 * many small images ("patches", up to 16 x 16, N large), as in the seed's
 * B x P x C x H x W batches folded into N = B x P.  C linkage; implemented
 * in patch.cu, driven by patch.c.
 *
 * Scope: stride 1, dilation 1, one group, "same" padding ((R-1)/2, (S-1)/2)
 * on the patch geometries compiled in patch.cu (conv_patch_geometry), and K
 * a multiple of 8.  Each block keeps the filters of its output channels in
 * shared memory for the whole launch and walks over groups of images
 * (persistent blocks), staging their input channels a chunk at a time,
 * double-buffered.  Two kernels:
 *
 *   FMA  fp32 multiply-adds, for strict fp32 (and TF32 mode, which allows
 *        them).  The 32 lanes of a warp are 32 images; a thread owns
 *        `rows` whole output rows of its image for `channels` output
 *        channels.  Geometry, rows and channels are compile-time, so every
 *        tap that falls on the zero padding is left out at compile time:
 *        on 4 x 4 patches with a 3 x 3 filter that is 31% of a direct
 *        convolution's multiply-adds (16% on 8 x 8), which a GEMM-shaped
 *        library computes.  Filter loads are warp-wide broadcasts.
 *   MMA  TF32 tensor cores (mma.sync m16n8k8), TF32 mode only, K a
 *        multiple of 32 (a warp takes 4 or 8 tiles of 8 output channels):
 *        an implicit GEMM whose M tiles are 16 pixels of one image, summed
 *        over input channels and taps.  Inputs are staged zero-padded and
 *        rounded to TF32; the filter bank is stored in fragment order, one
 *        64-bit load per lane.
 *   WGMMA the same GEMM on Hopper's warpgroup tensor cores (wgmma m64nNk8,
 *        sm_90 only; compiled for sm_90a in patch_wgmma.cu): each warp
 *        loads its 16-pixel A fragment from the same staged layout into
 *        registers, the filters (B, N = 32 or 64 output channels) are read
 *        by the tensor cores straight from the bank, and one instruction
 *        replaces a warpgroup's 4 x N / 8 mma.sync.
 */
#ifndef CONVTUNE_PATCH_H
#define CONVTUNE_PATCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#include "convtune.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum conv_patch_kind {
  CONV_PATCH_FMA = 0,
  CONV_PATCH_MMA = 1,
  CONV_PATCH_WGMMA = 2 /* needs compute capability 9.0 exactly */
} conv_patch_kind;

/* How one launch is cut up; a candidate config. */
typedef struct conv_patch_tiling {
  int kind;     /* conv_patch_kind                                            */
  int rows;     /* FMA: output rows per thread; (WG)MMA: 16-pixel tiles per warp */
  int channels; /* FMA: output channels per thread; (WG)MMA: 8-channel tiles per warp */
  int warps;    /* FMA: warps along output channels; (WG)MMA: warps along pixels */
} conv_patch_tiling;

/* Everything a launch needs, derived by conv_patch_plan (and the grid by
 * conv_patch_configure, which asks the device how many blocks fit). */
typedef struct conv_patch_launch {
  conv_patch_tiling tiling;
  const void *kernel;
  int n, c, k, h, w, r, s, epilogue;
  int images_per_block; /* FMA: 32, one per lane                            */
  int block_k;          /* output channels of one block                     */
  int k_blocks;         /* K / block_k                                      */
  int image_groups;     /* ceil(n / images_per_block)                       */
  int chunk;            /* input channels staged at once                    */
  int chunks;           /* ceil(c / chunk)                                  */
  int threads;
  int image_floats;     /* floats of one staged image chunk (with padding)  */
  int bank_floats;      /* floats of the filter bank in shared memory       */
  /* FMA: division by the float4s of one staged image chunk, as a multiply
   * and a shift (conv_divisor_make). */
  uint32_t stage_div_multiplier, stage_div_shift;
  size_t smem_bytes;
  unsigned grid[2];     /* {blocks walking image groups, k_blocks}          */
} conv_patch_launch;

/* Most dynamic shared memory a patch block may use: sm_90's opt-in limit
 * (227 KiB).  conv_patch_configure rejects launches past the device's own
 * (163 KiB on sm_80). */
#define CONV_PATCH_SMEM_MAX ((size_t)227 << 10)

/* Whether a kernel is compiled for the problem's patch geometry (h, w, r, s
 * with "same" padding, stride 1, dilation 1, one group) and K is a
 * multiple of 8.  Says nothing about tilings. */
bool conv_patch_geometry(const conv_problem *problem);

/* The kernels compiled for the problem's geometry as tilings with warps 0
 * (FMA, then MMA, then WGMMA); writes up to `max`, returns how many there are. */
int conv_patch_kernels(const conv_problem *problem, conv_patch_tiling *out, int max);

/* Checks `tiling` against a valid problem and fills *launch but its grid.
 * Returns false, with the reason in `why`, when the tiling cannot run it
 * (geometry or tiling not compiled, MMA in strict mode, channels not
 * dividing K, too much shared memory, sizes past 32-bit indexing). */
bool conv_patch_plan(const conv_problem *problem, const conv_patch_tiling *tiling,
                     conv_patch_launch *launch /* OUT */, char *why, size_t why_size);

/* Raises the kernel's shared-memory limit as needed and sets the grid: as
 * many blocks as fit on the device at once (they walk the image groups),
 * at most one per group.  cudaErrorInvalidConfiguration: no block fits this
 * device (shared memory or registers).  Call once per plan; not during
 * graph capture. */
cudaError_t conv_patch_configure(conv_patch_launch *launch, int sm_count);

/* y = conv(x, w) with the problem's epilogue, on `stream`. */
cudaError_t conv_patch_forward(const conv_patch_launch *launch, const float *x, const float *w,
                               const float *bias, float *y, cudaStream_t stream);

/* The filter of a one-group backward-data pass as its transposed view's
 * forward filter (conv_direct_backward_data_view): wt[c][k][r][s] =
 * w[k][c][R-1-r][S-1-s] for w of k x c x R x S, on `stream`. */
cudaError_t conv_patch_transpose_filter(const float *w, int64_t k, int64_t c, int64_t r,
                                        int64_t s, float *wt, cudaStream_t stream);

#ifdef __cplusplus
}
#endif
#endif /* CONVTUNE_PATCH_H */
