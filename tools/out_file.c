/* out_file.c -- output files written beside their target and moved into
 * place (see out_file.h). */
#include "tools/out_file.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The side files SQLite keeps beside a database: writing over one of an
 * input cache would lose its committed changes (-wal) or corrupt it. */
static const char *const side_suffixes[] = {"", "-wal", "-shm", "-journal"};

#if defined(__GNUC__)
__attribute__((format(printf, 4, 5)))
#endif
static out_file_status tell(out_file_status status, char *message, size_t size, const char *fmt,
                           ...) {
  if (message != NULL && size > 0) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(message, size, fmt, ap);
    va_end(ap);
  }
  return status;
}

/* The directory of `path` ("." when it names none) into dir[size];
 * returns where its last component starts in path. */
static const char *split_path(const char *path, char *dir, size_t size) {
  const char *slash = strrchr(path, '/');
  if (slash == NULL) {
    snprintf(dir, size, ".");
    return path;
  }
  if (slash == path) snprintf(dir, size, "/");
  else snprintf(dir, size, "%.*s", (int)(slash - path), path);
  return slash + 1;
}

/* Whether `a` and `b` name one directory entry: the same name in the same
 * directory (by device and inode), whether or not the entry exists. */
static bool same_entry(const char *a, const char *b) {
  char dir_a[OUT_FILE_PATH_MAX], dir_b[OUT_FILE_PATH_MAX];
  const char *name_a = split_path(a, dir_a, sizeof dir_a);
  const char *name_b = split_path(b, dir_b, sizeof dir_b);
  struct stat sa, sb;
  return strcmp(name_a, name_b) == 0 && stat(dir_a, &sa) == 0 && stat(dir_b, &sb) == 0 &&
         sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

/* What a file that is not regular is, for the refusal; NULL when regular. */
static const char *irregular_kind(mode_t mode) {
  if (S_ISREG(mode)) return NULL;
  if (S_ISLNK(mode)) return "a symbolic link";
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISCHR(mode) || S_ISBLK(mode)) return "a device";
  return "not a regular file";
}

/* Whether the target (o) is `path`: the same inode when the target
 * exists, else the same directory entry. */
static bool target_is(const out_file *o, const char *path) {
  struct stat st;
  if (o->exists)
    return stat(path, &st) == 0 && st.st_dev == o->target_stat.st_dev &&
           st.st_ino == o->target_stat.st_ino;
  return same_entry(o->target, path);
}

out_file_status out_file_check(out_file *o, const char *target, const char *const *inputs,
                               size_t count, char *message, size_t size) {
  memset(o, 0, sizeof *o);
  if (strlen(target) >= sizeof o->target)
    return tell(OUT_FILE_REFUSED, message, size, "the output path is too long");
  memcpy(o->target, target, strlen(target) + 1);
  char dir[OUT_FILE_PATH_MAX];
  if (*split_path(target, dir, sizeof dir) == '\0')
    return tell(OUT_FILE_REFUSED, message, size,
                "%s names a directory: the output must be a regular file or a new path", target);
  struct stat st;
  if (lstat(target, &st) == 0) {
    const char *kind = irregular_kind(st.st_mode);
    if (kind != NULL)
      return tell(OUT_FILE_REFUSED, message, size,
                  "%s is %s: the output must be a regular file or a new path", target, kind);
    o->exists = true;
    o->target_stat = st;
  } else if (errno != ENOENT) {
    return tell(OUT_FILE_FAILED, message, size, "cannot write %s: %s", target, strerror(errno));
  }
  for (size_t i = 0; i < count; i++) {
    for (size_t k = 0; k < sizeof side_suffixes / sizeof side_suffixes[0]; k++) {
      char path[OUT_FILE_PATH_MAX + 16];
      snprintf(path, sizeof path, "%s%s", inputs[i], side_suffixes[k]);
      if (!target_is(o, path)) continue;
      if (k == 0)
        return tell(OUT_FILE_REFUSED, message, size,
                    "%s is the same file as %s, an input: the output must be another file",
                    target, inputs[i]);
      return tell(OUT_FILE_REFUSED, message, size,
                  "%s is %s, a file of the input cache %s: the output must be another file",
                  target, path, inputs[i]);
    }
  }
  return OUT_FILE_OK;
}

out_file_status out_file_stage(out_file *o, char *message, size_t size) {
  char dir[OUT_FILE_PATH_MAX];
  const char *name = split_path(o->target, dir, sizeof dir);
  int n = snprintf(o->dir, sizeof o->dir, "%s/.convtune-XXXXXX", dir);
  bool fits = n > 0 && (size_t)n < sizeof o->dir &&
              (size_t)n + 1 + strlen(name) < sizeof o->staged;
  if (!fits || mkdtemp(o->dir) == NULL) {
    int e = fits ? errno : ENAMETOOLONG;
    o->dir[0] = '\0';
    return tell(OUT_FILE_FAILED, message, size, "cannot write %s: %s", o->target, strerror(e));
  }
  snprintf(o->staged, sizeof o->staged, "%s/%s", o->dir, name);
  return OUT_FILE_OK;
}

/* Whether SQLite left changes beside the staged file that are not in it:
 * moving the file alone would lose them. */
static bool changes_left_beside(const out_file *o) {
  static const char *const logs[] = {"-wal", "-journal"};
  for (size_t i = 0; i < sizeof logs / sizeof logs[0]; i++) {
    char path[OUT_FILE_PATH_MAX + 16];
    struct stat st;
    snprintf(path, sizeof path, "%s%s", o->staged, logs[i]);
    if (stat(path, &st) == 0 && st.st_size > 0) return true;
  }
  return false;
}

/* fsync of a file or directory, so that a crash after the rename cannot
 * leave an empty file at the target. */
static int sync_path(const char *path) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  int rc = fsync(fd);
  int e = errno;
  close(fd);
  errno = e;
  return rc;
}

/* Puts the staged file at the target; 0, or -1 with errno (EEXIST: a
 * file that is not the one checked is at the target now). */
static int move_into_place(const out_file *o) {
  if (o->exists) {
    struct stat now;
    if (lstat(o->target, &now) != 0 || !S_ISREG(now.st_mode) ||
        now.st_dev != o->target_stat.st_dev || now.st_ino != o->target_stat.st_ino) {
      errno = EEXIST;
      return -1;
    }
    (void)chmod(o->staged, o->target_stat.st_mode & 0777);
    return rename(o->staged, o->target);
  }
  /* link() fails where a file appeared at the target meanwhile, which
   * rename() would replace; file systems without hard links get rename(). */
  if (link(o->staged, o->target) == 0) return 0; /* the staged name goes with the directory */
  if (errno != EPERM && errno != ENOTSUP && errno != EOPNOTSUPP && errno != ENOSYS &&
      errno != EMLINK)
    return -1;
  return rename(o->staged, o->target);
}

out_file_status out_file_commit(out_file *o, char *message, size_t size) {
  out_file_status status = OUT_FILE_OK;
  if (changes_left_beside(o)) {
    status = tell(OUT_FILE_FAILED, message, size,
                  "cannot write %s: changes were left in a journal beside it", o->target);
  } else if (sync_path(o->staged) != 0 || move_into_place(o) != 0) {
    if (errno == EEXIST)
      status = tell(OUT_FILE_FAILED, message, size,
                    "cannot write %s: another file was put there meanwhile (left as it is)",
                    o->target);
    else
      status = tell(OUT_FILE_FAILED, message, size, "cannot write %s: %s", o->target,
                    strerror(errno));
  } else {
    char dir[OUT_FILE_PATH_MAX];
    split_path(o->target, dir, sizeof dir);
    (void)sync_path(dir);
  }
  out_file_discard(o);
  return status;
}

void out_file_discard(out_file *o) {
  if (o->dir[0] == '\0') return;
  /* Only this process writes in the directory it made (mode 0700). */
  DIR *d = opendir(o->dir);
  for (struct dirent *e; d != NULL && (e = readdir(d)) != NULL;) {
    if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
    char path[OUT_FILE_PATH_MAX + 256];
    snprintf(path, sizeof path, "%s/%s", o->dir, e->d_name);
    (void)unlink(path);
  }
  if (d != NULL) closedir(d);
  (void)rmdir(o->dir);
  o->dir[0] = '\0';
}
