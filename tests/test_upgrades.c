/*
 * test_upgrades.c -- GPU tests of upgrades that keep tunings
 * (CONV_SOURCE_CARRIED): a cache whose rows are rewritten to another
 * driver's versions text (as after a driver update) gives plans carried
 * over without timing anything, under every policy, from the user's cache
 * and from a read-only system cache; they are stored pending "stale", and
 * `convtune tune --stale` re-times them; a library update follows the
 * rules (test_carry.c holds them on the CPU); a carried-over winner that
 * cannot run is passed over and the problem tuned.  Each skips (exit 77)
 * on a machine without a GPU; the seed of the random inputs is printed
 * (CONVTUNE_TEST_SEED replays it).  The tool is $CONVTUNE_CLI.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sqlite3.h>

#include "cache/cache.h"
#include "tests/cli_run.h"
#include "tests/gpu_support.h"
#include "tests/plan_support.h"

/* What the context said: tunings started, carry-overs, warnings. */
typedef struct log_lines {
  int tunings, carried, warnings;
  bool revalidation_failed; /* a warning said a carried-over winner failed */
  char last_warning[1024];
} log_lines;

static void log_to(void *user, conv_log_level level, const char *message) {
  log_lines *l = user;
  if (strncmp(message, "tuning ", 7) == 0) l->tunings++;
  if (strstr(message, "carried over") != NULL && level == CONV_LOG_INFO) l->carried++;
  if (level == CONV_LOG_WARN) {
    l->warnings++;
    if (strstr(message, "fails re-validation") != NULL) l->revalidation_failed = true;
    snprintf(l->last_warning, sizeof l->last_warning, "%s", message);
  }
}

static int open_context(conv_context **ctx, const char *cache, const char *system,
                        conv_policy policy, log_lines *lines) {
  conv_context_options o;
  conv_context_options_init(&o);
  o.cache_path = cache;
  o.system_cache_path = system != NULL ? system : "";
  o.policy = policy;
  o.log = log_to;
  o.log_user = lines;
  o.log_level = CONV_LOG_INFO;
  memset(lines, 0, sizeof *lines);
  CHECK_MSG(conv_context_create(ctx, &o) == CONV_OK, "conv_context_create: %s",
            conv_context_last_error(NULL));
  return TEST_PASS;
}

static int sql(const char *path, const char *statement) {
  sqlite3 *db = NULL;
  char *msg = NULL;
  int rc = sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE, NULL);
  if (rc == SQLITE_OK) rc = sqlite3_exec(db, statement, NULL, NULL, &msg);
  if (rc != SQLITE_OK) fprintf(stderr, "%s: %s\n", statement, msg ? msg : sqlite3_errmsg(db));
  sqlite3_free(msg);
  sqlite3_close(db);
  CHECK(rc == SQLITE_OK);
  return TEST_PASS;
}

/* Every row of the cache moved to another versions text: `field` (e.g.
 * "driver=") gets a 9 in front of its value, as if tuned under another
 * driver, cuDNN, ... */
static int rewrite_versions(const char *path, const char *field) {
  char statement[512];
  snprintf(statement, sizeof statement,
           "UPDATE trials SET versions = replace(versions, ' %s', ' %s9');"
           "UPDATE pending SET versions = replace(versions, ' %s', ' %s9');",
           field, field, field, field);
  return sql(path, statement);
}

/* What a cache holds through the public reader: winners, and the pending
 * rows with the last one's reason. */
/* Tunes `p` into a fresh cache at `path` (fast policy) and returns its
 * plan's info. */
static int tune_fresh(const char *path, const conv_problem *p, conv_plan_info *tuned) {
  remove_db(path);
  conv_context *ctx;
  log_lines lines;
  if (open_context(&ctx, path, NULL, CONV_POLICY_FAST, &lines) != TEST_PASS) return TEST_FAIL;
  if (context_plan_matches_reference(ctx, p, tuned) != TEST_PASS) return TEST_FAIL;
  CHECK(tuned->source == CONV_SOURCE_TUNED && tuned->time_ms > 0 && lines.tunings == 1);
  CHECK_STATUS(CONV_OK, conv_context_destroy(ctx));
  return TEST_PASS;
}

/* After a driver update (the rows rewritten to another driver's text),
 * every policy's context gives the tuned winner, carried over: source
 * CARRIED, its time the one measured then (nothing timed: no tuning
 * started), the output right, the log saying so; the cache then holds it
 * under this build's versions, pending "stale", and the next context
 * takes it from there (CONV_SOURCE_CACHE) without re-validating. */
static int carried_after_driver_update(void) {
  SKIP_WITHOUT_GPU();
  seed_rng();
  static const conv_policy policies[] = {CONV_POLICY_EXHAUSTIVE, CONV_POLICY_FAST,
                                         CONV_POLICY_PREDICT, CONV_POLICY_RECORD,
                                         CONV_POLICY_CACHE_ONLY};
  const conv_problem p = fixed_problem();
  char cache[4096];
  temp_path(cache, sizeof cache, "carry-driver");
  for (size_t i = 0; i < sizeof policies / sizeof policies[0]; i++) {
    printf("policy %d\n", (int)policies[i]);
    conv_plan_info tuned, info;
    if (tune_fresh(cache, &p, &tuned) != TEST_PASS) return TEST_FAIL;
    if (rewrite_versions(cache, "driver=") != TEST_PASS) return TEST_FAIL;
    cache_counts c;
    if (read_cache_counts(cache, &c) != TEST_PASS) return TEST_FAIL;
    CHECK(c.winners == 1 && c.winners_now == 0);

    conv_context *ctx;
    log_lines lines;
    if (open_context(&ctx, cache, NULL, policies[i], &lines) != TEST_PASS) return TEST_FAIL;
    if (context_plan_matches_reference(ctx, &p, &info) != TEST_PASS) return TEST_FAIL;
    CHECK_MSG(info.source == CONV_SOURCE_CARRIED, "source %d", (int)info.source);
    CHECK_MSG(info.time_ms == tuned.time_ms, "%.9g ms, tuned at %.9g ms", info.time_ms,
              tuned.time_ms);
    CHECK(strcmp(info.algorithm, tuned.algorithm) == 0 && strcmp(info.config, tuned.config) == 0);
    CHECK_MSG(lines.tunings == 0 && lines.carried == 1 && lines.warnings == 0,
              "%d tunings, %d carried, %d warnings (%s)", lines.tunings, lines.carried,
              lines.warnings, lines.last_warning);
    CHECK_STATUS(CONV_OK, conv_context_destroy(ctx));
    if (read_cache_counts(cache, &c) != TEST_PASS) return TEST_FAIL;
    CHECK_MSG(c.winners == 2 && c.winners_now == 1 && c.pending == 1, "%d winners, %d now, %d pending",
              c.winners, c.winners_now, c.pending);
    CHECK_MSG(strcmp(c.reason, "stale") == 0, "reason %s", c.reason);

    if (open_context(&ctx, cache, NULL, policies[i], &lines) != TEST_PASS) return TEST_FAIL;
    if (context_plan_matches_reference(ctx, &p, &info) != TEST_PASS) return TEST_FAIL;
    CHECK_MSG(info.source == CONV_SOURCE_CACHE && info.time_ms == tuned.time_ms, "source %d",
              (int)info.source);
    CHECK(lines.tunings == 0 && lines.carried == 0);
    CHECK_STATUS(CONV_OK, conv_context_destroy(ctx));
  }
  remove_db(cache);
  return TEST_PASS;
}

/* `convtune tune --stale` re-times a carried-over winner (a tuning, source
 * tuned, the mark gone) and then finds nothing stale; `convtune tune` of
 * a shape with only another driver's rows tunes it rather than carrying
 * it over. */
static int tune_stale_retimes(void) {
  SKIP_WITHOUT_GPU();
  seed_rng();
  const conv_problem p = fixed_problem();
  char cache[4096], key[CONV_PROBLEM_KEY_MAX];
  CHECK_STATUS(CONV_OK, conv_problem_key(&p, key, sizeof key));
  temp_path(cache, sizeof cache, "carry-stale");
  conv_plan_info tuned, info;
  if (tune_fresh(cache, &p, &tuned) != TEST_PASS) return TEST_FAIL;
  if (rewrite_versions(cache, "driver=") != TEST_PASS) return TEST_FAIL;
  conv_context *ctx;
  log_lines lines;
  if (open_context(&ctx, cache, NULL, CONV_POLICY_PREDICT, &lines) != TEST_PASS) return TEST_FAIL;
  if (context_plan_matches_reference(ctx, &p, &info) != TEST_PASS) return TEST_FAIL;
  CHECK(info.source == CONV_SOURCE_CARRIED);
  CHECK_STATUS(CONV_OK, conv_context_destroy(ctx));

  cli_result r;
  RUN_EXPECT(r, 0, "list", "--stale", "--cache", cache);
  CHECK_MSG(contains(r.out.data, key) && contains(r.out.data, "stale"), "%s", r.out.data);
  cli_result_free(&r);
  RUN_EXPECT(r, 0, "tune", "--stale", "--policy", "fast", "--cache", cache, "--system-cache", "",
             "--progress", "never");
  CHECK_MSG(contains(r.out.data, key) && contains(r.out.data, "tuned"), "stdout:\n%s\nstderr:\n%s",
            r.out.data, r.err.data);
  cli_result_free(&r);
  cache_counts c;
  if (read_cache_counts(cache, &c) != TEST_PASS) return TEST_FAIL;
  CHECK_MSG(c.winners_now == 1 && c.pending == 0, "%d winners now, %d pending", c.winners_now,
            c.pending);
  RUN_EXPECT(r, 0, "tune", "--stale", "--cache", cache);
  CHECK(contains(r.err.data, "nothing pending"));
  cli_result_free(&r);

  /* The tool tunes: another driver's rows alone are not carried over. */
  if (tune_fresh(cache, &p, &tuned) != TEST_PASS) return TEST_FAIL;
  if (rewrite_versions(cache, "driver=") != TEST_PASS) return TEST_FAIL;
  RUN_EXPECT(r, 0, "tune", "n=2 c=16 h=23 w=19 k=24 r=3 s=3 pad=1 epilogue=bias_relu", "--policy",
             "fast", "--cache", cache, "--system-cache", "", "--progress", "never");
  CHECK_MSG(contains(r.out.data, "tuned") && !contains(r.out.data, "carried"), "stdout:\n%s",
            r.out.data);
  cli_result_free(&r);
  if (read_cache_counts(cache, &c) != TEST_PASS) return TEST_FAIL;
  CHECK(c.winners_now == 1 && c.pending == 0);
  remove_db(cache);
  return TEST_PASS;
}

/* A shipped (system) cache tuned under another driver: its winner is
 * carried over into the user's cache, the system file left byte for byte
 * as it was. */
static int carried_from_system_cache(void) {
  SKIP_WITHOUT_GPU();
  seed_rng();
  const conv_problem p = fixed_problem();
  char shipped[4096], user[4096];
  temp_path(shipped, sizeof shipped, "carry-shipped");
  temp_path(user, sizeof user, "carry-user");
  conv_plan_info tuned, info;
  if (tune_fresh(shipped, &p, &tuned) != TEST_PASS) return TEST_FAIL;
  if (rewrite_versions(shipped, "driver=") != TEST_PASS) return TEST_FAIL;
  if (sql(shipped, "PRAGMA wal_checkpoint(TRUNCATE); PRAGMA journal_mode = DELETE;") != TEST_PASS)
    return TEST_FAIL;
  FILE *f = fopen(shipped, "rb");
  CHECK(f != NULL);
  static char before[1 << 20], after[1 << 20];
  size_t before_size = fread(before, 1, sizeof before, f);
  fclose(f);
  CHECK(before_size > 0 && before_size < sizeof before);

  conv_context *ctx;
  log_lines lines;
  if (open_context(&ctx, user, shipped, CONV_POLICY_EXHAUSTIVE, &lines) != TEST_PASS)
    return TEST_FAIL;
  if (context_plan_matches_reference(ctx, &p, &info) != TEST_PASS) return TEST_FAIL;
  CHECK_MSG(info.source == CONV_SOURCE_CARRIED && info.time_ms == tuned.time_ms, "source %d",
            (int)info.source);
  CHECK(lines.tunings == 0 && lines.carried == 1);
  CHECK_STATUS(CONV_OK, conv_context_destroy(ctx));
  cache_counts c;
  if (read_cache_counts(user, &c) != TEST_PASS) return TEST_FAIL;
  CHECK(c.winners == 1 && c.winners_now == 1 && c.pending == 1 && strcmp(c.reason, "stale") == 0);
  f = fopen(shipped, "rb");
  CHECK(f != NULL);
  size_t after_size = fread(after, 1, sizeof after, f);
  fclose(f);
  CHECK(after_size == before_size && memcmp(before, after, before_size) == 0);
  remove_db(shipped);
  remove_db(user);
  return TEST_PASS;
}

/* Another cuDNN: the winner is carried over exactly when it is not
 * cuDNN's (the rules of test_carry.rules_library_changed); else tuned. */
static int library_update_follows_rules(void) {
  SKIP_WITHOUT_GPU();
  seed_rng();
  const conv_problem p = fixed_problem();
  char cache[4096];
  temp_path(cache, sizeof cache, "carry-cudnn");
  conv_plan_info tuned, info;
  if (tune_fresh(cache, &p, &tuned) != TEST_PASS) return TEST_FAIL;
  if (rewrite_versions(cache, "cudnn=") != TEST_PASS) return TEST_FAIL;
  const bool carries = strcmp(tuned.algorithm, "cudnn") != 0;
  conv_context *ctx;
  log_lines lines;
  if (open_context(&ctx, cache, NULL, CONV_POLICY_FAST, &lines) != TEST_PASS) return TEST_FAIL;
  if (context_plan_matches_reference(ctx, &p, &info) != TEST_PASS) return TEST_FAIL;
  printf("winner %s: %s\n", tuned.algorithm, carries ? "carried over" : "tuned again");
  CHECK_MSG(info.source == (carries ? CONV_SOURCE_CARRIED : CONV_SOURCE_TUNED), "source %d",
            (int)info.source);
  CHECK(lines.tunings == (carries ? 0 : 1));
  CHECK_STATUS(CONV_OK, conv_context_destroy(ctx));
  remove_db(cache);
  return TEST_PASS;
}

/* A carried-over winner that cannot run here (its config rewritten to a
 * cuDNN engine that does not exist) fails re-validation: a warning, and
 * the problem is tuned as if nothing were there (cache-only: a miss).
 * Never silently wrong. */
static int failed_revalidation_is_retuned(void) {
  SKIP_WITHOUT_GPU();
  seed_rng();
  const conv_problem p = fixed_problem();
  char cache[4096];
  temp_path(cache, sizeof cache, "carry-broken");
  static const conv_policy policies[] = {CONV_POLICY_FAST, CONV_POLICY_CACHE_ONLY};
  for (size_t i = 0; i < sizeof policies / sizeof policies[0]; i++) {
    conv_plan_info tuned, info;
    if (tune_fresh(cache, &p, &tuned) != TEST_PASS) return TEST_FAIL;
    if (rewrite_versions(cache, "driver=") != TEST_PASS) return TEST_FAIL;
    if (sql(cache, "UPDATE trials SET algorithm_id = 1, algorithm = 'cudnn',"
                   " config = '999999,1,2', config_text = 'engine=999999' WHERE winner <> 0") !=
        TEST_PASS)
      return TEST_FAIL;
    conv_context *ctx;
    log_lines lines;
    if (open_context(&ctx, cache, NULL, policies[i], &lines) != TEST_PASS) return TEST_FAIL;
    if (policies[i] == CONV_POLICY_CACHE_ONLY) {
      conv_plan *plan = NULL;
      CHECK_STATUS(CONV_CACHE_MISS, conv_plan_create(ctx, &p, &plan));
    } else {
      if (context_plan_matches_reference(ctx, &p, &info) != TEST_PASS) return TEST_FAIL;
      CHECK_MSG(info.source == CONV_SOURCE_TUNED, "source %d", (int)info.source);
      CHECK(lines.tunings == 1);
    }
    CHECK_MSG(lines.revalidation_failed, "%d warnings, last: %s", lines.warnings,
              lines.last_warning);
    CHECK(lines.carried == 0);
    CHECK_STATUS(CONV_OK, conv_context_destroy(ctx));
    cache_counts c;
    if (read_cache_counts(cache, &c) != TEST_PASS) return TEST_FAIL;
    CHECK(c.pending == 0);
    CHECK(c.winners_now == (policies[i] == CONV_POLICY_CACHE_ONLY ? 0 : 1));
  }
  remove_db(cache);
  return TEST_PASS;
}

static const test_case tests[] = {
    {"carried_after_driver_update", carried_after_driver_update},
    {"tune_stale_retimes", tune_stale_retimes},
    {"carried_from_system_cache", carried_from_system_cache},
    {"library_update_follows_rules", library_update_follows_rules},
    {"failed_revalidation_is_retuned", failed_revalidation_is_retuned},
};
TEST_MAIN(tests)
