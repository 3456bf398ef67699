/* plan.c -- plan creation (memory, cache, or tuning) and execution (graph
 * replay or direct launches). */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/context.h"

/* Graph replay in a model: layers of one shape share a plan, each layer
 * brings its own weights, and PyTorch's allocator hands out activations
 * that repeat from one forward pass to the next.  So a plan keeps a graph
 * per recurring pointer set (x, w, bias, y):
 * - a set seen for the first time runs directly: capturing costs more than
 *   running, and most one-off sets never come back;
 * - a set seen again (among the last PLAN_SEEN_SETS first sightings) is
 *   captured into a free slot, and replayed from then on;
 * - with all PLAN_GRAPH_SLOTS taken, the least recently used graph is
 *   updated in place only while replays outnumber such updates
 *   PLAN_HITS_PER_EVICTION to one: a cycle of more sets than slots would
 *   otherwise capture on every call, which costs more than running. */
#define PLAN_GRAPH_SLOTS 32
#define PLAN_SEEN_SETS 64
#define PLAN_HITS_PER_EVICTION 4

typedef struct graph_slot {
  cudaGraphExec_t exec;
  const void *pointers[4]; /* x, w, bias, y */
  uint64_t last_use;
} graph_slot;

struct conv_plan {
  conv_context *ctx;
  conv_problem problem;
  /* In the context's live plans (live_plans.h): conv_plan_create of a
   * problem with a live plan returns another reference to it. */
  live_entry live;
  const conv_algorithm *algorithm;
  conv_config config;
  conv_prepared prepared;
  void *workspace;
  conv_plan_info info;
  /* Graph replay (conv_plan_execute), and the stream graphs are captured
   * on, which never runs anything. */
  graph_slot graphs[PLAN_GRAPH_SLOTS];
  int graph_count;
  bool graphs_off; /* capture failed once: direct runs for good */
  const void *seen[PLAN_SEEN_SETS][4]; /* first sightings, a ring */
  int seen_next;
  uint64_t evictions;
  cudaStream_t capture_stream;
};

static void plan_free(conv_plan *plan);

/* ---------------------------------------------------------------- live plans */

static conv_plan *plan_of(live_entry *entry) {
  return entry == NULL ? NULL : (conv_plan *)((char *)entry - offsetof(conv_plan, live));
}

/* ---------------------------------------------------------------- creation */

/* The plan's workspace, which its executes use on any stream the caller
 * gives: allocated with stream NULL, and, from the caller's allocator,
 * only once that stream has finished what the allocator ordered before
 * (it may hand out memory that work queued on NULL still uses). */
static conv_status plan_workspace_alloc(conv_plan *plan, conv_error *err) {
  const conv_allocator *a = &plan->ctx->env.allocator;
  void *workspace = NULL;
  conv_status st = conv_device_alloc(a, plan->prepared.workspace_bytes, NULL, &workspace,
                                     "plan workspace", err);
  if (st == CONV_OK && conv_allocator_is_user(a))
    st = conv_check_cuda(err, cudaStreamSynchronize(NULL),
                         "cudaStreamSynchronize(the default stream, for the plan workspace)");
  if (st != CONV_OK) {
    conv_device_free(a, workspace, plan->prepared.workspace_bytes, NULL);
    return st;
  }
  plan->workspace = workspace;
  return CONV_OK;
}

/* Freed with stream NULL, as allocated, once every execute on any stream
 * is done (cudaFree waits for the device itself). */
static void plan_workspace_free(conv_plan *plan) {
  const conv_allocator *a = &plan->ctx->env.allocator;
  if (plan->workspace == NULL) return;
  if (conv_allocator_is_user(a)) (void)cudaDeviceSynchronize(); /* nobody to report to */
  conv_device_free(a, plan->workspace, plan->prepared.workspace_bytes, NULL);
  plan->workspace = NULL;
}

/* Builds a runnable plan for a choice: validates the config again (it may
 * come from an untrusted cache file) and allocates its workspace. */
static conv_status instantiate(conv_context *ctx, const conv_problem *problem,
                               const conv_choice *choice, conv_plan_source source,
                               conv_plan **out, conv_error *err) {
  const conv_algorithm *algo = conv_registry_find(choice->algorithm_id);
  if (algo == NULL)
    return conv_error_set(err, CONV_UNSUPPORTED, "algorithm id %u is unknown to this build",
                          (unsigned)choice->algorithm_id);
  if (!conv_algorithm_applicable(algo, problem, &ctx->env))
    return conv_error_set(err, CONV_UNSUPPORTED, "%s does not take this problem", algo->name);
  conv_plan *plan = calloc(1, sizeof *plan);
  if (plan == NULL) return conv_error_set(err, CONV_OUT_OF_MEMORY, "allocating a plan");
  plan->ctx = ctx;
  plan->problem = *problem;
  plan->algorithm = algo;
  plan->config = choice->config;
  conv_status st = algo->prepare(problem, &ctx->env, &choice->config, &plan->prepared, err);
  if (st != CONV_OK) {
    free(plan);
    return st;
  }
  /* A cache row is untrusted: a deterministic key's winner is checked again. */
  if ((st = conv_prepared_admits(problem, &plan->prepared, algo->name, err)) != CONV_OK) {
    plan_free(plan);
    return st;
  }
  if (plan->prepared.workspace_bytes > 0 &&
      (st = plan_workspace_alloc(plan, err)) != CONV_OK) {
    plan_free(plan);
    return st;
  }
  conv_plan_info *info = &plan->info;
  snprintf(info->algorithm, sizeof info->algorithm, "%s", algo->name);
  algo->describe(&choice->config, info->config, sizeof info->config);
  info->time_ms = choice->time_ms;
  info->workspace_bytes = plan->prepared.workspace_bytes;
  info->source = source;
  info->direction = plan->problem.direction;
  info->dtype = plan->problem.dtype;
  info->deterministic = plan->prepared.deterministic;
  info->replay = CONV_REPLAY_PENDING;
  if (ctx->direct_launches) {
    plan->graphs_off = true;
    info->replay = CONV_REPLAY_DIRECT;
    snprintf(info->replay_note, sizeof info->replay_note, "the context asks for direct launches");
  }
  *out = plan;
  return CONV_OK;
}

/* What the plan path does when layer `layer` (0 the user's cache, then
 * the system caches in order) gives no plan. */
static const char *instead_of(const conv_context *ctx, size_t layer) {
  if (layer < ctx->system.count)
    return layer == 0 ? "looking in the system cache" : "looking in the next system cache";
  switch (ctx->policy) {
  case CONV_POLICY_CACHE_ONLY: return "a cache miss (policy cache-only)";
  case CONV_POLICY_RECORD: return "an untimed plan (record mode)";
  default: return "tuning it";
  }
}

/* A layer's winner; a row that fails its checks (a corrupt or crafted
 * file) is passed over with a warning, as a miss. */
static conv_status lookup_cache(conv_context *ctx, size_t layer, const conv_cache_key *key,
                                conv_choice *choice, bool *found, conv_error *err) {
  conv_trial winner;
  conv_cache *cache = layer == 0 ? ctx->cache : ctx->system.caches[layer - 1];
  conv_status st = conv_cache_lookup_layer(cache, key, &ctx->log,
                                           layer == 0 ? "cache" : "system cache",
                                           instead_of(ctx, layer), &winner, found, err);
  if (st == CONV_OK && *found) {
    choice->algorithm_id = winner.algorithm_id;
    choice->config = winner.config;
    choice->time_ms = winner.time_ms;
  }
  return st;
}

/* Record mode's miss: an untimed plan now, the problem pending in the
 * user's cache for `convtune tune --pending`.  Failing to record it (a
 * read-only cache) costs the caller nothing: the plan is still returned. */
static conv_status pick_and_record(conv_context *ctx, const conv_tune_request *req,
                                   conv_choice *choice, conv_error *err) {
  conv_status st = conv_pick_untimed(req, choice, err);
  if (st != CONV_OK) return st;
  conv_error why = {CONV_OK, ""};
  if (conv_cache_record_pending(ctx->cache, req->key, CONV_PENDING_UNTUNED, &why) != CONV_OK)
    conv_log(&ctx->log, CONV_LOG_WARN, "%s: not recorded as pending (%s); the untimed plan is used",
             req->key->problem, why.message);
  return CONV_OK;
}

/* A miss in every layer: tuned now (into the user's cache), or, in record
 * mode, an untimed plan (*source says which). */
static conv_status tune(conv_context *ctx, const conv_problem *problem, const conv_cache_key *key,
                        conv_choice *choice, conv_plan_source *source, conv_error *err) {
  if (ctx->policy == CONV_POLICY_CACHE_ONLY) {
    const size_t n = ctx->system.count;
    char others[64] = "";
    if (n > 1) snprintf(others, sizeof others, " and %zu more", n - 1);
    return conv_error_set(err, CONV_CACHE_MISS, "%s: not in the cache %s%s%s%s (policy cache-only)",
                          key->problem, ctx->cache_path, n ? " nor in the system cache " : "",
                          n ? ctx->system.paths[0] : "", others);
  }
  atomic_store(&ctx->interrupt, 0);
  conv_tune_request req = context_tune_request(ctx, problem, key);
  *source = ctx->policy == CONV_POLICY_RECORD ? CONV_SOURCE_HEURISTIC : CONV_SOURCE_TUNED;
  if (ctx->policy == CONV_POLICY_RECORD) return pick_and_record(ctx, &req, choice, err);
  return conv_tune(&req, choice, err);
}

/* Whether this context tunes rather than carries over (retime_stale, as
 * `convtune tune` asks): one whose policy tunes. */
static bool retimes(const conv_context *ctx) {
  return ctx->retime_stale &&
         (ctx->policy == CONV_POLICY_EXHAUSTIVE || ctx->policy == CONV_POLICY_FAST ||
          ctx->policy == CONV_POLICY_PREDICT);
}

/* Whether the user's cache's tuning of `key` waits to be finished
 * (pending) and this context should finish it: a tuning cut short, by a
 * context that may tune fully (EXHAUSTIVE or FAST) without a budget of
 * its own; a carried-over winner ("stale") only where the context re-times
 * (retimes()), since keeping it is what carrying it over is for.  A
 * failed lookup counts as no. */
static bool finishes_incomplete(conv_context *ctx, const conv_cache_key *key) {
  const bool finishes = (ctx->policy == CONV_POLICY_EXHAUSTIVE ||
                         ctx->policy == CONV_POLICY_FAST) && !(ctx->tuning_budget_ms > 0);
  if (!finishes && !retimes(ctx)) return false;
  bool pending = false;
  conv_pending_reason reason = CONV_PENDING_INCOMPLETE;
  conv_error ignored = {CONV_OK, ""};
  if (conv_cache_find_pending(ctx->cache, key, &pending, &reason, &ignored) != CONV_OK)
    return false;
  if (pending) pending = reason == CONV_PENDING_STALE ? retimes(ctx) : finishes;
  if (pending)
    conv_log(&ctx->log, CONV_LOG_INFO, "%s: %s; tuning it fully", key->problem,
             reason == CONV_PENDING_STALE ? "its winner was carried over from other versions"
                                          : "its tuning was cut short by a budget");
  return pending;
}

/* A cached choice of one layer: *done when it gave the plan (or, cache-only,
 * its failure); a row that fails its checks, or a choice that no longer
 * instantiates (another build), is passed over with a warning, never
 * trusted. */
static conv_status from_layer(conv_context *ctx, size_t layer, const conv_problem *problem,
                              const conv_cache_key *key, conv_choice *choice, conv_plan **plan,
                              bool *done, bool *finishing, conv_error *err) {
  bool found = false;
  *done = false;
  const conv_plan_source source = layer == 0 ? CONV_SOURCE_CACHE : CONV_SOURCE_SYSTEM_CACHE;
  conv_status st = lookup_cache(ctx, layer, key, choice, &found, err);
  if (st == CONV_OK && found && source == CONV_SOURCE_CACHE) {
    *finishing = finishes_incomplete(ctx, key);
    found = !*finishing;
  }
  if (st != CONV_OK || !found) {
    *done = st != CONV_OK;
    return st;
  }
  st = instantiate(ctx, problem, choice, source, plan, err);
  *done = st == CONV_OK || ctx->policy == CONV_POLICY_CACHE_ONLY;
  if (!*done)
    conv_log(&ctx->log, CONV_LOG_WARN, "%s: the %s choice no longer builds (%s); %s", key->problem,
             source == CONV_SOURCE_SYSTEM_CACHE ? "system cache's" : "cached", err->message,
             instead_of(ctx, layer));
  return *done ? st : CONV_OK;
}

/* On a miss for this build's versions in every layer: a winner carried
 * over from other versions, re-validated (carried.c); *done as in
 * from_layer.  Not in a context that re-times (retimes()), nor while
 * finishing a pending tuning: the carried-over row would stand in for the
 * tuning again. */
static conv_status from_carried(conv_context *ctx, const conv_problem *problem,
                                const conv_cache_key *key, conv_choice *choice, conv_plan **plan,
                                bool *done, conv_error *err) {
  bool found = false;
  const char *instead = instead_of(ctx, ctx->system.count);
  conv_status st = plan_carried_choice(ctx, problem, key, instead, choice, &found, err);
  if (st != CONV_OK || !found) {
    *done = st != CONV_OK;
    return st;
  }
  st = instantiate(ctx, problem, choice, CONV_SOURCE_CARRIED, plan, err);
  *done = st == CONV_OK || ctx->policy == CONV_POLICY_CACHE_ONLY;
  if (!*done)
    conv_log(&ctx->log, CONV_LOG_WARN, "%s: the carried-over choice does not build (%s); %s",
             key->problem, err->message, instead);
  return *done ? st : CONV_OK;
}

/* Memory, then the cache, then the system caches in order, then a winner
 * carried over from other versions, then tuning (into the cache only) or,
 * in record mode, an untimed plan. */
static conv_status create_locked(conv_context *ctx, const conv_problem *problem,
                                 const char *problem_key, conv_plan **plan, conv_error *err) {
  conv_cache_key key = {problem_key, ctx->env.device.key, conv_library_versions()};
  conv_choice choice;
  const conv_choice *known = plan_map_find(&ctx->map, problem_key);
  if (known) return instantiate(ctx, problem, known, CONV_SOURCE_MEMORY, plan, err);

  bool done = false, finishing = false;
  conv_status st = CONV_OK;
  for (size_t layer = 0; !done && layer <= ctx->system.count; layer++)
    st = from_layer(ctx, layer, problem, &key, &choice, plan, &done, &finishing, err);
  if (!done && !finishing && !retimes(ctx))
    st = from_carried(ctx, problem, &key, &choice, plan, &done, err);
  if (done) {
    if (st != CONV_OK) return st;
    goto remember;
  }
  conv_plan_source source = CONV_SOURCE_TUNED;
  st = tune(ctx, problem, &key, &choice, &source, err);
  if (st == CONV_OK) st = instantiate(ctx, problem, &choice, source, plan, err);
remember:
  if (st == CONV_OK && plan_map_put(&ctx->map, problem_key, &choice) != CONV_OK) {
    plan_free(*plan);
    *plan = NULL;
    st = conv_error_set(err, CONV_OUT_OF_MEMORY, "growing the plan map");
  }
  return st;
}

/* Builds the plan under the context's lock, unless another thread built
 * it meanwhile (creations of one problem then share one plan). */
static conv_status create_shared(conv_context *ctx, const conv_problem *problem, conv_plan **plan,
                                 conv_error *err) {
  char key[CONV_PROBLEM_KEY_MAX];
  conv_status st = conv_problem_key(problem, key, sizeof key);
  if (st != CONV_OK) return conv_error_set(err, st, "the problem has no cache key");
  uv_mutex_lock(&ctx->lock);
  if ((*plan = plan_of(live_acquire(&ctx->live, problem))) == NULL) {
    int previous = -1;
    if ((st = conv_device_enter(ctx->env.device.ordinal, &previous, err)) == CONV_OK) {
      st = create_locked(ctx, problem, key, plan, err);
      conv_device_leave(previous);
    }
    if (st == CONV_OK) live_insert(&ctx->live, &(*plan)->live, &(*plan)->problem);
  }
  uv_mutex_unlock(&ctx->lock);
  return st;
}

conv_status conv_plan_create(conv_context *ctx, const conv_problem *problem, conv_plan **plan) {
  if (ctx == NULL) return CONV_INVALID_ARGUMENT;
  conv_error err = {CONV_OK, ""};
  conv_status st = CONV_OK;
  conv_problem ours;
  if (plan == NULL)
    st = conv_error_set(&err, CONV_INVALID_ARGUMENT, "plan is NULL");
  else
    st = conv_problem_import(problem, &ours, &err);
  if (st == CONV_OK) st = conv_problem_validate(&ours, err.message, sizeof err.message);
  if (st == CONV_OK) {
    if (ctx->deterministic) ours.deterministic = 1;
    problem = &ours;
    /* The hot path: a live plan is one hash lookup away. */
    conv_plan *made = plan_of(live_acquire(&ctx->live, problem));
    if (made == NULL) st = create_shared(ctx, problem, &made, &err);
    if (st == CONV_OK) {
      *plan = made;
      return CONV_OK;
    }
  }
  err.status = st;
  context_set_error(ctx, &err);
  return st;
}

/* ---------------------------------------------------------------- replay */

static void set_replay(conv_plan *plan, conv_replay replay, const char *note) {
  plan->info.replay = replay;
  snprintf(plan->info.replay_note, sizeof plan->info.replay_note, "%s", note);
}

/* Capturing failed: this plan runs its pieces directly from now on. */
static void graphs_off(conv_plan *plan, const char *why, cudaError_t e) {
  plan->graphs_off = true;
  plan->info.replay = CONV_REPLAY_DIRECT;
  snprintf(plan->info.replay_note, sizeof plan->info.replay_note, "%s%s%s", why,
           e != cudaSuccess ? ": " : "", e != cudaSuccess ? cudaGetErrorString(e) : "");
  (void)cudaGetLastError(); /* a failed capture leaves its error behind */
}

static bool same_pointers(const void *const a[4], const void *const b[4]) {
  return memcmp(a, b, 4 * sizeof a[0]) == 0;
}

static graph_slot *kept_graph(conv_plan *plan, const void *const pointers[4]) {
  for (int i = 0; i < plan->graph_count; i++)
    if (same_pointers(plan->graphs[i].pointers, pointers)) return &plan->graphs[i];
  return NULL;
}

/* True when `pointers` ran before (among the last first sightings);
 * otherwise remembers them and returns false. */
static bool seen_before(conv_plan *plan, const void *const pointers[4]) {
  for (int i = 0; i < PLAN_SEEN_SETS; i++)
    if (same_pointers(plan->seen[i], pointers)) return true;
  memcpy(plan->seen[plan->seen_next], pointers, sizeof plan->seen[0]);
  plan->seen_next = (plan->seen_next + 1) % PLAN_SEEN_SETS;
  return false;
}

/* Where a recurring set's graph goes: a free slot, else the least recently
 * used one while replays pay for updating it; NULL to run directly. */
static graph_slot *slot_to_fill(conv_plan *plan) {
  if (plan->graph_count < PLAN_GRAPH_SLOTS) return &plan->graphs[plan->graph_count];
  if (plan->info.graph_launches < PLAN_HITS_PER_EVICTION * (plan->evictions + 1)) return NULL;
  graph_slot *lru = &plan->graphs[0];
  for (int i = 1; i < plan->graph_count; i++)
    if (plan->graphs[i].last_use < lru->last_use) lru = &plan->graphs[i];
  plan->evictions++;
  return lru;
}

/* Records one run with exec's pointers (the same as `pointers`, the slot's
 * key) into a graph, on the plan's own stream (nothing executes), and puts
 * it in `slot`: updating the slot's graph in place where CUDA allows, else
 * instantiating anew.  Work that cannot be captured switches the plan to
 * direct runs for good. */
static bool capture_graph(conv_plan *plan, const conv_exec *exec, const void *const pointers[4],
                          graph_slot *slot) {
  cudaError_t e = cudaSuccess;
  if (plan->capture_stream == NULL)
    e = cudaStreamCreateWithFlags(&plan->capture_stream, cudaStreamNonBlocking);
  if (e == cudaSuccess)
    e = cudaStreamBeginCapture(plan->capture_stream, cudaStreamCaptureModeThreadLocal);
  if (e != cudaSuccess) {
    graphs_off(plan, "starting a stream capture", e);
    return false;
  }
  conv_error err = {CONV_OK, ""};
  const conv_status run = plan->algorithm->run(exec, plan->capture_stream, &err);
  cudaGraph_t graph = NULL;
  e = cudaStreamEndCapture(plan->capture_stream, &graph);
  if (run != CONV_OK || e != cudaSuccess) {
    if (graph != NULL) cudaGraphDestroy(graph);
    graphs_off(plan, run != CONV_OK ? err.message : "capturing the plan's work",
               run != CONV_OK ? cudaSuccess : e);
    return false;
  }
  const bool new_slot = slot == &plan->graphs[plan->graph_count];
  if (new_slot) {
    slot->exec = NULL;
  } else {
    cudaGraphExecUpdateResultInfo result;
    if (cudaGraphExecUpdate(slot->exec, graph, &result) != cudaSuccess) {
      (void)cudaGetLastError(); /* another topology: instantiate anew */
      cudaGraphExecDestroy(slot->exec);
      slot->exec = NULL;
    }
  }
  if (slot->exec == NULL) e = cudaGraphInstantiate(&slot->exec, graph, 0);
  cudaGraphDestroy(graph);
  if (e != cudaSuccess) {
    slot->exec = NULL;
    if (!new_slot) *slot = plan->graphs[--plan->graph_count]; /* keep the kept ones dense */
    graphs_off(plan, "instantiating the graph", e);
    return false;
  }
  if (new_slot) plan->graph_count++;
  memcpy(slot->pointers, pointers, sizeof slot->pointers);
  plan->info.graph_captures++;
  return true;
}

/* The graph this execute launches, capturing it first for a recurring
 * pointer set; NULL to run the pieces directly.  A stream being captured
 * by the caller gets the pieces, which its capture records as they are. */
static cudaGraphExec_t graph_for(conv_plan *plan, const conv_exec *exec, cudaStream_t stream) {
  if (plan->graphs_off) return NULL;
  enum cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(stream, &capturing) != cudaSuccess) {
    (void)cudaGetLastError();
    return NULL;
  }
  if (capturing != cudaStreamCaptureStatusNone) {
    set_replay(plan, CONV_REPLAY_DIRECT, "the caller's stream is being captured");
    return NULL;
  }
  const void *pointers[4] = {exec->x, exec->w, exec->bias, exec->y};
  graph_slot *slot = kept_graph(plan, pointers);
  if (slot == NULL) {
    if (!seen_before(plan, pointers)) {
      set_replay(plan, CONV_REPLAY_DIRECT, "first run with these pointers");
      return NULL;
    }
    slot = slot_to_fill(plan);
    if (slot == NULL) {
      set_replay(plan, CONV_REPLAY_DIRECT, "more recurring pointer sets than kept graphs");
      return NULL;
    }
    if (!capture_graph(plan, exec, pointers, slot)) return NULL;
  }
  slot->last_use = plan->info.graph_launches + plan->info.direct_runs + 1;
  set_replay(plan, CONV_REPLAY_GRAPH, "");
  return slot->exec;
}

static conv_status execute_error(conv_plan *plan, conv_error *err) {
  context_set_error(plan->ctx, err);
  return err->status;
}

static const char *direction_text(conv_direction d) {
  return d == CONV_BACKWARD_DATA     ? "backward-data (conv_plan_backward_data)"
         : d == CONV_BACKWARD_FILTER ? "backward-filter (conv_plan_backward_filter)"
                                     : "forward (conv_plan_execute)";
}

/* One pass of the plan.  x, w, bias and y are the forward convolution's
 * tensors, as run() takes them in every direction (a backward pass reads
 * y as dy and writes x or w); `names` are the caller's names for them. */
static conv_status execute_pass(conv_plan *plan, conv_direction direction, void *stream,
                                const void *x, const void *w, const void *bias, void *y,
                                const char *const names[4]) {
  if (plan == NULL) return CONV_INVALID_ARGUMENT;
  conv_error err = {CONV_OK, ""};
  if (plan->problem.direction != direction) {
    conv_error_set(&err, CONV_INVALID_ARGUMENT, "execute: the plan is for a %s pass, not %s",
                   direction_text(plan->problem.direction), direction_text(direction));
    return execute_error(plan, &err);
  }
  bool needs_bias = plan->problem.epilogue != CONV_EPILOGUE_NONE;
  const void *ptrs[] = {x, w, y, needs_bias ? bias : NULL};
  for (int i = 0; i < 4; i++) {
    if (ptrs[i] == NULL && (i < 3 || needs_bias)) {
      conv_error_set(&err, CONV_INVALID_ARGUMENT, "execute: %s is NULL%s", names[i],
                     i == 3 ? " (the epilogue adds it)" : "");
      return execute_error(plan, &err);
    }
    if ((uintptr_t)ptrs[i] % CONV_POINTER_ALIGNMENT != 0) {
      conv_error_set(&err, CONV_INVALID_ARGUMENT, "execute: %s is not %d-byte aligned", names[i],
                     CONV_POINTER_ALIGNMENT);
      return execute_error(plan, &err);
    }
  }
  int previous = -1;
  if (conv_device_enter(plan->ctx->env.device.ordinal, &previous, &err) != CONV_OK)
    return execute_error(plan, &err);
  conv_exec exec = {&plan->problem, &plan->ctx->env, plan->prepared.state, x, w,
                    needs_bias ? bias : NULL, y, plan->workspace, plan->prepared.workspace_bytes};
  conv_status st;
  cudaGraphExec_t graph = graph_for(plan, &exec, (cudaStream_t)stream);
  if (graph != NULL) {
    st = conv_check_cuda(&err, cudaGraphLaunch(graph, (cudaStream_t)stream),
                         "execute: launching the plan's graph");
    plan->info.graph_launches++;
  } else {
    st = plan->algorithm->run(&exec, (cudaStream_t)stream, &err);
    plan->info.direct_runs++;
  }
  conv_device_leave(previous);
  if (st != CONV_OK) {
    err.status = st;
    return execute_error(plan, &err);
  }
  return CONV_OK;
}

conv_status conv_plan_execute(conv_plan *plan, void *stream, const void *x, const void *w,
                              const void *bias, void *y) {
  static const char *const names[4] = {"x", "w", "y", "bias"};
  return execute_pass(plan, CONV_FORWARD, stream, x, w, bias, y, names);
}

/* dy is only read; run() takes it as y, the forward pass's output. */
conv_status conv_plan_backward_data(conv_plan *plan, void *stream, const void *dy, const void *w,
                                    void *dx) {
  static const char *const names[4] = {"dx", "w", "dy", "bias"};
  return execute_pass(plan, CONV_BACKWARD_DATA, stream, dx, w, NULL, (void *)dy, names);
}

conv_status conv_plan_backward_filter(conv_plan *plan, void *stream, const void *x,
                                      const void *dy, void *dw) {
  static const char *const names[4] = {"x", "dw", "dy", "bias"};
  return execute_pass(plan, CONV_BACKWARD_FILTER, stream, x, dw, NULL, (void *)dy, names);
}

conv_status conv_plan_info_get_sized(const conv_plan *plan, conv_plan_info *info,
                                     size_t struct_size) {
  if (plan == NULL || info == NULL || struct_size < CONV_PLAN_INFO_FIRST_SIZE)
    return CONV_INVALID_ARGUMENT;
  conv_struct_export(info, struct_size, &plan->info, sizeof plan->info);
  return CONV_OK;
}

void conv_plan_destroy(conv_plan *plan) {
  if (plan != NULL && live_release(&plan->ctx->live, &plan->live)) plan_free(plan);
}

static void plan_free(conv_plan *plan) {
  int previous = -1;
  bool entered = conv_device_enter(plan->ctx->env.device.ordinal, &previous, NULL) == CONV_OK;
  /* Executions still queued with the workspace complete before it is
   * released (plan_workspace_free waits for the device). */
  for (int i = 0; i < plan->graph_count; i++) cudaGraphExecDestroy(plan->graphs[i].exec);
  if (plan->capture_stream) cudaStreamDestroy(plan->capture_stream);
  plan_workspace_free(plan);
  plan->algorithm->release(plan->prepared.state);
  if (entered) conv_device_leave(previous);
  free(plan);
}
