/*
 * fft.c -- the `fft` candidate: convolution by 2-D real FFTs (cuFFT) of
 * input tiles and filters, the frequency-domain products summed over input
 * channels, an inverse FFT, and a crop with the epilogue.  Stride 1,
 * dilation 1, one group.
 *
 * Data flow, per execute (the filters are transformed every time: they are
 * an argument of conv_plan_execute, not of the plan):
 *
 *   w --place--> real [k][c][fh][fw] --R2C--> W [k][c][f]
 *   x --cut----> real [c][m][fh][fw] --R2C--> X [c][m][f]   m = (n, tile)
 *   Y [k][m][f] = sum over c of X[c][m][f] * W[k][c][f]
 *   Y --C2R--> real [k][m][fh][fw] --crop, scale, epilogue--> y
 *
 * The filters are placed flipped (fft_tiles.h), which turns cuFFT's
 * circular convolution into the correlation we compute; no conjugate is
 * needed.  The product has two forms, a config value:
 *   0  our kernel, on the spectra as cuFFT writes them: each thread one
 *      frequency, 4 tiles x 4 output channels; for few channels;
 *   1  one complex GEMM per frequency, Y[f] (m x k) = X[f] (m x c) *
 *      W[f] (c x k), batched over frequencies in cuBLASLt, with the spectra
 *      transposed to frequency-major and back around it; for many.
 *
 * Error: an fp32 FFT of size F has a relative error of about
 * eps * log2(F) per transform; three transforms and a sum over c stay near
 * 1e-6 relative L2 on random data (4e-7 measured on the suite's shapes),
 * well inside the 1e-4 bound that CONV_ARITH_TRANSFORM sets for strict fp32
 * (config.c), which validation enforces on every config.  In TF32 mode the
 * GEMM form runs on TF32 tensor cores (bound 5e-3); everything else is
 * fp32 in both modes.
 *
 * Config values: {fh, fw, product}, fh x fw the transform size.  configs()
 * offers the smallest cuFFT-friendly size that holds the whole padded
 * image, and power-of-two tiles from 16 up that leave at least half of
 * each tile as outputs.
 */
#include <cufft.h>
#include <stdio.h>
#include <stdlib.h>

#include "algorithms/fft_tiles.h"
#include "runtime/cublaslt.h"

#define FFT_SIZE_MAX 4096
#define FFT_ALIGN ((size_t)256)

enum { FFT_PRODUCT_KERNEL = 0, FFT_PRODUCT_GEMM = 1 };

typedef struct fft_state {
  conv_fft_tiles t;
  int product;
  cufftHandle filters_fwd, input_fwd, output_inv;
  bool have_filters_fwd, have_input_fwd, have_output_inv;
  cublasLtMatmulDesc_t desc;
  conv_cublaslt_layouts lay;
  cublasLtMatmulAlgo_t algo;
  size_t gemm_ws;
  /* Workspace: byte offsets of each part, and the total; the *_t parts
   * (frequency-major spectra) only for the GEMM. */
  size_t off_real, off_x, off_w, off_y, off_xt, off_wt, off_yt, off_fft_ws, off_gemm_ws, total;
} fft_state;

static void fft_release(void *state) {
  fft_state *st = state;
  if (st == NULL) return;
  if (st->have_filters_fwd) cufftDestroy(st->filters_fwd);
  if (st->have_input_fwd) cufftDestroy(st->input_fwd);
  if (st->have_output_inv) cufftDestroy(st->output_inv);
  conv_cublaslt_layouts_destroy(&st->lay);
  if (st->desc) cublasLtMatmulDescDestroy(st->desc);
  free(st);
}

static conv_status fft_check(conv_error *err, cufftResult r, const char *what) {
  if (r == CUFFT_SUCCESS) return CONV_OK;
  if (r == CUFFT_ALLOC_FAILED)
    return conv_error_set(err, CONV_OUT_OF_MEMORY, "fft: %s: cuFFT allocation failed", what);
  return conv_error_set(err, CONV_UNSUPPORTED, "fft: %s: cuFFT error %d", what, (int)r);
}

static bool fft_problem_supported(const conv_problem *pb) {
  return conv_problem_nchw(pb) && pb->groups == 1 && pb->stride_h == 1 &&
         pb->stride_w == 1 && pb->dil_h == 1 && pb->dil_w == 1 && pb->r * pb->s > 1;
}

static bool fft_applicable(const conv_problem *problem, const conv_env *env) {
  return problem != NULL && env != NULL && env->cublaslt != NULL &&
         fft_problem_supported(problem);
}

/* ---------------------------------------------------------------- configs */

/* Whether n's only prime factors are 2, 3, 5 and 7: the sizes cuFFT runs
 * with its fast radix kernels. */
static bool fft_size_good(int64_t n) {
  static const int primes[] = {2, 3, 5, 7};
  for (int i = 0; i < 4; i++)
    while (n % primes[i] == 0) n /= primes[i];
  return n == 1;
}

/* Transform sizes for one axis with `outputs` outputs and a filter of
 * `taps`, largest first: the whole padded extent, then powers of two. */
static int fft_axis_sizes(int64_t outputs, int64_t taps, int64_t sizes[8]) {
  int count = 0;
  int64_t whole = outputs + taps - 1;
  while (!fft_size_good(whole)) whole++;
  if (whole <= FFT_SIZE_MAX) sizes[count++] = whole;
  int64_t pow2 = 16;
  while (pow2 * 2 < whole && pow2 * 2 <= FFT_SIZE_MAX) pow2 *= 2;
  for (; pow2 >= 16 && count < 8; pow2 /= 2)
    if (pow2 < whole && pow2 - taps + 1 >= taps) sizes[count++] = pow2;
  return count;
}

static bool fft_listed(const int64_t *sizes, int count, int64_t size) {
  for (int i = 0; i < count; i++)
    if (sizes[i] == size) return true;
  return false;
}

static conv_status fft_configs(const conv_problem *problem, conv_env *env, conv_config *out,
                               int max, int *count, conv_error *err) {
  (void)env;
  *count = 0;
  if (!fft_problem_supported(problem) || max < 1) return CONV_OK;
  conv_shape sh;
  conv_status s = conv_problem_shape(problem, &sh);
  if (s != CONV_OK) return conv_error_set(err, s, "fft: invalid problem");
  int64_t hs[8], ws[8];
  const int nh = fft_axis_sizes(sh.p, problem->r, hs), nw = fft_axis_sizes(sh.q, problem->s, ws);
  if (nh == 0 || nw == 0) return CONV_OK;
  /* The largest sizes first; then square tiles, or along an axis that has
   * no such tile, that axis's largest size.  Each size with both products,
   * the one likelier to win first (the GEMM once a frequency's product is
   * a real matrix product). */
  const bool gemm_first = problem->c * problem->k >= 256;
  conv_config sizes[16];
  int n_sizes = 0;
  sizes[n_sizes++] = (conv_config){2, {hs[0], ws[0]}, 0};
  for (int64_t f = FFT_SIZE_MAX; f >= 16; f /= 2) {
    const bool in_h = fft_listed(hs, nh, f), in_w = fft_listed(ws, nw, f);
    const conv_config c = {2, {in_h ? f : hs[0], in_w ? f : ws[0]}, 0};
    bool seen = !in_h && !in_w;
    for (int i = 0; i < n_sizes; i++) seen = seen || conv_config_equal(&sizes[i], &c);
    if (!seen) sizes[n_sizes++] = c;
  }
  int n = 0;
  for (int i = 0; i < n_sizes; i++)
    for (int j = 0; j < 2 && n < max; j++) {
      const int product = (j == 0) == gemm_first ? FFT_PRODUCT_GEMM : FFT_PRODUCT_KERNEL;
      out[n++] = (conv_config){3, {sizes[i].values[0], sizes[i].values[1], product}, 0};
    }
  *count = n;
  return CONV_OK;
}

/* ---------------------------------------------------------------- prepare */

static conv_status fft_tiles_make(const conv_problem *pb, int64_t fh, int64_t fw,
                                  conv_fft_tiles *t, conv_error *err) {
  conv_shape sh;
  conv_status s = conv_problem_shape(pb, &sh);
  if (s != CONV_OK) return conv_error_set(err, s, "fft: invalid problem");
  if (fh < pb->r || fw < pb->s || fh > FFT_SIZE_MAX || fw > FFT_SIZE_MAX)
    return conv_error_set(err, CONV_UNSUPPORTED,
                          "fft: transform %lldx%lld must hold the %lldx%lld filter and be at most "
                          "%d",
                          (long long)fh, (long long)fw, (long long)pb->r, (long long)pb->s,
                          FFT_SIZE_MAX);
  const int64_t th = fh - pb->r + 1, tw = fw - pb->s + 1;
  const int64_t tiles_h = (sh.p + th - 1) / th, tiles_w = (sh.q + tw - 1) / tw;
  const int64_t m = pb->n * tiles_h * tiles_w, freqs = fh * (fw / 2 + 1);
  /* The kernels count planes (and a plane's elements) in 32 bits, and the
   * product's grid has (m / 4) x (k / 4) blocks. */
  const int64_t c_or_k = pb->c > pb->k ? pb->c : pb->k;
  if (c_or_k * m > INT32_MAX || pb->k * pb->c > INT32_MAX || pb->h * pb->w > INT32_MAX ||
      sh.p * sh.q > INT32_MAX || (m + 3) / 4 > 65535 || (pb->k + 3) / 4 > 65535)
    return conv_error_set(err, CONV_UNSUPPORTED, "fft: %lld tiles of %lldx%lld: too many",
                          (long long)m, (long long)fh, (long long)fw);
  *t = (conv_fft_tiles){.n = (int)pb->n, .c = (int)pb->c, .h = (int)pb->h, .w = (int)pb->w,
                        .k = (int)pb->k, .r = (int)pb->r, .s = (int)pb->s, .p = (int)sh.p,
                        .q = (int)sh.q, .pad_h = (int)pb->pad_h, .pad_w = (int)pb->pad_w,
                        .fh = (int)fh, .fw = (int)fw, .th = (int)th, .tw = (int)tw,
                        .tiles_h = (int)tiles_h, .tiles_w = (int)tiles_w, .m = (int)m,
                        .freqs = (int)freqs, .epilogue = (int)pb->epilogue};
  return CONV_OK;
}

static size_t fft_round_up(size_t v) { return (v + FFT_ALIGN - 1) / FFT_ALIGN * FFT_ALIGN; }

/* A batch of 2-D real transforms, planes and spectra each contiguous. */
static conv_status fft_plan(cufftHandle *h, bool *have, const conv_fft_tiles *t, int64_t batch,
                            cufftType type, size_t *work, conv_error *err) {
  conv_status s;
  CONV_TRY(s, fft_check(err, cufftCreate(h), "cufftCreate"), out);
  *have = true;
  /* The work area is part of our workspace, set per execute. */
  CONV_TRY(s, fft_check(err, cufftSetAutoAllocation(*h, 0), "cufftSetAutoAllocation"), out);
  long long n[2] = {t->fh, t->fw};
  long long real_embed[2] = {t->fh, t->fw}, freq_embed[2] = {t->fh, t->fw / 2 + 1};
  const long long real_dist = (long long)t->fh * t->fw, freq_dist = t->freqs;
  const bool forward = type == CUFFT_R2C;
  CONV_TRY(s,
           fft_check(err,
                     cufftMakePlanMany64(*h, 2, n, forward ? real_embed : freq_embed, 1,
                                         forward ? real_dist : freq_dist,
                                         forward ? freq_embed : real_embed, 1,
                                         forward ? freq_dist : real_dist, type, batch, work),
                     "cufftMakePlanMany64"),
           out);
out:
  return s;
}

/* The largest power of two, at most 256, dividing `bytes`: the alignment
 * of every matrix of a batch whose base is 256-byte aligned. */
static uint32_t fft_batch_align(int64_t bytes) {
  uint32_t a = 256;
  while (a > 8 && bytes % a != 0) a /= 2;
  return a;
}

/* A batch of packed rows x cols complex matrices. */
static conv_status fft_layout(cublasLtMatrixLayout_t *layout, int64_t rows, int64_t cols,
                              int64_t batch, conv_error *err) {
  return conv_cublaslt_layout_batched(layout, CUDA_C_32F, rows, cols, rows, (int32_t)batch,
                                      rows * cols, err);
}

/* The per-frequency GEMM Y (m x k) = X (m x c) * W (c x k), batched over
 * frequencies, and cuBLASLt's first algorithm for it. */
static conv_status fft_gemm(const conv_problem *pb, conv_env *env, fft_state *st,
                            conv_error *err) {
  const conv_fft_tiles *t = &st->t;
  conv_status s;
  cublasLtMatmulPreference_t pref = NULL;
  CONV_TRY(s, conv_cublaslt_desc_create(pb->math, CUDA_C_32F, &st->desc, NULL, err), out);
  CONV_TRY(s, fft_layout(&st->lay.a, t->m, t->c, t->freqs, err), out);
  CONV_TRY(s, fft_layout(&st->lay.b, t->c, t->k, t->freqs, err), out);
  CONV_TRY(s, fft_layout(&st->lay.d, t->m, t->k, t->freqs, err), out);
  CONV_TRY(s,
           conv_check_cublas(err, cublasLtMatmulPreferenceCreate(&pref),
                             "cublasLtMatmulPreferenceCreate"),
           out);
  const conv_gemm_align align = {fft_batch_align((int64_t)t->m * t->c * 8),
                                 fft_batch_align((int64_t)t->c * t->k * 8),
                                 fft_batch_align((int64_t)t->m * t->k * 8)};
  CONV_TRY(s, conv_cublaslt_pref_fill(pref, pb->math, CONV_CUBLASLT_WS_MAX, &align, err), out);
  cublasLtMatmulHeuristicResult_t result;
  int found = 0;
  /* Not conv_cublaslt_heuristic: one answer is asked for, and none is
   * CONV_UNSUPPORTED with the shape in the message. */
  const conv_cublaslt_layouts *l = &st->lay;
  const cublasStatus_t cs = cublasLtMatmulAlgoGetHeuristic(env->cublaslt, st->desc, l->a, l->b,
                                                           l->d, l->d, pref, 1, &result, &found);
  if (cs == CUBLAS_STATUS_NOT_SUPPORTED || (cs == CUBLAS_STATUS_SUCCESS && found == 0)) {
    s = conv_error_set(err, CONV_UNSUPPORTED,
                       "fft: cuBLASLt has no complex GEMM for %lld x %lld x %lld, %lld batches",
                       (long long)t->m, (long long)t->k, (long long)t->c, (long long)t->freqs);
    goto out;
  }
  CONV_TRY(s, conv_check_cublas(err, cs, "cublasLtMatmulAlgoGetHeuristic"), out);
  st->algo = result.algo;
  st->gemm_ws = result.workspaceSize;
out:
  if (pref) cublasLtMatmulPreferenceDestroy(pref);
  return s;
}

/* Places the workspace's parts.  The real buffer is shared by the filter
 * planes, the input tiles and the output tiles, which are live one at a
 * time. */
static void fft_workspace_layout(fft_state *st, size_t fft_work) {
  const conv_fft_tiles *t = &st->t;
  const size_t plane = (size_t)t->fh * t->fw * sizeof(float);
  const size_t spectrum = (size_t)t->freqs * 2 * sizeof(float);
  const size_t x_planes = (size_t)t->c * t->m, w_planes = (size_t)t->k * t->c,
               y_planes = (size_t)t->k * t->m;
  size_t planes = w_planes;
  if (x_planes > planes) planes = x_planes;
  if (y_planes > planes) planes = y_planes;
  const bool gemm = st->product == FFT_PRODUCT_GEMM;
  size_t at = 0;
  st->off_real = at, at += fft_round_up(planes * plane);
  st->off_x = at, at += fft_round_up(x_planes * spectrum);
  st->off_w = at, at += fft_round_up(w_planes * spectrum);
  st->off_y = at, at += fft_round_up(y_planes * spectrum);
  st->off_xt = at, at += gemm ? fft_round_up(x_planes * spectrum) : 0;
  st->off_wt = at, at += gemm ? fft_round_up(w_planes * spectrum) : 0;
  st->off_yt = at, at += gemm ? fft_round_up(y_planes * spectrum) : 0;
  st->off_fft_ws = at, at += fft_round_up(fft_work);
  st->off_gemm_ws = at, at += fft_round_up(st->gemm_ws);
  st->total = at;
}

static size_t fft_max(size_t a, size_t b) { return a > b ? a : b; }

static conv_status fft_prepare(const conv_problem *problem, conv_env *env,
                               const conv_config *config, conv_prepared *out, conv_error *err) {
  if (problem == NULL || env == NULL || config == NULL || out == NULL)
    return conv_error_set(err, CONV_INVALID_ARGUMENT, "fft: NULL argument");
  if (!fft_problem_supported(problem))
    return conv_error_set(err, CONV_UNSUPPORTED,
                          "fft: only fp32 NCHW forward, stride 1, dilation 1, one group");
  /* Sizes are checked by fft_tiles_make. */
  const conv_status checked = conv_config_check(config, "fft", 3, INT64_MIN, INT64_MAX, err);
  if (checked != CONV_OK) return checked;
  if (config->values[2] != FFT_PRODUCT_KERNEL && config->values[2] != FFT_PRODUCT_GEMM)
    return conv_error_set(err, CONV_UNSUPPORTED, "fft: product %lld is not 0 or 1",
                          (long long)config->values[2]);
  fft_state *st = calloc(1, sizeof *st);
  if (st == NULL) return conv_error_set(err, CONV_OUT_OF_MEMORY, "fft: out of memory");
  conv_status s;
  CONV_TRY(s, fft_tiles_make(problem, config->values[0], config->values[1], &st->t, err), fail);
  const conv_fft_tiles *t = &st->t;
  st->product = (int)config->values[2];
  size_t work_w = 0, work_x = 0, work_y = 0;
  CONV_TRY(s, fft_plan(&st->filters_fwd, &st->have_filters_fwd, t, (int64_t)t->k * t->c,
                       CUFFT_R2C, &work_w, err), fail);
  CONV_TRY(s, fft_plan(&st->input_fwd, &st->have_input_fwd, t, (int64_t)t->c * t->m, CUFFT_R2C,
                       &work_x, err), fail);
  CONV_TRY(s, fft_plan(&st->output_inv, &st->have_output_inv, t, (int64_t)t->k * t->m,
                       CUFFT_C2R, &work_y, err), fail);
  if (st->product == FFT_PRODUCT_GEMM) {
    /* The transposes' grids have (rows / 32) <= 65535 blocks in y. */
    const int64_t rows_most = (int64_t)(t->c > t->k ? t->c : t->k) * (t->m > t->c ? t->m : t->c);
    if (rows_most > 65535LL * 32 || t->freqs > 65535 * 32) {
      s = conv_error_set(err, CONV_UNSUPPORTED, "fft: spectra too large to transpose");
      goto fail;
    }
    CONV_TRY(s, fft_gemm(problem, env, st, err), fail);
  }
  /* The three transforms run one after another: they share a work area. */
  fft_workspace_layout(st, fft_max(work_w, fft_max(work_x, work_y)));
  out->state = st;
  out->workspace_bytes = st->total;
  out->arith = CONV_ARITH_TRANSFORM;
  /* cuFFT with one plan on one GPU, and our own tile kernels, which use no
   * atomics: the same input gives the same bits. */
  out->deterministic = true;
  return CONV_OK;
fail:
  fft_release(st);
  return s;
}

/* ---------------------------------------------------------------- run */

/* One transform on `stream` with the shared work area. */
static conv_status fft_exec(cufftHandle h, cudaStream_t stream, void *work, void *in, void *outp,
                            bool forward, conv_error *err) {
  conv_status s;
  CONV_TRY(s, fft_check(err, cufftSetStream(h, stream), "cufftSetStream"), out);
  CONV_TRY(s, fft_check(err, cufftSetWorkArea(h, work), "cufftSetWorkArea"), out);
  if (forward)
    s = fft_check(err, cufftExecR2C(h, (cufftReal *)in, (cufftComplex *)outp), "cufftExecR2C");
  else
    s = fft_check(err, cufftExecC2R(h, (cufftComplex *)in, (cufftReal *)outp), "cufftExecC2R");
out:
  return s;
}

/* Y = sum over c of X * W, by our kernel or by transposes around one
 * batched GEMM (fft.c's header). */
static conv_status fft_product(const conv_exec *ex, const fft_state *st, char *ws,
                               cudaStream_t stream, conv_error *err) {
  const conv_fft_tiles *t = &st->t;
  float2 *x = (float2 *)(ws + st->off_x), *w = (float2 *)(ws + st->off_w),
         *y = (float2 *)(ws + st->off_y);
  if (st->product == FFT_PRODUCT_KERNEL)
    return conv_check_cuda(err, conv_fft_multiply(t, x, w, y, stream), "fft: product");
  float2 *xt = (float2 *)(ws + st->off_xt), *wt = (float2 *)(ws + st->off_wt),
         *yt = (float2 *)(ws + st->off_yt);
  const int64_t x_planes = (int64_t)t->c * t->m, w_planes = (int64_t)t->k * t->c,
                y_planes = (int64_t)t->k * t->m;
  conv_status s;
  CONV_TRY(s, conv_check_cuda(err, conv_fft_transpose(x, x_planes, t->freqs, xt, stream),
                              "fft: transposing input spectra"), out);
  CONV_TRY(s, conv_check_cuda(err, conv_fft_transpose(w, w_planes, t->freqs, wt, stream),
                              "fft: transposing filter spectra"), out);
  const cuComplex one = {1.0f, 0.0f}, zero = {0.0f, 0.0f};
  CONV_TRY(s,
           conv_check_cublas(err,
                             cublasLtMatmul(ex->env->cublaslt, st->desc, &one, xt, st->lay.a,
                                            wt, st->lay.b, &zero, yt, st->lay.d, yt, st->lay.d,
                                            &st->algo,
                                            ws + st->off_gemm_ws, st->gemm_ws, stream),
                             "fft: cublasLtMatmul"),
           out);
  s = conv_check_cuda(err, conv_fft_transpose(yt, t->freqs, y_planes, y, stream),
                      "fft: transposing output spectra");
out:
  return s;
}

static conv_status fft_run(const conv_exec *ex, cudaStream_t stream, conv_error *err) {
  const fft_state *st = ex->state;
  if (st == NULL || ex->workspace_bytes < st->total || (st->total > 0 && ex->workspace == NULL))
    return conv_error_set(err, CONV_INVALID_ARGUMENT, "fft: workspace of %zu bytes, needs %zu",
                          ex->workspace_bytes, st != NULL ? st->total : 0);
  char *ws = ex->workspace;
  float *real = (float *)(ws + st->off_real);
  void *fft_work = ws + st->off_fft_ws;
  const conv_fft_tiles *t = &st->t;
  conv_status s;
  CONV_TRY(s, conv_check_cuda(err, conv_fft_place_filters(t, ex->w, real, stream),
                              "fft: placing filters"), out);
  CONV_TRY(s, fft_exec(st->filters_fwd, stream, fft_work, real, ws + st->off_w, true, err), out);
  CONV_TRY(s, conv_check_cuda(err, conv_fft_cut_input(t, ex->x, real, stream),
                              "fft: cutting input tiles"), out);
  CONV_TRY(s, fft_exec(st->input_fwd, stream, fft_work, real, ws + st->off_x, true, err), out);
  CONV_TRY(s, fft_product(ex, st, ws, stream, err), out);
  CONV_TRY(s, fft_exec(st->output_inv, stream, fft_work, ws + st->off_y, real, false, err), out);
  CONV_TRY(s,
           conv_check_cuda(err,
                           conv_fft_crop_output(t, real, 1.0f / ((float)t->fh * (float)t->fw),
                                                ex->bias, ex->y, stream),
                           "fft: crop"),
           out);
out:
  return s;
}

static void fft_describe(const conv_config *config, char *text, size_t size) {
  if (text == NULL || size == 0) return;
  if (config == NULL || config->count != 3) {
    snprintf(text, size, "invalid config");
    return;
  }
  snprintf(text, size, "tile=%lldx%lld product=%s", (long long)config->values[0],
           (long long)config->values[1],
           config->values[2] == FFT_PRODUCT_GEMM ? "gemm" : "kernel");
}

const conv_algorithm conv_algorithm_fft = {
    .id = CONV_ALGO_FFT,
    .version = 1,
    .name = "fft",
    .applicable = fft_applicable,
    .configs = fft_configs,
    .prepare = fft_prepare,
    .run = fft_run,
    .release = fft_release,
    .describe = fft_describe,
};
