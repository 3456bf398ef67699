/*
 * test_system_caches.c -- the read-only system caches without a GPU
 * (cache/system.h, conv_system_cache_files): the search path's order
 * ($CONVTUNE_SYSTEM_CACHE, the package's directories, $XDG_DATA_DIRS),
 * what a directory holds (*.db files by name, nothing hidden), missing
 * directories skipped and missing named paths refused, a file met twice
 * passed once, and opening them: a bad file found in a directory passed
 * over with a warning while every good one stays usable, a bad named file
 * failing it all.  The files are made in a temporary tree per test.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cache/system.h"
#include "tests/cache_fixtures.h"

/* ---------------------------------------------------------------- a tree of caches */

/* root/NAME, made a directory (with its parents) when `dir`. */
static void tree_path(char *out, size_t size, const char *root, const char *name) {
  snprintf(out, size, "%s/%s", root, name);
}

static int make_dirs(const char *root, const char *name) {
  char path[1024];
  tree_path(path, sizeof path, root, name);
  for (char *p = path + strlen(root) + 1; (p = strchr(p, '/')) != NULL; p++) {
    *p = '\0';
    CHECK(mkdir(path, 0755) == 0 || errno == EEXIST);
    *p = '/';
  }
  CHECK(mkdir(path, 0755) == 0 || errno == EEXIST);
  return TEST_PASS;
}

/* A cache at root/NAME holding a tuning of PROBLEM on DEVICE whose winner
 * is trial `winner` (make_trial), so that each file can be told apart. */
static int make_cache(const char *root, const char *name, int winner) {
  char path[1024];
  tree_path(path, sizeof path, root, name);
  remove_db(path);
  return write_tuning(path, &KEY, 0, 4, winner);
}

static int make_text(const char *root, const char *name, const char *text) {
  char path[1024];
  tree_path(path, sizeof path, root, name);
  CHECK(write_all(path, text, strlen(text)));
  return TEST_PASS;
}

/* A fresh, empty root for one test. */
static void fresh_root(char *root, size_t size, const char *test) {
  tmp_path(root, size, test);
  char command[1200];
  snprintf(command, sizeof command, "rm -rf '%s'", root);
  if (system(command) != 0) fprintf(stderr, "could not clear %s\n", root);
  mkdir(root, 0755);
}

static void remove_root(const char *root) {
  char command[1200];
  snprintf(command, sizeof command, "rm -rf '%s'", root);
  if (system(command) != 0) fprintf(stderr, "could not remove %s\n", root);
}

/* ---------------------------------------------------------------- what a search passes */

typedef struct found_files {
  char paths[32][1024];
  int named[32];
  int count;
} found_files;

static int note_file(const char *path, int named, void *user) {
  found_files *f = user;
  if (f->count < 32) {
    snprintf(f->paths[f->count], sizeof f->paths[0], "%s", path);
    f->named[f->count] = named;
  }
  f->count++;
  return 0;
}

/* The search found exactly root/want[0..n), with these named flags. */
static int expect_found(const found_files *f, const char *root, const char *const *want,
                        const int *named, int n) {
  CHECK_MSG(f->count == n, "%d files found, %d expected (first: %s)", f->count, n,
            f->count ? f->paths[0] : "none");
  for (int i = 0; i < n; i++) {
    char path[1024];
    tree_path(path, sizeof path, root, want[i]);
    CHECK_MSG(strcmp(f->paths[i], path) == 0, "file %d: %s, expected %s", i, f->paths[i], path);
    CHECK_MSG(f->named[i] == named[i], "%s: named %d", path, f->named[i]);
  }
  return TEST_PASS;
}

/* $CONVTUNE_SYSTEM_CACHE's entries (a file, then a directory), then the
 * package's directories, then $XDG_DATA_DIRS/convtune/caches; within a
 * directory its *.db files by name, other and hidden files left out;
 * missing and relative directories skipped. */
static int test_search_order(void) {
  char root[1024], env[4096], package[4096], xdg[4096];
  fresh_root(root, sizeof root, "system-order");
  CHECK(make_dirs(root, "env-dir") == TEST_PASS && make_dirs(root, "pkg") == TEST_PASS &&
        make_dirs(root, "xdg2/convtune/caches") == TEST_PASS &&
        make_dirs(root, "xdg1/convtune") == TEST_PASS);
  CHECK(make_cache(root, "one.db", 0) == TEST_PASS);
  CHECK(make_cache(root, "env-dir/b.db", 1) == TEST_PASS);
  CHECK(make_cache(root, "env-dir/a.db", 2) == TEST_PASS);
  CHECK(make_text(root, "env-dir/notes.txt", "not a cache") == TEST_PASS);
  CHECK(make_text(root, "env-dir/.hidden.db", "hidden") == TEST_PASS);
  CHECK(make_dirs(root, "env-dir/sub.db") == TEST_PASS); /* a directory, not a file */
  CHECK(make_cache(root, "pkg/h100.db", 3) == TEST_PASS);
  CHECK(make_cache(root, "xdg2/convtune/caches/h200.db", 1) == TEST_PASS);
  /* In xdg1/convtune but not in its caches/: not on the search path. */
  CHECK(make_cache(root, "xdg1/convtune/stray.db", 1) == TEST_PASS);
  snprintf(env, sizeof env, "%s/one.db:%s/env-dir", root, root);
  snprintf(package, sizeof package, "%s/missing:%s/pkg", root, root);
  snprintf(xdg, sizeof xdg, "relative/dir::%s/xdg1:%s/nowhere:%s/xdg2", root, root, root);
  conv_system_search where = {env, package, xdg};
  found_files f = {0};
  conv_error err = {CONV_OK, ""};
  CHECK_OK(conv_system_cache_search(NULL, &where, note_file, &f, &err));
  static const char *const want[] = {"one.db", "env-dir/a.db", "env-dir/b.db", "pkg/h100.db",
                                     "xdg2/convtune/caches/h200.db"};
  static const int named[] = {1, 0, 0, 0, 0};
  if (expect_found(&f, root, want, named, 5) != TEST_PASS) return TEST_FAIL;
  printf("search order checked over %d files\n", f.count);

  /* Without the variable the search starts at the package's directories. */
  where.env = NULL;
  memset(&f, 0, sizeof f);
  CHECK_OK(conv_system_cache_search(NULL, &where, note_file, &f, &err));
  if (expect_found(&f, root, want + 3, named + 3, 2) != TEST_PASS) return TEST_FAIL;
  remove_root(root);
  return TEST_PASS;
}

/* A file met twice (a directory named twice, a link) is passed once; a
 * nonzero return stops the walk. */
static int stop_after_one(const char *path, int named, void *user) {
  (void)path, (void)named;
  ++*(int *)user;
  return 1;
}

static int test_search_passes_a_file_once(void) {
  char root[1024], env[4096], link[1024], target[1024];
  fresh_root(root, sizeof root, "system-once");
  CHECK(make_dirs(root, "d") == TEST_PASS && make_dirs(root, "e") == TEST_PASS);
  CHECK(make_cache(root, "d/a.db", 0) == TEST_PASS);
  tree_path(target, sizeof target, root, "d/a.db");
  tree_path(link, sizeof link, root, "e/link.db");
  CHECK(symlink(target, link) == 0);
  snprintf(env, sizeof env, "%s/d:%s/d/a.db:%s/e", root, root, root);
  conv_system_search where = {env, env, NULL};
  found_files f = {0};
  conv_error err = {CONV_OK, ""};
  CHECK_OK(conv_system_cache_search(NULL, &where, note_file, &f, &err));
  static const char *const want[] = {"d/a.db"};
  static const int named[] = {0};
  if (expect_found(&f, root, want, named, 1) != TEST_PASS) return TEST_FAIL;
  CHECK(make_cache(root, "d/b.db", 1) == TEST_PASS);
  int calls = 0;
  CHECK_OK(conv_system_cache_search(NULL, &where, stop_after_one, &calls, &err));
  CHECK_MSG(calls == 1, "%d calls after the first said stop", calls);
  remove_root(root);
  return TEST_PASS;
}

/* The option replaces the search path: "" none, a file, a directory; a
 * named path that is missing is CONV_CACHE_ERROR naming it; the variable
 * set but empty is no system cache at all. */
static int test_named_paths(void) {
  char root[1024], path[1024], missing[1024];
  fresh_root(root, sizeof root, "system-named");
  CHECK(make_dirs(root, "pkg") == TEST_PASS);
  CHECK(make_cache(root, "pkg/a.db", 0) == TEST_PASS);
  tree_path(path, sizeof path, root, "pkg");
  conv_system_search where = {NULL, path, "/nonexistent-xdg"};
  conv_error err = {CONV_OK, ""};
  found_files f = {0};
  CHECK_OK(conv_system_cache_search("", &where, note_file, &f, &err));
  CHECK(f.count == 0);
  CHECK_OK(conv_system_cache_search(path, NULL, note_file, &f, &err));
  static const char *const want[] = {"pkg/a.db"};
  static const int named_dir[] = {0}, named_file[] = {1};
  if (expect_found(&f, root, want, named_dir, 1) != TEST_PASS) return TEST_FAIL;
  tree_path(path, sizeof path, root, "pkg/a.db");
  memset(&f, 0, sizeof f);
  CHECK_OK(conv_system_cache_search(path, NULL, note_file, &f, &err));
  if (expect_found(&f, root, want, named_file, 1) != TEST_PASS) return TEST_FAIL;

  tree_path(missing, sizeof missing, root, "gone.db");
  memset(&f, 0, sizeof f);
  CHECK_CACHE_ERROR(conv_system_cache_search(missing, NULL, note_file, &f, &err));
  CHECK_MSG(strstr(err.message, missing) != NULL, "%s", err.message);
  where.env = missing;
  CHECK_CACHE_ERROR(conv_system_cache_search(NULL, &where, note_file, &f, &err));
  CHECK_MSG(strstr(err.message, missing) != NULL, "%s", err.message);
  where.env = "";
  CHECK_OK(conv_system_cache_search(NULL, &where, note_file, &f, &err));
  CHECK_MSG(f.count == 0, "%d files with the variable empty", f.count);
  CHECK_STATUS(CONV_INVALID_ARGUMENT, conv_system_cache_search(NULL, &where, NULL, NULL, &err));
  remove_root(root);
  return TEST_PASS;
}

/* ---------------------------------------------------------------- opening them */

typedef struct warnings {
  int count;
  char last[1024];
} warnings;

static void note_warning(void *user, conv_log_level level, const char *message) {
  warnings *w = user;
  if (level != CONV_LOG_WARN) return;
  w->count++;
  snprintf(w->last, sizeof w->last, "%s", message);
}

/* The winner (make_trial's index; -1 none) each open cache holds for
 * KEY, in order. */
static int expect_winners(conv_system_caches *s, const int *winners, size_t n) {
  CHECK_MSG(s->count == n, "%zu caches open, %zu expected", s->count, n);
  for (size_t i = 0; i < n; i++)
    if ((winners[i] < 0 ? expect_no_winner(s->caches[i], &KEY)
                        : expect_winner(s->caches[i], &KEY, winners[i])) != TEST_PASS) {
      fprintf(stderr, "in %s\n", s->paths[i]);
      return TEST_FAIL;
    }
  return TEST_PASS;
}

/* A bad file found in a directory (text) is passed over with a warning
 * naming it; the good files around it are all opened, in order, and read
 * (an empty file is an empty cache to SQLite: opened, holding nothing). */
static int test_bad_files_passed_over(void) {
  char root[1024], package[2048], bad[1024];
  fresh_root(root, sizeof root, "system-bad");
  CHECK(make_dirs(root, "pkg") == TEST_PASS && make_dirs(root, "xdg/convtune/caches") == TEST_PASS);
  CHECK(make_cache(root, "pkg/a.db", 0) == TEST_PASS);
  CHECK(make_text(root, "pkg/b.db", "SQLite format 3? no: a text file") == TEST_PASS);
  CHECK(make_cache(root, "pkg/c.db", 1) == TEST_PASS);
  CHECK(make_text(root, "xdg/convtune/caches/a-empty.db", "") == TEST_PASS);
  CHECK(make_cache(root, "xdg/convtune/caches/z.db", 2) == TEST_PASS);
  tree_path(package, sizeof package, root, "pkg");
  char xdg[2048];
  tree_path(xdg, sizeof xdg, root, "xdg");
  conv_system_search where = {NULL, package, xdg};
  warnings w = {0};
  conv_logger log = {note_warning, &w, CONV_LOG_INFO};
  conv_system_caches s;
  conv_error err = {CONV_OK, ""};
  CHECK_OK(conv_system_caches_open(NULL, &where, &log, &s, &err));
  static const int winners[] = {0, 1, -1, 2};
  int rc = expect_winners(&s, winners, 4);
  conv_system_caches_close(&s);
  if (rc != TEST_PASS) return rc;
  tree_path(bad, sizeof bad, root, "pkg/b.db");
  CHECK_MSG(w.count == 1 && strstr(w.last, bad) != NULL && strstr(w.last, "passed over") != NULL,
            "%d warnings, last: %s", w.count, w.last);

  /* The same bad file named outright fails it all, naming it. */
  where.env = bad;
  CHECK_CACHE_ERROR(conv_system_caches_open(NULL, &where, &log, &s, &err));
  CHECK_MSG(strstr(err.message, bad) != NULL && strncmp(err.message, "system ", 7) == 0, "%s",
            err.message);
  CHECK(s.count == 0);
  remove_root(root);
  return TEST_PASS;
}

/* Past CONV_SYSTEM_CACHES_MAX files, the rest are passed over with a
 * warning; the first ones stay open. */
static int test_at_most_max_open(void) {
  char root[1024], name[64];
  fresh_root(root, sizeof root, "system-max");
  CHECK(make_dirs(root, "many") == TEST_PASS);
  for (int i = 0; i < CONV_SYSTEM_CACHES_MAX + 2; i++) {
    snprintf(name, sizeof name, "many/c%02d.db", i);
    CHECK(make_cache(root, name, i % 4) == TEST_PASS);
  }
  char dir[1024];
  tree_path(dir, sizeof dir, root, "many");
  warnings w = {0};
  conv_logger log = {note_warning, &w, CONV_LOG_INFO};
  conv_system_caches s;
  conv_error err = {CONV_OK, ""};
  CHECK_OK(conv_system_caches_open(dir, NULL, &log, &s, &err));
  size_t open = s.count;
  bool first_kept = open > 0 && strstr(s.paths[0], "c00.db") != NULL;
  conv_system_caches_close(&s);
  CHECK_MSG(open == CONV_SYSTEM_CACHES_MAX && first_kept, "%zu open", open);
  CHECK_MSG(w.count == 2 && strstr(w.last, "c17.db") != NULL, "%d warnings, last: %s", w.count,
            w.last);
  remove_root(root);
  return TEST_PASS;
}

/* ---------------------------------------------------------------- the public listing */

/* conv_system_cache_files reads $CONVTUNE_SYSTEM_CACHE and $XDG_DATA_DIRS
 * from the environment. */
static int test_public_listing(void) {
  char root[1024], env[2048], xdg[2048];
  fresh_root(root, sizeof root, "system-public");
  CHECK(make_dirs(root, "env") == TEST_PASS && make_dirs(root, "x/convtune/caches") == TEST_PASS);
  CHECK(make_cache(root, "env/e.db", 0) == TEST_PASS);
  CHECK(make_cache(root, "x/convtune/caches/x.db", 1) == TEST_PASS);
  tree_path(env, sizeof env, root, "env");
  tree_path(xdg, sizeof xdg, root, "x");
  CHECK(setenv("CONVTUNE_SYSTEM_CACHE", env, 1) == 0 && setenv("XDG_DATA_DIRS", xdg, 1) == 0);
  found_files f = {0};
  char message[512];
  conv_status st = conv_system_cache_files(NULL, note_file, &f, message, sizeof message);
  CHECK_MSG(st == CONV_OK, "%s", message);
  static const char *const want[] = {"env/e.db", "x/convtune/caches/x.db"};
  static const int named[] = {0, 0};
  if (expect_found(&f, root, want, named, 2) != TEST_PASS) return TEST_FAIL;
  CHECK(setenv("CONVTUNE_SYSTEM_CACHE", "", 1) == 0);
  memset(&f, 0, sizeof f);
  CHECK(conv_system_cache_files(NULL, note_file, &f, message, sizeof message) == CONV_OK);
  CHECK(f.count == 0);
  CHECK(conv_system_cache_files(NULL, NULL, NULL, message, sizeof message) ==
        CONV_INVALID_ARGUMENT);
  CHECK(unsetenv("CONVTUNE_SYSTEM_CACHE") == 0 && unsetenv("XDG_DATA_DIRS") == 0);
  remove_root(root);
  return TEST_PASS;
}

/* The package's directory lies from the folder of the file the library
 * runs from: a copy of this program (which links the static library) in
 * ROOT/bin finds ROOT/share/convtune/caches, as an installed tool does,
 * and nothing when that is missing.  The copy prints what it finds. */
static int test_package_dir_beside_program(void) {
  if (test_argc > 0) {
    char dirs[8192];
    conv_system_package_dirs(dirs, sizeof dirs);
    printf("%s\n", dirs);
    return TEST_PASS;
  }
  char root[1024], copy[1200], caches[1200], real[4096], command[4096], got[8192] = "";
  fresh_root(root, sizeof root, "system-package");
  CHECK(make_dirs(root, "bin") == TEST_PASS);
  snprintf(copy, sizeof copy, "%s/bin/copy", root);
  snprintf(command, sizeof command, "cp /proc/%d/exe '%s'", (int)getpid(), copy);
  CHECK(system(command) == 0);
  snprintf(command, sizeof command, "'%s' package_dir_beside_program child", copy);
  for (int round = 0; round < 2; round++) {
    if (round == 1) CHECK(make_dirs(root, "share/convtune/caches") == TEST_PASS);
    FILE *p = popen(command, "r");
    CHECK(p != NULL);
    if (fgets(got, sizeof got, p) == NULL) got[0] = '\0';
    CHECK(pclose(p) == 0);
    got[strcspn(got, "\n")] = '\0';
    if (round == 0) CHECK_MSG(got[0] == '\0', "with no share/: %s", got);
  }
  snprintf(caches, sizeof caches, "%s/share/convtune/caches", root);
  CHECK(realpath(caches, real) != NULL);
  CHECK_MSG(strcmp(got, real) == 0, "package directories '%s', expected '%s'", got, real);
  remove_root(root);
  return TEST_PASS;
}

static const test_case tests[] = {
    {"search_order", test_search_order},
    {"search_passes_a_file_once", test_search_passes_a_file_once},
    {"named_paths", test_named_paths},
    {"bad_files_passed_over", test_bad_files_passed_over},
    {"at_most_max_open", test_at_most_max_open},
    {"public_listing", test_public_listing},
    {"package_dir_beside_program", test_package_dir_beside_program},
};

TEST_MAIN(tests)
