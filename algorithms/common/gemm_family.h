/*
 * gemm_family.h -- the host shell of a family that runs a batch of images
 * as cuBLASLt GEMMs a chunk of images at a time, its configs
 * {chunk, algo_index} (algo_index ranks the heuristic's answers for a full
 * chunk): im2col_gemm, gemm_nhwc and gemm_backward.  The family describes
 * what differs in a conv_gemm_family (its scope, the chunks worth timing
 * and those it takes, how its state is built, the layouts of a last,
 * partial chunk); configs(), prepare(), release() and describe(), with
 * their guards, config checks, algo picks and messages, are written once
 * here, and so are the pieces of run() these families share: the checks of
 * the caller's arguments, workspace and pointers, and the matmul.
 * dynamic_unfold_gemm, whose configs, prepare() and run() are its own,
 * builds on the same plan and pieces.
 *
 * A family's state is malloc'd with its conv_gemm_plan as first member,
 * so that the shell can build, read and free it through the state
 * pointer.  A family file then holds its applicable(), chunks, state and
 * run(), and
 *
 *     static const conv_gemm_family xx_family = {...};
 *     CONV_GEMM_FAMILY_CALLBACKS(xx, xx_family)
 *
 * before its conv_algorithm, which names xx_configs, xx_prepare,
 * xx_release and xx_describe.
 *
 * cublaslt.h's `prefix` is the family's name where its messages name it
 * before the cuBLASLt call, NULL for the others.
 *
 * Element types: the shell asks the heuristic about the problem's dtype
 * (conv_gemm_query); a family that takes half problems makes its layouts
 * of conv_cublaslt_data_type(dtype) (fp32 for a D that is a sums buffer of
 * its own), steps through the caller's tensors with conv_gemm_at, and
 * rounds any fp32 sums it keeps once, after the epilogue.
 */
#ifndef CONVTUNE_GEMM_FAMILY_H
#define CONVTUNE_GEMM_FAMILY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "algorithms/common/cublaslt.h"
#include "algorithms/common/shell_callbacks.h"
#include "algorithms/algorithm.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The most chunk sizes a family's chunks() writes. */
#define CONV_GEMM_CHUNKS_MAX 3

/* One GEMM shape (a full chunk of images, or the last, partial one) and
 * the algos picked for it. */
typedef struct conv_gemm_shape {
  conv_cublaslt_layouts lay;
  conv_cublaslt_algos algos;
} conv_gemm_shape;

/* What a plan holds for cuBLASLt: the first member of a family's state. */
typedef struct conv_gemm_plan {
  cublasLtMatmulDesc_t desc;
  conv_gemm_shape full; /* a chunk of `chunk` images                         */
  conv_gemm_shape tail; /* the last chunk, where the chunk does not divide n */
  bool has_tail;
  int64_t chunk;
  conv_gemm_align align; /* what the algos rely on of A, B and D */
  /* Workspace: [cuBLASLt's | the family's buffers].  gemm_ws_bytes is the
   * larger algo's need rounded up (conv_cublaslt_ws_round), so that the
   * buffers that start there are aligned too. */
  size_t gemm_ws_bytes, buffer_bytes;
} conv_gemm_plan;

typedef struct conv_gemm_family {
  const char *name;   /* the conv_algorithm's name, for messages */
  const char *prefix; /* cublaslt.h's prefix: the name, or NULL   */
  /* What applicable() takes, as prepare()'s refusal says it: "only ...". */
  const char *scope;
  int algos_offered; /* the most ranked algos configs() offers a chunk */
  /* Each algo with a float-aligned fallback, which run() takes for
   * pointers less aligned than prepare() assumed (conv_gemm_choose_algos). */
  bool fallbacks;
  /* applicable() answers without an env (which families take a problem):
   * configs() then lists nothing, where it refuses a NULL env otherwise. */
  bool env_optional;
  bool (*applicable)(const conv_problem *problem, const conv_env *env);
  /* Writes the chunk sizes worth timing, at most CONV_GEMM_CHUNKS_MAX, and
   * returns their number. */
  int (*chunks)(const conv_problem *problem, const conv_env *env,
                int64_t out[CONV_GEMM_CHUNKS_MAX]);
  /* CONV_OK where prepare() takes `chunk` (a config's, from a possibly
   * shipped cache), else CONV_UNSUPPORTED with the reason. */
  conv_status (*check_chunk)(const conv_problem *problem, int64_t chunk, conv_error *err);
  /* The family's state for chunks of `chunk` images, its plan's
   * descriptor, chunk, alignments, buffer_bytes and the full chunk's
   * layouts made (the shell picks the algos).  On failure nothing is left
   * allocated. */
  conv_status (*create)(const conv_problem *problem, int64_t chunk, void **state,
                        conv_error *err);
  /* The layouts of a chunk of `images` images, for the last, partial one;
   * NULL where every chunk a family takes divides the batch. */
  conv_status (*layouts)(const conv_problem *problem, const void *state, int64_t images,
                         conv_cublaslt_layouts *layouts, conv_error *err);
  /* How many of the first chunk's ranked algos configs() marks as best
   * guesses (CONV_CONFIG_BEST_GUESS) for `problem`; NULL: none. */
  int (*guessed_algos)(const conv_problem *problem);
} conv_gemm_family;

/* For each of the family's chunks in order, each algo the heuristic ranks
 * for it (at most algos_offered), a chunk the family or cuBLASLt refuses
 * left out; the first chunk's first guessed_algos() marked best guesses. */
conv_status conv_gemm_configs(const conv_gemm_family *family, const conv_problem *problem,
                              conv_env *env, conv_config *out, int max, int *count /* OUT */,
                              conv_error *err);
/* After the guards, the scope and the config's two values (the chunk by
 * check_chunk, the algo rank within CONV_CUBLASLT_HEURISTIC_MAX), the
 * family's state and its algos. */
conv_status conv_gemm_prepare(const conv_gemm_family *family, const conv_problem *problem,
                              conv_env *env, const conv_config *config,
                              conv_prepared *out /* OUT */, conv_error *err);
/* Frees a family's state and what its plan created; NULL is a no-op. */
void conv_gemm_release(void *state);
/* "batch=N gemm_algo=I" (conv_cublaslt_config_describe). */
void conv_gemm_describe(const conv_gemm_family *family, const conv_config *config, char *text,
                        size_t size);

/* How many ranked algos configs() offers for chunks of `chunk` images: all
 * the heuristic has for a full chunk, at most family->algos_offered
 * (CONV_UNSUPPORTED where the family refuses the chunk). */
conv_status conv_gemm_count_algos(const conv_gemm_family *family, const conv_problem *problem,
                                  conv_env *env, int64_t chunk, int *count, conv_error *err);
/* GEMM `shape` of `plan` as the heuristic is asked about it, under the
 * plan's alignments. */
conv_cublaslt_query conv_gemm_query(const conv_gemm_family *family, const conv_gemm_plan *plan,
                                    const conv_gemm_shape *shape, const conv_problem *problem,
                                    const conv_env *env);
/* The end of a GEMM family's prepare(): `state` with `workspace_bytes`.
 * cuBLASLt with a fixed algorithm (the config's) gives bit-identical
 * results run to run on one GPU (cuBLAS's "results reproducibility"): its
 * split-K reductions are sequential, without atomics. */
conv_status conv_gemm_prepared(void *state, size_t workspace_bytes, conv_prepared *out);

/* The workspace a plan's run() needs: cuBLASLt's, then the buffers. */
static inline size_t conv_gemm_workspace(const conv_gemm_plan *plan) {
  return plan->gemm_ws_bytes + plan->buffer_bytes;
}
/* The shape a chunk of `images` images runs. */
static inline const conv_gemm_shape *conv_gemm_chunk_shape(const conv_gemm_plan *plan,
                                                           int64_t images) {
  return images == plan->chunk ? &plan->full : &plan->tail;
}

/* run()'s check of the caller's workspace: conv_gemm_workspace(plan) bytes,
 * CONV_CUBLASLT_WS_ALIGN-aligned wherever it is needed, or with
 * `cublas_part_only` only where cuBLASLt gets a part of it (the family
 * copes with its buffers less aligned). */
conv_status conv_gemm_check_workspace(const conv_gemm_plan *plan, const conv_exec *exec,
                                      bool cublas_part_only, const char *family,
                                      conv_error *err);
/* The checks run() of a forward family starts with: its arguments (the
 * plan, its problem and env, x, w and y, and the bias where the problem's
 * epilogue adds one), then conv_gemm_check_workspace's. */
conv_status conv_gemm_check_forward_run(const conv_exec *exec, bool cublas_part_only,
                                        const char *family, conv_error *err);
/* Which algos run() takes: every one of `pointers` (the caller's tensors,
 * and any buffer of ours an operand reads) must be aligned to an element
 * of `dtype` (the problem's: 4 bytes for fp32, 2 for the half types);
 * where the operands miss the alignments the algos were picked for
 * (`operands_aligned` false), the fallbacks run, which every shape must
 * have. */
conv_status conv_gemm_choose_algos(const conv_gemm_plan *plan, conv_dtype dtype,
                                   const void *const *pointers, int count, bool operands_aligned,
                                   const char *family, bool *use_fallback /* OUT */,
                                   conv_error *err);
/* D = op(A) op(B) + beta D (alpha and beta fp32, alpha 1) for `shape`
 * under `desc` (the plan's, or a copy of it that a run made), by the
 * shape's algo or, with `use_fallback`, its fallback; cuBLASLt gets the
 * workspace's first `ws_bytes` bytes (none where 0).  A, B and D hold
 * elements of the types their layouts name. */
conv_status conv_gemm_matmul(const conv_gemm_family *family, const conv_exec *exec,
                             cublasLtMatmulDesc_t desc, const conv_gemm_shape *shape,
                             bool use_fallback, size_t ws_bytes, const void *a, const void *b,
                             float beta, void *d, cudaStream_t stream, conv_error *err);

/* Element `index` of a tensor of `element_bytes`-byte elements (the
 * problem's conv_dtype_bytes): conv_exec's tensors are typed float * but
 * hold 2-byte elements in a half problem, so the GEMM families step
 * through them in bytes. */
static inline const void *conv_gemm_at(const void *base, int64_t index, size_t element_bytes) {
  return (const char *)base + index * (int64_t)element_bytes;
}
static inline void *conv_gemm_at_mut(void *base, int64_t index, size_t element_bytes) {
  return (char *)base + index * (int64_t)element_bytes;
}

/* The conv_algorithm callbacks configs, prepare, release and describe of
 * the family described by `family`, prefixed `prefix`_: each one call into
 * the shell. */
#define CONV_GEMM_FAMILY_CALLBACKS(prefix, family)                                                \
  CONV_SHELL_CALLBACKS(prefix, conv_gemm, family)                                                 \
  static void prefix##_release(void *state) { conv_gemm_release(state); }

#ifdef __cplusplus
}
#endif
#endif /* CONVTUNE_GEMM_FAMILY_H */
