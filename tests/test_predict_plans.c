/*
 * test_predict_plans.c -- GPU tests of the predict policy end to end
 * (tuner/tune_predict.c): plans predicted from tuned neighbours in the
 * user's or a system cache, split where the neighbours' families differ,
 * every family's marked best guesses timed, and an exhaustive context
 * finishing what a prediction left out.  Each skips (exit 77) on a
 * machine without a GPU; the seed of the random inputs is printed
 * (CONVTUNE_TEST_SEED replays it).
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "cache/cache.h"
#include "runtime/context.h"
#include "tests/gpu_support.h"
#include "tests/plan_support.h"
#include "tuner/tuner.h"

/* CONV_POLICY_PREDICT: with three tuned neighbours in the cache, a new
 * problem's plan is valid and predicted (of cuDNN's configs, at most its
 * ranked ones and its 3 best guesses timed; marked incomplete), whether
 * the neighbours agree or, split, not; the same when the neighbours are
 * in a shipped system cache over an empty user cache; an exhaustive
 * context then finishes it. */
static int predict_policy(void) {
  SKIP_WITHOUT_GPU();
  seed_rng();
  char cache[4096];
  temp_path(cache, sizeof cache, "predict");
  conv_context *ctx;
  if (make_context(&ctx, cache, tuning_policy(), 0) != TEST_PASS) return TEST_FAIL;
  const int sizes[][2] = {{21, 17}, {25, 21}, {27, 23}};
  for (int i = 0; i < 3; i++) {
    conv_problem p = fixed_problem();
    p.h = sizes[i][0], p.w = sizes[i][1];
    if (plan_roundtrip(ctx, &p, 0, CONV_SOURCE_TUNED) != TEST_PASS) return TEST_FAIL;
  }
  conv_context_destroy(ctx);
  conv_problem target = fixed_problem();
  target.h = 24, target.w = 20;
  /* First from the shipped layer, while the cache lacks the target. */
  char user[4096];
  temp_path(user, sizeof user, "predict-user");
  CHECK_MSG(layered_context(&ctx, user, cache, CONV_POLICY_PREDICT) == CONV_OK, "%s",
            conv_context_last_error(NULL));
  if (plan_roundtrip(ctx, &target, 0, CONV_SOURCE_TUNED) != TEST_PASS) return TEST_FAIL;
  trial_census shipped;
  bool shipped_pending = false;
  if (census_of(ctx, &target, &shipped, &shipped_pending) != TEST_PASS) return TEST_FAIL;
  conv_context_destroy(ctx);
  remove_db(user);
  if (make_context(&ctx, cache, CONV_POLICY_PREDICT, 0) != TEST_PASS) return TEST_FAIL;
  if (plan_roundtrip(ctx, &target, 0, CONV_SOURCE_TUNED) != TEST_PASS) return TEST_FAIL;
  trial_census c;
  bool pending = false;
  if (census_of(ctx, &target, &c, &pending) != TEST_PASS) return TEST_FAIL;
  printf("predict: %d trials, %s; from a system cache: %d trials, %s\n", c.total,
         pending ? "predicted (incomplete)" : "full search", shipped.total,
         shipped_pending ? "predicted (incomplete)" : "full search");
  CHECK(c.total > 0 && shipped.total > 0);
  CHECK(shipped_pending == pending); /* the same neighbours, the same certainty */
  CHECK(pending);
  CHECK_MSG(c.cudnn <= CONV_PREDICT_CONFIGS + 3 && shipped.cudnn <= CONV_PREDICT_CONFIGS + 3,
            "%d and %d cuDNN trials", c.cudnn, shipped.cudnn);
  conv_context_destroy(ctx);
  /* An exhaustive context times the rest. */
  if (make_context(&ctx, cache, CONV_POLICY_EXHAUSTIVE, 0) != TEST_PASS) return TEST_FAIL;
  if (plan_roundtrip(ctx, &target, 0, CONV_SOURCE_TUNED) != TEST_PASS) return TEST_FAIL;
  trial_census full;
  if (census_of(ctx, &target, &full, &pending) != TEST_PASS) return TEST_FAIL;
  printf("finished: %d trials\n", full.total);
  CHECK(!pending && full.total > c.total);
  conv_context_destroy(ctx);
  remove_db(cache);
  return TEST_PASS;
}

/* The fastest valid trial of `p` of family `family`, or (`other`) of
 * any family but it. */
typedef struct fastest_of {
  uint32_t family;
  bool other;
  conv_trial best;
  bool found;
} fastest_of;

static int fastest_trial(const conv_cache_row *row, void *user) {
  fastest_of *o = user;
  const conv_trial *t = row->trial;
  if ((t->algorithm_id == o->family) != o->other && t->status == CONV_OK && t->time_ms > 0 &&
      (!o->found || t->time_ms < o->best.time_ms)) {
    o->best = *t;
    o->found = true;
  }
  return 0;
}

/* Makes `p`'s winner in the context's cache its fastest valid trial of
 * `family`, or (`other`) of a family other than `family`, as if that had
 * won. */
static int crown(conv_context *ctx, const conv_problem *p, uint32_t family, bool other) {
  char key[CONV_PROBLEM_KEY_MAX];
  CHECK_STATUS(CONV_OK, conv_problem_key(p, key, sizeof key));
  trial_census c;
  bool pending;
  if (census_of(ctx, p, &c, &pending) != TEST_PASS) return TEST_FAIL;
  conv_error err = {CONV_OK, ""};
  fastest_of o = {family, other, {0}, false};
  conv_cache *cache = conv_context_cache(ctx);
  CHECK_STATUS(CONV_OK, conv_cache_list_trials(cache, key, fastest_trial, &o, &err));
  CHECK_MSG(o.found, "no valid trial of %s family %u", other ? "a family other than" : "",
            (unsigned)family);
  const conv_cache_key k = {key, c.device, c.versions};
  CHECK_MSG(conv_cache_set_winner(cache, &k, o.best.algorithm_id, &o.best.config, &err) ==
                CONV_OK, "%s", err.message);
  return TEST_PASS;
}

/* The configs of one problem's trials, family by family. */
typedef struct config_list {
  int count;
  uint32_t family[1024];
  conv_config config[1024];
} config_list;

static int list_config(const conv_cache_row *row, void *user) {
  config_list *l = user;
  if (l->count < 1024) {
    l->family[l->count] = row->trial->algorithm_id;
    l->config[l->count++] = row->trial->config;
  }
  return 0;
}

static bool listed(const config_list *l, uint32_t family, const conv_config *config) {
  for (int i = 0; i < l->count; i++)
    if (l->family[i] == family && conv_config_equal(&l->config[i], config)) return true;
  return false;
}

static int configs_of(conv_context *ctx, const conv_problem *p, config_list *l) {
  char key[CONV_PROBLEM_KEY_MAX];
  CHECK_STATUS(CONV_OK, conv_problem_key(p, key, sizeof key));
  conv_error err = {CONV_OK, ""};
  l->count = 0;
  CHECK_STATUS(CONV_OK, conv_cache_list_trials(conv_context_cache(ctx), key, list_config, l, &err));
  CHECK(l->count > 0 && l->count < 1024);
  return TEST_PASS;
}

/* Every applicable family's first 3 configs, as it lists them for `p`,
 * are among `timed`. */
static int first_configs_timed(const conv_problem *p, const config_list *timed) {
  conv_env env;
  if (open_env(&env) != TEST_PASS) return TEST_FAIL;
  int families, missing = 0;
  const conv_algorithm *const *algos = conv_registry(&families);
  for (int f = 0; f < families; f++) {
    if (!conv_algorithm_applicable(algos[f], p, &env)) continue;
    conv_config first[3];
    int n = 0;
    conv_error err = {CONV_OK, ""};
    if (algos[f]->configs(p, &env, first, 3, &n, &err) != CONV_OK) n = 0;
    for (int i = 0; i < n; i++)
      if (!listed(timed, algos[f]->id, &first[i])) {
        fprintf(stderr, "  %s: its config %d was not timed\n", algos[f]->name, i);
        missing++;
      }
  }
  close_env(&env);
  CHECK(missing == 0);
  return TEST_PASS;
}

/* Plans `target` in a predict context over `cache`, checks it against the
 * reference, and gives its trials' configs, their census and whether the
 * tuning is pending. */
static int predict_target(const char *cache, const conv_problem *target, config_list *configs,
                          trial_census *c, bool *pending) {
  conv_context *ctx;
  if (make_context(&ctx, cache, CONV_POLICY_PREDICT, 0) != TEST_PASS) return TEST_FAIL;
  if (plan_roundtrip(ctx, target, 0, CONV_SOURCE_TUNED) != TEST_PASS) return TEST_FAIL;
  if (configs_of(ctx, target, configs) != TEST_PASS) return TEST_FAIL;
  if (census_of(ctx, target, c, pending) != TEST_PASS) return TEST_FAIL;
  conv_context_destroy(ctx);
  return TEST_PASS;
}

/* Neighbours whose winners differ in family split the prediction: the
 * plan is valid, the tuning incomplete, every applicable family's best
 * guesses (its first 3 configs) were timed, and of cuDNN's only its
 * ranked configs and best guesses; an exhaustive context then times the
 * rest. */
static int predict_split(void) {
  SKIP_WITHOUT_GPU();
  seed_rng();
  char cache[4096];
  temp_path(cache, sizeof cache, "split");
  conv_context *ctx;
  if (make_context(&ctx, cache, CONV_POLICY_EXHAUSTIVE, 0) != TEST_PASS) return TEST_FAIL;
  const int sizes[][2] = {{21, 17}, {25, 21}, {27, 23}};
  conv_problem nb[3];
  for (int i = 0; i < 3; i++) {
    nb[i] = fixed_problem();
    nb[i].h = sizes[i][0], nb[i].w = sizes[i][1];
    if (plan_roundtrip(ctx, &nb[i], 0, CONV_SOURCE_TUNED) != TEST_PASS) return TEST_FAIL;
  }
  /* The middle one's winner of another family than the first's. */
  conv_plan *plan = NULL;
  conv_plan_info first;
  CHECK_STATUS(CONV_OK, conv_plan_create(ctx, &nb[0], &plan));
  CHECK_STATUS(CONV_OK, conv_plan_info_get(plan, &first));
  conv_plan_destroy(plan);
  char name[64];
  snprintf(name, sizeof name, "%s", first.algorithm);
  const conv_algorithm *winner_family = conv_registry_find_name(name);
  CHECK_MSG(winner_family != NULL, "family %s", name);
  if (crown(ctx, &nb[1], winner_family->id, true) != TEST_PASS) return TEST_FAIL;
  conv_context_destroy(ctx);

  conv_problem target = fixed_problem();
  target.h = 24, target.w = 20;
  static config_list split;
  trial_census c;
  bool pending = false;
  if (predict_target(cache, &target, &split, &c, &pending) != TEST_PASS) return TEST_FAIL;
  CHECK_MSG(pending, "a split prediction is incomplete");
  CHECK_MSG(c.cudnn <= CONV_PREDICT_CONFIGS + 3, "%d cuDNN trials", c.cudnn);

  if (first_configs_timed(&target, &split) != TEST_PASS) return TEST_FAIL;

  if (make_context(&ctx, cache, CONV_POLICY_EXHAUSTIVE, 0) != TEST_PASS) return TEST_FAIL;
  if (plan_roundtrip(ctx, &target, 0, CONV_SOURCE_TUNED) != TEST_PASS) return TEST_FAIL;
  trial_census finished;
  if (census_of(ctx, &target, &finished, &pending) != TEST_PASS) return TEST_FAIL;
  conv_context_destroy(ctx);
  printf("split: %d trials (%d cuDNN); exhaustive: %d (%d cuDNN)\n", c.total, c.cudnn,
         finished.total, finished.cudnn);
  CHECK(!pending && finished.total > c.total && finished.cudnn > c.cudnn);
  remove_db(cache);
  return TEST_PASS;
}

/* n8 c`c` 14x14 k64, a 1x1 TF32 layer. */
static conv_problem one_by_one(int c) {
  conv_problem p;
  conv_problem_init(&p);
  p.n = 8, p.c = c, p.h = p.w = 14, p.k = 64, p.r = p.s = 1;
  p.math = CONV_MATH_TF32;
  return p;
}

/* Three 1x1 neighbours tuned in a fresh cache, each crowned with its
 * fastest trial of `family`; then `target` predicted from them (narrow:
 * incomplete), its trials' configs in *got. */
static int predict_from_crowned(uint32_t family, const conv_problem *target, config_list *got,
                                trial_census *c) {
  char cache[4096];
  temp_path(cache, sizeof cache, "guesses");
  conv_context *ctx;
  if (make_context(&ctx, cache, CONV_POLICY_EXHAUSTIVE, 0) != TEST_PASS) return TEST_FAIL;
  const int channels[] = {96, 128, 160};
  for (int i = 0; i < 3; i++) {
    const conv_problem nb = one_by_one(channels[i]);
    if (plan_roundtrip(ctx, &nb, 0, CONV_SOURCE_TUNED) != TEST_PASS) return TEST_FAIL;
    if (crown(ctx, &nb, family, false) != TEST_PASS) return TEST_FAIL;
  }
  conv_context_destroy(ctx);
  bool pending = false;
  if (predict_target(cache, target, got, c, &pending) != TEST_PASS) return TEST_FAIL;
  remove_db(cache);
  CHECK_MSG(pending, "predicted from the neighbours, so incomplete");
  return TEST_PASS;
}

/* How many of the configs `family` lists for `p` (its first `head`, and
 * those it marks CONV_CONFIG_BEST_GUESS) are not among `got`; *guesses
 * counts them all. */
static int guesses_missing(const conv_algorithm *family, const conv_problem *p, int head,
                           const config_list *got, int *guesses) {
  conv_env env;
  if (open_env(&env) != TEST_PASS) return -1;
  static conv_config configs[512];
  int n = 0, missing = 0;
  conv_error err = {CONV_OK, ""};
  const conv_status st = family->configs(p, &env, configs, 512, &n, &err);
  close_env(&env);
  if (st != CONV_OK) {
    fprintf(stderr, "  %s configs: %s\n", family->name, err.message);
    return -1;
  }
  *guesses = 0;
  for (int i = 0; i < n; i++) {
    if (i >= head && !(configs[i].flags & CONV_CONFIG_BEST_GUESS)) continue;
    (*guesses)++;
    missing += !listed(got, family->id, &configs[i]);
  }
  return missing;
}

/* Every prediction times each family's guesses, whatever family won the
 * neighbours: cuDNN's first 3 configs, and the best guesses a family
 * marks (CONV_CONFIG_BEST_GUESS).  Three 1x1 neighbours won by cuDNN: the
 * target's trials hold each config im2col_gemm marks for it (its whole
 * batch's first 8 algos).  The same neighbours won by im2col_gemm: they
 * hold cuDNN's first 3. */
static int predict_times_marked_guesses(void) {
  SKIP_WITHOUT_GPU();
  seed_rng();
  const conv_problem target = one_by_one(112);
  static config_list got;
  trial_census c;
  int marked = 0, head = 0;
  if (predict_from_crowned(CONV_ALGO_CUDNN, &target, &got, &c) != TEST_PASS) return TEST_FAIL;
  const int missing = guesses_missing(&conv_algorithm_im2col_gemm, &target, 0, &got, &marked);
  printf("from cuDNN's: %d trials (%d cuDNN); im2col_gemm marks %d configs, %d not timed\n",
         c.total, c.cudnn, marked, missing);
  CHECK(marked >= 3 && missing == 0);
  if (predict_from_crowned(CONV_ALGO_IM2COL_GEMM, &target, &got, &c) != TEST_PASS)
    return TEST_FAIL;
  const int head_missing = guesses_missing(&conv_algorithm_cudnn, &target, 3, &got, &head);
  printf("from im2col_gemm's: %d trials (%d cuDNN); cuDNN's %d guesses, %d not timed\n", c.total,
         c.cudnn, head, head_missing);
  CHECK(head >= 3 && head_missing == 0);
  return TEST_PASS;
}

static const test_case tests[] = {
    {"predict_policy", predict_policy},
    {"predict_split", predict_split},
    {"predict_times_marked_guesses", predict_times_marked_guesses},
};
TEST_MAIN(tests)
