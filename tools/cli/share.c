/* share.c -- merge, export and import: tunings copied between cache files
 * through conv_cache_merge (no GPU, no context). */
#include <stdio.h>

#include "tools/cli/cli.h"

/* Copies `from` into `into` and says what it did; EXIT_OK_ or the exit
 * code after saying why. */
static int copy_tunings(const char *from, const char *into, const char *device) {
  size_t added = 0, replaced = 0, kept = 0;
  char message[1024];
  conv_status s = conv_cache_merge(from, into, device, &added, &replaced, &kept, message,
                                   sizeof message);
  if (s == CONV_INVALID_ARGUMENT) return usage_error("%s", message);
  if (s != CONV_OK) {
    say("cannot copy %s into %s: %s", from, into, message);
    return EXIT_CACHE;
  }
  printf("%s -> %s: %zu tuning%s added, %zu replaced by faster ones, %zu kept (as fast or "
         "faster there)\n",
         from, into, added, added == 1 ? "" : "s", replaced, kept);
  return EXIT_OK_;
}

int cmd_merge(const cli_args *a) {
  for (size_t i = 0; i < a->input_count; i++) {
    int rc = copy_tunings(a->inputs[i], a->output_path, a->device);
    if (rc != EXIT_OK_) return rc;
  }
  return EXIT_OK_;
}

int cmd_export(const cli_args *a) {
  char path[CLI_PATH_MAX];
  int rc = cache_path(a, false, path, sizeof path);
  return rc == EXIT_OK_ ? copy_tunings(path, a->output_path, a->device) : rc;
}

int cmd_import(const cli_args *a) {
  char path[CLI_PATH_MAX];
  int rc = cache_path(a, true, path, sizeof path);
  for (size_t i = 0; rc == EXIT_OK_ && i < a->input_count; i++)
    rc = copy_tunings(a->inputs[i], path, NULL);
  return rc;
}
