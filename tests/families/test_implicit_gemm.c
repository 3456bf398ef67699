/* test_implicit_gemm.c -- the implicit_gemm family.  CPU: its scope (TF32
 * NCHW forward problems only), that every config it lists plans, the
 * float4 copies only where rows allow them, and what it refuses.  GPU
 * (skipped without one): every compiled tiling against the CPU reference. */
#include <string.h>

#include "algorithms/implicit_gemm.h"
#include "algorithms/algorithm.h"
#include "tests/gpu_support.h"
#include "tests/problem_fixtures.h"

static conv_problem tf32_problem(int64_t n, int64_t c, int64_t hw, int64_t k, int64_t r,
                                 int64_t stride, int64_t pad) {
  conv_problem p;
  conv_problem_init(&p);
  p.n = n, p.c = c, p.h = p.w = hw, p.k = k, p.r = p.s = r;
  p.stride_h = p.stride_w = stride, p.pad_h = p.pad_w = pad;
  p.math = CONV_MATH_TF32;
  return p;
}

static int scope(void) {
  const conv_algorithm *ig = conv_registry_find(CONV_ALGO_IMPLICIT_GEMM);
  CHECK(ig != NULL && strcmp(ig->name, "implicit_gemm") == 0);
  conv_env env;
  memset(&env, 0, sizeof env);
  env.device.sm_count = 132;
  const conv_problem p = tf32_problem(16, 64, 56, 64, 3, 1, 1);
  CHECK(ig->applicable(&p, &env));
  if (refuses_strict(ig, &p, &env) != TEST_PASS) return TEST_FAIL;
  conv_problem other = p;
  other.layout = CONV_LAYOUT_NHWC;
  CHECK(!ig->applicable(&other, &env));
  other = p, other.direction = CONV_BACKWARD_DATA;
  CHECK(!ig->applicable(&other, &env));
  conv_prepared prep;
  conv_error err = {CONV_OK, ""};
  CHECK_STATUS(CONV_UNSUPPORTED, ig->prepare(&other, &env, &(conv_config){5, {64, 64, 32, 32, 3}, 0},
                                             &prep, &err));
  CHECK(strncmp(err.message, "implicit_gemm:", 14) == 0);
  other = p, other.groups = 64; /* depthwise: one output channel a group */
  CHECK(!ig->applicable(&other, &env));
  other = p, other.groups = 4; /* 16 a group: an m16 tile's rows */
  CHECK(ig->applicable(&other, &env));
  return TEST_PASS;
}

/* Every tiling plans for the resnet50 shapes and is listed once, the ones
 * whose output-channel tile fits K first; the copies are float4s exactly
 * where the rows allow. */
static int configs_plan(void) {
  const conv_algorithm *ig = conv_registry_find(CONV_ALGO_IMPLICIT_GEMM);
  conv_env env;
  memset(&env, 0, sizeof env);
  env.device.sm_count = 132;
  const int tilings = conv_igemm_tilings(NULL, 0);
  CHECK(tilings > 0 && tilings <= 16);
  const conv_problem shapes[] = {
      tf32_problem(16, 3, 224, 64, 7, 2, 3),    /* stem: 147-float rows */
      tf32_problem(16, 64, 56, 64, 3, 1, 1),    /* 3x3 */
      tf32_problem(16, 256, 56, 512, 1, 2, 0),  /* 1x1 s2 */
      tf32_problem(16, 1152, 7, 320, 1, 1, 0),  /* 1x1 on 7x7: planes not float4s */
      tf32_problem(16, 64, 56, 256, 1, 1, 0),   /* 1x1 on 56x56: float4 planes */
  };
  const bool vector_filters[] = {false, true, true, true, true};
  const bool vector_inputs[] = {false, false, false, false, true};
  for (int i = 0; i < 5; i++) {
    conv_config configs[32];
    int n = -1;
    CHECK_STATUS(CONV_OK, ig->configs(&shapes[i], &env, configs, 32, &n, NULL));
    CHECK_MSG(n == tilings, "shape %d: %d of %d tilings listed", i, n, tilings);
    for (int j = 0; j < n; j++) {
      CHECK(configs[j].count == 5);
      for (int k = 0; k < j; k++) CHECK(!conv_config_equal(&configs[j], &configs[k]));
      const conv_igemm_tiling tiling = {(int)configs[j].values[0], (int)configs[j].values[1],
                                        (int)configs[j].values[2], (int)configs[j].values[3],
                                        (int)configs[j].values[4]};
      conv_igemm_launch l;
      char why[160] = "";
      CHECK_MSG(conv_igemm_plan(&shapes[i], &tiling, &l, why, sizeof why), "%s", why);
      CHECK(l.vector_filters == vector_filters[i] && l.vector_inputs == vector_inputs[i]);
      const int64_t pixel_tiles = (l.pixels + tiling.bn - 1) / tiling.bn;
      CHECK(l.blocks == (unsigned)(l.m_tiles * pixel_tiles));
      CHECK((int64_t)l.m_tiles * tiling.bm >= shapes[i].k);
    }
  }
  /* 64 output channels: a 64-row tile wastes none, so it comes first. */
  conv_config first[32];
  int n = 0;
  CHECK_STATUS(CONV_OK, ig->configs(&shapes[1], &env, first, 32, &n, NULL));
  CHECK(first[0].values[0] <= 64);
  return TEST_PASS;
}

/* Untrusted configs (a shipped cache's rows) and sizes the kernel's 32-bit
 * indexing cannot take are refused with a reason, never planned. */
static int refusals(void) {
  const conv_algorithm *ig = conv_registry_find(CONV_ALGO_IMPLICIT_GEMM);
  conv_env env;
  memset(&env, 0, sizeof env);
  const conv_problem p = tf32_problem(2, 16, 8, 16, 3, 1, 1);
  conv_prepared prep;
  conv_error err = {CONV_OK, ""};
  const conv_config not_compiled = {5, {96, 64, 32, 32, 3}, 0};
  CHECK_STATUS(CONV_UNSUPPORTED, ig->prepare(&p, &env, &not_compiled, &prep, &err));
  CHECK(strstr(err.message, "no kernel compiled") != NULL);
  const conv_config short_config = {4, {64, 64, 32, 32}, 0};
  CHECK_STATUS(CONV_UNSUPPORTED, ig->prepare(&p, &env, &short_config, &prep, &err));
  const conv_config negative = {5, {64, 64, 32, -32, 3}, 0};
  CHECK_STATUS(CONV_UNSUPPORTED, ig->prepare(&p, &env, &negative, &prep, &err));
  conv_problem huge = tf32_problem(4096, 256, 64, 256, 3, 1, 1); /* x: 2^32 floats */
  conv_igemm_launch l;
  char why[160] = "";
  const conv_igemm_tiling tiling = {64, 64, 32, 32, 3};
  CHECK(!conv_igemm_plan(&huge, &tiling, &l, why, sizeof why));
  CHECK(strstr(why, "32-bit") != NULL);
  return TEST_PASS;
}

/* implicit_gemm (TF32 only) on every compiled tiling: resnet50's stem
 * (147-element filter rows: 4-byte filter copies), 3x3 layers at stride 1
 * and 2, 1x1 layers at stride 1 (float4 input copies) and 2, a 1x1 whose
 * planes are not float4s (7x9), two and four groups, dilation, batches
 * whose pixels no tile divides, output channels no tile divides, every
 * epilogue.  Every tiling must run every case. */
static int implicit_gemm_matches_reference(void) {
  SKIP_WITHOUT_GPU();
  seed_rng();
  const conv_math T = CONV_MATH_TF32;
  const conv_epilogue NONE = CONV_EPILOGUE_NONE, BIAS = CONV_EPILOGUE_BIAS,
                      RELU = CONV_EPILOGUE_BIAS_RELU;
  const conv_problem cases[] = {
      direct_problem(2, 3, 40, 38, 64, 7, 7, 2, 3, 1, 1, NONE, T),   /* stem */
      direct_problem(2, 64, 14, 14, 64, 3, 3, 1, 1, 1, 1, BIAS, T),  /* 3x3 */
      direct_problem(3, 32, 13, 11, 40, 3, 3, 2, 1, 1, 1, RELU, T),  /* 3x3 s2 */
      direct_problem(2, 96, 12, 12, 200, 1, 1, 1, 0, 1, 1, BIAS, T), /* 1x1, float4 */
      direct_problem(3, 40, 7, 9, 36, 1, 1, 1, 0, 1, 1, RELU, T),    /* 1x1, odd planes */
      direct_problem(2, 64, 14, 14, 128, 1, 1, 2, 0, 1, 1, NONE, T), /* 1x1 s2 */
      direct_problem(1, 48, 10, 10, 64, 3, 3, 1, 1, 1, 4, BIAS, T),  /* four groups */
      direct_problem(2, 20, 15, 17, 32, 3, 3, 1, 2, 2, 2, RELU, T),  /* two groups, dilation */
      direct_problem(16, 1152, 7, 7, 20, 1, 1, 1, 0, 1, 1, NONE, T), /* long rows, K=20 */
  };
  const size_t ncases = sizeof cases / sizeof cases[0];
  family_count count;
  if (run_family_on_cases(&conv_algorithm_implicit_gemm, cases, ncases, NULL, &count) !=
      TEST_PASS)
    return TEST_FAIL;
  const int tilings = conv_igemm_tilings(NULL, 0);
  CHECK_MSG(count.ran == tilings * (int)ncases && count.wrong_caught == 0 &&
                count.unsupported == 0,
            "implicit_gemm: %d of %d tiling-cases ran, %d wrong, %d unsupported", count.ran,
            tilings * (int)ncases, count.wrong_caught, count.unsupported);
  /* Strict fp32 is not its to take. */
  const conv_problem strict = direct_problem(1, 8, 8, 8, 8, 3, 3, 1, 1, 1, 1, NONE,
                                             CONV_MATH_STRICT);
  CHECK(!conv_algorithm_implicit_gemm.applicable(&strict, NULL));
  return TEST_PASS;
}

static const labelled_test_case tests[] = {
    {"scope", scope, "cpu"},
    {"configs_plan", configs_plan, "cpu"},
    {"refusals", refusals, "cpu"},
    {"implicit_gemm_matches_reference", implicit_gemm_matches_reference, "gpu"},
};
TEST_MAIN(tests)
