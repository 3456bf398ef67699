/*
 * test_cli_cache.c -- the convtune tool's commands about what the cache
 * holds beyond winners: `list --pending`, the arguments of `tune
 * --pending` and `tune --budget`, and `verify`'s arguments and caches.
 * Runs without a GPU: rows are written through the cache API under
 * made-up device keys, and the one test that needs a context's failure
 * skips itself where a GPU is usable.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
      {{"tune", "--pending", "--math", "tf32"}, "--math, --dtype, --epilogue, --direction"},
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

static const test_case tests[] = {
    {"tune_arguments", test_tune_arguments},
    {"list_pending", test_list_pending},
    {"no_gpu_tune_pending", test_no_gpu_tune_pending},
    {"verify_arguments", test_verify_arguments},
    {"verify_bad_caches", test_verify_bad_caches},
};

TEST_MAIN(tests)
