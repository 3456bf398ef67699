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
 * writes w (dw); x and w are const for the forward families.  x, w and y
 * hold elements of the problem's dtype: float for the fp32 problems every
 * family takes, 2-byte elements (read through a cast) for the half
 * problems of a family that lists configs for them; the bias is fp32. */
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
  /* Optional (NULL: no config has one).  Where `config` runs the kernels
   * of another config of the family with only a pass over one operand
   * beside them (cuDNN: the filters transposed to K R S C first), writes
   * that config, its twin, to *twin
   * and returns true.  The tuner does not run a config whose twin it has
   * found far too slow (conv_tuner_rules_out_twin, tuner.h). */
  bool (*twin_of)(const conv_config *config, conv_config *twin /* OUT */);
  /* Optional (NULL: never).  Whether configs() marks some configs
   * CONV_CONFIG_BEST_GUESS (core.h) for `problem`: a prediction then lists
   * the family to time them, whatever its neighbours won
   * (tuner/tune_predict.c). */
  bool (*marks_best_guesses)(const conv_problem *problem);
  /* Runs NCHW problems whose filters are K R S C (conv_problem_krsc_filters):
   * the family reads w in the order the problem names.  Families without it
   * are never offered such a problem (conv_algorithm_applicable). */
  bool krsc_filters;
  /* The libraries its plans run on (CONV_LIBRARY_* bits of core.h; 0: its
   * own kernels alone): a winner tuned under another cuDNN, cuBLASLt or
   * cuFFT than this process's is tuned again, one tuned under another
   * driver or other families' versions is carried over (cache.h). */
  unsigned libraries;
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

/* The registry: every candidate family as X(ENUM, name, id), in id
 * order.  A new family is one line appended here (and its file pair and
 * test file); never renumber a line or reuse a retired id: cache rows
 * name families by id.  Each line gives CONV_ALGO_ENUM = id and declares
 * conv_algorithm_name, which the family's file defines; registry.c lists
 * them in this order. */
#define CONV_FAMILIES(X)                                                                          \
  X(CUDNN, cudnn, 1)                                                                               \
  X(IM2COL_GEMM, im2col_gemm, 2)                                                                   \
  X(FFT, fft, 3)                                                                                   \
  X(DIRECT_CHANNEL, direct_channel, 4)                                                             \
  X(PATCH, patch, 5)                                                                               \
  X(DYNAMIC_DIRECT, dynamic_direct, 6)                                                             \
  X(CHANNEL_SPLIT, channel_split, 7)                                                               \
  X(DEPTHWISE_NHWC, depthwise_nhwc, 8)                                                             \
  X(FILTER_REDUCE, filter_reduce, 9)                                                               \
  X(DATA_GATHER, data_gather, 10)                                                                  \
  X(DYNAMIC_UNFOLD_GEMM, dynamic_unfold_gemm, 11)                                                  \
  X(GEMM_NHWC, gemm_nhwc, 12)                                                                      \
  X(IMPLICIT_GEMM, implicit_gemm, 13)                                                              \
  X(FFT_FILTER, fft_filter, 14)                                                                    \
  X(GEMM_BACKWARD, gemm_backward, 15)                                                              \
  X(PATCH_FILTER, patch_filter, 16)                                                                \
  X(PADDED_GEMM, padded_gemm, 17)                                                                  \
  X(STEM_GEMM, stem_gemm, 18)

enum {
#define CONV_FAMILY_ID_(upper, lower, id) CONV_ALGO_##upper = id,
  CONV_FAMILIES(CONV_FAMILY_ID_)
#undef CONV_FAMILY_ID_
};

#define CONV_FAMILY_EXTERN_(upper, lower, id) extern const conv_algorithm conv_algorithm_##lower;
CONV_FAMILIES(CONV_FAMILY_EXTERN_)
#undef CONV_FAMILY_EXTERN_

const conv_algorithm *const *conv_registry(int *count /* OUT */);
const conv_algorithm *conv_registry_find(uint32_t id);
const conv_algorithm *conv_registry_find_name(const char *name);

#ifdef __cplusplus
}
#endif
#endif /* CONVTUNE_ALGORITHM_H */
