/*
 * check.cu -- the tuner's device-side helpers: reproducible random inputs,
 * poisoned outputs and the relative-L2 comparison against the reference,
 * each for tensors of any conv_dtype.
 */
#include <math.h>
#include <stdint.h>

#include "algorithms/common/elements.cuh"
#include "core/core.h"
#include "tuner/check.h"

namespace {

/* What conv_relative_l2 accumulates in the caller's scratch. */
struct compare_sums {
  double num;                  /* sum (y - ref)^2  */
  double den;                  /* sum ref^2        */
  unsigned long long nonfinite; /* y values that are NaN or infinite */
};
static_assert(sizeof(compare_sums) <= CONV_COMPARE_SCRATCH_BYTES,
              "compare_sums must fit in the caller's scratch");

const int kThreads = 256;

}  // namespace

/* splitmix64's finaliser: a bijective 64-bit mix with full avalanche, so
 * neighbouring indices give unrelated values. */
__host__ __device__ static uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

static unsigned blocks_for(int64_t count, int64_t max_blocks) {
  int64_t blocks = (count + kThreads - 1) / kThreads;
  if (blocks > max_blocks) blocks = max_blocks;
  return (unsigned)blocks;
}

/* ---------------------------------------------------------------- fill */

/* Element i is the splitmix64 stream seeded with mix64(seed), at position i:
 * hashing the seed first keeps streams of nearby seeds (0, 1, 2...)
 * unrelated, which plain seed ^ i would not (it only permutes indices).
 * The float drawn is rounded to T as it is stored. */
template <typename T>
__global__ static void fill_uniform_kernel(T *__restrict__ dst, int64_t count,
                                           uint64_t seed_state, float lo, float hi) {
  const int64_t step = (int64_t)gridDim.x * blockDim.x;
  const float top = nextafterf(hi, lo);
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < count; i += step) {
    const uint64_t bits = mix64(seed_state + ((uint64_t)i + 1) * 0x9E3779B97F4A7C15ull);
    /* 24 bits: exactly representable in float, so u is uniform in [0, 1). */
    const float u = (float)(bits >> 40) * (1.0f / 16777216.0f);
    const float v = lo + (hi - lo) * u;
    /* Rounding of lo + (hi - lo) * u can land on hi itself. */
    dst[i] = conv_element_from_float<T>(v < hi ? v : top);
  }
}

extern "C" cudaError_t conv_fill_uniform(void *dst, conv_dtype dtype, int64_t count,
                                         uint64_t seed, float lo, float hi,
                                         cudaStream_t stream) {
  if (count < 0 || (count > 0 && dst == NULL) || !(lo <= hi)) return cudaErrorInvalidValue;
  if (count == 0) return cudaSuccess;
  return conv_with_element_type(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    fill_uniform_kernel<T><<<blocks_for(count, 1 << 16), kThreads, 0, stream>>>(
        (T *)dst, count, mix64(seed), lo, hi);
    return cudaGetLastError();
  });
}

/* ---------------------------------------------------------------- poison */

extern "C" cudaError_t conv_fill_poison(void *dst, conv_dtype dtype, int64_t count,
                                        cudaStream_t stream) {
  const size_t bytes = conv_dtype_bytes(dtype);
  if (count < 0 || (count > 0 && dst == NULL) || bytes == 0) return cudaErrorInvalidValue;
  if ((uint64_t)count > SIZE_MAX / bytes) return cudaErrorInvalidValue;
  if (count == 0) return cudaSuccess;
  /* Every byte 0xFF gives a quiet NaN in each type (0xFFFFFFFF in fp32;
   * 0xFFFF in fp16 and bf16, all exponent bits and a mantissa set): any
   * output a candidate forgets to write makes the comparison NaN and
   * counts as non-finite. */
  return cudaMemsetAsync(dst, 0xFF, (size_t)count * bytes, stream);
}

/* ---------------------------------------------------------------- convert */

template <typename From, typename To>
__global__ static void convert_kernel(const From *__restrict__ src, To *__restrict__ dst,
                                      int64_t count) {
  const int64_t step = (int64_t)gridDim.x * blockDim.x;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < count; i += step)
    dst[i] = conv_element_from_float<To>(conv_element_to_float(src[i]));
}

/* Every type converts exactly to float, so From -> float -> To rounds once. */
extern "C" cudaError_t conv_convert(const void *src, conv_dtype from, void *dst, conv_dtype to,
                                    int64_t count, cudaStream_t stream) {
  if (count < 0 || (count > 0 && (src == NULL || dst == NULL))) return cudaErrorInvalidValue;
  if (conv_dtype_bytes(from) == 0 || conv_dtype_bytes(to) == 0) return cudaErrorInvalidValue;
  if (count == 0) return cudaSuccess;
  return conv_with_element_type(from, [&](auto from_tag) {
    using From = typename decltype(from_tag)::type;
    return conv_with_element_type(to, [&](auto to_tag) {
      using To = typename decltype(to_tag)::type;
      convert_kernel<From, To><<<blocks_for(count, 1 << 16), kThreads, 0, stream>>>(
          (const From *)src, (To *)dst, count);
      return cudaGetLastError();
    });
  });
}

/* ---------------------------------------------------------------- hold */

__global__ static void hold_kernel(uint64_t nanoseconds) {
  uint64_t start, now;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  do {
    __nanosleep(1000);
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  } while (now - start < nanoseconds);
}

extern "C" cudaError_t conv_hold_stream(unsigned microseconds, cudaStream_t stream) {
  hold_kernel<<<1, 1, 0, stream>>>((uint64_t)microseconds * 1000u);
  return cudaGetLastError();
}

/* ---------------------------------------------------------------- compare */

/* Block-wide sum of one double; the result is valid in thread 0 only. */
__device__ static double block_sum(double v, double *shared) {
  for (int off = 16; off > 0; off >>= 1) v += __shfl_down_sync(0xFFFFFFFFu, v, off);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  __syncthreads(); /* shared may still be read from a previous call */
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  v = 0.0;
  if (warp == 0) {
    v = lane < (int)(blockDim.x >> 5) ? shared[lane] : 0.0;
    for (int off = 16; off > 0; off >>= 1) v += __shfl_down_sync(0xFFFFFFFFu, v, off);
  }
  return v;
}

/* Non-finite y values are counted AND left in num: a NaN must make the
 * error NaN, never vanish from the sum and let a broken output look good;
 * an fp16 output that overflowed to inf counts too. */
template <typename T>
__global__ static void compare_kernel(const T *__restrict__ y, const float *__restrict__ ref,
                                      int64_t count, compare_sums *__restrict__ sums) {
  __shared__ double shared[kThreads / 32];
  double num = 0.0, den = 0.0, bad = 0.0;
  const int64_t step = (int64_t)gridDim.x * blockDim.x;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < count; i += step) {
    const double yi = (double)conv_element_to_float(y[i]), ri = (double)ref[i];
    const double d = yi - ri;
    num += d * d;
    den += ri * ri;
    if (!isfinite(yi)) bad += 1.0;
  }
  num = block_sum(num, shared);
  den = block_sum(den, shared);
  bad = block_sum(bad, shared); /* exact: a block sees far fewer than 2^53 values */
  if (threadIdx.x == 0) {
    atomicAdd(&sums->num, num);
    atomicAdd(&sums->den, den);
    atomicAdd(&sums->nonfinite, (unsigned long long)bad);
  }
}

extern "C" cudaError_t conv_relative_l2(const void *y, conv_dtype dtype, const float *ref,
                                        int64_t count, void *scratch, cudaStream_t stream,
                                        double *rel_error /* OUT */,
                                        int64_t *nonfinite /* OUT */) {
  if (count < 0 || scratch == NULL || rel_error == NULL || nonfinite == NULL ||
      (count > 0 && (y == NULL || ref == NULL)) || conv_dtype_bytes(dtype) == 0)
    return cudaErrorInvalidValue;
  compare_sums *dev = (compare_sums *)scratch;
  cudaError_t e = cudaMemsetAsync(dev, 0, sizeof(compare_sums), stream);
  if (e != cudaSuccess) return e;
  if (count > 0) {
    /* A few blocks per SM is plenty for a bandwidth-bound pass, and keeps
     * the final atomics few. */
    e = conv_with_element_type(dtype, [&](auto tag) {
      using T = typename decltype(tag)::type;
      compare_kernel<T><<<blocks_for(count, 1024), kThreads, 0, stream>>>((const T *)y, ref,
                                                                          count, dev);
      return cudaGetLastError();
    });
    if (e != cudaSuccess) return e;
  }
  compare_sums host;
  e = cudaMemcpyAsync(&host, dev, sizeof host, cudaMemcpyDeviceToHost, stream);
  if (e != cudaSuccess) return e;
  e = cudaStreamSynchronize(stream);
  if (e != cudaSuccess) return e;
  /* An all-zero reference has no scale: report the absolute norm instead. */
  *rel_error = host.den > 0.0 ? sqrt(host.num / host.den) : sqrt(host.num);
  *nonfinite = (int64_t)host.nonfinite;
  return cudaSuccess;
}
