/*
 * roofline.h -- the time no implementation of a convolution beats by much:
 * its FLOPs at the device's matmul rate or its bytes at the device's copy
 * bandwidth, whichever takes longer (tools/bench/bench_suite.py's
 * floor_ms, in C, for `convtune report`).
 *
 *   FLOPs = 2 * N * K * P * Q * (C / groups) * R * S  (the direct algorithm)
 *   bytes = E * (|x| + |w| + |y|), plus 4 * K for a bias  (each once; E the
 *           dtype's element size: 4 for f32, 2 for f16 and bf16; the bias
 *           is fp32)
 *   floor = max(FLOPs / peak of the arithmetic, bytes / copy bandwidth),
 *           the arithmetic being fp32 FMA or TF32 (the math mode) for f32,
 *           half-precision tensor cores for f16 and bf16
 *
 * The backward passes move the same tensors and do the same multiply-adds,
 * so the same floor holds for them.  Peaks come from a table of known GPUs
 * (roofline.c says where each number comes from); other GPUs have none.
 */
#ifndef CONVTUNE_TOOLS_CLI_ROOFLINE_H
#define CONVTUNE_TOOLS_CLI_ROOFLINE_H

#include <stdbool.h>

#include "convtune.h"

typedef struct roofline_peaks {
  const char *name;    /* the GPU's name as CUDA reports it */
  int sm_count;
  double copy_bytes_per_s; /* bytes read + written */
  double fp32_flops_per_s; /* strict fp32 */
  double tf32_flops_per_s;
  double half_flops_per_s; /* fp16 and bf16 tensor cores, fp32 accumulation */
  const char *source;  /* where the numbers come from, for the report */
} roofline_peaks;

/* The peaks of the GPU of a cache's device key ("NAME|smXY|Nsm|..."), or
 * NULL when it is not in the table. */
const roofline_peaks *roofline_peaks_for(const char *device_key);

double roofline_flops(const conv_problem *p);
/* The matmul rate p's arithmetic gets on a GPU with these peaks, and its
 * name for the report ("fp32", "TF32", "fp16", "bf16"). */
double roofline_rate(const conv_problem *p, const roofline_peaks *peaks);
const char *roofline_rate_name(const conv_problem *p);
double roofline_bytes(const conv_problem *p);

/* The floor in milliseconds of p on a GPU with these peaks. */
double roofline_floor_ms(const conv_problem *p, const roofline_peaks *peaks);

#endif /* CONVTUNE_TOOLS_CLI_ROOFLINE_H */
