/*
 * core.h -- the ground floor: what every part of the library shares and
 * none of it depends on the GPU for: errors, the log, configs and their
 * text, validation bounds, versioned structs and problem helpers.  No CUDA,
 * cuDNN or libuv header: cache/ builds on this alone.  Not installed.
 */
#ifndef CONVTUNE_CORE_H
#define CONVTUNE_CORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "convtune.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------- errors */

/* A status with its detailed message.  Every internal function that can fail
 * takes a conv_error * and fills it through conv_error_set. */
typedef struct conv_error {
  conv_status status;
  char message[512];
} conv_error;

/* Records status and a printf-style message; returns `status` so that callers
 * can write `return conv_error_set(err, CONV_BAD_DIMENSION, "...")`.
 * err may be NULL. */
conv_status conv_error_set(conv_error *err, conv_status status, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/* Evaluates a checked call; on failure jumps to `label` with `st` set. */
#define CONV_TRY(st, expr, label)                                              \
  do {                                                                         \
    (st) = (expr);                                                             \
    if ((st) != CONV_OK) goto label;                                           \
  } while (0)

/* ---------------------------------------------------------------- log */

/* Where a context's messages go (conv_context_options.log): nowhere without a
 * callback.  Everything the library says passes through conv_log; no part of
 * it writes to stderr or stdout. */
typedef struct conv_logger {
  conv_log_fn fn;        /* NULL: messages are dropped          */
  void *user;
  conv_log_level level;  /* the most detailed level passed to fn */
} conv_logger;

/* The logger the options ask for: their callback, at log_level (0: INFO),
 * or at CONV_LOG_DEBUG when `verbose` is set. */
conv_logger conv_logger_from_options(const conv_context_options *options);

/* Whether a message at `level` would reach a callback (to skip formatting). */
bool conv_log_enabled(const conv_logger *logger, conv_log_level level);

/* Formats a message (one line, truncated to 1 KiB) and passes it to the
 * callback when conv_log_enabled. */
void conv_log(const conv_logger *logger, conv_log_level level, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/* ---------------------------------------------------------------- libraries */

/* The libraries a candidate family's plans run on besides convtune's own
 * code (conv_algorithm.libraries): what the cache's carry-over rules
 * (cache.h, conv_versions_carry) hold equal before a winner tuned under
 * other versions is used again.  UNKNOWN (a family this build lacks) is
 * never carried over. */
#define CONV_LIBRARY_CUDNN 0x1u
#define CONV_LIBRARY_CUBLASLT 0x2u
#define CONV_LIBRARY_CUFFT 0x4u
#define CONV_LIBRARY_UNKNOWN 0x80000000u

/* ---------------------------------------------------------------- configs */

/* A configuration: small plain data that serialises to the cache as text
 * ("12,3,1").  A config read back from the cache is untrusted: prepare()
 * must validate every value.  32 values: a cuDNN engine and up to 15 knob
 * pairs (cuDNN's first choice for some backward passes sets 8 knobs). */
#define CONV_CONFIG_MAX_VALUES 32
typedef struct conv_config {
  int count;
  int64_t values[CONV_CONFIG_MAX_VALUES];
  uint32_t flags; /* CONV_CONFIG_*; not part of the config's identity */
} conv_config;

/* The config is in the library's own ranked list (cuDNN's heuristic), and
 * configs() returns that list first, in its order.  The first ranked config
 * that runs within the limits is what an untuned caller gets: the tuner
 * marks that trial as the heuristic pick and reports its time as "cuDNN's
 * default". */
#define CONV_CONFIG_HEURISTIC_RANKED 1u
/* The config is a best guess of its family's own beyond its library's
 * ranking: one the library ranks low that wins a known class of problems
 * (cuDNN's Winograd engines on strict 3x3 layers; cuBLASLt's 4th to 8th
 * algos for im2col_gemm's 1x1 layers).  A family whose configs() marks
 * some says so (conv_algorithm.marks_best_guesses), and every prediction
 * times them, whatever family won the neighbours (tuner/tune_predict.c). */
#define CONV_CONFIG_BEST_GUESS 2u

bool conv_config_equal(const conv_config *a, const conv_config *b);
/* "v0,v1,..." ("" for count 0).  Returns CONV_INVALID_ARGUMENT if it does not fit. */
conv_status conv_config_format(const conv_config *config, char *text, size_t size);
/* Parses conv_config_format's text; rejects anything else. */
conv_status conv_config_parse(const char *text, conv_config *config /* OUT */);
/* A config read back from a (possibly shipped) cache is untrusted: CONV_OK
 * when it has `count` values, each in [lo, hi]; else CONV_UNSUPPORTED with
 * a message that starts with `family`. */
conv_status conv_config_check(const conv_config *config, const char *family, int count,
                              int64_t lo, int64_t hi, conv_error *err);

/* What arithmetic a config uses; sets the validation bound with the math mode. */
typedef enum conv_arith {
  CONV_ARITH_DIRECT = 0, /* products summed directly (direct, GEMM)         */
  CONV_ARITH_TRANSFORM,  /* Winograd or FFT: larger, still bounded, error   */
  /* A half problem's config whose maker says it may sum in reduced
   * precision (a cuDNN note): taken only as accurate as fp32 sums, so held
   * to one output rounding's error whatever the sum's length. */
  CONV_ARITH_REDUCED_SUMS
} conv_arith;

/* Relative-L2 error bound for validation of an fp32 problem, for sums of
 * up to 4096 products. */
double conv_error_bound(conv_math math, conv_arith arith);
/* The same for a half type (CONV_DTYPE_F16 or BF16), whatever the math
 * mode (which half problems ignore); see config.c for why. */
double conv_error_bound_half(conv_dtype dtype, conv_arith arith);
/* The bound for a valid problem's pass: the base bound of its dtype (and,
 * for fp32, its math mode), grown with the length of the pass's sums past
 * 4096 products (see config.c). */
double conv_error_bound_for(const conv_problem *problem, conv_arith arith);

/* ---------------------------------------------------------------- structs */

/* The size of conv_problem and conv_context_options in the first header
 * that versioned them (0.2.0): anything smaller was not made by their init
 * macros.  Fields added later go after these. */
#define CONV_PROBLEM_FIRST_SIZE \
  (offsetof(conv_problem, deterministic) + sizeof(((conv_problem *)0)->deterministic))
#define CONV_OPTIONS_FIRST_SIZE \
  (offsetof(conv_context_options, deterministic) + \
   sizeof(((conv_context_options *)0)->deterministic))
#define CONV_PLAN_INFO_FIRST_SIZE \
  (offsetof(conv_plan_info, deterministic) + sizeof(((conv_plan_info *)0)->deterministic))

/* Copies a caller's struct of their_size bytes over `ours` (our_size bytes,
 * already holding the defaults, which fill what an older caller's struct
 * lacks).  CONV_INVALID_ARGUMENT when their_size is below first_size (not
 * made by `name`_init), CONV_UNSUPPORTED when a longer struct sets fields
 * this library does not know; `ours` is unchanged then. */
conv_status conv_struct_import(void *ours, size_t our_size, const void *theirs, size_t their_size,
                               size_t first_size, const char *name, conv_error *err);

/* Writes `ours` into a caller's struct of their_size bytes: what fits, and
 * zeros (the defaults) for fields of a newer header that we do not have. */
void conv_struct_export(void *theirs, size_t their_size, const void *ours, size_t our_size);

/* A caller's problem (any header version) as this library's, in `ours`;
 * the statuses of conv_struct_import, and CONV_INVALID_ARGUMENT for NULL. */
conv_status conv_problem_import(const conv_problem *theirs, conv_problem *ours, conv_error *err);

/* ---------------------------------------------------------------- problems */

/* Sizes derived from a valid problem.  For a dynamic problem (op
 * CONV_OP_DYNAMIC) w_elems counts the weights wt[n][groups][r*s][p][q],
 * k_per_group is c_per_group (k = c) and y_elems is n*c*p*q. */
typedef struct conv_shape {
  int64_t p, q;                     /* output height, width          */
  int64_t x_elems, w_elems, y_elems; /* element counts               */
  int64_t out_elems;  /* the pass's output: y, dx (x_elems) or dw (w_elems) */
  int64_t c_per_group, k_per_group;
} conv_shape;

conv_status conv_problem_shape(const conv_problem *problem, conv_shape *shape /* OUT */);

/* Bytes of one element of x, w and y (4 for fp32, 2 for fp16 and bf16);
 * 0 for a value out of the enum.  The bias is fp32 whatever the dtype. */
size_t conv_dtype_bytes(conv_dtype dtype);

/* "f32", "f16" or "bf16", as keys and specs spell them; "?" out of range. */
const char *conv_dtype_name(conv_dtype dtype);

/* Whether dtype, layout, direction, math and epilogue are ones this version
 * supports (conv_problem_validate's own check) for an fp32 convolution (op
 * CONV_OP_CONVOLUTION, dtype CONV_DTYPE_F32): the common ground of every
 * convolution family's applicable(), so that none of them takes a dynamic
 * problem, nor one in a half type it has no kernels for. */
bool conv_problem_supported(const conv_problem *problem);

/* The same in any dtype validation accepts (fp32, fp16, bf16): the common
 * ground of a family that has configs for the half types (cudnn), whose
 * configs then depend on the dtype. */
bool conv_problem_supported_any_dtype(const conv_problem *problem);

/* The same for the dynamic op (CONV_OP_DYNAMIC, NCHW, no epilogue): the
 * common ground of the dynamic families' applicable(). */
bool conv_problem_dynamic(const conv_problem *problem);

/* conv_problem_supported, forward in the NCHW layout: what the families
 * written for NCHW forward convolutions take (all but cudnn and
 * depthwise_nhwc, and the backward families filter_reduce and
 * data_gather; direct_channel runs stride-1 backward-data too). */
bool conv_problem_nchw(const conv_problem *problem);

/* An NCHW problem whose filters are K R S C where that differs from K C R S
 * (conv_problem.filter_layout; problems made by conv_problem_import have
 * it canonical).  Only families with krsc_filters set are offered one. */
bool conv_problem_krsc_filters(const conv_problem *problem);

#ifdef __cplusplus
}
#endif
#endif /* CONVTUNE_CORE_H */
