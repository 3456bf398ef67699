/*
 * tap_source.cuh -- where a backward-data gather finds its sources: the
 * output index along one axis that a filter tap carries to an input index
 * (data_gather's and dynamic_direct's kernels).  Included by .cu files
 * only.
 */
#ifndef CONVTUNE_TAP_SOURCE_CUH
#define CONVTUNE_TAP_SOURCE_CUH

/* Output index o = (in + pad - tap * dil) / stride of input index `in`,
 * when the division is exact and o < outputs; else -1.  STRIDE: the
 * stride when nonzero (a constant divides by a multiply or a shift),
 * else the run-time `stride`. */
template <int STRIDE>
__device__ __forceinline__ int conv_tap_source(int in, int pad, int tap, int dil, int stride,
                                               int outputs) {
  const int t = in + pad - tap * dil;
  if (t < 0) return -1;
  const int st = STRIDE ? STRIDE : stride;
  const int o = t / st;
  return o * st == t && o < outputs ? o : -1;
}

#endif /* CONVTUNE_TAP_SOURCE_CUH */
