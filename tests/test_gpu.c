/*
 * test_gpu.c -- GPU tests of the kernels no one family owns: the reference
 * kernel against a CPU reference in double (fp32, and fp16 and bf16 inputs
 * with the half comparison); every candidate family's
 * configs at once against the CPU reference on random shapes, and with
 * K R S C filters; the helper kernels (the bias pass, im2col, the filter
 * transpose) against the CPU.  Each family's own cases, on the shapes it
 * is for: tests/families/test_FAMILY.c.  Each skips (exit 77) on a machine
 * without a GPU.  Inputs are fresh random numbers each run; the seed is
 * printed and can be fixed with CONVTUNE_TEST_SEED to replay a failure.
 * Plans end to end: test_plans.c.
 */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "algorithms/common/im2col.h"
#include "algorithms/common/kernels.h"
#include "tuner/check.h"
#include "tests/gpu_support.h"

/* What conv_im2col writes (im2col.h), on the CPU. */
static int cpu_im2col(const conv_problem *p, const float *x, int64_t n0, int64_t images,
                      int64_t group, float *col) {
  conv_shape sh;
  CHECK_STATUS(CONV_OK, conv_problem_shape(p, &sh));
  const int64_t cg = p->c / p->groups, pq = sh.p * sh.q;
  for (int64_t img = 0; img < images; img++)
    for (int64_t ci = 0; ci < cg; ci++)
      for (int64_t ri = 0; ri < p->r; ri++)
        for (int64_t si = 0; si < p->s; si++)
          for (int64_t oh = 0; oh < sh.p; oh++)
            for (int64_t ow = 0; ow < sh.q; ow++) {
              const int64_t ih = oh * p->stride_h - p->pad_h + ri * p->dil_h;
              const int64_t iw = ow * p->stride_w - p->pad_w + si * p->dil_w;
              const int64_t row = ((img * cg + ci) * p->r + ri) * p->s + si;
              const bool inside = ih >= 0 && ih < p->h && iw >= 0 && iw < p->w;
              col[row * pq + oh * sh.q + ow] =
                  inside ? x[(((n0 + img) * p->c + group * cg + ci) * p->h + ih) * p->w + iw]
                         : 0.0f;
            }
  return TEST_PASS;
}

/* conv_im2col against cpu_im2col, element for element (a copy: the bytes
 * must match), on a chunk of images that does not start at image 0, in a
 * group other than the first: padding, stride and dilation, a 1x1
 * stride-2 filter (a subsample), and a 7x7 output whose rows are shorter
 * than a block.  The col buffer is poisoned first. */
static int im2col_matches_cpu(void) {
  SKIP_WITHOUT_GPU();
  seed_rng();
  const conv_math S = CONV_MATH_STRICT;
  const conv_epilogue NONE = CONV_EPILOGUE_NONE;
  const conv_problem cases[] = {
      direct_problem(5, 6, 13, 11, 8, 3, 3, 2, 1, 2, 2, NONE, S), /* two groups */
      direct_problem(4, 8, 14, 14, 16, 1, 1, 2, 0, 1, 1, NONE, S), /* a subsample */
      direct_problem(3, 4, 7, 7, 4, 3, 3, 1, 1, 1, 2, NONE, S),    /* 7x7 output */
      direct_problem(3, 3, 23, 29, 8, 7, 5, 2, 3, 1, 1, NONE, S),  /* r != s */
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    const conv_problem *p = &cases[i];
    CHECK_STATUS(CONV_OK, conv_problem_validate(p, NULL, 0));
    conv_shape sh;
    CHECK_STATUS(CONV_OK, conv_problem_shape(p, &sh));
    const int64_t n0 = 1, images = p->n - 1, group = p->groups - 1;
    const size_t x_count = (size_t)(p->n * p->c * p->h * p->w);
    const size_t col_count = (size_t)(images * (p->c / p->groups) * p->r * p->s * sh.p * sh.q);
    float *hx = malloc(x_count * sizeof *hx), *want = malloc(col_count * sizeof *want);
    float *got = malloc(col_count * sizeof *got), *dx = NULL, *dcol = NULL;
    CHECK(hx != NULL && want != NULL && got != NULL);
    for (size_t j = 0; j < x_count; j++) hx[j] = rng_float();
    if (cpu_im2col(p, hx, n0, images, group, want) != TEST_PASS) return TEST_FAIL;
    CUDA_OK(cudaMalloc((void **)&dx, x_count * sizeof *hx));
    CUDA_OK(cudaMalloc((void **)&dcol, col_count * sizeof *got));
    CUDA_OK(cudaMemcpy(dx, hx, x_count * sizeof *hx, cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemset(dcol, 0xff, col_count * sizeof *got)); /* NaN */
    CUDA_OK(conv_im2col(p, dx, n0, images, group, dcol, 0));
    CUDA_OK(cudaMemcpy(got, dcol, col_count * sizeof *got, cudaMemcpyDeviceToHost));
    CHECK_MSG(memcmp(got, want, col_count * sizeof *got) == 0, "case %zu: col differs", i);
    CHECK(conv_im2col(p, dx, 0, p->n + 1, 0, dcol, 0) == cudaErrorInvalidValue);
    cudaFree(dx);
    cudaFree(dcol);
    free(hx);
    free(want);
    free(got);
  }
  return TEST_PASS;
}

/* conv_filter_to_krsc against a CPU transpose, element for element, into a
 * poisoned buffer: 3x3, 7x7 and 9x9 filters, 4x4 ones (an even row, which
 * the kernel pads in shared memory), a filter's channels in two runs of a
 * block (the second partial), one channel; and the taps it refuses. */
static int filter_to_krsc_matches_cpu(void) {
  SKIP_WITHOUT_GPU();
  seed_rng();
  const int64_t cases[][3] = {{64, 40, 9}, {5, 3, 49}, {7, 70, 81}, {9, 1, 9},
                              {6, 1000, 9}, {4, 37, 16}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    const int64_t k = cases[i][0], c = cases[i][1], taps = cases[i][2];
    const size_t count = (size_t)(k * c * taps);
    float *hw = malloc(count * sizeof *hw), *want = malloc(count * sizeof *want);
    float *got = malloc(count * sizeof *got), *dw = NULL, *dout = NULL;
    CHECK(hw != NULL && want != NULL && got != NULL);
    for (size_t j = 0; j < count; j++) hw[j] = rng_float();
    for (int64_t kk = 0; kk < k; kk++)
      for (int64_t ci = 0; ci < c; ci++)
        for (int64_t t = 0; t < taps; t++)
          want[(kk * taps + t) * c + ci] = hw[(kk * c + ci) * taps + t];
    CUDA_OK(cudaMalloc((void **)&dw, count * sizeof *hw));
    CUDA_OK(cudaMalloc((void **)&dout, count * sizeof *got));
    CUDA_OK(cudaMemcpy(dw, hw, count * sizeof *hw, cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemset(dout, 0xff, count * sizeof *got)); /* NaN */
    CUDA_OK(conv_filter_to_krsc(dw, k, c, taps, dout, 0));
    CUDA_OK(cudaMemcpy(got, dout, count * sizeof *got, cudaMemcpyDeviceToHost));
    CHECK_MSG(memcmp(got, want, count * sizeof *got) == 0, "case %zu: filters differ", i);
    CHECK(conv_filter_to_krsc(NULL, k, c, taps, dout, 0) == cudaErrorInvalidValue);
    CHECK(conv_filter_to_krsc(dw, 1, 1, CONV_FILTER_TO_KRSC_MAX_TAPS + 1, dout, 0) ==
          cudaErrorInvalidValue);
    cudaFree(dw);
    cudaFree(dout);
    free(hw);
    free(want);
    free(got);
  }
  return TEST_PASS;
}

/* The reference kernel, which validates every candidate during tuning, is
 * itself checked against the CPU; so is the device comparison it relies on. */
static int reference_matches_cpu(void) {
  SKIP_WITHOUT_GPU();
  seed_rng();
  void *scratch;
  CUDA_OK(cudaMalloc(&scratch, CONV_COMPARE_SCRATCH_BYTES));
  for (int i = 0; i < 40; i++) {
    host_case hc;
    dev_case d;
    conv_problem p = i % 3 == 2 ? random_nhwc_problem(CONV_MATH_STRICT)
                                : random_problem(CONV_MATH_STRICT);
    if (host_case_make(&hc, &p) != TEST_PASS || dev_case_make(&d, &hc) != TEST_PASS) return TEST_FAIL;
    char name[CONV_PROBLEM_KEY_MAX];
    describe_problem(&p, name, sizeof name);
    if (poison(&d, &hc, 0) != TEST_PASS) return TEST_FAIL;
    CUDA_OK(conv_reference_forward(&p, d.x, d.w, d.bias, d.y, 0));
    if (check_output(&d, &hc, 0, 1e-6, name) != TEST_PASS) return TEST_FAIL;
    /* Device relative L2 of y against a perturbed copy must match the host's. */
    float *ref = NULL;
    CUDA_OK(cudaMalloc((void **)&ref, (size_t)hc.sh.y_elems * sizeof(float)));
    for (int64_t j = 0; j < hc.sh.y_elems; j++) hc.ref[j] *= 1.0f + 1e-3f * rng_float();
    CUDA_OK(cudaMemcpy(ref, hc.ref, (size_t)hc.sh.y_elems * sizeof(float), cudaMemcpyHostToDevice));
    double rel = -1, host_num = 0, host_den = 0;
    int64_t nonfinite = -1;
    CUDA_OK(conv_relative_l2(d.y, CONV_DTYPE_F32, ref, hc.sh.y_elems, scratch, 0, &rel, &nonfinite));
    float *y = malloc((size_t)hc.sh.y_elems * sizeof(float));
    CHECK(y != NULL);
    CUDA_OK(cudaMemcpy(y, d.y, (size_t)hc.sh.y_elems * sizeof(float), cudaMemcpyDeviceToHost));
    for (int64_t j = 0; j < hc.sh.y_elems; j++) {
      host_num += ((double)y[j] - hc.ref[j]) * ((double)y[j] - hc.ref[j]);
      host_den += (double)hc.ref[j] * hc.ref[j];
    }
    double host_rel = host_den > 0 ? sqrt(host_num / host_den) : sqrt(host_num);
    CHECK_MSG(nonfinite == 0 && fabs(rel - host_rel) <= 1e-9 + 1e-6 * host_rel,
              "%s: device rel %.6g vs host %.6g, nonfinite %lld", name, rel, host_rel, (long long)nonfinite);
    /* A poisoned output must be reported as non-finite. */
    CUDA_OK(cudaMemset(d.y, 0xFF, sizeof(float)));
    CUDA_OK(conv_relative_l2(d.y, CONV_DTYPE_F32, ref, hc.sh.y_elems, scratch, 0, &rel, &nonfinite));
    CHECK(nonfinite == 1);
    free(y);
    cudaFree(ref);
    dev_case_free(&d);
    host_case_free(&hc);
  }
  cudaFree(scratch);
  return TEST_PASS;
}

static int every_candidate_matches_reference(void) {
  SKIP_WITHOUT_GPU();
  seed_rng();
  family_sweep sweep;
  if (family_sweep_open(&sweep) != TEST_PASS) return TEST_FAIL;
  const conv_algorithm *const *algos = sweep.algos;
  const family_count *counts = sweep.counts;
  /* Shapes 0-3 already cover strict and TF32, random, channels-last
   * depthwise and plain shapes and a batch of patches: every family but
   * gemm_nhwc; shape 5 is channels-last of any kind (dense and grouped
   * too), shape 9 channels-last and dense (gemm_nhwc). */
  for (int i = 0; i < (quick_mode() ? 4 : 16); i++) {
    conv_problem p = random_problem(i % 2 ? CONV_MATH_TF32 : CONV_MATH_STRICT);
    if (i % 8 == 1) p = random_nhwc_depthwise_problem(CONV_MATH_TF32); /* cudnn, depthwise_nhwc */
    if (i % 16 == 5) p = random_nhwc_problem(CONV_MATH_TF32);
    if (i % 16 == 9) { /* cudnn, gemm_nhwc */
      p = random_problem(CONV_MATH_STRICT);
      p.c /= p.groups, p.k /= p.groups, p.groups = 1;
      p.layout = CONV_LAYOUT_NHWC;
      CHECK(conv_problem_validate(&p, NULL, 0) == CONV_OK);
    }
    if (i % 4 >= 2) { /* a plain convolution, which every family (fft too) takes */
      p.stride_h = p.stride_w = p.dil_h = p.dil_w = 1;
      p.c /= p.groups, p.k /= p.groups, p.groups = 1;
      if (p.r * p.s == 1) p.r = 3, p.pad_h = 1;
      if (i % 8 == 3) { /* and a batch of patches, which the patch family takes too */
        p.h = p.w = i % 16 == 3 ? 4 : 8;
        p.r = p.s = 3, p.pad_h = p.pad_w = 1;
        /* 16 or 24 output channels: TF32 (i odd), so implicit_gemm takes it
         * too (K >= 16); no other shape here has as many. */
        p.n = rng_int(30, 40), p.k = 8 * rng_int(2, 3);
      }
      CHECK(conv_problem_validate(&p, NULL, 0) == CONV_OK);
    }
    if (family_sweep_run(&sweep, &p) != TEST_PASS) return TEST_FAIL;
  }
  for (int a = 0; a < sweep.count; a++) {
    printf("%s: %d configs matched the CPU reference, %d wrong and caught by validation, "
           "%d not supported for their shape\n",
           algos[a]->name, counts[a].ran, counts[a].wrong_caught, counts[a].unsupported);
    /* The backward families take no forward problem (test_backward and
     * their family tests run them), the dynamic ones no convolution
     * (test_dynamic and theirs); the quick run's four shapes have no
     * dense channels-last one (test_gemm_nhwc runs gemm_nhwc); random
     * shapes seldom have padded_gemm's (C a multiple of 8, K of 64, on
     * compute capability 9.0: test_padded_gemm runs it) or stem_gemm's
     * (TF32, C R S <= 256: test_stem_gemm). */
    const uint32_t id = algos[a]->id;
    const bool elsewhere = id == CONV_ALGO_FILTER_REDUCE || id == CONV_ALGO_DATA_GATHER ||
                           id == CONV_ALGO_FFT_FILTER || id == CONV_ALGO_GEMM_BACKWARD ||
                           id == CONV_ALGO_PATCH_FILTER || id == CONV_ALGO_PADDED_GEMM ||
                           id == CONV_ALGO_STEM_GEMM ||
                           id == CONV_ALGO_DYNAMIC_DIRECT || id == CONV_ALGO_DYNAMIC_UNFOLD_GEMM ||
                           (id == CONV_ALGO_GEMM_NHWC && quick_mode());
    CHECK_MSG(counts[a].ran > 0 || elsewhere, "%s ran no config", algos[a]->name);
  }
  family_sweep_close(&sweep);
  return TEST_PASS;
}

/* conv_bias_act, the bias (+ ReLU) pass of cuDNN and GEMM candidates, on
 * each of its forms: float4 (planes of a multiple of 4), float (odd planes,
 * or an output not 16-byte aligned), with and without ReLU.  The adds are
 * the same float operations on the host, so the results must be equal. */
static int bias_pass_matches_host(void) {
  SKIP_WITHOUT_GPU();
  seed_rng();
  struct { int64_t n, k, p, offset; conv_epilogue epilogue; } cases[] = {
      {2, 5, 8, 0, CONV_EPILOGUE_BIAS},       /* plane 64: float4 */
      {3, 7, 7, 0, CONV_EPILOGUE_BIAS_RELU},  /* plane 49: float */
      {2, 3, 4, 1, CONV_EPILOGUE_BIAS},       /* plane 16, misaligned output: float */
      {1, 130, 2, 0, CONV_EPILOGUE_BIAS_RELU},/* plane 4, one float4 a channel */
      {5, 1, 9, 0, CONV_EPILOGUE_BIAS},       /* one channel */
  };
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    conv_problem pb;
    conv_problem_init(&pb);
    pb.n = cases[c].n, pb.c = 1, pb.k = cases[c].k, pb.h = pb.w = cases[c].p, pb.r = pb.s = 1;
    pb.epilogue = cases[c].epilogue;
    CHECK(conv_problem_validate(&pb, NULL, 0) == CONV_OK);
    const int64_t count = pb.n * pb.k * pb.h * pb.w, plane = pb.h * pb.w;
    float *y = malloc((size_t)count * sizeof *y), *bias = malloc((size_t)pb.k * sizeof *bias);
    float *got = malloc((size_t)count * sizeof *got);
    CHECK(y != NULL && bias != NULL && got != NULL);
    for (int64_t i = 0; i < count; i++) y[i] = rng_float();
    for (int64_t i = 0; i < pb.k; i++) bias[i] = rng_float();
    float *dy, *dbias;
    CUDA_OK(cudaMalloc((void **)&dy, (size_t)(count + 1) * sizeof *dy));
    CUDA_OK(cudaMalloc((void **)&dbias, (size_t)pb.k * sizeof *dbias));
    float *out = dy + cases[c].offset;
    CUDA_OK(cudaMemcpy(out, y, (size_t)count * sizeof *y, cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemcpy(dbias, bias, (size_t)pb.k * sizeof *bias, cudaMemcpyHostToDevice));
    CUDA_OK(conv_bias_act(&pb, out, dbias, 0));
    CUDA_OK(cudaMemcpy(got, out, (size_t)count * sizeof *got, cudaMemcpyDeviceToHost));
    int64_t wrong = 0;
    for (int64_t i = 0; i < count; i++) {
      float want = y[i] + bias[(i / plane) % pb.k];
      if (pb.epilogue == CONV_EPILOGUE_BIAS_RELU && want < 0.0f) want = 0.0f;
      wrong += got[i] != want;
    }
    CHECK_MSG(wrong == 0, "case %zu: %lld of %lld outputs wrong", c, (long long)wrong,
              (long long)count);
    cudaFree(dy);
    cudaFree(dbias);
    free(y), free(bias), free(got);
  }
  return TEST_PASS;
}

/* K R S C filters on NCHW problems (conv_problem.filter_layout): every
 * family the registry offers them (cudnn; padded_gemm on compute
 * capability 9.0) runs every config against the CPU reference, which
 * reads the random filters K R S C, and no other family is offered one;
 * then a plan tuned through the public API on a fresh cache, executed. */
static int krsc_filters_match_reference(void) {
  SKIP_WITHOUT_GPU();
  seed_rng();
  const conv_math T = CONV_MATH_TF32, S = CONV_MATH_STRICT;
  conv_problem cases[] = {
      direct_problem(2, 64, 14, 14, 64, 3, 3, 1, 1, 1, 1, CONV_EPILOGUE_BIAS, T),
      direct_problem(3, 24, 17, 13, 40, 3, 3, 2, 1, 1, 1, CONV_EPILOGUE_NONE, T),
      direct_problem(2, 16, 11, 9, 32, 5, 3, 1, 2, 1, 2, CONV_EPILOGUE_BIAS_RELU, S),
      direct_problem(1, 3, 40, 40, 16, 7, 7, 2, 3, 1, 1, CONV_EPILOGUE_NONE, T),
  };
  const size_t ncases = sizeof cases / sizeof cases[0];
  cases[2].pad_w = 1;
  family_sweep sweep;
  if (family_sweep_open(&sweep) != TEST_PASS) return TEST_FAIL;
  const conv_algorithm *const *algos = sweep.algos;
  const family_count *counts = sweep.counts;
  for (size_t i = 0; i < ncases; i++) {
    cases[i].filter_layout = CONV_FILTER_KRSC;
    CHECK(conv_problem_validate(&cases[i], NULL, 0) == CONV_OK);
    if (family_sweep_run(&sweep, &cases[i]) != TEST_PASS) return TEST_FAIL;
  }
  const bool hopper = conv_device_wgmma(&sweep.env.device);
  for (int a = 0; a < sweep.count; a++) {
    printf("%s: %d configs matched the CPU reference with K R S C filters, %d wrong and "
           "caught, %d not supported\n",
           algos[a]->name, counts[a].ran, counts[a].wrong_caught, counts[a].unsupported);
    const uint32_t id = algos[a]->id;
    const bool expected = id == CONV_ALGO_CUDNN || (id == CONV_ALGO_PADDED_GEMM && hopper);
    CHECK_MSG((counts[a].ran > 0) == expected, "%s: %d configs ran", algos[a]->name,
              counts[a].ran);
  }
  family_sweep_close(&sweep);

  char cache[4096];
  temp_path(cache, sizeof cache, "krsc");
  conv_context *ctx;
  if (make_context(&ctx, cache, CONV_POLICY_EXHAUSTIVE, 0) != TEST_PASS) return TEST_FAIL;
  host_case hc;
  dev_case d;
  if (host_case_make(&hc, &cases[0]) != TEST_PASS || dev_case_make(&d, &hc) != TEST_PASS)
    return TEST_FAIL;
  conv_plan *plan = NULL;
  CHECK_MSG(conv_plan_create(ctx, &cases[0], &plan) == CONV_OK, "conv_plan_create: %s",
            conv_context_last_error(ctx));
  conv_plan_info info;
  CHECK_STATUS(CONV_OK, conv_plan_info_get(plan, &info));
  printf("K R S C plan: %s %s %.4f ms\n", info.algorithm, info.config, info.time_ms);
  CHECK(strcmp(info.algorithm, "cudnn") == 0 || strcmp(info.algorithm, "padded_gemm") == 0);
  if (poison(&d, &hc, 0) != TEST_PASS) return TEST_FAIL;
  CHECK_STATUS(CONV_OK, conv_plan_execute(plan, 0, d.x, d.w, d.bias, d.y));
  if (check_output(&d, &hc, 0, conv_error_bound(T, CONV_ARITH_TRANSFORM), "K R S C plan") !=
      TEST_PASS)
    return TEST_FAIL;
  conv_plan_destroy(plan);
  dev_case_free(&d);
  host_case_free(&hc);
  CHECK_STATUS(CONV_OK, conv_context_destroy(ctx));
  remove_db(cache);
  return TEST_PASS;
}

/* fp16 and bf16: the device reference kernels read half inputs exactly
 * (they match the CPU reference on the same values, rounded to the type,
 * to float rounding) in every direction and both layouts; and
 * conv_relative_l2 reads a half output: the reference rounded to the type
 * is within the type's rounding (2^-11, 2^-8) of it, and a poisoned
 * element, or an fp16 output past 65504 (inf), is non-finite. */
static int half_reference_and_comparison(void) {
  SKIP_WITHOUT_GPU();
  seed_rng();
  void *scratch;
  CUDA_OK(cudaMalloc(&scratch, CONV_COMPARE_SCRATCH_BYTES));
  for (int i = 0; i < 12; i++) {
    conv_problem p = i % 2 ? random_nhwc_problem(CONV_MATH_STRICT) : random_problem(CONV_MATH_STRICT);
    p.dtype = i % 4 < 2 ? CONV_DTYPE_F16 : CONV_DTYPE_BF16;
    p.direction = every_direction[i % 3];
    if (p.direction != CONV_FORWARD) p.epilogue = CONV_EPILOGUE_NONE;
    pass_case pc;
    if (pass_case_make(&pc, &p) != TEST_PASS) return TEST_FAIL;
    const host_case *hc = &pc.hc;
    char name[CONV_PROBLEM_KEY_MAX];
    describe_problem(&p, name, sizeof name);
    const int64_t count = hc->sh.out_elems;
    float *ref = NULL, *got = malloc((size_t)count * sizeof *got);
    CHECK(got != NULL);
    CUDA_OK(cudaMalloc((void **)&ref, (size_t)count * sizeof(float)));
    if (reference_pass(&pc.d, hc, ref) != TEST_PASS) return TEST_FAIL;
    CUDA_OK(cudaMemcpy(got, ref, (size_t)count * sizeof(float), cudaMemcpyDeviceToHost));
    double num = 0, den = 0;
    for (int64_t j = 0; j < count; j++) {
      num += ((double)got[j] - hc->ref[j]) * ((double)got[j] - hc->ref[j]);
      den += (double)hc->ref[j] * hc->ref[j];
    }
    CHECK_MSG(sqrt(num) <= 1e-6 * sqrt(den), "%s: device reference off by %.3g", name,
              sqrt(num / den));
    /* The reference, rounded to the type, as a candidate's output. */
    CUDA_OK(conv_convert(ref, CONV_DTYPE_F32, pc.d.out, p.dtype, count, 0));
    double rel = -1;
    int64_t nonfinite = -1;
    CUDA_OK(conv_relative_l2(pc.d.out, p.dtype, ref, count, scratch, 0, &rel, &nonfinite));
    const double rounding = p.dtype == CONV_DTYPE_F16 ? 0x1p-11 : 0x1p-8;
    CHECK_MSG(nonfinite == 0 && rel <= rounding, "%s: rounded reference off by %.3g", name, rel);
    CHECK(rel < conv_error_bound_for(&p, CONV_ARITH_DIRECT));
    /* One poisoned element; then, in fp16, one that overflowed. */
    CUDA_OK(conv_fill_poison(pc.d.out, p.dtype, 1, 0));
    CUDA_OK(conv_relative_l2(pc.d.out, p.dtype, ref, count, scratch, 0, &rel, &nonfinite));
    CHECK_MSG(nonfinite == 1, "%s: %lld non-finite, expected the poisoned one", name,
              (long long)nonfinite);
    if (p.dtype == CONV_DTYPE_F16) {
      float *big;
      CUDA_OK(cudaMalloc((void **)&big, sizeof *big));
      const float past_fp16 = 70000.0f;
      CUDA_OK(cudaMemcpy(big, &past_fp16, sizeof past_fp16, cudaMemcpyHostToDevice));
      CUDA_OK(conv_convert(big, CONV_DTYPE_F32, pc.d.out, CONV_DTYPE_F16, 1, 0));
      CUDA_OK(conv_relative_l2(pc.d.out, p.dtype, ref, count, scratch, 0, &rel, &nonfinite));
      CHECK_MSG(nonfinite == 1, "%s: an fp16 inf counted %lld times", name, (long long)nonfinite);
      cudaFree(big);
    }
    cudaFree(ref);
    free(got);
    pass_case_free(&pc);
  }
  cudaFree(scratch);
  return TEST_PASS;
}

static const test_case tests[] = {
    {"reference_matches_cpu", reference_matches_cpu},
    {"every_candidate_matches_reference", every_candidate_matches_reference},
    {"krsc_filters_match_reference", krsc_filters_match_reference},
    {"bias_pass_matches_host", bias_pass_matches_host},
    {"im2col_matches_cpu", im2col_matches_cpu},
    {"filter_to_krsc_matches_cpu", filter_to_krsc_matches_cpu},
    {"half_reference_and_comparison", half_reference_and_comparison},
};
TEST_MAIN(tests)
