/* test_cudnn.c -- the cudnn family.  On the CPU: its knob variants
 * (conv_cudnn_knob_variants): around cuDNN's heuristic config, each
 * variant is that config with one knob a step or two away, within range,
 * no two alike; without one, one-knob changes of the engine's defaults.
 * convtune's own knobs (K R S C filters; a half problem's epilogue after
 * the graph): described, refused where they do not apply.  Which engines a half problem admits and which graphs fuse
 * the epilogue.
 * The knob ranges are engine 67's on an H100 (cuDNN 9.19).  The tests
 * that run every family (test_gpu.c, test_backward.c) run every fp32
 * config cuDNN lists, and the channels-last tests (test_depthwise_nhwc.c,
 * test_gemm_nhwc.c) cuDNN's NHWC engines.
 * On the GPU, half precision (cuDNN runs fp16 and bf16 problems, as do
 * the cuBLASLt GEMM families, tested in their own files): every config
 * cuDNN lists for each type in each direction and layout against the CPU
 * reference in double on fresh random inputs (rounded to the type) with
 * poisoned outputs; the fused bias and bias+ReLU epilogue; half plans
 * through the public API; and the configs left out as never paying. */
#include <inttypes.h>
#include <string.h>

#include "algorithms/cudnn_graph.h"
#include "algorithms/algorithm.h"
#include "tests/gpu_support.h"
#include "tests/test.h"

/* Engine 67's knobs: tile size, tile K, index mode, workspace, cluster M
 * and N (cudnnBackendKnobType_t 2, 13, 18, 25, 27, 28). */
static const knob_info engine67[] = {{2, 0, 23, 1},  {13, 0, 3, 1},  {18, 0, 1, 1},
                                     {25, 0, 1, 1},  {27, 1, 16, 1}, {28, 1, 16, 1}};
#define ENGINE67_KNOBS ((int)(sizeof engine67 / sizeof engine67[0]))

/* cuDNN's pick for resnet50's 14x14 3x3 TF32 layer at batch 16. */
static const conv_config pick = {13, {67, 2, 7, 13, 0, 18, 0, 25, 1, 27, 8, 28, 1}, 0};

static const knob_info *knob_of(int64_t type) {
  for (int i = 0; i < ENGINE67_KNOBS; i++)
    if (engine67[i].type == type) return &engine67[i];
  return NULL;
}

/* How many knob values of c differ from base's (a knob c sets and base
 * does not counts as different), or -1 when c is malformed or has a knob
 * outside its range. */
static int knobs_changed(const conv_config *base, const conv_config *c) {
  if (c->count < 1 || c->count % 2 == 0 || c->values[0] != base->values[0]) return -1;
  int changed = 0;
  for (int i = 1; i + 1 < c->count; i += 2) {
    const knob_info *k = knob_of(c->values[i]);
    if (k == NULL || c->values[i + 1] < k->min || c->values[i + 1] > k->max) return -1;
    if (i > 1 && c->values[i] <= c->values[i - 2]) return -1; /* sorted, each once */
    bool same = false;
    for (int j = 1; j + 1 < base->count; j += 2)
      same |= base->values[j] == c->values[i] && base->values[j + 1] == c->values[i + 1];
    changed += !same;
  }
  return changed;
}

static bool listed(const conv_config *out, int n, const conv_config *c) {
  for (int i = 0; i < n; i++)
    if (conv_config_equal(&out[i], c)) return true;
  return false;
}

static int neighbours_of_the_pick(void) {
  conv_config out[CONV_CUDNN_NEIGHBOUR_VARIANTS + 4];
  memset(out, 0, sizeof out);
  const int n = conv_cudnn_knob_variants(67, engine67, ENGINE67_KNOBS, &pick, out,
                                         CONV_CUDNN_NEIGHBOUR_VARIANTS + 4);
  CHECK(n == CONV_CUDNN_NEIGHBOUR_VARIANTS);
  for (int i = 0; i < n; i++) {
    CHECK_MSG(knobs_changed(&pick, &out[i]) == 1, "variant %d changes %d knobs", i,
              knobs_changed(&pick, &out[i]));
    CHECK(out[i].count == pick.count); /* the pick sets every knob: none added */
    for (int j = 0; j < i; j++) CHECK(!conv_config_equal(&out[i], &out[j]));
  }
  /* The one the H100 measured faster: cluster M one lower. */
  const conv_config faster = {13, {67, 2, 7, 13, 0, 18, 0, 25, 1, 27, 7, 28, 1}, 0};
  CHECK(listed(out, n, &faster));
  /* Every knob that can move a step up or down does, before any moves two:
   * tile size 6 and 8, tile K 1, index mode 1, workspace 0, cluster M 7
   * and 9, cluster N 2. */
  const int64_t one_step[][2] = {{2, 6}, {2, 8}, {13, 1}, {18, 1}, {25, 0}, {27, 7}, {27, 9},
                                 {28, 2}};
  for (size_t i = 0; i < sizeof one_step / sizeof one_step[0]; i++) {
    conv_config c = pick;
    for (int j = 1; j + 1 < c.count; j += 2)
      if (c.values[j] == one_step[i][0]) c.values[j + 1] = one_step[i][1];
    CHECK_MSG(listed(out, n, &c), "knob %lld = %lld missing", (long long)one_step[i][0],
              (long long)one_step[i][1]);
  }
  /* A smaller `max` gets a prefix of the same list. */
  conv_config few[3];
  CHECK(conv_cudnn_knob_variants(67, engine67, ENGINE67_KNOBS, &pick, few, 3) == 3);
  for (int i = 0; i < 3; i++) CHECK(conv_config_equal(&few[i], &out[i]));
  return TEST_PASS;
}

/* A heuristic config that leaves knobs to the engine's defaults: a moved
 * knob is added (and the knobs stay sorted by type). */
static int neighbours_add_a_knob(void) {
  const conv_config sparse = {3, {67, 27, 4}, 0};
  conv_config out[CONV_CUDNN_NEIGHBOUR_VARIANTS];
  const int n = conv_cudnn_knob_variants(67, engine67, ENGINE67_KNOBS, &sparse, out,
                                         CONV_CUDNN_NEIGHBOUR_VARIANTS);
  CHECK(n == CONV_CUDNN_NEIGHBOUR_VARIANTS);
  bool added = false;
  for (int i = 0; i < n; i++) {
    CHECK(knobs_changed(&sparse, &out[i]) == 1);
    added |= out[i].count == 5;
  }
  CHECK(added);
  const conv_config cluster_m = {3, {67, 27, 3}, 0}, tile = {5, {67, 2, 1, 27, 4}, 0};
  CHECK(listed(out, n, &cluster_m));
  CHECK(listed(out, n, &tile)); /* tile size from its minimum, one stride up */
  return TEST_PASS;
}

/* Without a heuristic config: one knob set each, around its minimum. */
static int defaults_without_a_pick(void) {
  conv_config out[CONV_CUDNN_NEIGHBOUR_VARIANTS];
  const int n = conv_cudnn_knob_variants(67, engine67, ENGINE67_KNOBS, NULL, out,
                                         CONV_CUDNN_NEIGHBOUR_VARIANTS);
  CHECK(n == CONV_CUDNN_DEFAULT_VARIANTS);
  const conv_config engine_only = {1, {67}, 0};
  for (int i = 0; i < n; i++) {
    CHECK(out[i].count == 3);
    CHECK(knobs_changed(&engine_only, &out[i]) == 1);
  }
  const conv_config first = {3, {67, 2, 0}, 0};
  CHECK(conv_config_equal(&out[0], &first)); /* round 0 steps 0 from the minimum */
  /* No knobs: nothing to vary. */
  CHECK(conv_cudnn_knob_variants(67, engine67, 0, &pick, out, CONV_CUDNN_NEIGHBOUR_VARIANTS) == 0);
  CHECK(conv_cudnn_knob_variants(67, engine67, 0, NULL, out, CONV_CUDNN_NEIGHBOUR_VARIANTS) == 0);
  return TEST_PASS;
}

/* convtune's K R S C knob (CONV_CUDNN_KNOB_KRSC_FILTER) is described, and
 * refused before cuDNN is asked where it does not apply: channels-last
 * problems, backward passes, 1x1 filters (K C R S is K R S C there) and
 * half problems (the transpose moves floats). */
static int krsc_filter_knob(void) {
  const conv_algorithm *cudnn = conv_registry_find(CONV_ALGO_CUDNN);
  CHECK(cudnn != NULL);
  conv_config krsc = pick;
  krsc.values[krsc.count++] = CONV_CUDNN_KNOB_KRSC_FILTER;
  krsc.values[krsc.count++] = 1;
  char text[128];
  cudnn->describe(&krsc, text, sizeof text);
  CHECK_MSG(strcmp(text, "engine=67 knobs=2:7,13:0,18:0,25:1,27:8,28:1 krsc") == 0, "%s", text);
  conv_problem p;
  conv_problem_init(&p);
  p.n = 2, p.c = 8, p.h = p.w = 9, p.k = 8, p.r = p.s = 3, p.pad_h = p.pad_w = 1;
  conv_env env;
  memset(&env, 0, sizeof env);
  for (int i = 0; i < 4; i++) {
    conv_problem other = p;
    if (i == 0) other.layout = CONV_LAYOUT_NHWC;
    if (i == 1) other.direction = CONV_BACKWARD_DATA;
    if (i == 2) other.r = other.s = 1, other.pad_h = other.pad_w = 0;
    if (i == 3) other.dtype = CONV_DTYPE_F16;
    conv_prepared prep;
    conv_error err = {CONV_OK, ""};
    CHECK_STATUS(CONV_UNSUPPORTED, cudnn->prepare(&other, &env, &krsc, &prep, &err));
    CHECK_MSG(strstr(err.message, "R S > 1") != NULL, "%s", err.message);
  }
  return TEST_PASS;
}

/* A config with K R S C filters is the twin of the engine config without
 * them (the same graph, the filters transposed first): the tuner does not
 * run it where that config was far too slow (tuner.h).  One with the knob
 * at 0, one with the epilogue after the graph (its graph has no epilogue:
 * other kernels) and one without convtune's knobs are no one's twin. */
static int twins_of_krsc_filters(void) {
  const conv_algorithm *cudnn = conv_registry_find(CONV_ALGO_CUDNN);
  CHECK(cudnn != NULL && cudnn->twin_of != NULL);
  conv_config krsc = pick, twin;
  krsc.values[krsc.count++] = CONV_CUDNN_KNOB_KRSC_FILTER;
  krsc.values[krsc.count++] = 1;
  krsc.flags = CONV_CONFIG_HEURISTIC_RANKED;
  CHECK(cudnn->twin_of(&krsc, &twin));
  CHECK(conv_config_equal(&twin, &pick) && twin.flags == 0);
  krsc.values[krsc.count - 1] = 0;
  CHECK(!cudnn->twin_of(&krsc, &twin));
  conv_config unfused = pick;
  unfused.values[unfused.count++] = CONV_CUDNN_KNOB_UNFUSED_EPILOGUE;
  unfused.values[unfused.count++] = 1;
  CHECK(!cudnn->twin_of(&unfused, &twin));
  CHECK(!cudnn->twin_of(&pick, &twin));
  return TEST_PASS;
}

/* convtune's knob for a half problem's epilogue after the graph
 * (CONV_CUDNN_KNOB_UNFUSED_EPILOGUE) is described, and refused before
 * cuDNN is asked where it does not apply: fp32 problems, backward passes
 * and problems without an epilogue. */
static int unfused_epilogue_knob(void) {
  const conv_algorithm *cudnn = conv_registry_find(CONV_ALGO_CUDNN);
  CHECK(cudnn != NULL);
  conv_config unfused = pick;
  unfused.values[unfused.count++] = CONV_CUDNN_KNOB_UNFUSED_EPILOGUE;
  unfused.values[unfused.count++] = 1;
  char text[128];
  cudnn->describe(&unfused, text, sizeof text);
  CHECK_MSG(strcmp(text, "engine=67 knobs=2:7,13:0,18:0,25:1,27:8,28:1 unfused") == 0, "%s", text);
  conv_problem p;
  CHECK_STATUS(CONV_OK, conv_problem_parse("n=2 c=8 h=9 w=9 k=8 r=3 s=3 pad=1 epilogue=bias "
                                           "dtype=f16", &p, NULL, 0));
  conv_env env;
  memset(&env, 0, sizeof env);
  for (int i = 0; i < 3; i++) {
    conv_problem other = p;
    if (i == 0) other.dtype = CONV_DTYPE_F32;
    if (i == 1) other.direction = CONV_BACKWARD_DATA, other.epilogue = CONV_EPILOGUE_NONE;
    if (i == 2) other.epilogue = CONV_EPILOGUE_NONE;
    conv_prepared prep;
    conv_error err = {CONV_OK, ""};
    CHECK_STATUS(CONV_UNSUPPORTED, cudnn->prepare(&other, &env, &unfused, &prep, &err));
    CHECK_MSG(strstr(err.message, "half forward convolutions") != NULL, "%s", err.message);
  }
  return TEST_PASS;
}

/* Half problems run on tensor cores whatever math mode they were asked
 * for (theirs is strict in name only), never down-converted; an engine
 * that may sum in reduced precision is theirs when it shows fp32 sums'
 * accuracy (the tight bound), never fp32 problems'.  fp32 problems'
 * refusals are as they were.  The epilogue is in the graph for half
 * problems only. */
static int half_engines_and_epilogue(void) {
  conv_problem p;
  CHECK_STATUS(CONV_OK, conv_problem_parse("n=2 c=8 h=9 w=9 k=8 r=3 s=3 pad=1 epilogue=bias", &p,
                                           NULL, 0));
  const engine_notes tensor_core = {.tensor_core = true}, down = {.down_convert = true},
                     reduced = {.reduced_reduction = true, .tensor_core = true};
  CHECK(strcmp(conv_cudnn_math_refusal(&p, &tensor_core), "uses TF32 tensor cores") == 0);
  CHECK(strcmp(conv_cudnn_math_refusal(&p, &down), "down-converts its fp32 inputs") == 0);
  CHECK(!conv_cudnn_fuses_epilogue(&p));
  p.math = CONV_MATH_TF32;
  CHECK(conv_cudnn_math_refusal(&p, &tensor_core) == NULL);
  CHECK(strcmp(conv_cudnn_math_refusal(&p, &reduced), "accumulates in reduced precision") == 0);
  CHECK(conv_cudnn_arith(&p, &tensor_core) == CONV_ARITH_DIRECT);
  for (int d = 0; d < 2; d++) {
    p.dtype = d ? CONV_DTYPE_BF16 : CONV_DTYPE_F16;
    p.math = CONV_MATH_STRICT; /* what a half problem's math always is */
    CHECK(conv_cudnn_math_refusal(&p, &tensor_core) == NULL);
    CHECK(strcmp(conv_cudnn_math_refusal(&p, &down), "down-converts its inputs") == 0);
    CHECK(conv_cudnn_math_refusal(&p, &reduced) == NULL);
    CHECK(conv_cudnn_arith(&p, &reduced) == CONV_ARITH_REDUCED_SUMS);
    CHECK(conv_cudnn_arith(&p, &tensor_core) == CONV_ARITH_DIRECT);
    /* One rounding's room, whatever the sum's length; the direct bound grows. */
    const double tight = conv_error_bound_for(&p, CONV_ARITH_REDUCED_SUMS);
    CHECK(tight < conv_error_bound_for(&p, CONV_ARITH_DIRECT));
    conv_problem long_sums = p;
    long_sums.c = 4096;
    CHECK(conv_error_bound_for(&long_sums, CONV_ARITH_REDUCED_SUMS) == tight);
    CHECK(conv_error_bound_for(&long_sums, CONV_ARITH_DIRECT) >
          conv_error_bound_for(&p, CONV_ARITH_DIRECT));
    p.epilogue = CONV_EPILOGUE_BIAS_RELU;
    CHECK(conv_cudnn_fuses_epilogue(&p));
    p.epilogue = CONV_EPILOGUE_NONE;
    CHECK(!conv_cudnn_fuses_epilogue(&p));
    p.epilogue = CONV_EPILOGUE_BIAS;
    CHECK(conv_cudnn_fuses_epilogue(&p));
  }
  return TEST_PASS;
}

/* ---- half precision on the GPU */

/* n c h w k r s, stride, pad, dilation, groups: the shapes every half
 * pass runs on, in both layouts. */
static const int64_t half_shapes[][11] = {
    {2, 16, 12, 12, 32, 3, 3, 1, 1, 1, 1}, /* dense 3x3                       */
    {3, 8, 13, 11, 16, 3, 3, 2, 1, 1, 1},  /* strided, odd sizes              */
    {2, 32, 9, 9, 64, 1, 1, 1, 0, 1, 1},   /* 1x1                             */
    {2, 16, 14, 14, 16, 3, 3, 1, 2, 2, 2}, /* dilated, 2 groups               */
    {2, 3, 20, 20, 16, 7, 7, 2, 3, 1, 1},  /* a 3-channel stem                */
};
#define HALF_SHAPES ((int)(sizeof half_shapes / sizeof half_shapes[0]))

static conv_problem half_problem(int shape, conv_dtype dtype, conv_layout layout,
                                 conv_direction direction, conv_epilogue epilogue) {
  const int64_t *s = half_shapes[shape];
  conv_problem p = direct_problem(s[0], s[1], s[2], s[3], s[4], s[5], s[6], s[7], s[8], s[9],
                                  s[10], epilogue, CONV_MATH_STRICT);
  p.dtype = dtype;
  p.layout = layout;
  p.direction = direction;
  return p;
}

static const char *dtype_text(conv_dtype dtype) { return dtype == CONV_DTYPE_BF16 ? "bf16" : "f16"; }

/* Every config cuDNN lists for `dtype` in `direction`, on every half shape
 * in NCHW and NHWC (the first two in quick runs): each case has a config
 * that matches the CPU reference within the type's bound, and the tuner's
 * device check agrees with the CPU's on every config (gpu_support.c,
 * judge_config; a cuDNN engine that is wrong only has to be caught, and
 * is printed with its error). */
static int half_pass_matches_reference(conv_dtype dtype, conv_direction direction,
                                       const char *direction_name) {
  SKIP_WITHOUT_GPU();
  seed_rng();
  const int n = 2 * (quick_mode() ? 2 : HALF_SHAPES);
  conv_problem cases[2 * HALF_SHAPES];
  for (int i = 0; i < n; i++)
    cases[i] = half_problem(i / 2, dtype, i % 2 ? CONV_LAYOUT_NHWC : CONV_LAYOUT_NCHW, direction,
                            CONV_EPILOGUE_NONE);
  family_count count;
  if (run_family_on_cases(&conv_algorithm_cudnn, cases, (size_t)n, NULL, &count) != TEST_PASS)
    return TEST_FAIL;
  printf("SUMMARY cudnn %s %s: %d configs matched on %d cases (worst relative L2 error %.2g), "
         "%d wrong and caught, %d not supported\n",
         dtype_text(dtype), direction_name, count.ran, n, count.worst_error, count.wrong_caught,
         count.unsupported);
  CHECK(count.ran >= n);
  return TEST_PASS;
}

static int f16_forward(void) { return half_pass_matches_reference(CONV_DTYPE_F16, CONV_FORWARD, "forward"); }
static int f16_backward_data(void) {
  return half_pass_matches_reference(CONV_DTYPE_F16, CONV_BACKWARD_DATA, "backward-data");
}
static int f16_backward_filter(void) {
  return half_pass_matches_reference(CONV_DTYPE_F16, CONV_BACKWARD_FILTER, "backward-filter");
}
static int bf16_forward(void) { return half_pass_matches_reference(CONV_DTYPE_BF16, CONV_FORWARD, "forward"); }
static int bf16_backward_data(void) {
  return half_pass_matches_reference(CONV_DTYPE_BF16, CONV_BACKWARD_DATA, "backward-data");
}
static int bf16_backward_filter(void) {
  return half_pass_matches_reference(CONV_DTYPE_BF16, CONV_BACKWARD_FILTER, "backward-filter");
}

/* The bias and bias+ReLU epilogue in cuDNN's graph, channels-last (where
 * cuDNN's runtime fusion runs), channels a multiple of 8: every config
 * cuDNN lists is judged against the CPU reference, whose epilogue is
 * applied in double before the one rounding (gpu_support.c,
 * cpu_reference), and each case has one that matches.  Runtime fusion
 * compiles each plan, so few cases. */
static int half_fused_epilogue(void) {
  SKIP_WITHOUT_GPU();
  seed_rng();
  /* Two cases, the first 24 configs of each (the heuristics' picks first,
   * fused and unfused in turn): every config of a fused half graph is a
   * runtime-compiled engine (about a second each to build); before the
   * family listed at most CONV_CUDNN_RUNTIME_COMPILED_MAX of them, all of
   * them ran past the test's five minutes on an H200. */
  const conv_problem cases[] = {
      half_problem(0, CONV_DTYPE_F16, CONV_LAYOUT_NHWC, CONV_FORWARD, CONV_EPILOGUE_BIAS_RELU),
      /* NCHW: few engines fuse; the configs with the epilogue after the
       * graph (CONV_CUDNN_KNOB_UNFUSED_EPILOGUE) run it */
      half_problem(1, CONV_DTYPE_BF16, CONV_LAYOUT_NCHW, CONV_FORWARD, CONV_EPILOGUE_BIAS_RELU),
  };
  const int n = quick_mode() ? 1 : (int)(sizeof cases / sizeof cases[0]);
  family_count count;
  set_config_cap(24);
  const int rc = run_family_on_cases(&conv_algorithm_cudnn, cases, (size_t)n, NULL, &count);
  set_config_cap(0);
  if (rc != TEST_PASS) return TEST_FAIL;
  printf("SUMMARY cudnn half epilogues: %d configs matched on %d cases (worst relative L2 error "
         "%.2g), %d wrong and caught, %d not supported\n",
         count.ran, n, count.worst_error, count.wrong_caught, count.unsupported);
  CHECK(count.ran >= n);
  return TEST_PASS;
}

#define LISTED_MAX 1024

/* The problem's configs, as the tuner lists them (at most LISTED_MAX). */
static int list_cudnn_configs(const conv_problem *p, conv_env *env, conv_config *configs,
                              int *n) {
  conv_error err = {0};
  CHECK_MSG(conv_algorithm_cudnn.configs(p, env, configs, LISTED_MAX, n, &err) == CONV_OK, "%s",
            err.message);
  return TEST_PASS;
}

/* How many of a problem's listed configs are of runtime-compiled engines
 * (read from the engines' behaviour notes on this GPU's cuDNN) and how many
 * run the epilogue after the graph. */
static int count_listed(const conv_problem *p, int *listed, int *compiled, int *unfused) {
  conv_env env;
  if (open_env(&env) != TEST_PASS) return TEST_FAIL;
  conv_config configs[LISTED_MAX];
  int n = 0;
  conv_error err = {0};
  if (list_cudnn_configs(p, &env, configs, &n) != TEST_PASS) return TEST_FAIL;
  conv_graph g = {0};
  uv_mutex_lock(&env.cudnn_lock);
  const conv_status built = conv_cudnn_graph_build(p, &env, false, &g, &err);
  uv_mutex_unlock(&env.cudnn_lock);
  CHECK_MSG(built == CONV_OK, "%s", err.message);
  *listed = n, *compiled = 0, *unfused = 0;
  for (int i = 0; i < n; i++) {
    if (conv_cudnn_config_unfused_epilogue(&configs[i])) {
      (*unfused)++;
      continue;
    }
    cudnnBackendDescriptor_t engine = NULL;
    engine_notes notes;
    CHECK_MSG(conv_cudnn_make_engine(g.graph, configs[i].values[0], &engine, &err) == CONV_OK,
              "%s", err.message);
    const conv_status read = conv_cudnn_read_notes(engine, &notes, &err);
    conv_cudnn_free_desc(&engine);
    CHECK_MSG(read == CONV_OK, "%s", err.message);
    *compiled += notes.runtime_compiled;
  }
  conv_cudnn_graph_destroy(&g);
  close_env(&env);
  return TEST_PASS;
}

/* A half problem with a fused bias lists at least one and at most
 * CONV_CUDNN_RUNTIME_COMPILED_MAX configs of runtime-compiled engines (its
 * fused graph's engines are such), and configs with the epilogue after the
 * graph besides. */
static int half_runtime_compiled_capped(void) {
  SKIP_WITHOUT_GPU();
  const conv_problem p =
      half_problem(0, CONV_DTYPE_BF16, CONV_LAYOUT_NHWC, CONV_FORWARD, CONV_EPILOGUE_BIAS);
  int n, compiled, unfused;
  if (count_listed(&p, &n, &compiled, &unfused) != TEST_PASS) return TEST_FAIL;
  printf("SUMMARY cudnn bf16 fused bias: %d configs, %d of runtime-compiled engines, %d unfused\n",
         n, compiled, unfused);
  CHECK(compiled >= 1 && compiled <= CONV_CUDNN_RUNTIME_COMPILED_MAX && unfused > 0);
  return TEST_PASS;
}

/* TF32 problems too: resnet50's 3x3 layer at batch 16 lists at most
 * CONV_CUDNN_RUNTIME_COMPILED_MAX configs of runtime-compiled engines per
 * graph (NHWC: one; NCHW: two, its configs listed again on K R S C
 * filters), and still its hundreds of others. */
static int tf32_runtime_compiled_capped(void) {
  SKIP_WITHOUT_GPU();
  for (int nhwc = 0; nhwc < 2; nhwc++) {
    conv_problem p;
    CHECK_STATUS(CONV_OK, conv_problem_parse("n=16 c=64 h=56 w=56 k=64 r=3 s=3 pad=1", &p, NULL, 0));
    p.math = CONV_MATH_TF32;
    p.layout = nhwc ? CONV_LAYOUT_NHWC : CONV_LAYOUT_NCHW;
    int n, compiled, unfused;
    if (count_listed(&p, &n, &compiled, &unfused) != TEST_PASS) return TEST_FAIL;
    printf("SUMMARY cudnn tf32 %s: %d configs, %d of runtime-compiled engines\n",
           nhwc ? "nhwc" : "nchw", n, compiled);
    const int graphs = nhwc ? 1 : 2;
    CHECK(compiled <= graphs * CONV_CUDNN_RUNTIME_COMPILED_MAX && n >= 100);
  }
  return TEST_PASS;
}

/* Whether the problem's configs list engine `engine` (any config), or with
 * `knob` >= 0, that engine with only that knob, set to `value`; engines[]
 * gets the engines of the configs in list order, for a failure's message. */
static int lists_config(const conv_problem *p, int64_t engine, int64_t knob, int64_t value,
                        bool *listed, char *engines, size_t engines_size) {
  conv_env env;
  if (open_env(&env) != TEST_PASS) return TEST_FAIL;
  conv_config configs[LISTED_MAX];
  int n = 0;
  if (list_cudnn_configs(p, &env, configs, &n) != TEST_PASS) return TEST_FAIL;
  const conv_config wanted = {3, {engine, knob, value}, 0};
  *listed = false;
  size_t used = 0;
  engines[0] = '\0';
  for (int i = 0; i < n; i++) {
    *listed |= knob < 0 ? configs[i].values[0] == engine : conv_config_equal(&configs[i], &wanted);
    if ((i == 0 || configs[i].values[0] != configs[i - 1].values[0]) && used < engines_size)
      used += (size_t)snprintf(engines + used, engines_size - used, " %" PRId64,
                               configs[i].values[0]);
  }
  close_env(&env);
  return TEST_PASS;
}

/* The configs that never pay (cudnn_configs.c, config_never_pays) are left out
 * where the rule says, and still listed where it keeps them: were cuDNN to
 * number its engines otherwise, the second kind of case fails and the rule
 * needs a look. */
static int never_paying_configs(void) {
  SKIP_WITHOUT_GPU();
  /* Layers of mobilenet_v2, convnext_tiny and resnet50 where this cuDNN
   * (9.19, H200) listed the config before the rule, not as its ranked
   * heuristic's pick.  Engine 80's half side is not checked: none of the
   * half shapes tried lists it. */
  const char *depthwise = "n=16 c=144 h=56 w=56 k=144 r=3 s=3 pad=1 groups=144";
  const char *depthwise_7x7 = "n=16 c=96 h=56 w=56 k=96 r=7 s=7 pad=3 groups=96";
  const char *depthwise_14 = "n=16 c=384 h=14 w=14 k=384 r=3 s=3 pad=1 groups=384";
  const char *dense = "n=16 c=64 h=56 w=56 k=64 r=3 s=3 pad=1";
  const char *stem = "n=16 c=3 h=224 w=224 k=96 r=4 s=4 stride=4";
  const struct {
    const char *shape;
    conv_dtype dtype;
    conv_layout layout;
    conv_math math;
    int64_t engine, knob, value;
    bool listed;
  } cases[] = {
      {depthwise, CONV_DTYPE_F32, CONV_LAYOUT_NCHW, CONV_MATH_STRICT, 3, CUDNN_KNOB_TYPE_MULTIPLY,
       1, false},
      {dense, CONV_DTYPE_F32, CONV_LAYOUT_NCHW, CONV_MATH_STRICT, 3, CUDNN_KNOB_TYPE_MULTIPLY, 1,
       true},
      {dense, CONV_DTYPE_F32, CONV_LAYOUT_NCHW, CONV_MATH_TF32, 71, -1, 0, false},
      {dense, CONV_DTYPE_F16, CONV_LAYOUT_NHWC, CONV_MATH_STRICT, 71, -1, 0, true},
      {depthwise_7x7, CONV_DTYPE_F32, CONV_LAYOUT_NHWC, CONV_MATH_STRICT, 80, -1, 0, false},
      {stem, CONV_DTYPE_F32, CONV_LAYOUT_NCHW, CONV_MATH_TF32, 5, -1, 0, false},
      {depthwise_14, CONV_DTYPE_F16, CONV_LAYOUT_NHWC, CONV_MATH_STRICT, 5, -1, 0, true},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    conv_problem p;
    CHECK_STATUS(CONV_OK, conv_problem_parse(cases[i].shape, &p, NULL, 0));
    p.dtype = cases[i].dtype;
    p.layout = cases[i].layout;
    p.math = cases[i].math;
    bool listed;
    char engines[2048];
    if (lists_config(&p, cases[i].engine, cases[i].knob, cases[i].value, &listed, engines,
                     sizeof engines) != TEST_PASS)
      return TEST_FAIL;
    char key[CONV_PROBLEM_KEY_MAX];
    describe_problem(&p, key, sizeof key);
    printf("%s: engine %" PRId64 " knob %" PRId64 " %s\n", key, cases[i].engine, cases[i].knob,
           listed ? "listed" : "left out");
    CHECK_MSG(listed == cases[i].listed, "%s: engine %" PRId64 " %s (configs' engines:%s)", key,
              cases[i].engine,
              cases[i].listed ? "left out, expected listed" : "listed, expected left out", engines);
  }
  return TEST_PASS;
}

/* The Winograd engines' best guesses (cudnn_configs.c,
 * config_low_ranked_winner): on a strict fp32 3x3 stride-1 dense layer,
 * engine 4's or 6's default config follows the ranked configs, marked
 * CONV_CONFIG_BEST_GUESS (or is ranked itself); nothing is marked in TF32,
 * at stride 2 or with K R S C twins. */
static int best_guesses_listed(const char *shape, conv_math math, int *marked, bool *in_head) {
  conv_problem p;
  CHECK_STATUS(CONV_OK, conv_problem_parse(shape, &p, NULL, 0));
  p.math = math;
  conv_env env;
  if (open_env(&env) != TEST_PASS) return TEST_FAIL;
  static conv_config configs[LISTED_MAX];
  int n = 0, i = 0;
  if (list_cudnn_configs(&p, &env, configs, &n) != TEST_PASS) return TEST_FAIL;
  close_env(&env);
  while (i < n && (configs[i].flags & CONV_CONFIG_HEURISTIC_RANKED)) i++;
  *in_head = false;
  *marked = 0;
  for (int j = 0; j < n; j++) {
    const bool winograd = configs[j].count == 1 && (configs[j].values[0] == 4 ||
                                                    configs[j].values[0] == 6);
    *in_head |= winograd && j < i;
    if (!(configs[j].flags & CONV_CONFIG_BEST_GUESS)) continue;
    CHECK_MSG(winograd, "config %d of engine %" PRId64 " marked a best guess", j,
              configs[j].values[0]);
    CHECK_MSG(j == i, "best guess at %d, after %d ranked configs", j, i);
    *in_head = true;
    (*marked)++;
    i++;
  }
  /* The family's contract says where it marks: wherever it did. */
  CHECK_MSG(*marked == 0 || conv_algorithm_cudnn.marks_best_guesses(&p),
            "%s: marked %d, marks_best_guesses false", shape, *marked);
  printf("%s (%s): %d ranked configs and best guesses, %d best guesses, of %d\n", shape,
         math == CONV_MATH_STRICT ? "strict" : "tf32", i, *marked, n);
  return TEST_PASS;
}

static int winograd_best_guesses(void) {
  SKIP_WITHOUT_GPU();
  const char *conv2 = "n=32 c=64 h=56 w=56 k=64 r=3 s=3 pad=1";   /* rn50_conv2_3x3 */
  const char *conv5 = "n=32 c=512 h=7 w=7 k=512 r=3 s=3 pad=1";   /* rn50_conv5_3x3 */
  const char *stride2 = "n=32 c=64 h=56 w=56 k=64 r=3 s=3 pad=1 stride=2";
  int marked = 0;
  bool in_head = false;
  for (int i = 0; i < 2; i++) {
    if (best_guesses_listed(i == 0 ? conv2 : conv5, CONV_MATH_STRICT, &marked, &in_head) !=
        TEST_PASS)
      return TEST_FAIL;
    CHECK_MSG(in_head, "neither engine 4 nor 6 ranked or marked a best guess");
  }
  if (best_guesses_listed(conv2, CONV_MATH_TF32, &marked, &in_head) != TEST_PASS) return TEST_FAIL;
  CHECK(marked == 0);
  if (best_guesses_listed(stride2, CONV_MATH_STRICT, &marked, &in_head) != TEST_PASS)
    return TEST_FAIL;
  CHECK(marked == 0);
  return TEST_PASS;
}

/* Half plans through the public API, tuned (the tuner's random inputs,
 * reference and comparison in the type) and executed as a caller would:
 * whichever family wins (cuDNN's, a cuBLASLt GEMM family's, or one of our
 * kernels that runs the type), of the problem's type, matching the CPU
 * reference; a TF32
 * request of a half problem is the same problem (the same plan).  An
 * NCHW half problem with an epilogue has a plan too, under the fast
 * policy: cuDNN's configs alternate fused ones and ones with the epilogue
 * after the graph, which every engine runs, and im2col_gemm takes it. */
static int half_plans(void) {
  SKIP_WITHOUT_GPU();
  seed_rng();
  char cache[4096];
  temp_path(cache, sizeof cache, "cudnn-half");
  conv_context *ctx;
  if (make_context(&ctx, cache, CONV_POLICY_FAST, 0) != TEST_PASS) return TEST_FAIL;
  const conv_problem cases[] = {
      half_problem(0, CONV_DTYPE_F16, CONV_LAYOUT_NHWC, CONV_FORWARD, CONV_EPILOGUE_BIAS_RELU),
      half_problem(1, CONV_DTYPE_BF16, CONV_LAYOUT_NCHW, CONV_BACKWARD_DATA, CONV_EPILOGUE_NONE),
      half_problem(2, CONV_DTYPE_F16, CONV_LAYOUT_NHWC, CONV_BACKWARD_FILTER, CONV_EPILOGUE_NONE),
      half_problem(4, CONV_DTYPE_BF16, CONV_LAYOUT_NHWC, CONV_FORWARD, CONV_EPILOGUE_NONE),
      half_problem(0, CONV_DTYPE_F16, CONV_LAYOUT_NCHW, CONV_FORWARD, CONV_EPILOGUE_BIAS_RELU),
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    const conv_problem *p = &cases[i];
    char key[CONV_PROBLEM_KEY_MAX];
    describe_problem(p, key, sizeof key);
    pass_case pc;
    if (pass_case_make(&pc, p) != TEST_PASS) return TEST_FAIL;
    conv_plan *plan = NULL;
    const conv_status st = conv_plan_create(ctx, p, &plan);
    CHECK_MSG(st == CONV_OK, "%s: conv_plan_create: %s", key, conv_context_last_error(ctx));
    conv_plan_info info;
    CHECK_STATUS(CONV_OK, conv_plan_info_get(plan, &info));
    printf("%s: %s %s %.4f ms\n", key, info.algorithm, info.config, info.time_ms);
    CHECK_MSG(info.dtype == p->dtype && info.direction == p->direction,
              "%s: plan of %s, dtype %d, direction %d", key, info.algorithm, (int)info.dtype,
              (int)info.direction);
    conv_problem tf32 = *p;
    tf32.math = CONV_MATH_TF32;
    conv_plan *same = NULL;
    CHECK_MSG(conv_plan_create(ctx, &tf32, &same) == CONV_OK, "%s", conv_context_last_error(ctx));
    CHECK_MSG(same == plan, "%s: a TF32 request made another plan", key);
    conv_plan_destroy(same);
    for (int run = 0; run < 2; run++) { /* the second replays or captures a graph */
      if (pass_poison(&pc) != TEST_PASS) return TEST_FAIL;
      CHECK_STATUS(CONV_OK, execute_case(plan, &pc.d, p->direction));
      if (pass_check(&pc, conv_error_bound_for(p, CONV_ARITH_TRANSFORM), "half plan") != TEST_PASS)
        return TEST_FAIL;
    }
    conv_plan_destroy(plan);
    pass_case_free(&pc);
  }
  conv_context_destroy(ctx);
  remove_db(cache);
  return TEST_PASS;
}

static const labelled_test_case tests[] = {
    {"neighbours_of_the_pick", neighbours_of_the_pick, "cpu"},
    {"neighbours_add_a_knob", neighbours_add_a_knob, "cpu"},
    {"defaults_without_a_pick", defaults_without_a_pick, "cpu"},
    {"krsc_filter_knob", krsc_filter_knob, "cpu"},
    {"half_engines_and_epilogue", half_engines_and_epilogue, "cpu"},
    {"unfused_epilogue_knob", unfused_epilogue_knob, "cpu"},
    {"twins_of_krsc_filters", twins_of_krsc_filters, "cpu"},
    {"f16_forward", f16_forward, "gpu"},
    {"f16_backward_data", f16_backward_data, "gpu"},
    {"f16_backward_filter", f16_backward_filter, "gpu"},
    {"bf16_forward", bf16_forward, "gpu"},
    {"bf16_backward_data", bf16_backward_data, "gpu"},
    {"bf16_backward_filter", bf16_backward_filter, "gpu"},
    {"half_fused_epilogue", half_fused_epilogue, "gpu"},
    {"half_runtime_compiled_capped", half_runtime_compiled_capped, "gpu"},
    {"tf32_runtime_compiled_capped", tf32_runtime_compiled_capped, "gpu"},
    {"half_plans", half_plans, "gpu"},
    {"never_paying_configs", never_paying_configs, "gpu"},
    {"winograd_best_guesses", winograd_best_guesses, "gpu"},
};
TEST_MAIN(tests)
