/* tuner.c -- time and validate every applicable candidate config: the
 * families' passes, the policies, the outcome (conv_tune), and the untimed
 * pick.  One config's trial is trial.c's. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tuner/tuning.h"

static bool budget_spent(const conv_tune_request *req, const tally *t) {
  return conv_tuner_budget_spent((uv_hrtime() - t->started) * 1e-6, req->budget_ms, t->have_best);
}

/* A family's configs, listed once per tuning (the list phase's time):
 * up to `max`; an enumeration that fails is recorded as the family's
 * failed trial, and the others go on. */
static conv_status list_family(const conv_tune_request *req, const conv_algorithm *algo, int max,
                               conv_config *configs, int *count, bool *failed, tally *t,
                               conv_error *err) {
  conv_error cerr = {CONV_OK, ""};
  const uint64_t listing = uv_hrtime();
  *count = 0;
  const conv_status listed = algo->configs(req->problem, req->env, configs, max, count, &cerr);
  conv_tuner_phase_since(&t->phases, CONV_PHASE_LIST, listing);
  if (listed == CONV_OK) return CONV_OK;
  conv_trial trial;
  conv_tuner_trial_init(&trial, algo, &(conv_config){0});
  trial.status = listed;
  snprintf(trial.reason, sizeof trial.reason, "enumerating configs: %s", cerr.message);
  conv_tuner_report(req, &trial);
  *count = 0;
  *failed = true;
  /* Why a tuning with nothing to time failed, where nothing else does (a
   * half problem with an epilogue cuDNN cannot fuse, say). */
  if (t->first_failure[0] == '\0')
    snprintf(t->first_failure, sizeof t->first_failure, "%s: %s", algo->name, trial.reason);
  return conv_tuner_store_trial(req, &trial, t, err);
}

/* Known slow on the neighbours (tuner.h), itself or its twin. */
static bool known_slow(const conv_known_slow *slow, const conv_algorithm *algo,
                       const conv_config *config) {
  if (conv_known_slow_has(slow, algo->id, config)) return true;
  const conv_config kernels = conv_tuner_kernels_of(algo, config);
  return !conv_config_equal(&kernels, config) && conv_known_slow_has(slow, algo->id, &kernels);
}

/* Screens configs[0..count) of one family, leaving out those a
 * prediction timed and the known-slow ones (`slow`, NULL: none), until
 * the budget is spent.  *pick_taken persists across passes: one heuristic
 * pick per family. */
static conv_status screen_configs(bench *b, const conv_algorithm *algo, const conv_config *configs,
                                  int count, const predicted_set *predicted,
                                  const conv_known_slow *slow, bool *pick_taken, tally *t,
                                  conv_error *err) {
  const conv_tune_request *req = b->req;
  conv_status st = CONV_OK;
  for (int i = 0; i < count && st == CONV_OK; i++) {
    if (conv_predicted_has(predicted, algo, &configs[i])) continue;
    if (known_slow(slow, algo, &configs[i])) {
      t->skipped++;
      continue;
    }
    if (atomic_load(req->interrupt)) {
      st = conv_error_set(err, CONV_INTERRUPTED, "tuning interrupted; measured trials are kept");
      break;
    }
    if (t->cut || budget_spent(req, t)) {
      t->cut = true;
      t->untimed++;
      continue;
    }
    st = conv_tuner_time_config(b, algo, &configs[i], pick_taken, t, err);
  }
  return st;
}

/* A search's state across its passes and families: each family's list
 * (made once, `full` configs at most), its heuristic pick taken, and
 * whether it could not list its configs. */
typedef struct search {
  const conv_algorithm *const *algos;
  int count, full;
  conv_config *lists; /* count x full */
  int *list_counts;
  bool *listed, *picks, *failed;
} search;

/* The fast policy: each family's best guesses (its first MAX_CONFIGS_FAST
 * configs).  The others: two passes, every family's best guesses first,
 * then the rest of each.  Why: a budget spent early has then tried every
 * family's likeliest configs; and the best so far is a good one early, so
 * that each rule that abandons a config against it (tuner.h) cuts the
 * slow ones sooner.  In the suite's exhaustive tunings (H200), cuDNN's
 * configs, listed first, took 50-100 ms a run on fft_few_ch_31, which the
 * FFT family runs in 0.28 ms: each was abandoned only after a second run,
 * timed.  Left out: the configs `predicted` timed, and the known-slow
 * ones. */
static conv_status search_families(bench *b, search *s, const predicted_set *predicted,
                                   const conv_known_slow *slow, tally *t, conv_error *err) {
  const conv_tune_request *req = b->req;
  const bool guesses_first = req->policy != CONV_POLICY_FAST;
  conv_status st = CONV_OK;
  for (int pass = guesses_first ? 0 : 1; pass < 2 && st == CONV_OK; pass++) {
    for (int i = 0; i < s->count && st == CONV_OK; i++) {
      const conv_algorithm *algo = s->algos[i];
      if (s->failed[i] || !conv_algorithm_applicable(algo, req->problem, req->env))
        continue;
      conv_config *list = s->lists + (size_t)i * (size_t)s->full;
      if (!s->listed[i]) {
        s->listed[i] = true;
        st = list_family(req, algo, s->full, list, &s->list_counts[i], &s->failed[i], t, err);
      }
      const int count = s->list_counts[i];
      const int guesses = count < MAX_CONFIGS_FAST ? count : MAX_CONFIGS_FAST;
      const int from = pass == 1 && guesses_first ? guesses : 0;
      const int to = pass == 0 ? guesses : count;
      if (st == CONV_OK)
        st = screen_configs(b, algo, list + from, to - from, predicted, slow, &s->picks[i], t,
                            err);
    }
  }
  return st;
}

/* search_families with its state, made here: a tuning that a prediction
 * settles never allocates every family's list. */
static conv_status search_all(bench *b, const predicted_set *predicted,
                              const conv_known_slow *slow, tally *t, conv_error *err) {
  search s = {.algos = conv_registry(&s.count)};
  s.full = b->req->policy == CONV_POLICY_FAST ? MAX_CONFIGS_FAST : MAX_CONFIGS_EXHAUSTIVE;
  s.lists = calloc((size_t)s.count * (size_t)s.full, sizeof *s.lists);
  s.list_counts = calloc((size_t)s.count, sizeof *s.list_counts);
  s.listed = calloc((size_t)s.count, sizeof *s.listed);
  s.picks = calloc((size_t)s.count, sizeof *s.picks);
  s.failed = calloc((size_t)s.count, sizeof *s.failed);
  const conv_status st =
      s.lists == NULL || s.list_counts == NULL || s.listed == NULL || s.picks == NULL ||
              s.failed == NULL
          ? conv_error_set(err, CONV_OUT_OF_MEMORY, "tuning state")
          : search_families(b, &s, predicted, slow, t, err);
  free(s.lists);
  free(s.list_counts);
  free(s.listed);
  free(s.picks);
  free(s.failed);
  return st;
}

/* The policy's configs: every family's (exhaustive), their best guesses
 * (fast), or, predicting, the predicted ones -- where there was no
 * prediction or nothing it timed ran, every candidate but the known-slow
 * ones.  Each is screened; the finalists are timed in full once all have
 * been. */
static conv_status tune_all(bench *b, tally *t, conv_error *err) {
  const conv_tune_request *req = b->req;
  const uint64_t beginning = uv_hrtime();
  conv_status st = conv_cache_begin_tuning(req->cache, req->key, err);
  conv_tuner_phase_since(&t->phases, CONV_PHASE_CACHE, beginning);
  predicted_set predicted = {.count = 0};
  conv_known_slow *slow = NULL;
  if (st == CONV_OK && req->policy == CONV_POLICY_PREDICT) {
    st = conv_tuner_predicted(b, t, &predicted, err);
    if (st == CONV_OK && t->have_best) goto out; /* the prediction gave a plan */
    /* Nothing predicted, or nothing predicted ran: every candidate, except
     * the configs the prediction already timed and those its neighbours
     * found far too slow. */
    if (st == CONV_OK && (slow = calloc(1, sizeof *slow)) == NULL)
      st = conv_error_set(err, CONV_OUT_OF_MEMORY, "tuning state");
    if (st == CONV_OK) conv_tuner_known_slow(req, slow, &t->phases);
    t->predicted = 0;
    t->widened = t->split = false;
  }
  if (st == CONV_OK) st = search_all(b, &predicted, slow, t, err);
out:
  if (st == CONV_OK) st = conv_tuner_time_finalists(b, t, err);
  conv_tuner_release_finalists(t); /* a failed search's */
  free(slow);
  return st;
}

/* The end of a tuning, for the context's log (INFO), with where its time
 * went (conv_tune_phases_format, which `convtune tune` reads back). */
static void log_outcome(const conv_tune_request *req, conv_status st, const tally *t, double s) {
  if (!conv_log_enabled(req->log, CONV_LOG_INFO)) return;
  char phases[256] = "";
  (void)conv_tune_phases_format(&t->phases, s * 1e3, phases, sizeof phases);
  if (st != CONV_OK) {
    conv_log(req->log, CONV_LOG_INFO,
             "tuning failed after %.2f s (%s): %d configs, %d failed; %s", s,
             conv_status_string(st), t->tried, t->failed, phases);
    return;
  }
  const conv_algorithm *algo = conv_registry_find(t->best.algorithm_id);
  char config[128] = "";
  if (algo != NULL) algo->describe(&t->best.config, config, sizeof config);
  conv_log(req->log, CONV_LOG_INFO,
           "tuned in %.2f s: %d configs, %d failed, %d abandoned; fastest %s %s (%.4f ms); %s", s,
           t->tried, t->failed, t->abandoned, algo ? algo->name : "?", config, t->best.time_ms,
           phases);
  if (t->predicted > 0)
    conv_log(req->log, CONV_LOG_INFO,
             "%s: predicted from its tuned neighbours%s, %d configs timed; marked incomplete "
             "(convtune tune --pending, or an exhaustive context, times the rest)",
             req->key->problem,
             t->split ? " (split)" : t->widened ? " (widened)" : "",
             t->tried);
  if (t->skipped > 0)
    conv_log(req->log, CONV_LOG_INFO,
             "%s: %d configs not run: each ran %.0f ms or more and over %.0fx the winner on one "
             "of its %d nearest tuned problems of its kind; marked incomplete (convtune tune "
             "--pending, or an exhaustive context, runs them)",
             req->key->problem, t->skipped, CONV_KNOWN_SLOW_MIN_MS, CONV_KNOWN_SLOW_FACTOR,
             CONV_KNOWN_SLOW_NEIGHBOURS);
  if (t->cut)
    conv_log(req->log, CONV_LOG_INFO,
             "%s: tuning stopped by its budget (%.0f ms) with %d configs untimed; the fastest so "
             "far is kept, marked incomplete (convtune tune --pending finishes it)",
             req->key->problem, req->budget_ms, t->untimed);
}

/* The winner, and whether the problem waits to be finished: tuned fully,
 * nothing of this shape waits on this device any more; cut short by a
 * budget, only the predicted configs timed, or known-slow configs left
 * out, it does. */
static conv_status store_outcome(const conv_tune_request *req, const tally *t, conv_error *err) {
  conv_status st =
      conv_cache_set_winner(req->cache, req->key, t->best.algorithm_id, &t->best.config, err);
  if (st != CONV_OK) return st;
  if (t->cut || t->predicted > 0 || t->skipped > 0)
    return conv_cache_record_pending(req->cache, req->key, CONV_PENDING_INCOMPLETE, err);
  return conv_cache_clear_pending(req->cache, req->key, err);
}

conv_status conv_tune(const conv_tune_request *req, conv_choice *winner, conv_error *err) {
  bench b = {.req = req};
  tally t = {.started = uv_hrtime()};
  conv_status st = conv_problem_shape(req->problem, &b.shape);
  if (st != CONV_OK) return conv_error_set(err, st, "invalid problem");
  uint64_t started = t.started;
  conv_log(req->log, CONV_LOG_INFO, "tuning %s", req->key->problem);
  CONV_TRY(st, conv_bench_alloc(&b, err), done);
  CONV_TRY(st, conv_bench_inputs(&b, err), done);
  conv_tuner_phase_since(&t.phases, CONV_PHASE_SETUP, started);
  CONV_TRY(st, tune_all(&b, &t, err), done);
  if (!t.have_best) {
    st = conv_error_set(err, CONV_NO_CANDIDATE, "%d configs tried, none valid; first failure: %s",
                        t.tried, t.first_failure[0] ? t.first_failure : "(no applicable candidate)");
    goto done;
  }
  const uint64_t storing = uv_hrtime();
  st = store_outcome(req, &t, err);
  conv_tuner_phase_since(&t.phases, CONV_PHASE_CACHE, storing);
  if (st != CONV_OK) goto done;
  *winner = t.best;
done:
  log_outcome(req, st, &t, (uv_hrtime() - started) * 1e-9);
  conv_bench_free(&b);
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
  CONV_TRY(st, conv_bench_alloc(&b, err), done);
  CONV_TRY(st, conv_bench_inputs(&b, err), done);
  for (int i = 0; i < count; i++) {
    if (atomic_load(req->interrupt)) {
      st = conv_error_set(err, CONV_INTERRUPTED, "interrupted before a candidate validated");
      goto done;
    }
    conv_trial trial;
    conv_tuner_trial_init(&trial, candidates[i].algo, &candidates[i].config);
    conv_log(req->log, CONV_LOG_DEBUG, "checking %s %s", trial.algorithm, trial.config_text);
    conv_tuner_run_trial(&b, candidates[i].algo, &candidates[i].config, 0, &trial, NULL, NULL,
                         NULL);
    conv_tuner_report(req, &trial);
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
  conv_bench_free(&b);
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
  conv_tuner_trial_init(&trial, algo, &choice->config);
  conv_status st = conv_problem_shape(req->problem, &b.shape);
  if (st != CONV_OK) return conv_error_set(err, st, "invalid problem");
  CONV_TRY(st, conv_bench_alloc(&b, err), done);
  CONV_TRY(st, conv_bench_inputs(&b, err), done);
  conv_tuner_run_trial(&b, algo, &choice->config, 0, &trial, NULL, NULL, NULL);
  conv_tuner_report(req, &trial);
  if (trial.status != CONV_OK) st = conv_error_set(err, trial.status, "%s", trial.reason);
  if (out != NULL) *out = trial;
done:
  conv_bench_free(&b);
  return st;
}
