/*
 * file.h -- what the cache checks about its file before SQLite reads it.
 *
 * A cache path is untrusted: it may name a FIFO, a directory, a file in a
 * read-only place, or sit beside a -wal file of another database.  These
 * helpers look at the file itself (not through SQLite) so that cache.c can
 * choose how to open it and refuse what it must.
 */
#ifndef CONVTUNE_CACHE_FILE_H
#define CONVTUNE_CACHE_FILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/core.h"

#ifdef __cplusplus
extern "C" {
#endif

/* CONV_OK when `path` is missing (an open creates or refuses it), a
 * regular file, ":memory:" or ""; else CONV_CACHE_ERROR naming what it is
 * (SQLite reports a directory as "disk I/O error" and blocks on a FIFO). */
conv_status cache_file_check_kind(const char *path, conv_error *err);

/* Whether PATH-wal exists with at least one byte: changes that may not be
 * in the database file yet. */
bool cache_file_wal_has_content(const char *path);

/* Whether PATH-wal holds committed frames SQLite would replay into the
 * file (*committed), and whether page 1 is among them (*page_one): the
 * frames are walked as SQLite recovers them (header, salts, running
 * checksums), up to the last commit frame.  Every write of a cache stamps
 * its identity on page 1 (cache.c), so committed frames without page 1
 * were not written for this file.  A WAL that cannot be read or has an
 * invalid header has nothing committed (SQLite ignores it too). */
void cache_file_wal_frames(const char *path, bool *committed /* OUT */, bool *page_one /* OUT */);

/* The identity stamped in the database file's own header (the SQLite
 * header's user_version, as the file holds it, whatever a WAL says); 0
 * when the file is shorter than a header, not SQLite, or never stamped. */
int32_t cache_file_header_identity(const char *path);

/* CONV_OK when this process may write `path` (when it exists) and the
 * directory holding it (when it exists: SQLite makes its -wal and -shm
 * files there); else CONV_CACHE_ERROR saying which cannot be written and
 * why (a read-only file, directory or file system), which SQLite would
 * report later as a failed schema read or identity stamp.  ":memory:" and
 * "" are CONV_OK. */
conv_status cache_file_check_writable(const char *path, conv_error *err);

/* A new random identity, never 0. */
conv_status cache_file_new_identity(int32_t *identity /* OUT */, conv_error *err);

/* SQLite URI that opens `path` immutable (no locks, no -wal or -shm, never
 * written): "file:" + the path, percent-encoded, + "?immutable=1".
 * malloc'd; NULL when memory runs out. */
char *cache_file_immutable_uri(const char *path);

#ifdef __cplusplus
}
#endif
#endif /* CONVTUNE_CACHE_FILE_H */
