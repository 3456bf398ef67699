/* test_im2col_gemm.c -- the im2col_gemm family (im2col and a cuBLASLt GEMM
 * a group and chunk of images), on a GPU (skipped without one): every
 * config against the CPU reference.  It takes every NCHW forward problem
 * where cuBLASLt is there, so the tests that run every family
 * (test_gpu.c's every_candidate_matches_reference) run it on random shapes
 * too; these are the shapes its code paths are for.
 * Half precision: on the CPU, the types it takes and the problems it
 * refuses in them; on the GPU, every config in fp16 and bf16 against the
 * CPU reference (every epilogue, applied to the fp32 sums before the one
 * rounding), and fp16 sums past 65504 that the bias brings back. */
#include "tests/gpu_support.h"

/* Every config (chunks of the whole batch, of a power of two and of one
 * image, each with cuBLASLt's ranked algos) on fresh random inputs into
 * poisoned outputs: a 1x1 filter read in place (no im2col) and a strided
 * one through im2col, a padded 3x3 at batch 5 (a chunk of 4 leaves a
 * partial last one), a non-square dilated filter with asymmetric padding
 * in two groups, a depthwise layer (a GEMM of one output channel a group),
 * resnet50's 7x7 stride-2 stem, every epilogue (the bias pass after the
 * GEMM), both math modes.  Every case must be taken, with a right config
 * (run_family_on_cases), and no config may be wrong. */
static int im2col_gemm_matches_reference(void) {
  SKIP_WITHOUT_GPU();
  seed_rng();
  static const char *const specs[] = {
      "n=5 c=16 h=14 w=14 k=24 r=1 s=1 epilogue=bias math=tf32",     /* 1x1, read in place */
      "n=3 c=16 h=14 w=14 k=32 r=1 s=1 stride=2",                    /* 1x1 s2: a subsample */
      "n=5 c=8 h=15 w=13 k=12 r=3 s=3 pad=1 epilogue=bias_relu",     /* 3x3, batch 5 */
      /* 5x3, dilation 2, asymmetric padding, two groups */
      ("n=2 c=6 h=23 w=19 k=8 r=5 s=3 pad_h=2 pad_w=1 stride=2 dil=2 groups=2 epilogue=bias "
       "math=tf32"),
      "n=2 c=8 h=12 w=12 k=8 r=3 s=3 pad=1 groups=8 epilogue=bias_relu math=tf32", /* depthwise */
      "n=2 c=3 h=40 w=38 k=64 r=7 s=7 pad=3 stride=2 math=tf32",     /* resnet50's stem */
  };
  enum { CASES = sizeof specs / sizeof specs[0] };
  conv_problem cases[CASES];
  char message[256] = "";
  for (int i = 0; i < CASES; i++)
    CHECK_MSG(conv_problem_parse(specs[i], &cases[i], message, sizeof message) == CONV_OK,
              "%s: %s", specs[i], message);
  family_count count;
  if (run_family_on_cases(&conv_algorithm_im2col_gemm, cases, CASES, NULL, &count) != TEST_PASS)
    return TEST_FAIL;
  CHECK(count.ran >= CASES && count.wrong_caught == 0);
  return TEST_PASS;
}

static conv_problem parsed(const char *spec) {
  conv_problem p;
  if (conv_problem_parse(spec, &p, NULL, 0) != CONV_OK) conv_problem_init(&p); /* fails later */
  return p;
}

/* The least-memory chunk (im2col_gemm_chunks): one image at batch 5; at
 * seed1_patch4's batch of 20480 4x4 images, a chunk that makes at most 64
 * of them, where one-image chunks ran 320-430 ms against 0.24 ms for the
 * best config (H200).  Config values: {chunk, algo index}. */
static int least_chunk_bounded(void) {
  SKIP_WITHOUT_GPU();
  conv_env env;
  if (open_env(&env) != TEST_PASS) return TEST_FAIL;
  const char *const specs[] = {"n=5 c=8 h=15 w=13 k=12 r=3 s=3 pad=1",
                               "n=20480 c=32 h=4 w=4 k=64 r=3 s=3 pad=1"};
  const int64_t least_wanted[] = {1, 512};
  int rc = TEST_PASS;
  for (int i = 0; i < 2 && rc == TEST_PASS; i++) {
    conv_problem p = parsed(specs[i]);
    conv_config configs[64];
    int n = 0;
    conv_error err = {CONV_OK, ""};
    const conv_status st = conv_algorithm_im2col_gemm.configs(&p, &env, configs, 64, &n, &err);
    int64_t least = p.n;
    for (int j = 0; j < n; j++)
      if (configs[j].values[0] < least) least = configs[j].values[0];
    if (st != CONV_OK || n == 0 || least != least_wanted[i]) {
      fprintf(stderr, "  %s: status %s, %d configs, least chunk %lld (want %lld): %s\n", specs[i],
              conv_status_string(st), n, (long long)least, (long long)least_wanted[i], err.message);
      rc = TEST_FAIL;
    }
  }
  close_env(&env);
  return rc;
}

/* The configs marked best guesses (im2col_gemm_guessed_algos): on 1x1
 * dense layers, stride 1 or 2, any type, the whole batch's first 8 algos
 * the heuristic ranks and no other config; on a 3x3 or a grouped 1x1
 * layer, none. */
static int best_guesses_on_1x1(void) {
  SKIP_WITHOUT_GPU();
  conv_env env;
  if (open_env(&env) != TEST_PASS) return TEST_FAIL;
  static const struct {
    const char *spec;
    bool marks;
  } cases[] = {
      {"n=16 c=256 h=14 w=14 k=512 r=1 s=1 math=tf32", true},
      {"n=16 c=256 h=14 w=14 k=512 r=1 s=1 stride=2", true},
      {"n=4 c=64 h=14 w=14 k=96 r=1 s=1 dtype=bf16 epilogue=bias", true},
      {"n=16 c=64 h=14 w=14 k=64 r=3 s=3 pad=1", false},
      {"n=16 c=64 h=14 w=14 k=64 r=1 s=1 groups=2", false},
  };
  int rc = TEST_PASS;
  for (size_t i = 0; i < sizeof cases / sizeof cases[0] && rc == TEST_PASS; i++) {
    const conv_problem p = parsed(cases[i].spec);
    conv_config configs[64];
    int n = 0, marked = 0, wrong = -1;
    conv_error err = {CONV_OK, ""};
    const conv_status st = conv_algorithm_im2col_gemm.configs(&p, &env, configs, 64, &n, &err);
    int whole_batch = 0;
    for (int j = 0; j < n; j++) {
      const bool guess = cases[i].marks && configs[j].values[0] == p.n && configs[j].values[1] < 8;
      whole_batch += configs[j].values[0] == p.n;
      marked += (configs[j].flags & CONV_CONFIG_BEST_GUESS) != 0;
      if (((configs[j].flags & CONV_CONFIG_BEST_GUESS) != 0) != guess && wrong < 0) wrong = j;
    }
    const int want = cases[i].marks ? (whole_batch < 8 ? whole_batch : 8) : 0;
    printf("  %s: %d configs, %d of the whole batch, %d marked\n", cases[i].spec, n, whole_batch,
           marked);
    const bool says = conv_algorithm_im2col_gemm.marks_best_guesses(&p);
    if (st != CONV_OK || n == 0 || wrong >= 0 || marked != want || (cases[i].marks && want < 3) ||
        says != cases[i].marks) {
      fprintf(stderr, "  %s: status %s, %d marked (want %d), config %d wrong, "
              "marks_best_guesses %d: %s\n", cases[i].spec, conv_status_string(st), marked, want,
              wrong, (int)says, err.message);
      rc = TEST_FAIL;
    }
  }
  close_env(&env);
  return rc;
}

/* ---- half precision */

/* im2col_gemm takes NCHW forward problems in fp32, fp16 and bf16, grouped
 * or not, every epilogue; it refuses the half types' NHWC and backward
 * problems (and lists nothing, prepares nothing for them). */
static int half_types_served(void) {
  const conv_problem takes[] = {
      parsed("n=2 c=16 h=12 w=12 k=32 r=3 s=3 pad=1 epilogue=bias_relu"),
      parsed("n=2 c=8 h=12 w=12 k=8 r=3 s=3 pad=1 groups=8"),
      parsed("n=3 c=16 h=14 w=14 k=24 r=1 s=1 epilogue=bias"),
  };
  const conv_problem refuses[] = {
      parsed("n=2 c=16 h=12 w=12 k=32 r=3 s=3 pad=1 layout=nhwc"),
      parsed("n=2 c=16 h=12 w=12 k=32 r=3 s=3 pad=1 dir=bwd_data"),
      parsed("n=2 c=16 h=12 w=12 k=32 r=3 s=3 pad=1 dir=bwd_filter"),
  };
  return half_scope(&conv_algorithm_im2col_gemm, takes, sizeof takes / sizeof takes[0], refuses,
                    sizeof refuses / sizeof refuses[0]);
}

/* NCHW shapes for the half types, every GEMM operand at least 4-byte
 * aligned (even p*q, c*r*s a group and k a group): a 1x1 read in place
 * with the bias after the GEMM (fp32 sums in chunks of a batch of 5), a
 * 1x1 stride-2 subsample, a padded 3x3 at batch 5 with bias+ReLU, a
 * dilated 5x3 with asymmetric padding in two groups, a 3-channel 4x4
 * stride-4 stem. */
static const char *const half_specs[] = {
    "n=5 c=16 h=14 w=14 k=24 r=1 s=1 epilogue=bias",
    "n=3 c=16 h=16 w=16 k=32 r=1 s=1 stride=2",
    "n=5 c=8 h=16 w=13 k=12 r=3 s=3 pad=1 epilogue=bias_relu",
    "n=2 c=8 h=23 w=19 k=8 r=5 s=3 pad_h=2 pad_w=1 stride=2 dil=2 groups=2 epilogue=bias",
    "n=2 c=3 h=40 w=36 k=64 r=4 s=4 stride=4 epilogue=bias_relu",
};

static int half_forward(conv_dtype dtype) {
  enum { CASES = sizeof half_specs / sizeof half_specs[0] };
  conv_problem cases[CASES];
  char message[256] = "";
  for (int i = 0; i < CASES; i++)
    CHECK_MSG(conv_problem_parse(half_specs[i], &cases[i], message, sizeof message) == CONV_OK,
              "%s: %s", half_specs[i], message);
  const size_t n = quick_mode() ? 3 : CASES;
  return half_family_matches_reference(&conv_algorithm_im2col_gemm, cases, n, dtype, "forward");
}
static int f16_forward(void) { return half_forward(CONV_DTYPE_F16); }
static int bf16_forward(void) { return half_forward(CONV_DTYPE_BF16); }

/* Operands only 2-byte aligned (an odd p*q, a depthwise filter of 9 taps
 * a group, resnet50's 7x7 stem of 147 taps): every config listed is
 * right; cuBLASLt may list none. */
static int half_odd_alignment(void) {
  const conv_problem cases[] = {
      parsed("n=3 c=16 h=15 w=13 k=16 r=3 s=3 pad=1 epilogue=bias"),
      parsed("n=2 c=8 h=12 w=12 k=8 r=3 s=3 pad=1 groups=8 epilogue=bias_relu"),
      parsed("n=2 c=3 h=40 w=38 k=64 r=7 s=7 pad=3 stride=2"),
  };
  const size_t n = sizeof cases / sizeof cases[0];
  const int rc =
      half_family_where_listed(&conv_algorithm_im2col_gemm, cases, n, CONV_DTYPE_F16, "odd");
  if (rc != TEST_PASS) return rc; /* skipped without a GPU, or failed */
  return half_family_where_listed(&conv_algorithm_im2col_gemm, cases, n, CONV_DTYPE_BF16, "odd");
}

/* fp16 sums of 576 products of about 144 (an unpadded 3x3 of 64
 * channels): without an epilogue every output overflows and the tuner's
 * check rejects every config; with a bias that brings them back, every
 * config is right. */
static int f16_overflow(void) {
  conv_problem plain = parsed("n=2 c=64 h=7 w=8 k=16 r=3 s=3 dtype=f16");
  conv_problem biased = plain;
  biased.epilogue = CONV_EPILOGUE_BIAS;
  int rc = half_overflow_judged(&conv_algorithm_im2col_gemm, plain);
  if (rc == TEST_PASS) rc = half_overflow_judged(&conv_algorithm_im2col_gemm, biased);
  return rc;
}

static const labelled_test_case tests[] = {
    {"im2col_gemm_matches_reference", im2col_gemm_matches_reference, "gpu"},
    {"least_chunk_bounded", least_chunk_bounded, "gpu"},
    {"best_guesses_on_1x1", best_guesses_on_1x1, "gpu"},
    {"half_types_served", half_types_served, "cpu"},
    {"f16_forward", f16_forward, "gpu"},
    {"bf16_forward", bf16_forward, "gpu"},
    {"half_odd_alignment", half_odd_alignment, "gpu"},
    {"f16_overflow", f16_overflow, "gpu"},
};
TEST_MAIN(tests)
