// PyTorch's caching allocator as convtune's device allocator
// (_torch_alloc.h).  The streams are convtune's (convtune.h,
// conv_device_alloc_fn): its tuning stream for tuning buffers, stream NULL
// (PyTorch's default stream) for plan workspaces, and it frees each with
// the stream it was allocated with, as raw_delete expects (a block goes
// back to its stream's pool, reusable at once by work queued there).

#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAGuard.h>

#include <cuda_runtime_api.h>

#include "_torch_alloc.h"

#define CONVTUNE_EXPORT extern "C" __attribute__((visibility("default")))

CONVTUNE_EXPORT int convtune_torch_device_alloc(void *user, size_t bytes, void *stream,
                                                int device, void **ptr) {
  (void)user;
  // An exception must not cross into C: torch's out-of-memory error
  // (after it has freed what it caches and retried) becomes the
  // library's CONV_OUT_OF_MEMORY.
  try {
    // raw_alloc_with_stream allocates on the current device.
    const c10::cuda::CUDAGuard guard(static_cast<c10::DeviceIndex>(device));
    void *got = c10::cuda::CUDACachingAllocator::raw_alloc_with_stream(
        bytes, static_cast<cudaStream_t>(stream));
    if (got == nullptr) return 1;
    *ptr = got;
    return 0;
  } catch (...) {
    return 1;
  }
}

CONVTUNE_EXPORT void convtune_torch_device_free(void *user, void *ptr, size_t bytes, void *stream,
                                                int device) {
  (void)user, (void)bytes, (void)stream;
  try {
    const c10::cuda::CUDAGuard guard(static_cast<c10::DeviceIndex>(device));
    c10::cuda::CUDACachingAllocator::raw_delete(ptr);
  } catch (...) {
    // Nothing to tell: conv_device_free_fn cannot fail (torch raises here
    // only for a pointer it never gave, which the library never passes).
  }
}
