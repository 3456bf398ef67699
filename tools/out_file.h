/*
 * out_file.h -- an output file the tool writes (report -o, export -o,
 * merge -o) without harming what is at its path or what it reads.
 *
 * The output is written into a private directory the tool makes beside
 * the target (".convtune-XXXXXX", mode 0700, so that nobody else can put
 * a file or a link in it) and moved into place once it is whole: a failed
 * or interrupted write leaves the target as it was, and the only things
 * ever removed are that directory and what the tool wrote into it.
 * Before that, the target is checked: a new path, or an existing regular
 * file that is none of the inputs.  A symbolic link, a directory, a FIFO
 * (opening it would block), a socket or a device (as root, removing
 * /dev/full would have removed the device) is refused, as is the same
 * file as an input or as one of an input cache's side files (-wal, -shm,
 * -journal), found by device and inode so that a hard link or another
 * spelling of the path is no way round it.
 */
#ifndef CONVTUNE_TOOLS_OUT_FILE_H
#define CONVTUNE_TOOLS_OUT_FILE_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/stat.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

#define OUT_FILE_PATH_MAX 4096

typedef enum out_file_status {
  OUT_FILE_OK = 0,
  OUT_FILE_REFUSED, /* the target is not a path the tool writes (nothing done) */
  OUT_FILE_FAILED   /* an I/O error (errno's text in the message)             */
} out_file_status;

typedef struct out_file {
  char target[OUT_FILE_PATH_MAX]; /* the path asked for                        */
  char dir[OUT_FILE_PATH_MAX];    /* the private directory; "" while none      */
  char staged[OUT_FILE_PATH_MAX]; /* the file to write, in dir                 */
  bool exists;                    /* the target is an existing regular file    */
  struct stat target_stat;        /* what it was when checked (exists)         */
} out_file;

/* Checks `target` against the kinds of file refused and against each of
 * the `count` input paths (an input that does not exist is passed over).
 * Fills o->target and o->exists; makes nothing.  A refusal or a failure
 * is said in message ("PATH is a FIFO: ..."). */
out_file_status out_file_check(out_file *o, const char *target, const char *const *inputs,
                               size_t count, char *message, size_t message_size);

/* After out_file_check: makes the private directory beside the target
 * and names o->staged in it (not created: the caller creates it, e.g.
 * with O_EXCL, or lets SQLite do so). */
out_file_status out_file_stage(out_file *o, char *message, size_t message_size);

/* Moves the staged file onto the target, made durable first, and removes
 * the private directory.  An existing target is replaced only if it is
 * still the file out_file_check saw (its permission bits are kept); a new
 * one is not written over a file that appeared there meanwhile.  Files
 * beside the staged one (a -wal SQLite did not fold in) fail it.  On
 * failure the staged output is discarded (out_file_discard). */
out_file_status out_file_commit(out_file *o, char *message, size_t message_size);

/* Removes the private directory and everything in it (no-op without one). */
void out_file_discard(out_file *o);

#ifdef __cplusplus
}
#endif
#endif /* CONVTUNE_TOOLS_OUT_FILE_H */
