/*
 * test_offline.c -- GPU tests of tuning put off, cut short or shared out:
 * record mode (an untimed plan now, `convtune tune --pending` later),
 * tuning budgets, configs a prediction's search leaves out, `convtune
 * verify`, and `convtune tune --devices all` (a worker process per GPU).  Each skips
 * (exit 77) on a machine without a GPU; the seed of the random inputs is
 * printed (CONVTUNE_TEST_SEED replays it).  The tool is $CONVTUNE_CLI.
 */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cache/cache.h"
#include "tests/cli_run.h"
#include "tests/gpu_support.h"
#include "tests/plan_support.h"
#include "tuner/tuner.h"

/* What a cache holds, through the public reader. */
/* A record-mode context on an empty cache returns a working, untimed plan
 * (source HEURISTIC), leaves one pending row for this GPU and no winner;
 * `convtune tune --pending` then tunes it (a winner, nothing pending) and
 * a new record-mode context finds it in the cache. */
static int record_then_tune_pending(void) {
  SKIP_WITHOUT_GPU();
  seed_rng();
  char cache[4096];
  temp_path(cache, sizeof cache, "record");
  conv_problem p = fixed_problem();
  conv_context *ctx;
  if (make_context(&ctx, cache, CONV_POLICY_RECORD, 0) != TEST_PASS) return TEST_FAIL;
  char device[CONV_DEVICE_FINGERPRINT_MAX];
  CHECK_STATUS(CONV_OK, conv_context_device_fingerprint(ctx, device, sizeof device));
  char tiny[4];
  CHECK_STATUS(CONV_INVALID_ARGUMENT, conv_context_device_fingerprint(ctx, tiny, sizeof tiny));
  conv_plan_info info;
  if (context_plan_matches_reference(ctx, &p, &info) != TEST_PASS) return TEST_FAIL;
  CHECK_MSG(info.source == CONV_SOURCE_HEURISTIC, "source %d", (int)info.source);
  CHECK(info.time_ms == -1.0);
  /* Again in the same context: from memory, still recorded once. */
  if (context_plan_matches_reference(ctx, &p, &info) != TEST_PASS) return TEST_FAIL;
  CHECK(info.source == CONV_SOURCE_MEMORY);
  CHECK_STATUS(CONV_OK, conv_context_destroy(ctx));

  cache_counts c;
  if (read_cache_counts(cache, &c) != TEST_PASS) return TEST_FAIL;
  CHECK_MSG(c.winners == 0 && c.pending == 1, "%d winners, %d pending", c.winners, c.pending);
  CHECK(strcmp(c.reason, "untuned") == 0 && strcmp(c.device, device) == 0);

  cli_result r;
  RUN_EXPECT(r, 0, "tune", "--pending", "--policy", "fast", "--cache", cache, "--progress",
             "never");
  char key[CONV_PROBLEM_KEY_MAX];
  CHECK_STATUS(CONV_OK, conv_problem_key(&p, key, sizeof key));
  CHECK_MSG(contains(r.out.data, key) && contains(r.out.data, "tuned"), "stdout:\n%s",
            r.out.data);
  cli_result_free(&r);
  if (read_cache_counts(cache, &c) != TEST_PASS) return TEST_FAIL;
  CHECK_MSG(c.winners == 1 && c.pending == 0, "%d winners, %d pending", c.winners, c.pending);

  /* Nothing left: said, exit 0. */
  RUN_EXPECT(r, 0, "tune", "--pending", "--cache", cache);
  CHECK(contains(r.err.data, "nothing pending"));
  cli_result_free(&r);

  if (make_context(&ctx, cache, CONV_POLICY_RECORD, 0) != TEST_PASS) return TEST_FAIL;
  if (context_plan_matches_reference(ctx, &p, &info) != TEST_PASS) return TEST_FAIL;
  CHECK(info.source == CONV_SOURCE_CACHE && info.time_ms > 0);
  CHECK_STATUS(CONV_OK, conv_context_destroy(ctx));
  if (read_cache_counts(cache, &c) != TEST_PASS) return TEST_FAIL;
  CHECK(c.pending == 0);
  remove_db(cache);
  return TEST_PASS;
}

static int budget_context(conv_context **ctx, const char *cache, conv_policy policy,
                          double budget_ms) {
  conv_context_options o;
  conv_context_options_init(&o);
  o.cache_path = cache;
  o.policy = policy;
  o.tuning_budget_ms = budget_ms;
  CHECK_MSG(conv_context_create(ctx, &o) == CONV_OK, "conv_context_create: %s",
            conv_context_last_error(NULL));
  return TEST_PASS;
}

/* An exhaustive tuning with a 1 ms budget stops after its first valid
 * config: the plan still matches the reference, the winner is stored and
 * the tuning marked incomplete.  A budgeted context takes it from the
 * cache as it is; one without a budget tunes it fully, which clears the
 * mark. */
static int small_budget_marks_incomplete(void) {
  SKIP_WITHOUT_GPU();
  seed_rng();
  char cache[4096];
  temp_path(cache, sizeof cache, "budget");
  conv_problem p = fixed_problem();
  conv_context *ctx;
  if (budget_context(&ctx, cache, CONV_POLICY_EXHAUSTIVE, 1.0) != TEST_PASS) return TEST_FAIL;
  conv_plan_info info;
  if (context_plan_matches_reference(ctx, &p, &info) != TEST_PASS) return TEST_FAIL;
  CHECK(info.source == CONV_SOURCE_TUNED && info.time_ms > 0);
  CHECK_STATUS(CONV_OK, conv_context_destroy(ctx));
  cache_counts c;
  if (read_cache_counts(cache, &c) != TEST_PASS) return TEST_FAIL;
  CHECK_MSG(c.winners == 1 && c.pending == 1, "%d winners, %d pending", c.winners, c.pending);
  CHECK_MSG(strcmp(c.reason, "incomplete") == 0, "reason %s", c.reason);

  if (budget_context(&ctx, cache, CONV_POLICY_EXHAUSTIVE, 1.0) != TEST_PASS) return TEST_FAIL;
  if (context_plan_matches_reference(ctx, &p, &info) != TEST_PASS) return TEST_FAIL;
  CHECK_MSG(info.source == CONV_SOURCE_CACHE, "source %d", (int)info.source);
  CHECK_STATUS(CONV_OK, conv_context_destroy(ctx));

  if (budget_context(&ctx, cache, CONV_POLICY_FAST, 0) != TEST_PASS) return TEST_FAIL;
  if (context_plan_matches_reference(ctx, &p, &info) != TEST_PASS) return TEST_FAIL;
  CHECK_MSG(info.source == CONV_SOURCE_TUNED, "source %d", (int)info.source);
  CHECK_STATUS(CONV_OK, conv_context_destroy(ctx));
  if (read_cache_counts(cache, &c) != TEST_PASS) return TEST_FAIL;
  CHECK_MSG(c.winners == 1 && c.pending == 0, "%d winners, %d pending", c.winners, c.pending);
  remove_db(cache);
  return TEST_PASS;
}

/* A problem's trials as stored, with the key's device and versions. */
typedef struct stored_tuning {
  conv_trial trials[1024];
  int count;
  char device[CONV_DEVICE_FINGERPRINT_MAX], versions[1024];
} stored_tuning;

static int keep_trial(const conv_cache_row *row, void *user) {
  stored_tuning *s = user;
  if (s->count < (int)(sizeof s->trials / sizeof s->trials[0])) s->trials[s->count++] = *row->trial;
  snprintf(s->device, sizeof s->device, "%s", row->device);
  snprintf(s->versions, sizeof s->versions, "%s", row->versions);
  return 0;
}

static int read_tuning(const char *path, const conv_problem *p, stored_tuning *s) {
  char key[CONV_PROBLEM_KEY_MAX];
  conv_error err = {CONV_OK, ""};
  CHECK_STATUS(CONV_OK, conv_problem_key(p, key, sizeof key));
  conv_cache *cache = NULL;
  CHECK_MSG(conv_cache_open(path, true, &cache, &err) == CONV_OK, "%s", err.message);
  s->count = 0;
  const conv_status st = conv_cache_list_trials(cache, key, keep_trial, s, &err);
  conv_cache_close(cache);
  CHECK_MSG(st == CONV_OK, "%s", err.message);
  CHECK(s->count > 0 && s->count < (int)(sizeof s->trials / sizeof s->trials[0]));
  return TEST_PASS;
}

static bool ran(const stored_tuning *s, const conv_trial *config) {
  for (int i = 0; i < s->count; i++)
    if (s->trials[i].algorithm_id == config->algorithm_id &&
        conv_config_equal(&s->trials[i].config, &config->config) && s->trials[i].status == CONV_OK)
      return true;
  return false;
}

/* Whether `trial`'s family offers its config for `target` too (a kernel
 * family's tilings depend on the output size). */
static bool offered_for(conv_env *env, const conv_problem *target, const conv_trial *trial) {
  const conv_algorithm *algo = conv_registry_find(trial->algorithm_id);
  enum { LISTED = 2048 };
  conv_config *configs = calloc(LISTED, sizeof *configs);
  int n = 0;
  bool offered = false;
  if (algo != NULL && configs != NULL &&
      algo->configs(target, env, configs, LISTED, &n, NULL) == CONV_OK)
    for (int i = 0; i < n && !offered; i++)
      offered = conv_config_equal(&configs[i], &trial->config);
  free(configs);
  return offered;
}

/* Rewrites the neighbour's tuning as if its first valid config that is not
 * the winner, and that its family offers for `target`, had run far too
 * long (20 ms or more, over 10x the winner); *slow gets that trial. */
static int make_known_slow(const char *path, const conv_problem *neighbour,
                           const conv_problem *target, conv_trial *slow) {
  static stored_tuning s;
  if (read_tuning(path, neighbour, &s) != TEST_PASS) return TEST_FAIL;
  conv_env env;
  if (open_env(&env) != TEST_PASS) return TEST_FAIL;
  int winner = -1, chosen = -1;
  for (int i = 0; i < s.count; i++) {
    if (s.trials[i].winner) winner = i;
    else if (chosen < 0 && s.trials[i].status == CONV_OK && s.trials[i].time_ms > 0 &&
             offered_for(&env, target, &s.trials[i]))
      chosen = i;
  }
  close_env(&env);
  CHECK(winner >= 0 && chosen >= 0);
  s.trials[chosen].time_ms = fmax(2 * CONV_ABANDON_FIRST_RUN_MS,
                                  2 * CONV_ABANDON_FIRST_RUN_FACTOR * s.trials[winner].time_ms);
  *slow = s.trials[chosen];
  char key[CONV_PROBLEM_KEY_MAX];
  CHECK_STATUS(CONV_OK, conv_problem_key(neighbour, key, sizeof key));
  const conv_cache_key k = {key, s.device, s.versions};
  conv_error err = {CONV_OK, ""};
  conv_cache *cache = NULL;
  CHECK_MSG(conv_cache_open(path, false, &cache, &err) == CONV_OK, "%s", err.message);
  CHECK_MSG(conv_cache_begin_tuning(cache, &k, &err) == CONV_OK, "%s", err.message);
  for (int i = 0; i < s.count; i++) {
    s.trials[i].winner = false;
    CHECK_MSG(conv_cache_add_trial(cache, &k, &s.trials[i], &err) == CONV_OK, "%s", err.message);
  }
  CHECK_MSG(conv_cache_set_winner(cache, &k, s.trials[winner].algorithm_id,
                                  &s.trials[winner].config, &err) == CONV_OK,
            "%s", err.message);
  conv_cache_close(cache);
  return TEST_PASS;
}

/* Where a prediction falls back to searching everything (here: one tuned
 * neighbour, three needed), a config that ran far too long on a neighbour
 * is left out: never run, the tuning marked incomplete, its plan matching
 * the reference; an exhaustive context then tunes it fully, that config
 * included (so it was on offer), and clears the mark. */
static int predict_leaves_out_known_slow(void) {
  SKIP_WITHOUT_GPU();
  seed_rng();
  char path[4096];
  temp_path(path, sizeof path, "known-slow");
  const conv_problem neighbour = fixed_problem();
  conv_problem target = fixed_problem();
  target.h = 27;
  target.w = 23;
  conv_context *ctx;
  conv_plan_info info;
  if (budget_context(&ctx, path, CONV_POLICY_EXHAUSTIVE, 0) != TEST_PASS) return TEST_FAIL;
  if (context_plan_matches_reference(ctx, &neighbour, &info) != TEST_PASS) return TEST_FAIL;
  CHECK_STATUS(CONV_OK, conv_context_destroy(ctx));
  conv_trial slow;
  if (make_known_slow(path, &neighbour, &target, &slow) != TEST_PASS) return TEST_FAIL;
  printf("known slow: %s %s\n", slow.algorithm, slow.config_text);

  if (budget_context(&ctx, path, CONV_POLICY_PREDICT, 0) != TEST_PASS) return TEST_FAIL;
  if (context_plan_matches_reference(ctx, &target, &info) != TEST_PASS) return TEST_FAIL;
  CHECK(info.source == CONV_SOURCE_TUNED);
  CHECK_STATUS(CONV_OK, conv_context_destroy(ctx));
  static stored_tuning predicted, full;
  if (read_tuning(path, &target, &predicted) != TEST_PASS) return TEST_FAIL;
  CHECK_MSG(!ran(&predicted, &slow), "%s %s ran", slow.algorithm, slow.config_text);
  cache_counts c;
  if (read_cache_counts(path, &c) != TEST_PASS) return TEST_FAIL;
  CHECK_MSG(c.pending == 1 && strcmp(c.reason, "incomplete") == 0, "%d pending (%s)", c.pending,
            c.reason);

  if (budget_context(&ctx, path, CONV_POLICY_EXHAUSTIVE, 0) != TEST_PASS) return TEST_FAIL;
  if (context_plan_matches_reference(ctx, &target, &info) != TEST_PASS) return TEST_FAIL;
  CHECK_MSG(info.source == CONV_SOURCE_TUNED, "source %d", (int)info.source);
  CHECK_STATUS(CONV_OK, conv_context_destroy(ctx));
  if (read_tuning(path, &target, &full) != TEST_PASS) return TEST_FAIL;
  printf("predict: %d trials; exhaustive: %d\n", predicted.count, full.count);
  CHECK_MSG(ran(&full, &slow), "%s %s not on offer", slow.algorithm, slow.config_text);
  if (read_cache_counts(path, &c) != TEST_PASS) return TEST_FAIL;
  CHECK_MSG(c.pending == 0, "%d pending", c.pending);
  remove_db(path);
  return TEST_PASS;
}

/* `convtune verify` of a cache just tuned on this GPU flags nothing (exit
 * 0, "ok" on every row) and leaves the file as it was. */
static int verify_fresh_cache_flags_nothing(void) {
  SKIP_WITHOUT_GPU();
  seed_rng();
  char cache[4096];
  temp_path(cache, sizeof cache, "verify");
  conv_problem p = fixed_problem(), q = fixed_problem();
  q.k = 32;
  q.epilogue = CONV_EPILOGUE_NONE;
  conv_context *ctx;
  if (make_context(&ctx, cache, CONV_POLICY_EXHAUSTIVE, 0) != TEST_PASS) return TEST_FAIL;
  conv_plan_info info;
  if (context_plan_matches_reference(ctx, &p, &info) != TEST_PASS) return TEST_FAIL;
  if (context_plan_matches_reference(ctx, &q, &info) != TEST_PASS) return TEST_FAIL;
  CHECK_STATUS(CONV_OK, conv_context_destroy(ctx));
  cache_counts before, after;
  if (read_cache_counts(cache, &before) != TEST_PASS) return TEST_FAIL;

  cli_result r;
  RUN_EXPECT(r, 0, "verify", "--cache", cache);
  char key[CONV_PROBLEM_KEY_MAX];
  CHECK_STATUS(CONV_OK, conv_problem_key(&p, key, sizeof key));
  CHECK_MSG(contains(r.out.data, key) && contains(r.out.data, " ok") &&
                !contains(r.out.data, "SLOWER") && !contains(r.out.data, "FAILED"),
            "stdout:\n%s\nstderr:\n%s", r.out.data, r.err.data);
  CHECK_MSG(count_lines(r.out.data) == 4, "a header, a rule and 2 rows:\n%s", r.out.data);
  cli_result_free(&r);
  if (read_cache_counts(cache, &after) != TEST_PASS) return TEST_FAIL;
  CHECK(after.winners == before.winners && after.pending == 0);
  remove_db(cache);
  return TEST_PASS;
}

/* Shape specs of `tune --devices`: more shapes than a two-GPU host has
 * workers, so each worker takes several in turn. */
static const char *const device_specs[] = {
    "n=2 c=16 h=23 w=19 k=24 r=3 s=3 pad=1 epilogue=bias_relu",
    "n=2 c=16 h=23 w=19 k=32 r=1 s=1",
    "n=1 c=8 h=17 w=17 k=8 r=5 s=5 pad=2 groups=8",
    "n=3 c=12 h=15 w=15 k=20 r=3 s=3 stride=2 pad=1",
    "n=2 c=16 h=12 w=12 k=16 r=3 s=3 pad=2 dil=2",
};
#define DEVICE_SPECS (sizeof device_specs / sizeof device_specs[0])

/* `tune --devices all` prints one OK row per shape in the order given,
 * each shape handed to one of the GPUs (every GPU gets one), and leaves a
 * winner per shape in the cache, which plans then read and run correctly. */
static int tune_on_every_device(void) {
  SKIP_WITHOUT_GPU();
  seed_rng();
  int gpus = 0;
  CHECK_STATUS(CONV_OK, conv_device_count(&gpus));
  printf("%d GPUs\n", gpus);
  char cache[4096];
  temp_path(cache, sizeof cache, "devices");
  const char *args[16] = {"tune", "--devices", "all", "--json", "--progress", "never",
                          "--policy", "fast", "--cache", cache};
  size_t n = 10;
  for (size_t i = 0; i < DEVICE_SPECS; i++) args[n++] = device_specs[i];
  cli_result r;
  CHECK(run_cli(args, &r));
  CHECK_MSG(r.exit_status == 0, "exit %lld\n%s%s", (long long)r.exit_status, r.out.data,
            r.err.data);
  const char *at = r.out.data;
  conv_problem problems[DEVICE_SPECS];
  for (size_t i = 0; i < DEVICE_SPECS; i++) {
    char key[CONV_PROBLEM_KEY_MAX], message[256];
    CHECK_STATUS(CONV_OK, conv_problem_parse(device_specs[i], &problems[i], message,
                                             sizeof message));
    CHECK_STATUS(CONV_OK, conv_problem_key(&problems[i], key, sizeof key));
    const char *row = strstr(at, key);
    CHECK_MSG(row != NULL, "no row of %s after the previous one:\n%s", key, r.out.data);
    at = row + strlen(key);
  }
  size_t ok = 0;
  for (const char *p = r.out.data; (p = strstr(p, "\"status\": \"OK\"")) != NULL; p++) ok++;
  CHECK_MSG(ok == DEVICE_SPECS, "%zu OK rows:\n%s", ok, r.out.data);
  for (int g = 0; g < gpus; g++) {
    char tag[32];
    snprintf(tag, sizeof tag, "(GPU %d) ...", g);
    CHECK_MSG(contains(r.err.data, tag), "no shape went to GPU %d:\n%s", g, r.err.data);
  }
  cli_result_free(&r);

  cache_counts c;
  if (read_cache_counts(cache, &c) != TEST_PASS) return TEST_FAIL;
  CHECK_MSG(c.winners == (int)DEVICE_SPECS, "%d winners", c.winners);
  conv_context *ctx;
  if (make_context(&ctx, cache, CONV_POLICY_CACHE_ONLY, 0) != TEST_PASS) return TEST_FAIL;
  for (size_t i = 0; i < DEVICE_SPECS; i++) {
    conv_plan_info info;
    if (context_plan_matches_reference(ctx, &problems[i], &info) != TEST_PASS) return TEST_FAIL;
    CHECK(info.source == CONV_SOURCE_CACHE && info.time_ms > 0);
  }
  CHECK_STATUS(CONV_OK, conv_context_destroy(ctx));
  remove_db(cache);
  return TEST_PASS;
}

/* `tune --devices all --pending` tunes what record-mode contexts left
 * pending, on every GPU, and leaves nothing pending. */
static int tune_pending_on_every_device(void) {
  SKIP_WITHOUT_GPU();
  seed_rng();
  char cache[4096];
  temp_path(cache, sizeof cache, "devices-pending");
  conv_context *ctx;
  if (make_context(&ctx, cache, CONV_POLICY_RECORD, 0) != TEST_PASS) return TEST_FAIL;
  for (size_t i = 0; i < 3; i++) {
    conv_problem p;
    char message[256];
    CHECK_STATUS(CONV_OK, conv_problem_parse(device_specs[i], &p, message, sizeof message));
    conv_plan_info info;
    if (context_plan_matches_reference(ctx, &p, &info) != TEST_PASS) return TEST_FAIL;
  }
  CHECK_STATUS(CONV_OK, conv_context_destroy(ctx));
  cache_counts c;
  if (read_cache_counts(cache, &c) != TEST_PASS) return TEST_FAIL;
  CHECK_MSG(c.winners == 0 && c.pending == 3, "%d winners, %d pending", c.winners, c.pending);

  cli_result r;
  RUN_EXPECT(r, 0, "tune", "--devices", "all", "--pending", "--policy", "fast", "--cache", cache,
             "--progress", "never");
  CHECK_MSG(count_lines(r.out.data) == 5, "a header, a rule and 3 rows:\n%s", r.out.data);
  cli_result_free(&r);
  if (read_cache_counts(cache, &c) != TEST_PASS) return TEST_FAIL;
  CHECK_MSG(c.winners == 3 && c.pending == 0, "%d winners, %d pending", c.winners, c.pending);
  RUN_EXPECT(r, 0, "tune", "--devices", "all", "--pending", "--cache", cache);
  CHECK(contains(r.err.data, "nothing pending"));
  cli_result_free(&r);
  remove_db(cache);
  return TEST_PASS;
}

static const test_case tests[] = {
    {"record_then_tune_pending", record_then_tune_pending},
    {"small_budget_marks_incomplete", small_budget_marks_incomplete},
    {"predict_leaves_out_known_slow", predict_leaves_out_known_slow},
    {"verify_fresh_cache_flags_nothing", verify_fresh_cache_flags_nothing},
    {"tune_on_every_device", tune_on_every_device},
    {"tune_pending_on_every_device", tune_pending_on_every_device},
};
TEST_MAIN(tests)
