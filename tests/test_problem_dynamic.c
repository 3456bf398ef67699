/* test_problem_dynamic.c -- CPU tests of the dynamic op's problems
 * (CONV_OP_DYNAMIC): validation, sizes, output dims, keys and specs.
 * Convolutions' problems: test_problem.c. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "algorithms/algorithm.h"
#include "tests/test.h"

/* involution_7x7 of the suite: 32 x 64 x 56 x 56, 7x7, 4 groups. */
static conv_problem involution_problem(void) {
  conv_problem p;
  conv_problem_init(&p);
  p.op = CONV_OP_DYNAMIC;
  p.n = 32; p.c = 64; p.h = 56; p.w = 56; p.k = 64; p.r = 7; p.s = 7;
  p.pad_h = p.pad_w = 3;
  p.groups = 4;
  return p;
}

/* Valid dynamic problems: their sizes, output dims and keys ("dyn "
 * first, never a convolution's). */
static int dynamic_problems(void) {
  conv_problem p = involution_problem();
  char key[CONV_PROBLEM_KEY_MAX], message[256] = "";
  CHECK_STATUS(CONV_OK, conv_problem_validate(&p, message, sizeof message));
  conv_shape sh;
  CHECK_STATUS(CONV_OK, conv_problem_shape(&p, &sh));
  CHECK(sh.p == 56 && sh.q == 56 && sh.c_per_group == 16 && sh.k_per_group == 16);
  CHECK(sh.x_elems == 32LL * 64 * 56 * 56 && sh.y_elems == sh.x_elems);
  CHECK(sh.w_elems == 32LL * 4 * 49 * 56 * 56 && sh.out_elems == sh.y_elems);
  CHECK_STATUS(CONV_OK, conv_problem_key(&p, key, sizeof key));
  CHECK_MSG(strcmp(key, "dyn fwd f32 nchw strict none n32 c64 h56 w56 k64 r7 s7 pad3,3 str1,1 "
                        "dil1,1 g4") == 0, "%s", key);
  conv_problem same_fields = p;
  same_fields.op = CONV_OP_CONVOLUTION;
  char conv_key[CONV_PROBLEM_KEY_MAX];
  CHECK_STATUS(CONV_OK, conv_problem_key(&same_fields, conv_key, sizeof conv_key));
  CHECK(strcmp(key, conv_key) != 0 && strcmp(key + 4, conv_key) == 0);
  /* Stride 2 halves the output, rounding up; the weights are per output
   * pixel; dilation 2 with 'same' padding 6. */
  p.stride_h = p.stride_w = 2;
  p.h = 55;
  p.dil_h = p.dil_w = 2;
  p.pad_h = p.pad_w = 6;
  p.direction = CONV_BACKWARD_FILTER;
  p.deterministic = 1;
  int64_t out_p = 0, out_q = 0;
  CHECK_STATUS(CONV_OK, conv_problem_output_dims(&p, &out_p, &out_q));
  CHECK(out_p == 28 && out_q == 28);
  CHECK_STATUS(CONV_OK, conv_problem_shape(&p, &sh));
  CHECK(sh.w_elems == 32LL * 4 * 49 * 28 * 28 && sh.out_elems == sh.w_elems);
  CHECK_STATUS(CONV_OK, conv_problem_key(&p, key, sizeof key));
  CHECK_MSG(strcmp(key, "dyn bwd_filter f32 nchw strict none n32 c64 h55 w56 k64 r7 s7 pad6,6 "
                        "str2,2 dil2,2 g4 det") == 0, "%s", key);
  p.direction = CONV_BACKWARD_DATA;
  CHECK_STATUS(CONV_OK, conv_problem_shape(&p, &sh));
  CHECK(sh.out_elems == sh.x_elems);
  /* k = 1 is odd: a per-pixel scale of each group. */
  p = involution_problem();
  p.r = p.s = 1;
  p.pad_h = p.pad_w = 0;
  CHECK_STATUS(CONV_OK, conv_problem_validate(&p, NULL, 0));
  /* A 0.2.0 caller's struct ends before `op`: it is a convolution. */
  p = involution_problem();
  p.struct_size = CONV_PROBLEM_FIRST_SIZE;
  CHECK_STATUS(CONV_OK, conv_problem_key(&p, key, sizeof key));
  CHECK(strncmp(key, "fwd ", 4) == 0);
  return TEST_PASS;
}

static void dyn_even_k(conv_problem *p) { p->r = p->s = 4; }
static void dyn_r_not_s(conv_problem *p) { p->s = 5; }
static void dyn_k_not_c(conv_problem *p) { p->k = 32; }
static void dyn_groups_3(conv_problem *p) { p->groups = 3; }
static void dyn_groups_0(conv_problem *p) { p->groups = 0; }
static void dyn_bias(conv_problem *p) { p->epilogue = CONV_EPILOGUE_BIAS; }
static void dyn_bias_relu(conv_problem *p) { p->epilogue = CONV_EPILOGUE_BIAS_RELU; }
static void dyn_nhwc(conv_problem *p) { p->layout = CONV_LAYOUT_NHWC; }
static void dyn_stride_3(conv_problem *p) { p->stride_h = p->stride_w = 3; }
static void dyn_stride_1_2(conv_problem *p) { p->stride_w = 2; }
static void dyn_dil_1_2(conv_problem *p) { p->dil_w = 2; }
static void dyn_pad_wrong(conv_problem *p) { p->pad_h = 2; }
static void dyn_pad_zero_small(conv_problem *p) { p->pad_h = p->pad_w = 0; p->h = p->w = 3; }
static void dyn_op_7(conv_problem *p) { p->op = (conv_op)7; }
static void dyn_fp16(conv_problem *p) { p->dtype = CONV_DTYPE_F16; }
/* x has 2^26 elements, the weights 64 * 49 * 2^20 > 2^31. */
static void dyn_weights_2_31(conv_problem *p) {
  p->n = 64; p->c = p->k = 1; p->groups = 1; p->h = p->w = 1024;
}
static void dyn_input_2_31(conv_problem *p) { p->n = 1 << 12; p->h = p->w = 1 << 10; }
static void dyn_overflow_64(conv_problem *p) {
  p->n = p->h = p->w = (int64_t)1 << 30;
  p->c = p->k = (int64_t)1 << 30;
}

static int dynamic_validation(void) {
  const struct {
    const char *what;
    void (*mutate)(conv_problem *);
    conv_status expected;
    const char *says; /* in the message */
  } cases[] = {
      {"even k", dyn_even_k, CONV_EVEN_FILTER, "k = 4 is even"},
      {"r != s", dyn_r_not_s, CONV_BAD_DIMENSION, "must be equal"},
      {"k != c", dyn_k_not_c, CONV_BAD_DIMENSION, "must equal c = 64"},
      {"groups 3 of 64", dyn_groups_3, CONV_BAD_GROUPS, "groups = 3 must divide c = 64"},
      {"groups 0", dyn_groups_0, CONV_BAD_GROUPS, "groups = 0"},
      {"bias", dyn_bias, CONV_UNSUPPORTED, "dynamic: epilogue bias"},
      {"bias_relu", dyn_bias_relu, CONV_UNSUPPORTED, "dynamic: epilogue bias_relu"},
      {"nhwc", dyn_nhwc, CONV_UNSUPPORTED, "nchw only"},
      {"stride 3", dyn_stride_3, CONV_UNSUPPORTED, "stride 3,3"},
      {"stride 1,2", dyn_stride_1_2, CONV_UNSUPPORTED, "stride 1,2"},
      {"dilation 1,2", dyn_dil_1_2, CONV_UNSUPPORTED, "dilation 1,2"},
      {"pad 2,3", dyn_pad_wrong, CONV_BAD_PADDING, "must be (k-1)/2*dil = 3,3"},
      {"pad 0, small image", dyn_pad_zero_small, CONV_BAD_PADDING, "'same' padding"},
      {"op 7", dyn_op_7, CONV_UNSUPPORTED, "op 7"},
      {"fp16", dyn_fp16, CONV_UNSUPPORTED, "dtype f16: this version runs the dynamic op in f32 only"},
      {"weights past 2^31", dyn_weights_2_31, CONV_SIZE_OVERFLOW, "weights tensor"},
      {"input past 2^31", dyn_input_2_31, CONV_SIZE_OVERFLOW, "input tensor"},
      {"64-bit overflow", dyn_overflow_64, CONV_SIZE_OVERFLOW, "overflows 64 bits"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    conv_problem p = involution_problem();
    cases[i].mutate(&p);
    char message[256] = "", key[CONV_PROBLEM_KEY_MAX] = "untouched";
    const conv_status st = conv_problem_validate(&p, message, sizeof message);
    CHECK_MSG(st == cases[i].expected, "%s: got %s (%s)", cases[i].what, conv_status_string(st),
              message);
    CHECK_MSG(strstr(message, cases[i].says) != NULL, "%s: message '%s'", cases[i].what, message);
    CHECK_STATUS(cases[i].expected, conv_problem_key(&p, key, sizeof key));
    CHECK(strcmp(key, "untouched") == 0);
  }
  CHECK(strcmp(conv_status_string(CONV_EVEN_FILTER),
               "a dynamic convolution's filter size is even (it must be odd)") == 0);
  return TEST_PASS;
}

/* op=dynamic in specs, with k, s and pad following from c, r and dil. */
static int dynamic_specs(void) {
  conv_problem parsed, want = involution_problem();
  char message[256] = "";
  CHECK_STATUS(CONV_OK, conv_problem_parse("op=dynamic n=32 c=64 h=56 w=56 r=7 g=4", &parsed,
                                           message, sizeof message));
  CHECK_MSG(memcmp(&parsed, &want, sizeof want) == 0, "involution spec differs");
  CHECK_STATUS(CONV_OK, conv_problem_parse("op=DYNAMIC n=32 c=64 h=56 w=56 k=64 r=7 s=7 pad=3 "
                                           "g=4", &parsed, message, sizeof message));
  CHECK(memcmp(&parsed, &want, sizeof want) == 0);
  CHECK_STATUS(CONV_OK, conv_problem_parse("op=dynamic n=64 c=3 h=224 w=224 r=5 dil=2 stride=2 "
                                           "dir=bwd_data", &parsed, message, sizeof message));
  CHECK(parsed.op == CONV_OP_DYNAMIC && parsed.k == 3 && parsed.s == 5 && parsed.pad_h == 4 &&
        parsed.pad_w == 4 && parsed.direction == CONV_BACKWARD_DATA);
  /* What is given is kept, and judged. */
  CHECK_STATUS(CONV_BAD_PADDING, conv_problem_parse("op=dynamic n=1 c=3 h=9 w=9 r=5 pad=1",
                                                    &parsed, message, sizeof message));
  CHECK(strstr(message, "'same' padding") != NULL);
  CHECK_STATUS(CONV_EVEN_FILTER,
               conv_problem_parse("op=dynamic n=1 c=3 h=9 w=9 r=4", &parsed, message, sizeof message));
  CHECK_STATUS(CONV_BAD_DIMENSION, conv_problem_parse("op=dynamic n=1 c=3 h=9 w=9 k=6 r=3",
                                                      &parsed, message, sizeof message));
  CHECK_STATUS(CONV_INVALID_ARGUMENT,
               conv_problem_parse("op=involve n=1 c=3 h=9 w=9 r=3", &parsed, message, sizeof message));
  CHECK(strstr(message, "op=involve") != NULL);
  CHECK_STATUS(CONV_INVALID_ARGUMENT, conv_problem_parse("op=dynamic op=conv n=1 c=3 h=9 w=9 r=3",
                                                         &parsed, message, sizeof message));
  /* op=conv is the default: no defaults filled in for it. */
  CHECK_STATUS(CONV_OK, conv_problem_parse("op=conv n=1 c=3 h=9 w=9 k=2 r=3 s=3", &parsed, message,
                                           sizeof message));
  CHECK(parsed.op == CONV_OP_CONVOLUTION && parsed.pad_h == 0 && parsed.k == 2);
  return TEST_PASS;
}

static const test_case tests[] = {
    {"dynamic_problems", dynamic_problems},
    {"dynamic_validation", dynamic_validation},
    {"dynamic_specs", dynamic_specs},
};
TEST_MAIN(tests)
