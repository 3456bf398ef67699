/*
 * test_plans.c -- GPU tests of plans end to end: tuning into a cache,
 * executing on streams, sharing plans, graph replay against direct runs,
 * plans read back by a new process, argument checks, failing candidates
 * recorded, the cache-only and predict policies, bad rows of either cache
 * layer passed over.  Each skips (exit 77) on a machine
 * without a GPU; the seed of the random inputs is printed
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
#include "tuner/tuner.h"

/* Creates a plan, executes it on `stream` and checks the output. */
static int plan_roundtrip(conv_context *ctx, const conv_problem *p, cudaStream_t stream,
                          conv_plan_source expect_source) {
  host_case hc;
  dev_case d;
  if (host_case_make(&hc, p) != TEST_PASS || dev_case_make(&d, &hc) != TEST_PASS) return TEST_FAIL;
  conv_plan *plan = NULL;
  conv_status st = conv_plan_create(ctx, p, &plan);
  CHECK_MSG(st == CONV_OK, "conv_plan_create: %s", conv_context_last_error(ctx));
  conv_plan_info info;
  CHECK_STATUS(CONV_OK, conv_plan_info_get(plan, &info));
  printf("plan: %s %s %.4f ms, source %d\n", info.algorithm, info.config, info.time_ms, (int)info.source);
  CHECK_MSG(info.source == expect_source, "source %d, expected %d", (int)info.source, (int)expect_source);
  CHECK(info.time_ms > 0);
  if (poison(&d, &hc, stream) != TEST_PASS) return TEST_FAIL;
  CHECK_STATUS(CONV_OK, conv_plan_execute(plan, stream, d.x, d.w, d.bias, d.y));
  if (check_output(&d, &hc, stream, conv_error_bound(p->math, CONV_ARITH_TRANSFORM), "plan") != TEST_PASS)
    return TEST_FAIL;
  conv_plan_destroy(plan);
  dev_case_free(&d);
  host_case_free(&hc);
  return TEST_PASS;
}

static conv_problem fixed_problem(void) {
  conv_problem p;
  conv_problem_init(&p);
  p.n = 2; p.c = 16; p.h = 23; p.w = 19; p.k = 24; p.r = 3; p.s = 3;
  p.pad_h = p.pad_w = 1;
  p.epilogue = CONV_EPILOGUE_BIAS_RELU;
  return p;
}

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

typedef struct trial_census {
  int total, workspace_limited, winners, cudnn;
  size_t winner_workspace;
  char device[256], versions[512]; /* the last row's, to look its pending state up */
} trial_census;

static int count_trial(const conv_cache_row *row, void *user) {
  trial_census *c = user;
  c->total++;
  c->cudnn += row->trial->algorithm_id == CONV_ALGO_CUDNN;
  snprintf(c->device, sizeof c->device, "%s", row->device);
  snprintf(c->versions, sizeof c->versions, "%s", row->versions);
  if (row->trial->status == CONV_WORKSPACE_LIMIT && row->trial->reason[0]) c->workspace_limited++;
  if (row->trial->winner) {
    c->winners++;
    c->winner_workspace = row->trial->workspace_bytes;
  }
  return 0;
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

/* The library's warnings that pass over a cached row (the log callback). */
typedef struct passed_over {
  int count;
  char last[1024];
} passed_over;

static void note_passed_over(void *user, conv_log_level level, const char *message) {
  passed_over *w = user;
  if (level != CONV_LOG_WARN || strstr(message, "passed over") == NULL) return;
  w->count++;
  snprintf(w->last, sizeof w->last, "%s", message);
}

/* Creates a context over `user` and `system` (NULL: the environment's),
 * counting its warnings that pass over a cached row in *w (reset; NULL:
 * none counted). */
static conv_status logged_context(conv_context **ctx, const char *user, const char *system,
                                  conv_policy policy, passed_over *w) {
  conv_context_options o;
  conv_context_options_init(&o);
  o.cache_path = user;
  o.system_cache_path = system;
  o.policy = policy;
  if (w != NULL) {
    memset(w, 0, sizeof *w);
    o.log = note_passed_over;
    o.log_user = w;
  }
  return conv_context_create(ctx, &o);
}

static conv_status layered_context(conv_context **ctx, const char *user, const char *system,
                                   conv_policy policy) {
  return logged_context(ctx, user, system, policy, NULL);
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

/* The trials of one problem in the context's cache, and whether it is pending. */
static int census_of(conv_context *ctx, const conv_problem *p, trial_census *c, bool *pending) {
  char key[CONV_PROBLEM_KEY_MAX];
  CHECK_STATUS(CONV_OK, conv_problem_key(p, key, sizeof key));
  conv_error err = {CONV_OK, ""};
  memset(c, 0, sizeof *c);
  CHECK_STATUS(CONV_OK, conv_cache_list_trials(conv_context_cache(ctx), key, count_trial, c, &err));
  const conv_cache_key k = {key, c->device, c->versions};
  CHECK_STATUS(CONV_OK, conv_cache_find_pending(conv_context_cache(ctx), &k, pending, NULL, &err));
  return TEST_PASS;
}

/* CONV_POLICY_PREDICT: with three tuned neighbours in the cache, a new
 * problem's plan is valid and predicted (of cuDNN's configs, at most its
 * ranked ones and its 3 best guesses timed; marked incomplete), whether
 * the neighbours agree or, split, not; the same when the neighbours are
 * in a shipped system cache over an empty user cache; an exhaustive
 * context then finishes it. */
static int predict_policy(void) {
  SKIP_WITHOUT_GPU();
  seed_rng();
  char cache[4096];
  temp_path(cache, sizeof cache, "predict");
  conv_context *ctx;
  if (make_context(&ctx, cache, tuning_policy(), 0) != TEST_PASS) return TEST_FAIL;
  const int sizes[][2] = {{21, 17}, {25, 21}, {27, 23}};
  for (int i = 0; i < 3; i++) {
    conv_problem p = fixed_problem();
    p.h = sizes[i][0], p.w = sizes[i][1];
    if (plan_roundtrip(ctx, &p, 0, CONV_SOURCE_TUNED) != TEST_PASS) return TEST_FAIL;
  }
  conv_context_destroy(ctx);
  conv_problem target = fixed_problem();
  target.h = 24, target.w = 20;
  /* First from the shipped layer, while the cache lacks the target. */
  char user[4096];
  temp_path(user, sizeof user, "predict-user");
  CHECK_MSG(layered_context(&ctx, user, cache, CONV_POLICY_PREDICT) == CONV_OK, "%s",
            conv_context_last_error(NULL));
  if (plan_roundtrip(ctx, &target, 0, CONV_SOURCE_TUNED) != TEST_PASS) return TEST_FAIL;
  trial_census shipped;
  bool shipped_pending = false;
  if (census_of(ctx, &target, &shipped, &shipped_pending) != TEST_PASS) return TEST_FAIL;
  conv_context_destroy(ctx);
  remove_db(user);
  if (make_context(&ctx, cache, CONV_POLICY_PREDICT, 0) != TEST_PASS) return TEST_FAIL;
  if (plan_roundtrip(ctx, &target, 0, CONV_SOURCE_TUNED) != TEST_PASS) return TEST_FAIL;
  trial_census c;
  bool pending = false;
  if (census_of(ctx, &target, &c, &pending) != TEST_PASS) return TEST_FAIL;
  printf("predict: %d trials, %s; from a system cache: %d trials, %s\n", c.total,
         pending ? "predicted (incomplete)" : "full search", shipped.total,
         shipped_pending ? "predicted (incomplete)" : "full search");
  CHECK(c.total > 0 && shipped.total > 0);
  CHECK(shipped_pending == pending); /* the same neighbours, the same certainty */
  CHECK(pending);
  CHECK_MSG(c.cudnn <= CONV_PREDICT_CONFIGS + 3 && shipped.cudnn <= CONV_PREDICT_CONFIGS + 3,
            "%d and %d cuDNN trials", c.cudnn, shipped.cudnn);
  conv_context_destroy(ctx);
  /* An exhaustive context times the rest. */
  if (make_context(&ctx, cache, CONV_POLICY_EXHAUSTIVE, 0) != TEST_PASS) return TEST_FAIL;
  if (plan_roundtrip(ctx, &target, 0, CONV_SOURCE_TUNED) != TEST_PASS) return TEST_FAIL;
  trial_census full;
  if (census_of(ctx, &target, &full, &pending) != TEST_PASS) return TEST_FAIL;
  printf("finished: %d trials\n", full.total);
  CHECK(!pending && full.total > c.total);
  conv_context_destroy(ctx);
  remove_db(cache);
  return TEST_PASS;
}

/* The fastest valid trial of `p` whose family is not `family`. */
typedef struct other_family {
  uint32_t family;
  conv_trial best;
  bool found;
} other_family;

static int fastest_other(const conv_cache_row *row, void *user) {
  other_family *o = user;
  const conv_trial *t = row->trial;
  if (t->algorithm_id != o->family && t->status == CONV_OK && t->time_ms > 0 &&
      (!o->found || t->time_ms < o->best.time_ms)) {
    o->best = *t;
    o->found = true;
  }
  return 0;
}

/* Makes `p`'s winner in the context's cache its fastest valid trial of a
 * family other than `family`, as if that had won. */
static int crown_other_family(conv_context *ctx, const conv_problem *p, uint32_t family) {
  char key[CONV_PROBLEM_KEY_MAX];
  CHECK_STATUS(CONV_OK, conv_problem_key(p, key, sizeof key));
  trial_census c;
  bool pending;
  if (census_of(ctx, p, &c, &pending) != TEST_PASS) return TEST_FAIL;
  conv_error err = {CONV_OK, ""};
  other_family o = {family, {0}, false};
  conv_cache *cache = conv_context_cache(ctx);
  CHECK_STATUS(CONV_OK, conv_cache_list_trials(cache, key, fastest_other, &o, &err));
  CHECK_MSG(o.found, "no valid trial of a family other than %u", (unsigned)family);
  const conv_cache_key k = {key, c.device, c.versions};
  CHECK_MSG(conv_cache_set_winner(cache, &k, o.best.algorithm_id, &o.best.config, &err) ==
                CONV_OK, "%s", err.message);
  return TEST_PASS;
}

/* The configs of one problem's trials, family by family. */
typedef struct config_list {
  int count;
  uint32_t family[1024];
  conv_config config[1024];
} config_list;

static int list_config(const conv_cache_row *row, void *user) {
  config_list *l = user;
  if (l->count < 1024) {
    l->family[l->count] = row->trial->algorithm_id;
    l->config[l->count++] = row->trial->config;
  }
  return 0;
}

static bool listed(const config_list *l, uint32_t family, const conv_config *config) {
  for (int i = 0; i < l->count; i++)
    if (l->family[i] == family && conv_config_equal(&l->config[i], config)) return true;
  return false;
}

static int configs_of(conv_context *ctx, const conv_problem *p, config_list *l) {
  char key[CONV_PROBLEM_KEY_MAX];
  CHECK_STATUS(CONV_OK, conv_problem_key(p, key, sizeof key));
  conv_error err = {CONV_OK, ""};
  l->count = 0;
  CHECK_STATUS(CONV_OK, conv_cache_list_trials(conv_context_cache(ctx), key, list_config, l, &err));
  CHECK(l->count > 0 && l->count < 1024);
  return TEST_PASS;
}

/* Neighbours whose winners differ in family split the prediction: the
 * plan is valid, the tuning incomplete, every config of every family but
 * cuDNN that the exhaustive search lists was timed, and of cuDNN's only
 * its ranked configs and best guesses; an exhaustive context then times
 * the rest of cuDNN's. */
static int predict_split(void) {
  SKIP_WITHOUT_GPU();
  seed_rng();
  char cache[4096];
  temp_path(cache, sizeof cache, "split");
  conv_context *ctx;
  if (make_context(&ctx, cache, CONV_POLICY_EXHAUSTIVE, 0) != TEST_PASS) return TEST_FAIL;
  const int sizes[][2] = {{21, 17}, {25, 21}, {27, 23}};
  conv_problem nb[3];
  for (int i = 0; i < 3; i++) {
    nb[i] = fixed_problem();
    nb[i].h = sizes[i][0], nb[i].w = sizes[i][1];
    if (plan_roundtrip(ctx, &nb[i], 0, CONV_SOURCE_TUNED) != TEST_PASS) return TEST_FAIL;
  }
  /* The middle one's winner of another family than the first's. */
  conv_plan *plan = NULL;
  conv_plan_info first;
  CHECK_STATUS(CONV_OK, conv_plan_create(ctx, &nb[0], &plan));
  CHECK_STATUS(CONV_OK, conv_plan_info_get(plan, &first));
  conv_plan_destroy(plan);
  char name[64];
  snprintf(name, sizeof name, "%s", first.algorithm);
  const conv_algorithm *winner_family = conv_registry_find_name(name);
  CHECK_MSG(winner_family != NULL, "family %s", name);
  if (crown_other_family(ctx, &nb[1], winner_family->id) != TEST_PASS) return TEST_FAIL;
  conv_context_destroy(ctx);

  conv_problem target = fixed_problem();
  target.h = 24, target.w = 20;
  if (make_context(&ctx, cache, CONV_POLICY_PREDICT, 0) != TEST_PASS) return TEST_FAIL;
  if (plan_roundtrip(ctx, &target, 0, CONV_SOURCE_TUNED) != TEST_PASS) return TEST_FAIL;
  static config_list split, full;
  trial_census c;
  bool pending = false;
  if (configs_of(ctx, &target, &split) != TEST_PASS) return TEST_FAIL;
  if (census_of(ctx, &target, &c, &pending) != TEST_PASS) return TEST_FAIL;
  conv_context_destroy(ctx);
  CHECK_MSG(pending, "a split prediction is incomplete");
  CHECK_MSG(c.cudnn <= CONV_PREDICT_CONFIGS + 3, "%d cuDNN trials", c.cudnn);

  if (make_context(&ctx, cache, CONV_POLICY_EXHAUSTIVE, 0) != TEST_PASS) return TEST_FAIL;
  if (plan_roundtrip(ctx, &target, 0, CONV_SOURCE_TUNED) != TEST_PASS) return TEST_FAIL;
  trial_census finished;
  if (configs_of(ctx, &target, &full) != TEST_PASS) return TEST_FAIL;
  if (census_of(ctx, &target, &finished, &pending) != TEST_PASS) return TEST_FAIL;
  conv_context_destroy(ctx);
  printf("split: %d trials (%d cuDNN); exhaustive: %d (%d cuDNN)\n", c.total, c.cudnn,
         finished.total, finished.cudnn);
  CHECK(!pending && finished.cudnn > c.cudnn);
  for (int i = 0; i < full.count; i++)
    CHECK_MSG(full.family[i] == CONV_ALGO_CUDNN || listed(&split, full.family[i], &full.config[i]),
              "family %u: a config the split did not time", (unsigned)full.family[i]);
  remove_db(cache);
  return TEST_PASS;
}

static const test_case tests[] = {
    {"plan_executes_correctly", plan_executes_correctly},
    {"plans_of_one_problem_are_shared", plans_of_one_problem_are_shared},
    {"graph_replay_matches_direct", graph_replay_matches_direct},
    {"plan_from_cache_in_new_process", plan_from_cache_in_new_process},
    {"nondefault_stream", nondefault_stream},
    {"execute_rejects_bad_arguments", execute_rejects_bad_arguments},
    {"failing_candidates_recorded", failing_candidates_recorded},
    {"finalists_timed_in_full", finalists_timed_in_full},
    {"cache_only_policy", cache_only_policy},
    {"system_cache_layer", system_cache_layer},
    {"system_cache_directory", system_cache_directory},
    {"bad_rows_passed_over", bad_rows_passed_over},
    {"predict_policy", predict_policy},
    {"predict_split", predict_split},
};
TEST_MAIN(tests)
