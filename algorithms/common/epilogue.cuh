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

#endif /* CONVTUNE_EPILOGUE_CUH */
