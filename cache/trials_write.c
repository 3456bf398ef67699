/*
 * trials_write.c -- storing trials and winners in the cache (cache.h).
 * Every write is one transaction (cache_tx_begin), so an interrupted
 * tuning keeps what it measured and a failed write changes nothing.
 */
#include "cache/cache.h"
#include "cache/db.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

#include <sqlite3.h>

/* ---------------------------------------------------------------- statements kept */

void cache_tuning_writer_free(cache_tuning_writer *w) {
  cache_stmt_free(&w->delete_trials);
  cache_stmt_free(&w->delete_pending);
  cache_stmt_free(&w->insert_trial);
  cache_stmt_free(&w->insert_pending);
}

/* ---------------------------------------------------------------- writes */

/* Deletes every trial of `key`, inside the caller's transaction. */
static conv_status delete_tuning(const conv_cache *cache, cache_stmt *slot,
                                 const conv_cache_key *key, conv_error *err) {
  static const char what[] = "cannot delete earlier trials";
  conv_status s = cache_stmt_ready(
      cache, slot, "DELETE FROM trials WHERE problem = ?1 AND device = ?2 AND versions = ?3", what,
      err);
  if (s != CONV_OK) return s;
  if (cache_bind_key(slot->st, 1, key) != SQLITE_OK || sqlite3_step(slot->st) != SQLITE_DONE)
    s = cache_db_fail(cache, err, what);
  return s;
}

conv_status conv_cache_begin_tuning(conv_cache *cache, const conv_cache_key *key,
                                    conv_error *err) {
  conv_status s = cache_check_key(cache, key, err);
  if (s == CONV_OK) s = cache_write_begin(cache, err);
  if (s != CONV_OK) return s;
  cache_stmt slot = {NULL};
  s = delete_tuning(cache, &slot, key, err);
  cache_stmt_free(&slot);
  return cache_tx_end(cache, s, err);
}

static conv_status clear_winner(const conv_cache *c, const conv_cache_key *key, conv_error *err) {
  sqlite3_stmt *st;
  conv_status s = cache_prepare(
      c,
      "UPDATE trials SET winner = 0 WHERE problem = ?1 AND device = ?2"
      " AND versions = ?3 AND winner <> 0",
      &st, "cannot clear the winner", err);
  if (s != CONV_OK) return s;
  if (cache_bind_key(st, 1, key) != SQLITE_OK || sqlite3_step(st) != SQLITE_DONE)
    s = cache_db_fail(c, err, "cannot clear the winner");
  cache_finalize(st);
  return s;
}

/* tuned_at: when it was measured, kept by a copy from another cache; NULL
 * for now. */
static conv_status insert_trial(const conv_cache *c, cache_stmt *slot, const conv_cache_key *key,
                                const conv_trial *t, const char *config, const char *tuned_at,
                                conv_error *err) {
  conv_status s = cache_stmt_ready(
      c, slot,
      "INSERT INTO trials (problem, device, versions, algorithm_id,"
      " algorithm, config, config_text, status, status_name, reason,"
      " time_ms, rel_error, workspace_bytes, heuristic_pick, winner,"
      " deterministic, tuned_at)"
      " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13,"
      " ?14, ?15, ?16, COALESCE(?17, strftime('%Y-%m-%dT%H:%M:%SZ', 'now')))",
      "cannot store a trial", err);
  if (s != CONV_OK) return s;
  sqlite3_stmt *st = slot->st;
  sqlite3_int64 workspace =
      t->workspace_bytes > (size_t)INT64_MAX ? INT64_MAX : (sqlite3_int64)t->workspace_bytes;
  int rc = cache_bind_key(st, 1, key);
  if (rc == SQLITE_OK) rc = sqlite3_bind_int64(st, 4, t->algorithm_id);
  if (rc == SQLITE_OK)
    rc = sqlite3_bind_text(st, 5, t->algorithm,
                           (int)cache_bounded_len(t->algorithm, sizeof t->algorithm),
                           SQLITE_STATIC);
  if (rc == SQLITE_OK) rc = sqlite3_bind_text(st, 6, config, -1, SQLITE_STATIC);
  if (rc == SQLITE_OK)
    rc = sqlite3_bind_text(st, 7, t->config_text,
                           (int)cache_bounded_len(t->config_text, sizeof t->config_text),
                           SQLITE_STATIC);
  if (rc == SQLITE_OK) rc = sqlite3_bind_int(st, 8, (int)t->status);
  if (rc == SQLITE_OK)
    rc = sqlite3_bind_text(st, 9, conv_status_string(t->status), -1, SQLITE_STATIC);
  if (rc == SQLITE_OK)
    rc = sqlite3_bind_text(st, 10, t->reason, (int)cache_bounded_len(t->reason, sizeof t->reason),
                           SQLITE_STATIC);
  if (rc == SQLITE_OK)
    rc = t->time_ms >= 0 && isfinite(t->time_ms) ? sqlite3_bind_double(st, 11, t->time_ms)
                                                 : sqlite3_bind_null(st, 11);
  if (rc == SQLITE_OK)
    rc = t->rel_error >= 0 && isfinite(t->rel_error) ? sqlite3_bind_double(st, 12, t->rel_error)
                                                     : sqlite3_bind_null(st, 12);
  if (rc == SQLITE_OK) rc = sqlite3_bind_int64(st, 13, workspace);
  if (rc == SQLITE_OK) rc = sqlite3_bind_int(st, 14, t->heuristic_pick ? 1 : 0);
  if (rc == SQLITE_OK) rc = sqlite3_bind_int(st, 15, t->winner ? 1 : 0);
  if (rc == SQLITE_OK)
    rc = t->deterministic == 0 || t->deterministic == 1
             ? sqlite3_bind_int(st, 16, t->deterministic)
             : sqlite3_bind_null(st, 16);
  if (rc == SQLITE_OK)
    rc = tuned_at ? sqlite3_bind_text(st, 17, tuned_at, -1, SQLITE_STATIC)
                  : sqlite3_bind_null(st, 17);
  if (rc == SQLITE_OK) rc = sqlite3_step(st);
  if (rc != SQLITE_DONE) s = cache_db_fail(c, err, "cannot store a trial");
  return s;
}

/* One transaction (every write is one: it carries the identity stamp); a
 * trial with winner set becomes the key's only winner (as set_winner). */
conv_status conv_cache_add_trial(conv_cache *cache, const conv_cache_key *key,
                                 const conv_trial *trial, conv_error *err) {
  conv_status s = cache_check_key(cache, key, err);
  if (s != CONV_OK) return s;
  if (trial == NULL) return conv_error_set(err, CONV_INVALID_ARGUMENT, "cache: NULL trial");
  CONV_TRY(s, cache_check_writable(cache, err), out);
  if (trial->algorithm_id == 0)
    return conv_error_set(err, CONV_INVALID_ARGUMENT, "cache: trial with algorithm id 0");
  if ((int)trial->status < 0 || (int)trial->status >= (int)CONV_STATUS_COUNT_)
    return conv_error_set(err, CONV_INVALID_ARGUMENT, "cache: trial with status %d",
                          (int)trial->status);
  char config[CACHE_CONFIG_TEXT_MAX];
  if (conv_config_format(&trial->config, config, sizeof config) != CONV_OK)
    return conv_error_set(err, CONV_INVALID_ARGUMENT, "cache: trial config with %d values",
                          trial->config.count);
  if ((s = cache_tx_begin(cache, err)) != CONV_OK) return s;
  cache_stmt slot = {NULL};
  if (trial->winner) s = clear_winner(cache, key, err);
  if (s == CONV_OK) s = insert_trial(cache, &slot, key, trial, config, NULL, err);
  cache_stmt_free(&slot);
  return cache_tx_end(cache, s, err);
out:
  return s;
}

conv_status cache_write_tuning(const conv_cache *c, cache_tuning_writer *w,
                               const conv_cache_key *key, const conv_trial *trials,
                               const char *const *tuned_at, size_t count, conv_error *err) {
  conv_status s = delete_tuning(c, &w->delete_trials, key, err);
  /* The copied tuning replaces whatever was waiting to be tuned. */
  if (s == CONV_OK) s = cache_delete_pending(c, &w->delete_pending, key, err);
  for (size_t i = 0; s == CONV_OK && i < count; i++) {
    char config[CACHE_CONFIG_TEXT_MAX];
    if (trials[i].algorithm_id == 0 ||
        conv_config_format(&trials[i].config, config, sizeof config) != CONV_OK)
      return conv_error_set(err, CONV_INVALID_ARGUMENT, "cache: trial %zu cannot be stored", i);
    s = insert_trial(c, &w->insert_trial, key, &trials[i], config, tuned_at ? tuned_at[i] : NULL,
                     err);
  }
  return s;
}

conv_status conv_cache_replace_tuning(conv_cache *cache, const conv_cache_key *key,
                                      const conv_trial *trials, const char *const *tuned_at,
                                      size_t count, conv_error *err) {
  conv_status s = cache_check_key(cache, key, err);
  if (s != CONV_OK) return s;
  if (trials == NULL && count > 0)
    return conv_error_set(err, CONV_INVALID_ARGUMENT, "cache: NULL trials");
  if ((s = cache_write_begin(cache, err)) != CONV_OK) return s;
  cache_tuning_writer w = {{NULL}, {NULL}, {NULL}, {NULL}};
  s = cache_write_tuning(cache, &w, key, trials, tuned_at, count, err);
  cache_tuning_writer_free(&w);
  return cache_tx_end(cache, s, err);
}

conv_status conv_cache_set_winner(conv_cache *cache, const conv_cache_key *key,
                                  uint32_t algorithm_id, const conv_config *config,
                                  conv_error *err) {
  conv_status s = cache_check_key(cache, key, err);
  if (s != CONV_OK) return s;
  if (config == NULL) return conv_error_set(err, CONV_INVALID_ARGUMENT, "cache: NULL config");
  CONV_TRY(s, cache_check_writable(cache, err), out);
  char text[CACHE_CONFIG_TEXT_MAX];
  if (conv_config_format(config, text, sizeof text) != CONV_OK)
    return conv_error_set(err, CONV_INVALID_ARGUMENT, "cache: winner config with %d values",
                          config->count);

  CONV_TRY(s, cache_tx_begin(cache, err), out);
  CONV_TRY(s, clear_winner(cache, key, err), fail);
  sqlite3_stmt *st;
  /* The same config stored twice: mark one row only, a valid one if any. */
  CONV_TRY(s,
           cache_prepare(
               cache,
               "UPDATE trials SET winner = 1 WHERE id = (SELECT id FROM trials"
               " WHERE problem = ?1 AND device = ?2 AND versions = ?3 AND algorithm_id = ?4"
               " AND config = ?5 ORDER BY status = 0 DESC, id DESC LIMIT 1)",
               &st, "cannot set the winner", err),
           fail);
  int rc = cache_bind_key(st, 1, key);
  if (rc == SQLITE_OK) rc = sqlite3_bind_int64(st, 4, algorithm_id);
  if (rc == SQLITE_OK) rc = sqlite3_bind_text(st, 5, text, -1, SQLITE_STATIC);
  if (rc == SQLITE_OK) rc = sqlite3_step(st);
  if (rc != SQLITE_DONE) {
    s = cache_db_fail(cache, err, "cannot set the winner");
    cache_finalize(st);
    goto fail;
  }
  cache_finalize(st);
  if (sqlite3_changes(cache->db) != 1) {
    s = conv_error_set(err, CONV_CACHE_ERROR,
                       "cache %s: no trial of algorithm %u with config \"%s\" for %s on %s (%s) "
                       "to mark as the winner",
                       cache->path, (unsigned)algorithm_id, text, key->problem, key->device,
                       key->versions);
    goto fail;
  }
  return cache_tx_commit(cache, err);
fail:
  cache_tx_rollback(cache, err);
out:
  return s;
}
