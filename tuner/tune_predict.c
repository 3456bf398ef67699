/*
 * tune_predict.c -- CONV_POLICY_PREDICT in the tuner (tuning.h): the
 * problem's tuned neighbours (predict.c), how wide to search (widen.c),
 * the configs that makes, and their timing.  Where there is nothing to
 * predict, conv_tune searches everything (tuner.c).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tuner/tuning.h"

bool conv_predicted_has(const predicted_set *set, const conv_algorithm *algo,
                        const conv_config *config) {
  for (int i = 0; i < set->count; i++)
    if (set->configs[i].algo == algo && conv_config_equal(&set->configs[i].config, config))
      return true;
  return false;
}

static uint64_t family_bit(uint32_t id) { return id < 64 ? (uint64_t)1 << id : 0; }

static void add(predicted_set *set, const conv_algorithm *algo, const conv_config *config) {
  if (set->count < PREDICTED_MAX && !conv_predicted_has(set, algo, config))
    set->configs[set->count++] = (predicted_config){algo, *config};
}

/* A family's first `max` configs, its own best guesses in its own order;
 * a family that cannot list them offers none (the full search that may
 * follow records why). */
static int first_configs(const conv_tune_request *req, const conv_algorithm *algo,
                         conv_config *out, int max, tally *t) {
  const uint64_t started = uv_hrtime();
  int count = 0;
  conv_error ignored = {CONV_OK, ""};
  if (algo->configs(req->problem, req->env, out, max, &count, &ignored) != CONV_OK) count = 0;
  conv_tuner_phase_since(&t->phases, CONV_PHASE_LIST, started);
  return count;
}

/* A family's guesses in its list of configs: its first `head` (as the
 * fast policy times them) and those it marks as best guesses
 * (CONV_CONFIG_BEST_GUESS). */
static void add_guesses(predicted_set *set, const conv_algorithm *algo, const conv_config *list,
                        int count, int head) {
  for (int i = 0; i < count; i++)
    if (i < head || (list[i].flags & CONV_CONFIG_BEST_GUESS)) add(set, algo, &list[i]);
}

/* How many of a family's first configs a prediction times as its guesses:
 * cuDNN's first 3, which know the problem itself where the neighbours'
 * ranking knows only what ran on them, and catch the cuDNN configs a
 * neighbour predicted in turn never timed.  On the half suite's
 * tuner-written caches they changed nothing; on the models' layers they
 * put regnet_y_400mf's 1x1 stride-2 shortcuts, predicted from GEMM-won 1x1
 * stride-1 neighbours, within 10% (tools/bench/predict-notes.md, "On the
 * models' layers").  Other families: their marked guesses alone. */
static int guess_head(const conv_algorithm *algo) {
  return algo->id == CONV_ALGO_CUDNN ? MAX_CONFIGS_FAST : 0;
}

/* Whether `algo` has guesses for `problem`: cuDNN's first configs
 * always (guess_head), a family's marked ones where it marks some
 * (marks_best_guesses: listing a family that marks nothing costs a
 * prediction its list, cuBLASLt's heuristic queries for im2col_gemm). */
static bool has_guesses(const conv_algorithm *algo, const conv_problem *problem) {
  return guess_head(algo) > 0 ||
         (algo->marks_best_guesses != NULL && algo->marks_best_guesses(problem));
}

/* The guesses (add_guesses) of every family that takes the problem and
 * has some for it (has_guesses), but those whose list add_ranked read
 * (set->listed: their guesses came with it; cuDNN's list again would
 * build its graph and probe its engines twice).  The whole list is read:
 * a family's marked guesses may follow however many configs it ranks
 * (cuDNN's do). */
static void add_marked_guesses(const conv_tune_request *req, predicted_set *set, tally *t) {
  conv_config *configs = calloc(MAX_CONFIGS_EXHAUSTIVE, sizeof *configs);
  if (configs == NULL) return; /* no guesses: the neighbours' configs are still timed */
  int families;
  const conv_algorithm *const *algos = conv_registry(&families);
  for (int f = 0; f < families; f++) {
    const conv_algorithm *algo = algos[f];
    if (!has_guesses(algo, req->problem) || (set->listed & family_bit(algo->id)) ||
        !conv_algorithm_applicable(algo, req->problem, req->env))
      continue;
    const int count = first_configs(req, algo, configs, MAX_CONFIGS_EXHAUSTIVE, t);
    add_guesses(set, algo, configs, count, guess_head(algo));
    set->listed |= family_bit(algo->id);
  }
  free(configs);
}

/* Widened or split: every applicable family's best guesses, as the fast
 * policy times them, so that each family's own rules for this size get a
 * say. */
static void add_best_guesses(const conv_tune_request *req, predicted_set *set, tally *t) {
  int families;
  const conv_algorithm *const *algos = conv_registry(&families);
  for (int f = 0; f < families && f < PREDICT_WIDE_FAMILIES_MAX; f++) {
    /* cuDNN's are in already (add_marked_guesses or add_ranked). */
    if (algos[f]->id == CONV_ALGO_CUDNN) continue;
    if (!conv_algorithm_applicable(algos[f], req->problem, req->env)) continue;
    conv_config configs[MAX_CONFIGS_FAST];
    const int count = first_configs(req, algos[f], configs, MAX_CONFIGS_FAST, t);
    for (int i = 0; i < count; i++) add(set, algos[f], &configs[i]);
  }
}

/* The neighbours' family's configs that ran fastest on them
 * (conv_predict_configs_for), then its guesses (add_guesses); false, with
 * why[], where there are none. */
static bool add_ranked(const conv_tune_request *req, conv_cache *const *layers, int layer_count,
                       const conv_prediction *pr, predicted_set *set, char *why,
                       size_t why_size) {
  const conv_algorithm *algo = conv_registry_find(pr->algorithm_id);
  if (algo == NULL || !conv_algorithm_applicable(algo, req->problem, req->env)) {
    snprintf(why, why_size, "its neighbours' family (id %u) does not take it",
             (unsigned)pr->algorithm_id);
    return false;
  }
  conv_error perr = {CONV_OK, ""};
  conv_config *offered = calloc(MAX_CONFIGS_EXHAUSTIVE, sizeof *offered);
  int offered_count = 0, order[CONV_PREDICT_CONFIGS_MAX], ranked = 0;
  const bool ok = offered != NULL &&
                  algo->configs(req->problem, req->env, offered, MAX_CONFIGS_EXHAUSTIVE,
                                &offered_count, &perr) == CONV_OK &&
                  conv_predict_rank(layers, layer_count, req->key, pr, offered, offered_count,
                                    order, conv_predict_configs_for(algo->id), &ranked,
                                    &perr) == CONV_OK &&
                  ranked > 0;
  for (int i = 0; ok && i < ranked; i++) add(set, algo, &offered[order[i]]);
  if (ok) add_guesses(set, algo, offered, offered_count, guess_head(algo));
  if (ok) set->listed |= family_bit(algo->id);
  free(offered);
  if (!ok)
    snprintf(why, why_size, "%s offers no config to rank (%s)", algo->name,
             offered == NULL ? "out of memory" : perr.message);
  return ok;
}

/* Appends family `id` to families[0..*count) unless it is there. */
static void add_family(uint32_t *families, int *count, uint32_t id) {
  for (int j = 0; j < *count; j++)
    if (families[j] == id) return;
  families[(*count)++] = id;
}

/* A split prediction (CONV_PREDICT_SPLIT): each of the neighbours'
 * winning families' ranked configs, nearest neighbour's first, so that
 * the likeliest winner runs early and the abandonment rules cut the rest
 * short; then cuDNN's, ranked whichever families won (headed by its best
 * guesses).  Every family's best guesses follow (predict).  A family that
 * cannot rank is passed over: false only where none could. */
static bool add_split(const conv_tune_request *req, conv_cache *const *layers, int layer_count,
                      const conv_prediction *pr, predicted_set *set, char *why,
                      size_t why_size) {
  uint32_t families[CONV_PREDICT_NEIGHBOURS + 1];
  int count = 0;
  for (int i = 0; i < pr->neighbours; i++)
    add_family(families, &count, pr->neighbour[i].algorithm_id);
  add_family(families, &count, CONV_ALGO_CUDNN);
  bool any = false;
  char ignored[256];
  for (int j = 0; j < count; j++) {
    conv_prediction one = *pr;
    one.algorithm_id = families[j];
    any = add_ranked(req, layers, layer_count, &one, set, ignored, sizeof ignored) || any;
  }
  if (!any) snprintf(why, why_size, "none of its neighbours' families offers a config to rank");
  return any;
}

/* The caches a prediction reads, in order: the user's first (its tuning
 * of a problem counts over a shipped one), then the system caches in
 * lookup order.  Returns how many. */
static int cache_layers(const conv_tune_request *req, conv_cache *layers[]) {
  layers[0] = req->cache;
  for (size_t i = 0; i < req->system_count; i++) layers[1 + i] = req->system_caches[i];
  return 1 + (int)req->system_count;
}

/* Fills *set, or says in why[] why there is nothing to predict (the
 * tuning then searches everything).  A cache it cannot read is no
 * prediction, not a failed tuning.  A widened set's why[] is the rule. */
static bool predict(const conv_tune_request *req, predicted_set *set, tally *t, char *why,
                    size_t why_size) {
  const uint64_t started = uv_hrtime();
  conv_prediction pr;
  conv_error perr = {CONV_OK, ""};
  memset(set, 0, sizeof *set);
  conv_cache *layers[1 + CONV_SYSTEM_CACHES_MAX];
  const int layer_count = cache_layers(req, layers);
  bool ok = true;
  if (conv_predict_neighbours(layers, layer_count, req->key, req->problem, &pr, &perr) != CONV_OK) {
    snprintf(why, why_size, "reading the cache: %s", perr.message);
    ok = false;
  }
  if (ok) set->scope = conv_predict_scope_of(req->problem, &pr, why, why_size);
  if (ok && set->scope == CONV_PREDICT_SPLIT) {
    ok = add_split(req, layers, layer_count, &pr, set, why, why_size);
  } else if (ok) {
    ok = set->scope != CONV_PREDICT_ALL &&
         add_ranked(req, layers, layer_count, &pr, set, why, why_size);
  }
  conv_tuner_phase_since(&t->phases, CONV_PHASE_PREDICT, started);
  if (!ok) {
    set->count = 0;
    set->scope = CONV_PREDICT_ALL;
    return false;
  }
  add_marked_guesses(req, set, t);
  if (set->scope == CONV_PREDICT_WIDE || set->scope == CONV_PREDICT_SPLIT)
    add_best_guesses(req, set, t);
  return true;
}

conv_status conv_tuner_predicted(bench *b, tally *t, predicted_set *set, conv_error *err) {
  const conv_tune_request *req = b->req;
  char why[256] = "";
  if (!predict(req, set, t, why, sizeof why)) {
    conv_log(req->log, CONV_LOG_INFO, "%s: no prediction (%s); timing every candidate",
             req->key->problem, why);
    return CONV_OK;
  }
  if (set->scope == CONV_PREDICT_WIDE)
    conv_log(req->log, CONV_LOG_INFO,
             "%s: prediction widened (%s): %d configs, every applicable family's best guesses "
             "with its neighbours' picks",
             req->key->problem, why, set->count);
  if (set->scope == CONV_PREDICT_SPLIT)
    conv_log(req->log, CONV_LOG_INFO,
             "%s: prediction split (%s): %d configs, each of their families' and cuDNN's ranked "
             "on them, with every applicable family's best guesses",
             req->key->problem, why, set->count);
  /* One heuristic pick marked per family, by family id. */
  bool picks[PREDICT_WIDE_FAMILIES_MAX + 1] = {false};
  conv_status st = CONV_OK;
  for (int i = 0; i < set->count && st == CONV_OK; i++) {
    if (atomic_load(req->interrupt))
      return conv_error_set(err, CONV_INTERRUPTED, "tuning interrupted; measured trials are kept");
    const predicted_config *c = &set->configs[i];
    const uint32_t slot = c->algo->id < PREDICT_WIDE_FAMILIES_MAX ? c->algo->id
                                                                  : PREDICT_WIDE_FAMILIES_MAX;
    st = conv_tuner_time_config(b, c->algo, &c->config, &picks[slot], t, err);
  }
  t->predicted = set->count;
  t->widened = set->scope == CONV_PREDICT_WIDE;
  t->split = set->scope == CONV_PREDICT_SPLIT;
  return st;
}

void conv_tuner_known_slow(const conv_tune_request *req, conv_known_slow *out,
                           conv_tune_phases *phases) {
  const uint64_t started = uv_hrtime();
  conv_cache *layers[1 + CONV_SYSTEM_CACHES_MAX];
  const int layer_count = cache_layers(req, layers);
  conv_error ignored = {CONV_OK, ""};
  if (conv_predict_known_slow(layers, layer_count, req->key, req->problem, out, &ignored) !=
      CONV_OK)
    out->count = 0;
  conv_tuner_phase_since(phases, CONV_PHASE_PREDICT, started);
}
