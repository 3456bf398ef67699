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

#endif /* CONVTUNE_STAGING_CUH */
