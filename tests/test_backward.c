/*
 * test_backward.c -- GPU tests of the backward passes: the tuner's device
 * reference kernels and tuned backward-data and backward-filter plans, each
 * against the CPU reference (tests/cpu_reference.c, whose adjoint checks
 * are in test_reference.c), on fresh random inputs with poisoned outputs;
 * every config of every family that runs a backward pass, on random
 * passes; deterministic plans; and the execute functions' refusals.  Each
 * family's own backward cases, on the layers it is for: tests/families/.
 * Each skips (exit 77) without a GPU; the seed is printed
 * (CONVTUNE_TEST_SEED replays it).
 */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "algorithms/common/kernels.h"
#include "cache/cache.h"
#include "runtime/context.h"
#include "tests/gpu_support.h"

/* A random problem of the generator's kinds (odd sizes, strides, padding,
 * dilation, groups; NCHW, or NHWC), as a backward pass. */
static conv_problem random_pass(conv_direction direction, int i) {
  const conv_math math = i % 2 ? CONV_MATH_TF32 : CONV_MATH_STRICT;
  conv_problem p = i % 3 == 2 ? random_nhwc_problem(math) : random_problem(math);
  p.epilogue = CONV_EPILOGUE_NONE;
  p.direction = direction;
  return p;
}

static int case_count(void) { return quick_mode() ? 6 : 24; }

/* The device reference kernels the tuner validates backward candidates
 * with agree with the CPU reference: to rounding (both accumulate in
 * double), for every layout and group count the generator makes. */
static int reference_backward_matches_cpu(void) {
  SKIP_WITHOUT_GPU();
  seed_rng();
  for (int i = 0; i < 2 * case_count(); i++) {
    const conv_direction direction = i % 2 ? CONV_BACKWARD_FILTER : CONV_BACKWARD_DATA;
    const conv_problem p = random_pass(direction, i / 2);
    pass_case pc;
    if (pass_case_make(&pc, &p) != TEST_PASS || pass_poison(&pc) != TEST_PASS) return TEST_FAIL;
    if (reference_pass(&pc.d, &pc.hc, pc.d.out) != TEST_PASS) return TEST_FAIL;
    CUDA_OK(cudaDeviceSynchronize());
    if (pass_check(&pc, 1e-6, "reference kernel") != TEST_PASS) return TEST_FAIL;
    pass_case_free(&pc);
  }
  return TEST_PASS;
}

/* Runs the plan's pass on pc (output poisoned first). */
static conv_status run_pass(conv_plan *plan, const pass_case *pc) {
  return execute_case(plan, &pc->d, pc->hc.p.direction);
}

/* Tuned backward plans, executed as a user would, match the CPU reference,
 * run twice (the second execute replays or captures a graph), and come
 * back from the context's memory with the same result. */
static int backward_plans_match_cpu(void) {
  SKIP_WITHOUT_GPU();
  seed_rng();
  char cache[4096];
  temp_path(cache, sizeof cache, "backward");
  conv_context *ctx;
  if (make_context(&ctx, cache, tuning_policy(), 0) != TEST_PASS) return TEST_FAIL;
  for (int i = 0; i < 2 * case_count(); i++) {
    const conv_direction direction = i % 2 ? CONV_BACKWARD_FILTER : CONV_BACKWARD_DATA;
    const conv_problem p = random_pass(direction, i / 2);
    pass_case pc;
    if (pass_case_make(&pc, &p) != TEST_PASS) return TEST_FAIL;
    conv_plan *plan = NULL;
    CHECK_MSG(conv_plan_create(ctx, &p, &plan) == CONV_OK, "conv_plan_create: %s",
              conv_context_last_error(ctx));
    conv_plan_info info;
    CHECK_STATUS(CONV_OK, conv_plan_info_get(plan, &info));
    CHECK(info.direction == p.direction);
    char key[CONV_PROBLEM_KEY_MAX];
    describe_problem(&p, key, sizeof key);
    printf("%s: %s %s %.4f ms\n", key, info.algorithm, info.config, info.time_ms);
    const double bound = conv_error_bound_for(&p, CONV_ARITH_TRANSFORM);
    for (int run = 0; run < 3; run++) {
      if (pass_poison(&pc) != TEST_PASS) return TEST_FAIL;
      CHECK_MSG(run_pass(plan, &pc) == CONV_OK, "execute: %s", conv_context_last_error(ctx));
      CUDA_OK(cudaDeviceSynchronize());
      if (pass_check(&pc, bound, run == 0 ? "first run" : "later run") != TEST_PASS)
        return TEST_FAIL;
    }
    conv_plan_destroy(plan);
    pass_case_free(&pc);
  }
  conv_context_destroy(ctx);
  remove_db(cache);
  return TEST_PASS;
}

/* Each execute function takes plans of its own pass only, and NULL or
 * misaligned tensors are refused with the caller's names for them; none
 * of these touches the output. */
static int passes_reject_wrong_calls(void) {
  SKIP_WITHOUT_GPU();
  seed_rng();
  char cache[4096];
  temp_path(cache, sizeof cache, "backward-refusals");
  conv_context *ctx;
  if (make_context(&ctx, cache, CONV_POLICY_FAST, 0) != TEST_PASS) return TEST_FAIL;
  conv_problem p;
  conv_problem_init(&p);
  p.n = 2; p.c = 8; p.h = 12; p.w = 10; p.k = 6; p.r = 3; p.s = 3;
  p.pad_h = p.pad_w = 1;
  p.direction = CONV_BACKWARD_DATA;
  pass_case pc;
  if (pass_case_make(&pc, &p) != TEST_PASS || pass_poison(&pc) != TEST_PASS) return TEST_FAIL;
  conv_plan *plan = NULL;
  CHECK_MSG(conv_plan_create(ctx, &p, &plan) == CONV_OK, "%s", conv_context_last_error(ctx));
  const dev_case *d = &pc.d;
  CHECK_STATUS(CONV_INVALID_ARGUMENT, conv_plan_execute(plan, 0, d->x, d->w, NULL, d->y));
  CHECK(strstr(conv_context_last_error(ctx), "backward-data") != NULL);
  CHECK_STATUS(CONV_INVALID_ARGUMENT, conv_plan_backward_filter(plan, 0, d->x, d->y, d->w));
  CHECK_STATUS(CONV_INVALID_ARGUMENT, conv_plan_backward_data(plan, 0, NULL, d->w, d->x));
  CHECK(strstr(conv_context_last_error(ctx), "dy is NULL") != NULL);
  CHECK_STATUS(CONV_INVALID_ARGUMENT,
               conv_plan_backward_data(plan, 0, d->y, d->w, (float *)((char *)d->x + 4)));
  CHECK(strstr(conv_context_last_error(ctx), "dx is not") != NULL);
  /* Nothing ran: the output is still all NaN. */
  const int64_t count = pc.hc.sh.out_elems;
  float *got = malloc((size_t)count * sizeof *got);
  CHECK(got != NULL);
  CUDA_OK(cudaMemcpy(got, d->x, (size_t)count * sizeof *got, cudaMemcpyDeviceToHost));
  for (int64_t i = 0; i < count; i++) CHECK_MSG(isnan(got[i]), "dx[%lld] was written", (long long)i);
  free(got);
  /* A forward plan refuses the backward calls. */
  conv_problem f = p;
  f.direction = CONV_FORWARD;
  conv_plan *forward = NULL;
  CHECK_MSG(conv_plan_create(ctx, &f, &forward) == CONV_OK, "%s", conv_context_last_error(ctx));
  CHECK(forward != plan);
  CHECK_STATUS(CONV_INVALID_ARGUMENT, conv_plan_backward_data(forward, 0, d->y, d->w, d->x));
  CHECK(strstr(conv_context_last_error(ctx), "forward") != NULL);
  conv_plan_destroy(forward);
  conv_plan_destroy(plan);
  pass_case_free(&pc);
  conv_context_destroy(ctx);
  remove_db(cache);
  return TEST_PASS;
}

/* A random backward problem that our own families take as well as cuDNN:
 * NCHW, stride 1, a square filter of a size filter_reduce compiles, and
 * padding within the dilated filter's reach (direct_channel's transposed
 * view of backward-data). */
static conv_problem random_direct_pass(conv_direction direction, conv_math math) {
  for (;;) {
    conv_problem p = random_problem(math);
    p.epilogue = CONV_EPILOGUE_NONE;
    p.direction = direction;
    p.stride_h = p.stride_w = 1;
    p.r = p.s = rng_int(0, 4) == 0 ? 7 : rng_int(1, 5);
    p.pad_h = rng_int(0, p.dil_h * (p.r - 1));
    p.pad_w = rng_int(0, p.dil_w * (p.s - 1));
    if (conv_problem_validate(&p, NULL, 0) == CONV_OK) return p;
  }
}

/* Every config of every family that takes a backward problem, judged on
 * random problems (half of them ones our own families take) against the
 * CPU reference and the way the tuner judges it (run_every_config): our
 * families must be right, a wrong cuDNN engine must be caught. */
static int every_backward_candidate_matches_reference(void) {
  SKIP_WITHOUT_GPU();
  seed_rng();
  family_sweep sweep;
  if (family_sweep_open(&sweep) != TEST_PASS) return TEST_FAIL;
  const conv_algorithm *const *algos = sweep.algos;
  const family_count *counts = sweep.counts;
  for (int i = 0; i < 2 * case_count(); i++) {
    const conv_direction direction = i % 2 ? CONV_BACKWARD_FILTER : CONV_BACKWARD_DATA;
    const conv_math math = i / 2 % 2 ? CONV_MATH_TF32 : CONV_MATH_STRICT;
    const conv_problem p = i / 4 % 2 ? random_direct_pass(direction, math) : random_pass(direction, i / 2);
    if (family_sweep_run(&sweep, &p) != TEST_PASS) return TEST_FAIL;
  }
  for (int a = 0; a < sweep.count; a++) {
    printf("%s: %d backward configs matched the CPU reference, %d wrong and caught by validation, "
           "%d not supported for their shape\n",
           algos[a]->name, counts[a].ran, counts[a].wrong_caught, counts[a].unsupported);
    const uint32_t id = algos[a]->id;
    if (id == CONV_ALGO_CUDNN || id == CONV_ALGO_DIRECT_CHANNEL || id == CONV_ALGO_FILTER_REDUCE ||
        id == CONV_ALGO_GEMM_BACKWARD)
      CHECK_MSG(counts[a].ran > 0, "%s ran no backward config", algos[a]->name);
  }
  family_sweep_close(&sweep);
  return TEST_PASS;
}

/* Counts a key's stored trials: valid ones, and valid ones that are not
 * (or not known to be) deterministic. */
typedef struct trial_tally {
  int valid, valid_nondeterministic;
} trial_tally;

static int tally_trial(const conv_cache_row *row, void *user) {
  trial_tally *t = user;
  if (row->trial->status != CONV_OK) return 0;
  t->valid++;
  if (row->trial->deterministic != 1) t->valid_nondeterministic++;
  return 0;
}

static int tally_trials(conv_context *ctx, const conv_problem *p, trial_tally *t) {
  char key[CONV_PROBLEM_KEY_MAX];
  CHECK_STATUS(CONV_OK, conv_problem_key(p, key, sizeof key));
  conv_error err = {CONV_OK, ""};
  memset(t, 0, sizeof *t);
  CHECK_MSG(conv_cache_list_trials(conv_context_cache(ctx), key, tally_trial, t, &err) == CONV_OK,
            "%s", err.message);
  return TEST_PASS;
}

/* One pass of the plan into a poisoned output, checked against the CPU
 * reference and copied to host `bits`. */
static int run_into(conv_plan *plan, pass_case *pc, float *bits, const char *what) {
  if (pass_poison(pc) != TEST_PASS) return TEST_FAIL;
  CHECK_STATUS(CONV_OK, run_pass(plan, pc));
  CUDA_OK(cudaDeviceSynchronize());
  if (pass_check(pc, conv_error_bound_for(&pc->hc.p, CONV_ARITH_TRANSFORM), what) != TEST_PASS)
    return TEST_FAIL;
  CUDA_OK(cudaMemcpy(bits, pc->d.out, (size_t)pc->hc.sh.out_elems * sizeof(float),
                     cudaMemcpyDeviceToHost));
  return TEST_PASS;
}

/* Deterministic problems (conv_problem.deterministic, or a context made
 * with conv_context_options.deterministic): the tuner keeps only
 * candidates that say they are deterministic (every valid trial stored
 * for the key), the plan says so, and two runs on the same inputs give
 * the same bits.  The same shapes without the flag show what it excludes
 * (printed: cuDNN's atomics-based backward-filter engines, mostly). */
static int deterministic_plans_repeat_bits(void) {
  SKIP_WITHOUT_GPU();
  seed_rng();
  char cache[4096];
  temp_path(cache, sizeof cache, "deterministic");
  conv_context *ctx, *det_ctx;
  if (make_context(&ctx, cache, tuning_policy(), 0) != TEST_PASS) return TEST_FAIL;
  conv_context_options o;
  conv_context_options_init(&o);
  o.cache_path = cache;
  o.policy = tuning_policy();
  o.deterministic = 1;
  CHECK_MSG(conv_context_create(&det_ctx, &o) == CONV_OK, "%s", conv_context_last_error(NULL));
  const conv_problem shapes[] = {
      direct_problem(16, 64, 28, 28, 64, 3, 3, 1, 1, 1, 1, CONV_EPILOGUE_NONE, CONV_MATH_STRICT),
      direct_problem(8, 96, 56, 56, 96, 3, 3, 2, 1, 1, 96, CONV_EPILOGUE_NONE, CONV_MATH_STRICT),
      direct_problem(8, 1, 64, 64, 1, 3, 3, 1, 4, 4, 1, CONV_EPILOGUE_NONE, CONV_MATH_STRICT),
      direct_problem(4, 256, 14, 14, 256, 3, 3, 1, 1, 1, 1, CONV_EPILOGUE_NONE, CONV_MATH_TF32),
  };
  const size_t count = quick_mode() ? 2 : sizeof shapes / sizeof shapes[0];
  for (size_t i = 0; i < 2 * count; i++) {
    conv_problem p = shapes[i / 2];
    p.direction = i % 2 ? CONV_BACKWARD_FILTER : CONV_BACKWARD_DATA;
    conv_problem plain = p;
    p.deterministic = 1;
    conv_plan *plan = NULL, *via_context = NULL, *any = NULL;
    CHECK_MSG(conv_plan_create(ctx, &p, &plan) == CONV_OK, "%s", conv_context_last_error(ctx));
    /* The context's option makes the same problem as the flag. */
    CHECK_MSG(conv_plan_create(det_ctx, &plain, &via_context) == CONV_OK, "%s",
              conv_context_last_error(det_ctx));
    CHECK_MSG(conv_plan_create(ctx, &plain, &any) == CONV_OK, "%s", conv_context_last_error(ctx));
    conv_plan_info info, info_context, info_any;
    CHECK_STATUS(CONV_OK, conv_plan_info_get(plan, &info));
    CHECK_STATUS(CONV_OK, conv_plan_info_get(via_context, &info_context));
    CHECK_STATUS(CONV_OK, conv_plan_info_get(any, &info_any));
    CHECK(info.deterministic == 1 && info_context.deterministic == 1);
    CHECK_MSG(info_context.source == CONV_SOURCE_CACHE,
              "a deterministic context found no tuned plan for the deterministic key (source %d)",
              (int)info_context.source);
    trial_tally det, all;
    if (tally_trials(ctx, &p, &det) != TEST_PASS || tally_trials(ctx, &plain, &all) != TEST_PASS)
      return TEST_FAIL;
    char key[CONV_PROBLEM_KEY_MAX];
    describe_problem(&p, key, sizeof key);
    printf("%s: %s %s %.4f ms (%d valid); without det=1: %s %s %.4f ms%s (%d valid, %d not "
           "deterministic)\n",
           key, info.algorithm, info.config, info.time_ms, det.valid, info_any.algorithm,
           info_any.config, info_any.time_ms, info_any.deterministic ? "" : ", not deterministic",
           all.valid, all.valid_nondeterministic);
    CHECK_MSG(det.valid > 0 && det.valid_nondeterministic == 0,
              "%d of %d valid trials of a deterministic key are not deterministic",
              det.valid_nondeterministic, det.valid);

    pass_case pc;
    if (pass_case_make(&pc, &p) != TEST_PASS) return TEST_FAIL;
    const size_t bytes = (size_t)pc.hc.sh.out_elems * sizeof(float);
    float *first = malloc(bytes), *again = malloc(bytes);
    CHECK(first != NULL && again != NULL);
    for (int run = 0; run < 4; run++) {
      if (run_into(run % 2 ? via_context : plan, &pc, run == 0 ? first : again,
                   run == 0 ? "deterministic, first run" : "deterministic, later run") != TEST_PASS)
        return TEST_FAIL;
      if (run > 0)
        CHECK_MSG(memcmp(first, again, bytes) == 0, "%s: run %d differs from run 0 in its bits",
                  key, run);
    }
    free(first);
    free(again);
    pass_case_free(&pc);
    conv_plan_destroy(plan);
    conv_plan_destroy(via_context);
    conv_plan_destroy(any);
  }
  CHECK_STATUS(CONV_OK, conv_context_destroy(det_ctx));
  CHECK_STATUS(CONV_OK, conv_context_destroy(ctx));
  remove_db(cache);
  return TEST_PASS;
}

static const test_case tests[] = {
    {"reference_backward_matches_cpu", reference_backward_matches_cpu},
    {"backward_plans_match_cpu", backward_plans_match_cpu},
    {"passes_reject_wrong_calls", passes_reject_wrong_calls},
    {"every_backward_candidate_matches_reference", every_backward_candidate_matches_reference},
    {"deterministic_plans_repeat_bits", deterministic_plans_repeat_bits},
};
TEST_MAIN(tests)
