/*
 * pending.c -- what waits to be tuned offline: `convtune list --pending`
 * prints it (no GPU), and `convtune tune --pending` reads this GPU's
 * pending problems into the shapes it tunes.  A pending row names its
 * problem by its key, which conv_problem_from_key rebuilds exactly (it
 * refuses a key that does not come back as itself).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/cli/cli.h"
#include "tools/json.h"

/* A pending row copied out of the reader's callback. */
typedef struct pending_row {
  char *problem, *device, *versions, *reason, *recorded_at;
} pending_row;

typedef struct pending_list {
  pending_row *items;
  size_t count, cap;
  const char *device; /* only this fingerprint; NULL: all */
  bool stale_only;    /* only the rows of reason "stale" (--stale) */
  bool out_of_memory;
} pending_list;

static void pending_row_free(pending_row *r) {
  free(r->problem);
  free(r->device);
  free(r->versions);
  free(r->reason);
  free(r->recorded_at);
}

static void pending_list_free(pending_list *l) {
  for (size_t i = 0; i < l->count; i++) pending_row_free(&l->items[i]);
  free(l->items);
  l->items = NULL;
  l->count = l->cap = 0;
}

static int collect_pending(const conv_cache_pending_entry *e, void *user) {
  pending_list *l = user;
  if (l->device != NULL && strcmp(e->device, l->device) != 0) return 0;
  if (l->stale_only && strcmp(e->reason, "stale") != 0) return 0;
  if (l->count == l->cap) {
    size_t cap = l->cap ? l->cap * 2 : 16;
    pending_row *grown = realloc(l->items, cap * sizeof *grown);
    if (grown == NULL) goto oom;
    l->items = grown;
    l->cap = cap;
  }
  pending_row r = {copy_string(e->problem), copy_string(e->device), copy_string(e->versions),
                   copy_string(e->reason), copy_string(e->recorded_at)};
  if (!r.problem || !r.device || !r.versions || !r.reason || !r.recorded_at) {
    pending_row_free(&r);
    goto oom;
  }
  l->items[l->count++] = r;
  return 0;
oom:
  l->out_of_memory = true;
  return 1;
}

/* Reads the pending rows of `path` (of one device, or all) into *l;
 * EXIT_OK_ or the exit code after saying why. */
static int read_pending(const char *path, const char *device, pending_list *l) {
  conv_cache_reader *reader = NULL;
  int rc = open_cache_read_only(path, &reader);
  if (rc != EXIT_OK_) return rc;
  l->device = device;
  char message[512];
  conv_status st = conv_cache_reader_pending(reader, collect_pending, l, message, sizeof message);
  conv_cache_reader_close(reader);
  return cache_read_outcome(path, st, l->out_of_memory, message);
}

static void write_pending_json(FILE *out, const pending_list *l) {
  fputc('[', out);
  for (size_t i = 0; i < l->count; i++) {
    const pending_row *r = &l->items[i];
    fputs(i ? ",\n " : "\n ", out);
    fputs("{\"problem\": ", out);
    json_write_string(out, r->problem);
    fputs(", \"reason\": ", out);
    json_write_string(out, r->reason);
    fputs(", \"device\": ", out);
    json_write_string(out, r->device);
    fputs(", \"versions\": ", out);
    json_write_string(out, r->versions);
    fputs(", \"recorded_at\": ", out);
    json_write_string(out, r->recorded_at);
    fputc('}', out);
  }
  fputs(l->count ? "\n]\n" : "]\n", out);
}

static int print_pending_table(const pending_list *l) {
  static const char *const header[] = {"problem", "reason", "device", "versions", "recorded at"};
  static const int drop[] = {4, 3, 2}; /* recorded at, versions, device */
  text_table t;
  table_init(&t, 5, header, 0);
  table_fit(&t, 1u << 2, drop, 3);
  for (size_t i = 0; i < l->count; i++) {
    const pending_row *r = &l->items[i];
    const char *cells[] = {r->problem, r->reason, r->device, r->versions, r->recorded_at};
    if (!table_add(&t, cells, t.ncols)) return table_finish(&t, false);
  }
  return table_finish(&t, true);
}

int cmd_list_pending(const cli_args *a) {
  char path[CLI_PATH_MAX];
  pending_list l = {.stale_only = a->stale_only};
  int rc = cache_path(a, false, path, sizeof path);
  if (rc == EXIT_OK_) rc = read_pending(path, NULL, &l);
  if (rc == EXIT_OK_) {
    if (a->json)
      write_pending_json(stdout, &l);
    else if (l.count == 0)
      say("nothing pending in %s", path);
    else
      rc = print_pending_table(&l);
  }
  pending_list_free(&l);
  return rc;
}

int load_pending_shapes(const char *path, const char *device, bool stale_only, suite *shapes) {
  pending_list l = {.stale_only = stale_only};
  int rc = read_pending(path, device, &l);
  for (size_t i = 0; rc == EXIT_OK_ && i < l.count; i++) {
    const char *key = l.items[i].problem;
    conv_problem p;
    bool known = false; /* recorded twice, under other versions */
    for (size_t j = 0; j < shapes->count && !known; j++)
      known = strcmp(shapes->shapes[j].name, key) == 0;
    if (known) continue;
    if (conv_problem_from_key(key, &p) != CONV_OK) {
      say("warning: skipping pending '%s': not a problem key this convtune can rebuild", key);
      continue;
    }
    if (!suite_add(shapes, key, &p)) {
      say("out of memory");
      rc = EXIT_FAILED;
    }
  }
  pending_list_free(&l);
  return rc;
}
