/* test_gemm_nhwc.c -- the gemm_nhwc family (channels-last dense
 * convolutions), on a GPU (skipped without one): every config against the
 * CPU reference, beside cuDNN's NHWC engines on the same problems.  Which
 * problems it takes: test_depthwise_nhwc.c's nhwc_problems, with the
 * other channels-last families. */
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

static const labelled_test_case tests[] = {
    {"nhwc_dense_matches_reference", nhwc_dense_matches_reference, "gpu"},
};
TEST_MAIN(tests)
