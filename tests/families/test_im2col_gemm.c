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
  static const char *const specs[] = {
      "n=5 c=16 h=14 w=14 k=24 r=1 s=1 epilogue=bias math=tf32",     /* 1x1, read in place */
      "n=3 c=16 h=14 w=14 k=32 r=1 s=1 stride=2",                    /* 1x1 s2: a subsample */
      "n=5 c=8 h=15 w=13 k=12 r=3 s=3 pad=1 epilogue=bias_relu",     /* 3x3, batch 5 */
      /* 5x3, dilation 2, asymmetric padding, two groups */
      ("n=2 c=6 h=23 w=19 k=8 r=5 s=3 pad_h=2 pad_w=1 stride=2 dil=2 groups=2 epilogue=bias "
       "math=tf32"),
      "n=2 c=8 h=12 w=12 k=8 r=3 s=3 pad=1 groups=8 epilogue=bias_relu math=tf32", /* depthwise */
      "n=2 c=3 h=40 w=38 k=64 r=7 s=7 pad=3 stride=2 math=tf32",     /* resnet50's stem */
  };
  enum { CASES = sizeof specs / sizeof specs[0] };
  conv_problem cases[CASES];
  char message[256] = "";
  for (int i = 0; i < CASES; i++)
    CHECK_MSG(conv_problem_parse(specs[i], &cases[i], message, sizeof message) == CONV_OK,
              "%s: %s", specs[i], message);
  family_count count;
  if (run_family_on_cases(&conv_algorithm_im2col_gemm, cases, CASES, NULL, &count) != TEST_PASS)
    return TEST_FAIL;
  CHECK(count.ran >= CASES && count.wrong_caught == 0);
  return TEST_PASS;
}

static const labelled_test_case tests[] = {
    {"im2col_gemm_matches_reference", im2col_gemm_matches_reference, "gpu"},
};
TEST_MAIN(tests)
