/* test_stem_gemm.c -- the stem_gemm family.  CPU: its scope (TF32 NCHW
 * forward convolutions of one group with C R S <= 256 on compute
 * capability 9.0 only), that every config it lists plans with the tiles,
 * fields and padded steps its kernel assumes, and what it refuses.  GPU
 * (skipped without one, or off compute capability 9.0): every compiled
 * tiling wide enough for K against the CPU reference, and blocks that walk
 * many tiles. */
#include <string.h>

#include "algorithms/stem_gemm.h"
#include "algorithms/algorithm.h"
#include "tests/gpu_support.h"
#include "tests/problem_fixtures.h"

static conv_problem tf32_problem(int64_t n, int64_t c, int64_t h, int64_t w, int64_t k,
                                 int64_t r, int64_t stride, int64_t pad) {
  conv_problem p;
  conv_problem_init(&p);
  p.n = n, p.c = c, p.h = h, p.w = w, p.k = k, p.r = p.s = r;
  p.stride_h = p.stride_w = stride;
  p.pad_h = p.pad_w = pad;
  p.math = CONV_MATH_TF32;
  return p;
}

static int scope(void) {
  const conv_problem p = tf32_problem(16, 3, 224, 224, 64, 7, 2, 3); /* resnet50's stem */
  if (wgmma_family_scope(CONV_ALGO_STEM_GEMM, "stem_gemm", &p, &(conv_config){2, {64, 4}, 0}) !=
      TEST_PASS)
    return TEST_FAIL;
  const conv_algorithm *st = conv_registry_find(CONV_ALGO_STEM_GEMM);
  conv_env env = hopper_env();
  conv_problem other;
  static const char *const outside[] = {"NHWC", "backward data", "3 groups", "C R S 294",
                                        "K 129"};
  for (int i = 0; i < (int)(sizeof outside / sizeof outside[0]); i++) {
    other = p;
    switch (i) {
      case 0: other.layout = CONV_LAYOUT_NHWC; break;
      case 1: other.direction = CONV_BACKWARD_DATA; break;
      case 2: other.groups = 3, other.k = 63; break;
      case 3: other.c = 6; break;
      default: other.k = 129; break;
    }
    CHECK_MSG(!st->applicable(&other, &env), "%s should be outside", outside[i]);
  }
  /* Other stems and short reductions are its to take. */
  const conv_problem inside[] = {tf32_problem(16, 3, 224, 224, 32, 3, 2, 1),  /* mobilenet  */
                                 tf32_problem(16, 3, 224, 224, 96, 4, 4, 0),  /* convnext   */
                                 tf32_problem(2, 16, 12, 12, 128, 4, 1, 1)};  /* C R S 256  */
  for (int i = 0; i < 3; i++) CHECK_MSG(st->applicable(&inside[i], &env), "inside %d", i);
  return TEST_PASS;
}

/* The tilings wide enough for K are listed, once each, and plan: tiles of
 * 128 positions of an output row, a field that covers their receptive
 * field, steps that cover C R S in whole batches, two warpgroups, and
 * shared memory within 200 KiB. */
static int configs_plan(void) {
  const conv_algorithm *st = conv_registry_find(CONV_ALGO_STEM_GEMM);
  conv_env env = hopper_env();
  conv_stem_tiling tilings[8];
  const int count = conv_stem_tilings(tilings, 8);
  CHECK(count > 0 && count <= 8);
  conv_problem shapes[] = {
      tf32_problem(16, 3, 224, 224, 64, 7, 2, 3), tf32_problem(16, 3, 224, 224, 32, 3, 2, 1),
      tf32_problem(16, 3, 224, 224, 96, 4, 4, 0), tf32_problem(1, 3, 20, 300, 64, 7, 2, 3),
      tf32_problem(2, 4, 20, 20, 40, 3, 1, 2),
  };
  shapes[4].dil_h = shapes[4].dil_w = 2;
  for (int i = 0; i < (int)(sizeof shapes / sizeof shapes[0]); i++) {
    const conv_problem *p = &shapes[i];
    int wide_enough = 0;
    for (int j = 0; j < count; j++) wide_enough += tilings[j].channels >= p->k;
    conv_config configs[8];
    int n = -1;
    CHECK_STATUS(CONV_OK, st->configs(p, &env, configs, 8, &n, NULL));
    CHECK_MSG(n == wide_enough, "shape %d: %d of %d tilings listed", i, n, wide_enough);
    const int64_t out_h = (p->h + 2 * p->pad_h - p->dil_h * (p->r - 1) - 1) / p->stride_h + 1;
    const int64_t out_w = (p->w + 2 * p->pad_w - p->dil_w * (p->s - 1) - 1) / p->stride_w + 1;
    for (int j = 0; j < n; j++) {
      CHECK(configs[j].count == 2);
      for (int k = 0; k < j; k++) CHECK(!conv_config_equal(&configs[j], &configs[k]));
      const conv_stem_tiling tiling = {(int)configs[j].values[0], (int)configs[j].values[1]};
      conv_stem_launch l;
      char why[160] = "";
      CHECK_MSG(conv_stem_plan(p, &tiling, &l, why, sizeof why), "%s", why);
      CHECK(l.out_h == out_h && l.out_w == out_w);
      CHECK(l.segments * 128 >= out_w && (l.segments - 1) * 128 < out_w);
      CHECK(l.tiles == p->n * out_h * l.segments);
      CHECK(l.reduction == p->c * p->r * p->s);
      CHECK(l.steps % tiling.batch == 0 && l.steps * 8 >= l.reduction);
      CHECK((l.steps - tiling.batch) * 8 < l.reduction);
      CHECK(l.field_rows == (p->r - 1) * p->dil_h + 1);
      CHECK(l.field_width == 127 * p->stride_w + (p->s - 1) * p->dil_w + 1);
      CHECK(l.patch_floats % 4 == 0 &&
            l.patch_floats > p->c * l.field_rows * l.field_width + 127 * p->stride_w);
      CHECK(l.smem_bytes <= ((size_t)200 << 10) && l.threads == 256);
    }
  }
  return TEST_PASS;
}

/* Untrusted configs (a shipped cache's rows) and sizes the kernel's 32-bit
 * indexing cannot take are refused with a reason, never planned. */
static int refusals(void) {
  const conv_algorithm *st = conv_registry_find(CONV_ALGO_STEM_GEMM);
  conv_env env = hopper_env();
  const conv_problem p = tf32_problem(2, 3, 16, 16, 64, 7, 2, 3);
  conv_prepared prep;
  conv_error err = {CONV_OK, ""};
  CHECK_STATUS(CONV_UNSUPPORTED,
               st->prepare(&p, &env, &(conv_config){2, {64, 5}, 0}, &prep, &err));
  CHECK(strstr(err.message, "not compiled") != NULL);
  CHECK_STATUS(CONV_UNSUPPORTED, st->prepare(&p, &env, &(conv_config){1, {64}, 0}, &prep, &err));
  CHECK_STATUS(CONV_UNSUPPORTED,
               st->prepare(&p, &env, &(conv_config){2, {-64, 4}, 0}, &prep, &err));
  const conv_problem huge = tf32_problem(1024, 3, 1024, 1024, 64, 7, 2, 3); /* y: 2^34 floats */
  conv_stem_launch l;
  char why[160] = "";
  const conv_stem_tiling tiling = {64, 4};
  CHECK(!conv_stem_plan(&huge, &tiling, &l, why, sizeof why));
  CHECK(strstr(why, "32-bit") != NULL);
  return TEST_PASS;
}

/* stem_gemm (TF32, compute capability 9.0 only) on every compiled tiling
 * wide enough for K: resnet50's 7x7 stride-2 stem with tiles that end
 * mid-row, output rows of two 128-position segments, a 3x3 stride-2 stem
 * (K 32: half the channels padding), ConvNeXt's 4x4 stride-4 one (K 96:
 * the 128-channel tiling only), C R S = 256 (the longest reduction),
 * dilation, every epilogue.  Then the first case on a grid of 3 blocks
 * for every tiling. */
static int stem_gemm_matches_reference(void) {
  SKIP_WITHOUT_GPU();
  const int device = wgmma_device("stem_gemm");
  if (device != TEST_PASS) return device;
  seed_rng();
  const conv_math T = CONV_MATH_TF32;
  const conv_epilogue NONE = CONV_EPILOGUE_NONE, BIAS = CONV_EPILOGUE_BIAS,
                      RELU = CONV_EPILOGUE_BIAS_RELU;
  const conv_problem cases[] = {
      direct_problem(2, 3, 40, 38, 64, 7, 7, 2, 3, 1, 1, BIAS, T),   /* resnet50's stem */
      direct_problem(1, 3, 12, 300, 64, 7, 7, 2, 3, 1, 1, NONE, T),  /* 150 columns */
      direct_problem(3, 3, 33, 31, 32, 3, 3, 2, 1, 1, 1, RELU, T),   /* 3x3 stem */
      direct_problem(2, 3, 32, 36, 96, 4, 4, 4, 0, 1, 1, BIAS, T),   /* ConvNeXt's */
      direct_problem(2, 16, 12, 12, 48, 4, 4, 1, 1, 1, 1, NONE, T),  /* C R S 256 */
      direct_problem(2, 4, 20, 19, 40, 3, 3, 1, 2, 2, 1, RELU, T),   /* dilation 2 */
  };
  const size_t ncases = sizeof cases / sizeof cases[0];
  conv_stem_tiling tilings[8];
  const int ntilings = conv_stem_tilings(tilings, 8);
  int expected = 0;
  for (size_t i = 0; i < ncases; i++)
    for (int j = 0; j < ntilings && j < 8; j++) expected += tilings[j].channels >= cases[i].k;
  family_count count;
  if (run_family_on_cases(&conv_algorithm_stem_gemm, cases, ncases, NULL, &count) != TEST_PASS)
    return TEST_FAIL;
  CHECK_MSG(count.ran == expected && count.wrong_caught == 0 && count.unsupported == 0,
            "stem_gemm: %d of %d tiling-cases ran, %d wrong, %d unsupported", count.ran,
            expected, count.wrong_caught, count.unsupported);

  /* These cases fit one tile a block; on a grid of 3 blocks each walks
   * many, staging the next tile's field while it multiplies this one's. */
  for (int j = 0; j < ntilings && j < 8; j++) {
    host_case hc;
    dev_case d;
    if (host_case_make(&hc, &cases[0]) != TEST_PASS || dev_case_make(&d, &hc) != TEST_PASS)
      return TEST_FAIL;
    conv_stem_launch launch;
    char why[160] = "";
    CHECK_MSG(conv_stem_plan(&hc.p, &tilings[j], &launch, why, sizeof why), "%s", why);
    CUDA_OK(conv_stem_configure(&launch, 1));
    CHECK(launch.tiles > 3 * 8);
    launch.grid = 3;
    if (poison(&d, &hc, 0) != TEST_PASS) return TEST_FAIL;
    CUDA_OK(conv_stem_forward(&launch, d.x, d.w, d.bias, d.y, 0));
    CUDA_OK(cudaDeviceSynchronize());
    if (check_output(&d, &hc, 0, conv_error_bound_for(&hc.p, CONV_ARITH_DIRECT),
                     "stem_gemm, 3 blocks walking the tiles") != TEST_PASS)
      return TEST_FAIL;
    dev_case_free(&d);
    host_case_free(&hc);
  }
  return TEST_PASS;
}

static const labelled_test_case tests[] = {
    {"scope", scope, "cpu"},
    {"configs_plan", configs_plan, "cpu"},
    {"refusals", refusals, "cpu"},
    {"stem_gemm_matches_reference", stem_gemm_matches_reference, "gpu"},
};
TEST_MAIN(tests)
