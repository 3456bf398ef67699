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
  const conv_known_slow *slow; /* left out (NULL: none) */
} family_pass;

static bool already_done(const family_pass *pass, const conv_config *c) {
  for (int i = 0; i < pass->done_count; i++)
    if (conv_config_equal(&pass->done[i], c)) return true;
  return false;
}

static conv_status tune_family(bench *b, const conv_algorithm *algo, const family_pass *pass,
                               tally *t, conv_error *err) {
  const conv_tune_request *req = b->req;
  conv_config *configs = calloc((size_t)pass->max, sizeof *configs);
  if (configs == NULL) return conv_error_set(err, CONV_OUT_OF_MEMORY, "config list");
  int count = 0;
  conv_error cerr = {CONV_OK, ""};
  const uint64_t listing = uv_hrtime();
  conv_status st = algo->configs(req->problem, req->env, configs, pass->max, &count, &cerr);
  conv_tuner_phase_since(&t->phases, CONV_PHASE_LIST, listing);
  if (st != CONV_OK) { /* the family is recorded as failed, the others go on */
    conv_trial trial;
    conv_tuner_trial_init(&trial, algo, &(conv_config){0});
    trial.status = st;
    snprintf(trial.reason, sizeof trial.reason, "enumerating configs: %s", cerr.message);
    conv_tuner_report(req, &trial);
    count = 0;
    *pass->enumeration_failed = true;
    /* Why a tuning with nothing to time failed, where nothing else does
     * (a half problem with an epilogue cuDNN cannot fuse, say). */
    if (t->first_failure[0] == '\0')
      snprintf(t->first_failure, sizeof t->first_failure, "%s: %s", algo->name, trial.reason);
    st = conv_tuner_store_trial(req, &trial, t, err);
  }
  for (int i = 0; i < count && st == CONV_OK; i++) {
    if (already_done(pass, &configs[i])) continue;
    if (conv_known_slow_has(pass->slow, algo->id, &configs[i])) {
      /* Counted in the pass that lists everything (ran == NULL): a
       * budgeted tuning's first pass meets the config again there. */
      if (pass->ran == NULL) t->skipped++;
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
    if (pass->ran != NULL && *pass->ran_count < pass->ran_max)
      pass->ran[(*pass->ran_count)++] = configs[i];
    st = conv_tuner_time_config(b, algo, &configs[i], pass->pick_taken, t, err);
  }
  free(configs);
  return st;
}

/* A search's state across its passes and families: each family's best
 * guesses (pass 0's, left out of pass 1), its heuristic pick taken, and
 * whether it could not list its configs. */
typedef struct search {
  const conv_algorithm *const *algos;
  int count;
  conv_config *guesses; /* count x MAX_CONFIGS_FAST */
  int *guess_counts;
  bool *picks, *failed;
} search;

/* Which families a search runs: a split prediction's search runs all but
 * cuDNN's, and, where none of that ran, cuDNN's after. */
typedef enum family_set { FAMILIES_ALL, FAMILIES_BUT_CUDNN, FAMILIES_CUDNN } family_set;

static bool searched(family_set which, const conv_algorithm *algo) {
  return which == FAMILIES_ALL || (which == FAMILIES_CUDNN) == (algo->id == CONV_ALGO_CUDNN);
}

/* Without a budget, each family's configs in turn.  With one, two passes:
 * every family's best guesses (the fast policy's), then the rest of each
 * (exhaustive policy), so that a budget spent early has tried every
 * family's likeliest configs.  Left out: the families not `which`, the
 * configs `predicted` timed, and the known-slow ones. */
static conv_status search_families(bench *b, search *s, family_set which,
                                   const predicted_set *predicted, const conv_known_slow *slow,
                                   tally *t, conv_error *err) {
  const conv_tune_request *req = b->req;
  const bool budgeted = req->budget_ms > 0 && req->policy != CONV_POLICY_FAST;
  const int full = req->policy == CONV_POLICY_FAST ? MAX_CONFIGS_FAST : MAX_CONFIGS_EXHAUSTIVE;
  conv_status st = CONV_OK;
  for (int pass = budgeted ? 0 : 1; pass < 2 && st == CONV_OK; pass++) {
    for (int i = 0; i < s->count && st == CONV_OK; i++) {
      const conv_algorithm *algo = s->algos[i];
      if (!searched(which, algo) || s->failed[i] ||
          !conv_algorithm_applicable(algo, req->problem, req->env))
        continue;
      conv_config *mine = s->guesses + (size_t)i * MAX_CONFIGS_FAST;
      /* Left out: this pass's earlier guesses (pass 1) and the family's
       * configs the prediction timed (its ranked ones, cuDNN's guesses, a
       * widened prediction's best guesses). */
      conv_config done[CONV_PREDICT_CONFIGS_MAX + 3 * MAX_CONFIGS_FAST];
      const int done_max = (int)(sizeof done / sizeof done[0]);
      int done_count = 0;
      for (int j = 0; j < predicted->count && done_count < done_max; j++)
        if (predicted->configs[j].algo == algo) done[done_count++] = predicted->configs[j].config;
      for (int j = 0; pass == 1 && j < s->guess_counts[i] && done_count < done_max; j++)
        done[done_count++] = mine[j];
      family_pass fp = {pass == 0 ? MAX_CONFIGS_FAST : full,
                        done,
                        done_count,
                        pass == 0 ? mine : NULL,
                        MAX_CONFIGS_FAST,
                        &s->guess_counts[i],
                        &s->picks[i],
                        &s->failed[i],
                        slow};
      st = tune_family(b, algo, &fp, t, err);
    }
  }
  return st;
}

/* The policy's configs: every family's (exhaustive), their best guesses
 * (fast), or, predicting, the predicted ones -- and, where the prediction
 * was split, every config of every family but cuDNN; where there was none
 * or nothing it timed ran, every candidate but the known-slow ones.  Each
 * is screened; the finalists are timed in full once all have been. */
static conv_status tune_all(bench *b, tally *t, conv_error *err) {
  const conv_tune_request *req = b->req;
  search s = {.algos = conv_registry(&s.count)};
  s.guesses = calloc((size_t)s.count * MAX_CONFIGS_FAST, sizeof *s.guesses);
  s.guess_counts = calloc((size_t)s.count, sizeof *s.guess_counts);
  s.picks = calloc((size_t)s.count, sizeof *s.picks);
  s.failed = calloc((size_t)s.count, sizeof *s.failed);
  conv_status st = CONV_OK;
  if (s.guesses == NULL || s.guess_counts == NULL || s.picks == NULL || s.failed == NULL)
    st = conv_error_set(err, CONV_OUT_OF_MEMORY, "tuning state");
  const uint64_t beginning = uv_hrtime();
  if (st == CONV_OK) st = conv_cache_begin_tuning(req->cache, req->key, err);
  conv_tuner_phase_since(&t->phases, CONV_PHASE_CACHE, beginning);
  predicted_set predicted = {.count = 0};
  conv_known_slow *slow = NULL;
  if (st == CONV_OK && req->policy == CONV_POLICY_PREDICT) {
    st = conv_tuner_predicted(b, t, &predicted, err);
    if (st == CONV_OK && t->have_best && !t->split) goto out; /* the prediction gave a plan */
    if (st == CONV_OK && (slow = calloc(1, sizeof *slow)) == NULL)
      st = conv_error_set(err, CONV_OUT_OF_MEMORY, "tuning state");
    if (st == CONV_OK) conv_tuner_known_slow(req, slow, &t->phases);
    const bool split = t->split;
    if (st == CONV_OK && split)
      st = search_families(b, &s, FAMILIES_BUT_CUDNN, &predicted, slow, t, err);
    if (st == CONV_OK && t->have_best) goto out;
    /* Nothing predicted, or nothing predicted ran: every candidate (after
     * a split, cuDNN's: the others ran), except the configs the prediction
     * already timed and those its neighbours found far too slow. */
    t->predicted = 0;
    t->widened = t->split = false;
    if (st == CONV_OK && split) {
      st = search_families(b, &s, FAMILIES_CUDNN, &predicted, slow, t, err);
      goto out;
    }
  }
  if (st == CONV_OK) st = search_families(b, &s, FAMILIES_ALL, &predicted, slow, t, err);
out:
  if (st == CONV_OK) st = conv_tuner_time_finalists(b, t, err);
  conv_tuner_release_finalists(t); /* a failed search's */
  free(slow);
  free(s.guesses);
  free(s.guess_counts);
  free(s.picks);
  free(s.failed);
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
             t->split ? " (split: then every family but cuDNN)" : t->widened ? " (widened)" : "",
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
    conv_tuner_run_trial(&b, candidates[i].algo, &candidates[i].config, 0, &trial, NULL, NULL);
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
  conv_tuner_run_trial(&b, algo, &choice->config, 0, &trial, NULL, NULL);
  conv_tuner_report(req, &trial);
  if (trial.status != CONV_OK) st = conv_error_set(err, trial.status, "%s", trial.reason);
  if (out != NULL) *out = trial;
done:
  conv_bench_free(&b);
  return st;
}
