/*
 * worker.c -- `convtune tune --worker-device N`: one GPU's share of a
 * `tune --devices` run (devices.c starts it; it is not meant to be run by
 * hand).  It opens a context on GPU N and the shared cache, then answers
 * the problem keys it reads on stdin, one a line, each with one line on
 * stdout, until stdin ends.  Lines are tab-separated; every text field is
 * made one printable line (one_line turns tabs into spaces):
 *
 *   ready FINGERPRINT        the context is open and Ctrl-C watched (the
 *                            first line), or
 *   failed EXIT_CODE         it could not start (the reason is on stderr)
 *   row STATUS ALGORITHM CONFIG TIME_MS DEFAULT_MS SOURCE WORKSPACE_BYTES ERROR
 *                            one problem's outcome (STATUS and SOURCE as
 *                            numbers, times -1 when unknown)
 *
 * SIGINT stops the tuning after the candidate being timed, as in tune.c.
 * The parent runs workers in their own session, so a terminal's Ctrl-C
 * reaches them only as the parent passes it on.
 */
#include <stdio.h>
#include <string.h>

#include "tools/cli/tune.h"

/* The row line of a tuned (or failed) problem. */
static void write_row(const tune_row *row) {
  char algorithm[64], config[256], error[1024];
  const conv_plan_info *info = &row->info;
  bool ok = row->status == CONV_OK;
  printf("row\t%d\t%s\t%s\t%.17g\t%.17g\t%d\t%zu\t%s\n", (int)row->status,
         one_line(ok ? info->algorithm : "", algorithm, sizeof algorithm),
         one_line(ok ? info->config : "", config, sizeof config), ok ? info->time_ms : -1.0,
         row->default_ms, ok ? (int)info->source : 0, ok ? info->workspace_bytes : (size_t)0,
         one_line(row->error, error, sizeof error));
  fflush(stdout);
}

/* One request: the problem of `key`, tuned (or found in the cache). */
static void answer(tune_job *job, char *key) {
  tune_row row;
  suite_shape shape;
  memset(&shape, 0, sizeof shape);
  shape.name = key;
  if (conv_problem_from_key(key, &shape.problem) == CONV_OK) {
    tune_one(job->ctx, &job->defaults, &shape, &row, job->display);
  } else {
    memset(&row, 0, sizeof row);
    row.status = CONV_INVALID_ARGUMENT;
    row.default_ms = -1;
    snprintf(row.error, sizeof row.error, "not a problem key this convtune can rebuild");
  }
  write_row(&row);
  if (row.status == CONV_INTERRUPTED) atomic_store(&job->stop, true);
}

/* The tuning thread: "ready" (said here, once SIGINT is watched, so that
 * the parent's Ctrl-C never finds the default action), then requests until
 * stdin ends or Ctrl-C. */
static void serve_requests(void *arg) {
  tune_job *job = arg;
  char fingerprint[CONV_DEVICE_FINGERPRINT_MAX], line[CONV_DEVICE_FINGERPRINT_MAX];
  if (conv_context_device_fingerprint(job->ctx, fingerprint, sizeof fingerprint) != CONV_OK) {
    say("cannot read this GPU's fingerprint: %s", conv_context_last_error(job->ctx));
    printf("failed\t%d\n", EXIT_FAILED);
    fflush(stdout);
    tune_job_finished(job);
    return;
  }
  printf("ready\t%s\n", one_line(fingerprint, line, sizeof line));
  fflush(stdout);
  char key[CONV_PROBLEM_KEY_MAX + 2];
  while (!atomic_load(&job->stop) && fgets(key, sizeof key, stdin) != NULL) {
    size_t len = strlen(key);
    if (len > 0 && key[len - 1] == '\n') {
      key[--len] = '\0';
    } else if (!feof(stdin)) {
      int c; /* longer than any key: drop the rest of the line */
      while ((c = getchar()) != EOF && c != '\n') continue;
      key[0] = '\0';
    }
    answer(job, key);
  }
  tune_job_finished(job);
}

int run_tune_worker(const cli_args *a, const char *path) {
  tune_display display;
  int e = display_init(&display, a, 0);
  if (e != 0) {
    say("uv_mutex_init: %s", uv_strerror(e));
    printf("failed\t%d\n", EXIT_FAILED);
    return EXIT_FAILED;
  }
  display.bar = false; /* the parent draws the progress */
  tune_job job;
  memset(&job, 0, sizeof job);
  atomic_init(&job.stop, false);
  job.display = &display;
  int rc = open_context(a, a->worker_device, path, &display, &job.ctx);
  if (rc != EXIT_OK_) {
    printf("failed\t%d\n", rc);
  } else {
    default_source_open(&job.defaults, job.ctx, path, &display);
    rc = run_tuning(&job, serve_requests);
    conv_cache_reader_close(job.defaults.reader);
  }
  conv_context_destroy(job.ctx);
  uv_mutex_destroy(&display.lock);
  return rc;
}
