/*
 * test_cli_system.c -- system caches through the tool, without a GPU:
 * `list --system-cache` on a file and on a directory of them, `verify
 * --dry-run` (every winner's key rebuilt, which are of this build's
 * versions, a bad key flagged), `version` listing the caches a context
 * would open by default, and every cache file shipped under caches/ in
 * the source readable by both.  Caches are written through the cache API
 * under made-up device keys (cli_fixture.c).
 */
#include <dirent.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sqlite3.h>

#include "convtune.h"
#include "test.h"
#include "tests/cli_fixture.h"
#include "tests/cli_run.h"

/* A directory of its own under the temp folder, emptied first. */
static int fresh_dir(char *dir, size_t size, const char *name) {
  tmp_path(dir, size, name);
  char command[1200];
  snprintf(command, sizeof command, "rm -rf '%s'", dir);
  CHECK(system(command) == 0);
  CHECK(mkdir(dir, 0755) == 0);
  return TEST_PASS;
}

static void remove_dir(const char *dir) {
  char command[1200];
  snprintf(command, sizeof command, "rm -rf '%s'", dir);
  if (system(command) != 0) fprintf(stderr, "could not remove %s\n", dir);
}

/* DIR/a.db as fill_cache makes it (SPEC's winners on DEVICE_A and
 * DEVICE_B), DIR/b.db with OTHER_SPEC's on DEVICE_A, and a text file that
 * is not a cache. */
static int fill_dir(const char *dir, char *a, char *b, size_t size) {
  char key[CONV_PROBLEM_KEY_MAX], other[CONV_PROBLEM_KEY_MAX], notes[1024];
  snprintf(a, size, "%s/a.db", dir);
  snprintf(b, size, "%s/b.db", dir);
  snprintf(notes, sizeof notes, "%s/notes.txt", dir);
  CHECK(fill_cache(a, key, sizeof key) == TEST_PASS);
  conv_problem p;
  CHECK_STATUS(CONV_OK, conv_problem_parse(OTHER_SPEC, &p, NULL, 0));
  CHECK_STATUS(CONV_OK, conv_problem_key(&p, other, sizeof other));
  conv_trial t = make_trial(4, "engine=4 knobs=3", CONV_OK, 0.375, 1e-7);
  CHECK(store_tuned(b, other, DEVICE_A, &t) == TEST_PASS);
  CHECK(write_file(notes, "not a cache\n"));
  return TEST_PASS;
}

/* list --system-cache: a file as --cache lists it, a directory's *.db
 * files in order (the text file left out); bad uses refused. */
static int test_list_system_cache(void) {
  isolate_default_cache();
  char dir[1024], a[1100], b[1100];
  if (fresh_dir(dir, sizeof dir, "system-list") != TEST_PASS) return TEST_FAIL;
  if (fill_dir(dir, a, b, sizeof a) != TEST_PASS) return TEST_FAIL;
  cli_result r, s;
  RUN_EXPECT(r, 0, "list", "--json", "--system-cache", a);
  RUN_EXPECT(s, 0, "list", "--json", "--cache", a);
  CHECK_MSG(strcmp(r.out.data, s.out.data) == 0, "%s\nagainst\n%s", r.out.data, s.out.data);
  cli_result_free(&r);
  cli_result_free(&s);
  RUN_EXPECT(r, 0, "list", "--system-cache", dir);
  CHECK_MSG(count_lines(r.out.data) == 2 + 3 && contains(r.out.data, "engine=12") &&
                contains(r.out.data, "engine=4") && contains(r.out.data, DEVICE_B),
            "%s", r.out.data);
  cli_result_free(&r);

  static const usage_case cases[] = {
      {{"list", "--system-cache", ""}, "--system-cache needs a path"},
      {{"list", "--pending", "--system-cache", "x.db"}, "do not go with it"},
      {{"list", "--cache", "y.db", "--system-cache", "x.db"}, "do not go with it"},
      {{"verify", "--dry-run=yes"}, "takes no value"},
  };
  if (check_usage_errors(cases, sizeof cases / sizeof cases[0]) != TEST_PASS) return TEST_FAIL;
  char missing[1100];
  snprintf(missing, sizeof missing, "%s/gone", dir);
  RUN_EXPECT(r, 4, "list", "--system-cache", missing);
  CHECK_MSG(contains(r.err.data, missing), "%s", r.err.data);
  cli_result_free(&r);
  remove_dir(dir);
  return TEST_PASS;
}

/* Replaces the problem key of DEVICE_B's rows behind the cache's back
 * with one no convtune makes (as another version's could be). */
static int foreign_key(const char *path) {
  sqlite3 *db = NULL;
  CHECK(sqlite3_open(path, &db) == SQLITE_OK);
  int rc = sqlite3_exec(db,
                        "UPDATE trials SET problem = 'fwd f64 nchw strict none n2 c8 h12 w12 k16 "
                        "r3 s3 pad1,1 str1,1 dil1,1 g1' WHERE device LIKE 'Test GPU B%'",
                        NULL, NULL, NULL);
  sqlite3_close(db);
  CHECK(rc == SQLITE_OK);
  return TEST_PASS;
}

/* verify --dry-run needs no GPU: every winner of every GPU checked, those
 * of other versions said to be so; a key that does not rebuild is
 * flagged (exit 1); a missing cache is exit 4. */
static int test_verify_dry_run(void) {
  isolate_default_cache();
  char dir[1024], a[1100], b[1100];
  if (fresh_dir(dir, sizeof dir, "system-dry") != TEST_PASS) return TEST_FAIL;
  if (fill_dir(dir, a, b, sizeof a) != TEST_PASS) return TEST_FAIL;
  cli_result r;
  RUN_EXPECT(r, 0, "verify", "--dry-run", "--system-cache", dir);
  CHECK_MSG(contains(r.out.data, a) && contains(r.out.data, b) &&
                contains(r.out.data, "ok, other versions") && !contains(r.out.data, "BAD") &&
                contains(r.err.data, "checked 3 winners in 2 cache files") &&
                contains(r.err.data, "0 unusable") && count_lines(r.err.data) == 1,
            "%s%s", r.out.data, r.err.data);
  cli_result_free(&r);
  RUN_EXPECT(r, 0, "verify", "--dry-run", "--cache", b);
  CHECK_MSG(contains(r.err.data, "checked 1 winners in 1 cache file"), "%s", r.err.data);
  cli_result_free(&r);

  if (foreign_key(a) != TEST_PASS) return TEST_FAIL;
  RUN_EXPECT(r, 1, "verify", "--dry-run", "--system-cache", a);
  CHECK_MSG(contains(r.out.data, "BAD: not a key this convtune can rebuild") &&
                contains(r.err.data, "1 unusable"),
            "%s%s", r.out.data, r.err.data);
  cli_result_free(&r);
  char missing[1100];
  snprintf(missing, sizeof missing, "%s/gone.db", dir);
  RUN_EXPECT(r, 4, "verify", "--dry-run", "--system-cache", missing);
  cli_result_free(&r);
  RUN_EXPECT(r, 4, "verify", "--dry-run", "--cache", missing);
  CHECK_MSG(contains(r.err.data, "no cache at"), "%s", r.err.data);
  cli_result_free(&r);
  remove_dir(dir);
  return TEST_PASS;
}

/* version lists the caches a context would open by default, in lookup
 * order: $CONVTUNE_SYSTEM_CACHE's, then $XDG_DATA_DIRS/convtune/caches'
 * (the package's own, under the build tree, holds none); set but empty,
 * none. */
static int test_version_lists_system_caches(void) {
  char dir[1024], xdg[1100], shipped[1100], a[1100], b[1100], key[CONV_PROBLEM_KEY_MAX];
  if (fresh_dir(dir, sizeof dir, "system-version") != TEST_PASS) return TEST_FAIL;
  snprintf(xdg, sizeof xdg, "%s/xdg", dir);
  snprintf(shipped, sizeof shipped, "%s/xdg/convtune/caches", dir);
  CHECK(mkdir(xdg, 0755) == 0);
  snprintf(a, sizeof a, "%s/xdg/convtune", dir);
  CHECK(mkdir(a, 0755) == 0 && mkdir(shipped, 0755) == 0);
  snprintf(a, sizeof a, "%s/user-set.db", dir);
  snprintf(b, sizeof b, "%s/h100.db", shipped);
  CHECK(fill_cache(a, key, sizeof key) == TEST_PASS && fill_cache(b, key, sizeof key) == TEST_PASS);
  CHECK(setenv("CONVTUNE_SYSTEM_CACHE", a, 1) == 0 && setenv("XDG_DATA_DIRS", xdg, 1) == 0);
  cli_result r;
  RUN_EXPECT(r, 0, "version");
  const char *first = strstr(r.out.data, a), *second = strstr(r.out.data, b);
  CHECK_MSG(contains(r.out.data, "system caches (read-only, in lookup order):") && first &&
                second && first < second,
            "%s", r.out.data);
  cli_result_free(&r);
  CHECK(setenv("CONVTUNE_SYSTEM_CACHE", "", 1) == 0);
  RUN_EXPECT(r, 0, "version");
  CHECK_MSG(contains(r.out.data, "system caches: none found"), "%s", r.out.data);
  cli_result_free(&r);
  CHECK(unsetenv("CONVTUNE_SYSTEM_CACHE") == 0 && unsetenv("XDG_DATA_DIRS") == 0);
  remove_dir(dir);
  return TEST_PASS;
}

/* Every cache file shipped under caches/ in the source is read by `list
 * --system-cache` and passes `verify --dry-run`, without a GPU; the
 * directory itself lists (none yet is fine: it says so). */
static int test_shipped_caches_readable(void) {
  isolate_default_cache();
  char dir[1024], readme[1100];
  snprintf(dir, sizeof dir, "%s/caches", CONVTUNE_SOURCE_DIR);
  snprintf(readme, sizeof readme, "%s/README.md", dir);
  CHECK_MSG(file_exists(readme), "%s is missing", readme);
  DIR *d = opendir(dir);
  CHECK(d != NULL);
  int checked = 0;
  for (struct dirent *e; (e = readdir(d)) != NULL;) {
    size_t len = strlen(e->d_name);
    if (len < 4 || strcmp(e->d_name + len - 3, ".db") != 0) continue;
    char path[1400];
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    cli_result r;
    RUN_EXPECT(r, 0, "list", "--system-cache", path);
    CHECK_MSG(count_lines(r.out.data) >= 3, "%s lists no winner:\n%s", path, r.out.data);
    cli_result_free(&r);
    RUN_EXPECT(r, 0, "verify", "--dry-run", "--system-cache", path);
    CHECK_MSG(contains(r.err.data, " 0 unusable"), "%s:\n%s", path, r.err.data);
    cli_result_free(&r);
    checked++;
  }
  closedir(d);
  cli_result r;
  RUN_EXPECT(r, 0, "list", "--system-cache", dir);
  cli_result_free(&r);
  printf("%d shipped cache file%s under %s checked\n", checked, checked == 1 ? "" : "s", dir);
  return TEST_PASS;
}

static const test_case tests[] = {
    {"list_system_cache", test_list_system_cache},
    {"verify_dry_run", test_verify_dry_run},
    {"version_lists_system_caches", test_version_lists_system_caches},
    {"shipped_caches_readable", test_shipped_caches_readable},
};

TEST_MAIN(tests)
