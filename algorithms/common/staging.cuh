/*
 * staging.cuh -- copying a block's operands into shared memory with many
 * loads in flight.  Included by .cu files only.
 */
#ifndef CONVTUNE_STAGING_CUH
#define CONVTUNE_STAGING_CUH

/* For i in [0, count), spread over the block: store(i, load(i)), with
 * kBatch loads in flight per thread: a loop that stores each value before
 * loading the next would wait a memory latency per value, which is most
 * of a small kernel's time. */
template <class Load, class Store>
__device__ __forceinline__ void load_batched(int count, Load load, Store store) {
  constexpr int kBatch = 8;
  for (int i0 = threadIdx.x; i0 < count; i0 += kBatch * blockDim.x) {
    float v[kBatch];
#pragma unroll
    for (int j = 0; j < kBatch; j++) {
      const int i = i0 + j * blockDim.x;
      v[j] = i < count ? load(i) : 0.0f;
    }
#pragma unroll
    for (int j = 0; j < kBatch; j++) {
      const int i = i0 + j * blockDim.x;
      if (i < count) store(i, v[j]);
    }
  }
}

/* cp.async: global to shared memory without a trip through registers, so
 * a block can compute on one buffer while the next one fills.  The
 * src_bytes form copies that many bytes and zero-fills the rest (0: the
 * padding, with `src` any valid address). */
__device__ __forceinline__ void cp_async4(float *dst, const float *src, int src_bytes) {
  const unsigned d = (unsigned)__cvta_generic_to_shared(dst);
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(d), "l"(src), "r"(src_bytes));
}
__device__ __forceinline__ void cp_async16(float *dst, const float *src, int src_bytes) {
  const unsigned d = (unsigned)__cvta_generic_to_shared(dst);
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(d), "l"(src),
               "r"(src_bytes));
}
/* 8 bytes (4 half elements); `dst` and `src` 8-byte aligned. */
__device__ __forceinline__ void cp_async8(void *dst, const void *src, int src_bytes) {
  const unsigned d = (unsigned)__cvta_generic_to_shared(dst);
  asm volatile("cp.async.ca.shared.global [%0], [%1], 8, %2;\n" ::"r"(d), "l"(src),
               "r"(src_bytes));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
/* Waits until at most N of this thread's committed groups are in flight. */
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

#endif /* CONVTUNE_STAGING_CUH */
