/*
 * padded_gemm.c -- the `padded_gemm` candidate: an NCHW 3x3 forward
 * convolution (stride 1, padding 1) in TF32 mode as one wgmma GEMM over
 * the images' padded grid (padded_gemm.h), on compute capability 9.0.  It
 * is there for resnet-style 3x3 layers, where cuDNN's TF32 engines on
 * NCHW tensors run far below their channels-last speed (0.052 ms against
 * 0.030 for resnet50's 56x56 layer at batch 16 on an H100, where this
 * kernel takes 0.033).
 *
 * Config values: {positions, stages} (conv_padded_tiling).
 *
 * Tests: tests/families/test_padded_gemm.c.
 */
#include <stdio.h>
#include <stdlib.h>

#include "algorithms/padded_gemm.h"
#include "algorithms/common/kernel_family.h"

/* Room for the compiled tilings (3 today). */
#define PADDED_GEMM_TILINGS_MAX 8

/* A device that runs wgmma (conv_device_wgmma); without a device (env
 * NULL) the problem alone decides. */
static bool padded_gemm_applicable(const conv_problem *problem, const conv_env *env) {
  if (problem == NULL || !conv_problem_nchw(problem) || problem->math != CONV_MATH_TF32)
    return false;
  if (env != NULL && !conv_device_wgmma(&env->device)) return false;
  conv_padded_tiling tiling;
  conv_padded_launch launch;
  return conv_padded_tilings(&tiling, 1) > 0 &&
         conv_padded_plan(problem, &tiling, &launch, NULL, 0);
}

/* The compiled tilings, in their own order (larger tiles first: they
 * stage the fewest halo positions per output). */
static int padded_gemm_list(const conv_problem *problem, const conv_env *env, conv_config *out,
                            int max) {
  (void)problem, (void)env;
  conv_padded_tiling tilings[PADDED_GEMM_TILINGS_MAX];
  int n = conv_padded_tilings(tilings, PADDED_GEMM_TILINGS_MAX);
  if (n > PADDED_GEMM_TILINGS_MAX) n = PADDED_GEMM_TILINGS_MAX;
  if (n > max) n = max;
  for (int i = 0; i < n; i++)
    out[i] = (conv_config){2, {tilings[i].positions, tilings[i].stages}, 0};
  return n;
}

CONV_KERNEL_PLAN(padded_gemm, conv_padded_tiling, 2, conv_padded_plan)

CONV_KERNEL_CONFIGURE(padded_gemm, conv_padded_configure)

CONV_KERNEL_FORWARD(padded_gemm, conv_padded_forward)

static void padded_gemm_describe_values(const int64_t *v, char *text, size_t size) {
  snprintf(text, size, "tf32-wgmma positions=%lld stages=%lld", (long long)v[0], (long long)v[1]);
}

static const conv_kernel_family padded_gemm_family = {
    .name = "padded_gemm",
    .scope =
        "fp32 NCHW 3x3 forward convolutions (stride 1, padding 1) in TF32 mode, on compute "
        "capability 9.0 (wgmma, sm_90a)",
    .values = 2, .value_min = 1, .value_max = 256, .launch_bytes = sizeof(conv_padded_launch),
    .applicable = padded_gemm_applicable, .list = padded_gemm_list, .plan = padded_gemm_plan,
    .configure = padded_gemm_configure, .launch = padded_gemm_launch,
    .describe = padded_gemm_describe_values,
};
/* K R S C filters: the producer loads either order (padded_gemm.cu) */
CONV_KERNEL_FAMILY_ALGORITHM(padded_gemm, CONV_ALGO_PADDED_GEMM, 1, true);
