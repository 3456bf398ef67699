/* gemm_family.c -- the host shell of the cuBLASLt GEMM families (gemm_family.h). */
#include <stdlib.h>

#include "algorithms/common/gemm_family.h"

conv_cublaslt_query conv_gemm_query(const conv_gemm_family *family, const conv_gemm_plan *plan,
                                    const conv_gemm_shape *shape, const conv_problem *problem,
                                    const conv_env *env) {
  return (conv_cublaslt_query){.lt = env->cublaslt, .desc = plan->desc, .layouts = &shape->lay,
                               .math = problem->math, .align = &plan->align,
                               .prefix = family->prefix, .dtype = problem->dtype};
}

void conv_gemm_release(void *state) {
  conv_gemm_plan *plan = state;
  if (plan == NULL) return;
  conv_cublaslt_layouts_destroy(&plan->full.lay);
  conv_cublaslt_layouts_destroy(&plan->tail.lay);
  if (plan->desc) cublasLtMatmulDescDestroy(plan->desc);
  free(state);
}

void conv_gemm_describe(const conv_gemm_family *family, const conv_config *config, char *text,
                        size_t size) {
  (void)family; /* every family of this shell runs its batch in chunks */
  conv_cublaslt_config_describe(config, "batch", text, size);
}

conv_status conv_gemm_count_algos(const conv_gemm_family *family, const conv_problem *problem,
                                  conv_env *env, int64_t chunk, int *count, conv_error *err) {
  void *state = NULL;
  conv_status s = family->create(problem, chunk, &state, err);
  if (s == CONV_OK) {
    const conv_gemm_plan *plan = state;
    const conv_cublaslt_query q = conv_gemm_query(family, plan, &plan->full, problem, env);
    s = conv_cublaslt_offered_algos(&q, family->algos_offered, count, err);
  }
  conv_gemm_release(state);
  return s;
}

conv_status conv_gemm_configs(const conv_gemm_family *family, const conv_problem *problem,
                              conv_env *env, conv_config *out, int max, int *count,
                              conv_error *err) {
  if (problem == NULL || count == NULL || (max > 0 && out == NULL) ||
      (env == NULL && !family->env_optional))
    return conv_error_set(err, CONV_INVALID_ARGUMENT, "%s: NULL argument", family->name);
  *count = 0;
  if (env == NULL || !family->applicable(problem, env)) return CONV_OK;
  int64_t chunks[CONV_GEMM_CHUNKS_MAX];
  const int n_chunks = family->chunks(problem, env, chunks);
  const int guessed = family->guessed_algos ? family->guessed_algos(problem) : 0;
  int written = 0;
  for (int i = 0; i < n_chunks && written < max; ++i) {
    int offered = 0;
    const conv_status s = conv_gemm_count_algos(family, problem, env, chunks[i], &offered, err);
    if (s == CONV_UNSUPPORTED) continue; /* a shape cuBLASLt or the family refuses */
    if (s != CONV_OK) return s;
    for (int a = 0; a < offered && written < max; ++a) {
      const unsigned flags = i == 0 && a < guessed ? CONV_CONFIG_BEST_GUESS : 0u;
      out[written++] = (conv_config){.count = 2, .values = {chunks[i], a}, .flags = flags};
    }
  }
  *count = written;
  return CONV_OK;
}

/* The last chunk's algos: the full chunk's where they fit, else the
 * heuristic's first for the last chunk's own shape. */
static conv_status pick_tail_algos(const conv_gemm_family *family, const conv_problem *problem,
                                   const conv_env *env, conv_gemm_plan *plan, conv_error *err) {
  const conv_cublaslt_algos *full = &plan->full.algos;
  conv_cublaslt_algos *t = &plan->tail.algos;
  const conv_cublaslt_query q = conv_gemm_query(family, plan, &plan->tail, problem, env);
  conv_status s =
      conv_cublaslt_tail_algo(&q, &full->algo, family->name, &t->algo, &t->ws_bytes, err);
  if (s != CONV_OK || !family->fallbacks) return s;
  size_t ws = 0;
  if (full->has_fallback && conv_cublaslt_algo_fits(&q, &full->fallback, &ws)) {
    t->fallback = full->fallback;
    t->has_fallback = true;
  } else {
    s = conv_cublaslt_fallback_algo(&q, &t->has_fallback, &t->fallback, &ws, err);
    if (s != CONV_OK) return s;
  }
  if (t->has_fallback && ws > t->ws_bytes) t->ws_bytes = ws;
  return CONV_OK;
}

/* A config's algos: the heuristic's algo_index-th for a full chunk (and,
 * for a family with fallbacks, its first for float-aligned pointers), the
 * last, partial chunk's where the chunk does not divide the batch, and
 * the workspace they need. */
static conv_status pick_algos(const conv_gemm_family *family, const conv_problem *problem,
                              const conv_env *env, int algo_index, void *state,
                              conv_error *err) {
  conv_gemm_plan *plan = state;
  const conv_cublaslt_query full = conv_gemm_query(family, plan, &plan->full, problem, env);
  conv_status s;
  if (family->fallbacks) {
    CONV_TRY(s,
             conv_cublaslt_pick_algos(&full, algo_index, family->name, &plan->full.algos, err),
             out);
  } else {
    cublasLtMatmulHeuristicResult_t picked;
    CONV_TRY(s, conv_cublaslt_ranked_algo(&full, algo_index, family->name, &picked, err), out);
    plan->full.algos.algo = picked.algo;
    plan->full.algos.ws_bytes = picked.workspaceSize;
  }
  size_t ws = plan->full.algos.ws_bytes;
  const int64_t rest = problem->n % plan->chunk;
  if (rest != 0) {
    plan->has_tail = true;
    CONV_TRY(s, family->layouts(problem, state, rest, &plan->tail.lay, err), out);
    CONV_TRY(s, pick_tail_algos(family, problem, env, plan, err), out);
    if (plan->tail.algos.ws_bytes > ws) ws = plan->tail.algos.ws_bytes;
  }
  plan->gemm_ws_bytes = conv_cublaslt_ws_round(ws);
out:
  return s;
}

conv_status conv_gemm_prepared(void *state, size_t workspace_bytes, conv_prepared *out) {
  *out = (conv_prepared){.state = state, .workspace_bytes = workspace_bytes,
                         .arith = CONV_ARITH_DIRECT, .deterministic = true};
  return CONV_OK;
}

conv_status conv_gemm_prepare(const conv_gemm_family *family, const conv_problem *problem,
                              conv_env *env, const conv_config *config, conv_prepared *out,
                              conv_error *err) {
  if (problem == NULL || env == NULL || env->cublaslt == NULL || config == NULL || out == NULL)
    return conv_error_set(err, CONV_INVALID_ARGUMENT, "%s: NULL argument", family->name);
  if (!family->applicable(problem, env))
    return conv_error_set(err, CONV_UNSUPPORTED, "%s: only %s", family->name, family->scope);
  /* The config may come from a shipped cache: trust none of it. */
  conv_status s = conv_config_check(config, family->name, 2, INT64_MIN, INT64_MAX, err);
  if (s != CONV_OK) return s;
  const int64_t chunk = config->values[0], algo_index = config->values[1];
  s = family->check_chunk(problem, chunk, err);
  if (s != CONV_OK) return s;
  if (algo_index < 0 || algo_index >= CONV_CUBLASLT_HEURISTIC_MAX)
    return conv_error_set(err, CONV_UNSUPPORTED, "%s: gemm algo %lld not in [0, %d)",
                          family->name, (long long)algo_index, CONV_CUBLASLT_HEURISTIC_MAX);
  void *state = NULL;
  CONV_TRY(s, family->create(problem, chunk, &state, err), fail);
  CONV_TRY(s, pick_algos(family, problem, env, (int)algo_index, state, err), fail);
  return conv_gemm_prepared(state, conv_gemm_workspace(state), out);
fail:
  conv_gemm_release(state);
  return s;
}

/* ---------------------------------------------------------------- run */

conv_status conv_gemm_check_workspace(const conv_gemm_plan *plan, const conv_exec *exec,
                                      bool cublas_part_only, const char *family,
                                      conv_error *err) {
  const size_t needed = conv_gemm_workspace(plan);
  if (needed > 0 && (exec->workspace == NULL || exec->workspace_bytes < needed))
    return conv_error_set(err, CONV_INVALID_ARGUMENT, "%s: workspace of %zu bytes, %zu needed",
                          family, exec->workspace_bytes, needed);
  const bool aligned_needed = cublas_part_only ? plan->gemm_ws_bytes > 0 : needed > 0;
  if (aligned_needed && !conv_cublaslt_aligned(exec->workspace, CONV_CUBLASLT_WS_ALIGN))
    return conv_error_set(err, CONV_INVALID_ARGUMENT, "%s: workspace not %u-byte aligned",
                          family, CONV_CUBLASLT_WS_ALIGN);
  return CONV_OK;
}

conv_status conv_gemm_check_forward_run(const conv_exec *exec, bool cublas_part_only,
                                        const char *family, conv_error *err) {
  if (exec == NULL || exec->state == NULL || exec->problem == NULL || exec->env == NULL ||
      exec->x == NULL || exec->w == NULL || exec->y == NULL ||
      (exec->problem->epilogue != CONV_EPILOGUE_NONE && exec->bias == NULL))
    return conv_error_set(err, CONV_INVALID_ARGUMENT, "%s: NULL argument", family);
  return conv_gemm_check_workspace(exec->state, exec, cublas_part_only, family, err);
}

conv_status conv_gemm_choose_algos(const conv_gemm_plan *plan, conv_dtype dtype,
                                   const void *const *pointers, int count, bool operands_aligned,
                                   const char *family, bool *use_fallback, conv_error *err) {
  const uint32_t element = conv_cublaslt_element_align(dtype);
  for (int i = 0; i < count; ++i)
    if (!conv_cublaslt_aligned(pointers[i], element))
      return conv_error_set(err, CONV_INVALID_ARGUMENT,
                            "%s: a tensor pointer is not %u-byte aligned", family, element);
  *use_fallback = !operands_aligned;
  if (*use_fallback && (!plan->full.algos.has_fallback ||
                        (plan->has_tail && !plan->tail.algos.has_fallback)))
    return conv_error_set(err, CONV_UNSUPPORTED,
                          "%s: pointers less aligned than the plan's %u/%u/%u bytes "
                          "and cuBLASLt has no fallback algorithm",
                          family, plan->align.a, plan->align.b, plan->align.d);
  return CONV_OK;
}

conv_status conv_gemm_matmul(const conv_gemm_family *family, const conv_exec *exec,
                             cublasLtMatmulDesc_t desc, const conv_gemm_shape *shape,
                             bool use_fallback, size_t ws_bytes, const void *a, const void *b,
                             float beta, void *d, cudaStream_t stream, conv_error *err) {
  const float one = 1.0f;
  const cublasLtMatmulAlgo_t *algo = use_fallback ? &shape->algos.fallback : &shape->algos.algo;
  return conv_cublaslt_matmul(exec->env->cublaslt, desc, &shape->lay, algo, &one, a, b, &beta, d,
                              ws_bytes ? exec->workspace : NULL, ws_bytes, stream, family->prefix,
                              err);
}
