// The torch access table of the compiled call path (_torch_access.h): the
// facts a Launcher checks of a tensor, read from the C++ tensor, and its
// output from at::empty.  Built into _convtune_torch_op.so, so it shares
// the operator's torch (the one the process imported) and its build rules.

#include <Python.h>

#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/core/GradMode.h>
#include <torch/csrc/Exceptions.h>
#include <torch/csrc/autograd/python_variable.h>

#include <algorithm>

#include "_torch_access.h"
#include "convtune.h"

namespace {

// The conv_dtype of torch's element types; -1 for the rest.
int conv_dtype_of(at::ScalarType type) {
  switch (type) {
    case at::kFloat: return CONV_DTYPE_F32;
    case at::kHalf: return CONV_DTYPE_F16;
    case at::kBFloat16: return CONV_DTYPE_BF16;
    default: return -1;
  }
}

at::ScalarType scalar_type_of(int dtype) {
  return dtype == CONV_DTYPE_F16 ? at::kHalf : dtype == CONV_DTYPE_BF16 ? at::kBFloat16 : at::kFloat;
}

int read_tensor(PyObject *object, convtune_tensor_facts *facts) {
  HANDLE_TH_ERRORS
  if (!THPVariable_Check(object)) return 0;
  const at::Tensor &t = THPVariable_Unpack(object);
  // Sparse and nested tensors have no strides to be dense by; a tensor
  // without storage (some wrapper subclasses) no data pointer to give.
  if (t.layout() != at::kStrided || !t.has_storage()) {
    *facts = convtune_tensor_facts{};
    facts->dims = -1;
    return 1;
  }
  facts->dims = static_cast<int>(t.dim());
  const int64_t kept = std::min<int64_t>(t.dim(), CONVTUNE_TENSOR_MAX_DIMS);
  std::copy_n(t.sizes().begin(), kept, facts->sizes);
  facts->device = t.is_cuda() ? t.get_device() : -1;
  facts->dtype = conv_dtype_of(t.scalar_type());
  facts->contiguous = t.is_contiguous();
  facts->channels_last = t.is_contiguous(at::MemoryFormat::ChannelsLast);
  facts->requires_grad = t.requires_grad();
  // Only a CUDA tensor's (no other fits); raises for storage not
  // allocated (a wrapper subclass's), as tensor.data_ptr() does.
  facts->data = facts->device >= 0 ? reinterpret_cast<uintptr_t>(t.data_ptr()) : 0;
  return 1;
  END_HANDLE_TH_ERRORS_RET(-1)
}

PyObject *empty_output(const int64_t *sizes, int dims, int device, int channels_last, int dtype) {
  HANDLE_TH_ERRORS
  const auto format = channels_last ? at::MemoryFormat::ChannelsLast : at::MemoryFormat::Contiguous;
  at::Tensor t = at::empty(at::IntArrayRef(sizes, dims),
                           at::TensorOptions()
                               .dtype(scalar_type_of(dtype))
                               .device(at::kCUDA, static_cast<c10::DeviceIndex>(device))
                               .memory_format(format));
  return THPVariable_Wrap(std::move(t));
  END_HANDLE_TH_ERRORS
}

void *current_stream(int device) {
  HANDLE_TH_ERRORS
  return at::cuda::getCurrentCUDAStream(static_cast<c10::DeviceIndex>(device)).stream();
  END_HANDLE_TH_ERRORS
}

int grad_enabled() { return c10::GradMode::is_enabled(); }

const convtune_torch_access table = {
    CONVTUNE_TORCH_ACCESS_VERSION, read_tensor, empty_output, current_stream, grad_enabled,
};

}  // namespace

// Its address, for the binding to hand to each Launcher (ctypes reads it).
extern "C" __attribute__((visibility("default"))) const convtune_torch_access *
convtune_torch_access_table(void) {
  return &table;
}
