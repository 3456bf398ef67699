/*
 * cache.h -- the SQLite plan cache.
 *
 * One row per trial (a candidate config timed on a problem), keyed by the
 * canonical problem key, the device fingerprint and the library versions.
 * Rows written under other versions or another device are never returned by
 * lookups (they are stale: re-tune), but stay in the file for reports.
 * Every trial is kept, not only the winner.  The file uses WAL and a busy
 * timeout so that several processes can tune into one cache at once.
 */
#ifndef CONVTUNE_CACHE_H
#define CONVTUNE_CACHE_H

#include <stdbool.h>
#include <stddef.h>

#include "core/core.h"

#ifdef __cplusplus
extern "C" {
#endif

/* 2 added trials.deterministic, 3 the pending table; an older file is
 * upgraded in place when opened for writing and read as it is otherwise
 * (a version-1 trial's determinism then unknown, nothing pending before
 * version 3). */
#define CONV_CACHE_SCHEMA_VERSION 3

typedef struct conv_cache conv_cache;

/* The cache path used when the options name none (path.c): $CONVTUNE_CACHE,
 * else $XDG_CACHE_HOME/convtune/cache.db, else $HOME/.cache/convtune/cache.db.
 * With create_dirs, creates the missing directories (mode 0755). */
conv_status conv_default_cache_path(char *path /* OUT */, size_t size, bool create_dirs,
                                    conv_error *err);

/* mkdir -p for the directories above `path` (the file itself is not made). */
conv_status conv_cache_make_parent_dirs(const char *path, conv_error *err);

/* Which rows a call is about. */
typedef struct conv_cache_key {
  const char *problem;  /* conv_problem_key()                  */
  const char *device;   /* conv_device.key                     */
  const char *versions; /* conv_library_versions()             */
} conv_cache_key;

/* The longest texts, with their NUL, that a row's device, versions and
 * time of tuning may hold: what this library writes (conv_device.key,
 * conv_library_versions(), an ISO-8601 time) with room to spare; a
 * problem key fits CONV_PROBLEM_KEY_MAX.  Reads refuse a longer text, or
 * one with a NUL inside: no writer made it. */
#define CONV_CACHE_DEVICE_MAX 1024
#define CONV_CACHE_VERSIONS_MAX 4096
#define CONV_CACHE_TUNED_AT_MAX 64

/* CONV_OK when key's texts are ones this library writes: a problem key
 * that parses back to its problem (conv_problem_from_key), a device and
 * versions shorter than CONV_CACHE_DEVICE_MAX and CONV_CACHE_VERSIONS_MAX;
 * else CONV_CACHE_ERROR saying which.  A row read from a cache has texts
 * of these lengths without NULs, but its problem key may not parse
 * (another version's, listed as it is): what writes a row under its key
 * (merge) checks the key here first. */
conv_status conv_cache_check_key_texts(const conv_cache_key *key, conv_error *err);

/* One measured (or failed) candidate config. */
typedef struct conv_trial {
  uint32_t algorithm_id;
  char algorithm[32];    /* name, for people reading the file    */
  conv_config config;
  char config_text[128]; /* algorithm's describe()               */
  conv_status status;    /* CONV_OK: valid and timed             */
  char reason[256];      /* why it failed, "" when it did not    */
  double time_ms;        /* median; < 0 when not timed           */
  double rel_error;      /* vs reference; < 0 when not validated */
  size_t workspace_bytes;
  bool heuristic_pick;   /* what an untuned caller gets (tuner)  */
  bool winner;
  bool abandoned;        /* timed, then dropped as slower than the best by
                          * the tuner's margin; not stored as such (the
                          * reason says "abandoned: ...") and false when
                          * read back                                  */
  int deterministic;     /* 1: bit-identical run to run, 0: may
                          * not be, -1: unknown (not prepared)   */
} conv_trial;

/* Whether `t` may be a key's winner: valid (CONV_OK), validated
 * (rel_error >= 0) and timed (time_ms > 0), both finite.  Every winner
 * read from a cache is one; a failed or untimed trial never wins. */
bool conv_cache_trial_can_win(const conv_trial *t);

/* A row as listed, with its key (strings valid during the callback only). */
typedef struct conv_cache_row {
  const char *problem, *device, *versions, *tuned_at;
  const conv_trial *trial;
} conv_cache_row;

/* Returns nonzero to stop the iteration. */
typedef int (*conv_cache_row_fn)(const conv_cache_row *row, void *user);

/* Opens or creates the database at `path` (":memory:" allowed; the directory
 * must exist), sets WAL and a busy timeout, creates the schema or checks its
 * version (a newer or unknown schema is CONV_CACHE_ERROR).  `read_only`
 * opens without creating or writing anything. */
conv_status conv_cache_open(const char *path, bool read_only, conv_cache **cache /* OUT */,
                            conv_error *err);
void conv_cache_close(conv_cache *cache); /* NULL is a no-op */

/* Starts a tuning of `key`: deletes its earlier trials (same problem, device
 * and versions only). */
conv_status conv_cache_begin_tuning(conv_cache *cache, const conv_cache_key *key,
                                    conv_error *err);

/* Stores one trial, committed at once (an interrupted tuning keeps what it
 * measured). */
conv_status conv_cache_add_trial(conv_cache *cache, const conv_cache_key *key,
                                 const conv_trial *trial, conv_error *err);

/* Marks the trial with this algorithm and config as the winner of `key`
 * (and no other). */
conv_status conv_cache_set_winner(conv_cache *cache, const conv_cache_key *key,
                                  uint32_t algorithm_id, const conv_config *config,
                                  conv_error *err);

/* Replaces every trial of `key` with trials[0..count) (winner flags as
 * they are; tuned_at[i], when tuned_at is not NULL, keeps when each was
 * measured), in one transaction: what copying a tuning from another cache
 * needs.  The problem's pending rows on key's device go with the old
 * trials. */
conv_status conv_cache_replace_tuning(conv_cache *cache, const conv_cache_key *key,
                                      const conv_trial *trials, const char *const *tuned_at,
                                      size_t count, conv_error *err);

/* Reads check every value of a row before it is used (trials_read.c): a
 * row that fails (a corrupt or crafted file) is CONV_CACHE_ERROR naming
 * it, and nothing of it reaches the caller.  A key has one winner: of
 * several rows marked so (written behind the cache's back), the latest;
 * the others read as plain trials. */

/* Finds the winner of `key`.  *found is false (and CONV_OK returned) when
 * there is none. */
conv_status conv_cache_lookup_winner(conv_cache *cache, const conv_cache_key *key,
                                     conv_trial *winner /* OUT */, bool *found /* OUT */,
                                     conv_error *err);

/* The plan path's look-up in one layer (the user's cache, then a system
 * cache): conv_cache_lookup_winner, except that a layer that cannot give
 * a usable winner of `key` (its row fails the checks, SQLite cannot read
 * the file) is passed over: a warning through `log` names the layer
 * (`layer`, e.g. "system cache"), why, and what the caller does instead
 * (`instead`, e.g. "tuning it"), and *found is false with CONV_OK.  Only
 * a NULL argument is returned as an error. */
conv_status conv_cache_lookup_layer(conv_cache *cache, const conv_cache_key *key,
                                    const conv_logger *log, const char *layer,
                                    const char *instead, conv_trial *winner /* OUT */,
                                    bool *found /* OUT */, conv_error *err);

/* Calls fn for every key's winner (any device, any versions), ordered by
 * problem, device, versions. */
conv_status conv_cache_list_winners(conv_cache *cache, conv_cache_row_fn fn, void *user,
                                    conv_error *err);

/* Calls fn for every trial whose problem key equals `problem` (any device or
 * versions), winners first, then by time. */
conv_status conv_cache_list_trials(conv_cache *cache, const char *problem, conv_cache_row_fn fn,
                                   void *user, conv_error *err);

/* ---------------------------------------------------------------- carry-over */

/* Upgrades that keep tunings (carry.c says how a versions text is read).
 * A winner tuned under versions text `then` stays usable under `now`, once
 * re-validated, when
 * - its family (id `family`) is listed once in both texts' candidates,
 *   with one version;
 * - the libraries it runs on (`libraries`, CONV_LIBRARY_* bits of
 *   conv_algorithm.libraries) report one version in both: cudnn for
 *   CONV_LIBRARY_CUDNN, cublaslt for CONV_LIBRARY_CUBLASLT, cufft for
 *   CONV_LIBRARY_CUFFT (cuda while a text lacks cufft);
 * - every field this version does not know is equal in both (or absent).
 * The driver, the other families' versions, cuda for a family that does
 * not use cuFFT, and the timing method may differ.  False for anything
 * else: a text that does not parse (malformed, a field twice, too long),
 * family 0, CONV_LIBRARY_UNKNOWN. */
bool conv_versions_carry(const char *then, const char *now, uint32_t family, unsigned libraries);

/* The libraries family `family` runs on (conv_algorithm.libraries), or
 * CONV_LIBRARY_UNKNOWN for a family this build lacks. */
typedef unsigned (*conv_family_libraries_fn)(uint32_t family);

/* Finds the winner of key's problem on key's device, tuned under other
 * versions than key->versions, that conv_versions_carry lets this build
 * use: of each other versions text its latest winner row, the most
 * recently written first, at most CONV_CARRY_CANDIDATES_MAX texts.  A row
 * that fails the checks of every read (a corrupt or crafted file) is
 * passed over with a warning to `log` naming `layer` (e.g. "system
 * cache"), for the next; nothing is written.  *found is false (CONV_OK)
 * when none carries; else *winner is it and then[size] its versions
 * (truncated to size).  CONV_CACHE_ERROR when SQLite cannot read the file. */
#define CONV_CARRY_CANDIDATES_MAX 64
conv_status conv_cache_lookup_carried(conv_cache *cache, const conv_cache_key *key,
                                      conv_family_libraries_fn libraries, const conv_logger *log,
                                      const char *layer, conv_trial *winner /* OUT */,
                                      char *then /* OUT */, size_t size, bool *found /* OUT */,
                                      conv_error *err);

/* Stores `winner` (marked winner, valid, validated and timed: its time
 * is the one measured under the versions it was carried from) as key's
 * whole tuning, replacing what key had, and marks key pending "stale",
 * in one transaction: a carried-over winner is never stored without the
 * mark that has it re-timed.  A read-only handle is CONV_CACHE_ERROR and
 * writes nothing. */
conv_status conv_cache_store_carried(conv_cache *cache, const conv_cache_key *key,
                                     const conv_trial *winner, conv_error *err);

/* ---------------------------------------------------------------- pending */

/* Problems waiting for `convtune tune --pending` (pending.c). */
typedef enum conv_pending_reason {
  CONV_PENDING_UNTUNED = 0, /* "untuned": a record-mode context ran an untimed plan */
  CONV_PENDING_INCOMPLETE,  /* "incomplete": a tuning stopped by its budget; its
                             * winner is the best of the configs it timed       */
  CONV_PENDING_STALE        /* "stale": its winner was carried over from other
                             * versions (conv_cache_store_carried), re-validated
                             * but timed under those; a context re-times it
                             * only when asked to (retime_stale)               */
} conv_pending_reason;

/* The reason as stored ("untuned", "incomplete", "stale"). */
const char *conv_pending_reason_text(conv_pending_reason reason);

/* Records `key` as pending (one row per problem, device and versions: a
 * second record only updates the reason), in its own transaction.  A
 * read-only handle is CONV_CACHE_ERROR and writes nothing. */
conv_status conv_cache_record_pending(conv_cache *cache, const conv_cache_key *key,
                                      conv_pending_reason reason, conv_error *err);

/* Removes the pending rows of key's problem on key's device, whatever
 * versions they were recorded under: the shape has been tuned fully. */
conv_status conv_cache_clear_pending(conv_cache *cache, const conv_cache_key *key,
                                     conv_error *err);

/* Whether `key` (its exact versions) is pending, and why (*reason may be
 * NULL).  A file without the table (read-only, before version 3) has
 * nothing pending. */
conv_status conv_cache_find_pending(conv_cache *cache, const conv_cache_key *key,
                                    bool *found /* OUT */, conv_pending_reason *reason /* OUT */,
                                    conv_error *err);

/* A pending row as listed (strings valid during the callback only; the
 * reason as the file holds it). */
typedef struct conv_cache_pending_row {
  const char *problem, *device, *versions, *reason, *recorded_at;
} conv_cache_pending_row;

typedef int (*conv_cache_pending_fn)(const conv_cache_pending_row *row, void *user);

/* Calls fn for every pending row (any device, any versions), oldest
 * first; fn returns nonzero to stop. */
conv_status conv_cache_list_pending(conv_cache *cache, conv_cache_pending_fn fn, void *user,
                                    conv_error *err);

#ifdef __cplusplus
}
#endif
#endif /* CONVTUNE_CACHE_H */
