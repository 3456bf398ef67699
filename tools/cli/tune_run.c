/*
 * tune_run.c -- one process's tuning, shared by one-GPU runs and --devices'
 * workers (tune.h): the context, each shape's plan and cuDNN's default
 * time, the worker thread under a libuv loop that watches SIGINT (the first
 * Ctrl-C asks the context to stop after the candidate being timed, and
 * restores the default action, so a second ends the process at once), and
 * the table or JSON of results.
 */
#include <math.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <uv.h>

#include "tools/cli/progress.h"
#include "tools/cli/tune.h"

typedef struct default_query {
  const char *device, *versions;
  double ms;
} default_query;

static int find_default_entry(const conv_cache_entry *e, void *user) {
  default_query *q = user;
  if (!e->heuristic_pick || strcmp(e->device, q->device) != 0 ||
      strcmp(e->versions, q->versions) != 0)
    return 0;
  if (e->status == CONV_OK && e->time_ms >= 0) q->ms = e->time_ms;
  return 1;
}

void default_source_open(default_source *src, conv_context *ctx, const char *path,
                                tune_display *display) {
  src->reader = NULL;
  if (strcmp(path, ":memory:") == 0) return;
  char message[512];
  if (conv_context_device_fingerprint(ctx, src->device, sizeof src->device) != CONV_OK ||
      conv_cache_reader_open(path, &src->reader, message, sizeof message) != CONV_OK) {
    display_say(display, "warning: cuDNN's default times unknown: %s",
                src->reader == NULL ? message : conv_context_last_error(ctx));
    src->reader = NULL;
  }
}

/* The time of cuDNN's own pick for this key on this device and build. */
static double default_time_ms(const default_source *src, const char *key, const char *name,
                              tune_display *display) {
  if (src->reader == NULL) return -1;
  default_query q = {src->device, conv_library_versions(), -1};
  char message[512];
  if (conv_cache_reader_trials(src->reader, key, find_default_entry, &q, message,
                               sizeof message) != CONV_OK) {
    display_say(display, "warning: %s: cannot read its trials: %s", name, message);
    return -1;
  }
  return q.ms;
}

void tune_one(conv_context *ctx, const default_source *defaults, const suite_shape *shape,
              tune_row *row, tune_display *display) {
  memset(row, 0, sizeof *row);
  row->shape = shape;
  row->started = true;
  row->default_ms = -1;
  if (conv_problem_key(&shape->problem, row->key, sizeof row->key) != CONV_OK) row->key[0] = '\0';
  conv_plan *plan = NULL;
  uv_mutex_lock(&display->lock);
  display->phases.count = 0;
  uv_mutex_unlock(&display->lock);
  row->status = conv_plan_create(ctx, &shape->problem, &plan);
  uv_mutex_lock(&display->lock);
  row->phases = display->phases; /* the log callback ran on this thread, inside the call */
  uv_mutex_unlock(&display->lock);
  if (row->status == CONV_OK) {
    row->status = conv_plan_info_get(plan, &row->info);
    conv_plan_destroy(plan);
  }
  if (row->status != CONV_OK) {
    one_line(conv_context_last_error(ctx), row->error, sizeof row->error);
    return;
  }
  if (row->key[0] != '\0')
    row->default_ms = default_time_ms(defaults, row->key, shape->name, display);
}

void tune_job_finished(tune_job *job) {
  int e = uv_async_send(&job->finished);
  if (e != 0) say("internal error: uv_async_send: %s", uv_strerror(e));
}

static void on_sigint(uv_signal_t *handle, int signum) {
  (void)signum;
  tune_job *job = handle->data;
  atomic_store(&job->stop, true);
  conv_context_interrupt(job->ctx);
  display_say(job->display,
              "interrupted; stopping after the current candidate (measured trials are kept)");
  /* Back to the default action: a second Ctrl-C ends the process at once. */
  int e = uv_signal_stop(handle);
  if (e != 0) say("uv_signal_stop: %s", uv_strerror(e));
}

static void on_finished(uv_async_t *handle) {
  tune_job *job = handle->data;
  uv_close((uv_handle_t *)&job->sigint, NULL);
  uv_close((uv_handle_t *)&job->finished, NULL);
  if (job->clock_open) uv_close((uv_handle_t *)&job->clock, NULL);
  job->clock_open = false;
}

/* With a progress line, a timer that redraws it twice a second. */
static int start_clock(uv_loop_t *loop, tune_job *job) {
  if (!job->display->bar) return 0;
  int e = uv_timer_init(loop, &job->clock);
  if (e != 0) return e;
  job->clock_open = true;
  job->clock.data = job->display;
  return uv_timer_start(&job->clock, display_tick, 500, 500);
}

int say_uv_error(const char *what, int e) {
  say("%s: %s", what, uv_strerror(e));
  return EXIT_FAILED;
}

int run_tuning(tune_job *job, uv_thread_cb work) {
  uv_loop_t loop;
  int e = uv_loop_init(&loop);
  if (e != 0) return say_uv_error("uv_loop_init", e);
  int rc = EXIT_OK_;
  bool started = false;
  uv_thread_t worker;
  job->finished.data = job->sigint.data = job;
  if ((e = uv_async_init(&loop, &job->finished, on_finished)) != 0) {
    rc = say_uv_error("uv_async_init", e);
  } else if ((e = uv_signal_init(&loop, &job->sigint)) != 0) {
    rc = say_uv_error("uv_signal_init", e);
    uv_close((uv_handle_t *)&job->finished, NULL);
  } else if ((e = uv_signal_start(&job->sigint, on_sigint, SIGINT)) != 0) {
    rc = say_uv_error("uv_signal_start", e);
    on_finished(&job->finished);
  } else if ((e = start_clock(&loop, job)) != 0) {
    rc = say_uv_error("uv_timer_start", e);
    on_finished(&job->finished);
  } else if ((e = uv_thread_create(&worker, work, job)) != 0) {
    rc = say_uv_error("uv_thread_create", e);
    on_finished(&job->finished);
  } else {
    started = true;
  }
  /* Until the worker's uv_async_send (or, on failure, until the closes). */
  if ((e = uv_run(&loop, UV_RUN_DEFAULT)) != 0 && rc == EXIT_OK_) rc = say_uv_error("uv_run", e);
  if (started && (e = uv_thread_join(&worker)) != 0 && rc == EXIT_OK_) {
    rc = say_uv_error("uv_thread_join", e);
  }
  if ((e = uv_loop_close(&loop)) != 0) rc = say_uv_error("uv_loop_close", e);
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
  static const int drop[] = {5, 3}; /* source, cuDNN's time (speedup stays) */
  text_table t;
  table_init(&t, 6, header, (1u << 2) | (1u << 3) | (1u << 4));
  table_fit(&t, 0, drop, 2);
  bool ok = true;
  for (size_t i = 0; i < count && ok; i++) {
    const tune_row *r = &rows[i];
    if (!r->started) continue;
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
  fprintf(out, ", \"workspace_bytes\": %zu", info->workspace_bytes);
  if (r->phases.count > 0) {
    fputs(", \"tuning_s\": ", out);
    tune_phases_write_json(out, &r->phases);
  }
  fputc('}', out);
}

static void write_tune_json(FILE *out, const tune_row *rows, size_t count) {
  size_t written = 0;
  fputc('[', out);
  for (size_t i = 0; i < count; i++) {
    if (!rows[i].started) continue;
    fputs(written++ ? ",\n " : "\n ", out);
    write_tune_row_json(out, &rows[i]);
  }
  fputs(written ? "\n]\n" : "]\n", out);
}

int report_rows(const cli_args *a, const tune_row *rows, size_t count, bool interrupted) {
  size_t started = 0, failed = 0;
  for (size_t i = 0; i < count; i++) {
    started += rows[i].started;
    failed += rows[i].started && rows[i].status != CONV_OK && rows[i].status != CONV_INTERRUPTED;
  }
  int rc = EXIT_OK_;
  if (a->json) {
    write_tune_json(stdout, rows, count);
  } else if (started > 0) {
    rc = print_tune_table(rows, count);
  }
  if (interrupted) {
    say("interrupted after %zu of %zu shapes", started, count);
    return EXIT_INTERRUPTED;
  }
  if (failed > 0) {
    say("%zu of %zu shapes failed", failed, count);
    return EXIT_FAILED;
  }
  return rc;
}

void print_notes(const suite *shapes) {
  for (size_t i = 0; i < shapes->note_count; i++) {
    char line[1024];
    fprintf(stderr, "%s\n", one_line(shapes->notes[i], line, sizeof line));
  }
}

int open_context(const cli_args *a, int device, const char *path, tune_display *display,
                 conv_context **ctx) {
  conv_context_options options;
  conv_context_options_init(&options);
  options.device = device;
  options.cache_path = path;
  options.system_cache_path = a->system_cache_path;
  options.policy = a->policy;
  options.tuning_budget_ms = a->budget_ms;
  /* The tool tunes: a winner of other versions is tuned again rather than
   * carried over, and one carried over earlier is re-timed (--stale). */
  options.retime_stale = 1;
  options.log = display_log;
  options.log_user = display;
  /* DEBUG: the candidates, for the progress line or --verbose; INFO: each
   * tuning's phases, for --json. */
  options.log_level = display->bar || a->verbose ? CONV_LOG_DEBUG
                      : a->json                  ? CONV_LOG_INFO
                                                 : CONV_LOG_WARN;
  conv_status st = conv_context_create(ctx, &options);
  if (st == CONV_OK) return EXIT_OK_;
  const char *msg = conv_context_last_error(NULL);
  if (msg[0] == '\0') msg = conv_status_string(st);
  if (st == CONV_NO_DEVICE) {
    if (device == 0)
      say("no usable CUDA GPU: %s", msg);
    else
      say("no usable CUDA GPU %d: %s", device, msg);
    return EXIT_NO_GPU;
  }
  if (st == CONV_CACHE_ERROR) {
    say("cannot open the cache %s: %s", path, msg);
    return EXIT_CACHE;
  }
  say("cannot start (%s): %s", status_name(st), msg);
  return EXIT_FAILED;
}

