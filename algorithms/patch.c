/*
 * patch.c -- the `patch` candidate: one filter bank over many small images
 * (patches up to 16 x 16), with the bank resident in shared memory and
 * every output channel of an image computed by one block.  Kernels and
 * scope in patch.h / patch.cu.
 *
 * Backward-data runs as its transposed view (conv_direct_backward_data_view:
 * dy convolved with the filter mirrored and its channels swapped), which
 * for a "same" filter at stride 1 is again a patch convolution; each
 * execute first writes that filter into the workspace.
 *
 * Config values: {kind, rows, channels, warps} (conv_patch_tiling): FMA
 * (strict fp32, also offered in TF32 mode) or TF32 tensor cores (TF32 mode
 * only): mma.sync, and wgmma on compute capability 9.0.
 *
 * Tests: tests/families/test_patch.c.
 */
#include <stdio.h>
#include <stdlib.h>

#include "algorithms/common/views.h"
#include "algorithms/common/view_family.h"
#include "algorithms/patch.h"
#include "algorithms/algorithm.h"

#define PATCH_MAX_KERNELS 16

/* The forward convolution the kernels run for `pb`: the problem itself, or
 * a backward-data pass's transposed view; false where that is not one
 * they take. */
static bool patch_view(const conv_problem *pb, conv_problem *view) {
  if (pb == NULL) return false;
  if (pb->direction == CONV_BACKWARD_DATA) {
    if (!conv_direct_backward_data_view(pb, view)) return false;
  } else {
    *view = *pb;
  }
  return conv_problem_nchw(view) && conv_patch_geometry(view);
}

static bool patch_applicable(const conv_problem *problem, const conv_env *env) {
  conv_problem view;
  return env != NULL && patch_view(problem, &view);
}

static conv_patch_tiling patch_tiling_from_config(const conv_config *config) {
  conv_patch_tiling t = {(int)config->values[0], (int)config->values[1], (int)config->values[2],
                         (int)config->values[3]};
  return t;
}

/* Warps per block to try, per kind: FMA warps along output channels,
 * tensor-core warps along pixel tiles, whole warpgroups for wgmma
 * (conv_patch_plan drops those that do not fit).  0 ends a list. */
static const int patch_warps[3][6] = {
    [CONV_PATCH_FMA] = {16, 8, 4, 2, 1, 0},
    [CONV_PATCH_MMA] = {16, 8, 4, 2, 0},
    [CONV_PATCH_WGMMA] = {16, 12, 8, 4, 0},
};

/* Appends every plannable config of kernels of `kind`. */
static int patch_add_configs(const conv_problem *problem, const conv_patch_tiling *kernels,
                             int nkernels, int kind, conv_config *out, int max, int n) {
  for (int i = 0; i < nkernels; i++) {
    if (kernels[i].kind != kind) continue;
    for (const int *warps = patch_warps[kind]; *warps != 0 && n < max; warps++) {
      conv_patch_tiling t = kernels[i];
      t.warps = *warps;
      conv_patch_launch launch;
      if (!conv_patch_plan(problem, &t, &launch, NULL, 0)) continue;
      out[n++] = (conv_config){4, {t.kind, t.rows, t.channels, t.warps}, 0};
    }
  }
  return n;
}

/* TF32 mode: tensor cores first (wgmma where the GPU has it); strict: the
 * FMA kernels only. */
static conv_status patch_configs(const conv_problem *problem, conv_env *env, conv_config *out,
                                 int max, int *count, conv_error *err) {
  if (problem == NULL || out == NULL || count == NULL || max < 0)
    return conv_error_set(err, CONV_INVALID_ARGUMENT, "patch: bad configs() arguments");
  *count = 0;
  conv_problem view;
  if (env == NULL || !patch_view(problem, &view)) return CONV_OK;
  problem = &view;
  conv_patch_tiling kernels[PATCH_MAX_KERNELS];
  int nkernels = conv_patch_kernels(problem, kernels, PATCH_MAX_KERNELS);
  if (nkernels > PATCH_MAX_KERNELS) nkernels = PATCH_MAX_KERNELS;
  int n = 0;
  if (problem->math == CONV_MATH_TF32) {
    if (conv_device_wgmma(&env->device))
      n = patch_add_configs(problem, kernels, nkernels, CONV_PATCH_WGMMA, out, max, n);
    n = patch_add_configs(problem, kernels, nkernels, CONV_PATCH_MMA, out, max, n);
  }
  n = patch_add_configs(problem, kernels, nkernels, CONV_PATCH_FMA, out, max, n);
  *count = n;
  return CONV_OK;
}

static void patch_release(void *state) { free(state); }

static conv_status patch_prepare(const conv_problem *problem, conv_env *env,
                                 const conv_config *config, conv_prepared *out, conv_error *err) {
  conv_problem view;
  conv_status st = conv_view_prepare_check(
      "patch", patch_view, problem, env, config, out, &view, err,
      "needs fp32 NCHW forward (or backward-data), stride 1, dilation 1, one group, \"same\" "
      "padding, K (backward-data: C) a multiple of 8 and a compiled patch size");
  if (st != CONV_OK) return st;
  /* Then conv_patch_plan checks every value against the problem. */
  st = conv_config_check(config, "patch", 4, 0, 64, err);
  if (st != CONV_OK) return st;
  const conv_patch_tiling tiling = patch_tiling_from_config(config);
  if (tiling.kind == CONV_PATCH_WGMMA && !conv_device_wgmma(&env->device))
    return conv_error_set(err, CONV_UNSUPPORTED,
                          "patch: the wgmma kernel runs on compute capability 9.0 only");
  conv_patch_launch *launch = malloc(sizeof *launch);
  if (launch == NULL) return conv_error_set(err, CONV_OUT_OF_MEMORY, "patch: malloc");
  char why[160];
  if (!conv_patch_plan(&view, &tiling, launch, why, sizeof why)) {
    free(launch);
    return conv_error_set(err, CONV_UNSUPPORTED, "patch: %s", why);
  }
  const conv_status made = conv_prepared_own_kernel(
      launch, conv_patch_configure(launch, env->device.sm_count), "patch", out, err);
  /* Backward-data: room for the transposed filter. */
  if (made == CONV_OK && problem->direction == CONV_BACKWARD_DATA)
    out->workspace_bytes =
        (size_t)(problem->k * problem->c * problem->r * problem->s) * sizeof(float);
  return made;
}

/* dx = the view's forward convolution of dy with the transposed filter. */
static conv_status patch_run_backward_data(const conv_exec *ex, cudaStream_t stream,
                                           conv_error *err) {
  const conv_problem *pb = ex->problem;
  const size_t need = (size_t)(pb->k * pb->c * pb->r * pb->s) * sizeof(float);
  if (ex->workspace == NULL || ex->workspace_bytes < need)
    return conv_error_set(err, CONV_INVALID_ARGUMENT, "patch: workspace of %zu bytes, %zu needed",
                          ex->workspace_bytes, need);
  float *wt = ex->workspace;
  conv_status s = conv_check_cuda(
      err, conv_patch_transpose_filter(ex->w, pb->k, pb->c, pb->r, pb->s, wt, stream),
      "patch: transposing the filter");
  if (s != CONV_OK) return s;
  return conv_check_cuda(err,
                         conv_patch_forward((const conv_patch_launch *)ex->state, ex->y, wt, NULL,
                                            (float *)ex->x, stream),
                         "patch: kernel launch");
}

static conv_status patch_run(const conv_exec *ex, cudaStream_t stream, conv_error *err) {
  if (ex->problem->direction == CONV_BACKWARD_DATA)
    return patch_run_backward_data(ex, stream, err);
  return conv_check_cuda(err,
                         conv_patch_forward((const conv_patch_launch *)ex->state, ex->x, ex->w,
                                            ex->bias, ex->y, stream),
                         "patch: kernel launch");
}

static void patch_describe(const conv_config *config, char *text, size_t size) {
  if (text == NULL || size == 0) return;
  if (config == NULL || config->count != 4) {
    snprintf(text, size, "invalid config");
    return;
  }
  const conv_patch_tiling t = patch_tiling_from_config(config);
  if (t.kind == CONV_PATCH_MMA || t.kind == CONV_PATCH_WGMMA)
    snprintf(text, size, "tf32-%s pixel_tiles=%d channel_tiles=%d warps=%d",
             t.kind == CONV_PATCH_MMA ? "mma" : "wgmma", t.rows, t.channels, t.warps);
  else
    snprintf(text, size, "fma rows=%d channels=%d warps=%d", t.rows, t.channels, t.warps);
}

const conv_algorithm conv_algorithm_patch = {
    .id = CONV_ALGO_PATCH,
    /* 2: cp.async staging and 16 channels a step in the tensor-core kernel;
     * 3: FMA staging divides by multiply and shift; 4: wgmma kernel;
     * 5: backward-data. */
    .version = 5,
    .name = "patch",
    CONV_ALGORITHM_CALLBACKS(patch),
};
