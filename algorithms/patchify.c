/*
 * patchify.c -- the `patchify` candidate: our direct kernel for
 * convolutions whose filter tiles the input (stride equal to the filter,
 * no padding: ConvNeXt's 4x4 stride-4 stem), where the GEMM is too
 * shallow (48 taps) for cuDNN or cuBLAS to run near its arithmetic or
 * memory floor.  Kernel in patchify.cu.
 *
 * Config values: {kt, rows} (conv_patchify_tiling).
 */
#include <stdio.h>
#include <stdlib.h>

#include "algorithms/patchify.h"
#include "runtime/internal.h"

static bool pf_applicable(const conv_problem *problem, const conv_env *env) {
  (void)env;
  return problem != NULL && conv_problem_supported(problem) && conv_patchify_takes(problem);
}

/* Configs, most promising first: 4 channels a thread (more threads a row)
 * before 8, and bands of 2, 1 and 4 rows (fewer filter stagings against
 * more blocks). */
static conv_status pf_configs(const conv_problem *problem, conv_env *env, conv_config *out,
                              int max, int *count, conv_error *err) {
  (void)env;
  if (problem == NULL || count == NULL || (max > 0 && out == NULL))
    return conv_error_set(err, CONV_INVALID_ARGUMENT, "patchify: bad configs() arguments");
  *count = 0;
  if (!pf_applicable(problem, env)) return CONV_OK;
  const int kts[] = {4, 8}, bands[] = {2, 1, 4};
  for (int i = 0; i < 2; i++)
    for (int b = 0; b < 3 && *count < max; b++) {
      const conv_patchify_tiling tiling = {kts[i], bands[b]};
      conv_patchify_launch launch;
      if (!conv_patchify_plan(problem, &tiling, &launch, NULL, 0)) continue;
      out[(*count)++] = (conv_config){2, {tiling.kt, tiling.rows}, 0};
    }
  return CONV_OK;
}

static void pf_release(void *state) { free(state); }

static conv_status pf_prepare(const conv_problem *problem, conv_env *env,
                              const conv_config *config, conv_prepared *out, conv_error *err) {
  if (problem == NULL || env == NULL || config == NULL || out == NULL)
    return conv_error_set(err, CONV_INVALID_ARGUMENT, "patchify: NULL argument");
  if (!pf_applicable(problem, env))
    return conv_error_set(err, CONV_UNSUPPORTED,
                          "patchify: only fp32 NCHW forward convolutions whose stride is the "
                          "filter, unpadded, undilated, one group, at most %d taps a pixel",
                          CONV_PATCHIFY_TAPS_MAX);
  conv_status st = conv_config_check(config, "patchify", 2, 0, 64, err);
  if (st != CONV_OK) return st;
  const conv_patchify_tiling tiling = {(int)config->values[0], (int)config->values[1]};
  conv_patchify_launch *launch = malloc(sizeof *launch);
  if (launch == NULL) return conv_error_set(err, CONV_OUT_OF_MEMORY, "patchify: malloc");
  char why[160];
  if (!conv_patchify_plan(problem, &tiling, launch, why, sizeof why)) {
    free(launch);
    return conv_error_set(err, CONV_UNSUPPORTED, "patchify: %s", why);
  }
  out->state = launch;
  out->workspace_bytes = 0;
  out->arith = CONV_ARITH_DIRECT;
  out->deterministic = true; /* each output is one thread's own sum, in tap order */
  return CONV_OK;
}

static conv_status pf_run(const conv_exec *ex, cudaStream_t stream, conv_error *err) {
  return conv_check_cuda(err,
                         conv_patchify_forward((const conv_patchify_launch *)ex->state, ex->x,
                                               ex->w, ex->bias, ex->y, stream),
                         "patchify: kernel launch");
}

static void pf_describe(const conv_config *config, char *text, size_t size) {
  if (text == NULL || size == 0) return;
  if (config == NULL || config->count != 2) {
    snprintf(text, size, "invalid config");
    return;
  }
  snprintf(text, size, "kt=%lld rows=%lld", (long long)config->values[0],
           (long long)config->values[1]);
}

const conv_algorithm conv_algorithm_patchify = {
    .id = CONV_ALGO_PATCHIFY,
    .version = 1,
    .name = "patchify",
    .applicable = pf_applicable,
    .configs = pf_configs,
    .prepare = pf_prepare,
    .run = pf_run,
    .release = pf_release,
    .describe = pf_describe,
};
