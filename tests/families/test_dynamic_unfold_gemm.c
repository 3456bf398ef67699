/* test_dynamic_unfold_gemm.c -- the dynamic_unfold_gemm family (the
 * dynamic op, CONV_OP_DYNAMIC, as an unfold and cuBLASLt GEMMs), on a GPU
 * (skipped without one): every config, forward and backward-filter (the
 * passes it takes), against the CPU reference on the dynamic op's fixed
 * shapes and random ones (gpu_support.c).  Which families take dynamic
 * problems: test_configs_dynamic.c; the workspace limit that leaves it
 * out: test_dynamic.c. */
#include "tests/gpu_support.h"

static int dynamic_unfold_gemm_every_config(void) {
  return dynamic_every_config(CONV_ALGO_DYNAMIC_UNFOLD_GEMM, false);
}

static const labelled_test_case tests[] = {
    {"dynamic_unfold_gemm_every_config", dynamic_unfold_gemm_every_config, "gpu"},
};
TEST_MAIN(tests)
