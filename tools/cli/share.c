/* share.c -- merge, export and import: tunings copied between cache files
 * through conv_cache_merge_sources (no GPU, no context). */
#include <stdio.h>
#include <stdlib.h>

#include "tools/cli/cli.h"

/* Copies the caches from[0 .. count) into the cache file `into` (named
 * `shown` in messages) in one call, all or nothing: every source is
 * checked before anything is written.  counts[3 * count]: each source's
 * tunings added, replaced and kept.  EXIT_OK_ or the exit code after
 * saying why. */
static int copy_tunings(const char *const *from, size_t count, const char *into,
                        const char *shown, const char *device, size_t *counts) {
  size_t *added = counts, *replaced = counts + count, *kept = counts + 2 * count;
  char message[1024];
  conv_status s = conv_cache_merge_sources(from, count, into, device, added, replaced, kept,
                                           message, sizeof message);
  if (s == CONV_INVALID_ARGUMENT) return usage_error("%s", message);
  if (s != CONV_OK) {
    char from_line[CLI_PATH_MAX];
    say("cannot copy %s%s into %s (nothing was copied): %s",
        one_line(from[0], from_line, sizeof from_line), count > 1 ? " and the other caches" : "",
        shown, message);
    return EXIT_CACHE;
  }
  return EXIT_OK_;
}

static void print_copied(const char *const *from, size_t count, const char *into,
                         const size_t *counts) {
  char from_line[CLI_PATH_MAX], into_line[CLI_PATH_MAX];
  for (size_t i = 0; i < count; i++) {
    const size_t added = counts[i], replaced = counts[count + i], kept = counts[2 * count + i];
    printf("%s -> %s: %zu tuning%s added, %zu replaced by faster ones, %zu kept (as fast or "
           "faster there)\n",
           one_line(from[i], from_line, sizeof from_line),
           one_line(into, into_line, sizeof into_line), added, added == 1 ? "" : "s", replaced,
           kept);
  }
}

/* Copies the inputs into a->output_path (merge and export -o).  A new
 * file is made beside it and moved into place once every input is in, so
 * that a failure leaves no file.  An existing cache is merged into where
 * it is: it may be in use by another process (a tune writing it, a
 * reader), which a file renamed over it would cut off, and SQLite writes
 * the one transaction atomically in place. */
static int copy_to_output(const cli_args *a, const char *const *inputs, size_t count) {
  out_file o;
  int rc = check_output(&o, a->output_path, inputs, count, EXIT_CACHE);
  if (rc != EXIT_OK_) return rc;
  size_t *counts = calloc(3 * count + 1, sizeof *counts);
  if (counts == NULL) {
    say("out of memory");
    return EXIT_FAILED;
  }
  if (o.exists) {
    rc = copy_tunings(inputs, count, a->output_path, a->output_path, a->device, counts);
  } else {
    char message[CLI_PATH_MAX + 256];
    rc = output_outcome(out_file_stage(&o, message, sizeof message), message, EXIT_CACHE);
    if (rc == EXIT_OK_)
      rc = copy_tunings(inputs, count, o.staged, a->output_path, a->device, counts);
    if (rc == EXIT_OK_)
      rc = output_outcome(out_file_commit(&o, message, sizeof message), message, EXIT_CACHE);
    else
      out_file_discard(&o);
  }
  if (rc == EXIT_OK_) print_copied(inputs, count, a->output_path, counts);
  free(counts);
  return rc;
}

int cmd_merge(const cli_args *a) { return copy_to_output(a, a->inputs, a->input_count); }

int cmd_export(const cli_args *a) {
  char path[CLI_PATH_MAX];
  int rc = cache_path(a, false, path, sizeof path);
  const char *const inputs[] = {path};
  return rc == EXIT_OK_ ? copy_to_output(a, inputs, 1) : rc;
}

int cmd_import(const cli_args *a) {
  char path[CLI_PATH_MAX];
  int rc = cache_path(a, true, path, sizeof path);
  if (rc != EXIT_OK_) return rc;
  size_t *counts = calloc(3 * a->input_count + 1, sizeof *counts);
  if (counts == NULL) {
    say("out of memory");
    return EXIT_FAILED;
  }
  rc = copy_tunings(a->inputs, a->input_count, path, path, NULL, counts);
  if (rc == EXIT_OK_) print_copied(a->inputs, a->input_count, path, counts);
  free(counts);
  return rc;
}
