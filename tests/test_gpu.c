/*
 * test_gpu.c -- GPU tests: the reference kernel against a CPU reference in
 * double, every candidate config against the CPU reference on random shapes,
 * plans end to end.  Each skips (exit 77) on a machine without a GPU.
 * Inputs are fresh random numbers each run; the seed is printed and can be
 * fixed with CONVTUNE_TEST_SEED to replay a failure.
 */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "algorithms/depthwise_nhwc.h"
#include "algorithms/direct_channel.h"
#include "algorithms/kernels.h"
#include "algorithms/patch.h"
#include "algorithms/channel_split.h"
#include "cache/cache.h"
#include "runtime/internal.h"
#include "tests/test.h"

#define SKIP_WITHOUT_GPU()                                                     \
  do {                                                                         \
    int count_ = 0;                                                            \
    cudaError_t rc_ = cudaGetDeviceCount(&count_);                             \
    if (rc_ != cudaSuccess || count_ == 0) {                                   \
      printf("no CUDA device (%s): skipping\n", cudaGetErrorString(rc_));     \
      return TEST_SKIP;                                                        \
    }                                                                          \
  } while (0)

#define CUDA_OK(call)                                                          \
  do {                                                                         \
    cudaError_t e_ = (call);                                                   \
    CHECK_MSG(e_ == cudaSuccess, "%s: %s", #call, cudaGetErrorString(e_));     \
  } while (0)

/* ---------------------------------------------------------------- helpers */

/* Sanitizer runs set CONVTUNE_TEST_QUICK=1: compute-sanitizer slows every
 * kernel 10-100x, and exhaustive tuning times hundreds of configs for 30 ms
 * each.  Quick runs try fewer random shapes and tune plans with the fast
 * policy; every family, kernel kind and check still runs. */
static bool quick_mode(void) {
  const char *quick = getenv("CONVTUNE_TEST_QUICK");
  return quick != NULL && quick[0] != '\0' && strcmp(quick, "0") != 0;
}

static conv_policy tuning_policy(void) {
  return quick_mode() ? CONV_POLICY_FAST : CONV_POLICY_EXHAUSTIVE;
}

static uint64_t rng_state;

static void seed_rng(void) {
  const char *fixed = getenv("CONVTUNE_TEST_SEED");
  rng_state = fixed ? strtoull(fixed, NULL, 10) : (uint64_t)uv_hrtime();
  printf("CONVTUNE_TEST_SEED=%llu\n", (unsigned long long)rng_state);
}

static uint64_t rng_next(void) { /* splitmix64 */
  uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

static int64_t rng_int(int64_t lo, int64_t hi) { return lo + (int64_t)(rng_next() % (uint64_t)(hi - lo + 1)); }
static float rng_float(void) { return (float)((rng_next() >> 11) * (2.0 / 9007199254740992.0) - 1.0); }

/* A random valid problem with odd sizes, strides, padding, dilation, groups. */
static conv_problem random_problem(conv_math math) {
  for (;;) {
    conv_problem p;
    conv_problem_init(&p);
    p.groups = rng_int(1, 3);
    p.n = rng_int(1, 3);
    p.c = p.groups * rng_int(1, 6);
    p.k = p.groups * rng_int(1, 6);
    p.h = rng_int(1, 21);
    p.w = rng_int(1, 21);
    p.r = rng_int(1, 5);
    p.s = rng_int(1, 5);
    p.pad_h = rng_int(0, 3);
    p.pad_w = rng_int(0, 3);
    p.stride_h = rng_int(1, 3);
    p.stride_w = rng_int(1, 3);
    p.dil_h = rng_int(1, 3);
    p.dil_w = rng_int(1, 3);
    p.math = math;
    p.epilogue = (conv_epilogue)rng_int(0, 2);
    if (conv_problem_validate(&p, NULL, 0) == CONV_OK) return p;
  }
}

/* A random valid channels-last depthwise problem (with a channel
 * multiplier of 1 or 2), the NHWC layout's scope. */
static conv_problem random_nhwc_problem(conv_math math) {
  for (;;) {
    conv_problem p = random_problem(math);
    p.layout = CONV_LAYOUT_NHWC;
    p.c = p.groups = rng_int(1, 3) == 1 ? rng_int(1, 7) : 4 * rng_int(1, 12);
    p.k = p.c * rng_int(1, 2);
    if (conv_problem_validate(&p, NULL, 0) == CONV_OK) return p;
  }
}

/* Host tensors of a problem plus the CPU reference output. */
typedef struct host_case {
  conv_problem p;
  conv_shape sh;
  float *x, *w, *bias, *ref;
} host_case;

/* Offset of element (a, b, i, j) of a packed tensor of dims (A, B, I, J),
 * NCHW or NHWC (b innermost): the layouts are written out here apart from
 * the library's reference kernel, as a second opinion. */
static int64_t element_offset(conv_layout layout, int64_t a, int64_t b, int64_t i, int64_t j,
                              int64_t B, int64_t I, int64_t J) {
  return layout == CONV_LAYOUT_NHWC ? ((a * I + i) * J + j) * B + b : ((a * B + b) * I + i) * J + j;
}

static void cpu_reference(host_case *hc) {
  const conv_problem *p = &hc->p;
  const conv_shape *s = &hc->sh;
  const conv_layout L = p->layout;
  for (int64_t n = 0; n < p->n; n++)
    for (int64_t k = 0; k < p->k; k++) {
      int64_t g = k / s->k_per_group;
      for (int64_t op = 0; op < s->p; op++)
        for (int64_t oq = 0; oq < s->q; oq++) {
          double acc = 0;
          for (int64_t cg = 0; cg < s->c_per_group; cg++)
            for (int64_t r = 0; r < p->r; r++)
              for (int64_t t = 0; t < p->s; t++) {
                int64_t ih = op * p->stride_h - p->pad_h + r * p->dil_h;
                int64_t iw = oq * p->stride_w - p->pad_w + t * p->dil_w;
                if (ih < 0 || ih >= p->h || iw < 0 || iw >= p->w) continue;
                int64_t c = g * s->c_per_group + cg;
                acc += (double)hc->x[element_offset(L, n, c, ih, iw, p->c, p->h, p->w)] *
                       hc->w[element_offset(L, k, cg, r, t, s->c_per_group, p->r, p->s)];
              }
          if (p->epilogue != CONV_EPILOGUE_NONE) acc += hc->bias[k];
          if (p->epilogue == CONV_EPILOGUE_BIAS_RELU && acc < 0) acc = 0;
          hc->ref[element_offset(L, n, k, op, oq, p->k, s->p, s->q)] = (float)acc;
        }
    }
}

static int host_case_make(host_case *hc, const conv_problem *p) {
  memset(hc, 0, sizeof *hc);
  hc->p = *p;
  CHECK_STATUS(CONV_OK, conv_problem_shape(p, &hc->sh));
  hc->x = malloc((size_t)hc->sh.x_elems * sizeof(float));
  hc->w = malloc((size_t)hc->sh.w_elems * sizeof(float));
  hc->bias = malloc((size_t)p->k * sizeof(float));
  hc->ref = malloc((size_t)hc->sh.y_elems * sizeof(float));
  CHECK(hc->x && hc->w && hc->bias && hc->ref);
  for (int64_t i = 0; i < hc->sh.x_elems; i++) hc->x[i] = rng_float();
  for (int64_t i = 0; i < hc->sh.w_elems; i++) hc->w[i] = rng_float();
  for (int64_t i = 0; i < p->k; i++) hc->bias[i] = rng_float();
  cpu_reference(hc);
  return TEST_PASS;
}

static void host_case_free(host_case *hc) {
  free(hc->x);
  free(hc->w);
  free(hc->bias);
  free(hc->ref);
}

/* Device copies of a host case and an output buffer. */
typedef struct dev_case {
  float *x, *w, *bias, *y;
} dev_case;

static int dev_case_make(dev_case *d, const host_case *hc) {
  memset(d, 0, sizeof *d);
  CUDA_OK(cudaMalloc((void **)&d->x, (size_t)hc->sh.x_elems * sizeof(float)));
  CUDA_OK(cudaMalloc((void **)&d->w, (size_t)hc->sh.w_elems * sizeof(float)));
  CUDA_OK(cudaMalloc((void **)&d->bias, (size_t)hc->p.k * sizeof(float)));
  CUDA_OK(cudaMalloc((void **)&d->y, (size_t)hc->sh.y_elems * sizeof(float)));
  CUDA_OK(cudaMemcpy(d->x, hc->x, (size_t)hc->sh.x_elems * sizeof(float), cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemcpy(d->w, hc->w, (size_t)hc->sh.w_elems * sizeof(float), cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemcpy(d->bias, hc->bias, (size_t)hc->p.k * sizeof(float), cudaMemcpyHostToDevice));
  return TEST_PASS;
}

static void dev_case_free(dev_case *d) {
  cudaFree(d->x);
  cudaFree(d->w);
  cudaFree(d->bias);
  cudaFree(d->y);
}

static int poison(const dev_case *d, const host_case *hc, cudaStream_t stream) {
  CUDA_OK(cudaMemsetAsync(d->y, 0xFF, (size_t)hc->sh.y_elems * sizeof(float), stream));
  return TEST_PASS;
}

/* Copies y back and measures it against the CPU reference: the relative L2
 * error and the number of non-finite (or unwritten) elements. */
static int measure_output(const dev_case *d, const host_case *hc, cudaStream_t stream, double *rel,
                          int64_t *bad) {
  size_t bytes = (size_t)hc->sh.y_elems * sizeof(float);
  float *y = malloc(bytes);
  CHECK(y != NULL);
  CUDA_OK(cudaMemcpyAsync(y, d->y, bytes, cudaMemcpyDeviceToHost, stream));
  CUDA_OK(cudaStreamSynchronize(stream));
  double num = 0, den = 0;
  *bad = 0;
  for (int64_t i = 0; i < hc->sh.y_elems; i++) {
    if (!isfinite(y[i])) (*bad)++;
    double diff = (double)y[i] - hc->ref[i];
    num += diff * diff;
    den += (double)hc->ref[i] * hc->ref[i];
  }
  free(y);
  *rel = den > 0 ? sqrt(num / den) : sqrt(num);
  return TEST_PASS;
}

/* Every element written and finite, relative L2 error within bound. */
static int check_output(const dev_case *d, const host_case *hc, cudaStream_t stream, double bound,
                        const char *what) {
  double rel;
  int64_t bad;
  if (measure_output(d, hc, stream, &rel, &bad) != TEST_PASS) return TEST_FAIL;
  CHECK_MSG(bad == 0 && rel <= bound, "%s: %lld non-finite outputs, relative L2 error %.3g (bound %.1g)",
            what, (long long)bad, rel, bound);
  return TEST_PASS;
}

static void describe_problem(const conv_problem *p, char *text, size_t size) {
  if (conv_problem_key(p, text, size) != CONV_OK) snprintf(text, size, "(unprintable problem)");
}

static void temp_path(char *path, size_t size, const char *name) {
  const char *tmp = getenv("CONVTUNE_TEST_TMP");
  snprintf(path, size, "%s/gpu-%s-%d.db", tmp ? tmp : "/tmp", name, (int)getpid());
  unlink(path);
}

static void remove_db(const char *path) {
  char side[4200];
  unlink(path);
  snprintf(side, sizeof side, "%s-wal", path);
  unlink(side);
  snprintf(side, sizeof side, "%s-shm", path);
  unlink(side);
}

/* ---------------------------------------------------------------- tests */

/* The reference kernel, which validates every candidate during tuning, is
 * itself checked against the CPU; so is the device comparison it relies on. */
static int reference_matches_cpu(void) {
  SKIP_WITHOUT_GPU();
  seed_rng();
  void *scratch;
  CUDA_OK(cudaMalloc(&scratch, CONV_COMPARE_SCRATCH_BYTES));
  for (int i = 0; i < 40; i++) {
    host_case hc;
    dev_case d;
    conv_problem p = i % 3 == 2 ? random_nhwc_problem(CONV_MATH_STRICT)
                                : random_problem(CONV_MATH_STRICT);
    if (host_case_make(&hc, &p) != TEST_PASS || dev_case_make(&d, &hc) != TEST_PASS) return TEST_FAIL;
    char name[CONV_PROBLEM_KEY_MAX];
    describe_problem(&p, name, sizeof name);
    if (poison(&d, &hc, 0) != TEST_PASS) return TEST_FAIL;
    CUDA_OK(conv_reference_forward(&p, d.x, d.w, d.bias, d.y, 0));
    if (check_output(&d, &hc, 0, 1e-6, name) != TEST_PASS) return TEST_FAIL;
    /* Device relative L2 of y against a perturbed copy must match the host's. */
    float *ref = NULL;
    CUDA_OK(cudaMalloc((void **)&ref, (size_t)hc.sh.y_elems * sizeof(float)));
    for (int64_t j = 0; j < hc.sh.y_elems; j++) hc.ref[j] *= 1.0f + 1e-3f * rng_float();
    CUDA_OK(cudaMemcpy(ref, hc.ref, (size_t)hc.sh.y_elems * sizeof(float), cudaMemcpyHostToDevice));
    double rel = -1, host_num = 0, host_den = 0;
    int64_t nonfinite = -1;
    CUDA_OK(conv_relative_l2(d.y, ref, hc.sh.y_elems, scratch, 0, &rel, &nonfinite));
    float *y = malloc((size_t)hc.sh.y_elems * sizeof(float));
    CHECK(y != NULL);
    CUDA_OK(cudaMemcpy(y, d.y, (size_t)hc.sh.y_elems * sizeof(float), cudaMemcpyDeviceToHost));
    for (int64_t j = 0; j < hc.sh.y_elems; j++) {
      host_num += ((double)y[j] - hc.ref[j]) * ((double)y[j] - hc.ref[j]);
      host_den += (double)hc.ref[j] * hc.ref[j];
    }
    double host_rel = host_den > 0 ? sqrt(host_num / host_den) : sqrt(host_num);
    CHECK_MSG(nonfinite == 0 && fabs(rel - host_rel) <= 1e-9 + 1e-6 * host_rel,
              "%s: device rel %.6g vs host %.6g, nonfinite %lld", name, rel, host_rel, (long long)nonfinite);
    /* A poisoned output must be reported as non-finite. */
    CUDA_OK(cudaMemset(d.y, 0xFF, sizeof(float)));
    CUDA_OK(conv_relative_l2(d.y, ref, hc.sh.y_elems, scratch, 0, &rel, &nonfinite));
    CHECK(nonfinite == 1);
    free(y);
    cudaFree(ref);
    dev_case_free(&d);
    host_case_free(&hc);
  }
  cudaFree(scratch);
  return TEST_PASS;
}

/* Counts per family, printed as the test's summary. */
typedef struct family_count {
  int ran, unsupported, wrong_caught;
} family_count;

/* Runs one prepared config on poisoned output and judges it twice: against
 * the CPU reference, and the way the tuner does (device reference kernel,
 * device comparison).  The two verdicts must agree, so a wrong config can
 * never win a tuning.  Our own families must also be right; a cuDNN engine
 * that is wrong for a shape (cuDNN bugs exist) only has to be caught. */
static int judge_config(conv_env *env, const conv_algorithm *algo, const conv_prepared *prep,
                        const host_case *hc, const dev_case *d, const float *dev_ref, void *scratch,
                        const char *what, family_count *count) {
  void *ws = NULL;
  conv_error err = {CONV_OK, ""};
  if (prep->workspace_bytes) CUDA_OK(cudaMalloc(&ws, prep->workspace_bytes));
  if (poison(d, hc, 0) != TEST_PASS) return TEST_FAIL;
  conv_exec ex = {&hc->p, env, prep->state, d->x, d->w, d->bias, d->y, ws, prep->workspace_bytes};
  conv_status st = algo->run(&ex, 0, &err);
  CHECK_MSG(st == CONV_OK, "%s: run: %s", what, err.message);
  double bound = conv_error_bound(hc->p.math, prep->arith), host_rel, dev_rel;
  int64_t host_bad, dev_bad;
  if (measure_output(d, hc, 0, &host_rel, &host_bad) != TEST_PASS) return TEST_FAIL;
  CUDA_OK(conv_relative_l2(d->y, dev_ref, hc->sh.y_elems, scratch, 0, &dev_rel, &dev_bad));
  bool host_ok = host_bad == 0 && host_rel <= bound, dev_ok = dev_bad == 0 && dev_rel <= bound;
  CHECK_MSG(host_ok == dev_ok, "%s: CPU check says %s (rel %.3g), tuner's check says %s (rel %.3g)",
            what, host_ok ? "right" : "wrong", host_rel, dev_ok ? "right" : "wrong", dev_rel);
  if (!host_ok) {
    CHECK_MSG(algo->id == CONV_ALGO_CUDNN, "%s: relative L2 error %.3g, %lld non-finite (bound %.1g)",
              what, host_rel, (long long)host_bad, bound);
    printf("caught a wrong result: %s: relative L2 error %.3g\n", what, host_rel);
    count->wrong_caught++;
  } else {
    count->ran++;
  }
  cudaFree(ws);
  return TEST_PASS;
}

static int run_every_config(conv_env *env, const conv_algorithm *algo, const host_case *hc,
                            const dev_case *d, const float *dev_ref, void *scratch,
                            family_count *count) {
  enum { MAX = 512 };
  static conv_config configs[MAX];
  int n = 0, ran_before = count->ran;
  conv_error err = {CONV_OK, ""};
  char name[CONV_PROBLEM_KEY_MAX], what[CONV_PROBLEM_KEY_MAX + 200];
  describe_problem(&hc->p, name, sizeof name);
  CHECK_MSG(algo->configs(&hc->p, env, configs, MAX, &n, &err) == CONV_OK, "%s configs: %s", algo->name, err.message);
  for (int i = 0; i < n; i++) {
    conv_prepared prep = {0};
    conv_status st = algo->prepare(&hc->p, env, &configs[i], &prep, &err);
    if (st == CONV_UNSUPPORTED) {
      count->unsupported++;
      continue;
    }
    char cfg[128];
    algo->describe(&configs[i], cfg, sizeof cfg);
    snprintf(what, sizeof what, "%s %s on %s", algo->name, cfg, name);
    CHECK_MSG(st == CONV_OK, "%s: prepare: %s", what, err.message);
    int rc = judge_config(env, algo, &prep, hc, d, dev_ref, scratch, what, count);
    algo->release(prep.state);
    if (rc != TEST_PASS) return rc;
  }
  CHECK_MSG(count->ran > ran_before, "%s: none of %d configs is right on %s", algo->name, n, name);
  return TEST_PASS;
}

static int open_env(conv_env *env) {
  memset(env, 0, sizeof *env);
  CHECK(uv_mutex_init(&env->cudnn_lock) == 0);
  CHECK_STATUS(CONV_OK, conv_device_query(0, &env->device, NULL));
  CHECK(cudnnCreate(&env->cudnn) == CUDNN_STATUS_SUCCESS);
  CHECK(cublasLtCreate(&env->cublaslt) == CUBLAS_STATUS_SUCCESS);
  return TEST_PASS;
}

static void close_env(conv_env *env) {
  cudnnDestroy(env->cudnn);
  cublasLtDestroy(env->cublaslt);
  uv_mutex_destroy(&env->cudnn_lock);
}

static int every_candidate_matches_reference(void) {
  SKIP_WITHOUT_GPU();
  seed_rng();
  conv_env env;
  if (open_env(&env) != TEST_PASS) return TEST_FAIL;
  int count;
  const conv_algorithm *const *algos = conv_registry(&count);
  family_count counts[8] = {{0, 0, 0}};
  CHECK(count <= 8);
  void *scratch;
  CUDA_OK(cudaMalloc(&scratch, CONV_COMPARE_SCRATCH_BYTES));
  /* Shapes 0-3 already cover strict and TF32, random, channels-last and
   * plain shapes and a batch of patches: every family. */
  for (int i = 0; i < (quick_mode() ? 4 : 16); i++) {
    conv_problem p = random_problem(i % 2 ? CONV_MATH_TF32 : CONV_MATH_STRICT);
    if (i % 8 == 1) p = random_nhwc_problem(CONV_MATH_TF32); /* cudnn and depthwise_nhwc */
    if (i % 4 >= 2) { /* a plain convolution, which every family (fft too) takes */
      p.stride_h = p.stride_w = p.dil_h = p.dil_w = 1;
      p.c /= p.groups, p.k /= p.groups, p.groups = 1;
      if (p.r * p.s == 1) p.r = 3, p.pad_h = 1;
      if (i % 8 == 3) { /* and a batch of patches, which the patch family takes too */
        p.h = p.w = i % 16 == 3 ? 4 : 8;
        p.r = p.s = 3, p.pad_h = p.pad_w = 1;
        p.n = rng_int(30, 40), p.k = 8 * rng_int(1, 3);
      }
      CHECK(conv_problem_validate(&p, NULL, 0) == CONV_OK);
    }
    host_case hc;
    dev_case d;
    if (host_case_make(&hc, &p) != TEST_PASS || dev_case_make(&d, &hc) != TEST_PASS) return TEST_FAIL;
    float *dev_ref;
    CUDA_OK(cudaMalloc((void **)&dev_ref, (size_t)hc.sh.y_elems * sizeof(float)));
    CUDA_OK(conv_reference_forward(&p, d.x, d.w, d.bias, dev_ref, 0));
    for (int a = 0; a < count; a++) {
      if (!algos[a]->applicable(&p, &env)) continue;
      if (run_every_config(&env, algos[a], &hc, &d, dev_ref, scratch, &counts[a]) != TEST_PASS)
        return TEST_FAIL;
    }
    cudaFree(dev_ref);
    dev_case_free(&d);
    host_case_free(&hc);
  }
  for (int a = 0; a < count; a++) {
    printf("%s: %d configs matched the CPU reference, %d wrong and caught by validation, "
           "%d not supported for their shape\n",
           algos[a]->name, counts[a].ran, counts[a].wrong_caught, counts[a].unsupported);
    CHECK(counts[a].ran > 0);
  }
  cudaFree(scratch);
  close_env(&env);
  return TEST_PASS;
}

/* Runs every config of `algo` on one problem (which it must take) with fresh
 * random inputs, each judged against the CPU reference (run_every_config). */
static int run_family_on_case(conv_env *env, const conv_algorithm *algo, const conv_problem *p,
                              void *scratch, family_count *count) {
  char name[CONV_PROBLEM_KEY_MAX];
  describe_problem(p, name, sizeof name);
  CHECK_MSG(conv_problem_validate(p, NULL, 0) == CONV_OK, "invalid: %s", name);
  CHECK_MSG(algo->applicable(p, env), "%s not applicable: %s", algo->name, name);
  host_case hc;
  dev_case d;
  if (host_case_make(&hc, p) != TEST_PASS || dev_case_make(&d, &hc) != TEST_PASS) return TEST_FAIL;
  float *dev_ref;
  CUDA_OK(cudaMalloc((void **)&dev_ref, (size_t)hc.sh.y_elems * sizeof(float)));
  CUDA_OK(conv_reference_forward(p, d.x, d.w, d.bias, dev_ref, 0));
  const int rc = run_every_config(env, algo, &hc, &d, dev_ref, scratch, count);
  cudaFree(dev_ref);
  dev_case_free(&d);
  host_case_free(&hc);
  return rc;
}

/* A problem for the direct_channel shapes: n c h w k r s, then stride,
 * pad, dilation (both axes unless the _w values differ), groups. */
static conv_problem direct_problem(int64_t n, int64_t c, int64_t h, int64_t w, int64_t k,
                                   int64_t r, int64_t s, int64_t stride, int64_t pad, int64_t dil,
                                   int64_t groups, conv_epilogue epilogue, conv_math math) {
  conv_problem p;
  conv_problem_init(&p);
  p.n = n; p.c = c; p.h = h; p.w = w; p.k = k; p.r = r; p.s = s;
  p.stride_h = p.stride_w = stride;
  p.pad_h = p.pad_w = pad;
  p.dil_h = p.dil_w = dil;
  p.groups = groups;
  p.epilogue = epilogue;
  p.math = math;
  return p;
}

/* How many of `algo`'s configs for `p` prepare with a state `accept` takes
 * (run_every_config ran every config that prepares). */
static int prepared_configs(conv_env *env, const conv_algorithm *algo, const conv_problem *p,
                            bool (*accept)(const void *state)) {
  static conv_config configs[512];
  int n = 0, accepted = 0;
  if (algo->configs(p, env, configs, 512, &n, NULL) != CONV_OK) return -1;
  for (int i = 0; i < n; i++) {
    conv_prepared prep = {0};
    if (algo->prepare(p, env, &configs[i], &prep, NULL) != CONV_OK) continue;
    accepted += accept(prep.state);
    algo->release(prep.state);
  }
  return accepted;
}

static bool is_window(const void *state) {
  return ((const conv_direct_launch *)state)->tiling.layout == CONV_DIRECT_WINDOW;
}

static bool is_window_float4(const void *state) {
  return is_window(state) && ((const conv_direct_launch *)state)->vector_loads;
}

static bool is_tensor_core(const void *state) {
  return ((const conv_patch_launch *)state)->tiling.kind != CONV_PATCH_FMA;
}

static bool is_wgmma(const void *state) {
  return ((const conv_patch_launch *)state)->tiling.kind == CONV_PATCH_WGMMA;
}

/* Checks a family's reference test makes per case, after every config ran. */
typedef int (*case_check)(conv_env *env, const conv_problem *p, const char *name);

/* Runs every config of `algo` on each case (run_family_on_case), then
 * `check` (may be NULL); prints per case and in all how many matched the
 * CPU reference, and leaves the totals in *count. */
static int run_family_on_cases(const conv_algorithm *algo, const conv_problem *cases,
                               size_t ncases, case_check check, family_count *count) {
  conv_env env;
  if (open_env(&env) != TEST_PASS) return TEST_FAIL;
  void *scratch;
  CUDA_OK(cudaMalloc(&scratch, CONV_COMPARE_SCRATCH_BYTES));
  *count = (family_count){0, 0, 0};
  for (size_t i = 0; i < ncases; i++) {
    char name[CONV_PROBLEM_KEY_MAX];
    describe_problem(&cases[i], name, sizeof name);
    const int before = count->ran;
    if (run_family_on_case(&env, algo, &cases[i], scratch, count) != TEST_PASS) return TEST_FAIL;
    printf("%s: %d %s configs matched\n", name, count->ran - before, algo->name);
    if (check != NULL && check(&env, &cases[i], name) != TEST_PASS) return TEST_FAIL;
  }
  printf("%s: %d configs matched the CPU reference, %d not supported for their shape\n",
         algo->name, count->ran, count->unsupported);
  cudaFree(scratch);
  close_env(&env);
  return TEST_PASS;
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

/* conv_bias_act, the bias (+ ReLU) pass of cuDNN and GEMM candidates, on
 * each of its forms: float4 (planes of a multiple of 4), float (odd planes,
 * or an output not 16-byte aligned), with and without ReLU.  The adds are
 * the same float operations on the host, so the results must be equal. */
static int bias_pass_matches_host(void) {
  SKIP_WITHOUT_GPU();
  seed_rng();
  struct { int64_t n, k, p, offset; conv_epilogue epilogue; } cases[] = {
      {2, 5, 8, 0, CONV_EPILOGUE_BIAS},       /* plane 64: float4 */
      {3, 7, 7, 0, CONV_EPILOGUE_BIAS_RELU},  /* plane 49: float */
      {2, 3, 4, 1, CONV_EPILOGUE_BIAS},       /* plane 16, misaligned output: float */
      {1, 130, 2, 0, CONV_EPILOGUE_BIAS_RELU},/* plane 4, one float4 a channel */
      {5, 1, 9, 0, CONV_EPILOGUE_BIAS},       /* one channel */
  };
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    conv_problem pb;
    conv_problem_init(&pb);
    pb.n = cases[c].n, pb.c = 1, pb.k = cases[c].k, pb.h = pb.w = cases[c].p, pb.r = pb.s = 1;
    pb.epilogue = cases[c].epilogue;
    CHECK(conv_problem_validate(&pb, NULL, 0) == CONV_OK);
    const int64_t count = pb.n * pb.k * pb.h * pb.w, plane = pb.h * pb.w;
    float *y = malloc((size_t)count * sizeof *y), *bias = malloc((size_t)pb.k * sizeof *bias);
    float *got = malloc((size_t)count * sizeof *got);
    CHECK(y != NULL && bias != NULL && got != NULL);
    for (int64_t i = 0; i < count; i++) y[i] = rng_float();
    for (int64_t i = 0; i < pb.k; i++) bias[i] = rng_float();
    float *dy, *dbias;
    CUDA_OK(cudaMalloc((void **)&dy, (size_t)(count + 1) * sizeof *dy));
    CUDA_OK(cudaMalloc((void **)&dbias, (size_t)pb.k * sizeof *dbias));
    float *out = dy + cases[c].offset;
    CUDA_OK(cudaMemcpy(out, y, (size_t)count * sizeof *y, cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemcpy(dbias, bias, (size_t)pb.k * sizeof *bias, cudaMemcpyHostToDevice));
    CUDA_OK(conv_bias_act(&pb, out, dbias, 0));
    CUDA_OK(cudaMemcpy(got, out, (size_t)count * sizeof *got, cudaMemcpyDeviceToHost));
    int64_t wrong = 0;
    for (int64_t i = 0; i < count; i++) {
      float want = y[i] + bias[(i / plane) % pb.k];
      if (pb.epilogue == CONV_EPILOGUE_BIAS_RELU && want < 0.0f) want = 0.0f;
      wrong += got[i] != want;
    }
    CHECK_MSG(wrong == 0, "case %zu: %lld of %lld outputs wrong", c, (long long)wrong,
              (long long)count);
    cudaFree(dy);
    cudaFree(dbias);
    free(y), free(bias), free(got);
  }
  return TEST_PASS;
}

static int make_context(conv_context **ctx, const char *cache, conv_policy policy, size_t ws_limit) {
  conv_context_options o;
  conv_context_options_init(&o);
  o.cache_path = cache;
  o.policy = policy;
  o.workspace_limit = ws_limit;
  conv_status st = conv_context_create(ctx, &o);
  CHECK_MSG(st == CONV_OK, "conv_context_create: %s", conv_context_last_error(NULL));
  return TEST_PASS;
}

/* The fft candidate on shapes that exercise its tiling: partial tiles at
 * the bottom and right, tiles smaller and larger than the image, whole-image
 * transforms of cuFFT-friendly but not power-of-two sizes, valid and
 * asymmetric padding, non-square filters, 16 channels in and out, every
 * epilogue, and TF32.  Every config must match the CPU reference within
 * the transform bound (conv_error_bound). */
static int fft_matches_reference(void) {
  SKIP_WITHOUT_GPU();
  seed_rng();
  const conv_math S = CONV_MATH_STRICT, T = CONV_MATH_TF32;
  conv_problem cases[] = {
      direct_problem(2, 3, 40, 37, 5, 7, 7, 1, 3, 1, 1, CONV_EPILOGUE_BIAS_RELU, S),
      direct_problem(1, 4, 33, 64, 6, 5, 3, 1, 2, 1, 1, CONV_EPILOGUE_NONE, S),
      direct_problem(1, 2, 20, 24, 3, 11, 11, 1, 0, 1, 1, CONV_EPILOGUE_BIAS, S), /* valid */
      direct_problem(2, 16, 30, 30, 16, 3, 3, 1, 1, 1, 1, CONV_EPILOGUE_BIAS, T),
      direct_problem(1, 2, 64, 64, 2, 31, 31, 1, 15, 1, 1, CONV_EPILOGUE_NONE, S),
      direct_problem(3, 5, 45, 29, 4, 9, 5, 1, 4, 1, 1, CONV_EPILOGUE_BIAS_RELU, T),
  };
  cases[1].pad_w = 1; /* asymmetric padding */
  cases[5].pad_w = 0;
  family_count count;
  if (run_family_on_cases(&conv_algorithm_fft, cases, sizeof cases / sizeof cases[0], NULL,
                          &count) != TEST_PASS)
    return TEST_FAIL;
  CHECK(count.unsupported == 0);
  return TEST_PASS;
}

/* The tensor-core kernels ran exactly where they apply: TF32 mode, 4 or 8
 * channel tiles a warp, and for wgmma compute capability 9.0. */
static int check_tensor_cores(conv_env *env, const conv_problem *p, const char *name) {
  const int cores = prepared_configs(env, &conv_algorithm_patch, p, is_tensor_core);
  const int wgmma = prepared_configs(env, &conv_algorithm_patch, p, is_wgmma);
  printf("%s: %d tensor-core configs, %d of them wgmma\n", name, cores, wgmma);
  const bool applies = p->math == CONV_MATH_TF32 && p->k % 32 == 0;
  CHECK_MSG(applies == (cores > 0), "tensor-core configs %s on %s",
            cores > 0 ? "ran" : "did not run", name);
  const bool hopper = env->device.cc_major == 9 && env->device.cc_minor == 0;
  CHECK_MSG((applies && hopper) == (wgmma > 0), "wgmma configs %s on %s",
            wgmma > 0 ? "ran" : "did not run", name);
  return TEST_PASS;
}

/* The patch candidate on each compiled patch size: image counts that leave
 * a partial group of images, channel counts that leave a partial chunk
 * (and, for the tensor cores, a partial block of 8), several blocks of
 * output channels, every epilogue; both kernels in TF32 mode where K is a
 * multiple of 32, else FMA only.  Every config must match the CPU
 * reference. */
static int patch_matches_reference(void) {
  SKIP_WITHOUT_GPU();
  seed_rng();
  const conv_math S = CONV_MATH_STRICT, T = CONV_MATH_TF32;
  const conv_epilogue NONE = CONV_EPILOGUE_NONE, BIAS = CONV_EPILOGUE_BIAS,
                      RELU = CONV_EPILOGUE_BIAS_RELU;
  const conv_problem cases[] = {
      direct_problem(70, 32, 4, 4, 64, 3, 3, 1, 1, 1, 1, RELU, S),
      direct_problem(65, 20, 4, 4, 32, 3, 3, 1, 1, 1, 1, NONE, T),
      direct_problem(50, 32, 4, 4, 64, 3, 3, 1, 1, 1, 1, RELU, T),
      direct_problem(33, 5, 8, 8, 16, 3, 3, 1, 1, 1, 1, BIAS, T),
      direct_problem(40, 24, 8, 8, 32, 3, 3, 1, 1, 1, 1, NONE, T),
      direct_problem(23, 40, 8, 8, 64, 3, 3, 1, 1, 1, 1, BIAS, T),
      direct_problem(37, 17, 8, 8, 40, 3, 3, 1, 1, 1, 1, RELU, S),
      direct_problem(9, 3, 16, 16, 8, 3, 3, 1, 1, 1, 1, BIAS, S),
      direct_problem(5, 17, 16, 16, 64, 3, 3, 1, 1, 1, 1, RELU, T),
  };
  family_count count;
  if (run_family_on_cases(&conv_algorithm_patch, cases, sizeof cases / sizeof cases[0],
                          check_tensor_cores, &count) != TEST_PASS)
    return TEST_FAIL;
  CHECK(count.wrong_caught == 0);
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

static bool is_window_kernel(const void *state) {
  const conv_dwnhwc_launch *l = state;
  return (l->s == 3 || l->s == 5 || l->s == 7) && l->dil_w == 1 && l->stride_w <= 2;
}

/* Both window and generic kernels ran where the filter takes the window
 * form, and float4 configs where the channels allow them. */
static int check_nhwc_kernels(conv_env *env, const conv_problem *p, const char *name) {
  const int windows = prepared_configs(env, &conv_algorithm_depthwise_nhwc, p, is_window_kernel);
  const bool takes_window = (p->s == 3 || p->s == 5 || p->s == 7) && p->dil_w == 1 &&
                            p->stride_w <= 2;
  printf("%s: %d window-form configs\n", name, windows);
  CHECK_MSG(takes_window == (windows > 0), "window configs %s on %s", windows ? "ran" : "did not run",
            name);
  return TEST_PASS;
}

/* Channels-last depthwise problems through cuDNN and depthwise_nhwc: the
 * ConvNeXt and MobileNet shapes, every filter form (window 3/5/7 with
 * stride 1 and 2, generic for other sizes, dilation and strides), channels
 * that float4 cannot take (6, multiplier 2), partial channel blocks and
 * row bands, every epilogue, both math modes. */
static int nhwc_depthwise_matches_reference(void) {
  SKIP_WITHOUT_GPU();
  seed_rng();
  const conv_math S = CONV_MATH_STRICT, T = CONV_MATH_TF32;
  const conv_epilogue NONE = CONV_EPILOGUE_NONE, BIAS = CONV_EPILOGUE_BIAS,
                      RELU = CONV_EPILOGUE_BIAS_RELU;
  conv_problem cases[] = {
      direct_problem(2, 96, 14, 14, 96, 7, 7, 1, 3, 1, 96, BIAS, S),  /* ConvNeXt block */
      direct_problem(1, 40, 19, 23, 40, 3, 3, 2, 1, 1, 40, RELU, T),  /* MobileNet s2 */
      direct_problem(2, 36, 17, 18, 36, 5, 5, 1, 2, 1, 36, NONE, S),  /* 5x5 */
      direct_problem(1, 132, 9, 11, 132, 5, 5, 2, 2, 1, 132, BIAS, S),/* 5x5 s2, 132 > 128 */
      direct_problem(1, 6, 20, 21, 6, 3, 3, 1, 2, 2, 6, BIAS, S),     /* dilation 2: generic */
      direct_problem(2, 8, 13, 12, 16, 3, 3, 1, 1, 1, 8, RELU, S),    /* multiplier 2 */
      direct_problem(1, 12, 16, 16, 12, 4, 2, 3, 0, 1, 12, NONE, T),  /* 4x2 stride 3 */
      direct_problem(3, 5, 7, 9, 5, 7, 7, 1, 3, 1, 5, BIAS, S),       /* 5 channels, 7x7 */
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) cases[i].layout = CONV_LAYOUT_NHWC;
  family_count count;
  if (run_family_on_cases(&conv_algorithm_depthwise_nhwc, cases, sizeof cases / sizeof cases[0],
                          check_nhwc_kernels, &count) != TEST_PASS)
    return TEST_FAIL;
  CHECK(count.wrong_caught == 0);
  /* cuDNN's NHWC strides, on the shapes models have (it need not take the
   * odd ones, and a wrong engine only has to be caught). */
  return run_family_on_cases(&conv_algorithm_cudnn, cases, 3, NULL, &count);
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

/* Creates a plan, executes it on `stream` and checks the output. */
static int plan_roundtrip(conv_context *ctx, const conv_problem *p, cudaStream_t stream,
                          conv_plan_source expect_source) {
  host_case hc;
  dev_case d;
  if (host_case_make(&hc, p) != TEST_PASS || dev_case_make(&d, &hc) != TEST_PASS) return TEST_FAIL;
  conv_plan *plan = NULL;
  conv_status st = conv_plan_create(ctx, p, &plan);
  CHECK_MSG(st == CONV_OK, "conv_plan_create: %s", conv_context_last_error(ctx));
  conv_plan_info info;
  CHECK_STATUS(CONV_OK, conv_plan_info_get(plan, &info));
  printf("plan: %s %s %.4f ms, source %d\n", info.algorithm, info.config, info.time_ms, (int)info.source);
  CHECK_MSG(info.source == expect_source, "source %d, expected %d", (int)info.source, (int)expect_source);
  CHECK(info.time_ms > 0);
  if (poison(&d, &hc, stream) != TEST_PASS) return TEST_FAIL;
  CHECK_STATUS(CONV_OK, conv_plan_execute(plan, stream, d.x, d.w, d.bias, d.y));
  if (check_output(&d, &hc, stream, conv_error_bound(p->math, CONV_ARITH_TRANSFORM), "plan") != TEST_PASS)
    return TEST_FAIL;
  conv_plan_destroy(plan);
  dev_case_free(&d);
  host_case_free(&hc);
  return TEST_PASS;
}

static conv_problem fixed_problem(void) {
  conv_problem p;
  conv_problem_init(&p);
  p.n = 2; p.c = 16; p.h = 23; p.w = 19; p.k = 24; p.r = 3; p.s = 3;
  p.pad_h = p.pad_w = 1;
  p.epilogue = CONV_EPILOGUE_BIAS_RELU;
  return p;
}

static int plan_executes_correctly(void) {
  SKIP_WITHOUT_GPU();
  seed_rng();
  char cache[4096];
  temp_path(cache, sizeof cache, "plan");
  conv_context *ctx;
  if (make_context(&ctx, cache, tuning_policy(), 0) != TEST_PASS) return TEST_FAIL;
  for (int i = 0; i < 4; i++) {
    conv_problem p = i == 0 ? fixed_problem() : random_problem(i % 2 ? CONV_MATH_TF32 : CONV_MATH_STRICT);
    if (plan_roundtrip(ctx, &p, 0, CONV_SOURCE_TUNED) != TEST_PASS) return TEST_FAIL;
    if (plan_roundtrip(ctx, &p, 0, CONV_SOURCE_MEMORY) != TEST_PASS) return TEST_FAIL;
  }
  conv_context_destroy(ctx);
  remove_db(cache);
  return TEST_PASS;
}

/* Creations of one problem share a live plan; the last destroy frees it,
 * and the next creation rebuilds it from the context's memory. */
static int plans_of_one_problem_are_shared(void) {
  SKIP_WITHOUT_GPU();
  seed_rng();
  char cache[4096];
  temp_path(cache, sizeof cache, "shared");
  conv_context *ctx;
  if (make_context(&ctx, cache, CONV_POLICY_FAST, 0) != TEST_PASS) return TEST_FAIL;
  conv_problem p = fixed_problem();
  conv_plan *first = NULL, *second = NULL, *other = NULL;
  CHECK_MSG(conv_plan_create(ctx, &p, &first) == CONV_OK, "%s", conv_context_last_error(ctx));
  CHECK_MSG(conv_plan_create(ctx, &p, &second) == CONV_OK, "%s", conv_context_last_error(ctx));
  CHECK_MSG(first == second, "a second creation of a live problem made another plan");
  conv_problem q = p;
  q.math = CONV_MATH_TF32;
  CHECK_MSG(conv_plan_create(ctx, &q, &other) == CONV_OK, "%s", conv_context_last_error(ctx));
  CHECK_MSG(other != first, "another problem got the same plan");
  conv_plan_destroy(other);
  conv_plan_destroy(first);
  /* One reference left: the plan still runs. */
  host_case hc;
  dev_case d;
  if (host_case_make(&hc, &p) != TEST_PASS || dev_case_make(&d, &hc) != TEST_PASS) return TEST_FAIL;
  if (poison(&d, &hc, 0) != TEST_PASS) return TEST_FAIL;
  CHECK_STATUS(CONV_OK, conv_plan_execute(second, 0, d.x, d.w, d.bias, d.y));
  if (check_output(&d, &hc, 0, conv_error_bound(p.math, CONV_ARITH_TRANSFORM), "shared plan") != TEST_PASS)
    return TEST_FAIL;
  conv_plan_destroy(second);
  dev_case_free(&d);
  host_case_free(&hc);
  /* Freed: the next creation rebuilds the remembered choice. */
  if (plan_roundtrip(ctx, &p, 0, CONV_SOURCE_MEMORY) != TEST_PASS) return TEST_FAIL;
  conv_context_destroy(ctx);
  remove_db(cache);
  return TEST_PASS;
}

/* ---- graph replay */

static int copy_output(const dev_case *d, const host_case *hc, float *dst) {
  CUDA_OK(cudaMemcpy(dst, d->y, (size_t)hc->sh.y_elems * sizeof(float), cudaMemcpyDeviceToHost));
  return TEST_PASS;
}

/* Executes `plan` on d (poisoned first), checks y against the CPU
 * reference and leaves a copy in `out`. */
static int execute_checked(conv_plan *plan, const conv_problem *p, const dev_case *d,
                           const host_case *hc, float *out, const char *what) {
  if (poison(d, hc, 0) != TEST_PASS) return TEST_FAIL;
  CHECK_STATUS(CONV_OK, conv_plan_execute(plan, 0, d->x, d->w, d->bias, d->y));
  if (check_output(d, hc, 0, conv_error_bound(p->math, CONV_ARITH_TRANSFORM), what) != TEST_PASS)
    return TEST_FAIL;
  return copy_output(d, hc, out);
}

/* Buffer sets per replay case: more than the 32 graphs a plan keeps.  The
 * order below (REPLAY_STEPS executes) walks conv_plan_execute's rules
 * (an execute that captures also launches the new graph):
 * - all 34 sets once: first sightings run directly (34 direct runs);
 * - all again: 0..31 are captured into free slots; 32 and 33 each update
 *   the least recently used graph in place (sets 0's and 1's), since 32
 *   launches pay for up to 8 updates;
 * - 0..31: 0..7 no longer have graphs and update the least recently used
 *   ones while launches >= 4 x (updates + 1); at set 8, 42 launches < 44:
 *   sets 8 and 9 run directly, 10..31 replay;
 * - 32, 33, 0, 33, 0: replays.
 * Totals: 36 direct runs, 42 captures, 69 launches. */
#define REPLAY_SETS 34
#define REPLAY_STEPS (REPLAY_SETS + REPLAY_SETS + 32 + 3 + 2)

static void replay_order(int order[REPLAY_STEPS]) {
  int n = 0;
  for (int pass = 0; pass < 2; pass++)
    for (int i = 0; i < REPLAY_SETS; i++) order[n++] = i;
  for (int i = 0; i < 32; i++) order[n++] = i;
  const int tail[] = {32, 33, 0, 33, 0};
  for (int i = 0; i < 5; i++) order[n++] = tail[i];
}

static int replay_case(conv_context *graphs, conv_context *direct, const conv_problem *p,
                       int *replayed) {
  host_case hc;
  dev_case d[REPLAY_SETS];
  if (host_case_make(&hc, p) != TEST_PASS) return TEST_FAIL;
  for (int i = 0; i < REPLAY_SETS; i++)
    if (dev_case_make(&d[i], &hc) != TEST_PASS) return TEST_FAIL;
  conv_plan *pg = NULL, *pd = NULL;
  CHECK_MSG(conv_plan_create(graphs, p, &pg) == CONV_OK, "%s", conv_context_last_error(graphs));
  CHECK_MSG(conv_plan_create(direct, p, &pd) == CONV_OK, "%s", conv_context_last_error(direct));
  conv_plan_info ig, id;
  CHECK_STATUS(CONV_OK, conv_plan_info_get(pg, &ig));
  CHECK_STATUS(CONV_OK, conv_plan_info_get(pd, &id));
  CHECK(ig.replay == CONV_REPLAY_PENDING && id.replay == CONV_REPLAY_DIRECT);
  CHECK(id.source == CONV_SOURCE_CACHE && strcmp(ig.algorithm, id.algorithm) == 0 &&
        strcmp(ig.config, id.config) == 0);
  const size_t bytes = (size_t)hc.sh.y_elems * sizeof(float);
  float *yg = malloc(bytes), *yd = malloc(bytes), *first = malloc(bytes);
  CHECK(yg != NULL && yd != NULL && first != NULL);
  int order[REPLAY_STEPS];
  replay_order(order);
  for (int step = 0; step < REPLAY_STEPS; step++) {
    const dev_case *set = &d[order[step]];
    if (execute_checked(pg, p, set, &hc, yg, "graph plan") != TEST_PASS ||
        execute_checked(pd, p, set, &hc, yd, "direct plan") != TEST_PASS)
      return TEST_FAIL;
    CHECK_MSG(memcmp(yg, yd, bytes) == 0, "%s %s, step %d: graph replay and direct launches differ",
              ig.algorithm, ig.config, step);
    if (step == 0) memcpy(first, yg, bytes);
    CHECK_MSG(memcmp(yg, first, bytes) == 0, "%s %s, step %d: another result than step 0's",
              ig.algorithm, ig.config, step);
  }
  CHECK_STATUS(CONV_OK, conv_plan_info_get(pg, &ig));
  CHECK_STATUS(CONV_OK, conv_plan_info_get(pd, &id));
  CHECK(ig.replay == CONV_REPLAY_GRAPH || (ig.replay == CONV_REPLAY_DIRECT && ig.replay_note[0]));
  printf("%s %s: %s%s (%llu launches, %llu captures, %llu direct)\n", ig.algorithm, ig.config,
         ig.replay == CONV_REPLAY_GRAPH ? "graph replay" : "direct launches: ", ig.replay_note,
         (unsigned long long)ig.graph_launches, (unsigned long long)ig.graph_captures,
         (unsigned long long)ig.direct_runs);
  CHECK(id.direct_runs == REPLAY_STEPS && id.graph_launches == 0 && id.graph_captures == 0);
  if (ig.replay == CONV_REPLAY_GRAPH)
    CHECK_MSG(ig.direct_runs == 36 && ig.graph_captures == 42 && ig.graph_launches == 69,
              "%s: %llu direct runs, %llu captures, %llu launches; expected 36, 42, 69", ig.algorithm,
              (unsigned long long)ig.direct_runs, (unsigned long long)ig.graph_captures,
              (unsigned long long)ig.graph_launches);
  else
    CHECK(ig.direct_runs == REPLAY_STEPS);
  *replayed += ig.replay == CONV_REPLAY_GRAPH;
  free(yg);
  free(yd);
  free(first);
  conv_plan_destroy(pg);
  conv_plan_destroy(pd);
  for (int i = 0; i < REPLAY_SETS; i++) dev_case_free(&d[i]);
  host_case_free(&hc);
  return TEST_PASS;
}

/* Graph replay gives the bits of direct launches, on shapes where each
 * family tends to win (depthwise, patches, a 31x31 few-channel filter, a
 * dense 3x3, a 1x1, an 8x8 board with 256 channels); which one won is
 * printed. */
static int graph_replay_matches_direct(void) {
  SKIP_WITHOUT_GPU();
  seed_rng();
  const conv_math S = CONV_MATH_STRICT, T = CONV_MATH_TF32;
  const conv_problem cases[] = {
      direct_problem(2, 8, 56, 56, 8, 3, 3, 1, 1, 1, 8, CONV_EPILOGUE_BIAS_RELU, S),
      direct_problem(256, 32, 4, 4, 64, 3, 3, 1, 1, 1, 1, CONV_EPILOGUE_BIAS, T),
      direct_problem(1, 4, 128, 128, 4, 31, 31, 1, 15, 1, 1, CONV_EPILOGUE_NONE, S),
      direct_problem(4, 64, 28, 28, 64, 3, 3, 1, 1, 1, 1, CONV_EPILOGUE_NONE, S),
      direct_problem(8, 64, 14, 14, 128, 1, 1, 1, 0, 1, 1, CONV_EPILOGUE_BIAS, T),
      direct_problem(1, 256, 8, 8, 256, 3, 3, 1, 1, 1, 1, CONV_EPILOGUE_BIAS_RELU, S),
  };
  char cache[4096];
  temp_path(cache, sizeof cache, "replay");
  conv_context *graphs, *direct;
  if (make_context(&graphs, cache, tuning_policy(), 0) != TEST_PASS) return TEST_FAIL;
  conv_context_options o;
  conv_context_options_init(&o);
  o.cache_path = cache;
  o.policy = CONV_POLICY_CACHE_ONLY;
  o.direct_launches = 1;
  CHECK_MSG(conv_context_create(&direct, &o) == CONV_OK, "%s", conv_context_last_error(NULL));
  int replayed = 0;
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    if (replay_case(graphs, direct, &cases[i], &replayed) != TEST_PASS) return TEST_FAIL;
  /* Our own kernels are always capturable. */
  CHECK_MSG(replayed > 0, "no plan replayed a graph");
  conv_context_destroy(direct);
  conv_context_destroy(graphs);
  remove_db(cache);
  return TEST_PASS;
}

/* ---- plan reuse from the cache in a new process */

typedef struct child_result {
  int64_t exit_status;
  int term_signal;
} child_result;

static void on_child_exit(uv_process_t *proc, int64_t exit_status, int term_signal) {
  child_result *r = proc->data;
  r->exit_status = exit_status;
  r->term_signal = term_signal;
  uv_close((uv_handle_t *)proc, NULL);
}

static int spawn_self(char **args, child_result *result) {
  uv_loop_t loop;
  CHECK(uv_loop_init(&loop) == 0);
  uv_stdio_container_t stdio[3];
  for (int i = 0; i < 3; i++) {
    stdio[i].flags = UV_INHERIT_FD;
    stdio[i].data.fd = i;
  }
  uv_process_options_t options;
  memset(&options, 0, sizeof options);
  options.file = test_argv0;
  options.args = args;
  options.exit_cb = on_child_exit;
  options.stdio = stdio;
  options.stdio_count = 3;
  uv_process_t proc;
  proc.data = result;
  result->exit_status = -1;
  int rc = uv_spawn(&loop, &proc, &options);
  CHECK_MSG(rc == 0, "uv_spawn: %s", uv_strerror(rc));
  CHECK(uv_run(&loop, UV_RUN_DEFAULT) == 0);
  CHECK(uv_loop_close(&loop) == 0);
  return TEST_PASS;
}

static int plan_from_cache_in_new_process(void) {
  SKIP_WITHOUT_GPU();
  seed_rng();
  conv_problem p = fixed_problem();
  if (test_argc == 2 && strcmp(test_args[0], "child") == 0) {
    /* Child: cache-only, so anything but a cache hit fails. */
    conv_context *ctx;
    if (make_context(&ctx, test_args[1], CONV_POLICY_CACHE_ONLY, 0) != TEST_PASS) return TEST_FAIL;
    if (plan_roundtrip(ctx, &p, 0, CONV_SOURCE_CACHE) != TEST_PASS) return TEST_FAIL;
    conv_context_destroy(ctx);
    return TEST_PASS;
  }
  char cache[4096];
  temp_path(cache, sizeof cache, "newproc");
  conv_context *ctx;
  if (make_context(&ctx, cache, CONV_POLICY_FAST, 0) != TEST_PASS) return TEST_FAIL;
  if (plan_roundtrip(ctx, &p, 0, CONV_SOURCE_TUNED) != TEST_PASS) return TEST_FAIL;
  conv_context_destroy(ctx);
  char *args[] = {(char *)test_argv0, "plan_from_cache_in_new_process", "child", cache, NULL};
  child_result result;
  if (spawn_self(args, &result) != TEST_PASS) return TEST_FAIL;
  CHECK_MSG(result.exit_status == 0 && result.term_signal == 0, "child exited %lld (signal %d)",
            (long long)result.exit_status, result.term_signal);
  remove_db(cache);
  return TEST_PASS;
}

static int nondefault_stream(void) {
  SKIP_WITHOUT_GPU();
  seed_rng();
  char cache[4096];
  temp_path(cache, sizeof cache, "stream");
  conv_context *ctx;
  if (make_context(&ctx, cache, CONV_POLICY_FAST, 0) != TEST_PASS) return TEST_FAIL;
  cudaStream_t stream;
  CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  conv_problem p = fixed_problem();
  p.n = 8;
  if (plan_roundtrip(ctx, &p, stream, CONV_SOURCE_TUNED) != TEST_PASS) return TEST_FAIL;
  p.math = CONV_MATH_TF32;
  if (plan_roundtrip(ctx, &p, stream, CONV_SOURCE_TUNED) != TEST_PASS) return TEST_FAIL;
  CUDA_OK(cudaStreamDestroy(stream));
  conv_context_destroy(ctx);
  remove_db(cache);
  return TEST_PASS;
}

static int execute_rejects_bad_arguments(void) {
  SKIP_WITHOUT_GPU();
  seed_rng();
  char cache[4096];
  temp_path(cache, sizeof cache, "badargs");
  conv_context *ctx;
  if (make_context(&ctx, cache, CONV_POLICY_FAST, 0) != TEST_PASS) return TEST_FAIL;
  conv_problem bad = fixed_problem();
  bad.groups = 5;
  conv_plan *plan = (conv_plan *)0x1;
  CHECK_STATUS(CONV_BAD_GROUPS, conv_plan_create(ctx, &bad, &plan));
  CHECK(plan == (conv_plan *)0x1);
  CHECK(strstr(conv_context_last_error(ctx), "groups") != NULL);
  bad = fixed_problem();
  bad.direction = CONV_BACKWARD_FILTER;
  CHECK_STATUS(CONV_UNSUPPORTED, conv_plan_create(ctx, &bad, &plan));
  CHECK_STATUS(CONV_INVALID_ARGUMENT, conv_plan_create(ctx, NULL, &plan));

  conv_problem p = fixed_problem();
  host_case hc;
  dev_case d;
  if (host_case_make(&hc, &p) != TEST_PASS || dev_case_make(&d, &hc) != TEST_PASS) return TEST_FAIL;
  CHECK_STATUS(CONV_OK, conv_plan_create(ctx, &p, &plan));
  if (poison(&d, &hc, 0) != TEST_PASS) return TEST_FAIL;
  CHECK_STATUS(CONV_INVALID_ARGUMENT, conv_plan_execute(plan, 0, NULL, d.w, d.bias, d.y));
  CHECK_STATUS(CONV_INVALID_ARGUMENT, conv_plan_execute(plan, 0, d.x, NULL, d.bias, d.y));
  CHECK_STATUS(CONV_INVALID_ARGUMENT, conv_plan_execute(plan, 0, d.x, d.w, d.bias, NULL));
  CHECK_STATUS(CONV_INVALID_ARGUMENT, conv_plan_execute(plan, 0, d.x, d.w, NULL, d.y));
  CHECK(strstr(conv_context_last_error(ctx), "bias") != NULL);
  CHECK_STATUS(CONV_INVALID_ARGUMENT, conv_plan_execute(plan, 0, d.x + 1, d.w, d.bias, d.y));
  CHECK(strstr(conv_context_last_error(ctx), "aligned") != NULL);
  /* Rejected calls wrote nothing: y is still all poison. */
  uint32_t first = 0;
  CUDA_OK(cudaMemcpy(&first, d.y, sizeof first, cudaMemcpyDeviceToHost));
  CHECK(first == 0xFFFFFFFFu);
  CHECK_STATUS(CONV_INVALID_ARGUMENT, conv_plan_info_get(plan, NULL));
  conv_plan_destroy(plan);
  dev_case_free(&d);
  host_case_free(&hc);
  conv_context_destroy(ctx);
  remove_db(cache);
  return TEST_PASS;
}

typedef struct trial_census {
  int total, workspace_limited, winners;
  size_t winner_workspace;
} trial_census;

static int count_trial(const conv_cache_row *row, void *user) {
  trial_census *c = user;
  c->total++;
  if (row->trial->status == CONV_WORKSPACE_LIMIT && row->trial->reason[0]) c->workspace_limited++;
  if (row->trial->winner) {
    c->winners++;
    c->winner_workspace = row->trial->workspace_bytes;
  }
  return 0;
}

/* With a 1-byte workspace limit, every candidate needing scratch is recorded
 * as failed with its reason, and tuning still returns a valid plan. */
static int failing_candidates_recorded(void) {
  SKIP_WITHOUT_GPU();
  seed_rng();
  char cache[4096];
  temp_path(cache, sizeof cache, "failing");
  conv_context *ctx;
  if (make_context(&ctx, cache, CONV_POLICY_EXHAUSTIVE, 1) != TEST_PASS) return TEST_FAIL;
  conv_problem p = fixed_problem();
  if (plan_roundtrip(ctx, &p, 0, CONV_SOURCE_TUNED) != TEST_PASS) return TEST_FAIL;
  char key[CONV_PROBLEM_KEY_MAX];
  CHECK_STATUS(CONV_OK, conv_problem_key(&p, key, sizeof key));
  trial_census census = {0, 0, 0, 0};
  conv_error err = {CONV_OK, ""};
  CHECK_STATUS(CONV_OK, conv_cache_list_trials(conv_context_cache(ctx), key, count_trial, &census, &err));
  printf("%d trials, %d over the workspace limit, %d winner\n", census.total, census.workspace_limited,
         census.winners);
  CHECK(census.workspace_limited > 0);
  CHECK(census.winners == 1 && census.winner_workspace <= 1);
  CHECK(census.total > census.workspace_limited);
  conv_context_destroy(ctx);
  remove_db(cache);
  return TEST_PASS;
}

static int cache_only_policy(void) {
  SKIP_WITHOUT_GPU();
  char cache[4096];
  temp_path(cache, sizeof cache, "cacheonly");
  conv_context *ctx;
  if (make_context(&ctx, cache, CONV_POLICY_CACHE_ONLY, 0) != TEST_PASS) return TEST_FAIL;
  conv_problem p = fixed_problem();
  conv_plan *plan = NULL;
  CHECK_STATUS(CONV_CACHE_MISS, conv_plan_create(ctx, &p, &plan));
  CHECK(plan == NULL);
  CHECK(strstr(conv_context_last_error(ctx), "cache") != NULL);
  conv_context_destroy(ctx);
  remove_db(cache);
  return TEST_PASS;
}

static const test_case tests[] = {
    {"reference_matches_cpu", reference_matches_cpu},
    {"every_candidate_matches_reference", every_candidate_matches_reference},
    {"direct_channel_matches_reference", direct_channel_matches_reference},
    {"fft_matches_reference", fft_matches_reference},
    {"patch_matches_reference", patch_matches_reference},
    {"channel_split_matches_reference", channel_split_matches_reference},
    {"nhwc_depthwise_matches_reference", nhwc_depthwise_matches_reference},
    {"bias_pass_matches_host", bias_pass_matches_host},
    {"plan_executes_correctly", plan_executes_correctly},
    {"plans_of_one_problem_are_shared", plans_of_one_problem_are_shared},
    {"graph_replay_matches_direct", graph_replay_matches_direct},
    {"plan_from_cache_in_new_process", plan_from_cache_in_new_process},
    {"nondefault_stream", nondefault_stream},
    {"execute_rejects_bad_arguments", execute_rejects_bad_arguments},
    {"failing_candidates_recorded", failing_candidates_recorded},
    {"cache_only_policy", cache_only_policy},
};
TEST_MAIN(tests)
