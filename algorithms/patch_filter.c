/*
 * patch_filter.c -- the `patch_filter` candidate: the backward-filter pass
 * of 3x3 "same" convolutions on many 4x4 or 8x8 patches, each block
 * summing whole images' products in registers and a second kernel adding
 * the blocks' sums in order (patch_filter.h).  The patch family's
 * backward-data runs its forward kernels on the transposed view; this is
 * the other backward pass for the same layers.
 *
 * Config values: {kind, images, stages} (conv_patch_filter_tiling).
 *
 * Tests: tests/families/test_patch_filter.c.
 */
#include <stdio.h>
#include <stdlib.h>

#include "algorithms/patch_filter.h"
#include "algorithms/common/kernel_family.h"

/* The tensor-core kernel first: where it plans (TF32 mode) it is the one
 * to try first. */
static const conv_patch_filter_tiling patch_filter_tilings[] = {
    {CONV_PATCH_FILTER_MMA, 2, 3}, {CONV_PATCH_FILTER_MMA, 2, 2}, {CONV_PATCH_FILTER_MMA, 1, 3},
    {CONV_PATCH_FILTER_MMA, 1, 2}, {CONV_PATCH_FILTER_MMA, 4, 2}, {CONV_PATCH_FILTER_MMA, 4, 3},
    {CONV_PATCH_FILTER_MMA, 8, 2}, {CONV_PATCH_FILTER_FMA, 4, 2}, {CONV_PATCH_FILTER_FMA, 8, 2},
    {CONV_PATCH_FILTER_FMA, 2, 2}, {CONV_PATCH_FILTER_FMA, 1, 2}, {CONV_PATCH_FILTER_FMA, 4, 3},
    {CONV_PATCH_FILTER_FMA, 8, 3}, {CONV_PATCH_FILTER_FMA, 2, 3}, {CONV_PATCH_FILTER_FMA, 1, 3},
};
#define PATCH_FILTER_TILINGS ((int)(sizeof patch_filter_tilings / sizeof patch_filter_tilings[0]))

static const conv_kernel_family patch_filter_family;

/* A valid convolution that one of the tilings plans. */
static bool patch_filter_applicable(const conv_problem *problem, const conv_env *env) {
  /* conv_problem_supported: fp32 convolutions (the plan reads every other
   * field, but not the dtype). */
  if (problem == NULL || !conv_problem_supported(problem) ||
      conv_problem_validate(problem, NULL, 0) != CONV_OK)
    return false;
  return conv_kernel_plans_any(&patch_filter_family, problem, env);
}

static int patch_filter_list(const conv_problem *problem, const conv_env *env, conv_config *out,
                             int max) {
  (void)problem, (void)env;
  int n = 0;
  for (; n < PATCH_FILTER_TILINGS && n < max; n++) {
    const conv_patch_filter_tiling *t = &patch_filter_tilings[n];
    out[n] = (conv_config){3, {t->kind, t->images, t->stages}, 0};
  }
  return n;
}

CONV_KERNEL_PLAN(patch_filter, conv_patch_filter_tiling, 3, conv_patch_filter_plan)

static cudaError_t patch_filter_configure(void *launch, const conv_env *env) {
  return conv_patch_filter_configure(launch, env->device.sm_count);
}

/* The backward-filter pass: x and dy in, dw (exec's w) out. */
static cudaError_t patch_filter_launch(const void *launch, const conv_exec *ex,
                                       cudaStream_t stream) {
  return conv_patch_filter_run(launch, ex->x, ex->y, (float *)ex->w, ex->workspace, stream);
}

static void patch_filter_describe_values(const int64_t *v, char *text, size_t size) {
  snprintf(text, size, "%s images=%lld stages=%lld",
           v[0] == CONV_PATCH_FILTER_MMA ? "tf32-mma" : "fma", (long long)v[1], (long long)v[2]);
}

static const conv_kernel_family patch_filter_family = {
    .name = "patch_filter",
    .scope = "backward-filter passes of many small images that a patch tiling plans",
    .values = 3, .value_min = 0, .value_max = 8, .launch_bytes = sizeof(conv_patch_filter_launch),
    .workspace_at = CONV_KERNEL_WORKSPACE(conv_patch_filter_launch),
    .applicable = patch_filter_applicable, .list = patch_filter_list, .plan = patch_filter_plan,
    .configure = patch_filter_configure, .launch = patch_filter_launch,
    .describe = patch_filter_describe_values,
};
CONV_KERNEL_FAMILY_ALGORITHM(patch_filter, CONV_ALGO_PATCH_FILTER, 1, false);
