/*
 * device.h -- the ground floor's GPU half: checked CUDA, cuDNN and cuBLAS
 * calls, the device a context runs on, and the library handles candidates
 * share (conv_env).  Not installed.
 */
#ifndef CONVTUNE_CORE_DEVICE_H
#define CONVTUNE_CORE_DEVICE_H

#ifdef CONVTUNE_NO_CUDA
#error "core/device.h in a floor built without CUDA (cache/): include core/core.h"
#endif

#include <stdbool.h>
#include <stddef.h>

#include <cublasLt.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>
#include <uv.h>

#include "core/core.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------- checked calls */

/* Each returns CONV_OK on success, else records `what` with the library's
 * own error text and returns the matching status (CONV_OUT_OF_MEMORY for
 * allocation failures). */
conv_status conv_check_cuda(conv_error *err, cudaError_t code, const char *what);
conv_status conv_check_cudnn(conv_error *err, cudnnStatus_t code, const char *what);
conv_status conv_check_cublas(conv_error *err, cublasStatus_t code, const char *what);

/* ---------------------------------------------------------------- device */

/* What identifies a GPU model for the cache, read once per context. */
typedef struct conv_device {
  int ordinal;
  char name[256];
  int cc_major, cc_minor;
  int sm_count;
  int l2_bytes;
  int mem_clock_khz;
  int mem_bus_bits;
  size_t total_mem;
  char key[512]; /* canonical fingerprint text, e.g.
                  * "NVIDIA H100 80GB HBM3|sm90|132sm|l2=52428800|mem=2619000kHz*5120bit" */
} conv_device;

/* Makes `ordinal` the current device and saves the caller's in *previous;
 * conv_device_leave(previous) restores it, so that the library never moves
 * its caller to another GPU. */
conv_status conv_device_enter(int ordinal, int *previous /* OUT */, conv_error *err);
void conv_device_leave(int previous);

/* Fills dev for CUDA device `ordinal` (the current device is not changed). */
conv_status conv_device_query(int ordinal, conv_device *dev /* OUT */, conv_error *err);

/* Whether plans for `dev` launch their launch-bound kernels with
 * programmatic dependent launch (algorithms/pdl.cuh): compute
 * capability 9.0 or later, unless the environment sets CONVTUNE_PDL=0 (to
 * measure what it gains; read when a plan is made). */
bool conv_device_pdl(const conv_device *dev);

/* Whether `dev` runs the wgmma kernels (padded_gemm, stem_gemm, patch's
 * wgmma tilings): they are compiled for sm_90a, which runs on compute
 * capability 9.0 only. */
bool conv_device_wgmma(const conv_device *dev);

/* ---------------------------------------------------------------- memory */

/* Where a context's device memory comes from (conv_context_options'
 * device_alloc and device_free, convtune.h): the caller's functions, or
 * cudaMalloc and cudaFree where `alloc` is NULL.  Tuning buffers and plan
 * workspaces are allocated through it; what the candidate families run
 * gets its scratch from those workspaces, never allocating. */
typedef struct conv_allocator {
  conv_device_alloc_fn alloc; /* NULL: cudaMalloc / cudaFree */
  conv_device_free_fn free;
  void *user;
  int device;                 /* passed to both */
} conv_allocator;

/* Whether the allocator is the caller's (stream-ordered: see
 * conv_device_free) rather than cudaMalloc's. */
bool conv_allocator_is_user(const conv_allocator *a);

/* bytes (> 0) of device memory for work on `stream`, into *ptr, on the
 * current device (the allocator's).  CONV_OUT_OF_MEMORY where the
 * allocator fails or gives NULL, CONV_INVALID_ARGUMENT (the memory given
 * back) where it gives a pointer not CONV_ALLOCATION_ALIGNMENT-aligned; the
 * message names `what`.  *ptr is written only on success. */
conv_status conv_device_alloc(const conv_allocator *a, size_t bytes, cudaStream_t stream,
                              void **ptr /* OUT */, const char *what, conv_error *err);

/* Frees what conv_device_alloc gave for `stream` (NULL: nothing).  The
 * caller's allocator may hand the memory to other work on `stream` at
 * once: work that used it on another stream must be finished first.
 * cudaFree (no allocator) waits for the device itself. */
void conv_device_free(const conv_allocator *a, void *ptr, size_t bytes, cudaStream_t stream);

/* The library handles candidates share.  cuDNN executes on the handle's
 * stream, so cudnnSetStream + execute run under cudnn_lock; cuBLASLt takes
 * the stream per call and needs no lock. */
typedef struct conv_env {
  conv_device device;
  cudnnHandle_t cudnn;
  uv_mutex_t cudnn_lock;
  cublasLtHandle_t cublaslt;
  conv_allocator allocator; /* tuning buffers and plan workspaces; zeroed: cudaMalloc */
} conv_env;


#ifdef __cplusplus
}
#endif
#endif /* CONVTUNE_CORE_DEVICE_H */
