/*
 * tune.h -- what the parts of `convtune tune` share:
 *
 *   tune.c          the command: its shapes, then one of the runs below
 *   tune_run.c      one process's tuning: a worker thread tunes the shapes
 *                   while the main thread's libuv loop watches Ctrl-C and
 *                   the clock; the table of results
 *   tune_display.c  stderr's display
 *   devices.c  --devices: the shapes shared out to one worker process per
 *              GPU (libuv), each tuning into the same cache
 *   worker.c   --worker-device N: such a worker process
 *   shard.c    --shard K/N: the shapes cut to this process's share
 */
#ifndef CONVTUNE_TOOLS_CLI_TUNE_H
#define CONVTUNE_TOOLS_CLI_TUNE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include <uv.h>

#include "tools/cli/cli.h"
#include "tools/cli/phases.h"
#include "tools/json.h"

/* ---------------------------------------------------------------- display */

/* What tune shows on stderr while it runs.  The threads that write (a
 * worker, the log callback, the loop's Ctrl-C and clock) do so under
 * `lock`; with `bar`, every other line clears the progress line first and
 * redraws it after. */
typedef struct tune_display {
  uv_mutex_t lock;
  bool bar;     /* the progress line, redrawn in place */
  bool verbose; /* the library's INFO lines and each candidate's outcome */
  bool drawn;   /* a progress line is on the screen */
  unsigned workers; /* shapes tuned at once (--devices); the ETA divides by it */
  uint64_t started, finished_ns; /* uv_hrtime; the finished shapes' time, summed */
  size_t done, total;
  char shape[1024];    /* printable, "" between shapes */
  char candidate[512]; /* the config being timed, "" when none */
  tune_phases phases;  /* the last tuning's, from its INFO line (count 0: none) */
} tune_display;

int display_init(tune_display *d, const cli_args *a, size_t total);

/* say() without breaking the progress line. */
#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
void display_say(tune_display *d, const char *fmt, ...);

/* Shape i (of d->total) starts, named `label`; returns the time it did
 * (uv_hrtime), which display_shape_end takes back. */
uint64_t display_shape_start(tune_display *d, size_t i, const char *label);
void display_shape_end(tune_display *d, uint64_t shape_started);

/* The loop's timer callback (data: the display): the clock and the ETA
 * move between messages. */
void display_tick(uv_timer_t *timer);

/* The last progress line stays on the screen; the caller is the only
 * thread left writing. */
void display_finish(tune_display *d);

/* Says which libuv call failed and why; returns EXIT_FAILED. */
int say_uv_error(const char *what, int e);

/* The context's log callback (user: the display): warnings always; a
 * candidate starting becomes the progress line's candidate; a tuning's
 * phases (its last INFO line) go to d->phases; with --verbose the other
 * INFO and DEBUG lines. */
void display_log(void *user, conv_log_level level, const char *message);

/* ---------------------------------------------------------------- one shape */

typedef struct tune_row {
  const suite_shape *shape;
  bool started; /* tuned, or being tuned when the run ended */
  char key[CONV_PROBLEM_KEY_MAX];
  conv_status status;
  char error[512]; /* conv_context_last_error, one line */
  conv_plan_info info;
  double default_ms; /* the heuristic pick's time; < 0 unknown */
  tune_phases phases; /* where its tuning's time went; count 0: not tuned here */
} tune_row;

/* What finding cuDNN's own pick among a shape's trials needs: a reader of
 * the cache the context writes (each query sees its latest tunings) and
 * this GPU's fingerprint.  reader is NULL where there is none to read (an
 * in-memory cache): the default time is then unknown. */
typedef struct default_source {
  conv_cache_reader *reader;
  char device[CONV_DEVICE_FINGERPRINT_MAX];
} default_source;

void default_source_open(default_source *src, conv_context *ctx, const char *path,
                         tune_display *display);

/* Opens the context of `device` (a CUDA ordinal) on the cache at `path`
 * with tune's options, its log going to `display`.  EXIT_OK_, or the exit
 * code after saying why (EXIT_NO_GPU, EXIT_CACHE, EXIT_FAILED). */
int open_context(const cli_args *a, int device, const char *path, tune_display *display,
                 conv_context **ctx /* OUT */);

/* Tunes one shape (or finds it in the cache) and fills the row. */
void tune_one(conv_context *ctx, const default_source *defaults, const suite_shape *shape,
              tune_row *row, tune_display *display);

/* Prints the started rows of rows[0..count) (a table, or JSON with
 * --json) and turns the outcome into the exit code: EXIT_INTERRUPTED
 * when `interrupted`, EXIT_FAILED when a shape failed. */
int report_rows(const cli_args *a, const tune_row *rows, size_t count, bool interrupted);

/* ---------------------------------------------------------------- a run */

/* A tuning thread and the loop thread that watches Ctrl-C and the clock. */
typedef struct tune_job {
  conv_context *ctx;
  const suite *shapes;
  tune_row *rows;   /* shapes->count; the first `done` are filled */
  size_t done;      /* written by the tuning thread, read after the join */
  bool interrupted; /* likewise */
  atomic_bool stop; /* set by the SIGINT callback */
  uv_signal_t sigint;
  uv_async_t finished;
  uv_timer_t clock; /* redraws the progress line (with display->bar) */
  bool clock_open;
  tune_display *display;
  default_source defaults;
} tune_job;

/* Runs `work(job)` on a thread while this one runs a libuv loop: the first
 * SIGINT sets job->stop and interrupts job->ctx, then restores the default
 * action.  `work` must end with tune_job_finished(job).  EXIT_OK_, or
 * EXIT_FAILED after saying what libuv refused. */
int run_tuning(tune_job *job, uv_thread_cb work);
void tune_job_finished(tune_job *job);

/* The suite's notes (skipped rows), one printable line each. */
void print_notes(const suite *shapes);

/* tune --devices LIST (devices.c): the shapes (or, with --pending, the
 * cache's pending problems) tuned on those GPUs at once. */
int tune_on_devices(const cli_args *a, suite *shapes, const char *path);

/* tune --shard K/N (shard.c): drops from `shapes` all but shard K of N
 * (no-op without --shard), and says on stderr how many are kept, or that
 * none is (then, with --json, prints the empty array).  EXIT_OK_, or
 * EXIT_FAILED when memory runs out (said). */
int keep_shard(const cli_args *a, suite *shapes);

/* tune --worker-device N (worker.c). */
int run_tune_worker(const cli_args *a, const char *path);

#endif /* CONVTUNE_TOOLS_CLI_TUNE_H */
