/*
 * trials_read.c -- reading trials and winners back from the cache
 * (cache.h).  The file is untrusted input (a shipped cache, a crafted
 * one): every value of a row is checked as it is decoded, and a row that
 * fails is refused whole, naming its id:
 * - texts are TEXT without a NUL inside (a NUL would cut a key short and
 *   name another key's tuning) and shorter than what holds them
 *   (conv_trial's buffers, CONV_PROBLEM_KEY_MAX, CONV_CACHE_*_MAX);
 * - numbers have their type and range; flags are 0 or 1; times and errors
 *   are finite and not negative;
 * - a winner is valid, validated and timed (conv_cache_trial_can_win).
 * Of several rows marked winner of one key, the latest (highest id) is
 * the winner, as look-ups have always taken it; the others read as plain
 * trials, so that a copy of the tuning (merge) carries one winner.
 * A problem key that does not parse back to a problem is listed as it is:
 * another version's key, which the report shows as such and the predictor
 * passes over.  It is never looked up (a look-up's key is one this
 * version writes), and what copies a row under its key checks the key
 * first (conv_cache_check_key_texts).
 */
#include "cache/cache.h"
#include "cache/db.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <sqlite3.h>

/* ---------------------------------------------------------------- checks */

bool conv_cache_trial_can_win(const conv_trial *t) {
  return t != NULL && t->status == CONV_OK && isfinite(t->time_ms) && t->time_ms > 0 &&
         isfinite(t->rel_error) && t->rel_error >= 0;
}

conv_status conv_cache_check_key_texts(const conv_cache_key *key, conv_error *err) {
  if (key == NULL || key->problem == NULL || key->device == NULL || key->versions == NULL)
    return conv_error_set(err, CONV_INVALID_ARGUMENT, "cache: NULL key or key field");
  conv_problem problem;
  if (cache_bounded_len(key->problem, CONV_PROBLEM_KEY_MAX) == CONV_PROBLEM_KEY_MAX ||
      conv_problem_from_key(key->problem, &problem) != CONV_OK)
    return conv_error_set(err, CONV_CACHE_ERROR,
                          "problem key \"%.64s\" is not one this version writes", key->problem);
  if (cache_bounded_len(key->device, CONV_CACHE_DEVICE_MAX) == CONV_CACHE_DEVICE_MAX)
    return conv_error_set(err, CONV_CACHE_ERROR, "device fingerprint of %d bytes or more",
                          CONV_CACHE_DEVICE_MAX);
  if (cache_bounded_len(key->versions, CONV_CACHE_VERSIONS_MAX) == CONV_CACHE_VERSIONS_MAX)
    return conv_error_set(err, CONV_CACHE_ERROR, "versions text of %d bytes or more",
                          CONV_CACHE_VERSIONS_MAX);
  return CONV_OK;
}

/* ---------------------------------------------------------------- reads */

#define ROW_COLUMNS                                                                              \
  "id, problem, device, versions, algorithm_id, algorithm, config, config_text, status,"        \
  " reason, time_ms, rel_error, workspace_bytes, heuristic_pick, winner, tuned_at"
/* "SELECT <the row's columns> <tail>": a version-1 file has no
 * deterministic column, so NULL (unknown) stands in for it.  `latest`,
 * the last column, says whether the row is its key's latest winner row
 * (see the top of the file). */
#define SELECT_ROWS(c, latest, tail)                                                             \
  ((c)->schema_version >= 2 ? "SELECT " ROW_COLUMNS ", deterministic, " latest " " tail          \
                            : "SELECT " ROW_COLUMNS ", NULL, " latest " " tail)
enum {
  COL_ID, COL_PROBLEM, COL_DEVICE, COL_VERSIONS, COL_ALGORITHM_ID, COL_ALGORITHM, COL_CONFIG,
  COL_CONFIG_TEXT, COL_STATUS, COL_REASON, COL_TIME_MS, COL_REL_ERROR, COL_WORKSPACE,
  COL_HEURISTIC, COL_WINNER, COL_TUNED_AT, COL_DETERMINISTIC, COL_LATEST_WINNER
};

/* A row's key and time of tuning, checked; they point into the row, valid
 * until the statement steps. */
typedef struct row_key {
  const char *problem, *device, *versions, *tuned_at;
} row_key;

/* Column `col` as a writer stores a text: TEXT without a NUL inside,
 * shorter than `size` bytes with its NUL; NULL otherwise.  Its type is
 * read before its text, which may convert it. */
static const char *checked_text(sqlite3_stmt *st, int col, size_t size) {
  if (sqlite3_column_type(st, col) != SQLITE_TEXT) return NULL;
  const char *text = (const char *)sqlite3_column_text(st, col);
  size_t bytes = (size_t)sqlite3_column_bytes(st, col);
  if (text == NULL || bytes >= size || memchr(text, '\0', bytes) != NULL) return NULL;
  return text;
}

/* Copies a checked text column into dst[size]; false when it fails. */
static bool copy_text(char *dst, size_t size, sqlite3_stmt *st, int col) {
  const char *text = checked_text(st, col, size);
  if (text == NULL) return false;
  memcpy(dst, text, strlen(text) + 1);
  return true;
}

static bool is_flag(int type, sqlite3_int64 value) {
  return type == SQLITE_INTEGER && (value == 0 || value == 1);
}

/* A time or an error: NULL (not measured), else a finite number >= 0. */
static bool is_measure(int type, double value) {
  if (type == SQLITE_NULL) return true;
  return (type == SQLITE_INTEGER || type == SQLITE_FLOAT) && isfinite(value) && value >= 0;
}

/* A text column, the bytes that hold it with its NUL, and its name. */
typedef struct text_column {
  int col;
  size_t size;
  const char *what;
} text_column;

static conv_status bad_text(const conv_cache *c, long long id, const text_column *text,
                            conv_error *err) {
  return conv_error_set(err, CONV_CACHE_ERROR,
                        "cache %s: row %lld: its %s is not text of under %zu bytes without NULs",
                        c->path, id, text->what, text->size);
}

/* The row's key and time of tuning into *key, each checked. */
static conv_status decode_key(const conv_cache *c, sqlite3_stmt *st, long long id, row_key *key,
                              conv_error *err) {
  static const text_column texts[] = {{COL_PROBLEM, CONV_PROBLEM_KEY_MAX, "problem"},
                                      {COL_DEVICE, CONV_CACHE_DEVICE_MAX, "device"},
                                      {COL_VERSIONS, CONV_CACHE_VERSIONS_MAX, "versions"},
                                      {COL_TUNED_AT, CONV_CACHE_TUNED_AT_MAX, "time of tuning"}};
  const char *got[4];
  for (int i = 0; i < 4; i++)
    if ((got[i] = checked_text(st, texts[i].col, texts[i].size)) == NULL)
      return bad_text(c, id, &texts[i], err);
  *key = (row_key){got[0], got[1], got[2], got[3]};
  return CONV_OK;
}

/* Decodes the current row into *t and *key, checking every value (the
 * file is untrusted).  Column types are read before any value: a
 * conversion makes sqlite3_column_type undefined. */
static conv_status decode_trial(const conv_cache *c, sqlite3_stmt *st, conv_trial *t, row_key *key,
                                conv_error *err) {
  int type_algorithm_id = sqlite3_column_type(st, COL_ALGORITHM_ID);
  int type_config = sqlite3_column_type(st, COL_CONFIG);
  int type_status = sqlite3_column_type(st, COL_STATUS);
  int type_workspace = sqlite3_column_type(st, COL_WORKSPACE);
  int type_time = sqlite3_column_type(st, COL_TIME_MS);
  int type_error = sqlite3_column_type(st, COL_REL_ERROR);
  int type_heuristic = sqlite3_column_type(st, COL_HEURISTIC);
  int type_winner = sqlite3_column_type(st, COL_WINNER);
  int type_deterministic = sqlite3_column_type(st, COL_DETERMINISTIC);
  long long id = (long long)sqlite3_column_int64(st, COL_ID);
  memset(t, 0, sizeof *t);
  conv_status s = decode_key(c, st, id, key, err);
  if (s != CONV_OK) return s;

  sqlite3_int64 algorithm_id = sqlite3_column_int64(st, COL_ALGORITHM_ID);
  if (type_algorithm_id != SQLITE_INTEGER || algorithm_id <= 0 || algorithm_id > UINT32_MAX)
    return conv_error_set(err, CONV_CACHE_ERROR, "cache %s: row %lld: corrupt algorithm id",
                          c->path, id);
  t->algorithm_id = (uint32_t)algorithm_id;

  const char *config = NULL;
  if (type_config == SQLITE_TEXT) config = (const char *)sqlite3_column_text(st, COL_CONFIG);
  size_t config_bytes = (size_t)sqlite3_column_bytes(st, COL_CONFIG);
  if (config == NULL || config_bytes >= CACHE_CONFIG_TEXT_MAX || strlen(config) != config_bytes ||
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

  t->time_ms = type_time == SQLITE_NULL ? -1.0 : sqlite3_column_double(st, COL_TIME_MS);
  t->rel_error = type_error == SQLITE_NULL ? -1.0 : sqlite3_column_double(st, COL_REL_ERROR);
  if (!is_measure(type_time, t->time_ms) || !is_measure(type_error, t->rel_error))
    return conv_error_set(err, CONV_CACHE_ERROR, "cache %s: row %lld: corrupt time or error",
                          c->path, id);

  static const text_column texts[] = {{COL_ALGORITHM, sizeof t->algorithm, "algorithm"},
                                      {COL_CONFIG_TEXT, sizeof t->config_text, "config text"},
                                      {COL_REASON, sizeof t->reason, "reason"}};
  char *const into[] = {t->algorithm, t->config_text, t->reason};
  for (int i = 0; i < 3; i++)
    if (!copy_text(into[i], texts[i].size, st, texts[i].col)) return bad_text(c, id, &texts[i], err);

  sqlite3_int64 heuristic = sqlite3_column_int64(st, COL_HEURISTIC);
  sqlite3_int64 winner = sqlite3_column_int64(st, COL_WINNER);
  sqlite3_int64 deterministic = sqlite3_column_int64(st, COL_DETERMINISTIC);
  if (!is_flag(type_heuristic, heuristic) || !is_flag(type_winner, winner) ||
      !(type_deterministic == SQLITE_NULL || is_flag(type_deterministic, deterministic)))
    return conv_error_set(err, CONV_CACHE_ERROR,
                          "cache %s: row %lld: a flag (heuristic pick, winner, deterministic) "
                          "is not 0 or 1",
                          c->path, id);
  t->heuristic_pick = heuristic != 0;
  t->config.flags = t->heuristic_pick ? CONV_CONFIG_HEURISTIC_RANKED : 0u;
  t->winner = winner != 0 && sqlite3_column_int64(st, COL_LATEST_WINNER) != 0;
  t->deterministic = type_deterministic == SQLITE_NULL ? -1 : (int)deterministic;
  if (t->winner && !conv_cache_trial_can_win(t))
    return conv_error_set(err, CONV_CACHE_ERROR,
                          "cache %s: row %lld: a winner that is not a valid, validated and timed "
                          "trial (%s, %g ms, error %g)",
                          c->path, id, conv_status_string(t->status), t->time_ms, t->rel_error);
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
      SELECT_ROWS(cache, "1", " FROM trials WHERE problem = ?1 AND device = ?2"
                              " AND versions = ?3 AND winner <> 0 ORDER BY id DESC LIMIT 1"),
      &st, "cannot look up the winner", err);
  if (s != CONV_OK) return s;
  int rc = cache_bind_key(st, 1, key);
  if (rc == SQLITE_OK) rc = sqlite3_step(st);
  if (rc == SQLITE_ROW) {
    conv_trial t;
    row_key texts;
    s = decode_trial(cache, st, &t, &texts, err);
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

conv_status conv_cache_lookup_layer(conv_cache *cache, const conv_cache_key *key,
                                    const conv_logger *log, const char *layer,
                                    const char *instead, conv_trial *winner, bool *found,
                                    conv_error *err) {
  if (layer == NULL || instead == NULL)
    return conv_error_set(err, CONV_INVALID_ARGUMENT, "cache lookup: NULL layer or instead");
  conv_error why = {CONV_OK, ""};
  conv_status s = conv_cache_lookup_winner(cache, key, winner, found, &why);
  if (s == CONV_CACHE_ERROR) {
    conv_log(log, CONV_LOG_WARN, "%s: the %s's winner is passed over (%s); %s", key->problem,
             layer, why.message, instead);
    *found = false;
    return CONV_OK;
  }
  if (s != CONV_OK) conv_error_set(err, s, "%s", why.message);
  return s;
}

#define CARRY_TEXT_(n) #n
#define CARRY_TEXT(n) CARRY_TEXT_(n)
#define CARRY_LIMIT_TEXT CARRY_TEXT(CONV_CARRY_CANDIDATES_MAX)

/* Carry-over (cache.h, carry.c): the other versions' latest winners of
 * key's problem and device, newest first; a row that fails its checks is
 * passed over for the next, the file left as it is. */
conv_status conv_cache_lookup_carried(conv_cache *cache, const conv_cache_key *key,
                                      conv_family_libraries_fn libraries, const conv_logger *log,
                                      const char *layer, conv_trial *winner, char *then,
                                      size_t size, bool *found, conv_error *err) {
  conv_status s = cache_check_key(cache, key, err);
  if (s != CONV_OK) return s;
  if (libraries == NULL || layer == NULL || winner == NULL || then == NULL || size == 0 ||
      found == NULL)
    return conv_error_set(err, CONV_INVALID_ARGUMENT, "cache carry-over lookup: NULL argument");
  *found = false;
  if (cache->empty) return CONV_OK;
  sqlite3_stmt *st;
  /* max(id) makes the other columns those of each versions text's latest
   * winner row, as in conv_cache_list_winners. */
  s = cache_prepare(cache,
                    SELECT_ROWS(cache, "max(id) = id",
                                " FROM trials WHERE problem = ?1 AND device = ?2"
                                " AND versions <> ?3 AND winner <> 0 GROUP BY versions"
                                " ORDER BY max(id) DESC LIMIT " CARRY_LIMIT_TEXT),
                    &st, "cannot look up carried-over winners", err);
  if (s != CONV_OK) return s;
  int rc = cache_bind_key(st, 1, key);
  while (rc == SQLITE_OK || rc == SQLITE_ROW) {
    rc = sqlite3_step(st);
    if (rc != SQLITE_ROW) break;
    conv_trial t;
    row_key texts;
    conv_error why = {CONV_OK, ""};
    if (decode_trial(cache, st, &t, &texts, &why) != CONV_OK) {
      conv_log(log, CONV_LOG_WARN, "%s: a %s row tuned under other versions is passed over (%s)",
               key->problem, layer, why.message);
      continue;
    }
    if (!t.winner || !conv_versions_carry(texts.versions, key->versions, t.algorithm_id,
                                          libraries(t.algorithm_id)))
      continue;
    *winner = t;
    snprintf(then, size, "%s", texts.versions);
    *found = true;
    break;
  }
  if (rc != SQLITE_ROW && rc != SQLITE_DONE)
    s = cache_db_fail(cache, err, "cannot look up carried-over winners");
  cache_finalize(st);
  return s;
}

/* Steps through a prepared, bound SELECT_ROWS calling fn. */
static conv_status list_rows(const conv_cache *c, sqlite3_stmt *st, conv_cache_row_fn fn,
                             void *user, const char *what, conv_error *err) {
  for (;;) {
    int rc = sqlite3_step(st);
    if (rc == SQLITE_DONE) return CONV_OK;
    if (rc != SQLITE_ROW) return cache_db_fail(c, err, what);
    conv_trial t;
    row_key key;
    conv_status s = decode_trial(c, st, &t, &key, err);
    if (s != CONV_OK) return s;
    const conv_cache_row row = {key.problem, key.device, key.versions, key.tuned_at, &t};
    if (fn(&row, user) != 0) return CONV_OK;
  }
}

conv_status conv_cache_list_winners(conv_cache *cache, conv_cache_row_fn fn, void *user,
                                    conv_error *err) {
  if (cache == NULL || fn == NULL)
    return conv_error_set(err, CONV_INVALID_ARGUMENT, "cache list: NULL cache or callback");
  if (cache->empty) return CONV_OK;
  sqlite3_stmt *st;
  /* max(id) makes the other columns those of the key's latest winner row
   * (SQLite's rule for a lone max() in an aggregate). */
  conv_status s = cache_prepare(
      cache,
      SELECT_ROWS(cache, "max(id) = id", " FROM trials WHERE winner <> 0"
                                         " GROUP BY problem, device, versions"
                                         " ORDER BY problem, device, versions"),
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
  /* Winners first, then timed trials fastest first, then the untimed.
   * The latest winner row of each device and versions is listed once,
   * before the rows are read, so a crafted file of many is linear. */
  conv_status s = cache_prepare(
      cache,
      SELECT_ROWS(cache,
                  "id IN (SELECT max(id) FROM trials WHERE problem = ?1 AND winner <> 0"
                  " GROUP BY device, versions) AS latest_winner",
                  " FROM trials WHERE problem = ?1"
                  " ORDER BY latest_winner DESC, time_ms IS NULL, time_ms, id"),
      &st, "cannot list trials", err);
  if (s != CONV_OK) return s;
  if (sqlite3_bind_text(st, 1, problem, -1, SQLITE_STATIC) != SQLITE_OK)
    s = cache_db_fail(cache, err, "cannot list trials");
  else
    s = list_rows(cache, st, fn, user, "cannot list trials", err);
  cache_finalize(st);
  return s;
}
