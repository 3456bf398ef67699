/*
 * test_cli_shard.c -- `convtune tune --shard K/N` (tools/cli/shard.c) and
 * the Slurm recipe of tools/slurm, without a GPU.  The tuning is done by
 * the scripted workers of tests/fake_worker.sh (through `tune --devices`
 * and $CONVTUNE_WORKER) in their "store" mode: for each problem they call
 * this binary back (store_main) to store, in the cache they were given, a
 * winner that depends on the problem key alone, as a real tuning stores
 * its own.  So N shards then `convtune merge` must give the very cache one
 * run gives, and the shards' problems must be disjoint and cover all.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "cache/cache.h"
#include "convtune.h"
#include "test.h"
#include "tests/cli_fixture.h"
#include "tests/cli_run.h"

/* The fake workers' GPU model (tests/fake_worker.sh's "ready" line). */
#define FAKE_MODEL "FAKE GPU|sm90|132sm"

/* The suite: 7 distinct shapes (a count that is no multiple of 2 or 3),
 * and the third again under another name. */
#define DISTINCT 7
#define ROWS (DISTINCT + 1)
static const int row_k[ROWS] = {8, 16, 24, 32, 40, 48, 56, 24};

/* ================================================================ the helper */

static uint64_t fnv1a(const char *s) {
  uint64_t h = 1469598103934665603u;
  for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211u;
  return h;
}

/* `BINARY TEST CACHE MODEL KEY` (from fake_worker.sh): stores KEY's winner,
 * made from the key alone, in CACHE under MODEL, clears KEY's pending rows
 * as a finished tuning does, and prints the worker's row line. */
static int store_main(void) {
  if (test_argc != 3) {
    fprintf(stderr, "store helper: expected CACHE MODEL KEY, got %d arguments\n", test_argc);
    return TEST_FAIL;
  }
  const char *cache = test_args[0], *model = test_args[1], *key = test_args[2];
  uint64_t h = fnv1a(key);
  int64_t engine = 1 + (int64_t)(h % 50);
  double time_ms = 0.001 * (double)(1 + (h >> 8) % 997);
  char text[64];
  snprintf(text, sizeof text, "engine=%lld knobs=3", (long long)engine);
  conv_trial winner = make_trial(engine, text, CONV_OK, time_ms, 1e-7);
  if (store_tuned(cache, key, model, &winner) != TEST_PASS) return TEST_FAIL;
  conv_cache *c = NULL;
  conv_error err = {CONV_OK, ""};
  conv_cache_key k = {key, model, VERSIONS};
  CHECK_MSG(conv_cache_open(cache, false, &c, &err) == CONV_OK, "%s", err.message);
  conv_status st = conv_cache_clear_pending(c, &k, &err);
  conv_cache_close(c);
  CHECK_MSG(st == CONV_OK, "%s", err.message);
  printf("row\t0\t%s\t%s\t%.17g\t-1\t2\t%zu\t\n", winner.algorithm, text, time_ms,
         winner.workspace_bytes);
  return fflush(stdout) == 0 ? TEST_PASS : TEST_FAIL;
}

/* The fake workers in store mode, calling this test back. */
static void use_storing_workers(const char *test_name) {
  isolate_default_cache();
  setenv("CONVTUNE_WORKER", CONVTUNE_SOURCE_DIR "/tests/fake_worker.sh", 1);
  setenv("FAKE_WORKER_MODE", "store", 1);
  setenv("FAKE_WORKER_STORE", test_argv0, 1);
  setenv("FAKE_WORKER_STORE_AS", test_name, 1);
}

/* ================================================================ suites and keys */

/* The suite's rows, starting at row `first` and going round, backwards
 * when `reverse`: each shard may read them in another order. */
static int write_suite(const char *path, size_t first, bool reverse) {
  char text[4096];
  size_t used = (size_t)snprintf(text, sizeof text, "{\"shapes\": [");
  for (size_t n = 0; n < ROWS; n++) {
    size_t i = (first + (reverse ? ROWS - n : n)) % ROWS;
    used += (size_t)snprintf(text + used, sizeof text - used,
                             "%s\n {\"name\": \"%s%d\", \"N\": 1, \"C\": 8, \"H\": 8, \"W\": 8, "
                             "\"K\": %d, \"R\": 3, \"S\": 3, \"pad\": 1}",
                             n ? "," : "", i == ROWS - 1 ? "again" : "k", row_k[i], row_k[i]);
  }
  snprintf(text + used, sizeof text - used, "\n]}\n");
  CHECK(used < sizeof text - 8);
  CHECK(write_file(path, text));
  return TEST_PASS;
}

/* Sorted distinct texts: problem keys, or whole winners. */
typedef struct text_set {
  char items[32][512];
  size_t count;
} text_set;

static int by_text(const void *a, const void *b) { return strcmp(a, b); }

static void set_add(text_set *s, const char *text) {
  for (size_t i = 0; i < s->count; i++)
    if (strcmp(s->items[i], text) == 0) return;
  if (s->count < sizeof s->items / sizeof s->items[0])
    snprintf(s->items[s->count++], sizeof s->items[0], "%s", text);
  qsort(s->items, s->count, sizeof s->items[0], by_text);
}

static bool sets_equal(const text_set *a, const text_set *b) {
  if (a->count != b->count) return false;
  for (size_t i = 0; i < a->count; i++)
    if (strcmp(a->items[i], b->items[i]) != 0) return false;
  return true;
}

static void set_print(const char *what, const text_set *s) {
  fprintf(stderr, "%s (%zu):\n", what, s->count);
  for (size_t i = 0; i < s->count; i++) fprintf(stderr, "  %s\n", s->items[i]);
}

/* The rows of a JSON array printed by the tool: with `winners`, each
 * row's problem, algorithm, config and time (list --json); else its
 * problem (tune --json). */
static int read_json_rows(const char *out, bool winners, text_set *s) {
  json_error_t e;
  json_t *rows = json_loads(out, 0, &e);
  CHECK_MSG(json_is_array(rows), "not a JSON array (%s):\n%s", e.text, out);
  size_t i;
  json_t *row;
  json_array_foreach(rows, i, row) {
    const char *problem = json_string_value(json_object_get(row, "problem"));
    const char *algorithm = json_string_value(json_object_get(row, "algorithm"));
    const char *config = json_string_value(json_object_get(row, "config"));
    json_t *time = json_object_get(row, "time_ms");
    if (problem == NULL || algorithm == NULL || config == NULL || !json_is_number(time)) {
      json_decref(rows);
      CHECK_MSG(false, "row %zu lacks a field:\n%s", i, out);
    }
    char text[512];
    if (winners)
      snprintf(text, sizeof text, "%s | %s %s | %.17g", problem, algorithm, config,
               json_number_value(time));
    else
      snprintf(text, sizeof text, "%s", problem);
    set_add(s, text);
  }
  json_decref(rows);
  return TEST_PASS;
}

/* The winners of a cache, as list --json prints them. */
static int cache_winners(const char *cache, text_set *s) {
  cli_result r;
  RUN_EXPECT(r, 0, "list", "--json", "--cache", cache);
  int rc = read_json_rows(r.out.data, true, s);
  cli_result_free(&r);
  return rc;
}

/* The problem of each winner (the part before " | "). */
static void winner_problems(const text_set *winners, text_set *problems) {
  for (size_t i = 0; i < winners->count; i++) {
    char problem[512];
    snprintf(problem, sizeof problem, "%s", winners->items[i]);
    char *bar = strstr(problem, " | ");
    if (bar != NULL) *bar = '\0';
    set_add(problems, problem);
  }
}

/* ================================================================ runs */

/* `tune ARGS... --devices DEVICES --progress never --json --cache CACHE`
 * exits 0; the problems it tuned go to *tuned (may be NULL), its stderr
 * to *err (may be NULL; cli_result_free it). */
static int tune_into(const char *cache, const char *devices, const char *const *args,
                     text_set *tuned, cli_result *err) {
  const char *argv[24] = {"tune", "--devices", devices, "--progress", "never",
                          "--json", "--cache",   cache};
  size_t n = 8;
  for (size_t i = 0; args[i] != NULL && n < 23; i++) argv[n++] = args[i];
  argv[n] = NULL;
  cli_result r;
  CHECK(run_cli(argv, &r));
  CHECK_MSG(r.exit_status == 0, "exit %lld\n--- stdout:\n%s--- stderr:\n%s",
            (long long)r.exit_status, r.out.data, r.err.data);
  if (tuned != NULL && read_json_rows(r.out.data, false, tuned) != TEST_PASS) return TEST_FAIL;
  if (err != NULL)
    *err = r;
  else
    cli_result_free(&r);
  return TEST_PASS;
}

/* The winners of one run of the whole suite (not sharded). */
static int one_run(const char *suite_path, text_set *winners) {
  char cache[1024];
  tmp_path(cache, sizeof cache, "shard-whole.db");
  remove_cache_files(cache);
  const char *args[] = {suite_path, NULL};
  text_set tuned = {.count = 0};
  if (tune_into(cache, "0", args, &tuned, NULL) != TEST_PASS) return TEST_FAIL;
  CHECK_MSG(tuned.count == DISTINCT, "%zu problems tuned", tuned.count);
  return cache_winners(cache, winners);
}

/* Each shard's problems are disjoint from the others', their sizes differ
 * by one at most, and together they are `all`. */
static int shards_partition(const text_set *shards, size_t count, const text_set *all) {
  text_set joined = {.count = 0};
  size_t sum = 0, least = SIZE_MAX, most = 0;
  for (size_t k = 0; k < count; k++) {
    for (size_t i = 0; i < shards[k].count; i++) set_add(&joined, shards[k].items[i]);
    sum += shards[k].count;
    least = shards[k].count < least ? shards[k].count : least;
    most = shards[k].count > most ? shards[k].count : most;
  }
  if (!sets_equal(&joined, all)) {
    set_print("the shards' problems", &joined);
    set_print("all problems", all);
  }
  CHECK(sets_equal(&joined, all));
  CHECK_MSG(sum == all->count, "%zu problems over %zu shards: some in two", sum, count);
  CHECK_MSG(most - least <= 1, "shards of %zu to %zu problems", least, most);
  return TEST_PASS;
}

/* ================================================================ tests */

/* N = 1, 2, 3 shards over 7 shapes, each shard reading the suite in
 * another order: the shards' problems partition the suite, each shard's
 * cache holds its own, and their merge holds the winners of one run. */
static int shards_then_merge_match_one_run(void) {
  if (test_argc > 0) return store_main();
  use_storing_workers("shards_then_merge_match_one_run");
  char suite_path[1024];
  tmp_path(suite_path, sizeof suite_path, "shard-suite.json");
  CHECK(write_suite(suite_path, 0, false) == TEST_PASS);
  text_set whole = {.count = 0}, problems = {.count = 0};
  if (one_run(suite_path, &whole) != TEST_PASS) return TEST_FAIL;
  winner_problems(&whole, &problems);
  CHECK_MSG(problems.count == DISTINCT, "%zu winners", problems.count);
  for (unsigned n = 1; n <= 3; n++) {
    text_set shards[3];
    char caches[3][1024], merged[1024];
    const char *merge_args[8] = {"merge"};
    size_t m = 1;
    for (unsigned k = 0; k < n; k++) {
      char name[64], suite_k[1024], shard[32];
      snprintf(name, sizeof name, "shard-%u-%u.db", k, n);
      tmp_path(caches[k], sizeof caches[k], name);
      remove_cache_files(caches[k]);
      snprintf(name, sizeof name, "shard-suite-%u-%u.json", k, n);
      tmp_path(suite_k, sizeof suite_k, name);
      CHECK(write_suite(suite_k, 3 * k + n, k % 2 == 1) == TEST_PASS);
      snprintf(shard, sizeof shard, "%u/%u", k, n);
      const char *args[] = {suite_k, "--shard", shard, NULL};
      shards[k].count = 0;
      if (tune_into(caches[k], "0", args, &shards[k], NULL) != TEST_PASS) return TEST_FAIL;
      text_set stored = {.count = 0}, stored_problems = {.count = 0};
      if (cache_winners(caches[k], &stored) != TEST_PASS) return TEST_FAIL;
      winner_problems(&stored, &stored_problems);
      CHECK_MSG(sets_equal(&stored_problems, &shards[k]), "shard %u/%u's cache", k, n);
      merge_args[m++] = caches[k];
    }
    if (shards_partition(shards, n, &problems) != TEST_PASS) return TEST_FAIL;
    tmp_path(merged, sizeof merged, "shard-merged.db");
    remove_cache_files(merged);
    merge_args[m++] = "-o";
    merge_args[m++] = merged;
    merge_args[m] = NULL;
    cli_result r;
    CHECK(run_cli(merge_args, &r));
    CHECK_MSG(r.exit_status == 0, "merge: %s", r.err.data);
    cli_result_free(&r);
    text_set joined = {.count = 0};
    if (cache_winners(merged, &joined) != TEST_PASS) return TEST_FAIL;
    if (!sets_equal(&joined, &whole)) {
      set_print("merged", &joined);
      set_print("one run", &whole);
    }
    CHECK_MSG(sets_equal(&joined, &whole), "%u shards merged differ from one run", n);
  }
  return TEST_PASS;
}

/* --shard with --devices 0,1: the shard's shapes spread over both GPUs,
 * the same problems as the shard on one GPU. */
static int shard_over_several_devices(void) {
  if (test_argc > 0) return store_main();
  use_storing_workers("shard_over_several_devices");
  char suite_path[1024], one[1024], two[1024];
  tmp_path(suite_path, sizeof suite_path, "shard-devices.json");
  tmp_path(one, sizeof one, "shard-one-gpu.db");
  tmp_path(two, sizeof two, "shard-two-gpus.db");
  remove_cache_files(one);
  remove_cache_files(two);
  CHECK(write_suite(suite_path, 0, false) == TEST_PASS);
  const char *args[] = {suite_path, "--shard", "0/2", NULL};
  text_set on_one = {.count = 0}, on_two = {.count = 0};
  cli_result r;
  if (tune_into(one, "0", args, &on_one, NULL) != TEST_PASS) return TEST_FAIL;
  if (tune_into(two, "0,1", args, &on_two, &r) != TEST_PASS) return TEST_FAIL;
  CHECK_MSG(contains(r.err.data, "(GPU 0) ...") && contains(r.err.data, "(GPU 1) ..."), "%s",
            r.err.data);
  CHECK_MSG(contains(r.err.data, "shard 0/2: 4 of the 8 shapes"), "%s", r.err.data);
  cli_result_free(&r);
  CHECK(on_one.count == 4 && sets_equal(&on_one, &on_two));
  text_set a = {.count = 0}, b = {.count = 0};
  if (cache_winners(one, &a) != TEST_PASS || cache_winners(two, &b) != TEST_PASS)
    return TEST_FAIL;
  CHECK(a.count == 4 && sets_equal(&a, &b));
  return TEST_PASS;
}

/* Pending problems recorded in `count` copies of a cache at path-K. */
static int record_pending(const char *const *keys, size_t key_count, const char *base,
                          unsigned count, char (*paths)[1024]) {
  for (unsigned k = 0; k < count; k++) {
    char name[64];
    snprintf(name, sizeof name, "%s-%u.db", base, k);
    tmp_path(paths[k], sizeof paths[k], name);
    remove_cache_files(paths[k]);
    conv_cache *cache = NULL;
    conv_error err = {CONV_OK, ""};
    CHECK_MSG(conv_cache_open(paths[k], false, &cache, &err) == CONV_OK, "%s", err.message);
    conv_status st = CONV_OK;
    for (size_t i = 0; i < key_count && st == CONV_OK; i++) {
      conv_cache_key key = {keys[i], FAKE_MODEL, VERSIONS};
      st = conv_cache_record_pending(cache, &key, CONV_PENDING_UNTUNED, &err);
    }
    conv_cache_close(cache);
    CHECK_MSG(st == CONV_OK, "%s", err.message);
  }
  return TEST_PASS;
}

/* tune --pending --shard K/3 on three copies of a cache with 5 pending
 * problems: each tunes its share, together all, and the merge holds a
 * winner for each. */
static int pending_shards(void) {
  if (test_argc > 0) return store_main();
  use_storing_workers("pending_shards");
  char keys[5][CONV_PROBLEM_KEY_MAX];
  const char *key_list[5];
  text_set all = {.count = 0};
  for (size_t i = 0; i < 5; i++) {
    char spec[128];
    snprintf(spec, sizeof spec, "n=2 c=8 h=12 w=12 k=%zu r=3 s=3 pad=1", 8 * (i + 1));
    conv_problem p;
    CHECK_STATUS(CONV_OK, conv_problem_parse(spec, &p, NULL, 0));
    CHECK_STATUS(CONV_OK, conv_problem_key(&p, keys[i], sizeof keys[i]));
    key_list[i] = keys[i];
    set_add(&all, keys[i]);
  }
  char copies[3][1024], merged[1024];
  if (record_pending(key_list, 5, "shard-pending", 3, copies) != TEST_PASS) return TEST_FAIL;
  text_set shards[3];
  for (unsigned k = 0; k < 3; k++) {
    char shard[16];
    snprintf(shard, sizeof shard, "%u/3", k);
    const char *args[] = {"--pending", "--shard", shard, NULL};
    shards[k].count = 0;
    if (tune_into(copies[k], "0", args, &shards[k], NULL) != TEST_PASS) return TEST_FAIL;
  }
  if (shards_partition(shards, 3, &all) != TEST_PASS) return TEST_FAIL;
  tmp_path(merged, sizeof merged, "shard-pending-merged.db");
  remove_cache_files(merged);
  cli_result r;
  RUN_EXPECT(r, 0, "merge", copies[0], copies[1], copies[2], "-o", merged);
  cli_result_free(&r);
  text_set winners = {.count = 0}, problems = {.count = 0};
  if (cache_winners(merged, &winners) != TEST_PASS) return TEST_FAIL;
  winner_problems(&winners, &problems);
  CHECK(sets_equal(&problems, &all));
  return TEST_PASS;
}

/* More shards than shapes: a shard with none says so, prints [] with
 * --json, exits 0 and makes no cache; no worker is started. */
static int empty_shard_tunes_nothing(void) {
  isolate_default_cache();
  setenv("CONVTUNE_WORKER", "/nonexistent/worker", 1);
  char cache[1024];
  tmp_path(cache, sizeof cache, "shard-empty.db");
  remove_cache_files(cache);
  cli_result r;
  RUN_EXPECT(r, 0, "tune", "--devices", "0", "--json", "--cache", cache, "--shard", "2/3",
             "n=1 c=8 h=8 w=8 k=8 r=3 s=3 pad=1", "n=1 c=8 h=8 w=8 k=16 r=3 s=3 pad=1");
  CHECK_MSG(strcmp(r.out.data, "[]\n") == 0, "%s", r.out.data);
  CHECK_MSG(contains(r.err.data, "shard 2/3: none of the 2 distinct shapes is in this shard"),
            "%s", r.err.data);
  CHECK(count_lines(r.err.data) == 1);
  CHECK(!file_exists(cache));
  cli_result_free(&r);
  return TEST_PASS;
}

/* Bad --shard values and combinations: usage errors, nothing run. */
static int bad_shard_refused(void) {
  isolate_default_cache();
  static const usage_case cases[] = {
      {{"tune", SPEC, "--shard", "3/3"}, "shards count from 0, so K must be 0 to 2"},
      {{"tune", SPEC, "--shard", "1/0"}, "N, the number of shards, must be at least 1"},
      {{"tune", SPEC, "--shard", "0/0"}, "must be at least 1"},
      {{"tune", SPEC, "--shard", "x/3"}, "bad --shard 'x/3' (expected K/N"},
      {{"tune", SPEC, "--shard", "-1/3"}, "bad --shard '-1/3'"},
      {{"tune", SPEC, "--shard", "+1/3"}, "bad --shard '+1/3'"},
      {{"tune", SPEC, "--shard", "1"}, "bad --shard '1'"},
      {{"tune", SPEC, "--shard", "1/"}, "bad --shard '1/'"},
      {{"tune", SPEC, "--shard", "/2"}, "bad --shard '/2'"},
      {{"tune", SPEC, "--shard", ""}, "bad --shard ''"},
      {{"tune", SPEC, "--shard", "1/2/3"}, "bad --shard '1/2/3'"},
      {{"tune", SPEC, "--shard", "1 /2"}, "bad --shard '1 /2'"},
      {{"tune", SPEC, "--shard", "0/100001"}, "N at most 100000"},
      {{"tune", SPEC, "--shard", "99999999999999999999/2"}, "bad --shard"},
      {{"tune", SPEC, "--shard"}, "option '--shard' needs a value"},
      {{"list", "--shard", "0/2"}, "option '--shard' does not apply to 'list'"},
      {{"merge", "a.db", "-o", "b.db", "--shard", "0/2"}, "does not apply to 'merge'"},
      {{"tune", "--worker-device", "0", "--shard", "0/2"}, "--shard or --json"},
  };
  return check_usage_errors(cases, sizeof cases / sizeof cases[0]);
}

/* `sh SCRIPT ARGS...` with the environment as it is; fills r. */
static bool run_script(const char *const *args, cli_result *r) {
  return run_program("/bin/sh", args, -1, r);
}

/* tools/slurm's recipe as a plain shell script (tests/slurm_local.sh): 3
 * array tasks at once on this machine, then the merge, which must hold one
 * run's winners; then 9 tasks over the 7 shapes, whose 2 empty shards the
 * merge passes over. */
static int slurm_recipe_on_one_machine(void) {
  if (test_argc > 0) return store_main();
  use_storing_workers("slurm_recipe_on_one_machine");
  setenv("CONVTUNE", cli_path(), 1);
  char suite_path[1024], outdir[1024], out[1024];
  tmp_path(suite_path, sizeof suite_path, "slurm-suite.json");
  CHECK(write_suite(suite_path, 2, false) == TEST_PASS);
  text_set whole = {.count = 0};
  if (one_run(suite_path, &whole) != TEST_PASS) return TEST_FAIL;
  static const char *const counts[] = {"3", "9"};
  for (size_t c = 0; c < 2; c++) {
    char name[64];
    snprintf(name, sizeof name, "slurm-out-%s", counts[c]);
    tmp_path(outdir, sizeof outdir, name);
    snprintf(name, sizeof name, "slurm-merged-%s.db", counts[c]);
    tmp_path(out, sizeof out, name);
    remove_cache_files(out);
    const char *rm[] = {"-c", "rm -rf \"$0\"", outdir, NULL};
    cli_result r;
    CHECK(run_script(rm, &r) && r.exit_status == 0);
    cli_result_free(&r);
    const char *args[] = {CONVTUNE_SOURCE_DIR "/tests/slurm_local.sh",
                          CONVTUNE_SOURCE_DIR, outdir, counts[c], out, suite_path, "--devices",
                          "0", NULL};
    CHECK(run_script(args, &r));
    CHECK_MSG(r.exit_status == 0, "N=%s: exit %lld\n--- stdout:\n%s--- stderr:\n%s", counts[c],
              (long long)r.exit_status, r.out.data, r.err.data);
    CHECK_MSG(c == 0 || contains(r.err.data, "shard 7 had no shape to tune"), "%s", r.err.data);
    cli_result_free(&r);
    text_set merged = {.count = 0};
    if (cache_winners(out, &merged) != TEST_PASS) return TEST_FAIL;
    if (!sets_equal(&merged, &whole)) {
      set_print("merged", &merged);
      set_print("one run", &whole);
    }
    CHECK_MSG(sets_equal(&merged, &whole), "N=%s", counts[c]);
    CHECK(run_script(rm, &r) && r.exit_status == 0);
    cli_result_free(&r);
    remove_cache_files(out);
  }
  return TEST_PASS;
}

/* The Slurm scripts refuse what is not a proper array, and the merge a
 * shard that has not finished. */
static int slurm_scripts_refuse_bad_runs(void) {
  isolate_default_cache();
  setenv("CONVTUNE", "/nonexistent/convtune", 1);
  char outdir[1024];
  tmp_path(outdir, sizeof outdir, "slurm-bad");
  static const char tune[] = CONVTUNE_SOURCE_DIR "/tools/slurm/tune_shard.sh";
  static const char merge[] = CONVTUNE_SOURCE_DIR "/tools/slurm/merge_shards.sh";
  cli_result r;
  const char *no_array[] = {tune, outdir, "suite.json", NULL};
  unsetenv("SLURM_ARRAY_TASK_ID");
  unsetenv("SLURM_ARRAY_TASK_COUNT");
  CHECK(run_script(no_array, &r) && r.exit_status == 2);
  CHECK_MSG(contains(r.err.data, "not a Slurm array task"), "%s", r.err.data);
  cli_result_free(&r);
  setenv("SLURM_ARRAY_TASK_ID", "2", 1);
  setenv("SLURM_ARRAY_TASK_COUNT", "2", 1);
  setenv("SLURM_ARRAY_TASK_MIN", "1", 1);
  setenv("SLURM_ARRAY_TASK_MAX", "2", 1);
  CHECK(run_script(no_array, &r) && r.exit_status == 2);
  CHECK_MSG(contains(r.err.data, "the array must be 0 to N-1 (--array=0-1 for 2 tasks), not 1 "
                                 "to 2"),
            "%s", r.err.data);
  cli_result_free(&r);
  const char *bad_n[] = {merge, outdir, "0", "out.db", NULL};
  CHECK(run_script(bad_n, &r) && r.exit_status == 2);
  CHECK_MSG(contains(r.err.data, "N must be the number of shards"), "%s", r.err.data);
  cli_result_free(&r);
  const char *unfinished[] = {merge, outdir, "2", "out.db", NULL};
  CHECK(run_script(unfinished, &r) && r.exit_status == 1);
  CHECK_MSG(contains(r.err.data, "shard 0 of 2 has not finished"), "%s", r.err.data);
  cli_result_free(&r);
  return TEST_PASS;
}

static const test_case tests[] = {
    {"shards_then_merge_match_one_run", shards_then_merge_match_one_run},
    {"shard_over_several_devices", shard_over_several_devices},
    {"pending_shards", pending_shards},
    {"empty_shard_tunes_nothing", empty_shard_tunes_nothing},
    {"bad_shard_refused", bad_shard_refused},
    {"slurm_recipe_on_one_machine", slurm_recipe_on_one_machine},
    {"slurm_scripts_refuse_bad_runs", slurm_scripts_refuse_bad_runs},
};
TEST_MAIN(tests)
