/*
 * system.c -- the read-only system caches (system.h): the search path
 * ($CONVTUNE_SYSTEM_CACHE, the caches installed with the library,
 * $XDG_DATA_DIRS/convtune/caches), the cache files of its directories,
 * and opening them for a context.
 */
#define _GNU_SOURCE /* dladdr */
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cache/system.h"

#ifndef CONVTUNE_CACHES_FROM_LIBDIR
#define CONVTUNE_CACHES_FROM_LIBDIR "../share/convtune/caches"
#endif
#ifndef CONVTUNE_CACHES_FROM_BINDIR
#define CONVTUNE_CACHES_FROM_BINDIR "../share/convtune/caches"
#endif

#define SYSTEM_PATH_MAX 4096
#define DEFAULT_XDG_DATA_DIRS "/usr/local/share:/usr/share"

/* ---------------------------------------------------------------- the search */

typedef struct file_id {
  dev_t dev;
  ino_t ino;
} file_id;

typedef struct search_state {
  conv_system_cache_fn fn;
  void *user;
  bool stopped;
  file_id *seen; /* every file passed to fn, so that none is passed twice */
  size_t seen_count, seen_cap;
  conv_error *err;
} search_state;

/* Passes a regular file to fn unless it was passed before. */
static conv_status emit(search_state *s, const char *path, const struct stat *st, bool named) {
  for (size_t i = 0; i < s->seen_count; i++)
    if (s->seen[i].dev == st->st_dev && s->seen[i].ino == st->st_ino) return CONV_OK;
  if (s->seen_count == s->seen_cap) {
    size_t cap = s->seen_cap ? 2 * s->seen_cap : 16;
    file_id *grown = realloc(s->seen, cap * sizeof *grown);
    if (grown == NULL)
      return conv_error_set(s->err, CONV_OUT_OF_MEMORY, "system caches: out of memory");
    s->seen = grown, s->seen_cap = cap;
  }
  s->seen[s->seen_count++] = (file_id){st->st_dev, st->st_ino};
  s->stopped = s->fn(path, named, s->user) != 0;
  return CONV_OK;
}

static bool is_cache_name(const char *name) {
  size_t len = strlen(name);
  return name[0] != '.' && len > 3 && strcmp(name + len - 3, ".db") == 0;
}

static int by_name(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The *.db names of an open directory, sorted; NULL (and *count 0) when
 * memory runs out. */
static char **cache_names(DIR *d, size_t *count, bool *out_of_memory) {
  char **names = NULL;
  size_t cap = 0;
  *count = 0;
  *out_of_memory = false;
  for (struct dirent *e; (e = readdir(d)) != NULL;) {
    if (!is_cache_name(e->d_name)) continue;
    if (*count == cap) {
      cap = cap ? 2 * cap : 16;
      char **grown = realloc(names, cap * sizeof *grown);
      if (grown == NULL) goto oom;
      names = grown;
    }
    if ((names[*count] = strdup(e->d_name)) == NULL) goto oom;
    (*count)++;
  }
  if (*count > 1) qsort(names, *count, sizeof *names, by_name);
  return names;
oom:
  for (size_t i = 0; i < *count; i++) free(names[i]);
  free(names);
  *count = 0;
  *out_of_memory = true;
  return NULL;
}

/* The regular *.db files of directory `dir`, in byte order of name.  A
 * directory of the search path (`named` false) that cannot be read is
 * skipped: it is no one's promise that it exists. */
static conv_status visit_dir(search_state *s, const char *dir, bool named) {
  DIR *d = opendir(dir);
  if (d == NULL) {
    if (!named) return CONV_OK;
    return conv_error_set(s->err, CONV_CACHE_ERROR, "system cache directory %s: %s", dir,
                          strerror(errno));
  }
  size_t count = 0;
  bool out_of_memory = false;
  char **names = cache_names(d, &count, &out_of_memory);
  closedir(d);
  conv_status st = out_of_memory ? conv_error_set(s->err, CONV_OUT_OF_MEMORY,
                                                  "system caches: out of memory")
                                 : CONV_OK;
  for (size_t i = 0; i < count && st == CONV_OK && !s->stopped; i++) {
    char path[SYSTEM_PATH_MAX];
    struct stat info;
    if (snprintf(path, sizeof path, "%s/%s", dir, names[i]) >= (int)sizeof path) continue;
    if (stat(path, &info) == 0 && S_ISREG(info.st_mode)) st = emit(s, path, &info, false);
  }
  for (size_t i = 0; i < count; i++) free(names[i]);
  free(names);
  return st;
}

/* A path named outright: a cache file, or a directory of them; missing,
 * it is an error (someone asked for it). */
static conv_status visit_named(search_state *s, const char *path) {
  struct stat info;
  if (stat(path, &info) != 0)
    return conv_error_set(s->err, CONV_CACHE_ERROR, "system cache %s: %s", path, strerror(errno));
  if (S_ISDIR(info.st_mode)) return visit_dir(s, path, true);
  return emit(s, path, &info, true);
}

/* Each entry of a ':'-separated list: named paths, or directories of the
 * search path (`suffix` appended; relative entries skipped, since a
 * relative data directory would be looked for wherever the program
 * happens to run). */
static conv_status visit_list(search_state *s, const char *list, bool named, const char *suffix) {
  conv_status st = CONV_OK;
  for (const char *p = list; p != NULL && st == CONV_OK && !s->stopped;) {
    const char *colon = strchr(p, ':');
    size_t len = colon ? (size_t)(colon - p) : strlen(p);
    char path[SYSTEM_PATH_MAX];
    bool fits = len > 0 && snprintf(path, sizeof path, "%.*s%s", (int)len, p, suffix) <
                                       (int)sizeof path;
    if (len > 0 && !fits && named)
      st = conv_error_set(s->err, CONV_CACHE_ERROR, "system cache path too long");
    else if (fits && named)
      st = visit_named(s, path);
    else if (fits && path[0] == '/')
      st = visit_dir(s, path, false);
    p = colon ? colon + 1 : NULL;
  }
  return st;
}

conv_status conv_system_cache_search(const char *option, const conv_system_search *where,
                                     conv_system_cache_fn fn, void *user, conv_error *err) {
  if (fn == NULL || (option == NULL && where == NULL))
    return conv_error_set(err, CONV_INVALID_ARGUMENT, "system caches: NULL argument");
  search_state s = {.fn = fn, .user = user, .err = err};
  conv_status st = CONV_OK;
  if (option != NULL) {
    if (option[0] != '\0') st = visit_named(&s, option);
  } else if (where->env != NULL && where->env[0] == '\0') {
    /* $CONVTUNE_SYSTEM_CACHE set but empty: none, as the option's "". */
  } else {
    const char *xdg = where->xdg_data_dirs && where->xdg_data_dirs[0] ? where->xdg_data_dirs
                                                                       : DEFAULT_XDG_DATA_DIRS;
    if (where->env != NULL) st = visit_list(&s, where->env, true, "");
    if (st == CONV_OK && where->package_dirs != NULL)
      st = visit_list(&s, where->package_dirs, false, "");
    if (st == CONV_OK) st = visit_list(&s, xdg, false, "/convtune/caches");
  }
  free(s.seen);
  return st;
}

/* ---------------------------------------------------------------- the process's places */

/* The file the library's code was loaded from: the shared library, or the
 * program the static one is linked into. */
static bool library_file(char *path, size_t size) {
  Dl_info info;
  if (dladdr((void *)conv_system_package_dirs, &info) != 0 && info.dli_fname != NULL &&
      info.dli_fname[0] == '/')
    return snprintf(path, size, "%s", info.dli_fname) < (int)size;
  /* The main program's name as it was started ("convtune" through PATH):
   * the kernel knows where it is. */
  ssize_t n = readlink("/proc/self/exe", path, size - 1);
  if (n <= 0 || (size_t)n >= size - 1) return false;
  path[n] = '\0';
  return true;
}

/* Appends ":dir" (or "dir" first), as its real path ("lib/../share"
 * said as "share"), unless dirs[] holds it already; a directory that does
 * not exist is left out (the search would skip it). */
static void add_dir(char *dirs, size_t size, const char *given) {
  char dir[PATH_MAX];
  if (realpath(given, dir) == NULL) return;
  size_t len = strlen(dir), used = strlen(dirs);
  for (const char *p = dirs; *p;) {
    const char *colon = strchr(p, ':');
    size_t n = colon ? (size_t)(colon - p) : strlen(p);
    if (n == len && strncmp(p, dir, n) == 0) return;
    p = colon ? colon + 1 : p + n;
  }
  if (used + (used > 0) + len < size) snprintf(dirs + used, size - used, "%s%s", used ? ":" : "", dir);
}

void conv_system_package_dirs(char *dirs, size_t size) {
  char file[SYSTEM_PATH_MAX], dir[SYSTEM_PATH_MAX];
  if (size == 0) return;
  dirs[0] = '\0';
  if (!library_file(file, sizeof file)) return;
  char *slash = strrchr(file, '/');
  if (slash == NULL) return;
  *slash = '\0';
  const char *base = strrchr(file, '/') ? strrchr(file, '/') + 1 : file;
  /* The wheel: site-packages/convtune/libconvtune.so and convtune/caches. */
  if (strcmp(base, "convtune") == 0 && snprintf(dir, sizeof dir, "%s/caches", file) < (int)sizeof dir)
    add_dir(dirs, size, dir);
  if (snprintf(dir, sizeof dir, "%s/%s", file, CONVTUNE_CACHES_FROM_LIBDIR) < (int)sizeof dir)
    add_dir(dirs, size, dir);
  if (snprintf(dir, sizeof dir, "%s/%s", file, CONVTUNE_CACHES_FROM_BINDIR) < (int)sizeof dir)
    add_dir(dirs, size, dir);
}

void conv_system_search_here(conv_system_search *where, char *package_dirs, size_t size) {
  conv_system_package_dirs(package_dirs, size);
  where->env = getenv("CONVTUNE_SYSTEM_CACHE");
  where->package_dirs = package_dirs;
  where->xdg_data_dirs = getenv("XDG_DATA_DIRS");
}

/* ---------------------------------------------------------------- opening them */

typedef struct opening {
  conv_system_caches *out;
  const conv_logger *log;
  conv_status status; /* a named file's failure */
  conv_error *err;
} opening;

static int open_one(const char *path, int named, void *user) {
  opening *o = user;
  conv_system_caches *out = o->out;
  if (out->count == CONV_SYSTEM_CACHES_MAX) {
    conv_log(o->log, CONV_LOG_WARN, "system cache %s passed over: %d system caches are open already",
             path, CONV_SYSTEM_CACHES_MAX);
    return 0;
  }
  conv_error why = {CONV_OK, ""};
  conv_cache *cache = NULL;
  char *copy = strdup(path);
  conv_status st = copy ? conv_cache_open(path, true, &cache, &why)
                        : conv_error_set(&why, CONV_OUT_OF_MEMORY, "out of memory");
  if (st == CONV_OK) {
    out->caches[out->count] = cache;
    out->paths[out->count++] = copy;
    return 0;
  }
  free(copy);
  if (named || st == CONV_OUT_OF_MEMORY) {
    o->status = conv_error_set(o->err, st, "system %s", why.message);
    return 1;
  }
  /* A file someone dropped in a shared directory costs only itself. */
  conv_log(o->log, CONV_LOG_WARN, "system cache %s passed over: %s", path, why.message);
  return 0;
}

conv_status conv_system_caches_open(const char *option, const conv_system_search *where,
                                    const conv_logger *log, conv_system_caches *out,
                                    conv_error *err) {
  memset(out, 0, sizeof *out);
  conv_system_search here;
  char package_dirs[3 * SYSTEM_PATH_MAX];
  if (where == NULL && option == NULL) {
    conv_system_search_here(&here, package_dirs, sizeof package_dirs);
    where = &here;
  }
  opening o = {out, log, CONV_OK, err};
  conv_status st = conv_system_cache_search(option, where, open_one, &o, err);
  if (st == CONV_OK) st = o.status;
  if (st != CONV_OK) conv_system_caches_close(out);
  return st;
}

void conv_system_caches_close(conv_system_caches *caches) {
  for (size_t i = 0; i < caches->count; i++) {
    conv_cache_close(caches->caches[i]);
    free(caches->paths[i]);
  }
  memset(caches, 0, sizeof *caches);
}

/* ---------------------------------------------------------------- the public listing */

conv_status conv_system_cache_files(const char *system_cache_path, conv_system_cache_fn fn,
                                    void *user, char *message, size_t message_size) {
  conv_error err = {CONV_OK, ""};
  conv_system_search here;
  char package_dirs[3 * SYSTEM_PATH_MAX];
  conv_system_search_here(&here, package_dirs, sizeof package_dirs);
  conv_status st = fn == NULL ? conv_error_set(&err, CONV_INVALID_ARGUMENT,
                                               "conv_system_cache_files: NULL fn")
                              : conv_system_cache_search(system_cache_path, &here, fn, user, &err);
  if (message != NULL && message_size > 0)
    snprintf(message, message_size, "%s", st == CONV_OK ? "" : err.message);
  return st;
}
