/* test_gemm_backward.c -- the gemm_backward family (both backward passes
 * as cuBLASLt GEMMs on im2col's wide layout).  CPU: its scope, the configs
 * it refuses before any cuBLASLt call, and the wide im2col plan it makes
 * once per plan.  GPU (skipped without one): every config of both passes
 * against the CPU reference.
 * Half precision: on the CPU, the types it takes and the problems it
 * refuses in them; on the GPU, every config of both passes in fp16 and
 * bf16 against the CPU reference (dcol and dw's sums over several chunks
 * kept in fp32, each output rounded once). */
#include <string.h>

#include "algorithms/common/im2col.h"
#include "algorithms/common/cublaslt.h"
#include "tests/gpu_support.h"
#include "tests/problem_fixtures.h"

/* gemm_backward takes both backward passes of any NCHW convolution
 * (strides, dilations, groups) where cuBLASLt is there, and nothing else;
 * it refuses, before any cuBLASLt call, configs that are not two values,
 * chunks that do not divide the batch and algo ranks out of range. */
static int gemm_backward_configs(void) {
  const conv_algorithm *gb = conv_registry_find(CONV_ALGO_GEMM_BACKWARD);
  CHECK(gb != NULL && strcmp(gb->name, "gemm_backward") == 0);
  CHECK(conv_registry_find_name("gemm_backward") == gb);
  conv_env env;
  memset(&env, 0, sizeof env);
  conv_problem p = pass_problem(8, 12, 4, 3, 2, 1, 2, CONV_BACKWARD_FILTER);
  p.n = 6;
  CHECK(!gb->applicable(&p, &env)); /* no cuBLASLt handle */
  conv_config configs[4];
  int n = -1;
  CHECK_STATUS(CONV_OK, gb->configs(&p, &env, configs, 4, &n, NULL));
  CHECK(n == 0);
  env.cublaslt = (cublasLtHandle_t)&env; /* applicable() only checks it is there */
  CHECK(gb->applicable(&p, &env));
  p.direction = CONV_BACKWARD_DATA;
  CHECK(gb->applicable(&p, &env));
  conv_problem q = p;
  q.direction = CONV_FORWARD;
  CHECK(!gb->applicable(&q, &env));
  q = p, q.layout = CONV_LAYOUT_NHWC;
  CHECK(!gb->applicable(&q, &env));
  conv_prepared prep = {0};
  const conv_config three = {3, {1, 0, 0}, 0}, not_divisor = {2, {4, 0}, 0},
                    none = {2, {0, 0}, 0}, past = {2, {12, 0}, 0},
                    rank = {2, {3, CONV_CUBLASLT_HEURISTIC_MAX}, 0};
  CHECK_STATUS(CONV_UNSUPPORTED, gb->prepare(&p, &env, &three, &prep, NULL));
  CHECK_STATUS(CONV_UNSUPPORTED, gb->prepare(&p, &env, &not_divisor, &prep, NULL));
  CHECK_STATUS(CONV_UNSUPPORTED, gb->prepare(&p, &env, &none, &prep, NULL));
  CHECK_STATUS(CONV_UNSUPPORTED, gb->prepare(&p, &env, &past, &prep, NULL));
  CHECK_STATUS(CONV_UNSUPPORTED, gb->prepare(&p, &env, &rank, &prep, NULL));
  CHECK(prep.state == NULL);
  const conv_config ok = {2, {3, 1}, 0};
  char text[64];
  gb->describe(&ok, text, sizeof text);
  CHECK(strcmp(text, "batch=3 gemm_algo=1") == 0);
  return TEST_PASS;
}

/* The wide im2col plan gemm_backward makes once per plan: a chunk's col
 * and x sizes, x's step between images, and a refusal where a chunk would
 * pass 32-bit indexing. */
static int wide_plan(void) {
  conv_problem p = pass_problem(6, 8, 2, 3, 2, 1, 1, CONV_BACKWARD_FILTER); /* 37x29 -> 19x15 */
  conv_wide_launch l;
  CHECK(conv_wide_plan(&p, 2, &l));
  CHECK(l.p == 19 && l.q == 15 && l.images == 2);
  CHECK(l.col_total == 2u * 6 * 3 * 3 * 19 * 15);
  CHECK(l.x_total == 2u * 6 * 37 * 29 && l.image_floats == 6 * 37 * 29);
  CHECK(l.by_pq.divisor == 19 * 15 && l.by_rs.divisor == 9 && l.by_images.divisor == 2);
  CHECK(!conv_wide_plan(&p, 0, &l));
  p.n = 2000, p.c = 512; /* 1.3 million col floats an image: 2000 pass 2^31 */
  CHECK(!conv_wide_plan(&p, 2000, &l));
  CHECK(conv_wide_plan(&p, 1, &l));
  /* dy's wide layout: the im2col of a 1x1 filter on 1 x plane images. */
  CHECK(conv_channels_wide_plan(64, 49, 4, CONV_DTYPE_F32, &l));
  CHECK(l.c == 64 && l.h == 1 && l.w == 49 && l.r == 1 && l.p == 1 && l.q == 49);
  CHECK(l.col_total == 64u * 4 * 49 && l.image_floats == 64 * 49);
  CHECK(!conv_channels_wide_plan(64, 0, 4, CONV_DTYPE_F32, &l));
  return TEST_PASS;
}

/* gemm_backward, every config (chunks of the whole batch, of part of it
 * and of one image; ranked cuBLASLt algos) in both passes, against the CPU
 * reference: a dense 3x3, strides with padding (col2im's skipped taps),
 * dilation on one axis and asymmetric padding, padding past the filter,
 * groups (3 in, 2 out a group; depthwise), a stride-4 stem, 1x1 filters
 * with and without a stride (the unit-stride one runs with neither im2col
 * nor col2im at one image a chunk), both math modes. */
static int gemm_backward_matches_reference(void) {
  SKIP_WITHOUT_GPU();
  seed_rng();
  const conv_math S = CONV_MATH_STRICT, T = CONV_MATH_TF32;
  const conv_epilogue N = CONV_EPILOGUE_NONE;
  conv_problem cases[] = {
      direct_problem(4, 8, 20, 23, 12, 3, 3, 1, 1, 1, 1, N, S),    /* dense 3x3 */
      direct_problem(3, 5, 31, 28, 7, 5, 5, 2, 2, 1, 1, N, T),     /* 5x5 s2 */
      direct_problem(2, 3, 41, 50, 6, 3, 3, 1, 3, 2, 1, N, S),     /* dilation 2 x 3 */
      direct_problem(2, 2, 20, 24, 4, 3, 3, 1, 5, 1, 1, N, S),     /* padding past the filter */
      direct_problem(2, 6, 25, 33, 4, 3, 3, 1, 1, 1, 2, N, S),     /* 3 in, 2 out a group */
      direct_problem(6, 8, 30, 27, 8, 3, 3, 2, 1, 1, 8, N, T),     /* depthwise s2 */
      direct_problem(2, 3, 44, 48, 16, 4, 4, 4, 0, 1, 1, N, S),    /* 4x4 stride-4 stem */
      direct_problem(3, 32, 23, 26, 16, 1, 1, 1, 0, 1, 1, N, T),   /* 1x1 */
      direct_problem(2, 16, 23, 26, 8, 1, 1, 2, 0, 1, 1, N, S),    /* 1x1 s2 */
  };
  cases[2].dil_w = 3;
  cases[2].pad_w = 1;
  enum { CASES = sizeof cases / sizeof cases[0] };
  conv_problem passes[2 * CASES];
  for (int i = 0; i < 2 * CASES; i++) {
    passes[i] = cases[i / 2];
    passes[i].direction = i % 2 ? CONV_BACKWARD_FILTER : CONV_BACKWARD_DATA;
  }
  /* Every pass has a chunk of the whole batch and one of one image. */
  return family_passes_match_reference(&conv_algorithm_gemm_backward, passes, 2 * CASES,
                                       2 * 2 * CASES);
}

/* ---- half precision */

static conv_problem with_direction(conv_problem p, conv_direction direction) {
  p.direction = direction;
  return p;
}

/* gemm_backward takes both NCHW backward passes in fp32, fp16 and bf16,
 * grouped or not; it refuses the half types' forward and NHWC problems
 * (and lists nothing, prepares nothing for them). */
static int half_types_served(void) {
  const conv_epilogue N = CONV_EPILOGUE_NONE;
  const conv_math S = CONV_MATH_STRICT;
  const conv_problem dense = direct_problem(4, 8, 20, 24, 12, 3, 3, 1, 1, 1, 1, N, S),
                     grouped = direct_problem(2, 4, 25, 32, 4, 3, 3, 1, 1, 1, 2, N, S);
  const conv_problem takes[] = {
      with_direction(dense, CONV_BACKWARD_DATA), with_direction(dense, CONV_BACKWARD_FILTER),
      with_direction(grouped, CONV_BACKWARD_DATA), with_direction(grouped, CONV_BACKWARD_FILTER),
  };
  conv_problem refuses[] = {dense, with_direction(dense, CONV_BACKWARD_DATA),
                            with_direction(dense, CONV_BACKWARD_FILTER)};
  refuses[1].layout = refuses[2].layout = CONV_LAYOUT_NHWC;
  return half_scope(&conv_algorithm_gemm_backward, takes, sizeof takes / sizeof takes[0],
                    refuses, sizeof refuses / sizeof refuses[0]);
}

/* What the cuBLASLt families assume of a half problem's pointers: the
 * alignment base + i*offset keeps for 2-byte elements (half that of
 * floats, at most the base), an element's alignment for the fallback
 * algos, and the GEMM's matrix type for each dtype. */
static int half_alignments(void) {
  const int64_t odd[] = {3}, four[] = {4}, eight[] = {8}, mixed[] = {8, 0, -2, 6};
  CHECK(conv_cublaslt_element_offsets_align(16, odd, 1, 2) == 2);
  CHECK(conv_cublaslt_element_offsets_align(16, four, 1, 2) == 8);
  CHECK(conv_cublaslt_element_offsets_align(16, eight, 1, 2) == 16);
  CHECK(conv_cublaslt_element_offsets_align(16, mixed, 4, 2) == 4); /* 6: 12 bytes */
  CHECK(conv_cublaslt_element_offsets_align(16, four, 1, 4) == 16);
  CHECK(conv_cublaslt_offsets_align(16, odd, 1) == 4); /* floats, as before */
  CHECK(conv_cublaslt_element_align(CONV_DTYPE_F32) == 4);
  CHECK(conv_cublaslt_element_align(CONV_DTYPE_F16) == 2);
  CHECK(conv_cublaslt_element_align(CONV_DTYPE_BF16) == 2);
  CHECK(conv_cublaslt_data_type(CONV_DTYPE_F32) == CUDA_R_32F);
  CHECK(conv_cublaslt_data_type(CONV_DTYPE_F16) == CUDA_R_16F);
  CHECK(conv_cublaslt_data_type(CONV_DTYPE_BF16) == CUDA_R_16BF);
  return TEST_PASS;
}

/* NCHW shapes for the half types, every GEMM operand at least 4-byte
 * aligned (even p*q, c*r*s a group and k a group): a dense 3x3 at batch 4
 * (chunks of 4, 2 and 1: dw written by one GEMM, or summed in fp32 over
 * chunks), a 5x5 stride 2, two groups of 2 channels, a 4x4 stride-4 stem,
 * a 1x1 (at one image a chunk, neither im2col nor col2im: dx straight
 * from the GEMM), a 1x1 stride 2. */
static size_t half_passes(conv_direction direction, conv_problem *out) {
  const conv_epilogue N = CONV_EPILOGUE_NONE;
  const conv_math S = CONV_MATH_STRICT;
  const conv_problem cases[] = {
      direct_problem(4, 8, 20, 24, 12, 3, 3, 1, 1, 1, 1, N, S),
      direct_problem(3, 6, 31, 28, 8, 5, 5, 2, 2, 1, 1, N, S),
      direct_problem(2, 4, 25, 32, 4, 3, 3, 1, 1, 1, 2, N, S),
      direct_problem(2, 3, 44, 48, 16, 4, 4, 4, 0, 1, 1, N, S),
      direct_problem(3, 32, 23, 26, 16, 1, 1, 1, 0, 1, 1, N, S),
      direct_problem(2, 16, 24, 26, 8, 1, 1, 2, 0, 1, 1, N, S),
  };
  const size_t n = quick_mode() ? 3 : sizeof cases / sizeof cases[0];
  for (size_t i = 0; i < n; i++) out[i] = with_direction(cases[i], direction);
  return n;
}

static int half_pass(conv_dtype dtype, conv_direction direction, const char *name) {
  conv_problem cases[8];
  const size_t n = half_passes(direction, cases);
  return half_family_matches_reference(&conv_algorithm_gemm_backward, cases, n, dtype, name);
}
static int f16_backward_data(void) {
  return half_pass(CONV_DTYPE_F16, CONV_BACKWARD_DATA, "backward-data");
}
static int f16_backward_filter(void) {
  return half_pass(CONV_DTYPE_F16, CONV_BACKWARD_FILTER, "backward-filter");
}
static int bf16_backward_data(void) {
  return half_pass(CONV_DTYPE_BF16, CONV_BACKWARD_DATA, "backward-data");
}
static int bf16_backward_filter(void) {
  return half_pass(CONV_DTYPE_BF16, CONV_BACKWARD_FILTER, "backward-filter");
}

/* Operands only 2-byte aligned (a depthwise filter of 9 taps a group, an
 * odd p*q with 3x3 taps of 3 channels): every config listed is right;
 * cuBLASLt may list none. */
static int half_odd_alignment(void) {
  const conv_epilogue N = CONV_EPILOGUE_NONE;
  const conv_math S = CONV_MATH_STRICT;
  const conv_problem depthwise = direct_problem(6, 8, 30, 28, 8, 3, 3, 2, 1, 1, 8, N, S),
                     odd = direct_problem(2, 3, 15, 13, 5, 3, 3, 1, 1, 1, 1, N, S);
  const conv_problem cases[] = {
      with_direction(depthwise, CONV_BACKWARD_DATA),
      with_direction(depthwise, CONV_BACKWARD_FILTER),
      with_direction(odd, CONV_BACKWARD_DATA),
      with_direction(odd, CONV_BACKWARD_FILTER),
  };
  const size_t n = sizeof cases / sizeof cases[0];
  const int rc =
      half_family_where_listed(&conv_algorithm_gemm_backward, cases, n, CONV_DTYPE_F16, "odd");
  if (rc != TEST_PASS) return rc; /* skipped without a GPU, or failed */
  return half_family_where_listed(&conv_algorithm_gemm_backward, cases, n, CONV_DTYPE_BF16,
                                  "odd");
}

static const labelled_test_case tests[] = {
    {"gemm_backward_configs", gemm_backward_configs, "cpu"},
    {"wide_plan", wide_plan, "cpu"},
    {"gemm_backward_matches_reference", gemm_backward_matches_reference, "gpu"},
    {"half_types_served", half_types_served, "cpu"},
    {"half_alignments", half_alignments, "cpu"},
    {"f16_backward_data", f16_backward_data, "gpu"},
    {"f16_backward_filter", f16_backward_filter, "gpu"},
    {"bf16_backward_data", bf16_backward_data, "gpu"},
    {"bf16_backward_filter", bf16_backward_filter, "gpu"},
    {"half_odd_alignment", half_odd_alignment, "gpu"},
};
TEST_MAIN(tests)
