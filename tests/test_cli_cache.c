/*
 * test_cli_cache.c -- the convtune tool's commands about what the cache
 * holds beyond winners: `list --pending`, the arguments of `tune
 * --pending` and `tune --budget`, and `verify`'s arguments and caches;
 * and the files `report`, `export` and `merge` write with -o.
 * Runs without a GPU: rows are written through the cache API under
 * made-up device keys, and the one test that needs a context's failure
 * skips itself where a GPU is usable.
 */
#include <dirent.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "cache/cache.h"
#include "convtune.h"
#include "test.h"
#include "tests/cli_fixture.h"
#include "tests/cli_run.h"

static int test_tune_arguments(void) {
  isolate_default_cache();
  static const usage_case cases[] = {
      {{"tune", "--pending", SPEC}, "tune --pending takes no shapes"},
      {{"tune", "--pending", "--math", "tf32"}, "--math, --dtype, --layout, --epilogue, --direction"},
      {{"tune", "--pending", "--deterministic"}, "do not apply"},
      {{"tune", "--pending", "--policy", "predict"}, "would leave them unfinished"},
      {{"tune", "--pending=yes"}, "takes no value"},
      {{"show", SPEC, "--pending"}, "does not apply to 'show'"},
      {{"merge", "a.db", "-o", "b.db", "--pending"}, "does not apply to 'merge'"},
      {{"list", "--pending", "extra"}, "list takes no arguments"},
      {{"tune"}, "(or --pending)"},
      {{"tune", SPEC, "--budget", "0"}, "bad --budget '0'"},
      {{"tune", SPEC, "--budget", "-5"}, "bad --budget"},
      {{"tune", SPEC, "--budget", "2s"}, "bad --budget '2s'"},
      {{"tune", SPEC, "--budget", ""}, "bad --budget"},
      {{"tune", SPEC, "--budget", "nan"}, "bad --budget"},
      {{"tune", SPEC, "--budget", "1e9"}, "bad --budget"},
      {{"tune", SPEC, "--budget"}, "needs a value"},
      {{"list", "--budget", "5"}, "does not apply to 'list'"},
      {{"tune", "--stale", SPEC}, "tune --stale takes no shapes"},
      {{"tune", "--stale", "--dtype", "f16"}, "tune --stale tunes each problem as it was recorded"},
      {{"tune", "--stale", "--policy", "predict"}, "tune --stale finishes tunings"},
      {{"tune", "--stale=yes"}, "takes no value"},
      {{"show", SPEC, "--stale"}, "does not apply to 'show'"},
      {{"verify", "--stale"}, "does not apply to 'verify'"},
      {{"list", "--stale", "extra"}, "list takes no arguments"},
  };
  return check_usage_errors(cases, sizeof cases / sizeof cases[0]);
}

/* Two pending problems on DEVICE_A (one recorded under older versions
 * too), one on DEVICE_B; *key gets SPEC's key. */
static int fill_pending(const char *path, char *key, size_t key_size) {
  conv_cache *cache = NULL;
  int rc = open_fixture_cache(path, key, key_size, &cache);
  if (rc != TEST_PASS) return rc;
  conv_error err = {CONV_OK, ""};
  const conv_cache_key keys[] = {{key, DEVICE_A, VERSIONS},
                                 {key, DEVICE_A, "cuda=1 cudnn=1"},
                                 {"dyn fwd f32 nchw strict none n1 c4 h8 w8 k4 r3 s3 pad1,1 "
                                  "str1,1 dil1,1 g1",
                                  DEVICE_A, VERSIONS},
                                 {key, DEVICE_B, VERSIONS}};
  conv_status st = CONV_OK;
  for (size_t i = 0; i < sizeof keys / sizeof keys[0] && st == CONV_OK; i++)
    st = conv_cache_record_pending(cache, &keys[i],
                                   i == 2 ? CONV_PENDING_INCOMPLETE : CONV_PENDING_UNTUNED, &err);
  conv_cache_close(cache);
  CHECK_MSG(st == CONV_OK, "%s", err.message);
  return TEST_PASS;
}

static int test_list_pending(void) {
  isolate_default_cache();
  char db[1024], key[CONV_PROBLEM_KEY_MAX];
  tmp_path(db, sizeof db, "pending.db");
  int rc = fill_pending(db, key, sizeof key);
  if (rc != TEST_PASS) return rc;
  cli_result r;
  RUN_EXPECT(r, 0, "list", "--pending", "--cache", db);
  CHECK(contains(r.out.data, key));
  CHECK(contains(r.out.data, "dyn fwd f32"));
  CHECK(contains(r.out.data, "untuned"));
  CHECK(contains(r.out.data, "incomplete"));
  CHECK(contains(r.out.data, DEVICE_A) && contains(r.out.data, DEVICE_B));
  CHECK_MSG(count_lines(r.out.data) == 6, "a header, a rule and 4 rows:\n%s", r.out.data);
  cli_result_free(&r);

  RUN_EXPECT(r, 0, "list", "--pending", "--json", "--cache", db);
  json_error_t jerr;
  json_t *rows = json_loads(r.out.data, 0, &jerr);
  CHECK_MSG(rows != NULL && json_is_array(rows), "not a JSON array: %s\n%s", jerr.text,
            r.out.data);
  CHECK(json_array_size(rows) == 4);
  size_t i;
  json_t *row;
  json_array_foreach(rows, i, row) {
    const char *fields[] = {"problem", "reason", "device", "versions", "recorded_at"};
    for (size_t f = 0; f < sizeof fields / sizeof fields[0]; f++)
      CHECK_MSG(json_is_string(json_object_get(row, fields[f])), "row %zu lacks %s", i,
                fields[f]);
  }
  json_decref(rows);
  cli_result_free(&r);

  /* The winners' list is not the pending list. */
  RUN_EXPECT(r, 0, "list", "--cache", db);
  CHECK(!contains(r.out.data, "untuned"));
  cli_result_free(&r);

  /* Nothing pending: said, exit 0; no cache at all: exit 4. */
  char empty[1024];
  tmp_path(empty, sizeof empty, "pending-empty.db");
  remove_cache_files(empty);
  conv_cache *cache = NULL;
  conv_error err = {CONV_OK, ""};
  CHECK(conv_cache_open(empty, false, &cache, &err) == CONV_OK);
  conv_cache_close(cache);
  RUN_EXPECT(r, 0, "list", "--pending", "--cache", empty);
  CHECK(r.out.len == 0 && contains(r.err.data, "nothing pending"));
  cli_result_free(&r);
  RUN_EXPECT(r, 0, "list", "--pending", "--json", "--cache", empty);
  CHECK(strcmp(r.out.data, "[]\n") == 0);
  cli_result_free(&r);
  remove_cache_files(empty);
  RUN_EXPECT(r, 4, "list", "--pending", "--cache", empty);
  cli_result_free(&r);
  remove_cache_files(db);
  return TEST_PASS;
}

/* Without a GPU, tune --pending stops with the one no-GPU line before it
 * reads anything. */
/* list --stale: the pending problems whose winners were carried over
 * from other versions, alone; list --pending shows them with the rest. */
static int test_list_stale(void) {
  isolate_default_cache();
  char db[1024], key[CONV_PROBLEM_KEY_MAX];
  tmp_path(db, sizeof db, "stale.db");
  int rc = fill_pending(db, key, sizeof key);
  if (rc != TEST_PASS) return rc;
  cli_result r;
  RUN_EXPECT(r, 0, "list", "--stale", "--cache", db);
  CHECK(r.out.len == 0 && contains(r.err.data, "nothing pending"));
  cli_result_free(&r);

  conv_cache *cache = NULL;
  conv_error err = {CONV_OK, ""};
  CHECK(conv_cache_open(db, false, &cache, &err) == CONV_OK);
  const conv_cache_key stale_key = {key, DEVICE_B, "cuda=2 cudnn=2"};
  conv_trial t;
  memset(&t, 0, sizeof t);
  t.algorithm_id = 4;
  snprintf(t.algorithm, sizeof t.algorithm, "direct_channel");
  t.config.count = 1;
  t.config.values[0] = 3;
  t.status = CONV_OK;
  t.time_ms = 0.25;
  t.rel_error = 1e-7;
  t.deterministic = 1;
  t.winner = true;
  conv_status st = conv_cache_store_carried(cache, &stale_key, &t, &err);
  conv_cache_close(cache);
  CHECK_MSG(st == CONV_OK, "%s", err.message);

  RUN_EXPECT(r, 0, "list", "--stale", "--json", "--cache", db);
  json_error_t jerr;
  json_t *rows = json_loads(r.out.data, 0, &jerr);
  CHECK_MSG(rows != NULL && json_array_size(rows) == 1, "%s", r.out.data);
  json_t *row = json_array_get(rows, 0);
  CHECK(strcmp(json_string_value(json_object_get(row, "reason")), "stale") == 0);
  CHECK(strcmp(json_string_value(json_object_get(row, "device")), DEVICE_B) == 0);
  json_decref(rows);
  cli_result_free(&r);
  /* Storing it replaced DEVICE_B's "untuned" row of the same problem. */
  RUN_EXPECT(r, 0, "list", "--pending", "--cache", db);
  CHECK(contains(r.out.data, "stale") && contains(r.out.data, "untuned"));
  CHECK_MSG(count_lines(r.out.data) == 6, "a header, a rule and 4 rows:\n%s", r.out.data);
  cli_result_free(&r);
  remove_cache_files(db);
  return TEST_PASS;
}

static int test_no_gpu_tune_pending(void) {
  isolate_default_cache();
  if (probe_context() == CONV_OK) {
    fprintf(stderr, "a CUDA GPU is usable here: the no-GPU message cannot be checked\n");
    return TEST_SKIP;
  }
  char db[1024], key[CONV_PROBLEM_KEY_MAX];
  tmp_path(db, sizeof db, "pending-nogpu.db");
  int rc = fill_pending(db, key, sizeof key);
  if (rc != TEST_PASS) return rc;
  cli_result r;
  RUN_EXPECT(r, 3, "tune", "--pending", "--cache", db);
  CHECK(count_lines(r.err.data) == 1 && contains(r.err.data, "no usable CUDA GPU"));
  CHECK(r.out.len == 0);
  cli_result_free(&r);
  RUN_EXPECT(r, 3, "tune", "--stale", "--cache", db);
  CHECK(count_lines(r.err.data) == 1 && contains(r.err.data, "no usable CUDA GPU"));
  cli_result_free(&r);
  remove_cache_files(db);
  return TEST_PASS;
}

static int test_verify_arguments(void) {
  isolate_default_cache();
  static const usage_case cases[] = {
      {{"verify", "extra.db"}, "verify takes no arguments"},
      {{"verify", "--tolerance", "-0.1"}, "bad --tolerance '-0.1'"},
      {{"verify", "--tolerance", "10%"}, "bad --tolerance '10%'"},
      {{"verify", "--tolerance", "nan"}, "bad --tolerance"},
      {{"verify", "--tolerance"}, "needs a value"},
      {{"verify", "--pending"}, "does not apply to 'verify'"},
      {{"verify", "--json"}, "does not apply to 'verify'"},
      {{"list", "--tolerance", "0.1"}, "does not apply to 'list'"},
      {{"verify", "--system-cache", ""}, "--system-cache needs a path"},
  };
  return check_usage_errors(cases, sizeof cases / sizeof cases[0]);
}

/* A missing cache and one that is not a convtune cache are exit 4, found
 * before any GPU is looked for; a real cache without a GPU is the one
 * no-GPU line (exit 3). */
static int test_verify_bad_caches(void) {
  isolate_default_cache();
  char missing[1024], foreign[1024], real[1024], key[CONV_PROBLEM_KEY_MAX];
  tmp_path(missing, sizeof missing, "verify-missing.db");
  tmp_path(foreign, sizeof foreign, "verify-foreign.db");
  tmp_path(real, sizeof real, "verify-real.db");
  remove_cache_files(missing);
  cli_result r;
  RUN_EXPECT(r, 4, "verify", "--cache", missing);
  CHECK(contains(r.err.data, "no cache at") && r.out.len == 0);
  cli_result_free(&r);
  RUN_EXPECT(r, 4, "verify", "--system-cache", missing);
  cli_result_free(&r);
  CHECK(!file_exists(missing));

  CHECK(write_file(foreign, "this is not a database, let alone a convtune cache\n"));
  RUN_EXPECT(r, 4, "verify", "--cache", foreign);
  CHECK(contains(r.err.data, foreign) && r.out.len == 0);
  cli_result_free(&r);
  remove_cache_files(foreign);

  if (probe_context() == CONV_OK) {
    fprintf(stderr, "a CUDA GPU is usable here: the no-GPU exit cannot be checked\n");
    return TEST_PASS;
  }
  int rc = fill_pending(real, key, sizeof key); /* a valid cache */
  if (rc != TEST_PASS) return rc;
  RUN_EXPECT(r, 3, "verify", "--cache", real, "--tolerance", "0.2");
  CHECK(count_lines(r.err.data) == 1 && contains(r.err.data, "no usable CUDA GPU"));
  cli_result_free(&r);
  remove_cache_files(real);
  return TEST_PASS;
}

/* ================================================================ -o files */

/* A folder of its own under the temp folder (TMP/cli-<pid>-NAME), so that
 * what other tests write at the same time is not taken for a leftover. */
static bool own_dir(char *dir, size_t size, const char *name) {
  tmp_path(dir, size, name);
  return mkdir(dir, 0700) == 0 || errno == EEXIST;
}

/* The whole file in buf[size] (NUL-terminated); false when it cannot be
 * read or does not fit. */
static bool read_text(const char *path, char *buf, size_t size) {
  FILE *f = fopen(path, "rb");
  if (f == NULL) return false;
  size_t n = fread(buf, 1, size - 1, f);
  bool whole = n < size - 1 && !ferror(f);
  fclose(f);
  buf[n] = '\0';
  return whole;
}

/* Whether a staging folder of the tool (".convtune-...") is left in dir. */
static bool staging_left(const char *dir) {
  DIR *d = opendir(dir);
  bool found = false;
  for (struct dirent *e; d != NULL && (e = readdir(d)) != NULL;)
    found = found || strncmp(e->d_name, ".convtune-", 10) == 0;
  if (d != NULL) closedir(d);
  return found;
}

/* Removes every entry of dir (files, a FIFO, links, empty folders), then dir. */
static void remove_dir(const char *dir) {
  DIR *d = opendir(dir);
  for (struct dirent *e; d != NULL && (e = readdir(d)) != NULL;) {
    if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
    char path[2048];
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    remove(path);
  }
  if (d != NULL) closedir(d);
  rmdir(dir);
}

#define PRECIOUS "a file of the user's, not the tool's\n"

/* A symbolic link, a FIFO (which would block the writer), a directory
 * and a device as -o of report, export and merge: each refused as a usage
 * error naming what it is, and each left exactly as it was (report used
 * to write through the link into the user's file, to hang on the FIFO,
 * and to remove a device it failed to write: /dev/full as root). */
static int test_output_kinds_refused(void) {
  isolate_default_cache();
  char dir[1024], db[1100], fifo[1100], folder[1100], link[1100], precious[1100], target[1100];
  char key[CONV_PROBLEM_KEY_MAX], text[256];
  CHECK(own_dir(dir, sizeof dir, "out-kinds"));
  snprintf(db, sizeof db, "%s/cache.db", dir);
  snprintf(fifo, sizeof fifo, "%s/fifo", dir);
  snprintf(folder, sizeof folder, "%s/folder", dir);
  snprintf(link, sizeof link, "%s/link", dir);
  snprintf(precious, sizeof precious, "%s/precious.html", dir);
  int rc = fill_cache(db, key, sizeof key);
  if (rc != TEST_PASS) return rc;
  CHECK(mkfifo(fifo, 0600) == 0 && mkdir(folder, 0700) == 0);
  CHECK(write_file(precious, PRECIOUS) && symlink(precious, link) == 0);
  const struct {
    const char *path, *kind;
  } targets[] = {{link, "is a symbolic link"},
                 {fifo, "is a FIFO"},
                 {folder, "is a directory"},
                 {"/dev/null", "is a device"}};
  for (size_t t = 0; t < sizeof targets / sizeof targets[0]; t++) {
    const usage_case cases[] = {
        {{"report", "--cache", db, "-o", targets[t].path}, targets[t].kind},
        {{"export", "--cache", db, "-o", targets[t].path}, targets[t].kind},
        {{"merge", db, "-o", targets[t].path}, targets[t].kind},
    };
    rc = check_usage_errors(cases, sizeof cases / sizeof cases[0]);
    if (rc != TEST_PASS) return rc;
  }
  struct stat st;
  CHECK(lstat(fifo, &st) == 0 && S_ISFIFO(st.st_mode));
  CHECK(lstat(folder, &st) == 0 && S_ISDIR(st.st_mode));
  CHECK(lstat(link, &st) == 0 && S_ISLNK(st.st_mode));
  ssize_t n = readlink(link, target, sizeof target - 1);
  CHECK(n > 0 && (target[n] = '\0', strcmp(target, precious) == 0));
  CHECK(read_text(precious, text, sizeof text) && strcmp(text, PRECIOUS) == 0);
  CHECK(stat("/dev/null", &st) == 0 && S_ISCHR(st.st_mode));
  CHECK(!staging_left(dir));
  remove_dir(folder);
  remove_dir(dir);
  return TEST_PASS;
}

/* -o naming an input, by its path, another spelling, a hard link, or a
 * side file of the input cache (its -wal) is refused, and the cache keeps
 * every byte: report used to write its HTML over the cache. */
static int test_output_same_file(void) {
  isolate_default_cache();
  char dir[1024], db[1100], other[1100], spelled[1100], hard[1100], wal[1100];
  char key[CONV_PROBLEM_KEY_MAX];
  CHECK(own_dir(dir, sizeof dir, "out-same"));
  snprintf(db, sizeof db, "%s/cache.db", dir);
  snprintf(other, sizeof other, "%s/other.db", dir);
  snprintf(spelled, sizeof spelled, "%s/./cache.db", dir);
  snprintf(hard, sizeof hard, "%s/hard-link.db", dir);
  snprintf(wal, sizeof wal, "%s-wal", db);
  int rc = fill_cache(db, key, sizeof key);
  if (rc == TEST_PASS) rc = fill_cache(other, key, sizeof key);
  if (rc != TEST_PASS) return rc;
  CHECK(link(db, hard) == 0);
  static char before[1 << 16], after[1 << 16];
  CHECK(read_text(db, before, sizeof before));
  const usage_case cases[] = {
      {{"report", "--cache", db, "-o", wal}, "a file of the input cache"},
      {{"report", "--cache", db, "-o", db}, "is the same file as"},
      {{"report", "--cache", db, "-o", hard}, "is the same file as"},
      {{"report", "--cache", hard, "-o", spelled}, "is the same file as"},
      {{"export", "--cache", db, "-o", hard}, "is the same file as"},
      {{"merge", other, db, "-o", hard}, "is the same file as"},
      {{"merge", other, "-o", other}, "is the same file as"},
  };
  rc = check_usage_errors(cases, sizeof cases / sizeof cases[0]);
  if (rc != TEST_PASS) return rc;
  CHECK(read_text(db, after, sizeof after) && memcmp(before, after, sizeof before) == 0);
  CHECK(!file_exists(wal) || (read_text(wal, after, sizeof after) && !contains(after, "<!DOCTYPE")));
  cli_result r;
  RUN_EXPECT(r, 0, "list", "--cache", db);
  CHECK(contains(r.out.data, DEVICE_A) && contains(r.out.data, DEVICE_B));
  cli_result_free(&r);
  CHECK(!staging_left(dir));
  remove_dir(dir);
  return TEST_PASS;
}

/* The report of a cache with many timed configs (about 1 MB of HTML). */
static int fill_large_cache(const char *path) {
  char key[CONV_PROBLEM_KEY_MAX];
  conv_cache *cache = NULL;
  int rc = open_fixture_cache(path, key, sizeof key, &cache);
  if (rc != TEST_PASS) return rc;
  conv_error err = {CONV_OK, ""};
  conv_cache_key k = {key, DEVICE_A, VERSIONS};
  conv_status st = conv_cache_begin_tuning(cache, &k, &err);
  for (int64_t i = 1; i <= 2000 && st == CONV_OK; i++) {
    char text[64];
    snprintf(text, sizeof text, "engine=%lld knobs=3", (long long)i);
    conv_trial t = make_trial(i, text, CONV_OK, 0.25 + 0.001 * (double)i, 1e-7);
    st = conv_cache_add_trial(cache, &k, &t, &err);
  }
  conv_trial best = make_trial(1, "engine=1 knobs=3", CONV_OK, 0.251, 1e-7);
  if (st == CONV_OK) st = conv_cache_set_winner(cache, &k, best.algorithm_id, &best.config, &err);
  conv_cache_close(cache);
  CHECK_MSG(st == CONV_OK, "%s", err.message);
  return TEST_PASS;
}

/* A report that cannot be written whole (the file size limit) leaves the
 * user's file at -o as it was, and no staging folder; written whole, it
 * replaces that file, whose permissions it keeps. */
static int test_output_failed_write(void) {
  isolate_default_cache();
  char dir[1024], db[1100], page[1100], text[1 << 12];
  CHECK(own_dir(dir, sizeof dir, "out-failed"));
  snprintf(db, sizeof db, "%s/cache.db", dir);
  snprintf(page, sizeof page, "%s/report.html", dir);
  int rc = fill_large_cache(db);
  if (rc != TEST_PASS) return rc;
  CHECK(write_file(page, PRECIOUS) && chmod(page, 0640) == 0);
  /* 256 blocks (128 KiB or 256 KiB, as the shell counts them): room for
   * SQLite's 32 KiB -shm, not for the page; SIGXFSZ ignored, so that the
   * write fails with EFBIG rather than killing the tool. */
  const char *args[] = {"-c", "trap '' XFSZ; ulimit -f 256 && exec \"$0\" \"$@\"", cli_path(),
                        "report", "--cache", db, "-o", page, NULL};
  cli_result r;
  CHECK(args[2] != NULL && run_program("/bin/sh", args, -1, &r));
  CHECK_MSG(r.exit_status == 1 && contains(r.err.data, "cannot write") &&
                count_lines(r.err.data) == 1,
            "exit %lld\n%s", (long long)r.exit_status, r.err.data);
  cli_result_free(&r);
  CHECK(read_text(page, text, sizeof text) && strcmp(text, PRECIOUS) == 0);
  CHECK(!staging_left(dir));

  RUN_EXPECT(r, 0, "report", "--cache", db, "-o", page);
  cli_result_free(&r);
  struct stat st;
  CHECK(stat(page, &st) == 0 && (st.st_mode & 0777) == 0640 && st.st_size > 256 * 1024);
  CHECK(!read_text(page, text, sizeof text) && strncmp(text, "<!DOCTYPE html>", 15) == 0);
  CHECK(!staging_left(dir));
  remove_dir(dir);
  return TEST_PASS;
}

/* merge and export into a new file: the file appears whole or not at all
 * (a bad second input used to leave the first one's tunings there); into
 * an existing cache: merged in place, a bad input changing nothing. */
static int test_output_whole_or_nothing(void) {
  isolate_default_cache();
  char dir[1024], db[1100], bad[1100], out[1100], exported[1100], key[CONV_PROBLEM_KEY_MAX];
  CHECK(own_dir(dir, sizeof dir, "out-whole"));
  snprintf(db, sizeof db, "%s/cache.db", dir);
  snprintf(bad, sizeof bad, "%s/bad.db", dir);
  snprintf(out, sizeof out, "%s/merged.db", dir);
  snprintf(exported, sizeof exported, "%s/exported.db", dir);
  int rc = fill_cache(db, key, sizeof key);
  if (rc != TEST_PASS) return rc;
  CHECK(write_file(bad, "not a database, let alone a convtune cache\n"));
  cli_result r;
  RUN_EXPECT(r, 4, "merge", db, bad, "-o", out);
  CHECK_MSG(contains(r.err.data, bad) && r.out.len == 0, "%s%s", r.out.data, r.err.data);
  cli_result_free(&r);
  CHECK(!file_exists(out) && !staging_left(dir));

  RUN_EXPECT(r, 0, "merge", db, "-o", out);
  CHECK_MSG(contains(r.out.data, "2 tunings added"), "%s", r.out.data);
  cli_result_free(&r);
  RUN_EXPECT(r, 4, "merge", bad, "-o", out);
  cli_result_free(&r);
  RUN_EXPECT(r, 0, "merge", db, "-o", out);
  CHECK_MSG(contains(r.out.data, "0 tunings added") && contains(r.out.data, "2 kept"), "%s",
            r.out.data);
  cli_result_free(&r);
  RUN_EXPECT(r, 0, "list", "--cache", out);
  CHECK(contains(r.out.data, DEVICE_A) && contains(r.out.data, DEVICE_B));
  cli_result_free(&r);

  RUN_EXPECT(r, 0, "export", "--cache", db, "-o", exported, "--device", DEVICE_B);
  CHECK_MSG(contains(r.out.data, "1 tuning added"), "%s", r.out.data);
  cli_result_free(&r);
  RUN_EXPECT(r, 0, "list", "--cache", exported);
  CHECK(!contains(r.out.data, DEVICE_A) && contains(r.out.data, DEVICE_B));
  cli_result_free(&r);
  CHECK(!staging_left(dir));
  remove_dir(dir);
  return TEST_PASS;
}

static const test_case tests[] = {
    {"tune_arguments", test_tune_arguments},
    {"list_pending", test_list_pending},
    {"list_stale", test_list_stale},
    {"no_gpu_tune_pending", test_no_gpu_tune_pending},
    {"verify_arguments", test_verify_arguments},
    {"verify_bad_caches", test_verify_bad_caches},
    {"output_kinds_refused", test_output_kinds_refused},
    {"output_same_file", test_output_same_file},
    {"output_failed_write", test_output_failed_write},
    {"output_whole_or_nothing", test_output_whole_or_nothing},
};

TEST_MAIN(tests)
