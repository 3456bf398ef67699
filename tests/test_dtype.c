/*
 * test_dtype.c -- the element type of a problem (conv_problem.dtype) on
 * the CPU: half problems (f16, bf16) valid in every direction and layout
 * and refused for the dynamic op; keys and specs that name the type and
 * read back; a half problem's math mode made strict, so that strict and
 * tf32 requests share a key; the validation bound of each type; and the
 * registry: cudnn and the cuBLASLt GEMM families (gemm_nhwc, im2col_gemm,
 * gemm_backward) take the half twins of the fp32 problems they take, every
 * other family refuses them (their kernels read fp32), so a half problem
 * never reaches one.
 */
#include <math.h>
#include <string.h>

#include "algorithms/algorithm.h"
#include "tests/test.h"

static const conv_dtype halves[] = {CONV_DTYPE_F16, CONV_DTYPE_BF16};
static const conv_layout layouts[] = {CONV_LAYOUT_NCHW, CONV_LAYOUT_NHWC};
static const conv_direction directions[] = {CONV_FORWARD, CONV_BACKWARD_DATA,
                                            CONV_BACKWARD_FILTER};

static conv_problem problem_3x3(conv_dtype dtype, conv_layout layout, conv_direction direction) {
  conv_problem p;
  conv_problem_init(&p);
  p.n = 2, p.c = 16, p.h = p.w = 12, p.k = 32, p.r = p.s = 3, p.pad_h = p.pad_w = 1;
  p.dtype = dtype;
  p.layout = layout;
  p.direction = direction;
  return p;
}

/* Every direction, both layouts, every epilogue of a forward pass, K R S
 * C filters: valid, keyed with the type's name. */
static int half_valid_everywhere(void) {
  for (size_t d = 0; d < 2; d++)
    for (size_t l = 0; l < 2; l++)
      for (size_t dir = 0; dir < 3; dir++)
        for (int e = CONV_EPILOGUE_NONE; e <= CONV_EPILOGUE_BIAS_RELU; e++) {
          if (directions[dir] != CONV_FORWARD && e != CONV_EPILOGUE_NONE) continue;
          conv_problem p = problem_3x3(halves[d], layouts[l], directions[dir]);
          p.epilogue = (conv_epilogue)e;
          char message[256] = "", key[CONV_PROBLEM_KEY_MAX];
          CHECK_MSG(conv_problem_validate(&p, message, sizeof message) == CONV_OK, "%s", message);
          CHECK_STATUS(CONV_OK, conv_problem_key(&p, key, sizeof key));
          const char *word = halves[d] == CONV_DTYPE_F16 ? " f16 " : " bf16 ";
          CHECK_MSG(strstr(key, word) != NULL, "%s", key);
        }
  conv_problem krsc = problem_3x3(CONV_DTYPE_BF16, CONV_LAYOUT_NCHW, CONV_FORWARD);
  krsc.filter_layout = CONV_FILTER_KRSC;
  char key[CONV_PROBLEM_KEY_MAX];
  CHECK_STATUS(CONV_OK, conv_problem_key(&krsc, key, sizeof key));
  CHECK_MSG(strcmp(key, "fwd bf16 nchw strict none n2 c16 h12 w12 k32 r3 s3 pad1,1 str1,1 "
                        "dil1,1 g1 krsc") == 0,
            "%s", key);
  return TEST_PASS;
}

/* The dynamic op is f32 only, and a dtype out of the enum is named. */
static int half_refusals(void) {
  conv_problem p;
  char message[256] = "", key[CONV_PROBLEM_KEY_MAX] = "untouched";
  CHECK_STATUS(CONV_OK, conv_problem_parse("op=dynamic n=2 c=8 h=9 w=9 r=3", &p, NULL, 0));
  p.dtype = CONV_DTYPE_BF16;
  CHECK_STATUS(CONV_UNSUPPORTED, conv_problem_validate(&p, message, sizeof message));
  CHECK_MSG(strstr(message, "dynamic: dtype bf16: this version runs the dynamic op in f32 only"),
            "%s", message);
  CHECK_STATUS(CONV_UNSUPPORTED, conv_problem_key(&p, key, sizeof key));
  CHECK(strcmp(key, "untouched") == 0);
  CHECK_STATUS(CONV_UNSUPPORTED,
               conv_problem_parse("op=dynamic n=2 c=8 h=9 w=9 r=3 dtype=f16", &p, message,
                                  sizeof message));
  CHECK_MSG(strstr(message, "dtype f16") != NULL, "%s", message);
  p = problem_3x3((conv_dtype)3, CONV_LAYOUT_NCHW, CONV_FORWARD);
  CHECK_STATUS(CONV_UNSUPPORTED, conv_problem_validate(&p, message, sizeof message));
  CHECK_MSG(strcmp(message, "dtype 3 is not f32, f16 or bf16") == 0, "%s", message);
  return TEST_PASS;
}

/* A half problem's key says "strict" whatever its math mode: strict and
 * tf32 requests are one problem.  fp32 keys are as they were. */
static int half_keys(void) {
  static const struct {
    const char *spec, *key;
  } cases[] = {
      {"n=16 c=64 h=56 w=56 k=64 r=3 s=3 pad=1 layout=nhwc dtype=bf16 epilogue=bias_relu",
       "fwd bf16 nhwc strict bias_relu n16 c64 h56 w56 k64 r3 s3 pad1,1 str1,1 dil1,1 g1"},
      {"n=16 c=64 h=56 w=56 k=64 r=3 s=3 pad=1 layout=nhwc dtype=bf16 epilogue=bias_relu "
       "math=tf32",
       "fwd bf16 nhwc strict bias_relu n16 c64 h56 w56 k64 r3 s3 pad1,1 str1,1 dil1,1 g1"},
      {"n=4 c=32 h=14 w=14 k=16 r=1 s=1 dtype=F16 dir=bwd_data det=1",
       "bwd_data f16 nchw strict none n4 c32 h14 w14 k16 r1 s1 pad0,0 str1,1 dil1,1 g1 det"},
      {"n=4 c=32 h=14 w=14 k=16 r=1 s=1 dtype=f32 math=tf32",
       "fwd f32 nchw tf32 none n4 c32 h14 w14 k16 r1 s1 pad0,0 str1,1 dil1,1 g1"},
      {"n=4 c=32 h=14 w=14 k=16 r=1 s=1",
       "fwd f32 nchw strict none n4 c32 h14 w14 k16 r1 s1 pad0,0 str1,1 dil1,1 g1"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    conv_problem p, back;
    char key[CONV_PROBLEM_KEY_MAX], again[CONV_PROBLEM_KEY_MAX];
    CHECK_STATUS(CONV_OK, conv_problem_parse(cases[i].spec, &p, NULL, 0));
    CHECK_STATUS(CONV_OK, conv_problem_key(&p, key, sizeof key));
    CHECK_MSG(strcmp(key, cases[i].key) == 0, "%s: key %s", cases[i].spec, key);
    CHECK_STATUS(CONV_OK, conv_problem_from_key(key, &back));
    CHECK_STATUS(CONV_OK, conv_problem_key(&back, again, sizeof again));
    CHECK(strcmp(again, key) == 0 && back.dtype == p.dtype && back.math == p.math);
  }
  /* A caller's own struct with TF32 keys as strict, and is left as it was. */
  conv_problem p = problem_3x3(CONV_DTYPE_F16, CONV_LAYOUT_NHWC, CONV_BACKWARD_FILTER);
  p.math = CONV_MATH_TF32;
  char key[CONV_PROBLEM_KEY_MAX];
  CHECK_STATUS(CONV_OK, conv_problem_key(&p, key, sizeof key));
  CHECK_MSG(strncmp(key, "bwd_filter f16 nhwc strict none ", 32) == 0, "%s", key);
  CHECK(p.math == CONV_MATH_TF32);
  /* Keys this version never writes: a half key with tf32, an unknown type. */
  static const char *const bad[] = {
      "fwd f16 nhwc tf32 none n2 c16 h12 w12 k32 r3 s3 pad1,1 str1,1 dil1,1 g1",
      "fwd fp16 nhwc strict none n2 c16 h12 w12 k32 r3 s3 pad1,1 str1,1 dil1,1 g1",
      "fwd F16 nhwc strict none n2 c16 h12 w12 k32 r3 s3 pad1,1 str1,1 dil1,1 g1",
      "dyn fwd f16 nchw strict none n2 c8 h9 w9 k8 r3 s3 pad1,1 str1,1 dil1,1 g1",
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    conv_problem untouched;
    conv_problem_init(&untouched);
    untouched.n = 77;
    CHECK_MSG(conv_problem_from_key(bad[i], &untouched) == CONV_INVALID_ARGUMENT, "took %s",
              bad[i]);
    CHECK(untouched.n == 77);
  }
  return TEST_PASS;
}

/* dtype= in specs: any case, the default f32, one value, named errors. */
static int half_specs(void) {
  conv_problem p;
  char message[256];
  CHECK_STATUS(CONV_OK, conv_problem_parse("n=1 c=4 h=5 w=5 k=4 r=3 s=3", &p, NULL, 0));
  CHECK(p.dtype == CONV_DTYPE_F32);
  CHECK_STATUS(CONV_OK, conv_problem_parse("n=1 c=4 h=5 w=5 k=4 r=3 s=3 dtype=Bf16 math=tf32",
                                           &p, NULL, 0));
  CHECK(p.dtype == CONV_DTYPE_BF16 && p.math == CONV_MATH_STRICT);
  CHECK_STATUS(CONV_OK, conv_problem_parse("n=1 c=4 h=5 w=5 k=4 r=3 s=3 dtype=f32 math=tf32",
                                           &p, NULL, 0));
  CHECK(p.dtype == CONV_DTYPE_F32 && p.math == CONV_MATH_TF32);
  static const struct {
    const char *spec, *says;
  } bad[] = {
      {"n=1 c=4 h=5 w=5 k=4 r=3 s=3 dtype=f64", "dtype=f64: expected f32, f16 or bf16"},
      {"n=1 c=4 h=5 w=5 k=4 r=3 s=3 dtype=half", "dtype=half: expected f32, f16 or bf16"},
      {"n=1 c=4 h=5 w=5 k=4 r=3 s=3 dtype=f16 dtype=bf16", "dtype given twice"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    conv_problem untouched;
    conv_problem_init(&untouched);
    untouched.n = 77;
    message[0] = '\0';
    CHECK_STATUS(CONV_INVALID_ARGUMENT,
                 conv_problem_parse(bad[i].spec, &untouched, message, sizeof message));
    CHECK_MSG(strstr(message, bad[i].says) != NULL, "%s: %s", bad[i].spec, message);
    CHECK(untouched.n == 77);
  }
  return TEST_PASS;
}

static int dtype_sizes_and_names(void) {
  CHECK(conv_dtype_bytes(CONV_DTYPE_F32) == 4);
  CHECK(conv_dtype_bytes(CONV_DTYPE_F16) == 2 && conv_dtype_bytes(CONV_DTYPE_BF16) == 2);
  CHECK(conv_dtype_bytes((conv_dtype)9) == 0);
  CHECK(strcmp(conv_dtype_name(CONV_DTYPE_F32), "f32") == 0);
  CHECK(strcmp(conv_dtype_name(CONV_DTYPE_F16), "f16") == 0);
  CHECK(strcmp(conv_dtype_name(CONV_DTYPE_BF16), "bf16") == 0);
  CHECK(strcmp(conv_dtype_name((conv_dtype)9), "?") == 0);
  return TEST_PASS;
}

static bool near(double got, double want) { return fabs(got - want) <= 1e-12 * want; }

/* 2e-3 (f16) and 1e-2 (bf16) for sums of up to 4096 products, 2.5x for
 * transforms, the math mode ignored, grown as sqrt(terms / 4096) up to 4x
 * the direct bound; fp32's bounds as they were. */
static int bounds_per_dtype(void) {
  conv_problem p = problem_3x3(CONV_DTYPE_F16, CONV_LAYOUT_NHWC, CONV_FORWARD); /* 144 terms */
  CHECK(near(conv_error_bound_for(&p, CONV_ARITH_DIRECT), 2e-3));
  CHECK(near(conv_error_bound_for(&p, CONV_ARITH_TRANSFORM), 5e-3));
  p.math = CONV_MATH_TF32;
  CHECK(near(conv_error_bound_for(&p, CONV_ARITH_DIRECT), 2e-3));
  p.dtype = CONV_DTYPE_BF16;
  CHECK(near(conv_error_bound_for(&p, CONV_ARITH_DIRECT), 1e-2));
  CHECK(near(conv_error_bound_for(&p, CONV_ARITH_TRANSFORM), 2.5e-2));
  CHECK(conv_error_bound_half(CONV_DTYPE_F16, CONV_ARITH_DIRECT) == 2e-3);
  CHECK(conv_error_bound_half(CONV_DTYPE_BF16, CONV_ARITH_DIRECT) == 1e-2);
  /* Reduced-precision sums are held to 2.5 roundings of the output. */
  CHECK(conv_error_bound_half(CONV_DTYPE_F16, CONV_ARITH_REDUCED_SUMS) == 5e-4);
  CHECK(conv_error_bound_half(CONV_DTYPE_BF16, CONV_ARITH_REDUCED_SUMS) == 4e-3);
  /* 4 x 64 x 64 = 16384 terms a weight gradient: twice the base bound. */
  conv_problem long_sums = problem_3x3(CONV_DTYPE_F16, CONV_LAYOUT_NHWC, CONV_BACKWARD_FILTER);
  long_sums.n = 4, long_sums.h = long_sums.w = 64;
  CHECK(near(conv_error_bound_for(&long_sums, CONV_ARITH_DIRECT), 4e-3));
  /* A million terms: 4x the direct bound at most, transforms too. */
  long_sums.n = 64, long_sums.h = long_sums.w = 128;
  CHECK(near(conv_error_bound_for(&long_sums, CONV_ARITH_DIRECT), 8e-3));
  long_sums.dtype = CONV_DTYPE_BF16;
  CHECK(near(conv_error_bound_for(&long_sums, CONV_ARITH_TRANSFORM), 4e-2));
  long_sums.dtype = CONV_DTYPE_F32;
  CHECK(conv_error_bound_for(&long_sums, CONV_ARITH_TRANSFORM) == 2e-4);
  p.dtype = CONV_DTYPE_F32;
  p.math = CONV_MATH_STRICT;
  CHECK(conv_error_bound_for(&p, CONV_ARITH_DIRECT) == conv_error_bound(CONV_MATH_STRICT,
                                                                        CONV_ARITH_DIRECT));
  return TEST_PASS;
}

/* The families with half configs: cudnn, the cuBLASLt GEMM families
 * whose GEMMs and kernels take the type, the FFT families, whose fp32
 * transforms sit between cuts and crops in the type, and depthwise_nhwc,
 * whose kernels read and write the type and sum in fp32.  Each takes a
 * half problem where it takes its fp32 twin. */
static bool serves_half(const conv_algorithm *algo) {
  return algo->id == CONV_ALGO_CUDNN || algo->id == CONV_ALGO_GEMM_NHWC ||
         algo->id == CONV_ALGO_IM2COL_GEMM || algo->id == CONV_ALGO_GEMM_BACKWARD ||
         algo->id == CONV_ALGO_FFT || algo->id == CONV_ALGO_FFT_FILTER ||
         algo->id == CONV_ALGO_DEPTHWISE_NHWC;
}

/* Shapes each family might otherwise take, in every half type, layout and
 * direction, math mode and epilogue: cudnn takes each, gemm_nhwc,
 * im2col_gemm, gemm_backward, fft and fft_filter each where they take the
 * fp32 twin (and,
 * in all, in their own layout and passes), no other family any.  The
 * handles are there (not real: applicable() only looks), so a refusal is
 * the family's own. */
static int half_takers(void) {
  conv_env env;
  memset(&env, 0, sizeof env);
  env.cudnn = (cudnnHandle_t)&env;
  env.cublaslt = (cublasLtHandle_t)&env;
  static const char *const shapes[] = {
      "n=2 c=16 h=12 w=12 k=32 r=3 s=3 pad=1",
      "n=16 c=64 h=56 w=56 k=64 r=3 s=3 pad=1",
      "n=8 c=64 h=8 w=8 k=64 r=3 s=3 pad=1",            /* patch_filter's 8x8 images */
      "n=4 c=32 h=14 w=14 k=64 r=1 s=1",
      "n=2 c=32 h=20 w=20 k=32 r=3 s=3 pad=1 groups=32", /* depthwise */
      "n=1 c=3 h=64 w=64 k=32 r=7 s=7 stride=2 pad=3",   /* a stem */
      "n=1 c=8 h=40 w=40 k=8 r=13 s=13 pad=6",           /* large filters: FFT */
      "n=1 c=256 h=8 w=8 k=256 r=3 s=3 pad=1",           /* channel_split's */
  };
  int count = 0, taken_f32 = 0, taken_by_gemm[3] = {0, 0, 0};
  const conv_algorithm *const *algos = conv_registry(&count);
  for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
    for (size_t d = 0; d < 2; d++)
      for (size_t l = 0; l < 2; l++)
        for (size_t dir = 0; dir < 3; dir++)
          for (int variant = 0; variant < 3; variant++) {
            conv_problem p;
            CHECK_STATUS(CONV_OK, conv_problem_parse(shapes[i], &p, NULL, 0));
            p.layout = layouts[l];
            p.direction = directions[dir];
            p.math = variant == 1 ? CONV_MATH_TF32 : CONV_MATH_STRICT;
            if (variant == 2 && p.direction == CONV_FORWARD) p.epilogue = CONV_EPILOGUE_BIAS_RELU;
            CHECK_STATUS(CONV_OK, conv_problem_validate(&p, NULL, 0));
            bool takes_f32[64];
            CHECK(count <= 64);
            for (int a = 0; a < count; a++) {
              takes_f32[a] = conv_algorithm_applicable(algos[a], &p, &env);
              taken_f32 += takes_f32[a];
            }
            p.dtype = halves[d];
            for (int a = 0; a < count; a++) {
              /* It takes half problems its simple layout runs, fewer than
               * its fp32 twins: test_direct_channel.half_layouts. */
              if (algos[a]->id == CONV_ALGO_DIRECT_CHANNEL) continue;
              /* And fft takes half NHWC forward problems, not their fp32
               * twins: test_fft.half_nhwc_forward_served. */
              if (algos[a]->id == CONV_ALGO_FFT && p.layout == CONV_LAYOUT_NHWC) continue;
              const bool takes = conv_algorithm_applicable(algos[a], &p, &env);
              const bool expected =
                  algos[a]->id == CONV_ALGO_CUDNN || (serves_half(algos[a]) && takes_f32[a]);
              char key[CONV_PROBLEM_KEY_MAX];
              CHECK_STATUS(CONV_OK, conv_problem_key(&p, key, sizeof key));
              CHECK_MSG(takes == expected, "%s %s %s", algos[a]->name,
                        takes ? "takes" : "refuses", key);
              taken_by_gemm[0] += takes && algos[a]->id == CONV_ALGO_GEMM_NHWC;
              taken_by_gemm[1] += takes && algos[a]->id == CONV_ALGO_IM2COL_GEMM;
              taken_by_gemm[2] += takes && algos[a]->id == CONV_ALGO_GEMM_BACKWARD;
            }
          }
  /* Not vacuous: the fp32 twins are taken by several families each, and
   * each GEMM family takes half problems: gemm_nhwc the NHWC forward ones
   * of one group (7 shapes, 3 variants, 2 types), im2col_gemm the NCHW
   * forward ones (8 x 3 x 2), gemm_backward the NCHW backward ones (8 x 2
   * passes x 3 variants x 2). */
  CHECK_MSG(taken_f32 > 2 * 8 * 2 * 3 * 3, "%d fp32 takers", taken_f32);
  CHECK_MSG(taken_by_gemm[0] == 7 * 3 * 2 && taken_by_gemm[1] == 8 * 3 * 2 &&
                taken_by_gemm[2] == 8 * 2 * 3 * 2,
            "half problems taken: gemm_nhwc %d, im2col_gemm %d, gemm_backward %d",
            taken_by_gemm[0], taken_by_gemm[1], taken_by_gemm[2]);
  return TEST_PASS;
}

static const test_case tests[] = {
    {"half_valid_everywhere", half_valid_everywhere},
    {"half_refusals", half_refusals},
    {"half_keys", half_keys},
    {"half_specs", half_specs},
    {"dtype_sizes_and_names", dtype_sizes_and_names},
    {"bounds_per_dtype", bounds_per_dtype},
    {"half_takers", half_takers},
};
TEST_MAIN(tests)
