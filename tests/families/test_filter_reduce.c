/* test_filter_reduce.c -- the filter_reduce family (backward-filter by
 * reduction over images and pixels).  CPU: every config plans and covers
 * every output row once within its workspace cap, float4 loads only where
 * they serve, per-tap blocks for tiny passes, and what it refuses.  GPU
 * (skipped without one): float4 loads on any alignment, and every config,
 * per-tap ones among them, against the CPU reference on small passes,
 * with per-tap results repeating their bits.  The layers its kernels are
 * for, with the other backward kernels: test_data_gather.c; its
 * programmatic dependent launch: test_configs.c. */
#include <stdint.h>
#include <string.h>

#include "algorithms/filter_reduce.h"
#include "tests/gpu_support.h"
#include "tests/problem_fixtures.h"

/* filter_reduce's per-tap blocks: offered after the bands for a pass of
 * at most CONV_FILTER_REDUCE_PER_TAP_MAX products a tap, 1024, 512 and
 * 256 threads, with no workspace; with other rows, cols or float4 refused. */
static int per_tap_configs(const conv_algorithm *fr) {
  conv_env env;
  memset(&env, 0, sizeof env);
  conv_problem small = pass_problem(1, 1, 1, 3, 1, 1, 1, CONV_BACKWARD_FILTER);
  small.n = 1, small.h = small.w = 64; /* seed3_msd_small */
  conv_config configs[256];
  int n = -1, taps = 0;
  CHECK_STATUS(CONV_OK, fr->configs(&small, &env, configs, 256, &n, NULL));
  for (int i = 0; i < n; i++) {
    const int64_t *v = configs[i].values;
    if (v[4] == 0) {
      CHECK_MSG(taps == 0, "config %d: bands after per-tap configs", i);
      continue;
    }
    const conv_filter_reduce_tiling t = {(int)v[0], (int)v[1], (int)v[2], (int)v[3], (int)v[4]};
    CHECK(t.threads == (1024 >> taps++));
    conv_filter_reduce_launch l;
    CHECK(conv_filter_reduce_plan(&small, &t, &l, NULL, 0));
    CHECK(l.bands == 1 && l.workspace_bytes == 0);
    CHECK(l.units_per_row == 64 && l.by_units.divisor == 64); /* the kernel's row split */
    CHECK(l.by_s.divisor == 3 && l.by_cg.divisor == 1 && l.by_kg.divisor == 1);
  }
  CHECK(taps == 3 && n > taps);
  const conv_config per_tap = {5, {0, 1024, 1, 0, 1}, 0}, with_rows = {5, {8, 1024, 1, 0, 1}, 0};
  conv_prepared prep;
  CHECK_STATUS(CONV_OK, fr->prepare(&small, &env, &per_tap, &prep, NULL));
  CHECK(prep.workspace_bytes == 0 && prep.deterministic);
  fr->release(prep.state);
  conv_error err = {CONV_OK, ""};
  CHECK_STATUS(CONV_UNSUPPORTED, fr->prepare(&small, &env, &with_rows, &prep, &err));
  CHECK_MSG(strstr(err.message, "rows 0, cols 1 and vector 0") != NULL, "%s", err.message);
  char text[64];
  fr->describe(&per_tap, text, sizeof text);
  CHECK(strcmp(text, "per-tap threads=1024") == 0);
  /* Few products a tap of a 2^30-element input: past the kernel's 32-bit
   * offsets. */
  conv_problem huge = small;
  huge.h = 32768, huge.w = 32769, huge.stride_h = huge.stride_w = 256;
  const conv_filter_reduce_tiling tap_1024 = {0, 1024, 1, 0, 1};
  conv_filter_reduce_launch l;
  char why[160];
  CHECK(!conv_filter_reduce_plan(&huge, &tap_1024, &l, why, sizeof why) && strstr(why, "2^30"));
  return TEST_PASS;
}

/* filter_reduce's configs all plan, cover every output row once, keep
 * their workspace within the cap and span 1, 2 and 4 columns; float4
 * loads only where they serve (3-wide, stride 2, padding 1, rows of a
 * multiple of 4 floats; cols 2 or 4); bad configs are refused with a
 * reason. */
static int filter_reduce_configs(void) {
  conv_env env;
  memset(&env, 0, sizeof env);
  const conv_algorithm *fr = conv_registry_find(CONV_ALGO_FILTER_REDUCE);
  CHECK(fr != NULL && strcmp(fr->name, "filter_reduce") == 0);
  conv_problem p = pass_problem(144, 144, 144, 3, 1, 1, 1, CONV_BACKWARD_FILTER);
  p.n = 32, p.h = p.w = 56;
  CHECK(fr->applicable(&p, &env));
  conv_config configs[128];
  int n = -1;
  CHECK_STATUS(CONV_OK, fr->configs(&p, &env, configs, 128, &n, NULL));
  CHECK(n > 2);
  int with_cols[5] = {0};
  for (int i = 0; i < n; i++) {
    CHECK(configs[i].count == 5);
    for (int j = 0; j < i; j++) CHECK(!conv_config_equal(&configs[i], &configs[j]));
    const conv_filter_reduce_tiling t = {(int)configs[i].values[0], (int)configs[i].values[1],
                                         (int)configs[i].values[2], (int)configs[i].values[3],
                                         (int)configs[i].values[4]};
    CHECK(t.per_tap == 0); /* 100352 products a tap */
    CHECK(t.cols == 1 || t.cols == 2 || t.cols == 4);
    CHECK(t.vector == 0); /* stride 1 */
    with_cols[t.cols]++;
    conv_filter_reduce_launch l;
    CHECK(conv_filter_reduce_plan(&p, &t, &l, NULL, 0));
    CHECK(l.units_per_row == (56 + t.cols - 1) / t.cols);
    CHECK((int64_t)l.bands_per_image * t.rows >= l.p && (int64_t)(l.bands_per_image - 1) * t.rows < l.p);
    CHECK(l.bands == l.n * l.bands_per_image && l.pairs == 144);
    CHECK(l.workspace_bytes == (l.bands > 1 ? (size_t)l.bands * 144 * 9 * sizeof(float) : 0));
    CHECK(l.workspace_bytes <= CONV_FILTER_REDUCE_WORKSPACE_MAX);
  }
  /* Bad configs are refused with a reason, not planned. */
  char why[160] = "";
  conv_filter_reduce_launch l;
  CHECK(with_cols[1] > 0 && with_cols[2] > 0 && with_cols[4] > 0 && n < 128);
  const conv_filter_reduce_tiling odd = {8, 100, 1, 0, 0}, none = {0, 128, 1, 0, 0},
                                  three = {8, 128, 3, 0, 0}, vector_s1 = {8, 128, 2, 1, 0},
                                  vector_2 = {8, 128, 2, 2, 0}, tap_2 = {0, 128, 1, 0, 2},
                                  tap_large = {0, 1024, 1, 0, 1};
  CHECK(!conv_filter_reduce_plan(&p, &odd, &l, why, sizeof why) && strstr(why, "100 threads"));
  CHECK(!conv_filter_reduce_plan(&p, &none, &l, why, sizeof why) && strstr(why, "0 rows"));
  CHECK(!conv_filter_reduce_plan(&p, &three, &l, why, sizeof why) && strstr(why, "3 columns"));
  CHECK(!conv_filter_reduce_plan(&p, &vector_s1, &l, why, sizeof why) && strstr(why, "float4"));
  CHECK(!conv_filter_reduce_plan(&p, &vector_2, &l, why, sizeof why) && strstr(why, "vector 2"));
  CHECK(!conv_filter_reduce_plan(&p, &tap_2, &l, why, sizeof why) && strstr(why, "per_tap 2"));
  CHECK(!conv_filter_reduce_plan(&p, &tap_large, &l, why, sizeof why) &&
        strstr(why, "100352 products a tap"));
  /* MobileNet's depthwise stride-2 layer: float4 configs, with cols 2 or
   * 4 only, after the scalar ones; not for rows of 110 floats. */
  conv_problem down = pass_problem(96, 96, 96, 3, 2, 1, 1, CONV_BACKWARD_FILTER);
  down.n = 32, down.h = down.w = 112;
  CHECK_STATUS(CONV_OK, fr->configs(&down, &env, configs, 128, &n, NULL));
  int vectors = 0;
  for (int i = 0; i < n; i++) {
    if (configs[i].values[3] == 0) {
      CHECK_MSG(vectors == 0, "config %d: scalar after float4 ones", i);
      continue;
    }
    vectors++;
    CHECK(configs[i].values[2] == 2 || configs[i].values[2] == 4);
  }
  CHECK(vectors > 0 && vectors < n);
  down.w = 110;
  CHECK_STATUS(CONV_OK, fr->configs(&down, &env, configs, 128, &n, NULL));
  for (int i = 0; i < n; i++) CHECK(configs[i].values[3] == 0);
  const conv_config too_many = {5, {8, 1 << 21, 1, 0, 0}, 0},
                    three_cols = {5, {8, 128, 3, 0, 0}, 0};
  conv_prepared prep;
  CHECK_STATUS(CONV_UNSUPPORTED, fr->prepare(&p, &env, &too_many, &prep, NULL));
  CHECK_STATUS(CONV_UNSUPPORTED, fr->prepare(&p, &env, &three_cols, &prep, NULL));
  /* Older versions' values (two before cols, three before vector, four
   * before per_tap): never read back (the version is in the key), and
   * refused if they were. */
  const conv_config before_cols = {2, {8, 128}, 0}, before_vector = {3, {8, 128, 1}, 0},
                    before_per_tap = {4, {8, 128, 1, 0}, 0}, one_col = {5, {8, 128, 1, 0, 0}, 0};
  CHECK_STATUS(CONV_UNSUPPORTED, fr->prepare(&p, &env, &before_cols, &prep, NULL));
  CHECK_STATUS(CONV_UNSUPPORTED, fr->prepare(&p, &env, &before_vector, &prep, NULL));
  CHECK_STATUS(CONV_UNSUPPORTED, fr->prepare(&p, &env, &before_per_tap, &prep, NULL));
  char text[64];
  fr->describe(&before_cols, text, sizeof text);
  CHECK(strcmp(text, "invalid config") == 0);
  CHECK_STATUS(CONV_OK, fr->prepare(&p, &env, &one_col, &prep, NULL));
  CHECK(((const conv_filter_reduce_launch *)prep.state)->tiling.cols == 1);
  fr->release(prep.state);
  fr->describe(&one_col, text, sizeof text);
  CHECK(strcmp(text, "rows=8 threads=128 cols=1") == 0);
  const conv_config float4 = {5, {8, 128, 4, 1, 0}, 0};
  fr->describe(&float4, text, sizeof text);
  CHECK(strcmp(text, "rows=8 threads=128 cols=4 float4") == 0);
  if (per_tap_configs(fr) != TEST_PASS) return TEST_FAIL;

  conv_problem wide = p; /* a 9x9 filter: no kernel */
  wide.r = wide.s = 9, wide.pad_h = wide.pad_w = 4;
  CHECK(!fr->applicable(&wide, &env));
  conv_problem dense = pass_problem(64, 64, 1, 3, 1, 1, 1, CONV_BACKWARD_FILTER);
  CHECK(!fr->applicable(&dense, &env));
  conv_problem data = p;
  data.direction = CONV_BACKWARD_DATA;
  CHECK(!fr->applicable(&data, &env));
  CHECK_STATUS(CONV_OK, fr->configs(&data, &env, configs, 64, &n, NULL));
  CHECK(n == 0);
  return TEST_PASS;
}

/* filter_reduce's float4 loads need x 16-byte aligned: with an x one
 * float off, the same plan runs its scalar kernel, with the same result. */
static int filter_reduce_float4_any_alignment(void) {
  SKIP_WITHOUT_GPU();
  seed_rng();
  conv_problem p = direct_problem(2, 8, 30, 28, 8, 3, 3, 2, 1, 1, 8, CONV_EPILOGUE_NONE,
                                  CONV_MATH_STRICT);
  p.direction = CONV_BACKWARD_FILTER;
  const conv_filter_reduce_tiling tiling = {8, 128, 4, 1, 0};
  conv_filter_reduce_launch launch;
  char why[160] = "";
  CHECK_MSG(conv_filter_reduce_plan(&p, &tiling, &launch, why, sizeof why), "%s", why);
  pass_case pc;
  if (pass_case_make(&pc, &p) != TEST_PASS) return TEST_FAIL;
  const size_t x_bytes = (size_t)pc.hc.sh.x_elems * sizeof(float);
  float *shifted = NULL;
  void *workspace = NULL;
  CUDA_OK(cudaMalloc((void **)&shifted, x_bytes + sizeof(float)));
  CUDA_OK(cudaMemcpy(shifted + 1, pc.d.x, x_bytes, cudaMemcpyDeviceToDevice));
  CUDA_OK(cudaMalloc(&workspace, launch.workspace_bytes + 1));
  const float *inputs[2] = {pc.d.x, shifted + 1};
  const char *what[2] = {"filter_reduce float4, x aligned", "filter_reduce float4, x one float off"};
  for (int i = 0; i < 2; i++) {
    if (pass_poison(&pc) != TEST_PASS) return TEST_FAIL;
    CUDA_OK(conv_filter_reduce_run(&launch, inputs[i], pc.d.y, pc.d.w, workspace, 0));
    CUDA_OK(cudaDeviceSynchronize());
    if (pass_check(&pc, 1e-5, what[i]) != TEST_PASS) return TEST_FAIL;
  }
  cudaFree(workspace);
  cudaFree(shifted);
  pass_case_free(&pc);
  return TEST_PASS;
}

static bool sums_per_tap(const void *state) {
  return ((const conv_filter_reduce_launch *)state)->tiling.per_tap != 0;
}

/* filter_reduce's per-tap blocks (one launch for a tiny pass): every
 * config of the family, per-tap ones among them, on the small passes they
 * are for (strides, dilation, groups, several images), against the CPU
 * reference; then one per-tap config's dw twice, bit for bit (the family
 * says it is deterministic). */
static int filter_reduce_per_tap_matches_reference(void) {
  SKIP_WITHOUT_GPU();
  seed_rng();
  const conv_math S = CONV_MATH_STRICT, T = CONV_MATH_TF32;
  const conv_epilogue N = CONV_EPILOGUE_NONE;
  conv_problem cases[] = {
      direct_problem(1, 1, 64, 64, 1, 3, 3, 1, 1, 1, 1, N, S),    /* seed3_msd_small */
      direct_problem(3, 3, 20, 22, 3, 3, 3, 1, 1, 1, 3, N, T),    /* depthwise, 3 images */
      direct_problem(1, 16, 40, 36, 1, 3, 3, 1, 4, 4, 1, N, S),   /* 16->1, d4 */
      direct_problem(2, 2, 30, 33, 4, 5, 5, 2, 2, 1, 2, N, S),    /* 5x5 s2, multiplier 2 */
      direct_problem(1, 3, 17, 19, 8, 7, 7, 1, 3, 1, 1, N, S),    /* 3->8, 7x7 */
  };
  enum { CASES = sizeof cases / sizeof cases[0] };
  conv_env env;
  if (open_env(&env) != TEST_PASS) return TEST_FAIL;
  for (int i = 0; i < CASES; i++) {
    cases[i].direction = CONV_BACKWARD_FILTER;
    CHECK_MSG(prepared_configs(&env, &conv_algorithm_filter_reduce, &cases[i], sums_per_tap) == 3,
              "case %d: not 3 per-tap configs", i);
  }
  close_env(&env);
  family_count count;
  if (run_family_on_cases(&conv_algorithm_filter_reduce, cases, CASES, NULL, &count) != TEST_PASS)
    return TEST_FAIL;
  CHECK(count.wrong_caught == 0);

  const conv_filter_reduce_tiling tiling = {0, 512, 1, 0, 1};
  conv_filter_reduce_launch launch;
  char why[160] = "";
  CHECK_MSG(conv_filter_reduce_plan(&cases[1], &tiling, &launch, why, sizeof why), "%s", why);
  CHECK(launch.workspace_bytes == 0);
  pass_case pc;
  if (pass_case_make(&pc, &cases[1]) != TEST_PASS) return TEST_FAIL;
  float first[27], second[27];
  for (int run = 0; run < 2; run++) {
    if (pass_poison(&pc) != TEST_PASS) return TEST_FAIL;
    CUDA_OK(conv_filter_reduce_run(&launch, pc.d.x, pc.d.y, pc.d.w, NULL, 0));
    CUDA_OK(cudaDeviceSynchronize());
    if (pass_check(&pc, 1e-5, "filter_reduce per-tap") != TEST_PASS) return TEST_FAIL;
    CUDA_OK(cudaMemcpy(run ? second : first, pc.d.w, sizeof first, cudaMemcpyDeviceToHost));
  }
  CHECK_MSG(memcmp(first, second, sizeof first) == 0, "two runs of one per-tap plan differ");
  pass_case_free(&pc);
  return TEST_PASS;
}

static const labelled_test_case tests[] = {
    {"filter_reduce_configs", filter_reduce_configs, "cpu"},
    {"filter_reduce_float4_any_alignment", filter_reduce_float4_any_alignment, "gpu"},
    {"filter_reduce_per_tap_matches_reference", filter_reduce_per_tap_matches_reference, "gpu"},
};
TEST_MAIN(tests)
