/*
 * tune.c -- `convtune tune`: the shapes (suite files, specs, --pending;
 * with --shard, this process's share of them: shard.c), then one GPU's run
 * in a worker thread (tune_run.c, with what it shows in tune_display.c;
 * what was measured stays in the cache when Ctrl-C stops it), --devices'
 * run over several GPUs (devices.c), or a worker process of one
 * (worker.c).
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <uv.h>

#include "tools/cli/tune.h"

/* A tune argument: an existing file is a suite, else it must be a spec. */
static int load_input(const char *arg, suite *shapes) {
  struct stat st;
  if (stat(arg, &st) == 0) {
    char message[1024];
    if (!suite_load(arg, shapes, message, sizeof message)) return usage_error("%s", message);
    return EXIT_OK_;
  }
  int saved = errno;
  if (strchr(arg, '=') == NULL) {
    return usage_error("cannot read '%s': %s (expected a suite file or a shape spec)", arg,
                       strerror(saved));
  }
  conv_problem p;
  int rc = parse_spec(arg, &p);
  if (rc != EXIT_OK_) return rc;
  if (!suite_add(shapes, arg, &p)) {
    say("out of memory");
    return EXIT_FAILED;
  }
  return EXIT_OK_;
}

static int load_inputs(const cli_args *a, suite *shapes) {
  for (size_t i = 0; i < a->input_count; i++) {
    int rc = load_input(a->inputs[i], shapes);
    if (rc != EXIT_OK_) return rc;
  }
  for (size_t i = 0; i < shapes->count; i++) apply_overrides(a, &shapes->shapes[i].problem);
  return EXIT_OK_;
}

/* ================================================================ display */

static void tune_each_shape(void *arg) {
  tune_job *job = arg;
  size_t count = job->shapes->count;
  for (size_t i = 0; i < count; i++) {
    if (atomic_load(&job->stop)) {
      job->interrupted = true;
      break;
    }
    const suite_shape *shape = &job->shapes->shapes[i];
    uint64_t started = display_shape_start(job->display, i, shape->name);
    tune_one(job->ctx, &job->defaults, shape, &job->rows[i], job->display);
    job->done = i + 1;
    display_shape_end(job->display, started);
    if (job->rows[i].status == CONV_INTERRUPTED) {
      job->interrupted = true;
      break;
    }
  }
  tune_job_finished(job);
}

/* --pending: this GPU's pending problems, read once the context says
 * which GPU this is. */
static int load_pending(const cli_args *a, conv_context *ctx, const char *path, suite *shapes) {
  char device[CONV_DEVICE_FINGERPRINT_MAX];
  if (conv_context_device_fingerprint(ctx, device, sizeof device) != CONV_OK) {
    say("cannot read this GPU's fingerprint: %s", conv_context_last_error(ctx));
    return EXIT_FAILED;
  }
  int rc = load_pending_shapes(path, device, a->stale_only, shapes);
  if (rc == EXIT_OK_ && shapes->count == 0) {
    say("nothing pending for this GPU in %s", path);
    if (a->json) fputs("[]\n", stdout);
  } else if (rc == EXIT_OK_) {
    rc = keep_shard(a, shapes);
  }
  return rc;
}

static int tune_shapes(const cli_args *a, suite *shapes, const char *path) {
  tune_display display;
  int e = display_init(&display, a, shapes->count);
  if (e != 0) return say_uv_error("uv_mutex_init", e);
  conv_context *ctx = NULL;
  int rc = open_context(a, 0, path, &display, &ctx);
  if (rc == EXIT_OK_ && a->pending) rc = load_pending(a, ctx, path, shapes);
  if (rc != EXIT_OK_ || shapes->count == 0) {
    conv_context_destroy(ctx);
    uv_mutex_destroy(&display.lock);
    return rc;
  }
  display.total = shapes->count;
  print_notes(shapes);
  tune_job job;
  memset(&job, 0, sizeof job);
  job.ctx = ctx;
  job.shapes = shapes;
  job.display = &display;
  default_source_open(&job.defaults, ctx, path, &display);
  atomic_init(&job.stop, false);
  job.rows = calloc(shapes->count, sizeof *job.rows);
  if (job.rows == NULL) {
    say("out of memory");
    rc = EXIT_FAILED;
  } else {
    display.started = uv_hrtime();
    rc = run_tuning(&job, tune_each_shape);
    display_finish(&display); /* the worker has ended: no lock needed */
    if (rc == EXIT_OK_) rc = report_rows(a, job.rows, shapes->count, job.interrupted);
  }
  free(job.rows);
  conv_cache_reader_close(job.defaults.reader);
  conv_context_destroy(ctx);
  uv_mutex_destroy(&display.lock);
  return rc;
}

/* The shapes given (not --pending), cut to --shard's share; *none when
 * none is left to tune (said, with the suites' notes). */
static int given_shapes_to_tune(const cli_args *a, suite *shapes, bool *none) {
  *none = shapes->count == 0;
  if (*none) {
    print_notes(shapes);
    say("no convolution shapes to tune");
    if (a->json) fputs("[]\n", stdout);
    return EXIT_OK_;
  }
  int rc = keep_shard(a, shapes);
  *none = rc == EXIT_OK_ && shapes->count == 0;
  if (*none) print_notes(shapes);
  return rc;
}

int cmd_tune(const cli_args *a) {
  if (a->worker_device >= 0) {
    char path[CLI_PATH_MAX];
    int rc = cache_path(a, true, path, sizeof path);
    return rc == EXIT_OK_ ? run_tune_worker(a, path) : rc;
  }
  suite shapes;
  suite_init(&shapes);
  int rc = load_inputs(a, &shapes);
  bool none = false;
  if (rc == EXIT_OK_ && !a->pending) rc = given_shapes_to_tune(a, &shapes, &none);
  if (rc == EXIT_OK_ && !none) {
    char path[CLI_PATH_MAX];
    rc = cache_path(a, true, path, sizeof path);
    if (rc == EXIT_OK_ && a->devices)
      rc = tune_on_devices(a, &shapes, path);
    else if (rc == EXIT_OK_)
      rc = tune_shapes(a, &shapes, path);
  }
  suite_free(&shapes);
  return rc;
}
