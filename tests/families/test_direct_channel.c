/* test_direct_channel.c -- the direct_channel family.  CPU: its configs
 * and launch planning (the window layout's threads cover every output
 * once, float4 window loads exactly where compiled, the SIMPLE layout for
 * small passes) and the tilings it refuses.  GPU (skipped without one):
 * every config against the CPU reference on the shapes its kernels are
 * for, with the window layout and its float4 loads exactly where they
 * apply.  Its backward-data (the transposed view) is tested beside
 * data_gather's, which takes the passes that view cannot
 * (test_data_gather.c); its programmatic dependent launch beside
 * filter_reduce's (test_configs.c).  fp16 and bf16: the simple and
 * window layouts, NCHW and the one-channel NHWC twins, and the NHWC layout
 * (CPU: what it takes and lists; GPU: every config against the reference,
 * forward and backward-data, forward only for the NHWC layout). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "algorithms/direct_channel.h"
#include "algorithms/direct_nhwc.h"
#include "tests/gpu_support.h"
#include "tests/problem_fixtures.h"

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

/* The family, and an environment without a GPU: applicability and the
 * config lists read the problem alone. */
static const conv_algorithm *family_without_gpu(conv_env *env) {
  memset(env, 0, sizeof *env);
  return conv_registry_find(CONV_ALGO_DIRECT_CHANNEL);
}

static int direct_channel_configs(void) {
  conv_env env;
  const conv_algorithm *dc = family_without_gpu(&env);
  CHECK(dc != NULL && strcmp(dc->name, "direct_channel") == 0);
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
    conv_direct_tiling t = conv_direct_tiling_of(&configs[i]);
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

/* The SIMPLE layout: offered for small passes only, first up to
 * CONV_DIRECT_SIMPLE_FIRST_OUTPUTS outputs, else last; a thread per
 * output, the grid's z over images and output channels. */
static int direct_channel_simple_layout(void) {
  conv_env env;
  const conv_algorithm *dc = family_without_gpu(&env);
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

static bool is_window(const void *state) {
  return ((const conv_direct_launch *)state)->tiling.layout == CONV_DIRECT_WINDOW;
}

static bool is_window_float4(const void *state) {
  return is_window(state) && ((const conv_direct_launch *)state)->vector_loads;
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

/* ---- half precision: the simple layout */

/* Half problems: taken where the simple or window layout plans (NCHW, and
 * NHWC of one input and one output channel, whose fp32 twin it leaves
 * alone), each config simple or a window one with one output channel a
 * thread; refused past them (a 9x9 filter, a 1x7 one over a million
 * outputs, a depthwise NHWC problem); the tiled layouts refuse to plan
 * them. */
static int half_layouts(void) {
  conv_env env;
  const conv_algorithm *dc = family_without_gpu(&env);
  conv_config configs[64];
  int n = -1;
  const conv_math S = CONV_MATH_STRICT;
  conv_problem takes[] = {
      direct_problem(1, 1, 256, 256, 1, 3, 3, 1, 8, 8, 1, CONV_EPILOGUE_NONE, S), /* 1->1 d8 */
      direct_problem(2, 8, 56, 56, 8, 3, 3, 1, 1, 1, 8, CONV_EPILOGUE_BIAS_RELU, S),
      channels_last(direct_problem(1, 1, 64, 64, 1, 3, 3, 1, 1, 1, 1, CONV_EPILOGUE_BIAS, S)),
  };
  for (size_t i = 0; i < sizeof takes / sizeof takes[0]; i++)
    for (int d = 0; d < 2; d++) {
      conv_problem p = takes[i];
      p.dtype = d ? CONV_DTYPE_BF16 : CONV_DTYPE_F16;
      CHECK_MSG(dc->applicable(&p, &env), "case %zu", i);
      CHECK_STATUS(CONV_OK, dc->configs(&p, &env, configs, 64, &n, NULL));
      CHECK(n > 0);
      for (int j = 0; j < n; j++)
        CHECK(configs[j].values[0] == CONV_DIRECT_SIMPLE ||
              (configs[j].values[0] == CONV_DIRECT_WINDOW && configs[j].values[3] == 1));
      p.direction = CONV_BACKWARD_DATA; /* stride 1, within the padding: the view */
      p.epilogue = CONV_EPILOGUE_NONE;
      CHECK_MSG(dc->applicable(&p, &env), "case %zu backward-data", i);
    }
  conv_problem fp32_twin = takes[2];
  CHECK(!dc->applicable(&fp32_twin, &env)); /* fp32 NHWC: not in this version */
  conv_problem refuses[] = {
      direct_problem(1, 1, 64, 64, 1, 9, 9, 1, 4, 1, 1, CONV_EPILOGUE_NONE, S), /* 9x9 */
      direct_problem(2, 1, 1024, 1024, 1, 1, 7, 1, 3, 1, 1, CONV_EPILOGUE_NONE, S), /* 1x7, 2M */
      channels_last(direct_problem(2, 8, 56, 56, 8, 3, 3, 1, 1, 1, 8, CONV_EPILOGUE_NONE, S)),
  };
  for (size_t i = 0; i < sizeof refuses / sizeof refuses[0]; i++) {
    conv_problem p = refuses[i];
    CHECK(i == 2 || dc->applicable(&p, &env)); /* fp32 takes the NCHW ones */
    p.dtype = CONV_DTYPE_F16;
    CHECK_MSG(!dc->applicable(&p, &env), "refused case %zu", i);
    CHECK_STATUS(CONV_OK, dc->configs(&p, &env, configs, 64, &n, NULL));
    CHECK(n == 0);
  }
  conv_problem half = takes[0];
  half.dtype = CONV_DTYPE_F16;
  const conv_direct_tiling window = {CONV_DIRECT_WINDOW, 2, 4, 1, 32, 4},
                           window_kb4 = {CONV_DIRECT_WINDOW, 2, 2, 4, 32, 4},
                           unit = {CONV_DIRECT_UNIT, 4, 1, 1, 32, 4};
  conv_direct_launch l, l32;
  char why[160];
  CHECK(conv_direct_plan(&half, &window, &l, why, sizeof why) && !l.vector_stores);
  CHECK(conv_direct_plan(&takes[0], &window, &l32, why, sizeof why) && l32.kernel != l.kernel);
  conv_problem three_to_16 = direct_problem(1, 3, 64, 64, 16, 3, 3, 1, 1, 1, 1,
                                            CONV_EPILOGUE_NONE, S);
  CHECK(conv_direct_plan(&three_to_16, &window_kb4, &l32, why, sizeof why));
  three_to_16.dtype = CONV_DTYPE_BF16; /* 4 output channels a thread: fp32's alone */
  CHECK(!conv_direct_plan(&three_to_16, &window_kb4, &l, why, sizeof why) && strstr(why, "type"));
  CHECK(!conv_direct_plan(&half, &unit, &l, why, sizeof why) && strstr(why, "fp32 only"));
  return TEST_PASS;
}

/* Half NHWC forward problems of one group and 1, 2, 4, 8, 16 or 32 output
 * channels: taken, every config the NHWC layout with kb = K, 16-byte loads
 * exactly where C is a multiple of 8; refused with another K, groups, past
 * the shared memory for the filters, in fp32 (its configs are unchanged in
 * this version) and backward.  The NHWC layout plans NHWC problems only and
 * the others NCHW ones only. */
static int half_nhwc_layout(void) {
  conv_env env;
  const conv_algorithm *dc = family_without_gpu(&env);
  conv_config configs[64];
  int n = -1;
  const conv_math S = CONV_MATH_STRICT;
  const conv_problem takes[] = {
      channels_last(direct_problem(1, 16, 1024, 1024, 1, 3, 3, 1, 4, 4, 1, CONV_EPILOGUE_NONE, S)),
      channels_last(direct_problem(2, 3, 100, 90, 16, 3, 3, 1, 1, 1, 1, CONV_EPILOGUE_BIAS, S)),
      channels_last(direct_problem(2, 32, 9, 7, 8, 5, 5, 2, 2, 1, 1, CONV_EPILOGUE_BIAS_RELU, S)),
      channels_last(direct_problem(16, 3, 224, 224, 32, 3, 3, 2, 1, 1, 1, CONV_EPILOGUE_NONE, S)),
  };
  for (size_t i = 0; i < sizeof takes / sizeof takes[0]; i++)
    for (int d = 0; d < 2; d++) {
      conv_problem p = takes[i];
      p.dtype = d ? CONV_DTYPE_BF16 : CONV_DTYPE_F16;
      CHECK_MSG(dc->applicable(&p, &env), "case %zu", i);
      CHECK_STATUS(CONV_OK, dc->configs(&p, &env, configs, 64, &n, NULL));
      CHECK(n >= 2);
      for (int j = 0; j < n; j++) {
        const conv_direct_tiling t = conv_direct_tiling_of(&configs[j]);
        CHECK(t.layout == CONV_DIRECT_NHWC && t.kb == p.k && t.tx <= 64 && t.ty <= 16);
        conv_direct_launch l;
        CHECK(conv_direct_plan(&p, &t, &l, NULL, 0));
        CHECK(l.vector_loads == (p.c % 8 == 0) && l.grid[2] == (unsigned)p.n);
      }
      conv_problem fp32 = takes[i];
      CHECK(!dc->applicable(&fp32, &env));
      p.direction = CONV_BACKWARD_DATA;
      p.epilogue = CONV_EPILOGUE_NONE;
      CHECK_MSG(!dc->applicable(&p, &env), "case %zu backward-data", i);
    }
  conv_problem refuses[] = {
      channels_last(direct_problem(1, 8, 32, 32, 3, 3, 3, 1, 1, 1, 1, CONV_EPILOGUE_NONE, S)),
      channels_last(direct_problem(1, 8, 32, 32, 64, 3, 3, 1, 1, 1, 1, CONV_EPILOGUE_NONE, S)),
      channels_last(direct_problem(1, 16, 32, 32, 16, 3, 3, 1, 1, 1, 2, CONV_EPILOGUE_NONE, S)),
      channels_last(direct_problem(1, 32, 32, 32, 16, 7, 7, 1, 3, 1, 1, CONV_EPILOGUE_NONE, S)),
      channels_last(direct_problem(1, 16, 32, 32, 32, 5, 5, 1, 2, 1, 1, CONV_EPILOGUE_NONE, S)),
  };
  for (size_t i = 0; i < sizeof refuses / sizeof refuses[0]; i++) {
    conv_problem p = refuses[i];
    p.dtype = CONV_DTYPE_BF16;
    CHECK_MSG(!dc->applicable(&p, &env), "refused case %zu", i);
  }
  conv_problem nhwc = takes[0], nchw = takes[0];
  nhwc.dtype = nchw.dtype = CONV_DTYPE_F16;
  nchw.layout = CONV_LAYOUT_NCHW;
  const conv_direct_tiling pixel = {CONV_DIRECT_NHWC, 1, 1, 1, 32, 8},
                           simple = {CONV_DIRECT_SIMPLE, 1, 1, 1, 32, 8};
  conv_direct_launch l;
  char why[160];
  CHECK(conv_direct_plan(&nhwc, &pixel, &l, why, sizeof why));
  CHECK(!conv_direct_plan(&nchw, &pixel, &l, why, sizeof why) && strstr(why, "NHWC"));
  CHECK(!conv_direct_plan(&nhwc, &simple, &l, why, sizeof why) && strstr(why, "NCHW"));
  nhwc.dtype = CONV_DTYPE_F32;
  CHECK(!conv_direct_plan(&nhwc, &pixel, &l, why, sizeof why) && strstr(why, "fp16"));
  return TEST_PASS;
}

/* Every simple and window config in the type against the reference: one-channel
 * rows (dilated, the MSD nets'), depthwise with every epilogue, grouped
 * 16->1 and 3->16 ones, 1x1 and 7x7 filters, stride 2, and the one-channel
 * NHWC twin; then their stride-1 backward-data passes (the view). */
static int half_passes(conv_dtype dtype) {
  SKIP_WITHOUT_GPU();
  const conv_math S = CONV_MATH_STRICT;
  conv_problem cases[] = {
      direct_problem(1, 1, 130, 131, 1, 3, 3, 1, 8, 8, 1, CONV_EPILOGUE_NONE, S),
      direct_problem(1, 1, 64, 64, 1, 3, 3, 1, 1, 1, 1, CONV_EPILOGUE_BIAS, S),
      direct_problem(2, 8, 56, 56, 8, 3, 3, 1, 1, 1, 8, CONV_EPILOGUE_BIAS_RELU, S),
      direct_problem(1, 16, 67, 64, 1, 3, 3, 1, 4, 4, 1, CONV_EPILOGUE_NONE, S),
      direct_problem(1, 3, 64, 64, 16, 3, 3, 1, 1, 1, 1, CONV_EPILOGUE_BIAS, S),
      direct_problem(2, 6, 31, 29, 6, 7, 7, 1, 3, 1, 6, CONV_EPILOGUE_BIAS, S),
      direct_problem(1, 5, 38, 41, 5, 5, 5, 2, 2, 1, 5, CONV_EPILOGUE_NONE, S),
      direct_problem(2, 4, 20, 22, 8, 1, 1, 1, 0, 1, 4, CONV_EPILOGUE_BIAS, S),
      channels_last(direct_problem(1, 1, 96, 80, 1, 3, 3, 1, 4, 4, 1, CONV_EPILOGUE_BIAS, S)),
      /* The NHWC layout: 16->1 dilated (16-byte loads), 3->16 (single
       * loads), 24->8 strided 5x5 with bias+ReLU, 12->2 7x7, 8->4 1x1,
       * and a 3->32 stride-2 stem. */
      channels_last(direct_problem(1, 16, 67, 64, 1, 3, 3, 1, 4, 4, 1, CONV_EPILOGUE_NONE, S)),
      channels_last(direct_problem(2, 3, 50, 45, 16, 3, 3, 1, 1, 1, 1, CONV_EPILOGUE_BIAS, S)),
      channels_last(
          direct_problem(2, 24, 33, 30, 8, 5, 5, 2, 2, 1, 1, CONV_EPILOGUE_BIAS_RELU, S)),
      channels_last(direct_problem(1, 12, 29, 31, 2, 7, 7, 1, 3, 1, 1, CONV_EPILOGUE_BIAS, S)),
      channels_last(direct_problem(3, 8, 17, 19, 4, 1, 1, 1, 0, 1, 1, CONV_EPILOGUE_NONE, S)),
      channels_last(direct_problem(2, 3, 57, 60, 32, 3, 3, 2, 1, 1, 1, CONV_EPILOGUE_BIAS, S)),
  };
  const size_t n = sizeof cases / sizeof cases[0];
  int rc = half_family_matches_reference(&conv_algorithm_direct_channel, cases, n, dtype,
                                         "forward");
  if (rc != TEST_PASS) return rc;
  conv_problem backward[] = {cases[0], cases[1], cases[2], cases[3], cases[5], cases[8]};
  const size_t nb = sizeof backward / sizeof backward[0];
  for (size_t i = 0; i < nb; i++) {
    backward[i].direction = CONV_BACKWARD_DATA;
    backward[i].epilogue = CONV_EPILOGUE_NONE;
  }
  return half_family_matches_reference(&conv_algorithm_direct_channel, backward, nb, dtype,
                                       "backward-data");
}
static int f16_passes(void) { return half_passes(CONV_DTYPE_F16); }
static int bf16_passes(void) { return half_passes(CONV_DTYPE_BF16); }

static const labelled_test_case tests[] = {
    {"direct_channel_configs", direct_channel_configs, "cpu"},
    {"direct_channel_simple_layout", direct_channel_simple_layout, "cpu"},
    {"half_layouts", half_layouts, "cpu"},
    {"half_nhwc_layout", half_nhwc_layout, "cpu"},
    {"direct_channel_matches_reference", direct_channel_matches_reference, "gpu"},
    {"f16_passes", f16_passes, "gpu"},
    {"bf16_passes", bf16_passes, "gpu"},
};
TEST_MAIN(tests)
