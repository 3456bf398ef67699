/*
 * cudnn_configs.c -- the cuDNN family's configs (cudnn.c says what a
 * config is): for each graph of a problem, cuDNN's heuristics' configs,
 * every usable engine's default and knob variants of our own, with the
 * runtime-compiled engines capped and the configs that never pay left
 * out; then the K R S C twin graph's (fp32 NCHW) or the unfused
 * epilogue's (half), marked with convtune's own knob.
 *
 * Tests: tests/families/test_cudnn.c.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "algorithms/cudnn_graph.h"
#include "algorithms/common/kernels.h"
#include "algorithms/algorithm.h"

/* Knob variants per engine besides its default config (cudnn_graph.h);
 * with the default and the heuristics' own configs that is 9-14 timings
 * per engine. */
#define MAX_VARIANTS CONV_CUDNN_NEIGHBOUR_VARIANTS

/* Heuristic results asked for even when few configs are wanted. */
#define HEURISTIC_MIN_RESULTS 64

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

/* The problems whose configs are also listed with the epilogue after the
 * graph: half forward convolutions with one. */
bool conv_cudnn_unfused_epilogue_applies(const conv_problem *p) {
  return p->dtype != CONV_DTYPE_F32 && p->direction == CONV_FORWARD &&
         p->epilogue != CONV_EPILOGUE_NONE;
}

/* The problems whose configs are also listed with KRSC filters (not those
 * whose own filters are K R S C: their graph already reads them so).  The
 * transpose (conv_filter_to_krsc) moves floats: fp32 problems only. */
bool conv_cudnn_krsc_filter_applies(const conv_problem *p) {
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
  if (n < 0 || n > CONV_CUDNN_MAX_KNOBS) goto done; /* st is CONV_OK: skipped, not failed */
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

/* Engines cuDNN's ranking puts far down that win a class of problems,
 * listed as best guesses (CONV_CONFIG_BEST_GUESS) right after the ranked
 * configs: its Winograd engines, 4 and 6 (their default configs), on
 * strict fp32 forward 3x3 stride-1 dense layers.  Measured (H200, cuDNN
 * 9.19, exhaustive tunings of the 27 such layers of the suite and the
 * models): one of them won 8 and was within 10% of the winner on 10, by
 * up to 2.5x over the best other config; cuDNN listed engine 4 93rd of
 * rn50_conv2_3x3's configs, so a prediction, which times cuDNN's first 3
 * and the configs that ran on its neighbours, missed it where no
 * neighbour had run it (the suite in suite order under the predict
 * policy: rn50_conv2_3x3 and rn50_conv5_3x3 at 1.99x and 2.49x the
 * exhaustive winner's time). */
static bool config_low_ranked_winner(const conv_problem *p, const conv_config *c) {
  const bool winograd_engine = c->count == 1 && (c->values[0] == 4 || c->values[0] == 6);
  return winograd_engine && conv_cudnn_marks_best_guesses(p);
}

bool conv_cudnn_marks_best_guesses(const conv_problem *p) {
  return p->dtype == CONV_DTYPE_F32 && p->math == CONV_MATH_STRICT &&
         p->direction == CONV_FORWARD && p->groups == 1 && p->r == 3 && p->s == 3 &&
         p->stride_h == 1 && p->stride_w == 1 && p->dil_h == 1 && p->dil_w == 1;
}

/* Appends heuristic config `h` (`ranked`: from cuDNN's ranked mode),
 * unless its engine cannot run it, it never pays (and is not ranked), or
 * its engine's share of runtime compilation is spent. */
static void emit_heuristic(const conv_problem *p, int64_t engines, engine_probe *probes,
                           const conv_config *h, bool ranked, int *compiled_left,
                           conv_config *out, int max, int *n) {
  const int64_t e = h->values[0];
  if (e < 0 || e >= engines || !probes[e].usable) return;
  if (probes[e].heuristic == NULL) probes[e].heuristic = h;
  if (!ranked && config_never_pays(p, h)) return;
  if (!engine_takes_config(&probes[e], compiled_left)) return;
  if (config_append(out, max, n, h) && ranked) out[*n - 1].flags |= CONV_CONFIG_HEURISTIC_RANKED;
}

/* The ranked heuristic configs in cuDNN's order, the best guesses
 * (config_low_ranked_winner), then the other
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
  for (int i = 0; i < ranked_count; i++)
    emit_heuristic(p, engines, probes, &heur[i], true, &compiled_left, out, max, &n);
  for (int64_t e = 0; e < engines; e++) {
    const conv_config c = {1, {e}, 0};
    if (probes[e].usable && config_low_ranked_winner(p, &c) &&
        engine_takes_config(&probes[e], &compiled_left) && config_append(out, max, &n, &c))
      out[n - 1].flags |= CONV_CONFIG_BEST_GUESS;
  }
  for (int i = ranked_count; i < heur_count; i++)
    emit_heuristic(p, engines, probes, &heur[i], false, &compiled_left, out, max, &n);
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

/* The problem's configs, then, for an NCHW forward convolution with R S >
 * 1, those of the graph with K R S C filters, each marked with
 * CONV_CUDNN_KNOB_KRSC_FILTER (never cuDNN's heuristic pick: that is what
 * an untuned caller of cuDNN runs). */
conv_status conv_cudnn_configs(const conv_problem *problem, conv_env *env, conv_config *out, int max,
                               int *count, conv_error *err) {
  if (conv_cudnn_unfused_epilogue_applies(problem) && max > 0)
    return half_epilogue_configs(problem, env, out, max, count, err);
  conv_status st = list_configs(problem, env, false, out, max, count, err);
  if (st != CONV_OK || !conv_cudnn_krsc_filter_applies(problem) || *count >= max) return st;
  int added = 0;
  st = list_configs(problem, env, true, out + *count, max - *count, &added, err);
  if (st != CONV_OK) return st;
  *count += mark_configs(out + *count, added, CONV_CUDNN_KNOB_KRSC_FILTER);
  return CONV_OK;
}

