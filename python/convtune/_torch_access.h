/* What the compiled call path (_launch.c) may ask of torch through its C++
 * API, served by the operator's library (_torch_access.cpp, built into
 * _convtune_torch_op.so beside the operator where CMake finds a CUDA torch).
 *
 * Why: a Launcher built on Python's stable ABI reads a tensor through its
 * Python attributes (dtype, shape, get_device(), is_contiguous(),
 * data_ptr()) and makes its output with torch.empty_like, Python calls
 * that cost about 2 us of a small call's 6 us of host time (an H100
 * machine); read from the C++ tensor, the same facts cost nanoseconds.  The Launcher
 * keeps the attribute reads where this table is not built.
 *
 * Every function runs with the GIL held and never throws: -1 or NULL comes
 * with a Python exception set, torch's own where torch raised one (an
 * out-of-memory error stays torch.OutOfMemoryError).
 *
 * Include <Python.h> first.
 */
#ifndef CONVTUNE_TORCH_ACCESS_H
#define CONVTUNE_TORCH_ACCESS_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Raised with each change of the structs below: a Launcher ignores a table
 * of another version (an operator library from an older tree). */
#define CONVTUNE_TORCH_ACCESS_VERSION 2
#define CONVTUNE_TENSOR_MAX_DIMS 8

/* What tensor_fits tests of a tensor, as the Python attributes give them. */
typedef struct convtune_tensor_facts {
  uintptr_t data;  /* data_ptr() */
  int dims;        /* dim(), or -1 (the rest zero) for a tensor that
                    * is not strided or has no storage; sizes[] holds
                    * the first CONVTUNE_TENSOR_MAX_DIMS */
  int64_t sizes[CONVTUNE_TENSOR_MAX_DIMS];
  int device;      /* get_device(): the CUDA index, -1 for other devices */
  int dtype;       /* the conv_dtype of dtype (CONV_DTYPE_F32 for
                    * torch.float32, F16, BF16), -1 for any other */
  int contiguous;  /* is_contiguous() */
  int channels_last; /* is_contiguous(memory_format=torch.channels_last) */
  int requires_grad;
} convtune_tensor_facts;

typedef struct convtune_torch_access {
  int version; /* CONVTUNE_TORCH_ACCESS_VERSION */
  /* 1 with *facts set when `object` is a torch.Tensor (a subclass
   * included), 0 when it is not, -1 on an exception. */
  int (*read)(PyObject *object, convtune_tensor_facts *facts);
  /* A new CUDA tensor of conv_dtype `dtype`, dense in the format given
   * (channels_last nonzero: torch.channels_last; 4-D only), from torch's
   * allocator on the current stream; NULL on an exception. */
  PyObject *(*empty)(const int64_t *sizes, int dims, int device, int channels_last, int dtype);
  /* torch's current cudaStream_t on `device`. */
  void *(*current_stream)(int device);
  /* torch.is_grad_enabled() in this thread. */
  int (*grad_enabled)(void);
} convtune_torch_access;

#ifdef __cplusplus
}
#endif

#endif
