/* test_configs_stem.c -- CPU tests of the stem_gemm family's scope,
 * configs and launch planning (the GPU test runs its kernels): TF32 NCHW
 * forward convolutions of one group with C R S <= 256 on compute
 * capability 9.0 only, every config it lists plans with the tiles, fields
 * and padded steps its kernel assumes, and what it refuses. */
#include <string.h>

#include "algorithms/stem_gemm.h"
#include "runtime/internal.h"
#include "tests/problem_fixtures.h"
#include "tests/test.h"

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

static const test_case tests[] = {
    {"scope", scope},
    {"configs_plan", configs_plan},
    {"refusals", refusals},
};
TEST_MAIN(tests)
