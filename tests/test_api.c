/*
 * test_api.c -- the C API's error model on a real context: messages kept
 * per thread, and a context that refuses to be destroyed under live plans;
 * its log callback, and a library that prints nothing without one.
 * Contexts need a GPU, so each test skips (exit 77) without one.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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

/* ---------------------------------------------------------------- log */

typedef struct log_lines {
  uv_thread_t tuner;      /* the thread that calls conv_plan_create */
  bool other_thread;      /* a message came from another thread     */
  int count, info, debug, timing, warn;
  char first[1024], last[1024];
  conv_log_level last_level;
} log_lines;

static void collect(void *user, conv_log_level level, const char *message) {
  log_lines *l = user;
  uv_thread_t self = uv_thread_self();
  if (!uv_thread_equal(&self, &l->tuner)) l->other_thread = true;
  if (l->count++ == 0) snprintf(l->first, sizeof l->first, "%s", message);
  snprintf(l->last, sizeof l->last, "%s", message);
  l->last_level = level;
  l->info += level == CONV_LOG_INFO;
  l->warn += level <= CONV_LOG_WARN;
  l->debug += level == CONV_LOG_DEBUG;
  l->timing += level == CONV_LOG_DEBUG && strncmp(message, "timing ", 7) == 0;
}

static conv_context *logging_context(log_lines *lines, conv_log_level level) {
  memset(lines, 0, sizeof *lines);
  lines->tuner = uv_thread_self();
  conv_context_options o;
  conv_context_options_init(&o);
  o.cache_path = ":memory:";
  o.policy = CONV_POLICY_FAST;
  o.log = collect;
  o.log_user = lines;
  o.log_level = level;
  conv_context *ctx = NULL;
  if (conv_context_create(&ctx, &o) != CONV_OK)
    fprintf(stderr, "conv_context_create: %s\n", conv_context_last_error(NULL));
  return ctx;
}

/* A context with a log callback gets a tuning's messages on the tuning
 * thread: INFO as it starts and ends, at DEBUG each candidate before it
 * runs ("timing ...") and its outcome; at the default level INFO only;
 * nothing for a plan that needs no tuning. */
static int log_callback_gets_tuning(void) {
  if (!have_gpu()) return TEST_SKIP;
  log_lines lines;
  conv_context *ctx = logging_context(&lines, CONV_LOG_DEBUG);
  CHECK(ctx != NULL);
  conv_problem p = small_problem();
  conv_plan *plan = NULL;
  CHECK_MSG(conv_plan_create(ctx, &p, &plan) == CONV_OK, "%s", conv_context_last_error(ctx));
  CHECK(!lines.other_thread);
  CHECK_MSG(strncmp(lines.first, "tuning fwd ", 11) == 0, "first: %s", lines.first);
  CHECK_MSG(lines.last_level == CONV_LOG_INFO && strncmp(lines.last, "tuned in ", 9) == 0 &&
                strstr(lines.last, "fastest ") != NULL,
            "last: %s", lines.last);
  CHECK_MSG(lines.info == 2 && lines.warn == 0, "%d INFO, %d WARN", lines.info, lines.warn);
  CHECK_MSG(lines.timing > 0 && lines.debug >= 2 * lines.timing, "%d timing of %d DEBUG",
            lines.timing, lines.debug);
  int count = lines.count;
  conv_plan *again = NULL;
  CHECK_STATUS(CONV_OK, conv_plan_create(ctx, &p, &again)); /* the live plan: no tuning */
  CHECK(lines.count == count);
  conv_plan_destroy(again);
  conv_plan_destroy(plan);
  CHECK_STATUS(CONV_OK, conv_context_destroy(ctx));

  ctx = logging_context(&lines, CONV_LOG_INFO);
  CHECK(ctx != NULL);
  CHECK_MSG(conv_plan_create(ctx, &p, &plan) == CONV_OK, "%s", conv_context_last_error(ctx));
  CHECK_MSG(lines.count == 2 && lines.info == 2, "%d messages, %d INFO", lines.count, lines.info);
  conv_plan_destroy(plan);
  CHECK_STATUS(CONV_OK, conv_context_destroy(ctx));
  return TEST_PASS;
}

/* Without a callback the library writes nothing, even with `verbose` set
 * (which printed a line per candidate on stderr before the log callback):
 * stdout and stderr, sent to a file while a context tunes, stay empty. */
static int library_prints_nothing(void) {
  if (!have_gpu()) return TEST_SKIP;
  char path[4096];
  const char *tmp = getenv("CONVTUNE_TEST_TMP");
  snprintf(path, sizeof path, "%s/api-prints-XXXXXX", tmp && tmp[0] ? tmp : "/tmp");
  int file = mkstemp(path);
  CHECK(file >= 0);
  fflush(stdout);
  fflush(stderr);
  int saved_out = dup(1), saved_err = dup(2);
  CHECK(saved_out >= 0 && saved_err >= 0 && dup2(file, 1) == 1 && dup2(file, 2) == 2);

  conv_context_options o;
  conv_context_options_init(&o);
  o.cache_path = ":memory:";
  o.policy = CONV_POLICY_FAST;
  o.verbose = 1;
  conv_context *ctx = NULL;
  conv_status made = conv_context_create(&ctx, &o), tuned = CONV_INTERNAL;
  conv_problem p = small_problem();
  conv_plan *plan = NULL;
  if (made == CONV_OK) tuned = conv_plan_create(ctx, &p, &plan);
  conv_plan_destroy(plan);
  conv_context_destroy(ctx);

  fflush(stdout);
  fflush(stderr);
  dup2(saved_out, 1);
  dup2(saved_err, 2);
  close(saved_out);
  close(saved_err);
  off_t size = lseek(file, 0, SEEK_END);
  char head[512] = "";
  if (size > 0) {
    ssize_t n = pread(file, head, sizeof head - 1, 0);
    head[n > 0 ? n : 0] = '\0';
  }
  close(file);
  unlink(path);
  CHECK_STATUS(CONV_OK, made);
  CHECK_STATUS(CONV_OK, tuned);
  CHECK_MSG(size == 0, "%lld bytes written while tuning, starting:\n%s", (long long)size, head);
  return TEST_PASS;
}

static const test_case tests[] = {
    {"errors_are_per_thread", errors_are_per_thread},
    {"destroy_refuses_live_plans", destroy_refuses_live_plans},
    {"log_callback_gets_tuning", log_callback_gets_tuning},
    {"library_prints_nothing", library_prints_nothing},
};

TEST_MAIN(tests)
