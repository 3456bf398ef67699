/*
 * test_cli.c -- the convtune command-line tool's commands, run as a child
 * process ($CONVTUNE_CLI) with its stdout and stderr captured through libuv
 * pipes (cli_run.c); its JSON, suite files and progress line are
 * test_cli_formats.c's, the cache commands of 0.4 test_cli_cache.c's.
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
#include "algorithms/algorithm.h"
#include "test.h"
#include "tests/cli_fixture.h"
#include "tests/cli_run.h"
#include "tools/cli/progress.h"
#include "tools/json.h"
#include "tools/text.h"

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
  static const usage_case cases[] = {
      {{"frobnicate"}, "unknown command 'frobnicate'"},
      {{"list", "--bogus"}, "unknown option '--bogus'"},
      {{"list", "--cache"}, "needs a value"},
      {{"list", "--policy", "fast"}, "does not apply to 'list'"},
      {{"list", "extra"}, "list takes no arguments"},
      {{"tune"}, "at least one"},
      {{"tune", SPEC, "--math", "fp64"}, "--math"},
      /* Every size a spec lacks, not the first validation trips on (w = 0). */
      {{"tune", "n=2 c=8 h=12"}, "missing w k r s"},
      {{"tune", SPEC, "--epilogue", "gelu"}, "--epilogue"},
      {{"tune", SPEC, "--direction", "up"}, "expected fwd, bwd_data or bwd_filter"},
      {{"tune", SPEC " dir=sideways"}, "dir=sideways: expected fwd, bwd_data or bwd_filter"},
      {{"tune", SPEC, "--policy=slow"}, "expected exhaustive, fast or predict"},
      {{"list", "--policy", "predict"}, "does not apply to 'list'"},
      {{"tune", SPEC, "--json=yes"}, "takes no value"},
      {{"tune", SPEC, "--progress", "sometimes"}, "expected auto, always or never"},
      {{"list", "--progress", "never"}, "does not apply to 'list'"},
      {{"show"}, "exactly one shape"},
      {{"show", SPEC, OTHER_SPEC}, "exactly one shape"},
      {{"tune", "/nonexistent/shapes.json"}, "cannot read"},
      {{"--policy", "fast", "list"}, "does not apply to 'list'"},
      {{"--json"}, "missing command"},
      {{"--cache"}, "missing command"},
      {{"tune", SPEC, "--devices", "0,0"}, "names GPU 0 twice"},
      {{"tune", SPEC, "--devices", "gpu1"}, "bad --devices 'gpu1'"},
      {{"tune", SPEC, "--devices", "0,"}, "bad --devices '0,'"},
      {{"tune", SPEC, "--devices", "-1"}, "bad --devices '-1'"},
      {{"list", "--devices", "all"}, "does not apply to 'list'"},
      {{"tune", "--worker-device", "0", SPEC}, "reads its problems on stdin"},
      {{"tune", "--worker-device", "0", "--devices", "all"}, "reads its problems on stdin"},
      {{"tune", "--worker-device", "one"}, "bad --worker-device 'one'"},
  };
  return check_usage_errors(cases, sizeof cases / sizeof cases[0]);
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
  const conv_status st = probe_context();
  if (st == CONV_OK) {
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
                               {"tune", SPEC, "--progress=always", "--verbose", NULL},
                               {"tune", SPEC, "--devices", "all", "--cache", db}};
  for (size_t i = 0; i < sizeof variants / sizeof variants[0]; i++) {
    cli_result r;
    CHECK(run_cli(variants[i], &r));
    CHECK_MSG(r.exit_status == 3, "variant %zu: exit %lld\n%s", i, (long long)r.exit_status,
              r.err.data);
    CHECK_MSG(count_lines(r.err.data) == 1 && r.err.data[r.err.len - 1] == '\n',
              "variant %zu: stderr is not one line:\n%s", i, r.err.data);
    CHECK(strncmp(r.err.data, "convtune: no usable CUDA GPU: ", 30) == 0);
    /* What is missing (a driver, a GPU), not CUDA's "driver version is
     * insufficient" for a machine with no driver at all. */
    CHECK_MSG(!contains(r.err.data, "insufficient"), "%s", r.err.data);
    CHECK_MSG(r.out.len == 0, "stdout: %s", r.out.data);
    cli_result_free(&r);
  }
  /* A --devices worker says why on stderr, and tells its parent the exit
   * code on stdout. */
  cli_result r;
  RUN_EXPECT(r, 3, "tune", "--worker-device", "0", "--cache", db);
  CHECK(strncmp(r.err.data, "convtune: no usable CUDA GPU", 28) == 0);
  CHECK_MSG(strcmp(r.out.data, "failed\t3\n") == 0, "stdout: %s", r.out.data);
  cli_result_free(&r);
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
  if (probe_context() != CONV_OK) {
    fprintf(stderr, "no usable CUDA GPU (%s): tune's messages cannot be checked\n",
            conv_context_last_error(NULL));
    return TEST_SKIP;
  }
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

  /* A problem key as `list` prints it names the shape too. */
  RUN_EXPECT(r, 0, "show", key, "--cache", db);
  CHECK(contains(r.out.data, "engine=12 knobs=3"));
  cli_result_free(&r);

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
  CHECK(contains(r.err.data, "is the same file as"));
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
 * sequences (CSI, OSC with BEL, C1 CSI), line breaks, DEL, a bidi override
 * (U+202E, which shows the text after it reversed) and bytes that are not
 * UTF-8; "é" is valid text and must survive. */
#define EVIL_ALGORITHM "cudnn\x1b[2J"
#define EVIL_CONFIG "engine=1\x1b]0;pwned\x07 \x7f"
#define EVIL_REASON "first\nsecond\r\x1b[31mred"
#define EVIL_DEVICE "GPU \xc3\xa9 \xc2\x9b" "31m \xe2\x80\xae" "gro|sm90"
#define EVIL_VERSIONS "cuda=1 \xff\xfe \xc0\xaf \x80"

/* The offset of the first character a terminal would act on or that is
 * not UTF-8 (newlines aside), or -1 when the text is safe to print. */
static long first_unsafe_byte(const char *text) { return text_first_unsafe(text, true); }

static int fill_hostile_cache(const char *path, char *key, size_t key_size) {
  conv_cache *cache = NULL;
  int rc = open_fixture_cache(path, key, key_size, &cache);
  if (rc != TEST_PASS) return rc;
  conv_error err = {CONV_OK, ""};
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
 * line per row; their --json output stays valid JSON with every control
 * character (C1, DEL and bidi ones too) written as a \u escape. */
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
    CHECK_MSG(contains(r.out.data, "GPU \xc3\xa9 \\xc2\\x9b31m \\xe2\\x80\\xaegro|sm90"), "%s",
              r.out.data);
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
    long bad = first_unsafe_byte(r.out.data);
    CHECK_MSG(bad < 0, "%s --json printed byte 0x%02x raw at %ld:\n%s", args[0],
              (unsigned char)r.out.data[bad], bad, r.out.data);
    CHECK_MSG(contains(r.out.data, "\\u009b31m \\u202egro") && contains(r.out.data, "\\u007f"),
              "%s", r.out.data);
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
  const conv_trial t = make_trial(40, "engine=40 knobs=3", CONV_OK, 1.5, 3e-6);
  if ((rc = store_tuned(db, bwd_key, DEVICE_A, &t)) != TEST_PASS) return rc;

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

static const test_case tests[] = {
    {"help_and_usage", test_help_and_usage},
    {"bad_arguments", test_bad_arguments},
    {"bad_shape_spec", test_bad_shape_spec},
    {"no_gpu_tune_is_one_line", test_no_gpu_tune_is_one_line},
    {"tune_messages", test_tune_messages},
    {"list_and_show_without_gpu", test_list_and_show_without_gpu},
    {"hostile_cache_strings", test_hostile_cache_strings},
    {"special_files", test_special_files},
    {"read_only_cache", test_read_only_cache},
    {"show_by_direction", test_show_by_direction},
    {"show_deterministic", test_show_deterministic},
    {"share_caches", test_share_caches},
};

TEST_MAIN(tests)
