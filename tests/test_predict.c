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

#include "algorithms/algorithm.h"
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
  char why[256];
  const conv_problem target = problem_of(DW(14, 384));
  CHECK_MSG(conv_predict_scope_of(&target, &pr, why, sizeof why) == CONV_PREDICT_NARROW, "%s", why);
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
  /* How many ranked configs a prediction times: cuDNN's 8, any other
   * family's 24 (tuner.h: their configs are few and quick to prepare). */
  CHECK(conv_predict_configs_for(CONV_ALGO_CUDNN) == 8);
  CHECK(conv_predict_configs_for(CONV_ALGO_DIRECT_CHANNEL) == 24 &&
        conv_predict_configs_for(CONV_ALGO_DEPTHWISE_NHWC) == 24 &&
        conv_predict_configs_for(CONV_ALGO_FFT) == 24);
  CHECK(CONV_PREDICT_CONFIGS_MAX >= CONV_PREDICT_CONFIGS &&
        CONV_PREDICT_CONFIGS_MAX >= CONV_PREDICT_OWN_CONFIGS);
  conv_cache_close(cache);
  return TEST_PASS;
}

/* Not certain where the neighbours' winners differ in family (the tuner
 * then splits the prediction), or fewer than three problems of the kind
 * are tuned; rows whose key this version would not write are passed
 * over. */
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

/* Known slow: a config that ran 1 ms or more and over 10x the winner on
 * one of the 8 nearest tuned problems of the kind that are depthwise as
 * the target is, whatever their families; not one merely slow (under 1 ms,
 * or under 10x), not one slow on a dense problem, on another device, or on
 * a problem past the 8 nearest, nor a failed one. */
static int known_slow(void) {
  conv_error err = {CONV_OK, ""};
  conv_cache *cache = NULL;
  CHECK_OK(conv_cache_open(":memory:", false, &cache, &err));
  const conv_config best = config_of(1, 0), seconds = config_of(3, 11), short_slow = config_of(2, 0),
                    near = config_of(4, 0), failed = config_of(5, 0), far_slow = config_of(6, 0),
                    dense_slow = config_of(7, 0);
  const conv_config on_112[] = {best, seconds, short_slow, failed};
  const double ms112[] = {0.015, 1664.8, CONV_KNOWN_SLOW_MIN_MS * 0.9, 0};
  int rc = store_tuning(cache, DW(112, 32), DEVICE, CUDNN, on_112, ms112, 4);
  const conv_config on_56[] = {best, near}; /* 5x its winner: not known slow */
  const double ms56[] = {5.0, 25.0};
  if (rc == TEST_PASS) rc = store_tuning(cache, DW(56, 144), DEVICE, DEPTHWISE, on_56, ms56, 2);
  /* Six more depthwise problems nearer than those two, and a ninth,
   * farther than all, whose slow config is past the 8 nearest. */
  const char *const nearer[] = {DW(14, 192), DW(14, 768), DW(28, 384),
                                DW(7, 384),  DW(14, 96),  DW(28, 192)};
  const conv_config only_best[] = {best};
  const double fast[] = {0.01};
  for (int i = 0; rc == TEST_PASS && i < 6; i++)
    rc = store_tuning(cache, nearer[i], DEVICE, DEPTHWISE, only_best, fast, 1);
  const conv_config on_far[] = {best, far_slow}, on_dense[] = {best, dense_slow};
  const double slow_ms[] = {0.01, 100.0};
  if (rc == TEST_PASS) rc = store_tuning(cache, DW(224, 8), DEVICE, CUDNN, on_far, slow_ms, 2);
  /* Slow on a dense problem, and on another device. */
  if (rc == TEST_PASS) rc = store_tuning(cache, DENSE(14, 384), DEVICE, CUDNN, on_dense, slow_ms, 2);
  if (rc == TEST_PASS) rc = store_tuning(cache, DW(28, 192), DEVICE2, CUDNN, on_far, slow_ms, 2);
  if (rc != TEST_PASS) {
    conv_cache_close(cache);
    return rc;
  }
  const conv_problem target = problem_of(DW(14, 384));
  char key[CONV_PROBLEM_KEY_MAX];
  CHECK_OK(conv_problem_key(&target, key, sizeof key));
  const conv_cache_key k = {key, DEVICE, VERSIONS};
  conv_cache *const layers[] = {cache, NULL};
  static conv_known_slow slow;
  CHECK_OK(conv_predict_known_slow(layers, 2, &k, &target, &slow, &err));
  CHECK_MSG(slow.count == 1, "%d known slow", slow.count);
  CHECK(conv_known_slow_has(&slow, CUDNN, &seconds));
  CHECK(!conv_known_slow_has(&slow, DEPTHWISE, &seconds)); /* another family's config */
  CHECK(!conv_known_slow_has(&slow, CUDNN, &short_slow) && !conv_known_slow_has(&slow, DEPTHWISE, &near));
  CHECK(!conv_known_slow_has(&slow, CUDNN, &best) && !conv_known_slow_has(&slow, CUDNN, &failed));
  CHECK(!conv_known_slow_has(&slow, CUDNN, &far_slow) && !conv_known_slow_has(&slow, CUDNN, &dense_slow));
  CHECK(!conv_known_slow_has(NULL, CUDNN, &seconds));
  /* A dense target learns from the dense problem alone. */
  const conv_problem dense = problem_of(DENSE(28, 384));
  CHECK_OK(conv_problem_key(&dense, key, sizeof key));
  CHECK_OK(conv_predict_known_slow(layers, 1, &k, &dense, &slow, &err));
  CHECK(slow.count == 1 && conv_known_slow_has(&slow, CUDNN, &dense_slow));
  CHECK_STATUS(CONV_INVALID_ARGUMENT, conv_predict_known_slow(NULL, 1, &k, &target, &slow, &err));
  CHECK_STATUS(CONV_INVALID_ARGUMENT, conv_predict_known_slow(layers, 1, &k, NULL, &slow, &err));
  conv_cache_close(cache);
  /* Nothing tuned, nothing known. */
  CHECK_OK(conv_cache_open(":memory:", false, &cache, &err));
  conv_cache *const empty[] = {cache};
  CHECK_OK(conv_predict_known_slow(empty, 1, &k, &target, &slow, &err));
  CHECK(slow.count == 0);
  conv_cache_close(cache);
  /* Tight enough to catch the seconds-long runs, loose enough to leave a
   * config within a few times its layer's best alone. */
  CHECK(CONV_KNOWN_SLOW_FACTOR >= 5 && CONV_KNOWN_SLOW_MIN_MS >= 1 &&
        CONV_KNOWN_SLOW_NEIGHBOURS >= CONV_PREDICT_NEIGHBOURS);
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

/* ---------------------------------------------------------------- widening */

/* A prediction made by hand: three neighbours, their winners' families and
 * configs (nearest first is not needed: the scope reads them all). */
static int prediction_of(const char *const specs[3], const uint32_t ids[3],
                         const conv_config configs[3], conv_prediction *out) {
  conv_error err = {CONV_OK, ""};
  memset(out, 0, sizeof *out);
  for (int i = 0; i < 3; i++) {
    const conv_problem p = problem_of(specs[i]);
    CHECK_OK(conv_problem_key(&p, out->neighbour[i].problem, sizeof out->neighbour[i].problem));
    out->neighbour[i].algorithm_id = ids[i];
    out->neighbour[i].config = configs[i];
    out->neighbour[i].winner_ms = 0.1;
  }
  out->neighbours = 3;
  out->algorithm_id = ids[0];
  out->certain = ids[0] == ids[1] && ids[1] == ids[2];
  return TEST_PASS;
}

static conv_predict_scope scope_for(const char *spec, const conv_prediction *pr, char *why,
                                    size_t size) {
  const conv_problem p = problem_of(spec);
  return conv_predict_scope_of(&p, pr, why, size);
}

#define CONV3(c, h, k) "n=16 c=" #c " h=" #h " w=" #h " k=" #k " r=3 s=3 pad=1"
#define TAPS(r, pad) "n=8 c=64 h=128 w=128 k=64 r=" #r " s=" #r " pad=" #pad

/* The rules, one case each: near agreeing neighbours keep the narrow
 * prediction; far ones, a filter outside the neighbours' range, and FFT
 * winners of different shapes widen it; families that differ split it
 * (even when far: a split ranks each family and is widened too); fewer
 * than three search everything (stronger than widening). */
static int widening_rules(void) {
  conv_prediction pr;
  char why[256];
  const uint32_t same[] = {CUDNN, CUDNN, CUDNN}, mixed[] = {CUDNN, CUDNN, DEPTHWISE};
  const conv_config any[] = {config_of(70, 0), config_of(6, 0), config_of(70, 1)};
  /* One network stage either way, and the same stage at 2x the image. */
  const char *const near[] = {CONV3(64, 56, 64), CONV3(256, 14, 256), CONV3(128, 56, 128)};
  int rc = prediction_of(near, same, any, &pr);
  if (rc != TEST_PASS) return rc;
  CHECK_MSG(scope_for(CONV3(128, 28, 128), &pr, why, sizeof why) == CONV_PREDICT_NARROW, "%s", why);
  CHECK(why[0] == '\0');
  /* Far: 8x the image on both axes is 18 away. */
  const char *const far[] = {CONV3(128, 224, 128), CONV3(64, 224, 64), CONV3(128, 448, 128)};
  if ((rc = prediction_of(far, same, any, &pr)) != TEST_PASS) return rc;
  CHECK(scope_for(CONV3(128, 28, 128), &pr, why, sizeof why) == CONV_PREDICT_WIDE);
  CHECK_MSG(strncmp(why, "far:", 4) == 0, "%s", why);
  /* Families that differ: split, near or far. */
  if ((rc = prediction_of(near, mixed, any, &pr)) != TEST_PASS) return rc;
  CHECK(scope_for(CONV3(128, 28, 128), &pr, why, sizeof why) == CONV_PREDICT_SPLIT);
  CHECK_MSG(strstr(why, "differ in family") != NULL, "%s", why);
  if ((rc = prediction_of(far, mixed, any, &pr)) != TEST_PASS) return rc;
  CHECK(scope_for(CONV3(128, 28, 128), &pr, why, sizeof why) == CONV_PREDICT_SPLIT);
  pr.neighbours = 2;
  CHECK(scope_for(CONV3(128, 28, 128), &pr, why, sizeof why) == CONV_PREDICT_ALL);
  CHECK(conv_predict_scope_of(NULL, &pr, why, sizeof why) == CONV_PREDICT_ALL);
  CHECK(scope_for(CONV3(128, 28, 128), NULL, NULL, 0) == CONV_PREDICT_ALL);
  /* A 31x31 filter among 3x3..11x11 neighbours: widened (the 3x3 is far). */
  const char *const small[] = {TAPS(3, 1), TAPS(7, 3), TAPS(11, 5)};
  if ((rc = prediction_of(small, same, any, &pr)) != TEST_PASS) return rc;
  CHECK(scope_for(TAPS(31, 15), &pr, why, sizeof why) == CONV_PREDICT_WIDE);
  /* Among 7x7..11x11 ones, near enough: by the range rule (961 taps
   * against at most 121). */
  const char *const mid[] = {TAPS(7, 3), TAPS(9, 4), TAPS(11, 5)};
  if ((rc = prediction_of(mid, same, any, &pr)) != TEST_PASS) return rc;
  CHECK(scope_for(TAPS(31, 15), &pr, why, sizeof why) == CONV_PREDICT_WIDE);
  CHECK_MSG(strstr(why, "out of range: filter taps") != NULL, "%s", why);
  CHECK(scope_for(TAPS(9, 4), &pr, why, sizeof why) == CONV_PREDICT_NARROW);
  /* Depthwise among dense neighbours of as many channels a group. */
  const char *const dense1[] = {"n=16 c=1 h=56 w=56 k=1 r=3 s=3 pad=1",
                                "n=16 c=2 h=56 w=56 k=2 r=3 s=3 pad=1",
                                "n=16 c=1 h=28 w=28 k=1 r=3 s=3 pad=1"};
  if ((rc = prediction_of(dense1, same, any, &pr)) != TEST_PASS) return rc;
  CHECK(scope_for("n=16 c=2 h=56 w=56 k=2 r=3 s=3 pad=1 groups=2", &pr, why, sizeof why) ==
        CONV_PREDICT_WIDE);
  CHECK_MSG(strstr(why, "depthwise") != NULL, "%s", why);
  return TEST_PASS;
}

/* FFT winners: whole-image transforms on all three keep the prediction
 * narrow, as do tiles of one size; a whole image against tiles widens. */
static int widening_fft_classes(void) {
  conv_prediction pr;
  char why[256];
  const uint32_t fft[] = {CONV_ALGO_FFT, CONV_ALGO_FFT, CONV_ALGO_FFT};
  /* 96x96 and 128x128 outputs, 11x11 and 9x9 filters: whole images are
   * 106, 138 and 136 (any transform at least that). */
  const char *const specs[] = {"n=8 c=64 h=96 w=96 k=64 r=11 s=11 pad=5", TAPS(11, 5),
                               TAPS(9, 4)};
  const conv_config whole[] = {{3, {108, 108, 0}, 0}, {3, {140, 140, 1}, 0}, {3, {140, 144, 0}, 0}};
  int rc = prediction_of(specs, fft, whole, &pr);
  if (rc != TEST_PASS) return rc;
  CHECK_MSG(scope_for(TAPS(11, 5), &pr, why, sizeof why) == CONV_PREDICT_NARROW, "%s", why);
  const conv_config tiles[] = {{3, {32, 32, 0}, 0}, {3, {32, 32, 1}, 0}, {3, {32, 32, 0}, 0}};
  if ((rc = prediction_of(specs, fft, tiles, &pr)) != TEST_PASS) return rc;
  CHECK_MSG(scope_for(TAPS(11, 5), &pr, why, sizeof why) == CONV_PREDICT_NARROW, "%s", why);
  const conv_config mixed[] = {{3, {108, 108, 0}, 0}, {3, {32, 32, 1}, 0}, {3, {32, 32, 0}, 0}};
  if ((rc = prediction_of(specs, fft, mixed, &pr)) != TEST_PASS) return rc;
  CHECK(scope_for(TAPS(11, 5), &pr, why, sizeof why) == CONV_PREDICT_WIDE);
  CHECK_MSG(strstr(why, "classes:") != NULL && strstr(why, "whole image") != NULL, "%s", why);
  const conv_config sizes[] = {{3, {64, 64, 0}, 0}, {3, {32, 32, 1}, 0}, {3, {32, 32, 0}, 0}};
  if ((rc = prediction_of(specs, fft, sizes, &pr)) != TEST_PASS) return rc;
  CHECK(scope_for(TAPS(11, 5), &pr, why, sizeof why) == CONV_PREDICT_WIDE);
  /* Another family's configs have no classes. */
  const uint32_t cudnn[] = {CUDNN, CUDNN, CUDNN};
  if ((rc = prediction_of(specs, cudnn, mixed, &pr)) != TEST_PASS) return rc;
  CHECK(scope_for(TAPS(11, 5), &pr, why, sizeof why) == CONV_PREDICT_NARROW);
  return TEST_PASS;
}

/* The suite's other forward rows, as an H200 tuned them (caches/h200.db:
 * each row's winning family), are fft_few_ch_31's candidates for
 * neighbours.  Its nearest three are direct_channel winners (3x3 layers
 * of one image of 1-16 channels), so the prediction is certain; widened,
 * FFT's own best guesses are timed too (its whole-image transform won,
 * 0.28 ms; the neighbours' family gave 2.1 ms before). */
static int widening_fft_few_ch_31(void) {
  static const struct {
    const char *spec;
    uint32_t family;
  } suite[] = {
      {"n=1 c=512 h=128 w=256 k=1024 r=3 s=3", CONV_ALGO_FFT},
      {"n=5 c=512 h=128 w=256 k=1024 r=3 s=3", CONV_ALGO_FFT},
      {"n=20480 c=32 h=4 w=4 k=64 r=3 s=3 pad=1", CONV_ALGO_PATCH},
      {"n=20480 c=32 h=8 w=8 k=64 r=3 s=3 pad=1", CONV_ALGO_PATCH},
      {"n=1 c=3 h=1024 w=1024 k=16 r=3 s=3 pad=1", CONV_ALGO_DIRECT_CHANNEL},
      {"n=1 c=1 h=1024 w=1024 k=1 r=3 s=3 pad=1", CONV_ALGO_DIRECT_CHANNEL},
      {"n=1 c=1 h=1024 w=1024 k=1 r=3 s=3 pad=8 dil=8", CONV_ALGO_DIRECT_CHANNEL},
      {"n=1 c=16 h=1024 w=1024 k=1 r=3 s=3 pad=4 dil=4", CONV_ALGO_DIRECT_CHANNEL},
      {"n=1 c=1 h=64 w=64 k=1 r=3 s=3 pad=1", CONV_ALGO_DIRECT_CHANNEL},
      {"n=32 c=64 h=56 w=56 k=64 r=3 s=3 pad=1", CONV_ALGO_CUDNN},
      {"n=32 c=512 h=7 w=7 k=512 r=3 s=3 pad=1", CONV_ALGO_CUDNN},
      {"n=32 c=64 h=56 w=56 k=256 r=1 s=1", CONV_ALGO_IM2COL_GEMM},
      {"n=32 c=3 h=224 w=224 k=64 r=7 s=7 pad=3 stride=2", CONV_ALGO_DIRECT_CHANNEL},
      {"n=32 c=144 h=56 w=56 k=144 r=3 s=3 pad=1 groups=144", CONV_ALGO_DIRECT_CHANNEL},
      {"n=32 c=96 h=112 w=112 k=96 r=3 s=3 pad=1 stride=2 groups=96", CONV_ALGO_DIRECT_CHANNEL},
      {"n=32 c=128 h=56 w=56 k=128 r=31 s=31 pad=15 groups=128", CONV_ALGO_FFT},
      {"n=8 c=64 h=128 w=128 k=64 r=11 s=11 pad=5", CONV_ALGO_FFT},
      {"n=8 c=64 h=256 w=256 k=64 r=3 s=3 pad=1", CONV_ALGO_CUDNN},
      {"n=1 c=64 h=56 w=56 k=64 r=3 s=3 pad=1", CONV_ALGO_CUDNN},
      {"n=32 c=256 h=28 w=28 k=256 r=3 s=3 pad=1 groups=32", CONV_ALGO_DIRECT_CHANNEL},
      {"n=1 c=256 h=8 w=8 k=256 r=3 s=3 pad=1", CONV_ALGO_CHANNEL_SPLIT},
  };
  conv_error err = {CONV_OK, ""};
  conv_cache *cache = NULL;
  CHECK_OK(conv_cache_open(":memory:", false, &cache, &err));
  int rc = TEST_PASS;
  const double ms[] = {0.1};
  for (size_t i = 0; i < sizeof suite / sizeof suite[0] && rc == TEST_PASS; i++) {
    const conv_config winner[] = {config_of((int64_t)i, 0)};
    rc = store_tuning(cache, suite[i].spec, DEVICE, suite[i].family, winner, ms, 1);
  }
  if (rc != TEST_PASS) {
    conv_cache_close(cache);
    return rc;
  }
  const char *target = "n=8 c=4 h=512 w=512 k=4 r=31 s=31 pad=15";
  char key[CONV_PROBLEM_KEY_MAX], why[256];
  conv_prediction pr;
  CHECK_OK(predict_for(cache, target, key, sizeof key, &pr));
  conv_cache_close(cache);
  CHECK_MSG(pr.certain && pr.algorithm_id == CONV_ALGO_DIRECT_CHANNEL, "%s", pr.why);
  CHECK(scope_for(target, &pr, why, sizeof why) == CONV_PREDICT_WIDE);
  CHECK_MSG(strncmp(why, "far:", 4) == 0, "%s", why);
  return TEST_PASS;
}

static const test_case tests[] = {
    {"neighbours_agree", neighbours_agree},
    {"no_prediction", no_prediction},
    {"known_slow", known_slow},
    {"neighbours_across_layers", neighbours_across_layers},
    {"widening_rules", widening_rules},
    {"widening_fft_classes", widening_fft_classes},
    {"widening_fft_few_ch_31", widening_fft_few_ch_31},
};
TEST_MAIN(tests)
