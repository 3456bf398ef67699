/*
 * depthwise_nhwc.c -- the `depthwise_nhwc` candidate: our direct depthwise
 * convolution on channels-last tensors (ConvNeXt's 7x7 blocks, MobileNet's
 * 3x3 layers in a channels-last model), where cuDNN's NHWC fp32 engines
 * run far from the memory-bandwidth floor.  Kernels in depthwise_nhwc.cu
 * and depthwise_nhwc_tile.cu.
 *
 * Config values: {vec, px, tc, tq, rows, form} (conv_dwnhwc_tiling).
 * The tile form: still version 4 (the other forms' configs, and so every
 * shipped tuning, stay as they were; a re-tune adds its configs).
 * Version 2: the rolling form, rows as a config value, px 8, unrolled
 * filter rows, and filters staged with coalesced loads, eight in flight.
 * Version 3: filters staged by cp.async.  Version 4: the row-pairs form.
 * fp16 and bf16 (still version 4, as cudnn's and fft's: fp32 problems get
 * the configs and kernels they got, so shipped fp32 tunings stay): the
 * kernels of every form instantiated for the type, fp32 registers,
 * filters and sums, one rounding per output (the rolling form's ring holds
 * the type).
 *
 * Tests: tests/families/test_depthwise_nhwc.c.
 */
#include <stdio.h>
#include <stdlib.h>

#include "algorithms/depthwise_nhwc.h"
#include "algorithms/common/kernel_family.h"

static bool depthwise_nhwc_applicable(const conv_problem *problem, const conv_env *env) {
  (void)env;
  return problem != NULL && conv_problem_supported_any_dtype(problem) &&
         problem->direction == CONV_FORWARD &&
         problem->layout == CONV_LAYOUT_NHWC && problem->groups == problem->c;
}

/* Appends `tiling` as a config where it plans for `problem` and is not
 * listed yet; false once the list is full. */
static bool depthwise_nhwc_append(const conv_problem *problem, const conv_dwnhwc_tiling *tiling,
                                  conv_config *out, int max, int *n) {
  conv_dwnhwc_launch launch;
  if (!conv_dwnhwc_plan(problem, tiling, &launch, NULL, 0)) return true;
  const conv_config cfg = {
      6, {tiling->vec, tiling->px, tiling->tc, tiling->tq, tiling->rows, tiling->form}, 0};
  for (int j = 0; j < *n; j++)
    if (conv_config_equal(&out[j], &cfg)) return true;
  if (*n == max) return false;
  out[(*n)++] = cfg;
  return true;
}

/* Appends the tilings of one form: for each pixel count, a warp's worth of
 * channel groups (or all of them) and then 8, 256 and 128 threads a block,
 * and each band of rows; those that do not plan, or repeat, are left out. */
static void depthwise_nhwc_add_form(const conv_problem *problem, const conv_shape *shape, int form,
                                    int vec, const int *pxs, int n_pxs, const int *band_rows,
                                    int n_bands, conv_config *out, int max, int *n) {
  const int thread_counts[] = {256, 128};
  const int64_t groups = (problem->k + vec - 1) / vec;
  const int tcs[] = {groups < 32 ? (int)groups : 32, 8};
  for (int i = 0; i < n_pxs; i++) {
    const int64_t columns = (shape->q + pxs[i] - 1) / pxs[i];
    for (int c = 0; c < 2; c++) {
      if (c == 1 && tcs[1] >= tcs[0]) continue;
      for (int t = 0; t < 2; t++) {
        int64_t tq = thread_counts[t] / tcs[c];
        if (tq > columns) tq = columns;
        for (int b = 0; b < n_bands; b++) {
          if (band_rows[b] > 1 && band_rows[b] >= shape->p * 2) continue;
          const conv_dwnhwc_tiling tiling = {vec,          pxs[i], tcs[c], tq < 1 ? 1 : (int)tq,
                                             band_rows[b], form};
          if (!depthwise_nhwc_append(problem, &tiling, out, max, n)) return;
        }
      }
    }
  }
}

/* Appends the tile form's tilings: 2 x 7, 1 x 7, 2 x 4 and 1 x 4 outputs
 * a thread, 16 and 32 channel pairs a block, 16, 8, 7 and 4 thread
 * positions; those that do not plan are left out (a 7-wide image takes
 * no more than one position across, a half type's 32-pair block fits
 * where fp32's may not). */
static void depthwise_nhwc_add_tiles(const conv_problem *problem, conv_config *out, int max,
                                     int *n) {
  const int outputs[][2] = {{2, 7}, {1, 7}, {2, 4}, {1, 4}};
  const int pairs[] = {16, 32}, positions[] = {16, 8, 7, 4};
  for (int o = 0; o < 4; o++)
    for (int c = 0; c < 2; c++)
      for (int t = 0; t < 4; t++) {
        const conv_dwnhwc_tiling tiling = {2, outputs[o][1], pairs[c], positions[t],
                                           outputs[o][0], CONV_DWNHWC_TILE};
        if (!depthwise_nhwc_append(problem, &tiling, out, max, n)) return;
      }
}

/* Configs a form lists at most (rolling 36, pairs 24, thread loads 48,
 * tile 32). */
#define DEPTHWISE_NHWC_FORM_CONFIGS_MAX 64

/* Configs, most promising first within each form, the forms interleaved
 * (tile, rolling, row pairs, thread loads, tile, ...), so that the fast
 * policy's and a budget's first few guesses try each form: the tile form
 * wherever it takes the problem (1.4-1.8x the others on ConvNeXt's 7x7
 * layers in bf16), and where it does not, which wins depends on the image
 * (rolling on large ones, row pairs on ConvNeXt's 28x28 to 7x7 layers,
 * one-row window bands at batch 1).  Rolling where it
 * applies, taller bands first (they stage fewer extra rows); float4
 * channels, single channels only where float4 cannot run; bands of 4, 2
 * and 1 rows for thread loads (small images want more, smaller blocks;
 * large ones fewer filter stagings), of 4 and 2 for pairs. */
static int depthwise_nhwc_list(const conv_problem *problem, const conv_env *env, conv_config *out,
                               int max) {
  (void)env;
  conv_shape shape;
  if (conv_problem_shape(problem, &shape) != CONV_OK) return -1;
  const bool float4_channels = problem->k == problem->c && problem->c % 4 == 0;
  const int vec = float4_channels ? 4 : 1;
  const int rolling_pxs[] = {4, 8, 2}, rolling_bands[] = {16, 8, 4};
  const int pair_pxs[] = {4, 2, 1}, pair_bands[] = {4, 2};
  const int pxs[] = {4, 8, 2, 1}, bands[] = {4, 2, 1};
  /* On the heap: four forms' lists are 70 KB, too much for the stack of
   * a caller's thread. */
  conv_config(*forms)[DEPTHWISE_NHWC_FORM_CONFIGS_MAX] = calloc(4, sizeof *forms);
  if (forms == NULL) return 0;
  int listed[4] = {0, 0, 0, 0};
  depthwise_nhwc_add_tiles(problem, forms[0], DEPTHWISE_NHWC_FORM_CONFIGS_MAX, &listed[0]);
  if (float4_channels)
    depthwise_nhwc_add_form(problem, &shape, CONV_DWNHWC_ROLLING, vec, rolling_pxs, 3,
                            rolling_bands, 3, forms[1], DEPTHWISE_NHWC_FORM_CONFIGS_MAX,
                            &listed[1]);
  depthwise_nhwc_add_form(problem, &shape, CONV_DWNHWC_ROW_PAIRS, vec, pair_pxs, 3, pair_bands, 2,
                          forms[2], DEPTHWISE_NHWC_FORM_CONFIGS_MAX, &listed[2]);
  depthwise_nhwc_add_form(problem, &shape, CONV_DWNHWC_THREAD_LOADS, vec, pxs, 4, bands, 3,
                          forms[3], DEPTHWISE_NHWC_FORM_CONFIGS_MAX, &listed[3]);
  int n = 0;
  for (int i = 0; i < DEPTHWISE_NHWC_FORM_CONFIGS_MAX && n < max; i++)
    for (int f = 0; f < 4 && n < max; f++)
      if (i < listed[f]) out[n++] = forms[f][i];
  free(forms);
  return n;
}

CONV_KERNEL_PLAN(depthwise_nhwc, conv_dwnhwc_tiling, 6, conv_dwnhwc_plan)

CONV_KERNEL_CONFIGURE(depthwise_nhwc, conv_dwnhwc_configure)

CONV_KERNEL_FORWARD(depthwise_nhwc, conv_dwnhwc_forward)

static void depthwise_nhwc_describe_values(const int64_t *v, char *text, size_t size) {
  snprintf(text, size, "%svec=%lld px=%lld threads=%lldx%lld rows=%lld",
           v[5] == CONV_DWNHWC_ROLLING     ? "rolling "
           : v[5] == CONV_DWNHWC_ROW_PAIRS ? "pairs "
           : v[5] == CONV_DWNHWC_TILE      ? "tile "
                                           : "",
           (long long)v[0], (long long)v[1], (long long)v[2], (long long)v[3], (long long)v[4]);
}

static const conv_kernel_family depthwise_nhwc_family = {
    .name = "depthwise_nhwc",
    .scope = "NHWC depthwise forward convolutions",
    .values = 6, .value_min = 0, .value_max = 1024, .launch_bytes = sizeof(conv_dwnhwc_launch),
    .applicable = depthwise_nhwc_applicable, .list = depthwise_nhwc_list,
    .plan = depthwise_nhwc_plan, .configure = depthwise_nhwc_configure,
    .launch = depthwise_nhwc_launch, .describe = depthwise_nhwc_describe_values,
};
/* Version 2: rolling form, filters staged eight loads at a time; 3: filters staged by
 * cp.async, all in flight at once; 4: the row-pairs form */
CONV_KERNEL_FAMILY_ALGORITHM(depthwise_nhwc, CONV_ALGO_DEPTHWISE_NHWC, 4, false);
