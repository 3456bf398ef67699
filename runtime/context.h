/* context.h -- the context's layout, shared by context.c and plan.c, and
 * the accessor the tests use to read a context's cache. */
#ifndef CONVTUNE_CONTEXT_H
#define CONVTUNE_CONTEXT_H

#include <stdatomic.h>

#include "cache/cache.h"
#include "algorithms/algorithm.h"
#include "runtime/live_plans.h"
#include "runtime/plan_map.h"
#include "tuner/tuner.h"

struct conv_context {
  conv_env env;
  cudaStream_t tuning_stream; /* every tuning's work and buffers (conv_tune_request) */
  conv_policy policy;
  double tuning_budget_ms; /* per problem; 0: none */
  size_t workspace_limit;
  conv_logger log; /* the options' callback and level */
  bool direct_launches; /* plans never replay graphs */
  bool deterministic;   /* every plan is made for a deterministic problem */
  bool retime_stale;    /* carried-over winners pending "stale" are tuned again */
  char cache_path[4096];
  conv_cache *cache;
  conv_system_caches system; /* read-only layers under `cache`, in lookup order */
  uv_mutex_t lock; /* plan creation: map, cache, tuning */
  plan_map map;
  live_plans live; /* plans not yet destroyed, by problem */
  atomic_int interrupt;
  uint64_t id; /* unique in the process: names the context's error slots */
};

/* The context's writable cache, for tests that read what tuning stored. */
struct conv_cache *conv_context_cache(conv_context *context);

/* Records a failed call's status and message as the calling thread's last
 * error on this context. */
void context_set_error(const conv_context *context, const conv_error *err);

/* The tuning request of `problem` under `key` for this context (plan.c's
 * tuning, carried.c's re-validation; context.c). */
conv_tune_request context_tune_request(conv_context *ctx, const conv_problem *problem,
                                       const conv_cache_key *key);

/* A winner carried over from other library versions (carried.c, cache.h's
 * rules): looked for in the user's cache, then the system caches; the
 * first found is re-validated against the reference and, when it passes,
 * stored in the user's cache under key's versions, pending "stale"
 * (failing to store it costs only a warning), and returned in *choice
 * with *found.  One that fails re-validation, or a layer SQLite cannot
 * read, is passed over with a warning ending in `instead`; *found is then
 * false.  Only CONV_INTERRUPTED and failures of the arguments are
 * returned as errors. */
conv_status plan_carried_choice(conv_context *ctx, const conv_problem *problem,
                                const conv_cache_key *key, const char *instead,
                                conv_choice *choice /* OUT */, bool *found /* OUT */,
                                conv_error *err);

#endif /* CONVTUNE_CONTEXT_H */
