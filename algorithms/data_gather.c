/*
 * data_gather.c -- the `data_gather` candidate: our own backward-data pass
 * for the strided (or over-padded) convolutions with few channels per
 * group that direct_channel's transposed view cannot run, depthwise 3x3
 * stride 2 above all.  The kernels are in data_gather.cu.
 *
 * Config values: {kernel, threads} (conv_data_gather_tiling).
 *
 * Tests: tests/families/test_data_gather.c.
 */
#include <stdio.h>
#include <stdlib.h>

#include "algorithms/data_gather.h"
#include "algorithms/common/views.h"
#include "algorithms/common/kernel_family.h"

/* Each dx element sums kg x r x s products: past these, a dense layer is
 * GEMM work. */
#define DATA_GATHER_MAX_CHANNELS_IN 32
#define DATA_GATHER_MAX_CHANNELS_OUT 32

static bool data_gather_applicable(const conv_problem *pb, const conv_env *env) {
  if (pb == NULL || env == NULL || !conv_problem_supported(pb) ||
      pb->direction != CONV_BACKWARD_DATA || pb->layout != CONV_LAYOUT_NCHW)
    return false;
  conv_problem transposed; /* direct_channel runs these, faster */
  if (conv_direct_backward_data_view(pb, &transposed)) return false;
  return pb->c / pb->groups <= DATA_GATHER_MAX_CHANNELS_IN &&
         pb->k / pb->groups <= DATA_GATHER_MAX_CHANNELS_OUT &&
         conv_data_gather_compiled(pb->r, pb->s);
}

/* The quad kernel first (it plans at stride 2 only), then per element. */
static const conv_data_gather_tiling data_gather_tilings[] = {
    {CONV_GATHER_QUAD, 256},    {CONV_GATHER_QUAD, 128},    {CONV_GATHER_QUAD, 512},
    {CONV_GATHER_ELEMENT, 256}, {CONV_GATHER_ELEMENT, 128}, {CONV_GATHER_ELEMENT, 512},
};
#define DATA_GATHER_TILINGS ((int)(sizeof data_gather_tilings / sizeof data_gather_tilings[0]))

static int data_gather_list(const conv_problem *problem, const conv_env *env, conv_config *out,
                            int max) {
  (void)problem, (void)env;
  int n = 0;
  for (; n < DATA_GATHER_TILINGS && n < max; n++)
    out[n] = (conv_config){2, {data_gather_tilings[n].kernel, data_gather_tilings[n].threads}, 0};
  return n;
}

CONV_KERNEL_PLAN(data_gather, conv_data_gather_tiling, 2, conv_data_gather_plan)

/* Backward-data: dy (exec's y) and w in, dx (exec's x) out. */
static cudaError_t data_gather_launch(const void *launch, const conv_exec *ex,
                                      cudaStream_t stream) {
  return conv_data_gather_run(launch, ex->y, ex->w, (float *)ex->x, stream);
}

static void data_gather_describe_values(const int64_t *v, char *text, size_t size) {
  snprintf(text, size, "%s threads=%lld", v[0] == CONV_GATHER_QUAD ? "quad" : "element",
           (long long)v[1]);
}

static const conv_kernel_family data_gather_family = {
    .name = "data_gather",
    .scope =
        "fp32 NCHW backward-data that direct_channel does not run (a stride above 1, or "
        "padding past the filter), of a square 1, 2, 3, 4, 5 or 7 filter, with at most 32 "
        "input and 32 output channels per group",
    .values = 2, .value_min = 0, .value_max = 1024,
    .launch_bytes = sizeof(conv_data_gather_launch),
    .applicable = data_gather_applicable, .list = data_gather_list, .plan = data_gather_plan,
    .launch = data_gather_launch, .describe = data_gather_describe_values,
};
/* Version 2: the quad kernel for stride 2. */
CONV_KERNEL_FAMILY_ALGORITHM(data_gather, CONV_ALGO_DATA_GATHER, 2, false);
