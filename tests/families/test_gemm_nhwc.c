/* test_gemm_nhwc.c -- the gemm_nhwc family (channels-last dense
 * convolutions), on a GPU (skipped without one): every config against the
 * CPU reference, beside cuDNN's NHWC engines on the same problems.  Which
 * problems it takes: test_depthwise_nhwc.c's nhwc_problems, with the
 * other channels-last families.
 * Half precision: on the CPU, the types it takes and the problems it
 * refuses in them; on the GPU, every config in fp16 and bf16 against the
 * CPU reference (every epilogue, the 16-, 4- and 2-byte gathers of
 * im2col_nhwc), and fp16 overflow: outputs past 65504 rejected by the
 * tuner's check, sums past it brought back by the bias right. */
#include "tests/gpu_support.h"

/* Channels-last dense and grouped problems (KRSC filters) through cuDNN
 * and, for one group, gemm_nhwc: ConvNeXt's 2x2 stride-2 downsampling and
 * 4x4 stride-4 stem (3 channels: no float4 gather), a 3x3, a 1x1 (read in
 * place), a grouped 3x3, strided and dilated ones, a batch of 5 (a partial
 * last chunk of images), every epilogue, both math modes.  Each family
 * must take each of its problems with at least one config. */
static int nhwc_dense_matches_reference(void) {
  SKIP_WITHOUT_GPU();
  seed_rng();
  const conv_math S = CONV_MATH_STRICT, T = CONV_MATH_TF32;
  conv_problem cases[] = {
      direct_problem(2, 96, 28, 28, 192, 2, 2, 2, 0, 1, 1, CONV_EPILOGUE_BIAS, S), /* ConvNeXt */
      direct_problem(1, 32, 15, 17, 48, 3, 3, 1, 1, 1, 1, CONV_EPILOGUE_BIAS_RELU, T),
      direct_problem(3, 64, 7, 9, 40, 1, 1, 1, 0, 1, 1, CONV_EPILOGUE_NONE, S),
      direct_problem(2, 64, 12, 12, 64, 3, 3, 1, 1, 1, 4, CONV_EPILOGUE_BIAS, T), /* 16 per group */
      direct_problem(1, 24, 20, 19, 36, 3, 3, 2, 1, 1, 1, CONV_EPILOGUE_NONE, T),
      direct_problem(2, 3, 32, 36, 96, 4, 4, 4, 0, 1, 1, CONV_EPILOGUE_BIAS, S), /* stem */
      direct_problem(5, 20, 11, 13, 24, 3, 3, 1, 2, 2, 1, CONV_EPILOGUE_BIAS_RELU, S),
      direct_problem(5, 40, 9, 9, 36, 1, 1, 1, 0, 1, 1, CONV_EPILOGUE_BIAS_RELU, T),
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    cases[i].layout = CONV_LAYOUT_NHWC;
    family_count count;
    if (run_family_on_cases(&conv_algorithm_cudnn, &cases[i], 1, NULL, &count) != TEST_PASS)
      return TEST_FAIL;
    CHECK_MSG(count.ran > 0, "case %zu: no cuDNN engine ran the NHWC problem", i);
    if (cases[i].groups != 1) continue;
    if (run_family_on_cases(&conv_algorithm_gemm_nhwc, &cases[i], 1, NULL, &count) != TEST_PASS)
      return TEST_FAIL;
    CHECK_MSG(count.ran > 0 && count.wrong_caught == 0, "case %zu: gemm_nhwc ran %d configs", i,
              count.ran);
  }
  return TEST_PASS;
}

/* ---- half precision */

/* gemm_nhwc takes NHWC forward problems of one group in fp32, fp16 and
 * bf16, every epilogue; it refuses the half types' NCHW, grouped and
 * backward problems (and lists nothing, prepares nothing for them). */
static int half_types_served(void) {
  const conv_epilogue N = CONV_EPILOGUE_NONE, B = CONV_EPILOGUE_BIAS,
                      R = CONV_EPILOGUE_BIAS_RELU;
  const conv_math S = CONV_MATH_STRICT;
  const conv_problem takes[] = {
      channels_last(direct_problem(2, 16, 12, 12, 32, 3, 3, 1, 1, 1, 1, N, S)),
      channels_last(direct_problem(2, 32, 9, 9, 64, 1, 1, 1, 0, 1, 1, B, S)),
      channels_last(direct_problem(2, 3, 32, 36, 96, 4, 4, 4, 0, 1, 1, R, S)),
  };
  conv_problem refuses[] = {
      direct_problem(2, 16, 12, 12, 32, 3, 3, 1, 1, 1, 1, N, S),       /* NCHW */
      channels_last(direct_problem(2, 16, 12, 12, 32, 3, 3, 1, 1, 1, 4, B, S)), /* 4 groups */
      channels_last(direct_problem(2, 16, 12, 12, 32, 3, 3, 1, 1, 1, 1, N, S)), /* backward-data */
      channels_last(direct_problem(2, 16, 12, 12, 32, 3, 3, 1, 1, 1, 1, N, S)), /* backward-filter */
  };
  refuses[2].direction = CONV_BACKWARD_DATA;
  refuses[3].direction = CONV_BACKWARD_FILTER;
  return half_scope(&conv_algorithm_gemm_nhwc, takes, sizeof takes / sizeof takes[0], refuses,
                    sizeof refuses / sizeof refuses[0]);
}

/* NHWC shapes for the half types, every GEMM operand at least 4-byte
 * aligned: 1x1 read in place (batch 5), 1x1 with the bias+ReLU after the
 * GEMM (fp32 sums in chunks, a partial last one), a padded 3x3 (16-byte
 * gathers), a strided one with 6 channels (4-byte gathers), ConvNeXt's
 * 2x2 stride-2, the 3-channel 4x4 stride-4 stem (2-byte gathers), a
 * dilated one at batch 5; every epilogue. */
static size_t half_nhwc_cases(conv_problem *out) {
  const conv_epilogue N = CONV_EPILOGUE_NONE, B = CONV_EPILOGUE_BIAS,
                      R = CONV_EPILOGUE_BIAS_RELU;
  const conv_math S = CONV_MATH_STRICT;
  const conv_problem cases[] = {
      direct_problem(5, 32, 9, 9, 64, 1, 1, 1, 0, 1, 1, N, S),
      direct_problem(3, 40, 7, 9, 24, 1, 1, 1, 0, 1, 1, R, S),
      direct_problem(2, 16, 12, 12, 32, 3, 3, 1, 1, 1, 1, B, S),
      direct_problem(3, 6, 13, 11, 16, 3, 3, 2, 1, 1, 1, N, S),
      direct_problem(2, 96, 28, 28, 192, 2, 2, 2, 0, 1, 1, B, S), /* ConvNeXt */
      direct_problem(2, 3, 32, 36, 96, 4, 4, 4, 0, 1, 1, R, S),   /* stem */
      direct_problem(5, 20, 11, 13, 24, 3, 3, 1, 2, 2, 1, B, S),
  };
  const size_t n = quick_mode() ? 3 : sizeof cases / sizeof cases[0];
  for (size_t i = 0; i < n; i++) out[i] = channels_last(cases[i]);
  return n;
}

static int half_forward(conv_dtype dtype) {
  conv_problem cases[8];
  const size_t n = half_nhwc_cases(cases);
  return half_family_matches_reference(&conv_algorithm_gemm_nhwc, cases, n, dtype, "forward");
}
static int f16_forward(void) { return half_forward(CONV_DTYPE_F16); }
static int bf16_forward(void) { return half_forward(CONV_DTYPE_BF16); }

/* Operands only 2-byte aligned (an odd depth r*s*c, an odd k): every
 * config listed is right; cuBLASLt may list none. */
static int half_odd_alignment(void) {
  const conv_math S = CONV_MATH_STRICT;
  const conv_problem cases[] = {
      channels_last(direct_problem(2, 3, 17, 19, 16, 3, 3, 1, 1, 1, 1, CONV_EPILOGUE_BIAS, S)),
      channels_last(direct_problem(2, 15, 9, 9, 7, 1, 1, 1, 0, 1, 1, CONV_EPILOGUE_NONE, S)),
  };
  const size_t n = sizeof cases / sizeof cases[0];
  const int rc =
      half_family_where_listed(&conv_algorithm_gemm_nhwc, cases, n, CONV_DTYPE_F16, "odd");
  if (rc != TEST_PASS) return rc; /* skipped without a GPU, or failed */
  return half_family_where_listed(&conv_algorithm_gemm_nhwc, cases, n, CONV_DTYPE_BF16, "odd");
}

/* fp16 sums of 512 products of about 144: past 65504.  Without an
 * epilogue, every output overflows and the tuner's check rejects every
 * config; with a bias that brings them back, every config is right (the
 * bias comes before the one rounding: through the direct 1x1 path and
 * through im2col). */
static int f16_overflow(void) {
  const conv_math S = CONV_MATH_STRICT;
  conv_problem plain = channels_last(direct_problem(2, 512, 6, 6, 16, 1, 1, 1, 0, 1, 1,
                                           CONV_EPILOGUE_NONE, S));
  plain.dtype = CONV_DTYPE_F16;
  conv_problem biased = plain, windows = plain;
  biased.epilogue = CONV_EPILOGUE_BIAS;
  windows = channels_last(direct_problem(2, 64, 7, 7, 16, 3, 3, 1, 0, 1, 1, CONV_EPILOGUE_BIAS, S));
  windows.dtype = CONV_DTYPE_F16;
  int rc = half_overflow_judged(&conv_algorithm_gemm_nhwc, plain);
  if (rc == TEST_PASS) rc = half_overflow_judged(&conv_algorithm_gemm_nhwc, biased);
  if (rc == TEST_PASS) rc = half_overflow_judged(&conv_algorithm_gemm_nhwc, windows);
  return rc;
}

static const labelled_test_case tests[] = {
    {"nhwc_dense_matches_reference", nhwc_dense_matches_reference, "gpu"},
    {"half_types_served", half_types_served, "cpu"},
    {"f16_forward", f16_forward, "gpu"},
    {"bf16_forward", bf16_forward, "gpu"},
    {"half_odd_alignment", half_odd_alignment, "gpu"},
    {"f16_overflow", f16_overflow, "gpu"},
};
TEST_MAIN(tests)
