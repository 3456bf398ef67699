/*
 * test_cli.c -- the convtune command-line tool, run as a child process
 * ($CONVTUNE_CLI) with its stdout and stderr captured through libuv pipes,
 * and the suite loader and JSON reading of tools/json.c called directly.
 *
 * All of these run without a GPU.  The one test about the no-GPU message
 * skips itself where a context can be created (a real GPU is there); the
 * list/show tests write their rows straight into a cache file through the
 * cache API, under made-up device keys, and never tune.
 */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif

#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <uv.h>

#include "cache/cache.h"
#include "convtune.h"
#include "runtime/internal.h"
#include "test.h"
#include "tests/cli_run.h"
#include "tools/cli/progress.h"
#include "tools/json.h"
#include "tools/text.h"

/* ================================================================ cache fixture */

#define SPEC "n=2 c=8 h=12 w=12 k=16 r=3 s=3 pad=1"
#define OTHER_SPEC "n=2 c=8 h=12 w=12 k=32 r=3 s=3 pad=1"
#define DEVICE_A "Test GPU A|sm90|132sm|l2=52428800|mem=2619000kHz*5120bit"
#define DEVICE_B "Test GPU B|sm80|108sm|l2=41943040|mem=1593000kHz*5120bit"
#define VERSIONS "cuda=12080 driver=12080 cudnn=90800 cublas=120800"

static conv_trial make_trial(int64_t engine, const char *text, conv_status status,
                             double time_ms, double rel_error) {
  conv_trial t;
  memset(&t, 0, sizeof t);
  t.algorithm_id = CONV_ALGO_CUDNN;
  snprintf(t.algorithm, sizeof t.algorithm, "cudnn");
  t.config.count = 2;
  t.config.values[0] = engine;
  t.config.values[1] = 3;
  snprintf(t.config_text, sizeof t.config_text, "%s", text);
  t.status = status;
  t.time_ms = time_ms;
  t.rel_error = rel_error;
  t.workspace_bytes = (size_t)engine * 1024 * 1024;
  t.deterministic = 1;
  return t;
}

/* SPEC's key gets 3 trials on DEVICE_A (a winner, cuDNN's heuristic pick, a
 * wrong one) and 1 on DEVICE_B (its winner). */
static int fill_cache(const char *path, char *key, size_t key_size) {
  conv_problem p;
  CHECK_STATUS(CONV_OK, conv_problem_parse(SPEC, &p, NULL, 0));
  CHECK_STATUS(CONV_OK, conv_problem_key(&p, key, key_size));
  remove_cache_files(path);
  conv_cache *cache = NULL;
  conv_error err = {CONV_OK, ""};
  CHECK_MSG(conv_cache_open(path, false, &cache, &err) == CONV_OK, "%s", err.message);
  conv_cache_key a = {key, DEVICE_A, VERSIONS}, b = {key, DEVICE_B, VERSIONS};
  conv_trial best = make_trial(12, "engine=12 knobs=3", CONV_OK, 0.25, 1e-7);
  conv_trial pick = make_trial(1, "engine=1 knobs=3", CONV_OK, 0.5, 2e-7);
  pick.heuristic_pick = true;
  pick.config.flags = CONV_CONFIG_HEURISTIC_RANKED;
  conv_trial wrong = make_trial(7, "engine=7 knobs=3", CONV_VALIDATION_FAILED, 0.125, 2e-2);
  snprintf(wrong.reason, sizeof wrong.reason, "relative error 2.0e-02 above bound 1.0e-05");
  conv_trial other = make_trial(5, "engine=5 knobs=3", CONV_OK, 0.75, 1e-7);
  conv_status st = conv_cache_begin_tuning(cache, &a, &err);
  if (st == CONV_OK) st = conv_cache_begin_tuning(cache, &b, &err);
  const conv_trial *on_a[] = {&best, &pick, &wrong};
  for (size_t i = 0; i < 3 && st == CONV_OK; i++) st = conv_cache_add_trial(cache, &a, on_a[i], &err);
  if (st == CONV_OK) st = conv_cache_set_winner(cache, &a, best.algorithm_id, &best.config, &err);
  if (st == CONV_OK) st = conv_cache_add_trial(cache, &b, &other, &err);
  if (st == CONV_OK) st = conv_cache_set_winner(cache, &b, other.algorithm_id, &other.config, &err);
  conv_cache_close(cache);
  CHECK_MSG(st == CONV_OK, "%s: %s", conv_status_string(st), err.message);
  return TEST_PASS;
}

/* ================================================================ CLI tests */

static int test_help_and_usage(void) {
  isolate_default_cache();
  static const char *const forms[][2] = {{"--help", NULL}, {"help", NULL}, {"-h", NULL},
                                         {"--json", "--help"}};
  for (size_t i = 0; i < sizeof forms / sizeof forms[0]; i++) {
    cli_result r;
    RUN_EXPECT(r, 0, forms[i][0], forms[i][1]);
    CHECK(contains(r.out.data, "tune"));
    CHECK(contains(r.out.data, "list"));
    CHECK(contains(r.out.data, "show"));
    CHECK(contains(r.out.data, "--cache"));
    CHECK(contains(r.out.data, "130"));
    CHECK_MSG(r.err.len == 0, "stderr: %s", r.err.data);
    cli_result_free(&r);
  }
  /* A command's help: its synopsis and its options only, before or after it. */
  static const char *const tune_forms[][2] = {{"tune", "--help"}, {"--help", "tune"}, {"tune", "-h"}};
  for (size_t i = 0; i < sizeof tune_forms / sizeof tune_forms[0]; i++) {
    cli_result r;
    RUN_EXPECT(r, 0, tune_forms[i][0], tune_forms[i][1]);
    CHECK_MSG(contains(r.out.data, "usage: convtune tune FILE|SHAPE...") &&
                  contains(r.out.data, "--policy") && contains(r.out.data, "--progress") &&
                  !contains(r.out.data, "--suite"),
              "%s", r.out.data);
    cli_result_free(&r);
  }
  cli_result r;
  RUN_EXPECT(r, 0, "show", "--help");
  CHECK_MSG(contains(r.out.data, "usage: convtune show SHAPE") && contains(r.out.data, "--suite") &&
                !contains(r.out.data, "--policy"),
            "%s", r.out.data);
  cli_result_free(&r);
  const char *none[] = {NULL};
  CHECK(run_cli(none, &r));
  CHECK(r.exit_status == 2);
  CHECK(r.out.len == 0);
  CHECK(contains(r.err.data, "--help"));
  cli_result_free(&r);
  /* --version and version: the library's version (the header's, in this
   * static build) and the versions text; no GPU needed. */
  char version[64];
  snprintf(version, sizeof version, "convtune %d.%d.%d\n", CONVTUNE_VERSION_MAJOR,
           CONVTUNE_VERSION_MINOR, CONVTUNE_VERSION_PATCH);
  static const char *const version_forms[] = {"--version", "version"};
  for (size_t i = 0; i < 2; i++) {
    RUN_EXPECT(r, 0, version_forms[i]);
    CHECK_MSG(strncmp(r.out.data, version, strlen(version)) == 0, "%s", r.out.data);
    CHECK_MSG(contains(r.out.data, conv_library_versions()), "%s", r.out.data);
    cli_result_free(&r);
  }
  return TEST_PASS;
}

static int test_bad_arguments(void) {
  isolate_default_cache();
  static const struct {
    const char *args[5];
    const char *message;
  } cases[] = {
      {{"frobnicate"}, "unknown command 'frobnicate'"},
      {{"list", "--bogus"}, "unknown option '--bogus'"},
      {{"list", "--cache"}, "needs a value"},
      {{"list", "--policy", "fast"}, "does not apply to 'list'"},
      {{"list", "extra"}, "list takes no arguments"},
      {{"tune"}, "at least one"},
      {{"tune", SPEC, "--math", "fp64"}, "--math"},
      {{"tune", SPEC, "--epilogue", "gelu"}, "--epilogue"},
      {{"tune", SPEC, "--direction", "up"}, "expected fwd, bwd_data or bwd_filter"},
      {{"tune", SPEC " dir=sideways"}, "dir=sideways: expected fwd, bwd_data or bwd_filter"},
      {{"tune", SPEC, "--policy=slow"}, "--policy"},
      {{"tune", SPEC, "--json=yes"}, "takes no value"},
      {{"tune", SPEC, "--progress", "sometimes"}, "expected auto, always or never"},
      {{"list", "--progress", "never"}, "does not apply to 'list'"},
      {{"show"}, "exactly one shape"},
      {{"show", SPEC, OTHER_SPEC}, "exactly one shape"},
      {{"tune", "/nonexistent/shapes.json"}, "cannot read"},
      {{"--policy", "fast", "list"}, "does not apply to 'list'"},
      {{"--json"}, "missing command"},
      {{"--cache"}, "missing command"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    cli_result r;
    CHECK(run_cli(cases[i].args, &r));
    CHECK_MSG(r.exit_status == 2, "case %zu (%s): exit %lld\n%s", i, cases[i].args[0],
              (long long)r.exit_status, r.err.data);
    CHECK_MSG(contains(r.err.data, cases[i].message), "case %zu: stderr lacks \"%s\":\n%s", i,
              cases[i].message, r.err.data);
    CHECK_MSG(contains(r.err.data, "--help"), "case %zu: no usage hint", i);
    CHECK_MSG(r.out.len == 0, "case %zu: stdout: %s", i, r.out.data);
    cli_result_free(&r);
  }
  return TEST_PASS;
}

static int test_bad_shape_spec(void) {
  isolate_default_cache();
  static const char *const specs[] = {"n=1 c=3 h=8 w=8 k=4 r=3 s=3 bogus=7",
                                      "n=1 c=three h=8 w=8 k=4 r=3 s=3", "n=1 c=3 h=8 w"};
  for (size_t i = 0; i < sizeof specs / sizeof specs[0]; i++) {
    conv_problem p;
    char message[512] = "";
    conv_status st = conv_problem_parse(specs[i], &p, message, sizeof message);
    CHECK_MSG(st != CONV_OK, "'%s' parsed", specs[i]);
    CHECK(message[0] != '\0');
    cli_result r;
    RUN_EXPECT(r, 2, "tune", specs[i]);
    CHECK_MSG(contains(r.err.data, message), "stderr lacks \"%s\":\n%s", message, r.err.data);
    CHECK(contains(r.err.data, specs[i]));
    CHECK(r.out.len == 0);
    cli_result_free(&r);
    RUN_EXPECT(r, 2, "show", specs[i], "--cache", "/nonexistent/cache.db");
    CHECK_MSG(contains(r.err.data, message), "stderr lacks \"%s\":\n%s", message, r.err.data);
    cli_result_free(&r);
  }
  return TEST_PASS;
}

static int test_no_gpu_tune_is_one_line(void) {
  isolate_default_cache();
  conv_context_options options;
  conv_context_options_init(&options);
  options.cache_path = ":memory:";
  conv_context *ctx = NULL;
  conv_status st = conv_context_create(&ctx, &options);
  if (st == CONV_OK) {
    conv_context_destroy(ctx);
    fprintf(stderr, "a CUDA GPU is usable here: the no-GPU message cannot be checked\n");
    return TEST_SKIP;
  }
  CHECK_MSG(st == CONV_NO_DEVICE, "conv_context_create: %s: %s", conv_status_string(st),
            conv_context_last_error(NULL));

  char db[1024], suite_file[1024];
  tmp_path(db, sizeof db, "nogpu.db");
  tmp_path(suite_file, sizeof suite_file, "nogpu.json");
  CHECK(write_file(suite_file, "[{\"name\": \"a\", \"N\": 1, \"C\": 4, \"H\": 8, \"W\": 8, "
                               "\"K\": 4, \"R\": 3, \"S\": 3},\n"
                               " {\"name\": \"d\", \"op\": \"dynamic\", \"N\": 1, \"C\": 4, "
                               "\"H\": 8, \"W\": 8, \"R\": 3},\n"
                               " {\"name\": \"f\", \"op\": \"deform\", \"N\": 1}]\n"));
  /* The progress line starts after the context: nothing of it here. */
  const char *variants[][7] = {{"tune", SPEC, "--cache", db, NULL},
                               {"tune", suite_file, SPEC, "--json", "--cache", db},
                               {"tune", SPEC, NULL},
                               {"tune", SPEC, "--progress=always", "--verbose", NULL}};
  for (size_t i = 0; i < sizeof variants / sizeof variants[0]; i++) {
    cli_result r;
    CHECK(run_cli(variants[i], &r));
    CHECK_MSG(r.exit_status == 3, "variant %zu: exit %lld\n%s", i, (long long)r.exit_status,
              r.err.data);
    CHECK_MSG(count_lines(r.err.data) == 1 && r.err.data[r.err.len - 1] == '\n',
              "variant %zu: stderr is not one line:\n%s", i, r.err.data);
    CHECK(strncmp(r.err.data, "convtune: no usable CUDA GPU: ", 30) == 0);
    CHECK_MSG(r.out.len == 0, "stdout: %s", r.out.data);
    cli_result_free(&r);
  }
  remove(suite_file);
  remove_cache_files(db);
  return TEST_PASS;
}

/* What tune writes on stderr, where a GPU tunes a shape: not a terminal, a
 * line per shape and nothing from the library; --verbose adds the
 * library's lines from the CLI's log callback (each candidate's outcome,
 * not the "timing" lines that feed the progress line); --progress=always
 * draws the progress line in place and leaves its last state. */
static int test_tune_messages(void) {
  isolate_default_cache();
  conv_context_options options;
  conv_context_options_init(&options);
  options.cache_path = ":memory:";
  conv_context *ctx = NULL;
  if (conv_context_create(&ctx, &options) != CONV_OK) {
    fprintf(stderr, "no usable CUDA GPU (%s): tune's messages cannot be checked\n",
            conv_context_last_error(NULL));
    return TEST_SKIP;
  }
  conv_context_destroy(ctx);
  char db[1024];
  tmp_path(db, sizeof db, "messages.db");
  static const char *const modes[][3] = {{"--progress=auto", NULL},
                                         {"--verbose", "--progress=never"},
                                         {"--progress=always", NULL}};
  for (size_t i = 0; i < sizeof modes / sizeof modes[0]; i++) {
    remove_cache_files(db);
    cli_result r;
    const char *args[] = {"tune", SPEC, "--policy", "fast", "--cache", db, modes[i][0], modes[i][1], NULL};
    CHECK(run_cli(args, &r));
    CHECK_MSG(r.exit_status == 0, "mode %zu: exit %lld\n%s", i, (long long)r.exit_status, r.err.data);
    CHECK(contains(r.out.data, "tuned"));
    CHECK_MSG(!contains(r.err.data, "timing "), "mode %zu:\n%s", i, r.err.data);
    if (i == 0) {
      CHECK_MSG(strcmp(r.err.data, "[1/1] " SPEC " ...\n") == 0, "stderr:\n%s", r.err.data);
    } else if (i == 1) {
      CHECK_MSG(strncmp(r.err.data, "[1/1] " SPEC " ...\ntuning fwd ", 11 + strlen(SPEC) + 11) == 0 &&
                    contains(r.err.data, "\n  ") && contains(r.err.data, "\ntuned in ") &&
                    contains(r.err.data, "fastest"),
                "stderr:\n%s", r.err.data);
    } else {
      CHECK_MSG(r.err.data[0] == '\r' && contains(r.err.data, "\x1b[K") &&
                    contains(r.err.data, "1/1  ") && contains(r.err.data, "done\x1b[K\n") &&
                    !contains(r.err.data, "[1/1]"),
                "stderr:\n%s", r.err.data);
    }
    cli_result_free(&r);
  }
  remove_cache_files(db);
  return TEST_PASS;
}

static int test_list_and_show_without_gpu(void) {
  isolate_default_cache();
  char db[1024], key[CONV_PROBLEM_KEY_MAX];
  tmp_path(db, sizeof db, "list.db");
  int rc = fill_cache(db, key, sizeof key);
  if (rc != TEST_PASS) return rc;
  cli_result r;

  RUN_EXPECT(r, 0, "list", "--cache", db);
  CHECK(contains(r.out.data, key));
  CHECK(contains(r.out.data, DEVICE_A));
  CHECK(contains(r.out.data, DEVICE_B));
  CHECK(contains(r.out.data, VERSIONS));
  CHECK(contains(r.out.data, "engine=12 knobs=3"));
  CHECK(contains(r.out.data, "engine=5 knobs=3"));
  CHECK(contains(r.out.data, "0.2500"));
  CHECK(!contains(r.out.data, "engine=7 knobs=3")); /* not a winner */
  cli_result_free(&r);

  RUN_EXPECT(r, 0, "show", SPEC, "--cache", db);
  CHECK(contains(r.out.data, key));
  CHECK(contains(r.out.data, DEVICE_A));
  CHECK(contains(r.out.data, DEVICE_B));
  CHECK(contains(r.out.data, "engine=12 knobs=3"));
  CHECK(contains(r.out.data, "engine=1 knobs=3"));
  CHECK(contains(r.out.data, "engine=7 knobs=3"));
  CHECK(contains(r.out.data, "VALIDATION_FAILED"));
  CHECK(contains(r.out.data, "relative error 2.0e-02 above bound 1.0e-05"));
  CHECK(contains(r.out.data, "12.0 MiB"));
  cli_result_free(&r);

  /* A suite name instead of a spec. */
  char suite_file[1024];
  tmp_path(suite_file, sizeof suite_file, "show-suite.json");
  CHECK(write_file(suite_file, "{\"shapes\": [{\"name\": \"tiny\", \"N\": 2, \"C\": 8, "
                               "\"H\": 12, \"W\": 12, \"K\": 16, \"R\": 3, \"S\": 3, "
                               "\"stride\": 1, \"pad\": 1, \"dil\": 1, \"groups\": 1}]}"));
  RUN_EXPECT(r, 0, "show", "tiny", "--suite", suite_file, "--cache", db);
  CHECK(contains(r.out.data, "engine=12 knobs=3"));
  cli_result_free(&r);
  remove(suite_file);

  /* Not in the cache: the math mode is part of the key. */
  RUN_EXPECT(r, 1, "show", SPEC, "--math", "tf32", "--cache", db);
  CHECK(r.out.len == 0);
  CHECK(count_lines(r.err.data) == 1);
  cli_result_free(&r);
  RUN_EXPECT(r, 1, "show", OTHER_SPEC, "--cache", db);
  cli_result_free(&r);

  /* The default path ($CONVTUNE_CACHE) when --cache is not given. */
  setenv("CONVTUNE_CACHE", db, 1);
  RUN_EXPECT(r, 0, "list");
  CHECK(contains(r.out.data, key));
  cli_result_free(&r);

  /* A missing cache is an error, and list does not create it. */
  char missing[1024];
  tmp_path(missing, sizeof missing, "missing.db");
  remove_cache_files(missing);
  RUN_EXPECT(r, 4, "list", "--cache", missing);
  CHECK(count_lines(r.err.data) == 1);
  CHECK(r.out.len == 0);
  CHECK(!file_exists(missing));
  cli_result_free(&r);
  RUN_EXPECT(r, 4, "show", SPEC, "--cache", missing);
  CHECK(!file_exists(missing));
  cli_result_free(&r);

  remove_cache_files(db);
  return TEST_PASS;
}

/* ================================================================ JSON */

static bool has_string(const json_t *obj, const char *key, const char *value) {
  const char *v = json_string_value(json_object_get(obj, key));
  return v != NULL && strcmp(v, value) == 0;
}

static bool is_true(const json_t *obj, const char *key) {
  return json_is_true(json_object_get(obj, key));
}

static int check_list_json(const char *text, const char *key) {
  json_error_t err;
  json_t *doc = json_load_strict(text, strlen(text), &err);
  CHECK_MSG(doc != NULL, "%d:%d: %s\n%s", err.line, err.column, err.text, text);
  bool ok = json_is_array(doc) && json_array_size(doc) == 2;
  for (size_t i = 0; ok && i < 2; i++) {
    const json_t *row = json_array_get(doc, i);
    ok = has_string(row, "problem", key) && has_string(row, "algorithm", "cudnn") &&
         has_string(row, "versions", VERSIONS) && json_is_number(json_object_get(row, "time_ms"));
  }
  ok = ok && has_string(json_array_get(doc, 0), "device", DEVICE_A) &&
       has_string(json_array_get(doc, 0), "config", "engine=12 knobs=3") &&
       json_number_value(json_object_get(json_array_get(doc, 0), "time_ms")) == 0.25;
  json_decref(doc);
  CHECK_MSG(ok, "unexpected list JSON:\n%s", text);
  return TEST_PASS;
}

static int check_show_json(const char *text, const char *key) {
  json_error_t err;
  json_t *doc = json_load_strict(text, strlen(text), &err);
  CHECK_MSG(doc != NULL, "%d:%d: %s\n%s", err.line, err.column, err.text, text);
  size_t winners = 0, picks = 0, failed = 0;
  bool ok = json_is_array(doc) && json_array_size(doc) == 4;
  for (size_t i = 0; ok && i < json_array_size(doc); i++) {
    const json_t *row = json_array_get(doc, i);
    ok = has_string(row, "problem", key) && json_object_get(row, "rel_error") != NULL;
    winners += is_true(row, "winner");
    picks += is_true(row, "heuristic_pick");
    if (has_string(row, "status", "VALIDATION_FAILED")) {
      failed++;
      ok = ok && has_string(row, "reason", "relative error 2.0e-02 above bound 1.0e-05");
    }
  }
  json_decref(doc);
  CHECK_MSG(ok && winners == 2 && picks == 1 && failed == 1, "unexpected show JSON:\n%s", text);
  return TEST_PASS;
}

/* The strict reading (json_load_strict): what it must refuse, where it
 * says the error is. */
static int check_parser(void) {
  static const char *const bad[] = {
      "", "[1,]", "{\"a\": 1,}", "[01]", "{'a': 1}", "[1] x", "\"\\x\"", "[\"a\tb\"]",
      "{\"a\": 1, \"a\": 2}", "nul", "[1e999]", "\"\\ud800\"", "\"\xff\"", "[-]", "[1.]",
      "{\"a\" 1}", "[1 2]", "NaN", "// c\n1", "\"\xc0\xaf\"", "\"\\udc00\"", "\"a\\u0000b\"",
      "\xef\xbb\xbf\xef\xbb\xbf[]",
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    json_error_t err;
    json_t *v = json_load_strict(bad[i], strlen(bad[i]), &err);
    CHECK_MSG(v == NULL, "accepted bad[%zu]: %s", i, bad[i]);
    CHECK(err.text[0] != '\0');
  }
  json_error_t err;
  const char *where = "[1,\n  2,\n  x]";
  CHECK(json_load_strict(where, strlen(where), &err) == NULL);
  CHECK_MSG(err.line == 3 && err.column == 3, "error at %d:%d: %s", err.line, err.column,
            err.text);

  /* Nesting past jansson's limit is an error, not a deep recursion. */
  static char deep[2 * (JSON_PARSER_MAX_DEPTH + 1)];
  for (int depth = JSON_PARSER_MAX_DEPTH; depth <= JSON_PARSER_MAX_DEPTH + 1; depth++) {
    memset(deep, '[', (size_t)depth);
    memset(deep + depth, ']', (size_t)depth);
    json_t *v = json_load_strict(deep, 2 * (size_t)depth, &err);
    CHECK_MSG((v != NULL) == (depth == JSON_PARSER_MAX_DEPTH), "depth %d: %s", depth, err.text);
    json_decref(v);
  }

  const char *good = "\xef\xbb\xbf {\"s\": \"\\u00e9\\ud83d\\ude00\\n\\\"\", \"n\": -0.5e+2, "
                     "\"a\": [true, false, null, {}], \"z\": 0} ";
  json_t *v = json_load_strict(good, strlen(good), &err);
  CHECK_MSG(v != NULL, "%s", err.text);
  const char *s = json_string_value(json_object_get(v, "s"));
  CHECK(s != NULL && strcmp(s, "\xc3\xa9\xf0\x9f\x98\x80\n\"") == 0);
  CHECK(json_number_value(json_object_get(v, "n")) == -50.0);
  CHECK(json_array_size(json_object_get(v, "a")) == 4);
  CHECK(json_object_get(v, "missing") == NULL);
  json_decref(v);
  return TEST_PASS;
}

/* json_write_string / json_write_number read back through jansson. */
static int check_writer(void) {
  FILE *f = tmpfile();
  CHECK(f != NULL);
  const char *nasty = "q\"b\\s/\n\t\x01 \xc3\xa9";
  fputc('[', f);
  json_write_string(f, nasty);
  fputc(',', f);
  json_write_number(f, 0.1);
  fputc(',', f);
  json_write_number(f, 1.0 / 3.0);
  fputc(']', f);
  long size = ftell(f);
  CHECK(size > 0);
  rewind(f);
  char text[256];
  size_t n = fread(text, 1, sizeof text - 1, f);
  fclose(f);
  CHECK(n == (size_t)size);
  text[n] = '\0';
  json_error_t err;
  json_t *v = json_load_strict(text, n, &err);
  CHECK_MSG(v != NULL, "%s: %s", text, err.text);
  const char *s = json_string_value(json_array_get(v, 0));
  CHECK(s != NULL && strcmp(s, nasty) == 0);
  CHECK(json_number_value(json_array_get(v, 1)) == 0.1);
  CHECK(json_number_value(json_array_get(v, 2)) == 1.0 / 3.0);
  json_decref(v);
  return TEST_PASS;
}

static int test_json_output(void) {
  isolate_default_cache();
  int rc = check_parser();
  if (rc == TEST_PASS) rc = check_writer();
  if (rc != TEST_PASS) return rc;

  char db[1024], key[CONV_PROBLEM_KEY_MAX];
  tmp_path(db, sizeof db, "json.db");
  rc = fill_cache(db, key, sizeof key);
  if (rc != TEST_PASS) return rc;
  cli_result r;
  RUN_EXPECT(r, 0, "list", "--json", "--cache", db);
  rc = check_list_json(r.out.data, key);
  cli_result_free(&r);
  if (rc != TEST_PASS) return rc;

  RUN_EXPECT(r, 0, "show", SPEC, "--json", "--cache", db);
  rc = check_show_json(r.out.data, key);
  cli_result_free(&r);
  if (rc != TEST_PASS) return rc;

  /* Nothing found: still a valid (empty) array on stdout. */
  RUN_EXPECT(r, 1, "show", OTHER_SPEC, "--json", "--cache", db);
  json_t *v = json_load_strict(r.out.data, r.out.len, NULL);
  CHECK_MSG(v != NULL, "%s", r.out.data);
  CHECK(json_is_array(v) && json_array_size(v) == 0);
  json_decref(v);
  cli_result_free(&r);
  remove_cache_files(db);
  return TEST_PASS;
}

/* ================================================================ suites */

static const char SUITE_TEXT[] =
    "{\n"
    " \"shapes\": [\n"
    "  {\"name\": \"rn50_conv2_3x3\", \"N\": 32, \"C\": 64, \"H\": 56, \"W\": 56, \"K\": 64,\n"
    "   \"R\": 3, \"S\": 3, \"stride\": 1, \"pad\": 1, \"dil\": 1, \"groups\": 1,\n"
    "   \"why\": \"resnet\", \"bwd\": true, \"patch_unfold\": false},\n"
    "  {\"name\": \"involution_7x7\", \"op\": \"dynamic\", \"N\": 32, \"C\": 64, \"H\": 56,\n"
    "   \"W\": 56, \"R\": 7, \"S\": 7, \"groups\": 4},\n"
    "  {\"name\": \"mbv2_dw_s2\", \"op\": \"conv\", \"N\": 8, \"C\": 96, \"H\": 112,\n"
    "   \"W\": 112, \"K\": 96, \"R\": 3, \"S\": 3, \"stride\": 2, \"pad\": [1, 0],\n"
    "   \"dil\": 1, \"groups\": 96, \"math\": \"tf32\"},\n"
    "  {\"name\": \"warp\", \"op\": \"deform\", \"N\": 1}\n"
    " ]\n"
    "}\n";

static int check_suite_rows(const suite *s) {
  CHECK(s->count == 3);
  const suite_shape *a = &s->shapes[0], *d = &s->shapes[1], *b = &s->shapes[2];
  CHECK(strcmp(a->name, "rn50_conv2_3x3") == 0);
  CHECK(a->problem.n == 32 && a->problem.c == 64 && a->problem.h == 56 && a->problem.w == 56);
  CHECK(a->problem.k == 64 && a->problem.r == 3 && a->problem.s == 3);
  CHECK(a->problem.pad_h == 1 && a->problem.pad_w == 1 && a->problem.stride_h == 1);
  CHECK(a->problem.dil_h == 1 && a->problem.groups == 1);
  CHECK(a->problem.math == CONV_MATH_STRICT && a->problem.epilogue == CONV_EPILOGUE_NONE);
  /* A dynamic row: K, S and the 'same' padding filled in. */
  CHECK(strcmp(d->name, "involution_7x7") == 0 && d->problem.op == CONV_OP_DYNAMIC);
  CHECK(d->problem.n == 32 && d->problem.c == 64 && d->problem.k == 64 && d->problem.h == 56);
  CHECK(d->problem.r == 7 && d->problem.s == 7 && d->problem.groups == 4);
  CHECK(d->problem.pad_h == 3 && d->problem.pad_w == 3 && d->problem.stride_h == 1);
  CHECK(a->problem.op == CONV_OP_CONVOLUTION && b->problem.op == CONV_OP_CONVOLUTION);
  CHECK(strcmp(b->name, "mbv2_dw_s2") == 0);
  CHECK(b->problem.stride_h == 2 && b->problem.stride_w == 2);
  CHECK(b->problem.pad_h == 1 && b->problem.pad_w == 0);
  CHECK(b->problem.groups == 96 && b->problem.math == CONV_MATH_TF32);
  CHECK(s->note_count == 1);
  CHECK_MSG(strcmp(s->notes[0], "skipping warp: op 'deform' is not supported yet") == 0,
            "note: %s", s->notes[0]);
  return TEST_PASS;
}

/* A document suite_parse must refuse, what its message must say and where
 * it places it. */
static int check_suite_error(const char *text, const char *what, int line, int column) {
  suite s;
  suite_init(&s);
  suite_error err;
  bool ok = suite_parse(text, strlen(text), &s, &err);
  suite_free(&s);
  CHECK_MSG(!ok, "accepted: %s", text);
  CHECK_MSG(contains(err.message, what), "message \"%s\" lacks \"%s\"", err.message, what);
  CHECK_MSG(err.line == line && err.column == column, "at %d:%d, expected %d:%d (%s)", err.line,
            err.column, line, column, err.message);
  return TEST_PASS;
}

static int check_suite_errors(void) {
  static const struct {
    const char *text, *what;
    int line, column;
  } cases[] = {
      {"{\"shapes\": [{\"name\": \"x\", \"N\": 1, \"C\": 1, \"H\": 1,\n \"W\": 1, \"R\": 1, "
       "\"S\": 1}]}",
       "missing \"K\"", 1, 13},
      {"[{\"name\": \"x\", \"N\": 1.5, \"C\": 1, \"H\": 1, \"W\": 1, \"K\": 1, \"R\": 1, "
       "\"S\": 1}]",
       "\"N\" must be an integer", 1, 21},
      {"[{\"name\": \"x\", \"N\": 1, \"C\": 1, \"H\": 1, \"W\": 1, \"K\": 1, \"R\": 1, "
       "\"S\": 1,\n \"pad\": \"1\"}]",
       "\"pad\"", 2, 9},
      {"[{\"N\": 1}]", "missing \"name\"", 1, 2},
      {"{\"shapes\": 3}", "got number", 1, 12},
      {"{\"rows\": []}", "missing \"shapes\"", 1, 1},
      {"[{\"name\": \"x\", \"op\": 7}]", "\"op\" must be a string", 1, 22},
      /* A trailing comma: jansson's words, where it stopped reading. */
      {"{\"shapes\": [\n  {\"name\": \"x\",}\n]}", "string or '}' expected near '}'", 2, 16},
      /* Placed past strings holding brackets, quotes and commas, a nested
       * member and an escaped key; the column counts characters. */
      {"{\"why\": \"a \\\"}], [\\\" b\", \"shapes\": [\n"
       " {\"name\": \"ok\", \"N\": 1, \"C\": 1, \"H\": 1, \"W\": 1, \"K\": 1, \"R\": 1, \"S\": 1},\n"
       " {\"name\": \"\xc3\xa9\\\"]\", \"note\": {\"x\": [1, {\"y\": \"}\"}]}, \"N\": 1, \"C\": 1,"
       " \"H\": 1, \"W\": 1, \"K\": 1, \"R\": 1, \"\\u0053\": 1.5}]}",
       "shape 1 (\"\xc3\xa9\"]\"): \"S\" must be an integer", 3, 109},
      /* Rows are validated as problems, naming the field. */
      {"[{\"name\": \"x\", \"N\": 1, \"C\": 1, \"H\": 1, \"W\": 1, \"K\": 1, \"R\": 1, \"S\": 1},\n"
       " {\"name\": \"neg\", \"N\": -1, \"C\": 1, \"H\": 1, \"W\": 1, \"K\": 1, \"R\": 1, \"S\": 1}]",
       "shape 1 (\"neg\"): n = -1: must be at least 1", 2, 2},
      {"[{\"name\": \"huge\", \"N\": 1, \"C\": 1, \"H\": 9007199254740992, \"W\": 1, \"K\": 1,"
       " \"R\": 1, \"S\": 1}]",
       "h = 9007199254740992: larger than", 1, 2},
      {"[{\"name\": \"g\", \"N\": 1, \"C\": 4, \"H\": 4, \"W\": 4, \"K\": 6, \"R\": 1, \"S\": 1,"
       " \"groups\": 4}]",
       "groups = 4 must be positive and divide", 1, 2},
      /* Dynamic rows are judged as dynamic problems. */
      {"[{\"name\": \"d\", \"op\": \"dynamic\", \"N\": 1, \"C\": 4, \"H\": 8, \"W\": 8,"
       " \"R\": 4}]",
       "k = 4 is even", 1, 2},
      {"[{\"name\": \"d\", \"op\": \"dynamic\", \"N\": 1, \"C\": 4, \"H\": 8, \"W\": 8,"
       " \"R\": 3, \"K\": 8}]",
       "must equal c = 4", 1, 2},
      {"[{\"name\": \"d\", \"op\": \"dynamic\", \"N\": 1, \"C\": 4, \"H\": 8, \"W\": 8,"
       " \"R\": 3, \"pad\": 0}]",
       "pad 0,0 must be", 1, 2},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    int rc = check_suite_error(cases[i].text, cases[i].what, cases[i].line, cases[i].column);
    if (rc != TEST_PASS) return rc;
  }
  return TEST_PASS;
}

static int test_suite_file_parsing(void) {
  isolate_default_cache();
  char path[1024];
  tmp_path(path, sizeof path, "suite.json");
  CHECK(write_file(path, SUITE_TEXT));
  suite s;
  suite_init(&s);
  char message[1024];
  CHECK_MSG(suite_load(path, &s, message, sizeof message), "%s", message);
  int rc = check_suite_rows(&s);
  suite_free(&s);
  if (rc != TEST_PASS) return rc;

  /* A top-level array of rows. */
  const char *array = "[{\"name\": \"one\", \"N\": 1, \"C\": 2, \"H\": 3, \"W\": 4, \"K\": 5, "
                      "\"R\": 1, \"S\": 1}]";
  suite_error err;
  CHECK_MSG(suite_parse(array, strlen(array), &s, &err), "%s", err.message);
  CHECK(s.count == 1 && strcmp(s.shapes[0].name, "one") == 0 && s.shapes[0].problem.k == 5);
  CHECK(s.shapes[0].problem.stride_w == 1 && s.shapes[0].problem.pad_w == 0);
  suite_free(&s);
  rc = check_suite_errors();
  if (rc != TEST_PASS) return rc;

  /* The CLI: a malformed file is a usage error that says where. */
  char bad[1024];
  tmp_path(bad, sizeof bad, "bad-suite.json");
  CHECK(write_file(bad, "{\"shapes\": [\n  {\"name\": \"x\" \"N\": 1}\n]}\n"));
  cli_result r;
  RUN_EXPECT(r, 2, "tune", bad, "--cache", "/nonexistent/cache.db");
  char where[1100];
  snprintf(where, sizeof where, "%s:2:", bad);
  CHECK_MSG(contains(r.err.data, where), "stderr lacks \"%s\":\n%s", where, r.err.data);
  cli_result_free(&r);
  remove(bad);

  /* Only skipped rows: the note, nothing to tune, no GPU touched. */
  char dyn[1024];
  tmp_path(dyn, sizeof dyn, "dynamic-suite.json");
  CHECK(write_file(dyn, "[{\"name\": \"warp\", \"op\": \"deform\", \"N\": 1}]"));
  RUN_EXPECT(r, 0, "tune", dyn, "--cache", "/nonexistent/cache.db");
  CHECK(contains(r.err.data, "skipping warp: op 'deform' is not supported yet"));
  CHECK(r.out.len == 0);
  cli_result_free(&r);
  remove(dyn);
  remove(path);
  return TEST_PASS;
}

/* ================================================================ sharing caches */

/* export (one device), merge and import, as a user ships a cache; and
 * their usage errors. */
static int test_share_caches(void) {
  isolate_default_cache();
  char db[1024], exported[1024], merged[1024], imported[1024], key[CONV_PROBLEM_KEY_MAX];
  tmp_path(db, sizeof db, "share.db");
  tmp_path(exported, sizeof exported, "share-exported.db");
  tmp_path(merged, sizeof merged, "share-merged.db");
  tmp_path(imported, sizeof imported, "share-imported.db");
  remove_cache_files(exported);
  remove_cache_files(merged);
  remove_cache_files(imported);
  int rc = fill_cache(db, key, sizeof key);
  if (rc != TEST_PASS) return rc;
  cli_result r;

  RUN_EXPECT(r, 0, "export", "-o", exported, "--device", DEVICE_A, "--cache", db);
  CHECK_MSG(contains(r.out.data, "1 tuning added"), "%s", r.out.data);
  cli_result_free(&r);
  RUN_EXPECT(r, 0, "list", "--cache", exported);
  CHECK(contains(r.out.data, DEVICE_A) && !contains(r.out.data, DEVICE_B));
  CHECK(contains(r.out.data, "engine=12 knobs=3"));
  cli_result_free(&r);

  RUN_EXPECT(r, 0, "merge", db, exported, "-o", merged);
  CHECK_MSG(contains(r.out.data, "2 tunings added") && contains(r.out.data, "1 kept"), "%s",
            r.out.data);
  cli_result_free(&r);
  RUN_EXPECT(r, 0, "list", "--cache", merged);
  CHECK(contains(r.out.data, DEVICE_A) && contains(r.out.data, DEVICE_B));
  cli_result_free(&r);
  /* Every trial came along, cuDNN's pick and the failed one included. */
  RUN_EXPECT(r, 0, "show", SPEC, "--cache", merged);
  CHECK(contains(r.out.data, "engine=1 knobs=3") && contains(r.out.data, "VALIDATION_FAILED"));
  cli_result_free(&r);

  /* Shipped read-only, imported as it is. */
  CHECK(chmod(exported, 0444) == 0);
  RUN_EXPECT(r, 0, "import", exported, "--cache", imported);
  CHECK(contains(r.out.data, "1 tuning added"));
  cli_result_free(&r);
  RUN_EXPECT(r, 0, "list", "--cache", imported);
  CHECK(contains(r.out.data, DEVICE_A) && !contains(r.out.data, DEVICE_B));
  cli_result_free(&r);

  RUN_EXPECT(r, 2, "merge", "-o", merged);
  CHECK(contains(r.err.data, "at least one cache file"));
  cli_result_free(&r);
  RUN_EXPECT(r, 2, "export", "--cache", db);
  CHECK(contains(r.err.data, "needs -o FILE"));
  cli_result_free(&r);
  RUN_EXPECT(r, 2, "merge", merged, "-o", merged);
  CHECK(contains(r.err.data, "merged into"));
  cli_result_free(&r);
  RUN_EXPECT(r, 2, "list", "--device", DEVICE_A, "--cache", db);
  cli_result_free(&r);
  RUN_EXPECT(r, 4, "import", "/nonexistent/convtune.db", "--cache", imported);
  CHECK(contains(r.err.data, "/nonexistent/convtune.db"));
  cli_result_free(&r);
  chmod(exported, 0644);
  remove_cache_files(db);
  remove_cache_files(exported);
  remove_cache_files(merged);
  remove_cache_files(imported);
  return TEST_PASS;
}

/* ================================================================ hostile strings */

/* Strings a hostile (or merely broken) cache may hold: terminal escape
 * sequences (CSI, OSC with BEL, C1 CSI), line breaks, DEL, and bytes that
 * are not UTF-8; "é" is valid text and must survive. */
#define EVIL_ALGORITHM "cudnn\x1b[2J"
#define EVIL_CONFIG "engine=1\x1b]0;pwned\x07 \x7f"
#define EVIL_REASON "first\nsecond\r\x1b[31mred"
#define EVIL_DEVICE "GPU \xc3\xa9 \xc2\x9b" "31m|sm90"
#define EVIL_VERSIONS "cuda=1 \xff\xfe \xc0\xaf \x80"

/* The offset of the first byte a terminal would act on or that is not
 * UTF-8 (newlines aside), or -1 when the text is safe to print. */
static long first_unsafe_byte(const char *text) {
  const unsigned char *s = (const unsigned char *)text;
  size_t len = strlen(text);
  for (size_t i = 0; i < len;) {
    if (s[i] == '\n' || (s[i] >= 0x20 && s[i] < 0x7f)) {
      i++;
      continue;
    }
    size_t n = s[i] >= 0x80 ? utf8_sequence_length(s + i, len - i) : 0;
    if (n == 0 || (n == 2 && utf8_decode(s + i, 2) <= 0x9f)) return (long)i;
    i += n;
  }
  return -1;
}

static int fill_hostile_cache(const char *path, char *key, size_t key_size) {
  conv_problem p;
  CHECK_STATUS(CONV_OK, conv_problem_parse(SPEC, &p, NULL, 0));
  CHECK_STATUS(CONV_OK, conv_problem_key(&p, key, key_size));
  remove_cache_files(path);
  conv_cache *cache = NULL;
  conv_error err = {CONV_OK, ""};
  CHECK_MSG(conv_cache_open(path, false, &cache, &err) == CONV_OK, "%s", err.message);
  conv_cache_key k = {key, EVIL_DEVICE, EVIL_VERSIONS};
  conv_trial t = make_trial(3, EVIL_CONFIG, CONV_VALIDATION_FAILED, 0.5, 1e-2);
  snprintf(t.algorithm, sizeof t.algorithm, "%s", EVIL_ALGORITHM);
  snprintf(t.reason, sizeof t.reason, "%s", EVIL_REASON);
  conv_trial best = make_trial(4, EVIL_CONFIG, CONV_OK, 0.25, 1e-7);
  snprintf(best.algorithm, sizeof best.algorithm, "%s", EVIL_ALGORITHM);
  conv_status st = conv_cache_add_trial(cache, &k, &t, &err);
  if (st == CONV_OK) st = conv_cache_add_trial(cache, &k, &best, &err);
  if (st == CONV_OK) st = conv_cache_set_winner(cache, &k, best.algorithm_id, &best.config, &err);
  conv_cache_close(cache);
  CHECK_MSG(st == CONV_OK, "%s", err.message);
  return TEST_PASS;
}

/* list and show print a hostile cache's strings escaped ("\x1b"), one
 * line per row, and their --json output stays valid JSON. */
static int test_hostile_cache_strings(void) {
  isolate_default_cache();
  char db[1024], key[CONV_PROBLEM_KEY_MAX];
  tmp_path(db, sizeof db, "hostile.db");
  int rc = fill_hostile_cache(db, key, sizeof key);
  if (rc != TEST_PASS) return rc;
  const char *const commands[][6] = {{"list", "--cache", db, NULL},
                                     {"show", SPEC, "--cache", db, NULL}};
  for (size_t i = 0; i < 2; i++) {
    cli_result r;
    CHECK(run_cli(commands[i], &r));
    CHECK_MSG(r.exit_status == 0, "%s: exit %lld\n%s", commands[i][0], (long long)r.exit_status,
              r.err.data);
    long bad = first_unsafe_byte(r.out.data);
    CHECK_MSG(bad < 0, "%s printed byte 0x%02x raw at %ld:\n%s", commands[i][0],
              (unsigned char)r.out.data[bad], bad, r.out.data);
    CHECK_MSG(contains(r.out.data, "cudnn\\x1b[2J"), "%s", r.out.data);
    CHECK_MSG(contains(r.out.data, "GPU \xc3\xa9 \\xc2\\x9b31m"), "%s", r.out.data);
    CHECK_MSG(contains(r.out.data, "cuda=1 \\xff\\xfe \\xc0\\xaf \\x80"), "%s", r.out.data);
    if (i == 1) CHECK_MSG(contains(r.out.data, "first second \\x1b[31mred"), "%s", r.out.data);
    cli_result_free(&r);
  }
  static const char *const json_commands[][7] = {{"list", "--json", "--cache", NULL},
                                                 {"show", SPEC, "--json", "--cache", NULL}};
  for (size_t i = 0; i < 2; i++) {
    const char *args[7];
    size_t n = 0;
    for (; json_commands[i][n] != NULL; n++) args[n] = json_commands[i][n];
    args[n++] = db;
    args[n] = NULL;
    cli_result r;
    CHECK(run_cli(args, &r));
    CHECK(r.exit_status == 0);
    json_error_t err;
    json_t *doc = json_load_strict(r.out.data, r.out.len, &err);
    CHECK_MSG(doc != NULL, "%s --json is not JSON: %d:%d: %s\n%s", args[0], err.line, err.column,
              err.text, r.out.data);
    const json_t *row = json_array_get(doc, 0);
    bool ok = has_string(row, "algorithm", EVIL_ALGORITHM) && has_string(row, "config", EVIL_CONFIG) &&
              has_string(row, "device", EVIL_DEVICE) &&
              has_string(row, "versions", "cuda=1 \xef\xbf\xbd\xef\xbf\xbd \xef\xbf\xbd\xef\xbf\xbd \xef\xbf\xbd");
    json_decref(doc);
    CHECK_MSG(ok, "%s --json lost or changed a string:\n%s", args[0], r.out.data);
    cli_result_free(&r);
  }
  remove_cache_files(db);

  /* A shape spec with an escape sequence is echoed escaped. */
  cli_result r;
  RUN_EXPECT(r, 2, "tune", "n=1 c=1\x1b[2J h=4", "--cache", "/nonexistent/cache.db");
  CHECK_MSG(first_unsafe_byte(r.err.data) < 0, "raw byte in:\n%s", r.err.data);
  CHECK_MSG(contains(r.err.data, "'n=1 c=1\\x1b[2J h=4'"), "%s", r.err.data);
  cli_result_free(&r);
  return TEST_PASS;
}

/* A FIFO would block a reader forever and a directory is no file: as a
 * suite, a --suite or a --cache each is refused at once with what it is. */
static int test_special_files(void) {
  isolate_default_cache();
  char fifo[1024], dir[1024];
  tmp_path(fifo, sizeof fifo, "fifo");
  tmp_path(dir, sizeof dir, "dir");
  remove(fifo);
  CHECK_MSG(mkfifo(fifo, 0600) == 0, "mkfifo %s: %s", fifo, strerror(errno));
  CHECK_MSG(mkdir(dir, 0700) == 0 || errno == EEXIST, "mkdir %s: %s", dir, strerror(errno));
  static const struct {
    const char *args[7];
    int exit_status;
    const char *message;
  } cases[] = {
      {{"tune", "@FIFO", "--cache", "/nonexistent/cache.db"}, 2, "not a regular file"},
      {{"show", "x", "--suite", "@FIFO", "--cache", "/nonexistent/cache.db"}, 2, "not a regular file"},
      {{"list", "--cache", "@FIFO"}, 4, "not a regular file"},
      {{"show", SPEC, "--cache", "@FIFO"}, 4, "not a regular file"},
      {{"tune", "@DIR", "--cache", "/nonexistent/cache.db"}, 2, "is a directory"},
      {{"list", "--cache", "@DIR"}, 4, "is a directory"},
      {{"show", SPEC, "--json", "--cache", "@DIR"}, 4, "is a directory"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    const char *args[8] = {NULL};
    for (size_t j = 0; cases[i].args[j] != NULL; j++) {
      const char *a = cases[i].args[j];
      args[j] = strcmp(a, "@FIFO") == 0 ? fifo : strcmp(a, "@DIR") == 0 ? dir : a;
    }
    cli_result r;
    CHECK(run_cli(args, &r));
    CHECK_MSG(r.exit_status == cases[i].exit_status && contains(r.err.data, cases[i].message),
              "case %zu: exit %lld, expected %d and \"%s\":\n%s", i, (long long)r.exit_status,
              cases[i].exit_status, cases[i].message, r.err.data);
    CHECK_MSG(count_lines(r.err.data) <= 2, "case %zu: %s", i, r.err.data);
    cli_result_free(&r);
  }
  remove(fifo);
  rmdir(dir);
  return TEST_PASS;
}

/* ================================================================ read-only caches */

static bool copy_executable(const char *from, const char *to) {
  FILE *in = fopen(from, "rb"), *out = fopen(to, "wb");
  bool ok = in != NULL && out != NULL;
  char buf[1 << 16];
  size_t n;
  while (ok && (n = fread(buf, 1, sizeof buf, in)) > 0) ok = fwrite(buf, 1, n, out) == n;
  ok = ok && !ferror(in);
  if (in != NULL) fclose(in);
  if (out != NULL && fclose(out) != 0) ok = false;
  return ok && chmod(to, 0755) == 0;
}

/* The names in dir, sorted and joined by '/', into out. */
static bool list_dir(const char *dir, char *out, size_t size) {
  struct dirent **names = NULL;
  int n = scandir(dir, &names, NULL, alphasort);
  if (n < 0) return false;
  out[0] = '\0';
  for (int i = 0; i < n; i++) {
    strncat(out, names[i]->d_name, size - strlen(out) - 2);
    strcat(out, "/");
    free(names[i]);
  }
  free(names);
  return true;
}

/* A cache shipped read-only (file 0444 in a directory 0555, as under
 * /usr/share) is read by list and show as any user, and nothing is written
 * beside it.  Root may write anywhere, so as root the CLI runs as nobody. */
static int read_only_cache_in(const char *dir, int uid) {
  char db[1024], cli[1024], key[CONV_PROBLEM_KEY_MAX], before[4096], after[4096];
  snprintf(db, sizeof db, "%s/cache.db", dir);
  snprintf(cli, sizeof cli, "%s/convtune", dir); /* where that user can run it */
  CHECK(cli_path() != NULL && copy_executable(cli_path(), cli));
  int rc = fill_cache(db, key, sizeof key);
  if (rc != TEST_PASS) return rc;
  CHECK(chmod(db, 0444) == 0 && chmod(dir, 0555) == 0);
  CHECK(list_dir(dir, before, sizeof before));

  const char *help[] = {"--help", NULL};
  cli_result r;
  if (!run_program(cli, help, uid, &r) || r.exit_status != 0) {
    cli_result_free(&r);
    printf("SKIPPED: cannot run the CLI as user %d here\n", uid);
    return TEST_SKIP;
  }
  cli_result_free(&r);
  const char *list[] = {"list", "--cache", db, NULL};
  CHECK(run_program(cli, list, uid, &r));
  CHECK_MSG(r.exit_status == 0, "list: exit %lld: %s", (long long)r.exit_status, r.err.data);
  CHECK(contains(r.out.data, key) && contains(r.out.data, DEVICE_B));
  cli_result_free(&r);
  const char *show[] = {"show", SPEC, "--json", "--cache", db, NULL};
  CHECK(run_program(cli, show, uid, &r));
  CHECK_MSG(r.exit_status == 0, "show: exit %lld: %s", (long long)r.exit_status, r.err.data);
  CHECK(contains(r.out.data, "VALIDATION_FAILED"));
  cli_result_free(&r);
  CHECK(list_dir(dir, after, sizeof after));
  CHECK_MSG(strcmp(before, after) == 0, "files beside the cache: before %s, after %s", before,
            after);
  return TEST_PASS;
}

static int test_read_only_cache(void) {
  isolate_default_cache();
  int uid = geteuid() == 0 ? 65534 : -1;
  char dir[] = "/tmp/convtune-ro-XXXXXX"; /* a place every user can reach */
  CHECK(mkdtemp(dir) != NULL && chmod(dir, 0755) == 0);
  int rc = read_only_cache_in(dir, uid);
  char path[1100];
  chmod(dir, 0755);
  static const char *const names[] = {"convtune", "cache.db", "cache.db-wal", "cache.db-shm"};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
    snprintf(path, sizeof path, "%s/%s", dir, names[i]);
    remove(path);
  }
  CHECK_MSG(rmdir(dir) == 0, "%s left behind: %s", dir, strerror(errno));
  return rc;
}

/* `args` (a show command) exits 0 and prints `key` with the trial `want`,
 * and not the trial `unwanted` (another key's). */
static int show_finds(const char *const args[], const char *key, const char *want,
                      const char *unwanted) {
  cli_result r;
  CHECK(run_cli(args, &r));
  CHECK_MSG(r.exit_status == 0, "%s %s: exit %lld\n%s", args[0], args[1], (long long)r.exit_status,
            r.err.data);
  CHECK_MSG(contains(r.out.data, key) && contains(r.out.data, want) && !contains(r.out.data, unwanted),
            "%s %s:\n%s", args[0], args[1], r.out.data);
  cli_result_free(&r);
  return TEST_PASS;
}

/* A backward pass is its own problem in the cache: show finds its trials
 * through --direction, dir= in a spec or "dir" in a suite row, and the
 * forward problem's stay apart. */
static int test_show_by_direction(void) {
  isolate_default_cache();
  char db[1024], key[CONV_PROBLEM_KEY_MAX], bwd_key[CONV_PROBLEM_KEY_MAX];
  tmp_path(db, sizeof db, "direction.db");
  int rc = fill_cache(db, key, sizeof key);
  if (rc != TEST_PASS) return rc;
  conv_problem p;
  CHECK_STATUS(CONV_OK, conv_problem_parse(SPEC " dir=bwd_filter", &p, NULL, 0));
  CHECK_STATUS(CONV_OK, conv_problem_key(&p, bwd_key, sizeof bwd_key));
  CHECK(strncmp(bwd_key, "bwd_filter ", 11) == 0 && strcmp(bwd_key + 11, key + 4) == 0);
  conv_cache *cache = NULL;
  conv_error err = {CONV_OK, ""};
  CHECK_MSG(conv_cache_open(db, false, &cache, &err) == CONV_OK, "%s", err.message);
  conv_cache_key k = {bwd_key, DEVICE_A, VERSIONS};
  conv_trial t = make_trial(40, "engine=40 knobs=3", CONV_OK, 1.5, 3e-6);
  conv_status st = conv_cache_begin_tuning(cache, &k, &err);
  if (st == CONV_OK) st = conv_cache_add_trial(cache, &k, &t, &err);
  if (st == CONV_OK) st = conv_cache_set_winner(cache, &k, t.algorithm_id, &t.config, &err);
  conv_cache_close(cache);
  CHECK_MSG(st == CONV_OK, "%s", err.message);

  char suite_file[1024];
  tmp_path(suite_file, sizeof suite_file, "direction-suite.json");
  CHECK(write_file(suite_file, "[{\"name\": \"tiny_dw\", \"N\": 2, \"C\": 8, \"H\": 12, \"W\": 12,"
                               " \"K\": 16, \"R\": 3, \"S\": 3, \"pad\": 1, \"dir\": \"bwd_filter\"}]"));
  const char *const backward[][8] = {
      {"show", SPEC, "--direction", "bwd_filter", "--cache", db, NULL},
      {"show", SPEC " dir=bwd_filter", "--cache", db, NULL},
      {"show", "tiny_dw", "--suite", suite_file, "--cache", db, NULL},
  };
  for (size_t i = 0; i < sizeof backward / sizeof backward[0]; i++)
    if (show_finds(backward[i], bwd_key, "engine=40 knobs=3", "engine=12 knobs=3") != TEST_PASS)
      return TEST_FAIL;
  cli_result r;
  RUN_EXPECT(r, 0, "show", SPEC, "--cache", db);
  CHECK(contains(r.out.data, "engine=12 knobs=3") && !contains(r.out.data, "engine=40 knobs=3"));
  cli_result_free(&r);
  RUN_EXPECT(r, 0, "list", "--cache", db);
  CHECK(contains(r.out.data, bwd_key) && contains(r.out.data, key));
  /* Options may come before the command, with the same output. */
  cli_result before;
  RUN_EXPECT(before, 0, "--cache", db, "list");
  CHECK_MSG(before.out.len == r.out.len && memcmp(before.out.data, r.out.data, r.out.len) == 0,
            "%s\n---\n%s", before.out.data, r.out.data);
  cli_result_free(&before);
  cli_result_free(&r);
  RUN_EXPECT(r, 0, "--direction=bwd_filter", "--cache", db, "show", SPEC);
  CHECK(contains(r.out.data, bwd_key) && contains(r.out.data, "engine=40 knobs=3"));
  cli_result_free(&r);
  remove(suite_file);
  remove_cache_files(db);
  return TEST_PASS;
}

/* A deterministic problem is its own key (" det"): show finds its trials
 * through --deterministic or det=1; a trial that is not deterministic is
 * marked in the table and in JSON. */
static int test_show_deterministic(void) {
  isolate_default_cache();
  char db[1024], key[CONV_PROBLEM_KEY_MAX], det_key[CONV_PROBLEM_KEY_MAX];
  tmp_path(db, sizeof db, "deterministic.db");
  int rc = fill_cache(db, key, sizeof key);
  if (rc != TEST_PASS) return rc;
  conv_problem p;
  CHECK_STATUS(CONV_OK, conv_problem_parse(SPEC " det=1", &p, NULL, 0));
  CHECK_STATUS(CONV_OK, conv_problem_key(&p, det_key, sizeof det_key));
  CHECK(strncmp(det_key, key, strlen(key)) == 0 && strcmp(det_key + strlen(key), " det") == 0);
  conv_cache *cache = NULL;
  conv_error err = {CONV_OK, ""};
  CHECK_MSG(conv_cache_open(db, false, &cache, &err) == CONV_OK, "%s", err.message);
  conv_cache_key det = {det_key, DEVICE_A, VERSIONS}, plain = {key, DEVICE_A, VERSIONS};
  conv_trial winner = make_trial(40, "engine=40 knobs=3", CONV_OK, 1.5, 3e-6);
  conv_trial racy = make_trial(9, "engine=9 knobs=3", CONV_OK, 0.3, 3e-7);
  racy.deterministic = 0;
  conv_status st = conv_cache_begin_tuning(cache, &det, &err);
  if (st == CONV_OK) st = conv_cache_add_trial(cache, &det, &winner, &err);
  if (st == CONV_OK) st = conv_cache_set_winner(cache, &det, winner.algorithm_id, &winner.config, &err);
  if (st == CONV_OK) st = conv_cache_add_trial(cache, &plain, &racy, &err);
  conv_cache_close(cache);
  CHECK_MSG(st == CONV_OK, "%s", err.message);

  const char *const deterministic[][8] = {
      {"show", SPEC, "--deterministic", "--cache", db, NULL},
      {"show", SPEC " det=1", "--cache", db, NULL},
  };
  for (size_t i = 0; i < sizeof deterministic / sizeof deterministic[0]; i++)
    if (show_finds(deterministic[i], det_key, "engine=40 knobs=3", "engine=12 knobs=3") != TEST_PASS)
      return TEST_FAIL;
  cli_result r;
  RUN_EXPECT(r, 0, "show", SPEC, "--cache", db);
  CHECK_MSG(contains(r.out.data, "n  cudnn      engine=9 knobs=3") && contains(r.out.data, "n not deterministic") &&
                !contains(r.out.data, "engine=40 knobs=3"),
            "%s", r.out.data);
  cli_result_free(&r);
  RUN_EXPECT(r, 0, "show", SPEC, "--json", "--cache", db);
  CHECK_MSG(contains(r.out.data, "\"deterministic\": false") &&
                contains(r.out.data, "\"deterministic\": true"),
            "%s", r.out.data);
  cli_result_free(&r);
  remove_cache_files(db);
  return TEST_PASS;
}

/* A suite row that is not a valid problem is a usage error (exit 2) for
 * tune and show alike, before any cache or GPU is touched, and the message
 * names the row and the field. */
static int test_invalid_suite_rows(void) {
  isolate_default_cache();
  char path[1024];
  tmp_path(path, sizeof path, "invalid-rows.json");
  CHECK(write_file(path, "{\"shapes\": [\n"
                         " {\"name\": \"ok\", \"N\": 1, \"C\": 4, \"H\": 8, \"W\": 8, \"K\": 4,"
                         " \"R\": 3, \"S\": 3},\n"
                         " {\"name\": \"bad\", \"N\": -1, \"C\": 4, \"H\": 8, \"W\": 8, \"K\": 4,"
                         " \"R\": 3, \"S\": 3}\n]}\n"));
  const char *const commands[][8] = {
      {"show", "bad", "--suite", path, "--cache", "/nonexistent/cache.db", NULL},
      {"show", "ok", "--suite", path, "--cache", "/nonexistent/cache.db", NULL},
      {"tune", path, "--cache", "/nonexistent/cache.db", NULL},
  };
  for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++) {
    cli_result r;
    CHECK(run_cli(commands[i], &r));
    CHECK_MSG(r.exit_status == 2, "%s: exit %lld\n%s", commands[i][0], (long long)r.exit_status,
              r.err.data);
    CHECK_MSG(contains(r.err.data, ":3:2: shape 1 (\"bad\"): n = -1: must be at least 1"),
              "stderr:\n%s", r.err.data);
    CHECK(r.out.len == 0);
    cli_result_free(&r);
  }
  remove(path);
  return TEST_PASS;
}

/* ================================================================ progress line */

/* Columns of a line (one per UTF-8 character), or -1 when it is not valid
 * printable UTF-8 on one line. */
static int line_columns(const char *s) {
  int cols = 0;
  for (size_t i = 0; s[i] != '\0'; cols++) {
    const unsigned char *u = (const unsigned char *)s + i;
    if (*u < 0x80) {
      if (*u < 0x20 || *u == 0x7f) return -1;
      i++;
      continue;
    }
    size_t n = utf8_sequence_length(u, strlen(s + i));
    if (n == 0) return -1;
    i += n;
  }
  return cols;
}

/* Renders p at `width` into buf and checks the invariants of every line:
 * the returned length, at most width - 1 columns, printable UTF-8. */
#define RENDER(buf, p, width)                                                             \
  do {                                                                                    \
    size_t n_ = progress_line((buf), sizeof(buf), (p), (width));                          \
    CHECK_MSG(n_ == strlen(buf), "length %zu for \"%s\"", n_, (buf));                     \
    int cols_ = line_columns(buf);                                                        \
    CHECK_MSG(cols_ >= 0 && cols_ <= ((width) > 1 ? (width) - 1 : 0),                     \
              "width %d: %d columns: \"%s\"", (width), cols_, (buf));                      \
  } while (0)

static int test_progress_durations(void) {
  static const struct {
    double seconds;
    const char *text;
  } cases[] = {{0, "0s"},          {0.4, "0s"},         {42, "42s"},       {59.4, "59s"},
               {59.6, "1:00"},     {187, "3:07"},       {3599, "59:59"},   {3600, "1:00:00"},
               {3723, "1:02:03"},  {90061, "25:01:01"}, {-1, "?"},         {NAN, "?"},
               {INFINITY, "?"}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char buf[32];
    CHECK_MSG(strcmp(format_duration(cases[i].seconds, buf, sizeof buf), cases[i].text) == 0,
              "%g s: \"%s\", expected \"%s\"", cases[i].seconds, buf, cases[i].text);
  }
  /* The mean time of a finished shape times those left, less what the
   * current one took so far. */
  progress p = {2, 10, "a", NULL, 25, 20};
  CHECK(fabs(progress_eta(&p) - 75) < 1e-9);
  p.done = 0;
  p.finished_s = 0;
  CHECK(progress_eta(&p) == -1);
  p = (progress){9, 10, "a", NULL, 100, 45}; /* the last shape overran the mean */
  CHECK(progress_eta(&p) == 0);
  p.done = 10;
  CHECK(progress_eta(&p) == 0);
  return TEST_PASS;
}

static int test_progress_line(void) {
  char buf[512];
  progress p = {3, 40, "resnet50_layer3_conv2", "cudnn engine=12 knobs=3", 42, 30};
  /* ETA: 10 s a shape, 37 to go, 12 s into the current one: 358 s. */
  RENDER(buf, &p, 200);
  CHECK_MSG(strcmp(buf, "[#...................]   3/40  42s  ETA 5:58  resnet50_layer3_conv2  "
                        "cudnn engine=12 knobs=3") == 0,
            "%s", buf);
  RENDER(buf, &p, 80);
  CHECK_MSG(strcmp(buf, "[#...................]   3/40  42s  ETA 5:58  resnet50_layer3_...  "
                        "cudnn eng...") == 0,
            "%s", buf);
  RENDER(buf, &p, 40);
  CHECK_MSG(strcmp(buf, " 3/40  42s  ETA 5:58  resnet5...") == 0, "%s", buf);
  RENDER(buf, &p, 60);
  CHECK_MSG(strncmp(buf, "[..........]   3/40  42s  ETA 5:58  ", 36) == 0, "%s", buf);

  /* Nothing done yet: an empty bar and no ETA. */
  progress first = {0, 12, "conv1", "timing", 3.2, 0};
  RENDER(buf, &first, 80);
  CHECK_MSG(strcmp(buf, "[....................]   0/12  3s  ETA ?  conv1  timing") == 0, "%s", buf);
  /* All done: a full bar, the total time, "done". */
  progress all = {12, 12, NULL, NULL, 3723, 3723};
  RENDER(buf, &all, 80);
  CHECK_MSG(strcmp(buf, "[####################]  12/12  1:02:03  done") == 0, "%s", buf);
  RENDER(buf, &all, 200);
  CHECK(strstr(buf, "done") != NULL && strstr(buf, "ETA") == NULL);

  /* Long names are cut at a character boundary, "..." at the end (at 1000
   * columns to the 511 bytes of buf). */
  char long_name[700] = "";
  for (int i = 0; i < 300; i++) strcat(long_name, i % 2 ? "\xc3\xa9" : "x"); /* x and e-acute */
  progress wide = {1, 2, long_name, long_name, 1, 1};
  static const int widths[] = {40, 80, 200, 1000};
  for (size_t i = 0; i < sizeof widths / sizeof widths[0]; i++) {
    RENDER(buf, &wide, widths[i]);
    size_t len = strlen(buf);
    CHECK_MSG(len > 3 && strcmp(buf + len - 3, "...") == 0, "width %d: %s", widths[i], buf);
  }
  /* A hostile name cannot drive the terminal. */
  progress hostile = {0, 1, "evil\x1b[2J\x1b]0;title\x07", "cfg\r\n", 0, 0};
  RENDER(buf, &hostile, 200);
  CHECK_MSG(strchr(buf, '\x1b') == NULL && strstr(buf, "evil\\x1b") != NULL, "%s", buf);
  /* Tiny widths and buffers: parts left out whole, nothing overflows. */
  RENDER(buf, &p, 1);
  CHECK(buf[0] == '\0');
  RENDER(buf, &p, 12);
  CHECK_MSG(strcmp(buf, " 3/40  42s") == 0, "%s", buf);
  char small[12];
  memset(small, 'z', sizeof small);
  size_t n = progress_line(small, sizeof small, &p, 200);
  CHECK_MSG(n < sizeof small && n == strlen(small), "%zu", n);
  return TEST_PASS;
}

static const test_case tests[] = {
    {"help_and_usage", test_help_and_usage},
    {"bad_arguments", test_bad_arguments},
    {"bad_shape_spec", test_bad_shape_spec},
    {"no_gpu_tune_is_one_line", test_no_gpu_tune_is_one_line},
    {"tune_messages", test_tune_messages},
    {"list_and_show_without_gpu", test_list_and_show_without_gpu},
    {"json_output", test_json_output},
    {"suite_file_parsing", test_suite_file_parsing},
    {"invalid_suite_rows", test_invalid_suite_rows},
    {"hostile_cache_strings", test_hostile_cache_strings},
    {"special_files", test_special_files},
    {"read_only_cache", test_read_only_cache},
    {"show_by_direction", test_show_by_direction},
    {"show_deterministic", test_show_deterministic},
    {"progress_durations", test_progress_durations},
    {"progress_line", test_progress_line},
    {"share_caches", test_share_caches},
};

TEST_MAIN(tests)
