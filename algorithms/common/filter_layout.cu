/*
 * filter_layout.cu -- conv_filter_to_krsc (kernels.h): filters from
 * PyTorch's K C R S order to K R S C, for the `cudnn` configs whose graph
 * takes them so (cudnn.c).
 */
#include "algorithms/common/kernels.h"

namespace {

constexpr int kThreads = 256;
/* Floats a block stages: a run of whole channels of one filter. */
constexpr int kTileFloats = CONV_FILTER_TO_KRSC_MAX_TAPS; /* 512 channels of 3x3: 18 KiB */
/* Blocks a launch gets where the channels allow, runs shortened to get
 * there: a block a filter would give 256 filters of 256 channels (2.4 MB)
 * 256 blocks, two an H100 multiprocessor. */
constexpr int64_t kMinBlocks = 1024;

/* Per filter k, its C x RS matrix transposed to RS x C.  A block takes
 * `run` consecutive channels of one filter: their C R S floats are one
 * contiguous run of w, read in order into shared memory (rows `pitch`
 * floats apart, pitch odd so that reading down a column touches every
 * bank once), then written out as RS runs of consecutive channels. */
__global__ void filter_to_krsc_kernel(const float *__restrict__ w, int64_t k_count, int channels,
                                      int taps, int run, int pitch, int64_t runs_per_filter,
                                      float *__restrict__ out) {
  extern __shared__ float tile[];
  for (int64_t b = blockIdx.x; b < k_count * runs_per_filter; b += gridDim.x) {
    const int64_t k = b / runs_per_filter;
    const int c0 = (int)(b - k * runs_per_filter) * run;
    const int width = min(run, channels - c0), count = width * taps;
    const float *src = w + (k * channels + c0) * taps;
    for (int i = (int)threadIdx.x; i < count; i += kThreads) {
      const int c = i / taps;
      tile[c * pitch + (i - c * taps)] = src[i];
    }
    __syncthreads();
    float *dst = out + k * taps * channels + c0;
    for (int i = (int)threadIdx.x; i < count; i += kThreads) {
      const int t = i / width, c = i - t * width;
      dst[(int64_t)t * channels + c] = tile[c * pitch + t];
    }
    __syncthreads();
  }
}

}  // namespace

extern "C" cudaError_t conv_filter_to_krsc(const float *w, int64_t k, int64_t channels,
                                           int64_t taps, float *out, cudaStream_t stream) {
  if (w == NULL || out == NULL || k < 0 || channels < 0 || taps < 0 || channels > INT32_MAX ||
      taps > CONV_FILTER_TO_KRSC_MAX_TAPS)
    return cudaErrorInvalidValue;
  if (k == 0 || channels == 0 || taps == 0) return cudaSuccess;
  const int pitch = (int)(taps | 1);
  int64_t run = kTileFloats / pitch; /* 0 only where taps is kTileFloats, even */
  if (run < 1) run = 1;
  const int64_t runs_wanted = (kMinBlocks + k - 1) / k;
  const int64_t spread = (channels + runs_wanted - 1) / runs_wanted;
  if (spread < run) run = spread;
  const int64_t runs_per_filter = (channels + run - 1) / run;
  const int64_t blocks = k * runs_per_filter;
  const unsigned grid = (unsigned)(blocks < (1 << 20) ? blocks : (1 << 20));
  const size_t smem = (size_t)run * (size_t)pitch * sizeof(float);
  filter_to_krsc_kernel<<<grid, kThreads, smem, stream>>>(w, k, (int)channels, (int)taps,
                                                          (int)run, pitch, runs_per_filter, out);
  return cudaGetLastError();
}
