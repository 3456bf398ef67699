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
#include "algorithms/common/kernel_family.h"

static bool dynamic_direct_applicable(const conv_problem *pb, const conv_env *env) {
  return pb != NULL && env != NULL && conv_problem_dynamic(pb) && conv_dyn_direct_compiled(pb->r);
}

/* Tiles, wide ones first (a warp reads whole rows), and channels a block:
 * the whole group first (a filter serves the most channels), then fewer,
 * which gives small batches more blocks; each with one and two pixels a
 * thread, in both forms.  configs() keeps those that plan (the resident
 * form forward only, at most 16 channels a block). */
static const int dynamic_direct_tiles[][2] = {{32, 8}, {32, 4}, {16, 16}, {16, 8}, {64, 4}, {8, 8}};
#define DYNAMIC_DIRECT_TILES ((int)(sizeof dynamic_direct_tiles / sizeof dynamic_direct_tiles[0]))
static const int dynamic_direct_chunks[] = {0 /* the whole group */, 16, 4, 1};
#define DYNAMIC_DIRECT_CHUNKS \
  ((int)(sizeof dynamic_direct_chunks / sizeof dynamic_direct_chunks[0]))

static int dynamic_direct_list(const conv_problem *problem, const conv_env *env, conv_config *out,
                               int max) {
  (void)env;
  const int64_t cg = problem->c / problem->groups;
  int n = 0;
  for (int c = 0; c < DYNAMIC_DIRECT_CHUNKS; c++) {
    const int64_t cb = dynamic_direct_chunks[c] == 0 ? cg : dynamic_direct_chunks[c];
    if (c > 0 && cb >= cg) continue; /* the whole group again */
    for (int t = 0; t < DYNAMIC_DIRECT_TILES; t++)
      for (int px = 1; px <= 2; px++)
        for (int form = CONV_DYN_DIRECT_STEPS; form <= CONV_DYN_DIRECT_RESIDENT && n < max; form++)
          out[n++] = (conv_config){
              5, {dynamic_direct_tiles[t][0], dynamic_direct_tiles[t][1], cb, px, form}, 0};
  }
  return n;
}

CONV_KERNEL_PLAN(dynamic_direct, conv_dyn_direct_tiling, 5, conv_dyn_direct_plan)

CONV_KERNEL_CONFIGURE(dynamic_direct, conv_dyn_direct_configure)

/* The launcher writes only the pass's output (y, dx in x, or dwt in w). */
static cudaError_t dynamic_direct_launch(const void *launch, const conv_exec *ex,
                                         cudaStream_t stream) {
  return conv_dyn_direct_run(launch, (float *)ex->x, (float *)ex->w, ex->y, stream);
}

static void dynamic_direct_describe_values(const int64_t *v, char *text, size_t size) {
  snprintf(text, size, "tile=%lldx%lld channels=%lld pixels=%lld%s", (long long)v[0],
           (long long)v[1], (long long)v[2], (long long)v[3],
           v[4] == CONV_DYN_DIRECT_RESIDENT ? " resident" : "");
}

static const conv_kernel_family dynamic_direct_family = {
    .name = "dynamic_direct",
    .scope = "dynamic problems with a 1x1, 3x3, 5x5 or 7x7 window",
    .values = 5, .value_min = 0, .value_max = 1 << 30,
    .launch_bytes = sizeof(conv_dyn_direct_launch),
    .applicable = dynamic_direct_applicable, .list = dynamic_direct_list,
    .plan = dynamic_direct_plan, .configure = dynamic_direct_configure,
    .launch = dynamic_direct_launch, .describe = dynamic_direct_describe_values,
};
/* Version 2: channels staged two at a time, double-buffered; pixel pairs; 3: the resident form
 * (a fifth config value) */
CONV_KERNEL_FAMILY_ALGORITHM(dynamic_direct, CONV_ALGO_DYNAMIC_DIRECT, 3, false);
