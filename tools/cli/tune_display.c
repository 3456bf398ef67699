/*
 * tune_display.c -- what `convtune tune` shows on stderr while it runs: on a
 * terminal, a progress line redrawn in place (the loop's timer keeps its
 * clock going; the candidate being timed comes from the library's log
 * callback), anything else a line per shape.  Shared by one-GPU runs,
 * --devices and its workers (tune.h).
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <uv.h>

#include "tools/cli/progress.h"
#include "tools/cli/tune.h"

/* Whether tune draws a progress line: --progress, and for auto a terminal
 * on stderr that is not TERM=dumb. */
static bool wants_bar(const cli_args *a) {
  if (a->progress != PROGRESS_AUTO) return a->progress == PROGRESS_ALWAYS;
  const char *term = getenv("TERM");
  return isatty(STDERR_FILENO) && !(term != NULL && strcmp(term, "dumb") == 0);
}

int display_init(tune_display *d, const cli_args *a, size_t total) {
  memset(d, 0, sizeof *d);
  d->bar = wants_bar(a);
  d->verbose = a->verbose;
  d->workers = 1;
  d->total = total;
  d->started = uv_hrtime();
  return uv_mutex_init(&d->lock);
}

/* stderr's width in columns: the terminal's, else $COLUMNS, else 80. */
static int terminal_width(void) {
  struct winsize ws;
  if (ioctl(STDERR_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0) return ws.ws_col;
  const char *columns = getenv("COLUMNS");
  int n = columns ? atoi(columns) : 0;
  return n > 0 ? n : 80;
}

/* The caller holds d->lock for these three. */
static void display_clear(tune_display *d) {
  if (d->drawn) fputs("\r\x1b[K", stderr);
  d->drawn = false;
}

static void display_draw(tune_display *d) {
  if (!d->bar) return;
  uint64_t now = uv_hrtime();
  /* With shapes tuned side by side, the finished ones took 1/workers of
   * their summed time off the clock. */
  progress p = {d->done, d->total, d->shape, d->candidate, (now - d->started) * 1e-9,
                d->finished_ns * 1e-9 / d->workers};
  char line[4096];
  progress_line(line, sizeof line, &p, terminal_width());
  fprintf(stderr, "\r%s\x1b[K", line);
  fflush(stderr);
  d->drawn = true;
}

/* A line of its own on stderr, above the progress line. */
static void display_print(tune_display *d, const char *text) {
  display_clear(d);
  fprintf(stderr, "%s\n", text);
  display_draw(d);
}

void display_say(tune_display *d, const char *fmt, ...) {
  char message[2048];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(message, sizeof message, fmt, ap);
  va_end(ap);
  uv_mutex_lock(&d->lock);
  display_clear(d);
  say("%s", message);
  display_draw(d);
  uv_mutex_unlock(&d->lock);
}

uint64_t display_shape_start(tune_display *d, size_t i, const char *label) {
  uv_mutex_lock(&d->lock);
  one_line(label, d->shape, sizeof d->shape);
  d->candidate[0] = '\0';
  uint64_t now = uv_hrtime();
  if (d->bar) {
    display_draw(d);
  } else {
    fprintf(stderr, "[%zu/%zu] %s ...\n", i + 1, d->total, d->shape);
  }
  uv_mutex_unlock(&d->lock);
  return now;
}

void display_shape_end(tune_display *d, uint64_t shape_started) {
  uv_mutex_lock(&d->lock);
  d->done++;
  d->finished_ns += uv_hrtime() - shape_started;
  d->shape[0] = d->candidate[0] = '\0';
  display_draw(d);
  uv_mutex_unlock(&d->lock);
}

void display_tick(uv_timer_t *timer) {
  tune_display *d = timer->data;
  uv_mutex_lock(&d->lock);
  if (d->drawn) display_draw(d);
  uv_mutex_unlock(&d->lock);
}

void display_finish(tune_display *d) {
  if (!d->drawn) return;
  display_draw(d);
  fputc('\n', stderr);
  d->drawn = false;
}

/* The library's messages (the context's log callback, on the worker
 * thread): warnings always; "timing ..." (DEBUG, a candidate starting) is
 * the progress line's candidate; with --verbose the other INFO and DEBUG
 * lines (a tuning's start and end, each candidate's outcome). */
void display_log(void *user, conv_log_level level, const char *message) {
  tune_display *d = user;
  char line[2048], text[2048];
  uv_mutex_lock(&d->lock);
  if (level == CONV_LOG_INFO) (void)tune_phases_parse(message, &d->phases);
  if (level <= CONV_LOG_WARN) {
    display_clear(d);
    say("%s%s", level == CONV_LOG_ERROR ? "error: " : "warning: ", message);
    display_draw(d);
  } else if (strncmp(message, "timing ", 7) == 0) {
    if (d->bar) {
      one_line(message + 7, d->candidate, sizeof d->candidate);
      display_draw(d);
    }
  } else if (d->verbose) {
    snprintf(text, sizeof text, "%s%s", level == CONV_LOG_DEBUG ? "  " : "",
             one_line(message, line, sizeof line));
    display_print(d, text);
  }
  uv_mutex_unlock(&d->lock);
}

