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
 * This file holds the configs, the plans and running them; building the
 * operation graph and reading engines, knobs and notes is cudnn_graph.c's.
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

/* Knob variants per engine besides its default config (cudnn_graph.h);
 * with the default and the heuristics' own configs that is 9-14 timings
 * per engine. */
#define MAX_VARIANTS CONV_CUDNN_NEIGHBOUR_VARIANTS

/* The most knob pairs a config can hold. */
#define MAX_CONFIG_KNOBS ((CONV_CONFIG_MAX_VALUES - 1) / 2)

/* Heuristic results asked for even when few configs are wanted. */
#define HEURISTIC_MIN_RESULTS 64

/* ---------------------------------------------------------------- configs */

/* Knob pairs sorted by type: one config, one spelling. */
static void config_canonicalize(conv_config *c) {
  for (int i = 3; i < c->count; i += 2) {
    int64_t type = c->values[i], value = c->values[i + 1];
    int j = i;
    for (; j > 1 && c->values[j - 2] > type; j -= 2) {
      c->values[j] = c->values[j - 2];
      c->values[j + 1] = c->values[j - 1];
    }
    c->values[j] = type;
    c->values[j + 1] = value;
  }
}

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

/* The problems whose configs are also listed with the epilogue after the
 * graph: half forward convolutions with one. */
static bool unfused_epilogue_applies(const conv_problem *p) {
  return p->dtype != CONV_DTYPE_F32 && p->direction == CONV_FORWARD &&
         p->epilogue != CONV_EPILOGUE_NONE;
}

/* The problems whose configs are also listed with KRSC filters (not those
 * whose own filters are K R S C: their graph already reads them so).  The
 * transpose (conv_filter_to_krsc) moves floats: fp32 problems only. */
static bool krsc_filter_applies(const conv_problem *p) {
  return p->dtype == CONV_DTYPE_F32 && p->direction == CONV_FORWARD &&
         p->layout == CONV_LAYOUT_NCHW &&
         !conv_problem_krsc_filters(p) && p->r * p->s > 1 &&
         p->r * p->s <= CONV_FILTER_TO_KRSC_MAX_TAPS;
}

/* Appends unless full or already listed; reports whether it did. */
static bool config_append(conv_config *out, int max, int *n, const conv_config *c) {
  if (*n >= max) return false;
  for (int i = 0; i < *n; i++)
    if (conv_config_equal(&out[i], c)) return false;
  out[*n] = *c;
  out[*n].flags = 0;
  (*n)++;
  return true;
}

/* Reads an engine config the heuristic made.  *fits is false when it has
 * more knobs than a conv_config holds. */
static conv_status read_engine_config(cudnnBackendDescriptor_t cfg, conv_config *out, bool *fits,
                                      conv_error *err) {
  cudnnBackendDescriptor_t engine = NULL;
  cudnnBackendDescriptor_t choices[CUDNN_KNOB_TYPE_COUNTS] = {0};
  int64_t index = -1, n = 0, got = 0;
  conv_status st;
  memset(out, 0, sizeof *out);
  *fits = false;
  CONV_TRY(st, conv_cudnn_make_desc(CUDNN_BACKEND_ENGINE_DESCRIPTOR, &engine, err), done);
  CONV_TRY(st, GET_ATTR(cfg, CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &got,
                        &engine), done);
  CONV_TRY(st, GET_ATTR(engine, CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, 1, &got, &index),
           done);
  CONV_TRY(st, GET_DESCS(cfg, CUDNN_ATTR_ENGINECFG_KNOB_CHOICES,
                         CUDNN_BACKEND_KNOB_CHOICE_DESCRIPTOR, CUDNN_KNOB_TYPE_COUNTS, &n, choices),
           done);
  if (n < 0 || n > MAX_CONFIG_KNOBS) goto done; /* st is CONV_OK: skipped, not failed */
  out->values[out->count++] = index;
  for (int64_t i = 0; i < n; i++) {
    cudnnBackendKnobType_t type;
    int64_t value = 0;
    CONV_TRY(st, GET_ATTR(choices[i], CUDNN_ATTR_KNOB_CHOICE_KNOB_TYPE, CUDNN_TYPE_KNOB_TYPE, 1,
                          &got, &type), done);
    CONV_TRY(st, GET_ATTR(choices[i], CUDNN_ATTR_KNOB_CHOICE_KNOB_VALUE, CUDNN_TYPE_INT64, 1, &got,
                          &value), done);
    out->values[out->count++] = (int64_t)type;
    out->values[out->count++] = value;
  }
  config_canonicalize(out);
  *fits = true;
done:
  conv_cudnn_free_descs(choices, CUDNN_KNOB_TYPE_COUNTS);
  conv_cudnn_free_desc(&engine);
  return st;
}

/* A cuDNN heuristic's configs (mode A: its ranking for untuned callers; B
 * and FALLBACK: other candidates with their knobs), up to max, in its order.
 * A heuristic that cannot rank this graph leaves the list empty. */
static conv_status heuristic_configs(cudnnBackendDescriptor_t graph, cudnnBackendHeurMode_t mode,
                                     conv_config *out, int max, int *count, conv_error *err) {
  cudnnBackendDescriptor_t heur = NULL, *cfgs = NULL;
  int64_t available = 0, got = 0;
  conv_status st;
  *count = 0;
  CONV_TRY(st, conv_cudnn_make_desc(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR, &heur, err), done);
  CONV_TRY(st, SET_ATTR(heur, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, CUDNN_TYPE_BACKEND_DESCRIPTOR,
                        1, &graph), done);
  CONV_TRY(st, SET_ATTR(heur, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode), done);
  CONV_TRY(st, FINALIZE(heur, "engine heuristic"), done);
  CONV_TRY(st, GET_ATTR(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 0,
                        &available, NULL), done);
  if (available > max) available = max;
  if (available <= 0) goto done;
  cfgs = calloc((size_t)available, sizeof *cfgs);
  if (cfgs == NULL) {
    st = conv_error_set(err, CONV_OUT_OF_MEMORY, "cudnn: heuristic results");
    goto done;
  }
  CONV_TRY(st, GET_DESCS(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_BACKEND_ENGINECFG_DESCRIPTOR,
                         available, &got, cfgs), done);
  if (got > available) got = available;
  for (int64_t i = 0; i < got; i++) {
    bool fits;
    st = read_engine_config(cfgs[i], &out[*count], &fits, err);
    if (st == CONV_UNSUPPORTED) st = CONV_OK; /* an unreadable one is left out */
    if (st != CONV_OK) goto done;
    if (fits) (*count)++;
  }
done:
  if (cfgs != NULL) conv_cudnn_free_descs(cfgs, available);
  free(cfgs);
  conv_cudnn_free_desc(&heur);
  if (st == CONV_UNSUPPORTED) st = CONV_OK; /* no ranking: the engines still get listed */
  return st;
}

/* What configs() learns about one engine. */
typedef struct engine_probe {
  bool usable; /* runs this graph under this math mode */
  bool runtime_compiled; /* its plans compile a kernel as they are built */
  int knob_count;
  knob_info knobs[CUDNN_KNOB_TYPE_COUNTS];
  const conv_config *heuristic; /* the heuristic's first config for it, if any */
  int variant_count;
  conv_config variants[MAX_VARIANTS];
} engine_probe;

static conv_status probe_engine(const conv_problem *p, cudnnBackendDescriptor_t graph,
                                int64_t index, engine_probe *probe, conv_error *err) {
  cudnnBackendDescriptor_t engine = NULL;
  engine_notes notes;
  conv_status st;
  probe->usable = false;
  CONV_TRY(st, conv_cudnn_make_engine(graph, index, &engine, err), done);
  CONV_TRY(st, conv_cudnn_read_notes(engine, &notes, err), done);
  /* Engines a deterministic problem cannot take are left out here, as
   * those of another math mode are, so that a short (fast-policy) list
   * holds ones it can. */
  if (conv_cudnn_math_refusal(p, &notes) != NULL || (p->deterministic && notes.nondeterministic))
    goto done;
  CONV_TRY(st, conv_cudnn_read_knobs(engine, probe->knobs, &probe->knob_count, err), done);
  probe->usable = true;
  probe->runtime_compiled = notes.runtime_compiled;
done:
  conv_cudnn_free_desc(&engine);
  return st;
}

/* centre + steps * stride when that lies in [min, max]; unsigned distances
 * keep extreme ranges from overflowing. */
static bool knob_step(const knob_info *k, int64_t centre, int64_t steps, int64_t *value) {
  int64_t stride = k->stride > 0 ? k->stride : 1;
  if (centre < k->min || centre > k->max) return false;
  if (steps != 0 && stride > INT64_MAX / (2 * MAX_VARIANTS + 2)) return false;
  int64_t offset = steps * stride;
  if (offset > 0 && (uint64_t)offset > (uint64_t)k->max - (uint64_t)centre) return false;
  if (offset < 0 && (uint64_t)(-offset) > (uint64_t)centre - (uint64_t)k->min) return false;
  *value = centre + offset;
  return true;
}

/* The knob's value in the heuristic's config for this engine, else its
 * minimum: variants explore around what cuDNN itself would pick. */
static int64_t knob_centre(const conv_config *h, const knob_info *k) {
  if (h != NULL)
    for (int i = 1; i + 1 < h->count; i += 2)
      if (h->values[i] == k->type) return h->values[i + 1];
  return k->min;
}

/* `base` with knob `type` set to `value` (added where base leaves it to the
 * engine's default); false where that does not fit a config. */
static bool config_with_knob(const conv_config *base, int64_t type, int64_t value,
                             conv_config *out) {
  *out = *base;
  for (int i = 1; i + 1 < out->count; i += 2)
    if (out->values[i] == type) {
      out->values[i + 1] = value;
      return true;
    }
  if (out->count + 2 > CONV_CONFIG_MAX_VALUES) return false;
  out->values[out->count++] = type;
  out->values[out->count++] = value;
  config_canonicalize(out);
  return true;
}

int conv_cudnn_knob_variants(int64_t engine, const knob_info *knobs, int knob_count,
                             const conv_config *heuristic, conv_config *out, int max) {
  const int limit = heuristic != NULL ? CONV_CUDNN_NEIGHBOUR_VARIANTS : CONV_CUDNN_DEFAULT_VARIANTS;
  const int cap = max < limit ? max : limit;
  int n = 0;
  for (int round = 0; round <= 2 * MAX_VARIANTS && n < cap; round++) {
    int64_t steps = (round + 1) / 2 * (round % 2 ? 1 : -1);
    if (heuristic != NULL && steps == 0) continue; /* that is the heuristic's own config */
    for (int k = 0; k < knob_count && n < cap; k++) {
      int64_t value;
      if (!knob_step(&knobs[k], knob_centre(heuristic, &knobs[k]), steps, &value)) continue;
      conv_config c = {3, {engine, knobs[k].type, value}, 0};
      if (heuristic != NULL && !config_with_knob(heuristic, knobs[k].type, value, &c)) continue;
      config_append(out, cap, &n, &c);
    }
  }
  return n;
}

static void make_variants(int64_t index, engine_probe *probe) {
  probe->variant_count = conv_cudnn_knob_variants(index, probe->knobs, probe->knob_count,
                                                  probe->heuristic, probe->variants, MAX_VARIANTS);
}

/* Whether the probed engine may get one more config: every engine
 * compiled ahead of time may; a runtime-compiled one while `compiled_left`
 * lasts, which it then spends (also where the config then turns out to be
 * a repeat, so a list may hold fewer than CONV_CUDNN_RUNTIME_COMPILED_MAX
 * of them). */
static bool engine_takes_config(const engine_probe *probe, int *compiled_left) {
  if (!probe->runtime_compiled) return true;
  if (*compiled_left <= 0) return false;
  (*compiled_left)--;
  return true;
}

/* Configs that never pay, measured, left out of the lists unless cuDNN's
 * ranked heuristic picked them (an untuned caller of cuDNN runs those).
 * Each cost the tuning seconds and never won: in the exhaustive tunings of
 * the suite and the models' forward layers on an H200 (cuDNN 9.19; fp32
 * strict and TF32, fp16, bf16; NCHW and NHWC; docs/tuning.md, "Configs
 * left out"):
 * - engine 3 with CUDNN_KNOB_TYPE_MULTIPLY = 1 on a grouped graph ran
 *   1232x to 10^6x the best config (median 114000x) on all 130 grouped
 *   problems where it ran, up to 8.9 s a run: a model's first depthwise
 *   layer spent 3.5-4 s validating it.  On dense graphs (2.2x at best,
 *   0.46 s a run at most) it stays.
 * - engines 5, 71 and 80 on fp32 forward problems, whose plans took
 *   0.1-2.2 s each to build: on the problems where they ran, 5 never came
 *   within 1.20x of the best (64 problems), 71 within 1.18x (210), 80
 *   within 1.08x (67).  All three win half problems, and stay listed for
 *   them.
 * Engine numbers are cuDNN's and could change with its version:
 * tests/families/test_cudnn.c (never_paying_configs) checks each rule on
 * layers where this cuDNN listed the config, and that each config but
 * engine 80 is still listed where the rule keeps it. */
static bool config_never_pays(const conv_problem *p, const conv_config *c) {
  const bool fp32_forward = p->dtype == CONV_DTYPE_F32 && p->direction == CONV_FORWARD;
  switch (c->values[0]) {
  case 3:
    return p->groups > 1 && c->count == 3 && c->values[1] == CUDNN_KNOB_TYPE_MULTIPLY &&
           c->values[2] == 1;
  case 5:
  case 71:
  case 80: return fp32_forward;
  default: return false;
  }
}

/* The ranked heuristic configs in cuDNN's order, then the other
 * heuristics' configs, then every usable engine's default, then (with
 * `variants`) knob variants engine by engine in turns, so that a small
 * `max` still covers every engine before it covers any engine's knobs.
 * At most CONV_CUDNN_RUNTIME_COMPILED_MAX configs of runtime-compiled
 * engines (cudnn_graph.h says why), the first in that order, and none of
 * their knob variants; none that never pays (config_never_pays) unless
 * cuDNN's ranked heuristic picked it. */
static int emit_configs(const conv_problem *p, int64_t engines, engine_probe *probes,
                        const conv_config *heur, int heur_count, int ranked_count,
                        bool variants, conv_config *out, int max) {
  int n = 0, compiled_left = CONV_CUDNN_RUNTIME_COMPILED_MAX;
  for (int i = 0; i < heur_count; i++) {
    int64_t e = heur[i].values[0];
    if (e < 0 || e >= engines || !probes[e].usable) continue;
    if (probes[e].heuristic == NULL) probes[e].heuristic = &heur[i];
    if (i >= ranked_count && config_never_pays(p, &heur[i])) continue;
    if (!engine_takes_config(&probes[e], &compiled_left)) continue;
    if (config_append(out, max, &n, &heur[i]) && i < ranked_count)
      out[n - 1].flags |= CONV_CONFIG_HEURISTIC_RANKED;
  }
  for (int64_t e = 0; e < engines; e++) {
    if (!probes[e].usable) continue;
    conv_config c = {1, {e}, 0};
    if (!config_never_pays(p, &c) && engine_takes_config(&probes[e], &compiled_left))
      config_append(out, max, &n, &c);
    if (!probes[e].runtime_compiled) make_variants(e, &probes[e]);
  }
  for (int v = 0; variants && v < MAX_VARIANTS && n < max; v++)
    for (int64_t e = 0; e < engines; e++)
      if (probes[e].usable && v < probes[e].variant_count &&
          !config_never_pays(p, &probes[e].variants[v]))
        config_append(out, max, &n, &probes[e].variants[v]);
  return n;
}

/* ---------------------------------------------------------------- state */

typedef struct cudnn_state {
  conv_graph g;
  cudnnBackendDescriptor_t engine, config, plan;
  cudnnBackendDescriptor_t knobs[MAX_CONFIG_KNOBS];
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
  conv_cudnn_free_descs(s->knobs, MAX_CONFIG_KNOBS);
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

/* The configs of the problem's graph, its filters K R S C with
 * `krsc_filter` (the caller marks those configs). */
static conv_status list_configs(const conv_problem *problem, conv_env *env, bool krsc_filter,
                                conv_config *out, int max, int *count, conv_error *err) {
  conv_graph g = {0};
  engine_probe *probes = NULL;
  conv_config *heur = NULL;
  int heur_count = 0;
  int64_t engines = 0;
  conv_status st;
  if (max <= 0) {
    *count = 0;
    return CONV_OK;
  }
  uv_mutex_lock(&env->cudnn_lock);
  CONV_TRY(st, conv_cudnn_graph_build(problem, env, krsc_filter, &g, err), done);
  CONV_TRY(st, conv_cudnn_engine_count(g.graph, &engines, err), done);
  probes = calloc(engines > 0 ? (size_t)engines : 1, sizeof *probes);
  /* Ask the heuristics for more than `max`: in strict mode their first
   * picks are often TF32 engines, which emit_configs drops. */
  const int heur_cap = max < HEURISTIC_MIN_RESULTS ? HEURISTIC_MIN_RESULTS : max;
  heur = calloc((size_t)heur_cap, sizeof *heur);
  if (probes == NULL || heur == NULL) {
    st = conv_error_set(err, CONV_OUT_OF_MEMORY, "cudnn: config enumeration");
    goto done;
  }
  for (int64_t e = 0; e < engines; e++) {
    st = probe_engine(problem, g.graph, e, &probes[e], err);
    if (st == CONV_UNSUPPORTED) st = CONV_OK; /* that engine cannot run this graph */
    if (st != CONV_OK) goto done;
  }
  /* Mode A is what an untuned caller gets; B and the fallback list add
   * engine configs with knob settings of their own (PyTorch's benchmark
   * mode draws from A and the fallback list too). */
  const cudnnBackendHeurMode_t modes[] = {CUDNN_HEUR_MODE_A, CUDNN_HEUR_MODE_B,
                                          CUDNN_HEUR_MODE_FALLBACK};
  int ranked_count = 0;
  for (int m = 0; m < 3 && heur_count < heur_cap; m++) {
    int got = 0;
    CONV_TRY(st,
             heuristic_configs(g.graph, modes[m], heur + heur_count, heur_cap - heur_count, &got,
                               err),
             done);
    heur_count += got;
    if (m == 0) ranked_count = heur_count;
  }
  /* Backward passes get no knob values of our own choosing: on an H100
   * (cuDNN 9.19), one such variant of a backward-filter engine (engine 69,
   * a tiny NHWC TF32 problem) ran for over a minute without finishing, and
   * a running kernel cannot be stopped.  The heuristics' configs and every
   * engine's defaults still cover each engine. */
  const bool variants = problem->direction == CONV_FORWARD;
  *count = emit_configs(problem, engines, probes, heur, heur_count, ranked_count, variants, out,
                        max);
  /* Said rather than an empty list, so that the tuning's failure says why
   * (fp32 problems, whose epilogue runs after cuDNN, list what they did). */
  if (*count == 0 && conv_cudnn_fuses_epilogue(problem))
    st = conv_error_set(err, CONV_UNSUPPORTED,
                        "cudnn: none of this cuDNN's %" PRId64 " engines runs this %s convolution "
                        "with its bias%s fused (fp32 bias, one rounding); the problem without "
                        "its epilogue runs, the caller adding the bias after it",
                        engines, conv_dtype_name(problem->dtype),
                        problem->epilogue == CONV_EPILOGUE_BIAS_RELU ? " and ReLU" : "");
done:
  uv_mutex_unlock(&env->cudnn_lock);
  free(heur);
  free(probes);
  conv_cudnn_graph_destroy(&g);
  return st;
}

/* The problem's configs, then, for an NCHW forward convolution with R S >
 * 1, those of the graph with K R S C filters, each marked with
 * CONV_CUDNN_KNOB_KRSC_FILTER (never cuDNN's heuristic pick: that is what
 * an untuned caller of cuDNN runs). */
/* Appends the knob (type, 1) to each of the `count` configs at `at`,
 * dropping those with no room for it; returns how many are kept. */
static int mark_configs(conv_config *at, int count, int64_t knob) {
  int kept = 0;
  for (int i = 0; i < count; i++) {
    conv_config c = at[i];
    if (c.count + 2 > CONV_CONFIG_MAX_VALUES) continue;
    c.values[c.count++] = knob;
    c.values[c.count++] = 1;
    c.flags = 0;
    at[kept++] = c;
  }
  return kept;
}

/* A half problem's fused configs (possibly none: list_configs then says
 * so) and those with the epilogue after the graph, taken in turn, so that
 * the fast policy's first three try both kinds. */
static conv_status half_epilogue_configs(const conv_problem *problem, conv_env *env,
                                         conv_config *out, int max, int *count, conv_error *err) {
  conv_config *fused = calloc((size_t)max, sizeof *fused);
  conv_config *unfused = calloc((size_t)max, sizeof *unfused);
  int fused_count = 0, unfused_count = 0;
  conv_status st = fused != NULL && unfused != NULL
                       ? CONV_OK
                       : conv_error_set(err, CONV_OUT_OF_MEMORY, "cudnn: config lists");
  conv_error fused_err = {0};
  if (st == CONV_OK &&
      list_configs(problem, env, false, fused, max, &fused_count, &fused_err) != CONV_OK)
    fused_count = 0; /* no engine fuses this epilogue: the unfused configs serve */
  conv_problem bare = *problem;
  bare.epilogue = CONV_EPILOGUE_NONE;
  if (st == CONV_OK) st = list_configs(&bare, env, false, unfused, max, &unfused_count, err);
  if (st == CONV_OK) {
    unfused_count = mark_configs(unfused, unfused_count, CONV_CUDNN_KNOB_UNFUSED_EPILOGUE);
    int n = 0;
    for (int i = 0; n < max && (i < fused_count || i < unfused_count); i++) {
      if (i < fused_count && n < max) out[n++] = fused[i];
      if (i < unfused_count && n < max) out[n++] = unfused[i];
    }
    *count = n;
  }
  free(fused);
  free(unfused);
  return st;
}

static conv_status cudnn_configs(const conv_problem *problem, conv_env *env, conv_config *out,
                                 int max, int *count, conv_error *err) {
  if (unfused_epilogue_applies(problem) && max > 0)
    return half_epilogue_configs(problem, env, out, max, count, err);
  conv_status st = list_configs(problem, env, false, out, max, count, err);
  if (st != CONV_OK || !krsc_filter_applies(problem) || *count >= max) return st;
  int added = 0;
  st = list_configs(problem, env, true, out + *count, max - *count, &added, err);
  if (st != CONV_OK) return st;
  *count += mark_configs(out + *count, added, CONV_CUDNN_KNOB_KRSC_FILTER);
  return CONV_OK;
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
  if (s->krsc_filter && !krsc_filter_applies(problem)) {
    cudnn_release(s);
    return conv_error_set(err, CONV_UNSUPPORTED,
                          "cudnn: K R S C filters (knob %d) are for NCHW forward fp32 "
                          "convolutions with R S > 1", CONV_CUDNN_KNOB_KRSC_FILTER);
  }
  if (conv_cudnn_config_unfused_epilogue(config) && !unfused_epilogue_applies(problem)) {
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

const conv_algorithm conv_algorithm_cudnn = {
    .id = CONV_ALGO_CUDNN,
    /* 2: heuristic configs of 8 to 15 knobs (before, left out); 3: knob
     * variants around the heuristics' configs (make_variants); 4: the
     * configs with K R S C filters (CONV_CUDNN_KNOB_KRSC_FILTER); 5: half
     * problems' epilogue after the graph (CONV_CUDNN_KNOB_UNFUSED_EPILOGUE) */
    .version = 5,
    .name = "cudnn",
    CONV_ALGORITHM_CALLBACKS(cudnn),
    .libraries = CONV_LIBRARY_CUDNN,
    .krsc_filters = true, /* the graph's filter strides say K R S C */
};
