/* test_depthwise_nhwc.c -- the depthwise_nhwc family (channels-last
 * depthwise).  CPU: channels-last problems (valid, keyed and parsed; which
 * families take depthwise, grouped and dense ones), and depthwise_nhwc's
 * configs: every one plans and covers its output, each kernel form in
 * turn, and the tilings it refuses.  GPU (skipped without one): every
 * config against the CPU reference, each kernel form exactly where it
 * applies; cuDNN's NHWC engines on the same shapes; in fp16 and bf16, the
 * same shapes through every config of the type. */
#include <stdint.h>
#include <string.h>

#include "algorithms/depthwise_nhwc.h"
#include "tests/gpu_support.h"
#include "tests/problem_fixtures.h"

/* Channels-last problems: depthwise, grouped and dense ones are valid and
 * keyed "nhwc", specs take layout=, and only the families written for NHWC
 * take them. */
static int nhwc_problems(void) {
  conv_problem p = depthwise_problem();
  p.layout = CONV_LAYOUT_NHWC;
  char key[CONV_PROBLEM_KEY_MAX], message[256];
  CHECK_STATUS(CONV_OK, conv_problem_validate(&p, message, sizeof message));
  CHECK_STATUS(CONV_OK, conv_problem_key(&p, key, sizeof key));
  CHECK(strncmp(key, "fwd f32 nhwc strict none n32 c144", 33) == 0);
  conv_problem parsed;
  CHECK_STATUS(CONV_OK, conv_problem_parse("n=32 c=144 h=56 w=56 k=144 r=3 s=3 pad=1 g=144 "
                                           "layout=NHWC", &parsed, message, sizeof message));
  CHECK(parsed.layout == CONV_LAYOUT_NHWC && memcmp(&parsed, &p, sizeof p) == 0);
  CHECK_STATUS(CONV_INVALID_ARGUMENT,
               conv_problem_parse("n=1 c=1 h=3 w=3 k=1 r=3 s=3 layout=chwn", &parsed, message,
                                  sizeof message));
  CHECK(strstr(message, "layout=chwn") != NULL);
  conv_problem grouped = p;
  grouped.groups = 72; /* two input channels per group */
  conv_problem dense = p;
  dense.groups = 1;
  CHECK_STATUS(CONV_OK, conv_problem_validate(&grouped, message, sizeof message));
  CHECK_STATUS(CONV_OK, conv_problem_validate(&dense, message, sizeof message));
  CHECK_STATUS(CONV_OK, conv_problem_key(&dense, key, sizeof key));
  CHECK(strncmp(key, "fwd f32 nhwc strict none n32 c144", 33) == 0);
  dense.layout = (conv_layout)7;
  CHECK_STATUS(CONV_UNSUPPORTED, conv_problem_validate(&dense, message, sizeof message));
  CHECK(strstr(message, "layout 7") != NULL);
  dense.layout = CONV_LAYOUT_NHWC;

  /* cuDNN takes every NHWC problem, depthwise_nhwc the depthwise ones,
   * gemm_nhwc the dense ones, the NCHW families none. */
  int count;
  const conv_algorithm *const *algos = conv_registry(&count);
  for (int i = 0; i < count; i++) {
    const bool cudnn = algos[i]->id == CONV_ALGO_CUDNN;
    const bool depthwise = cudnn || algos[i]->id == CONV_ALGO_DEPTHWISE_NHWC;
    const bool dense_family = cudnn || algos[i]->id == CONV_ALGO_GEMM_NHWC;
    CHECK_MSG(algos[i]->applicable(&p, NULL) == depthwise, "%s on NHWC depthwise", algos[i]->name);
    CHECK_MSG(algos[i]->applicable(&grouped, NULL) == cudnn, "%s on NHWC grouped", algos[i]->name);
    CHECK_MSG(algos[i]->applicable(&dense, NULL) == dense_family, "%s on NHWC dense",
              algos[i]->name);
  }
  const conv_algorithm *gemm = conv_registry_find(CONV_ALGO_GEMM_NHWC);
  CHECK(gemm != NULL && strcmp(gemm->name, "gemm_nhwc") == 0);
  conv_problem backward = dense;
  backward.direction = CONV_BACKWARD_DATA;
  CHECK(!gemm->applicable(&backward, NULL));
  conv_env env;
  memset(&env, 0, sizeof env);
  conv_config configs[128];
  int n = -1;
  const conv_algorithm *dw = conv_registry_find(CONV_ALGO_DEPTHWISE_NHWC);
  CHECK(dw != NULL && strcmp(dw->name, "depthwise_nhwc") == 0);
  CHECK_STATUS(CONV_OK, dw->configs(&p, &env, configs, 128, &n, NULL));
  CHECK(n > 0 && n < 128);
  int rolling = 0, pairs = 0, tiles = 0;
  for (int i = 0; i < n; i++) {
    CHECK(configs[i].count == 6);
    conv_dwnhwc_tiling t = {(int)configs[i].values[0], (int)configs[i].values[1],
                            (int)configs[i].values[2], (int)configs[i].values[3],
                            (int)configs[i].values[4], (int)configs[i].values[5]};
    rolling += t.form == CONV_DWNHWC_ROLLING;
    pairs += t.form == CONV_DWNHWC_ROW_PAIRS;
    tiles += t.form == CONV_DWNHWC_TILE;
    conv_dwnhwc_launch l;
    CHECK(conv_dwnhwc_plan(&p, &t, &l, NULL, 0) && l.kernel != NULL);
    /* The grid covers every output once: bands of rows x tiles of columns
     * (the tile form's tq thread positions as thread_rows x thread_cols). */
    const bool tile = t.form == CONV_DWNHWC_TILE;
    CHECK(!tile || (l.thread_rows * l.thread_cols == t.tq && l.rows == l.thread_rows * t.rows));
    CHECK((int64_t)l.grid[1] * l.block_channels >= p.k);
    CHECK((int64_t)l.q_tiles * (tile ? l.thread_cols : t.tq) * t.px >= l.q);
    CHECK((int64_t)l.grid[0] * l.rows >= p.n * l.p * l.q_tiles);
    CHECK(l.filter_ld % 4 == 0 && l.filter_ld >= l.block_channels);
  }
  /* The 3x3 stride-1 problem takes every form, and lists them in turn
   * (tile first), so that the fast policy's first guesses try each. */
  CHECK(rolling > 0 && pairs > 0 && tiles > 0);
  CHECK(configs[0].values[5] == CONV_DWNHWC_TILE && configs[0].values[0] == 2);
  CHECK(configs[1].values[5] == CONV_DWNHWC_ROLLING && configs[1].values[0] == 4);
  CHECK(configs[2].values[5] == CONV_DWNHWC_ROW_PAIRS);
  CHECK(configs[3].values[5] == CONV_DWNHWC_THREAD_LOADS);
  /* Asked for fewer, it gives the same first ones. */
  conv_config first[3];
  int n_first = -1;
  CHECK_STATUS(CONV_OK, dw->configs(&p, &env, first, 3, &n_first, NULL));
  CHECK(n_first == 3);
  for (int i = 0; i < 3; i++) CHECK(conv_config_equal(&first[i], &configs[i]));
  /* No config is listed twice. */
  for (int i = 0; i < n; i++)
    for (int j = 0; j < i; j++) CHECK(!conv_config_equal(&configs[i], &configs[j]));
  /* 6 channels cannot be float4s nor 16-byte runs: every config is
   * single-channel. */
  conv_problem six = p;
  six.c = six.k = six.groups = 6;
  CHECK_STATUS(CONV_OK, dw->configs(&six, &env, configs, 128, &n, NULL));
  CHECK(n > 0);
  for (int i = 0; i < n; i++) CHECK(configs[i].values[0] == 1);
  /* Tilings that cannot run are refused with a reason. */
  char why[160];
  conv_dwnhwc_launch refused;
  const conv_dwnhwc_tiling no_rows = {4, 4, 8, 8, 0, 0}, wide = {4, 3, 8, 8, 1, 0};
  CHECK(!conv_dwnhwc_plan(&p, &no_rows, &refused, why, sizeof why) && strstr(why, "rows") != NULL);
  CHECK(!conv_dwnhwc_plan(&p, &wide, &refused, why, sizeof why) && strstr(why, "px") != NULL);
  conv_problem strided = p;
  strided.stride_h = strided.stride_w = 2;
  const conv_dwnhwc_tiling rolling_tiling = {4, 4, 8, 8, 4, CONV_DWNHWC_ROLLING};
  CHECK(conv_dwnhwc_plan(&p, &rolling_tiling, &refused, why, sizeof why));
  CHECK(!conv_dwnhwc_plan(&strided, &rolling_tiling, &refused, why, sizeof why) &&
        strstr(why, "rolling") != NULL);
  /* Row pairs: stride 1 only, px up to 4, bands of two rows or more. */
  const conv_dwnhwc_tiling pair_tiling = {4, 4, 8, 8, 2, CONV_DWNHWC_ROW_PAIRS};
  const conv_dwnhwc_tiling pair_one_row = {4, 4, 8, 8, 1, CONV_DWNHWC_ROW_PAIRS};
  const conv_dwnhwc_tiling pair_px8 = {4, 8, 8, 8, 2, CONV_DWNHWC_ROW_PAIRS};
  CHECK(conv_dwnhwc_plan(&p, &pair_tiling, &refused, why, sizeof why));
  CHECK(!conv_dwnhwc_plan(&strided, &pair_tiling, &refused, why, sizeof why) &&
        strstr(why, "row-pairs") != NULL);
  CHECK(!conv_dwnhwc_plan(&p, &pair_one_row, &refused, why, sizeof why) &&
        strstr(why, "row-pairs") != NULL);
  CHECK(!conv_dwnhwc_plan(&p, &pair_px8, &refused, why, sizeof why) &&
        strstr(why, "row-pairs") != NULL);
  /* Tile: 16 positions of 2 x 7 outputs on the 56x56 image as the 8 x 2
   * threads whose 16 x 14 tile reads the fewest inputs an output (18 x 16
   * for 224; 8 x 28 reads 10 x 30); stride 1, px 4 or 7, 1 or 2 rows a
   * thread, and no row of threads wholly past the image. */
  const conv_dwnhwc_tiling tile_tiling = {2, 7, 16, 16, 2, CONV_DWNHWC_TILE};
  conv_dwnhwc_launch tiled;
  CHECK(conv_dwnhwc_plan(&p, &tile_tiling, &tiled, why, sizeof why));
  CHECK(tiled.thread_rows == 8 && tiled.thread_cols == 2 && tiled.rows == 16);
  CHECK(tiled.q_tiles == 4 && tiled.grid[0] == (unsigned)(p.n * 4 * 4));
  CHECK(tiled.smem_bytes == (size_t)tiled.filter_ld * 9 * sizeof(float) + 18 * 16 * 32 * 4);
  CHECK(!conv_dwnhwc_plan(&strided, &tile_tiling, &refused, why, sizeof why) &&
        strstr(why, "tile") != NULL);
  const conv_dwnhwc_tiling tile_px5 = {2, 5, 16, 16, 2, CONV_DWNHWC_TILE},
                           tile_rows3 = {2, 7, 16, 16, 3, CONV_DWNHWC_TILE},
                           tile_vec4 = {4, 7, 16, 16, 2, CONV_DWNHWC_TILE};
  CHECK(!conv_dwnhwc_plan(&p, &tile_px5, &refused, why, sizeof why) && strstr(why, "tile") != NULL);
  CHECK(!conv_dwnhwc_plan(&p, &tile_rows3, &refused, why, sizeof why) &&
        strstr(why, "tile") != NULL);
  CHECK(!conv_dwnhwc_plan(&p, &tile_vec4, &refused, why, sizeof why) &&
        strstr(why, "tile") != NULL);
  conv_problem small = p;
  small.h = small.w = 7;
  CHECK(!conv_dwnhwc_plan(&small, &tile_tiling, &refused, why, sizeof why) &&
        strstr(why, "past") != NULL);
  const conv_dwnhwc_tiling tile_seven = {2, 7, 16, 7, 1, CONV_DWNHWC_TILE};
  CHECK(conv_dwnhwc_plan(&small, &tile_seven, &tiled, why, sizeof why));
  CHECK(tiled.thread_rows == 7 && tiled.thread_cols == 1 && tiled.grid[0] == (unsigned)p.n);
  /* Half types: every form, and every fp32 config (a few more rolling
   * ones, whose smaller ring fits where fp32's does not). */
  conv_problem half = p;
  half.dtype = CONV_DTYPE_F16;
  CHECK(dw->applicable(&half, &env));
  conv_config f32_configs[128];
  int n_f32 = -1, n_half = -1;
  CHECK_STATUS(CONV_OK, dw->configs(&p, &env, f32_configs, 128, &n_f32, NULL));
  CHECK_STATUS(CONV_OK, dw->configs(&half, &env, configs, 128, &n_half, NULL));
  CHECK(n_f32 > 0 && n_half >= n_f32 && n_half < 128);
  for (int i = 0; i < n_f32; i++) {
    bool listed = false;
    for (int j = 0; j < n_half && !listed; j++)
      listed = conv_config_equal(&configs[j], &f32_configs[i]);
    CHECK_MSG(listed, "fp32 config %d not listed for fp16", i);
  }
  CHECK(configs[0].values[5] == CONV_DWNHWC_TILE && configs[1].values[5] == CONV_DWNHWC_ROLLING);
  /* The rolling ring holds the type: half the bytes of fp32's. */
  conv_dwnhwc_launch rolling32;
  CHECK(conv_dwnhwc_plan(&p, &rolling_tiling, &rolling32, why, sizeof why));
  CHECK(conv_dwnhwc_plan(&half, &rolling_tiling, &refused, why, sizeof why) &&
        refused.kernel != NULL && refused.kernel != rolling32.kernel);
  const size_t filters = (size_t)rolling32.filter_ld * 9 * sizeof(float);
  CHECK(refused.smem_bytes - filters == (rolling32.smem_bytes - filters) / 2);
  CHECK(conv_dwnhwc_plan(&half, &pair_tiling, &refused, why, sizeof why) && refused.kernel != NULL);
  /* The NCHW depthwise problem is not this family's. */
  conv_problem nchw = depthwise_problem();
  CHECK(!dw->applicable(&nchw, &env));
  CHECK_STATUS(CONV_OK, dw->configs(&nchw, &env, configs, 64, &n, NULL));
  CHECK(n == 0);
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

static bool is_tile(const void *state) {
  return ((const conv_dwnhwc_launch *)state)->tiling.form == CONV_DWNHWC_TILE;
}

/* Window, rolling, row-pairs, tile and generic kernels ran where the
 * filter takes their form, and float4 configs where the channels allow
 * them. */
static int check_nhwc_kernels(conv_env *env, const conv_problem *p, const char *name) {
  const int windows = prepared_configs(env, &conv_algorithm_depthwise_nhwc, p, is_window_kernel);
  const int rolling = prepared_configs(env, &conv_algorithm_depthwise_nhwc, p, is_rolling);
  const int pairs = prepared_configs(env, &conv_algorithm_depthwise_nhwc, p, is_row_pairs);
  const int tiles = prepared_configs(env, &conv_algorithm_depthwise_nhwc, p, is_tile);
  const bool square = (p->s == 3 || p->s == 5 || p->s == 7) && p->r == p->s;
  const bool takes_window = square && p->dil_w == 1 && p->stride_w <= 2;
  const bool takes_rolling = square && p->stride_h == 1 && p->stride_w == 1 && p->dil_h == 1 &&
                             p->dil_w == 1 && p->k == p->c && p->c % 4 == 0;
  const bool takes_pairs = square && p->stride_h == 1 && p->stride_w == 1 && p->dil_h == 1 &&
                           p->dil_w == 1;
  const bool takes_tile = takes_pairs && p->k == p->c && p->c % 4 == 0; /* fp32: 16-byte runs */
  printf("%s: %d window-form configs, %d rolling, %d row pairs, %d tiles\n", name, windows,
         rolling, pairs, tiles);
  CHECK_MSG(takes_window == (windows > 0), "window configs %s on %s", windows ? "ran" : "did not run",
            name);
  CHECK_MSG(takes_rolling == (rolling > 0), "rolling configs %s on %s",
            rolling ? "ran" : "did not run", name);
  CHECK_MSG(takes_pairs == (pairs > 0), "row-pairs configs %s on %s", pairs ? "ran" : "did not run",
            name);
  CHECK_MSG(takes_tile == (tiles > 0), "tile configs %s on %s", tiles ? "ran" : "did not run",
            name);
  return TEST_PASS;
}

/* Channels-last depthwise problems through cuDNN and depthwise_nhwc: the
 * ConvNeXt and MobileNet shapes, every filter form (window 3/5/7 with
 * stride 1 and 2, rolling at stride 1 over several bands of rows and
 * column tiles, row pairs at stride 1 with an odd last row, tiles at
 * stride 1 with partial ones at the image's edges, generic for
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

/* ---- half precision */

/* depthwise_nhwc takes NHWC depthwise forward problems in fp32, fp16 and
 * bf16, every epilogue; it refuses NCHW, dense and backward ones in the
 * half types as in fp32 (and lists nothing, prepares nothing for them). */
static int half_types_served(void) {
  const conv_epilogue N = CONV_EPILOGUE_NONE, B = CONV_EPILOGUE_BIAS,
                      R = CONV_EPILOGUE_BIAS_RELU;
  const conv_math S = CONV_MATH_STRICT;
  const conv_problem takes[] = {
      channels_last(direct_problem(2, 96, 14, 14, 96, 7, 7, 1, 3, 1, 96, B, S)),
      channels_last(direct_problem(1, 40, 19, 23, 40, 3, 3, 2, 1, 1, 40, R, S)),
      channels_last(direct_problem(2, 6, 20, 21, 6, 3, 3, 1, 2, 2, 6, N, S)),
  };
  conv_problem refuses[] = {
      direct_problem(2, 96, 14, 14, 96, 7, 7, 1, 3, 1, 96, B, S),       /* NCHW */
      channels_last(direct_problem(2, 16, 12, 12, 32, 3, 3, 1, 1, 1, 1, N, S)),  /* dense */
      channels_last(direct_problem(2, 96, 14, 14, 96, 7, 7, 1, 3, 1, 96, N, S)), /* backward-data */
  };
  refuses[2].direction = CONV_BACKWARD_DATA;
  return half_scope(&conv_algorithm_depthwise_nhwc, takes, sizeof takes / sizeof takes[0],
                    refuses, sizeof refuses / sizeof refuses[0]);
}

/* The fp32 test's shapes (every form, odd channel counts, a multiplier,
 * dilation, partial blocks, bands and column tiles, every epilogue) in the
 * type, every config against the reference within the type's bound. */
static int half_forward(conv_dtype dtype) {
  const conv_math S = CONV_MATH_STRICT;
  const conv_epilogue NONE = CONV_EPILOGUE_NONE, BIAS = CONV_EPILOGUE_BIAS,
                      RELU = CONV_EPILOGUE_BIAS_RELU;
  const conv_problem cases[] = {
      channels_last(direct_problem(2, 96, 14, 14, 96, 7, 7, 1, 3, 1, 96, BIAS, S)),
      channels_last(direct_problem(1, 40, 19, 23, 40, 3, 3, 2, 1, 1, 40, RELU, S)),
      channels_last(direct_problem(2, 36, 17, 18, 36, 5, 5, 1, 2, 1, 36, NONE, S)),
      channels_last(direct_problem(1, 132, 9, 11, 132, 5, 5, 2, 2, 1, 132, BIAS, S)),
      channels_last(direct_problem(1, 6, 20, 21, 6, 3, 3, 1, 2, 2, 6, BIAS, S)),
      channels_last(direct_problem(2, 8, 13, 12, 16, 3, 3, 1, 1, 1, 8, RELU, S)),
      channels_last(direct_problem(1, 12, 16, 16, 12, 4, 2, 3, 0, 1, 12, NONE, S)),
      channels_last(direct_problem(3, 5, 7, 9, 5, 7, 7, 1, 3, 1, 5, BIAS, S)),
      channels_last(direct_problem(2, 132, 37, 29, 132, 3, 3, 1, 1, 1, 132, RELU, S)),
      channels_last(direct_problem(1, 64, 40, 61, 64, 7, 7, 1, 3, 1, 64, BIAS, S)),
  };
  return half_family_matches_reference(&conv_algorithm_depthwise_nhwc, cases,
                                       sizeof cases / sizeof cases[0], dtype, "forward");
}
static int f16_forward(void) { return half_forward(CONV_DTYPE_F16); }
static int bf16_forward(void) { return half_forward(CONV_DTYPE_BF16); }

static const labelled_test_case tests[] = {
    {"nhwc_problems", nhwc_problems, "cpu"},
    {"half_types_served", half_types_served, "cpu"},
    {"nhwc_depthwise_matches_reference", nhwc_depthwise_matches_reference, "gpu"},
    {"f16_forward", f16_forward, "gpu"},
    {"bf16_forward", bf16_forward, "gpu"},
};
TEST_MAIN(tests)
