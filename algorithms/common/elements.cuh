/*
 * elements.cuh -- the element types of conv_dtype on the device: float,
 * __half (CONV_DTYPE_F16) and __nv_bfloat16 (CONV_DTYPE_BF16), read as
 * float (exactly) and written from float (rounded to nearest even), and
 * the dispatch from a problem's dtype to a kernel instantiated for its
 * type.  CUDA C++, for .cu files.
 */
#ifndef CONVTUNE_ELEMENTS_CUH
#define CONVTUNE_ELEMENTS_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include "convtune.h"

/* An element as float: exact for all three types. */
__device__ __forceinline__ float conv_element_to_float(float v) { return v; }
__device__ __forceinline__ float conv_element_to_float(__half v) { return __half2float(v); }
__device__ __forceinline__ float conv_element_to_float(__nv_bfloat16 v) {
  return __bfloat162float(v);
}

/* A float as an element of T, rounded to nearest even (past fp16's range:
 * inf, as an fp16 result that overflows is). */
template <typename T> __device__ __forceinline__ T conv_element_from_float(float v);
template <> __device__ __forceinline__ float conv_element_from_float<float>(float v) { return v; }
template <> __device__ __forceinline__ __half conv_element_from_float<__half>(float v) {
  return __float2half_rn(v);
}
template <> __device__ __forceinline__ __nv_bfloat16 conv_element_from_float<__nv_bfloat16>(
    float v) {
  return __float2bfloat16_rn(v);
}

/* Names the element type T for conv_with_element_type's callback. */
template <typename T> struct conv_element_tag {
  using type = T;
};

/* Calls f(conv_element_tag<T>{}) with T the element type of `dtype` and
 * returns what it returns; cudaErrorInvalidValue for a dtype out of the
 * enum.  A launcher instantiates its kernel for the problem's type so:
 *     return conv_with_element_type(p->dtype, [&](auto tag) {
 *       using T = typename decltype(tag)::type;
 *       kernel<T><<<...>>>((const T *)x, ...);
 *       return cudaGetLastError();
 *     });                                                                 */
template <typename F> cudaError_t conv_with_element_type(conv_dtype dtype, F &&f) {
  switch (dtype) {
    case CONV_DTYPE_F32: return f(conv_element_tag<float>{});
    case CONV_DTYPE_F16: return f(conv_element_tag<__half>{});
    case CONV_DTYPE_BF16: return f(conv_element_tag<__nv_bfloat16>{});
  }
  return cudaErrorInvalidValue;
}

#endif /* CONVTUNE_ELEMENTS_CUH */
