/* test_patch.c -- the patch family (one filter bank over many small
 * images).  CPU: its scope, forward and backward-data, and its launch
 * shapes: FMA, mma and wgmma kernels, and the tilings it refuses.  GPU
 * (skipped without one): every config against the CPU reference on each
 * compiled patch size, the tensor-core kernels exactly where they apply,
 * and its backward-data. */
#include <string.h>

#include "algorithms/patch.h"
#include "tests/gpu_support.h"

/* The patch candidate's scope and launch shapes need no GPU. */
static int patch_configs(void) {
  const conv_algorithm *patch = conv_registry_find(CONV_ALGO_PATCH);
  CHECK(patch != NULL && strcmp(patch->name, "patch") == 0);
  conv_env env;
  memset(&env, 0, sizeof env);
  conv_problem p;
  conv_problem_init(&p);
  p.n = 20480; p.c = 32; p.h = 4; p.w = 4; p.k = 64; p.r = 3; p.s = 3; /* seed1_patch4 */
  p.pad_h = p.pad_w = 1;
  CHECK(patch->applicable(&p, &env));
  /* Backward-data as its transposed view (64 -> 32 channels, the same
   * geometry), where C is a multiple of 8; never backward-filter. */
  conv_problem bwd = p;
  bwd.direction = CONV_BACKWARD_DATA;
  CHECK(patch->applicable(&bwd, &env));
  conv_config view_configs[64];
  int nview = -1;
  CHECK_STATUS(CONV_OK, patch->configs(&bwd, &env, view_configs, 64, &nview, NULL));
  CHECK(nview > 0);
  bwd.c = 12;
  CHECK(!patch->applicable(&bwd, &env));
  CHECK_STATUS(CONV_OK, patch->configs(&bwd, &env, view_configs, 64, &nview, NULL));
  CHECK(nview == 0);
  bwd = p, bwd.direction = CONV_BACKWARD_FILTER;
  CHECK(!patch->applicable(&bwd, &env));
  /* Strict: FMA kernels only; TF32: tensor cores first, then FMA. */
  conv_config configs[64];
  int n = -1;
  CHECK_STATUS(CONV_OK, patch->configs(&p, &env, configs, 64, &n, NULL));
  CHECK(n > 0);
  for (int i = 0; i < n; i++) CHECK(configs[i].count == 4 && configs[i].values[0] == CONV_PATCH_FMA);
  p.math = CONV_MATH_TF32;
  int m = -1;
  CHECK_STATUS(CONV_OK, patch->configs(&p, &env, configs, 64, &m, NULL));
  CHECK(m > n && configs[0].values[0] == CONV_PATCH_MMA &&
        configs[m - 1].values[0] == CONV_PATCH_FMA);
  /* On compute capability 9.0 the wgmma kernels come first. */
  env.device.cc_major = 9;
  int h = -1;
  CHECK_STATUS(CONV_OK, patch->configs(&p, &env, configs, 64, &h, NULL));
  CHECK(h > m && configs[0].values[0] == CONV_PATCH_WGMMA &&
        configs[h - m].values[0] == CONV_PATCH_MMA);
  env.device.cc_major = 0;
  /* A launch: 16 outputs (4 rows) and 8 channels a thread, 8 warps along
   * K: one block computes all 64 channels of 32 images, with the bank of
   * 32 x 9 x 64 floats and two buffers of 16 channels of 32 images. */
  conv_patch_tiling t = {CONV_PATCH_FMA, 4, 8, 8};
  conv_patch_launch l;
  char why[160];
  CHECK(conv_patch_plan(&p, &t, &l, why, sizeof why));
  CHECK(l.threads == 256 && l.block_k == 64 && l.k_blocks == 1 && l.images_per_block == 32);
  CHECK(l.image_groups == 640 && l.chunk == 16 && l.chunks == 2 && l.image_floats == 16 * 16 + 4);
  CHECK(l.smem_bytes == sizeof(float) * (32 * 9 * 64 + 2 * 32 * (size_t)l.image_floats));
  /* Tensor cores: 8 warps of 2 pixel tiles = 16 images a block, 8 channel
   * tiles = all 64 output channels; 16 channels staged at once, in padded
   * planes of 6 rows of 8 floats (48: 16 mod 32, for the bank pattern). */
  t = (conv_patch_tiling){CONV_PATCH_MMA, 2, 8, 8};
  CHECK(conv_patch_plan(&p, &t, &l, why, sizeof why));
  CHECK(l.threads == 256 && l.images_per_block == 16 && l.block_k == 64 && l.k_blocks == 1);
  CHECK(l.chunk == 16 && l.chunks == 2 && l.image_floats == 16 * 48 + 4);
  /* wgmma: the same layout, one pixel tile a warp, whole warpgroups. */
  t = (conv_patch_tiling){CONV_PATCH_WGMMA, 1, 8, 16};
  CHECK(conv_patch_plan(&p, &t, &l, why, sizeof why));
  CHECK(l.threads == 512 && l.images_per_block == 16 && l.block_k == 64 && l.k_blocks == 1);
  CHECK(l.image_floats == 16 * 48 + 4 && l.bank_floats == 32 * 9 * 64);
  t.warps = 6;
  CHECK(!conv_patch_plan(&p, &t, &l, why, sizeof why) && strstr(why, "warpgroups") != NULL);
  /* 4 channel tiles: two blocks along K, each with half the bank. */
  t = (conv_patch_tiling){CONV_PATCH_MMA, 2, 4, 8};
  CHECK(conv_patch_plan(&p, &t, &l, why, sizeof why));
  CHECK(l.block_k == 32 && l.k_blocks == 2 && l.bank_floats == 32 * 9 * 32);
  p.math = CONV_MATH_STRICT;
  CHECK(!conv_patch_plan(&p, &t, &l, why, sizeof why) && strstr(why, "TF32") != NULL);
  /* Tilings that do not divide: 3 warps of 8 channels against K = 64. */
  t = (conv_patch_tiling){CONV_PATCH_FMA, 4, 8, 3};
  CHECK(!conv_patch_plan(&p, &t, &l, why, sizeof why) && strstr(why, "divide") != NULL);
  /* Not applicable: strides, dilations, groups, other paddings and sizes,
   * K not a multiple of 8. */
  const conv_problem base = p;
  p.stride_h = 2;
  CHECK(!patch->applicable(&p, &env));
  p = base, p.dil_w = 2, p.pad_w = 2;
  CHECK(!patch->applicable(&p, &env));
  p = base, p.groups = 2;
  CHECK(!patch->applicable(&p, &env));
  p = base, p.pad_h = 0;
  CHECK(!patch->applicable(&p, &env));
  p = base, p.h = p.w = 32;
  CHECK(!patch->applicable(&p, &env));
  p = base, p.h = 8;
  CHECK(!patch->applicable(&p, &env));
  p = base, p.k = 12;
  CHECK(!patch->applicable(&p, &env));
  CHECK_STATUS(CONV_OK, patch->configs(&p, &env, configs, 64, &n, NULL));
  CHECK(n == 0);
  p = base, p.h = p.w = 16, p.k = 8;
  CHECK(patch->applicable(&p, &env));
  return TEST_PASS;
}

static bool is_tensor_core(const void *state) {
  return ((const conv_patch_launch *)state)->tiling.kind != CONV_PATCH_FMA;
}

static bool is_wgmma(const void *state) {
  return ((const conv_patch_launch *)state)->tiling.kind == CONV_PATCH_WGMMA;
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

/* patch's backward-data (its transposed view, the filter transposed into
 * the workspace), every config, against the CPU reference: the suite's
 * 8x8 patches (32 <- 64 channels) in both modes, 4x4 and 16x16 patches,
 * fewer output-gradient channels than dx channels. */
static int patch_backward_data_matches_reference(void) {
  SKIP_WITHOUT_GPU();
  seed_rng();
  const conv_math S = CONV_MATH_STRICT, T = CONV_MATH_TF32;
  const conv_epilogue N = CONV_EPILOGUE_NONE;
  conv_problem cases[] = {
      direct_problem(37, 32, 8, 8, 64, 3, 3, 1, 1, 1, 1, N, S),   /* seed1_patch8, smaller */
      direct_problem(37, 32, 8, 8, 64, 3, 3, 1, 1, 1, 1, N, T),
      direct_problem(50, 16, 4, 4, 24, 3, 3, 1, 1, 1, 1, N, T),   /* 4x4 */
      direct_problem(6, 8, 16, 16, 16, 3, 3, 1, 1, 1, 1, N, S),   /* 16x16 */
      direct_problem(21, 24, 8, 8, 8, 3, 3, 1, 1, 1, 1, N, T),    /* k < c */
  };
  enum { CASES = sizeof cases / sizeof cases[0] };
  set_direction(cases, CASES, CONV_BACKWARD_DATA);
  return family_passes_match_reference(&conv_algorithm_patch, cases, CASES, CASES);
}

static const labelled_test_case tests[] = {
    {"patch_configs", patch_configs, "cpu"},
    {"patch_matches_reference", patch_matches_reference, "gpu"},
    {"patch_backward_data_matches_reference", patch_backward_data_matches_reference, "gpu"},
};
TEST_MAIN(tests)
