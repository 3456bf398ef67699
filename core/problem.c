/* problem.c -- problem defaults, validation, derived sizes, keys, specs. */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/core.h"

/* cuDNN, cuBLAS and our kernels index tensors with 32-bit element counts in
 * places; larger tensors are rejected rather than silently wrapped. */
#define MAX_TENSOR_ELEMS ((int64_t)INT32_MAX)
/* Any single extent beyond this is a caller bug, not a convolution. */
#define MAX_EXTENT ((int64_t)1 << 30)

static void problem_defaults(conv_problem *problem) {
  memset(problem, 0, sizeof *problem);
  problem->struct_size = sizeof *problem;
  problem->stride_h = problem->stride_w = 1;
  problem->dil_h = problem->dil_w = 1;
  problem->groups = 1;
  problem->dtype = CONV_DTYPE_F32;
  problem->layout = CONV_LAYOUT_NCHW;
  problem->direction = CONV_FORWARD;
  problem->math = CONV_MATH_STRICT;
  problem->epilogue = CONV_EPILOGUE_NONE;
  problem->op = CONV_OP_CONVOLUTION;
}

/* The caller's struct_size is kept even when it is not one we know: the
 * functions that read the problem then say what is wrong with it. */
static void problem_export(conv_problem *theirs, size_t their_size, const conv_problem *ours) {
  conv_struct_export(theirs, their_size, ours, sizeof *ours);
  if (their_size >= sizeof theirs->struct_size) theirs->struct_size = their_size;
}

void conv_problem_init_sized(conv_problem *problem, size_t struct_size) {
  if (problem == NULL) return;
  conv_problem defaults;
  problem_defaults(&defaults);
  problem_export(problem, struct_size, &defaults);
}

/* The filter order a problem names, as DEFAULT wherever it is the layout's
 * own or the same bytes (one channel a group, or one tap), so that those
 * problems share keys and plans.  Values out of range are left for
 * check_supported to name. */
static void canonical_filter_layout(conv_problem *pr) {
  const bool own = (pr->layout == CONV_LAYOUT_NCHW && pr->filter_layout == CONV_FILTER_KCRS) ||
                   (pr->layout == CONV_LAYOUT_NHWC && pr->filter_layout == CONV_FILTER_KRSC);
  const bool same_bytes = (pr->r == 1 && pr->s == 1) ||
                          (pr->groups >= 1 && pr->c == pr->groups);
  if (own || ((pr->filter_layout == CONV_FILTER_KCRS || pr->filter_layout == CONV_FILTER_KRSC) &&
              same_bytes))
    pr->filter_layout = CONV_FILTER_DEFAULT;
}

static bool half_dtype(conv_dtype dtype) {
  return dtype == CONV_DTYPE_F16 || dtype == CONV_DTYPE_BF16;
}

/* The math mode of a half problem as STRICT: math says whether fp32 inputs
 * may be rounded to TF32, and half inputs have no such choice (their
 * products are exact in fp32, which accumulates them), so strict and tf32
 * requests of one half shape are one problem, with one key and one
 * tuning.  Values out of range are left for check_supported to name. */
static void canonical_math(conv_problem *pr) {
  if (half_dtype(pr->dtype) && (pr->math == CONV_MATH_STRICT || pr->math == CONV_MATH_TF32))
    pr->math = CONV_MATH_STRICT;
}

/* One spelling per problem: the forms that mean the same computation
 * share keys and plans. */
static void canonical_problem(conv_problem *pr) {
  canonical_filter_layout(pr);
  canonical_math(pr);
}

size_t conv_dtype_bytes(conv_dtype dtype) {
  return dtype == CONV_DTYPE_F32 ? 4 : half_dtype(dtype) ? 2 : 0;
}

const char *conv_dtype_name(conv_dtype dtype) {
  return dtype == CONV_DTYPE_F32    ? "f32"
         : dtype == CONV_DTYPE_F16  ? "f16"
         : dtype == CONV_DTYPE_BF16 ? "bf16"
                                    : "?";
}

conv_status conv_problem_import(const conv_problem *theirs, conv_problem *ours, conv_error *err) {
  if (theirs == NULL) return conv_error_set(err, CONV_INVALID_ARGUMENT, "problem is NULL");
  problem_defaults(ours);
  conv_status st = conv_struct_import(ours, sizeof *ours, theirs, theirs->struct_size,
                                      CONV_PROBLEM_FIRST_SIZE, "conv_problem", err);
  ours->struct_size = sizeof *ours;
  canonical_problem(ours);
  return st;
}

static conv_status check_extents(const conv_problem *pr, conv_error *err) {
  const struct { const char *name; int64_t value; } dims[] = {
      {"n", pr->n}, {"c", pr->c}, {"h", pr->h}, {"w", pr->w},
      {"k", pr->k}, {"r", pr->r}, {"s", pr->s}};
  for (size_t i = 0; i < sizeof dims / sizeof dims[0]; i++) {
    if (dims[i].value < 1)
      return conv_error_set(err, CONV_BAD_DIMENSION, "%s = %lld: must be at least 1", dims[i].name,
                            (long long)dims[i].value);
    if (dims[i].value > MAX_EXTENT)
      return conv_error_set(err, CONV_BAD_DIMENSION, "%s = %lld: larger than %lld", dims[i].name,
                            (long long)dims[i].value, (long long)MAX_EXTENT);
  }
  return CONV_OK;
}

/* Padding, strides and dilations in range. */
static conv_status check_steps(const conv_problem *pr, conv_error *err) {
  if (pr->pad_h < 0 || pr->pad_w < 0)
    return conv_error_set(err, CONV_BAD_PADDING, "padding %lld,%lld: must not be negative",
                          (long long)pr->pad_h, (long long)pr->pad_w);
  if (pr->pad_h > MAX_EXTENT || pr->pad_w > MAX_EXTENT)
    return conv_error_set(err, CONV_BAD_PADDING, "padding %lld,%lld: larger than %lld",
                          (long long)pr->pad_h, (long long)pr->pad_w, (long long)MAX_EXTENT);
  if (pr->stride_h < 1 || pr->stride_w < 1 || pr->stride_h > MAX_EXTENT ||
      pr->stride_w > MAX_EXTENT)
    return conv_error_set(err, CONV_BAD_STRIDE, "stride %lld,%lld: must be in [1, %lld]",
                          (long long)pr->stride_h, (long long)pr->stride_w, (long long)MAX_EXTENT);
  if (pr->dil_h < 1 || pr->dil_w < 1 || pr->dil_h > MAX_EXTENT || pr->dil_w > MAX_EXTENT)
    return conv_error_set(err, CONV_BAD_STRIDE, "dilation %lld,%lld: must be in [1, %lld]",
                          (long long)pr->dil_h, (long long)pr->dil_w, (long long)MAX_EXTENT);
  return CONV_OK;
}

/* After check_steps (and check_dynamic, whose padding message is the
 * better one for a dynamic problem). */
static conv_status check_span(const conv_problem *pr, conv_error *err) {
  /* All operands are at most 2^30 here, so these sums cannot overflow. */
  int64_t span_h = pr->dil_h * (pr->r - 1) + 1, span_w = pr->dil_w * (pr->s - 1) + 1;
  if (span_h > pr->h + 2 * pr->pad_h || span_w > pr->w + 2 * pr->pad_w)
    return conv_error_set(err, CONV_FILTER_TOO_LARGE,
                          "dilated filter %lldx%lld exceeds padded input %lldx%lld",
                          (long long)span_h, (long long)span_w, (long long)(pr->h + 2 * pr->pad_h),
                          (long long)(pr->w + 2 * pr->pad_w));
  return CONV_OK;
}

static conv_status check_groups(const conv_problem *pr, conv_error *err) {
  if (pr->groups < 1 || pr->c % pr->groups != 0 || pr->k % pr->groups != 0)
    return conv_error_set(err, CONV_BAD_GROUPS, "groups = %lld must be positive and divide c = %lld and k = %lld",
                          (long long)pr->groups, (long long)pr->c, (long long)pr->k);
  return CONV_OK;
}

static conv_status check_supported(const conv_problem *pr, conv_error *err);

/* Only fp32 convolutions: every family written before the dynamic op
 * gates on this (directly or through conv_problem_nchw), so none of them
 * can claim a dynamic problem, whose fields mean something else, nor a
 * half one, whose tensors hold 2-byte elements its kernels would read as
 * floats.  A family gains a dtype by gating on
 * conv_problem_supported_any_dtype and listing configs for it. */
bool conv_problem_supported(const conv_problem *problem) {
  return conv_problem_supported_any_dtype(problem) && problem->dtype == CONV_DTYPE_F32;
}

bool conv_problem_supported_any_dtype(const conv_problem *problem) {
  return problem != NULL && check_supported(problem, NULL) == CONV_OK &&
         problem->op == CONV_OP_CONVOLUTION;
}

bool conv_problem_dynamic(const conv_problem *problem) {
  return problem != NULL && check_supported(problem, NULL) == CONV_OK &&
         problem->op == CONV_OP_DYNAMIC;
}

bool conv_problem_nchw(const conv_problem *problem) {
  return conv_problem_supported(problem) && problem->layout == CONV_LAYOUT_NCHW &&
         problem->direction == CONV_FORWARD;
}

bool conv_problem_krsc_filters(const conv_problem *problem) {
  return problem->layout == CONV_LAYOUT_NCHW && problem->filter_layout == CONV_FILTER_KRSC;
}

static conv_status check_supported(const conv_problem *pr, conv_error *err) {
  if (pr->dtype != CONV_DTYPE_F32 && !half_dtype(pr->dtype))
    return conv_error_set(err, CONV_UNSUPPORTED, "dtype %d is not f32, f16 or bf16",
                          (int)pr->dtype);
  if (pr->layout != CONV_LAYOUT_NCHW && pr->layout != CONV_LAYOUT_NHWC)
    return conv_error_set(err, CONV_UNSUPPORTED, "layout %d is not nchw or nhwc", (int)pr->layout);
  if (pr->direction != CONV_FORWARD && pr->direction != CONV_BACKWARD_DATA &&
      pr->direction != CONV_BACKWARD_FILTER)
    return conv_error_set(err, CONV_UNSUPPORTED,
                          "direction %d is not forward, backward-data or backward-filter",
                          (int)pr->direction);
  if (pr->math != CONV_MATH_STRICT && pr->math != CONV_MATH_TF32)
    return conv_error_set(err, CONV_UNSUPPORTED, "math mode %d is not strict or tf32", (int)pr->math);
  if (pr->epilogue != CONV_EPILOGUE_NONE && pr->epilogue != CONV_EPILOGUE_BIAS &&
      pr->epilogue != CONV_EPILOGUE_BIAS_RELU)
    return conv_error_set(err, CONV_UNSUPPORTED, "epilogue %d is not none, bias or bias_relu",
                          (int)pr->epilogue);
  /* A backward pass has no epilogue to fuse: the bias gradient is a plain
   * sum of dy over n, p and q, and the activation's gradient is the
   * caller's. */
  if (pr->direction != CONV_FORWARD && pr->epilogue != CONV_EPILOGUE_NONE)
    return conv_error_set(err, CONV_UNSUPPORTED, "epilogue %s: backward problems take none",
                          pr->epilogue == CONV_EPILOGUE_BIAS ? "bias" : "bias_relu");
  if (pr->deterministic != 0 && pr->deterministic != 1)
    return conv_error_set(err, CONV_INVALID_ARGUMENT, "deterministic = %d: must be 0 or 1",
                          pr->deterministic);
  if (pr->op != CONV_OP_CONVOLUTION && pr->op != CONV_OP_DYNAMIC)
    return conv_error_set(err, CONV_UNSUPPORTED, "op %d is not convolution or dynamic", (int)pr->op);
  if (pr->filter_layout != CONV_FILTER_DEFAULT && pr->filter_layout != CONV_FILTER_KCRS &&
      pr->filter_layout != CONV_FILTER_KRSC)
    return conv_error_set(err, CONV_UNSUPPORTED, "filter_layout %d is not default, kcrs or krsc",
                          (int)pr->filter_layout);
  /* Past canonical_filter_layout, a non-default order is the other one. */
  if (pr->filter_layout != CONV_FILTER_DEFAULT && pr->layout == CONV_LAYOUT_NHWC)
    return conv_error_set(err, CONV_UNSUPPORTED,
                          "filter_layout kcrs: layout nhwc takes K R S C filters");
  if (pr->filter_layout != CONV_FILTER_DEFAULT &&
      (pr->op != CONV_OP_CONVOLUTION || pr->direction != CONV_FORWARD))
    return conv_error_set(err, CONV_UNSUPPORTED,
                          "filter_layout krsc: this version runs it for forward convolutions only");
  if (pr->op == CONV_OP_DYNAMIC && pr->dtype != CONV_DTYPE_F32)
    return conv_error_set(err, CONV_UNSUPPORTED,
                          "dynamic: dtype %s: this version runs the dynamic op in f32 only",
                          conv_dtype_name(pr->dtype));
  if (pr->op == CONV_OP_DYNAMIC && pr->layout != CONV_LAYOUT_NCHW)
    return conv_error_set(err, CONV_UNSUPPORTED, "dynamic: layout nhwc: this version runs nchw only");
  /* y is a sum of per-pixel products; a bias or ReLU after it is the
   * caller's (no family fuses one). */
  if (pr->op == CONV_OP_DYNAMIC && pr->epilogue != CONV_EPILOGUE_NONE)
    return conv_error_set(err, CONV_UNSUPPORTED, "dynamic: epilogue %s: dynamic problems take none",
                          pr->epilogue == CONV_EPILOGUE_BIAS ? "bias" : "bias_relu");
  return CONV_OK;
}

/* The dynamic op's reading of the fields (convtune.h, conv_op): a square
 * odd window, as many outputs as inputs, groups dividing C, equal strides
 * of 1 or 2, equal dilations, and 'same' padding.  Runs after
 * check_extents and check_steps, so every value is in [0, 2^30]. */
static conv_status check_dynamic(const conv_problem *pr, conv_error *err) {
  if (pr->r != pr->s)
    return conv_error_set(err, CONV_BAD_DIMENSION,
                          "dynamic: r = %lld and s = %lld must be equal (the k x k window)",
                          (long long)pr->r, (long long)pr->s);
  if (pr->r % 2 == 0)
    return conv_error_set(err, CONV_EVEN_FILTER,
                          "dynamic: k = %lld is even: the window must have a centre pixel",
                          (long long)pr->r);
  if (pr->k != pr->c)
    return conv_error_set(err, CONV_BAD_DIMENSION,
                          "dynamic: k = %lld must equal c = %lld (the output has the input's "
                          "channels)",
                          (long long)pr->k, (long long)pr->c);
  if (pr->groups < 1 || pr->c % pr->groups != 0)
    return conv_error_set(err, CONV_BAD_GROUPS, "dynamic: groups = %lld must divide c = %lld",
                          (long long)pr->groups, (long long)pr->c);
  if (pr->dil_h != pr->dil_w)
    return conv_error_set(err, CONV_UNSUPPORTED,
                          "dynamic: dilation %lld,%lld: this version needs equal dilations",
                          (long long)pr->dil_h, (long long)pr->dil_w);
  if (pr->stride_h != pr->stride_w || pr->stride_h > 2)
    return conv_error_set(err, CONV_UNSUPPORTED,
                          "dynamic: stride %lld,%lld: this version runs stride 1,1 and 2,2",
                          (long long)pr->stride_h, (long long)pr->stride_w);
  const int64_t same = (pr->r - 1) / 2 * pr->dil_h; /* <= 2^29 * 2^30: no overflow */
  if (pr->pad_h != same || pr->pad_w != same)
    return conv_error_set(err, CONV_BAD_PADDING,
                          "dynamic: pad %lld,%lld must be (k-1)/2*dil = %lld,%lld ('same' "
                          "padding)",
                          (long long)pr->pad_h, (long long)pr->pad_w, (long long)same,
                          (long long)same);
  return CONV_OK;
}

/* a*b*c*d as a tensor size: fails past 64 bits, 64-bit bytes, or 2^31 elements. */
static conv_status tensor_elems(const char *name, int64_t a, int64_t b, int64_t c, int64_t d,
                                int64_t *out, conv_error *err) {
  int64_t v;
  if (__builtin_mul_overflow(a, b, &v) || __builtin_mul_overflow(v, c, &v) ||
      __builtin_mul_overflow(v, d, &v) || __builtin_mul_overflow(v, (int64_t)sizeof(float), &(int64_t){0}))
    return conv_error_set(err, CONV_SIZE_OVERFLOW, "%s tensor %lldx%lldx%lldx%lld overflows 64 bits",
                          name, (long long)a, (long long)b, (long long)c, (long long)d);
  if (v > MAX_TENSOR_ELEMS)
    return conv_error_set(err, CONV_SIZE_OVERFLOW,
                          "%s tensor has %lld elements; at most 2^31-1 are supported", name, (long long)v);
  *out = v;
  return CONV_OK;
}

/* The dynamic op's weights wt[B][G][k*k][P][Q]: five extents, the last
 * two folded first (P*Q <= 2^60 cannot overflow). */
static conv_status weights_elems(const conv_problem *pr, const conv_shape *s, int64_t *out,
                                 conv_error *err) {
  return tensor_elems("weights", pr->n, pr->groups, pr->r * pr->s, s->p * s->q, out, err);
}

static conv_status shape_checked(const conv_problem *pr, conv_shape *sh, conv_error *err) {
  if (pr == NULL) return conv_error_set(err, CONV_INVALID_ARGUMENT, "problem is NULL");
  conv_status st;
  const bool dynamic = pr->op == CONV_OP_DYNAMIC;
  if ((st = check_supported(pr, err)) != CONV_OK) return st;
  if ((st = check_extents(pr, err)) != CONV_OK) return st;
  if ((st = check_steps(pr, err)) != CONV_OK) return st;
  if ((st = (dynamic ? check_dynamic : check_groups)(pr, err)) != CONV_OK) return st;
  if ((st = check_span(pr, err)) != CONV_OK) return st;
  conv_shape s;
  s.p = (pr->h + 2 * pr->pad_h - pr->dil_h * (pr->r - 1) - 1) / pr->stride_h + 1;
  s.q = (pr->w + 2 * pr->pad_w - pr->dil_w * (pr->s - 1) - 1) / pr->stride_w + 1;
  s.c_per_group = pr->c / pr->groups;
  s.k_per_group = pr->k / pr->groups;
  if ((st = tensor_elems("input", pr->n, pr->c, pr->h, pr->w, &s.x_elems, err)) != CONV_OK) return st;
  if (dynamic)
    st = weights_elems(pr, &s, &s.w_elems, err);
  else
    st = tensor_elems("filter", pr->k, s.c_per_group, pr->r, pr->s, &s.w_elems, err);
  if (st != CONV_OK) return st;
  if ((st = tensor_elems("output", pr->n, pr->k, s.p, s.q, &s.y_elems, err)) != CONV_OK) return st;
  s.out_elems = pr->direction == CONV_BACKWARD_DATA     ? s.x_elems
                : pr->direction == CONV_BACKWARD_FILTER ? s.w_elems
                                                        : s.y_elems;
  if (sh) *sh = s;
  return CONV_OK;
}

conv_status conv_problem_shape(const conv_problem *problem, conv_shape *shape) {
  return shape_checked(problem, shape, NULL);
}

conv_status conv_problem_validate(const conv_problem *problem, char *message, size_t message_size) {
  conv_error err = {CONV_OK, ""};
  conv_problem ours;
  conv_status st = conv_problem_import(problem, &ours, &err);
  if (st == CONV_OK) st = shape_checked(&ours, NULL, &err);
  if (message != NULL && message_size > 0) snprintf(message, message_size, "%s", err.message);
  return st;
}

conv_status conv_problem_output_dims(const conv_problem *problem, int64_t *p, int64_t *q) {
  if (p == NULL || q == NULL) return CONV_INVALID_ARGUMENT;
  conv_problem ours;
  conv_status st = conv_problem_import(problem, &ours, NULL);
  if (st != CONV_OK) return st;
  conv_shape sh;
  st = conv_problem_shape(&ours, &sh);
  if (st != CONV_OK) return st;
  *p = sh.p;
  *q = sh.q;
  return CONV_OK;
}

conv_status conv_problem_set_patches(conv_problem *problem, int64_t batch, int64_t patches) {
  conv_problem ours;
  conv_status st = conv_problem_import(problem, &ours, NULL);
  if (st != CONV_OK) return st;
  if (batch < 1 || patches < 1) return CONV_BAD_DIMENSION;
  if (batch > INT64_MAX / patches) return CONV_SIZE_OVERFLOW;
  problem->n = batch * patches;
  return CONV_OK;
}

static const char *math_name(conv_math m) { return m == CONV_MATH_TF32 ? "tf32" : "strict"; }

static const char *layout_name(conv_layout l) { return l == CONV_LAYOUT_NHWC ? "nhwc" : "nchw"; }

static const char *direction_name(conv_direction d) {
  return d == CONV_BACKWARD_DATA ? "bwd_data" : d == CONV_BACKWARD_FILTER ? "bwd_filter" : "fwd";
}

static const char *epilogue_name(conv_epilogue e) {
  return e == CONV_EPILOGUE_BIAS ? "bias" : e == CONV_EPILOGUE_BIAS_RELU ? "bias_relu" : "none";
}

conv_status conv_problem_key(const conv_problem *problem, char *key, size_t key_size) {
  if (problem == NULL || key == NULL) return CONV_INVALID_ARGUMENT;
  conv_problem ours;
  const conv_problem *pr = &ours;
  conv_status st = conv_problem_import(problem, &ours, NULL);
  if (st == CONV_OK) st = shape_checked(pr, NULL, NULL);
  if (st != CONV_OK) return st;
  /* Formatted aside first: the caller's buffer is written only on success. */
  char text[CONV_PROBLEM_KEY_MAX];
  int len = snprintf(text, sizeof text,
                     "%s%s %s %s %s %s n%lld c%lld h%lld w%lld k%lld r%lld s%lld pad%lld,%lld "
                     "str%lld,%lld dil%lld,%lld g%lld%s%s",
                     pr->op == CONV_OP_DYNAMIC ? "dyn " : "", direction_name(pr->direction),
                     conv_dtype_name(pr->dtype), layout_name(pr->layout), math_name(pr->math),
                     epilogue_name(pr->epilogue), (long long)pr->n, (long long)pr->c,
                     (long long)pr->h, (long long)pr->w, (long long)pr->k, (long long)pr->r,
                     (long long)pr->s, (long long)pr->pad_h, (long long)pr->pad_w,
                     (long long)pr->stride_h, (long long)pr->stride_w, (long long)pr->dil_h,
                     (long long)pr->dil_w, (long long)pr->groups,
                     conv_problem_krsc_filters(pr) ? " krsc" : "", pr->deterministic ? " det" : "");
  /* A valid problem's fields have at most 10 digits (<= 2^30), so its key
   * has at most 234 characters ("bf16" the longest dtype): never truncated
   * here.  " krsc" and " det" are appended, and "dyn " prefixed to dynamic
   * keys only, so that the keys of other problems stay as they were; a
   * half problem's math word is always "strict" (canonical_math). */
  if (len < 0 || (size_t)len >= sizeof text) return CONV_INTERNAL;
  if ((size_t)len >= key_size) return CONV_INVALID_ARGUMENT;
  memcpy(key, text, (size_t)len + 1);
  return CONV_OK;
}

/* ---------------------------------------------------------------- specs */

typedef struct spec_field {
  const char *name;
  size_t offset_a, offset_b; /* offset_b == offset_a when the field sets one value */
} spec_field;

#define ONE(name, f) {name, offsetof(conv_problem, f), offsetof(conv_problem, f)}
#define BOTH(name, f1, f2) {name, offsetof(conv_problem, f1), offsetof(conv_problem, f2)}
static const spec_field spec_fields[] = {
    ONE("n", n), ONE("c", c), ONE("h", h), ONE("w", w), ONE("k", k), ONE("r", r), ONE("s", s),
    BOTH("pad", pad_h, pad_w), ONE("pad_h", pad_h), ONE("pad_w", pad_w),
    BOTH("stride", stride_h, stride_w), ONE("stride_h", stride_h), ONE("stride_w", stride_w),
    BOTH("dil", dil_h, dil_w), ONE("dil_h", dil_h), ONE("dil_w", dil_w),
    ONE("groups", groups), ONE("g", groups),
    ONE("math", math), ONE("epilogue", epilogue), ONE("layout", layout), ONE("dir", direction),
    ONE("det", deterministic), ONE("op", op), ONE("filter", filter_layout),
    ONE("dtype", dtype)};
#undef ONE
#undef BOTH

/* A spec being parsed: the problem so far, and which name set each field,
 * so that a field given twice ("pad=1 pad_h=2", "g=2 groups=2") is an
 * error instead of a silent override. */
typedef struct spec_state {
  conv_problem problem;
  struct {
    size_t offset;
    const char *name;
  } set[2 * sizeof spec_fields / sizeof spec_fields[0]];
  size_t set_count;
} spec_state;

static conv_status mark_set(spec_state *spec, size_t offset, const char *name, conv_error *err) {
  for (size_t i = 0; i < spec->set_count; i++) {
    if (spec->set[i].offset != offset) continue;
    if (strcmp(spec->set[i].name, name) == 0)
      return conv_error_set(err, CONV_INVALID_ARGUMENT, "%s given twice", name);
    return conv_error_set(err, CONV_INVALID_ARGUMENT, "'%s' and '%s' both set the same field",
                          spec->set[i].name, name);
  }
  spec->set[spec->set_count].offset = offset;
  spec->set[spec->set_count].name = name;
  spec->set_count++;
  return CONV_OK;
}

static conv_status parse_int(const char *name, const char *text, int64_t *out, conv_error *err) {
  char *end;
  errno = 0;
  long long v = strtoll(text, &end, 10);
  if (errno != 0 || end == text || *end != '\0')
    return conv_error_set(err, CONV_INVALID_ARGUMENT, "%s=%s: not an integer", name, text);
  *out = v;
  return CONV_OK;
}

/* math=, layout=, filter=, dir=, det=, dtype= and epilogue= values, in any
 * case as names are ("TF32", "NHWC", "Bias", "BF16"). */
static conv_status parse_enum_field(const char *name, const char *value, conv_problem *pr,
                                    conv_error *err) {
  if (strcmp(name, "dtype") == 0) {
    if (strcasecmp(value, "f32") == 0) pr->dtype = CONV_DTYPE_F32;
    else if (strcasecmp(value, "f16") == 0) pr->dtype = CONV_DTYPE_F16;
    else if (strcasecmp(value, "bf16") == 0) pr->dtype = CONV_DTYPE_BF16;
    else return conv_error_set(err, CONV_INVALID_ARGUMENT, "dtype=%s: expected f32, f16 or bf16", value);
    return CONV_OK;
  }
  if (strcmp(name, "filter") == 0) {
    if (strcasecmp(value, "kcrs") == 0) pr->filter_layout = CONV_FILTER_KCRS;
    else if (strcasecmp(value, "krsc") == 0) pr->filter_layout = CONV_FILTER_KRSC;
    else return conv_error_set(err, CONV_INVALID_ARGUMENT, "filter=%s: expected kcrs or krsc", value);
    return CONV_OK;
  }
  if (strcmp(name, "op") == 0) {
    if (strcasecmp(value, "conv") == 0 || strcasecmp(value, "convolution") == 0)
      pr->op = CONV_OP_CONVOLUTION;
    else if (strcasecmp(value, "dynamic") == 0) pr->op = CONV_OP_DYNAMIC;
    else return conv_error_set(err, CONV_INVALID_ARGUMENT, "op=%s: expected conv or dynamic", value);
    return CONV_OK;
  }
  if (strcmp(name, "det") == 0) {
    if (strcmp(value, "0") == 0) pr->deterministic = 0;
    else if (strcmp(value, "1") == 0) pr->deterministic = 1;
    else return conv_error_set(err, CONV_INVALID_ARGUMENT, "det=%s: expected 0 or 1", value);
    return CONV_OK;
  }
  if (strcmp(name, "dir") == 0) {
    if (strcasecmp(value, "fwd") == 0) pr->direction = CONV_FORWARD;
    else if (strcasecmp(value, "bwd_data") == 0) pr->direction = CONV_BACKWARD_DATA;
    else if (strcasecmp(value, "bwd_filter") == 0) pr->direction = CONV_BACKWARD_FILTER;
    else
      return conv_error_set(err, CONV_INVALID_ARGUMENT,
                            "dir=%s: expected fwd, bwd_data or bwd_filter", value);
    return CONV_OK;
  }
  if (strcmp(name, "layout") == 0) {
    if (strcasecmp(value, "nchw") == 0) pr->layout = CONV_LAYOUT_NCHW;
    else if (strcasecmp(value, "nhwc") == 0) pr->layout = CONV_LAYOUT_NHWC;
    else return conv_error_set(err, CONV_INVALID_ARGUMENT, "layout=%s: expected nchw or nhwc", value);
    return CONV_OK;
  }
  if (strcmp(name, "math") == 0) {
    if (strcasecmp(value, "strict") == 0) pr->math = CONV_MATH_STRICT;
    else if (strcasecmp(value, "tf32") == 0) pr->math = CONV_MATH_TF32;
    else return conv_error_set(err, CONV_INVALID_ARGUMENT, "math=%s: expected strict or tf32", value);
    return CONV_OK;
  }
  if (strcasecmp(value, "none") == 0) pr->epilogue = CONV_EPILOGUE_NONE;
  else if (strcasecmp(value, "bias") == 0) pr->epilogue = CONV_EPILOGUE_BIAS;
  else if (strcasecmp(value, "bias_relu") == 0) pr->epilogue = CONV_EPILOGUE_BIAS_RELU;
  else
    return conv_error_set(err, CONV_INVALID_ARGUMENT,
                          "epilogue=%s: expected none, bias or bias_relu", value);
  return CONV_OK;
}

static conv_status parse_field(char *token, spec_state *spec, conv_error *err) {
  char *eq = strchr(token, '=');
  if (eq == NULL || eq == token || eq[1] == '\0')
    return conv_error_set(err, CONV_INVALID_ARGUMENT, "'%s': expected NAME=VALUE", token);
  *eq = '\0';
  const char *value = eq + 1;
  for (char *p = token; *p; p++) *p = (char)tolower((unsigned char)*p);
  const spec_field *field = NULL;
  for (size_t i = 0; i < sizeof spec_fields / sizeof spec_fields[0] && field == NULL; i++)
    if (strcmp(spec_fields[i].name, token) == 0) field = &spec_fields[i];
  if (field == NULL) return conv_error_set(err, CONV_INVALID_ARGUMENT, "unknown field '%s'", token);
  conv_status st = mark_set(spec, field->offset_a, field->name, err);
  if (st == CONV_OK && field->offset_b != field->offset_a)
    st = mark_set(spec, field->offset_b, field->name, err);
  if (st != CONV_OK) return st;
  conv_problem *pr = &spec->problem;
  if (strcmp(field->name, "math") == 0 || strcmp(field->name, "epilogue") == 0 ||
      strcmp(field->name, "layout") == 0 || strcmp(field->name, "dir") == 0 ||
      strcmp(field->name, "det") == 0 || strcmp(field->name, "op") == 0 ||
      strcmp(field->name, "filter") == 0 || strcmp(field->name, "dtype") == 0)
    return parse_enum_field(field->name, value, pr, err);
  int64_t v = 0;
  if ((st = parse_int(field->name, value, &v, err)) != CONV_OK) return st;
  *(int64_t *)((char *)pr + field->offset_a) = v;
  *(int64_t *)((char *)pr + field->offset_b) = v;
  return CONV_OK;
}

static bool spec_has(const spec_state *spec, size_t offset) {
  for (size_t i = 0; i < spec->set_count; i++)
    if (spec->set[i].offset == offset) return true;
  return false;
}

/* A dynamic spec may leave out what the op determines (k = c, s = r, pad =
 * (r-1)/2 * dil); given ones are kept, and validation judges them. */
static void spec_dynamic_defaults(spec_state *spec) {
  conv_problem *pr = &spec->problem;
  if (pr->op != CONV_OP_DYNAMIC) return;
  if (!spec_has(spec, offsetof(conv_problem, k))) pr->k = pr->c;
  if (!spec_has(spec, offsetof(conv_problem, s))) pr->s = pr->r;
  /* Out-of-range r or dil are left for validation to name; no overflow. */
  if (pr->r < 1 || pr->r > MAX_EXTENT || pr->s < 1 || pr->s > MAX_EXTENT || pr->dil_h < 1 ||
      pr->dil_h > MAX_EXTENT ||
      pr->dil_w < 1 || pr->dil_w > MAX_EXTENT)
    return;
  if (!spec_has(spec, offsetof(conv_problem, pad_h))) pr->pad_h = (pr->r - 1) / 2 * pr->dil_h;
  if (!spec_has(spec, offsetof(conv_problem, pad_w))) pr->pad_w = (pr->s - 1) / 2 * pr->dil_w;
}

/* Every size a spec must give (after spec_dynamic_defaults, which fills
 * what the dynamic op determines), named at once: "w = 0" for a spec that
 * also lacks k, r and s would send the user back three more times. */
static conv_status spec_complete(const spec_state *spec, conv_error *err) {
  static const struct {
    size_t offset;
    const char *name;
  } sizes[] = {{offsetof(conv_problem, n), "n"}, {offsetof(conv_problem, c), "c"},
               {offsetof(conv_problem, h), "h"}, {offsetof(conv_problem, w), "w"},
               {offsetof(conv_problem, k), "k"}, {offsetof(conv_problem, r), "r"},
               {offsetof(conv_problem, s), "s"}};
  const bool dynamic = spec->problem.op == CONV_OP_DYNAMIC;
  char missing[64] = "";
  size_t used = 0;
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
    const bool derived = dynamic && (sizes[i].offset == offsetof(conv_problem, k) ||
                                     sizes[i].offset == offsetof(conv_problem, s));
    if (derived || spec_has(spec, sizes[i].offset)) continue;
    used += (size_t)snprintf(missing + used, sizeof missing - used, "%s%s", used ? " " : "",
                             sizes[i].name);
  }
  if (used == 0) return CONV_OK;
  return conv_error_set(err, CONV_BAD_DIMENSION,
                        "missing %s (a spec names n c h w k r s, e.g. \"n=32 c=64 h=56 w=56 "
                        "k=64 r=3 s=3 pad=1\")",
                        missing);
}

conv_status conv_problem_parse_sized(const char *spec, conv_problem *problem, size_t struct_size,
                                     char *message, size_t message_size) {
  conv_error err = {CONV_OK, ""};
  conv_status st = CONV_OK;
  char buf[1024];
  if (spec == NULL || problem == NULL) {
    st = conv_error_set(&err, CONV_INVALID_ARGUMENT, "spec or problem is NULL");
  } else if (struct_size < CONV_PROBLEM_FIRST_SIZE) {
    st = conv_error_set(&err, CONV_INVALID_ARGUMENT,
                        "struct_size %zu is smaller than any conv_problem (call the "
                        "conv_problem_parse macro, which passes it)",
                        struct_size);
  } else if (strlen(spec) >= sizeof buf) {
    st = conv_error_set(&err, CONV_INVALID_ARGUMENT, "spec longer than %zu characters", sizeof buf - 1);
  } else {
    spec_state parsed;
    memset(&parsed, 0, sizeof parsed);
    conv_problem_init(&parsed.problem);
    memcpy(buf, spec, strlen(spec) + 1);
    char *save = NULL;
    for (char *tok = strtok_r(buf, " \t,", &save); tok && st == CONV_OK;
         tok = strtok_r(NULL, " \t,", &save))
      st = parse_field(tok, &parsed, &err);
    if (st == CONV_OK) st = spec_complete(&parsed, &err);
    if (st == CONV_OK) spec_dynamic_defaults(&parsed);
    if (st == CONV_OK) canonical_problem(&parsed.problem);
    if (st == CONV_OK) st = shape_checked(&parsed.problem, NULL, &err);
    if (st == CONV_OK) problem_export(problem, struct_size, &parsed.problem);
  }
  if (message != NULL && message_size > 0) snprintf(message, message_size, "%s", err.message);
  return st;
}

/* ---------------------------------------------------------------- keys */

conv_status conv_problem_from_key_sized(const char *key, conv_problem *problem,
                                        size_t struct_size) {
  if (key == NULL || problem == NULL || struct_size < CONV_PROBLEM_FIRST_SIZE)
    return CONV_INVALID_ARGUMENT;
  const bool dynamic = strncmp(key, "dyn ", 4) == 0;
  const char *body = dynamic ? key + 4 : key;
  char dir[16], dtype[8], layout[8], math[8], epilogue[16];
  long long v[14];
  int used = -1;
  if (sscanf(body,
             "%15s %7s %7s %7s %15s n%lld c%lld h%lld w%lld k%lld r%lld s%lld pad%lld,%lld "
             "str%lld,%lld dil%lld,%lld g%lld%n",
             dir, dtype, layout, math, epilogue, &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &v[6],
             &v[7], &v[8], &v[9], &v[10], &v[11], &v[12], &v[13], &used) != 19 ||
      used < 0)
    return CONV_INVALID_ARGUMENT;
  const char *rest = body + used;
  const bool krsc = strncmp(rest, " krsc", 5) == 0;
  if (krsc) rest += 5;
  const bool det = strcmp(rest, " det") == 0;
  if (!det && rest[0] != '\0') return CONV_INVALID_ARGUMENT;
  /* The key's words are the spec's values: parse them as a spec, which
   * validates them, then insist on the same key back (a key this version
   * would not write is not one of its problems). */
  char spec[512];
  snprintf(spec, sizeof spec,
           "op=%s dir=%s dtype=%s layout=%s math=%s epilogue=%s n=%lld c=%lld h=%lld w=%lld "
           "k=%lld r=%lld s=%lld pad_h=%lld pad_w=%lld stride_h=%lld stride_w=%lld dil_h=%lld "
           "dil_w=%lld groups=%lld det=%d%s",
           dynamic ? "dynamic" : "conv", dir, dtype, layout, math, epilogue, v[0], v[1], v[2], v[3], v[4],
           v[5], v[6], v[7], v[8], v[9], v[10], v[11], v[12], v[13], det ? 1 : 0,
           krsc ? " filter=krsc" : "");
  conv_problem parsed;
  char again[CONV_PROBLEM_KEY_MAX];
  if (conv_problem_parse(spec, &parsed, NULL, 0) != CONV_OK ||
      conv_problem_key(&parsed, again, sizeof again) != CONV_OK || strcmp(again, key) != 0)
    return CONV_INVALID_ARGUMENT;
  problem_export(problem, struct_size, &parsed);
  return CONV_OK;
}
