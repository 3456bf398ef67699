/* test_fft_filter.c -- the fft_filter family (backward-filter through
 * cuFFT).  CPU: its scope (stride 1, dilation 1, any groups, up to 4096
 * filter planes), its transform sizes, and the configs it refuses before
 * any cuFFT call; the half types where it takes fp32.  GPU (skipped
 * without one): every config against the CPU reference, in fp32 and in
 * fp16 and bf16. */
#include <string.h>

#include "tests/gpu_support.h"
#include "tests/problem_fixtures.h"

/* fft_filter takes NCHW backward-filter passes at stride 1, dilation 1,
 * with more than one tap, any groups (depthwise too), up to 4096 filter
 * planes (k x c/groups); it lists the same transform sizes as `fft`, and
 * refuses configs that are not two values or whose transform does not
 * hold the filter, before any cuFFT call. */
static int fft_filter_configs(void) {
  const conv_algorithm *ff = conv_registry_find(CONV_ALGO_FFT_FILTER);
  CHECK(ff != NULL && strcmp(ff->name, "fft_filter") == 0);
  CHECK(conv_registry_find_name("fft_filter") == ff);
  conv_env env;
  memset(&env, 0, sizeof env);
  conv_problem p = few_channels_31x31(CONV_BACKWARD_FILTER);
  CHECK(ff->applicable(&p, &env));
  conv_config configs[16];
  int n = -1;
  CHECK_STATUS(CONV_OK, ff->configs(&p, &env, configs, 16, &n, NULL));
  static const int64_t expected[] = {560, 512, 256, 128, 64};
  CHECK(n == 5);
  for (int i = 0; i < n; i++)
    CHECK(configs[i].count == 2 && configs[i].values[0] == expected[i] &&
          configs[i].values[1] == expected[i]);
  CHECK_STATUS(CONV_OK, ff->configs(&p, &env, configs, 2, &n, NULL));
  CHECK(n == 2);
  char text[64];
  ff->describe(&configs[1], text, sizeof text);
  CHECK(strcmp(text, "tile=512x512") == 0);
  /* Refused before planning: three values, a transform smaller than the
   * filter, one past the size cap. */
  conv_prepared prep;
  const conv_config three = {3, {560, 560, 0}, 0}, small = {2, {16, 560}, 0},
                    huge = {2, {8192, 560}, 0};
  CHECK_STATUS(CONV_UNSUPPORTED, ff->prepare(&p, &env, &three, &prep, NULL));
  CHECK_STATUS(CONV_UNSUPPORTED, ff->prepare(&p, &env, &small, &prep, NULL));
  CHECK_STATUS(CONV_UNSUPPORTED, ff->prepare(&p, &env, &huge, &prep, NULL));
  /* Groups: RepLKNet's depthwise 31x31 (128 planes); 8 channels per
   * group of 512 outputs (4096 planes). */
  conv_problem q = p;
  q.c = q.k = q.groups = 128, q.h = q.w = 56;
  CHECK(ff->applicable(&q, &env));
  q.c = 256, q.k = 512, q.groups = 32;
  CHECK(ff->applicable(&q, &env));
  q.groups = 16;
  CHECK(!ff->applicable(&q, &env));
  /* Not applicable: the other passes, strides, dilations, 1x1 filters,
   * NHWC, more than 4096 filter planes. */
  q = p;
  q.direction = CONV_FORWARD;
  CHECK(!ff->applicable(&q, &env));
  q.direction = CONV_BACKWARD_DATA;
  CHECK(!ff->applicable(&q, &env));
  CHECK_STATUS(CONV_OK, ff->configs(&q, &env, configs, 16, &n, NULL));
  CHECK(n == 0);
  q = p, q.stride_w = 2;
  CHECK(!ff->applicable(&q, &env));
  q = p, q.dil_h = 2;
  CHECK(!ff->applicable(&q, &env));
  q = p, q.r = q.s = 1, q.pad_h = q.pad_w = 0;
  CHECK(!ff->applicable(&q, &env));
  q = p, q.layout = CONV_LAYOUT_NHWC;
  CHECK(!ff->applicable(&q, &env));
  q = p, q.c = 64, q.k = 64;
  CHECK(ff->applicable(&q, &env));
  q.k = 65;
  CHECK(!ff->applicable(&q, &env));
  return TEST_PASS;
}

/* fft_filter, every config (whole-image transforms and power-of-two
 * tiles), against the CPU reference: a 31x31 filter on few channels (the
 * suite's fft_few_ch_31, smaller), channel counts that leave partial 4 x 4
 * blocks of filter planes, a non-square filter with padding on one axis
 * only, an output that leaves partial tiles, groups (depthwise 31x31 as
 * RepLKNet's, a channel multiplier, 3 channels in and 2 out a group),
 * both math modes (fp32 either way). */
static int fft_filter_matches_reference(void) {
  SKIP_WITHOUT_GPU();
  seed_rng();
  const conv_math S = CONV_MATH_STRICT, T = CONV_MATH_TF32;
  const conv_epilogue N = CONV_EPILOGUE_NONE;
  conv_problem cases[] = {
      direct_problem(2, 4, 64, 64, 4, 31, 31, 1, 15, 1, 1, N, S),  /* fft_few_ch_31 */
      direct_problem(3, 5, 70, 45, 6, 5, 5, 1, 2, 1, 1, N, S),     /* partial blocks */
      direct_problem(1, 3, 40, 52, 2, 7, 3, 1, 3, 1, 1, N, T),     /* 7x3, padding (3, 0) */
      direct_problem(2, 2, 97, 33, 3, 9, 9, 1, 0, 1, 1, N, S),     /* valid, partial tiles */
      direct_problem(2, 6, 40, 40, 6, 31, 31, 1, 15, 1, 6, N, S),  /* depthwise 31x31 */
      direct_problem(1, 4, 30, 27, 8, 5, 5, 1, 2, 1, 4, N, T),     /* multiplier 2 */
      direct_problem(2, 6, 25, 33, 4, 3, 3, 1, 1, 1, 2, N, S),     /* 3 in, 2 out a group */
  };
  cases[2].pad_w = 0;
  enum { CASES = sizeof cases / sizeof cases[0] };
  set_direction(cases, CASES, CONV_BACKWARD_FILTER);
  return family_passes_match_reference(&conv_algorithm_fft_filter, cases, CASES, 2 * CASES);
}

/* ---- half precision */

/* fft_filter takes fp16 and bf16 where it takes fp32; not NHWC, strides
 * or the other passes in them either. */
static int half_types_served(void) {
  conv_problem takes[] = {few_channels_31x31(CONV_BACKWARD_FILTER),
                          few_channels_31x31(CONV_BACKWARD_FILTER)};
  takes[1].c = takes[1].k = takes[1].groups = 128, takes[1].h = takes[1].w = 56;
  conv_problem refuses[] = {few_channels_31x31(CONV_BACKWARD_FILTER),
                            few_channels_31x31(CONV_BACKWARD_FILTER),
                            few_channels_31x31(CONV_FORWARD)};
  refuses[0].layout = CONV_LAYOUT_NHWC;
  refuses[1].stride_w = 2;
  return half_scope(&conv_algorithm_fft_filter, takes, sizeof takes / sizeof takes[0], refuses,
                    sizeof refuses / sizeof refuses[0]);
}

/* Backward-filter in a half type: x and dy read in it, every sum in fp32,
 * dw rounded once. */
static int half_backward_filter(conv_dtype dtype) {
  const conv_math S = CONV_MATH_STRICT;
  const conv_epilogue N = CONV_EPILOGUE_NONE;
  conv_problem cases[] = {
      direct_problem(2, 4, 64, 64, 4, 31, 31, 1, 15, 1, 1, N, S),  /* fft_few_ch_31 */
      direct_problem(3, 5, 70, 45, 6, 5, 5, 1, 2, 1, 1, N, S),     /* partial blocks */
      direct_problem(2, 2, 97, 33, 3, 9, 9, 1, 0, 1, 1, N, S),     /* valid, partial tiles */
      direct_problem(2, 6, 40, 40, 6, 31, 31, 1, 15, 1, 6, N, S),  /* depthwise 31x31 */
  };
  enum { CASES = sizeof cases / sizeof cases[0] };
  set_direction(cases, CASES, CONV_BACKWARD_FILTER);
  return half_family_matches_reference(&conv_algorithm_fft_filter, cases, CASES, dtype,
                                       "backward-filter");
}
static int f16_backward_filter(void) { return half_backward_filter(CONV_DTYPE_F16); }
static int bf16_backward_filter(void) { return half_backward_filter(CONV_DTYPE_BF16); }

static const labelled_test_case tests[] = {
    {"fft_filter_configs", fft_filter_configs, "cpu"},
    {"half_types_served", half_types_served, "cpu"},
    {"fft_filter_matches_reference", fft_filter_matches_reference, "gpu"},
    {"f16_backward_filter", f16_backward_filter, "gpu"},
    {"bf16_backward_filter", bf16_backward_filter, "gpu"},
};
TEST_MAIN(tests)
