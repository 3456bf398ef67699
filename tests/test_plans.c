/*
 * test_plans.c -- GPU tests of plans end to end: tuning into a cache,
 * executing on streams, sharing plans, graph replay against direct runs,
 * winners executed inside a caller's capture,
 * plans read back by a new process, argument checks, failing candidates
 * recorded, the cache-only policy, bad rows of either cache layer passed
 * over (the predict policy: test_predict_plans.c).  Each skips (exit 77)
 * on a machine without a GPU; the seed of the random inputs is printed
 * (CONVTUNE_TEST_SEED replays it).
 */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sqlite3.h>

#include "cache/cache.h"
#include "runtime/context.h"
#include "tests/gpu_support.h"
#include "tests/plan_support.h"
#include "tuner/tuner.h"

static int plan_executes_correctly(void) {
  SKIP_WITHOUT_GPU();
  seed_rng();
  char cache[4096];
  temp_path(cache, sizeof cache, "plan");
  conv_context *ctx;
  if (make_context(&ctx, cache, tuning_policy(), 0) != TEST_PASS) return TEST_FAIL;
  for (int i = 0; i < 4; i++) {
    conv_problem p = i == 0 ? fixed_problem() : random_problem(i % 2 ? CONV_MATH_TF32 : CONV_MATH_STRICT);
    if (plan_roundtrip(ctx, &p, 0, CONV_SOURCE_TUNED) != TEST_PASS) return TEST_FAIL;
    if (plan_roundtrip(ctx, &p, 0, CONV_SOURCE_MEMORY) != TEST_PASS) return TEST_FAIL;
  }
  conv_context_destroy(ctx);
  remove_db(cache);
  return TEST_PASS;
}

/* Creations of one problem share a live plan; the last destroy frees it,
 * and the next creation rebuilds it from the context's memory. */
static int plans_of_one_problem_are_shared(void) {
  SKIP_WITHOUT_GPU();
  seed_rng();
  char cache[4096];
  temp_path(cache, sizeof cache, "shared");
  conv_context *ctx;
  if (make_context(&ctx, cache, CONV_POLICY_FAST, 0) != TEST_PASS) return TEST_FAIL;
  conv_problem p = fixed_problem();
  conv_plan *first = NULL, *second = NULL, *other = NULL;
  CHECK_MSG(conv_plan_create(ctx, &p, &first) == CONV_OK, "%s", conv_context_last_error(ctx));
  CHECK_MSG(conv_plan_create(ctx, &p, &second) == CONV_OK, "%s", conv_context_last_error(ctx));
  CHECK_MSG(first == second, "a second creation of a live problem made another plan");
  conv_problem q = p;
  q.math = CONV_MATH_TF32;
  CHECK_MSG(conv_plan_create(ctx, &q, &other) == CONV_OK, "%s", conv_context_last_error(ctx));
  CHECK_MSG(other != first, "another problem got the same plan");
  conv_plan_destroy(other);
  conv_plan_destroy(first);
  /* One reference left: the plan still runs. */
  host_case hc;
  dev_case d;
  if (host_case_make(&hc, &p) != TEST_PASS || dev_case_make(&d, &hc) != TEST_PASS) return TEST_FAIL;
  if (poison(&d, &hc, 0) != TEST_PASS) return TEST_FAIL;
  CHECK_STATUS(CONV_OK, conv_plan_execute(second, 0, d.x, d.w, d.bias, d.y));
  if (check_output(&d, &hc, 0, conv_error_bound(p.math, CONV_ARITH_TRANSFORM), "shared plan") != TEST_PASS)
    return TEST_FAIL;
  conv_plan_destroy(second);
  dev_case_free(&d);
  host_case_free(&hc);
  /* Freed: the next creation rebuilds the remembered choice. */
  if (plan_roundtrip(ctx, &p, 0, CONV_SOURCE_MEMORY) != TEST_PASS) return TEST_FAIL;
  conv_context_destroy(ctx);
  remove_db(cache);
  return TEST_PASS;
}

/* ---- graph replay */

static int copy_output(const dev_case *d, const host_case *hc, float *dst) {
  CUDA_OK(cudaMemcpy(dst, d->y, (size_t)hc->sh.y_elems * sizeof(float), cudaMemcpyDeviceToHost));
  return TEST_PASS;
}

/* Executes `plan` on d (poisoned first), checks y against the CPU
 * reference and leaves a copy in `out`. */
static int execute_checked(conv_plan *plan, const conv_problem *p, const dev_case *d,
                           const host_case *hc, float *out, const char *what) {
  if (poison(d, hc, 0) != TEST_PASS) return TEST_FAIL;
  CHECK_STATUS(CONV_OK, conv_plan_execute(plan, 0, d->x, d->w, d->bias, d->y));
  if (check_output(d, hc, 0, conv_error_bound(p->math, CONV_ARITH_TRANSFORM), what) != TEST_PASS)
    return TEST_FAIL;
  return copy_output(d, hc, out);
}

/* Buffer sets per replay case: more than the 32 graphs a plan keeps.  The
 * order below (REPLAY_STEPS executes) walks conv_plan_execute's rules
 * (an execute that captures also launches the new graph):
 * - all 34 sets once: first sightings run directly (34 direct runs);
 * - all again: 0..31 are captured into free slots; 32 and 33 each update
 *   the least recently used graph in place (sets 0's and 1's), since 32
 *   launches pay for up to 8 updates;
 * - 0..31: 0..7 no longer have graphs and update the least recently used
 *   ones while launches >= 4 x (updates + 1); at set 8, 42 launches < 44:
 *   sets 8 and 9 run directly, 10..31 replay;
 * - 32, 33, 0, 33, 0: replays.
 * Totals: 36 direct runs, 42 captures, 69 launches. */
#define REPLAY_SETS 34
#define REPLAY_STEPS (REPLAY_SETS + REPLAY_SETS + 32 + 3 + 2)

static void replay_order(int order[REPLAY_STEPS]) {
  int n = 0;
  for (int pass = 0; pass < 2; pass++)
    for (int i = 0; i < REPLAY_SETS; i++) order[n++] = i;
  for (int i = 0; i < 32; i++) order[n++] = i;
  const int tail[] = {32, 33, 0, 33, 0};
  for (int i = 0; i < 5; i++) order[n++] = tail[i];
}

static int replay_case(conv_context *graphs, conv_context *direct, const conv_problem *p,
                       int *replayed) {
  host_case hc;
  dev_case d[REPLAY_SETS];
  if (host_case_make(&hc, p) != TEST_PASS) return TEST_FAIL;
  for (int i = 0; i < REPLAY_SETS; i++)
    if (dev_case_make(&d[i], &hc) != TEST_PASS) return TEST_FAIL;
  conv_plan *pg = NULL, *pd = NULL;
  CHECK_MSG(conv_plan_create(graphs, p, &pg) == CONV_OK, "%s", conv_context_last_error(graphs));
  CHECK_MSG(conv_plan_create(direct, p, &pd) == CONV_OK, "%s", conv_context_last_error(direct));
  conv_plan_info ig, id;
  CHECK_STATUS(CONV_OK, conv_plan_info_get(pg, &ig));
  CHECK_STATUS(CONV_OK, conv_plan_info_get(pd, &id));
  CHECK(ig.replay == CONV_REPLAY_PENDING && id.replay == CONV_REPLAY_DIRECT);
  CHECK(id.source == CONV_SOURCE_CACHE && strcmp(ig.algorithm, id.algorithm) == 0 &&
        strcmp(ig.config, id.config) == 0);
  const size_t bytes = (size_t)hc.sh.y_elems * sizeof(float);
  float *yg = malloc(bytes), *yd = malloc(bytes), *first = malloc(bytes);
  CHECK(yg != NULL && yd != NULL && first != NULL);
  int order[REPLAY_STEPS];
  replay_order(order);
  for (int step = 0; step < REPLAY_STEPS; step++) {
    const dev_case *set = &d[order[step]];
    if (execute_checked(pg, p, set, &hc, yg, "graph plan") != TEST_PASS ||
        execute_checked(pd, p, set, &hc, yd, "direct plan") != TEST_PASS)
      return TEST_FAIL;
    CHECK_MSG(memcmp(yg, yd, bytes) == 0, "%s %s, step %d: graph replay and direct launches differ",
              ig.algorithm, ig.config, step);
    if (step == 0) memcpy(first, yg, bytes);
    CHECK_MSG(memcmp(yg, first, bytes) == 0, "%s %s, step %d: another result than step 0's",
              ig.algorithm, ig.config, step);
  }
  CHECK_STATUS(CONV_OK, conv_plan_info_get(pg, &ig));
  CHECK_STATUS(CONV_OK, conv_plan_info_get(pd, &id));
  CHECK(ig.replay == CONV_REPLAY_GRAPH || (ig.replay == CONV_REPLAY_DIRECT && ig.replay_note[0]));
  printf("%s %s: %s%s (%llu launches, %llu captures, %llu direct)\n", ig.algorithm, ig.config,
         ig.replay == CONV_REPLAY_GRAPH ? "graph replay" : "direct launches: ", ig.replay_note,
         (unsigned long long)ig.graph_launches, (unsigned long long)ig.graph_captures,
         (unsigned long long)ig.direct_runs);
  CHECK(id.direct_runs == REPLAY_STEPS && id.graph_launches == 0 && id.graph_captures == 0);
  if (ig.replay == CONV_REPLAY_GRAPH)
    CHECK_MSG(ig.direct_runs == 36 && ig.graph_captures == 42 && ig.graph_launches == 69,
              "%s: %llu direct runs, %llu captures, %llu launches; expected 36, 42, 69", ig.algorithm,
              (unsigned long long)ig.direct_runs, (unsigned long long)ig.graph_captures,
              (unsigned long long)ig.graph_launches);
  else
    CHECK(ig.direct_runs == REPLAY_STEPS);
  *replayed += ig.replay == CONV_REPLAY_GRAPH;
  free(yg);
  free(yd);
  free(first);
  conv_plan_destroy(pg);
  conv_plan_destroy(pd);
  for (int i = 0; i < REPLAY_SETS; i++) dev_case_free(&d[i]);
  host_case_free(&hc);
  return TEST_PASS;
}

/* Graph replay gives the bits of direct launches, on shapes where each
 * family tends to win (depthwise, patches, a 31x31 few-channel filter, a
 * dense 3x3, a 1x1, an 8x8 board with 256 channels); which one won is
 * printed. */
static int graph_replay_matches_direct(void) {
  SKIP_WITHOUT_GPU();
  seed_rng();
  const conv_math S = CONV_MATH_STRICT, T = CONV_MATH_TF32;
  const conv_problem cases[] = {
      direct_problem(2, 8, 56, 56, 8, 3, 3, 1, 1, 1, 8, CONV_EPILOGUE_BIAS_RELU, S),
      direct_problem(256, 32, 4, 4, 64, 3, 3, 1, 1, 1, 1, CONV_EPILOGUE_BIAS, T),
      direct_problem(1, 4, 128, 128, 4, 31, 31, 1, 15, 1, 1, CONV_EPILOGUE_NONE, S),
      direct_problem(4, 64, 28, 28, 64, 3, 3, 1, 1, 1, 1, CONV_EPILOGUE_NONE, S),
      direct_problem(8, 64, 14, 14, 128, 1, 1, 1, 0, 1, 1, CONV_EPILOGUE_BIAS, T),
      direct_problem(1, 256, 8, 8, 256, 3, 3, 1, 1, 1, 1, CONV_EPILOGUE_BIAS_RELU, S),
  };
  char cache[4096];
  temp_path(cache, sizeof cache, "replay");
  conv_context *graphs, *direct;
  if (make_context(&graphs, cache, tuning_policy(), 0) != TEST_PASS) return TEST_FAIL;
  conv_context_options o;
  conv_context_options_init(&o);
  o.cache_path = cache;
  o.policy = CONV_POLICY_CACHE_ONLY;
  o.direct_launches = 1;
  CHECK_MSG(conv_context_create(&direct, &o) == CONV_OK, "%s", conv_context_last_error(NULL));
  int replayed = 0;
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    if (replay_case(graphs, direct, &cases[i], &replayed) != TEST_PASS) return TEST_FAIL;
  /* Our own kernels are always capturable. */
  CHECK_MSG(replayed > 0, "no plan replayed a graph");
  conv_context_destroy(direct);
  conv_context_destroy(graphs);
  remove_db(cache);
  return TEST_PASS;
}

/* ---- plan reuse from the cache in a new process */

typedef struct child_result {
  int64_t exit_status;
  int term_signal;
} child_result;

static void on_child_exit(uv_process_t *proc, int64_t exit_status, int term_signal) {
  child_result *r = proc->data;
  r->exit_status = exit_status;
  r->term_signal = term_signal;
  uv_close((uv_handle_t *)proc, NULL);
}

static int spawn_self(char **args, child_result *result) {
  uv_loop_t loop;
  CHECK(uv_loop_init(&loop) == 0);
  uv_stdio_container_t stdio[3];
  for (int i = 0; i < 3; i++) {
    stdio[i].flags = UV_INHERIT_FD;
    stdio[i].data.fd = i;
  }
  uv_process_options_t options;
  memset(&options, 0, sizeof options);
  options.file = test_argv0;
  options.args = args;
  options.exit_cb = on_child_exit;
  options.stdio = stdio;
  options.stdio_count = 3;
  uv_process_t proc;
  proc.data = result;
  result->exit_status = -1;
  int rc = uv_spawn(&loop, &proc, &options);
  CHECK_MSG(rc == 0, "uv_spawn: %s", uv_strerror(rc));
  CHECK(uv_run(&loop, UV_RUN_DEFAULT) == 0);
  CHECK(uv_loop_close(&loop) == 0);
  return TEST_PASS;
}

static int plan_from_cache_in_new_process(void) {
  SKIP_WITHOUT_GPU();
  seed_rng();
  conv_problem p = fixed_problem();
  if (test_argc == 2 && strcmp(test_args[0], "child") == 0) {
    /* Child: cache-only, so anything but a cache hit fails. */
    conv_context *ctx;
    if (make_context(&ctx, test_args[1], CONV_POLICY_CACHE_ONLY, 0) != TEST_PASS) return TEST_FAIL;
    if (plan_roundtrip(ctx, &p, 0, CONV_SOURCE_CACHE) != TEST_PASS) return TEST_FAIL;
    conv_context_destroy(ctx);
    return TEST_PASS;
  }
  char cache[4096];
  temp_path(cache, sizeof cache, "newproc");
  conv_context *ctx;
  if (make_context(&ctx, cache, CONV_POLICY_FAST, 0) != TEST_PASS) return TEST_FAIL;
  if (plan_roundtrip(ctx, &p, 0, CONV_SOURCE_TUNED) != TEST_PASS) return TEST_FAIL;
  conv_context_destroy(ctx);
  char *args[] = {(char *)test_argv0, "plan_from_cache_in_new_process", "child", cache, NULL};
  child_result result;
  if (spawn_self(args, &result) != TEST_PASS) return TEST_FAIL;
  CHECK_MSG(result.exit_status == 0 && result.term_signal == 0, "child exited %lld (signal %d)",
            (long long)result.exit_status, result.term_signal);
  remove_db(cache);
  return TEST_PASS;
}

static int nondefault_stream(void) {
  SKIP_WITHOUT_GPU();
  seed_rng();
  char cache[4096];
  temp_path(cache, sizeof cache, "stream");
  conv_context *ctx;
  if (make_context(&ctx, cache, CONV_POLICY_FAST, 0) != TEST_PASS) return TEST_FAIL;
  cudaStream_t stream;
  CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  conv_problem p = fixed_problem();
  p.n = 8;
  if (plan_roundtrip(ctx, &p, stream, CONV_SOURCE_TUNED) != TEST_PASS) return TEST_FAIL;
  p.math = CONV_MATH_TF32;
  if (plan_roundtrip(ctx, &p, stream, CONV_SOURCE_TUNED) != TEST_PASS) return TEST_FAIL;
  CUDA_OK(cudaStreamDestroy(stream));
  conv_context_destroy(ctx);
  remove_db(cache);
  return TEST_PASS;
}

typedef struct uncapturable_census {
  int refused;   /* trials refused because their runs cannot be captured */
  int misfiled;  /* ... of them not CONV_UNSUPPORTED, or marked winner */
} uncapturable_census;

static int count_uncapturable(const conv_cache_row *row, void *user) {
  uncapturable_census *c = user;
  if (strstr(row->trial->reason, "cannot be captured into a CUDA graph") == NULL) return 0;
  c->refused++;
  c->misfiled += row->trial->status != CONV_UNSUPPORTED || row->trial->winner;
  return 0;
}

/* A caller capturing its own stream (a whole model in one CUDA graph)
 * records each plan's run as it is, so every winner must capture: an
 * exhaustive tuning of alexnet's first two shapes (n 2), where cuDNN 9.19
 * offers engines that create a texture object as they execute (their
 * capture fails), and each plan executed inside the caller's capture,
 * replayed into a poisoned output and checked. */
static int winners_capture_in_callers_graph(void) {
  SKIP_WITHOUT_GPU();
  seed_rng();
  char cache[4096];
  temp_path(cache, sizeof cache, "callerscapture");
  conv_context *ctx;
  if (make_context(&ctx, cache, CONV_POLICY_EXHAUSTIVE, 0) != TEST_PASS) return TEST_FAIL;
  cudaStream_t stream;
  CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  const conv_problem shapes[] = {
      direct_problem(2, 3, 224, 224, 64, 11, 11, 4, 2, 1, 1, CONV_EPILOGUE_BIAS, CONV_MATH_STRICT),
      direct_problem(2, 192, 13, 13, 384, 3, 3, 1, 1, 1, 1, CONV_EPILOGUE_BIAS, CONV_MATH_STRICT),
  };
  for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
    const conv_problem *p = &shapes[i];
    host_case hc;
    dev_case d;
    if (host_case_make(&hc, p) != TEST_PASS || dev_case_make(&d, &hc) != TEST_PASS)
      return TEST_FAIL;
    conv_plan *plan = NULL;
    CHECK_MSG(conv_plan_create(ctx, p, &plan) == CONV_OK, "%s", conv_context_last_error(ctx));
    conv_plan_info info;
    CHECK_STATUS(CONV_OK, conv_plan_info_get(plan, &info));
    char key[CONV_PROBLEM_KEY_MAX];
    CHECK_STATUS(CONV_OK, conv_problem_key(p, key, sizeof key));
    conv_error err = {CONV_OK, ""};
    uncapturable_census census = {0, 0};
    CHECK_STATUS(CONV_OK, conv_cache_list_trials(conv_context_cache(ctx), key, count_uncapturable,
                                                 &census, &err));
    printf("%s: %s %s, %d configs refused as uncapturable\n", key, info.algorithm, info.config,
           census.refused);
    CHECK(census.misfiled == 0);
    if (poison(&d, &hc, stream) != TEST_PASS) return TEST_FAIL;
    cudaGraph_t graph = NULL;
    cudaGraphExec_t exec = NULL;
    CUDA_OK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
    conv_status st = conv_plan_execute(plan, stream, d.x, d.w, d.bias, d.y);
    cudaError_t ended = cudaStreamEndCapture(stream, &graph);
    CHECK_MSG(st == CONV_OK, "execute under the caller's capture: %s",
              conv_context_last_error(ctx));
    CUDA_OK(ended);
    CUDA_OK(cudaGraphInstantiate(&exec, graph, 0));
    CUDA_OK(cudaGraphLaunch(exec, stream));
    if (check_output(&d, &hc, stream, conv_error_bound(p->math, CONV_ARITH_TRANSFORM),
                     "caller's graph") != TEST_PASS)
      return TEST_FAIL;
    CUDA_OK(cudaGraphExecDestroy(exec));
    CUDA_OK(cudaGraphDestroy(graph));
    conv_plan_destroy(plan);
    dev_case_free(&d);
    host_case_free(&hc);
  }
  CUDA_OK(cudaStreamDestroy(stream));
  conv_context_destroy(ctx);
  remove_db(cache);
  return TEST_PASS;
}

static int execute_rejects_bad_arguments(void) {
  SKIP_WITHOUT_GPU();
  seed_rng();
  char cache[4096];
  temp_path(cache, sizeof cache, "badargs");
  conv_context *ctx;
  if (make_context(&ctx, cache, CONV_POLICY_FAST, 0) != TEST_PASS) return TEST_FAIL;
  conv_problem bad = fixed_problem();
  bad.groups = 5;
  conv_plan *plan = (conv_plan *)0x1;
  CHECK_STATUS(CONV_BAD_GROUPS, conv_plan_create(ctx, &bad, &plan));
  CHECK(plan == (conv_plan *)0x1);
  CHECK(strstr(conv_context_last_error(ctx), "groups") != NULL);
  bad = fixed_problem();
  bad.direction = CONV_BACKWARD_FILTER;
  CHECK_STATUS(CONV_UNSUPPORTED, conv_plan_create(ctx, &bad, &plan));
  CHECK_STATUS(CONV_INVALID_ARGUMENT, conv_plan_create(ctx, NULL, &plan));

  conv_problem p = fixed_problem();
  host_case hc;
  dev_case d;
  if (host_case_make(&hc, &p) != TEST_PASS || dev_case_make(&d, &hc) != TEST_PASS) return TEST_FAIL;
  CHECK_STATUS(CONV_OK, conv_plan_create(ctx, &p, &plan));
  if (poison(&d, &hc, 0) != TEST_PASS) return TEST_FAIL;
  CHECK_STATUS(CONV_INVALID_ARGUMENT, conv_plan_execute(plan, 0, NULL, d.w, d.bias, d.y));
  CHECK_STATUS(CONV_INVALID_ARGUMENT, conv_plan_execute(plan, 0, d.x, NULL, d.bias, d.y));
  CHECK_STATUS(CONV_INVALID_ARGUMENT, conv_plan_execute(plan, 0, d.x, d.w, d.bias, NULL));
  CHECK_STATUS(CONV_INVALID_ARGUMENT, conv_plan_execute(plan, 0, d.x, d.w, NULL, d.y));
  CHECK(strstr(conv_context_last_error(ctx), "bias") != NULL);
  CHECK_STATUS(CONV_INVALID_ARGUMENT, conv_plan_execute(plan, 0, d.x + 1, d.w, d.bias, d.y));
  CHECK(strstr(conv_context_last_error(ctx), "aligned") != NULL);
  /* Rejected calls wrote nothing: y is still all poison. */
  uint32_t first = 0;
  CUDA_OK(cudaMemcpy(&first, d.y, sizeof first, cudaMemcpyDeviceToHost));
  CHECK(first == 0xFFFFFFFFu);
  CHECK_STATUS(CONV_INVALID_ARGUMENT, conv_plan_info_get(plan, NULL));
  conv_plan_destroy(plan);
  dev_case_free(&d);
  host_case_free(&hc);
  conv_context_destroy(ctx);
  remove_db(cache);
  return TEST_PASS;
}

/* Tunes fixed_problem() exhaustively into a fresh cache (`name`) with a
 * workspace limit (0: the default), then passes each of its trials to fn. */
static int tune_fixed_problem(const char *name, size_t workspace_limit, conv_cache_row_fn fn,
                              void *user) {
  seed_rng();
  char cache[4096];
  temp_path(cache, sizeof cache, name);
  conv_context *ctx;
  if (make_context(&ctx, cache, CONV_POLICY_EXHAUSTIVE, workspace_limit) != TEST_PASS)
    return TEST_FAIL;
  conv_problem p = fixed_problem();
  if (plan_roundtrip(ctx, &p, 0, CONV_SOURCE_TUNED) != TEST_PASS) return TEST_FAIL;
  char key[CONV_PROBLEM_KEY_MAX];
  CHECK_STATUS(CONV_OK, conv_problem_key(&p, key, sizeof key));
  conv_error err = {CONV_OK, ""};
  CHECK_STATUS(CONV_OK, conv_cache_list_trials(conv_context_cache(ctx), key, fn, user, &err));
  conv_context_destroy(ctx);
  remove_db(cache);
  return TEST_PASS;
}

/* With a 1-byte workspace limit, every candidate needing scratch is recorded
 * as failed with its reason, and tuning still returns a valid plan. */
static int failing_candidates_recorded(void) {
  SKIP_WITHOUT_GPU();
  trial_census census = {0};
  if (tune_fixed_problem("failing", 1, count_trial, &census) != TEST_PASS) return TEST_FAIL;
  printf("%d trials, %d over the workspace limit, %d winner\n", census.total, census.workspace_limited,
         census.winners);
  CHECK(census.workspace_limited > 0);
  CHECK(census.winners == 1 && census.winner_workspace <= 1);
  CHECK(census.total > census.workspace_limited);
  return TEST_PASS;
}

/* Trials timed in full (OK, not abandoned) and those the finalists
 * pushed out; the winner's time and the fastest timed in full. */
typedef struct finalist_census {
  int timed_in_full, screened_out, winners;
  double winner_ms, fastest_ms;
} finalist_census;

static int count_finalist(const conv_cache_row *row, void *user) {
  finalist_census *c = user;
  const conv_trial *t = row->trial;
  if (t->status != CONV_OK) return 0;
  if (t->winner) {
    c->winners++;
    c->winner_ms = t->time_ms;
  }
  if (strstr(t->reason, "in its screen") != NULL) c->screened_out++;
  if (strncmp(t->reason, "abandoned:", 10) == 0) return 0; /* t->abandoned is not stored */
  c->timed_in_full++;
  if (c->fastest_ms <= 0 || t->time_ms < c->fastest_ms) c->fastest_ms = t->time_ms;
  return 0;
}

/* Only the finalists (tuner.h) are timed in full, and the winner is the
 * fastest of them; every other config that ran is abandoned. */
static int finalists_timed_in_full(void) {
  SKIP_WITHOUT_GPU();
  finalist_census c = {0};
  if (tune_fixed_problem("finalists", 0, count_finalist, &c) != TEST_PASS) return TEST_FAIL;
  printf("%d timed in full, %d screened out behind the finalists, winner %.4f ms\n",
         c.timed_in_full, c.screened_out, c.winner_ms);
  CHECK(c.timed_in_full >= 1 && c.timed_in_full <= CONV_FINALISTS);
  CHECK(c.winners == 1 && c.winner_ms > 0 && c.winner_ms == c.fastest_ms);
  return TEST_PASS;
}

static int cache_only_policy(void) {
  SKIP_WITHOUT_GPU();
  char cache[4096];
  temp_path(cache, sizeof cache, "cacheonly");
  conv_context *ctx;
  if (make_context(&ctx, cache, CONV_POLICY_CACHE_ONLY, 0) != TEST_PASS) return TEST_FAIL;
  conv_problem p = fixed_problem();
  conv_plan *plan = NULL;
  CHECK_STATUS(CONV_CACHE_MISS, conv_plan_create(ctx, &p, &plan));
  CHECK(plan == NULL);
  CHECK(strstr(conv_context_last_error(ctx), "cache") != NULL);
  conv_context_destroy(ctx);
  remove_db(cache);
  return TEST_PASS;
}

/* The whole file at path (free() it), or NULL. */
static char *file_contents(const char *path, size_t *size) {
  FILE *f = fopen(path, "rb");
  if (f == NULL) return NULL;
  char *data = NULL;
  size_t cap = 0, n = 0, got;
  do {
    if (n == cap) {
      char *grown = realloc(data, cap = cap ? cap * 2 : 65536);
      if (grown == NULL) break;
      data = grown;
    }
    got = fread(data + n, 1, cap - n, f);
    n += got;
  } while (got > 0);
  fclose(f);
  *size = n;
  return data;
}

static int count_winner(const conv_cache_entry *e, void *user) {
  (void)e;
  ++*(int *)user;
  return 0;
}

/* A read-only system cache under the user's: a shape tuned into it is
 * found there by a context whose own cache lacks it, without timing or
 * writing; a shape missing from both is tuned into the user's cache only;
 * cache-only names both; a missing system cache fails the create; "" and
 * $CONVTUNE_SYSTEM_CACHE choose none or one. */
static int system_cache_layer(void) {
  SKIP_WITHOUT_GPU();
  seed_rng();
  char system[4096], user[4096], user2[4096];
  temp_path(system, sizeof system, "system");
  temp_path(user, sizeof user, "user");
  temp_path(user2, sizeof user2, "user2");
  conv_problem p = fixed_problem(), q = fixed_problem(), r = fixed_problem();
  q.n = 3;
  r.n = 5;
  conv_context *ctx;
  if (make_context(&ctx, system, CONV_POLICY_FAST, 0) != TEST_PASS) return TEST_FAIL;
  if (plan_roundtrip(ctx, &p, 0, CONV_SOURCE_TUNED) != TEST_PASS) return TEST_FAIL;
  CHECK_STATUS(CONV_OK, conv_context_destroy(ctx));
  size_t before_size = 0, after_size = 0;
  char *before = file_contents(system, &before_size);
  CHECK(before != NULL && before_size > 0);

  CHECK_MSG(layered_context(&ctx, user, system, CONV_POLICY_FAST) == CONV_OK, "%s",
            conv_context_last_error(NULL));
  if (plan_roundtrip(ctx, &p, 0, CONV_SOURCE_SYSTEM_CACHE) != TEST_PASS) return TEST_FAIL;
  if (plan_roundtrip(ctx, &q, 0, CONV_SOURCE_TUNED) != TEST_PASS) return TEST_FAIL;
  CHECK_STATUS(CONV_OK, conv_context_destroy(ctx));
  char *after = file_contents(system, &after_size);
  CHECK(after != NULL && after_size == before_size && memcmp(before, after, before_size) == 0);
  free(before);
  free(after);
  /* The user's cache holds q's tuning only. */
  conv_cache_reader *reader = NULL;
  char message[512];
  CHECK_MSG(conv_cache_reader_open(user, &reader, message, sizeof message) == CONV_OK, "%s", message);
  int winners = 0;
  CHECK_STATUS(CONV_OK, conv_cache_reader_winners(reader, count_winner, &winners, message,
                                                  sizeof message));
  conv_cache_reader_close(reader);
  CHECK_MSG(winners == 1, "%d winners in the user's cache", winners);

  /* Cache-only: p from the system layer, r in neither (both named). */
  CHECK(layered_context(&ctx, user2, system, CONV_POLICY_CACHE_ONLY) == CONV_OK);
  if (plan_roundtrip(ctx, &p, 0, CONV_SOURCE_SYSTEM_CACHE) != TEST_PASS) return TEST_FAIL;
  conv_plan *plan = NULL;
  CHECK_STATUS(CONV_CACHE_MISS, conv_plan_create(ctx, &r, &plan));
  CHECK(plan == NULL && strstr(conv_context_last_error(ctx), system) != NULL);
  CHECK_STATUS(CONV_OK, conv_context_destroy(ctx));

  /* A missing system cache is an error that names it, and no context. */
  ctx = NULL;
  CHECK_STATUS(CONV_CACHE_ERROR,
               layered_context(&ctx, user2, "/nonexistent/convtune/system.db", CONV_POLICY_FAST));
  CHECK(ctx == NULL && strstr(conv_context_last_error(NULL), "/nonexistent/convtune") != NULL);

  /* NULL takes $CONVTUNE_SYSTEM_CACHE; "" is none. */
  CHECK(setenv("CONVTUNE_SYSTEM_CACHE", system, 1) == 0);
  CHECK(layered_context(&ctx, user2, NULL, CONV_POLICY_CACHE_ONLY) == CONV_OK);
  if (plan_roundtrip(ctx, &p, 0, CONV_SOURCE_SYSTEM_CACHE) != TEST_PASS) return TEST_FAIL;
  CHECK_STATUS(CONV_OK, conv_context_destroy(ctx));
  CHECK(layered_context(&ctx, user2, "", CONV_POLICY_CACHE_ONLY) == CONV_OK);
  CHECK_STATUS(CONV_CACHE_MISS, conv_plan_create(ctx, &p, &plan));
  CHECK_STATUS(CONV_OK, conv_context_destroy(ctx));
  CHECK(unsetenv("CONVTUNE_SYSTEM_CACHE") == 0);
  remove_db(system);
  remove_db(user);
  remove_db(user2);
  return TEST_PASS;
}

/* A directory as the system cache: its *.db files in name order, a file
 * that is not a cache passed over with a warning naming it, the tuning in
 * the next file found (CONV_SOURCE_SYSTEM_CACHE), nothing tuned. */
static int system_cache_directory(void) {
  SKIP_WITHOUT_GPU();
  seed_rng();
  char dir[4096], bad[4200], good[4200], user[4096], cmd[4300];
  temp_path(dir, sizeof dir, "system-dir");
  temp_path(user, sizeof user, "system-dir-user");
  snprintf(cmd, sizeof cmd, "rm -rf '%s' && mkdir '%s'", dir, dir);
  CHECK(system(cmd) == 0);
  snprintf(bad, sizeof bad, "%s/a.db", dir);
  snprintf(good, sizeof good, "%s/b.db", dir);
  FILE *f = fopen(bad, "w");
  CHECK(f != NULL && fputs("not a cache", f) >= 0 && fclose(f) == 0);
  conv_problem p = fixed_problem();
  conv_context *ctx;
  if (make_context(&ctx, good, CONV_POLICY_FAST, 0) != TEST_PASS) return TEST_FAIL;
  if (plan_roundtrip(ctx, &p, 0, CONV_SOURCE_TUNED) != TEST_PASS) return TEST_FAIL;
  CHECK_STATUS(CONV_OK, conv_context_destroy(ctx));
  passed_over w;
  CHECK_MSG(logged_context(&ctx, user, dir, CONV_POLICY_CACHE_ONLY, &w) == CONV_OK, "%s",
            conv_context_last_error(NULL));
  if (plan_roundtrip(ctx, &p, 0, CONV_SOURCE_SYSTEM_CACHE) != TEST_PASS) return TEST_FAIL;
  CHECK_STATUS(CONV_OK, conv_context_destroy(ctx));
  CHECK_MSG(w.count == 1 && strstr(w.last, bad) != NULL, "%d warnings, last: %s", w.count, w.last);
  remove_db(good);
  remove_db(user);
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  CHECK(system(cmd) == 0);
  return TEST_PASS;
}

/* Rewrites the winner rows of the cache at `path` behind its back (`set`:
 * an SQL assignment), as a corrupt or crafted file holds them. */
static int corrupt_winners(const char *path, const char *set) {
  char sql[256];
  snprintf(sql, sizeof sql, "UPDATE trials SET %s WHERE winner <> 0", set);
  sqlite3 *db = NULL;
  int rc = sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE, NULL);
  if (rc == SQLITE_OK) rc = sqlite3_exec(db, sql, NULL, NULL, NULL);
  if (rc != SQLITE_OK) fprintf(stderr, "%s: %s: %s\n", path, sql, sqlite3_errmsg(db));
  sqlite3_close(db);
  CHECK(rc == SQLITE_OK);
  return TEST_PASS;
}

/* A winner row that fails its checks, in either layer, is passed over
 * with a warning through the log callback, never failing the plan: the
 * user's cache's row falls through to the system cache; the system
 * cache's to an untimed plan in record mode, to a miss in cache-only, to
 * tuning into the user's cache otherwise.  The system file is left as it
 * was. */
static int bad_rows_passed_over(void) {
  SKIP_WITHOUT_GPU();
  seed_rng();
  char system[4096], user[4096], user2[4096];
  temp_path(system, sizeof system, "bad-system");
  temp_path(user, sizeof user, "bad-user");
  temp_path(user2, sizeof user2, "bad-user2");
  conv_problem p = fixed_problem();
  conv_context *ctx;
  if (make_context(&ctx, system, CONV_POLICY_FAST, 0) != TEST_PASS) return TEST_FAIL;
  if (plan_roundtrip(ctx, &p, 0, CONV_SOURCE_TUNED) != TEST_PASS) return TEST_FAIL;
  CHECK_STATUS(CONV_OK, conv_context_destroy(ctx));
  char message[512];
  CHECK_MSG(conv_cache_merge(system, user, NULL, NULL, NULL, NULL, message, sizeof message) ==
                CONV_OK, "%s", message);

  /* The user's row: the system cache's plan. */
  if (corrupt_winners(user, "config = 'not a config'") != TEST_PASS) return TEST_FAIL;
  passed_over w;
  CHECK_MSG(logged_context(&ctx, user, system, CONV_POLICY_FAST, &w) == CONV_OK, "%s",
            conv_context_last_error(NULL));
  if (plan_roundtrip(ctx, &p, 0, CONV_SOURCE_SYSTEM_CACHE) != TEST_PASS) return TEST_FAIL;
  CHECK_STATUS(CONV_OK, conv_context_destroy(ctx));
  CHECK_MSG(w.count == 1 && strstr(w.last, user) != NULL &&
                strstr(w.last, "corrupt config") != NULL &&
                strstr(w.last, "looking in the system cache") != NULL,
            "%d warnings, last: %s", w.count, w.last);

  /* The system cache's row, a failed trial marked winner. */
  char failed[64];
  snprintf(failed, sizeof failed, "status = %d", (int)CONV_UNSUPPORTED);
  if (corrupt_winners(system, failed) != TEST_PASS) return TEST_FAIL;
  size_t before_size = 0, after_size = 0;
  char *before = file_contents(system, &before_size);
  CHECK(before != NULL && before_size > 0);
  CHECK(logged_context(&ctx, user2, system, CONV_POLICY_RECORD, &w) == CONV_OK);
  conv_plan *plan = NULL;
  CHECK_MSG(conv_plan_create(ctx, &p, &plan) == CONV_OK, "record mode: %s",
            conv_context_last_error(ctx));
  conv_plan_info info;
  CHECK_STATUS(CONV_OK, conv_plan_info_get(plan, &info));
  CHECK_MSG(info.source == CONV_SOURCE_HEURISTIC, "source %d", (int)info.source);
  conv_plan_destroy(plan);
  CHECK_STATUS(CONV_OK, conv_context_destroy(ctx));
  CHECK_MSG(w.count == 1 && strstr(w.last, system) != NULL && strstr(w.last, "winner") != NULL &&
                strstr(w.last, "untimed plan") != NULL,
            "record mode: %d warnings, last: %s", w.count, w.last);

  CHECK(logged_context(&ctx, user2, system, CONV_POLICY_CACHE_ONLY, &w) == CONV_OK);
  plan = NULL;
  CHECK_STATUS(CONV_CACHE_MISS, conv_plan_create(ctx, &p, &plan));
  CHECK(plan == NULL);
  CHECK_STATUS(CONV_OK, conv_context_destroy(ctx));
  CHECK_MSG(w.count == 1, "cache-only: %d warnings, last: %s", w.count, w.last);

  CHECK(logged_context(&ctx, user2, system, CONV_POLICY_FAST, &w) == CONV_OK);
  if (plan_roundtrip(ctx, &p, 0, CONV_SOURCE_TUNED) != TEST_PASS) return TEST_FAIL;
  CHECK_STATUS(CONV_OK, conv_context_destroy(ctx));
  CHECK_MSG(w.count == 1 && strstr(w.last, "tuning it") != NULL, "fast: %d warnings, last: %s",
            w.count, w.last);

  char *after = file_contents(system, &after_size);
  CHECK(after != NULL && after_size == before_size && memcmp(before, after, before_size) == 0);
  free(before);
  free(after);
  remove_db(system);
  remove_db(user);
  remove_db(user2);
  return TEST_PASS;
}

static const test_case tests[] = {
    {"plan_executes_correctly", plan_executes_correctly},
    {"plans_of_one_problem_are_shared", plans_of_one_problem_are_shared},
    {"graph_replay_matches_direct", graph_replay_matches_direct},
    {"plan_from_cache_in_new_process", plan_from_cache_in_new_process},
    {"nondefault_stream", nondefault_stream},
    {"winners_capture_in_callers_graph", winners_capture_in_callers_graph},
    {"execute_rejects_bad_arguments", execute_rejects_bad_arguments},
    {"failing_candidates_recorded", failing_candidates_recorded},
    {"finalists_timed_in_full", finalists_timed_in_full},
    {"cache_only_policy", cache_only_policy},
    {"system_cache_layer", system_cache_layer},
    {"system_cache_directory", system_cache_directory},
    {"bad_rows_passed_over", bad_rows_passed_over},
};
TEST_MAIN(tests)
