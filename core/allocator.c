/* allocator.c -- a context's device memory: the caller's allocator
 * (conv_context_options.device_alloc and device_free) or cudaMalloc. */
#include <stdint.h>
#include <stdio.h>

#include "core/device.h"

bool conv_allocator_is_user(const conv_allocator *a) { return a != NULL && a->alloc != NULL; }

/* The caller's allocator: a refusal or NULL is out of memory; a pointer
 * the kernels cannot use (cuBLASLt's workspaces need 256-byte alignment)
 * goes back to it. */
static conv_status user_alloc(const conv_allocator *a, size_t bytes, cudaStream_t stream,
                              void **ptr, const char *what, conv_error *err) {
  void *got = NULL;
  int rc = a->alloc(a->user, bytes, (void *)stream, a->device, &got);
  if (rc != 0 || got == NULL)
    return conv_error_set(err, CONV_OUT_OF_MEMORY,
                          "%s: the context's device_alloc refused %zu bytes on device %d (%s %d)",
                          what, bytes, a->device, rc != 0 ? "returned" : "gave NULL, returned",
                          rc);
  if ((uintptr_t)got % CONV_ALLOCATION_ALIGNMENT != 0) {
    a->free(a->user, got, bytes, (void *)stream, a->device);
    return conv_error_set(err, CONV_INVALID_ARGUMENT,
                          "%s: the context's device_alloc gave %p, not %d-byte aligned "
                          "(CONV_ALLOCATION_ALIGNMENT)",
                          what, got, CONV_ALLOCATION_ALIGNMENT);
  }
  *ptr = got;
  return CONV_OK;
}

conv_status conv_device_alloc(const conv_allocator *a, size_t bytes, cudaStream_t stream,
                              void **ptr, const char *what, conv_error *err) {
  if (bytes == 0) return conv_error_set(err, CONV_INTERNAL, "%s: an allocation of 0 bytes", what);
  if (conv_allocator_is_user(a)) return user_alloc(a, bytes, stream, ptr, what, err);
  void *got = NULL;
  char call[96];
  snprintf(call, sizeof call, "cudaMalloc(%s)", what);
  conv_status st = conv_check_cuda(err, cudaMalloc(&got, bytes), call);
  if (st == CONV_OK) *ptr = got;
  return st;
}

void conv_device_free(const conv_allocator *a, void *ptr, size_t bytes, cudaStream_t stream) {
  if (ptr == NULL) return;
  if (conv_allocator_is_user(a))
    a->free(a->user, ptr, bytes, (void *)stream, a->device);
  else
    (void)cudaFree(ptr); /* a failure (a device already in error) has no caller to tell */
}
