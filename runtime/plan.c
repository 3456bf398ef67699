/* plan.c -- plan creation (memory, cache, or tuning) and execution (graph
 * replay or direct launches). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/context.h"

struct conv_plan {
  conv_context *ctx;
  conv_problem problem;
  const conv_algorithm *algorithm;
  conv_config config;
  conv_prepared prepared;
  void *workspace;
  conv_plan_info info;
  /* Graph replay (conv_plan_execute): the executable graph, the pointers
   * it was captured with (x, w, bias, y), and the stream it was captured
   * on, which never runs anything. */
  cudaGraphExec_t graph;
  const void *graph_pointers[4];
  cudaStream_t capture_stream;
};

/* Builds a runnable plan for a choice: validates the config again (it may
 * come from an untrusted cache file) and allocates its workspace. */
static conv_status instantiate(conv_context *ctx, const conv_problem *problem,
                               const conv_choice *choice, conv_plan_source source,
                               conv_plan **out, conv_error *err) {
  const conv_algorithm *algo = conv_registry_find(choice->algorithm_id);
  if (algo == NULL)
    return conv_error_set(err, CONV_UNSUPPORTED, "algorithm id %u is unknown to this build",
                          (unsigned)choice->algorithm_id);
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
  if (plan->prepared.workspace_bytes > 0) {
    st = conv_check_cuda(err, cudaMalloc(&plan->workspace, plan->prepared.workspace_bytes),
                         "cudaMalloc(plan workspace)");
    if (st != CONV_OK) {
      conv_plan_destroy(plan);
      return st;
    }
  }
  conv_plan_info *info = &plan->info;
  snprintf(info->algorithm, sizeof info->algorithm, "%s", algo->name);
  algo->describe(&choice->config, info->config, sizeof info->config);
  info->time_ms = choice->time_ms;
  info->workspace_bytes = plan->prepared.workspace_bytes;
  info->source = source;
  info->replay = CONV_REPLAY_PENDING;
  if (ctx->direct_launches) {
    info->replay = CONV_REPLAY_DIRECT;
    snprintf(info->replay_note, sizeof info->replay_note, "the context asks for direct launches");
  }
  *out = plan;
  return CONV_OK;
}

static conv_status lookup_cache(conv_context *ctx, const conv_cache_key *key, conv_choice *choice,
                                bool *found, conv_error *err) {
  conv_trial winner;
  conv_status st = conv_cache_lookup_winner(ctx->cache, key, &winner, found, err);
  if (st == CONV_OK && *found) {
    choice->algorithm_id = winner.algorithm_id;
    choice->config = winner.config;
    choice->time_ms = winner.time_ms;
  }
  return st;
}

static conv_status tune(conv_context *ctx, const conv_problem *problem, const conv_cache_key *key,
                        conv_choice *choice, conv_error *err) {
  if (ctx->policy == CONV_POLICY_CACHE_ONLY)
    return conv_error_set(err, CONV_CACHE_MISS, "%s: not in the cache %s (policy cache-only)",
                          key->problem, ctx->cache_path);
  atomic_store(&ctx->interrupt, 0);
  conv_tune_request req = {problem, &ctx->env, ctx->cache, key, ctx->policy,
                           ctx->workspace_limit, ctx->verbose, &ctx->interrupt};
  return conv_tune(&req, choice, err);
}

/* Memory, then cache, then tuning.  A cached choice that no longer
 * instantiates (another build, a corrupt row) is re-tuned, never trusted. */
static conv_status create_locked(conv_context *ctx, const conv_problem *problem,
                                 const char *problem_key, conv_plan **plan, conv_error *err) {
  conv_cache_key key = {problem_key, ctx->env.device.key, conv_library_versions()};
  conv_choice choice;
  const conv_choice *known = plan_map_find(&ctx->map, problem_key);
  if (known) return instantiate(ctx, problem, known, CONV_SOURCE_MEMORY, plan, err);

  bool found = false;
  conv_status st = lookup_cache(ctx, &key, &choice, &found, err);
  if (st != CONV_OK) return st;
  conv_plan_source source = CONV_SOURCE_CACHE;
  if (found) {
    st = instantiate(ctx, problem, &choice, source, plan, err);
    if (st == CONV_OK || ctx->policy == CONV_POLICY_CACHE_ONLY) goto remember;
  }
  source = CONV_SOURCE_TUNED;
  st = tune(ctx, problem, &key, &choice, err);
  if (st == CONV_OK) st = instantiate(ctx, problem, &choice, source, plan, err);
remember:
  if (st == CONV_OK && plan_map_put(&ctx->map, problem_key, &choice) != CONV_OK) {
    conv_plan_destroy(*plan);
    *plan = NULL;
    st = conv_error_set(err, CONV_OUT_OF_MEMORY, "growing the plan map");
  }
  return st;
}

conv_status conv_plan_create(conv_context *ctx, const conv_problem *problem, conv_plan **plan) {
  if (ctx == NULL) return CONV_INVALID_ARGUMENT;
  conv_error err = {CONV_OK, ""};
  conv_status st = CONV_OK;
  char key[CONV_PROBLEM_KEY_MAX];
  conv_plan *made = NULL;
  if (plan == NULL) {
    st = conv_error_set(&err, CONV_INVALID_ARGUMENT, "plan is NULL");
  } else {
    st = conv_problem_validate(problem, err.message, sizeof err.message);
    if (st == CONV_OK) st = conv_problem_key(problem, key, sizeof key);
  }
  uv_mutex_lock(&ctx->lock);
  int previous = -1;
  if (st == CONV_OK && (st = conv_device_enter(ctx->env.device.ordinal, &previous, &err)) == CONV_OK) {
    st = create_locked(ctx, problem, key, &made, &err);
    conv_device_leave(previous);
  }
  if (st == CONV_OK) *plan = made;
  uv_mutex_unlock(&ctx->lock);
  if (st != CONV_OK) {
    err.status = st;
    context_set_error(ctx, &err);
  }
  return st;
}

/* ---------------------------------------------------------------- replay */

static void replay_directly(conv_plan *plan, const char *why, cudaError_t e) {
  plan->info.replay = CONV_REPLAY_DIRECT;
  snprintf(plan->info.replay_note, sizeof plan->info.replay_note, "%s%s%s", why,
           e != cudaSuccess ? ": " : "", e != cudaSuccess ? cudaGetErrorString(e) : "");
  (void)cudaGetLastError(); /* a failed capture leaves its error behind */
}

/* Records one run with exec's pointers into a graph, on the plan's own
 * stream (nothing executes), and makes it the plan's executable graph:
 * updated in place where CUDA allows, else instantiated anew.  Work that
 * cannot be captured switches the plan to direct launches for good. */
static void capture_graph(conv_plan *plan, const conv_exec *exec) {
  cudaError_t e = cudaSuccess;
  if (plan->capture_stream == NULL)
    e = cudaStreamCreateWithFlags(&plan->capture_stream, cudaStreamNonBlocking);
  if (e == cudaSuccess)
    e = cudaStreamBeginCapture(plan->capture_stream, cudaStreamCaptureModeThreadLocal);
  if (e != cudaSuccess) {
    replay_directly(plan, "starting a stream capture", e);
    return;
  }
  conv_error err = {CONV_OK, ""};
  const conv_status run = plan->algorithm->run(exec, plan->capture_stream, &err);
  cudaGraph_t graph = NULL;
  e = cudaStreamEndCapture(plan->capture_stream, &graph);
  if (run != CONV_OK || e != cudaSuccess) {
    if (graph != NULL) cudaGraphDestroy(graph);
    replay_directly(plan, run != CONV_OK ? err.message : "capturing the plan's work",
                    run != CONV_OK ? cudaSuccess : e);
    return;
  }
  if (plan->graph != NULL) {
    cudaGraphExecUpdateResultInfo result;
    if (cudaGraphExecUpdate(plan->graph, graph, &result) != cudaSuccess) {
      (void)cudaGetLastError(); /* another topology: instantiate anew */
      cudaGraphExecDestroy(plan->graph);
      plan->graph = NULL;
    }
  }
  if (plan->graph == NULL) e = cudaGraphInstantiate(&plan->graph, graph, 0);
  cudaGraphDestroy(graph);
  if (e != cudaSuccess) {
    plan->graph = NULL;
    replay_directly(plan, "instantiating the graph", e);
    return;
  }
  const void *pointers[4] = {exec->x, exec->w, exec->bias, exec->y};
  memcpy(plan->graph_pointers, pointers, sizeof pointers);
  plan->info.replay = CONV_REPLAY_GRAPH;
}

/* Whether this execute launches the plan's graph, capturing it first if
 * the pointers changed.  A stream being captured by the caller gets the
 * pieces, which its capture records as they are. */
static bool replays(conv_plan *plan, const conv_exec *exec, cudaStream_t stream) {
  if (plan->info.replay == CONV_REPLAY_DIRECT) return false;
  enum cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(stream, &capturing) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  if (capturing != cudaStreamCaptureStatusNone) return false;
  const void *pointers[4] = {exec->x, exec->w, exec->bias, exec->y};
  if (plan->graph == NULL || memcmp(plan->graph_pointers, pointers, sizeof pointers) != 0)
    capture_graph(plan, exec);
  return plan->info.replay == CONV_REPLAY_GRAPH;
}

static conv_status execute_error(conv_plan *plan, conv_error *err) {
  context_set_error(plan->ctx, err);
  return err->status;
}

conv_status conv_plan_execute(conv_plan *plan, void *stream, const void *x, const void *w,
                              const void *bias, void *y) {
  if (plan == NULL) return CONV_INVALID_ARGUMENT;
  conv_error err = {CONV_OK, ""};
  bool needs_bias = plan->problem.epilogue != CONV_EPILOGUE_NONE;
  if (x == NULL || w == NULL || y == NULL || (needs_bias && bias == NULL)) {
    conv_error_set(&err, CONV_INVALID_ARGUMENT, "execute: %s is NULL",
                   x == NULL ? "x" : w == NULL ? "w" : y == NULL ? "y" : "bias (the epilogue adds it)");
    return execute_error(plan, &err);
  }
  const void *ptrs[] = {x, w, y, needs_bias ? bias : NULL};
  const char *names[] = {"x", "w", "y", "bias"};
  for (int i = 0; i < 4; i++) {
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
  if (replays(plan, &exec, (cudaStream_t)stream))
    st = conv_check_cuda(&err, cudaGraphLaunch(plan->graph, (cudaStream_t)stream),
                         "execute: launching the plan's graph");
  else
    st = plan->algorithm->run(&exec, (cudaStream_t)stream, &err);
  conv_device_leave(previous);
  if (st != CONV_OK) {
    err.status = st;
    return execute_error(plan, &err);
  }
  return CONV_OK;
}

conv_status conv_plan_info_get(const conv_plan *plan, conv_plan_info *info) {
  if (plan == NULL || info == NULL) return CONV_INVALID_ARGUMENT;
  *info = plan->info;
  return CONV_OK;
}

void conv_plan_destroy(conv_plan *plan) {
  if (plan == NULL) return;
  int previous = -1;
  bool entered = conv_device_enter(plan->ctx->env.device.ordinal, &previous, NULL) == CONV_OK;
  /* cudaFree waits for the device to finish, so executions still queued
   * with this workspace complete before it is released. */
  if (plan->graph) cudaGraphExecDestroy(plan->graph);
  if (plan->capture_stream) cudaStreamDestroy(plan->capture_stream);
  if (plan->workspace) cudaFree(plan->workspace);
  plan->algorithm->release(plan->prepared.state);
  if (entered) conv_device_leave(previous);
  free(plan);
}
