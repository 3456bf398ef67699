/*
 * test_predict.c -- CONV_POLICY_PREDICT's choice without a GPU (tuner.h,
 * predict.c): which tuned problems of a cache are a new problem's
 * neighbours, when they agree, and how the predicted family's configs are
 * ranked by their times on them.  Caches are made in memory with the
 * cache API; the GPU tests time what the tuner then picks.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "tests/cache_fixtures.h"
#include "tuner/tuner.h"

static conv_problem problem_of(const char *spec) {
  conv_problem p;
  conv_problem_init(&p);
  if (conv_problem_parse(spec, &p, NULL, 0) != CONV_OK) p.n = -1; /* the test's own mistake */
  return p;
}

static conv_config config_of(int64_t a, int64_t b) { return (conv_config){2, {a, b}, 0}; }

/* One made-up tuning of `spec` on `device`: configs[i] of family `id` ran
 * in ms[i] (0: failed), the fastest marked the winner. */
static int store_tuning(conv_cache *cache, const char *spec, const char *device, uint32_t id,
                        const conv_config *configs, const double *ms, int count) {
  conv_error err = {CONV_OK, ""};
  const conv_problem p = problem_of(spec);
  char key[CONV_PROBLEM_KEY_MAX];
  CHECK_OK(conv_problem_key(&p, key, sizeof key));
  const conv_cache_key k = {key, device, VERSIONS};
  CHECK_OK(conv_cache_begin_tuning(cache, &k, &err));
  int best = -1;
  for (int i = 0; i < count; i++) {
    conv_trial t;
    memset(&t, 0, sizeof t);
    t.algorithm_id = id;
    snprintf(t.algorithm, sizeof t.algorithm, "family%u", (unsigned)id);
    t.config = configs[i];
    t.status = ms[i] > 0 ? CONV_OK : CONV_UNSUPPORTED;
    t.time_ms = ms[i] > 0 ? ms[i] : -1;
    t.rel_error = ms[i] > 0 ? 1e-7 : -1;
    t.deterministic = 1;
    CHECK_OK(conv_cache_add_trial(cache, &k, &t, &err));
    if (ms[i] > 0 && (best < 0 || ms[i] < ms[best])) best = i;
  }
  if (best >= 0) CHECK_OK(conv_cache_set_winner(cache, &k, id, &configs[best], &err));
  return TEST_PASS;
}

static conv_status predict_for(conv_cache *cache, const char *spec, char *key, size_t key_size,
                               conv_prediction *out) {
  conv_error err = {CONV_OK, ""};
  const conv_problem p = problem_of(spec);
  conv_status st = conv_problem_key(&p, key, key_size);
  if (st != CONV_OK) return st;
  const conv_cache_key k = {key, DEVICE, VERSIONS};
  conv_cache *const layers[] = {cache};
  return conv_predict_neighbours(layers, 1, &k, &p, out, &err);
}

/* Family ids made up for the test: only the cache's rows name them. */
enum { DEPTHWISE = 8, CUDNN = 1 };

#define DW(h, c) "n=16 c=" #c " h=" #h " w=" #h " k=" #c " r=7 s=7 pad=3 groups=" #c " layout=nhwc epilogue=bias"
#define DENSE(h, c) "n=16 c=" #c " h=" #h " w=" #h " k=" #c " r=3 s=3 pad=1 layout=nhwc epilogue=bias"

/* Three tuned depthwise neighbours agree on their family; dense layers,
 * another math mode, another dtype (either way), another device and the
 * problem itself do not count; their configs rank by mean log slowdown,
 * untimed ones last. */
static int neighbours_agree(void) {
  conv_error err = {CONV_OK, ""};
  conv_cache *cache = NULL;
  CHECK_OK(conv_cache_open(":memory:", false, &cache, &err));
  const conv_config a = config_of(4, 1), b = config_of(4, 2), c = config_of(2, 1),
                    d = config_of(1, 1), never = config_of(8, 8);
  const conv_config dw_configs[] = {a, b, c, d};
  /* b is fastest on all three; a second; c and d slower; d failed on one. */
  const double on28[] = {0.030, 0.025, 0.040, 0.050}, on7[] = {0.014, 0.012, 0.020, 0};
  const double on56[] = {0.045, 0.040, 0.050, 0.080};
  int rc = store_tuning(cache, DW(28, 192), DEVICE, DEPTHWISE, dw_configs, on28, 4);
  if (rc == TEST_PASS) rc = store_tuning(cache, DW(7, 768), DEVICE, DEPTHWISE, dw_configs, on7, 4);
  if (rc == TEST_PASS) rc = store_tuning(cache, DW(56, 96), DEVICE, DEPTHWISE, dw_configs, on56, 4);
  /* Not neighbours: dense (far: not depthwise), the same shape in TF32,
   * the same on another device, and the problem itself (already tuned). */
  const conv_config dense_configs[] = {config_of(70, 0)};
  const double dense_ms[] = {0.02};
  for (int i = 0; rc == TEST_PASS && i < 3; i++)
    rc = store_tuning(cache, i == 0 ? DENSE(14, 384) : i == 1 ? DENSE(14, 192) : DENSE(28, 384),
                      DEVICE, CUDNN, dense_configs, dense_ms, 1);
  if (rc == TEST_PASS)
    rc = store_tuning(cache, DW(14, 384) " math=tf32", DEVICE, CUDNN, dense_configs, dense_ms, 1);
  if (rc == TEST_PASS)
    rc = store_tuning(cache, DW(14, 384) " dtype=bf16", DEVICE, CUDNN, dense_configs, dense_ms, 1);
  if (rc == TEST_PASS)
    rc = store_tuning(cache, DW(14, 384), DEVICE2, CUDNN, dense_configs, dense_ms, 1);
  if (rc == TEST_PASS) rc = store_tuning(cache, DW(14, 384), DEVICE, CUDNN, dense_configs, dense_ms, 1);
  if (rc != TEST_PASS) {
    conv_cache_close(cache);
    return rc;
  }

  char key[CONV_PROBLEM_KEY_MAX];
  conv_prediction pr;
  CHECK_OK(predict_for(cache, DW(14, 384), key, sizeof key, &pr));
  CHECK_MSG(pr.certain, "not certain: %s", pr.why);
  CHECK(pr.neighbours == 3 && pr.algorithm_id == DEPTHWISE);
  /* Nearest first: 28x28 (2x the image, half the channels) and 7x7 (the
   * other way) are equally near; 56x56 is twice as far on each. */
  CHECK(strstr(pr.neighbour[2].problem, "h56") != NULL);
  CHECK(fabs(pr.neighbour[0].winner_ms - 0.025) < 1e-9 || fabs(pr.neighbour[0].winner_ms - 0.012) < 1e-9);
  /* A bf16 shape: one tuned bf16 neighbour; the fp32 ones say nothing. */
  conv_prediction half;
  CHECK_OK(predict_for(cache, DW(28, 192) " dtype=bf16", key, sizeof key, &half));
  CHECK_MSG(!half.certain && half.neighbours == 1, "%d neighbours: %s", half.neighbours, half.why);

  const conv_config offered[] = {d, never, c, a, b};
  int order[8], count = -1;
  const conv_cache_key k = {key, DEVICE, VERSIONS};
  conv_cache *const layers[] = {cache};
  CHECK_OK(conv_predict_rank(layers, 1, &k, &pr, offered, 5, order, 8, &count, &err));
  CHECK(count == 5);
  CHECK(order[0] == 4 && order[1] == 3 && order[2] == 2); /* b, a, c */
  /* d: slower everywhere and failed once (2x); never: untimed (2x each). */
  CHECK(order[3] == 0 && order[4] == 1);
  CHECK_OK(conv_predict_rank(layers, 1, &k, &pr, offered, 5, order, 2, &count, &err));
  CHECK(count == 2 && order[0] == 4 && order[1] == 3);
  conv_cache_close(cache);
  return TEST_PASS;
}

/* No prediction where the neighbours' winners differ in family, or fewer
 * than three problems of the kind are tuned; rows whose key this version
 * would not write are passed over. */
static int no_prediction(void) {
  conv_error err = {CONV_OK, ""};
  conv_cache *cache = NULL;
  CHECK_OK(conv_cache_open(":memory:", false, &cache, &err));
  const conv_config configs[] = {config_of(4, 1)};
  const double ms[] = {0.03};
  int rc = store_tuning(cache, DW(28, 192), DEVICE, DEPTHWISE, configs, ms, 1);
  if (rc == TEST_PASS) rc = store_tuning(cache, DW(7, 768), DEVICE, DEPTHWISE, configs, ms, 1);
  if (rc != TEST_PASS) {
    conv_cache_close(cache);
    return rc;
  }
  /* A row under a key no version writes. */
  const conv_cache_key odd = {"fwd f32 nhwc strict bias n16 c1 not a key", DEVICE, VERSIONS};
  conv_trial t;
  memset(&t, 0, sizeof t);
  t.algorithm_id = DEPTHWISE;
  t.config = configs[0];
  t.time_ms = 0.01;
  t.deterministic = 1;
  CHECK_OK(conv_cache_begin_tuning(cache, &odd, &err));
  CHECK_OK(conv_cache_add_trial(cache, &odd, &t, &err));
  CHECK_OK(conv_cache_set_winner(cache, &odd, DEPTHWISE, &configs[0], &err));

  char key[CONV_PROBLEM_KEY_MAX];
  conv_prediction pr;
  CHECK_OK(predict_for(cache, DW(14, 384), key, sizeof key, &pr));
  CHECK(!pr.certain && pr.neighbours == 2 && strstr(pr.why, "2 tuned neighbours") != NULL);

  rc = store_tuning(cache, DW(56, 96), DEVICE, CUDNN, configs, ms, 1);
  if (rc != TEST_PASS) {
    conv_cache_close(cache);
    return rc;
  }
  CHECK_OK(predict_for(cache, DW(14, 384), key, sizeof key, &pr));
  CHECK(!pr.certain && pr.neighbours == 3 && strstr(pr.why, "differ in family") != NULL);
  /* Nothing to rank: an empty offer ranks nothing. */
  int order[1], count = -1;
  const conv_cache_key k = {key, DEVICE, VERSIONS};
  conv_cache *const layers[] = {cache};
  CHECK_OK(conv_predict_rank(layers, 1, &k, &pr, NULL, 0, order, 1, &count, &err));
  CHECK(count == 0);
  CHECK_STATUS(CONV_INVALID_ARGUMENT, conv_predict_neighbours(NULL, 1, &k, NULL, &pr, &err));
  CHECK_STATUS(CONV_INVALID_ARGUMENT, conv_predict_neighbours(layers, 0, &k, NULL, &pr, &err));
  conv_cache_close(cache);
  return TEST_PASS;
}

/* Neighbours come from the user's cache and a shipped one (a NULL layer is
 * none): a shape tuned in both counts once, as the user's, and each
 * neighbour's configs are ranked by its own layer's trials. */
static int neighbours_across_layers(void) {
  conv_error err = {CONV_OK, ""};
  conv_cache *user = NULL, *shipped = NULL;
  CHECK_OK(conv_cache_open(":memory:", false, &user, &err));
  CHECK_OK(conv_cache_open(":memory:", false, &shipped, &err));
  const conv_config a = config_of(4, 1), b = config_of(4, 2), c = config_of(2, 1);
  const conv_config dw_configs[] = {a, b, c};
  /* b is fastest in the user's tuning of 28x28 and on 7x7 and 56x56; the
   * shipped tuning of 28x28, which must not count, makes c fastest by far. */
  const double user28[] = {0.030, 0.025, 0.040}, shipped28[] = {0.030, 0.030, 0.001};
  const double on7[] = {0.014, 0.012, 0.020}, on56[] = {0.045, 0.040, 0.050};
  int rc = store_tuning(user, DW(28, 192), DEVICE, DEPTHWISE, dw_configs, user28, 3);
  if (rc == TEST_PASS) rc = store_tuning(shipped, DW(28, 192), DEVICE, DEPTHWISE, dw_configs, shipped28, 3);
  if (rc == TEST_PASS) rc = store_tuning(shipped, DW(7, 768), DEVICE, DEPTHWISE, dw_configs, on7, 3);
  if (rc == TEST_PASS) rc = store_tuning(shipped, DW(56, 96), DEVICE, DEPTHWISE, dw_configs, on56, 3);
  if (rc != TEST_PASS) {
    conv_cache_close(user);
    conv_cache_close(shipped);
    return rc;
  }
  const conv_problem p = problem_of(DW(14, 384));
  char key[CONV_PROBLEM_KEY_MAX];
  CHECK_OK(conv_problem_key(&p, key, sizeof key));
  const conv_cache_key k = {key, DEVICE, VERSIONS};
  conv_prediction pr;
  conv_cache *const alone[] = {user, NULL};
  CHECK_OK(conv_predict_neighbours(alone, 2, &k, &p, &pr, &err));
  CHECK(!pr.certain && pr.neighbours == 1);
  conv_cache *const layers[] = {user, shipped};
  CHECK_OK(conv_predict_neighbours(layers, 2, &k, &p, &pr, &err));
  CHECK_MSG(pr.certain && pr.neighbours == 3, "%d neighbours: %s", pr.neighbours, pr.why);
  int from_user = 0;
  for (int i = 0; i < pr.neighbours; i++) {
    const bool is28 = strstr(pr.neighbour[i].problem, "h28") != NULL;
    CHECK(pr.neighbour[i].layer == (is28 ? 0 : 1));
    if (is28) CHECK(fabs(pr.neighbour[i].winner_ms - 0.025) < 1e-9); /* the user's winner */
    from_user += is28;
  }
  CHECK(from_user == 1);
  const conv_config offered[] = {c, a, b};
  int order[3], count = -1;
  CHECK_OK(conv_predict_rank(layers, 2, &k, &pr, offered, 3, order, 3, &count, &err));
  CHECK(count == 3 && order[0] == 2 && order[1] == 1 && order[2] == 0); /* b, a, c */
  /* The layers a prediction came from must be passed to rank it. */
  CHECK_STATUS(CONV_INVALID_ARGUMENT,
               conv_predict_rank(alone, 1, &k, &pr, offered, 3, order, 3, &count, &err));
  conv_cache_close(user);
  conv_cache_close(shipped);
  return TEST_PASS;
}

static const test_case tests[] = {
    {"neighbours_agree", neighbours_agree},
    {"no_prediction", no_prediction},
    {"neighbours_across_layers", neighbours_across_layers},
};
TEST_MAIN(tests)
