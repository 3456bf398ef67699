/*
 * test_cache.c -- the SQLite plan cache (CPU only: nothing here needs a GPU).
 *
 * Databases live under $CONVTUNE_TEST_TMP (else /tmp), named after the pid
 * and the test, and are removed at the end.  The multi-process tests spawn
 * this binary again through libuv in a helper mode:
 *     test_cache TESTNAME writer PATH PROBLEM TRIALS WINNER
 * which stores TRIALS trials of PROBLEM into PATH (marking a winner every ten
 * trials, and trial WINNER at the end when WINNER >= 0) and exits 0.
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

#include "cache/cache.h"
#include "tests/test.h"

/* Checks that `call` returns CONV_OK, printing err.message otherwise. */
#define CHECK_OK(call)                                                                           \
  do {                                                                                           \
    conv_status st_ = (call);                                                                    \
    CHECK_MSG(st_ == CONV_OK, "%s: %s", conv_status_string(st_), err.message);                   \
  } while (0)

/* Checks a call that must fail with CONV_CACHE_ERROR and a message. */
#define CHECK_CACHE_ERROR(call)                                                                  \
  do {                                                                                           \
    err.message[0] = '\0';                                                                       \
    CHECK_STATUS(CONV_CACHE_ERROR, call);                                                        \
    CHECK(err.status == CONV_CACHE_ERROR);                                                       \
    CHECK(err.message[0] != '\0');                                                               \
  } while (0)

/* ---------------------------------------------------------------- fixtures */

#define PROBLEM "fwd f32 nchw strict none n32 c64 h56 w56 k64 r3 s3 pad1,1 str1,1 dil1,1 g1"
#define PROBLEM2 "fwd f32 nchw tf32 bias n8 c3 h224 w224 k64 r7 s7 pad3,3 str2,2 dil1,1 g1"
#define DEVICE "NVIDIA H100 80GB HBM3|sm90|132sm|l2=52428800|mem=2619000kHz*5120bit"
#define DEVICE2 "NVIDIA A100-SXM4-40GB|sm80|108sm|l2=41943040|mem=1215000kHz*5120bit"
#define VERSIONS "cuda=13000 driver=13000 cudnn=91900 cublas=130000"
#define VERSIONS_OLD "cuda=12040 driver=12040 cudnn=90100 cublas=120400"

static const conv_cache_key KEY = {PROBLEM, DEVICE, VERSIONS};

static const char *tmp_dir(void) {
  const char *dir = getenv("CONVTUNE_TEST_TMP");
  return dir != NULL && dir[0] != '\0' ? dir : "/tmp";
}

static bool file_exists(const char *path) {
  FILE *f = fopen(path, "rb");
  if (f != NULL) fclose(f);
  return f != NULL;
}

/* Removes a database and its WAL, shared-memory and journal files. */
static void remove_db(const char *path) {
  static const char *const suffixes[] = {"", "-wal", "-shm", "-journal"};
  for (size_t i = 0; i < sizeof suffixes / sizeof suffixes[0]; i++) {
    char p[1024];
    snprintf(p, sizeof p, "%s%s", path, suffixes[i]);
    remove(p);
  }
}

/* A unique path for this process and test; any leftover is removed. */
static void tmp_path(char *path, size_t size, const char *name) {
  snprintf(path, size, "%s/test_cache-%ld-%s.db", tmp_dir(), (long)uv_os_getpid(), name);
  remove_db(path);
}

/* The whole file, malloc'd (NULL if unreadable); *size gets its length. */
static char *read_all(const char *path, size_t *size) {
  FILE *f = fopen(path, "rb");
  if (f == NULL) return NULL;
  size_t cap = 4096, len = 0;
  char *buf = malloc(cap);
  size_t n;
  while (buf != NULL && (n = fread(buf + len, 1, cap - len, f)) > 0) {
    len += n;
    if (len == cap) {
      char *bigger = realloc(buf, cap *= 2);
      if (bigger == NULL) free(buf);
      buf = bigger;
    }
  }
  fclose(f);
  *size = len;
  return buf;
}

static bool write_all(const char *path, const void *data, size_t size) {
  FILE *f = fopen(path, "wb");
  if (f == NULL) return false;
  bool ok = fwrite(data, 1, size, f) == size;
  return fclose(f) == 0 && ok;
}

/* Raw SQLite access, behind the cache's back. */
static int sql_exec(const char *path, const char *sql) {
  sqlite3 *db = NULL;
  char *msg = NULL;
  int rc = sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL);
  if (rc == SQLITE_OK) rc = sqlite3_busy_timeout(db, 10000);
  if (rc == SQLITE_OK) rc = sqlite3_exec(db, sql, NULL, NULL, &msg);
  if (rc != SQLITE_OK)
    fprintf(stderr, "sql_exec(%s): %s\n", sql, msg ? msg : sqlite3_errmsg(db));
  sqlite3_free(msg);
  sqlite3_close(db);
  return rc;
}

/* First column of the first row as text ("" on no row, "ERROR" on error). */
static void sql_text(const char *path, const char *sql, char *out, size_t size) {
  sqlite3 *db = NULL;
  sqlite3_stmt *st = NULL;
  snprintf(out, size, "ERROR");
  if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK &&
      sqlite3_busy_timeout(db, 10000) == SQLITE_OK &&
      sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK) {
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
      const unsigned char *text = sqlite3_column_text(st, 0);
      snprintf(out, size, "%s", text ? (const char *)text : "NULL");
    } else if (rc == SQLITE_DONE) {
      out[0] = '\0';
    }
  }
  if (strcmp(out, "ERROR") == 0) fprintf(stderr, "sql_text(%s): %s\n", sql, sqlite3_errmsg(db));
  sqlite3_finalize(st);
  sqlite3_close(db);
}

static long long sql_int(const char *path, const char *sql) {
  char text[64];
  sql_text(path, sql, text, sizeof text);
  if (strcmp(text, "ERROR") == 0 || text[0] == '\0') return -999;
  return atoll(text);
}

/* Trial i of a tuning: a mix of algorithms, configs with large and negative
 * values, distinct times (i < 101), and every fifth one failing. */
static conv_trial make_trial(int i) {
  conv_trial t;
  memset(&t, 0, sizeof t);
  t.algorithm_id = i % 2 ? CONV_ALGO_IM2COL_GEMM : CONV_ALGO_CUDNN;
  snprintf(t.algorithm, sizeof t.algorithm, "%s", i % 2 ? "im2col_gemm" : "cudnn");
  t.config.count = 3;
  t.config.values[0] = i;
  t.config.values[1] = -i;
  t.config.values[2] = (int64_t)i << 33;
  snprintf(t.config_text, sizeof t.config_text, "engine=%d knobs=%d", i, -i);
  t.heuristic_pick = i == 0;
  t.config.flags = t.heuristic_pick ? CONV_CONFIG_HEURISTIC_RANKED : 0u;
  t.deterministic = i % 3 == 0 ? 1 : i % 3 == 1 ? 0 : -1; /* yes, no, unknown */
  if (i % 5 == 4) {
    t.status = CONV_UNSUPPORTED;
    snprintf(t.reason, sizeof t.reason, "config %d does not fit", i);
    t.time_ms = -1.0;
    t.rel_error = -1.0;
  } else {
    t.status = CONV_OK;
    t.time_ms = 1.0 + ((i * 37) % 101) * 0.01;
    t.rel_error = 1e-7 * (i + 1);
    t.workspace_bytes = (size_t)i * 1000003u;
  }
  return t;
}

/* Every field, exactly (doubles round-trip bit for bit through REAL). */
static int check_trial(const conv_trial *got, const conv_trial *want, bool winner) {
  CHECK_MSG(got->algorithm_id == want->algorithm_id, "%u vs %u", got->algorithm_id,
            want->algorithm_id);
  CHECK_MSG(strcmp(got->algorithm, want->algorithm) == 0, "'%s'", got->algorithm);
  CHECK_MSG(got->config.count == want->config.count, "%d vs %d", got->config.count,
            want->config.count);
  for (int i = 0; i < want->config.count; i++)
    CHECK(got->config.values[i] == want->config.values[i]);
  CHECK(got->config.flags == want->config.flags);
  CHECK_MSG(strcmp(got->config_text, want->config_text) == 0, "'%s'", got->config_text);
  CHECK_MSG(got->status == want->status, "%d vs %d", got->status, want->status);
  CHECK_MSG(strcmp(got->reason, want->reason) == 0, "'%s'", got->reason);
  CHECK_MSG(got->time_ms == want->time_ms, "%.17g vs %.17g", got->time_ms, want->time_ms);
  CHECK_MSG(got->rel_error == want->rel_error, "%.17g vs %.17g", got->rel_error, want->rel_error);
  CHECK_MSG(got->workspace_bytes == want->workspace_bytes, "%zu vs %zu", got->workspace_bytes,
            want->workspace_bytes);
  CHECK(got->heuristic_pick == want->heuristic_pick);
  CHECK(got->winner == winner);
  CHECK_MSG(got->deterministic == want->deterministic, "%d vs %d", got->deterministic,
            want->deterministic);
  return TEST_PASS;
}

/* Rows collected by a list callback. */
typedef struct row_copy {
  conv_trial trial;
  char problem[256], device[256], versions[256], tuned_at[64];
} row_copy;

typedef struct collector {
  row_copy rows[512];
  int count;
  int stop_after; /* > 0: stop the iteration after this many rows */
} collector;

static int collect(const conv_cache_row *row, void *user) {
  collector *c = user;
  if (c->count < (int)(sizeof c->rows / sizeof c->rows[0])) {
    row_copy *r = &c->rows[c->count];
    r->trial = *row->trial;
    snprintf(r->problem, sizeof r->problem, "%s", row->problem);
    snprintf(r->device, sizeof r->device, "%s", row->device);
    snprintf(r->versions, sizeof r->versions, "%s", row->versions);
    snprintf(r->tuned_at, sizeof r->tuned_at, "%s", row->tuned_at);
  }
  c->count++;
  return c->stop_after > 0 && c->count >= c->stop_after;
}

static collector *new_collector(void) { return calloc(1, sizeof(collector)); }

/* "2025-01-31T12:34:56Z", this century. */
static bool iso_utc(const char *s) {
  if (strlen(s) != 20 || s[4] != '-' || s[7] != '-' || s[10] != 'T' || s[13] != ':' ||
      s[16] != ':' || s[19] != 'Z' || strncmp(s, "20", 2) != 0)
    return false;
  for (int i = 0; i < 19; i++)
    if (i != 4 && i != 7 && i != 10 && i != 13 && i != 16 && (s[i] < '0' || s[i] > '9'))
      return false;
  return true;
}

/* Adds make_trial(first .. first+count-1) under key. */
static int add_trials(conv_cache *cache, const conv_cache_key *key, int first, int count) {
  conv_error err = {0};
  for (int i = first; i < first + count; i++) {
    conv_trial t = make_trial(i);
    CHECK_OK(conv_cache_add_trial(cache, key, &t, &err));
  }
  return TEST_PASS;
}

static int set_winner(conv_cache *cache, const conv_cache_key *key, int i) {
  conv_error err = {0};
  conv_trial t = make_trial(i);
  CHECK_OK(conv_cache_set_winner(cache, key, t.algorithm_id, &t.config, &err));
  return TEST_PASS;
}

/* The winner of key must be make_trial(i). */
static int expect_winner(conv_cache *cache, const conv_cache_key *key, int i) {
  conv_error err = {0};
  conv_trial got, want = make_trial(i);
  bool found = false;
  CHECK_OK(conv_cache_lookup_winner(cache, key, &got, &found, &err));
  CHECK_MSG(found, "no winner for %s / %s", key->problem, key->versions);
  return check_trial(&got, &want, true);
}

static int expect_no_winner(conv_cache *cache, const conv_cache_key *key) {
  conv_error err = {0};
  conv_trial got;
  bool found = true;
  CHECK_OK(conv_cache_lookup_winner(cache, key, &got, &found, &err));
  CHECK(!found);
  return TEST_PASS;
}

static int count_trials(conv_cache *cache, const char *problem) {
  conv_error err = {0};
  collector *c = new_collector();
  if (c == NULL) return -1;
  conv_status st = conv_cache_list_trials(cache, problem, collect, c, &err);
  int n = st == CONV_OK ? c->count : -1;
  if (st != CONV_OK) fprintf(stderr, "list_trials: %s\n", err.message);
  free(c);
  return n;
}

/* ---------------------------------------------------------------- child processes */

/* Helper mode: writer PATH PROBLEM TRIALS WINNER. */
static int writer_main(void) {
  if (test_argc != 5 || strcmp(test_args[0], "writer") != 0) {
    fprintf(stderr, "usage: test_cache TEST writer PATH PROBLEM TRIALS WINNER\n");
    return 2;
  }
  const char *path = test_args[1];
  conv_cache_key key = {test_args[2], DEVICE, VERSIONS};
  int trials = atoi(test_args[3]), winner = atoi(test_args[4]);
  conv_error err = {0};
  conv_cache *cache = NULL;
  CHECK_OK(conv_cache_open(path, false, &cache, &err));
  CHECK_OK(conv_cache_begin_tuning(cache, &key, &err));
  for (int i = 0; i < trials; i++) {
    conv_trial t = make_trial(i);
    CHECK_OK(conv_cache_add_trial(cache, &key, &t, &err));
    if (i % 10 == 0) CHECK(set_winner(cache, &key, i) == TEST_PASS); /* more transactions */
  }
  if (winner >= 0) CHECK(set_winner(cache, &key, winner) == TEST_PASS);
  conv_cache_close(cache);
  return TEST_PASS;
}

typedef struct child {
  uv_process_t process;
  int64_t exit_status;
  int term_signal;
  bool exited;
} child;

typedef struct children {
  child kids[8];
  int count, running;
  uv_timer_t timer;
  bool timed_out;
  bool kill_expected; /* the timer is the test's SIGKILL, not a hang */
} children;

static void on_child_exit(uv_process_t *process, int64_t exit_status, int term_signal) {
  children *all = process->data;
  for (int i = 0; i < all->count; i++) {
    child *k = &all->kids[i];
    if (&k->process != process) continue;
    k->exit_status = exit_status;
    k->term_signal = term_signal;
    k->exited = true;
  }
  uv_close((uv_handle_t *)process, NULL);
  if (--all->running == 0) {
    uv_timer_stop(&all->timer);
    uv_close((uv_handle_t *)&all->timer, NULL);
  }
}

static void on_timeout(uv_timer_t *timer) {
  children *all = timer->data;
  all->timed_out = true;
  for (int i = 0; i < all->count; i++)
    if (!all->kids[i].exited) uv_process_kill(&all->kids[i].process, SIGKILL);
}

/* Runs `count` writers at once (this binary in helper mode, reached through
 * the test named `test`), writer i storing `trials` trials of problems[i];
 * checks that each exits 0 within two minutes, or with kill_after_ms > 0,
 * SIGKILLs them all then and checks that each was killed. */
static int run_writers_killed(const char *test, const char *path, int count,
                              const char *const problems[], int trials, int winner,
                              int kill_after_ms) {
  char exe[4096];
  size_t exe_size = sizeof exe;
  CHECK(uv_exepath(exe, &exe_size) == 0);
  char trials_text[16], winner_text[16];
  snprintf(trials_text, sizeof trials_text, "%d", trials);
  snprintf(winner_text, sizeof winner_text, "%d", winner);

  uv_loop_t loop;
  CHECK(uv_loop_init(&loop) == 0);
  children *all = calloc(1, sizeof *all);
  CHECK(all != NULL && count <= (int)(sizeof all->kids / sizeof all->kids[0]));
  all->count = count;
  all->timer.data = all;
  CHECK(uv_timer_init(&loop, &all->timer) == 0);
  all->kill_expected = kill_after_ms > 0;
  const uint64_t timeout_ms = kill_after_ms > 0 ? (uint64_t)kill_after_ms : 120000;
  CHECK(uv_timer_start(&all->timer, on_timeout, timeout_ms, 0) == 0);

  uv_stdio_container_t stdio[3];
  for (int fd = 0; fd < 3; fd++) {
    stdio[fd].flags = UV_INHERIT_FD;
    stdio[fd].data.fd = fd;
  }
  int spawned = 0;
  for (int i = 0; i < count; i++) {
    char *args[] = {exe,         (char *)test,        "writer",    (char *)path,
                    (char *)problems[i], trials_text, winner_text, NULL};
    uv_process_options_t options;
    memset(&options, 0, sizeof options);
    options.exit_cb = on_child_exit;
    options.file = exe;
    options.args = args;
    options.stdio_count = 3;
    options.stdio = stdio;
    all->kids[i].process.data = all;
    int rc = uv_spawn(&loop, &all->kids[i].process, &options);
    if (rc != 0) {
      fprintf(stderr, "uv_spawn %s: %s\n", exe, uv_strerror(rc));
      uv_close((uv_handle_t *)&all->kids[i].process, NULL);
      break;
    }
    spawned++;
    all->running++;
  }
  if (all->running == 0) {
    uv_timer_stop(&all->timer);
    uv_close((uv_handle_t *)&all->timer, NULL);
  }
  uv_run(&loop, UV_RUN_DEFAULT);
  int closed = uv_loop_close(&loop);
  int result = TEST_PASS;
  if (spawned != count || closed != 0 || all->timed_out != all->kill_expected) {
    fprintf(stderr, "writers: %d of %d spawned, loop close %d, timed out %d\n", spawned, count,
            closed, all->timed_out);
    result = TEST_FAIL;
  }
  for (int i = 0; i < spawned; i++) {
    if (all->kill_expected) {
      if (all->kids[i].term_signal != SIGKILL) {
        fprintf(stderr, "writer %d: finished (exit %lld) before it was killed\n", i,
                (long long)all->kids[i].exit_status);
        result = TEST_FAIL;
      }
    } else if (all->kids[i].exit_status != 0 || all->kids[i].term_signal != 0) {
      fprintf(stderr, "writer %d: exit status %lld, signal %d\n", i,
              (long long)all->kids[i].exit_status, all->kids[i].term_signal);
      result = TEST_FAIL;
    }
  }
  free(all);
  return result;
}

static int run_writers(const char *test, const char *path, int count, const char *const problems[],
                       int trials, int winner) {
  return run_writers_killed(test, path, count, problems, trials, winner, 0);
}

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

/* Opening `path` (read-write, then read-only) fails with CONV_CACHE_ERROR,
 * names the path and `mention`, and leaves the file byte for byte as it was
 * (SQLite itself may leave an empty -wal file next to a WAL database). */
static int check_refused(const char *path, const char *mention) {
  size_t before_size = 0, after_size = 0;
  char *before = read_all(path, &before_size);
  CHECK(before != NULL);
  conv_error err = {0};
  for (int read_only = 0; read_only < 2; read_only++) {
    conv_cache *cache = NULL;
    CHECK_CACHE_ERROR(conv_cache_open(path, read_only, &cache, &err));
    CHECK(cache == NULL);
    CHECK_MSG(strstr(err.message, path) != NULL, "message: %s", err.message);
    CHECK_MSG(strstr(err.message, mention) != NULL, "message: %s", err.message);
  }
  char *after = read_all(path, &after_size);
  CHECK(after != NULL);
  CHECK(after_size == before_size && memcmp(before, after, before_size) == 0);
  free(before);
  free(after);
  char wal[1100];
  snprintf(wal, sizeof wal, "%s-wal", path);
  size_t wal_size = 0;
  char *wal_data = read_all(wal, &wal_size);
  free(wal_data);
  CHECK_MSG(wal_data == NULL || wal_size == 0, "%s: %zu bytes", wal, wal_size);
  return TEST_PASS;
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
      "UPDATE trials SET config = '1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17'" WINNER_ROW,
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

  /* Overlong strings are cut to the buffers, on a UTF-8 character boundary. */
  char sql[4096];
  int len = snprintf(sql, sizeof sql, "UPDATE trials SET time_ms = NULL, algorithm = '");
  for (int i = 0; i < 100; i++) sql[len++] = 'a';
  len += snprintf(sql + len, sizeof sql - (size_t)len, "', reason = 'xx");
  for (int i = 0; i < 500; i++) len += snprintf(sql + len, sizeof sql - (size_t)len, "\xc3\xa9");
  snprintf(sql + len, sizeof sql - (size_t)len, "'" WINNER_ROW);
  CHECK(sql_exec(path, sql) == SQLITE_OK);
  conv_trial got;
  bool found = false;
  CHECK_OK(conv_cache_lookup_winner(cache, &KEY, &got, &found, &err));
  CHECK(found);
  CHECK(got.algorithm_id == 2 && got.config.count == 2 && got.config.values[1] == 5);
  CHECK(got.workspace_bytes == 64 && got.time_ms == -1.0 && got.rel_error == 1e-7);
  CHECK_MSG(strlen(got.algorithm) == sizeof got.algorithm - 1, "%zu", strlen(got.algorithm));
  CHECK_MSG(strlen(got.reason) == 254, "%zu", strlen(got.reason)); /* not 255: mid-character */
  CHECK((unsigned char)got.reason[252] == 0xc3 && (unsigned char)got.reason[253] == 0xa9);
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

static int persistence_in(const char *path) {
  static const char *const problem[] = {PROBLEM};
  CHECK(!file_exists(path));
  CHECK(run_writers("persistence_across_processes", path, 1, problem, 20, 7) == TEST_PASS);
  CHECK(file_exists(path));

  conv_error err = {0};
  conv_cache *cache = NULL;
  CHECK_OK(conv_cache_open(path, false, &cache, &err));
  CHECK(expect_winner(cache, &KEY, 7) == TEST_PASS);
  CHECK(count_trials(cache, PROBLEM) == 20);

  /* Another process re-tunes while this one holds the file open. */
  CHECK(run_writers("persistence_across_processes", path, 1, problem, 10, 3) == TEST_PASS);
  CHECK(expect_winner(cache, &KEY, 3) == TEST_PASS);
  CHECK(count_trials(cache, PROBLEM) == 10);
  conv_cache_close(cache);
  return TEST_PASS;
}

static int test_persistence_across_processes(void) {
  if (test_argc > 0) return writer_main();
  char path[1024];
  tmp_path(path, sizeof path, "persistence_across_processes");
  int rc = persistence_in(path);
  remove_db(path);
  return rc;
}

static int two_writers_in(const char *path) {
  enum { TRIALS = 200 };
  static const char *const problems[] = {PROBLEM, PROBLEM2};
  /* Three rounds, each on a fresh file: both writers also race to create it. */
  for (int round = 0; round < 3; round++) {
    remove_db(path);
    CHECK(run_writers("two_writers_at_once", path, 2, problems, TRIALS, 150) == TEST_PASS);
    CHECK(sql_int(path, "SELECT count(*) FROM trials") == 2 * TRIALS);
    CHECK(sql_int(path, "SELECT count(*) FROM trials WHERE winner <> 0") == 2);
    CHECK(sql_int(path, "SELECT count(*) FROM meta") == 1);

    conv_error err = {0};
    conv_cache *cache = NULL;
    CHECK_OK(conv_cache_open(path, true, &cache, &err));
    for (int p = 0; p < 2; p++) {
      conv_cache_key key = {problems[p], DEVICE, VERSIONS};
      CHECK(expect_winner(cache, &key, 150) == TEST_PASS);
      collector *c = new_collector();
      CHECK(c != NULL);
      CHECK_OK(conv_cache_list_trials(cache, problems[p], collect, c, &err));
      CHECK_MSG(c->count == TRIALS, "%d rows for %s", c->count, problems[p]);
      bool seen[TRIALS] = {false};
      for (int r = 0; r < c->count; r++) {
        int i = (int)c->rows[r].trial.config.values[0];
        CHECK(i >= 0 && i < TRIALS && !seen[i]);
        seen[i] = true;
        conv_trial want = make_trial(i);
        CHECK(check_trial(&c->rows[r].trial, &want, i == 150) == TEST_PASS);
      }
      free(c);
    }
    conv_cache_close(cache);
  }
  return TEST_PASS;
}

static int test_two_writers_at_once(void) {
  if (test_argc > 0) return writer_main();
  char path[1024];
  tmp_path(path, sizeof path, "two_writers_at_once");
  int rc = two_writers_in(path);
  remove_db(path);
  return rc;
}

static int read_only_in(const char *path, const char *missing, const char *empty) {
  conv_error err = {0};
  conv_cache *cache = NULL;

  /* A missing file: an error, and no file. */
  CHECK_CACHE_ERROR(conv_cache_open(missing, true, &cache, &err));
  CHECK(cache == NULL);
  CHECK_MSG(strstr(err.message, missing) != NULL, "%s", err.message);
  CHECK(!file_exists(missing));
  char p[1100];
  snprintf(p, sizeof p, "%s-wal", missing);
  CHECK(!file_exists(p));
  /* Read-write in a missing directory: an error too. */
  snprintf(p, sizeof p, "%s.d/cache.db", missing);
  CHECK_CACHE_ERROR(conv_cache_open(p, false, &cache, &err));
  CHECK(cache == NULL);

  /* An existing cache. */
  CHECK_OK(conv_cache_open(path, false, &cache, &err));
  CHECK(add_trials(cache, &KEY, 0, 10) == TEST_PASS);
  CHECK(set_winner(cache, &KEY, 6) == TEST_PASS);
  conv_cache_close(cache);
  size_t before_size = 0, after_size = 0;
  char *before = read_all(path, &before_size);
  CHECK(before != NULL && before_size > 0);

  cache = NULL;
  CHECK_OK(conv_cache_open(path, true, &cache, &err));
  CHECK(cache != NULL);
  CHECK(count_trials(cache, PROBLEM) == 10);
  CHECK(expect_winner(cache, &KEY, 6) == TEST_PASS);
  collector *c = new_collector();
  CHECK(c != NULL);
  CHECK_OK(conv_cache_list_winners(cache, collect, c, &err));
  CHECK(c->count == 1 && c->rows[0].trial.config.values[0] == 6);
  free(c);
  /* Writes are refused. */
  conv_trial t = make_trial(11);
  CHECK_CACHE_ERROR(conv_cache_add_trial(cache, &KEY, &t, &err));
  CHECK_CACHE_ERROR(conv_cache_begin_tuning(cache, &KEY, &err));
  CHECK_CACHE_ERROR(conv_cache_set_winner(cache, &KEY, t.algorithm_id, &t.config, &err));
  t = make_trial(2);
  CHECK_CACHE_ERROR(conv_cache_set_winner(cache, &KEY, t.algorithm_id, &t.config, &err));
  CHECK(count_trials(cache, PROBLEM) == 10);
  CHECK(expect_winner(cache, &KEY, 6) == TEST_PASS);

  /* A writer elsewhere: the reader sees its commits. */
  conv_cache *writer = NULL;
  CHECK_OK(conv_cache_open(path, false, &writer, &err));
  CHECK(add_trials(writer, &KEY, 10, 1) == TEST_PASS);
  CHECK(count_trials(cache, PROBLEM) == 11);
  conv_cache_close(writer);
  conv_cache_close(cache);

  /* Reading alone changes nothing. */
  free(before);
  before = read_all(path, &before_size);
  CHECK(before != NULL);
  cache = NULL;
  CHECK_OK(conv_cache_open(path, true, &cache, &err));
  CHECK(count_trials(cache, PROBLEM) == 11);
  conv_cache_close(cache);
  char *after = read_all(path, &after_size);
  CHECK(after != NULL);
  CHECK(after_size == before_size && memcmp(before, after, before_size) == 0);
  free(before);
  free(after);

  /* An empty file is an empty cache, and stays empty. */
  CHECK(write_all(empty, "", 0));
  cache = NULL;
  CHECK_OK(conv_cache_open(empty, true, &cache, &err));
  CHECK(count_trials(cache, PROBLEM) == 0);
  CHECK(expect_no_winner(cache, &KEY) == TEST_PASS);
  c = new_collector();
  CHECK(c != NULL);
  CHECK_OK(conv_cache_list_winners(cache, collect, c, &err));
  CHECK(c->count == 0);
  free(c);
  CHECK_CACHE_ERROR(conv_cache_add_trial(cache, &KEY, &t, &err));
  conv_cache_close(cache);
  after = read_all(empty, &after_size);
  CHECK(after != NULL && after_size == 0);
  free(after);
  return TEST_PASS;
}

static int test_read_only_open(void) {
  char path[1024], missing[1024], empty[1024];
  tmp_path(path, sizeof path, "read_only_open");
  tmp_path(missing, sizeof missing, "read_only_open_missing");
  tmp_path(empty, sizeof empty, "read_only_open_empty");
  int rc = read_only_in(path, missing, empty);
  remove_db(path);
  remove_db(missing);
  remove_db(empty);
  return rc;
}

/* Opening a FIFO (which SQLite would wait on forever) or a directory (its
 * "disk I/O error") fails at once, read-only or not, saying what it is. */
static int test_special_files_refused(void) {
  char fifo[1024], dir[1024];
  tmp_path(fifo, sizeof fifo, "fifo");
  tmp_path(dir, sizeof dir, "dir");
  CHECK(mkfifo(fifo, 0600) == 0);
  CHECK(mkdir(dir, 0700) == 0);
  alarm(60); /* a regression blocks: make it a failure, not a hang */
  conv_error err = {CONV_OK, ""};
  int rc = TEST_PASS;
  for (int read_only = 0; read_only < 2 && rc == TEST_PASS; read_only++) {
    conv_cache *cache = NULL;
    if (conv_cache_open(fifo, read_only, &cache, &err) != CONV_CACHE_ERROR ||
        strstr(err.message, "not a regular file") == NULL || cache != NULL) {
      fprintf(stderr, "FIFO, read_only %d: %s\n", read_only, err.message);
      rc = TEST_FAIL;
    }
    if (conv_cache_open(dir, read_only, &cache, &err) != CONV_CACHE_ERROR ||
        strstr(err.message, "is a directory") == NULL || cache != NULL) {
      fprintf(stderr, "directory, read_only %d: %s\n", read_only, err.message);
      rc = TEST_FAIL;
    }
  }
  alarm(0);
  remove(fifo);
  rmdir(dir);
  return rc;
}

/* ---------------------------------------------------------------- WAL identity */

static bool copy_file(const char *from, const char *to) {
  size_t size = 0;
  char *data = read_all(from, &size);
  bool ok = data != NULL && write_all(to, data, size);
  free(data);
  return ok;
}

static bool same_file(const char *path, const char *data, size_t size) {
  size_t got_size = 0;
  char *got = read_all(path, &got_size);
  bool same = got != NULL && got_size == size && memcmp(got, data, size) == 0;
  free(got);
  return same;
}

/* Every write stamps one identity into the header; two handles (and so two
 * processes) agree on it; a cache without one gets one at its next write. */
static int identity_in(const char *path) {
  conv_error err = {0};
  conv_cache *a = NULL, *b = NULL;
  CHECK_OK(conv_cache_open(path, false, &a, &err));
  CHECK_OK(conv_cache_open(path, false, &b, &err));
  CHECK(add_trials(a, &KEY, 0, 2) == TEST_PASS);
  CHECK(add_trials(b, &KEY, 2, 2) == TEST_PASS);
  long long identity = sql_int(path, "PRAGMA user_version");
  CHECK_MSG(identity > 0, "identity %lld", identity);
  conv_cache_close(a);
  conv_cache_close(b);
  CHECK(sql_int(path, "PRAGMA user_version") == identity);
  /* The last close folds the WAL into the file: its own header has it. */
  size_t size = 0;
  unsigned char *header = (unsigned char *)read_all(path, &size);
  CHECK(header != NULL && size >= 100);
  long long in_file = (long long)header[60] << 24 | header[61] << 16 | header[62] << 8 | header[63];
  free(header);
  CHECK_MSG(in_file == identity, "file header %lld, SQLite %lld", in_file, identity);
  /* An older cache (no identity) gets one with its next write. */
  CHECK(sql_exec(path, "PRAGMA user_version = 0") == SQLITE_OK);
  CHECK_OK(conv_cache_open(path, false, &a, &err));
  CHECK(add_trials(a, &KEY, 4, 1) == TEST_PASS);
  conv_cache_close(a);
  CHECK(sql_int(path, "PRAGMA user_version") > 0);
  return TEST_PASS;
}

static int test_identity_stamped(void) {
  char path[1024];
  tmp_path(path, sizeof path, "identity_stamped");
  int rc = identity_in(path);
  remove_db(path);
  return rc;
}

/* A -wal file of another database beside a cache (copied in, or left by a
 * cache that once had this name) is refused by readers and writers alike,
 * and leaves the file as it was; the cache's own WAL (a crash) is read. */
static int foreign_wal_in(const char *a_path, const char *b_path) {
  conv_error err = {0};
  static const conv_cache_key other = {PROBLEM2, DEVICE, VERSIONS};
  conv_cache *a = NULL, *b = NULL;
  CHECK_OK(conv_cache_open(a_path, false, &a, &err));
  CHECK(add_trials(a, &KEY, 0, 3) == TEST_PASS);
  conv_cache_close(a);
  size_t a_size = 0;
  char *a_data = read_all(a_path, &a_size);
  CHECK(a_data != NULL);

  /* B's WAL, taken while B is open (its commits are in the WAL only). */
  char a_wal[1100], b_wal[1100];
  snprintf(a_wal, sizeof a_wal, "%s-wal", a_path);
  snprintf(b_wal, sizeof b_wal, "%s-wal", b_path);
  CHECK_OK(conv_cache_open(b_path, false, &b, &err));
  CHECK(add_trials(b, &other, 0, 5) == TEST_PASS);
  CHECK(copy_file(b_wal, a_wal));
  conv_cache_close(b);

  for (int read_only = 1; read_only >= 0; read_only--) {
    a = NULL;
    err.message[0] = '\0';
    conv_status st = conv_cache_open(a_path, read_only, &a, &err);
    if (st == CONV_OK) {
      fprintf(stderr, "read_only %d: opened; trials of the other cache seen: %d\n", read_only,
              count_trials(a, PROBLEM2));
      conv_cache_close(a);
    }
    CHECK_MSG(st == CONV_CACHE_ERROR && strstr(err.message, "belongs to another database"),
              "read_only %d: %s: %s", read_only, conv_status_string(st), err.message);
    CHECK_MSG(same_file(a_path, a_data, a_size), "read_only %d changed the file", read_only);
  }
  free(a_data);

  /* Without the stray file, the cache is itself again. */
  remove(a_wal);
  char shm[1100];
  snprintf(shm, sizeof shm, "%s-shm", a_path);
  remove(shm);
  CHECK_OK(conv_cache_open(a_path, true, &a, &err));
  CHECK(count_trials(a, PROBLEM) == 3 && count_trials(a, PROBLEM2) == 0);
  conv_cache_close(a);

  /* A crash after a commit leaves the cache's own WAL: it is read. */
  a_data = read_all(a_path, &a_size);
  CHECK(a_data != NULL);
  CHECK_OK(conv_cache_open(a_path, false, &a, &err));
  CHECK(add_trials(a, &KEY, 3, 2) == TEST_PASS);
  char kept_wal[1100];
  snprintf(kept_wal, sizeof kept_wal, "%s.crash-wal", a_path);
  CHECK(copy_file(a_wal, kept_wal));
  conv_cache_close(a);
  CHECK(write_all(a_path, a_data, a_size)); /* the file as the crash left it */
  CHECK(copy_file(kept_wal, a_wal));
  remove(kept_wal);
  free(a_data);
  CHECK_OK(conv_cache_open(a_path, true, &a, &err));
  CHECK_MSG(count_trials(a, PROBLEM) == 5, "%d trials after the crash", count_trials(a, PROBLEM));
  conv_cache_close(a);
  return TEST_PASS;
}

static int test_foreign_wal_refused(void) {
  char a[1024], b[1024];
  tmp_path(a, sizeof a, "foreign_wal_a");
  tmp_path(b, sizeof b, "foreign_wal_b");
  int rc = foreign_wal_in(a, b);
  remove_db(a);
  remove_db(b);
  return rc;
}

/* ---------------------------------------------------------------- the public reader */

/* Entries copied by a conv_cache_entry_fn (the library's own is valid in the call only). */
typedef struct entry_copy {
  conv_cache_entry entry;
  char problem[256], device[256], versions[256], tuned_at[64], algorithm[32], config[128],
      reason[256];
} entry_copy;

typedef struct entry_list {
  entry_copy items[64];
  int count;
  int stop_after; /* > 0: stop the walk after this many entries */
} entry_list;

static int collect_entry(const conv_cache_entry *e, void *user) {
  entry_list *l = user;
  if (l->count < (int)(sizeof l->items / sizeof l->items[0])) {
    entry_copy *c = &l->items[l->count];
    c->entry = *e;
    snprintf(c->problem, sizeof c->problem, "%s", e->problem);
    snprintf(c->device, sizeof c->device, "%s", e->device);
    snprintf(c->versions, sizeof c->versions, "%s", e->versions);
    snprintf(c->tuned_at, sizeof c->tuned_at, "%s", e->tuned_at);
    snprintf(c->algorithm, sizeof c->algorithm, "%s", e->algorithm);
    snprintf(c->config, sizeof c->config, "%s", e->config);
    snprintf(c->reason, sizeof c->reason, "%s", e->reason);
  }
  l->count++;
  return l->stop_after > 0 && l->count >= l->stop_after;
}

/* An entry is make_trial(i) of key, every field. */
static int check_entry(const entry_copy *c, const conv_cache_key *key, int i, bool winner) {
  const conv_trial want = make_trial(i);
  const conv_cache_entry *e = &c->entry;
  CHECK(e->struct_size == sizeof(conv_cache_entry));
  CHECK(strcmp(c->problem, key->problem) == 0 && strcmp(c->device, key->device) == 0);
  CHECK(strcmp(c->versions, key->versions) == 0 && iso_utc(c->tuned_at));
  CHECK(e->algorithm_id == (int)want.algorithm_id && strcmp(c->algorithm, want.algorithm) == 0);
  CHECK_MSG(strcmp(c->config, want.config_text) == 0, "'%s'", c->config);
  CHECK(e->config_count == want.config.count);
  for (int v = 0; v < want.config.count; v++) CHECK(e->config_values[v] == want.config.values[v]);
  CHECK(e->status == want.status && strcmp(c->reason, want.reason) == 0);
  CHECK(e->time_ms == want.time_ms && e->rel_error == want.rel_error);
  CHECK(e->workspace_bytes == want.workspace_bytes);
  CHECK(e->heuristic_pick == (int)want.heuristic_pick && e->winner == (int)winner);
  CHECK(e->deterministic == want.deterministic);
  return TEST_PASS;
}

/* Lists directory `dir`'s entries (names joined by spaces) into out. */
static void dir_listing(const char *dir, char *out, size_t size) {
  char command[1200];
  snprintf(command, sizeof command, "ls -A '%s'", dir);
  out[0] = '\0';
  FILE *p = popen(command, "r");
  if (p == NULL) return;
  size_t n = fread(out, 1, size - 1, p);
  out[n] = '\0';
  pclose(p);
}

static int public_reader_in(const char *dir, const char *path) {
  conv_error err = {0};
  conv_cache *cache = NULL;
  const conv_cache_key key2 = {PROBLEM2, DEVICE2, VERSIONS};
  CHECK_OK(conv_cache_open(path, false, &cache, &err));
  CHECK(add_trials(cache, &KEY, 0, 10) == TEST_PASS);
  CHECK(set_winner(cache, &KEY, 6) == TEST_PASS);
  CHECK(add_trials(cache, &key2, 20, 3) == TEST_PASS);
  CHECK(set_winner(cache, &key2, 21) == TEST_PASS);
  conv_cache_close(cache);
  /* Shipped read-only: file and directory (root may still write; the
   * reader must not try, which the listing below shows). */
  CHECK(chmod(path, 0444) == 0 && chmod(dir, 0555) == 0);
  char listed_before[512], listed_after[512];
  dir_listing(dir, listed_before, sizeof listed_before);
  size_t before_size = 0, after_size = 0;
  char *before = read_all(path, &before_size);
  CHECK(before != NULL);

  char message[512];
  conv_cache_reader *reader = (conv_cache_reader *)&message; /* written only on success */
  char missing[1100];
  snprintf(missing, sizeof missing, "%s.missing", path);
  CHECK_STATUS(CONV_CACHE_ERROR, conv_cache_reader_open(missing, &reader, message, sizeof message));
  CHECK(reader == (conv_cache_reader *)&message && strstr(message, missing) != NULL);
  CHECK_STATUS(CONV_INVALID_ARGUMENT, conv_cache_reader_open(NULL, &reader, message, sizeof message));
  CHECK(message[0] != '\0');

  CHECK_STATUS(CONV_OK, conv_cache_reader_open(path, &reader, message, sizeof message));
  entry_list *l = calloc(1, sizeof *l);
  CHECK(l != NULL);
  /* Winners, ordered by problem key. */
  CHECK_STATUS(CONV_OK, conv_cache_reader_winners(reader, collect_entry, l, message, sizeof message));
  CHECK_MSG(l->count == 2, "%d winners", l->count);
  CHECK(check_entry(&l->items[0], &KEY, 6, true) == TEST_PASS);
  CHECK(check_entry(&l->items[1], &key2, 21, true) == TEST_PASS);
  /* One shape's trials, the winner first. */
  memset(l, 0, sizeof *l);
  CHECK_STATUS(CONV_OK, conv_cache_reader_trials(reader, PROBLEM, collect_entry, l, message,
                                                 sizeof message));
  CHECK_MSG(l->count == 10, "%d trials", l->count);
  CHECK(check_entry(&l->items[0], &KEY, 6, true) == TEST_PASS);
  for (int i = 1; i < 10; i++) {
    int which = (int)l->items[i].entry.config_values[0];
    CHECK(which >= 0 && which < 10 && which != 6);
    CHECK(check_entry(&l->items[i], &KEY, which, false) == TEST_PASS);
  }
  /* A callback stops the walk; an unknown shape has no trials. */
  memset(l, 0, sizeof *l);
  l->stop_after = 2;
  CHECK_STATUS(CONV_OK, conv_cache_reader_trials(reader, PROBLEM, collect_entry, l, message,
                                                 sizeof message));
  CHECK(l->count == 2);
  memset(l, 0, sizeof *l);
  CHECK_STATUS(CONV_OK, conv_cache_reader_trials(reader, "fwd nothing", collect_entry, l, message,
                                                 sizeof message));
  CHECK(l->count == 0);
  /* Bad arguments: a status and a message, nothing called. */
  CHECK_STATUS(CONV_INVALID_ARGUMENT,
               conv_cache_reader_trials(reader, NULL, collect_entry, l, message, sizeof message));
  CHECK_STATUS(CONV_INVALID_ARGUMENT,
               conv_cache_reader_winners(NULL, collect_entry, l, message, sizeof message));
  CHECK_STATUS(CONV_INVALID_ARGUMENT, conv_cache_reader_winners(reader, NULL, l, NULL, 0));
  CHECK(strstr(message, "NULL") != NULL && l->count == 0);
  free(l);
  conv_cache_reader_close(reader);
  conv_cache_reader_close(NULL);

  /* Nothing written: the same file. */
  char *after = read_all(path, &after_size);
  CHECK(after != NULL && after_size == before_size && memcmp(before, after, before_size) == 0);
  free(before);
  free(after);
  /* Without write permission nothing may appear beside it (root has it
   * anyway: SQLite then keeps its -wal and -shm there, as for any reader). */
  dir_listing(dir, listed_after, sizeof listed_after);
  if (geteuid() != 0)
    CHECK_MSG(strcmp(listed_before, listed_after) == 0, "before: %s\nafter: %s", listed_before,
              listed_after);
  else
    fprintf(stderr, "running as root: the read-only directory is writable; not checked\n");
  return TEST_PASS;
}

static int test_public_reader(void) {
  char dir[1024], path[1100];
  tmp_path(dir, sizeof dir, "public_reader.d");
  CHECK(mkdir(dir, 0755) == 0);
  snprintf(path, sizeof path, "%s/cache.db", dir);
  int rc = public_reader_in(dir, path);
  chmod(dir, 0755);
  chmod(path, 0644);
  remove_db(path);
  rmdir(dir);
  return rc;
}

/* ---------------------------------------------------------------- merging */

/* The trials of key in the cache at path (a collector; free() it). */
static collector *trials_of(const char *path, const conv_cache_key *key) {
  conv_error err = {0};
  conv_cache *cache = NULL;
  collector *all = new_collector(), *mine = new_collector();
  if (all == NULL || mine == NULL || conv_cache_open(path, true, &cache, &err) != CONV_OK ||
      conv_cache_list_trials(cache, key->problem, collect, all, &err) != CONV_OK) {
    conv_cache_close(cache);
    free(all);
    free(mine);
    return NULL;
  }
  conv_cache_close(cache);
  for (int i = 0; i < all->count; i++)
    if (strcmp(all->rows[i].device, key->device) == 0 &&
        strcmp(all->rows[i].versions, key->versions) == 0)
      mine->rows[mine->count++] = all->rows[i];
  free(all);
  return mine;
}

/* Writes a tuning of key: trials first .. first+count-1, winner `winner`. */
static int write_tuning(const char *path, const conv_cache_key *key, int first, int count,
                        int winner) {
  conv_error err = {0};
  conv_cache *cache = NULL;
  CHECK_OK(conv_cache_open(path, false, &cache, &err));
  CHECK(add_trials(cache, key, first, count) == TEST_PASS);
  if (winner >= 0) CHECK(set_winner(cache, key, winner) == TEST_PASS);
  conv_cache_close(cache);
  return TEST_PASS;
}

/* The cache at path holds exactly trials first .. first+count-1 of key,
 * winner `winner`, measured when `like`'s were (NULL: not checked). */
static int expect_tuning(const char *path, const conv_cache_key *key, int first, int count,
                         int winner, const collector *like) {
  collector *c = trials_of(path, key);
  CHECK(c != NULL);
  CHECK_MSG(c->count == count, "%d trials of %s, expected %d", c->count, key->problem, count);
  for (int i = 0; i < c->count; i++) {
    int which = (int)c->rows[i].trial.config.values[0];
    CHECK(which >= first && which < first + count);
    conv_trial want = make_trial(which);
    CHECK(check_trial(&c->rows[i].trial, &want, which == winner) == TEST_PASS);
    if (like != NULL) CHECK(strcmp(c->rows[i].tuned_at, like->rows[i].tuned_at) == 0);
  }
  free(c);
  return TEST_PASS;
}

static int merge_in(const char *a, const char *b, const char *b2, const char *out,
                    const char *out2) {
  const conv_cache_key key2 = {PROBLEM2, DEVICE2, VERSIONS};
  const conv_cache_key unfinished = {PROBLEM, DEVICE, VERSIONS_OLD};
  const conv_cache_key key4 = {PROBLEM2, DEVICE, VERSIONS};
  /* Winner times (make_trial): 6 1.20 ms, 42 1.39 ms, 11 1.03 ms. */
  CHECK(write_tuning(a, &KEY, 0, 10, 6) == TEST_PASS);
  CHECK(write_tuning(a, &key2, 20, 3, 21) == TEST_PASS);
  CHECK(write_tuning(a, &unfinished, 30, 2, -1) == TEST_PASS);
  CHECK(write_tuning(b, &KEY, 40, 5, 42) == TEST_PASS);
  CHECK(write_tuning(b, &key4, 50, 3, 51) == TEST_PASS);
  CHECK(write_tuning(b2, &KEY, 10, 4, 11) == TEST_PASS);
  size_t a_size = 0, a_after = 0;
  char *a_bytes = read_all(a, &a_size);
  CHECK(a_bytes != NULL);
  collector *a_key = trials_of(a, &KEY);
  CHECK(a_key != NULL && a_key->count == 10);

  size_t added = 99, replaced = 99, kept = 99;
  char message[512];
  CHECK_STATUS(CONV_OK, conv_cache_merge(a, out, NULL, &added, &replaced, &kept, message,
                                         sizeof message));
  CHECK_MSG(added == 2 && replaced == 0 && kept == 0, "%zu %zu %zu", added, replaced, kept);
  /* Every trial, as measured (tuned_at kept); the unfinished tuning stays behind. */
  CHECK(expect_tuning(out, &KEY, 0, 10, 6, a_key) == TEST_PASS);
  CHECK(expect_tuning(out, &key2, 20, 3, 21, NULL) == TEST_PASS);
  CHECK(expect_tuning(out, &unfinished, 0, 0, -1, NULL) == TEST_PASS);
  /* b's KEY is slower: kept; its other tuning is added. */
  CHECK_STATUS(CONV_OK, conv_cache_merge(b, out, NULL, &added, &replaced, &kept, NULL, 0));
  CHECK_MSG(added == 1 && replaced == 0 && kept == 1, "%zu %zu %zu", added, replaced, kept);
  CHECK(expect_tuning(out, &KEY, 0, 10, 6, NULL) == TEST_PASS);
  CHECK(expect_tuning(out, &key4, 50, 3, 51, NULL) == TEST_PASS);
  /* b2's is faster: it replaces the whole tuning. */
  CHECK_STATUS(CONV_OK, conv_cache_merge(b2, out, NULL, &added, &replaced, &kept, NULL, 0));
  CHECK_MSG(added == 0 && replaced == 1 && kept == 0, "%zu %zu %zu", added, replaced, kept);
  CHECK(expect_tuning(out, &KEY, 10, 4, 11, NULL) == TEST_PASS);
  /* One device only. */
  CHECK_STATUS(CONV_OK, conv_cache_merge(a, out2, DEVICE2, &added, &replaced, &kept, NULL, 0));
  CHECK(added == 1 && replaced == 0 && kept == 0);
  CHECK(expect_tuning(out2, &key2, 20, 3, 21, NULL) == TEST_PASS);
  CHECK(expect_tuning(out2, &KEY, 0, 0, -1, NULL) == TEST_PASS);

  /* Bad input: its status and message, counts untouched, nothing made. */
  added = replaced = kept = 77;
  CHECK_STATUS(CONV_INVALID_ARGUMENT, conv_cache_merge(out, out, NULL, &added, &replaced, &kept,
                                                       message, sizeof message));
  CHECK(strstr(message, "merged into") != NULL && added == 77 && kept == 77);
  CHECK_STATUS(CONV_INVALID_ARGUMENT, conv_cache_merge(NULL, out, NULL, NULL, NULL, NULL, message,
                                                       sizeof message));
  char missing[1100], nowhere[1100];
  snprintf(missing, sizeof missing, "%s.missing", a);
  snprintf(nowhere, sizeof nowhere, "%s.d/none/out.db", a);
  CHECK_STATUS(CONV_CACHE_ERROR, conv_cache_merge(missing, nowhere, NULL, &added, NULL, NULL,
                                                  message, sizeof message));
  CHECK(strstr(message, missing) != NULL && added == 77 && !file_exists(missing));
  CHECK_STATUS(CONV_CACHE_ERROR, conv_cache_merge(a, nowhere, NULL, &added, NULL, NULL, message,
                                                  sizeof message));
  CHECK(added == 77 && !file_exists(nowhere));
  /* The sources are only read. */
  char *a_now = read_all(a, &a_after);
  CHECK(a_now != NULL && a_after == a_size && memcmp(a_now, a_bytes, a_size) == 0);
  free(a_now);
  free(a_bytes);
  free(a_key);
  return TEST_PASS;
}

static int test_merge(void) {
  char a[1024], b[1024], b2[1024], out[1024], out2[1024];
  tmp_path(a, sizeof a, "merge_a");
  tmp_path(b, sizeof b, "merge_b");
  tmp_path(b2, sizeof b2, "merge_b2");
  tmp_path(out, sizeof out, "merge_out");
  tmp_path(out2, sizeof out2, "merge_out2");
  int rc = merge_in(a, b, b2, out, out2);
  remove_db(a);
  remove_db(b);
  remove_db(b2);
  remove_db(out);
  remove_db(out2);
  return rc;
}

/* ---------------------------------------------------------------- many writers, killed ones */

/* Eight processes tuning one shape each into one new file lose no row. */
static int eight_writers_in(const char *path) {
  enum { WRITERS = 8, TRIALS = 100 };
  static const char *const problems[WRITERS] = {
      "fwd f32 nchw strict none n1 c64 h56 w56 k64 r3 s3 pad1,1 str1,1 dil1,1 g1",
      "fwd f32 nchw strict none n2 c64 h56 w56 k64 r3 s3 pad1,1 str1,1 dil1,1 g1",
      "fwd f32 nchw strict none n3 c64 h56 w56 k64 r3 s3 pad1,1 str1,1 dil1,1 g1",
      "fwd f32 nchw strict none n4 c64 h56 w56 k64 r3 s3 pad1,1 str1,1 dil1,1 g1",
      "fwd f32 nchw tf32 none n1 c64 h56 w56 k64 r3 s3 pad1,1 str1,1 dil1,1 g1",
      "fwd f32 nchw tf32 none n2 c64 h56 w56 k64 r3 s3 pad1,1 str1,1 dil1,1 g1",
      "fwd f32 nchw tf32 none n3 c64 h56 w56 k64 r3 s3 pad1,1 str1,1 dil1,1 g1",
      "fwd f32 nchw tf32 none n4 c64 h56 w56 k64 r3 s3 pad1,1 str1,1 dil1,1 g1"};
  remove_db(path);
  CHECK(run_writers("eight_writers_at_once", path, WRITERS, problems, TRIALS, 60) == TEST_PASS);
  CHECK(sql_int(path, "SELECT count(*) FROM trials") == WRITERS * TRIALS);
  CHECK(sql_int(path, "SELECT count(DISTINCT problem) FROM trials") == WRITERS);
  CHECK(sql_int(path, "SELECT count(*) FROM trials WHERE winner <> 0") == WRITERS);
  char check[64];
  sql_text(path, "PRAGMA integrity_check", check, sizeof check);
  CHECK_MSG(strcmp(check, "ok") == 0, "integrity_check: %s", check);
  conv_error err = {0};
  conv_cache *cache = NULL;
  CHECK_OK(conv_cache_open(path, true, &cache, &err));
  for (int w = 0; w < WRITERS; w++) {
    conv_cache_key key = {problems[w], DEVICE, VERSIONS};
    CHECK(expect_winner(cache, &key, 60) == TEST_PASS);
    CHECK(count_trials(cache, problems[w]) == TRIALS);
  }
  conv_cache_close(cache);
  return TEST_PASS;
}

static int test_eight_writers_at_once(void) {
  if (test_argc > 0) return writer_main();
  char path[1024];
  tmp_path(path, sizeof path, "eight_writers");
  int rc = eight_writers_in(path);
  remove_db(path);
  return rc;
}

/* kill -9 during a tuning: the cache passes integrity_check, keeps every
 * tuning finished before (rows intact), holds only whole trials of the
 * killed one, and takes the next tuning as usual. */
static int killed_writer_in(const char *path) {
  static const char *const done[] = {PROBLEM2};
  static const char *const victim[] = {PROBLEM};
  remove_db(path);
  CHECK(run_writers("killed_writer", path, 1, done, 50, 20) == TEST_PASS);
  /* Far more trials than it can store before the kill. */
  CHECK(run_writers_killed("killed_writer", path, 1, victim, 10000000, -1, 700) == TEST_PASS);
  char check[64];
  sql_text(path, "PRAGMA integrity_check", check, sizeof check);
  CHECK_MSG(strcmp(check, "ok") == 0, "integrity_check: %s", check);
  conv_error err = {0};
  conv_cache *cache = NULL;
  CHECK_OK(conv_cache_open(path, false, &cache, &err));
  const conv_cache_key finished = {PROBLEM2, DEVICE, VERSIONS};
  CHECK(expect_winner(cache, &finished, 20) == TEST_PASS);
  CHECK(count_trials(cache, PROBLEM2) == 50);
  /* Whatever the killed writer committed reads back whole. */
  collector *c = new_collector();
  CHECK(c != NULL);
  CHECK_OK(conv_cache_list_trials(cache, PROBLEM, collect, c, &err));
  /* How many depends on the machine's speed (none on a very slow one). */
  fprintf(stderr, "killed writer: %d trials committed before the kill\n", c->count);
  for (int r = 0; r < c->count && r < (int)(sizeof c->rows / sizeof c->rows[0]); r++) {
    int i = (int)c->rows[r].trial.config.values[0];
    conv_trial want = make_trial(i);
    CHECK(check_trial(&c->rows[r].trial, &want, c->rows[r].trial.winner) == TEST_PASS);
  }
  free(c);
  /* The next tuning of the killed shape starts clean. */
  CHECK_OK(conv_cache_begin_tuning(cache, &KEY, &err));
  CHECK(add_trials(cache, &KEY, 0, 5) == TEST_PASS);
  CHECK(set_winner(cache, &KEY, 3) == TEST_PASS);
  CHECK(count_trials(cache, PROBLEM) == 5);
  CHECK(expect_winner(cache, &KEY, 3) == TEST_PASS);
  conv_cache_close(cache);
  return TEST_PASS;
}

static int test_killed_writer(void) {
  if (test_argc > 0) return writer_main();
  char path[1024];
  tmp_path(path, sizeof path, "killed_writer");
  int rc = killed_writer_in(path);
  remove_db(path);
  return rc;
}

/* conv_cache_default_path: $CONVTUNE_CACHE, else $XDG_CACHE_HOME's, made on
 * request; a buffer too small and a NULL one refused. */
static int test_default_path(void) {
  char path[4096], message[512], xdg[1024], want[1100];
  tmp_path(xdg, sizeof xdg, "default_path.d");
  CHECK(setenv("CONVTUNE_CACHE", "/some/where/cache.db", 1) == 0);
  CHECK_STATUS(CONV_OK, conv_cache_default_path(path, sizeof path, 0, message, sizeof message));
  CHECK(strcmp(path, "/some/where/cache.db") == 0);
  CHECK_STATUS(CONV_CACHE_ERROR, conv_cache_default_path(path, 8, 0, message, sizeof message));
  CHECK(strstr(message, "too long") != NULL);
  CHECK_STATUS(CONV_INVALID_ARGUMENT, conv_cache_default_path(NULL, 8, 0, message, sizeof message));
  CHECK(unsetenv("CONVTUNE_CACHE") == 0 && setenv("XDG_CACHE_HOME", xdg, 1) == 0);
  snprintf(want, sizeof want, "%s/convtune/cache.db", xdg);
  CHECK_STATUS(CONV_OK, conv_cache_default_path(path, sizeof path, 0, NULL, 0));
  CHECK(strcmp(path, want) == 0);
  snprintf(want, sizeof want, "%s/convtune", xdg);
  struct stat st;
  CHECK(stat(want, &st) != 0); /* not made unless asked */
  CHECK_STATUS(CONV_OK, conv_cache_default_path(path, sizeof path, 1, NULL, 0));
  CHECK(stat(want, &st) == 0 && S_ISDIR(st.st_mode));
  rmdir(want);
  rmdir(xdg);
  unsetenv("XDG_CACHE_HOME");
  return TEST_PASS;
}

static const test_case tests[] = {
    {"roundtrip", test_roundtrip},
    {"every_trial_kept", test_every_trial_kept},
    {"stale_versions_ignored", test_stale_versions_ignored},
    {"winner_unique", test_winner_unique},
    {"schema_version_checked", test_schema_version_checked},
    {"schema_upgraded", test_schema_upgraded},
    {"bad_config_text_rejected", test_bad_config_text_rejected},
    {"persistence_across_processes", test_persistence_across_processes},
    {"two_writers_at_once", test_two_writers_at_once},
    {"read_only_open", test_read_only_open},
    {"special_files_refused", test_special_files_refused},
    {"identity_stamped", test_identity_stamped},
    {"foreign_wal_refused", test_foreign_wal_refused},
    {"public_reader", test_public_reader},
    {"merge", test_merge},
    {"eight_writers_at_once", test_eight_writers_at_once},
    {"killed_writer", test_killed_writer},
    {"default_path", test_default_path},
};

TEST_MAIN(tests)
