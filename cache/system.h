/*
 * system.h -- the read-only system caches under the user's cache: where
 * they are looked for (the search path of convtune.h's
 * conv_system_cache_files) and opening them for a context.
 */
#ifndef CONVTUNE_CACHE_SYSTEM_H
#define CONVTUNE_CACHE_SYSTEM_H

#include <stdbool.h>
#include <stddef.h>

#include "cache/cache.h"

/* The most system caches a context opens; the files found after them are
 * passed over with a warning. */
#define CONV_SYSTEM_CACHES_MAX 16

/* Where the search path looks, each NULL when absent.  The library's own
 * search reads them from the process (conv_system_search_here); the tests
 * give their own. */
typedef struct conv_system_search {
  const char *env;           /* $CONVTUNE_SYSTEM_CACHE's value; "": no
                              * system cache at all                       */
  const char *package_dirs;  /* the caches installed with the library, ':'
                              * separated (conv_system_package_dirs)      */
  const char *xdg_data_dirs; /* $XDG_DATA_DIRS's value; NULL or "": the
                              * default, /usr/local/share:/usr/share      */
} conv_system_search;

/* The files of the search, to fn (convtune.h's conv_system_cache_fn):
 * `option` as conv_context_options.system_cache_path
 * (NULL: the search path of `where`; "": none; else that file, or the *.db
 * files of that directory).  A directory of the search path that is
 * missing is skipped; a named directory or file that is missing is
 * CONV_CACHE_ERROR.  A file met twice (by device and inode) is passed
 * once. */
conv_status conv_system_cache_search(const char *option, const conv_system_search *where,
                                     conv_system_cache_fn fn, void *user, conv_error *err);

/* The process's own places: $CONVTUNE_SYSTEM_CACHE, the package's data
 * directories (into package_dirs[size]), $XDG_DATA_DIRS. */
void conv_system_search_here(conv_system_search *where /* OUT */, char *package_dirs,
                             size_t size);

/* The caches installed with the library, found from where the loaded
 * library (or the program it is linked into) lies: the wheel's
 * convtune/caches beside convtune/libconvtune.so, and an install's
 * <libdir>/../share/convtune/caches (CONVTUNE_CACHES_FROM_LIBDIR, and
 * from <bindir> for a program linked with the static library), ':'
 * separated into dirs[size], those that exist, each as its real path; ""
 * when there is none or the library's file is unknown. */
void conv_system_package_dirs(char *dirs /* OUT */, size_t size);

/* A context's system caches, in lookup order. */
typedef struct conv_system_caches {
  size_t count;
  conv_cache *caches[CONV_SYSTEM_CACHES_MAX];
  char *paths[CONV_SYSTEM_CACHES_MAX];
} conv_system_caches;

/* Opens the files of the search (`where` NULL: the process's own places)
 * read-only.  A named file that does not open fails it all (nothing stays
 * open); one found in a directory that does not open (not a cache, a
 * newer schema, unreadable) is passed over with a warning to `log`, as are
 * the files past CONV_SYSTEM_CACHES_MAX.  Which were opened goes to `log`
 * (INFO). */
conv_status conv_system_caches_open(const char *option, const conv_system_search *where,
                                    const conv_logger *log, conv_system_caches *out /* OUT */,
                                    conv_error *err);
void conv_system_caches_close(conv_system_caches *caches);

#endif /* CONVTUNE_CACHE_SYSTEM_H */
