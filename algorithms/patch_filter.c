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
#include "runtime/internal.h"

/* The tensor-core kernel first: where it plans (TF32 mode) it is the one
 * to try first. */
static const conv_patch_filter_tiling pf_tilings[] = {
    {CONV_PATCH_FILTER_MMA, 2, 3}, {CONV_PATCH_FILTER_MMA, 2, 2}, {CONV_PATCH_FILTER_MMA, 1, 3},
    {CONV_PATCH_FILTER_MMA, 1, 2}, {CONV_PATCH_FILTER_MMA, 4, 2}, {CONV_PATCH_FILTER_MMA, 4, 3},
    {CONV_PATCH_FILTER_MMA, 8, 2}, {CONV_PATCH_FILTER_FMA, 4, 2}, {CONV_PATCH_FILTER_FMA, 8, 2},
    {CONV_PATCH_FILTER_FMA, 2, 2}, {CONV_PATCH_FILTER_FMA, 1, 2}, {CONV_PATCH_FILTER_FMA, 4, 3},
    {CONV_PATCH_FILTER_FMA, 8, 3}, {CONV_PATCH_FILTER_FMA, 2, 3}, {CONV_PATCH_FILTER_FMA, 1, 3},
};
#define PF_TILINGS ((int)(sizeof pf_tilings / sizeof pf_tilings[0]))

static bool pf_applicable(const conv_problem *problem, const conv_env *env) {
  (void)env;
  if (problem == NULL || conv_problem_validate(problem, NULL, 0) != CONV_OK ||
      problem->op != CONV_OP_CONVOLUTION)
    return false;
  for (int i = 0; i < PF_TILINGS; i++) {
    conv_patch_filter_launch launch;
    if (conv_patch_filter_plan(problem, &pf_tilings[i], &launch, NULL, 0)) return true;
  }
  return false;
}

static conv_status pf_configs(const conv_problem *problem, conv_env *env, conv_config *out,
                              int max, int *count, conv_error *err) {
  if (problem == NULL || count == NULL || (max > 0 && out == NULL))
    return conv_error_set(err, CONV_INVALID_ARGUMENT, "patch_filter: bad configs() arguments");
  *count = 0;
  if (!pf_applicable(problem, env)) return CONV_OK;
  for (int i = 0; i < PF_TILINGS && *count < max; i++) {
    conv_patch_filter_launch launch;
    if (!conv_patch_filter_plan(problem, &pf_tilings[i], &launch, NULL, 0)) continue;
    const conv_patch_filter_tiling *t = &pf_tilings[i];
    out[(*count)++] = (conv_config){3, {t->kind, t->images, t->stages}, 0};
  }
  return CONV_OK;
}

static void pf_release(void *state) { free(state); }

static conv_status pf_prepare(const conv_problem *problem, conv_env *env,
                              const conv_config *config, conv_prepared *out, conv_error *err) {
  if (problem == NULL || env == NULL || config == NULL || out == NULL)
    return conv_error_set(err, CONV_INVALID_ARGUMENT, "patch_filter: NULL argument");
  conv_status st = conv_config_check(config, "patch_filter", 3, 0, 8, err);
  if (st != CONV_OK) return st;
  const conv_patch_filter_tiling tiling = {(int)config->values[0], (int)config->values[1],
                                           (int)config->values[2]};
  conv_patch_filter_launch *launch = malloc(sizeof *launch);
  if (launch == NULL) return conv_error_set(err, CONV_OUT_OF_MEMORY, "patch_filter: malloc");
  char why[160];
  if (!conv_patch_filter_plan(problem, &tiling, launch, why, sizeof why)) {
    free(launch);
    return conv_error_set(err, CONV_UNSUPPORTED, "patch_filter: %s", why);
  }
  st = conv_prepared_own_kernel(launch,
                                conv_patch_filter_configure(launch, env->device.sm_count),
                                "patch_filter", out, err);
  if (st == CONV_OK) out->workspace_bytes = launch->workspace_bytes;
  return st;
}

static conv_status pf_run(const conv_exec *ex, cudaStream_t stream, conv_error *err) {
  if (ex == NULL || ex->state == NULL || ex->x == NULL || ex->y == NULL || ex->w == NULL)
    return conv_error_set(err, CONV_INVALID_ARGUMENT, "patch_filter: NULL argument");
  const conv_patch_filter_launch *launch = ex->state;
  if (ex->workspace == NULL || ex->workspace_bytes < launch->workspace_bytes)
    return conv_error_set(err, CONV_INVALID_ARGUMENT,
                          "patch_filter: %zu bytes of workspace, %zu needed", ex->workspace_bytes,
                          launch->workspace_bytes);
  /* The backward-filter pass: x and dy in, dw (ex->w) out. */
  return conv_check_cuda(err,
                         conv_patch_filter_run(launch, ex->x, ex->y, (float *)ex->w,
                                               ex->workspace, stream),
                         "patch_filter: kernel launch");
}

static void pf_describe(const conv_config *config, char *text, size_t size) {
  if (text == NULL || size == 0) return;
  if (config == NULL || config->count != 3) {
    snprintf(text, size, "invalid config");
    return;
  }
  snprintf(text, size, "%s images=%lld stages=%lld",
           config->values[0] == CONV_PATCH_FILTER_MMA ? "tf32-mma" : "fma",
           (long long)config->values[1], (long long)config->values[2]);
}

const conv_algorithm conv_algorithm_patch_filter = {
    .id = CONV_ALGO_PATCH_FILTER,
    .version = 1,
    .name = "patch_filter",
    .applicable = pf_applicable,
    .configs = pf_configs,
    .prepare = pf_prepare,
    .run = pf_run,
    .release = pf_release,
    .describe = pf_describe,
};
