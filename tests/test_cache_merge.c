/*
 * test_cache_merge.c -- conv_cache_merge and conv_cache_merge_sources
 * against hostile and careless input (CPU only): rows that must not erase
 * or replace a tuning, all or nothing per call, the same file by another
 * name, a destination that may not be written, a device that names
 * nothing, several sources at once, one key on thousands of devices,
 * merges killed with SIGKILL and eight importers at once.  Fixtures in
 * cache_fixtures.c.
 */
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <sqlite3.h>
#include <uv.h>

#include "tests/cache_fixtures.h"

/* ---------------------------------------------------------------- helpers */

/* Every tuning of the cache at path in one line: key, rows, winners,
 * winner's time, and with `ids` the rows' ids and the pending rows, so
 * that equal digests mean nothing was written.  "missing" for no file. */
static char *digest(const char *path, bool ids) {
  size_t size = 1 << 20;
  char *out = malloc(size);
  if (out == NULL) return NULL;
  if (!file_exists(path)) {
    snprintf(out, size, "missing");
    return out;
  }
  char sql[1024];
  snprintf(sql, sizeof sql,
           "SELECT coalesce((SELECT group_concat(x, ';') FROM (SELECT problem || '|' || device ||"
           " '|' || versions || '|' || count(*) || '|' || sum(winner <> 0) || '|' ||"
           " coalesce(max(CASE WHEN winner <> 0 THEN time_ms END), '-') || '|' || %s AS x"
           " FROM trials GROUP BY problem, device, versions ORDER BY 1)), '') || '#' ||"
           " coalesce((SELECT group_concat(problem || device || versions || reason) FROM"
           " (SELECT * FROM pending ORDER BY 1, 2, 3)), '')",
           ids ? "group_concat(id)" : "''");
  sql_text(path, sql, out, size);
  return out;
}

/* out = "BASE.SUFFIX", a path beside base, with any cache there removed. */
static void beside(char *out, size_t size, const char *base, const char *suffix) {
  snprintf(out, size, "%s.%s", base, suffix);
  remove_db(out);
}

static bool same_text(const char *a, const char *b) {
  return a != NULL && b != NULL && strcmp(a, b) == 0;
}

/* Merges from into into, expecting `want`; on failure the message must
 * hold `says` and `into` must be as it was. */
static int expect_merge(const char *from, const char *into, const char *device, conv_status want,
                        const char *says) {
  char *before = digest(into, true);
  char message[1024] = "";
  size_t added = 0, replaced = 0, kept = 0;
  conv_status got =
      conv_cache_merge(from, into, device, &added, &replaced, &kept, message, sizeof message);
  char *after = digest(into, true);
  bool unchanged = same_text(before, after);
  free(before);
  free(after);
  CHECK_MSG(got == want, "%s (expected %s): %s; %zu added, %zu replaced, %zu kept",
            conv_status_string(got), conv_status_string(want), message, added, replaced, kept);
  if (want != CONV_OK) {
    CHECK_MSG(strstr(message, says) != NULL, "message: %s", message);
    CHECK_MSG(unchanged, "%s changed by a refused merge", into);
  }
  return TEST_PASS;
}

/* ---------------------------------------------------------------- hostile rows */

/* A key text with a NUL byte (or not text at all) in a faster source
 * tuning: refused, and the destination's tuning of the real key stays. */
static int hostile_key_text_in(const char *src, const char *dst) {
  static const char *const changes[] = {
      "UPDATE trials SET problem = problem || char(0) || 'junk'",
      "UPDATE trials SET device = device || char(0) || 'junk'",
      "UPDATE trials SET versions = versions || char(0) || 'junk'",
      "UPDATE trials SET device = CAST(device AS BLOB)",
  };
  static const char *const says[] = {"NUL", "NUL", "NUL", "not text"};
  for (size_t i = 0; i < sizeof changes / sizeof changes[0]; i++) {
    remove_db(src);
    remove_db(dst);
    CHECK(write_tuning(dst, &KEY, 0, 10, 6) == TEST_PASS);  /* 1.20 ms */
    CHECK(write_tuning(src, &KEY, 10, 4, 11) == TEST_PASS); /* 1.03 ms */
    CHECK(sql_exec(src, changes[i]) == SQLITE_OK);
    CHECK_MSG(expect_merge(src, dst, NULL, CONV_CACHE_ERROR, says[i]) == TEST_PASS, "%s",
              changes[i]);
    CHECK(expect_tuning(dst, &KEY, 0, 10, 6, NULL) == TEST_PASS);
  }
  return TEST_PASS;
}

/* A winner that failed, was not validated or not timed: the source is
 * refused, so it neither replaces a valid tuning nor is added. */
static int invalid_winner_refused_in(const char *src, const char *dst) {
  char failed[256];
  snprintf(failed, sizeof failed,
           "UPDATE trials SET status = %d, status_name = 'UNSUPPORTED', time_ms = 0.0"
           " WHERE winner <> 0",
           (int)CONV_UNSUPPORTED);
  const char *const changes[] = {
      failed,
      "UPDATE trials SET time_ms = 0.0 WHERE winner <> 0",
      "UPDATE trials SET time_ms = -1.0 WHERE winner <> 0",
      "UPDATE trials SET time_ms = NULL WHERE winner <> 0",
      "UPDATE trials SET rel_error = NULL WHERE winner <> 0",
  };
  for (size_t i = 0; i < sizeof changes / sizeof changes[0]; i++) {
    for (int dst_has_it = 1; dst_has_it >= 0; dst_has_it--) {
      remove_db(src);
      remove_db(dst);
      if (dst_has_it) CHECK(write_tuning(dst, &KEY, 0, 10, 6) == TEST_PASS);
      CHECK(write_tuning(src, &KEY, 10, 4, 11) == TEST_PASS);
      CHECK(sql_exec(src, changes[i]) == SQLITE_OK);
      CHECK_MSG(expect_merge(src, dst, NULL, CONV_CACHE_ERROR, "winner") == TEST_PASS,
                "%s, destination %s", changes[i], dst_has_it ? "tuned" : "missing");
      if (dst_has_it) CHECK(expect_tuning(dst, &KEY, 0, 10, 6, NULL) == TEST_PASS);
    }
  }
  return TEST_PASS;
}

/* "The faster winner stays" compares valid winners only: an invalid
 * winner in the destination is replaced by a valid one, however slow. */
static int invalid_winner_replaced_in(const char *src, const char *dst) {
  char failed[256];
  snprintf(failed, sizeof failed,
           "UPDATE trials SET status = %d, time_ms = 0.0 WHERE winner <> 0",
           (int)CONV_UNSUPPORTED);
  CHECK(write_tuning(dst, &KEY, 0, 10, 6) == TEST_PASS);
  CHECK(sql_exec(dst, failed) == SQLITE_OK);
  CHECK(write_tuning(src, &KEY, 40, 5, 42) == TEST_PASS); /* 1.39 ms */
  CHECK(expect_merged(src, dst, NULL, 0, 1, 0) == TEST_PASS);
  CHECK(expect_tuning(dst, &KEY, 40, 5, 42, NULL) == TEST_PASS);
  return TEST_PASS;
}

/* Two winners of one tuning are refused, not copied (another tuning
 * after it in the file, as the scan goes, changes nothing). */
static int duplicate_winners_in(const char *src, const char *dst) {
  const conv_cache_key key4 = {PROBLEM2, DEVICE, VERSIONS};
  CHECK(write_tuning(src, &KEY, 10, 4, 11) == TEST_PASS);
  CHECK(write_tuning(src, &key4, 50, 3, 51) == TEST_PASS);
  CHECK(sql_exec(src, "UPDATE trials SET winner = 1 WHERE id = (SELECT min(id) FROM trials"
                      " WHERE winner = 0 AND status = 0 AND problem = '" PROBLEM "')") ==
        SQLITE_OK);
  CHECK(expect_merge(src, dst, NULL, CONV_CACHE_ERROR, "2 winners") == TEST_PASS);
  CHECK(!file_exists(dst));
  return TEST_PASS;
}

/* ---------------------------------------------------------------- all or nothing */

/* A corrupt trial in the second of three tunings: nothing is written (the
 * destination not even made), with one source or several. */
static int all_or_nothing_in(const char *src, const char *dst) {
  const conv_cache_key key2 = {PROBLEM2, DEVICE2, VERSIONS};
  const conv_cache_key key4 = {PROBLEM2, DEVICE, VERSIONS};
  /* Copied in this order: by problem, then device (A100 before H100). */
  CHECK(write_tuning(src, &KEY, 0, 10, 6) == TEST_PASS);
  CHECK(write_tuning(src, &key2, 20, 3, 21) == TEST_PASS);
  CHECK(write_tuning(src, &key4, 50, 3, 51) == TEST_PASS);
  CHECK(sql_exec(src, "UPDATE trials SET config = 'garbage' WHERE id = (SELECT min(id) FROM"
                      " trials WHERE device = '" DEVICE2 "' AND winner = 0)") == SQLITE_OK);
  CHECK(expect_merge(src, dst, NULL, CONV_CACHE_ERROR, "corrupt config") == TEST_PASS);
  CHECK(!file_exists(dst));
  /* Into a cache with tunings of its own: it is left as it was. */
  CHECK(write_tuning(dst, &key4, 60, 2, 61) == TEST_PASS);
  CHECK(expect_merge(src, dst, NULL, CONV_CACHE_ERROR, "corrupt config") == TEST_PASS);

  /* Several sources: a good one, then the bad one: nothing of either. */
  char good[1100];
  beside(good, sizeof good, src, "good");
  CHECK(write_tuning(good, &KEY, 10, 4, 11) == TEST_PASS);
  char *before = digest(dst, true);
  const char *const both[] = {good, src};
  char message[512];
  conv_status st = conv_cache_merge_sources(both, 2, dst, NULL, NULL, NULL, NULL, message,
                                            sizeof message);
  char *after = digest(dst, true);
  bool unchanged = same_text(before, after);
  free(before);
  free(after);
  remove_db(good);
  CHECK_MSG(st == CONV_CACHE_ERROR && strstr(message, src) != NULL, "%s: %s",
            conv_status_string(st), message);
  CHECK_MSG(unchanged, "%s changed by a refused merge", dst);
  return TEST_PASS;
}

/* ---------------------------------------------------------------- arguments */

/* The destination under another name (a hard or symbolic link) is the
 * file merged into: refused, the file as it was. */
static int same_file_by_inode_in(const char *src, const char *dst) {
  char hard[1100], soft[1100];
  beside(hard, sizeof hard, dst, "hard");
  beside(soft, sizeof soft, dst, "soft");
  CHECK(write_tuning(dst, &KEY, 0, 10, 6) == TEST_PASS);
  CHECK(link(dst, hard) == 0 && symlink(dst, soft) == 0);
  int rc = expect_merge(hard, dst, NULL, CONV_INVALID_ARGUMENT, "merged into");
  if (rc == TEST_PASS) rc = expect_merge(soft, dst, NULL, CONV_INVALID_ARGUMENT, "merged into");
  if (rc == TEST_PASS) rc = expect_merge(dst, hard, NULL, CONV_INVALID_ARGUMENT, "merged into");
  remove(hard);
  remove(soft);
  (void)src;
  return rc;
}

/* A device that names no tuning: refused, nothing made. */
static int unknown_device_in(const char *src, const char *dst) {
  CHECK(write_tuning(src, &KEY, 0, 10, 6) == TEST_PASS);
  CHECK(expect_merge(src, dst, "NO SUCH GPU|sm00", CONV_INVALID_ARGUMENT, "NO SUCH GPU") ==
        TEST_PASS);
  CHECK(!file_exists(dst));
  CHECK(expect_merge(src, dst, DEVICE, CONV_OK, "") == TEST_PASS);
  CHECK(expect_tuning(dst, &KEY, 0, 10, 6, NULL) == TEST_PASS);
  return TEST_PASS;
}

/* Several sources in one call: each one's counts, the fastest winner of
 * a key whichever source holds it; bad arguments refused. */
static int merge_sources_in(const char *src, const char *dst) {
  const conv_cache_key key2 = {PROBLEM2, DEVICE2, VERSIONS};
  char b[1100], c[1100];
  beside(b, sizeof b, src, "b");
  beside(c, sizeof c, src, "c");
  /* Winner times: 6 1.20 ms, 11 1.03 ms, 42 1.39 ms. */
  CHECK(write_tuning(src, &KEY, 0, 10, 6) == TEST_PASS);
  CHECK(write_tuning(b, &KEY, 10, 4, 11) == TEST_PASS);
  CHECK(write_tuning(b, &key2, 20, 3, 21) == TEST_PASS);
  CHECK(write_tuning(c, &KEY, 40, 5, 42) == TEST_PASS);
  const char *const sources[] = {src, b, c};
  size_t added[3] = {9, 9, 9}, replaced[3] = {9, 9, 9}, kept[3] = {9, 9, 9};
  char message[512];
  conv_status st = conv_cache_merge_sources(sources, 3, dst, NULL, added, replaced, kept, message,
                                            sizeof message);
  int rc = TEST_PASS;
  if (st != CONV_OK || added[0] != 1 || replaced[0] != 0 || kept[0] != 0 || added[1] != 1 ||
      replaced[1] != 1 || kept[1] != 0 || added[2] != 0 || replaced[2] != 0 || kept[2] != 1) {
    fprintf(stderr, "%s: %s; added %zu %zu %zu, replaced %zu %zu %zu, kept %zu %zu %zu\n",
            conv_status_string(st), message, added[0], added[1], added[2], replaced[0],
            replaced[1], replaced[2], kept[0], kept[1], kept[2]);
    rc = TEST_FAIL;
  }
  if (rc == TEST_PASS) rc = expect_tuning(dst, &KEY, 10, 4, 11, NULL);
  if (rc == TEST_PASS) rc = expect_tuning(dst, &key2, 20, 3, 21, NULL);
  remove_db(b);
  remove_db(c);
  CHECK(rc == TEST_PASS);
  const char *const with_null[] = {src, NULL};
  CHECK_STATUS(CONV_INVALID_ARGUMENT,
               conv_cache_merge_sources(with_null, 2, dst, NULL, NULL, NULL, NULL, NULL, 0));
  CHECK_STATUS(CONV_INVALID_ARGUMENT,
               conv_cache_merge_sources(sources, 0, dst, NULL, NULL, NULL, NULL, message,
                                        sizeof message));
  CHECK(message[0] != '\0');
  return TEST_PASS;
}

/* ---------------------------------------------------------------- a destination not writable */

/* fork(): the child (as `nobody` when this process is root, whom a file
 * mode does not stop) merges from into into and sends back the status and
 * message. */
static conv_status merge_as_other_user(const char *from, const char *into, char *message,
                                       size_t size) {
  int fds[2];
  snprintf(message, size, "(no answer from the child)");
  if (pipe(fds) != 0) return CONV_INTERNAL;
  pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    if (geteuid() == 0 && (setgid(65534) != 0 || setuid(65534) != 0)) _exit(3);
    char text[1024];
    conv_status st = conv_cache_merge(from, into, NULL, NULL, NULL, NULL, text, sizeof text);
    int status = (int)st;
    ssize_t wrote = write(fds[1], &status, sizeof status);
    wrote += write(fds[1], text, strlen(text) + 1);
    _exit(wrote > 0 ? 0 : 4);
  }
  close(fds[1]);
  int status = -1;
  conv_status st = CONV_INTERNAL;
  if (pid > 0 && read(fds[0], &status, sizeof status) == (ssize_t)sizeof status) {
    st = (conv_status)status;
    ssize_t got = read(fds[0], message, size - 1);
    message[got > 0 ? got : 0] = '\0';
  }
  close(fds[0]);
  if (pid > 0) waitpid(pid, NULL, 0);
  return st;
}

/* A read-only destination file, or one in a read-only directory: said so
 * (not "not a convtune cache?"), nothing written or made beside it. */
static int read_only_destination_in(const char *src, const char *dir) {
  char dst[1100], wal[1110], shm[1110];
  snprintf(dst, sizeof dst, "%s/cache.db", dir);
  snprintf(wal, sizeof wal, "%s-wal", dst);
  snprintf(shm, sizeof shm, "%s-shm", dst);
  CHECK(write_tuning(src, &KEY, 10, 4, 11) == TEST_PASS);
  CHECK(chmod(src, 0644) == 0);
  CHECK(mkdir(dir, 0777) == 0 && chmod(dir, 0777) == 0);
  CHECK(write_tuning(dst, &KEY, 0, 10, 6) == TEST_PASS);
  static const struct {
    const char *what;
    mode_t dir_mode, file_mode;
    const char *says;
  } cases[] = {
      {"read-only file", 0777, 0444, "cannot be written"},
      {"read-only directory", 0555, 0666, "its directory"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char *before = digest(dst, true), message[1024];
    /* The digest's reader may leave SQLite's side files (root writes). */
    remove(wal);
    remove(shm);
    CHECK(chmod(dst, cases[i].file_mode) == 0 && chmod(dir, cases[i].dir_mode) == 0);
    conv_status st = merge_as_other_user(src, dst, message, sizeof message);
    chmod(dir, 0777);
    bool side_files = file_exists(wal) || file_exists(shm);
    char *after = digest(dst, true);
    bool unchanged = same_text(before, after);
    free(before);
    free(after);
    CHECK_MSG(st == CONV_CACHE_ERROR && strstr(message, cases[i].says) != NULL &&
                  strstr(message, "not a convtune cache") == NULL,
              "%s: %s: %s", cases[i].what, conv_status_string(st), message);
    CHECK_MSG(unchanged && !side_files, "%s: written to", cases[i].what);
  }
  return TEST_PASS;
}

/* ---------------------------------------------------------------- many tunings */

/* Copies the tuning of KEY in the cache at path to `count` devices
 * "DEVICE #i" (i from 0), every winner's time set by `winner_ms`, an SQL
 * expression of i; the config text `label` says where a row came from.
 * The tuning of DEVICE itself goes. */
static int spread_tuning(const char *path, int count, const char *winner_ms, const char *label) {
  char sql[2048];
  snprintf(sql, sizeof sql,
           "BEGIN; WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < %d)"
           " INSERT INTO trials (problem, device, versions, algorithm_id, algorithm, config,"
           " config_text, status, status_name, reason, time_ms, rel_error, workspace_bytes,"
           " heuristic_pick, winner, tuned_at, deterministic)"
           " SELECT problem, device || ' #' || i, versions, algorithm_id, algorithm, config,"
           " '%s', status, status_name, reason, CASE WHEN winner <> 0 THEN %s ELSE time_ms END,"
           " rel_error, workspace_bytes, heuristic_pick, winner, tuned_at, deterministic"
           " FROM trials, n WHERE device = '%s';"
           " DELETE FROM trials WHERE device = '%s'; COMMIT",
           count - 1, label, winner_ms, DEVICE, DEVICE);
  CHECK(sql_exec(path, sql) == SQLITE_OK);
  return TEST_PASS;
}

static double seconds_since(uint64_t start_ns) { return (double)(uv_hrtime() - start_ns) * 1e-9; }

/* CPU time this process has used (user and system), in seconds: what a
 * step costs on a machine that others load too. */
static double cpu_seconds(void) {
  uv_rusage_t use;
  if (uv_getrusage(&use) != 0) return 0;
  return (double)use.ru_utime.tv_sec + (double)use.ru_utime.tv_usec * 1e-6 +
         (double)use.ru_stime.tv_sec + (double)use.ru_stime.tv_usec * 1e-6;
}

/* 8,000 winners of one problem key on 8,000 devices: merging them into a
 * new cache, again into that one (every winner compared) and one device's
 * export each take about as long as the rows (the bound here is a loose
 * guard against the old quadratic work, 52-58 s; not a benchmark). */
static int one_key_many_devices_in(const char *src, const char *dst) {
  enum { DEVICES = 8000 };
  const double bound_s = 10.0;
  CHECK(write_tuning(src, &KEY, 0, 3, 1) == TEST_PASS);
  CHECK(spread_tuning(src, DEVICES, "time_ms", "spread") == TEST_PASS);
  char one[1100], device[300];
  beside(one, sizeof one, dst, "one");
  snprintf(device, sizeof device, "%s #%d", DEVICE, DEVICES / 2);
  size_t added = 0, replaced = 0, kept = 0;
  char message[512];
  static const char *const what[] = {"merge into a new cache", "merge again", "export one device"};
  for (int step = 0; step < 3; step++) {
    uint64_t start = uv_hrtime();
    double cpu_start = cpu_seconds();
    conv_status st = conv_cache_merge(src, step < 2 ? dst : one, step < 2 ? NULL : device, &added,
                                      &replaced, &kept, message, sizeof message);
    double took = seconds_since(start);
    fprintf(stderr, "%s: %.3f s (CPU %.3f s; %zu added, %zu replaced, %zu kept)\n", what[step],
            took, cpu_seconds() - cpu_start, added, replaced, kept);
    CHECK_MSG(st == CONV_OK, "%s", message);
    CHECK_MSG(took < bound_s, "%s took %.1f s", what[step], took);
    size_t want_added = step == 0 ? DEVICES : step == 1 ? 0 : 1;
    CHECK(added == want_added && replaced == 0 && kept == (step == 1 ? (size_t)DEVICES : 0));
  }
  CHECK(sql_int(dst, "SELECT count(*) FROM trials") == 3 * DEVICES);
  CHECK(sql_int(one, "SELECT count(*) FROM trials") == 3);
  remove_db(one);
  /* The report read the problem's trials once a group: 8,000 listings of
   * 24,000 rows took 560 s. */
  const char *cli = getenv("CONVTUNE_CLI");
  CHECK_MSG(cli != NULL, "CONVTUNE_CLI is not set (ctest sets it)");
  char page[1100], command[4096];
  beside(page, sizeof page, dst, "report.html");
  snprintf(command, sizeof command, "'%s' report --cache '%s' -o '%s' >/dev/null", cli, dst, page);
  const uint64_t start = uv_hrtime();
  CHECK_MSG(system(command) == 0, "%s failed", command);
  const double took = seconds_since(start);
  fprintf(stderr, "report: %.3f s\n", took);
  remove(page);
  CHECK_MSG(took < bound_s, "report took %.1f s", took);
  return TEST_PASS;
}

/* ---------------------------------------------------------------- processes at once, killed */

/* fork(): the child merges from into into and exits 0 on success (after
 * `start`, a pipe's read end, is closed by the parent, when not < 0). */
static pid_t spawn_merge(const char *from, const char *into, int start, int close_in_child) {
  pid_t pid = fork();
  if (pid != 0) return pid;
  if (close_in_child >= 0) close(close_in_child);
  char byte;
  if (start >= 0 && read(start, &byte, 1) < 0) _exit(3);
  char message[1024];
  conv_status st = conv_cache_merge(from, into, NULL, NULL, NULL, NULL, message, sizeof message);
  if (st != CONV_OK) fprintf(stderr, "merge %s into %s: %s\n", from, into, message);
  _exit(st == CONV_OK ? 0 : 1);
}

static bool integrity_ok(const char *path) {
  char check[256];
  sql_text(path, "PRAGMA integrity_check", check, sizeof check);
  if (strcmp(check, "ok") != 0) fprintf(stderr, "integrity_check of %s: %s\n", path, check);
  return strcmp(check, "ok") == 0;
}

/* Eight processes import eight caches of the same 2,000 keys into one
 * file at once (each key's fastest winner in another source): every key
 * ends with the fastest winner and that source's whole tuning, round after
 * round. */
static int concurrent_importers_in(const char *src, const char *dst) {
  enum { IMPORTERS = 8, KEYS = 2000, ROUNDS = 3 };
  char sources[IMPORTERS][1100];
  for (int k = 0; k < IMPORTERS; k++) {
    char suffix[16];
    snprintf(suffix, sizeof suffix, "%d", k);
    beside(sources[k], sizeof sources[k], src, suffix);
    /* Trials 3 (valid, the winner) and 4 (failed); key i's winner takes
     * 1 + ((i + 3k) mod 8) / 8 ms: 1 ms in exactly one source. */
    CHECK(write_tuning(sources[k], &KEY, 3, 2, 3) == TEST_PASS);
    char winner_ms[64], label[32];
    snprintf(winner_ms, sizeof winner_ms, "1.0 + ((i + %d) %% 8) * 0.125", 3 * k);
    snprintf(label, sizeof label, "source %d", k);
    CHECK(spread_tuning(sources[k], KEYS, winner_ms, label) == TEST_PASS);
  }
  int rc = TEST_PASS;
  for (int round = 0; round < ROUNDS && rc == TEST_PASS; round++) {
    remove_db(dst);
    int start[2];
    CHECK(pipe(start) == 0);
    pid_t pids[IMPORTERS];
    for (int k = 0; k < IMPORTERS; k++) pids[k] = spawn_merge(sources[k], dst, start[0], start[1]);
    close(start[0]);
    close(start[1]); /* all start now */
    for (int k = 0; k < IMPORTERS; k++) {
      int status = 0;
      if (pids[k] < 0 || waitpid(pids[k], &status, 0) != pids[k] || !WIFEXITED(status) ||
          WEXITSTATUS(status) != 0) {
        fprintf(stderr, "round %d: importer %d failed (status %d)\n", round, k, status);
        rc = TEST_FAIL;
      }
    }
    if (rc != TEST_PASS) break;
    long long winners = sql_int(dst, "SELECT count(*) FROM trials WHERE winner <> 0");
    long long slower =
        sql_int(dst, "SELECT count(*) FROM trials WHERE winner <> 0 AND time_ms <> 1.0");
    long long mixed = sql_int(dst, "SELECT count(*) FROM (SELECT device FROM trials GROUP BY device"
                                   " HAVING count(*) <> 2 OR count(DISTINCT config_text) <> 1)");
    if (winners != KEYS || slower != 0 || mixed != 0 || !integrity_ok(dst)) {
      fprintf(stderr, "round %d: %lld winners, %lld slower than the fastest, %lld keys mixed\n",
              round, winners, slower, mixed);
      rc = TEST_FAIL;
    }
  }
  for (int k = 0; k < IMPORTERS; k++) remove_db(sources[k]);
  return rc;
}

/* A merge killed with SIGKILL at random points, twenty times (each from
 * the destination's first state): it passes integrity_check and holds
 * either all it held before or all of the merge, never a part; a last
 * merge completes it. */
static int killed_merges_in(const char *src, const char *dst) {
  enum { KEYS = 2000, KILLS = 20 };
  /* The source: 5 trials a key.  The destination: every other key, faster
   * than the source's at every fourth, slower at the others; and keys of
   * its own. */
  CHECK(write_tuning(src, &KEY, 0, 5, 1) == TEST_PASS);
  CHECK(spread_tuning(src, KEYS, "1.0 + (i % 7) * 0.1", "source") == TEST_PASS);
  CHECK(write_tuning(dst, &KEY, 10, 3, 11) == TEST_PASS);
  CHECK(spread_tuning(dst, KEYS, "CASE WHEN i % 4 = 0 THEN 0.5 ELSE 2.0 END", "here") == TEST_PASS);
  CHECK(sql_exec(dst, "DELETE FROM trials WHERE CAST(substr(device, instr(device, '#') + 1) AS"
                      " INTEGER) % 2 = 1;"
                      " UPDATE trials SET problem = '" PROBLEM2 "' WHERE"
                      " CAST(substr(device, instr(device, '#') + 1) AS INTEGER) % 10 = 0") ==
        SQLITE_OK);
  char expect_path[1100];
  beside(expect_path, sizeof expect_path, dst, "expected");
  size_t size = 0;
  char *initial = read_all(dst, &size);
  CHECK(initial != NULL && write_all(expect_path, initial, size));
  uint64_t start = uv_hrtime();
  char message[512];
  CHECK_MSG(conv_cache_merge(src, expect_path, NULL, NULL, NULL, NULL, message, sizeof message) ==
                CONV_OK,
            "%s", message);
  double merge_s = seconds_since(start);
  char *before = digest(dst, false), *after = digest(expect_path, false);
  remove_db(expect_path);
  CHECK(before != NULL && after != NULL && !same_text(before, after));

  unsigned seed = (unsigned)uv_hrtime();
  fprintf(stderr, "a whole merge: %.3f s; kill points drawn with seed %u\n", merge_s, seed);
  int rc = TEST_PASS, ended_before = 0, ended_after = 0;
  for (int kill_no = 0; kill_no < KILLS && rc == TEST_PASS; kill_no++) {
    /* Each time from the start, so that most kills land in a merge. */
    remove_db(dst);
    CHECK(write_all(dst, initial, size));
    pid_t pid = spawn_merge(src, dst, -1, -1);
    CHECK(pid > 0);
    double wait_s = merge_s * 1.5 * (double)rand_r(&seed) / RAND_MAX;
    struct timespec pause = {(time_t)wait_s, (long)((wait_s - (double)(time_t)wait_s) * 1e9)};
    nanosleep(&pause, NULL);
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    char *now = digest(dst, false);
    ended_before += same_text(now, before);
    ended_after += same_text(now, after);
    if (!integrity_ok(dst) || !(same_text(now, before) || same_text(now, after))) {
      fprintf(stderr, "kill %d after %.3f s: the destination holds a part of the merge\n",
              kill_no, wait_s);
      rc = TEST_FAIL;
    }
    free(now);
  }
  fprintf(stderr, "%d kills left it as it was, %d with the whole merge\n", ended_before,
          ended_after);
  if (rc == TEST_PASS) {
    int status = 0;
    pid_t pid = spawn_merge(src, dst, -1, -1);
    char *now = NULL;
    if (pid < 0 || waitpid(pid, &status, 0) != pid || status != 0 ||
        !same_text(now = digest(dst, false), after))
      rc = TEST_FAIL;
    free(now);
  }
  free(before);
  free(after);
  free(initial);
  return rc;
}

/* ---------------------------------------------------------------- the table */

/* fn(source, destination) on two fresh temporary paths, removed after. */
static int on_two_paths(const char *name, int (*fn)(const char *src, const char *dst)) {
  char src[1024], dst[1024], dir_name[128];
  snprintf(dir_name, sizeof dir_name, "%s_src", name);
  tmp_path(src, sizeof src, dir_name);
  snprintf(dir_name, sizeof dir_name, "%s_dst", name);
  tmp_path(dst, sizeof dst, dir_name);
  int rc = fn(src, dst);
  remove_db(src);
  remove_db(dst);
  return rc;
}

/* A file the merge creates (an export to ship) is left in rollback-journal
 * mode, with no -wal or -shm, so that a read-only directory can hold it;
 * a merge into an existing cache leaves its WAL mode alone. */
static int journal_modes_in(const char *src, const char *dst) {
  const conv_cache_key key2 = {PROBLEM2, DEVICE2, VERSIONS};
  char mode[32], wal[1100], existing[1100];
  CHECK(write_tuning(src, &KEY, 0, 10, 6) == TEST_PASS);
  char message[512];
  CHECK_STATUS(CONV_OK, conv_cache_merge_winners(src, dst, NULL, NULL, NULL, NULL, message,
                                                 sizeof message));
  sql_text(dst, "PRAGMA journal_mode", mode, sizeof mode);
  CHECK_MSG(strcmp(mode, "delete") == 0, "a new cache in journal mode %s", mode);
  snprintf(wal, sizeof wal, "%s-wal", dst);
  CHECK_MSG(!file_exists(wal), "%s left beside the new cache", wal);
  beside(existing, sizeof existing, src, "existing");
  CHECK(write_tuning(existing, &key2, 20, 3, 21) == TEST_PASS);
  sql_text(existing, "PRAGMA journal_mode", mode, sizeof mode);
  CHECK_MSG(strcmp(mode, "wal") == 0, "the library made a cache in journal mode %s", mode);
  CHECK_STATUS(CONV_OK, conv_cache_merge_winners(src, existing, NULL, NULL, NULL, NULL, message,
                                                 sizeof message));
  sql_text(existing, "PRAGMA journal_mode", mode, sizeof mode);
  CHECK_MSG(strcmp(mode, "wal") == 0, "a merge into a cache switched it to %s", mode);
  remove_db(existing);
  return TEST_PASS;
}

static int test_hostile_key_text(void) { return on_two_paths("hostile_key", hostile_key_text_in); }
static int test_invalid_winner_refused(void) {
  return on_two_paths("invalid_winner", invalid_winner_refused_in);
}
static int test_invalid_winner_replaced(void) {
  return on_two_paths("invalid_there", invalid_winner_replaced_in);
}
static int test_duplicate_winners(void) { return on_two_paths("duplicates", duplicate_winners_in); }
static int test_all_or_nothing(void) { return on_two_paths("all_or_nothing", all_or_nothing_in); }
static int test_same_file_by_inode(void) {
  return on_two_paths("same_file", same_file_by_inode_in);
}
static int test_unknown_device(void) { return on_two_paths("unknown_device", unknown_device_in); }
static int test_merge_sources(void) { return on_two_paths("sources", merge_sources_in); }
static int test_one_key_many_devices(void) {
  return on_two_paths("many_devices", one_key_many_devices_in);
}
static int test_concurrent_importers(void) {
  return on_two_paths("importers", concurrent_importers_in);
}
static int test_killed_merges(void) { return on_two_paths("killed", killed_merges_in); }
static int test_journal_modes(void) { return on_two_paths("journal_modes", journal_modes_in); }

static int test_read_only_destination(void) {
  char src[1024], dir[1024], dst[1100];
  tmp_path(src, sizeof src, "read_only_src");
  tmp_path(dir, sizeof dir, "read_only_dir");
  snprintf(dst, sizeof dst, "%s/cache.db", dir);
  int rc = read_only_destination_in(src, dir);
  chmod(dir, 0777);
  remove_db(src);
  remove_db(dst);
  rmdir(dir);
  return rc;
}

static const test_case tests[] = {
    {"hostile_key_text", test_hostile_key_text},
    {"invalid_winner_refused", test_invalid_winner_refused},
    {"invalid_winner_replaced", test_invalid_winner_replaced},
    {"duplicate_winners", test_duplicate_winners},
    {"all_or_nothing", test_all_or_nothing},
    {"same_file_by_inode", test_same_file_by_inode},
    {"read_only_destination", test_read_only_destination},
    {"unknown_device", test_unknown_device},
    {"merge_sources", test_merge_sources},
    {"journal_modes", test_journal_modes},
    {"one_key_many_devices", test_one_key_many_devices},
    {"concurrent_importers", test_concurrent_importers},
    {"killed_merges", test_killed_merges},
};

TEST_MAIN(tests)
