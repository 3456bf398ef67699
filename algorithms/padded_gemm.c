/*
 * padded_gemm.c -- the `padded_gemm` candidate: an NCHW 3x3 forward
 * convolution (stride 1, padding 1) in TF32 mode as one wgmma GEMM over
 * the images' padded grid (padded_gemm.h), on compute capability 9.0.  It
 * is there for resnet-style 3x3 layers, where cuDNN's TF32 engines on
 * NCHW tensors run far below their channels-last speed (0.052 ms against
 * 0.030 for resnet50's 56x56 layer at batch 16 on an H100, where this
 * kernel takes 0.033).
 *
 * Config values: {positions, stages} (conv_padded_tiling).
 *
 * Tests: tests/families/test_padded_gemm.c.
 */
#include <stdio.h>
#include <stdlib.h>

#include "algorithms/padded_gemm.h"
#include "runtime/internal.h"

/* Room for the compiled tilings (3 today). */
#define PG_TILINGS_MAX 8

/* A device that runs wgmma (conv_device_wgmma); without a device (env
 * NULL) the problem alone decides. */
static bool pg_applicable(const conv_problem *problem, const conv_env *env) {
  if (problem == NULL || !conv_problem_nchw(problem) || problem->math != CONV_MATH_TF32)
    return false;
  if (env != NULL && !conv_device_wgmma(&env->device)) return false;
  conv_padded_tiling tiling;
  conv_padded_launch launch;
  return conv_padded_tilings(&tiling, 1) > 0 &&
         conv_padded_plan(problem, &tiling, &launch, NULL, 0);
}

/* The compiled tilings that plan, in their own order (larger tiles first:
 * they stage the fewest halo positions per output). */
static conv_status pg_configs(const conv_problem *problem, conv_env *env, conv_config *out,
                              int max, int *count, conv_error *err) {
  if (problem == NULL || out == NULL || count == NULL || max < 0)
    return conv_error_set(err, CONV_INVALID_ARGUMENT, "padded_gemm: bad configs() arguments");
  *count = 0;
  if (!pg_applicable(problem, env)) return CONV_OK;
  conv_padded_tiling tilings[PG_TILINGS_MAX];
  int n = conv_padded_tilings(tilings, PG_TILINGS_MAX);
  if (n > PG_TILINGS_MAX) n = PG_TILINGS_MAX;
  for (int i = 0; i < n && *count < max; i++) {
    conv_padded_launch launch;
    if (!conv_padded_plan(problem, &tilings[i], &launch, NULL, 0)) continue;
    out[(*count)++] = (conv_config){2, {tilings[i].positions, tilings[i].stages}, 0};
  }
  return CONV_OK;
}

static void pg_release(void *state) { free(state); }

static conv_status pg_prepare(const conv_problem *problem, conv_env *env,
                              const conv_config *config, conv_prepared *out, conv_error *err) {
  if (problem == NULL || env == NULL || config == NULL || out == NULL)
    return conv_error_set(err, CONV_INVALID_ARGUMENT, "padded_gemm: NULL argument");
  if (!conv_device_wgmma(&env->device))
    return conv_error_set(err, CONV_UNSUPPORTED,
                          "padded_gemm: needs compute capability 9.0 (wgmma, sm_90a)");
  conv_status st = conv_config_check(config, "padded_gemm", 2, 1, 256, err);
  if (st != CONV_OK) return st;
  const conv_padded_tiling tiling = {(int)config->values[0], (int)config->values[1]};
  conv_padded_launch *launch = malloc(sizeof *launch);
  if (launch == NULL) return conv_error_set(err, CONV_OUT_OF_MEMORY, "padded_gemm: malloc");
  char why[160];
  if (!conv_padded_plan(problem, &tiling, launch, why, sizeof why)) {
    free(launch);
    return conv_error_set(err, CONV_UNSUPPORTED, "padded_gemm: %s", why);
  }
  return conv_prepared_own_kernel(launch, conv_padded_configure(launch), "padded_gemm", out, err);
}

static conv_status pg_run(const conv_exec *ex, cudaStream_t stream, conv_error *err) {
  return conv_check_cuda(err,
                         conv_padded_forward((const conv_padded_launch *)ex->state, ex->x, ex->w,
                                             ex->bias, ex->y, stream),
                         "padded_gemm: kernel launch");
}

static void pg_describe(const conv_config *config, char *text, size_t size) {
  if (text == NULL || size == 0) return;
  if (config == NULL || config->count != 2) {
    snprintf(text, size, "invalid config");
    return;
  }
  snprintf(text, size, "tf32-wgmma positions=%lld stages=%lld", (long long)config->values[0],
           (long long)config->values[1]);
}

const conv_algorithm conv_algorithm_padded_gemm = {
    .id = CONV_ALGO_PADDED_GEMM,
    .version = 1,
    .name = "padded_gemm",
    .applicable = pg_applicable,
    .configs = pg_configs,
    .prepare = pg_prepare,
    .run = pg_run,
    .release = pg_release,
    .describe = pg_describe,
    .krsc_filters = true, /* the producer loads either order (padded_gemm.cu) */
};
