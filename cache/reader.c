/*
 * reader.c -- the public cache reader (convtune.h, "caches"): the internal
 * cache (cache.h) opened read-only, its rows passed on as conv_cache_entry.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cache/cache.h"

/* A trial's config fits an entry whole. */
_Static_assert(CONV_CACHE_CONFIG_MAX >= CONV_CONFIG_MAX_VALUES, "conv_cache_entry's config_values");

struct conv_cache_reader {
  conv_cache *cache;
};

/* Copies err's message to the caller's buffer; returns its status. */
static conv_status reader_fail(const conv_error *err, char *message, size_t message_size) {
  if (message != NULL && message_size > 0) snprintf(message, message_size, "%s", err->message);
  return err->status;
}

static void reader_ok(char *message, size_t message_size) {
  if (message != NULL && message_size > 0) message[0] = '\0';
}

conv_status conv_cache_reader_open(const char *path, conv_cache_reader **reader, char *message,
                                   size_t message_size) {
  conv_error err = {CONV_OK, ""};
  if (path == NULL || reader == NULL) {
    conv_error_set(&err, CONV_INVALID_ARGUMENT, "cache reader: NULL path or output");
    return reader_fail(&err, message, message_size);
  }
  conv_cache_reader *r = malloc(sizeof *r);
  if (r == NULL) {
    conv_error_set(&err, CONV_OUT_OF_MEMORY, "cache %s: out of memory", path);
    return reader_fail(&err, message, message_size);
  }
  if (conv_cache_open(path, true, &r->cache, &err) != CONV_OK) {
    free(r);
    return reader_fail(&err, message, message_size);
  }
  *reader = r;
  reader_ok(message, message_size);
  return CONV_OK;
}

conv_status conv_cache_default_path(char *path, size_t size, int create_dirs, char *message,
                                    size_t message_size) {
  conv_error err = {CONV_OK, ""};
  char found[4096];
  if (path == NULL || size == 0) {
    conv_error_set(&err, CONV_INVALID_ARGUMENT, "cache default path: NULL or empty buffer");
    return reader_fail(&err, message, message_size);
  }
  if (conv_default_cache_path(found, sizeof found, create_dirs != 0, &err) != CONV_OK)
    return reader_fail(&err, message, message_size);
  if (strlen(found) >= size) {
    conv_error_set(&err, CONV_CACHE_ERROR, "cache path too long (%zu bytes) for the buffer",
                   strlen(found));
    return reader_fail(&err, message, message_size);
  }
  memcpy(path, found, strlen(found) + 1);
  reader_ok(message, message_size);
  return CONV_OK;
}

void conv_cache_reader_close(conv_cache_reader *reader) {
  if (reader == NULL) return;
  conv_cache_close(reader->cache);
  free(reader);
}

/* The caller's callback and what it is given, for the internal walk. */
typedef struct entry_walk {
  conv_cache_entry_fn fn;
  void *user;
} entry_walk;

static void entry_from_row(const conv_cache_row *row, conv_cache_entry *e) {
  const conv_trial *t = row->trial;
  memset(e, 0, sizeof *e);
  e->struct_size = sizeof *e;
  e->problem = row->problem, e->device = row->device;
  e->versions = row->versions, e->tuned_at = row->tuned_at;
  e->algorithm = t->algorithm, e->algorithm_id = (int)t->algorithm_id;
  e->config = t->config_text;
  e->config_count = t->config.count;
  for (int i = 0; i < t->config.count; i++)
    e->config_values[i] = t->config.values[i];
  e->status = t->status, e->reason = t->reason;
  e->time_ms = t->time_ms, e->rel_error = t->rel_error;
  e->workspace_bytes = t->workspace_bytes;
  e->heuristic_pick = t->heuristic_pick, e->winner = t->winner;
  e->deterministic = t->deterministic;
}

static int pass_entry(const conv_cache_row *row, void *user) {
  const entry_walk *walk = user;
  conv_cache_entry e;
  entry_from_row(row, &e);
  return walk->fn(&e, walk->user);
}

conv_status conv_cache_reader_winners(conv_cache_reader *reader, conv_cache_entry_fn fn,
                                      void *user, char *message, size_t message_size) {
  conv_error err = {CONV_OK, ""};
  if (reader == NULL || fn == NULL) {
    conv_error_set(&err, CONV_INVALID_ARGUMENT, "cache reader: NULL reader or callback");
    return reader_fail(&err, message, message_size);
  }
  entry_walk walk = {fn, user};
  if (conv_cache_list_winners(reader->cache, pass_entry, &walk, &err) != CONV_OK)
    return reader_fail(&err, message, message_size);
  reader_ok(message, message_size);
  return CONV_OK;
}

conv_status conv_cache_reader_trials(conv_cache_reader *reader, const char *problem,
                                     conv_cache_entry_fn fn, void *user, char *message,
                                     size_t message_size) {
  conv_error err = {CONV_OK, ""};
  if (reader == NULL || problem == NULL || fn == NULL) {
    conv_error_set(&err, CONV_INVALID_ARGUMENT, "cache reader: NULL reader, problem or callback");
    return reader_fail(&err, message, message_size);
  }
  entry_walk walk = {fn, user};
  if (conv_cache_list_trials(reader->cache, problem, pass_entry, &walk, &err) != CONV_OK)
    return reader_fail(&err, message, message_size);
  reader_ok(message, message_size);
  return CONV_OK;
}

typedef struct pending_walk {
  conv_cache_pending_entry_fn fn;
  void *user;
} pending_walk;

static int pass_pending(const conv_cache_pending_row *row, void *user) {
  const pending_walk *walk = user;
  conv_cache_pending_entry e;
  memset(&e, 0, sizeof e);
  e.struct_size = sizeof e;
  e.problem = row->problem, e.device = row->device, e.versions = row->versions;
  e.reason = row->reason, e.recorded_at = row->recorded_at;
  return walk->fn(&e, walk->user);
}

conv_status conv_cache_reader_pending(conv_cache_reader *reader, conv_cache_pending_entry_fn fn,
                                      void *user, char *message, size_t message_size) {
  conv_error err = {CONV_OK, ""};
  if (reader == NULL || fn == NULL) {
    conv_error_set(&err, CONV_INVALID_ARGUMENT, "cache reader: NULL reader or callback");
    return reader_fail(&err, message, message_size);
  }
  pending_walk walk = {fn, user};
  if (conv_cache_list_pending(reader->cache, pass_pending, &walk, &err) != CONV_OK)
    return reader_fail(&err, message, message_size);
  reader_ok(message, message_size);
  return CONV_OK;
}
