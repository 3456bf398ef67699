/*
 * verify.c -- `convtune verify`: are a cache's winners for this GPU still
 * the fastest here?  For each, the shipped plan is rebuilt untimed (a
 * cache-only context reading the file as its read-only system cache, so
 * the file is never written), the same problem is tuned afresh into a
 * ":memory:" cache, and both plans are timed the same way here: CUDA
 * events around VERIFY_RUNS executes on fresh random inputs, the median of
 * VERIFY_SAMPLES such samples, after a warm-up.  A shipped winner slower
 * than the re-tuned one by more than the tolerance is flagged, and the
 * exit status says so (EXIT_FLAGGED).  Public API only (convtune.h), and
 * the CUDA runtime for memory and events.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime.h>

#include "tools/cli/cli.h"
#include "tools/cli/roofline.h"

#define VERIFY_WARMUP 3
#define VERIFY_RUNS 20
#define VERIFY_SAMPLES 7

/* A winner to verify, copied out of the reader's callback. */
typedef struct shipped {
  char *problem;
  char algorithm[32];
  char config[128];
} shipped;

typedef struct shipped_list {
  shipped *items;
  size_t count, cap, other_devices;
  const char *device; /* NULL while collecting before the GPU is known */
  bool out_of_memory;
} shipped_list;

static int collect_winner(const conv_cache_entry *e, void *user) {
  shipped_list *l = user;
  if (l->device != NULL && strcmp(e->device, l->device) != 0) {
    l->other_devices++;
    return 0;
  }
  /* Winners of other versions are not verified: a context uses them only
   * carried over (docs/caches.md, "Upgrades"), re-validated first and
   * re-timed by `tune --stale`. */
  if (strcmp(e->versions, conv_library_versions()) != 0) return 0;
  for (size_t i = 0; i < l->count; i++)
    if (strcmp(l->items[i].problem, e->problem) == 0) return 0;
  if (l->count == l->cap) {
    size_t cap = l->cap ? l->cap * 2 : 16;
    shipped *grown = realloc(l->items, cap * sizeof *grown);
    if (grown == NULL) goto oom;
    l->items = grown;
    l->cap = cap;
  }
  shipped *s = &l->items[l->count];
  if ((s->problem = copy_string(e->problem)) == NULL) goto oom;
  snprintf(s->algorithm, sizeof s->algorithm, "%s", e->algorithm);
  snprintf(s->config, sizeof s->config, "%s", e->config);
  l->count++;
  return 0;
oom:
  l->out_of_memory = true;
  return 1;
}

static void shipped_list_free(shipped_list *l) {
  for (size_t i = 0; i < l->count; i++) free(l->items[i].problem);
  free(l->items);
}

/* Reads the winners of `path` for `device`; EXIT_OK_ or the exit code
 * after saying why.  Done before any GPU is touched for device NULL (all),
 * so that a missing or foreign file is found without one. */
static int read_winners_of(const char *path, const char *device, shipped_list *l) {
  conv_cache_reader *reader = NULL;
  int rc = open_cache_read_only(path, &reader);
  if (rc != EXIT_OK_) return rc;
  l->device = device;
  char message[512];
  conv_status st = conv_cache_reader_winners(reader, collect_winner, l, message, sizeof message);
  conv_cache_reader_close(reader);
  return cache_read_outcome(path, st, l->out_of_memory, message);
}

/* read_winners_of each file (a shipped directory's files, in the order a
 * context looks them up: the first one's winner of a problem counts). */
static int read_winners(const cli_paths *files, const char *device, shipped_list *l) {
  int rc = EXIT_OK_;
  for (size_t i = 0; i < files->count && rc == EXIT_OK_; i++)
    rc = read_winners_of(files->items[i], device, l);
  return rc;
}

/* ---------------------------------------------------------------- timing */

/* Device tensors of one problem: x, w (or the dynamic weights), bias, y,
 * as every direction's execute takes them. */
typedef struct tensors {
  float *x, *w, *bias, *y;
} tensors;

static size_t elements(const conv_problem *p, char which) {
  int64_t out_h = 0, out_w = 0;
  (void)conv_problem_output_dims(p, &out_h, &out_w);
  switch (which) {
    case 'x': return (size_t)(p->n * p->c * p->h * p->w);
    case 'y': return (size_t)(p->n * p->k * out_h * out_w);
    case 'b': return (size_t)p->k;
    default:
      if (p->op == CONV_OP_DYNAMIC) return (size_t)(p->n * p->groups * p->r * p->s * out_h * out_w);
      return (size_t)(p->k * (p->c / p->groups) * p->r * p->s);
  }
}

/* cudaMalloc'd, filled with uniform [-1, 1) values from the host. */
static bool random_tensor(float **out, size_t count) {
  float *host = malloc(count * sizeof *host);
  if (host == NULL) return false;
  for (size_t i = 0; i < count; i++) host[i] = (float)rand() / ((float)RAND_MAX + 1.0f) * 2 - 1;
  bool ok = cudaMalloc((void **)out, count * sizeof *host) == cudaSuccess &&
            cudaMemcpy(*out, host, count * sizeof *host, cudaMemcpyHostToDevice) == cudaSuccess;
  free(host);
  return ok;
}

static void tensors_free(tensors *t) {
  cudaFree(t->x);
  cudaFree(t->w);
  cudaFree(t->bias);
  cudaFree(t->y);
  memset(t, 0, sizeof *t);
}

static bool tensors_make(tensors *t, const conv_problem *p) {
  memset(t, 0, sizeof *t);
  bool ok = random_tensor(&t->x, elements(p, 'x')) && random_tensor(&t->w, elements(p, 'w')) &&
            random_tensor(&t->bias, elements(p, 'b')) && random_tensor(&t->y, elements(p, 'y'));
  if (!ok) tensors_free(t);
  return ok;
}

static conv_status run_pass(conv_plan *plan, const conv_problem *p, cudaStream_t stream,
                            const tensors *t) {
  if (p->direction == CONV_BACKWARD_DATA)
    return conv_plan_backward_data(plan, stream, t->y, t->w, t->x);
  if (p->direction == CONV_BACKWARD_FILTER)
    return conv_plan_backward_filter(plan, stream, t->x, t->y, t->w);
  return conv_plan_execute(plan, stream, t->x, t->w, t->bias, t->y);
}

static int compare_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* The median ms of one execute of `plan`, on inputs of its own; < 0 (and
 * *why) when it could not be timed. */
static double time_plan(conv_plan *plan, const conv_problem *p, const char **why) {
  tensors t;
  cudaStream_t stream = NULL;
  cudaEvent_t start = NULL, stop = NULL;
  double samples[VERIFY_SAMPLES], result = -1;
  *why = "cannot allocate its tensors";
  if (!tensors_make(&t, p)) return -1;
  *why = "CUDA error";
  if (cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) != cudaSuccess ||
      cudaEventCreate(&start) != cudaSuccess || cudaEventCreate(&stop) != cudaSuccess)
    goto done;
  *why = "an execute failed";
  for (int i = 0; i < VERIFY_WARMUP; i++)
    if (run_pass(plan, p, stream, &t) != CONV_OK) goto done;
  for (int s = 0; s < VERIFY_SAMPLES; s++) {
    float ms = 0;
    if (cudaEventRecord(start, stream) != cudaSuccess) goto done;
    for (int i = 0; i < VERIFY_RUNS; i++)
      if (run_pass(plan, p, stream, &t) != CONV_OK) goto done;
    if (cudaEventRecord(stop, stream) != cudaSuccess || cudaEventSynchronize(stop) != cudaSuccess ||
        cudaEventElapsedTime(&ms, start, stop) != cudaSuccess)
      goto done;
    samples[s] = ms / VERIFY_RUNS;
  }
  qsort(samples, VERIFY_SAMPLES, sizeof samples[0], compare_double);
  result = samples[VERIFY_SAMPLES / 2];
done:
  if (stream) cudaStreamSynchronize(stream);
  if (start) cudaEventDestroy(start);
  if (stop) cudaEventDestroy(stop);
  if (stream) cudaStreamDestroy(stream);
  tensors_free(&t);
  (void)cudaGetLastError(); /* a failure here must not reach the next problem */
  return result;
}

/* ---------------------------------------------------------------- verify */

static int make_context(conv_context **ctx, const char *system, conv_policy policy) {
  conv_context_options o;
  conv_context_options_init(&o);
  o.cache_path = ":memory:";
  o.system_cache_path = system != NULL ? system : "";
  o.policy = policy;
  conv_status st = conv_context_create(ctx, &o);
  if (st == CONV_OK) return EXIT_OK_;
  say("%s: %s", st == CONV_NO_DEVICE ? "no usable CUDA GPU" : "cannot start",
      conv_context_last_error(NULL));
  return st == CONV_NO_DEVICE ? EXIT_NO_GPU : st == CONV_CACHE_ERROR ? EXIT_CACHE : EXIT_FAILED;
}

/* One row: the shipped plan and a fresh tuning, each timed here. */
typedef struct verify_row {
  char shipped[200], retuned[200], shipped_ms[32], retuned_ms[32], ratio[32], flag[64];
  bool flagged, failed;
} verify_row;

static void plan_name(conv_plan *plan, char *out, size_t size) {
  conv_plan_info info;
  if (conv_plan_info_get(plan, &info) == CONV_OK)
    snprintf(out, size, "%s %s", info.algorithm, info.config);
  else
    snprintf(out, size, "?");
}

static void verify_one(conv_context *shipped_ctx, conv_context *tuning_ctx, const char *key,
                       double tolerance, verify_row *row) {
  memset(row, 0, sizeof *row);
  snprintf(row->shipped_ms, sizeof row->shipped_ms, "-");
  snprintf(row->retuned_ms, sizeof row->retuned_ms, "-");
  snprintf(row->ratio, sizeof row->ratio, "-");
  conv_problem p;
  if (conv_problem_from_key(key, &p) != CONV_OK) {
    row->failed = true;
    snprintf(row->flag, sizeof row->flag, "SKIPPED: not a key this convtune can rebuild");
    return;
  }
  conv_plan *old = NULL, *fresh = NULL;
  const char *why = "";
  double old_ms = -1, new_ms = -1;
  if (conv_plan_create(shipped_ctx, &p, &old) != CONV_OK) {
    why = conv_context_last_error(shipped_ctx);
  } else {
    plan_name(old, row->shipped, sizeof row->shipped);
    old_ms = time_plan(old, &p, &why);
  }
  if (old_ms >= 0 && conv_plan_create(tuning_ctx, &p, &fresh) != CONV_OK) {
    why = conv_context_last_error(tuning_ctx);
  } else if (old_ms >= 0) {
    plan_name(fresh, row->retuned, sizeof row->retuned);
    new_ms = time_plan(fresh, &p, &why);
  }
  conv_plan_destroy(old);
  conv_plan_destroy(fresh);
  if (old_ms < 0 || new_ms <= 0) {
    row->failed = true;
    snprintf(row->flag, sizeof row->flag, "FAILED: %s", why);
    return;
  }
  format_ms(old_ms, row->shipped_ms, sizeof row->shipped_ms);
  format_ms(new_ms, row->retuned_ms, sizeof row->retuned_ms);
  snprintf(row->ratio, sizeof row->ratio, "%.2f", old_ms / new_ms);
  /* The re-tune chose the shipped plan itself: a gap between two timings
   * of one plan is noise (an H200's verify of a 2.6 us winner measured
   * 12%), not a reason to re-tune. */
  const bool same_plan = strcmp(row->shipped, row->retuned) == 0;
  row->flagged = !same_plan && old_ms > new_ms * (1 + tolerance);
  snprintf(row->flag, sizeof row->flag, "%s",
           row->flagged ? "SLOWER" : same_plan ? "ok (same plan)" : "ok");
}

static int verify_all(const cli_args *a, const char *path, const cli_paths *files,
                      shipped_list *l) {
  conv_context *shipped_ctx = NULL, *tuning_ctx = NULL;
  int rc = make_context(&shipped_ctx, path, CONV_POLICY_CACHE_ONLY);
  if (rc == EXIT_OK_) rc = make_context(&tuning_ctx, NULL, CONV_POLICY_EXHAUSTIVE);
  char device[CONV_DEVICE_FINGERPRINT_MAX];
  if (rc == EXIT_OK_ &&
      conv_context_device_fingerprint(shipped_ctx, device, sizeof device) != CONV_OK) {
    say("cannot read this GPU's fingerprint: %s", conv_context_last_error(shipped_ctx));
    rc = EXIT_FAILED;
  }
  if (rc == EXIT_OK_) {
    shipped_list_free(l);
    memset(l, 0, sizeof *l);
    rc = read_winners(files, device, l);
  }
  size_t flagged = 0, failed = 0;
  if (rc == EXIT_OK_ && l->count == 0) {
    say("no winners for this GPU (%s) and these library versions in %s (%zu of other GPUs)",
        device, path, l->other_devices);
  } else if (rc == EXIT_OK_) {
    static const char *const header[] = {"problem", "shipped", "shipped ms", "re-tuned",
                                         "re-tuned ms", "ratio", ""};
    static const int drop[] = {3, 1}; /* the re-tuned config, the shipped one */
    text_table t;
    table_init(&t, 7, header, (1u << 2) | (1u << 4) | (1u << 5));
    table_fit(&t, 0, drop, 2);
    bool ok = true;
    for (size_t i = 0; i < l->count && ok; i++) {
      fprintf(stderr, "[%zu/%zu] %s ...\n", i + 1, l->count, l->items[i].problem);
      verify_row row;
      verify_one(shipped_ctx, tuning_ctx, l->items[i].problem, a->tolerance, &row);
      flagged += row.flagged;
      failed += row.failed;
      const char *cells[] = {l->items[i].problem, row.shipped, row.shipped_ms, row.retuned,
                             row.retuned_ms, row.ratio, row.flag};
      ok = table_add(&t, cells, t.ncols);
    }
    rc = table_finish(&t, ok);
  }
  conv_context_destroy(shipped_ctx);
  conv_context_destroy(tuning_ctx);
  if (rc != EXIT_OK_) return rc;
  if (failed > 0) say("%zu of %zu winners could not be verified", failed, l->count);
  if (flagged > 0) {
    say("%zu of %zu shipped winners are slower here than a re-tune by more than %.0f%%", flagged,
        l->count, a->tolerance * 100);
    return EXIT_FLAGGED;
  }
  return failed > 0 ? EXIT_FAILED : EXIT_OK_;
}

/* ---------------------------------------------------------------- --dry-run */

/* Checking a cache's winners without a GPU: every winner of every GPU and
 * versions, one table per file. */
typedef struct dry_run {
  text_table table;
  size_t checked, current, bad;
  bool complete; /* every table_add succeeded */
} dry_run;

/* Why a winner is unusable by this convtune on any GPU, in why[size]; NULL
 * when it is fine.  The reader has checked the row itself (a winner
 * valid, validated and timed); what is left is whether its key is a shape
 * this build rebuilds, as a plan's lookup and `verify` need. */
static const char *unusable(const conv_cache_entry *e, char *why, size_t size) {
  conv_problem p;
  char key[CONV_PROBLEM_KEY_MAX], message[256] = "";
  if (conv_problem_from_key(e->problem, &p) != CONV_OK)
    return "BAD: not a key this convtune can rebuild";
  if (conv_problem_validate(&p, message, sizeof message) != CONV_OK) {
    snprintf(why, size, "BAD: an invalid shape (%s)", message);
    return why;
  }
  if (conv_problem_key(&p, key, sizeof key) != CONV_OK || strcmp(key, e->problem) != 0)
    return "BAD: its key rebuilds to another";
  if (e->status != CONV_OK || !(e->time_ms > 0) || e->rel_error < 0)
    return "BAD: a winner that failed, or was not timed or validated";
  return NULL;
}

static int check_winner(const conv_cache_entry *e, void *user) {
  dry_run *d = user;
  char why[320], ms[32];
  const char *bad = unusable(e, why, sizeof why);
  const bool current = strcmp(e->versions, conv_library_versions()) == 0;
  d->checked++;
  d->bad += bad != NULL;
  d->current += bad == NULL && current;
  const char *cells[] = {e->problem, e->algorithm, e->config, format_ms(e->time_ms, ms, sizeof ms),
                         e->device,  bad ? bad : current ? "ok" : "ok, other versions"};
  d->complete = d->complete && table_add(&d->table, cells, d->table.ncols);
  return d->complete ? 0 : 1;
}

/* verify --dry-run: each file's winners checked (unusable), never a GPU.
 * Exit 0 when all are usable, 1 when one is not, 4 for a bad cache. */
static int verify_dry_run(const cli_paths *files) {
  static const char *const header[] = {"problem", "algorithm", "config", "time ms", "device",
                                       "check"};
  dry_run d = {.complete = true};
  int rc = EXIT_OK_;
  for (size_t i = 0; i < files->count && rc == EXIT_OK_; i++) {
    conv_cache_reader *reader = NULL;
    char message[512], line[CLI_PATH_MAX];
    rc = open_cache_read_only(files->items[i], &reader);
    if (rc != EXIT_OK_) break;
    static const int drop[] = {2, 4}; /* the config, the GPU */
    table_init(&d.table, 6, header, 1u << 3);
    table_fit(&d.table, 1u << 4, drop, 2);
    conv_status st = conv_cache_reader_winners(reader, check_winner, &d, message, sizeof message);
    conv_cache_reader_close(reader);
    rc = cache_read_outcome(files->items[i], st, false, message);
    if (rc == EXIT_OK_) printf("%s%s:\n", i ? "\n" : "", one_line(files->items[i], line, sizeof line));
    if (rc == EXIT_OK_) rc = table_finish(&d.table, d.complete);
    else table_free(&d.table);
  }
  if (rc != EXIT_OK_) return rc;
  say("checked %zu winners in %zu cache file%s without a GPU: %zu usable by this build, %zu of "
      "them tuned under its versions (%s), which a context uses on their GPU; %zu unusable",
      d.checked, files->count, files->count == 1 ? "" : "s", d.checked - d.bad, d.current,
      conv_library_versions(), d.bad);
  return d.bad > 0 ? EXIT_FAILED : EXIT_OK_;
}

/* The files to verify: --system-cache's (a file, or a directory's *.db
 * files), else --cache's or the default cache. */
static int files_to_verify(const cli_args *a, char *path, size_t size, cli_paths *files) {
  memset(files, 0, sizeof *files);
  if (a->system_cache_path == NULL) {
    int rc = cache_path(a, false, path, size);
    if (rc != EXIT_OK_) return rc;
    if ((files->items = malloc(sizeof *files->items)) == NULL ||
        (files->items[0] = copy_string(path)) == NULL) {
      say("out of memory");
      return EXIT_FAILED;
    }
    files->count = 1;
    return EXIT_OK_;
  }
  if (a->system_cache_path[0] == '\0') return usage_error("--system-cache needs a path here");
  snprintf(path, size, "%s", a->system_cache_path);
  int rc = system_cache_paths(path, files);
  if (rc == EXIT_OK_ && files->count == 0) {
    say("no cache files (*.db) in %s", path);
    rc = EXIT_CACHE;
  }
  return rc;
}

int cmd_verify(const cli_args *a) {
  char path[CLI_PATH_MAX];
  cli_paths files;
  int rc = files_to_verify(a, path, sizeof path, &files);
  if (rc == EXIT_OK_ && a->dry_run) {
    rc = verify_dry_run(&files);
    cli_paths_free(&files);
    return rc;
  }
  /* The file first, without a GPU: a missing or foreign cache is exit 4. */
  shipped_list l;
  memset(&l, 0, sizeof l);
  if (rc == EXIT_OK_) rc = read_winners(&files, NULL, &l);
  if (rc == EXIT_OK_) rc = verify_all(a, path, &files, &l);
  shipped_list_free(&l);
  cli_paths_free(&files);
  return rc;
}
