/*
 * wgmma.cuh -- what Hopper's warpgroup tensor-core kernels share (patch's
 * in patch_wgmma.cu, padded_gemm's and stem_gemm's in their .cu files;
 * all compiled for sm_90a only): shared-memory matrix descriptors, the
 * fences, commits and waits around wgmma.mma_async, and the proxy fence
 * between a thread's ordinary shared-memory writes and wgmma's reads,
 * the accumulator operands every form of the instruction opens with, and
 * the TF32 wgmma with A from registers (patch's and stem_gemm's; the
 * shared-memory-operand ones stay with padded_gemm).  Included by .cu
 * files only.
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

/* The accumulators of an m64nNk8 wgmma, d[NT][4] (NT = N / 8), with which
 * every form of the instruction opens (these and padded_gemm.cu's): their
 * operands %0 .. %(4 NT - 1) in its text, WGMMA_REGS_NT<NT>, and their
 * read-write constraints, WGMMA_D_NT<NT>. */
#define WGMMA_REGS_NT4 "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15"
#define WGMMA_REGS_NT8 \
  WGMMA_REGS_NT4 ", %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
#define WGMMA_REGS_NT16                                                            \
  WGMMA_REGS_NT8 ", %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, " \
                 "%47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, "   \
                 "%62, %63"
#define WGMMA_REGS_NT32                                                                         \
  WGMMA_REGS_NT16 ", %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, " \
                  "%79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, "   \
                  "%94, %95, %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, "       \
                  "%107, %108, %109, %110, %111, %112, %113, %114, %115, %116, %117, %118, "      \
                  "%119, %120, %121, %122, %123, %124, %125, %126, %127"
#define WGMMA_D4(t) "+f"(d[t][0]), "+f"(d[t][1]), "+f"(d[t][2]), "+f"(d[t][3])
#define WGMMA_D_NT4 WGMMA_D4(0), WGMMA_D4(1), WGMMA_D4(2), WGMMA_D4(3)
#define WGMMA_D_NT8 WGMMA_D_NT4, WGMMA_D4(4), WGMMA_D4(5), WGMMA_D4(6), WGMMA_D4(7)
#define WGMMA_D_NT16                                                                         \
  WGMMA_D_NT8, WGMMA_D4(8), WGMMA_D4(9), WGMMA_D4(10), WGMMA_D4(11), WGMMA_D4(12), WGMMA_D4(13), \
      WGMMA_D4(14), WGMMA_D4(15)
#define WGMMA_D_NT32                                                                            \
  WGMMA_D_NT16, WGMMA_D4(16), WGMMA_D4(17), WGMMA_D4(18), WGMMA_D4(19), WGMMA_D4(20),           \
      WGMMA_D4(21), WGMMA_D4(22), WGMMA_D4(23), WGMMA_D4(24), WGMMA_D4(25), WGMMA_D4(26),       \
      WGMMA_D4(27), WGMMA_D4(28), WGMMA_D4(29), WGMMA_D4(30), WGMMA_D4(31)

/* d += A B for the warpgroup, TF32 with A from registers (NT = 4, 8, 16:
 * m64n32k8 to m64n128k8): A (64 x 8) in mma.m16n8k8's A layout (warp w:
 * rows 16 w + lane / 4 and + 8, columns lane % 4 and + 4), B (8 x 8 NT)
 * through a shared-memory descriptor; d in m16n8 fragments (rows as A's,
 * tile t: columns 8 t + 2 (lane % 4) and + 1). */
template <int NT>
__device__ __forceinline__ void wgmma_tf32_rs(float (&d)[NT][4], const uint32_t (&a)[4],
                                              uint64_t b);

template <>
__device__ __forceinline__ void wgmma_tf32_rs<4>(float (&d)[4][4], const uint32_t (&a)[4],
                                                 uint64_t b) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %21, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n32k8.f32.tf32.tf32 {" WGMMA_REGS_NT4 "}, "
      "{%16, %17, %18, %19}, %20, p, 1, 1;\n}\n"
      : WGMMA_D_NT4
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "n"(1));
}

template <>
__device__ __forceinline__ void wgmma_tf32_rs<8>(float (&d)[8][4], const uint32_t (&a)[4],
                                                 uint64_t b) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k8.f32.tf32.tf32 {" WGMMA_REGS_NT8 "}, "
      "{%32, %33, %34, %35}, %36, p, 1, 1;\n}\n"
      : WGMMA_D_NT8
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "n"(1));
}

template <>
__device__ __forceinline__ void wgmma_tf32_rs<16>(float (&d)[16][4], const uint32_t (&a)[4],
                                                  uint64_t b) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k8.f32.tf32.tf32 {" WGMMA_REGS_NT16 "}, "
      "{%64, %65, %66, %67}, %68, p, 1, 1;\n}\n"
      : WGMMA_D_NT16
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "n"(1));
}

#endif /* CONVTUNE_WGMMA_CUH */
