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
#include <string.h>

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

/* The unsigned type of one 4-, 8- or 16-byte access. */
template <int Bytes> struct conv_bits;
template <> struct conv_bits<4> { using type = unsigned int; };
template <> struct conv_bits<8> { using type = uint2; };
template <> struct conv_bits<16> { using type = uint4; };
template <int N, typename T> using conv_bits_of = typename conv_bits<N * (int)sizeof(T)>::type;

/* N elements of T held in one access's bits, as fp32 (exact). */
template <int N, typename T>
__device__ __forceinline__ void conv_unpack_elements(const conv_bits_of<N, T> &bits,
                                                     float (&out)[N]) {
  T e[N];
  memcpy(e, &bits, sizeof bits);
#pragma unroll
  for (int i = 0; i < N; i++) out[i] = conv_element_to_float(e[i]);
}

/* N elements of T at p, aligned to their N * sizeof(T) bytes (4, 8 or 16),
 * read in one load through the read-only cache, as fp32. */
template <int N, typename T>
__device__ __forceinline__ void conv_load_elements(const T *p, float (&out)[N]) {
  conv_unpack_elements<N, T>(__ldg(reinterpret_cast<const conv_bits_of<N, T> *>(p)), out);
}

/* N fp32 values rounded to T once each and written to p (aligned as for
 * conv_load_elements) in one store. */
template <int N, typename T>
__device__ __forceinline__ void conv_store_elements(T *p, const float *v) {
  T e[N];
#pragma unroll
  for (int i = 0; i < N; i++) e[i] = conv_element_from_float<T>(v[i]);
  conv_bits_of<N, T> bits;
  memcpy(&bits, e, sizeof bits);
  *reinterpret_cast<conv_bits_of<N, T> *>(p) = bits;
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
