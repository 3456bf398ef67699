/*
 * fft.c -- the `fft` candidate: convolution by 2-D real FFTs (cuFFT) of
 * input tiles and filters, the frequency-domain products summed over input
 * channels, an inverse FFT, and a crop with the epilogue.  Stride 1,
 * dilation 1, any groups (each output channel summing its own group's
 * input channels; one group only for the GEMM product).  Backward-data
 * runs as its transposed view (conv_direct_backward_data_view): dy
 * convolved with the mirrored filter, its channels swapped, padded by
 * r - 1 - pad, which the filter placement reads from w as it is (no
 * copy); backward-filter is `fft_filter`.
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
 * fp32 in both modes.  fp16 and bf16 problems run the same
 * fp32 transforms and product: the cuts read x and w exactly as fp32, and
 * the crop applies the scale and the epilogue in fp32 and rounds once, so
 * their error is the output's rounding (the type's bound, config.c);
 * their math is strict, so the GEMM form is plain fp32.
 *
 * Config values: {fh, fw, product}, fh x fw the transform size.  configs()
 * offers the smallest cuFFT-friendly size that holds the whole padded
 * image, and power-of-two tiles from 16 up that leave at least half of
 * each tile as outputs.
 *
 * Tests: tests/families/test_fft.c.
 */
#include <cufft.h>
#include <stdio.h>
#include <stdlib.h>

#include "algorithms/common/views.h"
#include "algorithms/common/view_family.h"
#include "algorithms/common/fft_plans.h"
#include "algorithms/common/cublaslt.h"

enum { FFT_PRODUCT_KERNEL = 0, FFT_PRODUCT_GEMM = 1 };

/* The pass's batches (conv_fft_pass), in the order it runs them. */
enum { FFT_FILTERS, FFT_INPUT, FFT_OUTPUT };

typedef struct fft_state {
  conv_fft_pass pass;
  int product;
  bool transposed_filter; /* backward-data: the filter read as its transposed view's */
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
  conv_fft_pass_destroy(&st->pass);
  conv_cublaslt_layouts_destroy(&st->lay);
  if (st->desc) cublasLtMatmulDescDestroy(st->desc);
  free(st);
}

/* Any of the three types: the cuts read them as fp32 and the crop rounds
 * to them (fft_tiles.h).  NCHW; and channels-last for the half types, the
 * cut and crop reading and writing NHWC and the filters K R S C in place
 * (fp32 NHWC problems too in a version that bumps the family's: that adds
 * configs to tunings made without them). */
static bool fft_forward_supported(const conv_problem *pb) {
  const bool layout = pb->layout == CONV_LAYOUT_NCHW ||
                      (pb->layout == CONV_LAYOUT_NHWC && pb->dtype != CONV_DTYPE_F32);
  return conv_problem_supported_any_dtype(pb) && layout && pb->direction == CONV_FORWARD &&
         pb->stride_h == 1 && pb->stride_w == 1 && pb->dil_h == 1 && pb->dil_w == 1 &&
         pb->r * pb->s > 1;
}

/* The forward convolution the transforms compute for `pb`: the problem
 * itself, or a backward-data pass's transposed view (dy convolved with the
 * mirrored filter, its channels swapped; conv_direct_backward_data_view).
 * False where that convolution is not one this family runs. */
static bool fft_view(const conv_problem *pb, conv_problem *view) {
  if (pb == NULL) return false;
  if (pb->direction == CONV_BACKWARD_DATA) {
    if (!conv_direct_backward_data_view(pb, view)) return false;
  } else {
    *view = *pb;
  }
  return fft_forward_supported(view);
}

static bool fft_applicable(const conv_problem *problem, const conv_env *env) {
  conv_problem view;
  return env != NULL && env->cublaslt != NULL && fft_view(problem, &view);
}

static conv_status fft_configs(const conv_problem *problem, conv_env *env, conv_config *out,
                               int max, int *count, conv_error *err) {
  (void)env;
  *count = 0;
  conv_problem view;
  if (!fft_view(problem, &view) || max < 1) return CONV_OK;
  problem = &view;
  conv_shape sh;
  conv_status s = conv_problem_shape(problem, &sh);
  if (s != CONV_OK) return conv_error_set(err, s, "fft: invalid problem");
  conv_config sizes[16];
  const int n_sizes = conv_fft_sizes(problem, &sh, sizes);
  /* Each size with both products, the one likelier to win first (the GEMM
   * once a frequency's product is a real matrix product); with groups,
   * our kernel only. */
  const bool gemm_first = problem->c * problem->k >= 256;
  const int products = problem->groups == 1 ? 2 : 1;
  int n = 0;
  for (int i = 0; i < n_sizes; i++)
    for (int j = 0; j < products && n < max; j++) {
      const int product =
          products == 2 && (j == 0) == gemm_first ? FFT_PRODUCT_GEMM : FFT_PRODUCT_KERNEL;
      out[n++] = (conv_config){3, {sizes[i].values[0], sizes[i].values[1], product}, 0};
    }
  *count = n;
  return CONV_OK;
}

/* ---------------------------------------------------------------- prepare */

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
  const conv_fft_tiles *t = &st->pass.t;
  conv_status s;
  cublasLtMatmulPreference_t pref = NULL;
  /* The frequencies are complex fp32 whatever the problem's dtype. */
  CONV_TRY(s, conv_cublaslt_desc_create(CONV_DTYPE_F32, pb->math, CUDA_C_32F, &st->desc, NULL, err),
           out);
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
  CONV_TRY(s,
           conv_cublaslt_pref_fill(pref, CONV_DTYPE_F32, pb->math, CONV_CUBLASLT_WS_MAX, &align,
                                   err),
           out);
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
static void fft_workspace_layout(fft_state *st) {
  const conv_fft_pass *pass = &st->pass;
  const size_t x = conv_fft_spectra_bytes(pass, FFT_INPUT),
               w = conv_fft_spectra_bytes(pass, FFT_FILTERS),
               y = conv_fft_spectra_bytes(pass, FFT_OUTPUT);
  const bool gemm = st->product == FFT_PRODUCT_GEMM;
  size_t at = 0;
  st->off_real = at, at += conv_fft_round_up(conv_fft_real_bytes(pass));
  st->off_x = at, at += conv_fft_round_up(x);
  st->off_w = at, at += conv_fft_round_up(w);
  st->off_y = at, at += conv_fft_round_up(y);
  st->off_xt = at, at += gemm ? conv_fft_round_up(x) : 0;
  st->off_wt = at, at += gemm ? conv_fft_round_up(w) : 0;
  st->off_yt = at, at += gemm ? conv_fft_round_up(y) : 0;
  st->off_fft_ws = at, at += conv_fft_round_up(pass->work);
  st->off_gemm_ws = at, at += conv_fft_round_up(st->gemm_ws);
  st->total = at;
}

static conv_status fft_prepare(const conv_problem *problem, conv_env *env,
                               const conv_config *config, conv_prepared *out, conv_error *err) {
  conv_problem view;
  conv_status s = conv_view_prepare_check(
      "fft", fft_view, problem, env, config, out, &view, err,
      "only NCHW forward (fp32, fp16 or bf16), stride 1, dilation 1, a filter larger than 1x1, "
      "or backward-data whose transposed convolution is such a one");
  if (s != CONV_OK) return s;
  const bool transposed = problem->direction == CONV_BACKWARD_DATA;
  problem = &view;
  /* Sizes are checked by fft_tiles_make. */
  s = conv_config_check(config, "fft", 3, INT64_MIN, INT64_MAX, err);
  if (s != CONV_OK) return s;
  if (config->values[2] != FFT_PRODUCT_KERNEL && config->values[2] != FFT_PRODUCT_GEMM)
    return conv_error_set(err, CONV_UNSUPPORTED, "fft: product %lld is not 0 or 1",
                          (long long)config->values[2]);
  if (config->values[2] == FFT_PRODUCT_GEMM && problem->groups != 1)
    return conv_error_set(err, CONV_UNSUPPORTED, "fft: the GEMM product takes one group, not %lld",
                          (long long)problem->groups);
  fft_state *st = calloc(1, sizeof *st);
  if (st == NULL) return conv_error_set(err, CONV_OUT_OF_MEMORY, "fft: out of memory");
  CONV_TRY(s,
           conv_fft_pass_make(&st->pass, problem, config->values[0], config->values[1],
                              CONV_FFT_FILTER_PLANES, CONV_FFT_INPUT_TILES, CONV_FFT_OUTPUT_TILES,
                              "fft", err),
           fail);
  const conv_fft_tiles *t = &st->pass.t;
  st->product = (int)config->values[2];
  st->transposed_filter = transposed;
  if (st->product == FFT_PRODUCT_GEMM) {
    /* The transposes' grids have (rows / 32) <= 65535 blocks in y. */
    const int64_t rows_most = (int64_t)(t->c > t->k ? t->c : t->k) * (t->m > t->c ? t->m : t->c);
    if (rows_most > 65535LL * 32 || t->freqs > 65535 * 32) {
      s = conv_error_set(err, CONV_UNSUPPORTED, "fft: spectra too large to transpose");
      goto fail;
    }
    CONV_TRY(s, fft_gemm(problem, env, st, err), fail);
  }
  fft_workspace_layout(st);
  return conv_fft_prepared(st, st->total, out);
fail:
  fft_release(st);
  return s;
}

/* ---------------------------------------------------------------- run */

/* Y = sum over c of X * W, by our kernel or by transposes around one
 * batched GEMM (fft.c's header). */
static conv_status fft_product(const conv_exec *ex, const fft_state *st, char *ws,
                               cudaStream_t stream, conv_error *err) {
  const conv_fft_tiles *t = &st->pass.t;
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
           conv_cublaslt_matmul(ex->env->cublaslt, st->desc, &st->lay, &st->algo, &one, xt, wt,
                                &zero, yt, ws + st->off_gemm_ws, st->gemm_ws, stream, "fft", err),
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
  const conv_fft_pass *pass = &st->pass;
  const conv_fft_tiles *t = &pass->t;
  /* Backward-data: the transposed convolution reads dy (exec's y) and
   * writes dx (exec's x).  Both of the problem's type (t->dtype). */
  const bool bwd = st->transposed_filter;
  const void *in = bwd ? (const void *)ex->y : (const void *)ex->x;
  const float *bias = bwd ? NULL : ex->bias;
  void *result = bwd ? (void *)ex->x : (void *)ex->y;
  conv_status s;
  CONV_TRY(s, conv_check_cuda(err, conv_fft_place_filters(t, ex->w, bwd, real, stream),
                              "fft: placing filters"), out);
  CONV_TRY(s,
           conv_fft_pass_exec(pass, FFT_FILTERS, stream, fft_work, real, ws + st->off_w, "fft",
                              err),
           out);
  CONV_TRY(s, conv_check_cuda(err, conv_fft_cut_input(t, in, real, stream),
                              "fft: cutting input tiles"), out);
  CONV_TRY(s,
           conv_fft_pass_exec(pass, FFT_INPUT, stream, fft_work, real, ws + st->off_x, "fft", err),
           out);
  CONV_TRY(s, fft_product(ex, st, ws, stream, err), out);
  CONV_TRY(s,
           conv_fft_pass_exec(pass, FFT_OUTPUT, stream, fft_work, ws + st->off_y, real, "fft",
                              err),
           out);
  CONV_TRY(s,
           conv_check_cuda(err,
                           conv_fft_crop_output(t, real, 1.0f / ((float)t->fh * (float)t->fw),
                                                bias, result, stream),
                           "fft: crop"),
           out);
out:
  return s;
}

static void fft_describe(const conv_config *config, char *text, size_t size) {
  const int len = conv_fft_describe_tile(config, 3, text, size);
  if (len >= 0 && (size_t)len < size)
    snprintf(text + len, size - (size_t)len, " product=%s",
             config->values[2] == FFT_PRODUCT_GEMM ? "gemm" : "kernel");
}

const conv_algorithm conv_algorithm_fft = {
    .id = CONV_ALGO_FFT,
    /* 2: backward-data, groups.  fp16 and bf16 came without a bump: fp32
     * problems get the configs and kernels they had, and a bump would send
     * every shipped fp32 tuning back to be tuned for nothing (as cudnn's). */
    .version = 2,
    .name = "fft",
    CONV_ALGORITHM_CALLBACKS(fft),
    .libraries = CONV_LIBRARY_CUFFT | CONV_LIBRARY_CUBLASLT /* its product is a cuBLASLt matmul */,
};
