/*
 * cudnn.c -- every cuDNN engine, through the backend (graph) API.
 *
 * The legacy cudnnConvolutionForward API offers eight algorithms; the graph
 * API offers every engine the installed cuDNN has for the operation graph,
 * each with tunable knobs.  A config names one engine and, optionally, knob
 * choices:
 *
 *     values[0]                = engine global index
 *     values[1 + 2i], [2 + 2i] = knob type (cudnnBackendKnobType_t), value
 *     count                    = 1 + 2 * knobs, knob pairs sorted by type
 *
 * Knobs left out take the engine's own defaults.  Grouped convolution needs
 * no attribute: the filter tensor's C dimension (c / groups) against the
 * input's c tells cuDNN the group count, as cudnn-frontend and PyTorch do it.
 *
 * Layouts: NCHW, and NHWC with KRSC filters.
 *
 * Directions: forward, backward-data and backward-filter are one operation
 * each in the same graph; engines, knobs and configs work alike.
 *
 * TF32: the graph API has no math-type switch.  An fp32 engine that runs on
 * tensor cores (TF32) carries CUDNN_NUMERICAL_NOTE_TENSOR_CORE, so strict
 * mode refuses those engines and TF32 mode admits them.
 *
 * Half types (fp16, bf16): the same graph with its tensors in
 * CUDNN_DATA_HALF or CUDNN_DATA_BFLOAT16 and fp32 compute, so the configs
 * are every engine configuration cuDNN offers for the type and layout, in
 * every direction, tensor cores allowed (their math mode is strict only in
 * name: convtune.h, conv_math).  A bias epilogue is part of their graph
 * (the convolution's fp32 sum, plus the fp32 bias, through a ReLU, rounded
 * once as y is written; cudnn_graph.c), where fp32 problems add it after
 * cuDNN's pass as they always have.  Where no engine of the installed
 * cuDNN fuses it, the problem has no cudnn config (configs() says so).
 * fp32 problems get the same graph, configs and order as before half types
 * came, so the family's version (the key of its cache rows) is unchanged:
 * bumping it would have sent every fp32 tuning back to be tuned again.
 *
 * This file holds the plans and running them; listing the configs is
 * cudnn_configs.c's, and building the operation graph and reading
 * engines, knobs and notes cudnn_graph.c's.
 *
 * Tests: tests/families/test_cudnn.c.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "algorithms/cudnn_graph.h"
#include "algorithms/common/kernels.h"
#include "algorithms/algorithm.h"

/* ---------------------------------------------------------------- config knobs */

/* Whether a config carries convtune's CONV_CUDNN_KNOB_KRSC_FILTER (its
 * last pair, once canonical); check_config vets its value. */
static bool config_krsc_filter(const conv_config *c) {
  return c->count >= 3 && c->values[c->count - 2] == CONV_CUDNN_KNOB_KRSC_FILTER;
}

bool conv_cudnn_config_unfused_epilogue(const conv_config *c) {
  return c->count >= 3 && c->values[c->count - 2] == CONV_CUDNN_KNOB_UNFUSED_EPILOGUE;
}

/* The number of convtune's own knobs a config carries (0 or 1): cuDNN
 * never sees them. */
static int own_knobs(const conv_config *c) {
  return config_krsc_filter(c) || conv_cudnn_config_unfused_epilogue(c) ? 1 : 0;
}

/* ---------------------------------------------------------------- state */

typedef struct cudnn_state {
  conv_graph g;
  cudnnBackendDescriptor_t engine, config, plan;
  cudnnBackendDescriptor_t knobs[CONV_CUDNN_MAX_KNOBS];
  size_t workspace_bytes;       /* cuDNN's, then (krsc_filter) the filters' */
  size_t cudnn_workspace_bytes; /* cuDNN's alone, at the workspace's start  */
  bool krsc_filter;             /* CONV_CUDNN_KNOB_KRSC_FILTER              */
  size_t filter_offset;         /* of the K R S C filters in the workspace  */
  bool fused_epilogue;          /* the graph adds the bias (conv_cudnn_fuses_epilogue) */
  /* The variant pack of the last run and the pointers it binds; rebuilt
   * when they change, under env->cudnn_lock. */
  cudnnBackendDescriptor_t pack;
  const void *pack_x, *pack_w, *pack_y, *pack_bias, *pack_ws;
} cudnn_state;

static void cudnn_release(void *opaque) {
  cudnn_state *s = opaque;
  if (s == NULL) return;
  conv_cudnn_free_desc(&s->pack);
  conv_cudnn_free_desc(&s->plan);
  conv_cudnn_free_desc(&s->config);
  conv_cudnn_free_descs(s->knobs, CONV_CUDNN_MAX_KNOBS);
  conv_cudnn_free_desc(&s->engine);
  conv_cudnn_graph_destroy(&s->g);
  free(s);
}

/* A config read back from a cache file is untrusted: each knob must be one
 * the engine has, set once, within the engine's range for it; convtune's
 * own knob last, set to 1. */
static conv_status check_config(const conv_config *c, const knob_info *knobs, int knob_count,
                                conv_error *err) {
  for (int i = 1; i + 1 < c->count; i += 2) {
    if (c->values[i] == CONV_CUDNN_KNOB_KRSC_FILTER ||
        c->values[i] == CONV_CUDNN_KNOB_UNFUSED_EPILOGUE) {
      if (i + 2 != c->count || c->values[i + 1] != 1)
        return conv_error_set(err, CONV_UNSUPPORTED,
                              "cudnn: knob %" PRId64 " must come last, set to 1", c->values[i]);
      continue;
    }
    const knob_info *k = NULL;
    for (int j = 0; j < knob_count; j++)
      if (knobs[j].type == c->values[i]) k = &knobs[j];
    if (k == NULL)
      return conv_error_set(err, CONV_UNSUPPORTED, "cudnn: engine %" PRId64 " has no knob %" PRId64,
                            c->values[0], c->values[i]);
    for (int j = 1; j < i; j += 2)
      if (c->values[j] == c->values[i])
        return conv_error_set(err, CONV_UNSUPPORTED, "cudnn: knob %" PRId64 " set twice",
                              c->values[i]);
    if (c->values[i + 1] < k->min || c->values[i + 1] > k->max)
      return conv_error_set(err, CONV_UNSUPPORTED,
                            "cudnn: knob %" PRId64 " = %" PRId64 " outside [%" PRId64 ", %" PRId64
                            "]", c->values[i], c->values[i + 1], k->min, k->max);
  }
  return CONV_OK;
}

static conv_status make_knob_choice(int64_t type, int64_t value, cudnnBackendDescriptor_t *desc,
                                    conv_error *err) {
  cudnnBackendKnobType_t knob = (cudnnBackendKnobType_t)type;
  conv_status st;
  CONV_TRY(st, conv_cudnn_make_desc(CUDNN_BACKEND_KNOB_CHOICE_DESCRIPTOR, desc, err), done);
  CONV_TRY(st, SET_ATTR(*desc, CUDNN_ATTR_KNOB_CHOICE_KNOB_TYPE, CUDNN_TYPE_KNOB_TYPE, 1, &knob),
           done);
  CONV_TRY(st, SET_ATTR(*desc, CUDNN_ATTR_KNOB_CHOICE_KNOB_VALUE, CUDNN_TYPE_INT64, 1, &value),
           done);
done:
  return FINALIZE_OR_FREE(desc, st, "knob choice");
}

/* Engine config and execution plan for a checked config.  The plan is
 * where cuDNN compiles runtime-compiled engines and says no to knob
 * combinations it cannot run. */
static conv_status build_plan(cudnn_state *s, conv_env *env, const conv_config *c,
                              conv_error *err) {
  int knob_count = (c->count - 1) / 2 - own_knobs(c); /* cuDNN's knobs */
  int64_t workspace = 0, got = 0;
  conv_status st;
  for (int i = 0; i < knob_count; i++)
    CONV_TRY(st, make_knob_choice(c->values[1 + 2 * i], c->values[2 + 2 * i], &s->knobs[i], err),
             done);
  CONV_TRY(st, conv_cudnn_make_desc(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, &s->config, err), done);
  CONV_TRY(st, SET_ATTR(s->config, CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1,
                        &s->engine), done);
  if (knob_count > 0)
    CONV_TRY(st, SET_ATTR(s->config, CUDNN_ATTR_ENGINECFG_KNOB_CHOICES,
                          CUDNN_TYPE_BACKEND_DESCRIPTOR, knob_count, s->knobs), done);
  CONV_TRY(st, FINALIZE(s->config, "engine config"), done);
  CONV_TRY(st, conv_cudnn_make_desc(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR, &s->plan, err), done);
  /* Deprecated in cuDNN 9.x (the graph carries the handle) and no longer
   * set by cudnn-frontend; older 9.x releases want it, so it is set, but a
   * release that refuses it does not make the config unsupported. */
  (void)cudnnBackendSetAttribute(s->plan, CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1,
                                 &env->cudnn);
  CONV_TRY(st, SET_ATTR(s->plan, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG,
                        CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &s->config), done);
  CONV_TRY(st, FINALIZE(s->plan, "execution plan"), done);
  CONV_TRY(st, GET_ATTR(s->plan, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1,
                        &got, &workspace), done);
  if (workspace < 0 || (uint64_t)workspace > SIZE_MAX) {
    st = conv_error_set(err, CONV_UNSUPPORTED, "cudnn: workspace size %" PRId64, workspace);
    goto done;
  }
  s->cudnn_workspace_bytes = (size_t)workspace;
  s->workspace_bytes = (size_t)workspace;
done:
  return st; /* the caller releases s, and with it whatever was made */
}

/* ---------------------------------------------------------------- interface */

/* Every dtype: the graph's tensors take the problem's. */
static bool cudnn_applicable(const conv_problem *problem, const conv_env *env) {
  if (problem == NULL || (env != NULL && env->cudnn == NULL)) return false;
  return conv_problem_supported_any_dtype(problem);
}

static conv_status cudnn_prepare(const conv_problem *problem, conv_env *env,
                                 const conv_config *config, conv_prepared *out, conv_error *err) {
  if (config == NULL || config->count < 1 || config->count > CONV_CONFIG_MAX_VALUES ||
      config->count % 2 == 0)
    return conv_error_set(err, CONV_UNSUPPORTED, "cudnn: malformed config (%d values)",
                          config == NULL ? 0 : config->count);
  cudnn_state *s = calloc(1, sizeof *s);
  if (s == NULL) return conv_error_set(err, CONV_OUT_OF_MEMORY, "cudnn: plan state");
  knob_info knobs[CUDNN_KNOB_TYPE_COUNTS];
  int knob_count = 0;
  int64_t engines = 0;
  engine_notes notes = {0};
  conv_status st;
  s->krsc_filter = config_krsc_filter(config);
  /* The graph's problem: without its epilogue where the config runs it after. */
  conv_problem graph_problem = *problem;
  if (conv_cudnn_config_unfused_epilogue(config)) graph_problem.epilogue = CONV_EPILOGUE_NONE;
  s->fused_epilogue = conv_cudnn_fuses_epilogue(&graph_problem);
  if (s->krsc_filter && !conv_cudnn_krsc_filter_applies(problem)) {
    cudnn_release(s);
    return conv_error_set(err, CONV_UNSUPPORTED,
                          "cudnn: K R S C filters (knob %d) are for NCHW forward fp32 "
                          "convolutions with R S > 1", CONV_CUDNN_KNOB_KRSC_FILTER);
  }
  if (conv_cudnn_config_unfused_epilogue(config) && !conv_cudnn_unfused_epilogue_applies(problem)) {
    cudnn_release(s);
    return conv_error_set(err, CONV_UNSUPPORTED,
                          "cudnn: an epilogue after the graph (knob %d) is for half forward "
                          "convolutions with one", CONV_CUDNN_KNOB_UNFUSED_EPILOGUE);
  }
  uv_mutex_lock(&env->cudnn_lock);
  CONV_TRY(st, conv_cudnn_graph_build(&graph_problem, env, s->krsc_filter, &s->g, err), done);
  CONV_TRY(st, conv_cudnn_engine_count(s->g.graph, &engines, err), done);
  if (config->values[0] < 0 || config->values[0] >= engines) {
    st = conv_error_set(err, CONV_UNSUPPORTED, "cudnn: engine %" PRId64 " not in [0, %" PRId64 ")",
                        config->values[0], engines);
    goto done;
  }
  CONV_TRY(st, conv_cudnn_make_engine(s->g.graph, config->values[0], &s->engine, err), done);
  CONV_TRY(st, conv_cudnn_read_notes(s->engine, &notes, err), done);
  const char *refusal = conv_cudnn_math_refusal(&graph_problem, &notes);
  if (refusal != NULL) {
    st = conv_error_set(err, CONV_UNSUPPORTED, "cudnn: engine %" PRId64 " %s", config->values[0],
                        refusal);
    goto done;
  }
  CONV_TRY(st, conv_cudnn_read_knobs(s->engine, knobs, &knob_count, err), done);
  CONV_TRY(st, check_config(config, knobs, knob_count, err), done);
  CONV_TRY(st, build_plan(s, env, config, err), done);
  if (s->krsc_filter) { /* the filters after cuDNN's workspace, 256-byte aligned */
    conv_shape shape;
    if (conv_problem_shape(problem, &shape) != CONV_OK) { /* graph_build checked it */
      st = conv_error_set(err, CONV_INVALID_ARGUMENT, "cudnn: invalid problem");
      goto done;
    }
    s->filter_offset = (s->cudnn_workspace_bytes + 255) / 256 * 256;
    s->workspace_bytes = s->filter_offset + (size_t)shape.w_elems * sizeof(float);
  }
done:
  uv_mutex_unlock(&env->cudnn_lock);
  if (st != CONV_OK) {
    cudnn_release(s);
    return st;
  }
  out->state = s;
  out->workspace_bytes = s->workspace_bytes;
  out->arith = conv_cudnn_arith(&graph_problem, &notes);
  out->deterministic = !notes.nondeterministic;
  return CONV_OK;
}

/* Rebuilds the variant pack when the caller's pointers changed since the
 * last run: building one per run would add host time to every timing.
 * The bias is bound only where the graph adds it (s->fused_epilogue). */
static conv_status bind_pack(cudnn_state *s, const void *x, const void *w, void *y,
                             const float *bias, void *workspace, conv_error *err) {
  if (!s->fused_epilogue) bias = NULL;
  if (s->pack != NULL && s->pack_x == x && s->pack_w == w && s->pack_y == y &&
      s->pack_bias == bias && s->pack_ws == workspace)
    return CONV_OK;
  conv_cudnn_free_desc(&s->pack);
  void *pointers[4] = {(void *)x, (void *)w, y, (void *)bias};
  int64_t uids[4] = {UID_X, UID_W, UID_Y, UID_BIAS};
  const int64_t bound = bias != NULL ? 4 : 3;
  cudnnBackendDescriptor_t pack = NULL;
  conv_status st;
  const cudnnStatus_t created =
      cudnnBackendCreateDescriptor(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, &pack);
  CONV_TRY(st, conv_cudnn_failed(err, created, "create variant pack"), done);
  CONV_TRY(st, PACK_SET(pack, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, bound,
                        pointers), done);
  CONV_TRY(st, PACK_SET(pack, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, bound, uids),
           done);
  CONV_TRY(st, PACK_SET(pack, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1,
                        &workspace), done);
  CONV_TRY(st, conv_cudnn_failed(err, cudnnBackendFinalize(pack), "finalize variant pack"), done);
  s->pack = pack;
  pack = NULL;
  s->pack_x = x;
  s->pack_w = w;
  s->pack_y = y;
  s->pack_bias = bias;
  s->pack_ws = workspace;
done:
  conv_cudnn_free_desc(&pack);
  return st;
}

static bool misaligned(const void *p) { return (uintptr_t)p % TENSOR_ALIGNMENT != 0; }

static conv_status cudnn_run(const conv_exec *exec, cudaStream_t stream, conv_error *err) {
  cudnn_state *s = exec->state;
  const conv_problem *p = exec->problem;
  if (s == NULL || exec->env == NULL || p == NULL)
    return conv_error_set(err, CONV_INVALID_ARGUMENT, "cudnn: run without a prepared plan");
  if (s->workspace_bytes > 0 &&
      (exec->workspace == NULL || exec->workspace_bytes < s->workspace_bytes))
    return conv_error_set(err, CONV_INVALID_ARGUMENT,
                          "cudnn: plan needs %zu bytes of workspace, got %zu", s->workspace_bytes,
                          exec->workspace == NULL ? 0 : exec->workspace_bytes);
  /* K R S C filters are convtune's copy, aligned: the caller's need not be. */
  if (misaligned(exec->x) || (!s->krsc_filter && misaligned(exec->w)) || misaligned(exec->y))
    return conv_error_set(err, CONV_INVALID_ARGUMENT,
                          "cudnn: x, w and y must be %d-byte aligned", TENSOR_ALIGNMENT);
  if (p->epilogue != CONV_EPILOGUE_NONE && exec->bias == NULL)
    return conv_error_set(err, CONV_INVALID_ARGUMENT, "cudnn: the epilogue needs a bias");
  if (s->fused_epilogue && misaligned(exec->bias))
    return conv_error_set(err, CONV_INVALID_ARGUMENT,
                          "cudnn: the bias must be %d-byte aligned", TENSOR_ALIGNMENT);
  void *workspace = s->cudnn_workspace_bytes > 0 ? exec->workspace : NULL;
  const float *w = exec->w;
  if (s->krsc_filter) {
    float *krsc = (float *)((char *)exec->workspace + s->filter_offset);
    const conv_status moved = conv_check_cuda(
        err,
        conv_filter_to_krsc(exec->w, p->k, p->c / p->groups, p->r * p->s, krsc, stream),
        "cudnn: conv_filter_to_krsc");
    if (moved != CONV_OK) return moved;
    w = krsc;
  }
  conv_env *env = exec->env;
  conv_status st;
  /* cuDNN runs on the handle's stream: the stream and the launch must not
   * interleave with another thread's. */
  uv_mutex_lock(&env->cudnn_lock);
  st = bind_pack(s, exec->x, w, exec->y, exec->bias, workspace, err);
  if (st == CONV_OK)
    st = conv_cudnn_failed(err, cudnnSetStream(env->cudnn, stream), "cudnnSetStream");
  if (st == CONV_OK)
    st = conv_cudnn_failed(err, cudnnBackendExecute(env->cudnn, s->plan, s->pack),
                           "cudnnBackendExecute");
  uv_mutex_unlock(&env->cudnn_lock);
  if (st != CONV_OK) return st;
  if (p->epilogue != CONV_EPILOGUE_NONE && !s->fused_epilogue)
    return conv_check_cuda(err, conv_bias_act_any_dtype(p, exec->y, exec->bias, stream),
                           "conv_bias_act_any_dtype");
  return CONV_OK;
}

/* "engine=12" or "engine=12 knobs=3:1,5:2" (cuDNN knob type numbers), with
 * " krsc" for convtune's K R S C filters (1000:1) and " unfused" for its
 * epilogue after the graph (1001:1). */
static void cudnn_describe(const conv_config *c, char *text, size_t size) {
  if (text == NULL || size == 0) return;
  if (c == NULL || c->count < 1 || c->count > CONV_CONFIG_MAX_VALUES || c->count % 2 == 0) {
    snprintf(text, size, "invalid");
    return;
  }
  int len = snprintf(text, size, "engine=%" PRId64, c->values[0]);
  size_t used = len > 0 ? (size_t)len : 0;
  const bool krsc = config_krsc_filter(c) && c->values[c->count - 1] == 1;
  const bool unfused = conv_cudnn_config_unfused_epilogue(c) && c->values[c->count - 1] == 1;
  for (int i = 1; i + 1 < c->count - (krsc || unfused ? 2 : 0) && used < size; i += 2) {
    len = snprintf(text + used, size - used, "%s%" PRId64 ":%" PRId64, i == 1 ? " knobs=" : ",",
                   c->values[i], c->values[i + 1]);
    if (len < 0) break;
    used += (size_t)len;
  }
  if (krsc && used < size) snprintf(text + used, size - used, " krsc");
  if (unfused && used < size) snprintf(text + used, size - used, " unfused");
}

/* A config with K R S C filters runs the engine config without them, in
 * the same graph, after one pass that transposes the filters: that config
 * is its twin.  Not one with the epilogue after the graph: its graph lacks
 * the epilogue, so the same engine and knobs there are other kernels. */
static bool cudnn_twin_of(const conv_config *c, conv_config *twin) {
  if (c == NULL || !config_krsc_filter(c) || c->values[c->count - 1] != 1) return false;
  *twin = *c;
  twin->count = c->count - 2;
  twin->values[c->count - 2] = twin->values[c->count - 1] = 0;
  twin->flags = 0;
  return true;
}

const conv_algorithm conv_algorithm_cudnn = {
    .id = CONV_ALGO_CUDNN,
    /* 2: heuristic configs of 8 to 15 knobs (before, left out); 3: knob
     * variants around the heuristics' configs (make_variants); 4: the
     * configs with K R S C filters (CONV_CUDNN_KNOB_KRSC_FILTER); 5: half
     * problems' epilogue after the graph (CONV_CUDNN_KNOB_UNFUSED_EPILOGUE) */
    .version = 5,
    .name = "cudnn",
    .applicable = cudnn_applicable,
    .configs = conv_cudnn_configs, /* cudnn_configs.c */
    .prepare = cudnn_prepare,
    .run = cudnn_run,
    .release = cudnn_release,
    .describe = cudnn_describe,
    .twin_of = cudnn_twin_of,
    .marks_best_guesses = conv_cudnn_marks_best_guesses, /* cudnn_configs.c */
    .libraries = CONV_LIBRARY_CUDNN,
    .krsc_filters = true, /* the graph's filter strides say K R S C */
};
