/*
 * test_cache.c -- the SQLite plan cache (CPU only: nothing here needs a GPU):
 * rows, winners, schema versions and upgrades, corrupt rows.  Files and
 * processes (persistence, concurrent and read-only opens, special files,
 * the WAL identity) are test_cache_files.c's; the public reader, merging,
 * many and killed writers and the default path test_cache_share.c's; what
 * they share is in cache_fixtures.c.
 *
 * Databases live under $CONVTUNE_TEST_TMP (else /tmp), named after the pid
 * and the test, and are removed at the end.
 */
#include <math.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sqlite3.h>
#include <uv.h>

#include "tests/cache_fixtures.h"

/* ---------------------------------------------------------------- tests */

static int roundtrip_in(const char *path) {
  conv_error err = {0};
  conv_cache *cache = NULL;
  CHECK_OK(conv_cache_open(path, false, &cache, &err));
  CHECK(cache != NULL);
  CHECK_OK(conv_cache_begin_tuning(cache, &KEY, &err));
  CHECK(expect_no_winner(cache, &KEY) == TEST_PASS);

  conv_trial best;
  memset(&best, 0, sizeof best);
  best.algorithm_id = CONV_ALGO_IM2COL_GEMM;
  snprintf(best.algorithm, sizeof best.algorithm, "im2col_gemm");
  best.config.count = 3;
  best.config.values[0] = 12;
  best.config.values[1] = -3;
  best.config.values[2] = (int64_t)1 << 40;
  best.config.flags = CONV_CONFIG_HEURISTIC_RANKED;
  snprintf(best.config_text, sizeof best.config_text, "batch=32 gemm_algo=0");
  best.status = CONV_OK;
  best.time_ms = 1.25;
  best.rel_error = 3.5e-7;
  best.workspace_bytes = (size_t)5000000123u; /* over 4 GiB */
  best.heuristic_pick = true;

  conv_trial failed;
  memset(&failed, 0, sizeof failed);
  failed.algorithm_id = CONV_ALGO_CUDNN;
  snprintf(failed.algorithm, sizeof failed.algorithm, "cudnn");
  failed.config.count = 2;
  failed.config.values[0] = 7;
  failed.config.values[1] = 0;
  snprintf(failed.config_text, sizeof failed.config_text, "engine=7 knobs=");
  failed.status = CONV_WORKSPACE_LIMIT;
  snprintf(failed.reason, sizeof failed.reason, "engine 7 wants 2 GiB, the limit is 1 GiB");
  failed.time_ms = -1.0;
  failed.rel_error = -1.0;

  conv_trial plain; /* an empty config */
  memset(&plain, 0, sizeof plain);
  plain.algorithm_id = CONV_ALGO_CUDNN;
  snprintf(plain.algorithm, sizeof plain.algorithm, "cudnn");
  plain.status = CONV_OK;
  plain.time_ms = 2.0;
  plain.rel_error = 0.0;
  plain.workspace_bytes = 1;

  CHECK_OK(conv_cache_add_trial(cache, &KEY, &failed, &err));
  CHECK_OK(conv_cache_add_trial(cache, &KEY, &best, &err));
  CHECK_OK(conv_cache_add_trial(cache, &KEY, &plain, &err));
  CHECK(expect_no_winner(cache, &KEY) == TEST_PASS);
  CHECK_OK(conv_cache_set_winner(cache, &KEY, best.algorithm_id, &best.config, &err));

  conv_trial got;
  bool found = false;
  CHECK_OK(conv_cache_lookup_winner(cache, &KEY, &got, &found, &err));
  CHECK(found);
  CHECK(check_trial(&got, &best, true) == TEST_PASS);

  collector *c = new_collector();
  CHECK(c != NULL);
  CHECK_OK(conv_cache_list_trials(cache, PROBLEM, collect, c, &err));
  CHECK_MSG(c->count == 3, "%d rows", c->count);
  CHECK(check_trial(&c->rows[0].trial, &best, true) == TEST_PASS);
  CHECK(check_trial(&c->rows[1].trial, &plain, false) == TEST_PASS);
  CHECK(check_trial(&c->rows[2].trial, &failed, false) == TEST_PASS);
  for (int i = 0; i < 3; i++) {
    CHECK(strcmp(c->rows[i].problem, PROBLEM) == 0);
    CHECK(strcmp(c->rows[i].device, DEVICE) == 0);
    CHECK(strcmp(c->rows[i].versions, VERSIONS) == 0);
    CHECK_MSG(iso_utc(c->rows[i].tuned_at), "tuned_at '%s'", c->rows[i].tuned_at);
  }
  memset(c, 0, sizeof *c);
  CHECK_OK(conv_cache_list_winners(cache, collect, c, &err));
  CHECK_MSG(c->count == 1, "%d winners", c->count);
  CHECK(check_trial(&c->rows[0].trial, &best, true) == TEST_PASS);
  CHECK(strcmp(c->rows[0].versions, VERSIONS) == 0);
  free(c);

  if (strcmp(path, ":memory:") == 0) {
    conv_cache_close(cache);
    return TEST_PASS;
  }
  /* What the file holds, read behind the cache's back. */
  char text[256];
  sql_text(path, "SELECT config FROM trials WHERE winner = 1", text, sizeof text);
  CHECK_MSG(strcmp(text, "12,-3,1099511627776") == 0, "'%s'", text);
  sql_text(path, "SELECT status_name FROM trials WHERE config = '7,0'", text, sizeof text);
  CHECK_MSG(strcmp(text, conv_status_string(CONV_WORKSPACE_LIMIT)) == 0, "'%s'", text);
  CHECK(sql_int(path, "SELECT count(*) FROM trials WHERE time_ms IS NULL AND rel_error IS NULL "
                      "AND config = '7,0'") == 1);
  CHECK(sql_int(path, "SELECT count(*) FROM trials WHERE config = ''") == 1);
  sql_text(path, "SELECT value FROM meta WHERE key = 'schema_version'", text, sizeof text);
  CHECK_MSG(atoi(text) == CONV_CACHE_SCHEMA_VERSION, "'%s'", text);
  sql_text(path, "PRAGMA journal_mode", text, sizeof text);
  CHECK_MSG(strcmp(text, "wal") == 0, "journal mode '%s'", text);
  conv_cache_close(cache);

  /* Reopened, the same winner. */
  cache = NULL;
  CHECK_OK(conv_cache_open(path, false, &cache, &err));
  found = false;
  CHECK_OK(conv_cache_lookup_winner(cache, &KEY, &got, &found, &err));
  CHECK(found);
  CHECK(check_trial(&got, &best, true) == TEST_PASS);
  CHECK(count_trials(cache, PROBLEM) == 3);

  /* Bad arguments change nothing. */
  conv_trial bad = best;
  bad.algorithm_id = 0;
  CHECK_STATUS(CONV_INVALID_ARGUMENT, conv_cache_add_trial(cache, &KEY, &bad, &err));
  bad = best;
  bad.config.count = CONV_CONFIG_MAX_VALUES + 1;
  CHECK_STATUS(CONV_INVALID_ARGUMENT, conv_cache_add_trial(cache, &KEY, &bad, &err));
  conv_cache_key nokey = {NULL, DEVICE, VERSIONS};
  CHECK_STATUS(CONV_INVALID_ARGUMENT, conv_cache_add_trial(cache, &nokey, &best, &err));
  CHECK_STATUS(CONV_INVALID_ARGUMENT, conv_cache_lookup_winner(cache, &KEY, NULL, &found, &err));
  CHECK_STATUS(CONV_INVALID_ARGUMENT, conv_cache_open(NULL, false, &cache, &err));
  CHECK(count_trials(cache, PROBLEM) == 3);
  conv_cache_close(cache);
  conv_cache_close(NULL);
  return TEST_PASS;
}

static int test_roundtrip(void) {
  char path[1024];
  tmp_path(path, sizeof path, "roundtrip");
  int rc = roundtrip_in(path);
  remove_db(path);
  if (rc == TEST_PASS) rc = roundtrip_in(":memory:");
  return rc;
}

static int every_trial_kept_in(const char *path) {
  enum { N = 60 };
  const conv_cache_key other_device = {PROBLEM, DEVICE2, VERSIONS};
  const conv_cache_key other_problem = {PROBLEM2, DEVICE, VERSIONS};
  conv_error err = {0};
  conv_cache *cache = NULL;
  CHECK_OK(conv_cache_open(path, false, &cache, &err));
  CHECK(add_trials(cache, &other_device, 100, 5) == TEST_PASS);
  CHECK(add_trials(cache, &other_problem, 0, 4) == TEST_PASS);
  CHECK_OK(conv_cache_begin_tuning(cache, &KEY, &err));
  CHECK(add_trials(cache, &KEY, 0, N) == TEST_PASS);
  CHECK(set_winner(cache, &KEY, 17) == TEST_PASS); /* not the fastest */
  CHECK(expect_winner(cache, &KEY, 17) == TEST_PASS);

  collector *c = new_collector();
  CHECK(c != NULL);
  CHECK_OK(conv_cache_list_trials(cache, PROBLEM, collect, c, &err));
  CHECK_MSG(c->count == N + 5, "%d rows", c->count);
  CHECK(c->rows[0].trial.winner && c->rows[0].trial.config.values[0] == 17);
  int seen[N + 5] = {0};
  bool untimed_started = false;
  for (int r = 0; r < c->count; r++) {
    const conv_trial *t = &c->rows[r].trial;
    bool mine = strcmp(c->rows[r].device, DEVICE) == 0;
    int i = (int)t->config.values[0];
    CHECK(mine ? i >= 0 && i < N : i >= 100 && i < 105);
    conv_trial want = make_trial(i);
    CHECK(check_trial(t, &want, r == 0) == TEST_PASS);
    seen[mine ? i : N + i - 100]++;
    if (r >= 1) { /* after the winner: fastest first, then the untimed */
      if (t->time_ms < 0) untimed_started = true;
      else
        CHECK_MSG(!untimed_started && (r == 1 || t->time_ms >= c->rows[r - 1].trial.time_ms),
                  "row %d out of order", r);
    }
  }
  for (int i = 0; i < N + 5; i++) CHECK_MSG(seen[i] == 1, "trial %d seen %d times", i, seen[i]);
  CHECK(untimed_started);

  memset(c, 0, sizeof *c); /* the callback can stop the iteration */
  c->stop_after = 3;
  CHECK_OK(conv_cache_list_trials(cache, PROBLEM, collect, c, &err));
  CHECK(c->count == 3);
  free(c);
  CHECK(count_trials(cache, PROBLEM2) == 4);
  CHECK(count_trials(cache, "no such problem") == 0);

  /* A new tuning of KEY forgets KEY's trials only. */
  CHECK_OK(conv_cache_begin_tuning(cache, &KEY, &err));
  CHECK(count_trials(cache, PROBLEM) == 5);
  CHECK(expect_no_winner(cache, &KEY) == TEST_PASS);
  CHECK(count_trials(cache, PROBLEM2) == 4);
  conv_cache_close(cache);
  CHECK(sql_int(path, "SELECT count(*) FROM trials") == 9);
  return TEST_PASS;
}

static int test_every_trial_kept(void) {
  char path[1024];
  tmp_path(path, sizeof path, "every_trial_kept");
  int rc = every_trial_kept_in(path);
  remove_db(path);
  return rc;
}

static int stale_versions_ignored_in(const char *path) {
  const conv_cache_key old = {PROBLEM, DEVICE, VERSIONS_OLD};
  const conv_cache_key other_device = {PROBLEM, DEVICE2, VERSIONS};
  const conv_cache_key other_problem = {PROBLEM2, DEVICE, VERSIONS};
  conv_error err = {0};
  conv_cache *cache = NULL;
  CHECK_OK(conv_cache_open(path, false, &cache, &err));
  CHECK(add_trials(cache, &old, 0, 4) == TEST_PASS);
  CHECK(set_winner(cache, &old, 1) == TEST_PASS);

  CHECK(expect_winner(cache, &old, 1) == TEST_PASS);
  CHECK(expect_no_winner(cache, &KEY) == TEST_PASS);
  CHECK(expect_no_winner(cache, &other_device) == TEST_PASS);
  CHECK(expect_no_winner(cache, &other_problem) == TEST_PASS);

  /* Still listed, with the versions they were tuned under. */
  collector *c = new_collector();
  CHECK(c != NULL);
  CHECK_OK(conv_cache_list_trials(cache, PROBLEM, collect, c, &err));
  CHECK(c->count == 4);
  for (int r = 0; r < 4; r++) CHECK(strcmp(c->rows[r].versions, VERSIONS_OLD) == 0);
  memset(c, 0, sizeof *c);
  CHECK_OK(conv_cache_list_winners(cache, collect, c, &err));
  CHECK(c->count == 1 && strcmp(c->rows[0].versions, VERSIONS_OLD) == 0);

  /* Re-tuned under the current versions: each key has its own winner. */
  CHECK_OK(conv_cache_begin_tuning(cache, &KEY, &err));
  CHECK(count_trials(cache, PROBLEM) == 4); /* the old rows survive */
  CHECK(add_trials(cache, &KEY, 0, 4) == TEST_PASS);
  CHECK(set_winner(cache, &KEY, 2) == TEST_PASS);
  CHECK(expect_winner(cache, &KEY, 2) == TEST_PASS);
  CHECK(expect_winner(cache, &old, 1) == TEST_PASS);
  CHECK(expect_no_winner(cache, &other_device) == TEST_PASS);

  memset(c, 0, sizeof *c);
  CHECK_OK(conv_cache_list_trials(cache, PROBLEM, collect, c, &err));
  CHECK(c->count == 8);
  CHECK(c->rows[0].trial.winner && c->rows[1].trial.winner && !c->rows[2].trial.winner);
  memset(c, 0, sizeof *c);
  CHECK_OK(conv_cache_list_winners(cache, collect, c, &err));
  CHECK(c->count == 2);
  CHECK(strcmp(c->rows[0].versions, VERSIONS_OLD) == 0); /* "cuda=12..." < "cuda=13..." */
  CHECK(c->rows[0].trial.config.values[0] == 1);
  CHECK(strcmp(c->rows[1].versions, VERSIONS) == 0);
  CHECK(c->rows[1].trial.config.values[0] == 2);
  free(c);
  conv_cache_close(cache);
  return TEST_PASS;
}

static int test_stale_versions_ignored(void) {
  char path[1024];
  tmp_path(path, sizeof path, "stale_versions_ignored");
  int rc = stale_versions_ignored_in(path);
  remove_db(path);
  return rc;
}

static int winner_unique_in(const char *path) {
  const conv_cache_key key2 = {PROBLEM2, DEVICE, VERSIONS};
  conv_error err = {0};
  conv_cache *cache = NULL;
  CHECK_OK(conv_cache_open(path, false, &cache, &err));
  CHECK(add_trials(cache, &KEY, 0, 6) == TEST_PASS);
  CHECK(add_trials(cache, &key2, 0, 3) == TEST_PASS);
  CHECK(set_winner(cache, &key2, 0) == TEST_PASS);

  const char *const count_key1 =
      "SELECT count(*) FROM trials WHERE winner <> 0 AND problem = '" PROBLEM "'";
  CHECK(set_winner(cache, &KEY, 1) == TEST_PASS);
  CHECK(expect_winner(cache, &KEY, 1) == TEST_PASS);
  CHECK(set_winner(cache, &KEY, 3) == TEST_PASS); /* moves */
  CHECK(expect_winner(cache, &KEY, 3) == TEST_PASS);
  CHECK(sql_int(path, count_key1) == 1);
  CHECK(expect_winner(cache, &key2, 0) == TEST_PASS); /* another key is untouched */

  /* No such trial: an error, and the winner stays (the transaction rolled back). */
  conv_config missing = {.count = 1, .values = {99}};
  CHECK_CACHE_ERROR(conv_cache_set_winner(cache, &KEY, CONV_ALGO_CUDNN, &missing, &err));
  conv_trial t3 = make_trial(3);
  CHECK_CACHE_ERROR(conv_cache_set_winner(cache, &KEY, 77, &t3.config, &err));
  CHECK_CACHE_ERROR(conv_cache_set_winner(cache, &key2, t3.algorithm_id, &t3.config, &err));
  CHECK(expect_winner(cache, &KEY, 3) == TEST_PASS);
  CHECK(expect_winner(cache, &key2, 0) == TEST_PASS);
  CHECK(sql_int(path, count_key1) == 1);

  CHECK(set_winner(cache, &KEY, 3) == TEST_PASS); /* again: still one */
  CHECK(sql_int(path, count_key1) == 1);

  /* A trial stored as the winner replaces the winner. */
  conv_trial t6 = make_trial(6);
  t6.winner = true;
  CHECK_OK(conv_cache_add_trial(cache, &KEY, &t6, &err));
  CHECK(expect_winner(cache, &KEY, 6) == TEST_PASS);
  CHECK(sql_int(path, count_key1) == 1);

  /* The same config stored twice: one row is marked. */
  CHECK(add_trials(cache, &KEY, 2, 1) == TEST_PASS);
  CHECK(set_winner(cache, &KEY, 2) == TEST_PASS);
  CHECK(expect_winner(cache, &KEY, 2) == TEST_PASS);
  CHECK(sql_int(path, count_key1) == 1);
  CHECK(sql_int(path, "SELECT count(*) FROM trials WHERE winner <> 0") == 2);
  CHECK(count_trials(cache, PROBLEM) == 8);
  conv_cache_close(cache);
  return TEST_PASS;
}

static int test_winner_unique(void) {
  char path[1024];
  tmp_path(path, sizeof path, "winner_unique");
  int rc = winner_unique_in(path);
  remove_db(path);
  return rc;
}

static int schema_version_checked_in(const char *path, const char *path2) {
  /* A newer schema. */
  CHECK(sql_exec(path, "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT);"
                       "INSERT INTO meta VALUES ('schema_version', '999');"
                       "CREATE TABLE trials (id INTEGER PRIMARY KEY, blob BLOB);") == SQLITE_OK);
  CHECK(check_refused(path, "999") == TEST_PASS);
  CHECK(sql_int(path, "SELECT count(*) FROM sqlite_master") == 3); /* nothing added */
  remove_db(path);

  /* Our tables, no version row. */
  CHECK(sql_exec(path, "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT);"
                       "CREATE TABLE trials (id INTEGER PRIMARY KEY);") == SQLITE_OK);
  CHECK(check_refused(path, "version") == TEST_PASS);
  remove_db(path);

  /* Somebody else's database. */
  CHECK(sql_exec(path, "CREATE TABLE people (name TEXT, age INTEGER);"
                       "INSERT INTO people VALUES ('ada', 36);") == SQLITE_OK);
  CHECK(check_refused(path, "meta") == TEST_PASS);
  remove_db(path);

  /* Not a database at all. */
  char junk[4096];
  for (size_t i = 0; i < sizeof junk; i++) junk[i] = "this is not a database\n"[i % 23];
  CHECK(write_all(path, junk, sizeof junk));
  CHECK(check_refused(path, "not a database") == TEST_PASS);
  remove_db(path);

  /* Our own version opens, twice. */
  conv_error err = {0};
  conv_cache *cache = NULL;
  CHECK_OK(conv_cache_open(path2, false, &cache, &err));
  conv_cache_close(cache);
  cache = NULL;
  CHECK_OK(conv_cache_open(path2, false, &cache, &err));
  CHECK(add_trials(cache, &KEY, 0, 1) == TEST_PASS);
  conv_cache_close(cache);
  cache = NULL;
  CHECK_OK(conv_cache_open(path2, true, &cache, &err));
  CHECK(count_trials(cache, PROBLEM) == 1);
  conv_cache_close(cache);
  char version[32];
  sql_text(path2, "SELECT value FROM meta WHERE key = 'schema_version'", version, sizeof version);
  CHECK(atoi(version) == CONV_CACHE_SCHEMA_VERSION);
  /* ... until its version is bumped behind its back. */
  CHECK(sql_exec(path2, "UPDATE meta SET value = '4' WHERE key = 'schema_version'") == SQLITE_OK);
  CHECK(check_refused(path2, "version 4") == TEST_PASS);
  return TEST_PASS;
}

/* A cache as schema version 1 wrote it (no deterministic column), with
 * one winner: make_trial(0)'s values. */
static bool write_version1_cache(const char *path) {
  char sql[2048];
  snprintf(sql, sizeof sql,
           "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);"
           "INSERT INTO meta VALUES ('schema_version', '1');"
           "CREATE TABLE trials (id INTEGER PRIMARY KEY, problem TEXT NOT NULL,"
           " device TEXT NOT NULL, versions TEXT NOT NULL, algorithm_id INTEGER NOT NULL,"
           " algorithm TEXT NOT NULL, config TEXT NOT NULL, config_text TEXT NOT NULL,"
           " status INTEGER NOT NULL, status_name TEXT NOT NULL, reason TEXT NOT NULL,"
           " time_ms REAL, rel_error REAL, workspace_bytes INTEGER NOT NULL,"
           " heuristic_pick INTEGER NOT NULL, winner INTEGER NOT NULL DEFAULT 0,"
           " tuned_at TEXT NOT NULL DEFAULT (strftime('%%Y-%%m-%%dT%%H:%%M:%%SZ', 'now')));"
           "CREATE INDEX trials_key ON trials (problem, device, versions);"
           "INSERT INTO trials (problem, device, versions, algorithm_id, algorithm, config,"
           " config_text, status, status_name, reason, time_ms, rel_error, workspace_bytes,"
           " heuristic_pick, winner) VALUES ('%s', '%s', '%s', %d, 'cudnn', '0,0,0',"
           " 'engine=0 knobs=0', 0, 'success', '', 1.0, 1e-7, 0, 1, 1);",
           PROBLEM, DEVICE, VERSIONS, CONV_ALGO_CUDNN);
  return sql_exec(path, sql) == SQLITE_OK;
}

/* Version 1 is read as it is (determinism unknown) by a read-only handle,
 * which leaves it alone, and upgraded in place by a writable one, old rows
 * kept. */
static int schema_upgraded_in(const char *path) {
  CHECK(write_version1_cache(path));
  conv_error err = {0};
  conv_cache *cache = NULL;
  conv_trial got;
  bool found = false;
  CHECK_OK(conv_cache_open(path, true, &cache, &err));
  CHECK_OK(conv_cache_lookup_winner(cache, &KEY, &got, &found, &err));
  CHECK(found && got.deterministic == -1 && got.time_ms == 1.0);
  conv_cache_close(cache);
  char version[32];
  sql_text(path, "SELECT value FROM meta WHERE key = 'schema_version'", version, sizeof version);
  CHECK_MSG(strcmp(version, "1") == 0, "a read-only open wrote version '%s'", version);

  cache = NULL;
  CHECK_OK(conv_cache_open(path, false, &cache, &err));
  sql_text(path, "SELECT value FROM meta WHERE key = 'schema_version'", version, sizeof version);
  CHECK_MSG(strcmp(version, "3") == 0, "version '%s' after a writable open", version);
  found = false;
  CHECK_OK(conv_cache_lookup_winner(cache, &KEY, &got, &found, &err));
  CHECK(found && got.deterministic == -1 && got.time_ms == 1.0);
  CHECK(add_trials(cache, &KEY, 1, 3) == TEST_PASS); /* deterministic 0, unknown, 1 */
  CHECK(count_trials(cache, PROBLEM) == 4);
  conv_cache_close(cache);
  CHECK(sql_int(path, "SELECT count(*) FROM trials WHERE deterministic IS NULL") == 2);
  CHECK(sql_int(path, "SELECT count(*) FROM trials WHERE deterministic = 1") == 1);
  return TEST_PASS;
}

static int test_schema_upgraded(void) {
  char path[1024];
  tmp_path(path, sizeof path, "schema_upgraded");
  int rc = schema_upgraded_in(path);
  remove_db(path);
  return rc;
}

static int test_schema_version_checked(void) {
  char path[1024], path2[1024];
  tmp_path(path, sizeof path, "schema_version_checked");
  tmp_path(path2, sizeof path2, "schema_version_checked2");
  int rc = schema_version_checked_in(path, path2);
  remove_db(path);
  remove_db(path2);
  return rc;
}

/* After the UPDATE `set` (if any) of the winner row, lookup and both listings
 * must fail with a message mentioning `mention`, leaving the outputs alone. */
static int check_corrupt(conv_cache *cache, const char *path, const char *set,
                         const char *mention) {
  if (set != NULL) CHECK(sql_exec(path, set) == SQLITE_OK);
  conv_error err = {0};
  conv_trial got;
  memset(&got, 0x5a, sizeof got);
  bool found = false;
  CHECK_CACHE_ERROR(conv_cache_lookup_winner(cache, &KEY, &got, &found, &err));
  CHECK_MSG(strstr(err.message, mention) != NULL, "%s -> %s", set, err.message);
  CHECK(!found && got.algorithm_id == 0x5a5a5a5au); /* outputs untouched */
  collector *c = new_collector();
  CHECK(c != NULL);
  CHECK_CACHE_ERROR(conv_cache_list_winners(cache, collect, c, &err));
  CHECK_CACHE_ERROR(conv_cache_list_trials(cache, PROBLEM, collect, c, &err));
  free(c);
  return TEST_PASS;
}

static int bad_config_text_rejected_in(const char *path) {
  conv_error err = {0};
  conv_cache *cache = NULL;
  CHECK_OK(conv_cache_open(path, false, &cache, &err));
  CHECK(add_trials(cache, &KEY, 1, 1) == TEST_PASS);
  CHECK(sql_exec(path, "INSERT INTO trials (problem, device, versions, algorithm_id, algorithm,"
                       " config, config_text, status, status_name, reason, time_ms, rel_error,"
                       " workspace_bytes, heuristic_pick, winner) VALUES ('" PROBLEM "', '" DEVICE
                       "', '" VERSIONS "', 1, 'cudnn', 'garbage,,x', 'engine=?', 0, 'success', '',"
                       " 0.5, 1e-7, 0, 0, 1)") == SQLITE_OK);

#define WINNER_ROW " WHERE winner = 1"
  CHECK(check_corrupt(cache, path, NULL, "corrupt config") == TEST_PASS);
  static const char *const bad_configs[] = {
      "UPDATE trials SET config = '1,2,'" WINNER_ROW,
      "UPDATE trials SET config = '1, 2'" WINNER_ROW,
      "UPDATE trials SET config = ' 1'" WINNER_ROW,
      "UPDATE trials SET config = '1;DROP'" WINNER_ROW,
      "UPDATE trials SET config = '99999999999999999999'" WINNER_ROW,
      /* 33 values: one more than a config holds */
      "UPDATE trials SET config = '1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,29,30,31,32,33'" WINNER_ROW,
      "UPDATE trials SET config = 5.5" WINNER_ROW, /* stored as text '5.5' */
      "UPDATE trials SET config = x'312c32'" WINNER_ROW, /* a blob */
      "UPDATE trials SET config = CAST(x'310032' AS TEXT)" WINNER_ROW, /* "1", NUL, "2" */
  };
  for (size_t i = 0; i < sizeof bad_configs / sizeof bad_configs[0]; i++)
    CHECK_MSG(check_corrupt(cache, path, bad_configs[i], "corrupt config") == TEST_PASS, "%s",
              bad_configs[i]);

  /* Good config text, other values out of range. */
  CHECK(sql_exec(path, "UPDATE trials SET config = '4,5'" WINNER_ROW) == SQLITE_OK);
  CHECK(check_corrupt(cache, path, "UPDATE trials SET algorithm_id = -5" WINNER_ROW,
                      "algorithm id") == TEST_PASS);
  CHECK(check_corrupt(cache, path, "UPDATE trials SET algorithm_id = 4294967296" WINNER_ROW,
                      "algorithm id") == TEST_PASS);
  CHECK(check_corrupt(cache, path, "UPDATE trials SET algorithm_id = 'one'" WINNER_ROW,
                      "algorithm id") == TEST_PASS);
  CHECK(sql_exec(path, "UPDATE trials SET algorithm_id = 2" WINNER_ROW) == SQLITE_OK);
  CHECK(check_corrupt(cache, path, "UPDATE trials SET status = 9999" WINNER_ROW, "status") ==
        TEST_PASS);
  CHECK(check_corrupt(cache, path, "UPDATE trials SET status = -1" WINNER_ROW, "status") ==
        TEST_PASS);
  CHECK(sql_exec(path, "UPDATE trials SET status = 0" WINNER_ROW) == SQLITE_OK);
  CHECK(check_corrupt(cache, path, "UPDATE trials SET workspace_bytes = -1" WINNER_ROW,
                      "workspace") == TEST_PASS);
  CHECK(sql_exec(path, "UPDATE trials SET workspace_bytes = 64" WINNER_ROW) == SQLITE_OK);
  CHECK(check_corrupt(cache, path, "UPDATE trials SET time_ms = 'fast'" WINNER_ROW, "time") ==
        TEST_PASS);

  /* A text longer than its buffer is refused, not cut (test_cache_trust.c
   * holds every column to it); the row then reads whole. */
  CHECK(check_corrupt(cache, path,
                      "UPDATE trials SET time_ms = 0.5, algorithm = printf('%.100c', 'a')"
                      WINNER_ROW, "algorithm") == TEST_PASS);
  CHECK(sql_exec(path, "UPDATE trials SET algorithm = 'cudnn'" WINNER_ROW) == SQLITE_OK);
  conv_trial got;
  bool found = false;
  CHECK_OK(conv_cache_lookup_winner(cache, &KEY, &got, &found, &err));
  CHECK(found);
  CHECK(got.algorithm_id == 2 && got.config.count == 2 && got.config.values[1] == 5);
  CHECK(got.workspace_bytes == 64 && got.time_ms == 0.5 && got.rel_error == 1e-7);
  CHECK(strcmp(got.algorithm, "cudnn") == 0 && strcmp(got.config_text, "engine=?") == 0);
  CHECK(count_trials(cache, PROBLEM) == 2);
#undef WINNER_ROW
  conv_cache_close(cache);
  return TEST_PASS;
}

static int test_bad_config_text_rejected(void) {
  char path[1024];
  tmp_path(path, sizeof path, "bad_config_text_rejected");
  int rc = bad_config_text_rejected_in(path);
  remove_db(path);
  return rc;
}

static const test_case tests[] = {
    {"roundtrip", test_roundtrip},
    {"every_trial_kept", test_every_trial_kept},
    {"stale_versions_ignored", test_stale_versions_ignored},
    {"winner_unique", test_winner_unique},
    {"schema_version_checked", test_schema_version_checked},
    {"schema_upgraded", test_schema_upgraded},
    {"bad_config_text_rejected", test_bad_config_text_rejected},
};

TEST_MAIN(tests)
