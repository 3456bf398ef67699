/* tuner.c -- time and validate every applicable candidate config. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tuner/check.h"
#include "tuner/tuner.h"

/* Configs asked of one family: all of them, or a few best guesses. */
#define MAX_CONFIGS_EXHAUSTIVE 512
#define MAX_CONFIGS_FAST 3
/* Timing: a CUDA graph of back-to-back runs lasting about BATCH_MS, replayed
 * until MIN_SAMPLES replays and MIN_TOTAL_MS of runs, at most MAX_SAMPLES.
 * A candidate that cannot win stops earlier (conv_tuner_abandons, tuner.h):
 * two samples instead of about thirty. */
#define BATCH_MS 1.0
#define MIN_SAMPLES 5
#define MIN_TOTAL_MS 30.0
#define MAX_SAMPLES 50
#define MAX_BATCH_RUNS 200
/* Held before each timed replay: longer than the host takes to queue the
 * start event and the launch behind it. */
#define HOLD_US 50
/* A run this long is GPU-bound even launched directly (a launch costs the
 * host at most ~30 us, under 3% of it): it is timed without a graph (and
 * may be abandoned after that one run). */
#define DIRECT_MS CONV_ABANDON_LONG_RUN_MS

/* Device tensors and timing objects for one tuning.  x, w and y hold
 * elements of the problem's dtype; the bias and the reference are fp32.
 * The tensors come from the context's allocator, for work on the tuning
 * stream (req->stream), and go back to it with that stream. */
typedef struct bench {
  const conv_tune_request *req;
  conv_shape shape;
  void *x, *w, *y;
  float *bias, *ref;
  void *out; /* what the problem's pass writes: y, x (dx) or w (dw); shape.out_elems */
  void *scratch;
  size_t x_bytes, w_bytes, y_bytes, bias_bytes, ref_bytes;
  cudaStream_t stream;
  cudaEvent_t start, stop;
} bench;

static conv_status bench_tensor(bench *b, size_t bytes, void **ptr, const char *what,
                                conv_error *err) {
  return conv_device_alloc(&b->req->env->allocator, bytes, b->stream, ptr, what, err);
}

static conv_status bench_alloc(bench *b, conv_error *err) {
  conv_status st;
  const size_t f = sizeof(float), e = conv_dtype_bytes(b->req->problem->dtype);
  const conv_direction direction = b->req->problem->direction;
  b->stream = b->req->stream;
  b->x_bytes = (size_t)b->shape.x_elems * e;
  b->w_bytes = (size_t)b->shape.w_elems * e;
  b->bias_bytes = (size_t)b->req->problem->k * f;
  b->y_bytes = (size_t)b->shape.y_elems * e;
  b->ref_bytes = (size_t)b->shape.out_elems * f;
  CONV_TRY(st, bench_tensor(b, b->x_bytes, &b->x, "x", err), done);
  CONV_TRY(st, bench_tensor(b, b->w_bytes, &b->w, "w", err), done);
  CONV_TRY(st, bench_tensor(b, b->bias_bytes, (void **)&b->bias, "bias", err), done);
  CONV_TRY(st, bench_tensor(b, b->y_bytes, &b->y, "y", err), done);
  CONV_TRY(st, bench_tensor(b, b->ref_bytes, (void **)&b->ref, "reference", err), done);
  CONV_TRY(st, bench_tensor(b, CONV_COMPARE_SCRATCH_BYTES, &b->scratch, "scratch", err), done);
  CONV_TRY(st, conv_check_cuda(err, cudaEventCreate(&b->start), "cudaEventCreate"), done);
  CONV_TRY(st, conv_check_cuda(err, cudaEventCreate(&b->stop), "cudaEventCreate"), done);
  b->out = direction == CONV_BACKWARD_DATA ? b->x : direction == CONV_BACKWARD_FILTER ? b->w : b->y;
done:
  return st;
}

/* Synchronised first: a tuning leaves nothing queued on the context's stream. */
static void bench_free(bench *b) {
  const conv_allocator *a = &b->req->env->allocator;
  if (b->stream) (void)cudaStreamSynchronize(b->stream);
  conv_device_free(a, b->x, b->x_bytes, b->stream);
  conv_device_free(a, b->w, b->w_bytes, b->stream);
  conv_device_free(a, b->bias, b->bias_bytes, b->stream);
  conv_device_free(a, b->y, b->y_bytes, b->stream);
  conv_device_free(a, b->ref, b->ref_bytes, b->stream);
  conv_device_free(a, b->scratch, CONV_COMPARE_SCRATCH_BYTES, b->stream);
  if (b->start) cudaEventDestroy(b->start);
  if (b->stop) cudaEventDestroy(b->stop);
}

/* The reference output of the problem's pass into b->ref. */
static cudaError_t bench_reference(bench *b) {
  const conv_problem *p = b->req->problem;
  switch (p->direction) {
    case CONV_BACKWARD_DATA:
      return conv_reference_backward_data(p, b->y, b->w, b->ref, b->stream);
    case CONV_BACKWARD_FILTER:
      return conv_reference_backward_filter(p, b->x, b->y, b->ref, b->stream);
    case CONV_FORWARD: break;
  }
  return conv_reference_forward(p, b->x, b->w, b->bias, b->ref, b->stream);
}

/* Fresh random inputs for every tuning (never zeros), and the reference.
 * Every tensor is filled, y too (dy of a backward pass), in the problem's
 * dtype (the bias in fp32); the pass's output is poisoned before each
 * validation run. */
static conv_status bench_inputs(bench *b, conv_error *err) {
  uint64_t seed = uv_hrtime();
  const conv_problem *p = b->req->problem;
  const conv_dtype t = p->dtype;
  conv_status st;
  CONV_TRY(st, conv_check_cuda(err, conv_fill_uniform(b->x, t, b->shape.x_elems, seed, -1.f, 1.f, b->stream), "fill x"), done);
  CONV_TRY(st, conv_check_cuda(err, conv_fill_uniform(b->w, t, b->shape.w_elems, seed + 1, -1.f, 1.f, b->stream), "fill w"), done);
  CONV_TRY(st, conv_check_cuda(err, conv_fill_uniform(b->bias, CONV_DTYPE_F32, p->k, seed + 2, -1.f, 1.f, b->stream), "fill bias"), done);
  CONV_TRY(st, conv_check_cuda(err, conv_fill_uniform(b->y, t, b->shape.y_elems, seed + 3, -1.f, 1.f, b->stream), "fill y"), done);
  CONV_TRY(st, conv_check_cuda(err, bench_reference(b), "reference convolution"), done);
  st = conv_check_cuda(err, cudaStreamSynchronize(b->stream), "reference convolution");
done:
  return st;
}

static conv_status run_once(bench *b, const conv_algorithm *algo, const conv_prepared *prep,
                            void *workspace, conv_error *err) {
  conv_exec exec = {b->req->problem, b->req->env, prep->state, b->x, b->w, b->bias, b->y,
                    workspace, prep->workspace_bytes};
  return algo->run(&exec, b->stream, err);
}

/* Poisons the pass's output, runs once, compares with the reference;
 * *run_ms: that run's GPU time, first-launch costs included.  A
 * non-finite output fails whatever its error: unwritten (the poison), NaN,
 * or an fp16 sum that overflowed to inf where the reference is finite. */
static conv_status validate(bench *b, const conv_algorithm *algo, const conv_prepared *prep,
                            void *workspace, conv_trial *trial, double *run_ms,
                            conv_error *err) {
  conv_status st;
  float ms = 0;
  const conv_dtype t = b->req->problem->dtype;
  CONV_TRY(st, conv_check_cuda(err, conv_fill_poison(b->out, t, b->shape.out_elems, b->stream), "poison the output"), done);
  CONV_TRY(st, conv_check_cuda(err, cudaEventRecord(b->start, b->stream), "cudaEventRecord"), done);
  CONV_TRY(st, run_once(b, algo, prep, workspace, err), done);
  CONV_TRY(st, conv_check_cuda(err, cudaEventRecord(b->stop, b->stream), "cudaEventRecord"), done);
  CONV_TRY(st, conv_check_cuda(err, cudaStreamSynchronize(b->stream), "first run"), done);
  CONV_TRY(st, conv_check_cuda(err, cudaEventElapsedTime(&ms, b->start, b->stop), "cudaEventElapsedTime"), done);
  *run_ms = ms;
  int64_t nonfinite = 0;
  CONV_TRY(st, conv_check_cuda(err, conv_relative_l2(b->out, t, b->ref, b->shape.out_elems, b->scratch, b->stream, &trial->rel_error, &nonfinite), "compare with reference"), done);
  double bound = conv_error_bound_for(b->req->problem, prep->arith);
  if (nonfinite > 0)
    st = conv_error_set(err, CONV_VALIDATION_FAILED, "%lld outputs are NaN/Inf or unwritten%s",
                        (long long)nonfinite,
                        t == CONV_DTYPE_F16 ? " (or overflowed fp16)" : "");
  else if (!(trial->rel_error <= bound))
    st = conv_error_set(err, CONV_VALIDATION_FAILED, "relative L2 error %.3g exceeds bound %.1g",
                        trial->rel_error, bound);
done:
  return st;
}

/* Why replays: a plan's executes replay a CUDA graph of its launches, so
 * the GPU time of a replay is what users get.  Timing direct launches of a
 * kernel of a few microseconds would time the host instead (a cuDNN
 * engine's launch costs it 10-30 us) and pick winners at random among
 * small layers. */
typedef struct timed_work {
  bench *b;
  const conv_algorithm *algo;
  const conv_prepared *prep;
  void *workspace;
  int runs;              /* per sample                                   */
  cudaGraphExec_t graph; /* the runs captured; NULL: launched directly   */
} timed_work;

static conv_status launch_work(timed_work *t, conv_error *err) {
  if (t->graph != NULL)
    return conv_check_cuda(err, cudaGraphLaunch(t->graph, t->b->stream), "cudaGraphLaunch");
  conv_status st = CONV_OK;
  for (int i = 0; i < t->runs && st == CONV_OK; i++)
    st = run_once(t->b, t->algo, t->prep, t->workspace, err);
  return st;
}

/* Milliseconds the work takes on the GPU, timed with events behind a hold. */
static conv_status time_work(timed_work *t, double *ms, conv_error *err) {
  bench *b = t->b;
  conv_status st;
  CONV_TRY(st, conv_check_cuda(err, conv_hold_stream(HOLD_US, b->stream), "hold the stream"), done);
  CONV_TRY(st, conv_check_cuda(err, cudaEventRecord(b->start, b->stream), "cudaEventRecord"), done);
  CONV_TRY(st, launch_work(t, err), done);
  CONV_TRY(st, conv_check_cuda(err, cudaEventRecord(b->stop, b->stream), "cudaEventRecord"), done);
  CONV_TRY(st, conv_check_cuda(err, cudaEventSynchronize(b->stop), "timed runs"), done);
  float elapsed = 0;
  CONV_TRY(st, conv_check_cuda(err, cudaEventElapsedTime(&elapsed, b->start, b->stop), "cudaEventElapsedTime"), done);
  *ms = elapsed;
done:
  return st;
}

/* Captures t->runs runs into t->graph.  A candidate that cannot be captured
 * (none today) is timed launched directly, as conv_plan_execute then runs
 * it; only a failure after capture is the trial's failure. */
static conv_status capture_work(timed_work *t, conv_error *err) {
  bench *b = t->b;
  cudaGraph_t graph = NULL;
  if (cudaStreamBeginCapture(b->stream, cudaStreamCaptureModeThreadLocal) != cudaSuccess) {
    cudaGetLastError();
    return CONV_OK;
  }
  conv_error ignored = {CONV_OK, ""};
  conv_status st = CONV_OK;
  for (int i = 0; i < t->runs && st == CONV_OK; i++)
    st = run_once(b, t->algo, t->prep, t->workspace, &ignored);
  cudaError_t e = cudaStreamEndCapture(b->stream, &graph);
  if (st == CONV_OK && e == cudaSuccess && graph != NULL)
    e = cudaGraphInstantiate(&t->graph, graph, 0);
  if (graph != NULL) cudaGraphDestroy(graph);
  if (st != CONV_OK || e != cudaSuccess) {
    t->graph = NULL;
    cudaGetLastError(); /* capture errors are not sticky; direct runs follow */
    return CONV_OK;
  }
  /* The first replay uploads the graph: not a sample. */
  return conv_check_cuda(err, cudaGraphLaunch(t->graph, b->stream), "cudaGraphLaunch");
}

static int compare_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* Median time of one run.  A direct run (after validation's) first sizes
 * the batch; then samples of t.runs runs each.  *abandoned_after: the
 * samples taken when the config was abandoned (it cannot win), else 0. */
static conv_status measure(bench *b, const conv_algorithm *algo, const conv_prepared *prep,
                           void *workspace, double best_ms, double *median_ms,
                           int *abandoned_after, conv_error *err) {
  timed_work t = {b, algo, prep, workspace, 1, NULL};
  double warm = 0, samples[MAX_SAMPLES], total = 0, fastest = 0;
  *abandoned_after = 0;
  conv_status st = time_work(&t, &warm, err);
  if (st != CONV_OK) return st;
  if (warm >= DIRECT_MS && conv_tuner_abandons(1, warm, best_ms)) {
    *median_ms = warm;
    *abandoned_after = 1;
    return CONV_OK;
  }
  int runs = warm > 0 ? (int)(BATCH_MS / warm) : MAX_BATCH_RUNS;
  t.runs = runs < 1 ? 1 : runs > MAX_BATCH_RUNS ? MAX_BATCH_RUNS : runs;
  int n = 0;
  if (warm < DIRECT_MS) CONV_TRY(st, capture_work(&t, err), done);
  while (n < MAX_SAMPLES && (n < MIN_SAMPLES || total < MIN_TOTAL_MS)) {
    double ms;
    CONV_TRY(st, time_work(&t, &ms, err), done);
    samples[n++] = ms / t.runs;
    total += ms;
    fastest = n == 1 || samples[n - 1] < fastest ? samples[n - 1] : fastest;
    if (conv_tuner_abandons(n, fastest, best_ms)) {
      *abandoned_after = n;
      break;
    }
  }
  qsort(samples, (size_t)n, sizeof samples[0], compare_double);
  *median_ms = n % 2 ? samples[n / 2] : 0.5 * (samples[n / 2 - 1] + samples[n / 2]);
done:
  if (t.graph != NULL) cudaGraphExecDestroy(t.graph);
  return st;
}

/* One config from prepare to timing (or, untimed, to validation);
 * failures are the trial's result. */
static void run_trial(bench *b, const conv_algorithm *algo, const conv_config *config,
                      bool timed, double best_ms, conv_trial *trial) {
  conv_error err = {CONV_OK, ""};
  conv_prepared prep = {0};
  void *workspace = NULL;
  conv_status st = algo->prepare(b->req->problem, b->req->env, config, &prep, &err);
  if (st == CONV_OK) {
    trial->deterministic = prep.deterministic; /* also where it is refused for it */
    st = conv_prepared_admits(b->req->problem, &prep, algo->name, &err);
  }
  if (st == CONV_OK) {
    trial->workspace_bytes = prep.workspace_bytes;
    if (prep.workspace_bytes > b->req->workspace_limit)
      st = conv_error_set(&err, CONV_WORKSPACE_LIMIT, "needs %zu bytes of workspace, limit %zu",
                          prep.workspace_bytes, b->req->workspace_limit);
  }
  if (st == CONV_OK && prep.workspace_bytes > 0)
    st = conv_device_alloc(&b->req->env->allocator, prep.workspace_bytes, b->stream, &workspace,
                           "workspace", &err);
  double first_run_ms = 0;
  if (st == CONV_OK) st = validate(b, algo, &prep, workspace, trial, &first_run_ms, &err);
  int abandoned_after = 0;
  if (st == CONV_OK && timed && conv_tuner_abandons_first_run(first_run_ms, best_ms)) {
    trial->abandoned = true;
    trial->time_ms = first_run_ms;
    snprintf(trial->reason, sizeof trial->reason,
             "abandoned: %.4f ms in its validation run, over %.0fx the best so far (%.4f ms)",
             first_run_ms, CONV_ABANDON_FIRST_RUN_FACTOR, best_ms);
  } else if (st == CONV_OK && timed) {
    st = measure(b, algo, &prep, workspace, best_ms, &trial->time_ms, &abandoned_after, &err);
  }
  if (st == CONV_OK && abandoned_after > 0) {
    trial->abandoned = true;
    snprintf(trial->reason, sizeof trial->reason,
             "abandoned: %.4f ms after %d sample%s, over %.1fx the best so far (%.4f ms)",
             trial->time_ms, abandoned_after, abandoned_after == 1 ? "" : "s",
             CONV_ABANDON_FACTOR, best_ms);
  }
  if (st != CONV_OK) {
    /* A failed launch may leave an error behind for the next candidate. */
    cudaStreamSynchronize(b->stream);
    cudaGetLastError();
    trial->time_ms = -1;
    snprintf(trial->reason, sizeof trial->reason, "%s", err.message);
  }
  trial->status = st;
  /* Its runs, on the tuning stream, are the workspace's only users. */
  conv_device_free(&b->req->env->allocator, workspace, prep.workspace_bytes, b->stream);
  algo->release(prep.state);
}

static void trial_init(conv_trial *trial, const conv_algorithm *algo, const conv_config *config) {
  memset(trial, 0, sizeof *trial);
  trial->algorithm_id = algo->id;
  snprintf(trial->algorithm, sizeof trial->algorithm, "%s", algo->name);
  trial->config = *config;
  algo->describe(config, trial->config_text, sizeof trial->config_text);
  trial->time_ms = -1;
  trial->rel_error = -1;
  trial->deterministic = -1;
}

/* A trial's outcome, for the context's log (DEBUG). */
static void report(const conv_tune_request *req, const conv_trial *t) {
  if (t->status == CONV_OK && t->abandoned)
    conv_log(req->log, CONV_LOG_DEBUG, "%-12s %-40s %s", t->algorithm, t->config_text, t->reason);
  else if (t->status == CONV_OK)
    conv_log(req->log, CONV_LOG_DEBUG, "%-12s %-40s %10.4f ms  err %.2g%s", t->algorithm,
             t->config_text, t->time_ms, t->rel_error, t->heuristic_pick ? "  (heuristic pick)" : "");
  else
    conv_log(req->log, CONV_LOG_DEBUG, "%-12s %-40s %s", t->algorithm, t->config_text, t->reason);
}

/* Tracks the best valid trial and the first failure, for the final message;
 * and, with a budget, when the tuning started and whether it was cut. */
typedef struct tally {
  conv_choice best;
  bool have_best;
  int tried, failed, abandoned;
  char first_failure[300];
  uint64_t started;       /* uv_hrtime() */
  bool cut;               /* the budget stopped it */
  int untimed;            /* configs left when it was cut */
  int predicted;          /* CONV_POLICY_PREDICT: configs the prediction timed (0: none) */
} tally;

static bool budget_spent(const conv_tune_request *req, const tally *t) {
  return conv_tuner_budget_spent((uv_hrtime() - t->started) * 1e-6, req->budget_ms, t->have_best);
}

/* What one family's pass runs: its configs up to `max`, leaving out those
 * of `done` (an earlier pass's); the configs it ran go to ran[*ran_count]
 * (up to ran_max).  *pick_taken persists across passes: one heuristic pick
 * per family. */
typedef struct family_pass {
  int max;
  const conv_config *done;
  int done_count;
  conv_config *ran;
  int ran_max, *ran_count;
  bool *pick_taken, *enumeration_failed;
} family_pass;

static bool already_done(const family_pass *pass, const conv_config *c) {
  for (int i = 0; i < pass->done_count; i++)
    if (conv_config_equal(&pass->done[i], c)) return true;
  return false;
}

/* Times one config, keeps the best, stores the trial.  *pick_taken: one
 * heuristic pick per family is marked as such. */
static conv_status time_config(bench *b, const conv_algorithm *algo, const conv_config *config,
                               bool *pick_taken, tally *t, conv_error *err) {
  const conv_tune_request *req = b->req;
  conv_trial trial;
  trial_init(&trial, algo, config);
  conv_log(req->log, CONV_LOG_DEBUG, "timing %s %s", trial.algorithm, trial.config_text);
  run_trial(b, algo, config, true, t->have_best ? t->best.time_ms : 0, &trial);
  if (!*pick_taken && trial.status == CONV_OK && (config->flags & CONV_CONFIG_HEURISTIC_RANKED))
    *pick_taken = trial.heuristic_pick = true;
  report(req, &trial);
  t->tried++;
  if (trial.status == CONV_OK && trial.abandoned) {
    t->abandoned++; /* slower than the best by the margin: never the winner */
  } else if (trial.status == CONV_OK && (!t->have_best || trial.time_ms < t->best.time_ms)) {
    t->best = (conv_choice){algo->id, *config, trial.time_ms};
    t->have_best = true;
  } else if (trial.status != CONV_OK && t->failed++ == 0) {
    snprintf(t->first_failure, sizeof t->first_failure, "%s %s: %s", trial.algorithm,
             trial.config_text, trial.reason);
  }
  return conv_cache_add_trial(req->cache, req->key, &trial, err);
}

static conv_status tune_family(bench *b, const conv_algorithm *algo, const family_pass *pass,
                               tally *t, conv_error *err) {
  const conv_tune_request *req = b->req;
  conv_config *configs = calloc((size_t)pass->max, sizeof *configs);
  if (configs == NULL) return conv_error_set(err, CONV_OUT_OF_MEMORY, "config list");
  int count = 0;
  conv_error cerr = {CONV_OK, ""};
  conv_status st = algo->configs(req->problem, req->env, configs, pass->max, &count, &cerr);
  if (st != CONV_OK) { /* the family is recorded as failed, the others go on */
    conv_trial trial;
    trial_init(&trial, algo, &(conv_config){0});
    trial.status = st;
    snprintf(trial.reason, sizeof trial.reason, "enumerating configs: %s", cerr.message);
    report(req, &trial);
    count = 0;
    *pass->enumeration_failed = true;
    /* Why a tuning with nothing to time failed, where nothing else does
     * (a half problem with an epilogue cuDNN cannot fuse, say). */
    if (t->first_failure[0] == '\0')
      snprintf(t->first_failure, sizeof t->first_failure, "%s: %s", algo->name, trial.reason);
    st = conv_cache_add_trial(req->cache, req->key, &trial, err);
  }
  for (int i = 0; i < count && st == CONV_OK; i++) {
    if (already_done(pass, &configs[i])) continue;
    if (atomic_load(req->interrupt)) {
      st = conv_error_set(err, CONV_INTERRUPTED, "tuning interrupted; measured trials are kept");
      break;
    }
    if (t->cut || budget_spent(req, t)) {
      t->cut = true;
      t->untimed++;
      continue;
    }
    if (pass->ran != NULL && *pass->ran_count < pass->ran_max)
      pass->ran[(*pass->ran_count)++] = configs[i];
    st = time_config(b, algo, &configs[i], pass->pick_taken, t, err);
  }
  free(configs);
  return st;
}

/* ---------------------------------------------------------------- predict */

/* What a prediction times: the predicted family's ranked configs, and
 * cuDNN's heuristic pick (free to know) where it is not among them. */
typedef struct predicted_set {
  const conv_algorithm *algo;
  conv_config configs[CONV_PREDICT_CONFIGS];
  int count;
  const conv_algorithm *cudnn; /* NULL: no pick, or it is among configs */
  conv_config cudnn_pick;
} predicted_set;

/* cuDNN's heuristic pick for the problem, unless cuDNN takes none. */
static bool cudnn_pick(const conv_tune_request *req, const conv_algorithm **algo,
                       conv_config *pick) {
  const conv_algorithm *cudnn = conv_registry_find(CONV_ALGO_CUDNN);
  if (cudnn == NULL || !conv_algorithm_applicable(cudnn, req->problem, req->env)) return false;
  conv_config configs[MAX_CONFIGS_FAST];
  int count = 0;
  conv_error ignored = {CONV_OK, ""};
  if (cudnn->configs(req->problem, req->env, configs, MAX_CONFIGS_FAST, &count, &ignored) !=
      CONV_OK)
    return false;
  for (int i = 0; i < count; i++)
    if (configs[i].flags & CONV_CONFIG_HEURISTIC_RANKED) {
      *algo = cudnn;
      *pick = configs[i];
      return true;
    }
  return false;
}

/* Fills *set, or says in why[] why there is nothing to predict (the
 * tuning then searches everything).  A cache it cannot read is no
 * prediction, not a failed tuning. */
static bool predict(const conv_tune_request *req, predicted_set *set, char *why,
                    size_t why_size) {
  conv_prediction pr;
  conv_error perr = {CONV_OK, ""};
  memset(set, 0, sizeof *set);
  /* The user's cache first (its tuning of a problem counts over a shipped
   * one), then the system caches in lookup order. */
  conv_cache *layers[1 + CONV_SYSTEM_CACHES_MAX] = {req->cache};
  const int layer_count = 1 + (int)req->system_count;
  for (size_t i = 0; i < req->system_count; i++) layers[1 + i] = req->system_caches[i];
  if (conv_predict_neighbours(layers, layer_count, req->key, req->problem, &pr, &perr) != CONV_OK) {
    snprintf(why, why_size, "reading the cache: %s", perr.message);
    return false;
  }
  if (!pr.certain) {
    snprintf(why, why_size, "%s", pr.why);
    return false;
  }
  const conv_algorithm *algo = conv_registry_find(pr.algorithm_id);
  if (algo == NULL || !conv_algorithm_applicable(algo, req->problem, req->env)) {
    snprintf(why, why_size, "its neighbours' family (id %u) does not take it",
             (unsigned)pr.algorithm_id);
    return false;
  }
  conv_config *offered = calloc(MAX_CONFIGS_EXHAUSTIVE, sizeof *offered);
  int offered_count = 0, order[CONV_PREDICT_CONFIGS];
  int ranked = 0;
  bool ok = offered != NULL &&
            algo->configs(req->problem, req->env, offered, MAX_CONFIGS_EXHAUSTIVE,
                          &offered_count, &perr) == CONV_OK &&
            conv_predict_rank(layers, layer_count, req->key, &pr, offered, offered_count, order,
                              CONV_PREDICT_CONFIGS, &ranked, &perr) == CONV_OK &&
            ranked > 0;
  for (int i = 0; ok && i < ranked; i++) set->configs[i] = offered[order[i]];
  free(offered);
  if (!ok) {
    snprintf(why, why_size, "%s offers no config to rank (%s)", algo->name, perr.message);
    return false;
  }
  set->algo = algo;
  set->count = ranked;
  if (cudnn_pick(req, &set->cudnn, &set->cudnn_pick))
    for (int i = 0; i < set->count && set->cudnn; i++)
      if (set->algo == set->cudnn && conv_config_equal(&set->configs[i], &set->cudnn_pick))
        set->cudnn = NULL;
  return true;
}

/* CONV_POLICY_PREDICT: times the predicted configs; t->predicted says how
 * many (0: no prediction, nothing timed, the caller searches everything). */
static conv_status tune_predicted(bench *b, tally *t, predicted_set *set, conv_error *err) {
  const conv_tune_request *req = b->req;
  char why[200] = "";
  if (!predict(req, set, why, sizeof why)) {
    conv_log(req->log, CONV_LOG_INFO, "%s: no prediction (%s); timing every candidate",
             req->key->problem, why);
    return CONV_OK;
  }
  bool pick_taken = false, cudnn_pick_taken = false;
  conv_status st = CONV_OK;
  for (int i = 0; i <= set->count && st == CONV_OK; i++) {
    if (atomic_load(req->interrupt))
      return conv_error_set(err, CONV_INTERRUPTED, "tuning interrupted; measured trials are kept");
    if (i < set->count)
      st = time_config(b, set->algo, &set->configs[i], &pick_taken, t, err);
    else if (set->cudnn != NULL)
      st = time_config(b, set->cudnn, &set->cudnn_pick, &cudnn_pick_taken, t, err);
  }
  t->predicted = set->count + (set->cudnn != NULL);
  return st;
}

/* Without a budget, each family's configs in turn.  With one, two passes:
 * every family's best guesses (the fast policy's), then the rest of each
 * (exhaustive policy), so that a budget spent early has tried every
 * family's likeliest configs. */
static conv_status tune_all(bench *b, tally *t, conv_error *err) {
  int count;
  const conv_algorithm *const *algos = conv_registry(&count);
  const conv_tune_request *req = b->req;
  bool budgeted = req->budget_ms > 0 && req->policy != CONV_POLICY_FAST;
  int full = req->policy == CONV_POLICY_FAST ? MAX_CONFIGS_FAST : MAX_CONFIGS_EXHAUSTIVE;
  conv_config *guesses = calloc((size_t)count * MAX_CONFIGS_FAST, sizeof *guesses);
  int *guess_counts = calloc((size_t)count, sizeof *guess_counts);
  bool *picks = calloc((size_t)count, sizeof *picks);
  bool *failed = calloc((size_t)count, sizeof *failed);
  conv_status st = CONV_OK;
  if (guesses == NULL || guess_counts == NULL || picks == NULL || failed == NULL)
    st = conv_error_set(err, CONV_OUT_OF_MEMORY, "tuning state");
  if (st == CONV_OK) st = conv_cache_begin_tuning(req->cache, req->key, err);
  predicted_set predicted = {0};
  if (st == CONV_OK && req->policy == CONV_POLICY_PREDICT) {
    st = tune_predicted(b, t, &predicted, err);
    if (st == CONV_OK && t->have_best) goto out; /* the prediction gave a plan */
    /* Nothing predicted, or nothing predicted ran: every candidate, except
     * the predicted family's configs already timed. */
    t->predicted = 0;
  }
  for (int pass = budgeted ? 0 : 1; pass < 2 && st == CONV_OK; pass++) {
    for (int i = 0; i < count && st == CONV_OK; i++) {
      if (failed[i] || !conv_algorithm_applicable(algos[i], req->problem, req->env)) continue;
      conv_config *mine = guesses + (size_t)i * MAX_CONFIGS_FAST;
      /* Left out: this pass's earlier guesses (pass 1) and, for the
       * predicted family, the configs the prediction timed. */
      conv_config done[CONV_PREDICT_CONFIGS + 1 + MAX_CONFIGS_FAST];
      int done_count = 0;
      if (algos[i] == predicted.algo)
        for (int j = 0; j < predicted.count; j++) done[done_count++] = predicted.configs[j];
      if (algos[i] == predicted.cudnn) done[done_count++] = predicted.cudnn_pick;
      for (int j = 0; pass == 1 && j < guess_counts[i]; j++) done[done_count++] = mine[j];
      family_pass fp = {pass == 0 ? MAX_CONFIGS_FAST : full,
                        done,
                        done_count,
                        pass == 0 ? mine : NULL,
                        MAX_CONFIGS_FAST,
                        &guess_counts[i],
                        &picks[i],
                        &failed[i]};
      st = tune_family(b, algos[i], &fp, t, err);
    }
  }
out:
  free(guesses);
  free(guess_counts);
  free(picks);
  free(failed);
  return st;
}

/* The end of a tuning, for the context's log (INFO). */
static void log_outcome(const conv_tune_request *req, conv_status st, const tally *t, double s) {
  if (!conv_log_enabled(req->log, CONV_LOG_INFO)) return;
  if (st != CONV_OK) {
    conv_log(req->log, CONV_LOG_INFO, "tuning failed after %.2f s (%s): %d configs, %d failed", s,
             conv_status_string(st), t->tried, t->failed);
    return;
  }
  const conv_algorithm *algo = conv_registry_find(t->best.algorithm_id);
  char config[128] = "";
  if (algo != NULL) algo->describe(&t->best.config, config, sizeof config);
  conv_log(req->log, CONV_LOG_INFO,
           "tuned in %.2f s: %d configs, %d failed, %d abandoned; fastest %s %s (%.4f ms)", s,
           t->tried, t->failed, t->abandoned, algo ? algo->name : "?", config, t->best.time_ms);
  if (t->predicted > 0)
    conv_log(req->log, CONV_LOG_INFO,
             "%s: predicted from its tuned neighbours, %d configs timed; marked incomplete "
             "(convtune tune --pending, or an exhaustive context, times the rest)",
             req->key->problem, t->predicted);
  if (t->cut)
    conv_log(req->log, CONV_LOG_INFO,
             "%s: tuning stopped by its budget (%.0f ms) with %d configs untimed; the fastest so "
             "far is kept, marked incomplete (convtune tune --pending finishes it)",
             req->key->problem, req->budget_ms, t->untimed);
}

conv_status conv_tune(const conv_tune_request *req, conv_choice *winner, conv_error *err) {
  bench b = {.req = req};
  tally t = {.started = uv_hrtime()};
  conv_status st = conv_problem_shape(req->problem, &b.shape);
  if (st != CONV_OK) return conv_error_set(err, st, "invalid problem");
  uint64_t started = t.started;
  conv_log(req->log, CONV_LOG_INFO, "tuning %s", req->key->problem);
  CONV_TRY(st, bench_alloc(&b, err), done);
  CONV_TRY(st, bench_inputs(&b, err), done);
  CONV_TRY(st, tune_all(&b, &t, err), done);
  if (!t.have_best) {
    st = conv_error_set(err, CONV_NO_CANDIDATE, "%d configs tried, none valid; first failure: %s",
                        t.tried, t.first_failure[0] ? t.first_failure : "(no applicable candidate)");
    goto done;
  }
  CONV_TRY(st, conv_cache_set_winner(req->cache, req->key, t.best.algorithm_id, &t.best.config, err), done);
  /* Tuned fully: nothing of this shape waits on this device any more; cut
   * short by a budget, or only the predicted configs timed: it waits to be
   * finished. */
  if (t.cut || t.predicted > 0)
    CONV_TRY(st, conv_cache_record_pending(req->cache, req->key, CONV_PENDING_INCOMPLETE, err),
             done);
  else
    CONV_TRY(st, conv_cache_clear_pending(req->cache, req->key, err), done);
  *winner = t.best;
done:
  log_outcome(req, st, &t, (uv_hrtime() - started) * 1e-9);
  bench_free(&b);
  return st;
}

/* ---------------------------------------------------------------- untimed */

/* A config the untimed pick may try, in the order it tries them. */
typedef struct untimed_candidate {
  const conv_algorithm *algo;
  conv_config config;
} untimed_candidate;

/* Every applicable family's fast-policy configs, those cuDNN's heuristic
 * ranks first (in its order), then the others family by family. */
static conv_status untimed_candidates(const conv_tune_request *req, untimed_candidate **out,
                                      int *out_count, conv_error *err) {
  int families;
  const conv_algorithm *const *algos = conv_registry(&families);
  untimed_candidate *all = calloc((size_t)families * MAX_CONFIGS_FAST, sizeof *all);
  if (all == NULL) return conv_error_set(err, CONV_OUT_OF_MEMORY, "candidate list");
  int n = 0;
  for (int f = 0; f < families; f++) {
    if (!conv_algorithm_applicable(algos[f], req->problem, req->env)) continue;
    conv_config configs[MAX_CONFIGS_FAST];
    int count = 0;
    conv_error ignored = {CONV_OK, ""};
    if (algos[f]->configs(req->problem, req->env, configs, MAX_CONFIGS_FAST, &count, &ignored) !=
        CONV_OK)
      continue; /* a family that cannot list its configs offers none */
    for (int i = 0; i < count; i++) all[n++] = (untimed_candidate){algos[f], configs[i]};
  }
  /* Stable: ranked ones to the front, each group keeping its order. */
  untimed_candidate *ordered = calloc((size_t)(n > 0 ? n : 1), sizeof *ordered);
  if (ordered == NULL) {
    free(all);
    return conv_error_set(err, CONV_OUT_OF_MEMORY, "candidate list");
  }
  int k = 0;
  for (int ranked = 1; ranked >= 0; ranked--)
    for (int i = 0; i < n; i++)
      if (((all[i].config.flags & CONV_CONFIG_HEURISTIC_RANKED) != 0) == ranked)
        ordered[k++] = all[i];
  free(all);
  *out = ordered;
  *out_count = n;
  return CONV_OK;
}

conv_status conv_pick_untimed(const conv_tune_request *req, conv_choice *choice,
                              conv_error *err) {
  bench b = {.req = req};
  untimed_candidate *candidates = NULL;
  int count = 0, tried = 0;
  char first_failure[300] = "(no applicable candidate)";
  conv_status st = conv_problem_shape(req->problem, &b.shape);
  if (st != CONV_OK) return conv_error_set(err, st, "invalid problem");
  CONV_TRY(st, untimed_candidates(req, &candidates, &count, err), done);
  CONV_TRY(st, bench_alloc(&b, err), done);
  CONV_TRY(st, bench_inputs(&b, err), done);
  for (int i = 0; i < count; i++) {
    if (atomic_load(req->interrupt)) {
      st = conv_error_set(err, CONV_INTERRUPTED, "interrupted before a candidate validated");
      goto done;
    }
    conv_trial trial;
    trial_init(&trial, candidates[i].algo, &candidates[i].config);
    conv_log(req->log, CONV_LOG_DEBUG, "checking %s %s", trial.algorithm, trial.config_text);
    run_trial(&b, candidates[i].algo, &candidates[i].config, false, 0, &trial);
    report(req, &trial);
    tried++;
    if (trial.status == CONV_OK) {
      *choice = (conv_choice){candidates[i].algo->id, candidates[i].config, -1.0};
      conv_log(req->log, CONV_LOG_INFO, "%s: untimed plan %s %s (%s%d checked)", req->key->problem,
               trial.algorithm, trial.config_text,
               candidates[i].config.flags & CONV_CONFIG_HEURISTIC_RANKED
                   ? "cuDNN's heuristic choice; "
                   : "",
               tried);
      goto done;
    }
    if (tried == 1)
      snprintf(first_failure, sizeof first_failure, "%s %s: %s", trial.algorithm,
               trial.config_text, trial.reason);
  }
  st = conv_error_set(err, CONV_NO_CANDIDATE, "%d configs checked, none valid; first failure: %s",
                      tried, first_failure);
done:
  free(candidates);
  bench_free(&b);
  return st;
}

/* ---------------------------------------------------------------- re-validation */

conv_status conv_validate_choice(const conv_tune_request *req, const conv_choice *choice,
                                 conv_trial *out, conv_error *err) {
  const conv_algorithm *algo = conv_registry_find(choice->algorithm_id);
  if (algo == NULL || !conv_algorithm_applicable(algo, req->problem, req->env))
    return conv_error_set(err, CONV_UNSUPPORTED, "family %u %s", (unsigned)choice->algorithm_id,
                          algo == NULL ? "is unknown to this build" : "does not take this problem");
  bench b = {.req = req};
  conv_trial trial;
  trial_init(&trial, algo, &choice->config);
  conv_status st = conv_problem_shape(req->problem, &b.shape);
  if (st != CONV_OK) return conv_error_set(err, st, "invalid problem");
  CONV_TRY(st, bench_alloc(&b, err), done);
  CONV_TRY(st, bench_inputs(&b, err), done);
  run_trial(&b, algo, &choice->config, false, 0, &trial);
  report(req, &trial);
  if (trial.status != CONV_OK) st = conv_error_set(err, trial.status, "%s", trial.reason);
  if (out != NULL) *out = trial;
done:
  bench_free(&b);
  return st;
}
