/*
 * wgmma.cuh -- what Hopper's warpgroup tensor-core kernels share (patch's
 * in patch_wgmma.cu, padded_gemm's and stem_gemm's in their .cu files;
 * all compiled for sm_90a only): shared-memory matrix descriptors, the
 * fences, commits and waits around wgmma.mma_async, and the proxy fence
 * between a thread's ordinary shared-memory writes and wgmma's reads.
 * The wgmma instructions themselves stay with their kernels, whose
 * operand sources and shapes differ.  Included by .cu files only.
 */
#ifndef CONVTUNE_WGMMA_CUH
#define CONVTUNE_WGMMA_CUH

#include <cstdint>

/* A shared-memory matrix descriptor without swizzling: start address (a
 * shared-window byte address), then the byte offsets between 8-row x
 * 16-byte core matrices along K ("leading") and along M or N ("stride"),
 * all in 16-byte units. */
__device__ __forceinline__ uint64_t wgmma_smem_matrix(uint32_t address, uint32_t k_offset_bytes,
                                                      uint32_t mn_offset_bytes) {
  return (uint64_t)((address >> 4) & 0x3FFF) | (uint64_t)((k_offset_bytes >> 4) & 0x3FFF) << 16 |
         (uint64_t)((mn_offset_bytes >> 4) & 0x3FFF) << 32;
}

__device__ __forceinline__ void wgmma_fence() {
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
}
__device__ __forceinline__ void wgmma_commit() {
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}
/* Waits until at most `pending` committed groups are still running. */
template <int pending>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(pending) : "memory");
}
/* Orders this thread's generic-proxy shared-memory accesses (stores, and
 * cp.async copies it has seen complete) before its later async-proxy
 * ones: wgmma reads its shared-memory operands through the async proxy. */
__device__ __forceinline__ void fence_proxy_async() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}
/* Keeps the compiler from moving accumulator accesses across the
 * asynchronous multiply (wgmma_fence .. wgmma_wait). */
template <int NT>
__device__ __forceinline__ void wgmma_acc_fence(float (&d)[NT][4]) {
#pragma unroll
  for (int t = 0; t < NT; t++)
#pragma unroll
    for (int q = 0; q < 4; q++) asm volatile("" : "+f"(d[t][q])::"memory");
}

#endif /* CONVTUNE_WGMMA_CUH */
