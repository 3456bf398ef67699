/*
 * channel_split.c -- the `channel_split` candidate: direct convolution of
 * small outputs with many input channels, the channel sum split across
 * blocks (channel_split.h).
 *
 * Config values: {k_tile, pixels, splits} (conv_split_tiling).  Strict fp32, so
 * offered in both math modes.
 *
 * Tests: tests/families/test_channel_split.c.
 */
#include <stdio.h>
#include <stdlib.h>

#include "algorithms/channel_split.h"
#include "algorithms/common/kernel_family.h"

static const int channel_split_k_tiles[] = {32, 64, 16};
static const int channel_split_pixels[] = {2, 1, 4};
static const int channel_split_counts[] = {1, 2, 4, 8, 16, 32, 64};
#define COUNT_OF(a) (sizeof(a) / sizeof((a)[0]))

static bool channel_split_applicable(const conv_problem *problem, const conv_env *env) {
  return problem != NULL && env != NULL && conv_problem_nchw(problem) &&
         conv_split_applicable(problem);
}

static int channel_split_list(const conv_problem *problem, const conv_env *env, conv_config *out,
                              int max) {
  (void)problem, (void)env;
  int n = 0;
  for (size_t i = 0; i < COUNT_OF(channel_split_k_tiles); i++)
    for (size_t j = 0; j < COUNT_OF(channel_split_pixels); j++)
      for (size_t m = 0; m < COUNT_OF(channel_split_counts) && n < max; m++)
        out[n++] = (conv_config){
            3, {channel_split_k_tiles[i], channel_split_pixels[j], channel_split_counts[m]}, 0};
  return n;
}

CONV_KERNEL_PLAN(channel_split, conv_split_tiling, 3, conv_split_plan)

static cudaError_t channel_split_launch(const void *launch, const conv_exec *ex,
                                        cudaStream_t stream) {
  return conv_split_forward(launch, ex->x, ex->w, ex->bias, ex->y, ex->workspace, stream);
}

static void channel_split_describe_values(const int64_t *v, char *text, size_t size) {
  snprintf(text, size, "k_tile=%lld pixels=%lld splits=%lld", (long long)v[0], (long long)v[1],
           (long long)v[2]);
}

static const conv_kernel_family channel_split_family = {
    .name = "channel_split",
    .scope = "fp32 NCHW forward, one group, K >= 8 and at most 8192 output pixels",
    .values = 3, .value_min = 1, .value_max = 64, .launch_bytes = sizeof(conv_split_launch),
    .workspace_at = CONV_KERNEL_WORKSPACE(conv_split_launch),
    .applicable = channel_split_applicable, .list = channel_split_list, .plan = channel_split_plan,
    .launch = channel_split_launch, .describe = channel_split_describe_values,
};
CONV_KERNEL_FAMILY_ALGORITHM(channel_split, CONV_ALGO_CHANNEL_SPLIT, 2, false);
