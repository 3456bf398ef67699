/*
 * db.h -- what the cache's own files (cache.c, trials_write.c,
 * trials_read.c, pending.c) share: the handle and the SQLite helpers that
 * every statement goes through.  Internal to cache/: the rest of the
 * library uses cache.h.
 */
#ifndef CONVTUNE_CACHE_DB_H
#define CONVTUNE_CACHE_DB_H

#include <stdbool.h>
#include <stddef.h>

#include <sqlite3.h>

#include "cache/cache.h"

#ifdef __cplusplus
extern "C" {
#endif

/* conv_config_format of CONV_CONFIG_MAX_VALUES int64 values: 32 * 21 bytes. */
#define CACHE_CONFIG_TEXT_MAX 1024

/* The pending table (schema version 3; pending.c says what it holds),
 * created with a new cache or by the upgrade of an older one. */
#define PENDING_TABLE_SQL                                                        \
  "CREATE TABLE IF NOT EXISTS pending ("                                         \
  " problem TEXT NOT NULL,"                                                      \
  " device TEXT NOT NULL,"                                                       \
  " versions TEXT NOT NULL,"                                                     \
  " reason TEXT NOT NULL,"                                                       \
  " recorded_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%SZ', 'now')),"  \
  " PRIMARY KEY (problem, device, versions))"

struct conv_cache {
  sqlite3 *db;
  bool read_only;
  bool empty; /* read-only open of a database with no tables: reads find nothing */
  int schema_version; /* of the file, as inspect() read it */
  char *path; /* for messages */
};

/* Records a SQLite failure: the path, what was being done, SQLite's text.
 * Must be called before the failing statement is finalized. */
conv_status cache_db_fail(const conv_cache *c, conv_error *err, const char *what);

/* sqlite3_prepare_v2, reporting a failure as cache_db_fail does; *st is
 * NULL on failure. */
conv_status cache_prepare(const conv_cache *c, const char *sql, sqlite3_stmt **st,
                          const char *what, conv_error *err);

/* sqlite3_finalize, its return value ignored (it repeats the last step's
 * error, which every caller has checked and reported). */
void cache_finalize(sqlite3_stmt *st);

/* Runs one statement to completion, discarding any rows. */
conv_status cache_exec_sql(const conv_cache *c, const char *sql, const char *what,
                           conv_error *err);

/* Every write is one transaction: BEGIN IMMEDIATE plus the identity stamp
 * (see cache.c); rollback keeps err's first message; commit rolls back
 * when it fails. */
conv_status cache_tx_begin(const conv_cache *c, conv_error *err);
void cache_tx_rollback(const conv_cache *c, conv_error *err);
conv_status cache_tx_commit(const conv_cache *c, conv_error *err);
/* Ends the transaction that work of outcome `s` ran in: commits it where s
 * is CONV_OK (returning the commit's status), else rolls it back and
 * returns s. */
conv_status cache_tx_end(const conv_cache *c, conv_status s, conv_error *err);
/* cache_check_writable, then cache_tx_begin: the start of a write that has
 * nothing else to check first.  Ended by cache_tx_end. */
conv_status cache_write_begin(const conv_cache *c, conv_error *err);

/* Length of s, at most max (s need not be NUL-terminated within max). */
size_t cache_bounded_len(const char *s, size_t max);

/* Copies column `col` into dst[size], truncating at a UTF-8 character
 * boundary and stopping at an embedded NUL; NULL becomes "". */
void cache_copy_column_text(char *dst, size_t size, sqlite3_stmt *st, int col);

/* Binds key's problem, device and versions to parameters first..first+2. */
int cache_bind_key(sqlite3_stmt *st, int first, const conv_cache_key *key);

/* CONV_INVALID_ARGUMENT for a NULL cache, key or key field. */
conv_status cache_check_key(const conv_cache *c, const conv_cache_key *key, conv_error *err);

/* CONV_CACHE_ERROR for a handle opened read-only. */
conv_status cache_check_writable(const conv_cache *c, conv_error *err);

/* A statement prepared on its first use and reset for each later one,
 * for work that runs one statement many times (a merge's thousands of
 * tunings); cache_stmt_free finalizes it (cache.c). */
typedef struct cache_stmt {
  sqlite3_stmt *st;
} cache_stmt;

/* slot->st for `sql`, ready to bind: prepared on first use (a failure
 * reported as cache_prepare does), else reset, its bindings cleared. */
conv_status cache_stmt_ready(const conv_cache *c, cache_stmt *slot, const char *sql,
                             const char *what, conv_error *err);
void cache_stmt_free(cache_stmt *slot);

/* Deletes the pending rows of key's problem on key's device (any
 * versions), inside the caller's transaction (pending.c). */
conv_status cache_delete_pending(const conv_cache *c, cache_stmt *slot, const conv_cache_key *key,
                                 conv_error *err);

/* conv_cache_record_pending inside the caller's transaction (pending.c). */
conv_status cache_insert_pending(const conv_cache *c, cache_stmt *slot, const conv_cache_key *key,
                                 conv_pending_reason reason, conv_error *err);

/* The statements cache_write_tuning runs, kept from one tuning to the
 * next; zero-initialized, freed by cache_tuning_writer_free. */
typedef struct cache_tuning_writer {
  cache_stmt delete_trials, delete_pending, insert_trial, insert_pending;
} cache_tuning_writer;

/* conv_cache_replace_tuning inside the caller's transaction
 * (trials_write.c). */
conv_status cache_write_tuning(const conv_cache *c, cache_tuning_writer *w,
                               const conv_cache_key *key, const conv_trial *trials,
                               const char *const *tuned_at, size_t count, conv_error *err);
void cache_tuning_writer_free(cache_tuning_writer *w);

/* ---------------------------------------------------------------- values read back
 * A cache file is untrusted: these say what is wrong with a value read
 * from it (row_checks.c), NULL when nothing is.  The texts are phrases
 * ("holds a NUL byte") for the caller's message. */

/* Longest problem key, device fingerprint or versions text a row may hold:
 * well above any this library writes (a fingerprint is under 512 bytes,
 * the versions under 1200). */
#define CACHE_KEY_TEXT_MAX 2048

/* `bytes` bytes at `text` (NULL: not text): no NUL among them, at most max. */
const char *conv_cache_check_text(const char *text, size_t bytes, size_t max);

/* Column `col` of the current row: text (not a blob, number or NULL),
 * then as conv_cache_check_text.  Read before any other access to the
 * column converts it. */
const char *conv_cache_check_column_text(sqlite3_stmt *st, int col, size_t max);

/* A problem key this version writes: it parses back to a valid problem
 * (conv_problem_from_key). */
const char *conv_cache_check_problem_key(const char *key);

/* A winner a plan may be built from and another may be compared with:
 * CONV_OK, validated (rel_error finite, >= 0) and timed (time_ms finite,
 * > 0). */
const char *conv_cache_check_winner(const conv_trial *winner);

#ifdef __cplusplus
}
#endif
#endif /* CONVTUNE_CACHE_DB_H */
