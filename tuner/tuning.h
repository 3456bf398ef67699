/*
 * tuning.h -- what the tuner's files share (not installed): trial.c runs
 * one config's trial; tuner.c runs the families' passes and the policies;
 * tune_predict.c chooses and times a prediction's configs.  Calls run
 * down that list, never back.  conv_tune (tuner.h) is the entry point.
 */
#ifndef CONVTUNE_TUNER_TUNING_H
#define CONVTUNE_TUNER_TUNING_H

#include "tuner/check.h"
#include "tuner/tuner.h"

/* Configs asked of one family: all of them, or a few best guesses (the
 * fast policy's, and a widened prediction's). */
#define MAX_CONFIGS_EXHAUSTIVE 512
#define MAX_CONFIGS_FAST 3

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

/* A config that passed its screen, kept prepared (its workspace given
 * back) to be timed in full after every config's screen (CONV_FINALISTS). */
typedef struct finalist {
  const conv_algorithm *algo;
  conv_trial trial;  /* validated; time_ms: its screen's median */
  conv_prepared prep;
  double warm_ms;    /* its first timed run: sizes its graph */
} finalist;

/* A config found far too slow (conv_tuner_rules_out_twin): its twin, the
 * config that runs the same kernels (conv_tuner_kernels_of), is not run. */
typedef struct ruled_out {
  const conv_algorithm *algo;
  conv_config ran;        /* the config itself */
  double run_ms, best_ms; /* the run that ruled it out, the best then */
  bool validation_run;    /* that run was its validation run */
} ruled_out;
#define RULED_OUT_MAX 64

/* Tracks the best valid trial and the first failure, for the final message;
 * and, with a budget, when the tuning started and whether it was cut.
 * While configs are screened, best is the fastest screen (the finalists'
 * first); once the finalists are timed, the fastest median. */
typedef struct tally {
  conv_choice best;
  bool have_best;
  finalist finalists[CONV_FINALISTS]; /* fastest screen first */
  int finalist_count;
  int tried, failed, abandoned;
  int skipped;            /* known slow on its neighbours, never run (tuner.h) */
  ruled_out ruled_out[RULED_OUT_MAX]; /* the first found; more are not kept */
  int ruled_out_count;
  char first_failure[300];
  uint64_t started;       /* uv_hrtime() */
  bool cut;               /* the budget stopped it */
  int untimed;            /* configs left when it was cut */
  int predicted;          /* CONV_POLICY_PREDICT: configs the prediction timed (0: none) */
  bool widened;           /* ... among them every family's best guesses */
  bool split;             /* ... ranked on neighbours whose families differ, and widened */
  conv_tune_phases phases; /* where its wall time went */
} tally;

/* Adds the wall time since `started` (uv_hrtime) to a phase; phases may be
 * NULL. */
static inline void conv_tuner_phase_since(conv_tune_phases *phases, conv_tune_phase phase,
                                          uint64_t started) {
  conv_tune_phases_add(phases, phase, (double)(uv_hrtime() - started) * 1e-6);
}

/* The tuning's tensors (trial.c): allocated from the context's allocator on
 * the tuning stream; filled with fresh random inputs and the reference
 * output; freed after a synchronise (b->req must be set, the rest zero). */
conv_status conv_bench_alloc(bench *b, conv_error *err);
conv_status conv_bench_inputs(bench *b, conv_error *err);
void conv_bench_free(bench *b);

/* A trial of `config`, its identity filled and its outcome unknown. */
void conv_tuner_trial_init(conv_trial *trial, const conv_algorithm *algo,
                           const conv_config *config);

/* One config from prepare to validation, and, given `kept`, through its
 * screen; failures are the trial's result.  best_ms: the best screen so
 * far (0: none), for early abandonment.  A config that passed its screen
 * goes to *kept, prepared, for its timing in full (kept->algo set; else
 * NULL); one abandoned on a run that rules out its twin
 * (conv_tuner_rules_out_twin) is described in *twin_ruled_out (algo set;
 * else NULL; given with kept).  Its wall time goes to `phases` (NULL:
 * nowhere). */
void conv_tuner_run_trial(bench *b, const conv_algorithm *algo, const conv_config *config,
                          double best_ms, conv_trial *trial, conv_tune_phases *phases,
                          finalist *kept, ruled_out *twin_ruled_out);

/* The config whose kernels `config` runs: its twin (conv_algorithm.twin_of)
 * or itself. */
conv_config conv_tuner_kernels_of(const conv_algorithm *algo, const conv_config *config);

/* A trial's outcome, for the context's log (DEBUG). */
void conv_tuner_report(const conv_tune_request *req, const conv_trial *trial);

/* Stores a trial in the user's cache, its time the cache phase's. */
conv_status conv_tuner_store_trial(const conv_tune_request *req, const conv_trial *trial,
                                   tally *t, conv_error *err);

/* Screens one config: one that passed its screen may become a finalist
 * in *t (the best screen in t->best); one that did not, or that the
 * finalists push out, has its trial stored.  *pick_taken: one heuristic
 * pick per family is marked as such. */
conv_status conv_tuner_time_config(bench *b, const conv_algorithm *algo, const conv_config *config,
                                   bool *pick_taken, tally *t, conv_error *err);

/* Times the finalists in full, fastest screen first, the winner in t->best
 * (have_best false where none ran), and stores their trials; releases
 * every finalist, on failure too. */
conv_status conv_tuner_time_finalists(bench *b, tally *t, conv_error *err);

/* Releases the finalists left, untimed and unstored (a failed tuning). */
void conv_tuner_release_finalists(tally *t);

/* A config a prediction times. */
typedef struct predicted_config {
  const conv_algorithm *algo;
  conv_config config;
} predicted_config;

/* Families a widened prediction asks for best guesses: the registry's
 * (18 today); more would be left out. */
#define PREDICT_WIDE_FAMILIES_MAX 32
/* The most configs the families mark as best guesses for one problem
 * that a prediction times (CONV_CONFIG_BEST_GUESS; more are left out). */
#define PREDICT_MARKED_MAX 32
#define PREDICTED_MAX                                                            \
  ((CONV_PREDICT_NEIGHBOURS + 1) * CONV_PREDICT_CONFIGS_MAX + MAX_CONFIGS_FAST + \
   MAX_CONFIGS_FAST * PREDICT_WIDE_FAMILIES_MAX + PREDICT_MARKED_MAX)

/* What a prediction times, in order: the predicted family's ranked
 * configs (split: each winning family's, then cuDNN's); cuDNN's first
 * configs and every family's marked best guesses (CONV_CONFIG_BEST_GUESS)
 * not among them; widened or split, every applicable family's best
 * guesses (its first configs) not already listed.  `listed` has bit `id`
 * set for each family whose whole list it has read. */
typedef struct predicted_set {
  predicted_config configs[PREDICTED_MAX];
  int count;
  conv_predict_scope scope;
  uint64_t listed;
} predicted_set;

/* Whether the set holds `config` of `algo`. */
bool conv_predicted_has(const predicted_set *set, const conv_algorithm *algo,
                        const conv_config *config);

/* CONV_POLICY_PREDICT: chooses and times the predicted configs (the
 * trials go to the cache as any); t->predicted says how many (0: no
 * prediction, nothing timed, the caller searches everything). */
conv_status conv_tuner_predicted(bench *b, tally *t, predicted_set *set, conv_error *err);

/* The configs a search after a failed prediction leaves out
 * (conv_predict_known_slow) into *out; none where the caches cannot be
 * read (as for a prediction, that is not a failed tuning).  Its time is
 * the predict phase's. */
void conv_tuner_known_slow(const conv_tune_request *req, conv_known_slow *out,
                           conv_tune_phases *phases);

#endif /* CONVTUNE_TUNER_TUNING_H */
