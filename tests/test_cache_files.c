/*
 * test_cache_files.c -- the cache as files and processes (CPU only):
 * persistence across processes, two writers at once, read-only opens,
 * special files refused, the WAL identity stamp and a foreign WAL refused
 * (one without page 1 too).
 * The multi-process tests spawn this binary again through libuv in the
 * writer mode (cache_fixtures.h).  Fixtures in cache_fixtures.c.
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

/* ---------------------------------------------------------------- files and processes */

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

/* Opening a_path read-only, then writable, is refused for its foreign
 * -wal, and leaves the file as a_data holds it.  The other database's
 * rows are trials of PROBLEM2 or have the reason "foreign". */
static int expect_foreign_wal_refused(const char *a_path, const char *a_data, size_t a_size) {
  conv_error err = {0};
  for (int read_only = 1; read_only >= 0; read_only--) {
    conv_cache *a = NULL;
    err.message[0] = '\0';
    conv_status st = conv_cache_open(a_path, read_only, &a, &err);
    if (st == CONV_OK) {
      collector *c = new_collector();
      int foreign = 0;
      for (int p = 0; c != NULL && p < 2; p++) {
        c->count = 0;
        if (conv_cache_list_trials(a, p ? PROBLEM2 : PROBLEM, collect, c, &err) != CONV_OK) break;
        for (int r = 0; r < c->count && r < 512; r++)
          foreign += p == 1 || strcmp(c->rows[r].trial.reason, "foreign") == 0;
      }
      fprintf(stderr, "read_only %d: opened; rows of the other database read: %d\n", read_only,
              foreign);
      free(c);
      conv_cache_close(a);
    }
    CHECK_MSG(st == CONV_CACHE_ERROR && strstr(err.message, "belongs to another database"),
              "read_only %d: %s: %s", read_only, conv_status_string(st), err.message);
    CHECK_MSG(same_file(a_path, a_data, a_size), "read_only %d changed the file", read_only);
  }
  return TEST_PASS;
}

/* A cache at path with three trials of KEY, closed (its WAL folded in);
 * the file's bytes (malloc'd; NULL on failure). */
static char *cache_of_three_trials(const char *path, size_t *size) {
  conv_error err = {0};
  conv_cache *cache = NULL;
  if (conv_cache_open(path, false, &cache, &err) != CONV_OK) {
    fprintf(stderr, "%s\n", err.message);
    return NULL;
  }
  int rc = add_trials(cache, &KEY, 0, 3);
  conv_cache_close(cache);
  return rc == TEST_PASS ? read_all(path, size) : NULL;
}

/* A -wal file of another database beside a cache (copied in, or left by a
 * cache that once had this name) is refused by readers and writers alike,
 * and leaves the file as it was; the cache's own WAL (a crash) is read. */
static int foreign_wal_in(const char *a_path, const char *b_path) {
  conv_error err = {0};
  static const conv_cache_key other = {PROBLEM2, DEVICE, VERSIONS};
  conv_cache *a = NULL, *b = NULL;
  size_t a_size = 0;
  char *a_data = cache_of_three_trials(a_path, &a_size);
  CHECK(a_data != NULL);

  /* B's WAL, taken while B is open (its commits are in the WAL only). */
  char a_wal[1100], b_wal[1100];
  snprintf(a_wal, sizeof a_wal, "%s-wal", a_path);
  snprintf(b_wal, sizeof b_wal, "%s-wal", b_path);
  CHECK_OK(conv_cache_open(b_path, false, &b, &err));
  CHECK(add_trials(b, &other, 0, 5) == TEST_PASS);
  CHECK(copy_file(b_wal, a_wal));
  conv_cache_close(b);

  CHECK(expect_foreign_wal_refused(a_path, a_data, a_size) == TEST_PASS);
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

/* fn(a, b) on two fresh temporary caches, removed after. */
static int on_two_caches(const char *name_a, const char *name_b,
                         int (*fn)(const char *a, const char *b)) {
  char a[1024], b[1024];
  tmp_path(a, sizeof a, name_a);
  tmp_path(b, sizeof b, name_b);
  int rc = fn(a, b);
  remove_db(a);
  remove_db(b);
  return rc;
}

static int test_foreign_wal_refused(void) {
  return on_two_caches("foreign_wal_a", "foreign_wal_b", foreign_wal_in);
}

/* The page numbers of the frames in a WAL file (at most max); -1 when it
 * is not one. */
static int wal_pages(const char *wal, unsigned pages[], int max) {
  size_t size = 0;
  unsigned char *data = (unsigned char *)read_all(wal, &size);
  if (data == NULL || size < 32) {
    free(data);
    return -1;
  }
  size_t page_size =
      (size_t)data[8] << 24 | (size_t)data[9] << 16 | (size_t)data[10] << 8 | data[11];
  int n = 0;
  for (size_t at = 32; page_size > 0 && at + 24 + page_size <= size && n < max;
       at += 24 + page_size)
    pages[n++] = (unsigned)data[at] << 24 | (unsigned)data[at + 1] << 16 |
                 (unsigned)data[at + 2] << 8 | data[at + 3];
  free(data);
  return n;
}

/* A -wal file of another database whose changes leave page 1 alone (so
 * SQLite reads the identity from the cache's own header): refused too, and
 * the file is left as it was. */
static int foreign_wal_without_page_one_in(const char *a_path, const char *b_path) {
  size_t a_size = 0;
  char *a_data = cache_of_three_trials(a_path, &a_size);
  CHECK(a_data != NULL);

  /* B: a copy with an identity of its own, then a change of one row left
   * in its WAL (a commit that leaves page 1 alone). */
  CHECK(copy_file(a_path, b_path));
  CHECK(sql_exec(b_path, "PRAGMA user_version = 12345") == SQLITE_OK);
  sqlite3 *b = NULL;
  CHECK(sqlite3_open(b_path, &b) == SQLITE_OK);
  CHECK(sqlite3_exec(b, "PRAGMA wal_autocheckpoint = 0; UPDATE trials SET reason = 'foreign'"
                        " WHERE id = (SELECT min(id) FROM trials)",
                     NULL, NULL, NULL) == SQLITE_OK);
  char a_wal[1100], b_wal[1100];
  snprintf(a_wal, sizeof a_wal, "%s-wal", a_path);
  snprintf(b_wal, sizeof b_wal, "%s-wal", b_path);
  bool copied = copy_file(b_wal, a_wal);
  sqlite3_close(b);
  CHECK(copied);
  unsigned pages[64];
  int frames = wal_pages(a_wal, pages, 64);
  CHECK_MSG(frames > 0, "%d frames", frames);
  for (int i = 0; i < frames; i++) CHECK_MSG(pages[i] != 1, "frame %d is page 1", i);

  CHECK(expect_foreign_wal_refused(a_path, a_data, a_size) == TEST_PASS);
  free(a_data);
  return TEST_PASS;
}

static int test_foreign_wal_without_page_one(void) {
  return on_two_caches("foreign_wal_page_a", "foreign_wal_page_b", foreign_wal_without_page_one_in);
}

static const test_case tests[] = {
    {"persistence_across_processes", test_persistence_across_processes},
    {"two_writers_at_once", test_two_writers_at_once},
    {"read_only_open", test_read_only_open},
    {"special_files_refused", test_special_files_refused},
    {"identity_stamped", test_identity_stamped},
    {"foreign_wal_refused", test_foreign_wal_refused},
    {"foreign_wal_without_page_one", test_foreign_wal_without_page_one},
};

TEST_MAIN(tests)
