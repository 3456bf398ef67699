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
#include "runtime/internal.h"

static const int split_k_tiles[] = {32, 64, 16};
static const int split_pixels[] = {2, 1, 4};
static const int split_counts[] = {1, 2, 4, 8, 16, 32, 64};
#define COUNT_OF(a) (sizeof(a) / sizeof((a)[0]))

static bool split_applicable(const conv_problem *problem, const conv_env *env) {
  return problem != NULL && env != NULL && conv_problem_nchw(problem) &&
         conv_split_applicable(problem);
}

static conv_status split_configs(const conv_problem *problem, conv_env *env, conv_config *out,
                                 int max, int *count, conv_error *err) {
  if (problem == NULL || out == NULL || count == NULL || max < 0)
    return conv_error_set(err, CONV_INVALID_ARGUMENT, "channel_split: bad configs() arguments");
  *count = 0;
  if (!split_applicable(problem, env)) return CONV_OK;
  int n = 0;
  for (size_t i = 0; i < COUNT_OF(split_k_tiles); i++) {
    for (size_t j = 0; j < COUNT_OF(split_pixels); j++) {
      for (size_t m = 0; m < COUNT_OF(split_counts) && n < max; m++) {
        const conv_split_tiling t = {split_k_tiles[i], split_pixels[j], split_counts[m]};
        conv_split_launch launch;
        if (conv_split_plan(problem, &t, &launch, NULL, 0))
          out[n++] = (conv_config){3, {t.k_tile, t.pixels, t.splits}, 0};
      }
    }
  }
  *count = n;
  return CONV_OK;
}

static void split_release(void *state) { free(state); }

static conv_status split_prepare(const conv_problem *problem, conv_env *env,
                                 const conv_config *config, conv_prepared *out, conv_error *err) {
  if (problem == NULL || env == NULL || config == NULL || out == NULL)
    return conv_error_set(err, CONV_INVALID_ARGUMENT, "channel_split: NULL argument");
  const conv_status st = conv_config_check(config, "channel_split", 3, 1, 64, err);
  if (st != CONV_OK) return st;
  if (!split_applicable(problem, env))
    return conv_error_set(err, CONV_UNSUPPORTED,
                          "channel_split: needs fp32 NCHW forward, one group, K >= 8 and at "
                          "most 8192 output pixels");
  const conv_split_tiling tiling = {(int)config->values[0], (int)config->values[1],
                                    (int)config->values[2]};
  conv_split_launch *launch = malloc(sizeof *launch);
  if (launch == NULL) return conv_error_set(err, CONV_OUT_OF_MEMORY, "channel_split: malloc");
  char why[160];
  if (!conv_split_plan(problem, &tiling, launch, why, sizeof why)) {
    free(launch);
    return conv_error_set(err, CONV_UNSUPPORTED, "channel_split: %s", why);
  }
  out->state = launch;
  out->workspace_bytes = launch->workspace_bytes;
  out->arith = CONV_ARITH_DIRECT;
  out->deterministic = true; /* the splits are added in a fixed order, no atomics */
  return CONV_OK;
}

static conv_status split_run(const conv_exec *ex, cudaStream_t stream, conv_error *err) {
  const conv_split_launch *launch = ex->state;
  if (ex->workspace_bytes < launch->workspace_bytes)
    return conv_error_set(err, CONV_INTERNAL, "channel_split: workspace of %zu bytes, needs %zu",
                          ex->workspace_bytes, launch->workspace_bytes);
  return conv_check_cuda(err,
                         conv_split_forward(launch, ex->x, ex->w, ex->bias, ex->y, ex->workspace,
                                            stream),
                         "channel_split: kernel launch");
}

static void split_describe(const conv_config *config, char *text, size_t size) {
  if (text == NULL || size == 0) return;
  if (config == NULL || config->count != 3) {
    snprintf(text, size, "invalid config");
    return;
  }
  snprintf(text, size, "k_tile=%lld pixels=%lld splits=%lld", (long long)config->values[0],
           (long long)config->values[1], (long long)config->values[2]);
}

const conv_algorithm conv_algorithm_channel_split = {
    .id = CONV_ALGO_CHANNEL_SPLIT,
    .version = 2,
    .name = "channel_split",
    .applicable = split_applicable,
    .configs = split_configs,
    .prepare = split_prepare,
    .run = split_run,
    .release = split_release,
    .describe = split_describe,
};
