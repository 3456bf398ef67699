/*
 * test_cache_share.c -- reading and sharing caches (CPU only): the public
 * reader, conv_cache_merge, eight writer processes at once, a writer killed
 * mid-tuning, and the default path.  Fixtures in cache_fixtures.c.
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

  CHECK(expect_merged(a, out, NULL, 2, 0, 0) == TEST_PASS);
  /* Every trial, as measured (tuned_at kept); the unfinished tuning stays behind. */
  CHECK(expect_tuning(out, &KEY, 0, 10, 6, a_key) == TEST_PASS);
  CHECK(expect_tuning(out, &key2, 20, 3, 21, NULL) == TEST_PASS);
  CHECK(expect_tuning(out, &unfinished, 0, 0, -1, NULL) == TEST_PASS);
  /* b's KEY is slower: kept; its other tuning is added. */
  CHECK(expect_merged(b, out, NULL, 1, 0, 1) == TEST_PASS);
  CHECK(expect_tuning(out, &KEY, 0, 10, 6, NULL) == TEST_PASS);
  CHECK(expect_tuning(out, &key4, 50, 3, 51, NULL) == TEST_PASS);
  /* b2's is faster: it replaces the whole tuning. */
  CHECK(expect_merged(b2, out, NULL, 0, 1, 0) == TEST_PASS);
  CHECK(expect_tuning(out, &KEY, 10, 4, 11, NULL) == TEST_PASS);
  /* One device only. */
  CHECK(expect_merged(a, out2, DEVICE2, 1, 0, 0) == TEST_PASS);
  CHECK(expect_tuning(out2, &key2, 20, 3, 21, NULL) == TEST_PASS);
  CHECK(expect_tuning(out2, &KEY, 0, 0, -1, NULL) == TEST_PASS);

  size_t added = 77, replaced = 77, kept = 77;
  char message[512];
  /* Bad input: its status and message, counts untouched, nothing made. */
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
    {"public_reader", test_public_reader},
    {"merge", test_merge},
    {"eight_writers_at_once", test_eight_writers_at_once},
    {"killed_writer", test_killed_writer},
    {"default_path", test_default_path},
};

TEST_MAIN(tests)
