/* file.c -- checks on a cache's file made outside SQLite (see file.h). */
#include "cache/file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <uv.h>

conv_status cache_file_check_kind(const char *path, conv_error *err) {
  struct stat st;
  if (path[0] == '\0' || strcmp(path, ":memory:") == 0 || stat(path, &st) != 0) return CONV_OK;
  if (S_ISDIR(st.st_mode))
    return conv_error_set(err, CONV_CACHE_ERROR,
                          "cache %s: is a directory; name a file (e.g. %s/cache.db)", path, path);
  if (!S_ISREG(st.st_mode))
    return conv_error_set(err, CONV_CACHE_ERROR,
                          "cache %s: not a regular file (a FIFO, socket or device)", path);
  return CONV_OK;
}

/* PATH-wal, malloc'd (NULL when memory runs out). */
static char *wal_path(const char *path) {
  size_t len = strlen(path);
  char *wal = malloc(len + 5);
  if (wal == NULL) return NULL;
  memcpy(wal, path, len);
  memcpy(wal + len, "-wal", 5);
  return wal;
}

bool cache_file_wal_has_content(const char *path) {
  char *wal = wal_path(path);
  if (wal == NULL) return true; /* assume the worst: the careful open */
  struct stat st;
  bool content = stat(wal, &st) == 0 && st.st_size > 0;
  free(wal);
  return content;
}

/* The WAL format (https://sqlite.org/fileformat.html, "The WAL File
 * Format"): a 32-byte header, then frames of a 24-byte header and a page;
 * integers big-endian; each frame's checksum runs on from the one before. */
enum { WAL_HEADER = 32, WAL_FRAME_HEADER = 24, WAL_VERSION = 3007000 };
#define WAL_MAGIC 0x377f0682u /* | 1: checksums of big-endian words */

static uint32_t be32(const unsigned char *p) {
  return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

static uint32_t le32(const unsigned char *p) {
  return (uint32_t)p[3] << 24 | (uint32_t)p[2] << 16 | (uint32_t)p[1] << 8 | (uint32_t)p[0];
}

/* SQLite's WAL checksum of n bytes (a multiple of 8), continuing sum[]. */
static void wal_checksum(const unsigned char *data, size_t n, bool big_endian, uint32_t sum[2]) {
  for (size_t i = 0; i + 8 <= n; i += 8) {
    uint32_t x0 = big_endian ? be32(data + i) : le32(data + i);
    uint32_t x1 = big_endian ? be32(data + i + 4) : le32(data + i + 4);
    sum[0] += x0 + sum[1];
    sum[1] += x1 + sum[0];
  }
}

static bool checksum_is(const uint32_t sum[2], const unsigned char *stored) {
  return sum[0] == be32(stored) && sum[1] == be32(stored + 4);
}

/* Walks the frames of an open WAL as SQLite's recovery does: valid while
 * the salts match the header's and the running checksum holds. */
static void walk_wal(FILE *f, bool *committed, bool *page_one) {
  unsigned char header[WAL_HEADER];
  if (fread(header, 1, sizeof header, f) != sizeof header) return;
  uint32_t magic = be32(header), page_size = be32(header + 8);
  bool big_endian = (magic & 1u) != 0;
  if ((magic & ~1u) != WAL_MAGIC || be32(header + 4) != WAL_VERSION || page_size < 512 ||
      page_size > 65536 || (page_size & (page_size - 1)) != 0)
    return;
  uint32_t sum[2] = {0, 0};
  wal_checksum(header, 24, big_endian, sum);
  if (!checksum_is(sum, header + 24)) return;
  size_t frame_size = WAL_FRAME_HEADER + (size_t)page_size;
  unsigned char *frame = malloc(frame_size);
  if (frame == NULL) {
    *committed = true; /* unknown: the refusal is the safe side */
    return;
  }
  bool page_one_seen = false;
  while (fread(frame, 1, frame_size, f) == frame_size) {
    uint32_t page = be32(frame);
    if (page == 0 || memcmp(frame + 8, header + 16, 8) != 0) break;
    wal_checksum(frame, 8, big_endian, sum);
    wal_checksum(frame + WAL_FRAME_HEADER, page_size, big_endian, sum);
    if (!checksum_is(sum, frame + 16)) break;
    page_one_seen = page_one_seen || page == 1;
    if (be32(frame + 4) != 0) { /* a commit: the frames so far count */
      *committed = true;
      *page_one = page_one_seen;
    }
  }
  free(frame);
}

void cache_file_wal_frames(const char *path, bool *committed, bool *page_one) {
  *committed = *page_one = false;
  char *wal = wal_path(path);
  if (wal == NULL) {
    *committed = true; /* unknown: the refusal is the safe side */
    return;
  }
  int fd = open(wal, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  free(wal);
  if (fd < 0) return;
  struct stat st;
  FILE *f = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) ? fdopen(fd, "rb") : NULL;
  if (f == NULL) {
    close(fd);
    return;
  }
  walk_wal(f, committed, page_one);
  fclose(f);
}

int32_t cache_file_header_identity(const char *path) {
  /* The SQLite file format: a 100-byte header, user_version big-endian at
   * offset 60 (https://sqlite.org/fileformat.html). */
  unsigned char header[100];
  int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return 0;
  ssize_t got = pread(fd, header, sizeof header, 0);
  close(fd);
  if (got != (ssize_t)sizeof header || memcmp(header, "SQLite format 3", 16) != 0) return 0;
  uint32_t v = (uint32_t)header[60] << 24 | (uint32_t)header[61] << 16 |
               (uint32_t)header[62] << 8 | (uint32_t)header[63];
  return (int32_t)v;
}

/* errno's text; thread-safe, unlike strerror. */
static const char *errno_text(int e) { return uv_strerror(uv_translate_sys_error(e)); }

conv_status cache_file_check_writable(const char *path, conv_error *err) {
  if (path[0] == '\0' || strcmp(path, ":memory:") == 0) return CONV_OK;
  if (faccessat(AT_FDCWD, path, W_OK, AT_EACCESS) != 0 && errno != ENOENT)
    return conv_error_set(err, CONV_CACHE_ERROR,
                          "cache %s: cannot be written (%s): a read-only file or file system",
                          path, errno_text(errno));
  const char *slash = strrchr(path, '/');
  size_t dir_len = slash == NULL ? 1 : slash == path ? 1 : (size_t)(slash - path);
  char *dir = malloc(dir_len + 1);
  if (dir == NULL) return conv_error_set(err, CONV_OUT_OF_MEMORY, "cache %s: out of memory", path);
  memcpy(dir, slash == NULL ? "." : path, dir_len);
  dir[dir_len] = '\0';
  conv_status s = CONV_OK;
  if (faccessat(AT_FDCWD, dir, W_OK | X_OK, AT_EACCESS) != 0 && errno != ENOENT)
    s = conv_error_set(err, CONV_CACHE_ERROR,
                       "cache %s: its directory %s cannot be written (%s), and SQLite keeps the "
                       "cache's -wal and -shm files there",
                       path, dir, errno_text(errno));
  free(dir);
  return s;
}

conv_status cache_file_new_identity(int32_t *identity, conv_error *err) {
  uint32_t v = 0;
  while (v == 0) {
    int rc = uv_random(NULL, NULL, &v, sizeof v, 0, NULL);
    if (rc != 0)
      return conv_error_set(err, CONV_CACHE_ERROR, "cannot draw a cache identity: %s",
                            uv_strerror(rc));
    v &= 0x7fffffffu; /* positive: PRAGMA user_version prints it as written */
  }
  *identity = (int32_t)v;
  return CONV_OK;
}

char *cache_file_immutable_uri(const char *path) {
  static const char tail[] = "?immutable=1";
  size_t len = strlen(path);
  /* "file:" + "//" (an empty authority before an absolute path) + up to 3
   * bytes per path byte + the parameters. */
  char *uri = malloc(5 + 2 + 3 * len + sizeof tail);
  if (uri == NULL) return NULL;
  size_t n = 0;
  memcpy(uri, "file:", 5);
  n += 5;
  if (path[0] == '/') {
    memcpy(uri + n, "//", 2);
    n += 2;
  }
  for (const unsigned char *p = (const unsigned char *)path; *p; p++) {
    bool plain = (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
                 strchr("/._-~", *p) != NULL;
    if (plain) {
      uri[n++] = (char)*p;
    } else {
      snprintf(uri + n, 4, "%%%02X", *p);
      n += 3;
    }
  }
  memcpy(uri + n, tail, sizeof tail);
  return uri;
}
