/*
 * tune.c -- `convtune tune`: the shapes run in a worker thread while the main
 * thread runs a libuv loop that watches SIGINT: the first Ctrl-C asks the
 * context to stop after the candidate being timed (what was measured stays
 * in the cache) and restores the default action, so a second Ctrl-C ends the
 * process at once.
 */
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <uv.h>

#include "cache/cache.h"
#include "runtime/internal.h"
#include "tools/cli/cli.h"
#include "tools/json.h"

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

/* ================================================================ tune */

typedef struct tune_row {
  const suite_shape *shape;
  char key[CONV_PROBLEM_KEY_MAX];
  conv_status status;
  char error[512]; /* conv_context_last_error, one line */
  conv_plan_info info;
  double default_ms; /* the heuristic pick's time; < 0 unknown */
} tune_row;

/* Shared by the worker thread and the loop thread. */
typedef struct tune_job {
  conv_context *ctx;
  const suite *shapes;
  tune_row *rows;   /* shapes->count; the first `done` are filled */
  size_t done;      /* written by the worker, read after the join */
  bool interrupted; /* likewise */
  atomic_bool stop; /* set by the SIGINT callback */
  uv_signal_t sigint;
  uv_async_t finished;
} tune_job;

typedef struct default_query {
  const char *device, *versions;
  double ms;
} default_query;

static int find_default_row(const conv_cache_row *row, void *user) {
  default_query *q = user;
  if (!row->trial->heuristic_pick || strcmp(row->device, q->device) != 0 ||
      strcmp(row->versions, q->versions) != 0) {
    return 0;
  }
  if (row->trial->status == CONV_OK && row->trial->time_ms >= 0) q->ms = row->trial->time_ms;
  return 1;
}

/* The time of cuDNN's own pick for this key on this device and build. */
static double default_time_ms(conv_context *ctx, const char *key, const char *name) {
  conv_cache *cache = conv_context_cache(ctx);
  const conv_device *device = conv_context_device(ctx);
  if (cache == NULL || device == NULL) return -1;
  default_query q = {device->key, conv_library_versions(), -1};
  conv_error err = {CONV_OK, ""};
  if (conv_cache_list_trials(cache, key, find_default_row, &q, &err) != CONV_OK) {
    say("warning: %s: cannot read its trials: %s", name, err.message);
    return -1;
  }
  return q.ms;
}

static void tune_one(conv_context *ctx, const suite_shape *shape, tune_row *row) {
  memset(row, 0, sizeof *row);
  row->shape = shape;
  row->default_ms = -1;
  if (conv_problem_key(&shape->problem, row->key, sizeof row->key) != CONV_OK) row->key[0] = '\0';
  conv_plan *plan = NULL;
  row->status = conv_plan_create(ctx, &shape->problem, &plan);
  if (row->status == CONV_OK) {
    row->status = conv_plan_info_get(plan, &row->info);
    conv_plan_destroy(plan);
  }
  if (row->status != CONV_OK) {
    one_line(conv_context_last_error(ctx), row->error, sizeof row->error);
    return;
  }
  if (row->key[0] != '\0') row->default_ms = default_time_ms(ctx, row->key, shape->name);
}

static void tune_worker(void *arg) {
  tune_job *job = arg;
  size_t count = job->shapes->count;
  for (size_t i = 0; i < count; i++) {
    if (atomic_load(&job->stop)) {
      job->interrupted = true;
      break;
    }
    const suite_shape *shape = &job->shapes->shapes[i];
    char name[1024];
    fprintf(stderr, "[%zu/%zu] %s ...\n", i + 1, count, one_line(shape->name, name, sizeof name));
    tune_one(job->ctx, shape, &job->rows[i]);
    job->done = i + 1;
    if (job->rows[i].status == CONV_INTERRUPTED) {
      job->interrupted = true;
      break;
    }
  }
  int e = uv_async_send(&job->finished);
  if (e != 0) say("internal error: uv_async_send: %s", uv_strerror(e));
}

static void on_sigint(uv_signal_t *handle, int signum) {
  (void)signum;
  tune_job *job = handle->data;
  atomic_store(&job->stop, true);
  conv_context_interrupt(job->ctx);
  fprintf(stderr,
          "convtune: interrupted; stopping after the current candidate (measured trials are "
          "kept)\n");
  /* Back to the default action: a second Ctrl-C ends the process at once. */
  int e = uv_signal_stop(handle);
  if (e != 0) say("uv_signal_stop: %s", uv_strerror(e));
}

static void on_finished(uv_async_t *handle) {
  tune_job *job = handle->data;
  uv_close((uv_handle_t *)&job->sigint, NULL);
  uv_close((uv_handle_t *)&job->finished, NULL);
}

static int uv_failed(const char *what, int e) {
  say("%s: %s", what, uv_strerror(e));
  return EXIT_FAILED;
}

/* Runs the shapes on a worker thread while this thread watches SIGINT. */
static int run_tuning(tune_job *job) {
  uv_loop_t loop;
  int e = uv_loop_init(&loop);
  if (e != 0) return uv_failed("uv_loop_init", e);
  int rc = EXIT_OK_;
  bool started = false;
  uv_thread_t worker;
  job->finished.data = job->sigint.data = job;
  if ((e = uv_async_init(&loop, &job->finished, on_finished)) != 0) {
    rc = uv_failed("uv_async_init", e);
  } else if ((e = uv_signal_init(&loop, &job->sigint)) != 0) {
    rc = uv_failed("uv_signal_init", e);
    uv_close((uv_handle_t *)&job->finished, NULL);
  } else if ((e = uv_signal_start(&job->sigint, on_sigint, SIGINT)) != 0) {
    rc = uv_failed("uv_signal_start", e);
    on_finished(&job->finished);
  } else if ((e = uv_thread_create(&worker, tune_worker, job)) != 0) {
    rc = uv_failed("uv_thread_create", e);
    on_finished(&job->finished);
  } else {
    started = true;
  }
  /* Until the worker's uv_async_send (or, on failure, until the closes). */
  if ((e = uv_run(&loop, UV_RUN_DEFAULT)) != 0 && rc == EXIT_OK_) rc = uv_failed("uv_run", e);
  if (started && (e = uv_thread_join(&worker)) != 0 && rc == EXIT_OK_) {
    rc = uv_failed("uv_thread_join", e);
  }
  if ((e = uv_loop_close(&loop)) != 0) rc = uv_failed("uv_loop_close", e);
  return rc;
}

static void tune_row_cells(const tune_row *r, char *winner, size_t winner_size, char *ms,
                           char *def, char *speedup, size_t num_size) {
  const conv_plan_info *info = &r->info;
  snprintf(winner, winner_size, "%s%s%s", info->algorithm, info->config[0] ? " " : "",
           info->config);
  format_ms(info->time_ms, ms, num_size);
  format_ms(r->default_ms, def, num_size);
  snprintf(speedup, num_size, "%s", "-");
  if (r->default_ms > 0 && info->time_ms > 0) {
    snprintf(speedup, num_size, "%.2fx", r->default_ms / info->time_ms);
  }
}

static int print_tune_table(const tune_row *rows, size_t count) {
  static const char *const header[] = {"shape",            "winner",  "time ms",
                                       "cuDNN default ms", "speedup", "source"};
  text_table t;
  table_init(&t, 6, header, (1u << 2) | (1u << 3) | (1u << 4));
  bool ok = true;
  for (size_t i = 0; i < count && ok; i++) {
    const tune_row *r = &rows[i];
    char winner[sizeof r->info.algorithm + sizeof r->info.config + 2];
    char ms[32], def[32], speedup[32], failure[sizeof r->error + 64];
    if (r->status == CONV_OK) {
      tune_row_cells(r, winner, sizeof winner, ms, def, speedup, sizeof ms);
      const char *cells[] = {r->shape->name, winner, ms, def, speedup,
                             source_name(r->info.source)};
      ok = table_add(&t, cells, t.ncols);
    } else {
      snprintf(failure, sizeof failure, "%s %s: %s",
               r->status == CONV_INTERRUPTED ? "STOPPED" : "FAILED", status_name(r->status),
               r->error[0] ? r->error : conv_status_string(r->status));
      const char *cells[] = {r->shape->name, failure};
      ok = table_add(&t, cells, 1);
    }
  }
  return table_finish(&t, ok);
}

static void write_tune_row_json(FILE *out, const tune_row *r) {
  fputs("{\"shape\": ", out);
  json_write_string(out, r->shape->name);
  fputs(", \"problem\": ", out);
  json_write_string(out, r->key);
  fputs(", \"status\": ", out);
  json_write_string(out, status_name(r->status));
  if (r->status != CONV_OK) {
    fputs(", \"error\": ", out);
    json_write_string(out, r->error[0] ? r->error : conv_status_string(r->status));
    fputc('}', out);
    return;
  }
  const conv_plan_info *info = &r->info;
  fputs(", \"algorithm\": ", out);
  json_write_string(out, info->algorithm);
  fputs(", \"config\": ", out);
  json_write_string(out, info->config);
  fputs(", \"time_ms\": ", out);
  json_write_number(out, info->time_ms >= 0 ? info->time_ms : NAN);
  fputs(", \"default_ms\": ", out);
  json_write_number(out, r->default_ms >= 0 ? r->default_ms : NAN);
  fputs(", \"speedup\": ", out);
  json_write_number(out,
                    r->default_ms > 0 && info->time_ms > 0 ? r->default_ms / info->time_ms : NAN);
  fputs(", \"source\": ", out);
  json_write_string(out, source_name(info->source));
  fprintf(out, ", \"workspace_bytes\": %zu}", info->workspace_bytes);
}

static void write_tune_json(FILE *out, const tune_row *rows, size_t count) {
  fputc('[', out);
  for (size_t i = 0; i < count; i++) {
    fputs(i ? ",\n " : "\n ", out);
    write_tune_row_json(out, &rows[i]);
  }
  fputs(count ? "\n]\n" : "]\n", out);
}

/* Prints the rows and turns the outcome into the exit code. */
static int report_tuning(const cli_args *a, const tune_job *job) {
  size_t failed = 0;
  for (size_t i = 0; i < job->done; i++) {
    if (job->rows[i].status != CONV_OK && job->rows[i].status != CONV_INTERRUPTED) failed++;
  }
  int rc = EXIT_OK_;
  if (a->json) {
    write_tune_json(stdout, job->rows, job->done);
  } else if (job->done > 0) {
    rc = print_tune_table(job->rows, job->done);
  }
  if (job->interrupted) {
    say("interrupted after %zu of %zu shapes", job->done,
            job->shapes->count);
    return EXIT_INTERRUPTED;
  }
  if (failed > 0) {
    say("%zu of %zu shapes failed", failed, job->shapes->count);
    return EXIT_FAILED;
  }
  return rc;
}

/* The suite's notes (skipped rows), one printable line each. */
static void print_notes(const suite *shapes) {
  for (size_t i = 0; i < shapes->note_count; i++) {
    char line[1024];
    fprintf(stderr, "%s\n", one_line(shapes->notes[i], line, sizeof line));
  }
}

/* The library's messages (the context's log callback, on the worker thread):
 * warnings always, and with --verbose the start and end of each tuning and
 * each candidate's outcome, as lines on stderr. */
static void on_log(void *user, conv_log_level level, const char *message) {
  const cli_args *a = user;
  char line[2048];
  if (level <= CONV_LOG_WARN) {
    say("%s%s", level == CONV_LOG_ERROR ? "error: " : "warning: ", message);
  } else if (a->verbose && strncmp(message, "timing ", 7) != 0) {
    fprintf(stderr, "%s%s\n", level == CONV_LOG_DEBUG ? "  " : "",
            one_line(message, line, sizeof line));
  }
}

static int open_context(const cli_args *a, const char *path, conv_context **ctx) {
  conv_context_options options;
  conv_context_options_init(&options);
  options.cache_path = path;
  options.policy = a->policy;
  options.log = on_log;
  options.log_user = (void *)a;
  options.log_level = a->verbose ? CONV_LOG_DEBUG : CONV_LOG_WARN;
  conv_status st = conv_context_create(ctx, &options);
  if (st == CONV_OK) return EXIT_OK_;
  const char *msg = conv_context_last_error(NULL);
  if (msg[0] == '\0') msg = conv_status_string(st);
  if (st == CONV_NO_DEVICE) {
    say("no usable CUDA GPU: %s", msg);
    return EXIT_NO_GPU;
  }
  if (st == CONV_CACHE_ERROR) {
    say("cannot open the cache %s: %s", path, msg);
    return EXIT_CACHE;
  }
  say("cannot start (%s): %s", status_name(st), msg);
  return EXIT_FAILED;
}

static int tune_shapes(const cli_args *a, const suite *shapes, const char *path) {
  conv_context *ctx = NULL;
  int rc = open_context(a, path, &ctx);
  if (rc != EXIT_OK_) return rc;
  print_notes(shapes);
  tune_job job;
  memset(&job, 0, sizeof job);
  job.ctx = ctx;
  job.shapes = shapes;
  atomic_init(&job.stop, false);
  job.rows = calloc(shapes->count, sizeof *job.rows);
  if (job.rows == NULL) {
    say("out of memory");
    rc = EXIT_FAILED;
  } else {
    rc = run_tuning(&job);
    if (rc == EXIT_OK_) rc = report_tuning(a, &job);
  }
  free(job.rows);
  conv_context_destroy(ctx);
  return rc;
}

int cmd_tune(const cli_args *a) {
  suite shapes;
  suite_init(&shapes);
  int rc = load_inputs(a, &shapes);
  if (rc == EXIT_OK_ && shapes.count == 0) {
    print_notes(&shapes);
    say("no convolution shapes to tune");
    if (a->json) fputs("[]\n", stdout);
  } else if (rc == EXIT_OK_) {
    char path[CLI_PATH_MAX];
    rc = cache_path(a, true, path, sizeof path);
    if (rc == EXIT_OK_) rc = tune_shapes(a, &shapes, path);
  }
  suite_free(&shapes);
  return rc;
}
