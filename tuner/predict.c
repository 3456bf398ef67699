/*
 * predict.c -- which configs a new problem's tuning times under
 * CONV_POLICY_PREDICT, from the caches' own tunings of its nearest
 * neighbours (tuner.h): the user's, then a shipped system cache.  The rule
 * is the one tools/bench/predict_loo.py measures offline
 * (predict-notes.md): the 3 nearest tuned problems of the
 * same kind; where their winners are of one family, that family's configs
 * ranked by how they ran on the neighbours; where they are not, each
 * family's so ranked (the tuner splits the prediction: widen.c); where
 * there are fewer than 3, no prediction (the tuner searches everything,
 * but for the configs nearby problems found far too slow:
 * conv_predict_known_slow).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tuner/tuner.h"

/* A problem's place: the fields that must match, and log2 sizes. */
typedef struct problem_point {
  int op, direction, dtype, layout, filter_layout, math, deterministic;
  bool epilogue;
  double features[11];
} problem_point;

static problem_point point_of(const conv_problem *p) {
  const bool depthwise = p->groups == p->c && p->groups > 1;
  const double sizes[] = {(double)p->n, (double)p->c,        (double)p->h,
                          (double)p->w, (double)p->k,        (double)p->r,
                          (double)p->s, (double)p->stride_h, (double)p->dil_h,
                          (double)(p->c / p->groups)};
  problem_point pt = {(int)p->op,   (int)p->direction,    (int)p->dtype,
                      (int)p->layout, (int)p->filter_layout, (int)p->math,
                      p->deterministic ? 1 : 0, p->epilogue != CONV_EPILOGUE_NONE, {0}};
  for (int i = 0; i < 10; i++) pt.features[i] = log2(sizes[i]);
  /* Stride counts double: a strided layer's winner seldom suits its
   * unstrided twin (leave-one-out over four torchvision models' layers:
   * 98% of predictions within 10% of the exhaustive winner, against 95%
   * at single weight; tools/bench/predict-notes.md). */
  pt.features[7] *= 2.0;
  pt.features[10] = depthwise ? 3.0 : 0.0; /* a depthwise neighbour is far from a dense one */
  return pt;
}

/* A neighbour of another dtype says nothing: its graphs, engines and
 * families are the other type's. */
static bool same_kind(const problem_point *a, const problem_point *b) {
  return a->op == b->op && a->direction == b->direction && a->dtype == b->dtype &&
         a->layout == b->layout &&
         a->filter_layout == b->filter_layout && a->math == b->math &&
         a->deterministic == b->deterministic && a->epilogue == b->epilogue;
}

static double distance(const problem_point *a, const problem_point *b) {
  double d = 0;
  for (int i = 0; i < 11; i++) d += (a->features[i] - b->features[i]) * (a->features[i] - b->features[i]);
  return d;
}

double conv_predict_distance(const conv_problem *a, const conv_problem *b) {
  const problem_point pa = point_of(a), pb = point_of(b);
  return distance(&pa, &pb);
}

typedef struct neighbour_search {
  const conv_cache_key *key;
  problem_point target;
  conv_prediction *out;
  double distances[CONV_PREDICT_NEIGHBOURS];
  int layer; /* of the winners being listed */
} neighbour_search;

static bool already_found(const conv_prediction *out, const char *problem) {
  for (int i = 0; i < out->neighbours; i++)
    if (strcmp(out->neighbour[i].problem, problem) == 0) return true;
  return false;
}

/* The point of a winner row that may be a neighbour of `target`: of this
 * device and versions, another problem, valid and timed, of the target's
 * kind, with a key this version parses; false otherwise. */
static bool neighbour_point(const conv_cache_row *row, const conv_cache_key *key,
                            const problem_point *target, problem_point *pt) {
  if (strcmp(row->device, key->device) != 0 || strcmp(row->versions, key->versions) != 0 ||
      strcmp(row->problem, key->problem) == 0 || row->trial->status != CONV_OK ||
      !(row->trial->time_ms > 0))
    return false;
  conv_problem p;
  if (conv_problem_from_key(row->problem, &p) != CONV_OK) return false; /* another version's key */
  *pt = point_of(&p);
  return same_kind(pt, target);
}

/* Makes room for an entry at distance d among the *count kept in
 * entries[] (of `size` bytes each) and distances[], nearest first, at most
 * `capacity`: returns its index, the entries from there on moved one down
 * (the last dropped when full; a tie keeps the first listed), or -1 where
 * it falls past the last. */
static int make_room(void *entries, size_t size, double *distances, int *count, int capacity,
                     double d) {
  int at = *count;
  while (at > 0 && d < distances[at - 1]) at--;
  if (at >= capacity) return -1;
  const int moved = (*count < capacity ? *count : capacity - 1) - at;
  char *base = entries;
  memmove(base + (size_t)(at + 1) * size, base + (size_t)at * size, (size_t)moved * size);
  memmove(&distances[at + 1], &distances[at], (size_t)moved * sizeof distances[0]);
  distances[at] = d;
  if (*count < capacity) (*count)++;
  return at;
}

/* Keeps the CONV_PREDICT_NEIGHBOURS nearest winners of this device and
 * versions, nearest first (ties: the first listed, by problem key). */
static int consider_winner(const conv_cache_row *row, void *user) {
  neighbour_search *s = user;
  problem_point pt;
  if (already_found(s->out, row->problem) || !neighbour_point(row, s->key, &s->target, &pt))
    return 0;
  conv_prediction *out = s->out;
  const int at = make_room(out->neighbour, sizeof out->neighbour[0], s->distances, &out->neighbours,
                           CONV_PREDICT_NEIGHBOURS, distance(&pt, &s->target));
  if (at < 0) return 0;
  conv_prediction_neighbour *n = &out->neighbour[at];
  snprintf(n->problem, sizeof n->problem, "%s", row->problem);
  n->layer = s->layer;
  n->algorithm_id = row->trial->algorithm_id;
  n->config = row->trial->config;
  n->winner_ms = row->trial->time_ms;
  return 0;
}

/* The searches' common arguments: the user's cache first, NULL layers
 * after it allowed. */
static bool search_args_ok(conv_cache *const *layers, int layer_count, const conv_cache_key *key,
                           const conv_problem *problem, const void *out) {
  return layers != NULL && layer_count >= 1 && layers[0] != NULL && key != NULL &&
         problem != NULL && out != NULL;
}

/* Calls fn for every winner of layers[0..layer_count) in turn (NULL
 * layers skipped), *layer naming the one being listed. */
static conv_status scan_winners(conv_cache *const *layers, int layer_count, int *layer,
                                conv_cache_row_fn fn, void *user, conv_error *err) {
  conv_status st = CONV_OK;
  for (*layer = 0; *layer < layer_count && st == CONV_OK; (*layer)++)
    if (layers[*layer] != NULL) st = conv_cache_list_winners(layers[*layer], fn, user, err);
  return st;
}

conv_status conv_predict_neighbours(conv_cache *const *layers, int layer_count,
                                    const conv_cache_key *key, const conv_problem *problem,
                                    conv_prediction *out, conv_error *err) {
  if (!search_args_ok(layers, layer_count, key, problem, out))
    return conv_error_set(err, CONV_INVALID_ARGUMENT, "predict: NULL argument");
  memset(out, 0, sizeof *out);
  neighbour_search s = {key, point_of(problem), out, {0}, 0};
  conv_status st = scan_winners(layers, layer_count, &s.layer, consider_winner, &s, err);
  if (st != CONV_OK) return st;
  if (out->neighbours < CONV_PREDICT_NEIGHBOURS) {
    snprintf(out->why, sizeof out->why, "%d tuned neighbours of its kind (%d needed)",
             out->neighbours, CONV_PREDICT_NEIGHBOURS);
    return CONV_OK;
  }
  out->algorithm_id = out->neighbour[0].algorithm_id;
  for (int i = 1; i < out->neighbours; i++)
    if (out->neighbour[i].algorithm_id != out->algorithm_id) {
      snprintf(out->why, sizeof out->why, "its %d nearest tuned neighbours' winners differ in family",
               out->neighbours);
      return CONV_OK;
    }
  out->certain = true;
  return CONV_OK;
}

/* ---------------------------------------------------------------- ranking */

typedef struct trial_times {
  uint32_t algorithm_id;
  const conv_cache_key *key; /* device and versions to match */
  const conv_config *offered;
  int count;
  double *ms; /* per offered config: its time on this neighbour, 0 if none */
} trial_times;

static int note_time(const conv_cache_row *row, void *user) {
  trial_times *t = user;
  if (row->trial->algorithm_id != t->algorithm_id || row->trial->status != CONV_OK ||
      !(row->trial->time_ms > 0) || strcmp(row->device, t->key->device) != 0 ||
      strcmp(row->versions, t->key->versions) != 0)
    return 0;
  for (int i = 0; i < t->count; i++)
    if (t->ms[i] == 0 && conv_config_equal(&t->offered[i], &row->trial->config))
      t->ms[i] = row->trial->time_ms;
  return 0;
}

typedef struct scored_config {
  double score;
  int index;
} scored_config;

static int by_score(const void *a, const void *b) {
  const scored_config *x = a, *y = b;
  if (x->score != y->score) return x->score < y->score ? -1 : 1;
  return x->index - y->index; /* stable: the family's own order breaks ties */
}

conv_status conv_predict_rank(conv_cache *const *layers, int layer_count, const conv_cache_key *key,
                              const conv_prediction *prediction, const conv_config *offered,
                              int offered_count, int *order, int max, int *count,
                              conv_error *err) {
  if (layers == NULL || layer_count < 1 || key == NULL || prediction == NULL || count == NULL ||
      (offered_count > 0 && (offered == NULL || order == NULL)) || offered_count < 0)
    return conv_error_set(err, CONV_INVALID_ARGUMENT, "predict: bad rank arguments");
  for (int n = 0; n < prediction->neighbours; n++) {
    const int layer = prediction->neighbour[n].layer;
    if (layer < 0 || layer >= layer_count || layers[layer] == NULL)
      return conv_error_set(err, CONV_INVALID_ARGUMENT, "predict: a neighbour of no layer");
  }
  *count = 0;
  if (offered_count == 0) return CONV_OK;
  double *ms = calloc((size_t)offered_count, sizeof *ms);
  scored_config *scored = calloc((size_t)offered_count, sizeof *scored);
  conv_status st = CONV_OK;
  if (ms == NULL || scored == NULL) st = conv_error_set(err, CONV_OUT_OF_MEMORY, "predict: ranking");
  for (int i = 0; i < offered_count && st == CONV_OK; i++) scored[i].index = i;
  for (int n = 0; n < prediction->neighbours && st == CONV_OK; n++) {
    const conv_prediction_neighbour *nb = &prediction->neighbour[n];
    memset(ms, 0, (size_t)offered_count * sizeof *ms);
    trial_times t = {prediction->algorithm_id, key, offered, offered_count, ms};
    st = conv_cache_list_trials(layers[nb->layer], nb->problem, note_time, &t, err);
    /* Each config's slowdown against the neighbour's winner, in log; one
     * it did not time (or could not run) counts as twice as slow. */
    for (int i = 0; i < offered_count && st == CONV_OK; i++)
      scored[i].score += ms[i] > 0 ? log(ms[i] / nb->winner_ms) : log(CONV_PREDICT_MISSING_SLOWDOWN);
  }
  if (st == CONV_OK) {
    qsort(scored, (size_t)offered_count, sizeof *scored, by_score);
    for (int i = 0; i < offered_count && i < max; i++) order[(*count)++] = scored[i].index;
  }
  free(ms);
  free(scored);
  return st;
}

/* ------------------------------------------------------------ known slow */

typedef struct slow_source {
  char problem[CONV_PROBLEM_KEY_MAX];
  int layer;
  double winner_ms;
} slow_source;

/* The CONV_KNOWN_SLOW_NEIGHBOURS nearest winners of the target's kind and
 * depthwise-ness, nearest first, kept as consider_winner keeps its 3. */
typedef struct slow_sources {
  const conv_cache_key *key;
  problem_point target;
  slow_source found[CONV_KNOWN_SLOW_NEIGHBOURS];
  double distances[CONV_KNOWN_SLOW_NEIGHBOURS];
  int count, layer;
} slow_sources;

static bool listed_source(const slow_sources *s, const char *problem) {
  for (int i = 0; i < s->count; i++)
    if (strcmp(s->found[i].problem, problem) == 0) return true;
  return false;
}

static int consider_source(const conv_cache_row *row, void *user) {
  slow_sources *s = user;
  problem_point pt;
  if (listed_source(s, row->problem) || !neighbour_point(row, s->key, &s->target, &pt) ||
      pt.features[10] != s->target.features[10]) /* depthwise against dense */
    return 0;
  const int at = make_room(s->found, sizeof s->found[0], s->distances, &s->count,
                           CONV_KNOWN_SLOW_NEIGHBOURS, distance(&pt, &s->target));
  if (at < 0) return 0;
  slow_source *f = &s->found[at];
  snprintf(f->problem, sizeof f->problem, "%s", row->problem);
  f->layer = s->layer;
  f->winner_ms = row->trial->time_ms;
  return 0;
}

typedef struct slow_search {
  const conv_cache_key *key; /* device and versions to match */
  double winner_ms;          /* the source problem's          */
  conv_known_slow *out;
} slow_search;

bool conv_known_slow_has(const conv_known_slow *slow, uint32_t algorithm_id,
                         const conv_config *config) {
  for (int i = 0; slow != NULL && i < slow->count; i++)
    if (slow->algorithm_id[i] == algorithm_id && conv_config_equal(&slow->config[i], config))
      return true;
  return false;
}

static int note_slow(const conv_cache_row *row, void *user) {
  slow_search *s = user;
  const conv_trial *t = row->trial;
  if (t->status != CONV_OK || !(t->time_ms >= CONV_KNOWN_SLOW_MIN_MS) ||
      !(t->time_ms > CONV_KNOWN_SLOW_FACTOR * s->winner_ms) ||
      strcmp(row->device, s->key->device) != 0 || strcmp(row->versions, s->key->versions) != 0 ||
      conv_known_slow_has(s->out, t->algorithm_id, &t->config))
    return 0;
  conv_known_slow *out = s->out;
  if (out->count < CONV_KNOWN_SLOW_MAX) {
    out->algorithm_id[out->count] = t->algorithm_id;
    out->config[out->count++] = t->config;
  }
  return 0;
}

conv_status conv_predict_known_slow(conv_cache *const *layers, int layer_count,
                                    const conv_cache_key *key, const conv_problem *problem,
                                    conv_known_slow *out, conv_error *err) {
  if (!search_args_ok(layers, layer_count, key, problem, out))
    return conv_error_set(err, CONV_INVALID_ARGUMENT, "predict: NULL argument");
  out->count = 0;
  slow_sources *sources = calloc(1, sizeof *sources);
  if (sources == NULL) return conv_error_set(err, CONV_OUT_OF_MEMORY, "predict: known slow");
  sources->key = key;
  sources->target = point_of(problem);
  conv_status st =
      scan_winners(layers, layer_count, &sources->layer, consider_source, sources, err);
  for (int i = 0; i < sources->count && st == CONV_OK; i++) {
    const slow_source *f = &sources->found[i];
    slow_search s = {key, f->winner_ms, out};
    st = conv_cache_list_trials(layers[f->layer], f->problem, note_slow, &s, err);
  }
  free(sources);
  return st;
}
