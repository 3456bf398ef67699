/*
 * mma_tf32.cuh -- one warp's mma.sync m16n8k8 on TF32 operands with fp32
 * accumulators, d += a b, in the PTX fragment layouts (a: 4 registers of
 * the 16 x 8 tile, b: 2 of the 8 x 8 one, d: 4 of the 16 x 8 result).
 * Shared by the patch and implicit_gemm kernels.  Included by .cu files
 * only.
 */
#ifndef CONVTUNE_MMA_TF32_CUH
#define CONVTUNE_MMA_TF32_CUH

#include <cstdint>

__device__ __forceinline__ void mma_tf32(float (&d)[4], const uint32_t (&a)[4],
                                         const uint32_t (&b)[2]) {
  asm volatile(
      "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

#endif /* CONVTUNE_MMA_TF32_CUH */
