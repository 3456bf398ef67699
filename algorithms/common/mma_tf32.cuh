/*
 * mma_tf32.cuh -- one warp's mma.sync m16n8k8 on TF32 operands with fp32
 * accumulators, d += a b, in the PTX fragment layouts (a: 4 registers of
 * the 16 x 8 tile, b: 2 of the 8 x 8 one, d: 4 of the 16 x 8 result),
 * the rounding of operands and the write of a warp's results to a shared
 * tile.  Shared by the patch, patch_filter and implicit_gemm kernels.
 * Included by .cu files only.
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

/* Rounds to TF32 for the tensor cores, which ignore the low 13 mantissa
 * bits: adding half of the last kept bit rounds to nearest (ties away
 * from zero), in one integer add where cvt.rna costs several
 * instructions, two per mma in the implicit GEMMs.  Infinities stay
 * infinite and the largest finite values round up to infinity, as they
 * should. */
__device__ __forceinline__ uint32_t tf32_round(float v) { return __float_as_uint(v) + 0x1000u; }

/* The lane's A fragment of an m16n8k8, rounded, from a row-major tile in
 * shared memory with rows of PITCH floats: `p` at the lane's row g and
 * column t of the fragment; values (g, t), (g + 8, t), (g, t + 4) and
 * (g + 8, t + 4). */
template <int PITCH>
__device__ __forceinline__ void mma_a_fragment(const float *p, uint32_t (&a)[4]) {
  a[0] = tf32_round(p[0]);
  a[1] = tf32_round(p[8 * PITCH]);
  a[2] = tf32_round(p[4]);
  a[3] = tf32_round(p[8 * PITCH + 4]);
}

/* Puts a warp's accumulators (MT x NT tiles of m16n8, the warp's first
 * row wm0 and column wn0) into a block's tile in shared memory,
 * ctile[row][column] with rows of `pitch` floats: fragment values 2 hi and
 * 2 hi + 1 are row g + 8 hi of an m16 tile, columns 2 t and 2 t + 1 of an
 * n8 tile, one float2 store (conflict-free when pitch is 8 mod 32). */
template <int MT, int NT>
__device__ __forceinline__ void mma_tile_to_shared(const float (&acc)[MT][NT][4], float *ctile,
                                                   int pitch, int wm0, int wn0, int g, int t) {
#pragma unroll
  for (int mt = 0; mt < MT; mt++)
#pragma unroll
    for (int nt = 0; nt < NT; nt++)
#pragma unroll
      for (int hi = 0; hi < 2; hi++)
        *reinterpret_cast<float2 *>(ctile + (wm0 + mt * 16 + g + 8 * hi) * pitch + wn0 +
                                    nt * 8 + 2 * t) =
            make_float2(acc[mt][nt][2 * hi], acc[mt][nt][2 * hi + 1]);
}

#endif /* CONVTUNE_MMA_TF32_CUH */
