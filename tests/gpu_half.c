/* gpu_half.c -- the GPU tests' helpers for half precision in the library
 * families (gpu_support.h, "half precision in the library families"):
 * the types a family serves, every config in a half type against the CPU
 * reference, and fp16 overflow judged as the tuner judges it. */
#include <stdlib.h>
#include <string.h>

#include "tuner/check.h"
#include "tests/gpu_support.h"

static const char *half_name(conv_dtype dtype) { return dtype == CONV_DTYPE_BF16 ? "bf16" : "f16"; }

int half_scope(const conv_algorithm *algo, const conv_problem *takes, size_t n_takes,
               const conv_problem *refuses, size_t n_refuses) {
  conv_env env;
  memset(&env, 0, sizeof env);
  env.cudnn = (cudnnHandle_t)&env; /* applicable() only checks they are there */
  env.cublaslt = (cublasLtHandle_t)&env;
  static const conv_dtype every[] = {CONV_DTYPE_F32, CONV_DTYPE_F16, CONV_DTYPE_BF16};
  char key[CONV_PROBLEM_KEY_MAX];
  for (size_t i = 0; i < n_takes; i++)
    for (size_t d = 0; d < 3; d++) {
      conv_problem p = takes[i];
      p.dtype = every[d];
      describe_problem(&p, key, sizeof key);
      CHECK_MSG(conv_problem_validate(&p, NULL, 0) == CONV_OK, "invalid: %s", key);
      CHECK_MSG(conv_algorithm_applicable(algo, &p, &env), "%s refuses %s", algo->name, key);
      p.dtype = (conv_dtype)(CONV_DTYPE_BF16 + 1); /* out of the enum */
      CHECK_MSG(!conv_algorithm_applicable(algo, &p, &env), "%s takes dtype %d", algo->name,
                (int)p.dtype);
    }
  for (size_t i = 0; i < n_refuses; i++)
    for (size_t d = 1; d < 3; d++) {
      conv_problem p = refuses[i];
      p.dtype = every[d];
      describe_problem(&p, key, sizeof key);
      CHECK_MSG(conv_problem_validate(&p, NULL, 0) == CONV_OK, "invalid: %s", key);
      CHECK_MSG(!conv_algorithm_applicable(algo, &p, &env), "%s takes %s", algo->name, key);
      conv_config configs[4];
      int n = -1;
      CHECK_STATUS(CONV_OK, algo->configs(&p, &env, configs, 4, &n, NULL));
      CHECK_MSG(n == 0, "%s lists %d configs for %s", algo->name, n, key);
      /* A config from a cache: refused before any library call, saying why. */
      const conv_config shipped = {2, {1, 0}, 0};
      conv_prepared prep = {0};
      conv_error err = {CONV_OK, ""};
      CHECK_STATUS(CONV_UNSUPPORTED, algo->prepare(&p, &env, &shipped, &prep, &err));
      CHECK_MSG(strncmp(err.message, algo->name, strlen(algo->name)) == 0 && prep.state == NULL,
                "%s on %s: '%s'", algo->name, key, err.message);
    }
  return TEST_PASS;
}

int half_family_matches_reference(const conv_algorithm *algo, const conv_problem *cases,
                                  size_t count, conv_dtype dtype, const char *pass) {
  SKIP_WITHOUT_GPU();
  seed_rng();
  conv_problem *typed = malloc(count * sizeof *typed);
  CHECK(typed != NULL);
  for (size_t i = 0; i < count; i++) {
    typed[i] = cases[i];
    typed[i].dtype = dtype;
    typed[i].math = CONV_MATH_STRICT; /* what validation makes of a half problem's math */
  }
  family_count tally;
  const int rc = run_family_on_cases(algo, typed, count, NULL, &tally);
  free(typed);
  if (rc != TEST_PASS) return TEST_FAIL;
  printf("SUMMARY %s %s %s: %d configs matched on %zu cases (worst relative L2 error %.2g), "
         "%d wrong and caught, %d not supported\n",
         algo->name, half_name(dtype), pass, tally.ran, count, tally.worst_error,
         tally.wrong_caught, tally.unsupported);
  CHECK(tally.ran >= (int)count && tally.wrong_caught == 0);
  return TEST_PASS;
}

int half_family_where_listed(const conv_algorithm *algo, const conv_problem *cases,
                             size_t count, conv_dtype dtype, const char *pass) {
  SKIP_WITHOUT_GPU();
  seed_rng();
  conv_env env;
  if (open_env(&env) != TEST_PASS) return TEST_FAIL;
  static conv_config configs[512];
  int listed_cases = 0, ran = 0;
  for (size_t i = 0; i < count; i++) {
    conv_problem p = cases[i];
    p.dtype = dtype;
    p.math = CONV_MATH_STRICT;
    char key[CONV_PROBLEM_KEY_MAX];
    describe_problem(&p, key, sizeof key);
    CHECK_MSG(conv_algorithm_applicable(algo, &p, &env), "%s refuses %s", algo->name, key);
    int n = 0;
    conv_error err = {CONV_OK, ""};
    CHECK_MSG(algo->configs(&p, &env, configs, 512, &n, &err) == CONV_OK, "%s: %s", key,
              err.message);
    if (n == 0) {
      printf("%s: cuBLASLt has no algorithm for these operands: %s lists no config\n", key,
             algo->name);
      continue;
    }
    family_count tally;
    if (run_family_on_cases(algo, &p, 1, NULL, &tally) != TEST_PASS) return TEST_FAIL;
    CHECK(tally.wrong_caught == 0);
    listed_cases++;
    ran += tally.ran;
  }
  close_env(&env);
  printf("SUMMARY %s %s %s: %d of %zu cases listed configs, %d configs matched\n", algo->name,
         half_name(dtype), pass, listed_cases, count, ran);
  return TEST_PASS;
}

/* x and w of `hc` in [8, 16): an unpadded window of c*r*s >= 512 taps
 * sums to 144 a product on average (73,728 at 512, a standard deviation
 * of about 900), every sum past fp16's largest finite 65,504; the bias
 * that much less 50,000, plus a little noise, bringing every output (with
 * the bias) back to about 50,000.  The reference is recomputed from
 * them. */
static int fill_large(host_case *hc) {
  const double mean_sum = 144.0 * (double)(hc->p.c / hc->p.groups * hc->p.r * hc->p.s);
  for (int64_t i = 0; i < hc->sh.x_elems; i++) hc->x[i] = 12.0f + 4.0f * rng_float();
  for (int64_t i = 0; i < hc->sh.w_elems; i++) hc->w[i] = 12.0f + 4.0f * rng_float();
  for (int64_t i = 0; i < hc->p.k; i++)
    hc->bias[i] = (float)(50000.0 - mean_sum) + 100.0f * rng_float();
  return host_case_refresh(hc);
}

/* The output channel of output element i of a forward problem. */
static int64_t output_channel(const host_case *hc, int64_t i) {
  return hc->p.layout == CONV_LAYOUT_NHWC ? i % hc->p.k : i / (hc->sh.p * hc->sh.q) % hc->p.k;
}

int half_overflow_judged(const conv_algorithm *algo, conv_problem p) {
  SKIP_WITHOUT_GPU();
  seed_rng();
  CHECK(p.dtype == CONV_DTYPE_F16 && p.c / p.groups * p.r * p.s >= 512 && p.pad_h == 0 &&
        p.pad_w == 0 && p.direction == CONV_FORWARD);
  const bool brought_back = p.epilogue == CONV_EPILOGUE_BIAS;
  conv_env env;
  if (open_env(&env) != TEST_PASS) return TEST_FAIL;
  CHECK(conv_algorithm_applicable(algo, &p, &env));
  host_case hc;
  dev_case d;
  if (host_case_make(&hc, &p) != TEST_PASS || fill_large(&hc) != TEST_PASS ||
      dev_case_make(&d, &hc) != TEST_PASS)
    return TEST_FAIL;
  float *dev_ref;
  void *scratch;
  CUDA_OK(cudaMalloc((void **)&dev_ref, (size_t)hc.sh.out_elems * sizeof(float)));
  CUDA_OK(cudaMalloc(&scratch, CONV_COMPARE_SCRATCH_BYTES));
  if (reference_pass(&d, &hc, dev_ref) != TEST_PASS) return TEST_FAIL;
  /* The setup is what it says: every sum past fp16's range, every output
   * (with the bias) well inside it. */
  for (int64_t i = 0; i < hc.sh.out_elems; i++) {
    const double sum = brought_back ? hc.ref[i] - hc.bias[output_channel(&hc, i)] : hc.ref[i];
    CHECK_MSG(sum > 65504.0 && (!brought_back || hc.ref[i] < 60000.0),
              "output %lld: sum %g, output %g", (long long)i, sum, (double)hc.ref[i]);
  }
  static conv_config configs[512];
  int n = 0, ran = 0;
  conv_error err = {CONV_OK, ""};
  CHECK_MSG(algo->configs(&p, &env, configs, 512, &n, &err) == CONV_OK, "%s", err.message);
  for (int i = 0; i < n; i++) {
    conv_prepared prep = {0};
    if (algo->prepare(&p, &env, &configs[i], &prep, &err) != CONV_OK) continue;
    void *ws = NULL;
    if (prep.workspace_bytes) CUDA_OK(cudaMalloc(&ws, prep.workspace_bytes));
    if (poison(&d, &hc, 0) != TEST_PASS) return TEST_FAIL;
    conv_exec ex = {&hc.p, &env, prep.state, d.x, d.w, d.bias, d.y, ws, prep.workspace_bytes};
    CHECK_MSG(algo->run(&ex, 0, &err) == CONV_OK, "run: %s", err.message);
    double rel = 0;
    int64_t nonfinite = 0;
    CUDA_OK(conv_relative_l2(d.out, p.dtype, dev_ref, hc.sh.out_elems, scratch, 0, &rel,
                             &nonfinite));
    const double bound = conv_error_bound_for(&p, prep.arith);
    char cfg[128];
    algo->describe(&configs[i], cfg, sizeof cfg);
    if (brought_back) {
      /* The bias before the one rounding: no sum was rounded to fp16. */
      CHECK_MSG(nonfinite == 0 && rel <= bound,
                "%s %s: %lld non-finite outputs, relative L2 error %.3g (bound %.1g)",
                algo->name, cfg, (long long)nonfinite, rel, bound);
      if (check_output(&d, &hc, 0, bound, cfg) != TEST_PASS) return TEST_FAIL;
    } else {
      /* The tuner's verdict (tuner.c, validate): non-finite outputs, or an
       * error past the bound, fail whatever else. */
      CHECK_MSG(nonfinite > 0 || rel > bound,
                "%s %s: an fp16 output past 65504 passed validation (rel %.3g)", algo->name, cfg,
                rel);
      printf("%s %s: %lld of %lld outputs overflowed fp16: rejected\n", algo->name, cfg,
             (long long)nonfinite, (long long)hc.sh.out_elems);
    }
    ran++;
    cudaFree(ws);
    algo->release(prep.state);
  }
  CHECK_MSG(ran > 0, "%s: none of %d configs prepared", algo->name, n);
  printf("SUMMARY %s fp16 %s: %d configs\n", algo->name,
         brought_back ? "sums past 65504, outputs within it: right"
                      : "outputs past 65504: rejected",
         ran);
  cudaFree(scratch);
  cudaFree(dev_ref);
  dev_case_free(&d);
  host_case_free(&hc);
  close_env(&env);
  return TEST_PASS;
}
