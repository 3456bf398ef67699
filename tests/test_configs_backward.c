/* test_configs_backward.c -- CPU tests of the backward passes' families:
 * scope, configs and launch planning (direct_channel's transposed view of
 * backward-data, data_gather, filter_reduce, fft_filter, gemm_backward and
 * the wide im2col plan it runs).  Forward families: test_configs.c.  No GPU
 * needed: the GPU tests (test_backward) run the kernels. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "algorithms/data_gather.h"
#include "algorithms/direct_channel.h"
#include "algorithms/filter_reduce.h"
#include "algorithms/im2col.h"
#include "algorithms/patch_filter.h"
#include "runtime/cublaslt.h"
#include "runtime/internal.h"
#include "tests/problem_fixtures.h"
#include "tests/test.h"

/* The transposed view of a stride-1 backward-data pass is a valid forward
 * convolution whose input is dy and whose output has dx's shape; passes it
 * cannot express are refused. */
static int backward_data_view(void) {
  conv_problem p = pass_problem(16, 1, 1, 3, 1, 4, 4, CONV_BACKWARD_DATA), f;
  p.pad_w = 2; /* asymmetric */
  CHECK(conv_direct_backward_data_view(&p, &f));
  CHECK_STATUS(CONV_OK, conv_problem_validate(&f, NULL, 0));
  int64_t ph, pw, fp, fq;
  CHECK_STATUS(CONV_OK, conv_problem_output_dims(&p, &ph, &pw));
  CHECK(f.direction == CONV_FORWARD && f.c == 1 && f.k == 16 && f.h == ph && f.w == pw);
  CHECK(f.pad_h == 4 && f.pad_w == 6 && f.dil_h == 4 && f.stride_h == 1);
  CHECK_STATUS(CONV_OK, conv_problem_output_dims(&f, &fp, &fq));
  CHECK(fp == p.h && fq == p.w);

  conv_problem grouped = pass_problem(8, 16, 4, 5, 1, 2, 1, CONV_BACKWARD_DATA);
  CHECK(conv_direct_backward_data_view(&grouped, &f));
  CHECK(f.c == 16 && f.k == 8 && f.groups == 4 && f.pad_h == 2);

  conv_problem strided = pass_problem(4, 4, 4, 3, 2, 1, 1, CONV_BACKWARD_DATA);
  CHECK(!conv_direct_backward_data_view(&strided, &f));
  conv_problem cropped = pass_problem(4, 4, 4, 3, 1, 3, 1, CONV_BACKWARD_DATA); /* pad past r - 1 */
  CHECK(!conv_direct_backward_data_view(&cropped, &f));
  conv_problem forward = pass_problem(4, 4, 4, 3, 1, 1, 1, CONV_FORWARD);
  CHECK(!conv_direct_backward_data_view(&forward, &f));
  conv_problem nhwc = pass_problem(4, 4, 4, 3, 1, 1, 1, CONV_BACKWARD_DATA);
  nhwc.layout = CONV_LAYOUT_NHWC;
  CHECK(!conv_direct_backward_data_view(&nhwc, &f));

  /* The candidate follows the view: it takes the depthwise pass, not the
   * strided or cropped ones, nor a backward-filter pass. */
  conv_env env;
  memset(&env, 0, sizeof env);
  const conv_algorithm *dc = &conv_algorithm_direct_channel;
  conv_problem depthwise = pass_problem(8, 8, 8, 3, 1, 1, 1, CONV_BACKWARD_DATA);
  CHECK(dc->applicable(&depthwise, &env));
  CHECK(!dc->applicable(&strided, &env) && !dc->applicable(&cropped, &env));
  depthwise.direction = CONV_BACKWARD_FILTER;
  CHECK(!dc->applicable(&depthwise, &env));

  /* data_gather takes exactly the few-channel passes the view cannot run. */
  const conv_algorithm *dg = &conv_algorithm_data_gather;
  CHECK(dg->applicable(&strided, &env) && dg->applicable(&cropped, &env));
  CHECK(!dg->applicable(&depthwise, &env)); /* backward-filter */
  depthwise.direction = CONV_BACKWARD_DATA;
  CHECK(!dg->applicable(&depthwise, &env)); /* direct_channel's */
  conv_config configs[8];
  int n = -1;
  CHECK_STATUS(CONV_OK, dg->configs(&strided, &env, configs, 8, &n, NULL));
  CHECK(n == 6 && configs[0].values[0] == CONV_GATHER_QUAD); /* quad first at stride 2 */
  CHECK_STATUS(CONV_OK, dg->configs(&cropped, &env, configs, 8, &n, NULL));
  CHECK(n == 3 && configs[0].values[0] == CONV_GATHER_ELEMENT); /* stride 1: no quad */
  conv_data_gather_launch l;
  char why[160] = "";
  const conv_data_gather_tiling element = {CONV_GATHER_ELEMENT, 256}, quad = {CONV_GATHER_QUAD, 128};
  CHECK(conv_data_gather_plan(&strided, &element, &l, why, sizeof why));
  CHECK(l.threads_needed == 2 * 4 * 37 * 29 && (int64_t)l.blocks * 256 >= l.threads_needed);
  CHECK(l.p == 19 && l.q == 15);
  CHECK(conv_data_gather_plan(&strided, &quad, &l, why, sizeof why));
  CHECK(l.rows == 19 && l.cols == 15 && l.threads_needed == 2 * 4 * 19 * 15); /* 2x2 blocks */
  CHECK(!conv_data_gather_plan(&cropped, &quad, &l, why, sizeof why) && strstr(why, "stride 2"));
  const conv_data_gather_tiling odd = {CONV_GATHER_ELEMENT, 100};
  CHECK(!conv_data_gather_plan(&strided, &odd, &l, why, sizeof why) && strstr(why, "100 threads"));
  conv_problem wide = strided; /* a 9x9 filter: no kernel */
  wide.r = wide.s = 9;
  CHECK(!dg->applicable(&wide, &env));
  return TEST_PASS;
}

/* filter_reduce's per-tap blocks: offered after the bands for a pass of
 * at most CONV_FILTER_REDUCE_PER_TAP_MAX products a tap, 1024, 512 and
 * 256 threads, with no workspace; with other rows, cols or float4 refused. */
static int per_tap_configs(const conv_algorithm *fr) {
  conv_env env;
  memset(&env, 0, sizeof env);
  conv_problem small = pass_problem(1, 1, 1, 3, 1, 1, 1, CONV_BACKWARD_FILTER);
  small.n = 1, small.h = small.w = 64; /* seed3_msd_small */
  conv_config configs[256];
  int n = -1, taps = 0;
  CHECK_STATUS(CONV_OK, fr->configs(&small, &env, configs, 256, &n, NULL));
  for (int i = 0; i < n; i++) {
    const int64_t *v = configs[i].values;
    if (v[4] == 0) {
      CHECK_MSG(taps == 0, "config %d: bands after per-tap configs", i);
      continue;
    }
    const conv_filter_reduce_tiling t = {(int)v[0], (int)v[1], (int)v[2], (int)v[3], (int)v[4]};
    CHECK(t.threads == (1024 >> taps++));
    conv_filter_reduce_launch l;
    CHECK(conv_filter_reduce_plan(&small, &t, &l, NULL, 0));
    CHECK(l.bands == 1 && l.workspace_bytes == 0);
    CHECK(l.units_per_row == 64 && l.by_units.divisor == 64); /* the kernel's row split */
    CHECK(l.by_s.divisor == 3 && l.by_cg.divisor == 1 && l.by_kg.divisor == 1);
  }
  CHECK(taps == 3 && n > taps);
  const conv_config per_tap = {5, {0, 1024, 1, 0, 1}, 0}, with_rows = {5, {8, 1024, 1, 0, 1}, 0};
  conv_prepared prep;
  CHECK_STATUS(CONV_OK, fr->prepare(&small, &env, &per_tap, &prep, NULL));
  CHECK(prep.workspace_bytes == 0 && prep.deterministic);
  fr->release(prep.state);
  conv_error err = {CONV_OK, ""};
  CHECK_STATUS(CONV_UNSUPPORTED, fr->prepare(&small, &env, &with_rows, &prep, &err));
  CHECK_MSG(strstr(err.message, "rows 0, cols 1 and vector 0") != NULL, "%s", err.message);
  char text[64];
  fr->describe(&per_tap, text, sizeof text);
  CHECK(strcmp(text, "per-tap threads=1024") == 0);
  /* Few products a tap of a 2^30-element input: past the kernel's 32-bit
   * offsets. */
  conv_problem huge = small;
  huge.h = 32768, huge.w = 32769, huge.stride_h = huge.stride_w = 256;
  const conv_filter_reduce_tiling tap_1024 = {0, 1024, 1, 0, 1};
  conv_filter_reduce_launch l;
  char why[160];
  CHECK(!conv_filter_reduce_plan(&huge, &tap_1024, &l, why, sizeof why) && strstr(why, "2^30"));
  return TEST_PASS;
}

/* filter_reduce's configs all plan, cover every output row once, keep
 * their workspace within the cap and span 1, 2 and 4 columns; float4
 * loads only where they serve (3-wide, stride 2, padding 1, rows of a
 * multiple of 4 floats; cols 2 or 4); bad configs are refused with a
 * reason. */
static int filter_reduce_configs(void) {
  conv_env env;
  memset(&env, 0, sizeof env);
  const conv_algorithm *fr = conv_registry_find(CONV_ALGO_FILTER_REDUCE);
  CHECK(fr != NULL && strcmp(fr->name, "filter_reduce") == 0);
  conv_problem p = pass_problem(144, 144, 144, 3, 1, 1, 1, CONV_BACKWARD_FILTER);
  p.n = 32, p.h = p.w = 56;
  CHECK(fr->applicable(&p, &env));
  conv_config configs[128];
  int n = -1;
  CHECK_STATUS(CONV_OK, fr->configs(&p, &env, configs, 128, &n, NULL));
  CHECK(n > 2);
  int with_cols[5] = {0};
  for (int i = 0; i < n; i++) {
    CHECK(configs[i].count == 5);
    for (int j = 0; j < i; j++) CHECK(!conv_config_equal(&configs[i], &configs[j]));
    const conv_filter_reduce_tiling t = {(int)configs[i].values[0], (int)configs[i].values[1],
                                         (int)configs[i].values[2], (int)configs[i].values[3],
                                         (int)configs[i].values[4]};
    CHECK(t.per_tap == 0); /* 100352 products a tap */
    CHECK(t.cols == 1 || t.cols == 2 || t.cols == 4);
    CHECK(t.vector == 0); /* stride 1 */
    with_cols[t.cols]++;
    conv_filter_reduce_launch l;
    CHECK(conv_filter_reduce_plan(&p, &t, &l, NULL, 0));
    CHECK(l.units_per_row == (56 + t.cols - 1) / t.cols);
    CHECK((int64_t)l.bands_per_image * t.rows >= l.p && (int64_t)(l.bands_per_image - 1) * t.rows < l.p);
    CHECK(l.bands == l.n * l.bands_per_image && l.pairs == 144);
    CHECK(l.workspace_bytes == (l.bands > 1 ? (size_t)l.bands * 144 * 9 * sizeof(float) : 0));
    CHECK(l.workspace_bytes <= CONV_FILTER_REDUCE_WORKSPACE_MAX);
  }
  /* Bad configs are refused with a reason, not planned. */
  char why[160] = "";
  conv_filter_reduce_launch l;
  CHECK(with_cols[1] > 0 && with_cols[2] > 0 && with_cols[4] > 0 && n < 128);
  const conv_filter_reduce_tiling odd = {8, 100, 1, 0, 0}, none = {0, 128, 1, 0, 0},
                                  three = {8, 128, 3, 0, 0}, vector_s1 = {8, 128, 2, 1, 0},
                                  vector_2 = {8, 128, 2, 2, 0}, tap_2 = {0, 128, 1, 0, 2},
                                  tap_large = {0, 1024, 1, 0, 1};
  CHECK(!conv_filter_reduce_plan(&p, &odd, &l, why, sizeof why) && strstr(why, "100 threads"));
  CHECK(!conv_filter_reduce_plan(&p, &none, &l, why, sizeof why) && strstr(why, "0 rows"));
  CHECK(!conv_filter_reduce_plan(&p, &three, &l, why, sizeof why) && strstr(why, "3 columns"));
  CHECK(!conv_filter_reduce_plan(&p, &vector_s1, &l, why, sizeof why) && strstr(why, "float4"));
  CHECK(!conv_filter_reduce_plan(&p, &vector_2, &l, why, sizeof why) && strstr(why, "vector 2"));
  CHECK(!conv_filter_reduce_plan(&p, &tap_2, &l, why, sizeof why) && strstr(why, "per_tap 2"));
  CHECK(!conv_filter_reduce_plan(&p, &tap_large, &l, why, sizeof why) &&
        strstr(why, "100352 products a tap"));
  /* MobileNet's depthwise stride-2 layer: float4 configs, with cols 2 or
   * 4 only, after the scalar ones; not for rows of 110 floats. */
  conv_problem down = pass_problem(96, 96, 96, 3, 2, 1, 1, CONV_BACKWARD_FILTER);
  down.n = 32, down.h = down.w = 112;
  CHECK_STATUS(CONV_OK, fr->configs(&down, &env, configs, 128, &n, NULL));
  int vectors = 0;
  for (int i = 0; i < n; i++) {
    if (configs[i].values[3] == 0) {
      CHECK_MSG(vectors == 0, "config %d: scalar after float4 ones", i);
      continue;
    }
    vectors++;
    CHECK(configs[i].values[2] == 2 || configs[i].values[2] == 4);
  }
  CHECK(vectors > 0 && vectors < n);
  down.w = 110;
  CHECK_STATUS(CONV_OK, fr->configs(&down, &env, configs, 128, &n, NULL));
  for (int i = 0; i < n; i++) CHECK(configs[i].values[3] == 0);
  const conv_config too_many = {5, {8, 1 << 21, 1, 0, 0}, 0},
                    three_cols = {5, {8, 128, 3, 0, 0}, 0};
  conv_prepared prep;
  CHECK_STATUS(CONV_UNSUPPORTED, fr->prepare(&p, &env, &too_many, &prep, NULL));
  CHECK_STATUS(CONV_UNSUPPORTED, fr->prepare(&p, &env, &three_cols, &prep, NULL));
  /* Older versions' values (two before cols, three before vector, four
   * before per_tap): never read back (the version is in the key), and
   * refused if they were. */
  const conv_config before_cols = {2, {8, 128}, 0}, before_vector = {3, {8, 128, 1}, 0},
                    before_per_tap = {4, {8, 128, 1, 0}, 0}, one_col = {5, {8, 128, 1, 0, 0}, 0};
  CHECK_STATUS(CONV_UNSUPPORTED, fr->prepare(&p, &env, &before_cols, &prep, NULL));
  CHECK_STATUS(CONV_UNSUPPORTED, fr->prepare(&p, &env, &before_vector, &prep, NULL));
  CHECK_STATUS(CONV_UNSUPPORTED, fr->prepare(&p, &env, &before_per_tap, &prep, NULL));
  char text[64];
  fr->describe(&before_cols, text, sizeof text);
  CHECK(strcmp(text, "invalid config") == 0);
  CHECK_STATUS(CONV_OK, fr->prepare(&p, &env, &one_col, &prep, NULL));
  CHECK(((const conv_filter_reduce_launch *)prep.state)->tiling.cols == 1);
  fr->release(prep.state);
  fr->describe(&one_col, text, sizeof text);
  CHECK(strcmp(text, "rows=8 threads=128 cols=1") == 0);
  const conv_config float4 = {5, {8, 128, 4, 1, 0}, 0};
  fr->describe(&float4, text, sizeof text);
  CHECK(strcmp(text, "rows=8 threads=128 cols=4 float4") == 0);
  if (per_tap_configs(fr) != TEST_PASS) return TEST_FAIL;

  conv_problem wide = p; /* a 9x9 filter: no kernel */
  wide.r = wide.s = 9, wide.pad_h = wide.pad_w = 4;
  CHECK(!fr->applicable(&wide, &env));
  conv_problem dense = pass_problem(64, 64, 1, 3, 1, 1, 1, CONV_BACKWARD_FILTER);
  CHECK(!fr->applicable(&dense, &env));
  conv_problem data = p;
  data.direction = CONV_BACKWARD_DATA;
  CHECK(!fr->applicable(&data, &env));
  CHECK_STATUS(CONV_OK, fr->configs(&data, &env, configs, 64, &n, NULL));
  CHECK(n == 0);
  return TEST_PASS;
}

/* fft_filter takes NCHW backward-filter passes at stride 1, dilation 1,
 * with more than one tap, any groups (depthwise too), up to 4096 filter
 * planes (k x c/groups); it lists the same transform sizes as `fft`, and
 * refuses configs that are not two values or whose transform does not
 * hold the filter, before any cuFFT call. */
static int fft_filter_configs(void) {
  const conv_algorithm *ff = conv_registry_find(CONV_ALGO_FFT_FILTER);
  CHECK(ff != NULL && strcmp(ff->name, "fft_filter") == 0);
  CHECK(conv_registry_find_name("fft_filter") == ff);
  conv_env env;
  memset(&env, 0, sizeof env);
  conv_problem p = few_channels_31x31(CONV_BACKWARD_FILTER);
  CHECK(ff->applicable(&p, &env));
  conv_config configs[16];
  int n = -1;
  CHECK_STATUS(CONV_OK, ff->configs(&p, &env, configs, 16, &n, NULL));
  static const int64_t expected[] = {560, 512, 256, 128, 64};
  CHECK(n == 5);
  for (int i = 0; i < n; i++)
    CHECK(configs[i].count == 2 && configs[i].values[0] == expected[i] &&
          configs[i].values[1] == expected[i]);
  CHECK_STATUS(CONV_OK, ff->configs(&p, &env, configs, 2, &n, NULL));
  CHECK(n == 2);
  char text[64];
  ff->describe(&configs[1], text, sizeof text);
  CHECK(strcmp(text, "tile=512x512") == 0);
  /* Refused before planning: three values, a transform smaller than the
   * filter, one past the size cap. */
  conv_prepared prep;
  const conv_config three = {3, {560, 560, 0}, 0}, small = {2, {16, 560}, 0},
                    huge = {2, {8192, 560}, 0};
  CHECK_STATUS(CONV_UNSUPPORTED, ff->prepare(&p, &env, &three, &prep, NULL));
  CHECK_STATUS(CONV_UNSUPPORTED, ff->prepare(&p, &env, &small, &prep, NULL));
  CHECK_STATUS(CONV_UNSUPPORTED, ff->prepare(&p, &env, &huge, &prep, NULL));
  /* Groups: RepLKNet's depthwise 31x31 (128 planes); 8 channels per
   * group of 512 outputs (4096 planes). */
  conv_problem q = p;
  q.c = q.k = q.groups = 128, q.h = q.w = 56;
  CHECK(ff->applicable(&q, &env));
  q.c = 256, q.k = 512, q.groups = 32;
  CHECK(ff->applicable(&q, &env));
  q.groups = 16;
  CHECK(!ff->applicable(&q, &env));
  /* Not applicable: the other passes, strides, dilations, 1x1 filters,
   * NHWC, more than 4096 filter planes. */
  q = p;
  q.direction = CONV_FORWARD;
  CHECK(!ff->applicable(&q, &env));
  q.direction = CONV_BACKWARD_DATA;
  CHECK(!ff->applicable(&q, &env));
  CHECK_STATUS(CONV_OK, ff->configs(&q, &env, configs, 16, &n, NULL));
  CHECK(n == 0);
  q = p, q.stride_w = 2;
  CHECK(!ff->applicable(&q, &env));
  q = p, q.dil_h = 2;
  CHECK(!ff->applicable(&q, &env));
  q = p, q.r = q.s = 1, q.pad_h = q.pad_w = 0;
  CHECK(!ff->applicable(&q, &env));
  q = p, q.layout = CONV_LAYOUT_NHWC;
  CHECK(!ff->applicable(&q, &env));
  q = p, q.c = 64, q.k = 64;
  CHECK(ff->applicable(&q, &env));
  q.k = 65;
  CHECK(!ff->applicable(&q, &env));
  return TEST_PASS;
}

/* gemm_backward takes both backward passes of any NCHW convolution
 * (strides, dilations, groups) where cuBLASLt is there, and nothing else;
 * it refuses, before any cuBLASLt call, configs that are not two values,
 * chunks that do not divide the batch and algo ranks out of range. */
static int gemm_backward_configs(void) {
  const conv_algorithm *gb = conv_registry_find(CONV_ALGO_GEMM_BACKWARD);
  CHECK(gb != NULL && strcmp(gb->name, "gemm_backward") == 0);
  CHECK(conv_registry_find_name("gemm_backward") == gb);
  conv_env env;
  memset(&env, 0, sizeof env);
  conv_problem p = pass_problem(8, 12, 4, 3, 2, 1, 2, CONV_BACKWARD_FILTER);
  p.n = 6;
  CHECK(!gb->applicable(&p, &env)); /* no cuBLASLt handle */
  conv_config configs[4];
  int n = -1;
  CHECK_STATUS(CONV_OK, gb->configs(&p, &env, configs, 4, &n, NULL));
  CHECK(n == 0);
  env.cublaslt = (cublasLtHandle_t)&env; /* applicable() only checks it is there */
  CHECK(gb->applicable(&p, &env));
  p.direction = CONV_BACKWARD_DATA;
  CHECK(gb->applicable(&p, &env));
  conv_problem q = p;
  q.direction = CONV_FORWARD;
  CHECK(!gb->applicable(&q, &env));
  q = p, q.layout = CONV_LAYOUT_NHWC;
  CHECK(!gb->applicable(&q, &env));
  conv_prepared prep = {0};
  const conv_config three = {3, {1, 0, 0}, 0}, not_divisor = {2, {4, 0}, 0},
                    none = {2, {0, 0}, 0}, past = {2, {12, 0}, 0},
                    rank = {2, {3, CONV_CUBLASLT_HEURISTIC_MAX}, 0};
  CHECK_STATUS(CONV_UNSUPPORTED, gb->prepare(&p, &env, &three, &prep, NULL));
  CHECK_STATUS(CONV_UNSUPPORTED, gb->prepare(&p, &env, &not_divisor, &prep, NULL));
  CHECK_STATUS(CONV_UNSUPPORTED, gb->prepare(&p, &env, &none, &prep, NULL));
  CHECK_STATUS(CONV_UNSUPPORTED, gb->prepare(&p, &env, &past, &prep, NULL));
  CHECK_STATUS(CONV_UNSUPPORTED, gb->prepare(&p, &env, &rank, &prep, NULL));
  CHECK(prep.state == NULL);
  const conv_config ok = {2, {3, 1}, 0};
  char text[64];
  gb->describe(&ok, text, sizeof text);
  CHECK(strcmp(text, "batch=3 gemm_algo=1") == 0);
  return TEST_PASS;
}

/* A listed config of seed1_patch8's backward-filter (32 -> 64 channels,
 * 8x8) plans with its kernel's pitches: FMA x planes of 64 floats + 1 (odd)
 * and dy as it is; MMA 10x10 bordered x planes and dy rows of 68. */
static int seed1_patch8_config_plans(const conv_problem *p, const conv_config *config) {
  const conv_patch_filter_tiling t = {(int)config->values[0], (int)config->values[1],
                                      (int)config->values[2]};
  conv_patch_filter_launch l;
  char why[160] = "";
  CHECK_MSG(conv_patch_filter_plan(p, &t, &l, why, sizeof why), "%s", why);
  const bool mma = t.kind == CONV_PATCH_FILTER_MMA;
  const int x_pitch = mma ? 100 : 65, dy_pitch = mma ? 68 : 64;
  CHECK(l.threads == 256 && l.x_pitch == x_pitch && l.dy_pitch == dy_pitch);
  CHECK((int64_t)l.groups * t.images >= p->n);
  CHECK(l.stage_floats == t.images * (32 * x_pitch + 64 * dy_pitch) && l.stage_floats % 4 == 0);
  return TEST_PASS;
}

/* patch_filter takes the backward-filter pass of 3x3 "same" layers on 4x4
 * and 8x8 patches whose (K / 8) * C threads fill whole warps of a block;
 * every config it lists plans, and it refuses the rest with a reason. */
static int patch_filter_configs(void) {
  const conv_algorithm *pf = conv_registry_find(CONV_ALGO_PATCH_FILTER);
  CHECK(pf != NULL && strcmp(pf->name, "patch_filter") == 0);
  CHECK(conv_registry_find_name("patch_filter") == pf);
  conv_env env;
  memset(&env, 0, sizeof env);
  env.device.sm_count = 132;
  conv_problem p;
  conv_problem_init(&p);
  p.n = 20480; p.c = 32; p.h = p.w = 8; p.k = 64; p.r = p.s = 3; /* seed1_patch8 */
  p.pad_h = p.pad_w = 1;
  p.direction = CONV_BACKWARD_FILTER;
  CHECK(pf->applicable(&p, &env));
  conv_config configs[32];
  int n = -1;
  CHECK_STATUS(CONV_OK, pf->configs(&p, &env, configs, 32, &n, NULL));
  CHECK(n == 5); /* of 8 FMA ones (strict: no MMA): 4 or 8 8x8 images, 25 KB each, a stage past 227 KiB */
  for (int i = 0; i < n; i++) {
    CHECK(configs[i].values[0] == CONV_PATCH_FILTER_FMA);
    if (seed1_patch8_config_plans(&p, &configs[i]) != TEST_PASS) return TEST_FAIL;
  }
  /* TF32: the tensor-core configs first (bordered 10x10 x planes, dy rows
   * of 68 floats; 30 KB an image), then the FMA ones. */
  conv_problem tf32 = p;
  tf32.math = CONV_MATH_TF32;
  CHECK_STATUS(CONV_OK, pf->configs(&tf32, &env, configs, 32, &n, NULL));
  CHECK(n == 4 + 5);
  for (int i = 0; i < n; i++) {
    CHECK(configs[i].values[0] == (i < 4 ? CONV_PATCH_FILTER_MMA : CONV_PATCH_FILTER_FMA));
    if (seed1_patch8_config_plans(&tf32, &configs[i]) != TEST_PASS) return TEST_FAIL;
  }
  conv_problem other = p;
  other.h = other.w = 4; /* seed1_patch4: 6 KB an image, every config fits */
  CHECK(pf->applicable(&other, &env));
  CHECK_STATUS(CONV_OK, pf->configs(&other, &env, configs, 32, &n, NULL));
  CHECK(n == 8);
  other.math = CONV_MATH_TF32;
  CHECK_STATUS(CONV_OK, pf->configs(&other, &env, configs, 32, &n, NULL));
  CHECK(n == 7 + 8);
  other = p, other.direction = CONV_FORWARD;
  CHECK(!pf->applicable(&other, &env));
  other = p, other.direction = CONV_BACKWARD_DATA;
  CHECK(!pf->applicable(&other, &env));
  other = p, other.h = other.w = 16;
  CHECK(!pf->applicable(&other, &env));
  other = p, other.w = 4;
  CHECK(!pf->applicable(&other, &env));
  other = p, other.stride_h = other.stride_w = 2;
  CHECK(!pf->applicable(&other, &env));
  other = p, other.pad_h = other.pad_w = 0;
  CHECK(!pf->applicable(&other, &env));
  other = p, other.k = 60; /* not in eights */
  CHECK(!pf->applicable(&other, &env));
  other = p, other.c = 128; /* 1024 threads */
  CHECK(!pf->applicable(&other, &env));
  other = p, other.c = 6, other.k = 16; /* 12 threads */
  CHECK(!pf->applicable(&other, &env));
  conv_prepared prep;
  conv_error err = {CONV_OK, ""};
  const conv_config odd = {3, {0, 3, 2}, 0}, deep = {3, {0, 4, 5}, 0}, mma = {3, {1, 2, 2}, 0};
  CHECK_STATUS(CONV_UNSUPPORTED, pf->prepare(&p, &env, &odd, &prep, &err));
  CHECK(strncmp(err.message, "patch_filter:", 13) == 0 && strstr(err.message, "3 images"));
  CHECK_STATUS(CONV_UNSUPPORTED, pf->prepare(&p, &env, &deep, &prep, &err));
  CHECK(strstr(err.message, "5 stages") != NULL);
  CHECK_STATUS(CONV_UNSUPPORTED, pf->prepare(&p, &env, &mma, &prep, &err)); /* strict */
  CHECK(strstr(err.message, "TF32") != NULL);
  other = p, other.math = CONV_MATH_TF32, other.k = 48; /* in eights, not 32s: FMA only */
  CHECK_STATUS(CONV_UNSUPPORTED, pf->prepare(&other, &env, &mma, &prep, &err));
  CHECK(strstr(err.message, "multiple of 32") != NULL);
  char text[64];
  CHECK_STATUS(CONV_OK, pf->configs(&p, &env, configs, 32, &n, NULL));
  pf->describe(&configs[0], text, sizeof text);
  CHECK(strcmp(text, "fma images=4 stages=2") == 0);
  pf->describe(&mma, text, sizeof text);
  CHECK(strcmp(text, "tf32-mma images=2 stages=2") == 0);
  return TEST_PASS;
}

/* The wide im2col plan gemm_backward makes once per plan: a chunk's col
 * and x sizes, x's step between images, and a refusal where a chunk would
 * pass 32-bit indexing. */
static int wide_plan(void) {
  conv_problem p = pass_problem(6, 8, 2, 3, 2, 1, 1, CONV_BACKWARD_FILTER); /* 37x29 -> 19x15 */
  conv_wide_launch l;
  CHECK(conv_wide_plan(&p, 2, &l));
  CHECK(l.p == 19 && l.q == 15 && l.images == 2);
  CHECK(l.col_total == 2u * 6 * 3 * 3 * 19 * 15);
  CHECK(l.x_total == 2u * 6 * 37 * 29 && l.image_floats == 6 * 37 * 29);
  CHECK(l.by_pq.divisor == 19 * 15 && l.by_rs.divisor == 9 && l.by_images.divisor == 2);
  CHECK(!conv_wide_plan(&p, 0, &l));
  p.n = 2000, p.c = 512; /* 1.3 million col floats an image: 2000 pass 2^31 */
  CHECK(!conv_wide_plan(&p, 2000, &l));
  CHECK(conv_wide_plan(&p, 1, &l));
  /* dy's wide layout: the im2col of a 1x1 filter on 1 x plane images. */
  CHECK(conv_channels_wide_plan(64, 49, 4, &l));
  CHECK(l.c == 64 && l.h == 1 && l.w == 49 && l.r == 1 && l.p == 1 && l.q == 49);
  CHECK(l.col_total == 64u * 4 * 49 && l.image_floats == 64 * 49);
  CHECK(!conv_channels_wide_plan(64, 0, 4, &l));
  return TEST_PASS;
}

static const test_case tests[] = {
    {"backward_data_view", backward_data_view},
    {"filter_reduce_configs", filter_reduce_configs},
    {"fft_filter_configs", fft_filter_configs},
    {"gemm_backward_configs", gemm_backward_configs},
    {"wide_plan", wide_plan},
    {"patch_filter_configs", patch_filter_configs},
};
TEST_MAIN(tests)
