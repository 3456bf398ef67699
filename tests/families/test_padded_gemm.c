/* test_padded_gemm.c -- the padded_gemm family.  CPU: its scope (TF32
 * NCHW forward 3x3 stride-1 "same" problems on compute capability 9.0
 * only), that every config it lists plans with the grid and staging its
 * kernel assumes, and what it refuses.  GPU (skipped without one, or off
 * compute capability 9.0): every compiled tiling against the CPU
 * reference, and filters off 16-byte alignment. */
#include <string.h>

#include "algorithms/padded_gemm.h"
#include "algorithms/algorithm.h"
#include "tests/gpu_support.h"
#include "tests/problem_fixtures.h"

static conv_problem tf32_problem(int64_t n, int64_t c, int64_t h, int64_t w, int64_t k) {
  conv_problem p;
  conv_problem_init(&p);
  p.n = n, p.c = c, p.h = h, p.w = w, p.k = k, p.r = p.s = 3;
  p.pad_h = p.pad_w = 1;
  p.math = CONV_MATH_TF32;
  return p;
}

static int scope(void) {
  const conv_problem p = tf32_problem(16, 64, 56, 56, 64);
  if (wgmma_family_scope(CONV_ALGO_PADDED_GEMM, "padded_gemm", &p,
                         &(conv_config){2, {256, 4}, 0}) != TEST_PASS)
    return TEST_FAIL;
  const conv_algorithm *pg = conv_registry_find(CONV_ALGO_PADDED_GEMM);
  conv_env env = hopper_env();
  conv_problem other;
  static const char *const outside[] = {"NHWC",       "backward data", "stride 2", "1x1",
                                        "padding 0",  "dilation 2",    "2 groups", "C 12",
                                        "K 96",       "W 94"};
  for (int i = 0; i < (int)(sizeof outside / sizeof outside[0]); i++) {
    other = p;
    switch (i) {
      case 0: other.layout = CONV_LAYOUT_NHWC; break;
      case 1: other.direction = CONV_BACKWARD_DATA; break;
      case 2: other.stride_h = other.stride_w = 2; break;
      case 3: other.r = other.s = 1, other.pad_h = other.pad_w = 0; break;
      case 4: other.pad_h = other.pad_w = 0; break;
      case 5: other.dil_h = other.dil_w = 2, other.pad_h = other.pad_w = 2; break;
      case 6: other.groups = 2; break;
      case 7: other.c = 12; break;
      case 8: other.k = 96; break;
      default: other.w = 94; break;
    }
    CHECK_MSG(!pg->applicable(&other, &env), "%s should be outside", outside[i]);
  }
  other = p, other.w = 93, other.h = 5; /* the widest rows a stage holds; rows need not be square */
  CHECK(pg->applicable(&other, &env));
  return TEST_PASS;
}

/* Every tiling plans for resnet50's stride-1 3x3 shapes and is listed once;
 * the grid covers every padded position and output channel, a stage holds
 * the tile's positions and the last taps' halo, and the shared memory
 * fits Hopper's opt-in limit. */
static int configs_plan(void) {
  const conv_algorithm *pg = conv_registry_find(CONV_ALGO_PADDED_GEMM);
  conv_env env = hopper_env();
  const int tilings = conv_padded_tilings(NULL, 0);
  CHECK(tilings > 0 && tilings <= 8);
  const conv_problem shapes[] = {
      tf32_problem(16, 64, 56, 56, 64),  tf32_problem(16, 128, 28, 28, 128),
      tf32_problem(16, 256, 14, 14, 256), tf32_problem(16, 512, 7, 7, 512),
      tf32_problem(1, 8, 3, 93, 64),
  };
  for (int i = 0; i < (int)(sizeof shapes / sizeof shapes[0]); i++) {
    const conv_problem *p = &shapes[i];
    conv_config configs[8];
    int n = -1;
    CHECK_STATUS(CONV_OK, pg->configs(p, &env, configs, 8, &n, NULL));
    CHECK_MSG(n == tilings, "shape %d: %d of %d tilings listed", i, n, tilings);
    for (int j = 0; j < n; j++) {
      CHECK(configs[j].count == 2);
      for (int k = 0; k < j; k++) CHECK(!conv_config_equal(&configs[j], &configs[k]));
      const conv_padded_tiling tiling = {(int)configs[j].values[0], (int)configs[j].values[1]};
      conv_padded_launch l;
      char why[160] = "";
      CHECK_MSG(conv_padded_plan(p, &tiling, &l, why, sizeof why), "%s", why);
      CHECK(l.pitch == p->w + 2 && l.padded_rows == p->h + 2);
      CHECK(l.positions == p->n * (p->h + 2) * (p->w + 2));
      CHECK((int64_t)l.grid[0] * tiling.positions >= l.positions);
      CHECK((int64_t)(l.grid[0] - 1) * tiling.positions < l.positions);
      CHECK((int64_t)l.grid[1] * 64 == p->k);
      CHECK(l.staged % 8 == 0 && l.staged >= tiling.positions + 2 * l.pitch + 2);
      CHECK(l.staged < tiling.positions + 2 * l.pitch + 2 + 8);
      CHECK(l.smem_bytes <= ((size_t)227 << 10) && l.threads == 256);
      CHECK(l.stage_floats % 32 == 0); /* 128-byte aligned stages */
    }
  }
  return TEST_PASS;
}

/* Untrusted configs (a shipped cache's rows) and sizes the kernel's 32-bit
 * indexing cannot take are refused with a reason, never planned. */
static int refusals(void) {
  const conv_algorithm *pg = conv_registry_find(CONV_ALGO_PADDED_GEMM);
  conv_env env = hopper_env();
  const conv_problem p = tf32_problem(2, 16, 8, 8, 64);
  conv_prepared prep;
  conv_error err = {CONV_OK, ""};
  CHECK_STATUS(CONV_UNSUPPORTED,
               pg->prepare(&p, &env, &(conv_config){2, {192, 4}, 0}, &prep, &err));
  CHECK(strstr(err.message, "not compiled") != NULL);
  CHECK_STATUS(CONV_UNSUPPORTED, pg->prepare(&p, &env, &(conv_config){1, {256}, 0}, &prep, &err));
  CHECK_STATUS(CONV_UNSUPPORTED,
               pg->prepare(&p, &env, &(conv_config){2, {256, -4}, 0}, &prep, &err));
  const conv_problem huge = tf32_problem(4096, 256, 64, 64, 256); /* x: 2^32 floats */
  conv_padded_launch l;
  char why[160] = "";
  const conv_padded_tiling tiling = {256, 4};
  CHECK(!conv_padded_plan(&huge, &tiling, &l, why, sizeof why));
  CHECK(strstr(why, "32-bit") != NULL);
  return TEST_PASS;
}

/* padded_gemm (TF32, compute capability 9.0 only) on every compiled
 * tiling: a resnet-like 3x3 layer, rows that are not square and tiles
 * that straddle images, the widest rows a stage holds (W = 93) with one
 * channel chunk, 7x7 images (a 9x9 padded grid) at batch 16, three
 * output-channel blocks over an odd number of chunks, every epilogue.
 * Then filters 4 bytes off 16-byte alignment, which take the kernel's
 * scalar loads. */
static int padded_gemm_matches_reference(void) {
  SKIP_WITHOUT_GPU();
  const int device = wgmma_device("padded_gemm");
  if (device != TEST_PASS) return device;
  seed_rng();
  const conv_math T = CONV_MATH_TF32;
  const conv_epilogue NONE = CONV_EPILOGUE_NONE, BIAS = CONV_EPILOGUE_BIAS,
                      RELU = CONV_EPILOGUE_BIAS_RELU;
  const conv_problem cases[] = {
      direct_problem(2, 64, 14, 14, 64, 3, 3, 1, 1, 1, 1, BIAS, T),  /* resnet-like */
      direct_problem(3, 16, 9, 11, 128, 3, 3, 1, 1, 1, 1, RELU, T),  /* not square */
      direct_problem(1, 8, 5, 93, 64, 3, 3, 1, 1, 1, 1, NONE, T),    /* widest rows */
      direct_problem(16, 32, 7, 7, 64, 3, 3, 1, 1, 1, 1, NONE, T),   /* 9x9 grids */
      direct_problem(2, 24, 30, 20, 192, 3, 3, 1, 1, 1, 1, BIAS, T), /* 3 chunks, 3 blocks */
  };
  const size_t ncases = sizeof cases / sizeof cases[0];
  family_count count;
  if (run_family_on_cases(&conv_algorithm_padded_gemm, cases, ncases, NULL, &count) != TEST_PASS)
    return TEST_FAIL;
  const int tilings = conv_padded_tilings(NULL, 0);
  CHECK_MSG(count.ran == tilings * (int)ncases && count.wrong_caught == 0 &&
                count.unsupported == 0,
            "padded_gemm: %d of %d tiling-cases ran, %d wrong, %d unsupported", count.ran,
            tilings * (int)ncases, count.wrong_caught, count.unsupported);

  host_case hc;
  dev_case d;
  if (host_case_make(&hc, &cases[0]) != TEST_PASS || dev_case_make(&d, &hc) != TEST_PASS)
    return TEST_FAIL;
  const size_t w_count = (size_t)(hc.p.k * hc.p.c * 9);
  float *w_off;
  CUDA_OK(cudaMalloc((void **)&w_off, (w_count + 1) * sizeof(float)));
  CUDA_OK(cudaMemcpy(w_off + 1, d.w, w_count * sizeof(float), cudaMemcpyDeviceToDevice));
  conv_padded_tiling tiling;
  conv_padded_launch launch;
  char why[160] = "";
  CHECK(conv_padded_tilings(&tiling, 1) >= 1);
  CHECK_MSG(conv_padded_plan(&hc.p, &tiling, &launch, why, sizeof why), "%s", why);
  CUDA_OK(conv_padded_configure(&launch));
  if (poison(&d, &hc, 0) != TEST_PASS) return TEST_FAIL;
  CUDA_OK(conv_padded_forward(&launch, d.x, w_off + 1, d.bias, d.y, 0));
  CUDA_OK(cudaDeviceSynchronize());
  if (check_output(&d, &hc, 0, conv_error_bound_for(&hc.p, CONV_ARITH_DIRECT),
                   "padded_gemm, filters 4 bytes off 16-byte alignment") != TEST_PASS)
    return TEST_FAIL;
  cudaFree(w_off);
  dev_case_free(&d);
  host_case_free(&hc);
  return TEST_PASS;
}

static const labelled_test_case tests[] = {
    {"scope", scope, "cpu"},
    {"configs_plan", configs_plan, "cpu"},
    {"refusals", refusals, "cpu"},
    {"padded_gemm_matches_reference", padded_gemm_matches_reference, "gpu"},
};
TEST_MAIN(tests)
