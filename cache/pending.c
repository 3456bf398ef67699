/*
 * pending.c -- problems waiting to be tuned offline (cache.h, "pending").
 *
 * A row of the pending table names a problem, the device and the library
 * versions it was met under, why it waits and when it was recorded:
 * - "untuned": a context of policy CONV_POLICY_RECORD missed it in both
 *   caches and ran an untimed plan (cuDNN's heuristic choice, validated);
 *   the trials table has nothing of it;
 * - "incomplete": a tuning stopped by its time budget stored the fastest of
 *   the configs it timed as the winner, which is used meanwhile;
 * - "stale": a winner carried over from other library versions (carry.c),
 *   re-validated under these but timed under those, is the winner meanwhile.
 * `convtune tune --pending` tunes each fully; a tuning that completes
 * clears the rows of its problem and device, whatever versions they were
 * recorded under (the shape is tuned now, under these versions).  The key
 * columns are the texts the trials table keeps (conv_problem_key(), the
 * device fingerprint), from which a problem is rebuilt exactly.
 */
#include "cache/cache.h"
#include "cache/db.h"

#include <string.h>

#include <sqlite3.h>

static const char *const reason_texts[] = {"untuned", "incomplete", "stale"};

const char *conv_pending_reason_text(conv_pending_reason reason) {
  return reason == CONV_PENDING_INCOMPLETE ? reason_texts[1]
         : reason == CONV_PENDING_STALE    ? reason_texts[2]
                                           : reason_texts[0];
}

/* Whether this handle's file has the table: a read-only open of an older
 * schema (or of an empty file) has nothing pending. */
static bool has_pending_table(const conv_cache *c) {
  return !c->empty && c->schema_version >= 3;
}

conv_status cache_insert_pending(const conv_cache *c, cache_stmt *slot, const conv_cache_key *key,
                                 conv_pending_reason reason, conv_error *err) {
  static const char what[] = "cannot record a pending problem";
  conv_status s = cache_stmt_ready(c, slot,
                                   "INSERT INTO pending (problem, device, versions, reason)"
                                   " VALUES (?1, ?2, ?3, ?4)"
                                   " ON CONFLICT (problem, device, versions)"
                                   " DO UPDATE SET reason = excluded.reason",
                                   what, err);
  if (s != CONV_OK) return s;
  int rc = cache_bind_key(slot->st, 1, key);
  if (rc == SQLITE_OK)
    rc = sqlite3_bind_text(slot->st, 4, conv_pending_reason_text(reason), -1, SQLITE_STATIC);
  if (rc == SQLITE_OK) rc = sqlite3_step(slot->st);
  if (rc != SQLITE_DONE) s = cache_db_fail(c, err, what);
  return s;
}

/* One statement in its own transaction: recording or clearing a key. */
typedef conv_status (*pending_write)(const conv_cache *c, cache_stmt *slot,
                                     const conv_cache_key *key, conv_pending_reason reason,
                                     conv_error *err);

static conv_status write_pending(conv_cache *cache, const conv_cache_key *key,
                                 conv_pending_reason reason, pending_write write, conv_error *err) {
  conv_status s = cache_write_begin(cache, err);
  if (s != CONV_OK) return s;
  cache_stmt slot = {NULL};
  s = write(cache, &slot, key, reason, err);
  cache_stmt_free(&slot);
  return cache_tx_end(cache, s, err);
}

conv_status conv_cache_record_pending(conv_cache *cache, const conv_cache_key *key,
                                      conv_pending_reason reason, conv_error *err) {
  conv_status s = cache_check_key(cache, key, err);
  if (s != CONV_OK) return s;
  if (reason != CONV_PENDING_UNTUNED && reason != CONV_PENDING_INCOMPLETE &&
      reason != CONV_PENDING_STALE)
    return conv_error_set(err, CONV_INVALID_ARGUMENT, "cache: pending reason %d", (int)reason);
  return write_pending(cache, key, reason, cache_insert_pending, err);
}

conv_status cache_delete_pending(const conv_cache *c, cache_stmt *slot, const conv_cache_key *key,
                                 conv_error *err) {
  static const char what[] = "cannot clear a pending problem";
  conv_status s = cache_stmt_ready(
      c, slot, "DELETE FROM pending WHERE problem = ?1 AND device = ?2", what, err);
  if (s != CONV_OK) return s;
  int rc = sqlite3_bind_text(slot->st, 1, key->problem, -1, SQLITE_STATIC);
  if (rc == SQLITE_OK) rc = sqlite3_bind_text(slot->st, 2, key->device, -1, SQLITE_STATIC);
  if (rc == SQLITE_OK) rc = sqlite3_step(slot->st);
  if (rc != SQLITE_DONE) s = cache_db_fail(c, err, what);
  return s;
}

/* cache_delete_pending as a pending_write (the reason unused). */
static conv_status delete_pending(const conv_cache *c, cache_stmt *slot, const conv_cache_key *key,
                                  conv_pending_reason reason, conv_error *err) {
  (void)reason;
  return cache_delete_pending(c, slot, key, err);
}

conv_status conv_cache_clear_pending(conv_cache *cache, const conv_cache_key *key,
                                     conv_error *err) {
  conv_status s = cache_check_key(cache, key, err);
  if (s != CONV_OK) return s;
  return write_pending(cache, key, CONV_PENDING_UNTUNED, delete_pending, err);
}

conv_status conv_cache_find_pending(conv_cache *cache, const conv_cache_key *key, bool *found,
                                    conv_pending_reason *reason, conv_error *err) {
  conv_status s = cache_check_key(cache, key, err);
  if (s != CONV_OK) return s;
  if (found == NULL)
    return conv_error_set(err, CONV_INVALID_ARGUMENT, "cache pending lookup: NULL output");
  if (!has_pending_table(cache)) {
    *found = false;
    return CONV_OK;
  }
  sqlite3_stmt *st;
  s = cache_prepare(cache,
                    "SELECT reason FROM pending WHERE problem = ?1 AND device = ?2"
                    " AND versions = ?3",
                    &st, "cannot look up a pending problem", err);
  if (s != CONV_OK) return s;
  int rc = cache_bind_key(st, 1, key);
  if (rc == SQLITE_OK) rc = sqlite3_step(st);
  if (rc == SQLITE_ROW) {
    char text[32];
    cache_copy_column_text(text, sizeof text, st, 0);
    *found = true;
    /* Any other text (the file is untrusted) still means "tune it". */
    if (reason != NULL)
      *reason = strcmp(text, reason_texts[0]) == 0   ? CONV_PENDING_UNTUNED
                : strcmp(text, reason_texts[2]) == 0 ? CONV_PENDING_STALE
                                                     : CONV_PENDING_INCOMPLETE;
  } else if (rc == SQLITE_DONE) {
    *found = false;
  } else {
    s = cache_db_fail(cache, err, "cannot look up a pending problem");
  }
  cache_finalize(st);
  return s;
}

/* A column's text, "" for NULL or another type (the file is untrusted). */
static const char *column_text(sqlite3_stmt *st, int col) {
  const char *text = NULL;
  if (sqlite3_column_type(st, col) == SQLITE_TEXT)
    text = (const char *)sqlite3_column_text(st, col);
  return text != NULL ? text : "";
}

conv_status conv_cache_list_pending(conv_cache *cache, conv_cache_pending_fn fn, void *user,
                                    conv_error *err) {
  if (cache == NULL || fn == NULL)
    return conv_error_set(err, CONV_INVALID_ARGUMENT, "cache list: NULL cache or callback");
  if (!has_pending_table(cache)) return CONV_OK;
  sqlite3_stmt *st;
  conv_status s = cache_prepare(
      cache,
      "SELECT problem, device, versions, reason, recorded_at FROM pending"
      " ORDER BY recorded_at, problem, device, versions",
      &st, "cannot list pending problems", err);
  if (s != CONV_OK) return s;
  for (;;) {
    int rc = sqlite3_step(st);
    if (rc == SQLITE_DONE) break;
    if (rc != SQLITE_ROW) {
      s = cache_db_fail(cache, err, "cannot list pending problems");
      break;
    }
    conv_cache_pending_row row = {column_text(st, 0), column_text(st, 1), column_text(st, 2),
                                  column_text(st, 3), column_text(st, 4)};
    if (fn(&row, user) != 0) break;
  }
  cache_finalize(st);
  return s;
}
