/*
 * test_backward.c -- GPU tests of the backward passes: the tuner's device
 * reference kernels and tuned backward-data and backward-filter plans, each
 * against the CPU reference (tests/cpu_reference.c, whose adjoint checks
 * are in test_reference.c), on fresh random inputs with poisoned outputs;
 * every config of every family that runs a backward pass; and the execute
 * functions' refusals.  Each skips (exit 77) without a GPU;
 * the seed is printed (CONVTUNE_TEST_SEED replays it).
 */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "algorithms/filter_reduce.h"
#include "algorithms/patch_filter.h"
#include "algorithms/kernels.h"
#include "cache/cache.h"
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
  const dev_case *d = &pc->d;
  if (pc->hc.p.direction == CONV_BACKWARD_DATA)
    return conv_plan_backward_data(plan, 0, d->y, d->w, d->x);
  return conv_plan_backward_filter(plan, 0, d->x, d->y, d->w);
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

/* Our backward kernels on the layers they are for (depthwise, 1->1 and
 * 16->1 dilated, 3->16, channel multipliers, odd sizes, many bands), in
 * both directions: each case's dx by direct_channel's transposed
 * convolution (stride 1) or else data_gather, which take no case both;
 * every case's dw by filter_reduce. */
static int direct_backward_matches_reference(void) {
  SKIP_WITHOUT_GPU();
  seed_rng();
  const conv_math S = CONV_MATH_STRICT, T = CONV_MATH_TF32;
  const conv_epilogue N = CONV_EPILOGUE_NONE;
  conv_problem cases[] = {
      direct_problem(2, 8, 56, 56, 8, 3, 3, 1, 1, 1, 8, N, S),       /* depthwise */
      direct_problem(2, 6, 57, 57, 6, 3, 3, 2, 1, 1, 6, N, S),       /* depthwise s2 */
      direct_problem(1, 1, 130, 131, 1, 3, 3, 1, 8, 8, 1, N, S),     /* 1->1, d8 */
      direct_problem(1, 1, 128, 128, 1, 3, 3, 1, 1, 1, 1, N, T),
      direct_problem(1, 16, 67, 64, 1, 3, 3, 1, 4, 4, 1, N, S),      /* 16->1, d4 */
      direct_problem(1, 3, 64, 64, 16, 3, 3, 1, 1, 1, 1, N, S),      /* 3->16 */
      direct_problem(2, 4, 33, 30, 8, 5, 5, 1, 4, 2, 4, N, S),       /* multiplier 2, d2 */
      direct_problem(2, 6, 31, 29, 6, 7, 7, 1, 3, 1, 6, N, S),       /* depthwise 7x7 */
      direct_problem(1, 5, 38, 41, 5, 5, 5, 2, 2, 1, 5, N, S),       /* depthwise 5x5 s2 */
      direct_problem(1, 2, 30, 26, 2, 3, 3, 1, 0, 2, 2, N, S),       /* valid, d2 */
      direct_problem(1, 16, 20, 20, 16, 3, 3, 1, 1, 1, 2, N, S),     /* 8x8 groups */
      direct_problem(3, 4, 300, 37, 4, 3, 3, 1, 1, 1, 4, N, S),      /* many bands */
      direct_problem(2, 3, 44, 48, 16, 4, 4, 4, 0, 1, 1, N, S),      /* 4x4 stride-4 stem */
      direct_problem(1, 32, 23, 26, 16, 1, 1, 1, 0, 1, 1, N, T),     /* 1x1, 32->16 */
      direct_problem(2, 4, 32, 32, 4, 2, 2, 2, 0, 1, 4, N, S),       /* 2x2 s2 */
      direct_problem(1, 3, 41, 50, 6, 3, 3, 1, 3, 2, 1, N, S),       /* dilation 2 x 3 */
      direct_problem(1, 2, 20, 24, 2, 3, 3, 1, 5, 1, 2, N, S),       /* padding past the filter */
      direct_problem(2, 4, 29, 31, 8, 3, 3, 3, 1, 1, 4, N, T),       /* stride 3, multiplier 2 */
      direct_problem(1, 6, 33, 35, 6, 3, 3, 2, 2, 2, 6, N, S),       /* depthwise s2, d2 */
      direct_problem(2, 4, 30, 27, 8, 3, 3, 2, 1, 1, 4, N, T),       /* s2, multiplier 2 */
      /* Rows of a multiple of 4 floats at stride 2: filter_reduce's float4
       * loads, with a partial last group of 4 columns (q = 14, 18). */
      direct_problem(2, 8, 30, 28, 8, 3, 3, 2, 1, 1, 8, N, S),       /* depthwise s2 */
      direct_problem(2, 4, 21, 36, 8, 3, 3, 2, 1, 1, 4, N, T),       /* s2, multiplier 2 */
  };
  cases[6].pad_w = 1; /* asymmetric padding */
  cases[15].dil_w = 3;
  enum { CASES = sizeof cases / sizeof cases[0] };
  conv_problem transposed[CASES], gathered[CASES], filter[CASES];
  int ntransposed = 0, ngathered = 0, nfilter = 0;
  conv_env env; /* applicable() reads the problem alone */
  memset(&env, 0, sizeof env);
  for (int i = 0; i < CASES; i++) {
    conv_problem p = cases[i];
    p.direction = CONV_BACKWARD_DATA;
    const bool direct = conv_algorithm_direct_channel.applicable(&p, &env);
    const bool gather = conv_algorithm_data_gather.applicable(&p, &env);
    CHECK_MSG(direct != gather, "case %d: direct_channel %s it, data_gather %s", i,
              direct ? "takes" : "refuses", gather ? "takes" : "refuses");
    if (direct) transposed[ntransposed++] = p;
    if (gather) gathered[ngathered++] = p;
    p.direction = CONV_BACKWARD_FILTER;
    CHECK_MSG(conv_algorithm_filter_reduce.applicable(&p, &env), "filter_reduce refuses case %d", i);
    filter[nfilter++] = p;
  }
  CHECK_MSG(ngathered == 10, "data_gather takes %d of the 10 strided or over-padded cases", ngathered);
  family_count count[3];
  if (run_family_on_cases(&conv_algorithm_direct_channel, transposed, (size_t)ntransposed, NULL, &count[0]) != TEST_PASS ||
      run_family_on_cases(&conv_algorithm_data_gather, gathered, (size_t)ngathered, NULL, &count[1]) != TEST_PASS ||
      run_family_on_cases(&conv_algorithm_filter_reduce, filter, (size_t)nfilter, NULL, &count[2]) != TEST_PASS)
    return TEST_FAIL;
  CHECK(count[0].wrong_caught == 0 && count[1].wrong_caught == 0 && count[2].wrong_caught == 0);
  return TEST_PASS;
}

/* filter_reduce's float4 loads need x 16-byte aligned: with an x one
 * float off, the same plan runs its scalar kernel, with the same result. */
static int filter_reduce_float4_any_alignment(void) {
  SKIP_WITHOUT_GPU();
  seed_rng();
  conv_problem p = direct_problem(2, 8, 30, 28, 8, 3, 3, 2, 1, 1, 8, CONV_EPILOGUE_NONE,
                                  CONV_MATH_STRICT);
  p.direction = CONV_BACKWARD_FILTER;
  const conv_filter_reduce_tiling tiling = {8, 128, 4, 1, 0};
  conv_filter_reduce_launch launch;
  char why[160] = "";
  CHECK_MSG(conv_filter_reduce_plan(&p, &tiling, &launch, why, sizeof why), "%s", why);
  pass_case pc;
  if (pass_case_make(&pc, &p) != TEST_PASS) return TEST_FAIL;
  const size_t x_bytes = (size_t)pc.hc.sh.x_elems * sizeof(float);
  float *shifted = NULL;
  void *workspace = NULL;
  CUDA_OK(cudaMalloc((void **)&shifted, x_bytes + sizeof(float)));
  CUDA_OK(cudaMemcpy(shifted + 1, pc.d.x, x_bytes, cudaMemcpyDeviceToDevice));
  CUDA_OK(cudaMalloc(&workspace, launch.workspace_bytes + 1));
  const float *inputs[2] = {pc.d.x, shifted + 1};
  const char *what[2] = {"filter_reduce float4, x aligned", "filter_reduce float4, x one float off"};
  for (int i = 0; i < 2; i++) {
    if (pass_poison(&pc) != TEST_PASS) return TEST_FAIL;
    CUDA_OK(conv_filter_reduce_run(&launch, inputs[i], pc.d.y, pc.d.w, workspace, 0));
    CUDA_OK(cudaDeviceSynchronize());
    if (pass_check(&pc, 1e-5, what[i]) != TEST_PASS) return TEST_FAIL;
  }
  cudaFree(workspace);
  cudaFree(shifted);
  pass_case_free(&pc);
  return TEST_PASS;
}

static bool sums_per_tap(const void *state) {
  return ((const conv_filter_reduce_launch *)state)->tiling.per_tap != 0;
}

/* filter_reduce's per-tap blocks (one launch for a tiny pass): every
 * config of the family, per-tap ones among them, on the small passes they
 * are for (strides, dilation, groups, several images), against the CPU
 * reference; then one per-tap config's dw twice, bit for bit (the family
 * says it is deterministic). */
static int filter_reduce_per_tap_matches_reference(void) {
  SKIP_WITHOUT_GPU();
  seed_rng();
  const conv_math S = CONV_MATH_STRICT, T = CONV_MATH_TF32;
  const conv_epilogue N = CONV_EPILOGUE_NONE;
  conv_problem cases[] = {
      direct_problem(1, 1, 64, 64, 1, 3, 3, 1, 1, 1, 1, N, S),    /* seed3_msd_small */
      direct_problem(3, 3, 20, 22, 3, 3, 3, 1, 1, 1, 3, N, T),    /* depthwise, 3 images */
      direct_problem(1, 16, 40, 36, 1, 3, 3, 1, 4, 4, 1, N, S),   /* 16->1, d4 */
      direct_problem(2, 2, 30, 33, 4, 5, 5, 2, 2, 1, 2, N, S),    /* 5x5 s2, multiplier 2 */
      direct_problem(1, 3, 17, 19, 8, 7, 7, 1, 3, 1, 1, N, S),    /* 3->8, 7x7 */
  };
  enum { CASES = sizeof cases / sizeof cases[0] };
  conv_env env;
  if (open_env(&env) != TEST_PASS) return TEST_FAIL;
  for (int i = 0; i < CASES; i++) {
    cases[i].direction = CONV_BACKWARD_FILTER;
    CHECK_MSG(prepared_configs(&env, &conv_algorithm_filter_reduce, &cases[i], sums_per_tap) == 3,
              "case %d: not 3 per-tap configs", i);
  }
  close_env(&env);
  family_count count;
  if (run_family_on_cases(&conv_algorithm_filter_reduce, cases, CASES, NULL, &count) != TEST_PASS)
    return TEST_FAIL;
  CHECK(count.wrong_caught == 0);

  const conv_filter_reduce_tiling tiling = {0, 512, 1, 0, 1};
  conv_filter_reduce_launch launch;
  char why[160] = "";
  CHECK_MSG(conv_filter_reduce_plan(&cases[1], &tiling, &launch, why, sizeof why), "%s", why);
  CHECK(launch.workspace_bytes == 0);
  pass_case pc;
  if (pass_case_make(&pc, &cases[1]) != TEST_PASS) return TEST_FAIL;
  float first[27], second[27];
  for (int run = 0; run < 2; run++) {
    if (pass_poison(&pc) != TEST_PASS) return TEST_FAIL;
    CUDA_OK(conv_filter_reduce_run(&launch, pc.d.x, pc.d.y, pc.d.w, NULL, 0));
    CUDA_OK(cudaDeviceSynchronize());
    if (pass_check(&pc, 1e-5, "filter_reduce per-tap") != TEST_PASS) return TEST_FAIL;
    CUDA_OK(cudaMemcpy(run ? second : first, pc.d.w, sizeof first, cudaMemcpyDeviceToHost));
  }
  CHECK_MSG(memcmp(first, second, sizeof first) == 0, "two runs of one per-tap plan differ");
  pass_case_free(&pc);
  return TEST_PASS;
}

/* fft_filter, every config (whole-image transforms and power-of-two
 * tiles), against the CPU reference: a 31x31 filter on few channels (the
 * suite's fft_few_ch_31, smaller), channel counts that leave partial 4 x 4
 * blocks of filter planes, a non-square filter with padding on one axis
 * only, an output that leaves partial tiles, groups (depthwise 31x31 as
 * RepLKNet's, a channel multiplier, 3 channels in and 2 out a group),
 * both math modes (fp32 either way). */
static int fft_filter_matches_reference(void) {
  SKIP_WITHOUT_GPU();
  seed_rng();
  const conv_math S = CONV_MATH_STRICT, T = CONV_MATH_TF32;
  const conv_epilogue N = CONV_EPILOGUE_NONE;
  conv_problem cases[] = {
      direct_problem(2, 4, 64, 64, 4, 31, 31, 1, 15, 1, 1, N, S),  /* fft_few_ch_31 */
      direct_problem(3, 5, 70, 45, 6, 5, 5, 1, 2, 1, 1, N, S),     /* partial blocks */
      direct_problem(1, 3, 40, 52, 2, 7, 3, 1, 3, 1, 1, N, T),     /* 7x3, padding (3, 0) */
      direct_problem(2, 2, 97, 33, 3, 9, 9, 1, 0, 1, 1, N, S),     /* valid, partial tiles */
      direct_problem(2, 6, 40, 40, 6, 31, 31, 1, 15, 1, 6, N, S),  /* depthwise 31x31 */
      direct_problem(1, 4, 30, 27, 8, 5, 5, 1, 2, 1, 4, N, T),     /* multiplier 2 */
      direct_problem(2, 6, 25, 33, 4, 3, 3, 1, 1, 1, 2, N, S),     /* 3 in, 2 out a group */
  };
  cases[2].pad_w = 0;
  enum { CASES = sizeof cases / sizeof cases[0] };
  set_direction(cases, CASES, CONV_BACKWARD_FILTER);
  return family_passes_match_reference(&conv_algorithm_fft_filter, cases, CASES, 2 * CASES);
}

/* gemm_backward, every config (chunks of the whole batch, of part of it
 * and of one image; ranked cuBLASLt algos) in both passes, against the CPU
 * reference: a dense 3x3, strides with padding (col2im's skipped taps),
 * dilation on one axis and asymmetric padding, padding past the filter,
 * groups (3 in, 2 out a group; depthwise), a stride-4 stem, 1x1 filters
 * with and without a stride (the unit-stride one runs with neither im2col
 * nor col2im at one image a chunk), both math modes. */
static int gemm_backward_matches_reference(void) {
  SKIP_WITHOUT_GPU();
  seed_rng();
  const conv_math S = CONV_MATH_STRICT, T = CONV_MATH_TF32;
  const conv_epilogue N = CONV_EPILOGUE_NONE;
  conv_problem cases[] = {
      direct_problem(4, 8, 20, 23, 12, 3, 3, 1, 1, 1, 1, N, S),    /* dense 3x3 */
      direct_problem(3, 5, 31, 28, 7, 5, 5, 2, 2, 1, 1, N, T),     /* 5x5 s2 */
      direct_problem(2, 3, 41, 50, 6, 3, 3, 1, 3, 2, 1, N, S),     /* dilation 2 x 3 */
      direct_problem(2, 2, 20, 24, 4, 3, 3, 1, 5, 1, 1, N, S),     /* padding past the filter */
      direct_problem(2, 6, 25, 33, 4, 3, 3, 1, 1, 1, 2, N, S),     /* 3 in, 2 out a group */
      direct_problem(6, 8, 30, 27, 8, 3, 3, 2, 1, 1, 8, N, T),     /* depthwise s2 */
      direct_problem(2, 3, 44, 48, 16, 4, 4, 4, 0, 1, 1, N, S),    /* 4x4 stride-4 stem */
      direct_problem(3, 32, 23, 26, 16, 1, 1, 1, 0, 1, 1, N, T),   /* 1x1 */
      direct_problem(2, 16, 23, 26, 8, 1, 1, 2, 0, 1, 1, N, S),    /* 1x1 s2 */
  };
  cases[2].dil_w = 3;
  cases[2].pad_w = 1;
  enum { CASES = sizeof cases / sizeof cases[0] };
  conv_problem passes[2 * CASES];
  for (int i = 0; i < 2 * CASES; i++) {
    passes[i] = cases[i / 2];
    passes[i].direction = i % 2 ? CONV_BACKWARD_FILTER : CONV_BACKWARD_DATA;
  }
  /* Every pass has a chunk of the whole batch and one of one image. */
  return family_passes_match_reference(&conv_algorithm_gemm_backward, passes, 2 * CASES,
                                       2 * 2 * CASES);
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

/* patch_filter, every config (kernel, images a stage, stages), against
 * the CPU reference: seed1's 4x4 and 8x8 patches (32 -> 64 channels),
 * batches no image group divides (the last group short) and of one image,
 * blocks of one warp (8 -> 32 and 16 -> 16 channels), both math modes, the
 * tensor-core kernel with its warps along C and along K. */
static int patch_filter_matches_reference(void) {
  SKIP_WITHOUT_GPU();
  seed_rng();
  const conv_math S = CONV_MATH_STRICT, T = CONV_MATH_TF32;
  const conv_epilogue N = CONV_EPILOGUE_NONE;
  conv_problem passes[] = {
      direct_problem(40, 32, 4, 4, 64, 3, 3, 1, 1, 1, 1, N, S),
      direct_problem(37, 32, 8, 8, 64, 3, 3, 1, 1, 1, 1, N, T),
      direct_problem(1, 32, 8, 8, 64, 3, 3, 1, 1, 1, 1, N, S),
      direct_problem(13, 8, 8, 8, 32, 3, 3, 1, 1, 1, 1, N, S),
      direct_problem(21, 16, 4, 4, 16, 3, 3, 1, 1, 1, 1, N, T),
      direct_problem(9, 16, 8, 8, 32, 3, 3, 1, 1, 1, 1, N, T), /* tensor cores: 2 warps */
      direct_problem(5, 8, 4, 4, 64, 3, 3, 1, 1, 1, 1, N, T),  /* ... along K */
  };
  enum { CASES = sizeof passes / sizeof passes[0] };
  set_direction(passes, CASES, CONV_BACKWARD_FILTER);
  return family_passes_match_reference(&conv_algorithm_patch_filter, passes, CASES, CASES * 4);
}

/* patch_filter copies dy as float4s only where dy is 16-byte aligned: a
 * dy one float off (a view into a larger tensor) gives the same result
 * through 4-byte copies, in both kernels. */
static int patch_filter_any_alignment(void) {
  SKIP_WITHOUT_GPU();
  seed_rng();
  conv_problem p = direct_problem(10, 16, 8, 8, 32, 3, 3, 1, 1, 1, 1, CONV_EPILOGUE_NONE,
                                  CONV_MATH_TF32);
  p.direction = CONV_BACKWARD_FILTER;
  int device = 0, sms = 0;
  CUDA_OK(cudaGetDevice(&device));
  CUDA_OK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  pass_case pc;
  if (pass_case_make(&pc, &p) != TEST_PASS) return TEST_FAIL;
  const size_t dy_bytes = (size_t)pc.hc.sh.y_elems * sizeof(float);
  float *shifted = NULL;
  CUDA_OK(cudaMalloc((void **)&shifted, dy_bytes + sizeof(float)));
  CUDA_OK(cudaMemcpy(shifted + 1, pc.d.y, dy_bytes, cudaMemcpyDeviceToDevice));
  const conv_patch_filter_tiling tilings[2] = {{CONV_PATCH_FILTER_FMA, 2, 2},
                                               {CONV_PATCH_FILTER_MMA, 2, 2}};
  for (int k = 0; k < 2; k++) {
    conv_patch_filter_launch launch;
    char why[160] = "";
    CHECK_MSG(conv_patch_filter_plan(&p, &tilings[k], &launch, why, sizeof why), "%s", why);
    CUDA_OK(conv_patch_filter_configure(&launch, sms));
    void *workspace = NULL;
    CUDA_OK(cudaMalloc(&workspace, launch.workspace_bytes));
    const float *dys[2] = {pc.d.y, shifted + 1};
    for (int i = 0; i < 2; i++) {
      if (pass_poison(&pc) != TEST_PASS) return TEST_FAIL;
      CUDA_OK(conv_patch_filter_run(&launch, pc.d.x, dys[i], pc.d.w, workspace, 0));
      CUDA_OK(cudaDeviceSynchronize());
      char what[80];
      snprintf(what, sizeof what, "patch_filter kind %d, dy %s", tilings[k].kind,
               i ? "one float off" : "aligned");
      if (pass_check(&pc, conv_error_bound_for(&p, CONV_ARITH_DIRECT), what) != TEST_PASS)
        return TEST_FAIL;
    }
    cudaFree(workspace);
  }
  cudaFree(shifted);
  pass_case_free(&pc);
  return TEST_PASS;
}

static const test_case tests[] = {
    {"reference_backward_matches_cpu", reference_backward_matches_cpu},
    {"backward_plans_match_cpu", backward_plans_match_cpu},
    {"passes_reject_wrong_calls", passes_reject_wrong_calls},
    {"every_backward_candidate_matches_reference", every_backward_candidate_matches_reference},
    {"direct_backward_matches_reference", direct_backward_matches_reference},
    {"filter_reduce_float4_any_alignment", filter_reduce_float4_any_alignment},
    {"filter_reduce_per_tap_matches_reference", filter_reduce_per_tap_matches_reference},
    {"fft_filter_matches_reference", fft_filter_matches_reference},
    {"gemm_backward_matches_reference", gemm_backward_matches_reference},
    {"patch_filter_matches_reference", patch_filter_matches_reference},
    {"patch_filter_any_alignment", patch_filter_any_alignment},
    {"deterministic_plans_repeat_bits", deterministic_plans_repeat_bits},
};
TEST_MAIN(tests)
