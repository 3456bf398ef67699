/*
 * trials_read.c -- reading trials and winners back from the cache
 * (cache.h).  The file is untrusted input: every value is range-checked
 * as it is decoded.
 */
#include "cache/cache.h"
#include "cache/db.h"

#include <stdint.h>
#include <string.h>

#include <sqlite3.h>

/* ---------------------------------------------------------------- reads */

#define ROW_COLUMNS                                                                              \
  "id, problem, device, versions, algorithm_id, algorithm, config, config_text, status,"        \
  " reason, time_ms, rel_error, workspace_bytes, heuristic_pick, winner, tuned_at"
/* "SELECT <the row's columns> <tail>": a version-1 file has no
 * deterministic column, so NULL (unknown) stands in for it. */
#define SELECT_ROWS(c, tail)                                                                     \
  ((c)->schema_version >= 2 ? "SELECT " ROW_COLUMNS ", deterministic " tail                       \
                            : "SELECT " ROW_COLUMNS ", NULL " tail)
enum {
  COL_ID, COL_PROBLEM, COL_DEVICE, COL_VERSIONS, COL_ALGORITHM_ID, COL_ALGORITHM, COL_CONFIG,
  COL_CONFIG_TEXT, COL_STATUS, COL_REASON, COL_TIME_MS, COL_REL_ERROR, COL_WORKSPACE,
  COL_HEURISTIC, COL_WINNER, COL_TUNED_AT, COL_DETERMINISTIC
};

static bool is_number_or_null(int type) {
  return type == SQLITE_NULL || type == SQLITE_INTEGER || type == SQLITE_FLOAT;
}

/* Decodes the current row into *t, checking every value (the file is
 * untrusted).  Column types are read before any value: a conversion makes
 * sqlite3_column_type undefined. */
static conv_status decode_trial(const conv_cache *c, sqlite3_stmt *st, conv_trial *t,
                                conv_error *err) {
  int type_algorithm_id = sqlite3_column_type(st, COL_ALGORITHM_ID);
  int type_config = sqlite3_column_type(st, COL_CONFIG);
  int type_status = sqlite3_column_type(st, COL_STATUS);
  int type_workspace = sqlite3_column_type(st, COL_WORKSPACE);
  int type_time = sqlite3_column_type(st, COL_TIME_MS);
  int type_error = sqlite3_column_type(st, COL_REL_ERROR);
  int type_deterministic = sqlite3_column_type(st, COL_DETERMINISTIC);
  long long id = (long long)sqlite3_column_int64(st, COL_ID);
  memset(t, 0, sizeof *t);

  sqlite3_int64 algorithm_id = sqlite3_column_int64(st, COL_ALGORITHM_ID);
  if (type_algorithm_id != SQLITE_INTEGER || algorithm_id <= 0 || algorithm_id > UINT32_MAX)
    return conv_error_set(err, CONV_CACHE_ERROR, "cache %s: row %lld: corrupt algorithm id",
                          c->path, id);
  t->algorithm_id = (uint32_t)algorithm_id;

  const char *config = NULL;
  if (type_config == SQLITE_TEXT) config = (const char *)sqlite3_column_text(st, COL_CONFIG);
  if (config == NULL || strlen(config) != (size_t)sqlite3_column_bytes(st, COL_CONFIG) ||
      conv_config_parse(config, &t->config) != CONV_OK)
    return conv_error_set(err, CONV_CACHE_ERROR, "cache %s: row %lld: corrupt config \"%.64s\"",
                          c->path, id, config ? config : "(not text)");

  sqlite3_int64 status = sqlite3_column_int64(st, COL_STATUS);
  if (type_status != SQLITE_INTEGER || status < 0 || status >= CONV_STATUS_COUNT_)
    return conv_error_set(err, CONV_CACHE_ERROR, "cache %s: row %lld: corrupt status", c->path,
                          id);
  t->status = (conv_status)status;

  sqlite3_int64 workspace = sqlite3_column_int64(st, COL_WORKSPACE);
  bool workspace_ok = type_workspace == SQLITE_INTEGER && workspace >= 0;
#if SIZE_MAX < INT64_MAX
  workspace_ok = workspace_ok && (uint64_t)workspace <= SIZE_MAX;
#endif
  if (!workspace_ok)
    return conv_error_set(err, CONV_CACHE_ERROR, "cache %s: row %lld: corrupt workspace size",
                          c->path, id);
  t->workspace_bytes = (size_t)workspace;

  if (!is_number_or_null(type_time) || !is_number_or_null(type_error))
    return conv_error_set(err, CONV_CACHE_ERROR, "cache %s: row %lld: corrupt time or error",
                          c->path, id);
  t->time_ms = type_time == SQLITE_NULL ? -1.0 : sqlite3_column_double(st, COL_TIME_MS);
  t->rel_error = type_error == SQLITE_NULL ? -1.0 : sqlite3_column_double(st, COL_REL_ERROR);

  cache_copy_column_text(t->algorithm, sizeof t->algorithm, st, COL_ALGORITHM);
  cache_copy_column_text(t->config_text, sizeof t->config_text, st, COL_CONFIG_TEXT);
  cache_copy_column_text(t->reason, sizeof t->reason, st, COL_REASON);
  t->heuristic_pick = sqlite3_column_int64(st, COL_HEURISTIC) != 0;
  t->config.flags = t->heuristic_pick ? CONV_CONFIG_HEURISTIC_RANKED : 0u;
  t->winner = sqlite3_column_int64(st, COL_WINNER) != 0;
  t->deterministic = type_deterministic == SQLITE_NULL
                         ? -1
                         : sqlite3_column_int64(st, COL_DETERMINISTIC) != 0;
  return CONV_OK;
}

conv_status conv_cache_lookup_winner(conv_cache *cache, const conv_cache_key *key,
                                     conv_trial *winner, bool *found, conv_error *err) {
  conv_status s = cache_check_key(cache, key, err);
  if (s != CONV_OK) return s;
  if (winner == NULL || found == NULL)
    return conv_error_set(err, CONV_INVALID_ARGUMENT, "cache lookup: NULL output");
  if (cache->empty) {
    *found = false;
    return CONV_OK;
  }
  sqlite3_stmt *st;
  s = cache_prepare(
      cache,
      SELECT_ROWS(cache, " FROM trials WHERE problem = ?1 AND device = ?2"
                         " AND versions = ?3 AND winner <> 0 ORDER BY id DESC LIMIT 1"),
      &st, "cannot look up the winner", err);
  if (s != CONV_OK) return s;
  int rc = cache_bind_key(st, 1, key);
  if (rc == SQLITE_OK) rc = sqlite3_step(st);
  if (rc == SQLITE_ROW) {
    conv_trial t;
    s = decode_trial(cache, st, &t, err);
    if (s == CONV_OK) {
      *winner = t;
      *found = true;
    }
  } else if (rc == SQLITE_DONE) {
    *found = false;
  } else {
    s = cache_db_fail(cache, err, "cannot look up the winner");
  }
  cache_finalize(st);
  return s;
}

/* Steps through a prepared, bound SELECT of ROW_COLUMNS calling fn. */
static conv_status list_rows(const conv_cache *c, sqlite3_stmt *st, conv_cache_row_fn fn,
                             void *user, const char *what, conv_error *err) {
  for (;;) {
    int rc = sqlite3_step(st);
    if (rc == SQLITE_DONE) return CONV_OK;
    if (rc != SQLITE_ROW) return cache_db_fail(c, err, what);
    conv_trial t;
    conv_status s = decode_trial(c, st, &t, err);
    if (s != CONV_OK) return s;
    conv_cache_row row;
    row.problem = (const char *)sqlite3_column_text(st, COL_PROBLEM);
    row.device = (const char *)sqlite3_column_text(st, COL_DEVICE);
    row.versions = (const char *)sqlite3_column_text(st, COL_VERSIONS);
    row.tuned_at = (const char *)sqlite3_column_text(st, COL_TUNED_AT);
    if (!row.problem) row.problem = "";
    if (!row.device) row.device = "";
    if (!row.versions) row.versions = "";
    if (!row.tuned_at) row.tuned_at = "";
    row.trial = &t;
    if (fn(&row, user) != 0) return CONV_OK;
  }
}

conv_status conv_cache_list_winners(conv_cache *cache, conv_cache_row_fn fn, void *user,
                                    conv_error *err) {
  if (cache == NULL || fn == NULL)
    return conv_error_set(err, CONV_INVALID_ARGUMENT, "cache list: NULL cache or callback");
  if (cache->empty) return CONV_OK;
  sqlite3_stmt *st;
  conv_status s = cache_prepare(
      cache,
      SELECT_ROWS(cache, " FROM trials WHERE winner <> 0"
                         " ORDER BY problem, device, versions, id"),
      &st, "cannot list winners", err);
  if (s != CONV_OK) return s;
  s = list_rows(cache, st, fn, user, "cannot list winners", err);
  cache_finalize(st);
  return s;
}

conv_status conv_cache_list_trials(conv_cache *cache, const char *problem, conv_cache_row_fn fn,
                                   void *user, conv_error *err) {
  if (cache == NULL || problem == NULL || fn == NULL)
    return conv_error_set(err, CONV_INVALID_ARGUMENT,
                          "cache list: NULL cache, problem or callback");
  if (cache->empty) return CONV_OK;
  sqlite3_stmt *st;
  /* Winners first, then timed trials fastest first, then the untimed. */
  conv_status s = cache_prepare(
      cache,
      SELECT_ROWS(cache, " FROM trials WHERE problem = ?1"
                         " ORDER BY winner <> 0 DESC, time_ms IS NULL, time_ms, id"),
      &st, "cannot list trials", err);
  if (s != CONV_OK) return s;
  if (sqlite3_bind_text(st, 1, problem, -1, SQLITE_STATIC) != SQLITE_OK)
    s = cache_db_fail(cache, err, "cannot list trials");
  else
    s = list_rows(cache, st, fn, user, "cannot list trials", err);
  cache_finalize(st);
  return s;
}
