/*
 * algorithm.h -- the candidate contract: what a family implements
 * (conv_algorithm), what it is given (conv_exec, conv_env) and returns
 * (conv_prepared), the family ids and the registry (registry.c).  The
 * tuner and plans call families only through the conv_algorithm_*
 * wrappers below.  Not installed.
 */
#ifndef CONVTUNE_ALGORITHM_H
#define CONVTUNE_ALGORITHM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#include "core/core.h"
#include "core/device.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------- candidates */

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

/* The callback fields of a family whose functions are named `prefix`_applicable,
 * `prefix`_configs, _prepare, _run, _release and _describe. */
#define CONV_ALGORITHM_CALLBACKS(prefix)                                                   \
  .applicable = prefix##_applicable, .configs = prefix##_configs,                         \
  .prepare = prefix##_prepare, .run = prefix##_run, .release = prefix##_release,           \
  .describe = prefix##_describe

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


#ifdef __cplusplus
}
#endif
#endif /* CONVTUNE_ALGORITHM_H */
