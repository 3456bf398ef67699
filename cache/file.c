/* file.c -- checks on a cache's file made outside SQLite (see file.h). */
#include "cache/file.h"

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

bool cache_file_wal_has_content(const char *path) {
  size_t len = strlen(path);
  char *wal = malloc(len + 5);
  if (wal == NULL) return true; /* assume the worst: the careful open */
  memcpy(wal, path, len);
  memcpy(wal + len, "-wal", 5);
  struct stat st;
  bool content = stat(wal, &st) == 0 && st.st_size > 0;
  free(wal);
  return content;
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
