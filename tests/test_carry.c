/*
 * test_carry.c -- upgrades that keep tunings (cache.h, "carry-over"): the
 * rules of what invalidates what (conv_versions_carry) for each kind of
 * version difference and for hostile versions texts, the families'
 * libraries, finding carried-over winners in a cache file (the latest that
 * carries, nothing from another device or problem, rows that fail their
 * checks passed over and the file left as it was), storing one with its
 * "stale" mark, and merges keeping the mark.  CPU only: the plan path
 * (re-validation, CONV_SOURCE_CARRIED) is test_plans.carried_*.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "algorithms/algorithm.h"
#include "cache/cache.h"
#include "tests/cache_fixtures.h"
#include "tests/test.h"

/* This build's versions in the tests; THEN(...) texts differ from it in
 * one field.  Families: 1 cudnn (cuDNN), 2 im2col_gemm (cuBLASLt), 3 fft
 * (cuFFT and cuBLASLt), 4 direct_channel and 13 implicit_gemm (our own
 * kernels), 14 fft_filter (cuFFT). */
#define NOW_CUDA "cuda=13000"
#define NOW_CANDIDATES "candidates=1v5,2v4,3v2,4v6,13v1,14v2"
#define NOW "cuda=13000 driver=13000 cudnn=91900 cublaslt=130100 " NOW_CANDIDATES " timing=2"

static const uint32_t families[] = {CONV_ALGO_CUDNN,          CONV_ALGO_IM2COL_GEMM,
                                    CONV_ALGO_FFT,            CONV_ALGO_DIRECT_CHANNEL,
                                    CONV_ALGO_IMPLICIT_GEMM,  CONV_ALGO_FFT_FILTER};
#define FAMILY_COUNT (sizeof families / sizeof families[0])

static unsigned libraries_of(uint32_t family) {
  const conv_algorithm *algo = conv_registry_find(family);
  return algo == NULL ? CONV_LIBRARY_UNKNOWN : algo->libraries;
}

/* conv_versions_carry(then, NOW) for each family against want[] (1: carried). */
static int expect_carry(const char *then, const int want[FAMILY_COUNT]) {
  for (size_t i = 0; i < FAMILY_COUNT; i++) {
    bool got = conv_versions_carry(then, NOW, families[i], libraries_of(families[i]));
    CHECK_MSG(got == (want[i] != 0), "family %u from \"%s\": %s, expected %s",
              (unsigned)families[i], then, got ? "carried" : "not carried",
              want[i] ? "carried" : "not carried");
  }
  return TEST_PASS;
}

#define EXPECT_CARRY(then, ...)                                                                  \
  do {                                                                                           \
    static const int want_[FAMILY_COUNT] = {__VA_ARGS__};                                        \
    if (expect_carry((then), want_) != TEST_PASS) return TEST_FAIL;                              \
  } while (0)

/* ---------------------------------------------------------------- the rules */

static int test_registry_libraries(void) {
  /* What each family runs on, as the rules read it: a family that starts
   * using a library must say so here, or its winners would be carried
   * across that library's updates. */
  int count = 0;
  const conv_algorithm *const *algos = conv_registry(&count);
  for (int i = 0; i < count; i++) {
    unsigned want = 0;
    switch (algos[i]->id) {
    case CONV_ALGO_CUDNN: want = CONV_LIBRARY_CUDNN; break;
    case CONV_ALGO_IM2COL_GEMM:
    case CONV_ALGO_GEMM_NHWC:
    case CONV_ALGO_GEMM_BACKWARD:
    case CONV_ALGO_DYNAMIC_UNFOLD_GEMM: want = CONV_LIBRARY_CUBLASLT; break;
    case CONV_ALGO_FFT: want = CONV_LIBRARY_CUFFT | CONV_LIBRARY_CUBLASLT; break;
    case CONV_ALGO_FFT_FILTER: want = CONV_LIBRARY_CUFFT; break;
    default: want = 0;
    }
    CHECK_MSG(algos[i]->libraries == want, "%s: libraries 0x%x, expected 0x%x", algos[i]->name,
              algos[i]->libraries, want);
  }
  CHECK(libraries_of(9999) == CONV_LIBRARY_UNKNOWN);
  return TEST_PASS;
}

static int test_rules_same_versions(void) {
  /*            cudnn im2col fft direct implicit fft_filter */
  EXPECT_CARRY(NOW, 1, 1, 1, 1, 1, 1);
  return TEST_PASS;
}

static int test_rules_driver_only(void) {
  EXPECT_CARRY("cuda=13000 driver=12080 cudnn=91900 cublaslt=130100 " NOW_CANDIDATES " timing=2",
               1, 1, 1, 1, 1, 1);
  return TEST_PASS;
}

static int test_rules_own_family_changed(void) {
  EXPECT_CARRY("cuda=13000 driver=13000 cudnn=91900 cublaslt=130100 "
               "candidates=1v4,2v4,3v2,4v6,13v1,14v2 timing=2",
               0, 1, 1, 1, 1, 1);
  EXPECT_CARRY("cuda=13000 driver=13000 cudnn=91900 cublaslt=130100 "
               "candidates=1v5,2v4,3v2,4v5,13v1,14v2 timing=2",
               1, 1, 1, 0, 1, 1);
  /* A family this text did not have yet, and one it no longer has. */
  EXPECT_CARRY("cuda=13000 driver=13000 cudnn=91900 cublaslt=130100 "
               "candidates=1v5,2v4,3v2,4v6,14v2 timing=2",
               1, 1, 1, 1, 0, 1);
  CHECK(!conv_versions_carry(NOW, "cuda=13000 driver=13000 cudnn=91900 cublaslt=130100 "
                                  "candidates=2v4 timing=2",
                             CONV_ALGO_CUDNN, CONV_LIBRARY_CUDNN));
  return TEST_PASS;
}

static int test_rules_other_family_changed(void) {
  /* im2col_gemm and fft_filter bumped, a family added (5): the rest stay. */
  EXPECT_CARRY("cuda=13000 driver=13000 cudnn=91900 cublaslt=130100 "
               "candidates=1v5,2v3,3v2,4v6,5v1,13v1,14v1 timing=2",
               1, 0, 1, 1, 1, 0);
  return TEST_PASS;
}

static int test_rules_library_changed(void) {
  /* cuDNN updated: only cuDNN's winners go. */
  EXPECT_CARRY("cuda=13000 driver=13000 cudnn=90800 cublaslt=130100 " NOW_CANDIDATES " timing=2",
               0, 1, 1, 1, 1, 1);
  /* cuBLASLt updated: the GEMM families and fft (its product) go. */
  EXPECT_CARRY("cuda=13000 driver=13000 cudnn=91900 cublaslt=120800 " NOW_CANDIDATES " timing=2",
               1, 0, 0, 1, 1, 1);
  /* Another toolkit (cuFFT comes with it): the FFT families go. */
  EXPECT_CARRY("cuda=12080 driver=13000 cudnn=91900 cublaslt=130100 " NOW_CANDIDATES " timing=2",
               1, 1, 0, 1, 1, 0);
  /* A library missing from the old text is not the same library. */
  EXPECT_CARRY("cuda=13000 driver=13000 cublaslt=130100 " NOW_CANDIDATES " timing=2", 0, 1, 1, 1,
               1, 1);
  /* cufft, where both texts name it, stands for cuFFT instead of cuda. */
  const char *now_fft = "cuda=13000 driver=13000 cudnn=91900 cublaslt=130100 cufft=12000 "
                        NOW_CANDIDATES " timing=2";
  const unsigned fft = CONV_LIBRARY_CUFFT;
  CHECK(conv_versions_carry("cuda=12080 driver=13000 cudnn=91900 cublaslt=130100 cufft=12000 "
                            NOW_CANDIDATES " timing=2",
                            now_fft, CONV_ALGO_FFT_FILTER, fft));
  CHECK(!conv_versions_carry("cuda=13000 driver=13000 cudnn=91900 cublaslt=130100 cufft=11000 "
                             NOW_CANDIDATES " timing=2",
                             now_fft, CONV_ALGO_FFT_FILTER, fft));
  /* Named in one text only: cuda decides. */
  CHECK(conv_versions_carry(NOW, now_fft, CONV_ALGO_FFT_FILTER, fft));
  CHECK(!conv_versions_carry("cuda=12080 driver=13000 cudnn=91900 cublaslt=130100 " NOW_CANDIDATES
                             " timing=2",
                             now_fft, CONV_ALGO_FFT_FILTER, fft));
  return TEST_PASS;
}

static int test_rules_timing_changed(void) {
  /* Carried, and (as every carried-over winner) stored pending "stale"
   * for re-timing: test_carry.store_marks_stale. */
  EXPECT_CARRY("cuda=13000 driver=13000 cudnn=91900 cublaslt=130100 " NOW_CANDIDATES " timing=1",
               1, 1, 1, 1, 1, 1);
  EXPECT_CARRY("cuda=13000 driver=12080 cudnn=91900 cublaslt=130100 " NOW_CANDIDATES, 1, 1, 1, 1,
               1, 1);
  return TEST_PASS;
}

static int test_rules_hostile_texts(void) {
  static const char *const bad[] = {
      "",
      "garbage",
      " " NOW,
      NOW " ",
      "cuda=13000  driver=13000 cudnn=91900 cublaslt=130100 " NOW_CANDIDATES " timing=2",
      "cuda=13000\tdriver=13000 cudnn=91900 cublaslt=130100 " NOW_CANDIDATES " timing=2",
      "cuda=13000 driver=13000\n cudnn=91900 cublaslt=130100 " NOW_CANDIDATES " timing=2",
      "cuda=13x00 driver=13000 cudnn=91900 cublaslt=130100 " NOW_CANDIDATES " timing=2",
      "cuda= driver=13000 cudnn=91900 cublaslt=130100 " NOW_CANDIDATES " timing=2",
      "=13000 driver=13000 cudnn=91900 cublaslt=130100 " NOW_CANDIDATES " timing=2",
      "Cuda=13000 driver=13000 cudnn=91900 cublaslt=130100 " NOW_CANDIDATES " timing=2",
      "cuda=13000=1 driver=13000 cudnn=91900 cublaslt=130100 " NOW_CANDIDATES " timing=2",
      "cuda=-13000 driver=13000 cudnn=91900 cublaslt=130100 " NOW_CANDIDATES " timing=2",
      "cuda=13000 driver=1 driver=13000 cudnn=91900 cublaslt=130100 " NOW_CANDIDATES " timing=2",
      "cuda=13000 cudnn=91900 cudnn=91900 cublaslt=130100 " NOW_CANDIDATES " timing=2",
      "cuda=12345678901234567890 driver=1 cudnn=91900 cublaslt=130100 " NOW_CANDIDATES,
      NOW_CUDA " cudnn=91900 cublaslt=130100 candidates=",
      NOW_CUDA " cudnn=91900 cublaslt=130100 candidates=1v",
      NOW_CUDA " cudnn=91900 cublaslt=130100 candidates=v5",
      NOW_CUDA " cudnn=91900 cublaslt=130100 candidates=1v5,",
      NOW_CUDA " cudnn=91900 cublaslt=130100 candidates=,1v5",
      NOW_CUDA " cudnn=91900 cublaslt=130100 candidates=1v5,,2v4",
      NOW_CUDA " cudnn=91900 cublaslt=130100 candidates=1x5",
      NOW_CUDA " cudnn=91900 cublaslt=130100 candidates=1v5v5",
      NOW_CUDA " cudnn=91900 cublaslt=130100 candidates=12345678901v5",
      NOW_CUDA " cudnn=91900 cublaslt=130100 candidates=1v5 candidates=1v5",
      /* The family twice, with one version or two. */
      NOW_CUDA " cudnn=91900 cublaslt=130100 candidates=1v5,2v4,1v5",
      NOW_CUDA " cudnn=91900 cublaslt=130100 candidates=1v4,2v4,1v5",
      /* A field this version does not know, in one text only or different. */
      NOW " cutlass=3",
      "cutlass=3 " NOW,
      NOW " x=\x01",
      NOW " x=\xc3\xa9",
      /* More fields than any writer's. */
      NOW " a=1 b=1 c=1 d=1 e=1 f=1 g=1 h=1 i=1 j=1",
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
    for (size_t f = 0; f < FAMILY_COUNT; f++) {
      const uint32_t family = families[f];
      CHECK_MSG(!conv_versions_carry(bad[i], NOW, family, libraries_of(family)),
                "carried from \"%s\"", bad[i]);
      CHECK_MSG(!conv_versions_carry(NOW, bad[i], family, libraries_of(family)),
                "carried to \"%s\"", bad[i]);
    }
  /* Oversized: a text of CONV_CACHE_VERSIONS_MAX bytes or more. */
  size_t big = CONV_CACHE_VERSIONS_MAX + 16;
  char *huge = malloc(big);
  CHECK(huge != NULL);
  int used = snprintf(huge, big, "%s x=", NOW);
  memset(huge + used, 'y', big - (size_t)used - 1);
  huge[big - 1] = '\0';
  bool carried = conv_versions_carry(huge, huge, CONV_ALGO_CUDNN, CONV_LIBRARY_CUDNN);
  free(huge);
  CHECK(!carried);
  /* NULL texts, family 0, a family of unknown libraries. */
  CHECK(!conv_versions_carry(NULL, NOW, CONV_ALGO_CUDNN, CONV_LIBRARY_CUDNN));
  CHECK(!conv_versions_carry(NOW, NULL, CONV_ALGO_CUDNN, CONV_LIBRARY_CUDNN));
  CHECK(!conv_versions_carry(NOW, NOW, 0, 0));
  CHECK(!conv_versions_carry(NOW, NOW, CONV_ALGO_CUDNN, CONV_LIBRARY_UNKNOWN));
  /* A field it does not know, equal in both: nothing says it changed. */
  CHECK(conv_versions_carry(NOW " cutlass=3", NOW " cutlass=3", CONV_ALGO_CUDNN,
                            CONV_LIBRARY_CUDNN));
  CHECK(!conv_versions_carry(NOW " cutlass=3", NOW " cutlass=4", CONV_ALGO_CUDNN,
                             CONV_LIBRARY_CUDNN));
  /* What the tests' other fixtures write (no candidates at all). */
  CHECK(!conv_versions_carry(VERSIONS_OLD, VERSIONS, CONV_ALGO_CUDNN, CONV_LIBRARY_CUDNN));
  return TEST_PASS;
}

/* ---------------------------------------------------------------- the cache */

/* A winner of `family` (trial i) under `versions` for PROBLEM on DEVICE. */
static int put_winner(conv_cache *cache, const char *problem, const char *device,
                      const char *versions, uint32_t family, int i) {
  conv_error err = {CONV_OK, ""};
  const conv_cache_key key = {problem, device, versions};
  conv_trial t = make_trial(i * 5); /* a multiple of 5 is a valid trial */
  t.algorithm_id = family;
  snprintf(t.algorithm, sizeof t.algorithm, "%s", conv_registry_find(family)->name);
  t.time_ms = 0.5 + i;
  CHECK_OK(conv_cache_begin_tuning(cache, &key, &err));
  CHECK_OK(conv_cache_add_trial(cache, &key, &t, &err));
  CHECK_OK(conv_cache_set_winner(cache, &key, t.algorithm_id, &t.config, &err));
  return TEST_PASS;
}

/* Messages of the lookups' logger. */
typedef struct log_lines {
  int warnings;
  char last[1024];
} log_lines;

static void log_to(void *user, conv_log_level level, const char *message) {
  log_lines *l = user;
  if (level == CONV_LOG_WARN) l->warnings++;
  snprintf(l->last, sizeof l->last, "%s", message);
}

typedef struct carried_result {
  bool found;
  conv_trial winner;
  char then[CONV_CACHE_VERSIONS_MAX];
} carried_result;

static conv_status lookup(conv_cache *cache, const char *now, log_lines *lines,
                          carried_result *out, conv_error *err) {
  const conv_cache_key key = {PROBLEM, DEVICE, now};
  conv_logger log = {log_to, lines, CONV_LOG_DEBUG};
  memset(out, 0, sizeof *out);
  return conv_cache_lookup_carried(cache, &key, libraries_of, &log, "cache", &out->winner,
                                   out->then, sizeof out->then, &out->found, err);
}

/* One cache per kind of difference: a winner of `family` tuned under
 * `then`, looked up under NOW. */
static int expect_lookup(const char *name, const char *then, uint32_t family, bool want) {
  char path[1024];
  tmp_path(path, sizeof path, name);
  conv_cache *cache = NULL;
  conv_error err = {CONV_OK, ""};
  CHECK_OK(conv_cache_open(path, false, &cache, &err));
  int rc = put_winner(cache, PROBLEM, DEVICE, then, family, 1);
  log_lines lines = {0, ""};
  carried_result got;
  conv_status st = rc == TEST_PASS ? lookup(cache, NOW, &lines, &got, &err) : CONV_INTERNAL;
  conv_cache_close(cache);
  remove_db(path);
  CHECK(rc == TEST_PASS);
  CHECK_MSG(st == CONV_OK, "%s", err.message);
  CHECK_MSG(got.found == want, "%s: family %u from \"%s\": %s", name, (unsigned)family, then,
            got.found ? "found" : "not found");
  if (want) {
    CHECK(got.winner.algorithm_id == family && got.winner.winner);
    CHECK(got.winner.time_ms == 1.5);
    CHECK(strcmp(got.then, then) == 0);
  }
  CHECK(lines.warnings == 0);
  return TEST_PASS;
}

static int test_lookup_each_difference(void) {
  const char *cand = " " NOW_CANDIDATES;
  char driver[512], own[512], other[512], cudnn[512], timing[512];
  snprintf(driver, sizeof driver, "cuda=13000 driver=12080 cudnn=91900 cublaslt=130100%s timing=2", cand);
  snprintf(own, sizeof own, "%s", "cuda=13000 driver=13000 cudnn=91900 cublaslt=130100 "
                                  "candidates=1v4,2v4,3v2,4v6,13v1,14v2 timing=2");
  snprintf(other, sizeof other, "%s", "cuda=13000 driver=13000 cudnn=91900 cublaslt=130100 "
                                      "candidates=1v5,2v3,3v2,4v6,13v1,14v2 timing=2");
  snprintf(cudnn, sizeof cudnn, "cuda=13000 driver=13000 cudnn=90800 cublaslt=130100%s timing=2", cand);
  snprintf(timing, sizeof timing, "cuda=13000 driver=13000 cudnn=91900 cublaslt=130100%s timing=1", cand);
  if (expect_lookup("driver", driver, CONV_ALGO_CUDNN, true) != TEST_PASS) return TEST_FAIL;
  if (expect_lookup("own", own, CONV_ALGO_CUDNN, false) != TEST_PASS) return TEST_FAIL;
  if (expect_lookup("other", other, CONV_ALGO_CUDNN, true) != TEST_PASS) return TEST_FAIL;
  if (expect_lookup("cudnn-cudnn", cudnn, CONV_ALGO_CUDNN, false) != TEST_PASS) return TEST_FAIL;
  if (expect_lookup("cudnn-gemm", cudnn, CONV_ALGO_IM2COL_GEMM, true) != TEST_PASS) return TEST_FAIL;
  if (expect_lookup("timing", timing, CONV_ALGO_DIRECT_CHANNEL, true) != TEST_PASS) return TEST_FAIL;
  if (expect_lookup("hostile", "cuda=1  driver=2 " NOW_CANDIDATES, CONV_ALGO_DIRECT_CHANNEL,
                    false) != TEST_PASS)
    return TEST_FAIL;
  return TEST_PASS;
}

#define THEN_A "cuda=13000 driver=12080 cudnn=91900 cublaslt=130100 " NOW_CANDIDATES " timing=2"
#define THEN_B "cuda=13000 driver=12090 cudnn=91900 cublaslt=130100 " NOW_CANDIDATES " timing=2"
#define THEN_BAD "cuda=13000 driver=12095 cudnn=90800 cublaslt=130100 " NOW_CANDIDATES " timing=2"

static int test_lookup_latest_that_carries(void) {
  char path[1024];
  tmp_path(path, sizeof path, "latest");
  conv_cache *cache = NULL;
  conv_error err = {CONV_OK, ""};
  CHECK_OK(conv_cache_open(path, false, &cache, &err));
  log_lines lines = {0, ""};
  carried_result got;
  /* Nothing at all; then only what must not be found: the exact versions
   * (the exact lookup's), another device, another problem, a cuDNN update
   * under a cuDNN winner. */
  CHECK_OK(lookup(cache, NOW, &lines, &got, &err));
  CHECK(!got.found);
  CHECK(put_winner(cache, PROBLEM, DEVICE, NOW, CONV_ALGO_CUDNN, 0) == TEST_PASS);
  CHECK(put_winner(cache, PROBLEM, DEVICE2, THEN_A, CONV_ALGO_CUDNN, 0) == TEST_PASS);
  CHECK(put_winner(cache, PROBLEM2, DEVICE, THEN_A, CONV_ALGO_CUDNN, 0) == TEST_PASS);
  CHECK_OK(lookup(cache, NOW, &lines, &got, &err));
  CHECK(!got.found);
  /* Two that carry: the one written last. */
  CHECK(put_winner(cache, PROBLEM, DEVICE, THEN_A, CONV_ALGO_IM2COL_GEMM, 1) == TEST_PASS);
  CHECK(put_winner(cache, PROBLEM, DEVICE, THEN_B, CONV_ALGO_DIRECT_CHANNEL, 2) == TEST_PASS);
  CHECK_OK(lookup(cache, NOW, &lines, &got, &err));
  CHECK(got.found && strcmp(got.then, THEN_B) == 0);
  CHECK(got.winner.algorithm_id == CONV_ALGO_DIRECT_CHANNEL && got.winner.time_ms == 2.5);
  /* A newer one that does not carry is passed over for the older one. */
  CHECK(put_winner(cache, PROBLEM, DEVICE, THEN_BAD, CONV_ALGO_CUDNN, 3) == TEST_PASS);
  CHECK_OK(lookup(cache, NOW, &lines, &got, &err));
  CHECK(got.found && strcmp(got.then, THEN_B) == 0);
  /* Re-tuned under THEN_A later: that tuning's winner is now the latest. */
  CHECK(put_winner(cache, PROBLEM, DEVICE, THEN_A, CONV_ALGO_FFT, 4) == TEST_PASS);
  CHECK_OK(lookup(cache, NOW, &lines, &got, &err));
  CHECK(got.found && strcmp(got.then, THEN_A) == 0 && got.winner.algorithm_id == CONV_ALGO_FFT);
  /* A truncating buffer for the versions: cut, never overrun. */
  char small[8];
  const conv_cache_key key = {PROBLEM, DEVICE, NOW};
  bool found = false;
  CHECK_OK(conv_cache_lookup_carried(cache, &key, libraries_of, NULL, "cache", &got.winner, small,
                                     sizeof small, &found, &err));
  CHECK(found && strlen(small) == sizeof small - 1);
  /* Bad arguments: a specific status, nothing found. */
  CHECK_STATUS(CONV_INVALID_ARGUMENT,
               conv_cache_lookup_carried(cache, &key, NULL, NULL, "cache", &got.winner, small,
                                         sizeof small, &found, &err));
  CHECK_STATUS(CONV_INVALID_ARGUMENT,
               conv_cache_lookup_carried(cache, &key, libraries_of, NULL, "cache", &got.winner,
                                         small, 0, &found, &err));
  CHECK_STATUS(CONV_INVALID_ARGUMENT,
               conv_cache_lookup_carried(NULL, &key, libraries_of, NULL, "cache", &got.winner,
                                         small, sizeof small, &found, &err));
  CHECK(lines.warnings == 0);
  conv_cache_close(cache);
  remove_db(path);
  return TEST_PASS;
}

static int test_lookup_hostile_rows(void) {
  char path[1024];
  tmp_path(path, sizeof path, "hostile");
  conv_cache *cache = NULL;
  conv_error err = {CONV_OK, ""};
  CHECK_OK(conv_cache_open(path, false, &cache, &err));
  CHECK(put_winner(cache, PROBLEM, DEVICE, THEN_A, CONV_ALGO_CUDNN, 1) == TEST_PASS);
  for (int i = 0; i < 6; i++) {
    char versions[256];
    snprintf(versions, sizeof versions, "hostile %d " NOW_CANDIDATES, i);
    CHECK(put_winner(cache, PROBLEM, DEVICE, versions, CONV_ALGO_DIRECT_CHANNEL, 2) == TEST_PASS);
  }
  conv_cache_close(cache);
  /* Written behind the cache's back, newer than the good row: versions
   * texts that do not parse, one with a NUL inside, one that is a blob, a
   * winner that was never timed, a family id past any. */
  CHECK(sql_exec(path, "UPDATE trials SET versions = 'cuda=13000 driver=1 driver=2 "
                       NOW_CANDIDATES "' WHERE versions = 'hostile 0 " NOW_CANDIDATES "';"
                       "UPDATE trials SET versions = CAST('" THEN_B "' || char(0) || 'x' AS TEXT)"
                       " WHERE versions = 'hostile 1 " NOW_CANDIDATES "';"
                       "UPDATE trials SET versions = CAST('" THEN_B "' AS BLOB)"
                       " WHERE versions = 'hostile 2 " NOW_CANDIDATES "';"
                       "UPDATE trials SET versions = '" THEN_B "', time_ms = NULL"
                       " WHERE versions = 'hostile 3 " NOW_CANDIDATES "';"
                       "UPDATE trials SET versions = '" THEN_B " x=1', algorithm_id = 4000000000"
                       " WHERE versions = 'hostile 4 " NOW_CANDIDATES "';"
                       "UPDATE trials SET versions = 'timing=2 " NOW_CANDIDATES " timing=3'"
                       " WHERE versions = 'hostile 5 " NOW_CANDIDATES "';") == 0);
  size_t before_size = 0, after_size = 0;
  char *before = read_all(path, &before_size);
  CHECK(before != NULL);
  CHECK_OK(conv_cache_open(path, true, &cache, &err));
  log_lines lines = {0, ""};
  carried_result got;
  conv_status st = lookup(cache, NOW, &lines, &got, &err);
  conv_cache_close(cache);
  char *after = read_all(path, &after_size);
  bool same = after != NULL && after_size == before_size && memcmp(before, after, after_size) == 0;
  free(before);
  free(after);
  CHECK_MSG(st == CONV_OK, "%s", err.message);
  /* The good row is found; the bad ones are passed over, with a warning
   * for each that fails the row checks; nothing is lost or written. */
  CHECK(got.found && strcmp(got.then, THEN_A) == 0 && got.winner.algorithm_id == CONV_ALGO_CUDNN);
  CHECK_MSG(lines.warnings >= 2, "%d warnings; last: %s", lines.warnings, lines.last);
  CHECK(same);
  CHECK(sql_int(path, "SELECT count(*) FROM trials") == 7);
  remove_db(path);
  return TEST_PASS;
}

static int test_store_marks_stale(void) {
  char path[1024];
  tmp_path(path, sizeof path, "store");
  conv_cache *cache = NULL;
  conv_error err = {CONV_OK, ""};
  const conv_cache_key now = {PROBLEM, DEVICE, NOW};
  CHECK_OK(conv_cache_open(path, false, &cache, &err));
  CHECK(put_winner(cache, PROBLEM, DEVICE,
                   "cuda=13000 driver=13000 cudnn=91900 cublaslt=130100 " NOW_CANDIDATES
                   " timing=1",
                   CONV_ALGO_DIRECT_CHANNEL, 1) == TEST_PASS);
  /* A record-mode context had met it: its "untuned" mark is replaced. */
  CHECK_OK(conv_cache_record_pending(cache, &now, CONV_PENDING_UNTUNED, &err));
  log_lines lines = {0, ""};
  carried_result got;
  CHECK_OK(lookup(cache, NOW, &lines, &got, &err));
  CHECK(got.found);
  conv_trial stored = got.winner;
  stored.rel_error = 3e-7; /* re-validated now */
  CHECK_OK(conv_cache_store_carried(cache, &now, &stored, &err));
  conv_trial w;
  bool found = false;
  CHECK_OK(conv_cache_lookup_winner(cache, &now, &w, &found, &err));
  CHECK(found && w.algorithm_id == CONV_ALGO_DIRECT_CHANNEL && w.time_ms == got.winner.time_ms);
  CHECK(w.rel_error == 3e-7 && w.config.count == got.winner.config.count);
  conv_pending_reason reason = CONV_PENDING_UNTUNED;
  CHECK_OK(conv_cache_find_pending(cache, &now, &found, &reason, &err));
  CHECK(found && reason == CONV_PENDING_STALE);
  CHECK(strcmp(conv_pending_reason_text(CONV_PENDING_STALE), "stale") == 0);
  char text[64];
  sql_text(path, "SELECT reason FROM pending", text, sizeof text);
  CHECK(strcmp(text, "stale") == 0);
  CHECK(sql_int(path, "SELECT count(*) FROM pending") == 1);
  /* The old tuning stays for reports. */
  CHECK(sql_int(path, "SELECT count(*) FROM trials") == 2);
  /* A tuning that completes clears the mark. */
  CHECK_OK(conv_cache_clear_pending(cache, &now, &err));
  CHECK_OK(conv_cache_find_pending(cache, &now, &found, NULL, &err));
  CHECK(!found);
  /* Bad input: a specific status and nothing written. */
  conv_trial loser = stored;
  loser.winner = false;
  CHECK_STATUS(CONV_INVALID_ARGUMENT, conv_cache_store_carried(cache, &now, &loser, &err));
  conv_trial untimed = stored;
  untimed.time_ms = -1;
  CHECK_STATUS(CONV_INVALID_ARGUMENT, conv_cache_store_carried(cache, &now, &untimed, &err));
  CHECK_STATUS(CONV_INVALID_ARGUMENT, conv_cache_store_carried(cache, &now, NULL, &err));
  CHECK_STATUS(CONV_INVALID_ARGUMENT, conv_cache_store_carried(NULL, &now, &stored, &err));
  CHECK(sql_int(path, "SELECT count(*) FROM pending") == 0);
  conv_cache_close(cache);
  /* Read-only: refused, nothing written. */
  CHECK_OK(conv_cache_open(path, true, &cache, &err));
  CHECK_CACHE_ERROR(conv_cache_store_carried(cache, &now, &stored, &err));
  conv_cache_close(cache);
  CHECK(sql_int(path, "SELECT count(*) FROM pending") == 0);
  remove_db(path);
  return TEST_PASS;
}

static int test_merge_keeps_stale_mark(void) {
  char from[1024], into[1024];
  tmp_path(from, sizeof from, "merge-from");
  tmp_path(into, sizeof into, "merge-into");
  conv_cache *cache = NULL;
  conv_error err = {CONV_OK, ""};
  const conv_cache_key now = {PROBLEM, DEVICE, NOW};
  CHECK_OK(conv_cache_open(from, false, &cache, &err));
  conv_trial t = make_trial(5);
  t.algorithm_id = CONV_ALGO_DIRECT_CHANNEL;
  t.winner = true;
  CHECK_OK(conv_cache_store_carried(cache, &now, &t, &err));
  conv_cache_close(cache);
  if (expect_merged(from, into, NULL, 1, 0, 0) != TEST_PASS) return TEST_FAIL;
  CHECK_OK(conv_cache_open(into, true, &cache, &err));
  bool found = false;
  conv_pending_reason reason = CONV_PENDING_UNTUNED;
  CHECK_OK(conv_cache_find_pending(cache, &now, &found, &reason, &err));
  conv_cache_close(cache);
  CHECK(found && reason == CONV_PENDING_STALE);
  remove_db(from);
  remove_db(into);
  return TEST_PASS;
}

static const test_case tests[] = {
    {"registry_libraries", test_registry_libraries},
    {"rules_same_versions", test_rules_same_versions},
    {"rules_driver_only", test_rules_driver_only},
    {"rules_own_family_changed", test_rules_own_family_changed},
    {"rules_other_family_changed", test_rules_other_family_changed},
    {"rules_library_changed", test_rules_library_changed},
    {"rules_timing_changed", test_rules_timing_changed},
    {"rules_hostile_texts", test_rules_hostile_texts},
    {"lookup_each_difference", test_lookup_each_difference},
    {"lookup_latest_that_carries", test_lookup_latest_that_carries},
    {"lookup_hostile_rows", test_lookup_hostile_rows},
    {"store_marks_stale", test_store_marks_stale},
    {"merge_keeps_stale_mark", test_merge_keeps_stale_mark},
};

TEST_MAIN(tests)
