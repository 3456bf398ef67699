/*
 * test_dynamic.c -- GPU tests of the per-pixel dynamic convolution
 * (CONV_OP_DYNAMIC): the device reference kernels against the CPU
 * reference in double, over the op's fixed shapes (gpu_support.c: k in
 * {3, 5, 7} (and 1), dilation 1 and 2, groups 1, 2 and 4, stride 1 and 2,
 * odd and even sizes, windows larger than the image) and random ones;
 * tuned plans through the public API (execute, backward_data,
 * backward_filter) from tuning and from the cache; deterministic plans
 * repeating their bits; the workspace limit; and a bad input per status.
 * Every config of each dynamic family, on fresh random inputs into
 * NaN-poisoned outputs: tests/families/test_dynamic_direct.c and
 * test_dynamic_unfold_gemm.c (which the command below runs too).  All
 * skip without a GPU.
 *
 *     ctest --test-dir build -L gpu -R test_dynamic --output-on-failure
 */
#include <stdlib.h>
#include <string.h>

#include "algorithms/common/kernels.h"
#include "tests/gpu_support.h"

/* The device reference kernels (what the tuner validates against) agree
 * with the CPU reference to rounding: both accumulate in double. */
static int dynamic_reference_matches_cpu(void) {
  SKIP_WITHOUT_GPU();
  seed_rng();
  int checked = 0;
  for (int d = 0; d < 3; d++) {
    conv_problem *cases;
    size_t n;
    if (dynamic_cases(every_direction[d], &cases, &n) != TEST_PASS) return TEST_FAIL;
    for (size_t i = 0; i < n; i++) {
      host_case hc;
      dev_case dc;
      if (host_case_make(&hc, &cases[i]) != TEST_PASS || dev_case_make(&dc, &hc) != TEST_PASS)
        return TEST_FAIL;
      if (poison(&dc, &hc, 0) != TEST_PASS) return TEST_FAIL;
      if (reference_pass(&dc, &hc, dc.out) != TEST_PASS) return TEST_FAIL;
      CUDA_OK(cudaDeviceSynchronize());
      char key[CONV_PROBLEM_KEY_MAX];
      describe_problem(&cases[i], key, sizeof key);
      if (check_output(&dc, &hc, 0, 1e-6, key) != TEST_PASS) return TEST_FAIL;
      dev_case_free(&dc);
      host_case_free(&hc);
      checked++;
    }
    free(cases);
  }
  printf("SUMMARY dynamic reference kernels: %d cases match the CPU reference\n", checked);
  return TEST_PASS;
}

/* Runs the plan 3 times (direct, capture, replay) into a poisoned output,
 * each checked against the CPU reference; the last output's bits in
 * `bits` when not NULL. */
static int run_and_check(conv_plan *plan, const host_case *hc, const dev_case *dc, float *bits,
                         const char *what) {
  for (int run = 0; run < 3; run++) {
    if (poison(dc, hc, 0) != TEST_PASS) return TEST_FAIL;
    CUDA_OK(cudaDeviceSynchronize());
    CHECK_STATUS(CONV_OK, execute_case(plan, dc, hc->p.direction));
    CUDA_OK(cudaDeviceSynchronize());
    if (check_output(dc, hc, 0, conv_error_bound_for(&hc->p, CONV_ARITH_DIRECT), what) !=
        TEST_PASS)
      return TEST_FAIL;
  }
  if (bits != NULL)
    CUDA_OK(cudaMemcpy(bits, dc->out, (size_t)hc->sh.out_elems * sizeof(float),
                       cudaMemcpyDeviceToHost));
  return TEST_PASS;
}

/* Tuned plans of the three directions, executed as a user would, match
 * the CPU reference; a second context finds them in the cache (no
 * tuning) and its plans match too. */
static int dynamic_plans_match_cpu(void) {
  SKIP_WITHOUT_GPU();
  seed_rng();
  char cache[4096];
  temp_path(cache, sizeof cache, "dynamic");
  int plans = 0;
  for (int d = 0; d < 3; d++)
    for (int i = 0; i < DYNAMIC_SHAPES; i++) {
      if (quick_mode() && i % 3 != 0) continue;
      const conv_problem p =
          dynamic_shape_problem(i, every_direction[d], i % 2 ? CONV_MATH_TF32 : CONV_MATH_STRICT);
      char key[CONV_PROBLEM_KEY_MAX];
      describe_problem(&p, key, sizeof key);
      host_case hc;
      dev_case dc;
      if (host_case_make(&hc, &p) != TEST_PASS || dev_case_make(&dc, &hc) != TEST_PASS)
        return TEST_FAIL;
      for (int again = 0; again < 2; again++) {
        conv_context *ctx;
        if (make_context(&ctx, cache, again ? CONV_POLICY_CACHE_ONLY : tuning_policy(), 0) !=
            TEST_PASS)
          return TEST_FAIL;
        conv_plan *plan = NULL;
        CHECK_MSG(conv_plan_create(ctx, &p, &plan) == CONV_OK, "%s: conv_plan_create: %s", key,
                  conv_context_last_error(ctx));
        conv_plan_info info;
        CHECK_STATUS(CONV_OK, conv_plan_info_get(plan, &info));
        CHECK(info.direction == p.direction);
        CHECK_MSG(strncmp(info.algorithm, "dynamic_", 8) == 0, "%s: won by %s", key,
                  info.algorithm);
        CHECK_MSG(info.source == (again ? CONV_SOURCE_CACHE : CONV_SOURCE_TUNED), "%s: source %d",
                  key, (int)info.source);
        if (!again) printf("%s: %s %s %.4f ms\n", key, info.algorithm, info.config, info.time_ms);
        if (run_and_check(plan, &hc, &dc, NULL, key) != TEST_PASS) return TEST_FAIL;
        conv_plan_destroy(plan);
        CHECK_STATUS(CONV_OK, conv_context_destroy(ctx));
      }
      dev_case_free(&dc);
      host_case_free(&hc);
      plans++;
    }
  remove_db(cache);
  printf("SUMMARY dynamic plans: %d tuned, cached and checked through the public API\n", plans);
  return TEST_PASS;
}

/* A deterministic problem's plan says so, and two runs (and a second plan
 * from the cache) give the same bits. */
static int dynamic_deterministic_plans(void) {
  SKIP_WITHOUT_GPU();
  seed_rng();
  char cache[4096];
  temp_path(cache, sizeof cache, "dynamic-det");
  conv_context *ctx;
  if (make_context(&ctx, cache, tuning_policy(), 0) != TEST_PASS) return TEST_FAIL;
  for (int d = 0; d < 3; d++) {
    conv_problem p = dynamic_shape_problem(1, every_direction[d], CONV_MATH_STRICT);
    p.deterministic = 1;
    char key[CONV_PROBLEM_KEY_MAX];
    describe_problem(&p, key, sizeof key);
    CHECK(strstr(key, " det") != NULL);
    host_case hc;
    dev_case dc;
    if (host_case_make(&hc, &p) != TEST_PASS || dev_case_make(&dc, &hc) != TEST_PASS)
      return TEST_FAIL;
    conv_plan *plan = NULL;
    CHECK_MSG(conv_plan_create(ctx, &p, &plan) == CONV_OK, "%s", conv_context_last_error(ctx));
    conv_plan_info info;
    CHECK_STATUS(CONV_OK, conv_plan_info_get(plan, &info));
    CHECK_MSG(info.deterministic == 1, "%s: %s not deterministic", key, info.algorithm);
    const size_t bytes = (size_t)hc.sh.out_elems * sizeof(float);
    float *first = malloc(bytes), *second = malloc(bytes);
    CHECK(first != NULL && second != NULL);
    if (run_and_check(plan, &hc, &dc, first, key) != TEST_PASS ||
        run_and_check(plan, &hc, &dc, second, key) != TEST_PASS)
      return TEST_FAIL;
    CHECK_MSG(memcmp(first, second, bytes) == 0, "%s: %s gave other bits on a second run", key,
              info.algorithm);
    printf("SUMMARY %s: %s %s, bit-identical runs\n", key, info.algorithm, info.config);
    free(first), free(second);
    conv_plan_destroy(plan);
    dev_case_free(&dc);
    host_case_free(&hc);
  }
  CHECK_STATUS(CONV_OK, conv_context_destroy(ctx));
  remove_db(cache);
  return TEST_PASS;
}

/* A workspace limit below the unfolded tensor leaves the unfold GEMM out
 * (its trials are refused) and the plan uses no more than the limit. */
static int dynamic_workspace_limit(void) {
  SKIP_WITHOUT_GPU();
  char cache[4096];
  temp_path(cache, sizeof cache, "dynamic-ws");
  conv_context *ctx;
  if (make_context(&ctx, cache, tuning_policy(), 4096) != TEST_PASS) return TEST_FAIL;
  const conv_problem p = dynamic_shape_problem(1, CONV_FORWARD, CONV_MATH_STRICT);
  conv_plan *plan = NULL;
  CHECK_MSG(conv_plan_create(ctx, &p, &plan) == CONV_OK, "%s", conv_context_last_error(ctx));
  conv_plan_info info;
  CHECK_STATUS(CONV_OK, conv_plan_info_get(plan, &info));
  CHECK_MSG(info.workspace_bytes <= 4096, "%s uses %zu bytes of workspace, limit 4096",
            info.algorithm, info.workspace_bytes);
  printf("SUMMARY workspace limit 4096: %s %s, %zu bytes\n", info.algorithm, info.config,
         info.workspace_bytes);
  conv_plan_destroy(plan);
  CHECK_STATUS(CONV_OK, conv_context_destroy(ctx));
  remove_db(cache);
  return TEST_PASS;
}

static void even_k(conv_problem *p) { p->r = p->s = 4; }
static void k_not_c(conv_problem *p) { p->k = 2 * p->c; }
static void groups_2(conv_problem *p) { p->groups = 2; } /* of 3 channels */
static void with_bias(conv_problem *p) { p->epilogue = CONV_EPILOGUE_BIAS; }
static void nhwc(conv_problem *p) { p->layout = CONV_LAYOUT_NHWC; }
static void stride_3(conv_problem *p) { p->stride_h = p->stride_w = 3; }
static void pad_0(conv_problem *p) { p->pad_h = p->pad_w = 0; }
/* x 128 x 3 x 2^20 fits, the weights 128 x 25 x 2^20 do not. */
static void weights_2_31(conv_problem *p) { p->n = 128; p->h = p->w = 1024; }

/* conv_plan_create refuses each bad dynamic problem with its status and a
 * message (before touching the device or the cache), and a dynamic plan's
 * execute calls refuse another direction's call and NULL tensors. */
static int dynamic_bad_inputs(void) {
  SKIP_WITHOUT_GPU();
  const struct {
    const char *what;
    void (*mutate)(conv_problem *);
    conv_status expected;
  } cases[] = {
      {"even k", even_k, CONV_EVEN_FILTER},    {"k != c", k_not_c, CONV_BAD_DIMENSION},
      {"groups 2 of 3", groups_2, CONV_BAD_GROUPS}, {"bias", with_bias, CONV_UNSUPPORTED},
      {"nhwc", nhwc, CONV_UNSUPPORTED},        {"stride 3", stride_3, CONV_UNSUPPORTED},
      {"pad 0", pad_0, CONV_BAD_PADDING},      {"weights past 2^31", weights_2_31, CONV_SIZE_OVERFLOW},
  };
  char cache[4096];
  temp_path(cache, sizeof cache, "dynamic-bad");
  conv_context *ctx;
  if (make_context(&ctx, cache, CONV_POLICY_FAST, 0) != TEST_PASS) return TEST_FAIL;
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    conv_problem p = dynamic_shape_problem(0, CONV_FORWARD, CONV_MATH_STRICT);
    cases[i].mutate(&p);
    conv_plan *plan = (conv_plan *)&p; /* must stay untouched */
    const conv_status st = conv_plan_create(ctx, &p, &plan);
    CHECK_MSG(st == cases[i].expected, "%s: %s (%s)", cases[i].what, conv_status_string(st),
              conv_context_last_error(ctx));
    CHECK(plan == (conv_plan *)&p && conv_context_last_error(ctx)[0] != '\0');
    printf("%s: %s: %s\n", cases[i].what, conv_status_string(st), conv_context_last_error(ctx));
  }
  const conv_problem p = dynamic_shape_problem(0, CONV_BACKWARD_DATA, CONV_MATH_STRICT);
  host_case hc;
  dev_case dc;
  if (host_case_make(&hc, &p) != TEST_PASS || dev_case_make(&dc, &hc) != TEST_PASS)
    return TEST_FAIL;
  conv_plan *plan = NULL;
  CHECK_MSG(conv_plan_create(ctx, &p, &plan) == CONV_OK, "%s", conv_context_last_error(ctx));
  CHECK_STATUS(CONV_INVALID_ARGUMENT, conv_plan_execute(plan, 0, dc.x, dc.w, NULL, dc.y));
  CHECK_STATUS(CONV_INVALID_ARGUMENT, conv_plan_backward_filter(plan, 0, dc.x, dc.y, dc.w));
  CHECK_STATUS(CONV_INVALID_ARGUMENT, conv_plan_backward_data(plan, 0, dc.y, NULL, dc.x));
  CHECK(strstr(conv_context_last_error(ctx), "w is NULL") != NULL);
  conv_plan_destroy(plan);
  dev_case_free(&dc);
  host_case_free(&hc);
  CHECK_STATUS(CONV_OK, conv_context_destroy(ctx));
  remove_db(cache);
  printf("SUMMARY dynamic bad inputs: %zu statuses and 3 refused calls\n",
         sizeof cases / sizeof cases[0]);
  return TEST_PASS;
}

static const test_case tests[] = {
    {"dynamic_reference_matches_cpu", dynamic_reference_matches_cpu},
    {"dynamic_plans_match_cpu", dynamic_plans_match_cpu},
    {"dynamic_deterministic_plans", dynamic_deterministic_plans},
    {"dynamic_workspace_limit", dynamic_workspace_limit},
    {"dynamic_bad_inputs", dynamic_bad_inputs},
};
TEST_MAIN(tests)
