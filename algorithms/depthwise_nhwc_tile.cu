/*
 * depthwise_nhwc_tile.cu -- depthwise_nhwc's tile form (depthwise_nhwc.h):
 * its kernels, one per element type, square filter size and outputs a
 * thread, and their lookup; planned and launched by depthwise_nhwc.cu.
 */
#include "algorithms/depthwise_nhwc_kernels.cuh"

namespace conv_dwnhwc_detail {
namespace {

/* The tile form's filters: the layout of stage_filters_async, no
 * barrier; fp32 ones by cp.async, half ones converted on the way with
 * eight loads in flight a thread (one at a time, each waits a memory
 * latency: 28 of them a thread for a 32-channel block of 7x7 filters). */
__device__ __forceinline__ void stage_tile_filters(const dw_params &prm,
                                                   const float *__restrict__ w, float *sw) {
  stage_filters_async(prm, w, sw);
}
template <typename H>
__device__ __forceinline__ void stage_tile_filters(const dw_params &prm, const H *__restrict__ w,
                                                   float *sw) {
  constexpr int kBatch = 8;
  const int taps = prm.r * prm.s, count = taps * prm.block_channels;
  const int first = (int)blockIdx.y * prm.block_channels;
  const int valid = min(prm.block_channels, prm.k - first) * taps;
  const H *src = w + (size_t)first * taps;
  const int tid = (int)(threadIdx.y * blockDim.x + threadIdx.x), threads = blockDim.x * blockDim.y;
  for (int i0 = tid; i0 < count; i0 += kBatch * threads) {
    float v[kBatch];
#pragma unroll
    for (int j = 0; j < kBatch; j++) {
      const int i = i0 + j * threads;
      v[j] = i < valid ? conv_element_to_float(__ldg(src + i)) : 0.0f;
    }
#pragma unroll
    for (int j = 0; j < kBatch; j++) {
      const int i = i0 + j * threads, kk = i / taps;
      if (i < count) sw[(i - kk * taps) * prm.filter_ld + kk] = v[j];
    }
  }
}

/* 2 channels of T from shared memory, as fp32 (one 4-byte load for a
 * half type, 8 bytes for fp32). */
template <typename T>
__device__ __forceinline__ void shared_channels2(const T *p, float (&out)[2]) {
  conv_unpack_elements<2, T>(*reinterpret_cast<const conv_bits_of<2, T> *>(p), out);
}

/* Copies the input a tile block reads into shared memory, 16 bytes (4 or
 * 8 channels) at a time by cp.async: in_rows x in_cols pixels of the
 * block's channels ([row][col][block_channels], T), from image row row0
 * and column col0 (padding included); zero outside the image and past
 * the last channel.  One cp.async group; the caller waits. */
template <typename T>
__device__ __forceinline__ void tile_load_input(const dw_params &prm, const T *ximage,
                                                const T *x, int row0, int col0, int in_rows,
                                                int in_cols, int first_channel, T *tile) {
  constexpr int kChunk = 16 / (int)sizeof(T);
  const int chunks = prm.block_channels / kChunk, count = in_rows * in_cols * chunks;
  const int tid = (int)(threadIdx.y * blockDim.x + threadIdx.x), threads = blockDim.x * blockDim.y;
  for (int i = tid; i < count; i += threads) {
    const int pixel = i / chunks, chunk = i - pixel * chunks;
    const int row = pixel / in_cols, col = pixel - row * in_cols;
    const int ih = row0 + row, iw = col0 + col, ch = first_channel + chunk * kChunk;
    const bool inside = ih >= 0 && ih < prm.h && iw >= 0 && iw < prm.w && ch < prm.k;
    const T *src = inside ? ximage + ((size_t)ih * prm.w + iw) * prm.c + chunk * kChunk : x;
    T *dst = tile + (size_t)pixel * prm.block_channels + chunk * kChunk;
    cp_async16(reinterpret_cast<float *>(dst), reinterpret_cast<const float *>(src),
               inside ? 16 : 0);
  }
  cp_async_commit();
}

/* TILE: stride 1, no dilation, square K x K, two channels a thread.  A
 * block computes a tile of prm.rows x (thread_cols * OW) outputs of its
 * channels from the input tile they read, copied once into shared memory
 * beside the block's filters; each thread keeps OH x OW outputs of its two
 * channels in registers and reads each input pixel of its window once (4
 * bytes in a half type: a warp's 32 threads one 128-byte row of channels)
 * and each tap once per output row it serves.  The other forms keep one
 * row of outputs a thread and reload inputs or taps for each: this one is
 * 1.5-1.8x the best of them, or of cuDNN's, on ConvNeXt's 7x7 layers in
 * bf16 at batch 16 (docs/tuning.md). */
template <typename T, int K, int OH, int OW>
__global__ static void __launch_bounds__(kMaxThreads)
    dw_tile_kernel(const dw_params prm, const void *__restrict__ xv,
                   const void *__restrict__ wv, const float *__restrict__ bias,
                   void *__restrict__ yv, int thread_cols) {
  constexpr int SPAN = OW + K - 1;
  const T *x = static_cast<const T *>(xv), *w = static_cast<const T *>(wv);
  T *y = static_cast<T *>(yv);
  extern __shared__ __align__(16) float smem[];
  float *sw = smem;
  /* filter_ld is a multiple of 4: the input tile starts 16-byte aligned. */
  T *tile = reinterpret_cast<T *>(smem + K * K * prm.filter_ld);
  const int tile_cols = thread_cols * OW, in_rows = prm.rows + K - 1,
            in_cols = tile_cols + K - 1;
  const uint32_t band = conv_divide(blockIdx.x, prm.by_q_tiles);
  const uint32_t col_tile = blockIdx.x - band * prm.by_q_tiles.divisor;
  const uint32_t image = conv_divide(band, prm.by_p_tiles);
  const int row0 = (int)(band - image * prm.by_p_tiles.divisor) * prm.rows;
  const int col0 = (int)col_tile * tile_cols;
  const int first_channel = (int)blockIdx.y * prm.block_channels;
  tile_load_input(prm, x + (size_t)image * prm.h * prm.w * prm.c + first_channel, x,
                  row0 - prm.pad_h, col0 - prm.pad_w, in_rows, in_cols, first_channel, tile);
  stage_tile_filters(prm, w, sw);
  cp_async_wait<0>();
  __syncthreads();
  const int local_channel = 2 * (int)threadIdx.x, channel = first_channel + local_channel;
  if (channel >= prm.k) return;
  const int thread_row = (int)threadIdx.y / thread_cols;
  const int thread_col = (int)threadIdx.y - thread_row * thread_cols;
  const T *in = tile + ((size_t)(thread_row * OH) * in_cols + thread_col * OW) *
                           prm.block_channels + local_channel;
  const float *taps = sw + local_channel;
  float acc[OH][OW][2];
#pragma unroll
  for (int i = 0; i < OH; i++)
#pragma unroll
    for (int j = 0; j < OW; j++) acc[i][j][0] = acc[i][j][1] = 0.0f;
  /* Input row ir of the thread's window serves filter row ir - i of its
   * output row i. */
#pragma unroll
  for (int ir = 0; ir < OH + K - 1; ir++) {
    float window[SPAN][2];
#pragma unroll
    for (int t = 0; t < SPAN; t++)
      shared_channels2(in + ((size_t)ir * in_cols + t) * prm.block_channels, window[t]);
#pragma unroll
    for (int i = 0; i < OH; i++) {
      const int fr = ir - i;
      if (fr < 0 || fr >= K) continue;
#pragma unroll
      for (int fs = 0; fs < K; fs++) {
        const float2 tap = *reinterpret_cast<const float2 *>(taps + (fr * K + fs) * prm.filter_ld);
#pragma unroll
        for (int j = 0; j < OW; j++) {
          acc[i][j][0] = fmaf(window[j + fs][0], tap.x, acc[i][j][0]);
          acc[i][j][1] = fmaf(window[j + fs][1], tap.y, acc[i][j][1]);
        }
      }
    }
  }
  const int first_row = row0 + thread_row * OH, first_col = col0 + thread_col * OW;
#pragma unroll
  for (int i = 0; i < OH; i++) {
    if (first_row + i >= prm.p) break;
    T *out = y + ((size_t)(image * prm.p + first_row + i) * prm.q + first_col) * prm.k + channel;
#pragma unroll
    for (int j = 0; j < OW; j++) {
      if (first_col + j >= prm.q) break;
      float v[2] = {acc[i][j][0], acc[i][j][1]};
      if (prm.epilogue != CONV_EPILOGUE_NONE)
        for (int e = 0; e < 2; e++)
          v[e] = conv_epilogue_apply(prm.epilogue, v[e], bias[channel + e]);
      conv_store_elements<2, T>(out + (size_t)j * prm.k, v);
    }
  }
}

struct tile_instance {
  int s, out_rows, px;
  conv_dtype dtype;
  dw_kernel_fn kernel;
};

#define DW_TILES(T, D, S)                                                                \
  {S, 2, 7, D, dw_tile_kernel<T, S, 2, 7>}, {S, 1, 7, D, dw_tile_kernel<T, S, 1, 7>},   \
      {S, 2, 4, D, dw_tile_kernel<T, S, 2, 4>}, {S, 1, 4, D, dw_tile_kernel<T, S, 1, 4>}
#define DW_TILE_TYPE(T, D) DW_TILES(T, D, 3), DW_TILES(T, D, 5), DW_TILES(T, D, 7)

const tile_instance kTileInstances[] = {
    DW_TILE_TYPE(float, CONV_DTYPE_F32),
    DW_TILE_TYPE(__half, CONV_DTYPE_F16),
    DW_TILE_TYPE(__nv_bfloat16, CONV_DTYPE_BF16),
};
#undef DW_TILES
#undef DW_TILE_TYPE

}  // namespace

dw_kernel_fn tile_kernel(int s, int out_rows, int px, conv_dtype dtype) {
  for (const tile_instance &in : kTileInstances)
    if (in.s == s && in.out_rows == out_rows && in.px == px && in.dtype == dtype) return in.kernel;
  return nullptr;
}

}  // namespace conv_dwnhwc_detail
