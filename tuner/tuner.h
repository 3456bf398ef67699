/*
 * tuner.h -- times and validates every applicable candidate for a problem.
 *
 * For each config: prepare, check its workspace against the limit, poison
 * the output, run once and compare with the reference (relative L2 under the
 * math mode's bound, no non-finite values), then warm up and time with CUDA
 * events the replays of a CUDA graph of its runs, as conv_plan_execute
 * replays them: the median of adaptively many.  Every trial, failed or not, is
 * written to the cache as it completes; the fastest valid one is the winner.
 * With a budget, each family's best guesses (the fast policy's) are timed
 * first, then the rest, until the budget is spent; such a tuning stores its
 * winner and marks the problem pending ("incomplete").  A tuning that
 * completes clears the problem's pending rows on this device.
 */
#ifndef CONVTUNE_TUNER_H
#define CONVTUNE_TUNER_H

#include <stdatomic.h>
#include <stdbool.h>

#include "cache/cache.h"
#include "cache/system.h"
#include "algorithms/algorithm.h"

/* How candidates are timed, in every cache row's versions text: times
 * measured another way are not comparable, so such rows are re-tuned.
 * 1: direct launches; 2: replays of a CUDA graph of runs. */
#define CONV_TIMING_VERSION 2

/* What tuning chose. */
typedef struct conv_choice {
  uint32_t algorithm_id;
  conv_config config;
  double time_ms;
} conv_choice;

typedef struct conv_tune_request {
  const conv_problem *problem;
  conv_env *env;
  conv_cache *cache;          /* every trial is stored here                     */
  conv_cache *const *system_caches; /* read-only, in lookup order; their     *
                               * tunings are neighbours for prediction too      */
  size_t system_count;        /* how many (0: none)                             */
  const conv_cache_key *key;
  conv_policy policy;         /* EXHAUSTIVE, FAST or PREDICT                    */
  double budget_ms;           /* 0: none (conv_context_options.tuning_budget_ms) */
  size_t workspace_limit;     /* bytes                                          */
  cudaStream_t stream;        /* the context's tuning stream: every tuning      *
                               * buffer is allocated, used and freed with it    *
                               * (env->allocator), and it ends synchronised     */
  const conv_logger *log;     /* progress: INFO per tuning, DEBUG per config    */
  atomic_int *interrupt;      /* nonzero: stop after the current candidate      */
} conv_tune_request;

/* Returns CONV_OK with the winner, CONV_NO_CANDIDATE when nothing valid ran
 * (the reasons are in the cache and in err), CONV_INTERRUPTED, or the status
 * of a failure that prevents tuning at all (out of memory for the test
 * tensors, a CUDA error in the reference, a cache write error). */
conv_status conv_tune(const conv_tune_request *request, conv_choice *winner /* OUT */,
                      conv_error *err);

/* Prediction (predict.c), for CONV_POLICY_PREDICT: the rule
 * tools/bench/predict_loo.py measures offline.  The CONV_PREDICT_NEIGHBOURS
 * nearest problems of the same kind (op, direction, layout, math, with or
 * without an epilogue, determinism) that the caches (the user's, then a
 * shipped system cache) hold a winner for on this device and versions, by the distance between their log2 sizes (n,
 * c, h, w, k, r, s, stride, dilation, channels per group, and whether
 * depthwise); where their winners are of one family the prediction is
 * certain, and the tuning times that family's configs that ran fastest on
 * them (conv_predict_configs_for: CONV_PREDICT_CONFIGS of cuDNN's,
 * CONV_PREDICT_OWN_CONFIGS of another family's; each scored by its mean
 * log slowdown against each neighbour's winner, one a neighbour did not
 * time counting as CONV_PREDICT_MISSING_SLOWDOWN times slower) and
 * cuDNN's 3 best guesses (its heuristics' first configs).  Where they
 * disagree, the prediction is split (CONV_PREDICT_SPLIT, below); where
 * there are fewer than 3, there is no prediction, and the tuning searches
 * everything.
 *
 * Why more of the other families': their configs are tens (a cuDNN
 * problem's are hundreds), each quick to prepare (no plan to finalize),
 * and their winners among them are where eight missed (depthwise layers'
 * tiles): leave-one-out over 713 of an H200's exhaustive tunings, without
 * widening, 97% of shapes within 10% of the exhaustive winner against 96%
 * at 8, for 1.8 more configs a shape on average
 * (tools/bench/predict-notes.md). */
#define CONV_PREDICT_NEIGHBOURS 3
#define CONV_PREDICT_CONFIGS 8
#define CONV_PREDICT_OWN_CONFIGS 24
#define CONV_PREDICT_CONFIGS_MAX CONV_PREDICT_OWN_CONFIGS
/* How many of family `algorithm_id`'s ranked configs a prediction times. */
static inline int conv_predict_configs_for(uint32_t algorithm_id) {
  return algorithm_id == CONV_ALGO_CUDNN ? CONV_PREDICT_CONFIGS : CONV_PREDICT_OWN_CONFIGS;
}
#define CONV_PREDICT_MISSING_SLOWDOWN 2.0

typedef struct conv_prediction_neighbour {
  char problem[CONV_PROBLEM_KEY_MAX];
  int layer;             /* the index of the cache it was found in        */
  uint32_t algorithm_id; /* its winner's family */
  conv_config config;    /* its winner's config (the widening's shape class) */
  double winner_ms;
} conv_prediction_neighbour;

typedef struct conv_prediction {
  bool certain;          /* the neighbours' winners are of one family */
  uint32_t algorithm_id; /* that family, when certain                 */
  int neighbours;        /* found, nearest first                      */
  conv_prediction_neighbour neighbour[CONV_PREDICT_NEIGHBOURS];
  char why[128];         /* why not certain                           */
} conv_prediction;

/* Finds the neighbours of `problem` (key->problem) in the caches
 * layers[0..layer_count), for key->device and key->versions, and says
 * whether they agree.  A problem tuned in two layers counts once, as the
 * first layer's (the user's own tuning before a shipped one).  NULL layers
 * past the first are skipped. */
conv_status conv_predict_neighbours(conv_cache *const *layers, int layer_count,
                                    const conv_cache_key *key, const conv_problem *problem,
                                    conv_prediction *out /* OUT */, conv_error *err);

/* Ranks `offered` (the predicted family's configs for the problem) by
 * their times on the neighbours, each read from the layer it was found in:
 * order[0..*count) are indices into offered, best first, at most max of
 * them. */
conv_status conv_predict_rank(conv_cache *const *layers, int layer_count, const conv_cache_key *key,
                              const conv_prediction *prediction, const conv_config *offered,
                              int offered_count, int *order /* OUT */, int max,
                              int *count /* OUT */, conv_error *err);

/* Known-slow configs (predict.c).  Where a prediction falls back to
 * searching everything (CONV_PREDICT_ALL, or nothing predicted ran), the
 * search leaves out each
 * config that, on one of the CONV_KNOWN_SLOW_NEIGHBOURS nearest tuned
 * problems of the problem's kind that are depthwise as it is (or dense as
 * it is), ran CONV_KNOWN_SLOW_MIN_MS or more and over
 * CONV_KNOWN_SLOW_FACTOR times that problem's winner.  Why: some cuDNN
 * engines run every depthwise layer for a second or more (engine 3 with
 * knob 11 = 1: 1.66 s a run on mobilenet_v2's 112x112 layer, whose best
 * takes 0.015 ms), dozens of others for 20-50 ms on a 7x7 layer whose best
 * takes 0.008 ms, and each layer of a model paid those runs again.  Its
 * own neighbours, not the prediction's 3: a neighbour that was itself
 * predicted never ran such configs and says nothing about them.  Offline,
 * over the trials of seven models' first forwards (H200), this rule left
 * out no config within 10% of its layer's winner; with a floor of 0.2 ms
 * it would have left out a winner (tools/bench/predict-notes.md).  The
 * tuning is then marked incomplete, as a prediction is, so that `convtune
 * tune --pending` or an exhaustive context runs every config later.  At
 * most CONV_KNOWN_SLOW_MAX are kept (the first found; more are run). */
#define CONV_KNOWN_SLOW_NEIGHBOURS 8
#define CONV_KNOWN_SLOW_MIN_MS 1.0
#define CONV_KNOWN_SLOW_FACTOR 10.0
#define CONV_KNOWN_SLOW_MAX 512
typedef struct conv_known_slow {
  int count;
  uint32_t algorithm_id[CONV_KNOWN_SLOW_MAX];
  conv_config config[CONV_KNOWN_SLOW_MAX];
} conv_known_slow;

/* Fills *out from the caches layers[0..layer_count) (NULL layers past the
 * first skipped), for `problem` (key->problem) on key's device and
 * versions. */
conv_status conv_predict_known_slow(conv_cache *const *layers, int layer_count,
                                    const conv_cache_key *key, const conv_problem *problem,
                                    conv_known_slow *out /* OUT */, conv_error *err);

/* Whether `slow` (may be NULL: none) holds `config` of family algorithm_id. */
bool conv_known_slow_has(const conv_known_slow *slow, uint32_t algorithm_id,
                         const conv_config *config);

/* The distance conv_predict_neighbours ranks by: squared, between log2
 * sizes (n, c, h, w, k, r, s, stride counted double, dilation, channels
 * per group) plus 3 for depthwise against not.  A unit is one axis 2x
 * apart; one network stage (image halved, channels doubled) is 5. */
double conv_predict_distance(const conv_problem *a, const conv_problem *b);

/* Widening (widen.c).  A certain prediction times few configs, chosen by
 * how they ran on the neighbours; where the neighbours say little about
 * the problem, the tuning also times every applicable family's own best
 * guesses (the fast policy's first MAX_CONFIGS_FAST = 3 configs of each),
 * so that a family's own rules (FFT's transform size for this image, say)
 * get a say.  At most CONV_PREDICT_CONFIGS + 1 + 3 x the applicable
 * families are then timed (18 families today; 4-8 apply to a problem).
 * The rules, first match wins:
 *
 *   ALL (no prediction, every candidate, as before): fewer than
 *     CONV_PREDICT_NEIGHBOURS neighbours.  Stronger than widening, so
 *     kept: these full searches are what later predictions rank from.
 *   SPLIT: their winners differ in family.  Each of those families'
 *     configs ranked on the neighbours, cuDNN's ranked ones (whichever
 *     families won) headed by its best guesses, and, as widened, every
 *     applicable family's best guesses.  Why: a full search here cost
 *     two thirds of a model's first forward (resnet50 in TF32: 20 of its
 *     31 tunings, 21 of 32 s), nearly all of it cuDNN's hundreds of
 *     configs (plans to finalize, many failing).  Replayed in tuning
 *     order on resnet50's TF32 layers (tools/bench/predict-notes.md,
 *     "Split predictions"), ranking the families alone left 7 over 10%
 *     of exhaustive, worst 1.55x: the winner was often a config the
 *     ranking could not know (a cuBLAS algorithm of im2col_gemm on a 1x1
 *     layer), which im2col_gemm's marked best guesses now cover.  Until
 *     2026-11-29 a split then searched every config of every family but
 *     cuDNN (29 of 31 within 10%, worst 1.12x); when those guesses made
 *     im2col_gemm win more of densenet121's TF32 1x1 layers, 38 of its
 *     71 tunings split instead of 7, and its channel_split configs alone
 *     ran 1521 times (docs/tuning.md, "Split predictions").
 *   WIDE "far": the farthest of the neighbours is more than
 *     CONV_PREDICT_FAR away (conv_predict_distance).  16 is 4 axes 4x
 *     apart, or one 16x: on resnet50's 23 layers every layer but the stem
 *     has its 3 nearest within 12 (the next stage 5, 4x the channels 8),
 *     the stem 71; the suite's rows, picked to differ, are 9 to 118.
 *   WIDE "range": on an axis the problem lies outside the neighbours'
 *     min..max by more than CONV_PREDICT_RANGE_FACTOR: filter taps r*s,
 *     input channels, output channels, output pixels p*q, channels per
 *     group; or it is depthwise and none of them is (or the reverse).  A
 *     factor 4 is two network stages: a model's layers stay within it.
 *   WIDE "classes": their winners are of one family whose configs come in
 *     shape classes that do not carry over, and the classes differ: for
 *     the FFT families (fft, fft_filter), a transform holding the whole
 *     padded image against tiles, or tiles of different sizes.
 *   NARROW: the prediction as it was. */
#define CONV_PREDICT_FAR 16.0
#define CONV_PREDICT_RANGE_FACTOR 4.0

typedef enum conv_predict_scope {
  CONV_PREDICT_NARROW = 0, /* the neighbours' family's ranked configs, cuDNN's guesses */
  CONV_PREDICT_WIDE,       /* those and every applicable family's best guesses     */
  CONV_PREDICT_SPLIT,      /* the neighbours disagree: see above                   */
  CONV_PREDICT_ALL         /* no prediction: every candidate                        */
} conv_predict_scope;

/* Which scope `prediction` (conv_predict_neighbours' for `problem`)
 * gives, and in why[] which rule said so ("" for NARROW).  Pure: reads
 * the neighbours' problems from their keys (one that does not parse
 * counts as far). */
conv_predict_scope conv_predict_scope_of(const conv_problem *problem,
                                         const conv_prediction *prediction, char *why,
                                         size_t why_size);

/* Where a tuning's wall time goes (phases.c), for its INFO line and
 * `convtune tune --verbose / --json`.  SETUP: the test tensors, their
 * random fill and the reference run; PREDICT: reading the caches for
 * neighbours and ranking their configs; LIST: families listing their
 * configs (cuDNN's engine and heuristic queries); PREPARE: building each
 * config (cuDNN plan finalisation, cuFFT plans, cuBLASLt queries), its
 * workspace allocation, and its release; VALIDATE: the poisoned
 * validation run and the comparison with the reference; TIME: the timed
 * runs (graph capture included); CACHE: writing trials, the winner and
 * pending marks.  What no phase holds (logging, bookkeeping) is "other". */
typedef enum conv_tune_phase {
  CONV_PHASE_SETUP = 0,
  CONV_PHASE_PREDICT,
  CONV_PHASE_LIST,
  CONV_PHASE_PREPARE,
  CONV_PHASE_VALIDATE,
  CONV_PHASE_TIME,
  CONV_PHASE_CACHE,
  CONV_PHASE_COUNT
} conv_tune_phase;

typedef struct conv_tune_phases {
  double ms[CONV_PHASE_COUNT];
} conv_tune_phases;

/* "setup", "predict", ... ; "other" for CONV_PHASE_COUNT; "?" otherwise. */
const char *conv_tune_phase_name(int phase);

/* Adds ms (ignored unless positive and finite) to a phase; phases may be
 * NULL (an untimed pick keeps none). */
void conv_tune_phases_add(conv_tune_phases *phases, conv_tune_phase phase, double ms);

/* "phases (s): setup 0.012, predict 0.000, ..., other 0.003": each phase
 * and the rest of total_ms (never below 0), in seconds.  What the INFO
 * line at a tuning's end carries, and what `convtune tune` reads back
 * from it.  Returns what snprintf returns. */
int conv_tune_phases_format(const conv_tune_phases *phases, double total_ms, char *text,
                            size_t size);

/* Early abandonment (rules.c).  A config whose runs are already slower
 * than the best median so far by CONV_ABANDON_FACTOR stops being timed:
 * after CONV_ABANDON_MIN_SAMPLES timed samples whose fastest still took
 * that long, or after its first run where that run took
 * CONV_ABANDON_LONG_RUN_MS or more (such runs are timed launched directly,
 * and one varies little).  It is kept as a trial that ran (CONV_OK), with
 * the median of its samples and the reason "abandoned: ...", and is never
 * the winner.  The fastest of its samples being above FACTOR x the best
 * median, its own median is too: a config is dropped only when every
 * sample it gave was at least FACTOR times the best, so a config truly
 * faster than the best is lost only if each of its first samples ran over
 * FACTOR times slower than it should (replays of one graph vary by a few
 * percent). */
#define CONV_ABANDON_FACTOR 1.3
#define CONV_ABANDON_MIN_SAMPLES 2
#define CONV_ABANDON_LONG_RUN_MS 1.0

/* Whether a config stops being timed after `samples` samples, the fastest
 * fastest_ms per run, against the best median so far (best_ms <= 0: none
 * yet, so never). */
bool conv_tuner_abandons(int samples, double fastest_ms, double best_ms);

/* Screening (trial.c).  Every timed config whose run is shorter than
 * CONV_ABANDON_LONG_RUN_MS is first timed as CONV_SCREEN_SAMPLES replays
 * of a short graph, about CONV_SCREEN_MS of its runs; where there is a
 * best screen to beat, conv_tuner_abandons judges those samples (the same
 * margin): what drops a config that cannot win then costs about a
 * millisecond of GPU time instead of three replays of a 1 ms graph.  The
 * median of the samples is the config's screen (a longer run's screen is
 * its first timed run, launched directly). */
#define CONV_SCREEN_SAMPLES 3
#define CONV_SCREEN_MS 0.2

/* Finalists (rules.c).  Only the CONV_FINALISTS configs with the fastest
 * screens of a tuning are timed in full, fastest screen first, after every
 * config has been screened; they stay prepared (their workspaces given
 * back) until then.  The others that passed their screens are kept as
 * abandoned trials with their screens' medians ("abandoned: MS in its
 * screen, ...") and are never the winner.  Why: each config that led the
 * tuning when it ran used to be timed in full (30 ms), only to be beaten
 * by a later one, and configs within 5% of the leader were timed for 5-10
 * ms more: 2-3 full timings and 5-10 near ones a tuning, most of a model's
 * first forward on a fresh cache (H200, batch 16: 145 full timings in
 * densenet121's 71 tunings in TF32).  Screens of a config agree with its
 * full median within a few percent, so the winner is among the screens'
 * first two but for near ties; the second finalist is timed against the
 * first under the contention and tie rules below.  Returns the place
 * (0: first) a config screened in candidate_ms takes among `count`
 * finalists screened in screened_ms[] (ascending), behind those as fast;
 * CONV_FINALISTS when it is not one (NaN: never). */
#define CONV_FINALISTS 2
int conv_tuner_finalist_place(const double *screened_ms, int count, double candidate_ms);

/* Contention (rules.c).  A config timed in full whose median after
 * CONV_CONTENTION_SAMPLES samples or more is over CONV_CONTENTION_FACTOR
 * times the best median so far stops being timed: it is kept as an
 * abandoned trial, with that median, and is never the winner.  Why: a
 * config within 1.3x of the best (CONV_ABANDON_FACTOR) used to be timed to
 * the full 30 ms although it could not win.  A config that ends up the
 * winner is never stopped by it (its median is at most the best), so a
 * winner's time is measured exactly as before the rule; near-ties within
 * the factor are timed in full and decided by their medians. */
#define CONV_CONTENTION_FACTOR 1.05
#define CONV_CONTENTION_SAMPLES 5

/* Whether a config timed in full stops after `samples` samples of median
 * median_ms, against the best median so far (best_ms <= 0: none yet, so
 * never). */
bool conv_tuner_out_of_contention(int samples, double median_ms, double best_ms);

/* Near ties (rules.c).  A config timed in full whose median after
 * CONV_TIE_SAMPLES samples is no faster than the best median so far
 * stops being timed too, kept as an abandoned trial with that median.
 * Why: configs within 5% of the best (a cuDNN engine's knob variants that
 * build the same kernel, say) were each timed to the full 30 ms, 15-99 of
 * them in a model's first forward on a fresh cache (H200, batch 16), only
 * to lose.  Ten samples are about 10 ms of runs; a config still faster
 * than the best then is timed in full, and only such a config can be the
 * winner, so a winner's time is measured as before.  Among configs tied
 * within the medians' noise (about 1%), another one may now win. */
#define CONV_TIE_SAMPLES 10

bool conv_tuner_tied_out(int samples, double median_ms, double best_ms);

/* Whether a config is abandoned on its validation run alone, before any
 * timing: where that run (timed with events; it also pays first-launch
 * costs such as loading the kernel's module, so it overstates a short
 * run) took CONV_ABANDON_FIRST_RUN_MS or more and over
 * CONV_ABANDON_FIRST_RUN_FACTOR times the best median so far.  Why: some
 * cuDNN engines run a small layer for seconds (one took 1978 ms on a
 * depthwise layer whose best is 0.023 ms), and timing such a run again
 * doubled what it cost the tuning.  The margins leave a first run's
 * overheads far behind. */
#define CONV_ABANDON_FIRST_RUN_MS 20.0
#define CONV_ABANDON_FIRST_RUN_FACTOR 10.0
bool conv_tuner_abandons_first_run(double first_run_ms, double best_ms);

/* Whether a config is abandoned on its first timed run: a run launched
 * directly after validation, behind a CONV_WARM_HOLD_US hold (longer than
 * any config takes the host to launch, so that the events time the GPU's
 * run alone), over CONV_ABANDON_WARM_FACTOR times the best median so far.
 * Why: 60-75% of the configs the screen dropped in a model's first forward
 * (H200, batch 16) were over 3x the best, and each screen costs about 2 ms
 * of capturing a graph and replaying it three times; one run is off by
 * far less than 3x once the host is held out of it. */
#define CONV_ABANDON_WARM_FACTOR 3.0
#define CONV_WARM_HOLD_US 200
bool conv_tuner_abandons_warm_run(double warm_ms, double best_ms);

/* Twins of a config far too slow (conv_algorithm.twin_of): a config
 * abandoned on its first timed run, of CONV_TWIN_RULED_OUT_MS or more and
 * over CONV_TWIN_RULED_OUT_FACTOR times the best median so far, or on its
 * validation run alone (over CONV_ABANDON_FIRST_RUN_FACTOR times the best),
 * that run CONV_TWIN_RULED_OUT_FIRST_RUN_MS or more, leaves its twin unrun,
 * kept as abandoned with the reason.  Why: a cuDNN engine config and its
 * twin with K R S C filters run the same kernels: in the suite's exhaustive
 * tunings (H200, 2026-11-29, before the rule), the twins of the 72 (strict)
 * and 85 (TF32) configs it names ran at 0.87-1.44x their time, none within
 * 2x of the winner, and took 11.2 s and 11.0 s of those tunings (cuDNN's
 * engine 4: 1.46-1.53 s a run on the 31x31 rows).  A validation run may pay
 * first-launch costs, hence its floor: one TF32 engine config took 25.7 ms
 * in it where its twin ran in 0.9 ms (1.03x the winner); a run of 50 ms or more
 * over 10x the best leaves its config over 3x the best unless those costs
 * were over 35 ms. */
#define CONV_TWIN_RULED_OUT_MS 20.0
#define CONV_TWIN_RULED_OUT_FACTOR 2.0
#define CONV_TWIN_RULED_OUT_FIRST_RUN_MS 50.0
bool conv_tuner_rules_out_twin(double run_ms, bool validation_run, double best_ms);

/* Whether a tuning with a budget (budget_ms > 0; 0: none, never spent) that
 * has run elapsed_ms stops before its next config.  Never before one config
 * has validated (have_valid): a tuning always returns a plan if it can. */
bool conv_tuner_budget_spent(double elapsed_ms, double budget_ms, bool have_valid);

/* Record mode (CONV_POLICY_RECORD): a plan chosen without timing
 * anything.  The fast policy's configs of every applicable family are
 * checked in turn, those cuDNN's heuristic ranks first, each prepared within
 * the workspace limit and validated against the reference on random
 * inputs, as tuning validates them; the first that passes is the choice
 * (time_ms -1).  Nothing is written to the cache.  CONV_NO_CANDIDATE when
 * none passes, CONV_INTERRUPTED, or the status of a failure that prevents
 * checking at all (out of memory for the test tensors, a CUDA error). */
conv_status conv_pick_untimed(const conv_tune_request *request, conv_choice *choice /* OUT */,
                              conv_error *err);

/* Re-validation of a choice made elsewhere (a winner carried over from
 * other library versions, CONV_SOURCE_CARRIED): its config prepared
 * within the workspace limit and checked against the reference on fresh
 * random inputs, exactly as tuning and conv_pick_untimed check theirs;
 * nothing is timed or written.  *trial (may be NULL) gets the outcome
 * (rel_error, workspace, determinism).  CONV_OK when it passed; else the
 * trial's failure (CONV_VALIDATION_FAILED, CONV_UNSUPPORTED for a family
 * this build lacks or that does not take the problem,
 * CONV_WORKSPACE_LIMIT, ...) with its reason in err, or the status of a
 * failure that prevents checking at all (out of memory for the test
 * tensors, a CUDA error in the reference). */
conv_status conv_validate_choice(const conv_tune_request *request, const conv_choice *choice,
                                 conv_trial *trial /* OUT */, conv_error *err);

#endif /* CONVTUNE_TUNER_H */
