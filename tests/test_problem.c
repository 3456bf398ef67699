/* test_problem.c -- CPU tests: statuses, validation, output sizes, keys,
 * specs, config text, cache paths, patches, a context without a GPU, and
 * the routing of the library's messages to a log callback.
 * The dynamic op's problems: test_problem_dynamic.c; the candidate
 * families' configs: test_configs.c. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "algorithms/algorithm.h"
#include "tests/test.h"
#include "tuner/tuner.h"

static conv_problem base_problem(void) {
  conv_problem p;
  conv_problem_init(&p);
  p.n = 2; p.c = 8; p.h = 17; p.w = 13; p.k = 6; p.r = 3; p.s = 3;
  p.pad_h = p.pad_w = 1;
  return p;
}

static int status_strings(void) {
  for (int s = 0; s < CONV_STATUS_COUNT_; s++) {
    const char *text = conv_status_string((conv_status)s);
    CHECK(text != NULL && text[0] != '\0');
    CHECK(strcmp(text, "unknown status") != 0);
    for (int t = 0; t < s; t++) CHECK(strcmp(text, conv_status_string((conv_status)t)) != 0);
  }
  CHECK(strcmp(conv_status_string(CONV_STATUS_COUNT_), "unknown status") == 0);
  CHECK(strcmp(conv_status_string((conv_status)-1), "unknown status") == 0);
  CHECK(strcmp(conv_status_string(CONV_OK), "success") == 0);
  return TEST_PASS;
}

/* One mutation of a valid problem and the status it must produce. */
typedef struct bad_case {
  const char *what;
  void (*mutate)(conv_problem *);
  conv_status expected;
} bad_case;

static void zero_n(conv_problem *p) { p->n = 0; }
static void negative_c(conv_problem *p) { p->c = -3; }
static void absurd_w(conv_problem *p) { p->w = (int64_t)1 << 40; }
static void huge_tensor(conv_problem *p) { p->n = 1 << 20; p->c = 1 << 10; p->h = p->w = 1 << 10; }
static void overflow_64(conv_problem *p) { p->n = p->c = p->h = p->w = (int64_t)1 << 30; p->k = 1 << 30; }
static void filter_too_big(conv_problem *p) { p->r = 21; }
static void dilated_too_big(conv_problem *p) { p->dil_h = 10; }
static void groups_not_dividing(conv_problem *p) { p->groups = 3; }
static void zero_groups(conv_problem *p) { p->groups = 0; }
static void negative_pad(conv_problem *p) { p->pad_w = -1; }
static void zero_stride(conv_problem *p) { p->stride_h = 0; }
static void zero_dilation(conv_problem *p) { p->dil_w = 0; }
static void dtype_7(conv_problem *p) { p->dtype = (conv_dtype)7; }
static void bad_layout(conv_problem *p) { p->layout = (conv_layout)7; }
static void bad_direction(conv_problem *p) { p->direction = (conv_direction)5; }
static void backward_with_bias(conv_problem *p) {
  p->direction = CONV_BACKWARD_FILTER;
  p->epilogue = CONV_EPILOGUE_BIAS;
}
static void bad_math(conv_problem *p) { p->math = (conv_math)7; }
static void bad_epilogue(conv_problem *p) { p->epilogue = (conv_epilogue)9; }
static void deterministic_2(conv_problem *p) { p->deterministic = 2; }

static int validate_each_failure(void) {
  const bad_case cases[] = {
      {"n = 0", zero_n, CONV_BAD_DIMENSION},
      {"c < 0", negative_c, CONV_BAD_DIMENSION},
      {"w = 2^40", absurd_w, CONV_BAD_DIMENSION},
      {"2^40 elements", huge_tensor, CONV_SIZE_OVERFLOW},
      {"2^120 elements", overflow_64, CONV_SIZE_OVERFLOW},
      {"r > padded h", filter_too_big, CONV_FILTER_TOO_LARGE},
      {"dilated r > padded h", dilated_too_big, CONV_FILTER_TOO_LARGE},
      {"groups 3 of c 8", groups_not_dividing, CONV_BAD_GROUPS},
      {"groups 0", zero_groups, CONV_BAD_GROUPS},
      {"pad -1", negative_pad, CONV_BAD_PADDING},
      {"stride 0", zero_stride, CONV_BAD_STRIDE},
      {"dilation 0", zero_dilation, CONV_BAD_STRIDE},
      {"dtype 7", dtype_7, CONV_UNSUPPORTED},
      {"layout 7", bad_layout, CONV_UNSUPPORTED},
      {"direction 5", bad_direction, CONV_UNSUPPORTED},
      {"backward with an epilogue", backward_with_bias, CONV_UNSUPPORTED},
      {"math 7", bad_math, CONV_UNSUPPORTED},
      {"epilogue 9", bad_epilogue, CONV_UNSUPPORTED},
      {"deterministic 2", deterministic_2, CONV_INVALID_ARGUMENT},
  };
  conv_problem good = base_problem();
  char msg[256];
  CHECK_STATUS(CONV_OK, conv_problem_validate(&good, msg, sizeof msg));
  CHECK(msg[0] == '\0');
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    conv_problem p = base_problem();
    cases[i].mutate(&p);
    msg[0] = '\0';
    conv_status st = conv_problem_validate(&p, msg, sizeof msg);
    CHECK_MSG(st == cases[i].expected, "%s: got %s", cases[i].what, conv_status_string(st));
    CHECK_MSG(msg[0] != '\0', "%s: no message", cases[i].what);
  }
  CHECK_STATUS(CONV_INVALID_ARGUMENT, conv_problem_validate(NULL, msg, sizeof msg));
  /* A tiny message buffer is truncated, never overrun. */
  conv_problem p = base_problem();
  p.n = 0;
  char tiny[4] = {'x', 'x', 'x', 'x'};
  CHECK_STATUS(CONV_BAD_DIMENSION, conv_problem_validate(&p, tiny, 3));
  CHECK(tiny[2] == '\0' && tiny[3] == 'x');
  return TEST_PASS;
}

static int output_dims(void) {
  struct { int64_t h, r, pad, stride, dil, expect; } rows[] = {
      {56, 3, 1, 1, 1, 56}, {224, 7, 3, 2, 1, 112}, {1024, 3, 8, 1, 8, 1024},
      {128, 3, 0, 1, 1, 126}, {17, 3, 1, 2, 2, 8}, {8, 1, 0, 3, 1, 3}, {5, 5, 0, 1, 1, 1}};
  for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
    conv_problem p = base_problem();
    p.h = p.w = rows[i].h;
    p.r = p.s = rows[i].r;
    p.pad_h = p.pad_w = rows[i].pad;
    p.stride_h = p.stride_w = rows[i].stride;
    p.dil_h = p.dil_w = rows[i].dil;
    int64_t out_p = -1, out_q = -1;
    CHECK_STATUS(CONV_OK, conv_problem_output_dims(&p, &out_p, &out_q));
    CHECK_MSG(out_p == rows[i].expect && out_q == rows[i].expect, "row %zu: %lld", i, (long long)out_p);
  }
  conv_problem p = base_problem();
  p.w = 9; p.s = 5; p.pad_w = 0; p.stride_w = 2;
  int64_t out_p = -1, out_q = -1;
  CHECK_STATUS(CONV_OK, conv_problem_output_dims(&p, &out_p, &out_q));
  CHECK(out_p == 17 && out_q == 3);
  p.n = -1;
  out_p = -7;
  CHECK_STATUS(CONV_BAD_DIMENSION, conv_problem_output_dims(&p, &out_p, &out_q));
  CHECK(out_p == -7); /* untouched on failure */
  CHECK_STATUS(CONV_INVALID_ARGUMENT, conv_problem_output_dims(&p, NULL, &out_q));
  return TEST_PASS;
}

static int problem_key(void) {
  conv_problem p = base_problem();
  char key[CONV_PROBLEM_KEY_MAX], other[CONV_PROBLEM_KEY_MAX];
  CHECK_STATUS(CONV_OK, conv_problem_key(&p, key, sizeof key));
  CHECK_MSG(strcmp(key, "fwd f32 nchw strict none n2 c8 h17 w13 k6 r3 s3 pad1,1 str1,1 dil1,1 g1") == 0,
            "%s", key);
  /* Every field that changes the answer changes the key. */
  conv_problem q = p;
  q.math = CONV_MATH_TF32;
  CHECK_STATUS(CONV_OK, conv_problem_key(&q, other, sizeof other));
  CHECK(strcmp(key, other) != 0);
  q = p;
  q.epilogue = CONV_EPILOGUE_BIAS_RELU;
  CHECK_STATUS(CONV_OK, conv_problem_key(&q, other, sizeof other));
  CHECK(strstr(other, "bias_relu") != NULL);
  q = p;
  q.pad_w = 2;
  CHECK_STATUS(CONV_OK, conv_problem_key(&q, other, sizeof other));
  CHECK(strstr(other, "pad1,2") != NULL);
  q = p;
  q.direction = CONV_BACKWARD_DATA;
  CHECK_STATUS(CONV_OK, conv_problem_key(&q, other, sizeof other));
  CHECK_MSG(strcmp(other, "bwd_data f32 nchw strict none n2 c8 h17 w13 k6 r3 s3 pad1,1 str1,1 dil1,1 g1") == 0,
            "%s", other);
  q.direction = CONV_BACKWARD_FILTER;
  CHECK_STATUS(CONV_OK, conv_problem_key(&q, other, sizeof other));
  CHECK_MSG(strncmp(other, "bwd_filter f32 ", 15) == 0, "%s", other);
  /* A deterministic problem's key ends in " det"; the others' are as before. */
  q.deterministic = 1;
  CHECK_STATUS(CONV_OK, conv_problem_key(&q, other, sizeof other));
  CHECK_MSG(strcmp(other, "bwd_filter f32 nchw strict none n2 c8 h17 w13 k6 r3 s3 pad1,1 str1,1 dil1,1 g1 det") == 0,
            "%s", other);
  /* Written only on success: a short buffer or an invalid problem leaves
   * it as it was, and an invalid problem gets its validation status. */
  char sentinel[CONV_PROBLEM_KEY_MAX];
  memset(sentinel, 'Z', sizeof sentinel);
  memcpy(other, sentinel, sizeof other);
  CHECK_STATUS(CONV_INVALID_ARGUMENT, conv_problem_key(&p, other, strlen(key)));
  CHECK(memcmp(other, sentinel, sizeof other) == 0);
  CHECK_STATUS(CONV_OK, conv_problem_key(&p, other, strlen(key) + 1));
  CHECK(strcmp(other, key) == 0);
  memcpy(other, sentinel, sizeof other);
  q = p;
  q.n = -5;
  CHECK_STATUS(CONV_BAD_DIMENSION, conv_problem_key(&q, other, sizeof other));
  q = p;
  q.groups = 5;
  CHECK_STATUS(CONV_BAD_GROUPS, conv_problem_key(&q, other, sizeof other));
  CHECK(memcmp(other, sentinel, sizeof other) == 0);
  /* The widest fields a valid problem can have fit CONV_PROBLEM_KEY_MAX. */
  q = p;
  q.math = CONV_MATH_STRICT;
  q.epilogue = CONV_EPILOGUE_BIAS_RELU;
  q.n = q.c = q.k = q.r = q.s = q.groups = 1;
  q.h = (int64_t)1 << 30; /* 2^30 input elements */
  q.w = 1;
  q.pad_h = q.pad_w = q.stride_h = q.stride_w = q.dil_h = q.dil_w = (int64_t)1 << 30;
  CHECK_STATUS(CONV_OK, conv_problem_validate(&q, NULL, 0));
  CHECK_STATUS(CONV_OK, conv_problem_key(&q, other, sizeof other));
  CHECK_MSG(strstr(other, "h1073741824 w1 ") != NULL && strstr(other, "dil1073741824,1073741824"), "%s", other);
  return TEST_PASS;
}

static int parse_spec(void) {
  conv_problem p;
  char msg[256];
  CHECK_STATUS(CONV_OK, conv_problem_parse("n=32 c=64 h=56 w=56 k=64 r=3 s=3 pad=1", &p, msg, sizeof msg));
  CHECK(p.n == 32 && p.c == 64 && p.h == 56 && p.w == 56 && p.k == 64 && p.r == 3 && p.s == 3);
  CHECK(p.pad_h == 1 && p.pad_w == 1 && p.stride_h == 1 && p.dil_w == 1 && p.groups == 1);
  CHECK_STATUS(CONV_OK, conv_problem_parse("N=1,C=4,H=9,W=7,K=4,R=3,S=1,stride_h=2,dil=2,groups=2,"
                                           "math=tf32,epilogue=bias_relu", &p, msg, sizeof msg));
  CHECK(p.n == 1 && p.s == 1 && p.stride_h == 2 && p.stride_w == 1 && p.dil_h == 2 && p.groups == 2);
  CHECK(p.math == CONV_MATH_TF32 && p.epilogue == CONV_EPILOGUE_BIAS_RELU);
  conv_problem before = p;
  CHECK_STATUS(CONV_INVALID_ARGUMENT, conv_problem_parse("n=1 c=1 h=4 w=4 k=1 r=3 s=3 bogus=2", &p, msg, sizeof msg));
  CHECK(strstr(msg, "bogus") != NULL);
  CHECK(memcmp(&before, &p, sizeof p) == 0); /* unchanged on failure */
  CHECK_STATUS(CONV_INVALID_ARGUMENT, conv_problem_parse("n=1x", &p, msg, sizeof msg));
  CHECK_STATUS(CONV_INVALID_ARGUMENT, conv_problem_parse("n", &p, msg, sizeof msg));
  CHECK_STATUS(CONV_INVALID_ARGUMENT, conv_problem_parse("math=fast", &p, msg, sizeof msg));
  CHECK_STATUS(CONV_BAD_DIMENSION, conv_problem_parse("n=1 c=1 h=4 w=4 k=1 r=3", &p, msg, sizeof msg));
  CHECK_MSG(strstr(msg, "missing s ") != NULL, "%s", msg);
  /* Every missing size at once, not the first that validation trips on. */
  CHECK_STATUS(CONV_BAD_DIMENSION, conv_problem_parse("n=1 c=3 h=8", &p, msg, sizeof msg));
  CHECK_MSG(strstr(msg, "missing w k r s ") != NULL, "%s", msg);
  CHECK_STATUS(CONV_BAD_DIMENSION, conv_problem_parse("n=1 c=1 h=4 w=4 k=1 s=3 r=0", &p, msg, sizeof msg));
  CHECK_MSG(strstr(msg, "r = 0") != NULL, "%s", msg); /* given, but 0: validation names it */
  CHECK_STATUS(CONV_FILTER_TOO_LARGE, conv_problem_parse("n=1 c=1 h=4 w=4 k=1 r=5 s=5", &p, msg, sizeof msg));
  /* A field given twice, under one name or through an alias, is an error. */
  static const struct {
    const char *spec, *message;
  } twice[] = {
      {"n=1 c=1 h=4 w=4 k=1 r=3 s=3 n=2", "n given twice"},
      {"n=1 c=1 h=4 w=4 k=1 r=3 s=3 pad=1 pad_w=0", "'pad' and 'pad_w' both set"},
      {"n=1 c=2 h=4 w=4 k=2 r=3 s=3 g=2 GROUPS=2", "'g' and 'groups' both set"},
      {"n=1 c=1 h=4 w=4 k=1 r=3 s=3 dil_h=2 dil=1", "'dil_h' and 'dil' both set"},
      {"n=1 c=1 h=4 w=4 k=1 r=3 s=3 math=tf32 math=strict", "math given twice"},
      {"n=1 c=1 h=4 w=4 k=1 r=3 s=3 epilogue=bias Epilogue=bias", "epilogue given twice"},
      {"n=1 c=1 h=4 w=4 k=1 r=3 s=3 dir=bwd_data dir=fwd", "dir given twice"},
  };
  for (size_t i = 0; i < sizeof twice / sizeof twice[0]; i++) {
    p = before;
    CHECK_STATUS(CONV_INVALID_ARGUMENT, conv_problem_parse(twice[i].spec, &p, msg, sizeof msg));
    CHECK_MSG(strstr(msg, twice[i].message) != NULL, "'%s': %s", twice[i].spec, msg);
    CHECK(memcmp(&before, &p, sizeof p) == 0);
  }
  /* Names and the words of math= and epilogue= take any case alike. */
  CHECK_STATUS(CONV_OK, conv_problem_parse("N=1 C=1 H=4 W=4 K=1 R=3 S=3 MATH=TF32 Epilogue=Bias_ReLU",
                                           &p, msg, sizeof msg));
  CHECK(p.math == CONV_MATH_TF32 && p.epilogue == CONV_EPILOGUE_BIAS_RELU);
  /* dir= names the pass; a backward pass takes no epilogue. */
  CHECK(p.direction == CONV_FORWARD);
  CHECK_STATUS(CONV_OK, conv_problem_parse("n=1 c=1 h=4 w=4 k=1 r=3 s=3 dir=bwd_data", &p, msg, sizeof msg));
  CHECK(p.direction == CONV_BACKWARD_DATA);
  CHECK_STATUS(CONV_OK, conv_problem_parse("n=1 c=1 h=4 w=4 k=1 r=3 s=3 DIR=BWD_Filter", &p, msg, sizeof msg));
  CHECK(p.direction == CONV_BACKWARD_FILTER);
  before = p;
  CHECK_STATUS(CONV_INVALID_ARGUMENT, conv_problem_parse("n=1 c=1 h=4 w=4 k=1 r=3 s=3 dir=backward", &p, msg, sizeof msg));
  CHECK_MSG(strstr(msg, "expected fwd, bwd_data or bwd_filter") != NULL, "%s", msg);
  CHECK_STATUS(CONV_UNSUPPORTED,
               conv_problem_parse("n=1 c=1 h=4 w=4 k=1 r=3 s=3 dir=bwd_data epilogue=bias", &p, msg, sizeof msg));
  CHECK_MSG(strstr(msg, "backward problems take none") != NULL, "%s", msg);
  CHECK(memcmp(&before, &p, sizeof p) == 0);
  /* det= asks for a deterministic problem. */
  CHECK_STATUS(CONV_OK, conv_problem_parse("n=1 c=1 h=4 w=4 k=1 r=3 s=3 det=1", &p, msg, sizeof msg));
  CHECK(p.deterministic == 1);
  CHECK_STATUS(CONV_OK, conv_problem_parse("n=1 c=1 h=4 w=4 k=1 r=3 s=3 det=0", &p, msg, sizeof msg));
  CHECK(p.deterministic == 0);
  before = p;
  CHECK_STATUS(CONV_INVALID_ARGUMENT, conv_problem_parse("n=1 c=1 h=4 w=4 k=1 r=3 s=3 det=yes", &p, msg, sizeof msg));
  CHECK_MSG(strstr(msg, "det=yes: expected 0 or 1") != NULL, "%s", msg);
  CHECK(memcmp(&before, &p, sizeof p) == 0);
  return TEST_PASS;
}

static int config_text(void) {
  conv_config c = {.count = 4, .values = {12, -3, 0, 9000000000LL}}, back;
  char text[128];
  CHECK_STATUS(CONV_OK, conv_config_format(&c, text, sizeof text));
  CHECK(strcmp(text, "12,-3,0,9000000000") == 0);
  CHECK_STATUS(CONV_OK, conv_config_parse(text, &back));
  CHECK(conv_config_equal(&c, &back));
  CHECK_STATUS(CONV_OK, conv_config_parse("", &back));
  CHECK(back.count == 0);
  /* As many values as a config holds (a cuDNN engine and 15 knob pairs)
   * round-trip; one more is refused. */
  char longest[CONV_CONFIG_MAX_VALUES * 4 + 8] = "";
  for (int i = 1; i <= CONV_CONFIG_MAX_VALUES; i++)
    snprintf(longest + strlen(longest), sizeof longest - strlen(longest), "%s%d",
             i > 1 ? "," : "", i);
  CHECK(CONV_CONFIG_MAX_VALUES >= 31);
  CHECK_STATUS(CONV_OK, conv_config_parse(longest, &back));
  CHECK(back.count == CONV_CONFIG_MAX_VALUES &&
        back.values[CONV_CONFIG_MAX_VALUES - 1] == CONV_CONFIG_MAX_VALUES);
  char formatted[sizeof longest];
  CHECK_STATUS(CONV_OK, conv_config_format(&back, formatted, sizeof formatted));
  CHECK(strcmp(formatted, longest) == 0);
  char too_long[sizeof longest + 4];
  snprintf(too_long, sizeof too_long, "%s,1", longest);
  const char *bad[] = {"1,,2", "1,", ",1", " 1", "1 ", "1;2", "a", "99999999999999999999", too_long};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
    CHECK_MSG(conv_config_parse(bad[i], &back) == CONV_INVALID_ARGUMENT, "accepted '%s'", bad[i]);
  CHECK_STATUS(CONV_INVALID_ARGUMENT, conv_config_format(&c, text, 5));
  conv_config d = c;
  d.flags = CONV_CONFIG_HEURISTIC_RANKED; /* flags are not identity */
  CHECK(conv_config_equal(&c, &d));
  d.values[3]++;
  CHECK(!conv_config_equal(&c, &d));
  CHECK(conv_error_bound(CONV_MATH_STRICT, CONV_ARITH_DIRECT) < 3e-4); /* catches TF32 */
  CHECK(conv_error_bound(CONV_MATH_TF32, CONV_ARITH_DIRECT) > 3e-4);
  /* Long sums widen the bound, never past catching TF32 in strict mode. */
  conv_problem sums = base_problem();
  CHECK(conv_error_bound_for(&sums, CONV_ARITH_DIRECT) == conv_error_bound(CONV_MATH_STRICT, CONV_ARITH_DIRECT));
  sums.n = 1; sums.c = 16; sums.k = 1; sums.h = sums.w = 1024; sums.pad_h = sums.pad_w = 1;
  sums.direction = CONV_BACKWARD_FILTER; /* sums over 1024 * 1024 pixels */
  CHECK(conv_error_bound_for(&sums, CONV_ARITH_DIRECT) == 8 * conv_error_bound(CONV_MATH_STRICT, CONV_ARITH_DIRECT));
  CHECK(conv_error_bound_for(&sums, CONV_ARITH_TRANSFORM) < 3e-4);
  sums.direction = CONV_BACKWARD_DATA; /* sums over k * r * s = 9 products */
  CHECK(conv_error_bound_for(&sums, CONV_ARITH_DIRECT) == conv_error_bound(CONV_MATH_STRICT, CONV_ARITH_DIRECT));
  /* Untrusted configs: count and range, each named in the message. */
  conv_error err = {CONV_OK, ""};
  const conv_config three = {3, {0, 5, 64}, 0};
  CHECK_STATUS(CONV_OK, conv_config_check(&three, "fam", 3, 0, 64, &err));
  CHECK_STATUS(CONV_UNSUPPORTED, conv_config_check(&three, "fam", 4, 0, 64, &err));
  CHECK(strstr(err.message, "fam: config has 3 values, not 4") != NULL);
  CHECK_STATUS(CONV_UNSUPPORTED, conv_config_check(&three, "fam", 3, 0, 63, &err));
  CHECK(strstr(err.message, "fam: config value 64 out of range") != NULL);
  CHECK_STATUS(CONV_UNSUPPORTED, conv_config_check(&three, "fam", 3, 1, 64, &err));
  return TEST_PASS;
}

static int default_cache_path(void) {
  char path[4096], dir[4096];
  const char *tmp = getenv("CONVTUNE_TEST_TMP");
  snprintf(dir, sizeof dir, "%s/paths-%d", tmp ? tmp : "/tmp", (int)getpid());
  CHECK(setenv("CONVTUNE_CACHE", "/some/where/c.db", 1) == 0);
  CHECK_STATUS(CONV_OK, conv_default_cache_path(path, sizeof path, false, NULL));
  CHECK(strcmp(path, "/some/where/c.db") == 0);
  CHECK(unsetenv("CONVTUNE_CACHE") == 0);
  CHECK(setenv("XDG_CACHE_HOME", dir, 1) == 0);
  CHECK_STATUS(CONV_OK, conv_default_cache_path(path, sizeof path, true, NULL));
  char expect[4200];
  snprintf(expect, sizeof expect, "%s/convtune/cache.db", dir);
  CHECK(strcmp(path, expect) == 0);
  snprintf(expect, sizeof expect, "%s/convtune", dir);
  CHECK(access(expect, W_OK) == 0); /* created */
  CHECK(unsetenv("XDG_CACHE_HOME") == 0);
  CHECK(setenv("HOME", dir, 1) == 0);
  CHECK_STATUS(CONV_OK, conv_default_cache_path(path, sizeof path, false, NULL));
  snprintf(expect, sizeof expect, "%s/.cache/convtune/cache.db", dir);
  CHECK(strcmp(path, expect) == 0);
  CHECK_STATUS(CONV_CACHE_ERROR, conv_default_cache_path(path, 8, false, NULL));
  snprintf(expect, sizeof expect, "%s/convtune", dir);
  rmdir(expect);
  rmdir(dir);
  return TEST_PASS;
}

/* Either there is a GPU and a context opens, or conv_context_create fails
 * with CONV_NO_DEVICE, a message, and no context: never a crash. */
static int no_device_is_clean(void) {
  char cache[4096];
  const char *tmp = getenv("CONVTUNE_TEST_TMP");
  snprintf(cache, sizeof cache, "%s/nodev-%d.db", tmp ? tmp : "/tmp", (int)getpid());
  conv_context_options o;
  conv_context_options_init(&o);
  o.cache_path = cache;
  conv_context *ctx = (conv_context *)0x1;
  conv_status st = conv_context_create(&ctx, &o);
  if (st == CONV_OK) {
    CHECK(ctx != NULL);
    conv_context_destroy(ctx);
  } else {
    CHECK_MSG(st == CONV_NO_DEVICE, "%s: %s", conv_status_string(st), conv_context_last_error(NULL));
    CHECK(ctx == NULL);
    CHECK(strlen(conv_context_last_error(NULL)) > 0);
    /* CUDA calls a machine without a driver one with an "insufficient"
     * driver: the message says what is really missing. */
    CHECK_MSG(strstr(conv_context_last_error(NULL), "insufficient") == NULL, "%s",
              conv_context_last_error(NULL));
  }
  o.device = -1;
  CHECK_STATUS(CONV_INVALID_ARGUMENT, conv_context_create(&ctx, &o));
  CHECK(ctx == NULL);
  CHECK_STATUS(CONV_INVALID_ARGUMENT, conv_context_create(NULL, &o));
  conv_context_destroy(NULL);
  conv_plan_destroy(NULL);
  CHECK_STATUS(CONV_INVALID_ARGUMENT, conv_plan_create(NULL, NULL, NULL));
  CHECK_STATUS(CONV_INVALID_ARGUMENT, conv_plan_execute(NULL, NULL, NULL, NULL, NULL, NULL));
  unlink(cache);
  return TEST_PASS;
}

/* The versions text, part of every cache key, names every family with its
 * version and ends with the timing method's, needing no device: nothing
 * may be cut off as the registry grows (it once was, at 15 families). */
static int versions_name_every_family(void) {
  const char *text = conv_library_versions();
  const char *list = strstr(text, " candidates=");
  CHECK_MSG(list != NULL, "%s", text);
  list += strlen(" candidates=");
  int count;
  const conv_algorithm *const *algos = conv_registry(&count);
  char expected[4096];
  int used = 0;
  for (int i = 0; i < count; i++)
    used += snprintf(expected + used, sizeof expected - (size_t)used, "%s%uv%u", i ? "," : "",
                     algos[i]->id, algos[i]->version);
  used += snprintf(expected + used, sizeof expected - (size_t)used, " timing=%d",
                   CONV_TIMING_VERSION);
  CHECK_MSG(strcmp(list, expected) == 0, "versions end \"%s\", not \"%s\"", list, expected);
  return TEST_PASS;
}

/* conv_device_count agrees with context creation: a count where a
 * context opens, else CONV_NO_DEVICE with a message and the count left
 * as it was; device `count` (one past the last) is refused. */
static int device_count_agrees(void) {
  int count = -7;
  conv_status st = conv_device_count(&count);
  conv_context_options o;
  conv_context_options_init(&o);
  o.cache_path = ":memory:";
  conv_context *ctx = NULL;
  if (st == CONV_OK) {
    CHECK_MSG(count > 0, "count %d", count);
    o.device = count - 1;
    CHECK_MSG(conv_context_create(&ctx, &o) == CONV_OK, "device %d: %s", o.device,
              conv_context_last_error(NULL));
    conv_context_destroy(ctx);
    o.device = count;
    CHECK_STATUS(CONV_NO_DEVICE, conv_context_create(&ctx, &o));
  } else {
    CHECK_MSG(st == CONV_NO_DEVICE, "%s: %s", conv_status_string(st),
              conv_context_last_error(NULL));
    CHECK(count == -7);
    CHECK(strlen(conv_context_last_error(NULL)) > 0);
    CHECK_STATUS(CONV_NO_DEVICE, conv_context_create(&ctx, &o));
  }
  CHECK_STATUS(CONV_INVALID_ARGUMENT, conv_device_count(NULL));
  return TEST_PASS;
}

/* B x P patches fold into the batch; bad counts change nothing. */
static int set_patches(void) {
  conv_problem p;
  conv_problem_init(&p);
  p.n = 7;
  CHECK_STATUS(CONV_OK, conv_problem_set_patches(&p, 8, 2560));
  CHECK(p.n == 20480);
  CHECK_STATUS(CONV_BAD_DIMENSION, conv_problem_set_patches(&p, 0, 4));
  CHECK_STATUS(CONV_BAD_DIMENSION, conv_problem_set_patches(&p, 4, -1));
  CHECK_STATUS(CONV_SIZE_OVERFLOW, conv_problem_set_patches(&p, INT64_MAX / 2, 3));
  CHECK_STATUS(CONV_INVALID_ARGUMENT, conv_problem_set_patches(NULL, 1, 1));
  CHECK(p.n == 20480);
  return TEST_PASS;
}

/* Structs of other header versions (convtune.h's versions note): an older,
 * shorter problem reads with defaults and is written only within its size;
 * a newer, longer one is accepted while its unknown fields are 0. */
typedef struct newer_problem {
  conv_problem known;
  int64_t added_later;
} newer_problem;

static int structs_of_other_versions(void) {
  char key[CONV_PROBLEM_KEY_MAX], older_key[CONV_PROBLEM_KEY_MAX];
  conv_problem full = base_problem();
  CHECK_STATUS(CONV_OK, conv_problem_key(&full, key, sizeof key));

  /* Not made by conv_problem_init: refused, whichever function reads it. */
  conv_problem raw = full;
  raw.struct_size = 0;
  char message[256] = "";
  CHECK_STATUS(CONV_INVALID_ARGUMENT, conv_problem_validate(&raw, message, sizeof message));
  CHECK_MSG(strstr(message, "conv_problem_init") != NULL, "%s", message);
  CHECK_STATUS(CONV_INVALID_ARGUMENT, conv_problem_key(&raw, older_key, sizeof older_key));
  CHECK_STATUS(CONV_INVALID_ARGUMENT, conv_problem_set_patches(&raw, 2, 3));
  CHECK(raw.n == full.n);

  /* Older: the header before `deterministic` existed would have been this
   * short; such a caller is refused (0.2.0 is the first size we accept),
   * and a struct one byte short of ours too. */
  raw.struct_size = offsetof(conv_problem, deterministic);
  CHECK_STATUS(CONV_INVALID_ARGUMENT, conv_problem_validate(&raw, NULL, 0));

  /* Newer, unknown field at its default 0: read as ours. */
  newer_problem newer;
  memset(&newer, 0x5a, sizeof newer);
  conv_problem_init_sized(&newer.known, sizeof newer); /* as a newer header's macro would */
  CHECK(newer.known.struct_size == sizeof newer && newer.added_later == 0);
  CHECK(newer.known.groups == 1 && newer.known.stride_h == 1);
  conv_problem kept = newer.known;
  newer.known = full;
  newer.known.struct_size = kept.struct_size;
  CHECK_STATUS(CONV_OK, conv_problem_key(&newer.known, older_key, sizeof older_key));
  CHECK(strcmp(key, older_key) == 0);
  /* ... and set: refused with its own status, nothing written. */
  newer.added_later = 3;
  message[0] = '\0';
  CHECK_STATUS(CONV_UNSUPPORTED, conv_problem_validate(&newer.known, message, sizeof message));
  CHECK_MSG(strstr(message, "newer convtune.h") != NULL, "%s", message);
  CHECK_STATUS(CONV_UNSUPPORTED, conv_problem_set_patches(&newer.known, 2, 3));
  CHECK(newer.known.n == full.n);

  /* Parsing into a newer struct writes its unknown tail as 0, the default. */
  newer.added_later = 9;
  CHECK_STATUS(CONV_OK, conv_problem_parse_sized("n=1 c=2 h=5 w=5 k=3 r=3 s=3", &newer.known,
                                                   sizeof newer, NULL, 0));
  CHECK(newer.known.struct_size == sizeof newer && newer.added_later == 0 && newer.known.k == 3);
  CHECK_STATUS(CONV_INVALID_ARGUMENT,
               conv_problem_parse_sized("n=1 c=2 h=5 w=5 k=3 r=3 s=3", &full, 8, NULL, 0));

  /* Options: the same rules, checked before any device is opened. */
  conv_context_options o;
  conv_context_options_init(&o);
  CHECK(o.struct_size == sizeof o && o.policy == CONV_POLICY_PREDICT);
  o.struct_size = 4;
  conv_context *ctx = NULL;
  CHECK_STATUS(CONV_INVALID_ARGUMENT, conv_context_create(&ctx, &o));
  CHECK(ctx == NULL && strstr(conv_context_last_error(NULL), "conv_context_options_init") != NULL);
  struct {
    conv_context_options known;
    int added_later;
  } newer_options;
  conv_context_options_init_sized(&newer_options.known, sizeof newer_options);
  newer_options.added_later = 1;
  CHECK_STATUS(CONV_UNSUPPORTED, conv_context_create(&ctx, &newer_options.known));
  CHECK(ctx == NULL);

  CHECK_STATUS(CONV_INVALID_ARGUMENT, conv_plan_info_get_sized(NULL, NULL, sizeof(conv_plan_info)));
  return TEST_PASS;
}

/* ---------------------------------------------------------------- log */

typedef struct log_record {
  int count;
  conv_log_level level[8];
  char message[8][1100];
} log_record;

static void record_log(void *user, conv_log_level level, const char *message) {
  log_record *r = user;
  if (r->count < 8) {
    r->level[r->count] = level;
    snprintf(r->message[r->count], sizeof r->message[0], "%s", message);
  }
  r->count++;
}

/* Messages reach the options' callback up to its level (verbose raises it
 * to DEBUG), as one line; without a callback they go nowhere; a level out
 * of the enum is refused before any device is touched. */
static int log_routing(void) {
  conv_context_options o;
  memset(&o, 0x5a, sizeof o);
  conv_context_options_init(&o);
  /* New fields default to 0 (convtune.h's versions note): level 0 is INFO. */
  CHECK(o.log == NULL && o.log_user == NULL && (int)o.log_level == 0 && o.verbose == 0);

  conv_logger silent = conv_logger_from_options(&o);
  CHECK(silent.level == CONV_LOG_INFO);
  CHECK(!conv_log_enabled(&silent, CONV_LOG_ERROR));
  conv_log(&silent, CONV_LOG_ERROR, "dropped %d", 1); /* no callback: nothing, no crash */
  CHECK(!conv_log_enabled(NULL, CONV_LOG_ERROR));

  log_record r = {0};
  o.log = record_log;
  o.log_user = &r;
  conv_logger info = conv_logger_from_options(&o);
  conv_log(&info, CONV_LOG_INFO, "tuning %s", "fwd n1");
  conv_log(&info, CONV_LOG_DEBUG, "timing %s", "hidden");
  conv_log(&info, CONV_LOG_WARN, "two\nlines\r");
  CHECK(r.count == 2);
  CHECK(r.level[0] == CONV_LOG_INFO && strcmp(r.message[0], "tuning fwd n1") == 0);
  CHECK_MSG(r.level[1] == CONV_LOG_WARN && strcmp(r.message[1], "two lines ") == 0, "%s",
            r.message[1]);

  o.log_level = CONV_LOG_ERROR;
  o.verbose = 1; /* shorthand for DEBUG, whatever log_level says */
  conv_logger verbose = conv_logger_from_options(&o);
  CHECK(verbose.level == CONV_LOG_DEBUG && conv_log_enabled(&verbose, CONV_LOG_DEBUG));
  o.verbose = 0;
  conv_logger errors = conv_logger_from_options(&o);
  CHECK(conv_log_enabled(&errors, CONV_LOG_ERROR) && !conv_log_enabled(&errors, CONV_LOG_WARN));

  r.count = 0;
  char long_text[3000];
  memset(long_text, 'x', sizeof long_text - 1);
  long_text[sizeof long_text - 1] = '\0';
  conv_log(&verbose, CONV_LOG_DEBUG, "%s", long_text);
  CHECK(r.count == 1 && strlen(r.message[0]) == 1023);

  conv_context *ctx = (conv_context *)0x1;
  static const int bad_levels[] = {CONV_LOG_DEBUG + 1, -1};
  for (size_t i = 0; i < sizeof bad_levels / sizeof bad_levels[0]; i++) {
    o.log_level = (conv_log_level)bad_levels[i];
    CHECK_STATUS(CONV_INVALID_ARGUMENT, conv_context_create(&ctx, &o));
    CHECK(ctx == NULL && strstr(conv_context_last_error(NULL), "log_level") != NULL);
  }
  CHECK(r.count == 1);
  return TEST_PASS;
}

/* conv_problem_from_key inverts conv_problem_key: every layout,
 * direction, math mode, epilogue, determinism and op comes back as it was
 * keyed, and text that is not a key this version writes is refused. */
static int key_round_trip(void) {
  const char *specs[] = {
      "n=16 c=3 h=224 w=224 k=96 r=4 s=4 stride=4 epilogue=bias_relu",
      "n=2 c=64 h=56 w=57 k=128 r=3 s=5 pad_h=1 pad_w=2 stride_h=2 dil_h=2 g=4 math=tf32",
      "n=16 c=384 h=14 w=14 k=384 r=7 s=7 pad=3 groups=384 layout=nhwc epilogue=bias",
      "n=32 c=96 h=28 w=28 k=96 r=3 s=3 pad=1 groups=96 dir=bwd_filter det=1",
      "n=8 c=16 h=31 w=33 k=32 r=1 s=1 dir=bwd_data math=tf32",
      "op=dynamic n=32 c=64 h=56 w=56 r=7 g=4",
      "op=dynamic n=4 c=16 h=23 w=19 r=5 dil=2 dir=bwd_data det=1",
      "n=16 c=64 h=56 w=56 k=64 r=3 s=3 pad=1 layout=nhwc dtype=bf16 epilogue=bias_relu",
      "n=4 c=32 h=14 w=14 k=16 r=3 s=3 dtype=f16 dir=bwd_filter",
  };
  for (size_t i = 0; i < sizeof specs / sizeof specs[0]; i++) {
    conv_problem p, back;
    char key[CONV_PROBLEM_KEY_MAX], again[CONV_PROBLEM_KEY_MAX];
    CHECK_STATUS(CONV_OK, conv_problem_parse(specs[i], &p, NULL, 0));
    CHECK_STATUS(CONV_OK, conv_problem_key(&p, key, sizeof key));
    CHECK_STATUS(CONV_OK, conv_problem_from_key(key, &back));
    CHECK_STATUS(CONV_OK, conv_problem_key(&back, again, sizeof again));
    CHECK_MSG(strcmp(key, again) == 0, "%s came back as %s", key, again);
    CHECK(back.op == p.op && back.direction == p.direction && back.layout == p.layout &&
          back.math == p.math && back.epilogue == p.epilogue &&
          back.deterministic == p.deterministic && back.groups == p.groups &&
          back.dtype == p.dtype);
  }
  const char *bad[] = {
      "",
      "fwd f64 nchw strict none n1 c3 h9 w9 k2 r3 s3 pad0,0 str1,1 dil1,1 g1",
      "fwd f16 nchw tf32 none n1 c3 h9 w9 k2 r3 s3 pad0,0 str1,1 dil1,1 g1", /* half: strict */
      "fwd f32 nchw strict none n1 c3 h9 w9 k2 r3 s3 pad0,0 str1,1 dil1,1",
      "fwd f32 nchw strict none n1 c3 h9 w9 k2 r3 s3 pad0,0 str1,1 dil1,1 g1 fast",
      "fwd f32 nchw strict none n1 c3 h9 w9 k2 r3 s3 pad0,0 str1,1 dil1,1 g1 ",
      "fwd f32 nchw strict none n1 c3 h9 w9 k2 r3 s3 pad00,0 str1,1 dil1,1 g1",
      "fwd f32 nchw strict none n1 c3 h9 w9 k2 r30 s3 pad0,0 str1,1 dil1,1 g1",
      "sideways f32 nchw strict none n1 c3 h9 w9 k2 r3 s3 pad0,0 str1,1 dil1,1 g1",
  };
  conv_problem untouched;
  conv_problem_init(&untouched);
  untouched.n = 77;
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    conv_problem p = untouched;
    CHECK_MSG(conv_problem_from_key(bad[i], &p) == CONV_INVALID_ARGUMENT, "took '%s'", bad[i]);
    CHECK(p.n == 77);
  }
  CHECK(conv_problem_from_key(NULL, &untouched) == CONV_INVALID_ARGUMENT);
  /* A struct too small for any conv_problem: refused, untouched. */
  const char *good = "fwd f32 nchw strict none n1 c3 h9 w9 k2 r3 s3 pad0,0 str1,1 dil1,1 g1";
  CHECK(conv_problem_from_key(good, &untouched) == CONV_OK && untouched.n == 1);
  untouched.n = 77;
  CHECK(conv_problem_from_key_sized(good, &untouched, 8) == CONV_INVALID_ARGUMENT);
  CHECK(untouched.n == 77);
  return TEST_PASS;
}


/* conv_problem.filter_layout: K R S C filters for an NCHW problem are part
 * of its key where the order differs from K C R S, and the same problem
 * where it does not (one tap, one channel a group, or the layout's own
 * order); what this version does not run is refused with a message; and
 * only the families that read such filters are offered them. */
static int filter_layouts(void) {
  conv_problem p;
  char key[CONV_PROBLEM_KEY_MAX], plain[CONV_PROBLEM_KEY_MAX], msg[256];
  CHECK_STATUS(CONV_OK, conv_problem_parse("n=2 c=8 h=9 w=9 k=4 r=3 s=3 pad=1 filter=krsc", &p,
                                           msg, sizeof msg));
  CHECK(p.filter_layout == CONV_FILTER_KRSC);
  CHECK_STATUS(CONV_OK, conv_problem_key(&p, key, sizeof key));
  CHECK_MSG(strcmp(key, "fwd f32 nchw strict none n2 c8 h9 w9 k4 r3 s3 pad1,1 str1,1 dil1,1 g1 "
                        "krsc") == 0, "%s", key);
  conv_problem back;
  CHECK_STATUS(CONV_OK, conv_problem_from_key(key, &back));
  CHECK(back.filter_layout == CONV_FILTER_KRSC);
  p.deterministic = 1;
  CHECK_STATUS(CONV_OK, conv_problem_key(&p, key, sizeof key));
  CHECK_MSG(strstr(key, " g1 krsc det") != NULL, "%s", key);
  CHECK_STATUS(CONV_OK, conv_problem_from_key(key, &back));
  CHECK(back.filter_layout == CONV_FILTER_KRSC && back.deterministic == 1);
  /* The same bytes as K C R S, or the layout's own order: the default problem. */
  static const char *const same[][2] = {
      {"n=2 c=8 h=9 w=9 k=4 r=1 s=1 filter=krsc", "n=2 c=8 h=9 w=9 k=4 r=1 s=1"},
      {"n=2 c=8 h=9 w=9 k=8 r=3 s=3 groups=8 filter=krsc", "n=2 c=8 h=9 w=9 k=8 r=3 s=3 groups=8"},
      {"n=2 c=8 h=9 w=9 k=4 r=3 s=3 filter=kcrs", "n=2 c=8 h=9 w=9 k=4 r=3 s=3"},
      {"n=2 c=8 h=9 w=9 k=4 r=3 s=3 layout=nhwc filter=krsc", "n=2 c=8 h=9 w=9 k=4 r=3 s=3 layout=nhwc"},
      {"n=2 c=8 h=9 w=9 k=8 r=3 s=3 groups=8 layout=nhwc filter=kcrs",
       "n=2 c=8 h=9 w=9 k=8 r=3 s=3 groups=8 layout=nhwc"},
  };
  for (size_t i = 0; i < sizeof same / sizeof same[0]; i++) {
    conv_problem a, b;
    CHECK_STATUS(CONV_OK, conv_problem_parse(same[i][0], &a, msg, sizeof msg));
    CHECK_STATUS(CONV_OK, conv_problem_parse(same[i][1], &b, msg, sizeof msg));
    CHECK_STATUS(CONV_OK, conv_problem_key(&a, key, sizeof key));
    CHECK_STATUS(CONV_OK, conv_problem_key(&b, plain, sizeof plain));
    CHECK_MSG(strcmp(key, plain) == 0, "%s: %s against %s", same[i][0], key, plain);
  }
  /* Refused, with the field named, and the problem left as it was. */
  static const struct { const char *spec; conv_status status; const char *says; } refused[] = {
      {"n=2 c=8 h=9 w=9 k=4 r=3 s=3 layout=nhwc filter=kcrs", CONV_UNSUPPORTED, "nhwc"},
      {"n=2 c=8 h=9 w=9 k=4 r=3 s=3 filter=krsc dir=bwd_data", CONV_UNSUPPORTED, "forward"},
      {"n=2 c=8 h=9 w=9 k=4 r=3 s=3 filter=krsc dir=bwd_filter", CONV_UNSUPPORTED, "forward"},
      {"n=2 c=8 h=9 w=9 k=4 r=3 s=3 filter=ckrs", CONV_INVALID_ARGUMENT, "filter=ckrs"},
  };
  for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
    conv_problem q;
    conv_problem_init(&q);
    q.n = 77;
    CHECK_STATUS(refused[i].status, conv_problem_parse(refused[i].spec, &q, msg, sizeof msg));
    CHECK_MSG(strstr(msg, refused[i].says) != NULL, "%s: %s", refused[i].spec, msg);
    CHECK(q.n == 77);
  }
  conv_problem_init(&p);
  p.n = 2, p.c = 8, p.h = p.w = 9, p.k = 4, p.r = p.s = 3;
  p.filter_layout = (conv_filter_layout)7;
  CHECK_STATUS(CONV_UNSUPPORTED, conv_problem_validate(&p, msg, sizeof msg));
  CHECK_MSG(strstr(msg, "filter_layout 7") != NULL, "%s", msg);
  /* The registry's gate: cuDNN and padded_gemm read K R S C filters; a
   * family that reads K C R S is not offered them, though it takes the
   * problem with K C R S filters. */
  conv_problem krsc;
  CHECK_STATUS(CONV_OK, conv_problem_parse("n=2 c=8 h=9 w=9 k=64 r=3 s=3 pad=1 math=tf32 filter=krsc", &p,
                                           msg, sizeof msg));
  CHECK_STATUS(CONV_OK, conv_problem_import(&p, &krsc, NULL));
  CHECK(conv_problem_krsc_filters(&krsc));
  conv_problem kcrs = krsc;
  kcrs.filter_layout = CONV_FILTER_DEFAULT;
  CHECK(!conv_problem_krsc_filters(&kcrs));
  const conv_algorithm *cudnn = conv_registry_find(CONV_ALGO_CUDNN);
  const conv_algorithm *gemm = conv_registry_find(CONV_ALGO_IMPLICIT_GEMM);
  CHECK(cudnn != NULL && gemm != NULL && cudnn->krsc_filters && !gemm->krsc_filters);
  CHECK(conv_registry_find(CONV_ALGO_PADDED_GEMM)->krsc_filters);
  CHECK(conv_algorithm_applicable(cudnn, &krsc, NULL));
  CHECK(gemm->applicable(&krsc, NULL) && !conv_algorithm_applicable(gemm, &krsc, NULL));
  CHECK(conv_algorithm_applicable(gemm, &kcrs, NULL));
  int count = 0;
  const conv_algorithm *const *all = conv_registry(&count);
  for (int i = 0; i < count; i++)
    CHECK_MSG(!conv_algorithm_applicable(all[i], &krsc, NULL) || all[i]->krsc_filters,
              "%s offered K R S C filters", all[i]->name);
  return TEST_PASS;
}

static const test_case tests[] = {
    {"status_strings", status_strings},   {"validate_each_failure", validate_each_failure},
    {"output_dims", output_dims},         {"problem_key", problem_key},
    {"parse_spec", parse_spec},           {"config_text", config_text},
    {"default_cache_path", default_cache_path}, {"set_patches", set_patches},
    {"no_device_is_clean", no_device_is_clean},
    {"structs_of_other_versions", structs_of_other_versions}, {"log_routing", log_routing},
    {"key_round_trip", key_round_trip},   {"filter_layouts", filter_layouts},
    {"device_count_agrees", device_count_agrees},
    {"versions_name_every_family", versions_name_every_family},
};
TEST_MAIN(tests)
