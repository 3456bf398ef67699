/* test_patch_filter.c -- the patch_filter family (backward-filter of 3x3
 * layers on 4x4 and 8x8 patches).  CPU: its scope, that every config it
 * lists plans with its kernel's pitches, and what it refuses with a
 * reason.  GPU (skipped without one): every config against the CPU
 * reference, and dy off 16-byte alignment in both kernels. */
#include <string.h>

#include "algorithms/patch_filter.h"
#include "tests/gpu_support.h"

/* A listed config of seed1_patch8's backward-filter (32 -> 64 channels,
 * 8x8) plans with its kernel's pitches: FMA x planes of 64 floats + 1 (odd)
 * and dy as it is; MMA 10x10 bordered x planes and dy rows of 68. */
static int seed1_patch8_config_plans(const conv_problem *p, const conv_config *config) {
  const conv_patch_filter_tiling t = {(int)config->values[0], (int)config->values[1],
                                      (int)config->values[2]};
  conv_patch_filter_launch l;
  char why[160] = "";
  CHECK_MSG(conv_patch_filter_plan(p, &t, &l, why, sizeof why), "%s", why);
  const bool mma = t.kind == CONV_PATCH_FILTER_MMA;
  const int x_pitch = mma ? 100 : 65, dy_pitch = mma ? 68 : 64;
  CHECK(l.threads == 256 && l.x_pitch == x_pitch && l.dy_pitch == dy_pitch);
  CHECK((int64_t)l.groups * t.images >= p->n);
  CHECK(l.stage_floats == t.images * (32 * x_pitch + 64 * dy_pitch) && l.stage_floats % 4 == 0);
  return TEST_PASS;
}

/* patch_filter takes the backward-filter pass of 3x3 "same" layers on 4x4
 * and 8x8 patches whose (K / 8) * C threads fill whole warps of a block;
 * every config it lists plans, and it refuses the rest with a reason. */
static int patch_filter_configs(void) {
  const conv_algorithm *pf = conv_registry_find(CONV_ALGO_PATCH_FILTER);
  CHECK(pf != NULL && strcmp(pf->name, "patch_filter") == 0);
  CHECK(conv_registry_find_name("patch_filter") == pf);
  conv_env env;
  memset(&env, 0, sizeof env);
  env.device.sm_count = 132;
  conv_problem p;
  conv_problem_init(&p);
  p.n = 20480; p.c = 32; p.h = p.w = 8; p.k = 64; p.r = p.s = 3; /* seed1_patch8 */
  p.pad_h = p.pad_w = 1;
  p.direction = CONV_BACKWARD_FILTER;
  CHECK(pf->applicable(&p, &env));
  conv_config configs[32];
  int n = -1;
  CHECK_STATUS(CONV_OK, pf->configs(&p, &env, configs, 32, &n, NULL));
  CHECK(n == 5); /* of 8 FMA ones (strict: no MMA): 4 or 8 8x8 images, 25 KB each, a stage past 227 KiB */
  for (int i = 0; i < n; i++) {
    CHECK(configs[i].values[0] == CONV_PATCH_FILTER_FMA);
    if (seed1_patch8_config_plans(&p, &configs[i]) != TEST_PASS) return TEST_FAIL;
  }
  /* TF32: the tensor-core configs first (bordered 10x10 x planes, dy rows
   * of 68 floats; 30 KB an image), then the FMA ones. */
  conv_problem tf32 = p;
  tf32.math = CONV_MATH_TF32;
  CHECK_STATUS(CONV_OK, pf->configs(&tf32, &env, configs, 32, &n, NULL));
  CHECK(n == 4 + 5);
  for (int i = 0; i < n; i++) {
    CHECK(configs[i].values[0] == (i < 4 ? CONV_PATCH_FILTER_MMA : CONV_PATCH_FILTER_FMA));
    if (seed1_patch8_config_plans(&tf32, &configs[i]) != TEST_PASS) return TEST_FAIL;
  }
  conv_problem other = p;
  other.h = other.w = 4; /* seed1_patch4: 6 KB an image, every config fits */
  CHECK(pf->applicable(&other, &env));
  CHECK_STATUS(CONV_OK, pf->configs(&other, &env, configs, 32, &n, NULL));
  CHECK(n == 8);
  other.math = CONV_MATH_TF32;
  CHECK_STATUS(CONV_OK, pf->configs(&other, &env, configs, 32, &n, NULL));
  CHECK(n == 7 + 8);
  other = p, other.direction = CONV_FORWARD;
  CHECK(!pf->applicable(&other, &env));
  other = p, other.direction = CONV_BACKWARD_DATA;
  CHECK(!pf->applicable(&other, &env));
  other = p, other.h = other.w = 16;
  CHECK(!pf->applicable(&other, &env));
  other = p, other.w = 4;
  CHECK(!pf->applicable(&other, &env));
  other = p, other.stride_h = other.stride_w = 2;
  CHECK(!pf->applicable(&other, &env));
  other = p, other.pad_h = other.pad_w = 0;
  CHECK(!pf->applicable(&other, &env));
  other = p, other.k = 60; /* not in eights */
  CHECK(!pf->applicable(&other, &env));
  other = p, other.c = 128; /* 1024 threads */
  CHECK(!pf->applicable(&other, &env));
  other = p, other.c = 6, other.k = 16; /* 12 threads */
  CHECK(!pf->applicable(&other, &env));
  conv_prepared prep;
  conv_error err = {CONV_OK, ""};
  const conv_config odd = {3, {0, 3, 2}, 0}, deep = {3, {0, 4, 5}, 0}, mma = {3, {1, 2, 2}, 0};
  CHECK_STATUS(CONV_UNSUPPORTED, pf->prepare(&p, &env, &odd, &prep, &err));
  CHECK(strncmp(err.message, "patch_filter:", 13) == 0 && strstr(err.message, "3 images"));
  CHECK_STATUS(CONV_UNSUPPORTED, pf->prepare(&p, &env, &deep, &prep, &err));
  CHECK(strstr(err.message, "5 stages") != NULL);
  CHECK_STATUS(CONV_UNSUPPORTED, pf->prepare(&p, &env, &mma, &prep, &err)); /* strict */
  CHECK(strstr(err.message, "TF32") != NULL);
  other = p, other.math = CONV_MATH_TF32, other.k = 48; /* in eights, not 32s: FMA only */
  CHECK_STATUS(CONV_UNSUPPORTED, pf->prepare(&other, &env, &mma, &prep, &err));
  CHECK(strstr(err.message, "multiple of 32") != NULL);
  char text[64];
  CHECK_STATUS(CONV_OK, pf->configs(&p, &env, configs, 32, &n, NULL));
  pf->describe(&configs[0], text, sizeof text);
  CHECK(strcmp(text, "fma images=4 stages=2") == 0);
  pf->describe(&mma, text, sizeof text);
  CHECK(strcmp(text, "tf32-mma images=2 stages=2") == 0);
  return TEST_PASS;
}

/* patch_filter, every config (kernel, images a stage, stages), against
 * the CPU reference: seed1's 4x4 and 8x8 patches (32 -> 64 channels),
 * batches no image group divides (the last group short) and of one image,
 * blocks of one warp (8 -> 32 and 16 -> 16 channels), both math modes, the
 * tensor-core kernel with its warps along C and along K. */
static int patch_filter_matches_reference(void) {
  SKIP_WITHOUT_GPU();
  seed_rng();
  const conv_math S = CONV_MATH_STRICT, T = CONV_MATH_TF32;
  const conv_epilogue N = CONV_EPILOGUE_NONE;
  conv_problem passes[] = {
      direct_problem(40, 32, 4, 4, 64, 3, 3, 1, 1, 1, 1, N, S),
      direct_problem(37, 32, 8, 8, 64, 3, 3, 1, 1, 1, 1, N, T),
      direct_problem(1, 32, 8, 8, 64, 3, 3, 1, 1, 1, 1, N, S),
      direct_problem(13, 8, 8, 8, 32, 3, 3, 1, 1, 1, 1, N, S),
      direct_problem(21, 16, 4, 4, 16, 3, 3, 1, 1, 1, 1, N, T),
      direct_problem(9, 16, 8, 8, 32, 3, 3, 1, 1, 1, 1, N, T), /* tensor cores: 2 warps */
      direct_problem(5, 8, 4, 4, 64, 3, 3, 1, 1, 1, 1, N, T),  /* ... along K */
  };
  enum { CASES = sizeof passes / sizeof passes[0] };
  set_direction(passes, CASES, CONV_BACKWARD_FILTER);
  return family_passes_match_reference(&conv_algorithm_patch_filter, passes, CASES, CASES * 4);
}

/* patch_filter copies dy as float4s only where dy is 16-byte aligned: a
 * dy one float off (a view into a larger tensor) gives the same result
 * through 4-byte copies, in both kernels. */
static int patch_filter_any_alignment(void) {
  SKIP_WITHOUT_GPU();
  seed_rng();
  conv_problem p = direct_problem(10, 16, 8, 8, 32, 3, 3, 1, 1, 1, 1, CONV_EPILOGUE_NONE,
                                  CONV_MATH_TF32);
  p.direction = CONV_BACKWARD_FILTER;
  int device = 0, sms = 0;
  CUDA_OK(cudaGetDevice(&device));
  CUDA_OK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  pass_case pc;
  if (pass_case_make(&pc, &p) != TEST_PASS) return TEST_FAIL;
  const size_t dy_bytes = (size_t)pc.hc.sh.y_elems * sizeof(float);
  float *shifted = NULL;
  CUDA_OK(cudaMalloc((void **)&shifted, dy_bytes + sizeof(float)));
  CUDA_OK(cudaMemcpy(shifted + 1, pc.d.y, dy_bytes, cudaMemcpyDeviceToDevice));
  const conv_patch_filter_tiling tilings[2] = {{CONV_PATCH_FILTER_FMA, 2, 2},
                                               {CONV_PATCH_FILTER_MMA, 2, 2}};
  for (int k = 0; k < 2; k++) {
    conv_patch_filter_launch launch;
    char why[160] = "";
    CHECK_MSG(conv_patch_filter_plan(&p, &tilings[k], &launch, why, sizeof why), "%s", why);
    CUDA_OK(conv_patch_filter_configure(&launch, sms));
    void *workspace = NULL;
    CUDA_OK(cudaMalloc(&workspace, launch.workspace_bytes));
    const float *dys[2] = {pc.d.y, shifted + 1};
    for (int i = 0; i < 2; i++) {
      if (pass_poison(&pc) != TEST_PASS) return TEST_FAIL;
      CUDA_OK(conv_patch_filter_run(&launch, pc.d.x, dys[i], pc.d.w, workspace, 0));
      CUDA_OK(cudaDeviceSynchronize());
      char what[80];
      snprintf(what, sizeof what, "patch_filter kind %d, dy %s", tilings[k].kind,
               i ? "one float off" : "aligned");
      if (pass_check(&pc, conv_error_bound_for(&p, CONV_ARITH_DIRECT), what) != TEST_PASS)
        return TEST_FAIL;
    }
    cudaFree(workspace);
  }
  cudaFree(shifted);
  pass_case_free(&pc);
  return TEST_PASS;
}

static const labelled_test_case tests[] = {
    {"patch_filter_configs", patch_filter_configs, "cpu"},
    {"patch_filter_matches_reference", patch_filter_matches_reference, "gpu"},
    {"patch_filter_any_alignment", patch_filter_any_alignment, "gpu"},
};
TEST_MAIN(tests)
