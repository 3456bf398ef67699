/*
 * fft_filter.c -- the `fft_filter` candidate: backward-filter as a
 * correlation by 2-D real FFTs (cuFFT), for large filters on few channels
 * (per group: depthwise too), where cuDNN's engines and our direct kernels
 * sum r x s taps over every pixel.  Stride 1, dilation 1, NCHW.
 *
 * Data flow, per execute (fft_tiles.h for the tiling):
 *
 *   x  --cut-------> real [c][m][fh][fw] --R2C--> X  [c][m][f]
 *   dy --cut_grad--> real [k][m][fh][fw] --R2C--> DY [k][m][f]   m = (n, tile)
 *   DW [k][cg][f] = sum over m of conj(DY[k][m][f]) * X[g*cg + ci][m][f]
 *   DW --C2R--> real [k][cg][fh][fw] --crop lags 0..r-1, 0..s-1, scale--> dw
 *
 * The product is our kernel (4 x 4 filter planes a thread, the tiles
 * summed in order); each 4 x 4 block of planes reads the spectra once, so
 * past FFT_FILTER_MAX_PLANES filter planes (k x c/groups), a GEMM-shaped product
 * would be needed, which this family does not have.
 *
 * Error: as the forward `fft` (fft.c): about eps * log2(fh * fw) per
 * transform, inside CONV_ARITH_TRANSFORM's bound; fp32 in both math
 * modes.  fp16 and bf16: x and dy read exactly as fp32, every transform
 * and sum in fp32, dw rounded once to the type.  Deterministic: one cuFFT
 * plan per transform, sums in a fixed order, no atomics.
 *
 * Config values: {fh, fw}, the transform size (conv_fft_sizes: the whole
 * padded image, then power-of-two tiles).
 *
 * Tests: tests/families/test_fft_filter.c.
 */
#include <stdlib.h>

#include "algorithms/common/fft_plans.h"

#define FFT_FILTER_MAX_PLANES 4096

/* The pass's batches (conv_fft_pass), in the order it runs them. */
enum { FFT_FILTER_INPUT, FFT_FILTER_GRAD, FFT_FILTER_FILTER };

typedef struct fft_filter_state {
  conv_fft_pass pass;
  /* Workspace: byte offsets of each part, and the total. */
  size_t off_real, off_x, off_dy, off_dw, off_fft_ws, total;
} fft_filter_state;

static void fft_filter_release(void *state) {
  fft_filter_state *st = state;
  if (st == NULL) return;
  conv_fft_pass_destroy(&st->pass);
  free(st);
}

static bool fft_filter_problem_supported(const conv_problem *pb) {
  return conv_problem_supported_any_dtype(pb) && pb->direction == CONV_BACKWARD_FILTER &&
         pb->layout == CONV_LAYOUT_NCHW && pb->stride_h == 1 && pb->stride_w == 1 &&
         pb->dil_h == 1 && pb->dil_w == 1 && pb->r * pb->s > 1 &&
         pb->k * (pb->c / pb->groups) <= FFT_FILTER_MAX_PLANES;
}

static bool fft_filter_applicable(const conv_problem *problem, const conv_env *env) {
  return problem != NULL && env != NULL && fft_filter_problem_supported(problem);
}

static conv_status fft_filter_configs(const conv_problem *problem, conv_env *env, conv_config *out,
                                int max, int *count, conv_error *err) {
  if (problem == NULL || out == NULL || count == NULL || max < 0)
    return conv_error_set(err, CONV_INVALID_ARGUMENT, "fft_filter: bad configs() arguments");
  *count = 0;
  if (!fft_filter_applicable(problem, env)) return CONV_OK;
  conv_shape sh;
  const conv_status s = conv_problem_shape(problem, &sh);
  if (s != CONV_OK) return conv_error_set(err, s, "fft_filter: invalid problem");
  conv_config sizes[16];
  const int n = conv_fft_sizes(problem, &sh, sizes);
  for (int i = 0; i < n && i < max; i++) out[(*count)++] = sizes[i];
  return CONV_OK;
}

/* The real buffer holds the input tiles, then the gradient tiles, then
 * the filter planes, one at a time. */
static void fft_filter_workspace_layout(fft_filter_state *st) {
  const conv_fft_pass *pass = &st->pass;
  size_t at = 0;
  st->off_real = at, at += conv_fft_round_up(conv_fft_real_bytes(pass));
  st->off_x = at, at += conv_fft_round_up(conv_fft_spectra_bytes(pass, FFT_FILTER_INPUT));
  st->off_dy = at, at += conv_fft_round_up(conv_fft_spectra_bytes(pass, FFT_FILTER_GRAD));
  st->off_dw = at, at += conv_fft_round_up(conv_fft_spectra_bytes(pass, FFT_FILTER_FILTER));
  st->off_fft_ws = at, at += conv_fft_round_up(pass->work);
  st->total = at;
}

static conv_status fft_filter_prepare(const conv_problem *problem, conv_env *env,
                                const conv_config *config, conv_prepared *out, conv_error *err) {
  if (problem == NULL || env == NULL || config == NULL || out == NULL)
    return conv_error_set(err, CONV_INVALID_ARGUMENT, "fft_filter: NULL argument");
  if (!fft_filter_problem_supported(problem))
    return conv_error_set(err, CONV_UNSUPPORTED,
                          "fft_filter: only NCHW backward-filter (fp32, fp16 or bf16), stride 1, "
                          "dilation 1, a filter of more than one tap and at most %d filter planes",
                          FFT_FILTER_MAX_PLANES);
  /* Sizes are checked by conv_fft_tiles_make. */
  const conv_status checked = conv_config_check(config, "fft_filter", 2, INT64_MIN, INT64_MAX, err);
  if (checked != CONV_OK) return checked;
  fft_filter_state *st = calloc(1, sizeof *st);
  if (st == NULL) return conv_error_set(err, CONV_OUT_OF_MEMORY, "fft_filter: out of memory");
  const conv_status s =
      conv_fft_pass_make(&st->pass, problem, config->values[0], config->values[1],
                         CONV_FFT_INPUT_TILES, CONV_FFT_OUTPUT_TILES, CONV_FFT_FILTER_PLANES,
                         "fft_filter", err);
  if (s != CONV_OK) {
    fft_filter_release(st);
    return s;
  }
  fft_filter_workspace_layout(st);
  return conv_fft_prepared(st, st->total, out);
}

static conv_status fft_filter_run(const conv_exec *ex, cudaStream_t stream, conv_error *err) {
  const fft_filter_state *st = ex->state;
  if (st == NULL || ex->workspace_bytes < st->total || ex->workspace == NULL)
    return conv_error_set(err, CONV_INVALID_ARGUMENT,
                          "fft_filter: workspace of %zu bytes, needs %zu", ex->workspace_bytes,
                          st != NULL ? st->total : 0);
  char *ws = ex->workspace;
  float *real = (float *)(ws + st->off_real);
  float2 *x = (float2 *)(ws + st->off_x), *dy = (float2 *)(ws + st->off_dy),
         *dw = (float2 *)(ws + st->off_dw);
  void *work = ws + st->off_fft_ws;
  const conv_fft_pass *pass = &st->pass;
  const conv_fft_tiles *t = &pass->t;
  const char *name = "fft_filter";
  /* Backward-filter: x and dy (exec's y) in, dw (exec's w) out. */
  conv_status s;
  CONV_TRY(s, conv_check_cuda(err, conv_fft_cut_input(t, ex->x, real, stream),
                              "fft_filter: cutting input tiles"), out);
  CONV_TRY(s, conv_fft_pass_exec(pass, FFT_FILTER_INPUT, stream, work, real, x, name, err), out);
  CONV_TRY(s, conv_check_cuda(err, conv_fft_cut_grad(t, ex->y, real, stream),
                              "fft_filter: cutting gradient tiles"), out);
  CONV_TRY(s, conv_fft_pass_exec(pass, FFT_FILTER_GRAD, stream, work, real, dy, name, err), out);
  CONV_TRY(s, conv_check_cuda(err, conv_fft_correlate(t, dy, x, dw, stream),
                              "fft_filter: product"), out);
  CONV_TRY(s, conv_fft_pass_exec(pass, FFT_FILTER_FILTER, stream, work, dw, real, name, err), out);
  s = conv_check_cuda(err,
                      conv_fft_crop_filter(t, real, 1.0f / ((float)t->fh * (float)t->fw),
                                           (void *)ex->w, stream),
                      "fft_filter: crop");
out:
  return s;
}

static void fft_filter_describe(const conv_config *config, char *text, size_t size) {
  (void)conv_fft_describe_tile(config, 2, text, size);
}

const conv_algorithm conv_algorithm_fft_filter = {
    .id = CONV_ALGO_FFT_FILTER,
    .version = 2, /* 2: groups; fp16 and bf16 without a bump, as fft's */
    .name = "fft_filter",
    CONV_ALGORITHM_CALLBACKS(fft_filter),
    .libraries = CONV_LIBRARY_CUFFT,
};
