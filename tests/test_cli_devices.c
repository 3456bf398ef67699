/*
 * test_cli_devices.c -- `convtune tune --devices` (tools/cli/devices.c)
 * without a GPU: its workers are tests/fake_worker.sh (through
 * $CONVTUNE_WORKER), which speaks the worker protocol of worker.c and
 * misbehaves as $FAKE_WORKER_MODE says, so that the parent's handing out,
 * ordering, failures and Ctrl-C are checked on any machine.  The real
 * workers' GPU path is test_offline.tune_on_every_device.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "convtune.h"
#include "test.h"
#include "tests/cli_run.h"

static const char *const specs[] = {
    "n=1 c=8 h=8 w=8 k=8 r=3 s=3 pad=1",  "n=1 c=8 h=8 w=8 k=16 r=3 s=3 pad=1",
    "n=1 c=8 h=8 w=8 k=24 r=3 s=3 pad=1", "n=1 c=8 h=8 w=8 k=32 r=3 s=3 pad=1",
    "n=1 c=8 h=8 w=8 k=40 r=3 s=3 pad=1", "n=1 c=8 h=8 w=8 k=48 r=3 s=3 pad=1",
};
#define SPECS (sizeof specs / sizeof specs[0])

/* The fake workers, in `mode`. */
static void use_fake_workers(const char *mode) {
  isolate_default_cache();
  setenv("CONVTUNE_WORKER", CONVTUNE_SOURCE_DIR "/tests/fake_worker.sh", 1);
  setenv("FAKE_WORKER_MODE", mode, 1);
  char status[16];
  snprintf(status, sizeof status, "%d", (int)CONV_INTERRUPTED);
  setenv("FAKE_WORKER_INTERRUPTED", status, 1);
}

/* tune --devices 0,1 of the first `count` specs, plus `extra` (or NULL). */
static bool run_tune(size_t count, const char *extra, const char *interrupt_marker,
                     cli_result *r) {
  const char *args[24] = {"tune", "--devices", "0,1", "--progress", "never"};
  size_t n = 5;
  if (extra != NULL) args[n++] = extra;
  for (size_t i = 0; i < count; i++) args[n++] = specs[i];
  return interrupt_marker ? run_cli_interrupted(args, interrupt_marker, r) : run_cli(args, r);
}

/* tune --devices 0,1 of every spec with the fake workers in `mode`; the
 * exit status must be `expected` (else its output is shown). */
static int run_fake(const char *mode, const char *interrupt_marker, int expected,
                    cli_result *r) {
  use_fake_workers(mode);
  CHECK(run_tune(SPECS, NULL, interrupt_marker, r));
  CHECK_MSG(r->exit_status == expected, "%s: exit %lld, expected %d\n%s%s", mode,
            (long long)r->exit_status, expected, r->out.data, r->err.data);
  return TEST_PASS;
}

/* The table's rows come in the shapes' order; *rows counts them. */
static int rows_in_order(const char *out, size_t count, size_t *rows) {
  const char *at = out;
  *rows = 0;
  for (size_t i = 0; i < count; i++) {
    const char *row = strstr(at, specs[i]);
    if (row == NULL) break;
    at = row + strlen(specs[i]);
    (*rows)++;
  }
  for (size_t i = *rows; i < count; i++)
    CHECK_MSG(!contains(out, specs[i]), "row %zu out of order:\n%s", i, out);
  return TEST_PASS;
}

/* Every shape answered, in order, and both workers took some. */
static int shapes_spread_over_workers(void) {
  cli_result r;
  if (run_fake("ok", NULL, 0, &r) != TEST_PASS) return TEST_FAIL;
  size_t rows;
  if (rows_in_order(r.out.data, SPECS, &rows) != TEST_PASS) return TEST_FAIL;
  CHECK_MSG(rows == SPECS, "%zu rows:\n%s", rows, r.out.data);
  CHECK_MSG(count_lines(r.out.data) == SPECS + 2, "a header, a rule and the rows:\n%s",
            r.out.data);
  CHECK(contains(r.out.data, "fake gpu=0") && contains(r.out.data, "fake gpu=1"));
  CHECK(contains(r.err.data, "(GPU 0) ...") && contains(r.err.data, "(GPU 1) ..."));
  CHECK_MSG(count_lines(r.err.data) == SPECS, "a line per shape:\n%s", r.err.data);
  cli_result_free(&r);

  CHECK(run_tune(SPECS, "--json", NULL, &r));
  CHECK(r.exit_status == 0);
  size_t ok = 0;
  for (const char *p = r.out.data; (p = strstr(p, "\"status\": \"OK\"")) != NULL; p++) ok++;
  CHECK_MSG(ok == SPECS && contains(r.out.data, "\"algorithm\": \"fake\""), "%s", r.out.data);
  cli_result_free(&r);
  return TEST_PASS;
}

/* A worker that dies fails the shape it held; the other finishes the rest. */
static int dead_worker_fails_its_shape(void) {
  cli_result r;
  if (run_fake("crash", NULL, 1, &r) != TEST_PASS) return TEST_FAIL;
  size_t rows;
  if (rows_in_order(r.out.data, SPECS, &rows) != TEST_PASS) return TEST_FAIL;
  CHECK_MSG(rows == SPECS, "%zu rows:\n%s", rows, r.out.data);
  CHECK_MSG(contains(r.out.data, "FAILED INTERNAL: the worker on GPU 1 ended (exit status 9) "
                                 "while tuning it"),
            "%s", r.out.data);
  size_t failed = 0;
  for (const char *p = r.out.data; (p = strstr(p, "FAILED")) != NULL; p++) failed++;
  CHECK_MSG(failed == 1, "%s", r.out.data);
  CHECK(contains(r.err.data, "1 of 6 shapes failed"));
  cli_result_free(&r);
  return TEST_PASS;
}

/* Workers on two GPU models: refused before any shape is handed out. */
static int mixed_models_refused(void) {
  cli_result r;
  if (run_fake("mixed", NULL, 2, &r) != TEST_PASS) return TEST_FAIL;
  CHECK_MSG(contains(r.err.data, "are different models"), "%s", r.err.data);
  CHECK(!contains(r.err.data, "[1/"));
  CHECK_MSG(r.out.len == 0, "%s", r.out.data);
  cli_result_free(&r);
  return TEST_PASS;
}

/* A worker that says something outside the protocol is ended, and so is
 * the run. */
static int unexpected_line_ends_run(void) {
  cli_result r;
  if (run_fake("garbage", NULL, 1, &r) != TEST_PASS) return TEST_FAIL;
  CHECK_MSG(contains(r.err.data, "GPU 1's worker said something unexpected: 'hello from GPU 1'"),
            "%s", r.err.data);
  CHECK(contains(r.out.data, "the worker on GPU 1 ended (signal 9) while tuning it"));
  cli_result_free(&r);
  return TEST_PASS;
}

/* A worker that cannot start: its reason, its exit code, nothing tuned. */
static int worker_that_cannot_start(void) {
  cli_result r;
  if (run_fake("nostart", NULL, 3, &r) != TEST_PASS) return TEST_FAIL;
  CHECK(contains(r.err.data, "no usable CUDA GPU 1: (fake worker)"));
  CHECK(contains(r.err.data, "GPU 1 could not start tuning"));
  CHECK(!contains(r.err.data, "[1/"));
  CHECK_MSG(r.out.len == 0, "%s", r.out.data);
  cli_result_free(&r);
  return TEST_PASS;
}

/* Ctrl-C once the third shape is handed out: the workers are told, the
 * shapes in hand come back STOPPED, no more are handed out, exit 130. */
static int ctrl_c_stops_workers(void) {
  cli_result r;
  if (run_fake("slow", "[3/6]", 130, &r) != TEST_PASS) return TEST_FAIL;
  CHECK(r.interrupted);
  size_t rows;
  if (rows_in_order(r.out.data, SPECS, &rows) != TEST_PASS) return TEST_FAIL;
  CHECK_MSG(rows >= 3 && rows < SPECS, "%zu rows:\n%s", rows, r.out.data);
  CHECK_MSG(contains(r.out.data, "STOPPED INTERRUPTED"), "%s", r.out.data);
  CHECK(!contains(r.out.data, "FAILED"));
  CHECK(contains(r.err.data, "stopping each GPU after its current candidate"));
  CHECK(contains(r.err.data, "interrupted after"));
  CHECK(!contains(r.err.data, "[6/6]"));
  cli_result_free(&r);
  return TEST_PASS;
}

/* The real workers on a machine without a GPU: each says why, the run
 * exits 3.  Skipped where a GPU is usable. */
static int real_workers_without_gpu(void) {
  isolate_default_cache();
  unsetenv("CONVTUNE_WORKER");
  if (probe_context() == CONV_OK) {
    fprintf(stderr, "a CUDA GPU is usable here: the no-GPU exit cannot be checked\n");
    return TEST_SKIP;
  }
  cli_result r;
  CHECK(run_tune(1, NULL, NULL, &r));
  CHECK_MSG(r.exit_status == 3, "exit %lld\n%s", (long long)r.exit_status, r.err.data);
  CHECK_MSG(contains(r.err.data, "convtune: no usable CUDA GPU") &&
                contains(r.err.data, "could not start tuning"),
            "%s", r.err.data);
  CHECK(r.out.len == 0);
  cli_result_free(&r);
  return TEST_PASS;
}

static const test_case tests[] = {
    {"shapes_spread_over_workers", shapes_spread_over_workers},
    {"dead_worker_fails_its_shape", dead_worker_fails_its_shape},
    {"mixed_models_refused", mixed_models_refused},
    {"unexpected_line_ends_run", unexpected_line_ends_run},
    {"worker_that_cannot_start", worker_that_cannot_start},
    {"ctrl_c_stops_workers", ctrl_c_stops_workers},
    {"real_workers_without_gpu", real_workers_without_gpu},
};
TEST_MAIN(tests)
