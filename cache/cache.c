/*
 * cache.c -- the SQLite plan cache (see cache.h): the file, its schema and
 * transactions.  trials_write.c stores trials, trials_read.c reads them
 * back; db.h is what these files share.
 *
 * Schema (version CONV_CACHE_SCHEMA_VERSION):
 *   meta(key TEXT PRIMARY KEY, value TEXT)   -- 'schema_version' -> "3"
 *   trials(id, problem, device, versions, algorithm_id, algorithm, config,
 *          config_text, status, status_name, reason, time_ms, rel_error,
 *          workspace_bytes, heuristic_pick, winner, tuned_at, deterministic)
 *   index trials_key on trials(problem, device, versions)
 *   pending(problem, device, versions, reason, recorded_at)
 *          primary key (problem, device, versions)   -- see pending.c
 * time_ms and rel_error are NULL when not timed / not validated (< 0 in a
 * conv_trial), deterministic when not known (-1).  tuned_at and
 * recorded_at are UTC ISO-8601 ("2025-01-31T12:00:00Z").
 *
 * Version 1 lacked `deterministic`, versions 1 and 2 the pending table.  A
 * writable open of an older file adds what it lacks (the column NULL in
 * every old row, the table empty) and stamps version 3 in one transaction;
 * a read-only open reads the file as it is: every trial's determinism
 * unknown in version 1, nothing pending before version 3.
 *
 * Concurrency: the file uses WAL (synchronous=NORMAL: a crash of the process
 * loses nothing committed; a power loss may lose the last trials, never the
 * file) and a busy timeout; every write transaction is BEGIN IMMEDIATE, so a
 * writer waits for another process's writer instead of failing with
 * SQLITE_BUSY on a read-to-write upgrade.  The connection is opened with
 * SQLITE_OPEN_NOMUTEX: one conv_cache must be used by one thread at a time
 * (the context serialises every call under its lock); separate conv_cache
 * handles may be used from separate threads.
 *
 * Reading: a read-only handle never creates the database nor writes to it.
 * It reads through SQLite's locks, so it sees what writers in other
 * processes commit (and, like any reader of a WAL file, may create the
 * -wal and -shm side files).  Where it may not (a read-only file or
 * directory: a shipped cache) and no WAL content waits beside the file, it
 * opens the file immutable: no locks, no side files, every row the file
 * holds.  A read-only handle on an empty file sees an empty cache.
 *
 * Identity: every write transaction stamps the cache's random identity into
 * the database header (user_version, on page 1), so every transaction in a
 * WAL of this cache holds page 1 and the identity.  A -wal file beside the
 * cache whose committed frames lack page 1, or whose identity differs from
 * the one in the file's own header, was written for another database: SQLite
 * would replay it silently, so the open refuses it before reading anything
 * through it, and a writable handle then closes without a checkpoint.
 *
 * The file is untrusted input (caches are shipped between machines): every
 * value read back is checked before it is used (trials_read.c says how),
 * and a read-only handle lets SQLite read or make no value longer than
 * CACHE_READ_LENGTH_LIMIT.  A file that is not a database, holds another
 * schema version, or holds a schema that differs from its version's in
 * anything (an extra or generated column, a trigger, a view: compared
 * object for object, check_schema) is refused and never written to.
 */
#include "cache/cache.h"
#include "cache/db.h"
#include "cache/file.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sqlite3.h>

#define CACHE_BUSY_TIMEOUT_MS 10000
#define CACHE_RETRY_MS 5 /* between tries to switch a new file to WAL */
/* The longest value (text, blob or row) SQLite reads or makes for a
 * read-only handle: far above the longest row a writer writes (a few KB),
 * far below what a query over a crafted file could be made to compute. */
#define CACHE_READ_LENGTH_LIMIT (64 * 1024)

/* ---------------------------------------------------------------- helpers */

/* Records a SQLite failure: the path, what was being done, SQLite's text.
 * Must be called before the failing statement is finalized. */
conv_status cache_db_fail(const conv_cache *c, conv_error *err, const char *what) {
  return conv_error_set(err, CONV_CACHE_ERROR, "cache %s: %s: %s", c->path, what,
                        sqlite3_errmsg(c->db));
}

conv_status cache_prepare(const conv_cache *c, const char *sql, sqlite3_stmt **st,
                           const char *what, conv_error *err) {
  *st = NULL;
  if (sqlite3_prepare_v2(c->db, sql, -1, st, NULL) != SQLITE_OK) {
    conv_status s = cache_db_fail(c, err, what);
    (void)sqlite3_finalize(*st); /* NULL after a failed prepare; harmless */
    *st = NULL;
    return s;
  }
  return CONV_OK;
}

/* The return value of sqlite3_finalize repeats the error of the last step,
 * which every caller has already checked and reported. */
void cache_finalize(sqlite3_stmt *st) { (void)sqlite3_finalize(st); }

/* Runs one statement to completion, discarding any rows. */
conv_status cache_exec_sql(const conv_cache *c, const char *sql, const char *what,
                            conv_error *err) {
  sqlite3_stmt *st;
  conv_status s = cache_prepare(c, sql, &st, what, err);
  if (s != CONV_OK) return s;
  int rc;
  do rc = sqlite3_step(st);
  while (rc == SQLITE_ROW);
  if (rc != SQLITE_DONE) s = cache_db_fail(c, err, what);
  cache_finalize(st);
  return s;
}

conv_status cache_stmt_ready(const conv_cache *c, cache_stmt *slot, const char *sql,
                             const char *what, conv_error *err) {
  if (slot->st == NULL) return cache_prepare(c, sql, &slot->st, what, err);
  /* The return values repeat the last step's outcome, already reported. */
  (void)sqlite3_reset(slot->st);
  (void)sqlite3_clear_bindings(slot->st);
  return CONV_OK;
}

void cache_stmt_free(cache_stmt *slot) {
  cache_finalize(slot->st);
  slot->st = NULL;
}

/* The identity as SQLite reads it: through the WAL, if there is one. */
static conv_status read_identity(const conv_cache *c, int32_t *identity, conv_error *err) {
  sqlite3_stmt *st;
  conv_status s =
      cache_prepare(c, "PRAGMA user_version", &st, "cannot read the cache identity", err);
  if (s != CONV_OK) return s;
  if (sqlite3_step(st) == SQLITE_ROW)
    *identity = (int32_t)sqlite3_column_int64(st, 0);
  else
    s = cache_db_fail(c, err, "cannot read the cache identity");
  cache_finalize(st);
  return s;
}

/* BEGIN IMMEDIATE, then the identity stamp every write carries (see the
 * top of the file).  A cache without one gets one here, under the write
 * lock, so that two writers of an old cache agree on it. */
conv_status cache_tx_begin(const conv_cache *c, conv_error *err) {
  conv_status s = cache_exec_sql(c, "BEGIN IMMEDIATE", "begin transaction", err);
  if (s != CONV_OK) return s;
  int32_t identity = 0;
  s = read_identity(c, &identity, err);
  if (s == CONV_OK && identity == 0) s = cache_file_new_identity(&identity, err);
  if (s == CONV_OK) {
    char sql[64];
    snprintf(sql, sizeof sql, "PRAGMA user_version = %ld", (long)identity);
    s = cache_exec_sql(c, sql, "cannot stamp the cache identity", err);
  }
  if (s != CONV_OK) cache_tx_rollback(c, err);
  return s;
}

/* Rolls back an open transaction (if SQLite has not already done so) after
 * `err` has been filled with the first error, which is kept. */
void cache_tx_rollback(const conv_cache *c, conv_error *err) {
  if (sqlite3_get_autocommit(c->db)) return; /* no transaction left open */
  conv_error ignored;
  if (cache_exec_sql(c, "ROLLBACK", "rollback", &ignored) != CONV_OK && err != NULL) {
    char first[sizeof err->message];
    memcpy(first, err->message, sizeof first);
    first[sizeof first - 1] = '\0';
    conv_error_set(err, err->status, "%s (and %s)", first, ignored.message);
  }
}

conv_status cache_tx_commit(const conv_cache *c, conv_error *err) {
  conv_status s = cache_exec_sql(c, "COMMIT", "commit", err);
  if (s != CONV_OK) cache_tx_rollback(c, err);
  return s;
}

conv_status cache_write_begin(const conv_cache *c, conv_error *err) {
  const conv_status s = cache_check_writable(c, err);
  return s == CONV_OK ? cache_tx_begin(c, err) : s;
}

conv_status cache_tx_end(const conv_cache *c, conv_status s, conv_error *err) {
  if (s == CONV_OK) return cache_tx_commit(c, err);
  cache_tx_rollback(c, err);
  return s;
}

/* Length of s, at most max (s need not be NUL-terminated within max). */
size_t cache_bounded_len(const char *s, size_t max) {
  const char *nul = memchr(s, '\0', max);
  return nul ? (size_t)(nul - s) : max;
}

/* Copies column `col` into dst[size], truncating (at a UTF-8 character
 * boundary) and stopping at an embedded NUL; NULL becomes "". */
void cache_copy_column_text(char *dst, size_t size, sqlite3_stmt *st, int col) {
  const char *src = (const char *)sqlite3_column_text(st, col);
  dst[0] = '\0';
  if (src == NULL) return;
  size_t n = (size_t)sqlite3_column_bytes(st, col);
  n = cache_bounded_len(src, n);
  if (n >= size) {
    n = size - 1;
    while (n > 0 && ((unsigned char)src[n] & 0xC0) == 0x80) n--; /* inside a character */
  }
  memcpy(dst, src, n);
  dst[n] = '\0';
}

int cache_bind_key(sqlite3_stmt *st, int first, const conv_cache_key *key) {
  int rc = sqlite3_bind_text(st, first, key->problem, -1, SQLITE_STATIC);
  if (rc == SQLITE_OK) rc = sqlite3_bind_text(st, first + 1, key->device, -1, SQLITE_STATIC);
  if (rc == SQLITE_OK) rc = sqlite3_bind_text(st, first + 2, key->versions, -1, SQLITE_STATIC);
  return rc;
}

conv_status cache_check_key(const conv_cache *c, const conv_cache_key *key, conv_error *err) {
  if (c == NULL || key == NULL || key->problem == NULL || key->device == NULL ||
      key->versions == NULL)
    return conv_error_set(err, CONV_INVALID_ARGUMENT, "cache: NULL cache or key field");
  return CONV_OK;
}

conv_status cache_check_writable(const conv_cache *c, conv_error *err) {
  if (c->read_only)
    return conv_error_set(err, CONV_CACHE_ERROR, "cache %s: opened read-only", c->path);
  return CONV_OK;
}

/* ---------------------------------------------------------------- schema */

#define META_TABLE_SQL "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)"
#define TRIALS_COLUMNS_V1                                                                        \
  " id INTEGER PRIMARY KEY,"                                                                     \
  " problem TEXT NOT NULL,"                                                                      \
  " device TEXT NOT NULL,"                                                                       \
  " versions TEXT NOT NULL,"                                                                     \
  " algorithm_id INTEGER NOT NULL,"                                                              \
  " algorithm TEXT NOT NULL,"                                                                    \
  " config TEXT NOT NULL,"                                                                       \
  " config_text TEXT NOT NULL,"                                                                  \
  " status INTEGER NOT NULL,"                                                                    \
  " status_name TEXT NOT NULL,"                                                                  \
  " reason TEXT NOT NULL,"                                                                       \
  " time_ms REAL,"                                                                               \
  " rel_error REAL,"                                                                             \
  " workspace_bytes INTEGER NOT NULL,"                                                           \
  " heuristic_pick INTEGER NOT NULL,"                                                            \
  " winner INTEGER NOT NULL DEFAULT 0,"                                                          \
  " tuned_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%SZ', 'now'))"
#define DETERMINISTIC_COLUMN "deterministic INTEGER" /* added by version 2 */
#define TRIALS_TABLE_SQL_V1 "CREATE TABLE IF NOT EXISTS trials (" TRIALS_COLUMNS_V1 ")"
#define TRIALS_TABLE_SQL                                                                         \
  "CREATE TABLE IF NOT EXISTS trials (" TRIALS_COLUMNS_V1 ", " DETERMINISTIC_COLUMN ")"
#define TRIALS_INDEX_SQL                                                                         \
  "CREATE INDEX IF NOT EXISTS trials_key ON trials (problem, device, versions)"

static const char *const schema_sql[] = {META_TABLE_SQL, TRIALS_TABLE_SQL, TRIALS_INDEX_SQL,
                                         PENDING_TABLE_SQL};

/* ---------------------------------------------------------------- schema check */

/* Every object a cache of each schema version holds: a file holding any
 * other (a trigger, a view, another table or index) or one of these
 * defined otherwise (an extra, generated or collated column, a CHECK) is
 * not one of ours.  A crafted schema could run SQL on the cache's own
 * writes or make a read compute gigabytes from a small file. */
typedef struct schema_object {
  const char *type, *name, *table;
  const char *sql; /* NULL: the index SQLite makes for a table's key */
  int first_version, last_version;
} schema_object;

static const schema_object schema_objects[] = {
    {"table", "meta", "meta", META_TABLE_SQL, 1, CONV_CACHE_SCHEMA_VERSION},
    {"index", "sqlite_autoindex_meta_1", "meta", NULL, 1, CONV_CACHE_SCHEMA_VERSION},
    {"table", "trials", "trials", TRIALS_TABLE_SQL_V1, 1, 1},
    {"table", "trials", "trials", TRIALS_TABLE_SQL, 2, CONV_CACHE_SCHEMA_VERSION},
    {"index", "trials_key", "trials", TRIALS_INDEX_SQL, 1, CONV_CACHE_SCHEMA_VERSION},
    {"table", "pending", "pending", PENDING_TABLE_SQL, 3, CONV_CACHE_SCHEMA_VERSION},
    {"index", "sqlite_autoindex_pending_1", "pending", NULL, 3, CONV_CACHE_SCHEMA_VERSION},
};
#define SCHEMA_OBJECTS (sizeof schema_objects / sizeof schema_objects[0])

static bool is_word_char(unsigned char ch) {
  return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
         ch == '_' || ch >= 0x80;
}

/* The next token of SQL text at *p, whitespace skipped: a word, a quoted
 * string or name whole ('', "", ``, []), or one other character.  Returns
 * its start and *len its length (0 at the end); *p moves past it. */
static const char *sql_token(const char **p, size_t *len) {
  const unsigned char *s = (const unsigned char *)*p;
  while (*s == ' ' || (*s >= '\t' && *s <= '\r')) s++;
  const unsigned char *start = s;
  if (is_word_char(*s)) {
    while (is_word_char(*s)) s++;
  } else if (*s == '\'' || *s == '"' || *s == '`' || *s == '[') {
    const unsigned char close = *s == '[' ? ']' : *s;
    for (s++; *s != '\0'; s++) {
      if (*s != close) continue;
      if (close != ']' && s[1] == close) { /* a doubled quote stands for one */
        s++;
        continue;
      }
      s++;
      break;
    }
  } else if (*s != '\0') {
    s++;
  }
  *len = (size_t)(s - start);
  *p = (const char *)s;
  return (const char *)start;
}

/* Whether SQL text `found` says what `expected` says, token for token:
 * words in any case, quoted text exactly, whitespace aside, and the
 * expected "IF NOT EXISTS" aside (SQLite keeps a CREATE without it). */
static bool same_sql(const char *found, const char *expected) {
  for (;;) {
    size_t found_len, expected_len;
    const char *f = sql_token(&found, &found_len), *e = sql_token(&expected, &expected_len);
    if (expected_len == 2 && sqlite3_strnicmp(e, "IF", 2) == 0) {
      (void)sql_token(&expected, &expected_len); /* NOT */
      (void)sql_token(&expected, &expected_len); /* EXISTS */
      e = sql_token(&expected, &expected_len);
    }
    if (found_len != expected_len) return false;
    if (expected_len == 0) return true;
    bool quoted = !is_word_char((unsigned char)e[0]);
    if (quoted ? memcmp(f, e, expected_len) != 0 : sqlite3_strnicmp(f, e, (int)expected_len) != 0)
      return false;
  }
}

/* A name from the file for a message: printable ASCII, the rest '?'. */
static void printable_name(char *dst, size_t size, const unsigned char *name) {
  size_t n = 0;
  for (; name != NULL && name[n] != '\0' && n + 1 < size; n++)
    dst[n] = name[n] >= 0x20 && name[n] < 0x7f ? (char)name[n] : '?';
  dst[n] = '\0';
}

static const schema_object *expected_object(const char *type, const char *name, int version) {
  for (size_t i = 0; i < SCHEMA_OBJECTS; i++) {
    const schema_object *o = &schema_objects[i];
    if (version >= o->first_version && version <= o->last_version && strcmp(type, o->type) == 0 &&
        strcmp(name, o->name) == 0)
      return o;
  }
  return NULL;
}

/* Compares the file's schema with version `version`'s, object for object
 * (schema_objects); CONV_CACHE_ERROR naming the first difference. */
static conv_status check_schema(const conv_cache *c, int version, conv_error *err) {
  static const char what[] = "cannot read the schema";
  sqlite3_stmt *st;
  conv_status s =
      cache_prepare(c, "SELECT type, name, tbl_name, sql FROM sqlite_master", &st, what, err);
  if (s != CONV_OK) return s;
  unsigned seen = 0;
  int rc;
  while (s == CONV_OK && (rc = sqlite3_step(st)) == SQLITE_ROW) {
    const unsigned char *text[4];
    for (int i = 0; i < 4; i++) text[i] = sqlite3_column_text(st, i);
    const char *type = text[0] ? (const char *)text[0] : "";
    const char *name = text[1] ? (const char *)text[1] : "";
    const char *table = text[2] ? (const char *)text[2] : "";
    const char *sql = (const char *)text[3];
    char shown_type[32], shown_name[64];
    printable_name(shown_type, sizeof shown_type, text[0]);
    printable_name(shown_name, sizeof shown_name, text[1]);
    const schema_object *o = expected_object(type, name, version);
    if (o == NULL) {
      s = conv_error_set(err, CONV_CACHE_ERROR,
                         "cache %s: holds %s %s, which no convtune cache has (a crafted or "
                         "foreign file); leaving it untouched",
                         c->path, shown_type, shown_name);
    } else if (strcmp(table, o->table) != 0 ||
               (o->sql == NULL ? sql != NULL : sql == NULL || !same_sql(sql, o->sql))) {
      s = conv_error_set(err, CONV_CACHE_ERROR,
                         "cache %s: its %s %s differs from convtune's schema version %d (a "
                         "crafted or altered file); leaving it untouched",
                         c->path, shown_type, shown_name, version);
    } else {
      seen |= 1u << (o - schema_objects);
    }
  }
  if (s == CONV_OK && rc != SQLITE_DONE) s = cache_db_fail(c, err, what);
  cache_finalize(st);
  for (size_t i = 0; s == CONV_OK && i < SCHEMA_OBJECTS; i++) {
    const schema_object *o = &schema_objects[i];
    if (version >= o->first_version && version <= o->last_version && !(seen & 1u << i))
      s = conv_error_set(err, CONV_CACHE_ERROR,
                         "cache %s: schema version %d without its %s %s (corrupt); leaving it "
                         "untouched",
                         c->path, version, o->type, o->name);
  }
  return s;
}

/* A generated column of meta would be computed by reading the version,
 * before the schema is compared: refused first. */
static conv_status check_meta_columns(const conv_cache *c, conv_error *err) {
  static const char what[] = "cannot read the meta table's columns";
  sqlite3_stmt *st;
  conv_status s = cache_prepare(
      c, "SELECT count(*) FROM pragma_table_xinfo('meta') WHERE hidden <> 0", &st, what, err);
  if (s != CONV_OK) return s;
  if (sqlite3_step(st) != SQLITE_ROW)
    s = cache_db_fail(c, err, what);
  else if (sqlite3_column_int64(st, 0) != 0)
    s = conv_error_set(err, CONV_CACHE_ERROR,
                       "cache %s: its table meta has a generated column, which no convtune "
                       "cache has (a crafted or altered file); leaving it untouched",
                       c->path);
  cache_finalize(st);
  return s;
}

/* Reads the schema without writing anything.  *empty: the database has no
 * schema objects at all; else *version_out is its version, 1 to 3.
 * Anything but empty or one of our schemas, exactly, is CONV_CACHE_ERROR. */
static conv_status inspect(const conv_cache *c, bool *empty, int *version_out, conv_error *err) {
  sqlite3_stmt *st;
  conv_status s = cache_prepare(
      c,
      "SELECT count(*),"
      " coalesce(sum(type = 'table' AND name = 'meta'), 0),"
      " coalesce(sum(type = 'table' AND name = 'trials'), 0)"
      " FROM sqlite_master",
      &st, "cannot read the schema (not a convtune cache?)", err);
  if (s != CONV_OK) return s;
  int rc = sqlite3_step(st);
  if (rc != SQLITE_ROW) {
    s = cache_db_fail(c, err, "cannot read the schema (not a convtune cache?)");
    cache_finalize(st);
    return s;
  }
  sqlite3_int64 objects = sqlite3_column_int64(st, 0);
  bool has_meta = sqlite3_column_int64(st, 1) > 0;
  bool has_trials = sqlite3_column_int64(st, 2) > 0;
  cache_finalize(st);
  if (objects == 0) {
    *empty = true;
    return CONV_OK;
  }
  if (!has_meta)
    return conv_error_set(err, CONV_CACHE_ERROR,
                          "cache %s: not a convtune cache (no meta table, schema version "
                          "unknown; this convtune uses version %d); leaving it untouched",
                          c->path, CONV_CACHE_SCHEMA_VERSION);
  if ((s = check_meta_columns(c, err)) != CONV_OK) return s;

  s = cache_prepare(c, "SELECT value FROM meta WHERE key = 'schema_version'", &st,
                    "cannot read the schema version", err);
  if (s != CONV_OK) return s;
  char version[64];
  rc = sqlite3_step(st);
  if (rc == SQLITE_ROW) {
    cache_copy_column_text(version, sizeof version, st, 0);
  } else if (rc == SQLITE_DONE) {
    snprintf(version, sizeof version, "%s", "(none)");
  } else {
    s = cache_db_fail(c, err, "cannot read the schema version");
    cache_finalize(st);
    return s;
  }
  cache_finalize(st);

  int known = 0;
  for (int v = 1; v <= CONV_CACHE_SCHEMA_VERSION && known == 0; v++) {
    char text[16];
    snprintf(text, sizeof text, "%d", v);
    if (strcmp(version, text) == 0) known = v;
  }
  if (known == 0)
    return conv_error_set(err, CONV_CACHE_ERROR,
                          "cache %s: schema version %s, but this convtune uses version %d; "
                          "leaving it untouched (use another cache path)",
                          c->path, version, CONV_CACHE_SCHEMA_VERSION);
  if (!has_trials)
    return conv_error_set(err, CONV_CACHE_ERROR,
                          "cache %s: schema version %s but no trials table (corrupt)", c->path,
                          version);
  if ((s = check_schema(c, known, err)) != CONV_OK) return s;
  *empty = false;
  *version_out = known;
  return CONV_OK;
}

/* Creates the schema in one BEGIN IMMEDIATE transaction.  The schema is
 * inspected again under the write lock: another process may have created it
 * (or something else) since our first look. */
static conv_status create_schema(conv_cache *c, conv_error *err) {
  conv_status s = cache_tx_begin(c, err);
  if (s != CONV_OK) return s;
  bool empty = false;
  int found_version = 0;
  s = inspect(c, &empty, &found_version, err);
  if (s != CONV_OK) goto fail;
  if (!empty) { /* someone else created it */
    c->schema_version = found_version;
    return cache_tx_commit(c, err);
  }

  for (size_t i = 0; i < sizeof schema_sql / sizeof schema_sql[0]; i++) {
    s = cache_exec_sql(c, schema_sql[i], "cannot create the schema", err);
    if (s != CONV_OK) goto fail;
  }
  sqlite3_stmt *st;
  s = cache_prepare(c, "INSERT OR IGNORE INTO meta (key, value) VALUES ('schema_version', ?1)", &st,
                    "cannot write the schema version", err);
  if (s != CONV_OK) goto fail;
  char version[16];
  snprintf(version, sizeof version, "%d", CONV_CACHE_SCHEMA_VERSION);
  if (sqlite3_bind_text(st, 1, version, -1, SQLITE_STATIC) != SQLITE_OK ||
      sqlite3_step(st) != SQLITE_DONE) {
    s = cache_db_fail(c, err, "cannot write the schema version");
    cache_finalize(st);
    goto fail;
  }
  cache_finalize(st);
  c->schema_version = CONV_CACHE_SCHEMA_VERSION;
  return cache_tx_commit(c, err);

fail:
  cache_tx_rollback(c, err);
  return s;
}

/* Brings a version-1 or -2 file to version 3 in one BEGIN IMMEDIATE
 * transaction, inspecting it again under the write lock (another process
 * may have upgraded it meanwhile).  Old rows keep NULL: their determinism
 * is not known; nothing is pending. */
static conv_status upgrade_schema(conv_cache *c, conv_error *err) {
  static const char what[] = "cannot upgrade the schema to version 3";
  conv_status s = cache_tx_begin(c, err);
  if (s != CONV_OK) return s;
  bool empty = false;
  int version = 0;
  CONV_TRY(s, inspect(c, &empty, &version, err), fail);
  if (version == 1)
    CONV_TRY(s,
             cache_exec_sql(c, "ALTER TABLE trials ADD COLUMN " DETERMINISTIC_COLUMN, what, err),
             fail);
  if (version < 3) {
    CONV_TRY(s, cache_exec_sql(c, PENDING_TABLE_SQL, what, err), fail);
    CONV_TRY(s, cache_exec_sql(c, "UPDATE meta SET value = '3' WHERE key = 'schema_version'",
                               what, err), fail);
  }
  CONV_TRY(s, cache_tx_commit(c, err), fail);
  c->schema_version = 3;
  return CONV_OK;

fail:
  cache_tx_rollback(c, err);
  return s;
}

/* WAL lets readers go on while one process writes.  Some file systems cannot
 * do WAL: SQLite then keeps its rollback journal, which is slower under
 * contention but still correct, so that is not an error.
 * Switching a new file to WAL needs an exclusive lock, and SQLite answers
 * SQLITE_BUSY at once, without the busy handler, while another process holds
 * the file (two processes creating one cache): retry for the busy timeout. */
static conv_status enable_wal(const conv_cache *c, conv_error *err) {
  for (int waited_ms = 0;; waited_ms += CACHE_RETRY_MS) {
    sqlite3_stmt *st;
    conv_status s = cache_prepare(c, "PRAGMA journal_mode = WAL", &st, "cannot set WAL mode", err);
    if (s != CONV_OK) return s;
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
      const char *mode = (const char *)sqlite3_column_text(st, 0);
      bool wal = mode != NULL && sqlite3_stricmp(mode, "wal") == 0;
      cache_finalize(st);
      if (!wal) return CONV_OK;
      return cache_exec_sql(c, "PRAGMA synchronous = NORMAL", "cannot set synchronous mode", err);
    }
    if ((rc & 0xff) == SQLITE_BUSY && waited_ms < CACHE_BUSY_TIMEOUT_MS) {
      cache_finalize(st);
      sqlite3_sleep(CACHE_RETRY_MS);
      continue;
    }
    s = cache_db_fail(c, err, "cannot set WAL mode");
    cache_finalize(st);
    return s;
  }
}

/* ---------------------------------------------------------------- open, close */

/* Refuses a -wal file written for another database (see the top of the
 * file), before anything is read through it. */
static conv_status check_wal_owner(const conv_cache *c, conv_error *err) {
  int32_t own = cache_file_header_identity(c->path);
  if (own == 0 || !cache_file_wal_has_content(c->path)) return CONV_OK; /* nothing to compare */
  /* Without page 1 SQLite would read the identity from the file itself. */
  bool committed = false, page_one = false;
  cache_file_wal_frames(c->path, &committed, &page_one);
  if (committed && !page_one)
    return conv_error_set(err, CONV_CACHE_ERROR,
                          "cache %s: %s-wal belongs to another database (its changes do not "
                          "carry this cache's identity) and was not applied; move it away (no "
                          "process can be using it for this file)",
                          c->path, c->path);
  int32_t seen = 0;
  conv_status s = read_identity(c, &seen, err);
  if (s != CONV_OK || seen == own) return s;
  return conv_error_set(err, CONV_CACHE_ERROR,
                        "cache %s: %s-wal belongs to another database (identity %ld, this "
                        "file's %ld) and was not applied; move it away (no process can be "
                        "using it for this file)",
                        c->path, c->path, (long)seen, (long)own);
}

/* Whether SQLite failed for want of write access to the file or its
 * directory: a read-only handle on a WAL database must be able to create
 * and write the -shm file. */
static bool failed_for_write_access(const conv_cache *c) {
  int code = sqlite3_errcode(c->db);
  return code == SQLITE_READONLY || code == SQLITE_CANTOPEN;
}

static conv_status open_connection(conv_cache *c, bool immutable, conv_error *err) {
  int flags = SQLITE_OPEN_NOMUTEX;
  flags |= c->read_only ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE;
  char *uri = NULL;
  if (immutable) {
    if ((uri = cache_file_immutable_uri(c->path)) == NULL)
      return conv_error_set(err, CONV_OUT_OF_MEMORY, "cache %s: out of memory", c->path);
    flags |= SQLITE_OPEN_URI;
  }
  int rc = sqlite3_open_v2(uri ? uri : c->path, &c->db, flags, NULL);
  free(uri);
  if (rc != SQLITE_OK)
    return conv_error_set(err, CONV_CACHE_ERROR, "cache %s: cannot open%s: %s", c->path,
                          c->read_only ? " read-only" : "",
                          c->db ? sqlite3_errmsg(c->db) : sqlite3_errstr(rc));
  /* Until the WAL beside the file is known to be this cache's, closing
   * must not checkpoint it into the file. */
  if (!c->read_only &&
      sqlite3_db_config(c->db, SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1, NULL) != SQLITE_OK)
    return cache_db_fail(c, err, "cannot hold back the checkpoint on close");
  if (sqlite3_busy_timeout(c->db, CACHE_BUSY_TIMEOUT_MS) != SQLITE_OK)
    return cache_db_fail(c, err, "cannot set the busy timeout");
  if (c->read_only) (void)sqlite3_limit(c->db, SQLITE_LIMIT_LENGTH, CACHE_READ_LENGTH_LIMIT);
  return CONV_OK;
}

/* Opens the connection and reads the schema (*empty: there is none). */
static conv_status open_and_inspect(conv_cache *c, bool immutable, bool *empty, conv_error *err) {
  conv_status s = open_connection(c, immutable, err);
  if (s == CONV_OK) s = check_wal_owner(c, err);
  if (s == CONV_OK) s = inspect(c, empty, &c->schema_version, err);
  return s;
}

/* Read-only: through SQLite's locks, which see the commits of writers in
 * other processes; where the file or its directory is read-only and no
 * WAL content waits beside the file (a shipped cache), immutable. */
static conv_status open_for_reading(conv_cache *c, bool *empty, conv_error *err) {
  conv_status s = open_and_inspect(c, false, empty, err);
  if (s == CONV_OK || !failed_for_write_access(c)) return s;
  if (cache_file_wal_has_content(c->path))
    return conv_error_set(err, CONV_CACHE_ERROR,
                          "cache %s: changes in %s-wal are not in the file yet and cannot be "
                          "read from a read-only file or directory (%s); open it once with "
                          "write access (convtune tune) to fold them in, or copy the cache",
                          c->path, c->path, sqlite3_errmsg(c->db));
  (void)sqlite3_close_v2(c->db);
  c->db = NULL;
  return open_and_inspect(c, true, empty, err);
}

conv_status conv_cache_open(const char *path, bool read_only, conv_cache **cache,
                            conv_error *err) {
  if (path == NULL || cache == NULL)
    return conv_error_set(err, CONV_INVALID_ARGUMENT, "cache open: NULL path or output");
  conv_status s = cache_file_check_kind(path, err);
  if (s != CONV_OK) return s;
  conv_cache *c = calloc(1, sizeof *c);
  size_t len = strlen(path);
  if (c == NULL || (c->path = malloc(len + 1)) == NULL) {
    free(c);
    return conv_error_set(err, CONV_OUT_OF_MEMORY, "cache %s: out of memory", path);
  }
  memcpy(c->path, path, len + 1);
  c->read_only = read_only;

  bool empty = false;
  if (read_only) {
    CONV_TRY(s, open_for_reading(c, &empty, err), fail);
    c->empty = empty;
  } else {
    CONV_TRY(s, open_and_inspect(c, false, &empty, err), fail);
    /* ":memory:" and temporary databases have no file name and no WAL. */
    const char *file = sqlite3_db_filename(c->db, "main");
    if (file != NULL && file[0] != '\0') CONV_TRY(s, enable_wal(c, err), fail);
    if (empty) CONV_TRY(s, create_schema(c, err), fail);
    if (c->schema_version < CONV_CACHE_SCHEMA_VERSION) CONV_TRY(s, upgrade_schema(c, err), fail);
    if (sqlite3_db_config(c->db, SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 0, NULL) != SQLITE_OK) {
      s = cache_db_fail(c, err, "cannot restore the checkpoint on close");
      goto fail;
    }
  }
  *cache = c;
  return CONV_OK;

fail:
  conv_cache_close(c);
  return s;
}

void conv_cache_close(conv_cache *cache) {
  if (cache == NULL) return;
  /* Every statement is finalized on every path, so close cannot be busy;
   * close_v2 would still free everything if it were. */
  (void)sqlite3_close_v2(cache->db);
  free(cache->path);
  free(cache);
}
