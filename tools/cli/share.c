/* share.c -- merge, export and import: tunings copied between cache files
 * through conv_cache_merge_sources (no GPU, no context). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/cli/cli.h"

/* ---------------------------------------------------------------- --device */

/* The GPUs (fingerprints) the sources' winners were tuned on. */
typedef struct fingerprints {
  char **items;
  size_t count, cap;
  bool out_of_memory;
} fingerprints;

static int note_device(const conv_cache_entry *e, void *user) {
  fingerprints *f = user;
  for (size_t i = 0; i < f->count; i++)
    if (strcmp(f->items[i], e->device) == 0) return 0;
  if (f->count == f->cap) {
    size_t cap = f->cap ? 2 * f->cap : 8;
    char **grown = realloc(f->items, cap * sizeof *grown);
    if (grown == NULL) goto oom;
    f->items = grown, f->cap = cap;
  }
  if ((f->items[f->count] = copy_string(e->device)) == NULL) goto oom;
  f->count++;
  return 0;
oom:
  f->out_of_memory = true;
  return 1;
}

static void fingerprints_free(fingerprints *f) {
  for (size_t i = 0; i < f->count; i++) free(f->items[i]);
  free(f->items);
}

/* The fingerprints of the sources' winners; false when a source cannot be
 * read (the copy then says why, as without --device). */
static bool read_fingerprints(const char *const *from, size_t count, fingerprints *f) {
  for (size_t i = 0; i < count; i++) {
    conv_cache_reader *reader = NULL;
    if (conv_cache_reader_open(from[i], &reader, NULL, 0) != CONV_OK) return false;
    conv_status st = conv_cache_reader_winners(reader, note_device, f, NULL, 0);
    conv_cache_reader_close(reader);
    if (st != CONV_OK || f->out_of_memory) return false;
  }
  return true;
}

/* --device as the user typed it, or the start of one fingerprint ("NVIDIA
 * H100 80GB HBM3", as nvidia-smi names the GPU): the one GPU it names, in
 * device[size].  Naming several or none is a usage error listing the GPUs
 * there are, before anything is written. */
static int resolve_device(const cli_args *a, const char *const *from, size_t count, char *device,
                          size_t size) {
  snprintf(device, size, "%s", a->device);
  fingerprints f = {0};
  if (!read_fingerprints(from, count, &f)) {
    fingerprints_free(&f);
    return EXIT_OK_;
  }
  size_t matches = 0, match = 0, prefix = strlen(a->device);
  for (size_t i = 0; i < f.count; i++) {
    if (strcmp(f.items[i], a->device) == 0) {
      fingerprints_free(&f);
      return EXIT_OK_;
    }
    if (strncmp(f.items[i], a->device, prefix) == 0) matches++, match = i;
  }
  char listed[4096] = "";
  for (size_t i = 0, used = 0; i < f.count && used < sizeof listed; i++)
    used += (size_t)snprintf(listed + used, sizeof listed - used, "%s \"%s\"", i ? ";" : "",
                             f.items[i]);
  int rc = EXIT_OK_;
  if (matches == 1) {
    say("--device '%s': the GPU %s", a->device, f.items[match]);
    snprintf(device, size, "%s", f.items[match]);
  } else if (matches > 1) {
    rc = usage_error("--device '%s' names %zu GPUs of the cache; give more of the fingerprint "
                     "(nothing was written):%s",
                     a->device, matches, listed);
  } else {
    rc = usage_error("--device '%s' names no GPU of the cache (nothing was written); its GPUs:%s",
                     a->device, f.count ? listed : " none");
  }
  fingerprints_free(&f);
  return rc;
}

/* ---------------------------------------------------------------- copying */

/* Copies the caches from[0 .. count) into the cache file `into` (named
 * `shown` in messages) in one call, all or nothing: every source is
 * checked before anything is written.  counts[3 * count]: each source's
 * tunings added, replaced and kept.  EXIT_OK_ or the exit code after
 * saying why. */
static int copy_tunings(const char *const *from, size_t count, const char *into,
                        const char *shown, const cli_args *a, const char *device,
                        size_t *counts) {
  size_t *added = counts, *replaced = counts + count, *kept = counts + 2 * count;
  char message[1024];
  conv_status s =
      a->winners_only && count == 1
          ? conv_cache_merge_winners(from[0], into, device, added, replaced, kept, message,
                                     sizeof message)
          : conv_cache_merge_sources(from, count, into, device, added, replaced, kept, message,
                                     sizeof message);
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
  char device_buf[CONV_DEVICE_FINGERPRINT_MAX + 512];
  const char *device = a->device != NULL ? device_buf : NULL;
  int rc = check_output(&o, a->output_path, inputs, count, EXIT_CACHE);
  if (rc == EXIT_OK_ && a->device != NULL)
    rc = resolve_device(a, inputs, count, device_buf, sizeof device_buf);
  if (rc != EXIT_OK_) return rc;
  size_t *counts = calloc(3 * count + 1, sizeof *counts);
  if (counts == NULL) {
    say("out of memory");
    return EXIT_FAILED;
  }
  if (o.exists) {
    rc = copy_tunings(inputs, count, a->output_path, a->output_path, a, device, counts);
  } else {
    char message[CLI_PATH_MAX + 256];
    rc = output_outcome(out_file_stage(&o, message, sizeof message), message, EXIT_CACHE);
    if (rc == EXIT_OK_)
      rc = copy_tunings(inputs, count, o.staged, a->output_path, a, device, counts);
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
  rc = copy_tunings(a->inputs, a->input_count, path, path, a, NULL, counts);
  if (rc == EXIT_OK_) print_copied(a->inputs, a->input_count, path, counts);
  free(counts);
  return rc;
}
