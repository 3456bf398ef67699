/*
 * pdl.cuh -- conv_launch, the launch that returns its error rather than
 * leaving it pending (implicit_gemm, patch_filter, direct_channel,
 * filter_reduce), optionally with programmatic dependent launch (PDL,
 * sm_90 and later), for kernels of passes that take about as long as a
 * launch: seed3_msd_small's backward-data pass is about 0.5 us of work
 * behind 0.8 us of launch, back to back in a CUDA graph.
 *
 * A kernel launched with `pdl` set may start before the kernel ahead of it
 * in the stream has finished, so it must call conv_pdl_enter() before its
 * first global-memory access:
 *
 *   - griddepcontrol.launch_dependents lets the next such kernel start its
 *     blocks once every block of this one has begun, so its launch overlaps
 *     this kernel's work;
 *   - griddepcontrol.wait blocks until the kernel ahead has completed and
 *     its writes are visible (a no-op when this kernel was launched
 *     without the attribute).
 *
 * So a kernel reads and writes nothing before everything ahead of it in
 * the stream is done, as with a plain launch: only the launch overlaps.
 * The kernel ahead may be anyone's (PyTorch's, cuDNN's): one that never
 * signals lets this one start when it completes, as without the attribute.
 * Whether a plan uses PDL is conv_device_pdl()'s answer (core/device.h).
 */
#ifndef CONVTUNE_PDL_CUH
#define CONVTUNE_PDL_CUH

#include <cuda_runtime.h>

__device__ __forceinline__ void conv_pdl_enter() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

/* kernel<<<grid, block, smem, stream>>>(args...), with PDL where `pdl` is
 * set (the kernel calls conv_pdl_enter() first).  Returns the launch's
 * error, not left pending. */
template <typename... Params, typename... Args>
static inline cudaError_t conv_launch(bool pdl, void (*kernel)(Params...), dim3 grid, dim3 block,
                                      size_t smem, cudaStream_t stream, Args... args) {
  cudaLaunchAttribute attribute[1];
  attribute[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute[0].val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t config = {};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = smem;
  config.stream = stream;
  config.attrs = attribute;
  config.numAttrs = pdl ? 1 : 0;
  const cudaError_t e = cudaLaunchKernelEx(&config, kernel, args...);
  if (e != cudaSuccess) (void)cudaGetLastError();
  return e;
}

#endif /* CONVTUNE_PDL_CUH */
