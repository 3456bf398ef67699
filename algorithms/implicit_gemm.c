/*
 * implicit_gemm.c -- the `implicit_gemm` candidate: an NCHW forward
 * convolution in TF32 mode as one implicit GEMM on the tensor cores,
 * im2col read straight from x (implicit_gemm.h).  It is there for the
 * layers where cuDNN's TF32 engines on NCHW tensors run far from the
 * tensor cores' floor (resnet50's stem, its 3x3 layers at 56x56, its
 * strided 1x1 downsampling layers) and for 1x1 layers on small images,
 * whose per-image GEMMs are too narrow for cuBLASLt.
 *
 * Config values: {bm, bn, wm, wn, stages} (conv_igemm_tiling).
 *
 * Tests: tests/families/test_implicit_gemm.c.
 */
#include <stdio.h>
#include <stdlib.h>

#include "algorithms/implicit_gemm.h"
#include "runtime/internal.h"

/* Room for the compiled tilings (8 today). */
#define IG_TILINGS_MAX 16

/* At least 16 output channels a group: an m16 tile's rows.  Depthwise
 * and other narrow groups would leave most of every tile empty (timed at
 * 0.04-0.16x of the direct kernels on efficientnet_b0's depthwise
 * layers), costing tuning time for nothing. */
static bool ig_applicable(const conv_problem *problem, const conv_env *env) {
  (void)env;
  return problem != NULL && conv_problem_nchw(problem) && problem->math == CONV_MATH_TF32 &&
         problem->k / problem->groups >= 16;
}

/* How well a tiling fits the problem, for the order configs() lists them
 * in (tuning times them all; the fast policy and budgets take the first):
 * the share of its tiles' output channels that exist, times how full the
 * last wave of blocks is when there are fewer than four waves. */
static double ig_fit(const conv_problem *pb, const conv_igemm_launch *l, int sm_count) {
  const double k_per_group = (double)(pb->k / pb->groups);
  const double used = k_per_group / ((double)l->m_tiles * l->tiling.bm);
  const double per_sm = l->threads <= 64 ? 8.0 : l->threads <= 128 ? 4.0 : 2.0;
  const double waves = (double)l->blocks / (per_sm * (sm_count > 0 ? sm_count : 1));
  const double fill = waves >= 4.0 ? 1.0 : waves / (double)(int)(waves + 0.999999);
  return used * fill;
}

static conv_status ig_configs(const conv_problem *problem, conv_env *env, conv_config *out,
                              int max, int *count, conv_error *err) {
  if (problem == NULL || out == NULL || count == NULL || max < 0)
    return conv_error_set(err, CONV_INVALID_ARGUMENT, "implicit_gemm: bad configs() arguments");
  *count = 0;
  if (!ig_applicable(problem, env)) return CONV_OK;
  conv_igemm_tiling tilings[IG_TILINGS_MAX];
  int tilings_count = conv_igemm_tilings(tilings, IG_TILINGS_MAX);
  if (tilings_count > IG_TILINGS_MAX) tilings_count = IG_TILINGS_MAX;
  double fit[IG_TILINGS_MAX];
  conv_config listed[IG_TILINGS_MAX];
  int n = 0;
  for (int i = 0; i < tilings_count; i++) {
    conv_igemm_launch launch;
    if (!conv_igemm_plan(problem, &tilings[i], &launch, NULL, 0)) continue;
    const conv_igemm_tiling *t = &tilings[i];
    listed[n] = (conv_config){5, {t->bm, t->bn, t->wm, t->wn, t->stages}, 0};
    fit[n] = ig_fit(problem, &launch, env != NULL ? env->device.sm_count : 0);
    n++;
  }
  /* Best fit first; ties keep the tilings' own order (large tiles first). */
  for (int i = 1; i < n; i++)
    for (int j = i; j > 0 && fit[j] > fit[j - 1]; j--) {
      const double f = fit[j];
      fit[j] = fit[j - 1], fit[j - 1] = f;
      const conv_config c = listed[j];
      listed[j] = listed[j - 1], listed[j - 1] = c;
    }
  for (int i = 0; i < n && *count < max; i++) out[(*count)++] = listed[i];
  return CONV_OK;
}

static void ig_release(void *state) { free(state); }

static conv_status ig_prepare(const conv_problem *problem, conv_env *env,
                              const conv_config *config, conv_prepared *out, conv_error *err) {
  if (problem == NULL || env == NULL || config == NULL || out == NULL)
    return conv_error_set(err, CONV_INVALID_ARGUMENT, "implicit_gemm: NULL argument");
  if (!ig_applicable(problem, env))
    return conv_error_set(err, CONV_UNSUPPORTED,
                          "implicit_gemm: only fp32 NCHW forward convolutions in TF32 mode, "
                          "at least 16 output channels a group");
  conv_status st = conv_config_check(config, "implicit_gemm", 5, 1, 256, err);
  if (st != CONV_OK) return st;
  const conv_igemm_tiling tiling = {(int)config->values[0], (int)config->values[1],
                                    (int)config->values[2], (int)config->values[3],
                                    (int)config->values[4]};
  conv_igemm_launch *launch = malloc(sizeof *launch);
  if (launch == NULL) return conv_error_set(err, CONV_OUT_OF_MEMORY, "implicit_gemm: malloc");
  char why[160];
  if (!conv_igemm_plan(problem, &tiling, launch, why, sizeof why)) {
    free(launch);
    return conv_error_set(err, CONV_UNSUPPORTED, "implicit_gemm: %s", why);
  }
  return conv_prepared_own_kernel(launch, conv_igemm_configure(launch), "implicit_gemm", out, err);
}

static conv_status ig_run(const conv_exec *ex, cudaStream_t stream, conv_error *err) {
  return conv_check_cuda(err,
                         conv_igemm_forward((const conv_igemm_launch *)ex->state, ex->x, ex->w,
                                            ex->bias, ex->y, stream),
                         "implicit_gemm: kernel launch");
}

static void ig_describe(const conv_config *config, char *text, size_t size) {
  if (text == NULL || size == 0) return;
  if (config == NULL || config->count != 5) {
    snprintf(text, size, "invalid config");
    return;
  }
  snprintf(text, size, "tf32-mma tile=%lldx%lld warp=%lldx%lld stages=%lld",
           (long long)config->values[0], (long long)config->values[1],
           (long long)config->values[2], (long long)config->values[3],
           (long long)config->values[4]);
}

const conv_algorithm conv_algorithm_implicit_gemm = {
    .id = CONV_ALGO_IMPLICIT_GEMM,
    .version = 1,
    .name = "implicit_gemm",
    .applicable = ig_applicable,
    .configs = ig_configs,
    .prepare = ig_prepare,
    .run = ig_run,
    .release = ig_release,
    .describe = ig_describe,
};
