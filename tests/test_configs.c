/* test_configs.c -- CPU tests of the candidate families' scope, configs
 * and launch planning: which problems each family takes, that every config
 * it lists plans and covers its output, and what it refuses; forward
 * families (direct_channel, fft, channel_split, patch, depthwise_nhwc and
 * the NHWC scope).  The backward passes' families:
 * test_configs_backward.c; implicit_gemm: test_configs_igemm.c; the
 * dynamic op's: test_configs_dynamic.c.  No GPU needed: the GPU tests run
 * the kernels. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "algorithms/channel_split.h"
#include "algorithms/data_gather.h"
#include "algorithms/depthwise_nhwc.h"
#include "algorithms/direct_channel.h"
#include "algorithms/direct_window.h"
#include "algorithms/filter_reduce.h"
#include "algorithms/patch.h"
#include "runtime/cublaslt.h"
#include "runtime/internal.h"
#include "tests/problem_fixtures.h"
#include "tests/test.h"

/* Whether the window layout's threads [0, threads) own every output in
 * [0, outputs) exactly once: thread t's first output is
 * (t / spacing) * per_thread * spacing + t % spacing, the others follow
 * `spacing` apart (direct_window.cu). */
static bool window_covers(int64_t outputs, int per_thread, int64_t spacing, int64_t threads) {
  unsigned char *seen = calloc((size_t)outputs, 1);
  if (seen == NULL) return false;
  for (int64_t t = 0; t < threads; t++) {
    const int64_t first = (t / spacing) * per_thread * spacing + t % spacing;
    for (int j = 0; j < per_thread; j++) {
      const int64_t o = first + j * spacing;
      if (o < outputs) seen[o]++;
    }
  }
  bool once = true;
  for (int64_t o = 0; o < outputs; o++) once = once && seen[o] == 1;
  free(seen);
  return once;
}

/* The kernels' division by a launch constant: (umulhi(n, m) + n) >> s in
 * 32-bit arithmetic, as direct_window.cu computes it, must be n / d. */
static uint32_t divide_like_kernel(uint32_t n, conv_divisor d) {
  const uint32_t hi = (uint32_t)(((uint64_t)n * d.multiplier) >> 32);
  return (hi + n) >> d.shift;
}

static int divisor_matches_division(void) {
  uint64_t state = 0x9E3779B97F4A7C15ull;
  for (int d = 1; d <= 70000; d += d < 300 ? 1 : 997) {
    const conv_divisor v = conv_divisor_make(d);
    CHECK(v.divisor == (uint32_t)d);
    const uint32_t edges[] = {0, 1, (uint32_t)d - 1, (uint32_t)d, (uint32_t)d + 1,
                              2u * (uint32_t)d - 1, 0x7FFFFFFFu, 0x7FFFFFFFu - (uint32_t)d};
    for (size_t i = 0; i < sizeof edges / sizeof edges[0]; i++)
      CHECK_MSG(divide_like_kernel(edges[i], v) == edges[i] / (uint32_t)d, "%u / %d",
                edges[i], d);
    for (int i = 0; i < 2000; i++) {
      state = state * 6364136223846793005ull + 1442695040888963407ull;
      const uint32_t n = (uint32_t)(state >> 33); /* below 2^31 */
      CHECK_MSG(divide_like_kernel(n, v) == n / (uint32_t)d, "%u / %d", n, d);
    }
  }
  return TEST_PASS;
}

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
  CHECK(n > 0 && n < 128 && configs[0].values[0] == 4); /* float4 channels first */
  int rolling = 0, pairs = 0;
  for (int i = 0; i < n; i++) {
    CHECK(configs[i].count == 6);
    conv_dwnhwc_tiling t = {(int)configs[i].values[0], (int)configs[i].values[1],
                            (int)configs[i].values[2], (int)configs[i].values[3],
                            (int)configs[i].values[4], (int)configs[i].values[5]};
    rolling += t.form == CONV_DWNHWC_ROLLING;
    pairs += t.form == CONV_DWNHWC_ROW_PAIRS;
    conv_dwnhwc_launch l;
    CHECK(conv_dwnhwc_plan(&p, &t, &l, NULL, 0) && l.kernel != NULL);
    /* The grid covers every output once: bands of rows x tiles of columns. */
    CHECK((int64_t)l.grid[1] * l.block_channels >= p.k);
    CHECK((int64_t)l.q_tiles * t.tq * t.px >= l.q);
    CHECK((int64_t)l.grid[0] * t.rows >= p.n * l.p * l.q_tiles);
    CHECK(l.filter_ld % 4 == 0 && l.filter_ld >= l.block_channels);
  }
  /* The 3x3 stride-1 problem takes every form, and lists them in turn
   * (rolling first), so that the fast policy's three guesses try each. */
  CHECK(rolling > 0 && pairs > 0);
  CHECK(configs[0].values[5] == CONV_DWNHWC_ROLLING);
  CHECK(configs[1].values[5] == CONV_DWNHWC_ROW_PAIRS);
  CHECK(configs[2].values[5] == CONV_DWNHWC_THREAD_LOADS);
  /* Asked for fewer, it gives the same first ones. */
  conv_config first[3];
  int n_first = -1;
  CHECK_STATUS(CONV_OK, dw->configs(&p, &env, first, 3, &n_first, NULL));
  CHECK(n_first == 3);
  for (int i = 0; i < 3; i++) CHECK(conv_config_equal(&first[i], &configs[i]));
  /* No config is listed twice. */
  for (int i = 0; i < n; i++)
    for (int j = 0; j < i; j++) CHECK(!conv_config_equal(&configs[i], &configs[j]));
  /* 6 channels cannot be float4s: every config is single-channel. */
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
  /* The NCHW depthwise problem is not this family's. */
  conv_problem nchw = depthwise_problem();
  CHECK(!dw->applicable(&nchw, &env));
  CHECK_STATUS(CONV_OK, dw->configs(&nchw, &env, configs, 64, &n, NULL));
  CHECK(n == 0);
  return TEST_PASS;
}

/* The direct_channel candidate's configs and tiling checks need no GPU. */
/* The SIMPLE layout: offered for small passes only, first up to
 * CONV_DIRECT_SIMPLE_FIRST_OUTPUTS outputs, else last; a thread per
 * output, the grid's z over images and output channels. */
static int direct_channel_simple_layout(void) {
  const conv_algorithm *dc = conv_registry_find(CONV_ALGO_DIRECT_CHANNEL);
  conv_env env;
  memset(&env, 0, sizeof env);
  conv_config configs[512];
  int n = -1;
  conv_problem p; /* seed3_msd_small's backward-data: 64 x 64, one channel */
  conv_problem_init(&p);
  p.n = 1, p.c = 1, p.h = 64, p.w = 64, p.k = 1, p.r = 3, p.s = 3, p.pad_h = p.pad_w = 1;
  p.direction = CONV_BACKWARD_DATA;
  CHECK(dc->applicable(&p, &env));
  CHECK_STATUS(CONV_OK, dc->configs(&p, &env, configs, 512, &n, NULL));
  CHECK(n > 2 && configs[2].values[0] != CONV_DIRECT_SIMPLE);
  p.direction = CONV_FORWARD; /* its forward view: the same sizes */
  conv_direct_launch l;
  for (int i = 0; i < 2; i++) {
    const conv_config *c = &configs[i];
    conv_direct_tiling t = {(int)c->values[0], (int)c->values[1], (int)c->values[2],
                            (int)c->values[3], (int)c->values[4], (int)c->values[5]};
    CHECK(t.layout == CONV_DIRECT_SIMPLE);
    CHECK(t.tx == 32 && t.ty == (i == 0 ? 4 : 8)); /* 128 threads, then 256 */
    CHECK(conv_direct_plan(&p, &t, &l, NULL, 0) && l.kernel != NULL && l.smem_bytes == 0);
    CHECK(l.grid[0] == 2 && l.grid[1] == (unsigned)(64 / t.ty) && l.grid[2] == 1);
  }
  for (int i = 2; i < n; i++) CHECK(configs[i].values[0] != CONV_DIRECT_SIMPLE);
  conv_config few[3]; /* the fast policy's three guesses include both */
  int m = -1;
  CHECK_STATUS(CONV_OK, dc->configs(&p, &env, few, 3, &m, NULL));
  CHECK(m == 3 && conv_config_equal(&few[0], &configs[0]) &&
        conv_config_equal(&few[1], &configs[1]));
  char text[64];
  dc->describe(&configs[1], text, sizeof text);
  CHECK(strcmp(text, "simple threads=32x8") == 0);

  /* 1024 x 1024 (seed3_msd_1to1_d1): past 2^17 outputs, the simple
   * configs come last. */
  conv_problem wide = p;
  wide.h = wide.w = 1024;
  CHECK_STATUS(CONV_OK, dc->configs(&wide, &env, configs, 512, &n, NULL));
  CHECK(n > 2 && configs[n - 1].values[0] == CONV_DIRECT_SIMPLE &&
        configs[n - 2].values[0] == CONV_DIRECT_SIMPLE &&
        configs[0].values[0] != CONV_DIRECT_SIMPLE);

  /* Narrow images: a row's width of threads; planes (n, k) along z, split
   * by the divisors into image, group and channel. */
  conv_problem dw = depthwise_problem();
  dw.n = 3, dw.h = dw.w = 10;
  dw.epilogue = CONV_EPILOGUE_BIAS;
  CHECK_STATUS(CONV_OK, dc->configs(&dw, &env, configs, 512, &n, NULL));
  conv_direct_tiling t = {CONV_DIRECT_SIMPLE, 1, 1, 1, 10, 10};
  CHECK(n > 1 && conv_config_equal(&configs[0], &(conv_config){6, {3, 1, 1, 1, 10, 10}, 0}));
  CHECK(configs[1].values[0] != CONV_DIRECT_SIMPLE); /* 128 and 256 threads: both 10 x 10 */
  CHECK(conv_direct_plan(&dw, &t, &l, NULL, 0));
  CHECK(l.grid[0] == 1 && l.grid[1] == 1 && l.grid[2] == 3 * 144);
  CHECK(l.by_k.divisor == 144 && l.by_kg.divisor == 1);

  /* Refusals, with the reason. */
  char why[160];
  conv_direct_tiling px2 = {CONV_DIRECT_SIMPLE, 2, 1, 1, 32, 4};
  CHECK(!conv_direct_plan(&p, &px2, &l, why, sizeof why) && strstr(why, "are 1") != NULL);
  conv_problem nine = p; /* the simple layout compiles 1, 3, 5 and 7 */
  nine.r = nine.s = 9, nine.pad_h = nine.pad_w = 4;
  conv_direct_tiling simple = {CONV_DIRECT_SIMPLE, 1, 1, 1, 32, 4};
  CHECK(!conv_direct_plan(&nine, &simple, &l, why, sizeof why) && strstr(why, "not 9x9") != NULL);
  conv_problem big = p; /* 1024 x 1025: past a million outputs */
  big.h = 1024, big.w = 1025;
  CHECK(!conv_direct_plan(&big, &simple, &l, why, sizeof why) && strstr(why, "outputs") != NULL);
  big.w = 1024; /* exactly a million: offered */
  CHECK(conv_direct_plan(&big, &simple, &l, NULL, 0));
  conv_problem huge = p; /* few outputs of a 2^30-element input */
  huge.direction = CONV_FORWARD, huge.h = 32768, huge.w = 32769;
  huge.stride_h = huge.stride_w = 64;
  CHECK(!conv_direct_plan(&huge, &simple, &l, why, sizeof why) && strstr(why, "2^30") != NULL);
  conv_problem planes = p; /* 1 x 1 images, 70000 output channels */
  planes.direction = CONV_FORWARD, planes.h = planes.w = 1, planes.k = 70000;
  planes.r = planes.s = 1, planes.pad_h = planes.pad_w = 0;
  CHECK(!conv_direct_plan(&planes, &simple, &l, why, sizeof why) && strstr(why, "planes") != NULL);
  return TEST_PASS;
}

static int direct_channel_configs(void) {
  const conv_algorithm *dc = conv_registry_find(CONV_ALGO_DIRECT_CHANNEL);
  CHECK(dc != NULL && strcmp(dc->name, "direct_channel") == 0);
  conv_env env;
  memset(&env, 0, sizeof env);
  conv_config configs[512];
  int n = -1;
  conv_problem p = depthwise_problem();
  CHECK(dc->applicable(&p, &env));
  CHECK_STATUS(CONV_OK, dc->configs(&p, &env, configs, 512, &n, NULL));
  CHECK(n > 0 && n < 512);
  int windows = 0;
  for (int i = 0; i < n; i++) {
    CHECK(configs[i].count == 6);
    for (int j = 0; j < i; j++) CHECK(!conv_config_equal(&configs[i], &configs[j]));
    conv_direct_tiling t = {(int)configs[i].values[0], (int)configs[i].values[1],
                            (int)configs[i].values[2], (int)configs[i].values[3],
                            (int)configs[i].values[4], (int)configs[i].values[5]};
    conv_direct_launch l;
    CHECK(conv_direct_plan(&p, &t, &l, NULL, 0));
    CHECK(l.kernel != NULL);
    if (t.layout == CONV_DIRECT_WINDOW) {
      windows++;
      CHECK(l.grid[0] == 32 * 144 && l.smem_bytes == 9 * sizeof(float));
      CHECK(window_covers(l.q, t.px, l.col_spacing, (int64_t)l.grid[2] * t.tx));
      CHECK(window_covers(l.p, t.py, l.row_spacing, (int64_t)l.grid[1] * t.ty));
    } else {
      /* 32 x 144 x 56 x 56 outputs: too many for a thread each. */
      CHECK(t.layout != CONV_DIRECT_SIMPLE);
      CHECK(l.tiles_p * l.tile_rows >= l.p && l.tiles_q * l.tile_cols >= l.q);
      CHECK(l.smem_bytes <= CONV_DIRECT_SMEM_MAX && l.pitch % 4 == 0);
    }
  }
  CHECK(windows > 0);
  /* The first config is the window layout with 2 x 8 outputs per thread:
   * 28 threads cover the 56 columns, 7 rows of them the 56 rows. */
  CHECK(configs[0].values[0] == CONV_DIRECT_WINDOW && configs[0].values[1] == 2 &&
        configs[0].values[2] == 8 && configs[0].values[4] == 28 && configs[0].values[5] == 7);
  /* A max of 3 (the fast policy) gets the first 3 of the full list. */
  conv_config few[3];
  int m = -1;
  CHECK_STATUS(CONV_OK, dc->configs(&p, &env, few, 3, &m, NULL));
  CHECK(m == 3 && conv_config_equal(&few[2], &configs[2]));

  /* Tilings that cannot run are refused with a reason. */
  char why[160];
  conv_direct_launch l;
  conv_direct_tiling unit = {CONV_DIRECT_UNIT, 4, 4, 1, 14, 14};
  p.stride_h = p.stride_w = 2;
  CHECK(!conv_direct_plan(&p, &unit, &l, why, sizeof why) && strstr(why, "stride") != NULL);
  p = depthwise_problem();
  conv_direct_tiling kb16 = {CONV_DIRECT_UNIT, 4, 1, 16, 14, 14}; /* depthwise: 1 per group */
  CHECK(!conv_direct_plan(&p, &kb16, &l, why, sizeof why) && strstr(why, "divide") != NULL);
  conv_direct_tiling odd = {CONV_DIRECT_UNIT, 4, 3, 1, 14, 14}; /* not compiled */
  CHECK(!conv_direct_plan(&p, &odd, &l, why, sizeof why) && strstr(why, "compiled") != NULL);
  conv_direct_tiling wide = {CONV_DIRECT_UNIT, 4, 4, 1, 32, 16}; /* 512 threads */
  CHECK(!conv_direct_plan(&p, &wide, &l, why, sizeof why) && strstr(why, "threads") != NULL);
  p.r = p.s = 201; /* a 31 x 31 is fine, a 201 x 201 halo is not */
  p.pad_h = p.pad_w = 100;
  conv_direct_tiling big = {CONV_DIRECT_UNIT, 4, 4, 1, 14, 14};
  CHECK(!conv_direct_plan(&p, &big, &l, why, sizeof why) && strstr(why, "shared memory") != NULL);

  /* The window layout: compiled filters, strides and blockings only. */
  conv_direct_tiling window = {CONV_DIRECT_WINDOW, 2, 4, 1, 28, 8};
  p = depthwise_problem();
  p.s = 5;
  CHECK(!conv_direct_plan(&p, &window, &l, why, sizeof why) && strstr(why, "3x3") != NULL);
  p = depthwise_problem();
  p.stride_h = p.stride_w = 3;
  CHECK(!conv_direct_plan(&p, &window, &l, why, sizeof why) && strstr(why, "stride") != NULL);
  p.stride_h = p.stride_w = 2;
  p.dil_h = 2;
  CHECK(!conv_direct_plan(&p, &window, &l, why, sizeof why) && strstr(why, "undilated") != NULL);
  p.dil_h = 1;
  CHECK(conv_direct_plan(&p, &window, &l, why, sizeof why));
  CHECK(l.col_spacing == 1 && l.row_spacing == 1 && l.vector_stores); /* 28 columns, 2 a thread */
  /* float4 window loads: px * stride == 4, width a multiple of 4, and a
   * kernel compiled for the padding (3x3: pad % 4 == 1). */
  const void *vector_kernel = l.kernel;
  CHECK(l.vector_loads);
  p.pad_h = p.pad_w = 0;
  CHECK(conv_direct_plan(&p, &window, &l, why, sizeof why) && !l.vector_loads);
  CHECK(l.kernel != vector_kernel);
  p.pad_h = p.pad_w = 5;
  CHECK(conv_direct_plan(&p, &window, &l, why, sizeof why) && l.vector_loads);
  p.pad_h = p.pad_w = 1;
  p.w = 60;
  CHECK(conv_direct_plan(&p, &window, &l, why, sizeof why) && l.vector_loads);
  p.w = 58;
  CHECK(conv_direct_plan(&p, &window, &l, why, sizeof why) && !l.vector_loads);
  p.w = 56;
  conv_direct_tiling window_px1 = {CONV_DIRECT_WINDOW, 1, 4, 1, 28, 8};
  CHECK(conv_direct_plan(&p, &window_px1, &l, why, sizeof why) && !l.vector_loads);
  conv_direct_tiling window_odd = {CONV_DIRECT_WINDOW, 2, 3, 1, 28, 8}; /* not compiled */
  CHECK(!conv_direct_plan(&p, &window_odd, &l, why, sizeof why) && strstr(why, "compiled") != NULL);
  /* Dilation 8, stride 1: each thread's outputs are 8 apart, and groups of
   * 8 threads interleave; 1000 columns need ceil(1000 / 16) groups. */
  p = depthwise_problem();
  p.n = 1;
  p.h = p.w = 1000;
  p.dil_h = p.dil_w = p.pad_h = p.pad_w = 8;
  CHECK(conv_direct_plan(&p, &window, &l, why, sizeof why));
  CHECK(l.col_spacing == 8 && l.row_spacing == 8 && !l.vector_stores);
  int64_t columns, rows;
  conv_direct_threads_needed(&p, &window, &columns, &rows);
  CHECK(columns == 63 * 8 && rows == 32 * 8);
  CHECK(l.grid[2] == (unsigned)((columns + 27) / 28) && l.grid[1] == (unsigned)(rows / 8));
  CHECK(window_covers(l.q, 2, 8, columns) && window_covers(l.p, 4, 8, rows));
  /* Filters past 48 KiB of shared memory: 32 channels x 7x7 x 16. */
  conv_problem dense7;
  conv_problem_init(&dense7);
  dense7.n = 1; dense7.c = 32; dense7.h = 40; dense7.w = 40; dense7.k = 16;
  dense7.r = dense7.s = 7;
  conv_direct_tiling window16 = {CONV_DIRECT_WINDOW, 2, 2, 16, 20, 10};
  CHECK(!conv_direct_plan(&dense7, &window16, &l, why, sizeof why) &&
        strstr(why, "shared memory") != NULL);
  dense7.c = 16; /* 16 x 49 x 16 floats: 50176 bytes, still too many */
  CHECK(!conv_direct_plan(&dense7, &window16, &l, why, sizeof why));
  dense7.c = 8;
  CHECK(conv_direct_plan(&dense7, &window16, &l, why, sizeof why));

  /* Dense convolutions with many channels are left to GEMM engines. */
  conv_problem dense;
  conv_problem_init(&dense);
  dense.n = 1; dense.c = 64; dense.h = 56; dense.w = 56; dense.k = 64; dense.r = dense.s = 3;
  CHECK(!dc->applicable(&dense, &env));
  CHECK_STATUS(CONV_OK, dc->configs(&dense, &env, configs, 512, &n, NULL));
  CHECK(n == 0);
  return TEST_PASS;
}

/* Whether a prepared plan of `algo` for `p` launches with programmatic
 * dependent launch, on a device of compute capability `major`.x;
 * -1 if it does not prepare. */
static int prepared_pdl(const conv_algorithm *algo, const conv_problem *p,
                        const conv_config *config, int major) {
  conv_env env;
  memset(&env, 0, sizeof env);
  env.device.cc_major = major;
  conv_prepared prep;
  if (algo->prepare(p, &env, config, &prep, NULL) != CONV_OK) return -1;
  const bool pdl = algo->id == CONV_ALGO_DIRECT_CHANNEL
                       ? ((const conv_direct_launch *)prep.state)->pdl
                       : ((const conv_filter_reduce_launch *)prep.state)->pdl;
  algo->release(prep.state);
  return pdl;
}

/* The launch-bound families (direct_channel, filter_reduce) launch with
 * programmatic dependent launch on sm_90 and later, not before, and not
 * where CONVTUNE_PDL=0 is set when the plan is made. */
static int launch_bound_plans_use_pdl_on_sm90(void) {
  const conv_algorithm *dc = conv_registry_find(CONV_ALGO_DIRECT_CHANNEL);
  const conv_algorithm *fr = conv_registry_find(CONV_ALGO_FILTER_REDUCE);
  CHECK(dc != NULL && fr != NULL);
  const conv_problem forward = depthwise_problem();
  conv_problem filter = forward;
  filter.direction = CONV_BACKWARD_FILTER;
  const conv_config window = {6, {CONV_DIRECT_WINDOW, 2, 8, 1, 28, 7}, 0};
  const conv_config bands = {5, {8, 128, 1, 0, 0}, 0};
  CHECK(unsetenv("CONVTUNE_PDL") == 0);
  CHECK(prepared_pdl(dc, &forward, &window, 9) == 1 && prepared_pdl(dc, &forward, &window, 8) == 0);
  CHECK(prepared_pdl(fr, &filter, &bands, 9) == 1 && prepared_pdl(fr, &filter, &bands, 8) == 0);
  CHECK(setenv("CONVTUNE_PDL", "0", 1) == 0);
  const int dc_off = prepared_pdl(dc, &forward, &window, 9);
  const int fr_off = prepared_pdl(fr, &filter, &bands, 9);
  CHECK(unsetenv("CONVTUNE_PDL") == 0);
  CHECK(dc_off == 0 && fr_off == 0);
  return TEST_PASS;
}

/* The fft candidate's applicability and transform sizes need no GPU. */
/* fft's backward-data: the transposed view's sizes (dy is P x Q, the view
 * pads by r - 1 - pad), where that view is a convolution fft runs; not a
 * pass padded past the filter (the view would need negative padding),
 * strided or dilated; never backward-filter (fft_filter's). */
static int fft_backward_configs(void) {
  const conv_algorithm *fft = conv_registry_find(CONV_ALGO_FFT);
  conv_env env;
  memset(&env, 0, sizeof env);
  env.cublaslt = (cublasLtHandle_t)&env; /* applicable() only checks it is there */
  conv_problem p = few_channels_31x31(CONV_BACKWARD_DATA);
  CHECK(fft->applicable(&p, &env));
  conv_config configs[16];
  int n = -1;
  CHECK_STATUS(CONV_OK, fft->configs(&p, &env, configs, 16, &n, NULL));
  CHECK(n == 10 && configs[0].values[0] == 560 && configs[0].values[1] == 560);
  /* A valid (unpadded) 100 x 60 input with a 5x3 filter: dy is 96 x 58,
   * the view pads it by (4, 2) back to 100 x 60, whose whole extents are
   * 104 (2^3 * 13 -> 105 = 3 * 5 * 7) and 60 + 3 - 1 = 62 -> 63 = 3^2 * 7. */
  p.h = 100; p.w = 60; p.r = 5; p.s = 3; p.pad_h = p.pad_w = 0; p.c = 3; p.k = 7;
  CHECK(fft->applicable(&p, &env));
  CHECK_STATUS(CONV_OK, fft->configs(&p, &env, configs, 16, &n, NULL));
  CHECK(n >= 2 && configs[0].values[0] == 105 && configs[0].values[1] == 63);
  conv_problem q = p;
  q.pad_h = 5; /* past the filter's reach */
  CHECK(!fft->applicable(&q, &env));
  CHECK_STATUS(CONV_OK, fft->configs(&q, &env, configs, 16, &n, NULL));
  CHECK(n == 0);
  conv_prepared prep;
  const conv_config whole = {3, {105, 63, 0}, 0};
  CHECK_STATUS(CONV_UNSUPPORTED, fft->prepare(&q, &env, &whole, &prep, NULL));
  q = p, q.stride_h = 2;
  CHECK(!fft->applicable(&q, &env));
  q = p, q.dil_w = 2;
  CHECK(!fft->applicable(&q, &env));
  q = p, q.direction = CONV_BACKWARD_FILTER;
  CHECK(!fft->applicable(&q, &env));
  return TEST_PASS;
}

static int fft_configs(void) {
  const conv_algorithm *fft = conv_registry_find(CONV_ALGO_FFT);
  CHECK(fft != NULL && strcmp(fft->name, "fft") == 0);
  conv_env env;
  memset(&env, 0, sizeof env);
  env.cublaslt = (cublasLtHandle_t)&env; /* applicable() only checks it is there */
  conv_problem p = few_channels_31x31(CONV_FORWARD);
  CHECK(fft->applicable(&p, &env));
  conv_config configs[16];
  int n = -1;
  CHECK_STATUS(CONV_OK, fft->configs(&p, &env, configs, 16, &n, NULL));
  /* The whole padded image (542 rounded up to 560 = 2^4*5*7), then the
   * powers of two that keep at least 31 outputs of a tile; each with our
   * product kernel first (4 x 4 channels), then the GEMM. */
  static const int64_t expected[] = {560, 512, 256, 128, 64};
  CHECK(n == 10);
  for (int i = 0; i < n; i++)
    CHECK(configs[i].count == 3 && configs[i].values[0] == expected[i / 2] &&
          configs[i].values[1] == expected[i / 2] && configs[i].values[2] == i % 2);
  int m = -1;
  CHECK_STATUS(CONV_OK, fft->configs(&p, &env, configs, 3, &m, NULL));
  CHECK(m == 3 && configs[2].values[0] == 512);
  /* 64 x 64 channels: the GEMM first. */
  p.c = p.k = 64;
  CHECK_STATUS(CONV_OK, fft->configs(&p, &env, configs, 16, &n, NULL));
  CHECK(n == 10 && configs[0].values[2] == 1 && configs[1].values[2] == 0);
  /* A wide image with a 3x11 filter (whole extents 24 and 315 = 3^2*5*7):
   * each axis has its own sizes, and an axis with no tile of a size keeps
   * its whole extent. */
  p.h = 20; p.w = 300; p.r = 3; p.s = 11; p.pad_h = 1; p.pad_w = 5;
  CHECK_STATUS(CONV_OK, fft->configs(&p, &env, configs, 16, &n, NULL));
  CHECK(n >= 4 && configs[0].values[0] == 24 && configs[0].values[1] == 315);
  CHECK(configs[2].values[0] == 24 && configs[2].values[1] == 256);
  /* Not applicable: strides, dilations, 1x1 filters. */
  p = (conv_problem){0};
  conv_problem_init(&p);
  p.n = 1; p.c = 4; p.h = 32; p.w = 32; p.k = 4; p.r = 3; p.s = 3;
  CHECK(fft->applicable(&p, &env));
  p.stride_h = 2;
  CHECK(!fft->applicable(&p, &env));
  p.stride_h = 1; p.dil_w = 2;
  CHECK(!fft->applicable(&p, &env));
  /* Groups: our product kernel only; a GEMM config is refused before any
   * cuFFT call. */
  p.dil_w = 1; p.groups = 2;
  CHECK(fft->applicable(&p, &env));
  CHECK_STATUS(CONV_OK, fft->configs(&p, &env, configs, 16, &n, NULL));
  CHECK(n > 0);
  for (int i = 0; i < n; i++) CHECK(configs[i].values[2] == 0);
  conv_prepared prep;
  const conv_config gemm = {3, {configs[0].values[0], configs[0].values[1], 1}, 0};
  CHECK_STATUS(CONV_UNSUPPORTED, fft->prepare(&p, &env, &gemm, &prep, NULL));
  p.groups = 1; p.r = p.s = 1;
  CHECK(!fft->applicable(&p, &env));
  CHECK_STATUS(CONV_OK, fft->configs(&p, &env, configs, 16, &n, NULL));
  CHECK(n == 0);
  return fft_backward_configs();
}

/* Whether a channel_split launch's threads own every output pixel exactly
 * once and read inside the staged window, by the mapping of
 * channel_split.cu: block b's tile starts at row (b / tiles_q) * ty and
 * column (b % tiles_q) * tx * pixels; thread (py, px) has row oh0 + py
 * and columns ow0 + px + j * tx. */
static bool split_tiles_cover(const conv_split_launch *l, const conv_problem *p) {
  unsigned char *seen = calloc((size_t)(l->p * l->q), 1);
  if (seen == NULL) return false;
  bool inside = true;
  const int pixels = l->tiling.pixels;
  for (unsigned b = 0; b < l->grid[0]; b++) {
    const int oh0 = (int)(b / (unsigned)l->tiles_q) * l->ty;
    const int ow0 = (int)(b % (unsigned)l->tiles_q) * l->tx * pixels;
    for (int py = 0; py < l->ty; py++) {
      for (int px = 0; px < l->tx; px++) {
        for (int j = 0; j < pixels; j++) {
          const int col = px + j * l->tx; /* in the tile */
          /* The last tap this output reads, in window coordinates. */
          inside = inside && py * p->stride_h + (p->r - 1) * p->dil_h < l->window_h &&
                   col * p->stride_w + (p->s - 1) * p->dil_w < l->window_w;
          if (oh0 + py < l->p && ow0 + col < l->q) seen[(oh0 + py) * l->q + ow0 + col]++;
        }
      }
    }
  }
  bool once = true;
  for (int i = 0; i < l->p * l->q; i++) once = once && seen[i] == 1;
  free(seen);
  return once && inside;
}

/* The channel_split candidate's configs and launch shapes need no GPU. */
static int channel_split_configs(void) {
  const conv_algorithm *split = conv_registry_find(CONV_ALGO_CHANNEL_SPLIT);
  CHECK(split != NULL && strcmp(split->name, "channel_split") == 0);
  conv_env env;
  memset(&env, 0, sizeof env);
  /* lc0_b1_8x8, latency_n1_c64, and a strided 5x3 with odd sizes. */
  const int64_t shapes[][10] = {
      /* n, c, h, w, k, r, s, stride, pad, dilation */
      {1, 256, 8, 8, 256, 3, 3, 1, 1, 1},
      {1, 64, 56, 56, 64, 3, 3, 1, 1, 1},
      {1, 13, 15, 14, 16, 5, 3, 2, 2, 1},
      {2, 9, 20, 19, 24, 3, 3, 1, 2, 2},
  };
  conv_config configs[256];
  for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
    const int64_t *v = shapes[i];
    conv_problem p;
    conv_problem_init(&p);
    p.n = v[0]; p.c = v[1]; p.h = v[2]; p.w = v[3]; p.k = v[4]; p.r = v[5]; p.s = v[6];
    p.stride_h = p.stride_w = v[7];
    p.pad_h = p.pad_w = v[8];
    p.dil_h = p.dil_w = v[9];
    CHECK(split->applicable(&p, &env));
    int n = -1;
    CHECK_STATUS(CONV_OK, split->configs(&p, &env, configs, 256, &n, NULL));
    CHECK_MSG(n > 0 && n < 256, "shape %zu: %d configs", i, n);
    for (int c = 0; c < n; c++) {
      CHECK(configs[c].count == 3);
      const conv_split_tiling t = {(int)configs[c].values[0], (int)configs[c].values[1],
                                   (int)configs[c].values[2]};
      conv_split_launch l;
      CHECK(conv_split_plan(&p, &t, &l, NULL, 0) && l.kernel != NULL);
      CHECK(l.threads == t.k_tile / CONV_SPLIT_K_PER_THREAD * l.tx * l.ty &&
            l.threads <= CONV_SPLIT_MAX_THREADS);
      CHECK(l.smem_bytes <= CONV_SPLIT_STAGE_FLOATS * sizeof(float) && l.stage_channels >= 1);
      CHECK((int64_t)l.c_per_split * (t.splits - 1) < p.c && l.c_per_split * t.splits >= p.c);
      CHECK_MSG(split_tiles_cover(&l, &p), "shape %zu, config %d", i, c);
      CHECK(l.workspace_bytes ==
            (t.splits > 1 ? (size_t)t.splits * p.n * p.k * l.p * l.q * sizeof(float) : 0));
    }
  }
  /* lc0 at 32 channels a block and 2 pixels a thread: 4 x 8 threads of
   * one group cover the board, the window is the padded 10 x 10 board. */
  conv_problem p;
  conv_problem_init(&p);
  p.n = 1; p.c = 256; p.h = 8; p.w = 8; p.k = 256; p.r = 3; p.s = 3;
  p.pad_h = p.pad_w = 1;
  conv_split_launch l;
  char why[160];
  const conv_split_tiling lc0 = {32, 2, 32};
  CHECK(conv_split_plan(&p, &lc0, &l, why, sizeof why));
  CHECK(l.tx == 4 && l.ty == 8 && l.threads == 128 && l.window_h == 10 && l.window_w == 10);
  CHECK(l.grid[0] == 1 && l.grid[1] == 8 && l.grid[2] == 32 && l.c_per_split == 8);
  const conv_split_tiling odd_pixels = {32, 3, 32}, odd_k = {8, 1, 1}, wasted = {32, 4, 32};
  CHECK(!conv_split_plan(&p, &odd_pixels, &l, why, sizeof why) && strstr(why, "pixels") != NULL);
  CHECK(!conv_split_plan(&p, &odd_k, &l, why, sizeof why) && strstr(why, "k_tile") != NULL);
  p.w = 2; /* q = 2: a thread's fourth pixel has no column */
  CHECK(!conv_split_plan(&p, &wasted, &l, why, sizeof why) && strstr(why, "fewer pixels") != NULL);
  p.w = 8;
  p.c = 4; p.h = p.w = 16; p.k = 64; p.r = p.s = 11; p.pad_h = p.pad_w = 5;
  const conv_split_tiling wide = {64, 1, 1};
  CHECK(!conv_split_plan(&p, &wide, &l, why, sizeof why) && strstr(why, "shared memory") != NULL);
  return TEST_PASS;
}

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

static const test_case tests[] = {
    {"divisor_matches_division", divisor_matches_division},
    {"nhwc_problems", nhwc_problems},
    {"direct_channel_configs", direct_channel_configs},
    {"direct_channel_simple_layout", direct_channel_simple_layout},
    {"launch_bound_plans_use_pdl_on_sm90", launch_bound_plans_use_pdl_on_sm90},
    {"fft_configs", fft_configs},
    {"channel_split_configs", channel_split_configs},
    {"patch_configs", patch_configs},
};
TEST_MAIN(tests)
