/*
 * direct_nhwc.h -- the NHWC layout of the direct_channel kernels (see
 * direct_channel.h), for direct_channel.cu.  C linkage; implemented in
 * direct_nhwc.cu.
 *
 * A thread computes every output channel of one output pixel of a
 * channels-last fp16 or bf16 forward convolution of one group: for each
 * filter tap it reads the pixel's input channels, contiguous in NHWC (as
 * 16-byte loads of eight where the channel count allows), and adds them into
 * K fp32 sums against the filters, staged once a block in shared memory as
 * fp32 [r][s][c][k] so that a tap's K weights of one channel are adjacent.
 * Neighbouring threads' windows overlap, so a tap's reads mostly hit L1.
 * It serves the few-channel dense layers of MSD nets and image stems (16
 * channels to 1, 3 to 16 or 32) in channels-last models, where cuDNN's engines
 * reach a few percent of the memory floor.
 */
#ifndef CONVTUNE_DIRECT_NHWC_H
#define CONVTUNE_DIRECT_NHWC_H

#include <stdbool.h>
#include <stddef.h>

#include <cuda_runtime_api.h>

#include "algorithms/direct_channel.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The most output channels the layout computes per thread (compiled: 1, 2,
 * 4, 8, 16 and 32: 32 takes the 3->32 stems of MobileNet and EfficientNet),
 * and its shared-memory limit for the staged filters. */
#define CONV_DIRECT_NHWC_MAX_K 32
#define CONV_DIRECT_NHWC_SMEM_MAX ((size_t)48 << 10)

/* Completes `common` (sizes, epilogue and dtype filled by conv_direct_plan)
 * for the NHWC layout of `problem` and writes it to *launch.  Returns false
 * with the reason in `why` unless the problem is an NHWC fp16 or bf16
 * forward convolution of one group with K in {1, 2, 4, 8, 16, 32}, the filters
 * fit in CONV_DIRECT_NHWC_SMEM_MAX as fp32, and the batch is at most 65535
 * images. */
bool conv_direct_nhwc_plan(const conv_problem *problem, const conv_direct_launch *common,
                           conv_direct_launch *launch /* OUT */, char *why, size_t why_size);

/* y = conv(x, w) with the launch's epilogue, on `stream` (x, w, y of the
 * launch's dtype; bias fp32). */
cudaError_t conv_direct_nhwc_forward(const conv_direct_launch *launch, const void *x,
                                     const void *w, const float *bias, void *y,
                                     cudaStream_t stream);

#ifdef __cplusplus
}
#endif
#endif /* CONVTUNE_DIRECT_NHWC_H */
