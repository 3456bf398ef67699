/* test_fft.c -- the fft family.  CPU: its scope and transform sizes,
 * forward and backward-data (its transposed view), and the configs it
 * refuses before any cuFFT call; the half types where it takes fp32.
 * GPU (skipped without one): every config against the CPU reference,
 * forward (partial tiles, whole-image transforms, groups) and
 * backward-data, within the transform bound; the same in fp16 and bf16
 * within the type's bound; fp16 overflow judged as the tuner judges it. */
#include <string.h>

#include "tests/gpu_support.h"
#include "tests/problem_fixtures.h"

/* fft's backward-data: the transposed view's sizes (dy is P x Q, the view
 * pads by r - 1 - pad), where that view is a convolution fft runs; not a
 * pass padded past the filter (the view would need negative padding),
 * strided or dilated; never backward-filter (fft_filter's). */
static int fft_backward_configs(void) {
  const conv_algorithm *fft = conv_registry_find(CONV_ALGO_FFT);
  conv_env env;
  memset(&env, 0, sizeof env);
  env.cublaslt = (cublasLtHandle_t)&env; /* applicable() only checks it is there */
  conv_problem p = few_channels_31x31(CONV_BACKWARD_DATA);
  CHECK(fft->applicable(&p, &env));
  conv_config configs[16];
  int n = -1;
  CHECK_STATUS(CONV_OK, fft->configs(&p, &env, configs, 16, &n, NULL));
  CHECK(n == 10 && configs[0].values[0] == 560 && configs[0].values[1] == 560);
  /* A valid (unpadded) 100 x 60 input with a 5x3 filter: dy is 96 x 58,
   * the view pads it by (4, 2) back to 100 x 60, whose whole extents are
   * 104 (2^3 * 13 -> 105 = 3 * 5 * 7) and 60 + 3 - 1 = 62 -> 63 = 3^2 * 7. */
  p.h = 100; p.w = 60; p.r = 5; p.s = 3; p.pad_h = p.pad_w = 0; p.c = 3; p.k = 7;
  CHECK(fft->applicable(&p, &env));
  CHECK_STATUS(CONV_OK, fft->configs(&p, &env, configs, 16, &n, NULL));
  CHECK(n >= 2 && configs[0].values[0] == 105 && configs[0].values[1] == 63);
  conv_problem q = p;
  q.pad_h = 5; /* past the filter's reach */
  CHECK(!fft->applicable(&q, &env));
  CHECK_STATUS(CONV_OK, fft->configs(&q, &env, configs, 16, &n, NULL));
  CHECK(n == 0);
  conv_prepared prep;
  const conv_config whole = {3, {105, 63, 0}, 0};
  CHECK_STATUS(CONV_UNSUPPORTED, fft->prepare(&q, &env, &whole, &prep, NULL));
  q = p, q.stride_h = 2;
  CHECK(!fft->applicable(&q, &env));
  q = p, q.dil_w = 2;
  CHECK(!fft->applicable(&q, &env));
  q = p, q.direction = CONV_BACKWARD_FILTER;
  CHECK(!fft->applicable(&q, &env));
  return TEST_PASS;
}

static int fft_configs(void) {
  const conv_algorithm *fft = conv_registry_find(CONV_ALGO_FFT);
  CHECK(fft != NULL && strcmp(fft->name, "fft") == 0);
  conv_env env;
  memset(&env, 0, sizeof env);
  env.cublaslt = (cublasLtHandle_t)&env; /* applicable() only checks it is there */
  conv_problem p = few_channels_31x31(CONV_FORWARD);
  CHECK(fft->applicable(&p, &env));
  conv_config configs[16];
  int n = -1;
  CHECK_STATUS(CONV_OK, fft->configs(&p, &env, configs, 16, &n, NULL));
  /* The whole padded image (542 rounded up to 560 = 2^4*5*7), then the
   * powers of two that keep at least 31 outputs of a tile; each with our
   * product kernel first (4 x 4 channels), then the GEMM. */
  static const int64_t expected[] = {560, 512, 256, 128, 64};
  CHECK(n == 10);
  for (int i = 0; i < n; i++)
    CHECK(configs[i].count == 3 && configs[i].values[0] == expected[i / 2] &&
          configs[i].values[1] == expected[i / 2] && configs[i].values[2] == i % 2);
  int m = -1;
  CHECK_STATUS(CONV_OK, fft->configs(&p, &env, configs, 3, &m, NULL));
  CHECK(m == 3 && configs[2].values[0] == 512);
  /* 64 x 64 channels: the GEMM first. */
  p.c = p.k = 64;
  CHECK_STATUS(CONV_OK, fft->configs(&p, &env, configs, 16, &n, NULL));
  CHECK(n == 10 && configs[0].values[2] == 1 && configs[1].values[2] == 0);
  /* A wide image with a 3x11 filter (whole extents 24 and 315 = 3^2*5*7):
   * each axis has its own sizes, and an axis with no tile of a size keeps
   * its whole extent. */
  p.h = 20; p.w = 300; p.r = 3; p.s = 11; p.pad_h = 1; p.pad_w = 5;
  CHECK_STATUS(CONV_OK, fft->configs(&p, &env, configs, 16, &n, NULL));
  CHECK(n >= 4 && configs[0].values[0] == 24 && configs[0].values[1] == 315);
  CHECK(configs[2].values[0] == 24 && configs[2].values[1] == 256);
  /* Not applicable: strides, dilations, 1x1 filters. */
  p = (conv_problem){0};
  conv_problem_init(&p);
  p.n = 1; p.c = 4; p.h = 32; p.w = 32; p.k = 4; p.r = 3; p.s = 3;
  CHECK(fft->applicable(&p, &env));
  p.stride_h = 2;
  CHECK(!fft->applicable(&p, &env));
  p.stride_h = 1; p.dil_w = 2;
  CHECK(!fft->applicable(&p, &env));
  /* Groups: our product kernel only; a GEMM config is refused before any
   * cuFFT call. */
  p.dil_w = 1; p.groups = 2;
  CHECK(fft->applicable(&p, &env));
  CHECK_STATUS(CONV_OK, fft->configs(&p, &env, configs, 16, &n, NULL));
  CHECK(n > 0);
  for (int i = 0; i < n; i++) CHECK(configs[i].values[2] == 0);
  conv_prepared prep;
  const conv_config gemm = {3, {configs[0].values[0], configs[0].values[1], 1}, 0};
  CHECK_STATUS(CONV_UNSUPPORTED, fft->prepare(&p, &env, &gemm, &prep, NULL));
  p.groups = 1; p.r = p.s = 1;
  CHECK(!fft->applicable(&p, &env));
  CHECK_STATUS(CONV_OK, fft->configs(&p, &env, configs, 16, &n, NULL));
  CHECK(n == 0);
  return fft_backward_configs();
}

/* The fft candidate on shapes that exercise its tiling: partial tiles at
 * the bottom and right, tiles smaller and larger than the image, whole-image
 * transforms of cuFFT-friendly but not power-of-two sizes, valid and
 * asymmetric padding, non-square filters, 16 channels in and out, groups
 * (depthwise 31x31, a channel multiplier, 3 in and 2 out a group), every
 * epilogue, and TF32.  Every config must match the CPU reference within
 * the transform bound (conv_error_bound). */
static int fft_matches_reference(void) {
  SKIP_WITHOUT_GPU();
  seed_rng();
  const conv_math S = CONV_MATH_STRICT, T = CONV_MATH_TF32;
  conv_problem cases[] = {
      direct_problem(2, 3, 40, 37, 5, 7, 7, 1, 3, 1, 1, CONV_EPILOGUE_BIAS_RELU, S),
      direct_problem(1, 4, 33, 64, 6, 5, 3, 1, 2, 1, 1, CONV_EPILOGUE_NONE, S),
      direct_problem(1, 2, 20, 24, 3, 11, 11, 1, 0, 1, 1, CONV_EPILOGUE_BIAS, S), /* valid */
      direct_problem(2, 16, 30, 30, 16, 3, 3, 1, 1, 1, 1, CONV_EPILOGUE_BIAS, T),
      direct_problem(1, 2, 64, 64, 2, 31, 31, 1, 15, 1, 1, CONV_EPILOGUE_NONE, S),
      direct_problem(3, 5, 45, 29, 4, 9, 5, 1, 4, 1, 1, CONV_EPILOGUE_BIAS_RELU, T),
      /* Groups: depthwise 31x31, a channel multiplier of 2, 3 in and 2 out a group. */
      direct_problem(2, 6, 40, 40, 6, 31, 31, 1, 15, 1, 6, CONV_EPILOGUE_BIAS, S),
      direct_problem(1, 4, 30, 27, 8, 5, 5, 1, 2, 1, 4, CONV_EPILOGUE_NONE, T),
      direct_problem(2, 6, 25, 33, 4, 7, 7, 1, 3, 1, 2, CONV_EPILOGUE_BIAS_RELU, S),
  };
  cases[1].pad_w = 1; /* asymmetric padding */
  cases[5].pad_w = 0;
  family_count count;
  if (run_family_on_cases(&conv_algorithm_fft, cases, sizeof cases / sizeof cases[0], NULL,
                          &count) != TEST_PASS)
    return TEST_FAIL;
  CHECK(count.unsupported == 0);
  return TEST_PASS;
}

/* fft's backward-data (the transposed view), every config, against the
 * CPU reference: unequal channel counts (the view swaps them), a
 * non-square filter padded on one axis only, an unpadded pass (the view
 * pads by r - 1), a 31x31 filter, partial tiles, groups (the view swaps
 * the channels within each group), both math modes. */
static int fft_backward_data_matches_reference(void) {
  SKIP_WITHOUT_GPU();
  seed_rng();
  const conv_math S = CONV_MATH_STRICT, T = CONV_MATH_TF32;
  const conv_epilogue N = CONV_EPILOGUE_NONE;
  conv_problem cases[] = {
      direct_problem(2, 3, 40, 44, 5, 5, 5, 1, 2, 1, 1, N, S),     /* c != k */
      direct_problem(1, 4, 37, 52, 6, 7, 3, 1, 3, 1, 1, N, T),     /* 7x3, padding (3, 0) */
      direct_problem(2, 6, 50, 31, 2, 3, 3, 1, 0, 1, 1, N, S),     /* valid */
      direct_problem(1, 2, 64, 64, 3, 31, 31, 1, 15, 1, 1, N, S),  /* fft_few_ch_31 */
      direct_problem(2, 20, 30, 30, 36, 3, 3, 1, 1, 1, 1, N, T),   /* GEMM product */
      direct_problem(2, 6, 40, 40, 6, 31, 31, 1, 15, 1, 6, N, S),  /* depthwise 31x31 */
      direct_problem(1, 4, 30, 27, 8, 5, 5, 1, 2, 1, 4, N, T),     /* multiplier 2 */
      direct_problem(2, 6, 25, 33, 4, 3, 3, 1, 1, 1, 2, N, S),     /* 3 in, 2 out a group */
  };
  cases[1].pad_w = 0;
  enum { CASES = sizeof cases / sizeof cases[0] };
  set_direction(cases, CASES, CONV_BACKWARD_DATA);
  return family_passes_match_reference(&conv_algorithm_fft, cases, CASES, 2 * CASES);
}

/* ---- half precision */

/* fft takes fp16 and bf16 where it takes fp32 (NCHW, stride 1, dilation
 * 1, a filter past 1x1, forward and backward-data), with every epilogue
 * and groups; not NHWC backward-data, strides or 1x1 filters in them
 * either (NHWC forward: half_nhwc_forward_served). */
static int half_types_served(void) {
  conv_problem takes[] = {few_channels_31x31(CONV_FORWARD), few_channels_31x31(CONV_BACKWARD_DATA),
                          direct_problem(2, 6, 40, 40, 6, 31, 31, 1, 15, 1, 6,
                                         CONV_EPILOGUE_BIAS_RELU, CONV_MATH_STRICT)};
  conv_problem refuses[] = {few_channels_31x31(CONV_FORWARD), few_channels_31x31(CONV_FORWARD),
                            few_channels_31x31(CONV_FORWARD),
                            few_channels_31x31(CONV_BACKWARD_FILTER)};
  refuses[0].layout = CONV_LAYOUT_NHWC;
  refuses[0].direction = CONV_BACKWARD_DATA;
  refuses[1].stride_h = refuses[1].stride_w = 2;
  refuses[2].r = refuses[2].s = 1, refuses[2].pad_h = refuses[2].pad_w = 0;
  return half_scope(&conv_algorithm_fft, takes, sizeof takes / sizeof takes[0], refuses,
                    sizeof refuses / sizeof refuses[0]);
}

/* Channels-last forward problems: the half types' only (the cut reads
 * NHWC, the filters are placed from K R S C, the crop writes NHWC), with
 * groups and every epilogue; not fp32's in this version. */
static int half_nhwc_forward_served(void) {
  conv_env env;
  memset(&env, 0, sizeof env);
  env.cublaslt = (cublasLtHandle_t)&env; /* applicable() only looks */
  const conv_problem cases[] = {
      channels_last(few_channels_31x31(CONV_FORWARD)),
      channels_last(direct_problem(2, 6, 40, 40, 6, 31, 31, 1, 15, 1, 6,
                                   CONV_EPILOGUE_BIAS_RELU, CONV_MATH_STRICT)),
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    conv_problem p = cases[i];
    CHECK_MSG(!conv_algorithm_fft.applicable(&p, &env), "fp32 NHWC case %zu", i);
    for (int d = 0; d < 2; d++) {
      p.dtype = d ? CONV_DTYPE_BF16 : CONV_DTYPE_F16;
      CHECK_MSG(conv_algorithm_fft.applicable(&p, &env), "half NHWC case %zu", i);
      conv_config configs[16];
      int n = -1;
      CHECK_STATUS(CONV_OK, conv_algorithm_fft.configs(&p, &env, configs, 16, &n, NULL));
      CHECK(n > 0);
    }
  }
  return TEST_PASS;
}

/* Forward shapes of fft_matches_reference's kinds in a half type: partial
 * tiles, a valid pass, 16 channels (the GEMM product), 31x31, groups,
 * every epilogue (applied in fp32 before the one rounding). */
static size_t half_forward_cases(conv_problem *out) {
  const conv_math S = CONV_MATH_STRICT;
  const conv_problem cases[] = {
      direct_problem(2, 3, 40, 37, 5, 7, 7, 1, 3, 1, 1, CONV_EPILOGUE_BIAS_RELU, S),
      direct_problem(1, 2, 20, 24, 3, 11, 11, 1, 0, 1, 1, CONV_EPILOGUE_BIAS, S),
      direct_problem(2, 16, 30, 30, 16, 3, 3, 1, 1, 1, 1, CONV_EPILOGUE_NONE, S),
      direct_problem(1, 2, 64, 64, 2, 31, 31, 1, 15, 1, 1, CONV_EPILOGUE_NONE, S),
      direct_problem(2, 6, 40, 40, 6, 31, 31, 1, 15, 1, 6, CONV_EPILOGUE_BIAS, S),
      direct_problem(2, 6, 25, 33, 4, 7, 7, 1, 3, 1, 2, CONV_EPILOGUE_BIAS_RELU, S),
  };
  memcpy(out, cases, sizeof cases);
  return sizeof cases / sizeof cases[0];
}

static int half_forward(conv_dtype dtype) {
  conv_problem cases[8];
  const size_t n = half_forward_cases(cases);
  return half_family_matches_reference(&conv_algorithm_fft, cases, n, dtype, "forward");
}
static int f16_forward(void) { return half_forward(CONV_DTYPE_F16); }
static int bf16_forward(void) { return half_forward(CONV_DTYPE_BF16); }

/* The same shapes channels-last. */
static int half_nhwc_forward(conv_dtype dtype) {
  conv_problem cases[8];
  const size_t n = half_forward_cases(cases);
  for (size_t i = 0; i < n; i++) cases[i] = channels_last(cases[i]);
  return half_family_matches_reference(&conv_algorithm_fft, cases, n, dtype, "forward NHWC");
}
static int f16_nhwc_forward(void) { return half_nhwc_forward(CONV_DTYPE_F16); }
static int bf16_nhwc_forward(void) { return half_nhwc_forward(CONV_DTYPE_BF16); }

/* Backward-data in a half type: the transposed view reads dy and w in the
 * type and writes dx in it. */
static int half_backward_data(conv_dtype dtype) {
  const conv_math S = CONV_MATH_STRICT;
  const conv_epilogue N = CONV_EPILOGUE_NONE;
  conv_problem cases[] = {
      direct_problem(2, 3, 40, 44, 5, 5, 5, 1, 2, 1, 1, N, S),     /* c != k */
      direct_problem(1, 2, 64, 64, 3, 31, 31, 1, 15, 1, 1, N, S),  /* fft_few_ch_31 */
      direct_problem(2, 20, 30, 30, 36, 3, 3, 1, 1, 1, 1, N, S),   /* GEMM product */
      direct_problem(2, 6, 25, 33, 4, 3, 3, 1, 1, 1, 2, N, S),     /* groups */
  };
  enum { CASES = sizeof cases / sizeof cases[0] };
  set_direction(cases, CASES, CONV_BACKWARD_DATA);
  return half_family_matches_reference(&conv_algorithm_fft, cases, CASES, dtype,
                                       "backward-data");
}
static int f16_backward_data(void) { return half_backward_data(CONV_DTYPE_F16); }
static int bf16_backward_data(void) { return half_backward_data(CONV_DTYPE_BF16); }

/* fp16 sums past its range: wrong (inf) without an epilogue, right where
 * the bias, added in fp32 before the rounding, brings them back. */
static int f16_overflow(void) {
  conv_problem plain = direct_problem(1, 16, 24, 24, 4, 7, 7, 1, 0, 1, 1, CONV_EPILOGUE_NONE,
                                      CONV_MATH_STRICT);
  plain.dtype = CONV_DTYPE_F16;
  conv_problem biased = plain;
  biased.epilogue = CONV_EPILOGUE_BIAS;
  const int rc = half_overflow_judged(&conv_algorithm_fft, plain);
  return rc == TEST_PASS ? half_overflow_judged(&conv_algorithm_fft, biased) : rc;
}

static const labelled_test_case tests[] = {
    {"fft_configs", fft_configs, "cpu"},
    {"half_types_served", half_types_served, "cpu"},
    {"half_nhwc_forward_served", half_nhwc_forward_served, "cpu"},
    {"fft_matches_reference", fft_matches_reference, "gpu"},
    {"fft_backward_data_matches_reference", fft_backward_data_matches_reference, "gpu"},
    {"f16_forward", f16_forward, "gpu"},
    {"bf16_forward", bf16_forward, "gpu"},
    {"f16_nhwc_forward", f16_nhwc_forward, "gpu"},
    {"bf16_nhwc_forward", bf16_nhwc_forward, "gpu"},
    {"f16_backward_data", f16_backward_data, "gpu"},
    {"bf16_backward_data", bf16_backward_data, "gpu"},
    {"f16_overflow", f16_overflow, "gpu"},
};
TEST_MAIN(tests)
