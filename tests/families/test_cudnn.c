/* test_cudnn.c -- the cudnn family, on the CPU: its knob variants
 * (conv_cudnn_knob_variants): around cuDNN's heuristic config, each
 * variant is that config with one knob a step or two away, within range,
 * no two alike; without one, one-knob changes of the engine's defaults.
 * And convtune's own K R S C filter knob: described, refused where it
 * does not apply.
 * The knob ranges are engine 67's on an H100 (cuDNN 9.19).  No GPU: the
 * tests that run every family (test_gpu.c, test_backward.c) run every
 * config cuDNN lists, and the channels-last tests (test_depthwise_nhwc.c,
 * test_gemm_nhwc.c) cuDNN's NHWC engines. */
#include <string.h>

#include "algorithms/cudnn_graph.h"
#include "algorithms/algorithm.h"
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
 * problems, backward passes and 1x1 filters (K C R S is K R S C there). */
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
  for (int i = 0; i < 3; i++) {
    conv_problem other = p;
    if (i == 0) other.layout = CONV_LAYOUT_NHWC;
    if (i == 1) other.direction = CONV_BACKWARD_DATA;
    if (i == 2) other.r = other.s = 1, other.pad_h = other.pad_w = 0;
    conv_prepared prep;
    conv_error err = {CONV_OK, ""};
    CHECK_STATUS(CONV_UNSUPPORTED, cudnn->prepare(&other, &env, &krsc, &prep, &err));
    CHECK_MSG(strstr(err.message, "R S > 1") != NULL, "%s", err.message);
  }
  return TEST_PASS;
}

static const labelled_test_case tests[] = {
    {"neighbours_of_the_pick", neighbours_of_the_pick, "cpu"},
    {"neighbours_add_a_knob", neighbours_add_a_knob, "cpu"},
    {"defaults_without_a_pick", defaults_without_a_pick, "cpu"},
    {"krsc_filter_knob", krsc_filter_knob, "cpu"},
};
TEST_MAIN(tests)
