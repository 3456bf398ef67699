/*
 * merge.c -- conv_cache_merge (convtune.h, "caches"): copying finished
 * tunings from one cache file into another, as `convtune merge`, `export`
 * and `import` do.
 */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cache/cache.h"

/* A finished tuning of the source: its key and its winner's time. */
typedef struct tuning {
  char *problem, *device, *versions;
  double winner_ms;
} tuning;

typedef struct tuning_list {
  tuning *items;
  size_t count, cap;
  const char *device; /* only this fingerprint; NULL: all */
  bool out_of_memory;
} tuning_list;

/* The trials of one tuning, with when each was measured. */
typedef struct trial_list {
  const tuning *of;
  conv_trial *trials;
  char **tuned_at;
  size_t count, cap;
  bool out_of_memory;
} trial_list;

static char *dup_string(const char *s) {
  size_t n = strlen(s) + 1;
  char *d = malloc(n);
  if (d != NULL) memcpy(d, s, n);
  return d;
}

static int collect_tuning(const conv_cache_row *row, void *user) {
  tuning_list *l = user;
  if (l->device != NULL && strcmp(row->device, l->device) != 0) return 0;
  if (l->count == l->cap) {
    size_t cap = l->cap ? 2 * l->cap : 32;
    tuning *grown = realloc(l->items, cap * sizeof *grown);
    if (grown == NULL) goto oom;
    l->items = grown, l->cap = cap;
  }
  tuning *t = &l->items[l->count];
  t->problem = dup_string(row->problem);
  t->device = dup_string(row->device);
  t->versions = dup_string(row->versions);
  t->winner_ms = row->trial->time_ms >= 0 ? row->trial->time_ms : HUGE_VAL;
  if (t->problem && t->device && t->versions) {
    l->count++;
    return 0;
  }
  free(t->problem), free(t->device), free(t->versions);
oom:
  l->out_of_memory = true;
  return 1;
}

static void tuning_list_free(tuning_list *l) {
  for (size_t i = 0; i < l->count; i++)
    free(l->items[i].problem), free(l->items[i].device), free(l->items[i].versions);
  free(l->items);
}

static int collect_trial(const conv_cache_row *row, void *user) {
  trial_list *l = user;
  if (strcmp(row->device, l->of->device) != 0 || strcmp(row->versions, l->of->versions) != 0)
    return 0;
  if (l->count == l->cap) {
    size_t cap = l->cap ? 2 * l->cap : 64;
    conv_trial *trials = realloc(l->trials, cap * sizeof *trials);
    if (trials != NULL) l->trials = trials;
    char **tuned_at = trials ? realloc(l->tuned_at, cap * sizeof *tuned_at) : NULL;
    if (tuned_at == NULL) goto oom;
    l->tuned_at = tuned_at, l->cap = cap;
  }
  if ((l->tuned_at[l->count] = dup_string(row->tuned_at)) == NULL) goto oom;
  l->trials[l->count++] = *row->trial;
  return 0;
oom:
  l->out_of_memory = true;
  return 1;
}

static void trial_list_free(trial_list *l) {
  for (size_t i = 0; i < l->count; i++) free(l->tuned_at[i]);
  free(l->tuned_at);
  free(l->trials);
}

/* Copies one tuning unless `into` holds a faster one of the same key. */
static conv_status merge_tuning(conv_cache *from, conv_cache *into, const tuning *t,
                                size_t counts[3], conv_error *err) {
  const conv_cache_key key = {t->problem, t->device, t->versions};
  conv_trial theirs;
  bool found = false;
  conv_status s = conv_cache_lookup_winner(into, &key, &theirs, &found, err);
  if (s != CONV_OK) return s;
  if (found && theirs.time_ms >= 0 && !(t->winner_ms < theirs.time_ms)) {
    counts[2]++;
    return CONV_OK;
  }
  trial_list l = {t, NULL, NULL, 0, 0, false};
  s = conv_cache_list_trials(from, t->problem, collect_trial, &l, err);
  if (s == CONV_OK && l.out_of_memory)
    s = conv_error_set(err, CONV_OUT_OF_MEMORY, "merge: out of memory");
  if (s == CONV_OK)
    s = conv_cache_replace_tuning(into, &key, l.trials, (const char *const *)l.tuned_at, l.count,
                                  err);
  /* A tuning its budget cut short stays marked as such in `into`, so that
   * a later run there finishes it rather than taking it as exhaustive. */
  bool incomplete = false;
  conv_pending_reason reason = CONV_PENDING_UNTUNED;
  if (s == CONV_OK) s = conv_cache_find_pending(from, &key, &incomplete, &reason, err);
  if (s == CONV_OK && incomplete && reason == CONV_PENDING_INCOMPLETE)
    s = conv_cache_record_pending(into, &key, CONV_PENDING_INCOMPLETE, err);
  if (s == CONV_OK) counts[found ? 1 : 0]++;
  trial_list_free(&l);
  return s;
}

/* The same file under two names (into may not exist yet). */
static bool same_file(const char *a, const char *b) {
  char ra[PATH_MAX], rb[PATH_MAX];
  return realpath(a, ra) != NULL && realpath(b, rb) != NULL && strcmp(ra, rb) == 0;
}

static conv_status merge(const char *from_path, const char *into_path, const char *device,
                         size_t counts[3], conv_error *err) {
  if (from_path == NULL || into_path == NULL)
    return conv_error_set(err, CONV_INVALID_ARGUMENT, "cache merge: NULL path");
  if (same_file(from_path, into_path))
    return conv_error_set(err, CONV_INVALID_ARGUMENT, "cache merge: %s is the file merged into",
                          from_path);
  conv_cache *from = NULL, *into = NULL;
  tuning_list l = {NULL, 0, 0, device, false};
  conv_status s = conv_cache_open(from_path, true, &from, err);
  if (s == CONV_OK) s = conv_cache_list_winners(from, collect_tuning, &l, err);
  if (s == CONV_OK && l.out_of_memory)
    s = conv_error_set(err, CONV_OUT_OF_MEMORY, "merge: out of memory");
  if (s == CONV_OK) s = conv_cache_open(into_path, false, &into, err);
  for (size_t i = 0; s == CONV_OK && i < l.count; i++)
    s = merge_tuning(from, into, &l.items[i], counts, err);
  tuning_list_free(&l);
  conv_cache_close(into);
  conv_cache_close(from);
  return s;
}

conv_status conv_cache_merge(const char *from, const char *into, const char *device,
                             size_t *added, size_t *replaced, size_t *kept, char *message,
                             size_t message_size) {
  conv_error err = {CONV_OK, ""};
  size_t counts[3] = {0, 0, 0};
  conv_status s = merge(from, into, device, counts, &err);
  if (s == CONV_OK) {
    if (added) *added = counts[0];
    if (replaced) *replaced = counts[1];
    if (kept) *kept = counts[2];
  }
  if (message != NULL && message_size > 0)
    snprintf(message, message_size, "%s", s == CONV_OK ? "" : err.message);
  return s;
}
