/*
 * depthwise_nhwc_kernels.cuh -- device code shared by depthwise_nhwc.cu
 * (the window, row-pairs, rolling and generic forms, and the planning)
 * and depthwise_nhwc_tile.cu (the tile form): the kernel arguments, the
 * kernels' type, and the staging of a block's filters.  Included by .cu
 * files only.
 */
#ifndef CONVTUNE_DEPTHWISE_NHWC_KERNELS_CUH
#define CONVTUNE_DEPTHWISE_NHWC_KERNELS_CUH

#include "algorithms/depthwise_nhwc.h"
#include "algorithms/common/elements.cuh"
#include "algorithms/common/epilogue.cuh"
#include "algorithms/common/staging.cuh"

/* Named, not anonymous: depthwise_nhwc.cu finds the tile kernels of
 * depthwise_nhwc_tile.cu through tile_kernel. */
namespace conv_dwnhwc_detail {

constexpr int kMaxThreads = 256;

/* The launch's numbers, by value: the kernel never reads host memory. */
struct dw_params {
  int c, h, w, k, p, q, r, s;
  int stride_h, stride_w, pad_h, pad_w, dil_h, dil_w;
  int multiplier, block_channels, filter_ld, rows, epilogue;
  conv_divisor by_q_tiles, by_p_tiles;
};

/* Every form's kernel: (arguments, x, w, bias, y, the form's column
 * count: tq, or the tile form's thread_cols). */
typedef void (*dw_kernel_fn)(const dw_params, const void *, const void *, const float *, void *,
                             int);

/* Starts copying the block's filters into shared memory, tap-major with
 * rows of prm.filter_ld floats, zero past the last output channel (one
 * cp.async group; the caller waits).  The block's filters are one
 * contiguous run of w ([k][taps]), read in order so that the loads
 * coalesce, and all of a thread's copies are in flight at once (49 of
 * them for 128 channels of 7x7 filters): loads through registers waited
 * a memory latency per batch, 1-2% of ConvNeXt's small-image layers.
 * The padded row length spreads the transposing stores over the banks. */
/* The staging loop: copy(dst, src, inside) for each filter element, its
 * shared-memory slot and its source (`inside`: not past the last channel). */
template <typename T, typename Copy>
__device__ __forceinline__ void for_each_filter_element(const dw_params &prm,
                                                        const T *__restrict__ w, float *sw,
                                                        Copy copy) {
  const int taps = prm.r * prm.s, count = taps * prm.block_channels;
  const int first = (int)blockIdx.y * prm.block_channels;
  const int valid = min(prm.block_channels, prm.k - first) * taps;
  const T *src = w + (size_t)first * taps;
  const int tid = (int)(threadIdx.y * blockDim.x + threadIdx.x), threads = blockDim.x * blockDim.y;
  for (int i = tid; i < count; i += threads) {
    const int kk = i / taps, tap = i - kk * taps;
    copy(sw + tap * prm.filter_ld + kk, i < valid ? src + i : w, i < valid);
  }
}

__device__ __forceinline__ void stage_filters_async(const dw_params &prm,
                                                    const float *__restrict__ w, float *sw) {
  for_each_filter_element(prm, w, sw, [](float *dst, const float *src, bool inside) {
    cp_async4(dst, src, inside ? 4 : 0);
  });
  cp_async_commit();
}

/* The tile form's kernel for square s x s filters, out_rows x px outputs a
 * thread and the type, or nullptr where none is compiled. */
dw_kernel_fn tile_kernel(int s, int out_rows, int px, conv_dtype dtype);

}  // namespace conv_dwnhwc_detail

#endif /* CONVTUNE_DEPTHWISE_NHWC_KERNELS_CUH */
