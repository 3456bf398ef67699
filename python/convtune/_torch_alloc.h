/* PyTorch's caching allocator as a convtune context's device allocator
 * (conv_context_options.device_alloc and device_free, convtune.h), served
 * by the operator's library (_torch_alloc.cpp, built into
 * _convtune_torch_op.so where CMake finds a CUDA torch).  The binding
 * (_allocator.py) passes their addresses to every Context it makes, and
 * the operator's own contexts (_torch_op.cpp) take them too, so that plan
 * workspaces and tuning buffers are memory PyTorch counts
 * (torch.cuda.memory_allocated) and can reuse.  C functions: the library
 * calls them while tuning, without the GIL, and they never enter Python. */
#ifndef CONVTUNE_TORCH_ALLOC_H
#define CONVTUNE_TORCH_ALLOC_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* conv_device_alloc_fn: c10::cuda::CUDACachingAllocator::raw_alloc_with_stream
 * on `device`; 1 (never an exception) where torch raises, out of memory
 * included.  `user` is unused. */
int convtune_torch_device_alloc(void *user, size_t bytes, void *stream, int device, void **ptr);
/* conv_device_free_fn: raw_delete, which gives the block back to the
 * pool of the stream it was allocated for. */
void convtune_torch_device_free(void *user, void *ptr, size_t bytes, void *stream, int device);

#ifdef __cplusplus
}
#endif

#endif
