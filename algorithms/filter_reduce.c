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
#include "algorithms/common/kernel_family.h"

/* Each (output, input channel) pair of a group reads its planes of dy and
 * x once: past these, a dense layer's pairs read the same data too many
 * times, and GEMM-shaped engines do better. */
#define FILTER_REDUCE_MAX_CHANNELS_IN 32
#define FILTER_REDUCE_MAX_PAIRS_PER_GROUP 512

static bool filter_reduce_applicable(const conv_problem *pb, const conv_env *env) {
  if (pb == NULL || env == NULL || !conv_problem_supported(pb) ||
      pb->direction != CONV_BACKWARD_FILTER || pb->layout != CONV_LAYOUT_NCHW)
    return false;
  const int64_t cg = pb->c / pb->groups, kg = pb->k / pb->groups;
  return cg <= FILTER_REDUCE_MAX_CHANNELS_IN && cg * kg <= FILTER_REDUCE_MAX_PAIRS_PER_GROUP &&
         conv_filter_reduce_compiled(pb->r, pb->s);
}

/* Band heights (output rows per block), the most rows first, and thread
 * counts.  configs() keeps those that plan and that give every warp a row
 * of work or more. */
static const int filter_reduce_rows[] = {256, 128, 64, 32, 16, 8, 4, 2, 1};
static const int filter_reduce_threads[] = {256, 128};
static const int filter_reduce_cols[] = {1, 2, 4};
static const int filter_reduce_vector[] = {0, 1};
static const int filter_reduce_tap_threads[] = {1024, 512, 256};
#define FILTER_REDUCE_ROWS ((int)(sizeof filter_reduce_rows / sizeof filter_reduce_rows[0]))
#define FILTER_REDUCE_THREADS \
  ((int)(sizeof filter_reduce_threads / sizeof filter_reduce_threads[0]))
#define FILTER_REDUCE_COLS ((int)(sizeof filter_reduce_cols / sizeof filter_reduce_cols[0]))
#define FILTER_REDUCE_VECTOR ((int)(sizeof filter_reduce_vector / sizeof filter_reduce_vector[0]))
#define FILTER_REDUCE_TAP_THREADS \
  ((int)(sizeof filter_reduce_tap_threads / sizeof filter_reduce_tap_threads[0]))

static conv_config filter_reduce_config(const conv_filter_reduce_tiling *t) {
  return (conv_config){5, {t->rows, t->threads, t->cols, t->vector, t->per_tap}, 0};
}

static int filter_reduce_list(const conv_problem *problem, const conv_env *env, conv_config *out,
                              int max) {
  (void)env;
  int64_t p, q;
  if (conv_problem_output_dims(problem, &p, &q) != CONV_OK) return -1;
  int n = 0;
  for (int v = 0; v < FILTER_REDUCE_VECTOR; v++)
    for (int cc = 0; cc < FILTER_REDUCE_COLS; cc++)
      for (int t = 0; t < FILTER_REDUCE_THREADS; t++)
        for (int i = 0; i < FILTER_REDUCE_ROWS; i++) {
          const conv_filter_reduce_tiling tiling = {filter_reduce_rows[i], filter_reduce_threads[t],
                                                    filter_reduce_cols[cc], filter_reduce_vector[v],
                                                    0};
          /* Whole-image bands only once (the largest such height). */
          if (i + 1 < FILTER_REDUCE_ROWS && filter_reduce_rows[i + 1] >= p) continue;
          /* At least one share of a row per thread; no thread with only
           * columns past the row's end. */
          const int64_t units = (q + tiling.cols - 1) / tiling.cols;
          if (tiling.rows * units < tiling.threads && tiling.rows < p) continue;
          if (tiling.cols > q) continue;
          conv_filter_reduce_launch launch;
          if (!conv_filter_reduce_plan(problem, &tiling, &launch, NULL, 0)) continue;
          if (n == max) goto done;
          out[n++] = filter_reduce_config(&tiling);
        }
  /* Then, for passes of few products a tap, one block per tap. */
  for (int t = 0; t < FILTER_REDUCE_TAP_THREADS; t++) {
    const conv_filter_reduce_tiling tiling = {0, filter_reduce_tap_threads[t], 1, 0, 1};
    conv_filter_reduce_launch launch;
    if (!conv_filter_reduce_plan(problem, &tiling, &launch, NULL, 0)) break;
    if (n == max) goto done;
    out[n++] = filter_reduce_config(&tiling);
  }
done:
  return n;
}

static bool filter_reduce_plan(const conv_problem *problem, const conv_env *env,
                               const conv_config *config, void *launch, char *why,
                               size_t why_size) {
  const int64_t *v = config->values;
  const conv_filter_reduce_tiling tiling = {(int)v[0], (int)v[1], (int)v[2], (int)v[3], (int)v[4]};
  if (!conv_filter_reduce_plan(problem, &tiling, launch, why, why_size)) return false;
  ((conv_filter_reduce_launch *)launch)->pdl = env != NULL && conv_device_pdl(&env->device);
  return true;
}

/* Backward-filter: x and dy (exec's y) in, dw (exec's w) out. */
static cudaError_t filter_reduce_launch(const void *launch, const conv_exec *ex,
                                        cudaStream_t stream) {
  return conv_filter_reduce_run(launch, ex->x, ex->y, (float *)ex->w, ex->workspace, stream);
}

static void filter_reduce_describe_values(const int64_t *v, char *text, size_t size) {
  if (v[4]) {
    snprintf(text, size, "per-tap threads=%lld", (long long)v[1]);
    return;
  }
  snprintf(text, size, "rows=%lld threads=%lld cols=%lld%s", (long long)v[0], (long long)v[1],
           (long long)v[2], v[3] ? " float4" : "");
}

static const conv_kernel_family filter_reduce_family = {
    .name = "filter_reduce",
    .scope =
        "fp32 NCHW backward-filter of a square 1, 2, 3, 4, 5 or 7 filter, with at most 32 "
        "input channels and 512 channel pairs per group",
    .values = 5, .value_min = 0, .value_max = 1 << 20,
    .launch_bytes = sizeof(conv_filter_reduce_launch),
    .workspace_at = CONV_KERNEL_WORKSPACE(conv_filter_reduce_launch),
    .applicable = filter_reduce_applicable, .list = filter_reduce_list, .plan = filter_reduce_plan,
    .launch = filter_reduce_launch, .describe = filter_reduce_describe_values,
};
/* Version 2: cols; 3: float4 loads; 4: per-tap blocks; 5: their own parameters */
CONV_KERNEL_FAMILY_ALGORITHM(filter_reduce, CONV_ALGO_FILTER_REDUCE, 5, false);
