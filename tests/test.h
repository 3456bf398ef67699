/*
 * test.h -- a minimal test harness.  Each test binary holds a table of named
 * tests; CTest runs every test in its own process (`binary NAME`), as libuv's
 * runner does, so a crash fails one test only.  A test returns TEST_PASS,
 * TEST_FAIL or TEST_SKIP (exit code 77, which CTest shows as "Skipped").
 */
#ifndef CONVTUNE_TEST_H
#define CONVTUNE_TEST_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TEST_PASS 0
#define TEST_FAIL 1
#define TEST_SKIP 77

typedef int (*test_fn)(void);
typedef struct test_case {
  const char *name;
  test_fn fn;
} test_case;

/* The table of a binary that holds both CPU and GPU tests (a candidate
 * family's, tests/families/): each entry names its CTest label, "cpu" or
 * "gpu", which CMakeLists.txt reads with the names, so that `ctest -L cpu`
 * and `ctest -L gpu` each still run all of theirs.  A test labelled "cpu"
 * that skips fails instead: it is a GPU test, which `ctest -L gpu` (and
 * so the GPU machines) would never run. */
typedef struct labelled_test_case {
  const char *name;
  test_fn fn;
  const char *label;
} labelled_test_case;

/* An entry's label; "-" in a plain table, whose tests all take the label
 * CMakeLists.txt gives the binary. */
static inline const char *test_label_plain(const test_case *t) {
  (void)t;
  return "-";
}
static inline const char *test_label_own(const labelled_test_case *t) { return t->label; }
#define TEST_LABEL(entry)                                                      \
  _Generic(&(entry), const test_case *: test_label_plain,                      \
           const labelled_test_case *: test_label_own)(&(entry))

/* The program's path, for tests that spawn themselves as helper processes. */
extern const char *test_argv0;

#define CHECK(cond)                                                            \
  do {                                                                         \
    if (!(cond)) {                                                             \
      fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
      return TEST_FAIL;                                                        \
    }                                                                          \
  } while (0)

#define CHECK_MSG(cond, ...)                                                   \
  do {                                                                         \
    if (!(cond)) {                                                             \
      fprintf(stderr, "%s:%d: CHECK failed: %s: ", __FILE__, __LINE__, #cond); \
      fprintf(stderr, __VA_ARGS__);                                            \
      fputc('\n', stderr);                                                     \
      return TEST_FAIL;                                                        \
    }                                                                          \
  } while (0)

/* Checks a conv_status-returning call against an expected status. */
#define CHECK_STATUS(expected, call)                                           \
  do {                                                                         \
    int got_ = (int)(call);                                                    \
    if (got_ != (int)(expected)) {                                             \
      fprintf(stderr, "%s:%d: %s returned %d (%s), expected %s\n", __FILE__,   \
              __LINE__, #call, got_, conv_status_string((conv_status)got_),    \
              #expected);                                                      \
      return TEST_FAIL;                                                        \
    }                                                                          \
  } while (0)

/* main(): `binary` lists the tests, `binary --labels` lists them with
 * their labels (for scripts that run a binary's GPU tests without CTest,
 * .ci/gpu-check), `binary NAME [ARGS...]` runs one.  Extra arguments reach
 * helper-process modes through test_args. */
extern int test_argc;
extern char **test_args;

#define TEST_MAIN(table)                                                       \
  const char *test_argv0;                                                      \
  int test_argc;                                                               \
  char **test_args;                                                            \
  int main(int argc, char **argv) {                                            \
    test_argv0 = argv[0];                                                      \
    size_t n_ = sizeof(table) / sizeof((table)[0]);                            \
    if (argc < 2) {                                                            \
      for (size_t i_ = 0; i_ < n_; i_++) printf("%s\n", (table)[i_].name);    \
      return 0;                                                                \
    }                                                                          \
    if (strcmp(argv[1], "--labels") == 0) {                                    \
      for (size_t i_ = 0; i_ < n_; i_++)                                       \
        printf("%s %s\n", (table)[i_].name, TEST_LABEL((table)[i_]));          \
      return 0;                                                                \
    }                                                                          \
    test_argc = argc - 2;                                                      \
    test_args = argv + 2;                                                      \
    for (size_t i_ = 0; i_ < n_; i_++) {                                       \
      if (strcmp((table)[i_].name, argv[1]) == 0) {                            \
        int rc_ = (table)[i_].fn();                                            \
        if (rc_ == TEST_SKIP && strcmp(TEST_LABEL((table)[i_]), "cpu") == 0) { \
          fprintf(stderr, "%s is labelled cpu but skipped: a GPU test?\n",     \
                  argv[1]);                                                    \
          return TEST_FAIL;                                                    \
        }                                                                      \
        if (rc_ == TEST_SKIP) printf("SKIPPED: %s\n", argv[1]);                \
        return rc_;                                                            \
      }                                                                        \
    }                                                                          \
    fprintf(stderr, "no test named %s\n", argv[1]);                            \
    return 2;                                                                  \
  }

#endif /* CONVTUNE_TEST_H */
