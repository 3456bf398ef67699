/*
 * shard.c -- `convtune tune --shard K/N`: this process keeps shard K (0 to
 * N-1) of its shapes and drops the rest, so that N processes (a Slurm job
 * array, a Kubernetes indexed Job, N machines of one GPU model) given the
 * same shapes tune each shape exactly once between them, and `convtune
 * merge` joins their caches.
 *
 * A shape's shard is its position in the shapes' distinct problem keys,
 * sorted bytewise, modulo N: it depends neither on the order the suite
 * files list the shapes in nor on the machine (keys are the library's own
 * text), shapes listed twice (or made equal by --math and the other
 * overrides) share a shard, and the shards' sizes differ by at most one.
 * Dealing out in key order also spreads like shapes (one direction, one
 * dtype, neighbouring sizes, which sort together) over the shards, where a
 * hash of the key would leave that, and the shards' sizes, to chance.
 * What it asks is that every shard be given the same shapes: the same
 * suite files and options, or, with --pending, copies of one cache (not
 * one cache that the shards tune at once, whose pending list shrinks as
 * they go).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/cli/tune.h"

/* A shape's place in the sort: its key, and where the suite has it. */
typedef struct shard_entry {
  char key[CONV_PROBLEM_KEY_MAX];
  size_t index;
} shard_entry;

static int by_key_then_index(const void *a, const void *b) {
  const shard_entry *x = a, *y = b;
  int c = strcmp(x->key, y->key);
  if (c != 0) return c;
  return x->index < y->index ? -1 : x->index > y->index;
}

/* The key of each shape, sorted.  A shape without a key (none of a valid
 * problem lacks one) sorts by its name, which is as stable. */
static shard_entry *sorted_entries(const suite *shapes) {
  shard_entry *e = calloc(shapes->count, sizeof *e);
  if (e == NULL) return NULL;
  for (size_t i = 0; i < shapes->count; i++) {
    e[i].index = i;
    if (conv_problem_key(&shapes->shapes[i].problem, e[i].key, sizeof e[i].key) != CONV_OK)
      snprintf(e[i].key, sizeof e[i].key, "%s", shapes->shapes[i].name);
  }
  qsort(e, shapes->count, sizeof *e, by_key_then_index);
  return e;
}

/* keep[i]: whether shape i is in shard `index` of `count`; the number of
 * distinct keys goes to *distinct. */
static void mark_shard(const shard_entry *e, size_t n, unsigned index, unsigned count,
                       bool *keep, size_t *distinct) {
  size_t rank = 0;
  for (size_t i = 0; i < n; i++) {
    if (i > 0 && strcmp(e[i].key, e[i - 1].key) != 0) rank++;
    keep[e[i].index] = rank % count == index;
  }
  *distinct = n > 0 ? rank + 1 : 0;
}

/* Drops the shapes not kept, the others staying in their order. */
static void compact(suite *shapes, const bool *keep) {
  size_t kept = 0;
  for (size_t i = 0; i < shapes->count; i++) {
    if (keep[i])
      shapes->shapes[kept++] = shapes->shapes[i];
    else
      free(shapes->shapes[i].name);
  }
  shapes->count = kept;
}

int keep_shard(const cli_args *a, suite *shapes) {
  if (!a->sharded || shapes->count == 0) return EXIT_OK_;
  const size_t total = shapes->count;
  shard_entry *e = sorted_entries(shapes);
  bool *keep = calloc(total, sizeof *keep);
  if (e == NULL || keep == NULL) {
    free(e);
    free(keep);
    say("out of memory");
    return EXIT_FAILED;
  }
  size_t distinct = 0;
  mark_shard(e, total, a->shard_index, a->shard_count, keep, &distinct);
  compact(shapes, keep);
  free(e);
  free(keep);
  if (shapes->count == 0) {
    say("shard %u/%u: none of the %zu distinct shapes is in this shard (fewer shapes than "
        "shards): nothing to tune",
        a->shard_index, a->shard_count, distinct);
    if (a->json) fputs("[]\n", stdout);
  } else {
    say("shard %u/%u: %zu of the %zu shapes (the other shards tune the rest)", a->shard_index,
        a->shard_count, shapes->count, total);
  }
  return EXIT_OK_;
}
