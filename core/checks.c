/* checks.c -- CUDA, cuDNN and cuBLAS return codes as statuses with messages. */
#include "core/device.h"

conv_status conv_check_cuda(conv_error *err, cudaError_t code, const char *what) {
  if (code == cudaSuccess) return CONV_OK;
  conv_status status = code == cudaErrorMemoryAllocation ? CONV_OUT_OF_MEMORY : CONV_CUDA_ERROR;
  return conv_error_set(err, status, "%s: %s (%s)", what, cudaGetErrorString(code),
                        cudaGetErrorName(code));
}

conv_status conv_check_cudnn(conv_error *err, cudnnStatus_t code, const char *what) {
  if (code == CUDNN_STATUS_SUCCESS) return CONV_OK;
  conv_status status = code == CUDNN_STATUS_ALLOC_FAILED ? CONV_OUT_OF_MEMORY : CONV_CUDNN_ERROR;
  return conv_error_set(err, status, "%s: %s", what, cudnnGetErrorString(code));
}

static const char *cublas_status_name(cublasStatus_t code) {
  switch (code) {
    case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "CUBLAS_STATUS_ARCH_MISMATCH";
    case CUBLAS_STATUS_MAPPING_ERROR: return "CUBLAS_STATUS_MAPPING_ERROR";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_INTERNAL_ERROR: return "CUBLAS_STATUS_INTERNAL_ERROR";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
    case CUBLAS_STATUS_LICENSE_ERROR: return "CUBLAS_STATUS_LICENSE_ERROR";
    default: return "unknown cuBLAS status";
  }
}

conv_status conv_check_cublas(conv_error *err, cublasStatus_t code, const char *what) {
  if (code == CUBLAS_STATUS_SUCCESS) return CONV_OK;
  conv_status status = code == CUBLAS_STATUS_ALLOC_FAILED ? CONV_OUT_OF_MEMORY : CONV_CUBLAS_ERROR;
  return conv_error_set(err, status, "%s: %s (%d)", what, cublas_status_name(code), (int)code);
}
