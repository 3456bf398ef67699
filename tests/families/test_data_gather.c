/* test_data_gather.c -- the data_gather family, our own backward-data for
 * the few-channel passes (strided or over-padded) that direct_channel's
 * transposed view of backward-data cannot run: so its cases test that
 * view too.  CPU: the view (a valid forward convolution, or a refusal),
 * which family takes which pass, data_gather's configs and plans and what
 * it refuses.  GPU (skipped without one): our backward kernels on the
 * layers they are for, each case's dx by direct_channel's view or else
 * data_gather, every dw by filter_reduce, every config against the CPU
 * reference. */
#include "algorithms/data_gather.h"
#include "algorithms/common/views.h"
#include "tests/gpu_support.h"
#include "tests/problem_fixtures.h"

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

/* Our backward kernels on the layers they are for (depthwise, 1->1 and
 * 16->1 dilated, 3->16, channel multipliers, odd sizes, many bands), in
 * both directions: each case's dx by direct_channel's transposed
 * convolution (stride 1) or else data_gather, which take no case both;
 * every case's dw by filter_reduce. */
static int direct_backward_matches_reference(void) {
  SKIP_WITHOUT_GPU();
  seed_rng();
  const conv_math S = CONV_MATH_STRICT, T = CONV_MATH_TF32;
  const conv_epilogue N = CONV_EPILOGUE_NONE;
  conv_problem cases[] = {
      direct_problem(2, 8, 56, 56, 8, 3, 3, 1, 1, 1, 8, N, S),       /* depthwise */
      direct_problem(2, 6, 57, 57, 6, 3, 3, 2, 1, 1, 6, N, S),       /* depthwise s2 */
      direct_problem(1, 1, 130, 131, 1, 3, 3, 1, 8, 8, 1, N, S),     /* 1->1, d8 */
      direct_problem(1, 1, 128, 128, 1, 3, 3, 1, 1, 1, 1, N, T),
      direct_problem(1, 16, 67, 64, 1, 3, 3, 1, 4, 4, 1, N, S),      /* 16->1, d4 */
      direct_problem(1, 3, 64, 64, 16, 3, 3, 1, 1, 1, 1, N, S),      /* 3->16 */
      direct_problem(2, 4, 33, 30, 8, 5, 5, 1, 4, 2, 4, N, S),       /* multiplier 2, d2 */
      direct_problem(2, 6, 31, 29, 6, 7, 7, 1, 3, 1, 6, N, S),       /* depthwise 7x7 */
      direct_problem(1, 5, 38, 41, 5, 5, 5, 2, 2, 1, 5, N, S),       /* depthwise 5x5 s2 */
      direct_problem(1, 2, 30, 26, 2, 3, 3, 1, 0, 2, 2, N, S),       /* valid, d2 */
      direct_problem(1, 16, 20, 20, 16, 3, 3, 1, 1, 1, 2, N, S),     /* 8x8 groups */
      direct_problem(3, 4, 300, 37, 4, 3, 3, 1, 1, 1, 4, N, S),      /* many bands */
      direct_problem(2, 3, 44, 48, 16, 4, 4, 4, 0, 1, 1, N, S),      /* 4x4 stride-4 stem */
      direct_problem(1, 32, 23, 26, 16, 1, 1, 1, 0, 1, 1, N, T),     /* 1x1, 32->16 */
      direct_problem(2, 4, 32, 32, 4, 2, 2, 2, 0, 1, 4, N, S),       /* 2x2 s2 */
      direct_problem(1, 3, 41, 50, 6, 3, 3, 1, 3, 2, 1, N, S),       /* dilation 2 x 3 */
      direct_problem(1, 2, 20, 24, 2, 3, 3, 1, 5, 1, 2, N, S),       /* padding past the filter */
      direct_problem(2, 4, 29, 31, 8, 3, 3, 3, 1, 1, 4, N, T),       /* stride 3, multiplier 2 */
      direct_problem(1, 6, 33, 35, 6, 3, 3, 2, 2, 2, 6, N, S),       /* depthwise s2, d2 */
      direct_problem(2, 4, 30, 27, 8, 3, 3, 2, 1, 1, 4, N, T),       /* s2, multiplier 2 */
      /* Rows of a multiple of 4 floats at stride 2: filter_reduce's float4
       * loads, with a partial last group of 4 columns (q = 14, 18). */
      direct_problem(2, 8, 30, 28, 8, 3, 3, 2, 1, 1, 8, N, S),       /* depthwise s2 */
      direct_problem(2, 4, 21, 36, 8, 3, 3, 2, 1, 1, 4, N, T),       /* s2, multiplier 2 */
  };
  cases[6].pad_w = 1; /* asymmetric padding */
  cases[15].dil_w = 3;
  enum { CASES = sizeof cases / sizeof cases[0] };
  conv_problem transposed[CASES], gathered[CASES], filter[CASES];
  int ntransposed = 0, ngathered = 0, nfilter = 0;
  conv_env env; /* applicable() reads the problem alone */
  memset(&env, 0, sizeof env);
  for (int i = 0; i < CASES; i++) {
    conv_problem p = cases[i];
    p.direction = CONV_BACKWARD_DATA;
    const bool direct = conv_algorithm_direct_channel.applicable(&p, &env);
    const bool gather = conv_algorithm_data_gather.applicable(&p, &env);
    CHECK_MSG(direct != gather, "case %d: direct_channel %s it, data_gather %s", i,
              direct ? "takes" : "refuses", gather ? "takes" : "refuses");
    if (direct) transposed[ntransposed++] = p;
    if (gather) gathered[ngathered++] = p;
    p.direction = CONV_BACKWARD_FILTER;
    CHECK_MSG(conv_algorithm_filter_reduce.applicable(&p, &env), "filter_reduce refuses case %d", i);
    filter[nfilter++] = p;
  }
  CHECK_MSG(ngathered == 10, "data_gather takes %d of the 10 strided or over-padded cases", ngathered);
  family_count count[3];
  if (run_family_on_cases(&conv_algorithm_direct_channel, transposed, (size_t)ntransposed, NULL, &count[0]) != TEST_PASS ||
      run_family_on_cases(&conv_algorithm_data_gather, gathered, (size_t)ngathered, NULL, &count[1]) != TEST_PASS ||
      run_family_on_cases(&conv_algorithm_filter_reduce, filter, (size_t)nfilter, NULL, &count[2]) != TEST_PASS)
    return TEST_FAIL;
  CHECK(count[0].wrong_caught == 0 && count[1].wrong_caught == 0 && count[2].wrong_caught == 0);
  return TEST_PASS;
}

static const labelled_test_case tests[] = {
    {"backward_data_view", backward_data_view, "cpu"},
    {"direct_backward_matches_reference", direct_backward_matches_reference, "gpu"},
};
TEST_MAIN(tests)
