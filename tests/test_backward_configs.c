/* test_backward_configs.c -- CPU tests of how our backward families plan:
 * direct_channel's transposed view of backward-data, data_gather's share
 * of the rest, and filter_reduce's bands.  No GPU needed; test_backward
 * runs the kernels. */
#include <stdint.h>
#include <string.h>

#include "algorithms/data_gather.h"
#include "algorithms/direct_channel.h"
#include "algorithms/filter_reduce.h"
#include "runtime/internal.h"
#include "tests/test.h"

static conv_problem pass(int64_t c, int64_t k, int64_t groups, int64_t r, int64_t stride,
                         int64_t pad, int64_t dil, conv_direction direction) {
  conv_problem p;
  conv_problem_init(&p);
  p.n = 2; p.c = c; p.h = 37; p.w = 29; p.k = k; p.r = p.s = r;
  p.stride_h = p.stride_w = stride;
  p.pad_h = p.pad_w = pad;
  p.dil_h = p.dil_w = dil;
  p.groups = groups;
  p.direction = direction;
  return p;
}

/* The transposed view of a stride-1 backward-data pass is a valid forward
 * convolution whose input is dy and whose output has dx's shape; passes it
 * cannot express are refused. */
static int backward_data_view(void) {
  conv_problem p = pass(16, 1, 1, 3, 1, 4, 4, CONV_BACKWARD_DATA), f;
  p.pad_w = 2; /* asymmetric */
  CHECK(conv_direct_backward_data_view(&p, &f));
  CHECK_STATUS(CONV_OK, conv_problem_validate(&f, NULL, 0));
  int64_t ph, pw, fp, fq;
  CHECK_STATUS(CONV_OK, conv_problem_output_dims(&p, &ph, &pw));
  CHECK(f.direction == CONV_FORWARD && f.c == 1 && f.k == 16 && f.h == ph && f.w == pw);
  CHECK(f.pad_h == 4 && f.pad_w == 6 && f.dil_h == 4 && f.stride_h == 1);
  CHECK_STATUS(CONV_OK, conv_problem_output_dims(&f, &fp, &fq));
  CHECK(fp == p.h && fq == p.w);

  conv_problem grouped = pass(8, 16, 4, 5, 1, 2, 1, CONV_BACKWARD_DATA);
  CHECK(conv_direct_backward_data_view(&grouped, &f));
  CHECK(f.c == 16 && f.k == 8 && f.groups == 4 && f.pad_h == 2);

  conv_problem strided = pass(4, 4, 4, 3, 2, 1, 1, CONV_BACKWARD_DATA);
  CHECK(!conv_direct_backward_data_view(&strided, &f));
  conv_problem cropped = pass(4, 4, 4, 3, 1, 3, 1, CONV_BACKWARD_DATA); /* pad past r - 1 */
  CHECK(!conv_direct_backward_data_view(&cropped, &f));
  conv_problem forward = pass(4, 4, 4, 3, 1, 1, 1, CONV_FORWARD);
  CHECK(!conv_direct_backward_data_view(&forward, &f));
  conv_problem nhwc = pass(4, 4, 4, 3, 1, 1, 1, CONV_BACKWARD_DATA);
  nhwc.layout = CONV_LAYOUT_NHWC;
  CHECK(!conv_direct_backward_data_view(&nhwc, &f));

  /* The candidate follows the view: it takes the depthwise pass, not the
   * strided or cropped ones, nor a backward-filter pass. */
  conv_env env;
  memset(&env, 0, sizeof env);
  const conv_algorithm *dc = &conv_algorithm_direct_channel;
  conv_problem depthwise = pass(8, 8, 8, 3, 1, 1, 1, CONV_BACKWARD_DATA);
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

/* filter_reduce's configs all plan, cover every output row once, keep
 * their partial sums within the workspace cap, and the family refuses
 * what it has no kernel or no use for. */
static int filter_reduce_configs(void) {
  conv_env env;
  memset(&env, 0, sizeof env);
  const conv_algorithm *fr = conv_registry_find(CONV_ALGO_FILTER_REDUCE);
  CHECK(fr != NULL && strcmp(fr->name, "filter_reduce") == 0);
  conv_problem p = pass(144, 144, 144, 3, 1, 1, 1, CONV_BACKWARD_FILTER);
  p.n = 32, p.h = p.w = 56;
  CHECK(fr->applicable(&p, &env));
  conv_config configs[64];
  int n = -1;
  CHECK_STATUS(CONV_OK, fr->configs(&p, &env, configs, 64, &n, NULL));
  CHECK(n > 2);
  for (int i = 0; i < n; i++) {
    CHECK(configs[i].count == 2);
    for (int j = 0; j < i; j++) CHECK(!conv_config_equal(&configs[i], &configs[j]));
    const conv_filter_reduce_tiling t = {(int)configs[i].values[0], (int)configs[i].values[1]};
    conv_filter_reduce_launch l;
    CHECK(conv_filter_reduce_plan(&p, &t, &l, NULL, 0));
    CHECK((int64_t)l.bands_per_image * t.rows >= l.p && (int64_t)(l.bands_per_image - 1) * t.rows < l.p);
    CHECK(l.bands == l.n * l.bands_per_image && l.pairs == 144);
    CHECK(l.workspace_bytes == (l.bands > 1 ? (size_t)l.bands * 144 * 9 * sizeof(float) : 0));
    CHECK(l.workspace_bytes <= CONV_FILTER_REDUCE_WORKSPACE_MAX);
  }
  /* Bad configs are refused with a reason, not planned. */
  char why[160] = "";
  conv_filter_reduce_launch l;
  const conv_filter_reduce_tiling odd = {8, 100}, none = {0, 128};
  CHECK(!conv_filter_reduce_plan(&p, &odd, &l, why, sizeof why) && strstr(why, "100 threads"));
  CHECK(!conv_filter_reduce_plan(&p, &none, &l, why, sizeof why) && strstr(why, "0 rows"));
  const conv_config too_many = {2, {8, 1 << 21}, 0};
  conv_prepared prep;
  CHECK_STATUS(CONV_UNSUPPORTED, fr->prepare(&p, &env, &too_many, &prep, NULL));

  conv_problem wide = p; /* a 9x9 filter: no kernel */
  wide.r = wide.s = 9, wide.pad_h = wide.pad_w = 4;
  CHECK(!fr->applicable(&wide, &env));
  conv_problem dense = pass(64, 64, 1, 3, 1, 1, 1, CONV_BACKWARD_FILTER);
  CHECK(!fr->applicable(&dense, &env));
  conv_problem data = p;
  data.direction = CONV_BACKWARD_DATA;
  CHECK(!fr->applicable(&data, &env));
  CHECK_STATUS(CONV_OK, fr->configs(&data, &env, configs, 64, &n, NULL));
  CHECK(n == 0);
  return TEST_PASS;
}

static const test_case tests[] = {
    {"backward_data_view", backward_data_view},
    {"filter_reduce_configs", filter_reduce_configs},
};
TEST_MAIN(tests)
