/*
 * divisor.h -- division by a number fixed for a launch, as a multiply and
 * a shift: a kernel's integer division by a runtime value costs tens of
 * instructions, which in a staging loop is more than the copy itself.
 * C and CUDA; the device half only under nvcc.
 */
#ifndef CONVTUNE_DIVISOR_H
#define CONVTUNE_DIVISOR_H

#include <stdint.h>

/* Valid for dividends below 2^31. */
typedef struct conv_divisor {
  uint32_t divisor, multiplier, shift;
} conv_divisor;

/* The multiply-shift form of division by d >= 1 (Granlund and Montgomery;
 * PyTorch's IntDivider): for 0 <= n < 2^31, n / d is
 * (umulhi(n, multiplier) + n) >> shift, in 32-bit arithmetic. */
static inline conv_divisor conv_divisor_make(int d) {
  conv_divisor v;
  v.divisor = (uint32_t)d;
  v.shift = 0;
  while ((1ull << v.shift) < (uint64_t)d) v.shift++; /* ceil(log2 d) */
  v.multiplier = (uint32_t)(((1ull << 32) * ((1ull << v.shift) - (uint64_t)d)) / (uint64_t)d + 1);
  return v;
}

#ifdef __CUDACC__
/* n / d for 0 <= n < 2^31. */
__device__ __forceinline__ uint32_t conv_divide(uint32_t n, const conv_divisor &d) {
  return (__umulhi(n, d.multiplier) + n) >> d.shift;
}
#endif

#endif /* CONVTUNE_DIVISOR_H */
