/*
 * merge.c -- conv_cache_merge, conv_cache_merge_sources and
 * conv_cache_merge_winners (convtune.h, "caches"): copying finished
 * tunings from cache files into another, as `convtune merge`, `export`
 * (--winners-only: each tuning's winner and heuristic pick only) and
 * `import` do.
 *
 * All or nothing per call.  Every source is read and checked before the
 * destination is opened: every row's key texts (no NUL, which would make
 * C strings name another key; not too long), each tuning's problem key,
 * its one winner (valid, validated, timed), every trial decoded.  Then one
 * write transaction of the destination reads the sources again, compares
 * each tuning's winner with the destination's inside it (so merges running
 * at once keep the fastest winner) and writes; any failure rolls it all
 * back.  The work goes by problem: a problem's trials are listed once (the
 * first column of the index) and handed to its tunings by device and
 * versions, so a key tuned on thousands of devices costs as many rows, not
 * their square.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cache/cache.h"
#include "cache/db.h"
#include "cache/file.h"

/* What the write does with a tuning; also the index of its count. */
typedef enum copy_action { COPY_ADD = 0, COPY_REPLACE = 1, COPY_KEEP = 2 } copy_action;

/* A finished tuning of a source. */
typedef struct tuning {
  char *problem, *device, *versions;
  long long winner_row; /* for messages */
  size_t rows;          /* rows of exactly this key in the source */
  double winner_ms;     /* as last read */
  bool incomplete;      /* pending "incomplete" in the source */
  bool stale;           /* pending "stale" (carried over) in the source */
  copy_action action;
  size_t seen, winners_seen; /* while its problem's trials are read */
} tuning;

typedef struct source {
  const char *path;
  bool winners_only; /* copy each tuning's winner and heuristic pick only */
  conv_cache *cache;
  tuning *tunings; /* ordered by problem, device, versions */
  size_t count, cap;
} source;

/* The trials of one problem's tunings as read for writing: trials[i] and
 * tuned_at[i] belong to tunings[owner[i]]. */
typedef struct group_rows {
  conv_trial *trials;
  char **tuned_at;
  size_t *owner;
  size_t count, cap;
} group_rows;

static char *dup_string(const char *s) {
  size_t n = strlen(s) + 1;
  char *d = malloc(n);
  if (d != NULL) memcpy(d, s, n);
  return d;
}

static conv_status out_of_memory(conv_error *err) {
  return conv_error_set(err, CONV_OUT_OF_MEMORY, "cache merge: out of memory");
}

static void tuning_free(tuning *t) {
  free(t->problem), free(t->device), free(t->versions);
  t->problem = t->device = t->versions = NULL;
}

static void source_free(source *src) {
  for (size_t i = 0; i < src->count; i++) tuning_free(&src->tunings[i]);
  free(src->tunings);
  conv_cache_close(src->cache);
}

/* ---------------------------------------------------------------- the tunings of a source */

/* The key scan's columns. */
enum { SCAN_ID, SCAN_PROBLEM, SCAN_DEVICE, SCAN_VERSIONS, SCAN_WINNER };

/* Takes the run of rows of one key that the scan has just finished: a
 * finished tuning (of `device`, when given) joins the list; one with
 * more than one winner refuses the source. */
static conv_status end_run(source *src, tuning *run, size_t winners, const char *device,
                           conv_error *err) {
  bool wanted = winners > 0 && (device == NULL || strcmp(run->device, device) == 0);
  conv_status s = CONV_OK;
  const char *why = wanted ? conv_cache_check_problem_key(run->problem) : NULL;
  if (wanted && winners > 1)
    s = conv_error_set(err, CONV_CACHE_ERROR,
                       "cache %s: row %lld: the tuning of %s has %zu winners; nothing was copied",
                       src->path, run->winner_row, run->problem, winners);
  else if (why != NULL)
    s = conv_error_set(err, CONV_CACHE_ERROR,
                       "cache %s: row %lld: its problem %s; nothing was copied", src->path,
                       run->winner_row, why);
  if (s != CONV_OK || !wanted) {
    tuning_free(run);
    return s;
  }
  if (src->count == src->cap) {
    size_t cap = src->cap ? 2 * src->cap : 64;
    tuning *grown = realloc(src->tunings, cap * sizeof *grown);
    if (grown == NULL) {
      tuning_free(run);
      return out_of_memory(err);
    }
    src->tunings = grown, src->cap = cap;
  }
  src->tunings[src->count++] = *run;
  return CONV_OK;
}

/* Whether the scan's current row belongs to the run of `run`'s key. */
static bool same_key(sqlite3_stmt *st, const tuning *run) {
  return run->problem != NULL &&
         strcmp((const char *)sqlite3_column_text(st, SCAN_PROBLEM), run->problem) == 0 &&
         strcmp((const char *)sqlite3_column_text(st, SCAN_DEVICE), run->device) == 0 &&
         strcmp((const char *)sqlite3_column_text(st, SCAN_VERSIONS), run->versions) == 0;
}

/* Checks the current row's key texts; CONV_CACHE_ERROR naming what is wrong. */
static conv_status check_key_texts(const source *src, sqlite3_stmt *st, conv_error *err) {
  static const char *const names[] = {"problem", "device", "versions"};
  for (int col = SCAN_PROBLEM; col <= SCAN_VERSIONS; col++) {
    const char *why = conv_cache_check_column_text(st, col, CACHE_KEY_TEXT_MAX);
    if (why != NULL)
      return conv_error_set(err, CONV_CACHE_ERROR,
                            "cache %s: row %lld: its %s %s; nothing was copied", src->path,
                            (long long)sqlite3_column_int64(st, SCAN_ID), names[col - SCAN_PROBLEM],
                            why);
  }
  return CONV_OK;
}

/* Lists the source's finished tunings (of `device`, when given) with the
 * rows of each key, checking the key texts of every row.  Ordered by
 * bytes, so that one key's rows are adjacent whatever collation a crafted
 * schema declares. */
static conv_status list_tunings(source *src, const char *device, conv_error *err) {
  static const char what[] = "cannot list its tunings";
  if (src->cache->empty) return CONV_OK;
  sqlite3_stmt *st;
  conv_status s = cache_prepare(src->cache,
                                "SELECT id, problem, device, versions, winner <> 0 FROM trials"
                                " ORDER BY problem COLLATE BINARY, device COLLATE BINARY,"
                                " versions COLLATE BINARY, id",
                                &st, what, err);
  if (s != CONV_OK) return s;
  tuning run = {0};
  size_t winners = 0;
  int rc = SQLITE_DONE;
  while (s == CONV_OK && (rc = sqlite3_step(st)) == SQLITE_ROW) {
    if ((s = check_key_texts(src, st, err)) != CONV_OK) break;
    if (!same_key(st, &run)) {
      if (run.problem != NULL && (s = end_run(src, &run, winners, device, err)) != CONV_OK) break;
      memset(&run, 0, sizeof run);
      winners = 0;
      run.problem = dup_string((const char *)sqlite3_column_text(st, SCAN_PROBLEM));
      run.device = dup_string((const char *)sqlite3_column_text(st, SCAN_DEVICE));
      run.versions = dup_string((const char *)sqlite3_column_text(st, SCAN_VERSIONS));
      if (run.problem == NULL || run.device == NULL || run.versions == NULL) {
        tuning_free(&run);
        s = out_of_memory(err);
        break;
      }
    }
    run.rows++;
    if (sqlite3_column_int64(st, SCAN_WINNER) != 0 && winners++ == 0)
      run.winner_row = (long long)sqlite3_column_int64(st, SCAN_ID);
  }
  if (s == CONV_OK && rc != SQLITE_DONE) s = cache_db_fail(src->cache, err, what);
  if (s == CONV_OK && run.problem != NULL)
    s = end_run(src, &run, winners, device, err);
  else
    tuning_free(&run);
  cache_finalize(st);
  return s;
}

/* ---------------------------------------------------------------- one problem's trials */

/* Reading the trials of the tunings [first, first + n) of one problem. */
typedef struct group_read {
  const source *src;
  tuning *first;
  size_t n;
  group_rows *rows; /* NULL: only check */
  conv_status status;
  conv_error *err;
} group_read;

/* The tuning of this key among items[0 .. n), ordered by key as bytes
 * (strcmp's order for texts without NUL), or NULL. */
static tuning *find_tuning(tuning *items, size_t n, const char *problem, const char *device,
                           const char *versions) {
  size_t lo = 0, hi = n;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    tuning *t = &items[mid];
    int c = strcmp(problem, t->problem);
    if (c == 0) c = strcmp(device, t->device);
    if (c == 0) c = strcmp(versions, t->versions);
    if (c == 0) return t;
    if (c < 0)
      hi = mid;
    else
      lo = mid + 1;
  }
  return NULL;
}

static bool keep_row(group_rows *r, const conv_cache_row *row, size_t owner) {
  if (r->count == r->cap) {
    size_t cap = r->cap ? 2 * r->cap : 64;
    conv_trial *trials = realloc(r->trials, cap * sizeof *trials);
    if (trials != NULL) r->trials = trials;
    char **tuned_at = trials ? realloc(r->tuned_at, cap * sizeof *tuned_at) : NULL;
    if (tuned_at != NULL) r->tuned_at = tuned_at;
    size_t *owners = tuned_at ? realloc(r->owner, cap * sizeof *owners) : NULL;
    if (owners == NULL) return false;
    r->owner = owners, r->cap = cap;
  }
  if ((r->tuned_at[r->count] = dup_string(row->tuned_at)) == NULL) return false;
  r->trials[r->count] = *row->trial;
  r->owner[r->count++] = owner;
  return true;
}

static void group_rows_free(group_rows *r) {
  for (size_t i = 0; i < r->count; i++) free(r->tuned_at[i]);
  free(r->tuned_at), free(r->trials), free(r->owner);
  memset(r, 0, sizeof *r);
}

static int read_row(const conv_cache_row *row, void *user) {
  group_read *g = user;
  /* NULL: a tuning not copied (unfinished, or of another device). */
  tuning *t = find_tuning(g->first, g->n, row->problem, row->device, row->versions);
  if (t == NULL) return 0;
  t->seen++;
  if (row->trial->winner) {
    t->winners_seen++;
    const char *why = conv_cache_check_winner(row->trial);
    if (why != NULL) {
      g->status = conv_error_set(g->err, CONV_CACHE_ERROR,
                                 "cache %s: row %lld: the winner of %s %s; nothing was copied",
                                 g->src->path, t->winner_row, t->problem, why);
      return 1;
    }
    if (g->rows != NULL && row->trial->time_ms != t->winner_ms) {
      g->status = conv_error_set(g->err, CONV_CACHE_ERROR,
                                 "cache %s: row %lld: the winner of %s changed while it was "
                                 "read; nothing was copied",
                                 g->src->path, t->winner_row, t->problem);
      return 1;
    }
    t->winner_ms = row->trial->time_ms;
  }
  /* A compact copy keeps what list, verify and a plan's lookup read: the
   * winner, and cuDNN's heuristic pick (the default it is compared with). */
  bool wanted = !g->src->winners_only || row->trial->winner || row->trial->heuristic_pick;
  if (g->rows != NULL && wanted && !keep_row(g->rows, row, (size_t)(t - g->first))) {
    g->status = out_of_memory(g->err);
    return 1;
  }
  return 0;
}

/* Reads (and checks) the trials of the tunings [first, first + n), all of
 * one problem, in one listing; keeps them in *rows unless NULL. */
static conv_status read_group(const source *src, tuning *first, size_t n, group_rows *rows,
                              conv_error *err) {
  for (size_t i = 0; i < n; i++) first[i].seen = first[i].winners_seen = 0;
  group_read g = {src, first, n, rows, CONV_OK, err};
  conv_status s = conv_cache_list_trials(src->cache, first->problem, read_row, &g, err);
  if (s == CONV_OK) s = g.status;
  for (size_t i = 0; s == CONV_OK && i < n; i++)
    if (first[i].seen != first[i].rows || first[i].winners_seen != 1)
      s = conv_error_set(err, CONV_CACHE_ERROR,
                         "cache %s: the tuning of row %lld changed while it was read (%zu rows, "
                         "then %zu with %zu winners); nothing was copied",
                         src->path, first[i].winner_row, first[i].rows, first[i].seen,
                         first[i].winners_seen);
  return s;
}

/* How many tunings from src->tunings[first] on are of its problem. */
static size_t group_size(const source *src, size_t first) {
  size_t end = first + 1;
  while (end < src->count && strcmp(src->tunings[end].problem, src->tunings[first].problem) == 0)
    end++;
  return end - first;
}

/* ---------------------------------------------------------------- reading, checking, writing */

/* Marks the tunings carried over ("stale") and those a budget cut short:
 * pending with any other reason but "untuned" (as conv_cache_find_pending
 * reads it). */
static int mark_incomplete(const conv_cache_pending_row *row, void *user) {
  const source *src = user;
  tuning *t = find_tuning(src->tunings, src->count, row->problem, row->device, row->versions);
  if (t == NULL || strcmp(row->reason, conv_pending_reason_text(CONV_PENDING_UNTUNED)) == 0)
    return 0;
  if (strcmp(row->reason, conv_pending_reason_text(CONV_PENDING_STALE)) == 0)
    t->stale = true;
  else
    t->incomplete = true;
  return 0;
}

/* Opens a source and checks all of it that a merge would copy. */
static conv_status check_source(source *src, const char *device, conv_error *err) {
  conv_status s = conv_cache_open(src->path, true, &src->cache, err);
  if (s == CONV_OK) s = list_tunings(src, device, err);
  for (size_t first = 0, n; s == CONV_OK && first < src->count; first += n) {
    n = group_size(src, first);
    s = read_group(src, &src->tunings[first], n, NULL, err);
  }
  if (s == CONV_OK && src->count > 0)
    s = conv_cache_list_pending(src->cache, mark_incomplete, src, err);
  return s;
}

/* The destination's side of a merge: one transaction, its statements kept
 * from one tuning to the next. */
typedef struct destination {
  conv_cache *cache;
  cache_stmt winner;
  cache_tuning_writer writer;
} destination;

/* What to do with tuning t: the destination's tuning of its key stays
 * when its winner is valid and not slower; an invalid one is replaced.
 * Only the winner's status, time and error are read: a row of the
 * destination's that decodes no further is replaced all the same. */
static conv_status choose(destination *into, tuning *t, conv_error *err) {
  static const char what[] = "cannot look up a winner";
  conv_status s = cache_stmt_ready(
      into->cache, &into->winner,
      "SELECT status, time_ms, rel_error, typeof(status) = 'integer',"
      " typeof(time_ms) IN ('integer', 'real'), typeof(rel_error) IN ('integer', 'real')"
      " FROM trials WHERE problem = ?1 AND device = ?2 AND versions = ?3 AND winner <> 0"
      " ORDER BY id DESC LIMIT 1",
      what, err);
  if (s != CONV_OK) return s;
  const conv_cache_key key = {t->problem, t->device, t->versions};
  sqlite3_stmt *st = into->winner.st;
  int rc = cache_bind_key(st, 1, &key);
  if (rc == SQLITE_OK) rc = sqlite3_step(st);
  if (rc == SQLITE_DONE) {
    t->action = COPY_ADD;
    return CONV_OK;
  }
  if (rc != SQLITE_ROW) return cache_db_fail(into->cache, err, what);
  conv_trial theirs = {.status = CONV_INTERNAL, .time_ms = -1, .rel_error = -1};
  if (sqlite3_column_int(st, 3) && sqlite3_column_int64(st, 0) == CONV_OK) theirs.status = CONV_OK;
  if (sqlite3_column_int(st, 4)) theirs.time_ms = sqlite3_column_double(st, 1);
  if (sqlite3_column_int(st, 5)) theirs.rel_error = sqlite3_column_double(st, 2);
  (void)sqlite3_reset(st); /* done with the row before the writes that follow */
  bool theirs_stays = conv_cache_check_winner(&theirs) == NULL && !(t->winner_ms < theirs.time_ms);
  t->action = theirs_stays ? COPY_KEEP : COPY_REPLACE;
  return CONV_OK;
}

/* Writes the group's tunings that `choose` picked, each with its rows in
 * the order listed, inside into's transaction. */
static conv_status write_group(destination *into, tuning *first, size_t n,
                               const group_rows *rows, conv_error *err) {
  /* The rows sorted by tuning (counting sort): tuning i's are
   * [start[i], start[i + 1]). */
  size_t *start = calloc(n + 1, sizeof *start), *next = malloc((n + 1) * sizeof *next);
  conv_trial *trials = malloc((rows->count ? rows->count : 1) * sizeof *trials);
  const char **tuned_at = malloc((rows->count ? rows->count : 1) * sizeof *tuned_at);
  conv_status s = start && next && trials && tuned_at ? CONV_OK : out_of_memory(err);
  if (s == CONV_OK) {
    for (size_t r = 0; r < rows->count; r++) start[rows->owner[r] + 1]++;
    for (size_t i = 0; i < n; i++) start[i + 1] += start[i];
    memcpy(next, start, (n + 1) * sizeof *next);
    for (size_t r = 0; r < rows->count; r++) {
      size_t at = next[rows->owner[r]]++;
      trials[at] = rows->trials[r], tuned_at[at] = rows->tuned_at[r];
    }
  }
  for (size_t i = 0; s == CONV_OK && i < n; i++) {
    tuning *t = &first[i];
    if (t->action == COPY_KEEP) continue;
    const conv_cache_key key = {t->problem, t->device, t->versions};
    s = cache_write_tuning(into->cache, &into->writer, &key, trials + start[i],
                           tuned_at + start[i], start[i + 1] - start[i], err);
    /* A tuning its budget cut short stays marked as such in `into`, so that
     * a later run there finishes it rather than taking it as exhaustive;
     * a carried-over winner stays marked for re-timing. */
    if (s == CONV_OK && (t->incomplete || t->stale))
      s = cache_insert_pending(into->cache, &into->writer.insert_pending, &key,
                               t->incomplete ? CONV_PENDING_INCOMPLETE : CONV_PENDING_STALE, err);
  }
  free(start), free(next), free(trials), free(tuned_at);
  return s;
}

/* Copies a checked source into `into`, inside into's transaction. */
static conv_status write_source(source *src, destination *into, size_t counts[3],
                                conv_error *err) {
  conv_status s = CONV_OK;
  group_rows rows = {0};
  for (size_t first = 0, n; s == CONV_OK && first < src->count; first += n) {
    n = group_size(src, first);
    tuning *t = &src->tunings[first];
    bool copied = false;
    for (size_t i = 0; s == CONV_OK && i < n; i++) {
      s = choose(into, &t[i], err);
      copied = copied || t[i].action != COPY_KEEP;
    }
    /* Read again for the copy, as checked (the file may have changed). */
    if (s == CONV_OK && copied) s = read_group(src, t, n, &rows, err);
    if (s == CONV_OK && copied) s = write_group(into, t, n, &rows, err);
    for (size_t i = 0; s == CONV_OK && i < n; i++) counts[t[i].action]++;
    group_rows_free(&rows);
  }
  return s;
}

/* ---------------------------------------------------------------- the merge */

/* The same file under two names (a symbolic or hard link, another path):
 * the same device and inode.  `into` may not exist yet. */
static bool same_file(const char *a, const char *b) {
  struct stat sa, sb;
  return stat(a, &sa) == 0 && stat(b, &sb) == 0 && sa.st_dev == sb.st_dev &&
         sa.st_ino == sb.st_ino;
}

static conv_status check_arguments(const char *const *from, size_t from_count, const char *into,
                                   conv_error *err) {
  if (from == NULL || from_count == 0 || into == NULL)
    return conv_error_set(err, CONV_INVALID_ARGUMENT, "cache merge: no source or destination");
  for (size_t i = 0; i < from_count; i++) {
    if (from[i] == NULL)
      return conv_error_set(err, CONV_INVALID_ARGUMENT, "cache merge: source %zu is NULL", i);
    if (same_file(from[i], into))
      return conv_error_set(err, CONV_INVALID_ARGUMENT, "cache merge: %s is the file merged into",
                            from[i]);
  }
  /* Before SQLite would open it read-only and fail on its first write. */
  return cache_file_check_writable(into, err);
}

/* Every tuning of every checked source into `into_path`, in one
 * transaction.  A file this merge creates (an export's) is left in
 * rollback-journal mode where no other process has it open: a WAL file
 * cannot be read without its -shm beside it, which a read-only directory
 * (a package's, a system cache's) cannot hold; a context that opens it to
 * write turns WAL back on. */
static conv_status write_all(source *sources, size_t from_count, const char *into_path,
                             size_t (*counts)[3], conv_error *err) {
  destination into = {0};
  struct stat before;
  const bool created = stat(into_path, &before) != 0;
  conv_status s = conv_cache_open(into_path, false, &into.cache, err);
  if (s == CONV_OK) s = cache_tx_begin(into.cache, err);
  if (s != CONV_OK) {
    conv_cache_close(into.cache);
    return s;
  }
  for (size_t i = 0; s == CONV_OK && i < from_count; i++)
    s = write_source(&sources[i], &into, counts[i], err);
  cache_stmt_free(&into.winner);
  cache_tuning_writer_free(&into.writer);
  if (s == CONV_OK)
    s = cache_tx_commit(into.cache, err);
  else
    cache_tx_rollback(into.cache, err);
  /* Best effort: another process that has the new file open (importers
   * racing to create it) keeps it in WAL, which is as correct. */
  conv_error ignored = {CONV_OK, ""};
  if (s == CONV_OK && created)
    (void)cache_exec_sql(into.cache, "PRAGMA journal_mode = DELETE", "journal mode", &ignored);
  conv_cache_close(into.cache);
  return s;
}

static conv_status merge(const char *const *from, size_t from_count, const char *into,
                         const char *device, bool winners_only, size_t (*counts)[3],
                         conv_error *err) {
  conv_status s = check_arguments(from, from_count, into, err);
  if (s != CONV_OK) return s;
  source *sources = calloc(from_count, sizeof *sources);
  if (sources == NULL) return out_of_memory(err);
  size_t tunings = 0;
  for (size_t i = 0; s == CONV_OK && i < from_count; i++) {
    sources[i].path = from[i];
    sources[i].winners_only = winners_only;
    s = check_source(&sources[i], device, err);
    tunings += sources[i].count;
  }
  /* A fingerprint mistyped would make an empty cache to ship. */
  if (s == CONV_OK && device != NULL && tunings == 0)
    s = conv_error_set(err, CONV_INVALID_ARGUMENT,
                       "cache merge: no finished tuning of device \"%.200s\" in %s%s (the "
                       "fingerprints are listed with each winner); nothing was written",
                       device, from[0], from_count > 1 ? " or the other sources" : "");
  if (s == CONV_OK) s = write_all(sources, from_count, into, counts, err);
  for (size_t i = 0; i < from_count; i++) source_free(&sources[i]);
  free(sources);
  return s;
}

/* The public merges: every trial of each tuning, or its winner and
 * heuristic pick only. */
static conv_status merge_public(const char *const *from, size_t from_count, const char *into,
                                const char *device, bool winners_only, size_t *added,
                                size_t *replaced, size_t *kept, char *message,
                                size_t message_size) {
  conv_error err = {CONV_OK, ""};
  size_t (*counts)[3] = calloc(from_count ? from_count : 1, sizeof *counts);
  conv_status s = counts ? merge(from, from_count, into, device, winners_only, counts, &err)
                         : out_of_memory(&err);
  for (size_t i = 0; s == CONV_OK && i < from_count; i++) {
    if (added) added[i] = counts[i][COPY_ADD];
    if (replaced) replaced[i] = counts[i][COPY_REPLACE];
    if (kept) kept[i] = counts[i][COPY_KEEP];
  }
  free(counts);
  if (message != NULL && message_size > 0)
    snprintf(message, message_size, "%s", s == CONV_OK ? "" : err.message);
  return s;
}

conv_status conv_cache_merge_sources(const char *const *from, size_t from_count, const char *into,
                                     const char *device, size_t *added, size_t *replaced,
                                     size_t *kept, char *message, size_t message_size) {
  return merge_public(from, from_count, into, device, false, added, replaced, kept, message,
                      message_size);
}

conv_status conv_cache_merge_winners(const char *from, const char *into, const char *device,
                                     size_t *added, size_t *replaced, size_t *kept, char *message,
                                     size_t message_size) {
  const char *const sources[1] = {from};
  return merge_public(sources, 1, into, device, true, added, replaced, kept, message,
                      message_size);
}

conv_status conv_cache_merge(const char *from, const char *into, const char *device,
                             size_t *added, size_t *replaced, size_t *kept, char *message,
                             size_t message_size) {
  const char *const sources[1] = {from};
  return conv_cache_merge_sources(sources, 1, into, device, added, replaced, kept, message,
                                  message_size);
}
