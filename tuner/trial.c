/*
 * trial.c -- one tuning's test tensors and one config's trial (tuning.h):
 * prepare, the workspace limit, validation against the reference, its
 * screen, and the finalists' timing in full as replays of a CUDA graph of
 * their runs.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tuner/tuning.h"

/* Timing in full, a finalist's (tuner.h): a CUDA graph of back-to-back runs
 * lasting about BATCH_MS, replayed until MIN_SAMPLES replays and
 * MIN_TOTAL_MS of runs, at most MAX_SAMPLES.  Every other config stops at
 * its first timed run (conv_tuner_abandons_warm_run) or its screen (three
 * short samples); a second finalist that cannot win stops after five full
 * samples (conv_tuner_out_of_contention) or ten (a near tie,
 * conv_tuner_tied_out), instead of about thirty. */
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

static conv_status bench_tensor(bench *b, size_t bytes, void **ptr, const char *what,
                                conv_error *err) {
  return conv_device_alloc(&b->req->env->allocator, bytes, b->stream, ptr, what, err);
}

conv_status conv_bench_alloc(bench *b, conv_error *err) {
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
void conv_bench_free(bench *b) {
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
conv_status conv_bench_inputs(bench *b, conv_error *err) {
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

/* Milliseconds the work takes on the GPU, timed with events behind a hold
 * of hold_us. */
static conv_status time_work_held(timed_work *t, int hold_us, double *ms, conv_error *err) {
  bench *b = t->b;
  conv_status st;
  CONV_TRY(st, conv_check_cuda(err, conv_hold_stream(hold_us, b->stream), "hold the stream"), done);
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

/* Captures t->runs runs into t->graph.  A config whose runs cannot be
 * captured fails its trial (CONV_UNSUPPORTED): a plan replays a graph of
 * its run, and a caller capturing its own stream (a whole model in one
 * CUDA graph) records the run as it is, so such a winner would make every
 * capture fail.  alexnet's whole-model graph failed so (a cuDNN engine
 * that creates a texture object as it executes, H200, cuDNN 9.19), when
 * this timed it launched directly.  A stream that cannot capture at all
 * (the legacy default stream) times the runs launched directly. */
static conv_status capture_work(timed_work *t, conv_error *err) {
  bench *b = t->b;
  cudaGraph_t graph = NULL;
  if (cudaStreamBeginCapture(b->stream, cudaStreamCaptureModeThreadLocal) != cudaSuccess) {
    cudaGetLastError();
    return CONV_OK;
  }
  conv_error run_err = {CONV_OK, ""};
  conv_status st = CONV_OK;
  for (int i = 0; i < t->runs && st == CONV_OK; i++)
    st = run_once(b, t->algo, t->prep, t->workspace, &run_err);
  cudaError_t e = cudaStreamEndCapture(b->stream, &graph);
  if (st == CONV_OK && e == cudaSuccess && graph != NULL)
    e = cudaGraphInstantiate(&t->graph, graph, 0);
  if (graph != NULL) cudaGraphDestroy(graph);
  if (st != CONV_OK || e != cudaSuccess) {
    t->graph = NULL;
    cudaGetLastError(); /* capture errors are not sticky */
    return conv_error_set(err, CONV_UNSUPPORTED,
                          "its run cannot be captured into a CUDA graph (%s), which plans replay "
                          "and callers capture",
                          st != CONV_OK ? run_err.message : cudaGetErrorString(e));
  }
  /* The first replay uploads the graph: not a sample. */
  return conv_check_cuda(err, cudaGraphLaunch(t->graph, b->stream), "cudaGraphLaunch");
}

static conv_status time_work(timed_work *t, double *ms, conv_error *err) {
  return time_work_held(t, HOLD_US, ms, err);
}

static int compare_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* A config's samples so far: per-run times of one graph's replays. */
typedef struct samples {
  double per_run_ms[MAX_SAMPLES];
  int n;
  double total_ms, fastest_ms;
} samples;

static conv_status take_sample(timed_work *t, samples *s, conv_error *err) {
  double ms;
  conv_status st = time_work(t, &ms, err);
  if (st != CONV_OK) return st;
  const double per_run = ms / t->runs;
  s->fastest_ms = s->n == 0 || per_run < s->fastest_ms ? per_run : s->fastest_ms;
  s->per_run_ms[s->n++] = per_run;
  s->total_ms += ms;
  return CONV_OK;
}

static double median_of(const samples *s) {
  double sorted[MAX_SAMPLES];
  memcpy(sorted, s->per_run_ms, (size_t)s->n * sizeof sorted[0]);
  qsort(sorted, (size_t)s->n, sizeof sorted[0], compare_double);
  const int n = s->n;
  return n % 2 ? sorted[n / 2] : 0.5 * (sorted[n / 2 - 1] + sorted[n / 2]);
}

static int clamp_runs(double runs) {
  return runs < 1 ? 1 : runs > MAX_BATCH_RUNS ? MAX_BATCH_RUNS : (int)runs;
}

/* The rule (tuner.h) that stopped timing a config that cannot win. */
typedef enum stop_rule {
  NOT_STOPPED,
  LOST_BY_MARGIN,    /* conv_tuner_abandons: the screen, a long run, any sample */
  LOST_WARM_RUN,     /* conv_tuner_abandons_warm_run */
  OUT_OF_CONTENTION, /* conv_tuner_out_of_contention */
  TIED,              /* conv_tuner_tied_out: no faster than the best */
} stop_rule;

/* The margin over the best that a rule stops a config at (TIED: 1). */
static double stop_factor(stop_rule rule) {
  switch (rule) {
  case LOST_WARM_RUN: return CONV_ABANDON_WARM_FACTOR;
  case OUT_OF_CONTENTION: return CONV_CONTENTION_FACTOR;
  case TIED: return 1.0;
  default: return CONV_ABANDON_FACTOR;
  }
}

/* A config's screen (tuner.h).  Its first timed run, launched directly
 * after validation (*warm_ms), drops a config far slower than the best
 * (conv_tuner_abandons_warm_run; for a run of DIRECT_MS or more,
 * conv_tuner_abandons, and that run is its screen); a shorter run gives
 * CONV_SCREEN_SAMPLES replays of a short graph of its runs, judged by
 * conv_tuner_abandons, their median the screen; a longer one is captured
 * once all the same (capture_work).  *stopped: the rule that abandoned the
 * config after *samples_taken samples, else NOT_STOPPED. */
static conv_status screen(bench *b, const conv_algorithm *algo, const conv_prepared *prep,
                          void *workspace, double best_ms, double *screen_ms, double *warm_ms,
                          stop_rule *stopped, int *samples_taken, conv_error *err) {
  timed_work t = {b, algo, prep, workspace, 1, NULL};
  samples s = {{0}, 0, 0, 0};
  double warm = 0;
  *stopped = NOT_STOPPED;
  conv_status st = time_work_held(&t, CONV_WARM_HOLD_US, &warm, err);
  if (st != CONV_OK) return st;
  *warm_ms = *screen_ms = warm;
  *samples_taken = 1;
  if (warm >= DIRECT_MS && conv_tuner_abandons(1, warm, best_ms))
    *stopped = LOST_BY_MARGIN;
  else if (conv_tuner_abandons_warm_run(warm, best_ms))
    *stopped = LOST_WARM_RUN;
  if (*stopped != NOT_STOPPED) return CONV_OK;
  if (warm >= DIRECT_MS) { /* timed launched directly, but it must capture */
    st = capture_work(&t, err);
    goto done;
  }
  t.runs = warm > 0 ? clamp_runs(CONV_SCREEN_MS / warm) : MAX_BATCH_RUNS;
  CONV_TRY(st, capture_work(&t, err), done);
  while (s.n < CONV_SCREEN_SAMPLES) CONV_TRY(st, take_sample(&t, &s, err), done);
  if (conv_tuner_abandons(s.n, s.fastest_ms, best_ms)) *stopped = LOST_BY_MARGIN;
  *screen_ms = median_of(&s);
  *samples_taken = s.n;
done:
  if (t.graph != NULL) cudaGraphExecDestroy(t.graph);
  return st;
}

/* A finalist's median run, timed in full: samples of a graph of about
 * BATCH_MS of its runs (sized by its first timed run, warm_ms; a run of
 * DIRECT_MS or more launched directly), at least MIN_SAMPLES of them and
 * MIN_TOTAL_MS of runs, stopped early by the rules (tuner.h) against
 * best_ms, the median of a finalist timed before it (0: none).  *stopped:
 * the rule that abandoned it after *samples_taken samples, else
 * NOT_STOPPED. */
static conv_status time_in_full(bench *b, const conv_algorithm *algo, const conv_prepared *prep,
                                void *workspace, double warm_ms, double best_ms, double *median_ms,
                                stop_rule *stopped, int *samples_taken, conv_error *err) {
  timed_work t = {b, algo, prep, workspace, 1, NULL};
  samples s = {{0}, 0, 0, 0};
  conv_status st = CONV_OK;
  *stopped = NOT_STOPPED;
  if (warm_ms < DIRECT_MS) {
    t.runs = warm_ms > 0 ? clamp_runs(BATCH_MS / warm_ms) : MAX_BATCH_RUNS;
    CONV_TRY(st, capture_work(&t, err), done);
  }
  while (s.n < MAX_SAMPLES && (s.n < MIN_SAMPLES || s.total_ms < MIN_TOTAL_MS)) {
    CONV_TRY(st, take_sample(&t, &s, err), done);
    const double median = median_of(&s);
    *stopped = conv_tuner_abandons(s.n, s.fastest_ms, best_ms)      ? LOST_BY_MARGIN
               : conv_tuner_out_of_contention(s.n, median, best_ms) ? OUT_OF_CONTENTION
               : conv_tuner_tied_out(s.n, median, best_ms)          ? TIED
                                                                    : NOT_STOPPED;
    if (*stopped != NOT_STOPPED) break;
  }
  *samples_taken = s.n;
  *median_ms = median_of(&s);
done:
  if (t.graph != NULL) cudaGraphExecDestroy(t.graph);
  return st;
}

/* A trial abandoned by `rule` after `samples_taken` samples. */
static void note_stop(conv_trial *trial, stop_rule rule, int samples_taken, double best_ms) {
  trial->abandoned = true;
  if (rule != TIED)
    snprintf(trial->reason, sizeof trial->reason,
             "abandoned: %.4f ms after %d sample%s, over %gx the best so far (%.4f ms)",
             trial->time_ms, samples_taken, samples_taken == 1 ? "" : "s", stop_factor(rule),
             best_ms);
  else
    snprintf(trial->reason, sizeof trial->reason,
             "abandoned: %.4f ms after %d samples, no faster than the best so far (%.4f ms)",
             trial->time_ms, samples_taken, best_ms);
}

/* A trial's outcome: `st`, and, where it ran, the rule that stopped it
 * (NOT_STOPPED: none) after `samples_taken` samples against best_ms.  A
 * failure's reason is *err's; a failed launch may leave an error behind
 * for the next candidate: cleared here. */
static void note_outcome(bench *b, conv_trial *trial, conv_status st, stop_rule stopped,
                         int samples_taken, double best_ms, const conv_error *err) {
  trial->status = st;
  if (st == CONV_OK) {
    if (stopped != NOT_STOPPED) note_stop(trial, stopped, samples_taken, best_ms);
    return;
  }
  cudaStreamSynchronize(b->stream);
  cudaGetLastError();
  trial->time_ms = -1;
  snprintf(trial->reason, sizeof trial->reason, "%s", err->message);
}

conv_config conv_tuner_kernels_of(const conv_algorithm *algo, const conv_config *config) {
  conv_config twin;
  return algo->twin_of != NULL && algo->twin_of(config, &twin) ? twin : *config;
}

/* Fills *out where a config abandoned on a run of run_ms against best_ms
 * rules out its twin (conv_tuner_rules_out_twin). */
static void note_twin_ruled_out(const conv_algorithm *algo, const conv_config *config,
                                double run_ms, bool validation_run, double best_ms,
                                ruled_out *out) {
  if (out == NULL || !conv_tuner_rules_out_twin(run_ms, validation_run, best_ms)) return;
  *out = (ruled_out){algo, *config, run_ms, best_ms, validation_run};
}

/* One config from prepare to validation and, given `kept`, its screen;
 * failures are the trial's result.  Its wall time goes to `phases` (NULL:
 * nowhere). */
void conv_tuner_run_trial(bench *b, const conv_algorithm *algo, const conv_config *config,
                          double best_ms, conv_trial *trial, conv_tune_phases *phases,
                          finalist *kept, ruled_out *twin_ruled_out) {
  conv_error err = {CONV_OK, ""};
  conv_prepared prep = {0};
  void *workspace = NULL;
  uint64_t started = uv_hrtime();
  if (kept != NULL) kept->algo = NULL;
  if (twin_ruled_out != NULL) twin_ruled_out->algo = NULL;
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
    st = bench_tensor(b, prep.workspace_bytes, &workspace, "workspace", &err);
  conv_tuner_phase_since(phases, CONV_PHASE_PREPARE, started);
  started = uv_hrtime();
  double first_run_ms = 0, warm_ms = 0;
  if (st == CONV_OK) st = validate(b, algo, &prep, workspace, trial, &first_run_ms, &err);
  conv_tuner_phase_since(phases, CONV_PHASE_VALIDATE, started);
  started = uv_hrtime();
  stop_rule stopped = NOT_STOPPED;
  int samples_taken = 0;
  if (st == CONV_OK && kept != NULL && conv_tuner_abandons_first_run(first_run_ms, best_ms)) {
    trial->abandoned = true;
    trial->time_ms = first_run_ms;
    snprintf(trial->reason, sizeof trial->reason,
             "abandoned: %.4f ms in its validation run, over %.0fx the best so far (%.4f ms)",
             first_run_ms, CONV_ABANDON_FIRST_RUN_FACTOR, best_ms);
    note_twin_ruled_out(algo, config, first_run_ms, true, best_ms, twin_ruled_out);
  } else if (st == CONV_OK && kept != NULL) {
    st = screen(b, algo, &prep, workspace, best_ms, &trial->time_ms, &warm_ms, &stopped,
                &samples_taken, &err);
    if (st == CONV_OK && stopped != NOT_STOPPED && samples_taken == 1)
      note_twin_ruled_out(algo, config, warm_ms, false, best_ms, twin_ruled_out);
  }
  conv_tuner_phase_since(phases, CONV_PHASE_TIME, started);
  note_outcome(b, trial, st, stopped, samples_taken, best_ms, &err);
  /* Its runs, on the tuning stream, are the workspace's only users. */
  started = uv_hrtime();
  conv_device_free(&b->req->env->allocator, workspace, prep.workspace_bytes, b->stream);
  if (st == CONV_OK && kept != NULL && !trial->abandoned)
    *kept = (finalist){algo, *trial, prep, warm_ms};
  else
    algo->release(prep.state);
  conv_tuner_phase_since(phases, CONV_PHASE_PREPARE, started);
}

/* A finalist timed in full against best_ms (the median of a finalist
 * timed before it; 0: none), in a workspace of its own again; its trial
 * gets the outcome. */
static void time_finalist(bench *b, finalist *f, double best_ms, conv_tune_phases *phases) {
  conv_error err = {CONV_OK, ""};
  conv_trial *trial = &f->trial;
  const size_t bytes = f->prep.workspace_bytes;
  void *workspace = NULL;
  uint64_t started = uv_hrtime();
  conv_status st = CONV_OK;
  if (bytes > 0)
    st = bench_tensor(b, bytes, &workspace, "workspace", &err);
  conv_tuner_phase_since(phases, CONV_PHASE_PREPARE, started);
  started = uv_hrtime();
  stop_rule stopped = NOT_STOPPED;
  int samples_taken = 0;
  if (st == CONV_OK)
    st = time_in_full(b, f->algo, &f->prep, workspace, f->warm_ms, best_ms, &trial->time_ms,
                      &stopped, &samples_taken, &err);
  conv_tuner_phase_since(phases, CONV_PHASE_TIME, started);
  note_outcome(b, trial, st, stopped, samples_taken, best_ms, &err);
  started = uv_hrtime();
  conv_device_free(&b->req->env->allocator, workspace, bytes, b->stream);
  conv_tuner_phase_since(phases, CONV_PHASE_PREPARE, started);
}

void conv_tuner_trial_init(conv_trial *trial, const conv_algorithm *algo, const conv_config *config) {
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
void conv_tuner_report(const conv_tune_request *req, const conv_trial *t) {
  if (t->status == CONV_OK && t->abandoned)
    conv_log(req->log, CONV_LOG_DEBUG, "%-12s %-40s %s", t->algorithm, t->config_text, t->reason);
  else if (t->status == CONV_OK)
    conv_log(req->log, CONV_LOG_DEBUG, "%-12s %-40s %10.4f ms  err %.2g%s", t->algorithm,
             t->config_text, t->time_ms, t->rel_error, t->heuristic_pick ? "  (heuristic pick)" : "");
  else
    conv_log(req->log, CONV_LOG_DEBUG, "%-12s %-40s %s", t->algorithm, t->config_text, t->reason);
}


/* A trial stored, its time the cache phase's. */
conv_status conv_tuner_store_trial(const conv_tune_request *req, const conv_trial *trial, tally *t,
                               conv_error *err) {
  const uint64_t started = uv_hrtime();
  const conv_status st = conv_cache_add_trial(req->cache, req->key, trial, err);
  conv_tuner_phase_since(&t->phases, CONV_PHASE_CACHE, started);
  return st;
}

/* Counts a trial's outcome in *t (the best: a finalist's, timed in full)
 * and stores it. */
static conv_status count_and_store(const conv_tune_request *req, const conv_algorithm *algo,
                                   const conv_trial *trial, tally *t, conv_error *err) {
  conv_tuner_report(req, trial);
  if (trial->status == CONV_OK && trial->abandoned) {
    t->abandoned++; /* slower than the best by a margin: never the winner */
  } else if (trial->status == CONV_OK && (!t->have_best || trial->time_ms < t->best.time_ms)) {
    t->best = (conv_choice){algo->id, trial->config, trial->time_ms};
    t->have_best = true;
  } else if (trial->status != CONV_OK && t->failed++ == 0) {
    snprintf(t->first_failure, sizeof t->first_failure, "%s %s: %s", trial->algorithm,
             trial->config_text, trial->reason);
  }
  return conv_tuner_store_trial(req, trial, t, err);
}

/* Places a config that passed its screen among the finalists, fastest
 * screen first; the one it pushes out, or itself where it is slower than
 * them all, comes back in *out (out->algo NULL: none). */
static void admit_finalist(tally *t, const finalist *f, finalist *out) {
  double screened[CONV_FINALISTS];
  for (int i = 0; i < t->finalist_count; i++) screened[i] = t->finalists[i].trial.time_ms;
  const int place = conv_tuner_finalist_place(screened, t->finalist_count, f->trial.time_ms);
  out->algo = NULL;
  if (place >= CONV_FINALISTS) {
    *out = *f;
    return;
  }
  if (t->finalist_count == CONV_FINALISTS)
    *out = t->finalists[CONV_FINALISTS - 1];
  else
    t->finalist_count++;
  memmove(&t->finalists[place + 1], &t->finalists[place],
          (size_t)(t->finalist_count - 1 - place) * sizeof t->finalists[0]);
  t->finalists[place] = *f;
}

/* A config screened but not a finalist: released, and kept as abandoned
 * with its screen's median. */
static conv_status drop_screened(const conv_tune_request *req, finalist *f, tally *t,
                                 conv_error *err) {
  f->trial.abandoned = true;
  snprintf(f->trial.reason, sizeof f->trial.reason,
           "abandoned: %.4f ms in its screen, behind the %d fastest screens (timed in full)",
           f->trial.time_ms, CONV_FINALISTS);
  f->algo->release(f->prep.state);
  return count_and_store(req, f->algo, &f->trial, t, err);
}

/* The config the tuning ruled out whose kernels `config` runs (its twin,
 * or the config whose twin it is); NULL: none. */
static const ruled_out *twin_ruled_out(const tally *t, const conv_algorithm *algo,
                                       const conv_config *config) {
  if (algo->twin_of == NULL) return NULL;
  const conv_config kernels = conv_tuner_kernels_of(algo, config);
  for (int i = 0; i < t->ruled_out_count; i++) {
    if (t->ruled_out[i].algo != algo) continue;
    const conv_config theirs = conv_tuner_kernels_of(algo, &t->ruled_out[i].ran);
    if (conv_config_equal(&theirs, &kernels)) return &t->ruled_out[i];
  }
  return NULL;
}

/* A config not run for its twin (conv_tuner_rules_out_twin), stored as
 * abandoned with the twin's run for a reason. */
static conv_status store_twin_ruled_out(const conv_tune_request *req, const conv_algorithm *algo,
                                        const conv_config *config, const ruled_out *twin,
                                        tally *t, conv_error *err) {
  conv_trial trial;
  conv_tuner_trial_init(&trial, algo, config);
  char twin_text[sizeof trial.config_text];
  algo->describe(&twin->ran, twin_text, sizeof twin_text);
  trial.status = CONV_OK;
  trial.abandoned = true;
  snprintf(trial.reason, sizeof trial.reason,
           "abandoned: not run, as its twin %s (the same kernels) took %.4f ms in its %s, over "
           "%.0fx the best so far (%.4f ms)",
           twin_text, twin->run_ms, twin->validation_run ? "validation run" : "first timed run",
           twin->validation_run ? CONV_ABANDON_FIRST_RUN_FACTOR : CONV_TWIN_RULED_OUT_FACTOR,
           twin->best_ms);
  t->tried++;
  return count_and_store(req, algo, &trial, t, err);
}

conv_status conv_tuner_time_config(bench *b, const conv_algorithm *algo, const conv_config *config,
                                   bool *pick_taken, tally *t, conv_error *err) {
  const conv_tune_request *req = b->req;
  const ruled_out *twin = twin_ruled_out(t, algo, config);
  if (twin != NULL) return store_twin_ruled_out(req, algo, config, twin, t, err);
  finalist f;
  ruled_out slow;
  conv_tuner_trial_init(&f.trial, algo, config);
  conv_log(req->log, CONV_LOG_DEBUG, "screening %s %s", f.trial.algorithm, f.trial.config_text);
  conv_tuner_run_trial(b, algo, config, t->have_best ? t->best.time_ms : 0, &f.trial, &t->phases,
                       &f, &slow);
  if (slow.algo != NULL && t->ruled_out_count < RULED_OUT_MAX)
    t->ruled_out[t->ruled_out_count++] = slow;
  if (!*pick_taken && f.trial.status == CONV_OK && (config->flags & CONV_CONFIG_HEURISTIC_RANKED))
    *pick_taken = f.trial.heuristic_pick = true;
  t->tried++;
  if (f.algo == NULL) return count_and_store(req, algo, &f.trial, t, err);
  conv_log(req->log, CONV_LOG_DEBUG, "%-12s %-40s %10.4f ms in its screen", f.trial.algorithm,
           f.trial.config_text, f.trial.time_ms);
  finalist out;
  admit_finalist(t, &f, &out);
  const finalist *first = &t->finalists[0];
  t->best = (conv_choice){first->algo->id, first->trial.config, first->trial.time_ms};
  t->have_best = true;
  return out.algo != NULL ? drop_screened(req, &out, t, err) : CONV_OK;
}

conv_status conv_tuner_time_finalists(bench *b, tally *t, conv_error *err) {
  conv_status st = CONV_OK;
  t->have_best = false; /* from screens to medians */
  for (int i = 0; i < t->finalist_count && st == CONV_OK; i++) {
    finalist *f = &t->finalists[i];
    conv_log(b->req->log, CONV_LOG_DEBUG, "timing finalist %s %s (%.4f ms in its screen)",
             f->trial.algorithm, f->trial.config_text, f->trial.time_ms);
    time_finalist(b, f, t->have_best ? t->best.time_ms : 0, &t->phases);
    st = count_and_store(b->req, f->algo, &f->trial, t, err);
  }
  conv_tuner_release_finalists(t);
  return st;
}

void conv_tuner_release_finalists(tally *t) {
  for (int i = 0; i < t->finalist_count; i++)
    t->finalists[i].algo->release(t->finalists[i].prep.state);
  t->finalist_count = 0;
}
