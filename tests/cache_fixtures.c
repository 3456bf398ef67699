/*
 * cache_fixtures.c -- see cache_fixtures.h.
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
/* ---------------------------------------------------------------- fixtures */


const conv_cache_key KEY = {PROBLEM, DEVICE, VERSIONS};

const char *tmp_dir(void) {
  const char *dir = getenv("CONVTUNE_TEST_TMP");
  return dir != NULL && dir[0] != '\0' ? dir : "/tmp";
}

bool file_exists(const char *path) {
  FILE *f = fopen(path, "rb");
  if (f != NULL) fclose(f);
  return f != NULL;
}

/* Removes a database and its WAL, shared-memory and journal files. */
void remove_db(const char *path) {
  static const char *const suffixes[] = {"", "-wal", "-shm", "-journal"};
  for (size_t i = 0; i < sizeof suffixes / sizeof suffixes[0]; i++) {
    char p[1024];
    snprintf(p, sizeof p, "%s%s", path, suffixes[i]);
    remove(p);
  }
}

/* A unique path for this process and test; any leftover is removed. */
void tmp_path(char *path, size_t size, const char *name) {
  snprintf(path, size, "%s/test_cache-%ld-%s.db", tmp_dir(), (long)uv_os_getpid(), name);
  remove_db(path);
}

/* The whole file, malloc'd (NULL if unreadable); *size gets its length. */
char *read_all(const char *path, size_t *size) {
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

bool write_all(const char *path, const void *data, size_t size) {
  FILE *f = fopen(path, "wb");
  if (f == NULL) return false;
  bool ok = fwrite(data, 1, size, f) == size;
  return fclose(f) == 0 && ok;
}

/* Raw SQLite access, behind the cache's back. */
int sql_exec(const char *path, const char *sql) {
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
void sql_text(const char *path, const char *sql, char *out, size_t size) {
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

long long sql_int(const char *path, const char *sql) {
  char text[64];
  sql_text(path, sql, text, sizeof text);
  if (strcmp(text, "ERROR") == 0 || text[0] == '\0') return -999;
  return atoll(text);
}

/* Trial i of a tuning: a mix of algorithms, configs with large and negative
 * values, distinct times (i < 101), and every fifth one failing. */
conv_trial make_trial(int i) {
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
int check_trial(const conv_trial *got, const conv_trial *want, bool winner) {
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



int collect(const conv_cache_row *row, void *user) {
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

collector *new_collector(void) { return calloc(1, sizeof(collector)); }

/* "2025-01-31T12:34:56Z", this century. */
bool iso_utc(const char *s) {
  if (strlen(s) != 20 || s[4] != '-' || s[7] != '-' || s[10] != 'T' || s[13] != ':' ||
      s[16] != ':' || s[19] != 'Z' || strncmp(s, "20", 2) != 0)
    return false;
  for (int i = 0; i < 19; i++)
    if (i != 4 && i != 7 && i != 10 && i != 13 && i != 16 && (s[i] < '0' || s[i] > '9'))
      return false;
  return true;
}

/* Opening `path` (read-write, then read-only) fails with CONV_CACHE_ERROR,
 * names the path and `mention`, and leaves the file byte for byte as it was
 * (SQLite itself may leave an empty -wal file next to a WAL database). */
int check_refused(const char *path, const char *mention) {
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

/* Adds make_trial(first .. first+count-1) under key. */
int add_trials(conv_cache *cache, const conv_cache_key *key, int first, int count) {
  conv_error err = {0};
  for (int i = first; i < first + count; i++) {
    conv_trial t = make_trial(i);
    CHECK_OK(conv_cache_add_trial(cache, key, &t, &err));
  }
  return TEST_PASS;
}

int set_winner(conv_cache *cache, const conv_cache_key *key, int i) {
  conv_error err = {0};
  conv_trial t = make_trial(i);
  CHECK_OK(conv_cache_set_winner(cache, key, t.algorithm_id, &t.config, &err));
  return TEST_PASS;
}

/* The winner of key must be make_trial(i). */
int expect_winner(conv_cache *cache, const conv_cache_key *key, int i) {
  conv_error err = {0};
  conv_trial got, want = make_trial(i);
  bool found = false;
  CHECK_OK(conv_cache_lookup_winner(cache, key, &got, &found, &err));
  CHECK_MSG(found, "no winner for %s / %s", key->problem, key->versions);
  return check_trial(&got, &want, true);
}

int expect_no_winner(conv_cache *cache, const conv_cache_key *key) {
  conv_error err = {0};
  conv_trial got;
  bool found = true;
  CHECK_OK(conv_cache_lookup_winner(cache, key, &got, &found, &err));
  CHECK(!found);
  return TEST_PASS;
}

int count_trials(conv_cache *cache, const char *problem) {
  conv_error err = {0};
  collector *c = new_collector();
  if (c == NULL) return -1;
  conv_status st = conv_cache_list_trials(cache, problem, collect, c, &err);
  int n = st == CONV_OK ? c->count : -1;
  if (st != CONV_OK) fprintf(stderr, "list_trials: %s\n", err.message);
  free(c);
  return n;
}

/* ---------------------------------------------------------------- whole tunings */

collector *trials_of(const char *path, const conv_cache_key *key) {
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

int write_tuning(const char *path, const conv_cache_key *key, int first, int count, int winner) {
  conv_error err = {0};
  conv_cache *cache = NULL;
  CHECK_OK(conv_cache_open(path, false, &cache, &err));
  CHECK(add_trials(cache, key, first, count) == TEST_PASS);
  if (winner >= 0) CHECK(set_winner(cache, key, winner) == TEST_PASS);
  conv_cache_close(cache);
  return TEST_PASS;
}

int expect_tuning(const char *path, const conv_cache_key *key, int first, int count, int winner,
                  const collector *like) {
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

int expect_merged(const char *from, const char *into, const char *device, size_t added,
                  size_t replaced, size_t kept) {
  size_t got[3] = {99, 99, 99};
  char message[512];
  conv_status st =
      conv_cache_merge(from, into, device, &got[0], &got[1], &got[2], message, sizeof message);
  CHECK_MSG(st == CONV_OK, "%s: %s", conv_status_string(st), message);
  CHECK_MSG(got[0] == added && got[1] == replaced && got[2] == kept,
            "%zu added, %zu replaced, %zu kept; expected %zu, %zu, %zu", got[0], got[1], got[2],
            added, replaced, kept);
  return TEST_PASS;
}

/* ---------------------------------------------------------------- child processes */

/* Helper mode: writer PATH PROBLEM TRIALS WINNER. */
int writer_main(void) {
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
int run_writers_killed(const char *test, const char *path, int count,
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

int run_writers(const char *test, const char *path, int count, const char *const problems[],
                       int trials, int winner) {
  return run_writers_killed(test, path, count, problems, trials, winner, 0);
}
