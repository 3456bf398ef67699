/*
 * test_pending.c -- the cache's pending table (problems a record-mode
 * context ran untimed, tunings cut short by their budget): recording,
 * clearing, the upgrade of older caches, read-only caches and the public
 * reader.  CPU only.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sqlite3.h>
#include <uv.h>

#include "algorithms/algorithm.h"
#include "cache/cache.h"
#include "tests/test.h"

#define CHECK_OK(call)                                                                           \
  do {                                                                                           \
    conv_status st_ = (call);                                                                    \
    CHECK_MSG(st_ == CONV_OK, "%s: %s", conv_status_string(st_), err.message);                   \
  } while (0)

#define PROBLEM "fwd f32 nchw strict none n32 c64 h56 w56 k64 r3 s3 pad1,1 str1,1 dil1,1 g1"
#define PROBLEM2 "bwd_data f32 nhwc tf32 none n8 c16 h28 w28 k32 r3 s3 pad1,1 str2,2 dil1,1 g1 det"
#define DEVICE "NVIDIA H100 80GB HBM3|sm90|132sm|l2=52428800|mem=2619000kHz*5120bit"
#define DEVICE2 "NVIDIA A100-SXM4-40GB|sm80|108sm|l2=41943040|mem=1215000kHz*5120bit"
#define VERSIONS "cuda=13000 driver=13000 cudnn=91900 cublas=130000"
#define VERSIONS_OLD "cuda=12040 driver=12040 cudnn=90100 cublas=120400"

static const conv_cache_key KEY = {PROBLEM, DEVICE, VERSIONS};

/* ---------------------------------------------------------------- helpers */

static void remove_db(const char *path) {
  static const char *const suffixes[] = {"", "-wal", "-shm", "-journal"};
  for (size_t i = 0; i < sizeof suffixes / sizeof suffixes[0]; i++) {
    char p[1100];
    snprintf(p, sizeof p, "%s%s", path, suffixes[i]);
    remove(p);
  }
}

static void tmp_path(char *path, size_t size, const char *name) {
  const char *dir = getenv("CONVTUNE_TEST_TMP");
  snprintf(path, size, "%s/test_pending-%ld-%s.db", dir && dir[0] ? dir : "/tmp",
           (long)uv_os_getpid(), name);
  remove_db(path);
}

static int sql_exec(const char *path, const char *sql) {
  sqlite3 *db = NULL;
  char *msg = NULL;
  int rc = sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL);
  if (rc == SQLITE_OK) rc = sqlite3_exec(db, sql, NULL, NULL, &msg);
  if (rc != SQLITE_OK) fprintf(stderr, "sql_exec(%s): %s\n", sql, msg ? msg : sqlite3_errmsg(db));
  sqlite3_free(msg);
  sqlite3_close(db);
  return rc;
}

/* First column of the first row as text: "" for no row, "ERROR" on error. */
static void sql_text(const char *path, const char *sql, char *out, size_t size) {
  sqlite3 *db = NULL;
  sqlite3_stmt *st = NULL;
  snprintf(out, size, "ERROR");
  if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK &&
      sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK) {
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
      const unsigned char *text = sqlite3_column_text(st, 0);
      snprintf(out, size, "%s", text ? (const char *)text : "NULL");
    } else if (rc == SQLITE_DONE) {
      out[0] = '\0';
    }
  }
  sqlite3_finalize(st);
  sqlite3_close(db);
}

static long long sql_int(const char *path, const char *sql) {
  char text[64];
  sql_text(path, sql, text, sizeof text);
  return strcmp(text, "ERROR") == 0 || text[0] == '\0' ? -999 : atoll(text);
}

static long long pending_rows(const char *path) {
  return sql_int(path, "SELECT count(*) FROM pending");
}

/* A cache file whose schema is version 2 (this library's before the
 * pending table): made new, then the table dropped and the version set
 * back, behind the cache's back. */
static bool write_version2_cache(const char *path) {
  conv_error err = {CONV_OK, ""};
  conv_cache *cache = NULL;
  if (conv_cache_open(path, false, &cache, &err) != CONV_OK) return false;
  conv_cache_close(cache);
  return sql_exec(path, "DROP TABLE pending;"
                        "UPDATE meta SET value = '2' WHERE key = 'schema_version';") == SQLITE_OK;
}

/* ---------------------------------------------------------------- tests */

/* Recording a key twice leaves one row; the second record's reason wins.
 * Other versions or devices are rows of their own. */
static int test_record_twice_is_one_row(void) {
  char path[1024];
  tmp_path(path, sizeof path, "twice");
  conv_error err = {CONV_OK, ""};
  conv_cache *cache = NULL;
  CHECK_OK(conv_cache_open(path, false, &cache, &err));
  CHECK_OK(conv_cache_record_pending(cache, &KEY, CONV_PENDING_UNTUNED, &err));
  CHECK_OK(conv_cache_record_pending(cache, &KEY, CONV_PENDING_UNTUNED, &err));
  CHECK(pending_rows(path) == 1);
  bool found = false;
  conv_pending_reason reason = CONV_PENDING_INCOMPLETE;
  CHECK_OK(conv_cache_find_pending(cache, &KEY, &found, &reason, &err));
  CHECK(found && reason == CONV_PENDING_UNTUNED);

  CHECK_OK(conv_cache_record_pending(cache, &KEY, CONV_PENDING_INCOMPLETE, &err));
  CHECK(pending_rows(path) == 1);
  CHECK_OK(conv_cache_find_pending(cache, &KEY, &found, &reason, &err));
  CHECK(found && reason == CONV_PENDING_INCOMPLETE);
  char text[64];
  sql_text(path, "SELECT reason FROM pending", text, sizeof text);
  CHECK_MSG(strcmp(text, "incomplete") == 0, "reason '%s'", text);

  const conv_cache_key old = {PROBLEM, DEVICE, VERSIONS_OLD}, other = {PROBLEM, DEVICE2, VERSIONS};
  CHECK_OK(conv_cache_record_pending(cache, &old, CONV_PENDING_UNTUNED, &err));
  CHECK_OK(conv_cache_record_pending(cache, &other, CONV_PENDING_UNTUNED, &err));
  CHECK(pending_rows(path) == 3);
  const conv_cache_key absent = {PROBLEM2, DEVICE, VERSIONS};
  CHECK_OK(conv_cache_find_pending(cache, &absent, &found, NULL, &err));
  CHECK(!found);

  /* Bad input: a status and a message, nothing written. */
  CHECK_STATUS(CONV_INVALID_ARGUMENT,
               conv_cache_record_pending(cache, &KEY, (conv_pending_reason)7, &err));
  const conv_cache_key no_device = {PROBLEM, NULL, VERSIONS};
  CHECK_STATUS(CONV_INVALID_ARGUMENT,
               conv_cache_record_pending(cache, &no_device, CONV_PENDING_UNTUNED, &err));
  CHECK_STATUS(CONV_INVALID_ARGUMENT, conv_cache_find_pending(cache, &KEY, NULL, NULL, &err));
  CHECK(pending_rows(path) == 3);
  conv_cache_close(cache);
  remove_db(path);
  return TEST_PASS;
}

/* A completed tuning clears its problem on its device, whatever versions
 * it was recorded under, and nothing else. */
static int test_clear_removes_problem_on_device(void) {
  char path[1024];
  tmp_path(path, sizeof path, "clear");
  conv_error err = {CONV_OK, ""};
  conv_cache *cache = NULL;
  CHECK_OK(conv_cache_open(path, false, &cache, &err));
  const conv_cache_key keys[] = {KEY,
                                 {PROBLEM, DEVICE, VERSIONS_OLD},
                                 {PROBLEM, DEVICE2, VERSIONS},
                                 {PROBLEM2, DEVICE, VERSIONS}};
  for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
    CHECK_OK(conv_cache_record_pending(cache, &keys[i], CONV_PENDING_UNTUNED, &err));
  CHECK_OK(conv_cache_clear_pending(cache, &KEY, &err));
  CHECK(pending_rows(path) == 2);
  CHECK(sql_int(path, "SELECT count(*) FROM pending WHERE problem = '" PROBLEM
                      "' AND device = '" DEVICE "'") == 0);
  CHECK_OK(conv_cache_clear_pending(cache, &KEY, &err)); /* nothing left: fine */
  CHECK(pending_rows(path) == 2);

  /* A tuning copied in from another cache (merge, import) replaces what
   * was waiting. */
  const conv_cache_key second = {PROBLEM2, DEVICE, VERSIONS};
  conv_trial t;
  memset(&t, 0, sizeof t);
  t.algorithm_id = CONV_ALGO_CUDNN;
  snprintf(t.algorithm, sizeof t.algorithm, "cudnn");
  t.config.count = 1;
  t.time_ms = 1.0;
  t.rel_error = 1e-7;
  t.winner = true;
  t.deterministic = 1;
  CHECK_OK(conv_cache_replace_tuning(cache, &second, &t, NULL, 1, &err));
  CHECK(pending_rows(path) == 1);
  conv_cache_close(cache);
  remove_db(path);
  return TEST_PASS;
}

/* A winning trial of key's problem, `ms` long. */
static conv_trial winning_trial(double ms) {
  conv_trial t;
  memset(&t, 0, sizeof t);
  t.algorithm_id = CONV_ALGO_CUDNN;
  snprintf(t.algorithm, sizeof t.algorithm, "cudnn");
  t.config.count = 1;
  t.time_ms = ms;
  t.rel_error = 1e-7;
  t.winner = true;
  t.deterministic = 1;
  return t;
}

/* Merging (export, import) copies a budget-cut tuning with its mark, so
 * that the destination finishes it rather than taking it as exhaustive;
 * a complete tuning arrives without one. */
static int test_merge_keeps_incomplete_mark(void) {
  char from_path[1024], into_path[1024];
  tmp_path(from_path, sizeof from_path, "merge-from");
  tmp_path(into_path, sizeof into_path, "merge-into");
  conv_error err = {CONV_OK, ""};
  conv_cache *from = NULL;
  CHECK_OK(conv_cache_open(from_path, false, &from, &err));
  const conv_cache_key complete = {PROBLEM2, DEVICE, VERSIONS};
  const conv_trial fast = winning_trial(1.0), slow = winning_trial(2.0);
  CHECK_OK(conv_cache_replace_tuning(from, &KEY, &fast, NULL, 1, &err));
  CHECK_OK(conv_cache_record_pending(from, &KEY, CONV_PENDING_INCOMPLETE, &err));
  CHECK_OK(conv_cache_replace_tuning(from, &complete, &fast, NULL, 1, &err));
  conv_cache_close(from);

  /* `into` had the complete problem pending (a record-mode run). */
  conv_cache *into = NULL;
  CHECK_OK(conv_cache_open(into_path, false, &into, &err));
  CHECK_OK(conv_cache_replace_tuning(into, &complete, &slow, NULL, 1, &err));
  CHECK_OK(conv_cache_record_pending(into, &complete, CONV_PENDING_UNTUNED, &err));
  conv_cache_close(into);

  size_t added = 0, replaced = 0, kept = 0;
  char message[256];
  CHECK(conv_cache_merge(from_path, into_path, NULL, &added, &replaced, &kept, message,
                         sizeof message) == CONV_OK);
  CHECK(added == 1 && replaced == 1 && kept == 0);
  CHECK(sql_int(into_path, "SELECT count(*) FROM pending WHERE problem = '" PROBLEM
                           "' AND reason = 'incomplete'") == 1);
  CHECK(sql_int(into_path, "SELECT count(*) FROM pending WHERE problem = '" PROBLEM2 "'") == 0);
  CHECK(pending_rows(into_path) == 1);
  remove_db(from_path);
  remove_db(into_path);
  return TEST_PASS;
}

static int count_row(const conv_cache_pending_row *row, void *user) {
  (void)row;
  ++*(int *)user;
  return 0;
}

/* A version-2 cache read-only: nothing pending, file untouched.  Opened
 * for writing: the table is created, version 3 stamped, the trials kept. */
static int test_old_schema_gets_the_table(void) {
  char path[1024];
  tmp_path(path, sizeof path, "upgrade");
  CHECK(write_version2_cache(path));
  CHECK(sql_exec(path, "INSERT INTO trials (problem, device, versions, algorithm_id, algorithm,"
                       " config, config_text, status, status_name, reason, time_ms, rel_error,"
                       " workspace_bytes, heuristic_pick, winner, deterministic) VALUES ('" PROBLEM
                       "', '" DEVICE "', '" VERSIONS "', 1, 'cudnn', '0', 'engine=0', 0,"
                       " 'success', '', 1.5, 1e-7, 0, 1, 1, 1)") == SQLITE_OK);
  conv_error err = {CONV_OK, ""};
  conv_cache *cache = NULL;
  CHECK_OK(conv_cache_open(path, true, &cache, &err));
  bool found = true;
  CHECK_OK(conv_cache_find_pending(cache, &KEY, &found, NULL, &err));
  CHECK(!found);
  int rows = 0;
  CHECK_OK(conv_cache_list_pending(cache, count_row, &rows, &err));
  CHECK(rows == 0);
  CHECK_STATUS(CONV_INVALID_ARGUMENT, conv_cache_list_pending(cache, NULL, NULL, &err));
  conv_cache_close(cache);
  char version[32];
  sql_text(path, "SELECT value FROM meta WHERE key = 'schema_version'", version, sizeof version);
  CHECK_MSG(strcmp(version, "2") == 0, "a read-only open wrote version '%s'", version);
  CHECK(sql_int(path, "SELECT count(*) FROM sqlite_master WHERE name = 'pending'") == 0);

  cache = NULL;
  CHECK_OK(conv_cache_open(path, false, &cache, &err));
  sql_text(path, "SELECT value FROM meta WHERE key = 'schema_version'", version, sizeof version);
  CHECK_MSG(strcmp(version, "3") == 0, "version '%s' after a writable open", version);
  CHECK(pending_rows(path) == 0);
  CHECK_OK(conv_cache_record_pending(cache, &KEY, CONV_PENDING_INCOMPLETE, &err));
  conv_trial winner;
  found = false;
  CHECK_OK(conv_cache_lookup_winner(cache, &KEY, &winner, &found, &err));
  CHECK(found && winner.time_ms == 1.5);
  conv_cache_close(cache);
  CHECK(pending_rows(path) == 1);
  remove_db(path);
  return TEST_PASS;
}

/* A read-only handle records nothing and says why. */
static int test_read_only_cache_records_nothing(void) {
  char path[1024];
  tmp_path(path, sizeof path, "read_only");
  conv_error err = {CONV_OK, ""};
  conv_cache *cache = NULL;
  CHECK_OK(conv_cache_open(path, false, &cache, &err));
  conv_cache_close(cache);
  cache = NULL;
  CHECK_OK(conv_cache_open(path, true, &cache, &err));
  err.message[0] = '\0';
  CHECK_STATUS(CONV_CACHE_ERROR,
               conv_cache_record_pending(cache, &KEY, CONV_PENDING_UNTUNED, &err));
  CHECK_MSG(strstr(err.message, "read-only") != NULL, "message: %s", err.message);
  CHECK_STATUS(CONV_CACHE_ERROR, conv_cache_clear_pending(cache, &KEY, &err));
  conv_cache_close(cache);
  CHECK(pending_rows(path) == 0);
  remove_db(path);
  return TEST_PASS;
}

typedef struct seen {
  int count;
  char problem[2][256], reason[2][32], device[2][256];
  bool sized;
} seen;

static int remember(const conv_cache_pending_entry *e, void *user) {
  seen *s = user;
  if (s->count < 2) {
    snprintf(s->problem[s->count], sizeof s->problem[0], "%s", e->problem);
    snprintf(s->reason[s->count], sizeof s->reason[0], "%s", e->reason);
    snprintf(s->device[s->count], sizeof s->device[0], "%s", e->device);
  }
  s->sized = e->struct_size == sizeof *e && e->versions != NULL && e->recorded_at != NULL &&
             strlen(e->recorded_at) == 20;
  s->count++;
  return 0;
}

static int stop_at_first(const conv_cache_pending_entry *e, void *user) {
  (void)e;
  ++*(int *)user;
  return 1;
}

/* The public reader lists every pending row, oldest first, and reads a
 * version-2 file (no table) as having none; bad input is refused with a
 * message. */
static int test_public_reader_lists_pending(void) {
  char path[1024], old[1024];
  tmp_path(path, sizeof path, "reader");
  tmp_path(old, sizeof old, "reader_v2");
  conv_error err = {CONV_OK, ""};
  conv_cache *cache = NULL;
  CHECK_OK(conv_cache_open(path, false, &cache, &err));
  CHECK_OK(conv_cache_record_pending(cache, &KEY, CONV_PENDING_UNTUNED, &err));
  const conv_cache_key second = {PROBLEM2, DEVICE2, VERSIONS};
  CHECK_OK(conv_cache_record_pending(cache, &second, CONV_PENDING_INCOMPLETE, &err));
  conv_cache_close(cache);
  /* Same second: the order falls back on the problem key. */
  CHECK(sql_exec(path, "UPDATE pending SET recorded_at = '2026-01-01T00:00:00Z'") == SQLITE_OK);

  conv_cache_reader *reader = NULL;
  char message[256];
  CHECK(conv_cache_reader_open(path, &reader, message, sizeof message) == CONV_OK);
  seen s;
  memset(&s, 0, sizeof s);
  CHECK(conv_cache_reader_pending(reader, remember, &s, message, sizeof message) == CONV_OK);
  CHECK(s.count == 2 && s.sized);
  CHECK(strcmp(s.problem[0], PROBLEM2) == 0 && strcmp(s.reason[0], "incomplete") == 0);
  CHECK(strcmp(s.device[0], DEVICE2) == 0);
  CHECK(strcmp(s.problem[1], PROBLEM) == 0 && strcmp(s.reason[1], "untuned") == 0);
  int calls = 0;
  CHECK(conv_cache_reader_pending(reader, stop_at_first, &calls, message, sizeof message) ==
        CONV_OK);
  CHECK(calls == 1);
  message[0] = '\0';
  CHECK(conv_cache_reader_pending(reader, NULL, NULL, message, sizeof message) ==
        CONV_INVALID_ARGUMENT);
  CHECK(message[0] != '\0');
  CHECK(conv_cache_reader_pending(NULL, remember, &s, message, sizeof message) ==
        CONV_INVALID_ARGUMENT);
  conv_cache_reader_close(reader);

  CHECK(write_version2_cache(old));
  reader = NULL;
  CHECK(conv_cache_reader_open(old, &reader, message, sizeof message) == CONV_OK);
  memset(&s, 0, sizeof s);
  CHECK(conv_cache_reader_pending(reader, remember, &s, message, sizeof message) == CONV_OK);
  CHECK(s.count == 0);
  conv_cache_reader_close(reader);
  remove_db(path);
  remove_db(old);
  return TEST_PASS;
}

/* Rows written behind the cache's back with odd values (the file is
 * untrusted) are listed as text, an unknown reason found as pending. */
static int test_odd_rows_are_read_safely(void) {
  char path[1024];
  tmp_path(path, sizeof path, "odd");
  conv_error err = {CONV_OK, ""};
  conv_cache *cache = NULL;
  CHECK_OK(conv_cache_open(path, false, &cache, &err));
  conv_cache_close(cache);
  CHECK(sql_exec(path, "INSERT INTO pending (problem, device, versions, reason, recorded_at)"
                       " VALUES ('" PROBLEM "', '" DEVICE "', '" VERSIONS "', 'whatever', 7);"
                       "INSERT INTO pending (problem, device, versions, reason, recorded_at)"
                       " VALUES (x'00ff', '" DEVICE "', '" VERSIONS "', 'untuned', '');") ==
        SQLITE_OK);
  cache = NULL;
  CHECK_OK(conv_cache_open(path, true, &cache, &err));
  bool found = false;
  conv_pending_reason reason = CONV_PENDING_UNTUNED;
  CHECK_OK(conv_cache_find_pending(cache, &KEY, &found, &reason, &err));
  CHECK(found && reason == CONV_PENDING_INCOMPLETE);
  conv_cache_close(cache);
  conv_cache_reader *reader = NULL;
  char message[256];
  CHECK(conv_cache_reader_open(path, &reader, message, sizeof message) == CONV_OK);
  seen s;
  memset(&s, 0, sizeof s);
  CHECK(conv_cache_reader_pending(reader, remember, &s, message, sizeof message) == CONV_OK);
  CHECK(s.count == 2);
  conv_cache_reader_close(reader);
  remove_db(path);
  return TEST_PASS;
}

static const test_case tests[] = {
    {"record_twice_is_one_row", test_record_twice_is_one_row},
    {"clear_removes_problem_on_device", test_clear_removes_problem_on_device},
    {"merge_keeps_incomplete_mark", test_merge_keeps_incomplete_mark},
    {"old_schema_gets_the_table", test_old_schema_gets_the_table},
    {"read_only_cache_records_nothing", test_read_only_cache_records_nothing},
    {"public_reader_lists_pending", test_public_reader_lists_pending},
    {"odd_rows_are_read_safely", test_odd_rows_are_read_safely},
};

TEST_MAIN(tests)
