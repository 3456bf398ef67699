/* test_im2col_gemm.c -- the im2col_gemm family (im2col and a cuBLASLt GEMM
 * a group and chunk of images), on a GPU (skipped without one): every
 * config against the CPU reference.  It takes every NCHW forward problem
 * where cuBLASLt is there, so the tests that run every family
 * (test_gpu.c's every_candidate_matches_reference) run it on random shapes
 * too; these are the shapes its code paths are for. */
#include "tests/gpu_support.h"

/* Every config (chunks of the whole batch, of a power of two and of one
 * image, each with cuBLASLt's ranked algos) on fresh random inputs into
 * poisoned outputs: a 1x1 filter read in place (no im2col) and a strided
 * one through im2col, a padded 3x3 at batch 5 (a chunk of 4 leaves a
 * partial last one), a non-square dilated filter with asymmetric padding
 * in two groups, a depthwise layer (a GEMM of one output channel a group),
 * resnet50's 7x7 stride-2 stem, every epilogue (the bias pass after the
 * GEMM), both math modes.  Every case must be taken, with a right config
 * (run_family_on_cases), and no config may be wrong. */
static int im2col_gemm_matches_reference(void) {
  SKIP_WITHOUT_GPU();
  seed_rng();
  const conv_math S = CONV_MATH_STRICT, T = CONV_MATH_TF32;
  const conv_epilogue NONE = CONV_EPILOGUE_NONE, BIAS = CONV_EPILOGUE_BIAS,
                      RELU = CONV_EPILOGUE_BIAS_RELU;
  conv_problem cases[] = {
      direct_problem(5, 16, 14, 14, 24, 1, 1, 1, 0, 1, 1, BIAS, T), /* 1x1, read in place */
      direct_problem(3, 16, 14, 14, 32, 1, 1, 2, 0, 1, 1, NONE, S), /* 1x1 s2: a subsample */
      direct_problem(5, 8, 15, 13, 12, 3, 3, 1, 1, 1, 1, RELU, S),  /* 3x3, batch 5 */
      direct_problem(2, 6, 23, 19, 8, 5, 3, 2, 2, 2, 2, BIAS, T),   /* 5x3 d2, two groups */
      direct_problem(2, 8, 12, 12, 8, 3, 3, 1, 1, 1, 8, RELU, T),   /* depthwise */
      direct_problem(2, 3, 40, 38, 64, 7, 7, 2, 3, 1, 1, NONE, T),  /* resnet50's stem */
  };
  cases[3].pad_w = 1; /* asymmetric padding */
  const size_t ncases = sizeof cases / sizeof cases[0];
  family_count count;
  if (run_family_on_cases(&conv_algorithm_im2col_gemm, cases, ncases, NULL, &count) != TEST_PASS)
    return TEST_FAIL;
  CHECK(count.ran >= (int)ncases && count.wrong_caught == 0);
  return TEST_PASS;
}

static const labelled_test_case tests[] = {
    {"im2col_gemm_matches_reference", im2col_gemm_matches_reference, "gpu"},
};
TEST_MAIN(tests)
