/*
 * filter_reduce.c -- the `filter_reduce` candidate: our own backward-filter
 * pass for few channels per group (depthwise, 1->1, 16->1, 3->16, small
 * grouped convs), a split reduction over N x P x Q with a fixed summation
 * order.  The kernels are in filter_reduce.cu.
 *
 * Config values: {rows, threads, cols, vector, per_tap}
 * (conv_filter_reduce_tiling).  Version 2 added cols, version 3 vector,
 * version 4 per_tap; the version is in the cache key, so rows of fewer
 * values (older versions') are never read back.
 *
 * Tests: tests/families/test_filter_reduce.c.
 */
#include <stdio.h>
#include <stdlib.h>

#include "algorithms/filter_reduce.h"
#include "runtime/internal.h"

/* Each (output, input channel) pair of a group reads its planes of dy and
 * x once: past these, a dense layer's pairs read the same data too many
 * times, and GEMM-shaped engines do better. */
#define FR_MAX_CHANNELS_IN 32
#define FR_MAX_PAIRS_PER_GROUP 512

static bool fr_applicable(const conv_problem *pb, const conv_env *env) {
  if (pb == NULL || env == NULL || !conv_problem_supported(pb) ||
      pb->direction != CONV_BACKWARD_FILTER || pb->layout != CONV_LAYOUT_NCHW)
    return false;
  const int64_t cg = pb->c / pb->groups, kg = pb->k / pb->groups;
  return cg <= FR_MAX_CHANNELS_IN && cg * kg <= FR_MAX_PAIRS_PER_GROUP &&
         conv_filter_reduce_compiled(pb->r, pb->s);
}

/* Band heights (output rows per block), the most rows first, and thread
 * counts.  configs() keeps those that plan and that give every warp a row
 * of work or more. */
static const int fr_rows[] = {256, 128, 64, 32, 16, 8, 4, 2, 1};
static const int fr_threads[] = {256, 128};
static const int fr_cols[] = {1, 2, 4};
static const int fr_vector[] = {0, 1};
static const int fr_tap_threads[] = {1024, 512, 256};
#define FR_ROWS ((int)(sizeof fr_rows / sizeof fr_rows[0]))
#define FR_THREADS ((int)(sizeof fr_threads / sizeof fr_threads[0]))
#define FR_COLS ((int)(sizeof fr_cols / sizeof fr_cols[0]))
#define FR_VECTOR ((int)(sizeof fr_vector / sizeof fr_vector[0]))
#define FR_TAP_THREADS ((int)(sizeof fr_tap_threads / sizeof fr_tap_threads[0]))

static conv_config fr_config(const conv_filter_reduce_tiling *t) {
  return (conv_config){5, {t->rows, t->threads, t->cols, t->vector, t->per_tap}, 0};
}

static conv_status fr_configs(const conv_problem *problem, conv_env *env, conv_config *out,
                              int max, int *count, conv_error *err) {
  if (problem == NULL || out == NULL || count == NULL || max < 0)
    return conv_error_set(err, CONV_INVALID_ARGUMENT, "filter_reduce: bad configs() arguments");
  *count = 0;
  if (!fr_applicable(problem, env)) return CONV_OK;
  int64_t p, q;
  if (conv_problem_output_dims(problem, &p, &q) != CONV_OK)
    return conv_error_set(err, CONV_INVALID_ARGUMENT, "filter_reduce: invalid problem");
  int n = 0;
  for (int v = 0; v < FR_VECTOR; v++)
    for (int cc = 0; cc < FR_COLS; cc++)
      for (int t = 0; t < FR_THREADS; t++)
        for (int i = 0; i < FR_ROWS; i++) {
          const conv_filter_reduce_tiling tiling = {fr_rows[i], fr_threads[t], fr_cols[cc],
                                                    fr_vector[v], 0};
          /* Whole-image bands only once (the largest such height). */
          if (i + 1 < FR_ROWS && fr_rows[i + 1] >= p) continue;
          /* At least one share of a row per thread; no thread with only
           * columns past the row's end. */
          const int64_t units = (q + tiling.cols - 1) / tiling.cols;
          if (tiling.rows * units < tiling.threads && tiling.rows < p) continue;
          if (tiling.cols > q) continue;
          conv_filter_reduce_launch launch;
          if (!conv_filter_reduce_plan(problem, &tiling, &launch, NULL, 0)) continue;
          if (n == max) goto done;
          out[n++] = fr_config(&tiling);
        }
  /* Then, for passes of few products a tap, one block per tap. */
  for (int t = 0; t < FR_TAP_THREADS; t++) {
    const conv_filter_reduce_tiling tiling = {0, fr_tap_threads[t], 1, 0, 1};
    conv_filter_reduce_launch launch;
    if (!conv_filter_reduce_plan(problem, &tiling, &launch, NULL, 0)) break;
    if (n == max) goto done;
    out[n++] = fr_config(&tiling);
  }
done:
  *count = n;
  return CONV_OK;
}

static void fr_release(void *state) { free(state); }

static conv_status fr_prepare(const conv_problem *problem, conv_env *env,
                              const conv_config *config, conv_prepared *out, conv_error *err) {
  if (problem == NULL || env == NULL || config == NULL || out == NULL)
    return conv_error_set(err, CONV_INVALID_ARGUMENT, "filter_reduce: NULL argument");
  if (!fr_applicable(problem, env))
    return conv_error_set(err, CONV_UNSUPPORTED,
                          "filter_reduce: only fp32 NCHW backward-filter of a square 1, 2, 3, "
                          "4, 5 or 7 filter, with at most %d input channels and %d channel "
                          "pairs per group",
                          FR_MAX_CHANNELS_IN, FR_MAX_PAIRS_PER_GROUP);
  /* Then conv_filter_reduce_plan checks both values against the problem. */
  conv_status st = conv_config_check(config, "filter_reduce", 5, 0, 1 << 20, err);
  if (st != CONV_OK) return st;
  const conv_filter_reduce_tiling tiling = {(int)config->values[0], (int)config->values[1],
                                            (int)config->values[2], (int)config->values[3],
                                            (int)config->values[4]};
  conv_filter_reduce_launch *launch = malloc(sizeof *launch);
  if (launch == NULL) return conv_error_set(err, CONV_OUT_OF_MEMORY, "filter_reduce: malloc");
  char why[160];
  if (!conv_filter_reduce_plan(problem, &tiling, launch, why, sizeof why)) {
    free(launch);
    return conv_error_set(err, CONV_UNSUPPORTED, "filter_reduce: %s", why);
  }
  launch->pdl = conv_device_pdl(&env->device);
  out->state = launch;
  out->workspace_bytes = launch->workspace_bytes;
  out->arith = CONV_ARITH_DIRECT;
  out->deterministic = true; /* bands summed in a fixed order, no atomics */
  return CONV_OK;
}

static conv_status fr_run(const conv_exec *ex, cudaStream_t stream, conv_error *err) {
  const conv_filter_reduce_launch *launch = ex->state;
  if (ex->workspace_bytes < launch->workspace_bytes)
    return conv_error_set(err, CONV_INVALID_ARGUMENT,
                          "filter_reduce: %zu bytes of workspace, %zu needed", ex->workspace_bytes,
                          launch->workspace_bytes);
  /* Backward-filter: x and dy (exec's y) in, dw (exec's w) out. */
  return conv_check_cuda(err,
                         conv_filter_reduce_run(launch, ex->x, ex->y, (float *)ex->w,
                                                ex->workspace, stream),
                         "filter_reduce: kernel launch");
}

static void fr_describe(const conv_config *config, char *text, size_t size) {
  if (text == NULL || size == 0) return;
  if (config == NULL || config->count != 5) {
    snprintf(text, size, "invalid config");
    return;
  }
  if (config->values[4]) {
    snprintf(text, size, "per-tap threads=%lld", (long long)config->values[1]);
    return;
  }
  snprintf(text, size, "rows=%lld threads=%lld cols=%lld%s", (long long)config->values[0],
           (long long)config->values[1], (long long)config->values[2],
           config->values[3] ? " float4" : "");
}

const conv_algorithm conv_algorithm_filter_reduce = {
    .id = CONV_ALGO_FILTER_REDUCE,
    .version = 5, /* 2: cols; 3: float4 loads; 4: per-tap blocks; 5: their own parameters */
    .name = "filter_reduce",
    .applicable = fr_applicable,
    .configs = fr_configs,
    .prepare = fr_prepare,
    .run = fr_run,
    .release = fr_release,
    .describe = fr_describe,
};
