/*
 * fft_plans.c -- see fft_plans.h.
 */
#include <stdio.h>

#include "algorithms/common/fft_plans.h"

#define FFT_ALIGN ((size_t)256)

size_t conv_fft_round_up(size_t v) { return (v + FFT_ALIGN - 1) / FFT_ALIGN * FFT_ALIGN; }

conv_status conv_fft_check(conv_error *err, const char *family, cufftResult r, const char *what) {
  if (r == CUFFT_SUCCESS) return CONV_OK;
  if (r == CUFFT_ALLOC_FAILED)
    return conv_error_set(err, CONV_OUT_OF_MEMORY, "%s: %s: cuFFT allocation failed", family,
                          what);
  return conv_error_set(err, CONV_UNSUPPORTED, "%s: %s: cuFFT error %d", family, what, (int)r);
}

/* Whether n's only prime factors are 2, 3, 5 and 7: the sizes cuFFT runs
 * with its fast radix kernels. */
static bool fft_size_good(int64_t n) {
  static const int primes[] = {2, 3, 5, 7};
  for (int i = 0; i < 4; i++)
    while (n % primes[i] == 0) n /= primes[i];
  return n == 1;
}

int conv_fft_axis_sizes(int64_t outputs, int64_t taps, int64_t sizes[8]) {
  int count = 0;
  int64_t whole = outputs + taps - 1;
  while (!fft_size_good(whole)) whole++;
  if (whole <= CONV_FFT_SIZE_MAX) sizes[count++] = whole;
  int64_t pow2 = 16;
  while (pow2 * 2 < whole && pow2 * 2 <= CONV_FFT_SIZE_MAX) pow2 *= 2;
  for (; pow2 >= 16 && count < 8; pow2 /= 2)
    if (pow2 < whole && pow2 - taps + 1 >= taps) sizes[count++] = pow2;
  return count;
}

static bool fft_listed(const int64_t *sizes, int count, int64_t size) {
  for (int i = 0; i < count; i++)
    if (sizes[i] == size) return true;
  return false;
}

int conv_fft_sizes(const conv_problem *problem, const conv_shape *sh, conv_config sizes[16]) {
  int64_t hs[8], ws[8];
  const int nh = conv_fft_axis_sizes(sh->p, problem->r, hs);
  const int nw = conv_fft_axis_sizes(sh->q, problem->s, ws);
  if (nh == 0 || nw == 0) return 0;
  /* The largest sizes first; then square tiles, or along an axis that has
   * no such tile, that axis's largest size. */
  int n = 0;
  sizes[n++] = (conv_config){2, {hs[0], ws[0]}, 0};
  for (int64_t f = CONV_FFT_SIZE_MAX; f >= 16; f /= 2) {
    const bool in_h = fft_listed(hs, nh, f), in_w = fft_listed(ws, nw, f);
    const conv_config c = {2, {in_h ? f : hs[0], in_w ? f : ws[0]}, 0};
    bool seen = !in_h && !in_w;
    for (int i = 0; i < n; i++) seen = seen || conv_config_equal(&sizes[i], &c);
    if (!seen) sizes[n++] = c;
  }
  return n;
}

conv_status conv_fft_tiles_make(const conv_problem *pb, int64_t fh, int64_t fw,
                                const char *family, conv_fft_tiles *t, conv_error *err) {
  conv_shape sh;
  conv_status s = conv_problem_shape(pb, &sh);
  if (s != CONV_OK) return conv_error_set(err, s, "%s: invalid problem", family);
  if (fh < pb->r || fw < pb->s || fh > CONV_FFT_SIZE_MAX || fw > CONV_FFT_SIZE_MAX)
    return conv_error_set(err, CONV_UNSUPPORTED,
                          "%s: transform %lldx%lld must hold the %lldx%lld filter and be at "
                          "most %d",
                          family, (long long)fh, (long long)fw, (long long)pb->r,
                          (long long)pb->s, CONV_FFT_SIZE_MAX);
  const int64_t th = fh - pb->r + 1, tw = fw - pb->s + 1;
  const int64_t tiles_h = (sh.p + th - 1) / th, tiles_w = (sh.q + tw - 1) / tw;
  const int64_t m = pb->n * tiles_h * tiles_w, freqs = fh * (fw / 2 + 1);
  /* The kernels count planes (and a plane's elements) in 32 bits, and the
   * products' grids have up to (m / 4) x (k / 4) blocks. */
  const int64_t c_or_k = pb->c > pb->k ? pb->c : pb->k;
  if (c_or_k * m > INT32_MAX || pb->k * pb->c > INT32_MAX || pb->h * pb->w > INT32_MAX ||
      sh.p * sh.q > INT32_MAX || (m + 3) / 4 > 65535 || (pb->k + 3) / 4 > 65535)
    return conv_error_set(err, CONV_UNSUPPORTED, "%s: %lld tiles of %lldx%lld: too many", family,
                          (long long)m, (long long)fh, (long long)fw);
  *t = (conv_fft_tiles){.n = (int)pb->n, .c = (int)pb->c, .h = (int)pb->h, .w = (int)pb->w,
                        .k = (int)pb->k, .r = (int)pb->r, .s = (int)pb->s, .p = (int)sh.p,
                        .q = (int)sh.q, .pad_h = (int)pb->pad_h, .pad_w = (int)pb->pad_w,
                        .fh = (int)fh, .fw = (int)fw, .th = (int)th, .tw = (int)tw,
                        .tiles_h = (int)tiles_h, .tiles_w = (int)tiles_w, .m = (int)m,
                        .freqs = (int)freqs, .epilogue = (int)pb->epilogue,
                        .dtype = (int)pb->dtype, .nhwc = pb->layout == CONV_LAYOUT_NHWC,
                        .groups = (int)pb->groups, .cg = (int)sh.c_per_group,
                        .kg = (int)sh.k_per_group};
  return CONV_OK;
}

conv_status conv_fft_plan(cufftHandle *h, bool *have, const conv_fft_tiles *t, int64_t batch,
                          cufftType type, size_t *work, const char *family, conv_error *err) {
  conv_status s;
  CONV_TRY(s, conv_fft_check(err, family, cufftCreate(h), "cufftCreate"), out);
  *have = true;
  /* The work area is part of the plan's workspace, set per execute. */
  CONV_TRY(s, conv_fft_check(err, family, cufftSetAutoAllocation(*h, 0), "cufftSetAutoAllocation"),
           out);
  long long n[2] = {t->fh, t->fw};
  long long real_embed[2] = {t->fh, t->fw}, freq_embed[2] = {t->fh, t->fw / 2 + 1};
  const long long real_dist = (long long)t->fh * t->fw, freq_dist = t->freqs;
  const bool forward = type == CUFFT_R2C;
  CONV_TRY(s,
           conv_fft_check(err, family,
                          cufftMakePlanMany64(*h, 2, n, forward ? real_embed : freq_embed, 1,
                                              forward ? real_dist : freq_dist,
                                              forward ? freq_embed : real_embed, 1,
                                              forward ? freq_dist : real_dist, type, batch, work),
                          "cufftMakePlanMany64"),
           out);
out:
  return s;
}

conv_status conv_fft_exec(cufftHandle h, cudaStream_t stream, void *work, void *in, void *outp,
                          bool forward, const char *family, conv_error *err) {
  conv_status s;
  CONV_TRY(s, conv_fft_check(err, family, cufftSetStream(h, stream), "cufftSetStream"), out);
  CONV_TRY(s, conv_fft_check(err, family, cufftSetWorkArea(h, work), "cufftSetWorkArea"), out);
  if (forward)
    s = conv_fft_check(err, family, cufftExecR2C(h, (cufftReal *)in, (cufftComplex *)outp),
                       "cufftExecR2C");
  else
    s = conv_fft_check(err, family, cufftExecC2R(h, (cufftComplex *)in, (cufftReal *)outp),
                       "cufftExecC2R");
out:
  return s;
}

static int64_t fft_plane_count(const conv_fft_tiles *t, conv_fft_planes planes) {
  switch (planes) {
    case CONV_FFT_INPUT_TILES: return (int64_t)t->c * t->m;
    case CONV_FFT_OUTPUT_TILES: return (int64_t)t->k * t->m;
    case CONV_FFT_FILTER_PLANES: return (int64_t)t->k * t->cg;
  }
  return 0;
}

conv_status conv_fft_pass_make(conv_fft_pass *pass, const conv_problem *problem, int64_t fh,
                               int64_t fw, conv_fft_planes first, conv_fft_planes second,
                               conv_fft_planes inverse, const char *family, conv_error *err) {
  const conv_fft_planes planes[3] = {first, second, inverse};
  conv_status s = conv_fft_tiles_make(problem, fh, fw, family, &pass->t, err);
  for (int i = 0; i < 3 && s == CONV_OK; i++) {
    size_t work = 0;
    pass->batch[i] = fft_plane_count(&pass->t, planes[i]);
    s = conv_fft_plan(&pass->plan[i], &pass->have[i], &pass->t, pass->batch[i],
                      i < 2 ? CUFFT_R2C : CUFFT_C2R, &work, family, err);
    if (work > pass->work) pass->work = work;
  }
  return s;
}

void conv_fft_pass_destroy(conv_fft_pass *pass) {
  for (int i = 0; i < 3; i++)
    if (pass->have[i]) cufftDestroy(pass->plan[i]);
}

conv_status conv_fft_pass_exec(const conv_fft_pass *pass, int i, cudaStream_t stream, void *work,
                               void *in, void *out, const char *family, conv_error *err) {
  return conv_fft_exec(pass->plan[i], stream, work, in, out, i < 2, family, err);
}

size_t conv_fft_real_bytes(const conv_fft_pass *pass) {
  int64_t planes = pass->batch[0];
  for (int i = 1; i < 3; i++)
    if (pass->batch[i] > planes) planes = pass->batch[i];
  return (size_t)planes * ((size_t)pass->t.fh * pass->t.fw * sizeof(float));
}

size_t conv_fft_spectra_bytes(const conv_fft_pass *pass, int i) {
  return (size_t)pass->batch[i] * ((size_t)pass->t.freqs * 2 * sizeof(float));
}

int conv_fft_describe_tile(const conv_config *config, int values, char *text, size_t size) {
  if (text == NULL || size == 0) return -1;
  if (config == NULL || config->count != values) {
    snprintf(text, size, "invalid config");
    return -1;
  }
  return snprintf(text, size, "tile=%lldx%lld", (long long)config->values[0],
                  (long long)config->values[1]);
}

conv_status conv_fft_prepared(void *state, size_t workspace_bytes, conv_prepared *out) {
  *out = (conv_prepared){.state = state, .workspace_bytes = workspace_bytes,
                         .arith = CONV_ARITH_TRANSFORM, .deterministic = true};
  return CONV_OK;
}
