/*
 * test_gpu.c -- GPU tests of the kernels: the reference kernel against a
 * CPU reference in double, and every candidate family's configs against
 * the CPU reference on random and chosen shapes.  Each skips (exit 77) on a
 * machine without a GPU.  Inputs are fresh random numbers each run; the
 * seed is printed and can be fixed with CONVTUNE_TEST_SEED to replay a
 * failure.  Also the im2col kernel against the CPU.  Plans end to end:
 * test_plans.c.
 */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "algorithms/channel_split.h"
#include "algorithms/depthwise_nhwc.h"
#include "algorithms/direct_channel.h"
#include "algorithms/im2col.h"
#include "algorithms/kernels.h"
#include "algorithms/patch.h"
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
    CUDA_OK(conv_relative_l2(d.y, ref, hc.sh.y_elems, scratch, 0, &rel, &nonfinite));
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
    CUDA_OK(conv_relative_l2(d.y, ref, hc.sh.y_elems, scratch, 0, &rel, &nonfinite));
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
        p.n = rng_int(30, 40), p.k = 8 * rng_int(1, 3);
      }
      CHECK(conv_problem_validate(&p, NULL, 0) == CONV_OK);
    }
    if (family_sweep_run(&sweep, &p) != TEST_PASS) return TEST_FAIL;
  }
  for (int a = 0; a < sweep.count; a++) {
    printf("%s: %d configs matched the CPU reference, %d wrong and caught by validation, "
           "%d not supported for their shape\n",
           algos[a]->name, counts[a].ran, counts[a].wrong_caught, counts[a].unsupported);
    /* The backward families take no forward problem (test_backward runs
     * them), the dynamic ones no convolution (test_dynamic runs them);
     * the quick run's four shapes have no dense channels-last one
     * (nhwc_dense_matches_reference runs gemm_nhwc); random shapes seldom
     * have padded_gemm's (C a multiple of 8, K of 64, on compute
     * capability 9.0: padded_gemm_matches_reference runs it) or
     * stem_gemm's (TF32, C R S <= 256: stem_gemm_matches_reference). */
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

static bool is_window(const void *state) {
  return ((const conv_direct_launch *)state)->tiling.layout == CONV_DIRECT_WINDOW;
}

static bool is_window_float4(const void *state) {
  return is_window(state) && ((const conv_direct_launch *)state)->vector_loads;
}

static bool is_tensor_core(const void *state) {
  return ((const conv_patch_launch *)state)->tiling.kind != CONV_PATCH_FMA;
}

static bool is_wgmma(const void *state) {
  return ((const conv_patch_launch *)state)->tiling.kind == CONV_PATCH_WGMMA;
}

/* Whether the window layout takes p: square 3, 5 or 7 filters, equal
 * strides of 1, or 2 undilated (direct_window.h). */
static bool window_takes(const conv_problem *p) {
  return p->r == p->s && (p->r == 3 || p->r == 5 || p->r == 7) && p->stride_h == p->stride_w &&
         (p->stride_h == 1 || (p->stride_h == 2 && p->dil_h == 1 && p->dil_w == 1));
}

/* Whether it has float4 kernels for p: undilated, width a multiple of 4,
 * and the padding of the compiled ones, (r - 1) / 2 modulo 4. */
static bool window_vector_takes(const conv_problem *p) {
  return window_takes(p) && p->dil_h == 1 && p->dil_w == 1 && p->w % 4 == 0 &&
         p->pad_w % 4 == (p->r - 1) / 2 % 4;
}

/* The window layout ran exactly where it applies, with float4 loads exactly
 * where they apply. */
static int check_window_layouts(conv_env *env, const conv_problem *p, const char *name) {
  const int windows = prepared_configs(env, &conv_algorithm_direct_channel, p, is_window);
  const int vector = prepared_configs(env, &conv_algorithm_direct_channel, p, is_window_float4);
  printf("%s: %d window layout configs, %d with float4 loads\n", name, windows, vector);
  CHECK_MSG(window_takes(p) == (windows > 0), "window layout %s on %s",
            windows > 0 ? "ran" : "did not run", name);
  CHECK_MSG(window_vector_takes(p) == (vector > 0), "float4 window loads %s on %s",
            vector > 0 ? "ran" : "did not run", name);
  return TEST_PASS;
}

/* Our direct kernels on the shapes they exist for, larger than the random
 * problems: several tiles per image, staged channels, 31x31 filters, widths
 * that are and are not multiples of 4 (vector and scalar loads), odd
 * borders; for the window layout each compiled filter size and stride,
 * unequal dilations, outputs that are and are not a multiple of the
 * outputs per thread.  Every config must match the CPU reference. */
static int direct_channel_matches_reference(void) {
  SKIP_WITHOUT_GPU();
  seed_rng();
  const conv_math S = CONV_MATH_STRICT, T = CONV_MATH_TF32;
  conv_problem cases[] = {
      direct_problem(2, 8, 56, 56, 8, 3, 3, 1, 1, 1, 8, CONV_EPILOGUE_BIAS_RELU, S), /* depthwise */
      direct_problem(2, 6, 57, 57, 6, 3, 3, 2, 1, 1, 6, CONV_EPILOGUE_NONE, S),
      direct_problem(1, 4, 40, 44, 4, 31, 31, 1, 15, 1, 4, CONV_EPILOGUE_BIAS, S),
      direct_problem(1, 3, 37, 35, 3, 31, 31, 1, 15, 1, 3, CONV_EPILOGUE_NONE, T),
      direct_problem(2, 4, 33, 30, 8, 5, 5, 1, 4, 2, 4, CONV_EPILOGUE_NONE, S), /* multiplier 2 */
      direct_problem(1, 1, 130, 131, 1, 3, 3, 1, 8, 8, 1, CONV_EPILOGUE_NONE, S), /* 1->1, d8 */
      direct_problem(1, 1, 128, 128, 1, 3, 3, 1, 1, 1, 1, CONV_EPILOGUE_BIAS, S),
      direct_problem(1, 16, 67, 64, 1, 3, 3, 1, 4, 4, 1, CONV_EPILOGUE_NONE, S), /* 16->1 */
      direct_problem(1, 32, 40, 36, 1, 3, 3, 1, 1, 1, 1, CONV_EPILOGUE_BIAS_RELU, S),
      direct_problem(1, 3, 64, 64, 16, 3, 3, 1, 1, 1, 1, CONV_EPILOGUE_BIAS, T), /* 3->16 */
      direct_problem(2, 3, 45, 47, 16, 7, 7, 2, 3, 1, 1, CONV_EPILOGUE_NONE, S), /* stem-like */
      direct_problem(1, 16, 20, 20, 16, 3, 3, 1, 1, 1, 2, CONV_EPILOGUE_NONE, S), /* 8x8 groups */
      direct_problem(1, 2, 29, 33, 2, 1, 7, 1, 3, 1, 2, CONV_EPILOGUE_NONE, S), /* 1 x 7 */
      direct_problem(1, 3, 41, 50, 6, 3, 3, 1, 3, 2, 1, CONV_EPILOGUE_BIAS, S), /* dil 2 x 3 */
      direct_problem(1, 1, 25, 23, 1, 3, 3, 1, 10, 10, 1, CONV_EPILOGUE_NONE, S), /* dil 10 */
      direct_problem(2, 6, 31, 29, 6, 7, 7, 1, 3, 1, 6, CONV_EPILOGUE_BIAS_RELU, S), /* dw 7x7 */
      direct_problem(1, 5, 38, 41, 5, 5, 5, 2, 2, 1, 5, CONV_EPILOGUE_BIAS, S), /* dw 5x5 s2 */
      direct_problem(1, 2, 30, 26, 2, 3, 3, 1, 0, 2, 2, CONV_EPILOGUE_NONE, S), /* valid, dil 2 */
      direct_problem(2, 4, 32, 32, 4, 3, 3, 2, 0, 1, 4, CONV_EPILOGUE_NONE, S), /* s2, no pad */
      direct_problem(1, 32, 23, 26, 16, 3, 3, 1, 1, 1, 1, CONV_EPILOGUE_BIAS, S), /* 32->16 */
      direct_problem(1, 1, 300, 257, 1, 3, 3, 1, 1, 1, 1, CONV_EPILOGUE_NONE, S), /* many blocks */
      direct_problem(1, 1, 70, 75, 1, 5, 5, 1, 6, 3, 1, CONV_EPILOGUE_BIAS_RELU, T), /* 5x5 d3 */
      /* float4 window loads: width a multiple of 4, "same" padding */
      direct_problem(2, 4, 34, 36, 4, 3, 3, 2, 1, 1, 4, CONV_EPILOGUE_BIAS_RELU, S), /* dw s2 */
      direct_problem(1, 3, 44, 48, 16, 7, 7, 2, 3, 1, 1, CONV_EPILOGUE_BIAS, S), /* stem-like */
      direct_problem(1, 5, 40, 40, 5, 5, 5, 2, 2, 1, 5, CONV_EPILOGUE_NONE, S), /* dw 5x5 s2 */
      direct_problem(1, 4, 27, 44, 4, 5, 5, 1, 2, 1, 4, CONV_EPILOGUE_NONE, S), /* dw 5x5 s1 */
      direct_problem(1, 2, 20, 24, 2, 3, 3, 1, 5, 1, 2, CONV_EPILOGUE_NONE, S), /* pad 5 */
      /* up to 128 output channels: a ConvNeXt-like 4x4 stride-4 stem */
      direct_problem(2, 3, 36, 40, 96, 4, 4, 4, 0, 1, 1, CONV_EPILOGUE_BIAS, S),
      direct_problem(1, 8, 19, 22, 128, 3, 3, 1, 1, 1, 1, CONV_EPILOGUE_NONE, T),
  };
  cases[4].pad_w = 1; /* asymmetric padding */
  cases[12].pad_h = 0;
  cases[13].dil_w = 3;
  cases[17].pad_w = 3; /* and wider than the dilation needs */
  family_count count;
  if (run_family_on_cases(&conv_algorithm_direct_channel, cases, sizeof cases / sizeof cases[0],
                          check_window_layouts, &count) != TEST_PASS)
    return TEST_FAIL;
  CHECK(count.wrong_caught == 0);
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

/* The fft candidate on shapes that exercise its tiling: partial tiles at
 * the bottom and right, tiles smaller and larger than the image, whole-image
 * transforms of cuFFT-friendly but not power-of-two sizes, valid and
 * asymmetric padding, non-square filters, 16 channels in and out, groups
 * (depthwise 31x31, a channel multiplier, 3 in and 2 out a group), every
 * epilogue, and TF32.  Every config must match the CPU reference within
 * the transform bound (conv_error_bound). */
static int fft_matches_reference(void) {
  SKIP_WITHOUT_GPU();
  seed_rng();
  const conv_math S = CONV_MATH_STRICT, T = CONV_MATH_TF32;
  conv_problem cases[] = {
      direct_problem(2, 3, 40, 37, 5, 7, 7, 1, 3, 1, 1, CONV_EPILOGUE_BIAS_RELU, S),
      direct_problem(1, 4, 33, 64, 6, 5, 3, 1, 2, 1, 1, CONV_EPILOGUE_NONE, S),
      direct_problem(1, 2, 20, 24, 3, 11, 11, 1, 0, 1, 1, CONV_EPILOGUE_BIAS, S), /* valid */
      direct_problem(2, 16, 30, 30, 16, 3, 3, 1, 1, 1, 1, CONV_EPILOGUE_BIAS, T),
      direct_problem(1, 2, 64, 64, 2, 31, 31, 1, 15, 1, 1, CONV_EPILOGUE_NONE, S),
      direct_problem(3, 5, 45, 29, 4, 9, 5, 1, 4, 1, 1, CONV_EPILOGUE_BIAS_RELU, T),
      /* Groups: depthwise 31x31, a channel multiplier of 2, 3 in and 2 out a group. */
      direct_problem(2, 6, 40, 40, 6, 31, 31, 1, 15, 1, 6, CONV_EPILOGUE_BIAS, S),
      direct_problem(1, 4, 30, 27, 8, 5, 5, 1, 2, 1, 4, CONV_EPILOGUE_NONE, T),
      direct_problem(2, 6, 25, 33, 4, 7, 7, 1, 3, 1, 2, CONV_EPILOGUE_BIAS_RELU, S),
  };
  cases[1].pad_w = 1; /* asymmetric padding */
  cases[5].pad_w = 0;
  family_count count;
  if (run_family_on_cases(&conv_algorithm_fft, cases, sizeof cases / sizeof cases[0], NULL,
                          &count) != TEST_PASS)
    return TEST_FAIL;
  CHECK(count.unsupported == 0);
  return TEST_PASS;
}

/* The tensor-core kernels ran exactly where they apply: TF32 mode, 4 or 8
 * channel tiles a warp, and for wgmma compute capability 9.0. */
static int check_tensor_cores(conv_env *env, const conv_problem *p, const char *name) {
  const int cores = prepared_configs(env, &conv_algorithm_patch, p, is_tensor_core);
  const int wgmma = prepared_configs(env, &conv_algorithm_patch, p, is_wgmma);
  printf("%s: %d tensor-core configs, %d of them wgmma\n", name, cores, wgmma);
  const bool applies = p->math == CONV_MATH_TF32 && p->k % 32 == 0;
  CHECK_MSG(applies == (cores > 0), "tensor-core configs %s on %s",
            cores > 0 ? "ran" : "did not run", name);
  const bool hopper = env->device.cc_major == 9 && env->device.cc_minor == 0;
  CHECK_MSG((applies && hopper) == (wgmma > 0), "wgmma configs %s on %s",
            wgmma > 0 ? "ran" : "did not run", name);
  return TEST_PASS;
}

/* The patch candidate on each compiled patch size: image counts that leave
 * a partial group of images, channel counts that leave a partial chunk
 * (and, for the tensor cores, a partial block of 8), several blocks of
 * output channels, every epilogue; both kernels in TF32 mode where K is a
 * multiple of 32, else FMA only.  Every config must match the CPU
 * reference. */
static int patch_matches_reference(void) {
  SKIP_WITHOUT_GPU();
  seed_rng();
  const conv_math S = CONV_MATH_STRICT, T = CONV_MATH_TF32;
  const conv_epilogue NONE = CONV_EPILOGUE_NONE, BIAS = CONV_EPILOGUE_BIAS,
                      RELU = CONV_EPILOGUE_BIAS_RELU;
  const conv_problem cases[] = {
      direct_problem(70, 32, 4, 4, 64, 3, 3, 1, 1, 1, 1, RELU, S),
      direct_problem(65, 20, 4, 4, 32, 3, 3, 1, 1, 1, 1, NONE, T),
      direct_problem(50, 32, 4, 4, 64, 3, 3, 1, 1, 1, 1, RELU, T),
      direct_problem(33, 5, 8, 8, 16, 3, 3, 1, 1, 1, 1, BIAS, T),
      direct_problem(40, 24, 8, 8, 32, 3, 3, 1, 1, 1, 1, NONE, T),
      direct_problem(23, 40, 8, 8, 64, 3, 3, 1, 1, 1, 1, BIAS, T),
      direct_problem(37, 17, 8, 8, 40, 3, 3, 1, 1, 1, 1, RELU, S),
      direct_problem(9, 3, 16, 16, 8, 3, 3, 1, 1, 1, 1, BIAS, S),
      direct_problem(5, 17, 16, 16, 64, 3, 3, 1, 1, 1, 1, RELU, T),
  };
  family_count count;
  if (run_family_on_cases(&conv_algorithm_patch, cases, sizeof cases / sizeof cases[0],
                          check_tensor_cores, &count) != TEST_PASS)
    return TEST_FAIL;
  CHECK(count.wrong_caught == 0);
  return TEST_PASS;
}

static bool is_split(const void *state) {
  return ((const conv_split_launch *)state)->tiling.splits > 1;
}

/* Configs that split the channel sum (and add the parts in a second
 * kernel) ran wherever there are two channels to split. */
static int check_splits(conv_env *env, const conv_problem *p, const char *name) {
  const int split = prepared_configs(env, &conv_algorithm_channel_split, p, is_split);
  printf("%s: %d configs with split channel sums\n", name, split);
  CHECK_MSG((p->c >= 2) == (split > 0), "split configs %s on %s", split > 0 ? "ran" : "did not run",
            name);
  return TEST_PASS;
}

static bool is_window_kernel(const void *state) {
  const conv_dwnhwc_launch *l = state;
  return l->tiling.form == CONV_DWNHWC_THREAD_LOADS && (l->s == 3 || l->s == 5 || l->s == 7) &&
         l->r == l->s && l->dil_w == 1 && l->stride_w <= 2;
}

static bool is_rolling(const void *state) {
  return ((const conv_dwnhwc_launch *)state)->tiling.form == CONV_DWNHWC_ROLLING;
}

static bool is_row_pairs(const void *state) {
  return ((const conv_dwnhwc_launch *)state)->tiling.form == CONV_DWNHWC_ROW_PAIRS;
}

/* Window, rolling, row-pairs and generic kernels ran where the filter
 * takes their form, and float4 configs where the channels allow them. */
static int check_nhwc_kernels(conv_env *env, const conv_problem *p, const char *name) {
  const int windows = prepared_configs(env, &conv_algorithm_depthwise_nhwc, p, is_window_kernel);
  const int rolling = prepared_configs(env, &conv_algorithm_depthwise_nhwc, p, is_rolling);
  const int pairs = prepared_configs(env, &conv_algorithm_depthwise_nhwc, p, is_row_pairs);
  const bool square = (p->s == 3 || p->s == 5 || p->s == 7) && p->r == p->s;
  const bool takes_window = square && p->dil_w == 1 && p->stride_w <= 2;
  const bool takes_rolling = square && p->stride_h == 1 && p->stride_w == 1 && p->dil_h == 1 &&
                             p->dil_w == 1 && p->k == p->c && p->c % 4 == 0;
  const bool takes_pairs = square && p->stride_h == 1 && p->stride_w == 1 && p->dil_h == 1 &&
                           p->dil_w == 1;
  printf("%s: %d window-form configs, %d rolling, %d row pairs\n", name, windows, rolling, pairs);
  CHECK_MSG(takes_window == (windows > 0), "window configs %s on %s", windows ? "ran" : "did not run",
            name);
  CHECK_MSG(takes_rolling == (rolling > 0), "rolling configs %s on %s",
            rolling ? "ran" : "did not run", name);
  CHECK_MSG(takes_pairs == (pairs > 0), "row-pairs configs %s on %s", pairs ? "ran" : "did not run",
            name);
  return TEST_PASS;
}

/* Channels-last depthwise problems through cuDNN and depthwise_nhwc: the
 * ConvNeXt and MobileNet shapes, every filter form (window 3/5/7 with
 * stride 1 and 2, rolling at stride 1 over several bands of rows and
 * column tiles, row pairs at stride 1 with an odd last row, generic for
 * other sizes, dilation and strides), channels
 * that float4 cannot take (6, multiplier 2), partial channel blocks and
 * row bands, every epilogue, both math modes. */
static int nhwc_depthwise_matches_reference(void) {
  SKIP_WITHOUT_GPU();
  seed_rng();
  const conv_math S = CONV_MATH_STRICT, T = CONV_MATH_TF32;
  const conv_epilogue NONE = CONV_EPILOGUE_NONE, BIAS = CONV_EPILOGUE_BIAS,
                      RELU = CONV_EPILOGUE_BIAS_RELU;
  conv_problem cases[] = {
      direct_problem(2, 96, 14, 14, 96, 7, 7, 1, 3, 1, 96, BIAS, S),  /* ConvNeXt block */
      direct_problem(1, 40, 19, 23, 40, 3, 3, 2, 1, 1, 40, RELU, T),  /* MobileNet s2 */
      direct_problem(2, 36, 17, 18, 36, 5, 5, 1, 2, 1, 36, NONE, S),  /* 5x5 */
      direct_problem(1, 132, 9, 11, 132, 5, 5, 2, 2, 1, 132, BIAS, S),/* 5x5 s2, 132 > 128 */
      direct_problem(1, 6, 20, 21, 6, 3, 3, 1, 2, 2, 6, BIAS, S),     /* dilation 2: generic */
      direct_problem(2, 8, 13, 12, 16, 3, 3, 1, 1, 1, 8, RELU, S),    /* multiplier 2 */
      direct_problem(1, 12, 16, 16, 12, 4, 2, 3, 0, 1, 12, NONE, T),  /* 4x2 stride 3 */
      direct_problem(3, 5, 7, 9, 5, 7, 7, 1, 3, 1, 5, BIAS, S),       /* 5 channels, 7x7 */
      direct_problem(2, 132, 37, 29, 132, 3, 3, 1, 1, 1, 132, RELU, S), /* rolling: bands */
      direct_problem(1, 64, 40, 61, 64, 7, 7, 1, 3, 1, 64, BIAS, T),  /* rolling: column tiles */
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) cases[i].layout = CONV_LAYOUT_NHWC;
  family_count count;
  if (run_family_on_cases(&conv_algorithm_depthwise_nhwc, cases, sizeof cases / sizeof cases[0],
                          check_nhwc_kernels, &count) != TEST_PASS)
    return TEST_FAIL;
  CHECK(count.wrong_caught == 0);
  /* cuDNN's NHWC strides, on the shapes models have (it need not take the
   * odd ones, and a wrong engine only has to be caught). */
  return run_family_on_cases(&conv_algorithm_cudnn, cases, 3, NULL, &count);
}

/* Channels-last dense and grouped problems (KRSC filters) through cuDNN
 * and, for one group, gemm_nhwc: ConvNeXt's 2x2 stride-2 downsampling and
 * 4x4 stride-4 stem (3 channels: no float4 gather), a 3x3, a 1x1 (read in
 * place), a grouped 3x3, strided and dilated ones, a batch of 5 (a partial
 * last chunk of images), every epilogue, both math modes.  Each family
 * must take each of its problems with at least one config. */
static int nhwc_dense_matches_reference(void) {
  SKIP_WITHOUT_GPU();
  seed_rng();
  const conv_math S = CONV_MATH_STRICT, T = CONV_MATH_TF32;
  conv_problem cases[] = {
      direct_problem(2, 96, 28, 28, 192, 2, 2, 2, 0, 1, 1, CONV_EPILOGUE_BIAS, S), /* ConvNeXt */
      direct_problem(1, 32, 15, 17, 48, 3, 3, 1, 1, 1, 1, CONV_EPILOGUE_BIAS_RELU, T),
      direct_problem(3, 64, 7, 9, 40, 1, 1, 1, 0, 1, 1, CONV_EPILOGUE_NONE, S),
      direct_problem(2, 64, 12, 12, 64, 3, 3, 1, 1, 1, 4, CONV_EPILOGUE_BIAS, T), /* 16 per group */
      direct_problem(1, 24, 20, 19, 36, 3, 3, 2, 1, 1, 1, CONV_EPILOGUE_NONE, T),
      direct_problem(2, 3, 32, 36, 96, 4, 4, 4, 0, 1, 1, CONV_EPILOGUE_BIAS, S), /* stem */
      direct_problem(5, 20, 11, 13, 24, 3, 3, 1, 2, 2, 1, CONV_EPILOGUE_BIAS_RELU, S),
      direct_problem(5, 40, 9, 9, 36, 1, 1, 1, 0, 1, 1, CONV_EPILOGUE_BIAS_RELU, T),
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    cases[i].layout = CONV_LAYOUT_NHWC;
    family_count count;
    if (run_family_on_cases(&conv_algorithm_cudnn, &cases[i], 1, NULL, &count) != TEST_PASS)
      return TEST_FAIL;
    CHECK_MSG(count.ran > 0, "case %zu: no cuDNN engine ran the NHWC problem", i);
    if (cases[i].groups != 1) continue;
    if (run_family_on_cases(&conv_algorithm_gemm_nhwc, &cases[i], 1, NULL, &count) != TEST_PASS)
      return TEST_FAIL;
    CHECK_MSG(count.ran > 0 && count.wrong_caught == 0, "case %zu: gemm_nhwc ran %d configs", i,
              count.ran);
  }
  return TEST_PASS;
}

/* channel_split on small outputs with many channels: the 3x3 and 1x1
 * kernels and the generic one (5x3, stride 2; dilation; 11x11, too large
 * to stage for 64 output channels), K and C that no tile divides, a batch
 * of 2, every epilogue. */
static int channel_split_matches_reference(void) {
  SKIP_WITHOUT_GPU();
  seed_rng();
  const conv_math S = CONV_MATH_STRICT, T = CONV_MATH_TF32;
  const conv_problem cases[] = {
      direct_problem(1, 256, 8, 8, 256, 3, 3, 1, 1, 1, 1, CONV_EPILOGUE_BIAS_RELU, S),
      direct_problem(2, 37, 9, 7, 40, 3, 3, 1, 1, 1, 1, CONV_EPILOGUE_BIAS, T),
      direct_problem(1, 64, 56, 56, 64, 3, 3, 1, 1, 1, 1, CONV_EPILOGUE_NONE, T),
      direct_problem(1, 20, 12, 11, 24, 1, 1, 1, 0, 1, 1, CONV_EPILOGUE_NONE, S),
      direct_problem(1, 13, 15, 14, 16, 5, 3, 2, 2, 1, 1, CONV_EPILOGUE_BIAS_RELU, S),
      direct_problem(1, 9, 20, 20, 8, 3, 3, 1, 2, 2, 1, CONV_EPILOGUE_NONE, S),
      direct_problem(1, 4, 16, 16, 8, 11, 11, 1, 5, 1, 1, CONV_EPILOGUE_BIAS, S),
      direct_problem(3, 1, 10, 10, 8, 3, 3, 1, 1, 1, 1, CONV_EPILOGUE_NONE, S),
  };
  family_count count;
  if (run_family_on_cases(&conv_algorithm_channel_split, cases, sizeof cases / sizeof cases[0],
                          check_splits, &count) != TEST_PASS)
    return TEST_FAIL;
  CHECK(count.wrong_caught == 0);
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

static const test_case tests[] = {
    {"reference_matches_cpu", reference_matches_cpu},
    {"every_candidate_matches_reference", every_candidate_matches_reference},
    {"direct_channel_matches_reference", direct_channel_matches_reference},
    {"fft_matches_reference", fft_matches_reference},
    {"patch_matches_reference", patch_matches_reference},
    {"channel_split_matches_reference", channel_split_matches_reference},
    {"nhwc_depthwise_matches_reference", nhwc_depthwise_matches_reference},
    {"nhwc_dense_matches_reference", nhwc_dense_matches_reference},
    {"krsc_filters_match_reference", krsc_filters_match_reference},
    {"bias_pass_matches_host", bias_pass_matches_host},
    {"im2col_matches_cpu", im2col_matches_cpu},
    {"filter_to_krsc_matches_cpu", filter_to_krsc_matches_cpu},
};
TEST_MAIN(tests)
