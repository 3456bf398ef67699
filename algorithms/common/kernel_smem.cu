/*
 * kernel_smem.cu -- conv_kernel_allow_smem (kernels.h): the opt-in to more
 * than 48 KiB of dynamic shared memory that every family whose blocks
 * stage large tiles needs before its first launch; and
 * conv_kernel_persistent_blocks, the grid of the persistent kernels.
 */
#include "algorithms/common/kernels.h"

extern "C" cudaError_t conv_kernel_allow_smem(const void *kernel, size_t bytes) {
  if (kernel == NULL) return cudaErrorInvalidValue;
  cudaFuncAttributes attr;
  cudaError_t e = cudaFuncGetAttributes(&attr, kernel);
  if (e != cudaSuccess || (size_t)attr.maxDynamicSharedSizeBytes >= bytes) return e;
  int device = 0, optin = 0;
  e = cudaGetDevice(&device);
  if (e == cudaSuccess)
    e = cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device);
  if (e != cudaSuccess) return e;
  /* A block's static shared memory (barriers, say) counts against the
   * same opt-in limit. */
  const size_t room = (size_t)optin > attr.sharedSizeBytes ? (size_t)optin - attr.sharedSizeBytes : 0;
  if (room < bytes) return cudaErrorInvalidConfiguration;
  /* The device's limit, never this plan's own need: the attribute belongs
   * to the kernel, which other plans share, and is only ever raised. */
  return cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)room);
}

/* How many blocks of the kernel the GPU holds at once: blocks per SM x
 * sm_count. */
static cudaError_t resident_blocks(const void *kernel, int threads, size_t smem_bytes,
                                   int sm_count, int64_t *resident) {
  if (kernel == NULL || threads < 1 || sm_count < 1) return cudaErrorInvalidValue;
  cudaError_t e = conv_kernel_allow_smem(kernel, smem_bytes);
  if (e != cudaSuccess) return e;
  int per_sm = 0;
  e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, threads, smem_bytes);
  if (e != cudaSuccess) return e;
  if (per_sm < 1) return cudaErrorInvalidConfiguration;
  *resident = (int64_t)per_sm * sm_count;
  return cudaSuccess;
}

extern "C" cudaError_t conv_kernel_persistent_blocks(const void *kernel, int threads,
                                                     size_t smem_bytes, int sm_count,
                                                     int64_t slices, int64_t work,
                                                     unsigned *blocks) {
  if (slices < 1 || blocks == NULL) return cudaErrorInvalidValue;
  int64_t resident = 0;
  const cudaError_t e = resident_blocks(kernel, threads, smem_bytes, sm_count, &resident);
  if (e != cudaSuccess) return e;
  /* Every slice's blocks resident at once: a block that waited for a free
   * SM would start its whole walk late. */
  int64_t per_slice = resident / slices;
  if (per_slice < 1) per_slice = 1;
  *blocks = (unsigned)(per_slice < work ? per_slice : work);
  return cudaSuccess;
}
