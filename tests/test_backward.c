/*
 * test_backward.c -- GPU tests of the backward passes: the tuner's device
 * reference kernels and tuned backward-data and backward-filter plans, each
 * against the CPU reference (tests/cpu_reference.c, whose adjoint checks
 * are in test_reference.c), on fresh random inputs with poisoned outputs;
 * and the execute functions' refusals.  Each skips (exit 77) without a GPU;
 * the seed is printed (CONVTUNE_TEST_SEED replays it).
 */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "algorithms/kernels.h"
#include "tests/cpu_reference.h"
#include "tests/gpu_support.h"

/* One backward test case: host x, w and dy (random, never zero), the CPU
 * reference of the pass's output, and device copies with an output buffer. */
typedef struct pass_case {
  conv_problem p;
  conv_shape sh;
  float *x, *w, *dy;       /* host inputs; the pass reads two of them     */
  double *ref;             /* CPU reference of dx or dw                   */
  int64_t out_elems;
  float *dev_x, *dev_w, *dev_dy, *dev_out;
} pass_case;

static float *random_host(int64_t count) {
  float *v = malloc((size_t)(count > 0 ? count : 1) * sizeof *v);
  if (v != NULL)
    for (int64_t i = 0; i < count; i++) v[i] = rng_float();
  return v;
}

static float *device_copy(const float *host, int64_t count) {
  float *dev = NULL;
  if (cudaMalloc((void **)&dev, (size_t)count * sizeof *dev) != cudaSuccess) return NULL;
  if (cudaMemcpy(dev, host, (size_t)count * sizeof *dev, cudaMemcpyHostToDevice) != cudaSuccess) {
    cudaFree(dev);
    return NULL;
  }
  return dev;
}

static void pass_case_free(pass_case *pc) {
  free(pc->x);
  free(pc->w);
  free(pc->dy);
  free(pc->ref);
  cudaFree(pc->dev_x);
  cudaFree(pc->dev_w);
  cudaFree(pc->dev_dy);
  cudaFree(pc->dev_out);
  memset(pc, 0, sizeof *pc);
}

static int pass_case_make(pass_case *pc, const conv_problem *p) {
  memset(pc, 0, sizeof *pc);
  pc->p = *p;
  CHECK_STATUS(CONV_OK, conv_problem_shape(p, &pc->sh));
  const bool data = p->direction == CONV_BACKWARD_DATA;
  pc->out_elems = data ? pc->sh.x_elems : pc->sh.w_elems;
  pc->x = random_host(pc->sh.x_elems);
  pc->w = random_host(pc->sh.w_elems);
  pc->dy = random_host(pc->sh.y_elems);
  pc->ref = malloc((size_t)pc->out_elems * sizeof *pc->ref);
  CHECK_MSG(pc->x && pc->w && pc->dy && pc->ref, "out of host memory");
  if (data)
    cpu_backward_data(p, &pc->sh, pc->dy, pc->w, pc->ref);
  else
    cpu_backward_filter(p, &pc->sh, pc->x, pc->dy, pc->ref);
  pc->dev_x = device_copy(pc->x, pc->sh.x_elems);
  pc->dev_w = device_copy(pc->w, pc->sh.w_elems);
  pc->dev_dy = device_copy(pc->dy, pc->sh.y_elems);
  CHECK_MSG(pc->dev_x && pc->dev_w && pc->dev_dy, "device copies failed");
  CUDA_OK(cudaMalloc((void **)&pc->dev_out, (size_t)pc->out_elems * sizeof(float)));
  return TEST_PASS;
}

/* NaN in every output element, so that one left unwritten fails. */
static int pass_poison(const pass_case *pc) {
  CUDA_OK(conv_fill_poison(pc->dev_out, pc->out_elems, 0));
  CUDA_OK(cudaDeviceSynchronize());
  return TEST_PASS;
}

/* Relative L2 error of dev_out against the CPU reference; fails on any
 * non-finite value or an error above `bound`. */
static int pass_check(const pass_case *pc, double bound, const char *what) {
  float *got = malloc((size_t)pc->out_elems * sizeof *got);
  CHECK_MSG(got != NULL, "out of host memory");
  CUDA_OK(cudaMemcpy(got, pc->dev_out, (size_t)pc->out_elems * sizeof *got,
                     cudaMemcpyDeviceToHost));
  double num = 0, den = 0;
  int64_t bad = 0;
  for (int64_t i = 0; i < pc->out_elems; i++) {
    if (!isfinite(got[i])) bad++;
    const double d = (double)got[i] - pc->ref[i];
    num += d * d;
    den += pc->ref[i] * pc->ref[i];
  }
  free(got);
  const double rel = den > 0 ? sqrt(num / den) : sqrt(num);
  char key[CONV_PROBLEM_KEY_MAX];
  describe_problem(&pc->p, key, sizeof key);
  CHECK_MSG(bad == 0 && rel <= bound, "%s, %s: %lld non-finite outputs, relative L2 error %.3g (bound %.1g)",
            what, key, (long long)bad, rel, bound);
  return TEST_PASS;
}

/* A random problem of the generator's kinds (odd sizes, strides, padding,
 * dilation, groups; NCHW, or NHWC), as a backward pass. */
static conv_problem random_pass(conv_direction direction, int i) {
  const conv_math math = i % 2 ? CONV_MATH_TF32 : CONV_MATH_STRICT;
  conv_problem p = i % 3 == 2 ? random_nhwc_problem(math) : random_problem(math);
  p.epilogue = CONV_EPILOGUE_NONE;
  p.direction = direction;
  return p;
}

static int case_count(void) { return quick_mode() ? 6 : 24; }

/* The device reference kernels the tuner validates backward candidates
 * with agree with the CPU reference: to rounding (both accumulate in
 * double), for every layout and group count the generator makes. */
static int reference_backward_matches_cpu(void) {
  SKIP_WITHOUT_GPU();
  seed_rng();
  for (int i = 0; i < 2 * case_count(); i++) {
    const conv_direction direction = i % 2 ? CONV_BACKWARD_FILTER : CONV_BACKWARD_DATA;
    const conv_problem p = random_pass(direction, i / 2);
    pass_case pc;
    if (pass_case_make(&pc, &p) != TEST_PASS || pass_poison(&pc) != TEST_PASS) return TEST_FAIL;
    if (direction == CONV_BACKWARD_DATA)
      CUDA_OK(conv_reference_backward_data(&p, pc.dev_dy, pc.dev_w, pc.dev_out, 0));
    else
      CUDA_OK(conv_reference_backward_filter(&p, pc.dev_x, pc.dev_dy, pc.dev_out, 0));
    CUDA_OK(cudaDeviceSynchronize());
    if (pass_check(&pc, 1e-6, "reference kernel") != TEST_PASS) return TEST_FAIL;
    pass_case_free(&pc);
  }
  return TEST_PASS;
}

/* Runs the plan's pass on pc (output poisoned first). */
static conv_status run_pass(conv_plan *plan, const pass_case *pc) {
  if (pc->p.direction == CONV_BACKWARD_DATA)
    return conv_plan_backward_data(plan, 0, pc->dev_dy, pc->dev_w, pc->dev_out);
  return conv_plan_backward_filter(plan, 0, pc->dev_x, pc->dev_dy, pc->dev_out);
}

/* Tuned backward plans, executed as a user would, match the CPU reference,
 * run twice (the second execute replays or captures a graph), and come
 * back from the context's memory with the same result. */
static int backward_plans_match_cpu(void) {
  SKIP_WITHOUT_GPU();
  seed_rng();
  char cache[4096];
  temp_path(cache, sizeof cache, "backward");
  conv_context *ctx;
  if (make_context(&ctx, cache, tuning_policy(), 0) != TEST_PASS) return TEST_FAIL;
  for (int i = 0; i < 2 * case_count(); i++) {
    const conv_direction direction = i % 2 ? CONV_BACKWARD_FILTER : CONV_BACKWARD_DATA;
    const conv_problem p = random_pass(direction, i / 2);
    pass_case pc;
    if (pass_case_make(&pc, &p) != TEST_PASS) return TEST_FAIL;
    conv_plan *plan = NULL;
    CHECK_MSG(conv_plan_create(ctx, &p, &plan) == CONV_OK, "conv_plan_create: %s",
              conv_context_last_error(ctx));
    conv_plan_info info;
    CHECK_STATUS(CONV_OK, conv_plan_info_get(plan, &info));
    char key[CONV_PROBLEM_KEY_MAX];
    describe_problem(&p, key, sizeof key);
    printf("%s: %s %s %.4f ms\n", key, info.algorithm, info.config, info.time_ms);
    const double bound = conv_error_bound_for(&p, CONV_ARITH_TRANSFORM);
    for (int run = 0; run < 3; run++) {
      if (pass_poison(&pc) != TEST_PASS) return TEST_FAIL;
      CHECK_MSG(run_pass(plan, &pc) == CONV_OK, "execute: %s", conv_context_last_error(ctx));
      CUDA_OK(cudaDeviceSynchronize());
      if (pass_check(&pc, bound, run == 0 ? "first run" : "later run") != TEST_PASS)
        return TEST_FAIL;
    }
    conv_plan_destroy(plan);
    pass_case_free(&pc);
  }
  conv_context_destroy(ctx);
  remove_db(cache);
  return TEST_PASS;
}

/* Each execute function takes plans of its own pass only, and NULL or
 * misaligned tensors are refused with the caller's names for them; none
 * of these touches the output. */
static int passes_reject_wrong_calls(void) {
  SKIP_WITHOUT_GPU();
  seed_rng();
  char cache[4096];
  temp_path(cache, sizeof cache, "backward-refusals");
  conv_context *ctx;
  if (make_context(&ctx, cache, CONV_POLICY_FAST, 0) != TEST_PASS) return TEST_FAIL;
  conv_problem p;
  conv_problem_init(&p);
  p.n = 2; p.c = 8; p.h = 12; p.w = 10; p.k = 6; p.r = 3; p.s = 3;
  p.pad_h = p.pad_w = 1;
  p.direction = CONV_BACKWARD_DATA;
  pass_case pc;
  if (pass_case_make(&pc, &p) != TEST_PASS || pass_poison(&pc) != TEST_PASS) return TEST_FAIL;
  conv_plan *plan = NULL;
  CHECK_MSG(conv_plan_create(ctx, &p, &plan) == CONV_OK, "%s", conv_context_last_error(ctx));
  CHECK_STATUS(CONV_INVALID_ARGUMENT,
               conv_plan_execute(plan, 0, pc.dev_out, pc.dev_w, NULL, pc.dev_dy));
  CHECK(strstr(conv_context_last_error(ctx), "backward-data") != NULL);
  CHECK_STATUS(CONV_INVALID_ARGUMENT,
               conv_plan_backward_filter(plan, 0, pc.dev_x, pc.dev_dy, pc.dev_out));
  CHECK_STATUS(CONV_INVALID_ARGUMENT, conv_plan_backward_data(plan, 0, NULL, pc.dev_w, pc.dev_out));
  CHECK(strstr(conv_context_last_error(ctx), "dy is NULL") != NULL);
  CHECK_STATUS(CONV_INVALID_ARGUMENT,
               conv_plan_backward_data(plan, 0, pc.dev_dy, pc.dev_w, (char *)pc.dev_out + 4));
  CHECK(strstr(conv_context_last_error(ctx), "dx is not") != NULL);
  /* Nothing ran: the output is still all NaN. */
  float *got = malloc((size_t)pc.out_elems * sizeof *got);
  CHECK(got != NULL);
  CUDA_OK(cudaMemcpy(got, pc.dev_out, (size_t)pc.out_elems * sizeof *got, cudaMemcpyDeviceToHost));
  for (int64_t i = 0; i < pc.out_elems; i++) CHECK_MSG(isnan(got[i]), "dx[%lld] was written", (long long)i);
  free(got);
  /* A forward plan refuses the backward calls. */
  conv_problem f = p;
  f.direction = CONV_FORWARD;
  conv_plan *forward = NULL;
  CHECK_MSG(conv_plan_create(ctx, &f, &forward) == CONV_OK, "%s", conv_context_last_error(ctx));
  CHECK(forward != plan);
  CHECK_STATUS(CONV_INVALID_ARGUMENT,
               conv_plan_backward_data(forward, 0, pc.dev_dy, pc.dev_w, pc.dev_out));
  CHECK(strstr(conv_context_last_error(ctx), "forward") != NULL);
  conv_plan_destroy(forward);
  conv_plan_destroy(plan);
  pass_case_free(&pc);
  conv_context_destroy(ctx);
  remove_db(cache);
  return TEST_PASS;
}

static const test_case tests[] = {
    {"reference_backward_matches_cpu", reference_backward_matches_cpu},
    {"backward_plans_match_cpu", backward_plans_match_cpu},
    {"passes_reject_wrong_calls", passes_reject_wrong_calls},
};
TEST_MAIN(tests)
