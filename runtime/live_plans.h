/*
 * live_plans.h -- a context's plans not yet destroyed, by problem, so that
 * conv_plan_create of a problem with a live plan returns another reference
 * to it.  A plan embeds its live_entry; the table holds the entries and
 * their reference counts, under its own lock (taken after the context's
 * when both are, so that a plan found here is returned while a tuning
 * runs).  The context initialises and destroys the lock with its others.
 */
#ifndef CONVTUNE_LIVE_PLANS_H
#define CONVTUNE_LIVE_PLANS_H

#include <stdbool.h>
#include <stddef.h>

#include <uv.h>

#include "convtune.h"

/* Chains stay short for the hundreds of shapes a network has. */
#define LIVE_PLANS_BUCKETS 256

typedef struct live_entry {
  struct live_entry *next;
  const conv_problem *problem; /* the plan's own */
  int refs;
} live_entry;

typedef struct live_plans {
  uv_mutex_t lock;
  live_entry *buckets[LIVE_PLANS_BUCKETS];
} live_plans;

/* Another reference to the live entry for `problem`, or NULL. */
live_entry *live_acquire(live_plans *table, const conv_problem *problem);
/* Adds `entry`, holding one reference, for `problem` (which outlives it). */
void live_insert(live_plans *table, live_entry *entry, const conv_problem *problem);
/* Drops one reference; true when it was the last (the entry has left the
 * table and its plan is the caller's to free). */
bool live_release(live_plans *table, live_entry *entry);
size_t live_count(live_plans *table);

#endif /* CONVTUNE_LIVE_PLANS_H */
