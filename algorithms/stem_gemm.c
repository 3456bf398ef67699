/*
 * stem_gemm.c -- the `stem_gemm` candidate: an NCHW forward convolution
 * with a short reduction (C R S <= 256, a network's stem) in TF32 mode as
 * wgmma GEMMs over segments of output rows, the filters resident in
 * shared memory (stem_gemm.h), on compute capability 9.0.  It is there
 * for resnet50's 7x7 stride-2 stem, whose 147-long reduction leaves
 * cuDNN's engines and the tensor-core implicit GEMM gathering far more
 * than they multiply.
 *
 * Config values: {channels, batch} (conv_stem_tiling).
 *
 * Tests: tests/families/test_stem_gemm.c.
 */
#include <stdio.h>
#include <stdlib.h>

#include "algorithms/stem_gemm.h"
#include "runtime/internal.h"

/* Room for the compiled tilings (3 today). */
#define ST_TILINGS_MAX 8

/* A device that runs wgmma (conv_device_wgmma); without a device (env
 * NULL) the problem alone decides. */
static bool st_applicable(const conv_problem *problem, const conv_env *env) {
  if (problem == NULL || !conv_problem_nchw(problem) || problem->math != CONV_MATH_TF32)
    return false;
  if (env != NULL && !conv_device_wgmma(&env->device)) return false;
  conv_stem_tiling tilings[ST_TILINGS_MAX];
  int n = conv_stem_tilings(tilings, ST_TILINGS_MAX);
  if (n > ST_TILINGS_MAX) n = ST_TILINGS_MAX;
  for (int i = 0; i < n; i++) { /* the wider tilings take more output channels */
    conv_stem_launch launch;
    if (conv_stem_plan(problem, &tilings[i], &launch, NULL, 0)) return true;
  }
  return false;
}

/* The compiled tilings that plan, in their own order. */
static conv_status st_configs(const conv_problem *problem, conv_env *env, conv_config *out,
                              int max, int *count, conv_error *err) {
  if (problem == NULL || out == NULL || count == NULL || max < 0)
    return conv_error_set(err, CONV_INVALID_ARGUMENT, "stem_gemm: bad configs() arguments");
  *count = 0;
  if (!st_applicable(problem, env)) return CONV_OK;
  conv_stem_tiling tilings[ST_TILINGS_MAX];
  int n = conv_stem_tilings(tilings, ST_TILINGS_MAX);
  if (n > ST_TILINGS_MAX) n = ST_TILINGS_MAX;
  for (int i = 0; i < n && *count < max; i++) {
    conv_stem_launch launch;
    if (!conv_stem_plan(problem, &tilings[i], &launch, NULL, 0)) continue;
    out[(*count)++] = (conv_config){2, {tilings[i].channels, tilings[i].batch}, 0};
  }
  return CONV_OK;
}

static void st_release(void *state) { free(state); }

static conv_status st_prepare(const conv_problem *problem, conv_env *env,
                              const conv_config *config, conv_prepared *out, conv_error *err) {
  if (problem == NULL || env == NULL || config == NULL || out == NULL)
    return conv_error_set(err, CONV_INVALID_ARGUMENT, "stem_gemm: NULL argument");
  if (!conv_device_wgmma(&env->device))
    return conv_error_set(err, CONV_UNSUPPORTED,
                          "stem_gemm: needs compute capability 9.0 (wgmma, sm_90a)");
  conv_status st = conv_config_check(config, "stem_gemm", 2, 1, 256, err);
  if (st != CONV_OK) return st;
  const conv_stem_tiling tiling = {(int)config->values[0], (int)config->values[1]};
  conv_stem_launch *launch = malloc(sizeof *launch);
  if (launch == NULL) return conv_error_set(err, CONV_OUT_OF_MEMORY, "stem_gemm: malloc");
  char why[160];
  if (!conv_stem_plan(problem, &tiling, launch, why, sizeof why)) {
    free(launch);
    return conv_error_set(err, CONV_UNSUPPORTED, "stem_gemm: %s", why);
  }
  return conv_prepared_own_kernel(launch, conv_stem_configure(launch, env->device.sm_count),
                                  "stem_gemm", out, err);
}

static conv_status st_run(const conv_exec *ex, cudaStream_t stream, conv_error *err) {
  return conv_check_cuda(err,
                         conv_stem_forward((const conv_stem_launch *)ex->state, ex->x, ex->w,
                                           ex->bias, ex->y, stream),
                         "stem_gemm: kernel launch");
}

static void st_describe(const conv_config *config, char *text, size_t size) {
  if (text == NULL || size == 0) return;
  if (config == NULL || config->count != 2) {
    snprintf(text, size, "invalid config");
    return;
  }
  snprintf(text, size, "tf32-wgmma channels=%lld batch=%lld", (long long)config->values[0],
           (long long)config->values[1]);
}

const conv_algorithm conv_algorithm_stem_gemm = {
    .id = CONV_ALGO_STEM_GEMM,
    .version = 1,
    .name = "stem_gemm",
    .applicable = st_applicable,
    .configs = st_configs,
    .prepare = st_prepare,
    .run = st_run,
    .release = st_release,
    .describe = st_describe,
};
