/* context.h -- the context's layout, shared by context.c and plan.c. */
#ifndef CONVTUNE_CONTEXT_H
#define CONVTUNE_CONTEXT_H

#include <stdatomic.h>

#include "cache/cache.h"
#include "runtime/internal.h"
#include "tuner/tuner.h"

/* The in-memory map in front of the cache: problem key -> choice. */
typedef struct plan_map_entry {
  struct plan_map_entry *next;
  char key[CONV_PROBLEM_KEY_MAX];
  conv_choice choice;
} plan_map_entry;

typedef struct plan_map {
  plan_map_entry **buckets;
  size_t bucket_count, size;
} plan_map;

/* Buckets of the live-plan table (plan.c); chains stay short for the
 * hundreds of shapes a network has. */
#define CONV_LIVE_BUCKETS 256

struct conv_context {
  conv_env env;
  conv_policy policy;
  double tuning_budget_ms; /* per problem; 0: none */
  size_t workspace_limit;
  conv_logger log; /* the options' callback and level */
  bool direct_launches; /* plans never replay graphs */
  bool deterministic;   /* every plan is made for a deterministic problem */
  char cache_path[4096];
  conv_cache *cache;
  char system_cache_path[4096]; /* "" when there is no system layer */
  conv_cache *system_cache;     /* read-only; NULL when there is none */
  uv_mutex_t lock; /* plan creation: map, cache, tuning */
  plan_map map;
  /* Plans not yet destroyed, by problem.  Its own lock, taken after `lock`
   * when both are: a plan found here is returned while a tuning runs. */
  uv_mutex_t live_lock;
  struct conv_plan *live[CONV_LIVE_BUCKETS];
  atomic_int interrupt;
  uint64_t id; /* unique in the process: names the context's error slots */
};

/* Records a failed call's status and message as the calling thread's last
 * error on this context. */
void context_set_error(const conv_context *context, const conv_error *err);

/* How many plans made from the context are alive (plan.c). */
size_t live_plan_count(conv_context *context);

/* Map operations; the caller holds context->lock. */
const conv_choice *plan_map_find(const plan_map *map, const char *key);
conv_status plan_map_put(plan_map *map, const char *key, const conv_choice *choice);
void plan_map_free(plan_map *map);

#endif /* CONVTUNE_CONTEXT_H */
