/*
 * internal.h -- what the library's own parts share: errors, the device and
 * library handles, the candidate interface and the registry.  Not installed.
 */
#ifndef CONVTUNE_INTERNAL_H
#define CONVTUNE_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cublasLt.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>
#include <uv.h>

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

/* Each returns CONV_OK on success, else records `what` with the library's
 * own error text and returns the matching status (CONV_OUT_OF_MEMORY for
 * allocation failures). */
conv_status conv_check_cuda(conv_error *err, cudaError_t code, const char *what);
conv_status conv_check_cudnn(conv_error *err, cudnnStatus_t code, const char *what);
conv_status conv_check_cublas(conv_error *err, cublasStatus_t code, const char *what);

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

/* ---------------------------------------------------------------- device */

/* What identifies a GPU model for the cache, read once per context. */
typedef struct conv_device {
  int ordinal;
  char name[256];
  int cc_major, cc_minor;
  int sm_count;
  int l2_bytes;
  int mem_clock_khz;
  int mem_bus_bits;
  size_t total_mem;
  char key[512]; /* canonical fingerprint text, e.g.
                  * "NVIDIA H100 80GB HBM3|sm90|132sm|l2=52428800|mem=2619000kHz*5120bit" */
} conv_device;

/* Makes `ordinal` the current device and saves the caller's in *previous;
 * conv_device_leave(previous) restores it, so that the library never moves
 * its caller to another GPU. */
conv_status conv_device_enter(int ordinal, int *previous /* OUT */, conv_error *err);
void conv_device_leave(int previous);

/* Fills dev for CUDA device `ordinal` (the current device is not changed). */
conv_status conv_device_query(int ordinal, conv_device *dev /* OUT */, conv_error *err);

/* Whether plans for `dev` launch their launch-bound kernels with
 * programmatic dependent launch (algorithms/pdl.cuh): compute
 * capability 9.0 or later, unless the environment sets CONVTUNE_PDL=0 (to
 * measure what it gains; read when a plan is made). */
bool conv_device_pdl(const conv_device *dev);

/* Whether `dev` runs the wgmma kernels (padded_gemm, stem_gemm, patch's
 * wgmma tilings): they are compiled for sm_90a, which runs on compute
 * capability 9.0 only. */
bool conv_device_wgmma(const conv_device *dev);

/* The library handles candidates share.  cuDNN executes on the handle's
 * stream, so cudnnSetStream + execute run under cudnn_lock; cuBLASLt takes
 * the stream per call and needs no lock. */
typedef struct conv_env {
  conv_device device;
  cudnnHandle_t cudnn;
  uv_mutex_t cudnn_lock;
  cublasLtHandle_t cublaslt;
} conv_env;

/* ---------------------------------------------------------------- candidates */

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
  CONV_ARITH_TRANSFORM   /* Winograd or FFT: larger, still bounded, error   */
} conv_arith;

/* Relative-L2 error bound for validation, for sums of up to 4096 products. */
double conv_error_bound(conv_math math, conv_arith arith);
/* The bound for a valid problem's pass: conv_error_bound, grown with the
 * length of the pass's sums past 4096 products (see config.c). */
double conv_error_bound_for(const conv_problem *problem, conv_arith arith);

/* What prepare() returns for one config. */
typedef struct conv_prepared {
  void *state;            /* owned; freed by the algorithm's release()      */
  size_t workspace_bytes; /* device scratch run() needs                     */
  conv_arith arith;
  /* The config's results do not depend on scheduling: no float atomics, a
   * fixed reduction order, so two runs on one GPU are bit-identical.  False
   * (prepare()'s zeroed default) keeps it from deterministic problems. */
  bool deterministic;
} conv_prepared;

/* CONV_OK when a prepared config may run `problem`: a deterministic
 * problem takes deterministic configs only (else CONV_UNSUPPORTED, with a
 * message that starts with `family`). */
conv_status conv_prepared_admits(const conv_problem *problem, const conv_prepared *prepared,
                                 const char *family, conv_error *err);

/* The end of prepare() for a family whose plan is one launch of its own
 * kernel, no workspace: `launch` (malloc'd, planned) becomes out->state when
 * `configured` (what setting its kernel up for the launch returned) is
 * cudaSuccess; otherwise it is freed, and cudaErrorInvalidConfiguration (no
 * block fits this GPU's shared memory or registers) is CONV_UNSUPPORTED.
 * Each output of these kernels is one thread's sum in a fixed order:
 * direct arithmetic, deterministic. */
conv_status conv_prepared_own_kernel(void *launch, cudaError_t configured, const char *family,
                                     conv_prepared *out, conv_error *err);

/* One execution's arguments; run() keeps no other state.  The tensors are
 * the forward convolution's in every direction: a backward-data pass reads
 * y as dy and writes x (dx), a backward-filter pass reads x and y (dy) and
 * writes w (dw); x and w are const for the forward families. */
typedef struct conv_exec {
  const conv_problem *problem;
  conv_env *env;
  void *state; /* conv_prepared.state */
  const float *x, *w, *bias;
  float *y;
  void *workspace;
  size_t workspace_bytes;
} conv_exec;

/* A candidate family (MIOpen's solver contract in SQLite's vtable style).
 * Implementations keep no mutable global state. */
typedef struct conv_algorithm {
  uint32_t id;      /* stable, append-only; 0 invalid; never reuse a retired id */
  /* Bumped whenever the family's kernels or configs change what tuning
   * would find: it is part of the cache key, so older winners go stale. */
  uint32_t version;
  const char *name; /* "cudnn", "im2col_gemm", ...                              */
  /* Cheap early-return checks on the problem alone. */
  bool (*applicable)(const conv_problem *problem, const conv_env *env);
  /* Writes up to `max` configs, most promising first, and their number to
   * *count.  Enumerating may skip configs that cannot work, but need not:
   * prepare() is the final judge. */
  conv_status (*configs)(const conv_problem *problem, conv_env *env, conv_config *out, int max,
                         int *count /* OUT */, conv_error *err);
  /* Validates `config` for `problem` and builds its per-plan state
   * (descriptors, execution plans).  A config that does not fit returns
   * CONV_UNSUPPORTED with the reason. */
  conv_status (*prepare)(const conv_problem *problem, conv_env *env, const conv_config *config,
                         conv_prepared *out /* OUT */, conv_error *err);
  /* Enqueues the convolution, including the problem's epilogue, on stream. */
  conv_status (*run)(const conv_exec *exec, cudaStream_t stream, conv_error *err);
  /* Frees prepare()'s state; NULL is a no-op. */
  void (*release)(void *state);
  /* Human-readable config, e.g. "engine=12 knobs=3:1" or "batch=32 gemm_algo=0". */
  void (*describe)(const conv_config *config, char *text, size_t size);
  /* Runs NCHW problems whose filters are K R S C (conv_problem_krsc_filters):
   * the family reads w in the order the problem names.  Families without it
   * are never offered such a problem (conv_algorithm_applicable). */
  bool krsc_filters;
} conv_algorithm;

/* algo->applicable(), behind the checks every family shares: a problem
 * with K R S C filters goes only to families that read them. */
bool conv_algorithm_applicable(const conv_algorithm *algo, const conv_problem *problem,
                               const conv_env *env);

/* Registry: every candidate family, in id order. */
enum {
  CONV_ALGO_CUDNN = 1,
  CONV_ALGO_IM2COL_GEMM = 2,
  CONV_ALGO_FFT = 3,
  CONV_ALGO_DIRECT_CHANNEL = 4,
  CONV_ALGO_PATCH = 5,
  CONV_ALGO_DYNAMIC_DIRECT = 6, /* the id reserved for the dynamic op's first family */
  CONV_ALGO_CHANNEL_SPLIT = 7,
  CONV_ALGO_DEPTHWISE_NHWC = 8,
  CONV_ALGO_FILTER_REDUCE = 9,
  CONV_ALGO_DATA_GATHER = 10,
  CONV_ALGO_DYNAMIC_UNFOLD_GEMM = 11,
  CONV_ALGO_GEMM_NHWC = 12,
  CONV_ALGO_IMPLICIT_GEMM = 13,
  CONV_ALGO_FFT_FILTER = 14,
  CONV_ALGO_GEMM_BACKWARD = 15,
  CONV_ALGO_PATCH_FILTER = 16,
  CONV_ALGO_PADDED_GEMM = 17,
  CONV_ALGO_STEM_GEMM = 18,
};
const conv_algorithm *const *conv_registry(int *count /* OUT */);
const conv_algorithm *conv_registry_find(uint32_t id);
const conv_algorithm *conv_registry_find_name(const char *name);

extern const conv_algorithm conv_algorithm_cudnn;
extern const conv_algorithm conv_algorithm_im2col_gemm;
extern const conv_algorithm conv_algorithm_direct_channel;
extern const conv_algorithm conv_algorithm_fft;
extern const conv_algorithm conv_algorithm_patch;
extern const conv_algorithm conv_algorithm_channel_split;
extern const conv_algorithm conv_algorithm_depthwise_nhwc;
extern const conv_algorithm conv_algorithm_gemm_nhwc;
extern const conv_algorithm conv_algorithm_implicit_gemm;
extern const conv_algorithm conv_algorithm_fft_filter;
extern const conv_algorithm conv_algorithm_gemm_backward;
extern const conv_algorithm conv_algorithm_patch_filter;
extern const conv_algorithm conv_algorithm_padded_gemm;
extern const conv_algorithm conv_algorithm_stem_gemm;
extern const conv_algorithm conv_algorithm_filter_reduce;
extern const conv_algorithm conv_algorithm_data_gather;
extern const conv_algorithm conv_algorithm_dynamic_direct;
extern const conv_algorithm conv_algorithm_dynamic_unfold_gemm;

/* ---------------------------------------------------------------- context */

struct conv_cache;

/* Internal accessors for the CLI and tests. */
struct conv_cache *conv_context_cache(conv_context *context);
const conv_device *conv_context_device(const conv_context *context);

/* The cache path used when the options name none: $CONVTUNE_CACHE, else
 * $XDG_CACHE_HOME/convtune/cache.db, else $HOME/.cache/convtune/cache.db.
 * With create_dirs, creates the missing directories (mode 0755). */
conv_status conv_default_cache_path(char *path /* OUT */, size_t size, bool create_dirs,
                                    conv_error *err);

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

/* Whether dtype, layout, direction, math and epilogue are ones this version
 * supports (conv_problem_validate's own check) for a convolution (op
 * CONV_OP_CONVOLUTION): the common ground of every convolution family's
 * applicable(), so that none of them takes a dynamic problem. */
bool conv_problem_supported(const conv_problem *problem);

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
#endif /* CONVTUNE_INTERNAL_H */
