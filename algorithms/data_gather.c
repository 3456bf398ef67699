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
#include "algorithms/direct_channel.h"
#include "runtime/internal.h"

/* Each dx element sums kg x r x s products: past these, a dense layer is
 * GEMM work. */
#define DG_MAX_CHANNELS_IN 32
#define DG_MAX_CHANNELS_OUT 32

static bool dg_applicable(const conv_problem *pb, const conv_env *env) {
  if (pb == NULL || env == NULL || !conv_problem_supported(pb) ||
      pb->direction != CONV_BACKWARD_DATA || pb->layout != CONV_LAYOUT_NCHW)
    return false;
  conv_problem transposed; /* direct_channel runs these, faster */
  if (conv_direct_backward_data_view(pb, &transposed)) return false;
  return pb->c / pb->groups <= DG_MAX_CHANNELS_IN && pb->k / pb->groups <= DG_MAX_CHANNELS_OUT &&
         conv_data_gather_compiled(pb->r, pb->s);
}

/* The quad kernel first (it plans at stride 2 only), then per element. */
static const conv_data_gather_tiling dg_tilings[] = {
    {CONV_GATHER_QUAD, 256},    {CONV_GATHER_QUAD, 128},    {CONV_GATHER_QUAD, 512},
    {CONV_GATHER_ELEMENT, 256}, {CONV_GATHER_ELEMENT, 128}, {CONV_GATHER_ELEMENT, 512},
};
#define DG_TILINGS ((int)(sizeof dg_tilings / sizeof dg_tilings[0]))

static conv_status dg_configs(const conv_problem *problem, conv_env *env, conv_config *out,
                              int max, int *count, conv_error *err) {
  if (problem == NULL || out == NULL || count == NULL || max < 0)
    return conv_error_set(err, CONV_INVALID_ARGUMENT, "data_gather: bad configs() arguments");
  *count = 0;
  if (!dg_applicable(problem, env)) return CONV_OK;
  int n = 0;
  for (int i = 0; i < DG_TILINGS && n < max; i++) {
    conv_data_gather_launch launch;
    if (conv_data_gather_plan(problem, &dg_tilings[i], &launch, NULL, 0))
      out[n++] = (conv_config){2, {dg_tilings[i].kernel, dg_tilings[i].threads}, 0};
  }
  *count = n;
  return CONV_OK;
}

static void dg_release(void *state) { free(state); }

static conv_status dg_prepare(const conv_problem *problem, conv_env *env,
                              const conv_config *config, conv_prepared *out, conv_error *err) {
  if (problem == NULL || env == NULL || config == NULL || out == NULL)
    return conv_error_set(err, CONV_INVALID_ARGUMENT, "data_gather: NULL argument");
  if (!dg_applicable(problem, env))
    return conv_error_set(err, CONV_UNSUPPORTED,
                          "data_gather: only fp32 NCHW backward-data that direct_channel does not "
                          "run (a stride above 1, or padding past the filter), of a square 1, 2, "
                          "3, 4, 5 or 7 filter, with at most %d input and %d output channels per "
                          "group",
                          DG_MAX_CHANNELS_IN, DG_MAX_CHANNELS_OUT);
  /* Then conv_data_gather_plan checks the value against the problem. */
  conv_status st = conv_config_check(config, "data_gather", 2, 0, 1024, err);
  if (st != CONV_OK) return st;
  const conv_data_gather_tiling tiling = {(int)config->values[0], (int)config->values[1]};
  conv_data_gather_launch *launch = malloc(sizeof *launch);
  if (launch == NULL) return conv_error_set(err, CONV_OUT_OF_MEMORY, "data_gather: malloc");
  char why[160];
  if (!conv_data_gather_plan(problem, &tiling, launch, why, sizeof why)) {
    free(launch);
    return conv_error_set(err, CONV_UNSUPPORTED, "data_gather: %s", why);
  }
  /* Its kernel has no attribute to set: nothing to configure. */
  return conv_prepared_own_kernel(launch, cudaSuccess, "data_gather", out, err);
}

static conv_status dg_run(const conv_exec *ex, cudaStream_t stream, conv_error *err) {
  /* Backward-data: dy (exec's y) and w in, dx (exec's x) out. */
  return conv_check_cuda(err,
                         conv_data_gather_run(ex->state, ex->y, ex->w, (float *)ex->x, stream),
                         "data_gather: kernel launch");
}

static void dg_describe(const conv_config *config, char *text, size_t size) {
  if (text == NULL || size == 0) return;
  if (config == NULL || config->count != 2) {
    snprintf(text, size, "invalid config");
    return;
  }
  snprintf(text, size, "%s threads=%lld", config->values[0] == CONV_GATHER_QUAD ? "quad" : "element",
           (long long)config->values[1]);
}

const conv_algorithm conv_algorithm_data_gather = {
    .id = CONV_ALGO_DATA_GATHER,
    /* 2: the quad kernel for stride 2. */
    .version = 2,
    .name = "data_gather",
    .applicable = dg_applicable,
    .configs = dg_configs,
    .prepare = dg_prepare,
    .run = dg_run,
    .release = dg_release,
    .describe = dg_describe,
};
