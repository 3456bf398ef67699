/*
 * dynamic_direct.c -- the `dynamic_direct` candidate: our own kernels for
 * the per-pixel dynamic convolution (CONV_OP_DYNAMIC) in all three
 * directions, each output element one thread's own sum (deterministic).
 * The kernels, and why they are cut up so, are in dynamic_direct.h/.cu.
 *
 * Config values: {tw, th, cb, px, form} (conv_dyn_direct_tiling).
 *
 * Tests: tests/families/test_dynamic_direct.c.
 */
#include <stdio.h>
#include <stdlib.h>

#include "algorithms/dynamic_direct.h"
#include "runtime/internal.h"

static bool dd_applicable(const conv_problem *pb, const conv_env *env) {
  return pb != NULL && env != NULL && conv_problem_dynamic(pb) &&
         conv_dyn_direct_compiled(pb->r);
}

/* Tiles, wide ones first (a warp reads whole rows), and channels a block:
 * the whole group first (a filter serves the most channels), then fewer,
 * which gives small batches more blocks; each with one and two pixels a
 * thread, in both forms.  configs() keeps those that plan (the resident
 * form forward only, at most 16 channels a block). */
static const int dd_tiles[][2] = {{32, 8}, {32, 4}, {16, 16}, {16, 8}, {64, 4}, {8, 8}};
#define DD_TILES ((int)(sizeof dd_tiles / sizeof dd_tiles[0]))
static const int dd_chunks[] = {0 /* the whole group */, 16, 4, 1};
#define DD_CHUNKS ((int)(sizeof dd_chunks / sizeof dd_chunks[0]))

static conv_status dd_configs(const conv_problem *problem, conv_env *env, conv_config *out,
                              int max, int *count, conv_error *err) {
  if (problem == NULL || count == NULL || max < 0 || (max > 0 && out == NULL))
    return conv_error_set(err, CONV_INVALID_ARGUMENT, "dynamic_direct: bad configs() arguments");
  *count = 0;
  if (!dd_applicable(problem, env)) return CONV_OK;
  const int64_t cg = problem->c / problem->groups;
  int n = 0;
  for (int c = 0; c < DD_CHUNKS; c++) {
    const int64_t cb = dd_chunks[c] == 0 ? cg : dd_chunks[c];
    if (c > 0 && cb >= cg) continue; /* the whole group again */
    for (int t = 0; t < DD_TILES; t++)
      for (int px = 1; px <= 2; px++)
        for (int form = CONV_DYN_DIRECT_STEPS; form <= CONV_DYN_DIRECT_RESIDENT && n < max;
             form++) {
          const conv_dyn_direct_tiling tiling = {dd_tiles[t][0], dd_tiles[t][1], (int)cb, px,
                                                 form};
          conv_dyn_direct_launch launch;
          if (conv_dyn_direct_plan(problem, &tiling, &launch, NULL, 0))
            out[n++] = (conv_config){5, {tiling.tw, tiling.th, tiling.cb, tiling.px, form}, 0};
        }
  }
  *count = n;
  return CONV_OK;
}

static void dd_release(void *state) { free(state); }

static conv_status dd_prepare(const conv_problem *problem, conv_env *env,
                              const conv_config *config, conv_prepared *out, conv_error *err) {
  if (problem == NULL || env == NULL || config == NULL || out == NULL)
    return conv_error_set(err, CONV_INVALID_ARGUMENT, "dynamic_direct: NULL argument");
  if (!dd_applicable(problem, env))
    return conv_error_set(err, CONV_UNSUPPORTED,
                          "dynamic_direct: only dynamic problems with a 1x1, 3x3, 5x5 or 7x7 "
                          "window");
  /* A cached config is untrusted: the range here, the rest in the plan. */
  conv_status st = conv_config_check(config, "dynamic_direct", 5, 0, 1 << 30, err);
  if (st != CONV_OK) return st;
  const conv_dyn_direct_tiling tiling = {(int)config->values[0], (int)config->values[1],
                                         (int)config->values[2], (int)config->values[3],
                                         (int)config->values[4]};
  conv_dyn_direct_launch *launch = malloc(sizeof *launch);
  if (launch == NULL) return conv_error_set(err, CONV_OUT_OF_MEMORY, "dynamic_direct: malloc");
  char why[160];
  if (!conv_dyn_direct_plan(problem, &tiling, launch, why, sizeof why)) {
    free(launch);
    return conv_error_set(err, CONV_UNSUPPORTED, "dynamic_direct: %s", why);
  }
  return conv_prepared_own_kernel(launch, conv_dyn_direct_configure(launch), "dynamic_direct", out,
                                  err);
}

static conv_status dd_run(const conv_exec *ex, cudaStream_t stream, conv_error *err) {
  if (ex == NULL || ex->state == NULL || ex->x == NULL || ex->w == NULL || ex->y == NULL)
    return conv_error_set(err, CONV_INVALID_ARGUMENT, "dynamic_direct: NULL argument");
  /* The launcher writes only the pass's output (y, dx in x, or dwt in w). */
  return conv_check_cuda(err,
                         conv_dyn_direct_run(ex->state, (float *)ex->x, (float *)ex->w, ex->y,
                                             stream),
                         "dynamic_direct: kernel launch");
}

static void dd_describe(const conv_config *config, char *text, size_t size) {
  if (text == NULL || size == 0) return;
  if (config == NULL || config->count != 5) {
    snprintf(text, size, "invalid config");
    return;
  }
  snprintf(text, size, "tile=%lldx%lld channels=%lld pixels=%lld%s", (long long)config->values[0],
           (long long)config->values[1], (long long)config->values[2],
           (long long)config->values[3],
           config->values[4] == CONV_DYN_DIRECT_RESIDENT ? " resident" : "");
}

const conv_algorithm conv_algorithm_dynamic_direct = {
    .id = CONV_ALGO_DYNAMIC_DIRECT,
    .version = 3, /* 2: channels staged two at a time, double-buffered; pixel pairs;
                   * 3: the resident form (a fifth config value) */
    .name = "dynamic_direct",
    .applicable = dd_applicable,
    .configs = dd_configs,
    .prepare = dd_prepare,
    .run = dd_run,
    .release = dd_release,
    .describe = dd_describe,
};
