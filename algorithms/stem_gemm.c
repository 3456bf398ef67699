/*
 * stem_gemm.c -- the `stem_gemm` candidate: an NCHW forward convolution
 * with a short reduction (C R S <= 256, a network's stem) in TF32 mode as
 * wgmma GEMMs over segments of output rows, the filters resident in
 * shared memory (stem_gemm.h), on compute capability 9.0.  It is there
 * for resnet50's 7x7 stride-2 stem, whose 147-long reduction leaves
 * cuDNN's engines and the tensor-core implicit GEMM gathering far more
 * than they multiply.
 *
 * Config values: {channels, batch} (conv_stem_tiling).
 *
 * Tests: tests/families/test_stem_gemm.c.
 */
#include <stdio.h>
#include <stdlib.h>

#include "algorithms/stem_gemm.h"
#include "algorithms/common/kernel_family.h"

/* Room for the compiled tilings (3 today). */
#define STEM_GEMM_TILINGS_MAX 8

static const conv_kernel_family stem_gemm_family;

/* A device that runs wgmma (conv_device_wgmma), and a compiled tiling
 * that plans (the wider ones take more output channels); without a device
 * (env NULL) the problem alone decides. */
static bool stem_gemm_applicable(const conv_problem *problem, const conv_env *env) {
  if (problem == NULL || !conv_problem_nchw(problem) || problem->math != CONV_MATH_TF32)
    return false;
  if (env != NULL && !conv_device_wgmma(&env->device)) return false;
  return conv_kernel_plans_any(&stem_gemm_family, problem, env);
}

/* The compiled tilings, in their own order. */
static int stem_gemm_list(const conv_problem *problem, const conv_env *env, conv_config *out,
                          int max) {
  (void)problem, (void)env;
  conv_stem_tiling tilings[STEM_GEMM_TILINGS_MAX];
  int n = conv_stem_tilings(tilings, STEM_GEMM_TILINGS_MAX);
  if (n > STEM_GEMM_TILINGS_MAX) n = STEM_GEMM_TILINGS_MAX;
  if (n > max) n = max;
  for (int i = 0; i < n; i++) out[i] = (conv_config){2, {tilings[i].channels, tilings[i].batch}, 0};
  return n;
}

CONV_KERNEL_PLAN(stem_gemm, conv_stem_tiling, 2, conv_stem_plan)

static cudaError_t stem_gemm_configure(void *launch, const conv_env *env) {
  return conv_stem_configure(launch, env->device.sm_count);
}

CONV_KERNEL_FORWARD(stem_gemm, conv_stem_forward)

static void stem_gemm_describe_values(const int64_t *v, char *text, size_t size) {
  snprintf(text, size, "tf32-wgmma channels=%lld batch=%lld", (long long)v[0], (long long)v[1]);
}

static const conv_kernel_family stem_gemm_family = {
    .name = "stem_gemm",
    .scope =
        "fp32 NCHW forward convolutions with C R S <= 256 in TF32 mode, on compute "
        "capability 9.0 (wgmma, sm_90a)",
    .values = 2, .value_min = 1, .value_max = 256, .launch_bytes = sizeof(conv_stem_launch),
    .applicable = stem_gemm_applicable, .list = stem_gemm_list, .plan = stem_gemm_plan,
    .configure = stem_gemm_configure, .launch = stem_gemm_launch,
    .describe = stem_gemm_describe_values,
};
CONV_KERNEL_FAMILY_ALGORITHM(stem_gemm, CONV_ALGO_STEM_GEMM, 1, false);
