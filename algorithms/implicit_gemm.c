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
#include "algorithms/common/kernel_family.h"

/* Room for the compiled tilings (8 today). */
#define IMPLICIT_GEMM_TILINGS_MAX 16

/* At least 16 output channels a group: an m16 tile's rows.  Depthwise
 * and other narrow groups would leave most of every tile empty (timed at
 * 0.04-0.16x of the direct kernels on efficientnet_b0's depthwise
 * layers), costing tuning time for nothing. */
static bool implicit_gemm_applicable(const conv_problem *problem, const conv_env *env) {
  (void)env;
  return problem != NULL && conv_problem_nchw(problem) && problem->math == CONV_MATH_TF32 &&
         problem->k / problem->groups >= 16;
}

/* How well a tiling fits the problem, for the order configs() lists them
 * in (tuning times them all; the fast policy and budgets take the first):
 * the share of its tiles' output channels that exist, times how full the
 * last wave of blocks is when there are fewer than four waves. */
static double implicit_gemm_fit(const conv_problem *pb, const conv_igemm_launch *l, int sm_count) {
  const double k_per_group = (double)(pb->k / pb->groups);
  const double used = k_per_group / ((double)l->m_tiles * l->tiling.bm);
  const double per_sm = l->threads <= 64 ? 8.0 : l->threads <= 128 ? 4.0 : 2.0;
  const double waves = (double)l->blocks / (per_sm * (sm_count > 0 ? sm_count : 1));
  const double fill = waves >= 4.0 ? 1.0 : waves / (double)(int)(waves + 0.999999);
  return used * fill;
}

/* The compiled tilings that plan, best fit first; ties keep the tilings'
 * own order (large tiles first). */
static int implicit_gemm_list(const conv_problem *problem, const conv_env *env, conv_config *out,
                              int max) {
  conv_igemm_tiling tilings[IMPLICIT_GEMM_TILINGS_MAX];
  int tilings_count = conv_igemm_tilings(tilings, IMPLICIT_GEMM_TILINGS_MAX);
  if (tilings_count > IMPLICIT_GEMM_TILINGS_MAX) tilings_count = IMPLICIT_GEMM_TILINGS_MAX;
  double fit[IMPLICIT_GEMM_TILINGS_MAX];
  int n = 0;
  for (int i = 0; i < tilings_count && n < max; i++) {
    conv_igemm_launch launch;
    if (!conv_igemm_plan(problem, &tilings[i], &launch, NULL, 0)) continue;
    const conv_igemm_tiling *t = &tilings[i];
    out[n] = (conv_config){5, {t->bm, t->bn, t->wm, t->wn, t->stages}, 0};
    fit[n] = implicit_gemm_fit(problem, &launch, env != NULL ? env->device.sm_count : 0);
    n++;
  }
  for (int i = 1; i < n; i++)
    for (int j = i; j > 0 && fit[j] > fit[j - 1]; j--) {
      const double f = fit[j];
      fit[j] = fit[j - 1], fit[j - 1] = f;
      const conv_config c = out[j];
      out[j] = out[j - 1], out[j - 1] = c;
    }
  return n;
}

CONV_KERNEL_PLAN(implicit_gemm, conv_igemm_tiling, 5, conv_igemm_plan)

CONV_KERNEL_CONFIGURE(implicit_gemm, conv_igemm_configure)

CONV_KERNEL_FORWARD(implicit_gemm, conv_igemm_forward)

static void implicit_gemm_describe_values(const int64_t *v, char *text, size_t size) {
  snprintf(text, size, "tf32-mma tile=%lldx%lld warp=%lldx%lld stages=%lld", (long long)v[0],
           (long long)v[1], (long long)v[2], (long long)v[3], (long long)v[4]);
}

static const conv_kernel_family implicit_gemm_family = {
    .name = "implicit_gemm",
    .scope = "fp32 NCHW forward convolutions in TF32 mode, at least 16 output channels a group",
    .values = 5, .value_min = 1, .value_max = 256, .launch_bytes = sizeof(conv_igemm_launch),
    .applicable = implicit_gemm_applicable, .list = implicit_gemm_list, .plan = implicit_gemm_plan,
    .configure = implicit_gemm_configure, .launch = implicit_gemm_launch,
    .describe = implicit_gemm_describe_values,
};
CONV_KERNEL_FAMILY_ALGORITHM(implicit_gemm, CONV_ALGO_IMPLICIT_GEMM, 1, false);
