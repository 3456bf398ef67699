/* test_channel_split.c -- the channel_split family (small outputs, many
 * channels).  CPU: every config plans, its threads cover every output
 * pixel once inside the staged window, the tilings it refuses, and its
 * guesses, listed first to fill the GPU.  GPU
 * (skipped without one): every config against the CPU reference, with
 * split channel sums wherever there are two channels to split. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "algorithms/channel_split.h"
#include "tests/gpu_support.h"

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

/* Its guesses come first, sized to fill the GPU: {64, 2} and {32, 1}
 * marked best guesses, {64, 1} listed next, with the splits whose blocks
 * come nearest 4 per SM, each split summing 4 channels or more. */
static int channel_split_guesses_first(void) {
  const conv_algorithm *split = &conv_algorithm_channel_split;
  CHECK(split->marks_best_guesses != NULL);
  conv_env env;
  memset(&env, 0, sizeof env);
  env.device.sm_count = 132;
  conv_config configs[256];
  int n = -1;
  /* densenet121's c128 7x7 3x3 layer at batch 16: 16 x 32 = 512 blocks;
   * {32, 1, 32} is what an exhaustive tuning picks (H200); {64, 1} has
   * two pixel tiles. */
  const conv_problem dense =
      direct_problem(16, 128, 7, 7, 32, 3, 3, 1, 1, 1, 1, CONV_EPILOGUE_NONE, CONV_MATH_TF32);
  CHECK(split->marks_best_guesses(&dense));
  CHECK_STATUS(CONV_OK, split->configs(&dense, &env, configs, 256, &n, NULL));
  const int64_t expected[][3] = {{64, 2, 32}, {32, 1, 32}, {64, 1, 16}};
  for (int i = 0; i < 3; i++)
    CHECK_MSG(configs[i].values[0] == expected[i][0] && configs[i].values[1] == expected[i][1] &&
                  configs[i].values[2] == expected[i][2],
              "config %d: %lld,%lld,%lld", i, (long long)configs[i].values[0],
              (long long)configs[i].values[1], (long long)configs[i].values[2]);
  int marked = 0;
  for (int i = 0; i < n; i++) {
    marked += (configs[i].flags & CONV_CONFIG_BEST_GUESS) != 0;
    for (int j = 0; j < i; j++) CHECK(!conv_config_equal(&configs[i], &configs[j]));
  }
  CHECK(marked == 2 && (configs[0].flags & configs[1].flags & CONV_CONFIG_BEST_GUESS));
  /* 16 input channels: 4 splits at most, however few the blocks. */
  const conv_problem few =
      direct_problem(1, 16, 8, 8, 64, 3, 3, 1, 1, 1, 1, CONV_EPILOGUE_NONE, CONV_MATH_STRICT);
  CHECK_STATUS(CONV_OK, split->configs(&few, &env, configs, 256, &n, NULL));
  CHECK(configs[1].values[0] == 32 && configs[1].values[1] == 1 && configs[1].values[2] == 4);
  /* No SM count known: still guesses, aiming at 4 blocks. */
  env.device.sm_count = 0;
  CHECK_STATUS(CONV_OK, split->configs(&dense, &env, configs, 256, &n, NULL));
  CHECK(n > 3 && (configs[0].flags & CONV_CONFIG_BEST_GUESS) && configs[0].values[2] == 1);
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

static const labelled_test_case tests[] = {
    {"channel_split_configs", channel_split_configs, "cpu"},
    {"channel_split_guesses_first", channel_split_guesses_first, "cpu"},
    {"channel_split_matches_reference", channel_split_matches_reference, "gpu"},
};
TEST_MAIN(tests)
