/*
 * test_cli_share.c -- `convtune merge`, `import` and `export` with input
 * they must refuse (CPU only): a bad cache among several copies nothing,
 * a device that names nothing writes nothing, a partial fingerprint
 * names its one GPU or is refused listing them, a destination that may
 * not be written is said to be so, and export --winners-only makes a
 * small cache that lists and looks up as the full one.  The library's side of each is in
 * test_cache_merge.c; caches are written through the cache API under
 * made-up device keys (cli_fixture.c).
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sqlite3.h>

#include "cache/cache.h"
#include "convtune.h"
#include "test.h"
#include "tests/cli_fixture.h"
#include "tests/cli_run.h"

static bool exists(const char *path) {
  struct stat st;
  return lstat(path, &st) == 0;
}

/* A cache as fill_cache makes it, with one trial's config corrupt. */
static int bad_cache(const char *path) {
  char key[CONV_PROBLEM_KEY_MAX];
  CHECK(fill_cache(path, key, sizeof key) == TEST_PASS);
  sqlite3 *db = NULL;
  CHECK(sqlite3_open(path, &db) == SQLITE_OK);
  int rc = sqlite3_exec(db, "UPDATE trials SET config = 'garbage' WHERE id = (SELECT max(id)"
                            " FROM trials WHERE winner = 0)",
                        NULL, NULL, NULL);
  sqlite3_close(db);
  CHECK(rc == SQLITE_OK);
  return TEST_PASS;
}

/* import GOOD BAD and merge GOOD BAD -o OUT: exit 4 naming the bad
 * cache, and nothing of GOOD copied (the destination not even made). */
static int test_bad_source_copies_nothing(void) {
  char good[1024], bad[1024], into[1024], out[1024], key[CONV_PROBLEM_KEY_MAX];
  tmp_path(good, sizeof good, "share-good.db");
  tmp_path(bad, sizeof bad, "share-bad.db");
  tmp_path(into, sizeof into, "share-into.db");
  tmp_path(out, sizeof out, "share-out.db");
  remove_cache_files(into);
  remove_cache_files(out);
  CHECK(fill_cache(good, key, sizeof key) == TEST_PASS);
  CHECK(bad_cache(bad) == TEST_PASS);
  cli_result r;
  RUN_EXPECT(r, 4, "import", good, bad, "--cache", into);
  CHECK_MSG(contains(r.err.data, bad) && contains(r.err.data, "nothing was copied"), "%s",
            r.err.data);
  CHECK_MSG(!exists(into), "%s was made", into);
  cli_result_free(&r);
  RUN_EXPECT(r, 4, "merge", good, bad, "-o", out);
  CHECK_MSG(contains(r.err.data, "corrupt config"), "%s", r.err.data);
  CHECK_MSG(!exists(out), "%s was made", out);
  cli_result_free(&r);
  remove_cache_files(good);
  remove_cache_files(bad);
  return TEST_PASS;
}

/* export --device naming no GPU of the cache: a usage error that names
 * it, and no file. */
static int test_export_unknown_device(void) {
  char db[1024], out[1024], key[CONV_PROBLEM_KEY_MAX];
  tmp_path(db, sizeof db, "share-db.db");
  tmp_path(out, sizeof out, "share-export.db");
  remove_cache_files(out);
  CHECK(fill_cache(db, key, sizeof key) == TEST_PASS);
  cli_result r;
  RUN_EXPECT(r, 2, "export", "-o", out, "--device", "No Such GPU|sm00", "--cache", db);
  CHECK_MSG(contains(r.err.data, "No Such GPU|sm00"), "%s", r.err.data);
  CHECK_MSG(!exists(out), "%s was made", out);
  cli_result_free(&r);
  RUN_EXPECT(r, 0, "export", "-o", out, "--device", DEVICE_A, "--cache", db);
  cli_result_free(&r);
  remove_cache_files(db);
  remove_cache_files(out);
  return TEST_PASS;
}

/* export --device with the start of a fingerprint: the one GPU it names
 * (said on stderr), only its tunings copied; one that names both GPUs of
 * the cache, or none, is a usage error listing them, and no file. */
static int test_export_partial_device(void) {
  char db[1024], out[1024], key[CONV_PROBLEM_KEY_MAX];
  tmp_path(db, sizeof db, "share-partial.db");
  tmp_path(out, sizeof out, "share-partial-out.db");
  remove_cache_files(out);
  CHECK(fill_cache(db, key, sizeof key) == TEST_PASS);
  cli_result r;
  RUN_EXPECT(r, 2, "export", "-o", out, "--device", "Test GPU", "--cache", db);
  CHECK_MSG(contains(r.err.data, "names 2 GPUs") && contains(r.err.data, DEVICE_A) &&
                contains(r.err.data, DEVICE_B) && contains(r.err.data, "nothing was written"),
            "%s", r.err.data);
  CHECK_MSG(!exists(out), "%s was made", out);
  cli_result_free(&r);
  RUN_EXPECT(r, 2, "export", "-o", out, "--device", "NVIDIA H100", "--cache", db);
  CHECK_MSG(contains(r.err.data, "names no GPU") && contains(r.err.data, DEVICE_A), "%s",
            r.err.data);
  CHECK_MSG(!exists(out), "%s was made", out);
  cli_result_free(&r);

  RUN_EXPECT(r, 0, "export", "-o", out, "--device", "Test GPU B", "--cache", db);
  CHECK_MSG(contains(r.err.data, DEVICE_B) && contains(r.out.data, "1 tuning added"), "%s%s",
            r.out.data, r.err.data);
  cli_result_free(&r);
  RUN_EXPECT(r, 0, "list", "--cache", out);
  CHECK_MSG(contains(r.out.data, DEVICE_B) && !contains(r.out.data, DEVICE_A), "%s", r.out.data);
  cli_result_free(&r);
  remove_cache_files(db);
  remove_cache_files(out);
  return TEST_PASS;
}

static long long file_size(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 ? (long long)st.st_size : -1;
}

/* export --winners-only: each tuning's winner and cuDNN's heuristic pick
 * only, in a file several times smaller than the full export's, which
 * `list --json` prints exactly as the full one (same winners, times,
 * devices, versions, times of tuning) and whose `show` holds the two
 * rows. */
static int test_export_winners_only(void) {
  enum { KEYS = 12, TRIALS = 60 };
  char db[1024], full[1024], compact[1024];
  tmp_path(db, sizeof db, "share-wide.db");
  tmp_path(full, sizeof full, "share-full.db");
  tmp_path(compact, sizeof compact, "share-compact.db");
  remove_cache_files(full);
  remove_cache_files(compact);
  CHECK(fill_deep_cache(db, KEYS, TRIALS) == TEST_PASS);
  cli_result r;
  RUN_EXPECT(r, 0, "export", "-o", full, "--cache", db);
  cli_result_free(&r);
  RUN_EXPECT(r, 0, "export", "--winners-only", "-o", compact, "--cache", db);
  CHECK_MSG(contains(r.out.data, "12 tunings added"), "%s", r.out.data);
  cli_result_free(&r);
  const long long full_size = file_size(full), compact_size = file_size(compact);
  printf("export of %d tunings of %d trials: %lld bytes, --winners-only %lld bytes\n", KEYS,
         TRIALS, full_size, compact_size);
  CHECK_MSG(compact_size > 0 && compact_size * 4 < full_size, "%lld against %lld bytes",
            compact_size, full_size);

  cli_result a, b;
  RUN_EXPECT(a, 0, "list", "--json", "--cache", full);
  RUN_EXPECT(b, 0, "list", "--json", "--cache", compact);
  CHECK_MSG(count_lines(a.out.data) == KEYS + 2 && strcmp(a.out.data, b.out.data) == 0,
            "full:\n%s\ncompact:\n%s", a.out.data, b.out.data);
  cli_result_free(&a);
  cli_result_free(&b);
  RUN_EXPECT(r, 0, "show", "--json", "n=2 c=8 h=12 w=12 k=16 r=3 s=3 pad=1", "--cache", compact);
  CHECK_MSG(count_lines(r.out.data) == 2 + 2 && contains(r.out.data, "\"engine=0 knobs=3 split=0\"") &&
                contains(r.out.data, "\"engine=3 knobs=3 split=3\""),
            "%s", r.out.data);
  cli_result_free(&r);
  /* Importing the compact file into a full one keeps the full tunings:
   * their winners are as fast. */
  RUN_EXPECT(r, 0, "import", compact, "--cache", full);
  CHECK_MSG(contains(r.out.data, "0 tunings added, 0 replaced by faster ones, 12 kept"), "%s",
            r.out.data);
  cli_result_free(&r);
  remove_cache_files(db);
  remove_cache_files(full);
  remove_cache_files(compact);
  return TEST_PASS;
}

/* import into a cache this user may not write (root runs the tool as
 * `nobody`, whom the file's mode stops): it says so, not "not a convtune
 * cache?", and the file stays as it was. */
static int test_read_only_destination(void) {
  const char *cli = cli_path();
  CHECK(cli != NULL);
  char good[1024], into[1024], key[CONV_PROBLEM_KEY_MAX];
  tmp_path(good, sizeof good, "share-ro-good.db");
  tmp_path(into, sizeof into, "share-ro-into.db");
  CHECK(fill_cache(good, key, sizeof key) == TEST_PASS);
  /* An empty cache: the import must write. */
  char other[CONV_PROBLEM_KEY_MAX];
  conv_cache *cache = NULL;
  CHECK(open_fixture_cache(into, other, sizeof other, &cache) == TEST_PASS);
  conv_cache_close(cache);
  CHECK(chmod(good, 0644) == 0 && chmod(into, 0444) == 0);
  const char *const args[] = {"import", good, "--cache", into, NULL};
  cli_result r;
  CHECK(run_program(cli, args, geteuid() == 0 ? 65534 : -1, &r));
  chmod(into, 0644);
  CHECK_MSG(r.exit_status == 4 && contains(r.err.data, "cannot be written") &&
                !contains(r.err.data, "not a convtune cache"),
            "exit %lld: %s", (long long)r.exit_status, r.err.data);
  cli_result_free(&r);
  remove_cache_files(good);
  remove_cache_files(into);
  return TEST_PASS;
}

static const test_case tests[] = {
    {"bad_source_copies_nothing", test_bad_source_copies_nothing},
    {"export_unknown_device", test_export_unknown_device},
    {"export_partial_device", test_export_partial_device},
    {"export_winners_only", test_export_winners_only},
    {"read_only_destination", test_read_only_destination},
};

TEST_MAIN(tests)
