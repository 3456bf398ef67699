/* share.c -- merge, export and import: tunings copied between cache files
 * through conv_cache_merge (no GPU, no context). */
#include <stdio.h>
#include <stdlib.h>

#include "tools/cli/cli.h"

typedef struct copy_counts {
  size_t added, replaced, kept;
} copy_counts;

/* Copies `from` into the cache file `into` (named `shown` in messages);
 * EXIT_OK_ or the exit code after saying why. */
static int copy_tunings(const char *from, const char *into, const char *shown,
                        const char *device, copy_counts *c) {
  char message[1024];
  conv_status s = conv_cache_merge(from, into, device, &c->added, &c->replaced, &c->kept, message,
                                   sizeof message);
  if (s == CONV_INVALID_ARGUMENT) return usage_error("%s", message);
  if (s != CONV_OK) {
    say("cannot copy %s into %s: %s", from, shown, message);
    return EXIT_CACHE;
  }
  return EXIT_OK_;
}

static void print_copied(const char *from, const char *into, const copy_counts *c) {
  char from_line[CLI_PATH_MAX], into_line[CLI_PATH_MAX];
  printf("%s -> %s: %zu tuning%s added, %zu replaced by faster ones, %zu kept (as fast or "
         "faster there)\n",
         one_line(from, from_line, sizeof from_line), one_line(into, into_line, sizeof into_line),
         c->added, c->added == 1 ? "" : "s", c->replaced, c->kept);
}

/* Copies the inputs into a->output_path (merge and export -o).  A new
 * file is made beside it and moved into place once every input is in, so
 * that a failure leaves no file.  An existing cache is merged into where
 * it is, one input at a time: it may be in use by another process (a tune
 * writing it, a reader), which a file renamed over it would cut off, and
 * SQLite writes it atomically in place. */
static int copy_to_output(const cli_args *a, const char *const *inputs, size_t count) {
  out_file o;
  int rc = check_output(&o, a->output_path, inputs, count, EXIT_CACHE);
  if (rc != EXIT_OK_) return rc;
  if (o.exists) {
    for (size_t i = 0; rc == EXIT_OK_ && i < count; i++) {
      copy_counts c;
      rc = copy_tunings(inputs[i], a->output_path, a->output_path, a->device, &c);
      if (rc == EXIT_OK_) print_copied(inputs[i], a->output_path, &c);
    }
    return rc;
  }
  char message[CLI_PATH_MAX + 256];
  copy_counts *counts = calloc(count, sizeof *counts);
  if (counts == NULL) {
    say("out of memory");
    return EXIT_FAILED;
  }
  rc = output_outcome(out_file_stage(&o, message, sizeof message), message, EXIT_CACHE);
  for (size_t i = 0; rc == EXIT_OK_ && i < count; i++)
    rc = copy_tunings(inputs[i], o.staged, a->output_path, a->device, &counts[i]);
  if (rc == EXIT_OK_)
    rc = output_outcome(out_file_commit(&o, message, sizeof message), message, EXIT_CACHE);
  else
    out_file_discard(&o);
  for (size_t i = 0; rc == EXIT_OK_ && i < count; i++)
    print_copied(inputs[i], a->output_path, &counts[i]);
  free(counts);
  return rc;
}

int cmd_merge(const cli_args *a) { return copy_to_output(a, a->inputs, a->input_count); }

int cmd_export(const cli_args *a) {
  char path[CLI_PATH_MAX];
  int rc = cache_path(a, false, path, sizeof path);
  const char *inputs[] = {path};
  return rc == EXIT_OK_ ? copy_to_output(a, inputs, 1) : rc;
}

int cmd_import(const cli_args *a) {
  char path[CLI_PATH_MAX];
  int rc = cache_path(a, true, path, sizeof path);
  for (size_t i = 0; rc == EXIT_OK_ && i < a->input_count; i++) {
    copy_counts c;
    rc = copy_tunings(a->inputs[i], path, path, NULL, &c);
    if (rc == EXIT_OK_) print_copied(a->inputs[i], path, &c);
  }
  return rc;
}
