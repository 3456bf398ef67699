/* config.c -- candidate configs as text and validation bounds. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"

bool conv_config_equal(const conv_config *a, const conv_config *b) {
  if (a->count != b->count) return false;
  for (int i = 0; i < a->count; i++)
    if (a->values[i] != b->values[i]) return false;
  return true;
}

conv_status conv_config_check(const conv_config *config, const char *family, int count,
                              int64_t lo, int64_t hi, conv_error *err) {
  if (config->count != count)
    return conv_error_set(err, CONV_UNSUPPORTED, "%s: config has %d values, not %d", family,
                          config->count, count);
  for (int i = 0; i < count; i++)
    if (config->values[i] < lo || config->values[i] > hi)
      return conv_error_set(err, CONV_UNSUPPORTED, "%s: config value %lld out of range", family,
                            (long long)config->values[i]);
  return CONV_OK;
}

conv_status conv_config_format(const conv_config *config, char *text, size_t size) {
  if (config == NULL || text == NULL || size == 0 || config->count < 0 ||
      config->count > CONV_CONFIG_MAX_VALUES)
    return CONV_INVALID_ARGUMENT;
  size_t used = 0;
  text[0] = '\0';
  for (int i = 0; i < config->count; i++) {
    int len = snprintf(text + used, size - used, "%s%lld", i ? "," : "",
                       (long long)config->values[i]);
    if (len < 0 || (size_t)len >= size - used) return CONV_INVALID_ARGUMENT;
    used += (size_t)len;
  }
  return CONV_OK;
}

/* Accepts exactly what conv_config_format writes: decimal integers separated
 * by single commas, no spaces, at most CONV_CONFIG_MAX_VALUES of them. */
conv_status conv_config_parse(const char *text, conv_config *config) {
  if (text == NULL || config == NULL) return CONV_INVALID_ARGUMENT;
  conv_config c = {0};
  const char *p = text;
  while (*p != '\0') {
    if (c.count == CONV_CONFIG_MAX_VALUES) return CONV_INVALID_ARGUMENT;
    if (*p != '-' && (*p < '0' || *p > '9')) return CONV_INVALID_ARGUMENT;
    char *end;
    errno = 0;
    long long v = strtoll(p, &end, 10);
    if (errno != 0 || end == p) return CONV_INVALID_ARGUMENT;
    c.values[c.count++] = v;
    if (*end == ',' && end[1] != '\0') p = end + 1;
    else if (*end == '\0') p = end;
    else return CONV_INVALID_ARGUMENT;
  }
  *config = c;
  return CONV_OK;
}

/* Bounds on ||y - ref|| / ||ref|| for inputs uniform in [-1, 1].  Strict
 * fp32 sums land near 1e-7..1e-6, so 1e-5 leaves room for long reductions
 * while still catching TF32 (about 3e-4) sneaking into strict mode;
 * Winograd and FFT transforms lose another decade.  TF32 rounds inputs to
 * 10 mantissa bits: about 3e-4 typical. */
double conv_error_bound(conv_math math, conv_arith arith) {
  if (math == CONV_MATH_TF32) return arith == CONV_ARITH_TRANSFORM ? 5e-3 : 2e-3;
  return arith == CONV_ARITH_TRANSFORM ? 1e-4 : 1e-5;
}

/* A config that may sum in reduced precision (cuDNN's
 * REDUCED_PRECISION_REDUCTION note, which PyTorch takes) must show fp32
 * sums' accuracy on its validation run: within 2.5 roundings of the output,
 * whose own rounding measures 1.8e-4..2.1e-4 (f16) and 1.5e-3..1.7e-3
 * (bf16) on these inputs.  Sums kept in the half type err about
 * sqrt(L / 2) roundings for L terms, so any of more than about a dozen
 * terms fails: an fp16 sum over resnet50's stem (147 terms) would measure
 * about 2.4e-3, where cuDNN's engine 63 measures 2.07e-4, as fp32 sums do.
 * Unlike the other bounds these do not grow with the sum's length. */
#define REDUCED_SUMS_BOUND_F16 5e-4
#define REDUCED_SUMS_BOUND_BF16 4e-3

/* Half types (f16: 11 significant bits, bf16: 8): the inputs are exact
 * in their type and the reference reads the same values, a product of two
 * is exact in fp32, and the sums are fp32 (convtune.h: accumulation is
 * fp32 always), so the error that remains is the one rounding of each
 * output to the type: at most 2^-11 (f16) or 2^-8 (bf16) of the value, a
 * relative L2 of about 2e-4 and 1.5e-3 for outputs spread over a few
 * binades.  The bounds leave about 10x and 7x room for that (an engine
 * that splits a sum and adds the halves in fp32 rounds a little more);
 * Winograd and FFT engines, which keep transformed tiles in the type,
 * 2.5x more, as TF32's.  A wrong result (a tap or channel missed) is off
 * by order one; an fp16 output that overflowed is inf, and fails as a
 * non-finite output whatever the bound. */
double conv_error_bound_half(conv_dtype dtype, conv_arith arith) {
  const bool bf16 = dtype == CONV_DTYPE_BF16;
  if (arith == CONV_ARITH_REDUCED_SUMS)
    return bf16 ? REDUCED_SUMS_BOUND_BF16 : REDUCED_SUMS_BOUND_F16;
  const double base = bf16 ? 1e-2 : 2e-3;
  return arith == CONV_ARITH_TRANSFORM ? 2.5 * base : base;
}

/* Reduction length where the base bounds were set (the suite's longest
 * forward sums, C*R*S = 4608, sit near it), and how far past it they grow. */
#define BOUND_BASE_TERMS 4096.0
#define BOUND_MAX_SCALE 8.0
/* Strict bounds stay below TF32's typical error, so that TF32 sneaking into
 * strict mode is still caught however long the sums. */
#define STRICT_BOUND_MAX 2e-4
/* How far half bounds grow: 8e-3 (f16) and 4e-2 (bf16) at most. */
#define HALF_BOUND_MAX_SCALE 4.0

/* Products summed into one output element by the problem's pass. */
static double reduction_terms(const conv_problem *p) {
  conv_shape sh;
  if (conv_problem_shape(p, &sh) != CONV_OK) return 1.0;
  /* Dynamic: an output sums its k*k taps, a dx element at most k*k taps,
   * a weight gradient the C/G channels of its group. */
  if (p->op == CONV_OP_DYNAMIC)
    return p->direction == CONV_BACKWARD_FILTER ? (double)sh.c_per_group : (double)(p->r * p->s);
  if (p->direction == CONV_BACKWARD_FILTER) return (double)p->n * (double)sh.p * (double)sh.q;
  if (p->direction == CONV_BACKWARD_DATA) return (double)sh.k_per_group * (double)(p->r * p->s);
  return (double)sh.c_per_group * (double)(p->r * p->s);
}

/* Rounding error of a sum of L products grows about as sqrt(L): a
 * backward-filter pass sums over n*p*q, a million terms for one 1024x1024
 * image, where every correct cuDNN engine measured 1.5e-5..1.9e-5 (strict)
 * and 2.6e-3..3.1e-3 (TF32).  Longer sums get the base bound scaled by
 * sqrt(L / 4096), at most 8-fold; a wrong result is off by order one.
 * Half types scale the same way up to HALF_BOUND_MAX_SCALE times their
 * base (direct) bound: their error is the output's rounding, which does
 * not grow with L, and their fp32 sums add about 1e-4 even at a million
 * terms, so longer sums need little more room, and a looser bound would
 * let more wrong results through (at bf16's 4e-2 one channel of 64 left
 * out, 0.125, is still caught; one of 1024, 0.03, only by the base). */
double conv_error_bound_for(const conv_problem *problem, conv_arith arith) {
  double scale = sqrt(reduction_terms(problem) / BOUND_BASE_TERMS);
  if (scale < 1.0) scale = 1.0;
  if (scale > BOUND_MAX_SCALE) scale = BOUND_MAX_SCALE;
  if (problem->dtype != CONV_DTYPE_F32) {
    if (arith == CONV_ARITH_REDUCED_SUMS) return conv_error_bound_half(problem->dtype, arith);
    const double most = HALF_BOUND_MAX_SCALE * conv_error_bound_half(problem->dtype,
                                                                     CONV_ARITH_DIRECT);
    const double half = conv_error_bound_half(problem->dtype, arith) * scale;
    return half < most ? half : most;
  }
  double bound = conv_error_bound(problem->math, arith) * scale;
  if (problem->math == CONV_MATH_STRICT && bound > STRICT_BOUND_MAX) bound = STRICT_BOUND_MAX;
  return bound;
}
