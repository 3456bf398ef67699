/*
 * cache_fixtures.h -- what the cache tests (test_cache.c, test_cache_share.c;
 * test_predict.c for its keys and checks)
 * share: keys, temporary databases, SQL probes, made-up trials and their
 * checks, and writer child processes (cache_fixtures.c).  The writer mode:
 *     BINARY TESTNAME writer PATH PROBLEM TRIALS WINNER
 * stores TRIALS trials of PROBLEM into PATH (marking a winner every ten
 * trials, and trial WINNER at the end when WINNER >= 0) and exits 0; a test
 * that spawns writers starts with `if (test_argc > 0) return writer_main();`.
 */
#ifndef CONVTUNE_TESTS_CACHE_FIXTURES_H
#define CONVTUNE_TESTS_CACHE_FIXTURES_H

#include <stdbool.h>
#include <stddef.h>

#include <uv.h>

#include "algorithms/algorithm.h"
#include "cache/cache.h"
#include "tests/test.h"


/* Checks that `call` returns CONV_OK, printing err.message otherwise. */
#define CHECK_OK(call)                                                                           \
  do {                                                                                           \
    conv_status st_ = (call);                                                                    \
    CHECK_MSG(st_ == CONV_OK, "%s: %s", conv_status_string(st_), err.message);                   \
  } while (0)

/* Checks a call that must fail with CONV_CACHE_ERROR and a message. */
#define CHECK_CACHE_ERROR(call)                                                                  \
  do {                                                                                           \
    err.message[0] = '\0';                                                                       \
    CHECK_STATUS(CONV_CACHE_ERROR, call);                                                        \
    CHECK(err.status == CONV_CACHE_ERROR);                                                       \
    CHECK(err.message[0] != '\0');                                                               \
  } while (0)

#define PROBLEM "fwd f32 nchw strict none n32 c64 h56 w56 k64 r3 s3 pad1,1 str1,1 dil1,1 g1"
#define PROBLEM2 "fwd f32 nchw tf32 bias n8 c3 h224 w224 k64 r7 s7 pad3,3 str2,2 dil1,1 g1"
#define DEVICE "NVIDIA H100 80GB HBM3|sm90|132sm|l2=52428800|mem=2619000kHz*5120bit"
#define DEVICE2 "NVIDIA A100-SXM4-40GB|sm80|108sm|l2=41943040|mem=1215000kHz*5120bit"
#define VERSIONS "cuda=13000 driver=13000 cudnn=91900 cublas=130000"
#define VERSIONS_OLD "cuda=12040 driver=12040 cudnn=90100 cublas=120400"

extern const conv_cache_key KEY;

/* Rows collected by a list callback. */
typedef struct row_copy {
  conv_trial trial;
  char problem[256], device[256], versions[256], tuned_at[64];
} row_copy;

typedef struct collector {
  row_copy rows[512];
  int count;
  int stop_after; /* > 0: stop the iteration after this many rows */
} collector;

typedef struct child {
  uv_process_t process;
  int64_t exit_status;
  int term_signal;
  bool exited;
} child;

typedef struct children {
  child kids[8];
  int count, running;
  uv_timer_t timer;
  bool timed_out;
  bool kill_expected; /* the timer is the test's SIGKILL, not a hang */
} children;

const char *tmp_dir(void);
bool file_exists(const char *path);
void remove_db(const char *path);
void tmp_path(char *path, size_t size, const char *name);
char *read_all(const char *path, size_t *size);
bool write_all(const char *path, const void *data, size_t size);
int sql_exec(const char *path, const char *sql);
void sql_text(const char *path, const char *sql, char *out, size_t size);
long long sql_int(const char *path, const char *sql);
conv_trial make_trial(int i);
int check_trial(const conv_trial *got, const conv_trial *want, bool winner);
int collect(const conv_cache_row *row, void *user);
collector *new_collector(void);
bool iso_utc(const char *s);
int add_trials(conv_cache *cache, const conv_cache_key *key, int first, int count);
int set_winner(conv_cache *cache, const conv_cache_key *key, int i);
int expect_winner(conv_cache *cache, const conv_cache_key *key, int i);
int expect_no_winner(conv_cache *cache, const conv_cache_key *key);
int count_trials(conv_cache *cache, const char *problem);
/* Opening `path` (read-write, then read-only) fails with CONV_CACHE_ERROR,
 * naming the path and `mention`; the file stays byte for byte as it was. */
int check_refused(const char *path, const char *mention);
/* The trials of key in the cache at path (a collector; free() it; NULL on
 * failure). */
collector *trials_of(const char *path, const conv_cache_key *key);
/* Writes a tuning of key into the cache at path: trials first ..
 * first+count-1 (make_trial), winner `winner` (< 0: none). */
int write_tuning(const char *path, const conv_cache_key *key, int first, int count, int winner);
/* The cache at path holds exactly trials first .. first+count-1 of key,
 * winner `winner`, measured when `like`'s were (NULL: not checked). */
int expect_tuning(const char *path, const conv_cache_key *key, int first, int count, int winner,
                  const collector *like);
/* conv_cache_merge(from, into, device) succeeds with these counts. */
int expect_merged(const char *from, const char *into, const char *device, size_t added,
                  size_t replaced, size_t kept);
int writer_main(void);
int run_writers_killed(const char *test, const char *path, int count,
                              const char *const problems[], int trials, int winner,
                              int kill_after_ms);
int run_writers(const char *test, const char *path, int count, const char *const problems[],
                       int trials, int winner);

#endif /* CONVTUNE_TESTS_CACHE_FIXTURES_H */
