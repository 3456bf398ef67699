/*
 * test_cache_trust.c -- a cache file as untrusted input (CPU only): every
 * value of a row is checked before it is used, a crafted schema is
 * refused at open, read-only opens bound the length of any value, a key
 * reads with one winner, and the plan path's look-up passes over a layer
 * whose row fails, with a warning.  What the cache tests share is in
 * cache_fixtures.c; rows are corrupted behind the cache's back with raw
 * SQL, as a hostile file would hold them.
 */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sqlite3.h>

#include "tests/cache_fixtures.h"

/* Trials 0-5 of KEY (trial 4 failed), trial 0 the winner. */
#define FIXTURE_TRIALS 6

static int write_fixture(const char *path) {
  remove_db(path);
  conv_error err = {0};
  conv_cache *cache = NULL;
  CHECK_OK(conv_cache_open(path, false, &cache, &err));
  int rc = add_trials(cache, &KEY, 0, FIXTURE_TRIALS);
  if (rc == TEST_PASS) rc = set_winner(cache, &KEY, 0);
  conv_cache_close(cache);
  return rc;
}

/* ---------------------------------------------------------------- rows */

typedef struct corruption {
  const char *sql;     /* applied to a fresh fixture */
  const char *mention; /* what the refusal names */
} corruption;

/* After c->sql, every read that meets the corrupted row refuses it with a
 * message naming c->mention, and none returns it: the listing of winners
 * always meets it; a look-up of KEY and the listing of its trials meet it
 * unless the corruption moved it out of KEY. */
static int corrupt_row_refused(const char *path, const corruption *c) {
  if (write_fixture(path) != TEST_PASS) return TEST_FAIL;
  CHECK(sql_exec(path, c->sql) == SQLITE_OK);
  conv_error err = {0};
  conv_cache *cache = NULL;
  CHECK_OK(conv_cache_open(path, true, &cache, &err));
  collector *rows = new_collector();
  CHECK(rows != NULL);
  int rc = TEST_FAIL;
  err.message[0] = '\0';
  conv_status listed = conv_cache_list_winners(cache, collect, rows, &err);
  if (listed != CONV_CACHE_ERROR || strstr(err.message, c->mention) == NULL) {
    fprintf(stderr, "%s: list_winners: %s, %d rows, \"%s\"\n", c->sql, conv_status_string(listed),
            rows->count, err.message);
    goto done;
  }
  conv_trial got;
  bool found = false;
  err.message[0] = '\0';
  conv_status looked = conv_cache_lookup_winner(cache, &KEY, &got, &found, &err);
  if (!(looked == CONV_CACHE_ERROR && strstr(err.message, c->mention) != NULL) &&
      !(looked == CONV_OK && !found)) {
    fprintf(stderr, "%s: lookup: %s, found %d, \"%s\"\n", c->sql, conv_status_string(looked),
            found, err.message);
    goto done;
  }
  rows->count = 0;
  err.message[0] = '\0';
  listed = conv_cache_list_trials(cache, PROBLEM, collect, rows, &err);
  if (!(listed == CONV_CACHE_ERROR && strstr(err.message, c->mention) != NULL) &&
      !(listed == CONV_OK && rows->count == FIXTURE_TRIALS - 1)) {
    fprintf(stderr, "%s: list_trials: %s, %d rows, \"%s\"\n", c->sql, conv_status_string(listed),
            rows->count, err.message);
    goto done;
  }
  rc = TEST_PASS;
done:
  free(rows);
  conv_cache_close(cache);
  return rc;
}

#define WINNER_ROW " WHERE winner = 1"
#define WITH_NUL(column) "UPDATE trials SET " column " = " column " || char(0) || 'x'" WINNER_ROW
#define LONGER(column, n) "UPDATE trials SET " column " = " column " || printf('%." #n "c', 'x')" WINNER_ROW

/* Texts with a NUL inside or longer than any writer writes, values of the
 * wrong type or range, and a winner
 * that failed, was never validated or never timed: each refused, naming
 * what is wrong.  (Before, a NUL cut a key short, naming another key's
 * tuning, and a failed winner read as any other.) */
static int test_every_value_checked(void) {
  static const corruption cases[] = {
      {WITH_NUL("problem"), "problem"},
      {WITH_NUL("device"), "device"},
      {WITH_NUL("versions"), "versions"},
      {WITH_NUL("tuned_at"), "time of tuning"},
      {WITH_NUL("algorithm"), "algorithm"},
      {WITH_NUL("config_text"), "config text"},
      {WITH_NUL("reason"), "reason"},
      {LONGER("device", 1100), "device"},
      {LONGER("versions", 4100), "versions"},
      {LONGER("tuned_at", 64), "time of tuning"},
      {LONGER("algorithm", 32), "algorithm"},
      {LONGER("config_text", 128), "config text"},
      {LONGER("reason", 256), "reason"},
      {"UPDATE trials SET problem = CAST(problem AS BLOB)" WINNER_ROW, "problem"},
      {"UPDATE trials SET device = CAST(device AS BLOB)" WINNER_ROW, "device"},
      {"UPDATE trials SET reason = x'6869'" WINNER_ROW, "reason"},
      {"UPDATE trials SET heuristic_pick = 2" WINNER_ROW, "flag"},
      {"UPDATE trials SET winner = 'yes'" WINNER_ROW, "flag"},
      {"UPDATE trials SET deterministic = 'yes'" WINNER_ROW, "flag"},
      {"UPDATE trials SET time_ms = -2.5" WINNER_ROW, "time"},
      {"UPDATE trials SET time_ms = 9e999" WINNER_ROW, "time"},
      {"UPDATE trials SET rel_error = -1" WINNER_ROW, "time or error"},
      {"UPDATE trials SET status = 3" WINNER_ROW, "winner"},
      {"UPDATE trials SET time_ms = NULL" WINNER_ROW, "winner"},
      {"UPDATE trials SET time_ms = 0" WINNER_ROW, "winner"},
      {"UPDATE trials SET rel_error = NULL" WINNER_ROW, "winner"},
  };
  char path[1024];
  tmp_path(path, sizeof path, "every_value_checked");
  int rc = TEST_PASS;
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    if (corrupt_row_refused(path, &cases[i]) != TEST_PASS) rc = TEST_FAIL;
  remove_db(path);
  return rc;
}

/* The same rows as the writers leave them read back whole: a failed,
 * untimed trial is no winner and reads as the others do. */
static int test_valid_rows_read(void) {
  char path[1024];
  tmp_path(path, sizeof path, "valid_rows_read");
  CHECK(write_fixture(path) == TEST_PASS);
  conv_error err = {0};
  conv_cache *cache = NULL;
  CHECK_OK(conv_cache_open(path, true, &cache, &err));
  CHECK(expect_winner(cache, &KEY, 0) == TEST_PASS);
  CHECK(count_trials(cache, PROBLEM) == FIXTURE_TRIALS);
  collector *rows = new_collector();
  CHECK(rows != NULL);
  CHECK_OK(conv_cache_list_winners(cache, collect, rows, &err));
  CHECK(rows->count == 1 && strcmp(rows->rows[0].problem, PROBLEM) == 0);
  free(rows);
  conv_cache_close(cache);
  remove_db(path);
  return TEST_PASS;
}

/* A problem key this version does not write (another version's) is
 * listed as it is, for reports; the shared key check, which what copies a
 * row under its key calls first, refuses it. */
static int test_other_versions_keys_listed(void) {
  char path[1024];
  tmp_path(path, sizeof path, "other_versions_keys_listed");
  CHECK(write_fixture(path) == TEST_PASS);
  conv_error err = {0};
  conv_cache *cache = NULL;
  CHECK_OK(conv_cache_open(path, false, &cache, &err));
  const conv_cache_key newer = {"fwd f8 nchw strict none n32 c64 h56 w56 k64 r3 s3 pad1,1 str1,1"
                                " dil1,1 g1",
                                DEVICE, VERSIONS};
  CHECK(add_trials(cache, &newer, 0, 1) == TEST_PASS);
  CHECK(set_winner(cache, &newer, 0) == TEST_PASS);
  collector *rows = new_collector();
  CHECK(rows != NULL);
  CHECK_OK(conv_cache_list_winners(cache, collect, rows, &err));
  CHECK(rows->count == 2);
  for (int i = 0; i < rows->count; i++) {
    const conv_cache_key k = {rows->rows[i].problem, rows->rows[i].device,
                              rows->rows[i].versions};
    if (strcmp(k.problem, PROBLEM) == 0) {
      CHECK_OK(conv_cache_check_key_texts(&k, &err));
    } else {
      CHECK(strcmp(k.problem, newer.problem) == 0);
      CHECK_CACHE_ERROR(conv_cache_check_key_texts(&k, &err));
      CHECK(strstr(err.message, "problem key") != NULL);
    }
  }
  free(rows);
  conv_cache_close(cache);
  remove_db(path);
  return TEST_PASS;
}

/* Of two rows marked winner of one key (a file written behind the
 * cache's back), the latest is the winner for every read: listed once,
 * marked alone among the trials, and what a look-up finds.  (Before,
 * both were listed, and a copy carried both.) */
static int test_one_winner_per_key(void) {
  char path[1024];
  tmp_path(path, sizeof path, "one_winner_per_key");
  CHECK(write_fixture(path) == TEST_PASS);
  CHECK(sql_exec(path, "UPDATE trials SET winner = 1 WHERE id = (SELECT max(id) FROM trials"
                       " WHERE status = 0)") == SQLITE_OK); /* trial 5 */
  CHECK(sql_int(path, "SELECT count(*) FROM trials WHERE winner <> 0") == 2);
  conv_error err = {0};
  conv_cache *cache = NULL;
  CHECK_OK(conv_cache_open(path, true, &cache, &err));
  CHECK(expect_winner(cache, &KEY, 5) == TEST_PASS);
  collector *rows = new_collector();
  CHECK(rows != NULL);
  CHECK_OK(conv_cache_list_winners(cache, collect, rows, &err));
  CHECK_MSG(rows->count == 1, "%d winners listed", rows->count);
  conv_trial want = make_trial(5);
  CHECK(check_trial(&rows->rows[0].trial, &want, true) == TEST_PASS);
  rows->count = 0;
  CHECK_OK(conv_cache_list_trials(cache, PROBLEM, collect, rows, &err));
  CHECK(rows->count == FIXTURE_TRIALS);
  int winners = 0;
  for (int i = 0; i < rows->count; i++) winners += rows->rows[i].trial.winner;
  CHECK_MSG(winners == 1, "%d trials marked winner", winners);
  CHECK(check_trial(&rows->rows[0].trial, &want, true) == TEST_PASS); /* winners first */
  free(rows);
  conv_cache_close(cache);
  remove_db(path);
  return TEST_PASS;
}

/* ---------------------------------------------------------------- schema */

/* A cache whose schema is not convtune's (an extra or generated column, a
 * trigger, a view, another table or index, a missing index) is refused at
 * open, read-only and writable, naming what differs, and left as it was.
 * (Before, it opened: a generated reason made a listing compute a 100 MB
 * text per row, and a trigger ran on the cache's own writes.) */
static int test_schema_compared(void) {
  static const corruption cases[] = {
      {"ALTER TABLE trials ADD COLUMN extra TEXT", "table trials"},
      {"ALTER TABLE trials ADD COLUMN big TEXT GENERATED ALWAYS AS"
       " (printf('%.*c', 100000000, 'x')) VIRTUAL",
       "table trials"},
      /* The 4 GB `list` of issue 54 in small: a column the reads select,
       * computed. */
      {"ALTER TABLE trials RENAME TO old_trials;"
       "CREATE TABLE trials (id INTEGER PRIMARY KEY, problem TEXT NOT NULL, device TEXT NOT NULL,"
       " versions TEXT NOT NULL, algorithm_id INTEGER NOT NULL, algorithm TEXT NOT NULL,"
       " config TEXT NOT NULL, config_text TEXT NOT NULL, status INTEGER NOT NULL,"
       " status_name TEXT NOT NULL, reason AS (printf('%.*c', 100000000, 'x')), time_ms REAL,"
       " rel_error REAL, workspace_bytes INTEGER NOT NULL, heuristic_pick INTEGER NOT NULL,"
       " winner INTEGER NOT NULL DEFAULT 0, tuned_at TEXT NOT NULL, deterministic INTEGER);"
       "INSERT INTO trials SELECT id, problem, device, versions, algorithm_id, algorithm, config,"
       " config_text, status, status_name, time_ms, rel_error, workspace_bytes, heuristic_pick,"
       " winner, tuned_at, deterministic FROM old_trials;"
       "DROP TABLE old_trials;"
       "CREATE INDEX trials_key ON trials (problem, device, versions)",
       "table trials"},
      {"ALTER TABLE meta ADD COLUMN big AS (printf('%.*c', 100000000, 'x'))", "meta"},
      {"CREATE TRIGGER forget AFTER INSERT ON trials BEGIN DELETE FROM trials; END",
       "trigger forget"},
      {"CREATE VIEW everything AS SELECT * FROM trials", "view everything"},
      {"CREATE TABLE notes (text TEXT)", "table notes"},
      {"CREATE INDEX by_reason ON trials (reason)", "index by_reason"},
      {"DROP INDEX trials_key", "trials_key"},
      {"DROP TABLE pending; CREATE TABLE pending (problem TEXT COLLATE NOCASE NOT NULL,"
       " device TEXT NOT NULL, versions TEXT NOT NULL, reason TEXT NOT NULL,"
       " recorded_at TEXT NOT NULL, PRIMARY KEY (problem, device, versions))",
       "table pending"},
  };
  char path[1024];
  tmp_path(path, sizeof path, "schema_compared");
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    CHECK(write_fixture(path) == TEST_PASS);
    CHECK(sql_exec(path, cases[i].sql) == SQLITE_OK);
    CHECK_MSG(check_refused(path, cases[i].mention) == TEST_PASS, "%s", cases[i].sql);
  }
  remove_db(path);
  return TEST_PASS;
}

/* A read-only open bounds the length of any value SQLite reads or makes
 * (SQLITE_LIMIT_LENGTH, far above the longest row a writer writes): a
 * 100 KB text is refused by SQLite itself, before any of it is copied
 * out; a writable open refuses it by its own check. */
static int test_read_only_length_limit(void) {
  char path[1024];
  tmp_path(path, sizeof path, "read_only_length_limit");
  CHECK(write_fixture(path) == TEST_PASS);
  CHECK(sql_exec(path, "UPDATE trials SET reason = printf('%.100000c', 'r') WHERE id = 2") ==
        SQLITE_OK);
  conv_error err = {0};
  for (int read_only = 1; read_only >= 0; read_only--) {
    conv_cache *cache = NULL;
    CHECK_OK(conv_cache_open(path, read_only, &cache, &err));
    CHECK(expect_winner(cache, &KEY, 0) == TEST_PASS); /* another row */
    collector *rows = new_collector();
    CHECK(rows != NULL);
    CHECK_CACHE_ERROR(conv_cache_list_trials(cache, PROBLEM, collect, rows, &err));
    free(rows);
    conv_cache_close(cache);
    const char *mention = read_only ? "too big" : "reason";
    CHECK_MSG(strstr(err.message, mention) != NULL, "read-only %d: %s", read_only, err.message);
  }
  remove_db(path);
  return TEST_PASS;
}

/* ---------------------------------------------------------------- plan layers */

typedef struct heard {
  int warnings;
  char last[1024];
} heard;

static void hear(void *user, conv_log_level level, const char *message) {
  heard *h = user;
  if (level != CONV_LOG_WARN) return;
  h->warnings++;
  snprintf(h->last, sizeof h->last, "%s", message);
}

/* The plan path's look-up in one layer: a winner row that fails its
 * checks is passed over with one warning (the key, the layer, why, what
 * happens instead), as no winner and CONV_OK, so that the plan path falls
 * through to the next layer or to tuning; a sound row is found, silently. */
static int test_layer_passes_over_bad_row(void) {
  char path[1024];
  tmp_path(path, sizeof path, "layer_passes_over_bad_row");
  CHECK(write_fixture(path) == TEST_PASS);
  heard h = {0, ""};
  const conv_logger log = {hear, &h, CONV_LOG_INFO};
  conv_error err = {0};
  conv_cache *cache = NULL;
  conv_trial got;
  bool found = false;
  CHECK_OK(conv_cache_open(path, true, &cache, &err));
  CHECK_OK(conv_cache_lookup_layer(cache, &KEY, &log, "system cache", "tuning it", &got, &found,
                                   &err));
  CHECK(found && got.winner && h.warnings == 0);
  conv_cache_close(cache);

  CHECK(sql_exec(path, "UPDATE trials SET status = 3, time_ms = NULL" WINNER_ROW) == SQLITE_OK);
  CHECK_OK(conv_cache_open(path, true, &cache, &err));
  found = true;
  err.message[0] = '\0';
  CHECK_OK(conv_cache_lookup_layer(cache, &KEY, &log, "system cache", "tuning it", &got, &found,
                                   &err));
  CHECK(!found);
  CHECK_MSG(h.warnings == 1 && strstr(h.last, PROBLEM) != NULL &&
                strstr(h.last, "system cache") != NULL && strstr(h.last, "winner") != NULL &&
                strstr(h.last, path) != NULL && strstr(h.last, "tuning it") != NULL,
            "%d warnings, last \"%s\"", h.warnings, h.last);
  /* Without a log callback it is passed over all the same. */
  found = true;
  CHECK_OK(conv_cache_lookup_layer(cache, &KEY, NULL, "cache", "tuning it", &got, &found, &err));
  CHECK(!found);
  CHECK_STATUS(CONV_INVALID_ARGUMENT,
               conv_cache_lookup_layer(cache, NULL, &log, "cache", "tuning it", &got, &found, &err));
  CHECK_STATUS(CONV_INVALID_ARGUMENT,
               conv_cache_lookup_layer(cache, &KEY, &log, NULL, "tuning it", &got, &found, &err));
  conv_cache_close(cache);
  remove_db(path);
  return TEST_PASS;
}

/* The shared checks merge uses: which trials may win, which keys are ones
 * this library writes. */
static int test_shared_checks(void) {
  conv_trial t = make_trial(0);
  CHECK(conv_cache_trial_can_win(&t));
  t.time_ms = 0;
  CHECK(!conv_cache_trial_can_win(&t));
  t = make_trial(0), t.rel_error = -1;
  CHECK(!conv_cache_trial_can_win(&t));
  t = make_trial(0), t.status = CONV_UNSUPPORTED;
  CHECK(!conv_cache_trial_can_win(&t));
  t = make_trial(0), t.time_ms = INFINITY;
  CHECK(!conv_cache_trial_can_win(&t));
  t = make_trial(4); /* failed */
  CHECK(!conv_cache_trial_can_win(&t));

  conv_error err = {0};
  CHECK_OK(conv_cache_check_key_texts(&KEY, &err));
  const conv_cache_key not_a_key = {"fwd f32 nchw strict none n32", DEVICE, VERSIONS};
  CHECK_CACHE_ERROR(conv_cache_check_key_texts(&not_a_key, &err));
  CHECK(strstr(err.message, "problem key") != NULL);
  static char long_device[CONV_CACHE_DEVICE_MAX + 1];
  memset(long_device, 'd', CONV_CACHE_DEVICE_MAX);
  const conv_cache_key too_long = {PROBLEM, long_device, VERSIONS};
  CHECK_CACHE_ERROR(conv_cache_check_key_texts(&too_long, &err));
  CHECK(strstr(err.message, "device") != NULL);
  const conv_cache_key no_versions = {PROBLEM, DEVICE, NULL};
  CHECK_STATUS(CONV_INVALID_ARGUMENT, conv_cache_check_key_texts(&no_versions, &err));
  return TEST_PASS;
}

static const test_case tests[] = {
    {"every_value_checked", test_every_value_checked},
    {"valid_rows_read", test_valid_rows_read},
    {"other_versions_keys_listed", test_other_versions_keys_listed},
    {"one_winner_per_key", test_one_winner_per_key},
    {"schema_compared", test_schema_compared},
    {"read_only_length_limit", test_read_only_length_limit},
    {"layer_passes_over_bad_row", test_layer_passes_over_bad_row},
    {"shared_checks", test_shared_checks},
};

TEST_MAIN(tests)
