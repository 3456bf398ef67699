/*
 * test_api.c -- the C API's error model on a real context: messages kept
 * per thread, and a context that refuses to be destroyed under live plans.
 * Contexts need a GPU, so each test skips (exit 77) without one.
 */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include <cuda_runtime_api.h>
#include <uv.h>

#include "convtune.h"
#include "tests/test.h"

static bool have_gpu(void) {
  int count = 0;
  cudaError_t rc = cudaGetDeviceCount(&count);
  if (rc == cudaSuccess && count > 0) return true;
  printf("no CUDA device (%s): skipping\n", cudaGetErrorString(rc));
  return false;
}

static conv_context *memory_context(void) {
  conv_context_options o;
  conv_context_options_init(&o);
  o.cache_path = ":memory:";
  o.policy = CONV_POLICY_FAST;
  conv_context *ctx = NULL;
  if (conv_context_create(&ctx, &o) != CONV_OK)
    fprintf(stderr, "conv_context_create: %s\n", conv_context_last_error(NULL));
  return ctx;
}

static conv_problem small_problem(void) {
  conv_problem p;
  conv_problem_init(&p);
  p.n = 1;
  p.c = 4;
  p.h = p.w = 8;
  p.k = 8;
  p.r = p.s = 3;
  p.pad_h = p.pad_w = 1;
  return p;
}

/* ---------------------------------------------------------------- per thread */

typedef struct shared_context {
  conv_context *ctx;
  uv_barrier_t failed_first, both_failed;
} shared_context;

typedef struct thread_result {
  conv_status status;
  char message[512];
} thread_result;

static shared_context shared;
static thread_result first_result, second_result;

/* Fails first (bad groups), then reads after the other thread failed too. */
static void fail_first(void *arg) {
  (void)arg;
  conv_problem p = small_problem();
  p.groups = 3;
  conv_plan *plan = NULL;
  first_result.status = conv_plan_create(shared.ctx, &p, &plan);
  uv_barrier_wait(&shared.failed_first);
  uv_barrier_wait(&shared.both_failed);
  snprintf(first_result.message, sizeof first_result.message, "%s",
           conv_context_last_error(shared.ctx));
}

/* Fails second (n = -1), after the first thread's failure. */
static void fail_second(void *arg) {
  (void)arg;
  conv_problem p = small_problem();
  p.n = -1;
  conv_plan *plan = NULL;
  uv_barrier_wait(&shared.failed_first);
  second_result.status = conv_plan_create(shared.ctx, &p, &plan);
  uv_barrier_wait(&shared.both_failed);
  snprintf(second_result.message, sizeof second_result.message, "%s",
           conv_context_last_error(shared.ctx));
}

/* Two threads failing on one context each read their own message (the
 * second failure does not replace the first thread's), a thread without
 * failures reads "", and a new context never shows an old one's message. */
static int errors_are_per_thread(void) {
  if (!have_gpu()) return TEST_SKIP;
  shared.ctx = memory_context();
  CHECK(shared.ctx != NULL);
  CHECK(uv_barrier_init(&shared.failed_first, 2) == 0);
  CHECK(uv_barrier_init(&shared.both_failed, 2) == 0);
  uv_thread_t a, b;
  CHECK(uv_thread_create(&a, fail_first, NULL) == 0);
  CHECK(uv_thread_create(&b, fail_second, NULL) == 0);
  CHECK(uv_thread_join(&a) == 0 && uv_thread_join(&b) == 0);
  uv_barrier_destroy(&shared.failed_first);
  uv_barrier_destroy(&shared.both_failed);
  CHECK_STATUS(CONV_BAD_GROUPS, first_result.status);
  CHECK_STATUS(CONV_BAD_DIMENSION, second_result.status);
  CHECK_MSG(strstr(first_result.message, "groups = 3") != NULL, "first thread read: %s",
            first_result.message);
  CHECK_MSG(strstr(second_result.message, "n = -1") != NULL, "second thread read: %s",
            second_result.message);
  CHECK_MSG(conv_context_last_error(shared.ctx)[0] == '\0', "main thread read: %s",
            conv_context_last_error(shared.ctx));

  conv_problem p = small_problem();
  p.k = 0;
  conv_plan *plan = NULL;
  CHECK_STATUS(CONV_BAD_DIMENSION, conv_plan_create(shared.ctx, &p, &plan));
  CHECK(strstr(conv_context_last_error(shared.ctx), "k = 0") != NULL);
  CHECK_STATUS(CONV_OK, conv_context_destroy(shared.ctx));
  conv_context *fresh = memory_context();
  CHECK(fresh != NULL);
  CHECK_MSG(conv_context_last_error(fresh)[0] == '\0', "new context shows: %s",
            conv_context_last_error(fresh));
  CHECK_STATUS(CONV_OK, conv_context_destroy(fresh));
  return TEST_PASS;
}

/* ---------------------------------------------------------------- destroy */

/* conv_context_destroy under a live plan answers CONV_BUSY and changes
 * nothing: the plan still runs and the context still makes plans; once
 * its plans are gone it is destroyed. */
static int destroy_refuses_live_plans(void) {
  if (!have_gpu()) return TEST_SKIP;
  conv_context *ctx = memory_context();
  CHECK(ctx != NULL);
  conv_problem p = small_problem();
  conv_plan *plan = NULL, *again = NULL;
  CHECK_MSG(conv_plan_create(ctx, &p, &plan) == CONV_OK, "%s", conv_context_last_error(ctx));
  CHECK_STATUS(CONV_BUSY, conv_context_destroy(ctx));
  CHECK_MSG(strstr(conv_context_last_error(ctx), "1 plan made from this context is alive") != NULL,
            "%s", conv_context_last_error(ctx));

  int64_t out_p = 0, out_q = 0;
  CHECK_STATUS(CONV_OK, conv_problem_output_dims(&p, &out_p, &out_q));
  size_t x_bytes = (size_t)(p.n * p.c * p.h * p.w) * sizeof(float);
  size_t w_bytes = (size_t)(p.k * p.c * p.r * p.s) * sizeof(float);
  size_t y_bytes = (size_t)(p.n * p.k * out_p * out_q) * sizeof(float);
  void *x = NULL, *w = NULL, *y = NULL;
  CHECK(cudaMalloc(&x, x_bytes) == cudaSuccess && cudaMalloc(&w, w_bytes) == cudaSuccess &&
        cudaMalloc(&y, y_bytes) == cudaSuccess);
  CHECK(cudaMemset(x, 0, x_bytes) == cudaSuccess && cudaMemset(w, 0, w_bytes) == cudaSuccess);
  CHECK(cudaMemset(y, 0xff, y_bytes) == cudaSuccess); /* NaN: the plan must overwrite it */
  CHECK_STATUS(CONV_OK, conv_plan_execute(plan, NULL, x, w, NULL, y));
  float first = 1.0f;
  CHECK(cudaMemcpy(&first, y, sizeof first, cudaMemcpyDeviceToHost) == cudaSuccess);
  CHECK_MSG(first == 0.0f, "y[0] = %g after a convolution of zeros", first);

  CHECK_STATUS(CONV_OK, conv_plan_create(ctx, &p, &again));
  CHECK(again == plan);
  conv_plan_destroy(again);
  CHECK_STATUS(CONV_BUSY, conv_context_destroy(ctx));
  conv_plan_destroy(plan);
  CHECK_STATUS(CONV_OK, conv_context_destroy(ctx));
  CHECK_STATUS(CONV_OK, conv_context_destroy(NULL));
  cudaFree(x);
  cudaFree(w);
  cudaFree(y);
  return TEST_PASS;
}

static const test_case tests[] = {
    {"errors_are_per_thread", errors_are_per_thread},
    {"destroy_refuses_live_plans", destroy_refuses_live_plans},
};

TEST_MAIN(tests)
