/*
 * devices.c -- `convtune tune --devices all|0,1,...`: the shapes tuned on
 * several GPUs of one host at once.  Each GPU gets a worker process (this
 * program again, as `tune --worker-device N`: worker.c) with its own
 * context on the shared cache, which SQLite in WAL mode lets several
 * processes write.  Processes rather than threads: each GPU's CUDA context,
 * cuDNN handles and timings stay apart, and a worker that dies (a driver
 * fault, an abort inside a vendor library) loses only the shape it was
 * tuning.
 *
 * Shapes go out one at a time on the workers' stdin, so a GPU that finishes
 * early takes the next; each answer comes back as a line on the worker's
 * stdout (worker.c describes the lines).  The table is the one a single GPU
 * prints, in the shapes' order.  Workers run in their own session: a
 * Ctrl-C reaches them as this process passes it on (the first stops each
 * after its candidate, the second ends them at once).  GPUs of different
 * models are refused: a tuning belongs to one model, and the table would
 * mix them.  $CONVTUNE_WORKER, where set, is the program started as each
 * worker instead of this one (with the same arguments): a wrapper, or the
 * CPU tests' scripted worker (tests/fake_worker.sh).
 */
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/cli/tune.h"

typedef struct devices_run devices_run;

typedef struct worker {
  devices_run *run;
  int device; /* CUDA ordinal */
  uv_process_t process;
  uv_pipe_t to, from; /* its stdin, its stdout */
  bool spawned, to_closed, from_closed, exited, done;
  bool ready, start_failed;
  int64_t exit_status;
  int term_signal;
  char fingerprint[CONV_DEVICE_FINGERPRINT_MAX];
  char line[8192]; /* its stdout up to the next newline */
  size_t line_len;
  ptrdiff_t shape; /* the row it is tuning; -1: none */
  uint64_t shape_started;
  char request[CONV_PROBLEM_KEY_MAX + 1];
  uv_write_t write;
} worker;

struct devices_run {
  const cli_args *a;
  const char *path;
  suite *shapes;
  tune_row *rows;
  worker workers[CLI_DEVICES_MAX];
  size_t worker_count;
  size_t next;      /* the next row to hand out */
  bool dispatching; /* every worker was ready: rows go out */
  bool sigint_open;
  bool stop;        /* hand out no more */
  bool interrupted;
  unsigned sigints;
  int failure; /* an exit code that ends the run; EXIT_OK_: none */
  char exe[CLI_PATH_MAX];
  tune_display display;
  uv_loop_t loop;
  uv_signal_t sigint;
  uv_timer_t clock;
  bool clock_open;
};

/* ================================================================ the GPUs */

/* The ordinals of --devices: "all" asks CUDA how many there are; a list
 * is taken as it is (a worker given an ordinal it has no GPU for says so
 * and fails the run), so that this process need not touch CUDA. */
static int resolve_devices(const cli_args *a, int *ordinals, size_t *count) {
  *count = a->device_count;
  memcpy(ordinals, a->device_ordinals, a->device_count * sizeof *ordinals);
  if (*count > 0) return EXIT_OK_;
  int present = 0;
  if (conv_device_count(&present) != CONV_OK) {
    say("no usable CUDA GPU: %s", conv_context_last_error(NULL));
    return EXIT_NO_GPU;
  }
  for (int i = 0; i < present && i < CLI_DEVICES_MAX; i++) ordinals[(*count)++] = i;
  return EXIT_OK_;
}

/* The program each worker runs: $CONVTUNE_WORKER where set (given the
 * same arguments: a wrapper, e.g. to run workers under a profiler, or the
 * CPU tests' scripted worker), else this one. */
static int worker_program(char *exe, size_t size) {
  const char *chosen = getenv("CONVTUNE_WORKER");
  if (chosen != NULL && chosen[0] != '\0') {
    if (strlen(chosen) >= size) {
      say("$CONVTUNE_WORKER is too long");
      return EXIT_USAGE;
    }
    memcpy(exe, chosen, strlen(chosen) + 1);
    return EXIT_OK_;
  }
  int e = uv_exepath(exe, &size);
  if (e == 0) return EXIT_OK_;
  say("cannot find this program to start its workers: %s", uv_strerror(e));
  return EXIT_FAILED;
}

/* ================================================================ rows */

static void fail_row(tune_row *row, conv_status status, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

static void fail_row(tune_row *row, conv_status status, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(row->error, sizeof row->error, fmt, ap);
  va_end(ap);
  row->status = status;
  row->started = true;
}

/* The rows of the shapes, each with its key (what a worker is sent); a
 * shape without one fails here. */
static int prepare_rows(devices_run *run) {
  size_t count = run->shapes->count;
  run->rows = calloc(count ? count : 1, sizeof *run->rows);
  if (run->rows == NULL) {
    say("out of memory");
    return EXIT_FAILED;
  }
  for (size_t i = 0; i < count; i++) {
    tune_row *row = &run->rows[i];
    row->shape = &run->shapes->shapes[i];
    row->default_ms = -1;
    conv_status st = conv_problem_key(&row->shape->problem, row->key, sizeof row->key);
    if (st != CONV_OK) fail_row(row, st, "no key: %s", conv_status_string(st));
  }
  return EXIT_OK_;
}

/* A row line of worker.c: STATUS ALGORITHM CONFIG TIME_MS DEFAULT_MS
 * SOURCE WORKSPACE_BYTES ERROR. */
static void read_row(tune_row *row, char **f) {
  long status = strtol(f[0], NULL, 10);
  row->status = status >= CONV_OK && status < CONV_STATUS_COUNT_ ? (conv_status)status
                                                                 : CONV_INTERNAL;
  snprintf(row->info.algorithm, sizeof row->info.algorithm, "%s", f[1]);
  snprintf(row->info.config, sizeof row->info.config, "%s", f[2]);
  row->info.time_ms = strtod(f[3], NULL);
  row->default_ms = strtod(f[4], NULL);
  row->info.source = (conv_plan_source)strtol(f[5], NULL, 10);
  row->info.workspace_bytes = (size_t)strtoull(f[6], NULL, 10);
  snprintf(row->error, sizeof row->error, "%s", f[7]);
}

/* ================================================================ workers */

static void on_closed(uv_handle_t *handle) { (void)handle; }

static void close_stdin(worker *w) {
  if (!w->spawned || w->to_closed) return;
  w->to_closed = true;
  uv_close((uv_handle_t *)&w->to, on_closed);
}

static void stop_run(devices_run *run, int failure) {
  run->stop = true;
  if (run->failure == EXIT_OK_) run->failure = failure;
  for (size_t i = 0; i < run->worker_count; i++)
    if (run->workers[i].shape < 0) close_stdin(&run->workers[i]);
}

static void on_written(uv_write_t *req, int status) {
  worker *w = req->data;
  if (status == 0 || status == UV_ECANCELED || w->shape < 0) return;
  /* Its stdin is gone: the worker has ended or is ending; its exit fails
   * the row. */
  display_say(&w->run->display, "GPU %d: cannot send it a shape: %s", w->device,
              uv_strerror(status));
}

/* Hands the worker the next row, or ends its input. */
static void dispatch(worker *w) {
  devices_run *run = w->run;
  while (!run->stop && run->next < run->shapes->count && run->rows[run->next].started)
    run->next++;
  if (run->stop || run->next >= run->shapes->count) {
    close_stdin(w);
    return;
  }
  size_t i = run->next++;
  tune_row *row = &run->rows[i];
  row->started = true;
  w->shape = (ptrdiff_t)i;
  char label[1100];
  snprintf(label, sizeof label, "%s (GPU %d)", row->shape->name, w->device);
  w->shape_started = display_shape_start(&run->display, i, label);
  snprintf(w->request, sizeof w->request, "%s\n", row->key);
  uv_buf_t buf = uv_buf_init(w->request, (unsigned)strlen(w->request));
  w->write.data = w;
  int e = uv_write(&w->write, (uv_stream_t *)&w->to, &buf, 1, on_written);
  if (e != 0) {
    display_say(&run->display, "GPU %d: cannot send it a shape: %s", w->device, uv_strerror(e));
    close_stdin(w); /* its exit fails the row */
  }
}

/* Every worker has said it is ready: the rows go out. */
static void start_dispatch(devices_run *run) {
  run->dispatching = true;
  const worker *first = &run->workers[0];
  if (run->a->pending) {
    int rc = load_pending_shapes(run->path, first->fingerprint, run->a->stale_only, run->shapes);
    if (rc == EXIT_OK_ && run->shapes->count == 0) {
      say("nothing pending for this GPU model in %s", run->path);
      if (run->a->json) fputs("[]\n", stdout);
    } else if (rc == EXIT_OK_) {
      rc = keep_shard(run->a, run->shapes);
    }
    if (rc == EXIT_OK_) rc = prepare_rows(run);
    if (rc != EXIT_OK_ || run->shapes->count == 0) {
      stop_run(run, rc);
      return;
    }
    run->display.total = run->shapes->count;
    print_notes(run->shapes);
  }
  for (size_t i = 0; i < run->worker_count; i++) dispatch(&run->workers[i]);
}

static void on_ready(worker *w, const char *fingerprint) {
  devices_run *run = w->run;
  snprintf(w->fingerprint, sizeof w->fingerprint, "%s", fingerprint);
  w->ready = true;
  bool all_ready = true;
  for (size_t i = 0; i < run->worker_count; i++) {
    const worker *other = &run->workers[i];
    if (other->ready && strcmp(other->fingerprint, w->fingerprint) != 0) {
      say("GPU %d (%s) and GPU %d (%s) are different models: --devices takes GPUs of one "
          "model (tune each model with its own run)",
          other->device, other->fingerprint, w->device, w->fingerprint);
      stop_run(run, EXIT_USAGE);
      return;
    }
    all_ready &= other->ready;
  }
  if (all_ready && !run->stop && !run->dispatching) start_dispatch(run);
}

static void on_row(worker *w, char **fields) {
  devices_run *run = w->run;
  tune_row *row = &run->rows[w->shape];
  read_row(row, fields);
  display_shape_end(&run->display, w->shape_started);
  w->shape = -1;
  if (row->status == CONV_INTERRUPTED) {
    run->interrupted = true;
    run->stop = true;
  }
  dispatch(w);
}

/* Splits a line at its tabs into at most max fields; the count. */
static size_t split_tabs(char *line, char **fields, size_t max) {
  size_t n = 0;
  for (char *p = line; n < max;) {
    fields[n++] = p;
    char *tab = strchr(p, '\t');
    if (tab == NULL) break;
    *tab = '\0';
    p = tab + 1;
  }
  return n;
}

static void worker_said(worker *w, char *line) {
  char *f[10];
  size_t n = split_tabs(line, f, 10);
  if (n == 2 && strcmp(f[0], "ready") == 0 && !w->ready) {
    on_ready(w, f[1]);
  } else if (n == 2 && strcmp(f[0], "failed") == 0 && !w->ready) {
    long code = strtol(f[1], NULL, 10);
    w->start_failed = true;
    say("GPU %d could not start tuning (above)", w->device);
    stop_run(w->run, code > 0 && code < 256 ? (int)code : EXIT_FAILED);
  } else if (n == 9 && strcmp(f[0], "row") == 0 && w->shape >= 0) {
    on_row(w, f + 1);
  } else {
    char text[256];
    say("GPU %d's worker said something unexpected: '%s'; ending it", w->device,
        one_line(f[0], text, sizeof text));
    stop_run(w->run, EXIT_FAILED);
    uv_process_kill(&w->process, SIGKILL);
  }
}

static void maybe_finish(devices_run *run);

/* Both ends of a worker are in: its exit status, and its stdout to EOF
 * (so every line it wrote was read before its exit is judged). */
static void worker_ended(worker *w) {
  if (!w->exited || !w->from_closed || w->done) return;
  devices_run *run = w->run;
  w->done = true;
  char how[64];
  if (w->term_signal != 0)
    snprintf(how, sizeof how, "signal %d", w->term_signal);
  else
    snprintf(how, sizeof how, "exit status %lld", (long long)w->exit_status);
  if (w->shape >= 0) {
    tune_row *row = &run->rows[w->shape];
    fail_row(row, run->interrupted ? CONV_INTERRUPTED : CONV_INTERNAL,
             "the worker on GPU %d ended (%s) while tuning it", w->device, how);
    display_shape_end(&run->display, w->shape_started);
    w->shape = -1;
  } else if (!w->ready && !w->start_failed && !run->interrupted) {
    say("the worker for GPU %d ended (%s) before it was ready", w->device, how);
    stop_run(run, EXIT_FAILED);
  }
  close_stdin(w);
  uv_close((uv_handle_t *)&w->process, on_closed);
  /* The others may have been waiting for this one to be ready. */
  bool all_ready = true;
  for (size_t i = 0; i < run->worker_count; i++) all_ready &= run->workers[i].ready;
  if (!all_ready && !run->stop) stop_run(run, EXIT_FAILED);
  maybe_finish(run);
}

static void on_exit_cb(uv_process_t *process, int64_t exit_status, int term_signal) {
  worker *w = process->data;
  w->exited = true;
  w->exit_status = exit_status;
  w->term_signal = term_signal;
  worker_ended(w);
}

static void alloc_line(uv_handle_t *handle, size_t suggested, uv_buf_t *buf) {
  (void)suggested;
  worker *w = handle->data;
  buf->base = w->line + w->line_len;
  buf->len = sizeof w->line - w->line_len;
}

static void on_read(uv_stream_t *stream, ssize_t nread, const uv_buf_t *buf) {
  (void)buf;
  worker *w = stream->data;
  if (nread < 0) {
    if (nread != UV_EOF)
      display_say(&w->run->display, "GPU %d: reading its worker: %s", w->device,
                  uv_strerror((int)nread));
    w->from_closed = true;
    uv_close((uv_handle_t *)&w->from, on_closed);
    worker_ended(w);
    return;
  }
  w->line_len += (size_t)nread;
  char *start = w->line, *end = w->line + w->line_len, *nl;
  while (!w->from_closed && (nl = memchr(start, '\n', (size_t)(end - start))) != NULL) {
    *nl = '\0';
    worker_said(w, start);
    start = nl + 1;
  }
  w->line_len = (size_t)(end - start);
  memmove(w->line, start, w->line_len);
  if (w->line_len == sizeof w->line) {
    say("GPU %d's worker wrote a line longer than %zu bytes; ending it", w->device,
        sizeof w->line);
    w->line_len = 0;
    stop_run(w->run, EXIT_FAILED);
    uv_process_kill(&w->process, SIGKILL);
  }
}

static int spawn_worker(devices_run *run, worker *w) {
  const cli_args *a = run->a;
  static const char *const policies[] = {"exhaustive", "fast", "cache_only", "record",
                                         "predict"};
  char device[16], budget[64];
  snprintf(device, sizeof device, "%d", w->device);
  snprintf(budget, sizeof budget, "%.17g", a->budget_ms / 1000.0);
  const char *args[16];
  size_t n = 0;
  args[n++] = run->exe;
  args[n++] = "tune";
  args[n++] = "--worker-device";
  args[n++] = device;
  args[n++] = "--cache";
  args[n++] = run->path;
  args[n++] = "--policy";
  args[n++] = policies[a->policy];
  if (a->budget_ms > 0) {
    args[n++] = "--budget";
    args[n++] = budget;
  }
  if (a->system_cache_path != NULL) {
    args[n++] = "--system-cache";
    args[n++] = a->system_cache_path;
  }
  if (a->verbose) args[n++] = "--verbose";
  args[n] = NULL;

  uv_stdio_container_t stdio[3];
  stdio[0].flags = UV_CREATE_PIPE | UV_READABLE_PIPE;
  stdio[0].data.stream = (uv_stream_t *)&w->to;
  stdio[1].flags = UV_CREATE_PIPE | UV_WRITABLE_PIPE;
  stdio[1].data.stream = (uv_stream_t *)&w->from;
  stdio[2].flags = UV_INHERIT_FD;
  stdio[2].data.fd = 2;
  uv_process_options_t options;
  memset(&options, 0, sizeof options);
  options.exit_cb = on_exit_cb;
  options.file = run->exe;
  options.args = (char **)args;
  options.stdio = stdio;
  options.stdio_count = 3;
  options.flags = UV_PROCESS_DETACHED; /* Ctrl-C reaches it through us */

  int e = uv_pipe_init(&run->loop, &w->to, 0);
  if (e == 0 && (e = uv_pipe_init(&run->loop, &w->from, 0)) != 0)
    uv_close((uv_handle_t *)&w->to, on_closed);
  if (e != 0) {
    say("GPU %d: uv_pipe_init: %s", w->device, uv_strerror(e));
    return EXIT_FAILED;
  }
  w->to.data = w->from.data = w->process.data = w;
  if ((e = uv_spawn(&run->loop, &w->process, &options)) != 0) {
    say("GPU %d: cannot start a worker (%s): %s", w->device, run->exe, uv_strerror(e));
    uv_close((uv_handle_t *)&w->to, on_closed);
    uv_close((uv_handle_t *)&w->from, on_closed);
    uv_close((uv_handle_t *)&w->process, on_closed);
    return EXIT_FAILED;
  }
  w->spawned = true;
  if ((e = uv_read_start((uv_stream_t *)&w->from, alloc_line, on_read)) != 0) {
    say("GPU %d: uv_read_start: %s", w->device, uv_strerror(e));
    w->from_closed = true;
    uv_close((uv_handle_t *)&w->from, on_closed);
    uv_process_kill(&w->process, SIGKILL);
    return EXIT_FAILED;
  }
  return EXIT_OK_;
}

/* ================================================================ the loop */

static void maybe_finish(devices_run *run) {
  for (size_t i = 0; i < run->worker_count; i++) {
    const worker *w = &run->workers[i];
    if (w->spawned && !w->done) return;
  }
  if (!run->stop && run->next < run->shapes->count) {
    say("%zu shapes were not tuned: every worker has ended", run->shapes->count - run->next);
    run->failure = EXIT_FAILED;
  }
  if (run->sigint_open) uv_close((uv_handle_t *)&run->sigint, on_closed);
  run->sigint_open = false;
  if (run->clock_open) uv_close((uv_handle_t *)&run->clock, on_closed);
  run->clock_open = false;
}

static void on_sigint(uv_signal_t *handle, int signum) {
  (void)signum;
  devices_run *run = handle->data;
  run->sigints++;
  display_say(&run->display, run->sigints == 1
                                 ? "interrupted; stopping each GPU after its current candidate "
                                   "(measured trials are kept); Ctrl-C again to end them now"
                                 : "interrupted again; ending the workers now");
  run->interrupted = true;
  stop_run(run, EXIT_OK_);
  for (size_t i = 0; i < run->worker_count; i++) {
    worker *w = &run->workers[i];
    if (w->spawned && !w->exited) uv_process_kill(&w->process, SIGINT);
  }
}

static int start_loop_handles(devices_run *run) {
  int e = uv_signal_init(&run->loop, &run->sigint);
  if (e != 0) return e;
  run->sigint_open = true;
  run->sigint.data = run;
  if ((e = uv_signal_start(&run->sigint, on_sigint, SIGINT)) != 0) return e;
  if (!run->display.bar) return 0;
  if ((e = uv_timer_init(&run->loop, &run->clock)) != 0) return e;
  run->clock_open = true;
  run->clock.data = &run->display;
  return uv_timer_start(&run->clock, display_tick, 500, 500);
}

/* Starts a worker per GPU and runs the loop until every one has ended. */
static int run_workers(devices_run *run, const int *ordinals, size_t count) {
  int e = uv_loop_init(&run->loop);
  if (e != 0) {
    say("uv_loop_init: %s", uv_strerror(e));
    return EXIT_FAILED;
  }
  if ((e = start_loop_handles(run)) != 0) {
    say("cannot watch Ctrl-C or the clock: %s", uv_strerror(e));
    run->failure = EXIT_FAILED;
  }
  for (size_t i = 0; i < count && run->failure == EXIT_OK_; i++) {
    worker *w = &run->workers[run->worker_count++];
    w->run = run;
    w->device = ordinals[i];
    w->shape = -1;
    if (spawn_worker(run, w) != EXIT_OK_) stop_run(run, EXIT_FAILED);
  }
  if (run->failure != EXIT_OK_) maybe_finish(run);
  if ((e = uv_run(&run->loop, UV_RUN_DEFAULT)) != 0) say("uv_run: %s", uv_strerror(e));
  if ((e = uv_loop_close(&run->loop)) != 0) say("uv_loop_close: %s", uv_strerror(e));
  return EXIT_OK_;
}

int tune_on_devices(const cli_args *a, suite *shapes, const char *path) {
  int ordinals[CLI_DEVICES_MAX];
  size_t count = 0;
  int rc = resolve_devices(a, ordinals, &count);
  if (rc != EXIT_OK_) return rc;
  devices_run *run = calloc(1, sizeof *run);
  if (run == NULL) {
    say("out of memory");
    return EXIT_FAILED;
  }
  run->a = a;
  run->path = path;
  run->shapes = shapes;
  int e = 0;
  if ((rc = worker_program(run->exe, sizeof run->exe)) != EXIT_OK_) {
    /* said */
  } else if ((e = display_init(&run->display, a, shapes->count)) != 0) {
    say("uv_mutex_init: %s", uv_strerror(e));
    rc = EXIT_FAILED;
  } else {
    run->display.workers = (unsigned)count;
    if (!a->pending) {
      rc = prepare_rows(run);
      print_notes(shapes);
    }
    if (rc == EXIT_OK_) rc = run_workers(run, ordinals, count);
    display_finish(&run->display);
    uv_mutex_destroy(&run->display.lock);
    bool any = false;
    for (size_t i = 0; run->rows != NULL && i < shapes->count; i++) any |= run->rows[i].started;
    if (rc == EXIT_OK_ && any) rc = report_rows(a, run->rows, shapes->count, run->interrupted);
    if (rc == EXIT_OK_ && run->interrupted) rc = EXIT_INTERRUPTED;
    if (rc == EXIT_OK_ || rc == EXIT_INTERRUPTED) rc = run->failure != EXIT_OK_ ? run->failure : rc;
  }
  free(run->rows);
  free(run);
  return rc;
}
