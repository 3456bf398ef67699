/* share.c -- merge, export and import: tunings copied between cache files
 * through conv_cache_merge_sources (no GPU, no context). */
#include <stdio.h>
#include <stdlib.h>

#include "tools/cli/cli.h"

/* Copies the caches from[0 .. count) into `into` in one call (all or
 * nothing: every source is checked before anything is written) and says
 * what it did for each; EXIT_OK_ or the exit code after saying why. */
static int copy_tunings(const char *const *from, size_t count, const char *into,
                        const char *device) {
  size_t *counts = calloc(3 * count + 1, sizeof *counts);
  if (counts == NULL) {
    say("out of memory");
    return EXIT_FAILED;
  }
  size_t *added = counts, *replaced = counts + count, *kept = counts + 2 * count;
  char message[1024];
  conv_status s = conv_cache_merge_sources(from, count, into, device, added, replaced, kept,
                                           message, sizeof message);
  int rc = EXIT_OK_;
  if (s == CONV_INVALID_ARGUMENT) {
    rc = usage_error("%s", message);
  } else if (s != CONV_OK) {
    say("cannot copy %s%s into %s (nothing was copied): %s", from[0],
        count > 1 ? " and the other caches" : "", into, message);
    rc = EXIT_CACHE;
  }
  for (size_t i = 0; rc == EXIT_OK_ && i < count; i++)
    printf("%s -> %s: %zu tuning%s added, %zu replaced by faster ones, %zu kept (as fast or "
           "faster there)\n",
           from[i], into, added[i], added[i] == 1 ? "" : "s", replaced[i], kept[i]);
  free(counts);
  return rc;
}

int cmd_merge(const cli_args *a) {
  return copy_tunings(a->inputs, a->input_count, a->output_path, a->device);
}

int cmd_export(const cli_args *a) {
  char path[CLI_PATH_MAX];
  int rc = cache_path(a, false, path, sizeof path);
  const char *const from[] = {path};
  return rc == EXIT_OK_ ? copy_tunings(from, 1, a->output_path, a->device) : rc;
}

int cmd_import(const cli_args *a) {
  char path[CLI_PATH_MAX];
  int rc = cache_path(a, true, path, sizeof path);
  return rc == EXIT_OK_ ? copy_tunings(a->inputs, a->input_count, path, NULL) : rc;
}
