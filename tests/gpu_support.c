/* gpu_support.c -- the GPU tests' shared helpers (gpu_support.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tuner/check.h"
#include "tests/cpu_reference.h"
#include "tests/gpu_support.h"

/* Sanitizer runs set CONVTUNE_TEST_QUICK=1: compute-sanitizer slows every
 * kernel 10-100x, and exhaustive tuning times hundreds of configs for 30 ms
 * each.  Quick runs try fewer random shapes and tune plans with the fast
 * policy; every family, kernel kind and check still runs. */
bool quick_mode(void) {
  const char *quick = getenv("CONVTUNE_TEST_QUICK");
  return quick != NULL && quick[0] != '\0' && strcmp(quick, "0") != 0;
}

conv_policy tuning_policy(void) {
  return quick_mode() ? CONV_POLICY_FAST : CONV_POLICY_EXHAUSTIVE;
}

/* hc->ref: the pass in double (forward then the epilogue), rounded to
 * float; the dynamic op's passes for a dynamic problem. */
static int cpu_reference(host_case *hc) {
  const conv_problem *p = &hc->p;
  const conv_shape *s = &hc->sh;
  double *out = malloc((size_t)s->out_elems * sizeof *out);
  CHECK(out != NULL);
  if (p->op == CONV_OP_DYNAMIC && p->direction == CONV_BACKWARD_DATA)
    cpu_dynamic_backward_data(p, s, hc->dy, hc->w, out);
  else if (p->op == CONV_OP_DYNAMIC && p->direction == CONV_BACKWARD_FILTER)
    cpu_dynamic_backward_filter(p, s, hc->x, hc->dy, out);
  else if (p->op == CONV_OP_DYNAMIC)
    cpu_dynamic_forward(p, s, hc->x, hc->w, out); /* no epilogue: dynamic takes none */
  else if (p->direction == CONV_BACKWARD_DATA)
    cpu_backward_data(p, s, hc->dy, hc->w, out);
  else if (p->direction == CONV_BACKWARD_FILTER)
    cpu_backward_filter(p, s, hc->x, hc->dy, out);
  else
    cpu_forward(p, s, hc->x, hc->w, out);
  for (int64_t i = 0; i < s->out_elems; i++) {
    double v = out[i];
    if (p->direction == CONV_FORWARD) {
      int64_t k = p->layout == CONV_LAYOUT_NHWC ? i % p->k : i / (s->p * s->q) % p->k;
      if (p->epilogue != CONV_EPILOGUE_NONE) v += hc->bias[k];
      if (p->epilogue == CONV_EPILOGUE_BIAS_RELU && v < 0) v = 0;
    }
    hc->ref[i] = (float)v;
  }
  free(out);
  return TEST_PASS;
}

static float *random_floats(int64_t count) {
  float *v = malloc((size_t)(count > 0 ? count : 1) * sizeof *v);
  if (v != NULL)
    for (int64_t i = 0; i < count; i++) v[i] = rng_float();
  return v;
}

/* count host floats into device elements of `dtype` (rounded to nearest
 * even by conv_convert, the device's own conversion). */
static int upload(void *dev, conv_dtype dtype, const float *host, int64_t count) {
  const size_t bytes = (size_t)count * sizeof(float);
  if (dtype == CONV_DTYPE_F32) {
    CUDA_OK(cudaMemcpy(dev, host, bytes, cudaMemcpyHostToDevice));
    return TEST_PASS;
  }
  float *staged;
  CUDA_OK(cudaMalloc((void **)&staged, bytes));
  CUDA_OK(cudaMemcpy(staged, host, bytes, cudaMemcpyHostToDevice));
  CUDA_OK(conv_convert(staged, CONV_DTYPE_F32, dev, dtype, count, 0));
  CUDA_OK(cudaDeviceSynchronize());
  CUDA_OK(cudaFree(staged));
  return TEST_PASS;
}

/* count device elements of `dtype` into host floats (exactly), after what
 * `stream` has queued. */
static int download(float *host, const void *dev, conv_dtype dtype, int64_t count,
                    cudaStream_t stream) {
  const size_t bytes = (size_t)count * sizeof(float);
  if (dtype == CONV_DTYPE_F32) {
    CUDA_OK(cudaMemcpyAsync(host, dev, bytes, cudaMemcpyDeviceToHost, stream));
    CUDA_OK(cudaStreamSynchronize(stream));
    return TEST_PASS;
  }
  float *staged;
  CUDA_OK(cudaMalloc((void **)&staged, bytes));
  CUDA_OK(conv_convert(dev, dtype, staged, CONV_DTYPE_F32, count, stream));
  CUDA_OK(cudaMemcpyAsync(host, staged, bytes, cudaMemcpyDeviceToHost, stream));
  CUDA_OK(cudaStreamSynchronize(stream));
  CUDA_OK(cudaFree(staged));
  return TEST_PASS;
}

/* Host floats rounded in place to what a tensor of `dtype` holds, so that
 * the CPU reference reads the values the device tensors hold. */
static int round_to_dtype(float *host, int64_t count, conv_dtype dtype) {
  if (dtype == CONV_DTYPE_F32 || count == 0) return TEST_PASS;
  void *dev;
  CUDA_OK(cudaMalloc(&dev, (size_t)count * conv_dtype_bytes(dtype)));
  if (upload(dev, dtype, host, count) != TEST_PASS ||
      download(host, dev, dtype, count, 0) != TEST_PASS)
    return TEST_FAIL;
  CUDA_OK(cudaFree(dev));
  return TEST_PASS;
}

int host_case_make(host_case *hc, const conv_problem *p) {
  memset(hc, 0, sizeof *hc);
  hc->p = *p;
  CHECK_STATUS(CONV_OK, conv_problem_shape(p, &hc->sh));
  hc->x = random_floats(hc->sh.x_elems);
  hc->w = random_floats(hc->sh.w_elems);
  hc->bias = random_floats(p->k);
  if (p->direction != CONV_FORWARD) {
    hc->dy = random_floats(hc->sh.y_elems);
    CHECK(hc->dy != NULL);
  }
  hc->ref = malloc((size_t)hc->sh.out_elems * sizeof(float));
  CHECK(hc->x && hc->w && hc->bias && hc->ref);
  /* The bias stays fp32 whatever the dtype. */
  if (round_to_dtype(hc->x, hc->sh.x_elems, p->dtype) != TEST_PASS ||
      round_to_dtype(hc->w, hc->sh.w_elems, p->dtype) != TEST_PASS ||
      (hc->dy != NULL && round_to_dtype(hc->dy, hc->sh.y_elems, p->dtype) != TEST_PASS))
    return TEST_FAIL;
  return cpu_reference(hc);
}

int host_case_refresh(host_case *hc) {
  if (round_to_dtype(hc->x, hc->sh.x_elems, hc->p.dtype) != TEST_PASS ||
      round_to_dtype(hc->w, hc->sh.w_elems, hc->p.dtype) != TEST_PASS ||
      (hc->dy != NULL && round_to_dtype(hc->dy, hc->sh.y_elems, hc->p.dtype) != TEST_PASS))
    return TEST_FAIL;
  return cpu_reference(hc);
}

void host_case_free(host_case *hc) {
  free(hc->x);
  free(hc->w);
  free(hc->bias);
  free(hc->dy);
  free(hc->ref);
  memset(hc, 0, sizeof *hc);
}

int dev_case_make(dev_case *d, const host_case *hc) {
  memset(d, 0, sizeof *d);
  const conv_dtype t = hc->p.dtype;
  const size_t e = conv_dtype_bytes(t);
  CUDA_OK(cudaMalloc((void **)&d->x, (size_t)hc->sh.x_elems * e));
  CUDA_OK(cudaMalloc((void **)&d->w, (size_t)hc->sh.w_elems * e));
  CUDA_OK(cudaMalloc((void **)&d->bias, (size_t)hc->p.k * sizeof(float)));
  CUDA_OK(cudaMalloc((void **)&d->y, (size_t)hc->sh.y_elems * e));
  if (upload(d->x, t, hc->x, hc->sh.x_elems) != TEST_PASS ||
      upload(d->w, t, hc->w, hc->sh.w_elems) != TEST_PASS ||
      upload(d->bias, CONV_DTYPE_F32, hc->bias, hc->p.k) != TEST_PASS ||
      (hc->dy != NULL && upload(d->y, t, hc->dy, hc->sh.y_elems) != TEST_PASS))
    return TEST_FAIL;
  const conv_direction direction = hc->p.direction;
  d->out = direction == CONV_BACKWARD_DATA ? d->x : direction == CONV_BACKWARD_FILTER ? d->w : d->y;
  return TEST_PASS;
}

int reference_pass(const dev_case *d, const host_case *hc, float *ref) {
  const conv_problem *p = &hc->p;
  if (p->direction == CONV_BACKWARD_DATA)
    CUDA_OK(conv_reference_backward_data(p, d->y, d->w, ref, 0));
  else if (p->direction == CONV_BACKWARD_FILTER)
    CUDA_OK(conv_reference_backward_filter(p, d->x, d->y, ref, 0));
  else
    CUDA_OK(conv_reference_forward(p, d->x, d->w, d->bias, ref, 0));
  return TEST_PASS;
}

void dev_case_free(dev_case *d) {
  cudaFree(d->x);
  cudaFree(d->w);
  cudaFree(d->bias);
  cudaFree(d->y);
}

int poison(const dev_case *d, const host_case *hc, cudaStream_t stream) {
  CUDA_OK(conv_fill_poison(d->out, hc->p.dtype, hc->sh.out_elems, stream));
  return TEST_PASS;
}

/* Copies the pass's output back and measures it against the CPU reference:
 * the relative L2 error and the number of non-finite (or unwritten)
 * elements. */
static int measure_output(const dev_case *d, const host_case *hc, cudaStream_t stream, double *rel,
                          int64_t *bad) {
  float *y = malloc((size_t)hc->sh.out_elems * sizeof(float));
  CHECK(y != NULL);
  if (download(y, d->out, hc->p.dtype, hc->sh.out_elems, stream) != TEST_PASS) return TEST_FAIL;
  double num = 0, den = 0;
  *bad = 0;
  for (int64_t i = 0; i < hc->sh.out_elems; i++) {
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
int check_output(const dev_case *d, const host_case *hc, cudaStream_t stream, double bound,
                 const char *what) {
  double rel;
  int64_t bad;
  if (measure_output(d, hc, stream, &rel, &bad) != TEST_PASS) return TEST_FAIL;
  CHECK_MSG(bad == 0 && rel <= bound, "%s: %lld non-finite outputs, relative L2 error %.3g (bound %.1g)",
            what, (long long)bad, rel, bound);
  return TEST_PASS;
}

conv_status execute_case(conv_plan *plan, const dev_case *d, conv_direction direction) {
  if (direction == CONV_BACKWARD_DATA) return conv_plan_backward_data(plan, 0, d->y, d->w, d->x);
  if (direction == CONV_BACKWARD_FILTER)
    return conv_plan_backward_filter(plan, 0, d->x, d->y, d->w);
  return conv_plan_execute(plan, 0, d->x, d->w, d->bias, d->y);
}

conv_problem channels_last(conv_problem p) {
  p.layout = CONV_LAYOUT_NHWC;
  return p;
}

void describe_problem(const conv_problem *p, char *text, size_t size) {
  if (conv_problem_key(p, text, size) != CONV_OK) snprintf(text, size, "(unprintable problem)");
}

void temp_path(char *path, size_t size, const char *name) {
  const char *tmp = getenv("CONVTUNE_TEST_TMP");
  snprintf(path, size, "%s/gpu-%s-%d.db", tmp ? tmp : "/tmp", name, (int)getpid());
  unlink(path);
}

void remove_db(const char *path) {
  char side[4200];
  unlink(path);
  snprintf(side, sizeof side, "%s-wal", path);
  unlink(side);
  snprintf(side, sizeof side, "%s-shm", path);
  unlink(side);
}

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
  double bound = conv_error_bound_for(&hc->p, prep->arith), host_rel, dev_rel;
  int64_t host_bad, dev_bad;
  if (measure_output(d, hc, 0, &host_rel, &host_bad) != TEST_PASS) return TEST_FAIL;
  CUDA_OK(conv_relative_l2(d->out, hc->p.dtype, dev_ref, hc->sh.out_elems, scratch, 0, &dev_rel,
                           &dev_bad));
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
    if (host_rel > count->worst_error) count->worst_error = host_rel;
  }
  cudaFree(ws);
  return TEST_PASS;
}

static int config_cap; /* set_config_cap's; 0: every config */

void set_config_cap(int cap) { config_cap = cap; }

int run_every_config(conv_env *env, const conv_algorithm *algo, const host_case *hc,
                     const dev_case *d, const float *dev_ref, void *scratch,
                     family_count *count) {
  enum { MAX = 512 };
  static conv_config configs[MAX];
  int n = 0, ran_before = count->ran;
  conv_error err = {CONV_OK, ""};
  char name[CONV_PROBLEM_KEY_MAX], what[CONV_PROBLEM_KEY_MAX + 200];
  describe_problem(&hc->p, name, sizeof name);
  CHECK_MSG(algo->configs(&hc->p, env, configs, MAX, &n, &err) == CONV_OK, "%s configs: %s", algo->name, err.message);
  if (config_cap > 0 && n > config_cap) {
    printf("%s on %s: the first %d of %d configs\n", algo->name, name, config_cap, n);
    n = config_cap;
  }
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

int open_env(conv_env *env) {
  memset(env, 0, sizeof *env);
  CHECK(uv_mutex_init(&env->cudnn_lock) == 0);
  CHECK_STATUS(CONV_OK, conv_device_query(0, &env->device, NULL));
  CHECK(cudnnCreate(&env->cudnn) == CUDNN_STATUS_SUCCESS);
  CHECK(cublasLtCreate(&env->cublaslt) == CUBLAS_STATUS_SUCCESS);
  return TEST_PASS;
}

void close_env(conv_env *env) {
  cudnnDestroy(env->cudnn);
  cublasLtDestroy(env->cublaslt);
  uv_mutex_destroy(&env->cudnn_lock);
}

/* Runs every config of each of the `nalgos` families that takes `p` on one
 * case of fresh random inputs, each judged against the CPU reference
 * (run_every_config); counts[i] is algos[i]'s. */
static int run_families_on_case(conv_env *env, const conv_algorithm *const *algos, int nalgos,
                                const conv_problem *p, void *scratch, family_count counts[]) {
  host_case hc;
  dev_case d;
  if (host_case_make(&hc, p) != TEST_PASS || dev_case_make(&d, &hc) != TEST_PASS) return TEST_FAIL;
  float *dev_ref;
  CUDA_OK(cudaMalloc((void **)&dev_ref, (size_t)hc.sh.out_elems * sizeof(float)));
  if (reference_pass(&d, &hc, dev_ref) != TEST_PASS) return TEST_FAIL;
  for (int a = 0; a < nalgos; a++) {
    if (!conv_algorithm_applicable(algos[a], p, env)) continue;
    if (run_every_config(env, algos[a], &hc, &d, dev_ref, scratch, &counts[a]) != TEST_PASS)
      return TEST_FAIL;
  }
  cudaFree(dev_ref);
  dev_case_free(&d);
  host_case_free(&hc);
  return TEST_PASS;
}

int run_every_family(conv_env *env, const conv_problem *p, void *scratch, family_count counts[],
                     int max) {
  int count;
  const conv_algorithm *const *algos = conv_registry(&count);
  CHECK_MSG(count <= max, "%d families, room for %d", count, max);
  return run_families_on_case(env, algos, count, p, scratch, counts);
}

int family_sweep_open(family_sweep *s) {
  memset(s, 0, sizeof *s);
  if (open_env(&s->env) != TEST_PASS) return TEST_FAIL;
  s->algos = conv_registry(&s->count);
  CHECK_MSG(s->count <= FAMILY_SWEEP_MAX, "%d families, room for %d", s->count, FAMILY_SWEEP_MAX);
  CUDA_OK(cudaMalloc(&s->scratch, CONV_COMPARE_SCRATCH_BYTES));
  return TEST_PASS;
}

int family_sweep_run(family_sweep *s, const conv_problem *p) {
  return run_every_family(&s->env, p, s->scratch, s->counts, FAMILY_SWEEP_MAX);
}

void family_sweep_close(family_sweep *s) {
  cudaFree(s->scratch);
  close_env(&s->env);
}

/* Runs every config of `algo` on one problem, which it must take. */
static int run_family_on_case(conv_env *env, const conv_algorithm *algo, const conv_problem *p,
                              void *scratch, family_count *count) {
  char name[CONV_PROBLEM_KEY_MAX];
  describe_problem(p, name, sizeof name);
  CHECK_MSG(conv_problem_validate(p, NULL, 0) == CONV_OK, "invalid: %s", name);
  CHECK_MSG(conv_algorithm_applicable(algo, p, env), "%s not applicable: %s", algo->name, name);
  return run_families_on_case(env, &algo, 1, p, scratch, count);
}

/* A problem for the direct_channel shapes: n c h w k r s, then stride,
 * pad, dilation (both axes unless the _w values differ), groups. */
conv_problem direct_problem(int64_t n, int64_t c, int64_t h, int64_t w, int64_t k,
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
int prepared_configs(conv_env *env, const conv_algorithm *algo, const conv_problem *p,
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

/* Runs every config of `algo` on each case (run_family_on_case), then
 * `check` (may be NULL); prints per case and in all how many matched the
 * CPU reference, and leaves the totals in *count. */
int run_family_on_cases(const conv_algorithm *algo, const conv_problem *cases,
                        size_t ncases, case_check check, family_count *count) {
  conv_env env;
  if (open_env(&env) != TEST_PASS) return TEST_FAIL;
  void *scratch;
  CUDA_OK(cudaMalloc(&scratch, CONV_COMPARE_SCRATCH_BYTES));
  *count = (family_count){0, 0, 0, 0.0};
  for (size_t i = 0; i < ncases; i++) {
    char name[CONV_PROBLEM_KEY_MAX];
    describe_problem(&cases[i], name, sizeof name);
    const int before = count->ran;
    const double worst_before = count->worst_error;
    count->worst_error = 0.0;
    if (run_family_on_case(&env, algo, &cases[i], scratch, count) != TEST_PASS) return TEST_FAIL;
    printf("%s: %d %s configs matched, the worst with relative L2 error %.2g (direct bound %.1g)\n",
           name, count->ran - before, algo->name, count->worst_error,
           conv_error_bound_for(&cases[i], CONV_ARITH_DIRECT));
    if (worst_before > count->worst_error) count->worst_error = worst_before;
    if (check != NULL && check(&env, &cases[i], name) != TEST_PASS) return TEST_FAIL;
  }
  printf("%s: %d configs matched the CPU reference, %d not supported for their shape\n",
         algo->name, count->ran, count->unsupported);
  cudaFree(scratch);
  close_env(&env);
  return TEST_PASS;
}

int make_context(conv_context **ctx, const char *cache, conv_policy policy, size_t ws_limit) {
  conv_context_options o;
  conv_context_options_init(&o);
  o.cache_path = cache;
  o.policy = policy;
  o.workspace_limit = ws_limit;
  conv_status st = conv_context_create(ctx, &o);
  CHECK_MSG(st == CONV_OK, "conv_context_create: %s", conv_context_last_error(NULL));
  return TEST_PASS;
}

/* TEST_PASS on compute capability 9.0, where the wgmma families exist;
 * else TEST_SKIP, saying that `family`'s test is skipped, or TEST_FAIL
 * where the device cannot be asked. */
int wgmma_device(const char *family) {
  int device = 0, major = 0, minor = 0;
  CUDA_OK(cudaGetDevice(&device));
  CUDA_OK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  CUDA_OK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device));
  if (major == 9 && minor == 0) return TEST_PASS;
  printf("compute capability %d.%d, not 9.0 (wgmma): skipping %s\n", major, minor, family);
  return TEST_SKIP;
}

/* ---- backward passes */

int pass_case_make(pass_case *pc, const conv_problem *p) {
  memset(pc, 0, sizeof *pc);
  if (host_case_make(&pc->hc, p) != TEST_PASS) return TEST_FAIL;
  return dev_case_make(&pc->d, &pc->hc);
}

void pass_case_free(pass_case *pc) {
  dev_case_free(&pc->d);
  host_case_free(&pc->hc);
}

/* NaN in every output element, so that one left unwritten fails. */
int pass_poison(const pass_case *pc) {
  if (poison(&pc->d, &pc->hc, 0) != TEST_PASS) return TEST_FAIL;
  CUDA_OK(cudaDeviceSynchronize());
  return TEST_PASS;
}

/* Relative L2 error of the output against the CPU reference; fails on any
 * non-finite value or an error above `bound`. */
int pass_check(const pass_case *pc, double bound, const char *what) {
  char key[CONV_PROBLEM_KEY_MAX], text[CONV_PROBLEM_KEY_MAX + 64];
  describe_problem(&pc->hc.p, key, sizeof key);
  snprintf(text, sizeof text, "%s, %s", what, key);
  return check_output(&pc->d, &pc->hc, 0, bound, text);
}

/* Every config of `algo` on every pass of `passes` (directions set),
 * against the CPU reference: each pass must be one the family takes, at
 * least `min_ran` configs must run, and none may be wrong. */
int family_passes_match_reference(const conv_algorithm *algo, const conv_problem *passes,
                                  size_t count, int min_ran) {
  conv_env env;
  memset(&env, 0, sizeof env);
  env.cudnn = (cudnnHandle_t)&env; /* applicable() only checks they are there */
  env.cublaslt = (cublasLtHandle_t)&env;
  for (size_t i = 0; i < count; i++)
    CHECK_MSG(algo->applicable(&passes[i], &env), "%s refuses pass %zu", algo->name, i);
  family_count tally;
  if (run_family_on_cases(algo, passes, count, NULL, &tally) != TEST_PASS) return TEST_FAIL;
  printf("%s: %d configs ran, %d wrong and caught, %d unsupported\n", algo->name, tally.ran,
         tally.wrong_caught, tally.unsupported);
  CHECK(tally.ran >= min_ran && tally.wrong_caught == 0);
  return TEST_PASS;
}

void set_direction(conv_problem *cases, size_t count, conv_direction direction) {
  for (size_t i = 0; i < count; i++) cases[i].direction = direction;
}

/* ---- the dynamic op */

/* n c h w k dil groups stride: the fixed shapes every test of the dynamic
 * op runs (test_dynamic.c and the dynamic families'). */
static const int64_t dynamic_shapes[][8] = {
    {2, 3, 37, 29, 5, 1, 1, 1},  /* the seed's form: 3 channels share a 5x5 filter */
    {2, 16, 23, 19, 7, 1, 4, 1}, /* involution: 4 groups of 4 channels, 7x7      */
    {1, 8, 17, 33, 3, 2, 2, 2},  /* dilated, strided, 2 groups                   */
    {3, 4, 9, 7, 7, 2, 4, 1},    /* a window wider than the image: all border   */
    {1, 6, 40, 70, 3, 1, 2, 2},  /* even sizes, several tiles, stride 2          */
    {1, 2, 1, 1, 5, 1, 1, 1},    /* one pixel                                    */
    {2, 32, 12, 45, 3, 1, 1, 1}, /* 32 channels in one group: chunks of channels */
};
_Static_assert(sizeof dynamic_shapes / sizeof dynamic_shapes[0] == DYNAMIC_SHAPES,
               "DYNAMIC_SHAPES (gpu_support.h) counts dynamic_shapes");

const conv_direction every_direction[3] = {CONV_FORWARD, CONV_BACKWARD_DATA,
                                           CONV_BACKWARD_FILTER};
const char *const every_direction_name[3] = {"forward", "backward-data", "backward-filter"};

conv_problem dynamic_shape_problem(int i, conv_direction direction, conv_math math) {
  conv_problem p;
  conv_problem_init(&p);
  p.op = CONV_OP_DYNAMIC;
  p.n = dynamic_shapes[i][0], p.c = p.k = dynamic_shapes[i][1];
  p.h = dynamic_shapes[i][2], p.w = dynamic_shapes[i][3];
  p.r = p.s = dynamic_shapes[i][4];
  p.dil_h = p.dil_w = dynamic_shapes[i][5];
  p.groups = dynamic_shapes[i][6];
  p.stride_h = p.stride_w = dynamic_shapes[i][7];
  p.pad_h = p.pad_w = (p.r - 1) / 2 * p.dil_h;
  p.direction = direction;
  p.math = math;
  return p;
}

static int random_count(void) { return quick_mode() ? 3 : 10; }

/* The fixed shapes and random ones, in `direction`, math modes alternating. */
int dynamic_cases(conv_direction direction, conv_problem **out, size_t *count) {
  const int total = DYNAMIC_SHAPES + random_count();
  conv_problem *cases = calloc((size_t)total, sizeof *cases);
  CHECK(cases != NULL);
  for (int i = 0; i < total; i++) {
    const conv_math math = i % 2 ? CONV_MATH_TF32 : CONV_MATH_STRICT;
    cases[i] = i < DYNAMIC_SHAPES ? dynamic_shape_problem(i, direction, math)
                                  : random_dynamic_problem(math);
    cases[i].direction = direction;
    CHECK_STATUS(CONV_OK, conv_problem_validate(&cases[i], NULL, 0));
  }
  *out = cases;
  *count = (size_t)total;
  return TEST_PASS;
}

/* Every config of `family` in each direction it takes, on every case. */
int dynamic_every_config(uint32_t family, bool backward_data) {
  SKIP_WITHOUT_GPU();
  seed_rng();
  const conv_algorithm *algo = conv_registry_find(family);
  CHECK(algo != NULL);
  int total = 0;
  for (int d = 0; d < 3; d++) {
    if (every_direction[d] == CONV_BACKWARD_DATA && !backward_data) continue;
    conv_problem *cases;
    size_t n;
    if (dynamic_cases(every_direction[d], &cases, &n) != TEST_PASS) return TEST_FAIL;
    family_count count;
    if (run_family_on_cases(algo, cases, n, NULL, &count) != TEST_PASS) return TEST_FAIL;
    printf("SUMMARY %s %s: %d configs matched on %zu cases, %d not supported\n", algo->name,
           every_direction_name[d], count.ran, n, count.unsupported);
    total += count.ran;
    free(cases);
  }
  printf("SUMMARY %s: %d configs matched the CPU reference\n", algo->name, total);
  return TEST_PASS;
}

/* Makes the plan of `p`, runs it on fresh random inputs and compares it
 * with the CPU reference; *info gets its info. */
int context_plan_matches_reference(conv_context *ctx, const conv_problem *p, conv_plan_info *info) {
  host_case hc;
  dev_case d;
  if (host_case_make(&hc, p) != TEST_PASS || dev_case_make(&d, &hc) != TEST_PASS) return TEST_FAIL;
  conv_plan *plan = NULL;
  CHECK_MSG(conv_plan_create(ctx, p, &plan) == CONV_OK, "conv_plan_create: %s",
            conv_context_last_error(ctx));
  CHECK_STATUS(CONV_OK, conv_plan_info_get(plan, info));
  printf("plan: %s %s %.6f ms, source %d\n", info->algorithm, info->config, info->time_ms,
         (int)info->source);
  if (poison(&d, &hc, 0) != TEST_PASS) return TEST_FAIL;
  CHECK_STATUS(CONV_OK, conv_plan_execute(plan, 0, d.x, d.w, d.bias, d.y));
  if (check_output(&d, &hc, 0, conv_error_bound(p->math, CONV_ARITH_TRANSFORM), "plan") !=
      TEST_PASS)
    return TEST_FAIL;
  conv_plan_destroy(plan);
  dev_case_free(&d);
  host_case_free(&hc);
  return TEST_PASS;
}

static int count_winner(const conv_cache_entry *e, void *user) {
  cache_counts *c = user;
  c->winners++;
  if (strcmp(e->versions, conv_library_versions()) == 0) c->winners_now++;
  return 0;
}

static int count_pending(const conv_cache_pending_entry *e, void *user) {
  cache_counts *c = user;
  snprintf(c->reason, sizeof c->reason, "%s", e->reason);
  snprintf(c->device, sizeof c->device, "%s", e->device);
  c->pending++;
  return 0;
}

int read_cache_counts(const char *path, cache_counts *c) {
  memset(c, 0, sizeof *c);
  conv_cache_reader *reader = NULL;
  char message[512];
  CHECK_MSG(conv_cache_reader_open(path, &reader, message, sizeof message) == CONV_OK, "%s",
            message);
  CHECK_MSG(conv_cache_reader_winners(reader, count_winner, c, message, sizeof message) == CONV_OK,
            "%s", message);
  CHECK_MSG(conv_cache_reader_pending(reader, count_pending, c, message, sizeof message) ==
                CONV_OK,
            "%s", message);
  conv_cache_reader_close(reader);
  return TEST_PASS;
}
