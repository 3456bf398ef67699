/*
 * path.c -- where the user's cache lives when the options name none, and
 * the directories above a cache file.
 */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include <uv.h>

#include "cache/cache.h"

conv_status conv_cache_make_parent_dirs(const char *path, conv_error *err) {
  char dir[4096];
  snprintf(dir, sizeof dir, "%s", path);
  uv_loop_t loop;
  if (uv_loop_init(&loop) != 0)
    return conv_error_set(err, CONV_INTERNAL, "uv_loop_init failed");
  conv_status st = CONV_OK;
  for (char *slash = strchr(dir + 1, '/'); slash && st == CONV_OK; slash = strchr(slash + 1, '/')) {
    *slash = '\0';
    uv_fs_t req;
    int rc = uv_fs_mkdir(&loop, &req, dir, 0755, NULL);
    uv_fs_req_cleanup(&req);
    if (rc != 0 && rc != UV_EEXIST)
      st = conv_error_set(err, CONV_CACHE_ERROR, "cannot create directory %s: %s", dir,
                          uv_strerror(rc));
    *slash = '/';
  }
  uv_loop_close(&loop);
  return st;
}

/* Reads an environment variable into buf; false when unset or empty. */
static bool read_env(const char *name, char *buf, size_t size) {
  size_t len = size;
  return uv_os_getenv(name, buf, &len) == 0 && buf[0] != '\0';
}

conv_status conv_default_cache_path(char *path, size_t size, bool create_dirs, conv_error *err) {
  char base[4096];
  int len;
  if (read_env("CONVTUNE_CACHE", base, sizeof base)) {
    len = snprintf(path, size, "%s", base);
  } else if (read_env("XDG_CACHE_HOME", base, sizeof base)) {
    len = snprintf(path, size, "%s/convtune/cache.db", base);
  } else {
    size_t blen = sizeof base;
    int rc = uv_os_homedir(base, &blen);
    if (rc != 0)
      return conv_error_set(err, CONV_CACHE_ERROR, "no cache path: set CONVTUNE_CACHE (%s)",
                            uv_strerror(rc));
    len = snprintf(path, size, "%s/.cache/convtune/cache.db", base);
  }
  if (len < 0 || (size_t)len >= size)
    return conv_error_set(err, CONV_CACHE_ERROR, "cache path too long");
  return create_dirs ? conv_cache_make_parent_dirs(path, err) : CONV_OK;
}
