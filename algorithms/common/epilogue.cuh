/*
 * epilogue.cuh -- the per-output epilogue, shared by every kernel that
 * applies it (device code only).
 */
#ifndef CONVTUNE_EPILOGUE_CUH
#define CONVTUNE_EPILOGUE_CUH

#include "convtune.h"

/* act(acc + bias) for the epilogue (a conv_epilogue value).  Not fmaxf for
 * ReLU: it would turn a NaN (an unwritten, poisoned output) into 0 and hide
 * a wrong result from validation. */
__device__ __forceinline__ float conv_epilogue_apply(int epilogue, float acc, float bias) {
  if (epilogue == CONV_EPILOGUE_NONE) return acc;
  const float v = acc + bias;
  return (epilogue == CONV_EPILOGUE_BIAS_RELU && v < 0.0f) ? 0.0f : v;
}

/* conv_epilogue_apply on four outputs of one channel (a float4 store). */
__device__ __forceinline__ float4 conv_epilogue_apply4(int epilogue, float4 v, float bias) {
  v.x = conv_epilogue_apply(epilogue, v.x, bias), v.y = conv_epilogue_apply(epilogue, v.y, bias);
  v.z = conv_epilogue_apply(epilogue, v.z, bias), v.w = conv_epilogue_apply(epilogue, v.w, bias);
  return v;
}

/* Output channel k's bias for the epilogue, through the read-only cache;
 * no load for CONV_EPILOGUE_NONE, where `bias` may be NULL. */
__device__ __forceinline__ float conv_epilogue_bias(int epilogue, const float *bias, int k) {
  return epilogue == CONV_EPILOGUE_NONE ? 0.0f : __ldg(bias + k);
}

#endif /* CONVTUNE_EPILOGUE_CUH */
