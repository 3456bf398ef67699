/*
 * cli_run.h -- what the CLI tests (test_cli.c, test_cli_cache.c) share:
 * the convtune tool ($CONVTUNE_CLI) run as a child process with its stdout
 * and stderr captured through libuv pipes, and scratch files under
 * $CONVTUNE_TEST_TMP.
 */
#ifndef CONVTUNE_TESTS_CLI_RUN_H
#define CONVTUNE_TESTS_CLI_RUN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include "convtune.h"

struct cli_result;

typedef struct capture {
  uv_pipe_t pipe;
  char *data;
  size_t len, cap;
  bool failed;
  struct cli_result *owner;
} capture;

typedef struct cli_result {
  int64_t exit_status;
  int term_signal;
  bool exited;
  capture out, err;
  uv_timer_t timer;
  uv_process_t process;
  const char *interrupt_when; /* run_cli_interrupted: the stderr text awaited */
  bool interrupted;           /* SIGINT was sent */
} cli_result;

void cli_result_free(cli_result *r);

/* $CONVTUNE_CLI, the path of the convtune binary (NULL, said, when unset). */
const char *cli_path(void);

/* Runs the program `cli` with args (NULL-terminated, without argv[0]) as
 * user `uid` (< 0: this process's); fills r.  Returns false (with a
 * message) when the child could not be run. */
bool run_program(const char *cli, const char *const *args, int uid, cli_result *r);

/* run_program of $CONVTUNE_CLI as this user. */
bool run_cli(const char *const *args, cli_result *r);

/* run_cli, sending the child SIGINT once its stderr holds `marker`
 * (r->interrupted says whether it was sent), as a user's Ctrl-C. */
bool run_cli_interrupted(const char *const *args, const char *marker, cli_result *r);

bool contains(const char *haystack, const char *needle);

/* `args` (a show command, NULL-terminated) exits 0 and prints `key` with
 * the trial `want`, and not the trial `unwanted` (another key's).
 * TEST_PASS or TEST_FAIL. */
int show_finds(const char *const args[], const char *key, const char *want,
               const char *unwanted);
size_t count_lines(const char *s);

/* A command line (NULL-terminated) the tool must refuse as a usage error,
 * and the text its message must hold. */
typedef struct usage_case {
  const char *args[8];
  const char *message;
} usage_case;

/* Every case is a usage error: exit 2, one message naming the problem and
 * the hint to --help, nothing on stdout.  TEST_PASS or TEST_FAIL. */
int check_usage_errors(const usage_case *cases, size_t count);

/* Runs the CLI and checks its exit status; on a mismatch prints its output. */
#define RUN_EXPECT(result, expected, ...)                                                  \
  do {                                                                                     \
    const char *args_[] = {__VA_ARGS__, NULL};                                             \
    CHECK(run_cli(args_, &(result)));                                                      \
    CHECK_MSG((result).exit_status == (expected),                                          \
              "exit status %lld, expected %d\n--- stdout:\n%s--- stderr:\n%s",             \
              (long long)(result).exit_status, (expected), (result).out.data,              \
              (result).err.data);                                                          \
  } while (0)

/* $CONVTUNE_TEST_TMP, else /tmp. */
const char *tmp_dir(void);

/* TMP/cli-<pid>-<name> */
void tmp_path(char *path, size_t size, const char *name);

/* Removes a database and its -wal, -shm and -journal files. */
void remove_cache_files(const char *path);

bool write_file(const char *path, const char *text);
bool file_exists(const char *path);

/* The default cache path of every child points into the temp folder, so
 * that no test touches the user's own cache. */
void isolate_default_cache(void);

/* Whether this process can open a context (on a :memory: cache): CONV_OK
 * where a CUDA GPU is usable, else the status, its message left in
 * conv_context_last_error(NULL).  The no-GPU tests skip where it is OK. */
conv_status probe_context(void);

#endif /* CONVTUNE_TESTS_CLI_RUN_H */
