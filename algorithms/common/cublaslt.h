/*
 * cublaslt.h -- the cuBLASLt plumbing every GEMM family shares
 * (im2col_gemm, gemm_nhwc, gemm_backward and dynamic_unfold_gemm, through
 * gemm_family.h, and fft): descriptors, layouts, what they ask of the
 * heuristic and how they read its answer, the matmul call.
 *
 * `prefix`, where a function takes one, is the family's name for families
 * whose messages name themselves before the cuBLASLt call
 * ("dynamic_unfold_gemm: cublasLtMatrixLayoutCreate: ..."); NULL for the
 * others.  `family` always names the family in its own messages.
 */
#ifndef CONVTUNE_CUBLASLT_H
#define CONVTUNE_CUBLASLT_H

#include "algorithms/algorithm.h"

#ifdef __cplusplus
extern "C" {
#endif

/* cuBLAS recommends 32 MiB of workspace on Hopper (4 MiB before). */
#define CONV_CUBLASLT_WS_MAX ((size_t)32 << 20)
/* cuBLAS documents 256-byte alignment for its workspace (cublasSetWorkspace);
 * we hold cuBLASLt's to the same, which cudaMalloc always meets. */
#define CONV_CUBLASLT_WS_ALIGN 256u
/* Answers asked of the heuristic; prepare() accepts an algo_index below
 * this, configs() offer fewer. */
#define CONV_CUBLASLT_HEURISTIC_MAX 16

/* Alignments (bytes) a cuBLASLt GEMM may assume of its A, B and D (= C). */
typedef struct conv_gemm_align {
  uint32_t a, b, d;
} conv_gemm_align;

/* The matrices of one GEMM D = op(A) op(B); C is D (beta = 0, in place). */
typedef struct conv_cublaslt_layouts {
  cublasLtMatrixLayout_t a, b, d;
} conv_cublaslt_layouts;

/* One GEMM as the heuristic is asked about it.  `dtype` is the problem's
 * (the element type of A and B; D may be fp32 where a family keeps an
 * fp32 buffer); zero, CONV_DTYPE_F32, where a query leaves it out. */
typedef struct conv_cublaslt_query {
  cublasLtHandle_t lt;
  cublasLtMatmulDesc_t desc;
  const conv_cublaslt_layouts *layouts;
  conv_math math;
  const conv_gemm_align *align;
  const char *prefix;
  conv_dtype dtype;
} conv_cublaslt_query;

/* The cuBLASLt type of a conv_dtype's elements: CUDA_R_32F, CUDA_R_16F or
 * CUDA_R_16BF. */
cudaDataType_t conv_cublaslt_data_type(conv_dtype dtype);

/* Fills a matmul preference as every GEMM candidate needs it: the
 * workspace cap, the alignments (which the heuristic cannot see and
 * otherwise assumes to be 256 bytes), and an implementation mask: for
 * fp32 inputs in strict mode, one that refuses tensor-core and
 * reduced-input kernels; for half inputs (`dtype`), one that refuses fp16
 * accumulation (32F compute promises fp32 sums; the mask double-checks)
 * and a split-K reduction only in fp32 (none that adds partial sums in a
 * half output's type). */
conv_status conv_cublaslt_pref_fill(cublasLtMatmulPreference_t pref, conv_dtype dtype,
                                    conv_math math, uint64_t max_workspace,
                                    const conv_gemm_align *align, conv_error *err);

/* A matmul descriptor computing in fp32 (CUBLAS_COMPUTE_32F): for fp32
 * inputs (`dtype`), through TF32 tensor cores only in TF32 math; half
 * inputs ignore the math mode (their products are exact in fp32, which
 * accumulates them, on the tensor cores).  `scale` is the scale type
 * (alpha, beta: CUDA_R_32F but for fft's complex GEMMs). */
conv_status conv_cublaslt_desc_create(conv_dtype dtype, conv_math math, cudaDataType_t scale,
                                      cublasLtMatmulDesc_t *desc, const char *prefix,
                                      conv_error *err);

/* A column-major rows x cols layout of `type`; a batched one adds a batch
 * of `count` matrices `stride` elements apart.  A created layout is kept
 * in *layout (for the caller's release) even when a later step fails. */
conv_status conv_cublaslt_layout(cublasLtMatrixLayout_t *layout, cudaDataType_t type, int64_t rows,
                                 int64_t cols, int64_t ld, const char *prefix, conv_error *err);
conv_status conv_cublaslt_layout_batched(cublasLtMatrixLayout_t *layout, cudaDataType_t type,
                                         int64_t rows, int64_t cols, int64_t ld, int32_t count,
                                         int64_t stride, conv_error *err);
/* Destroys the layouts created (NULL ones are skipped). */
void conv_cublaslt_layouts_destroy(const conv_cublaslt_layouts *layouts);

/* Ranked algorithms for the query; *found counts the usable leading ones
 * (0 when cuBLASLt has none, which is not an error). */
conv_status conv_cublaslt_heuristic(const conv_cublaslt_query *q,
                                    cublasLtMatmulHeuristicResult_t
                                        results[CONV_CUBLASLT_HEURISTIC_MAX],
                                    int *found, conv_error *err);
/* The heuristic's index-th answer; CONV_UNSUPPORTED where it has fewer. */
conv_status conv_cublaslt_ranked_algo(const conv_cublaslt_query *q, int index,
                                      const char *family,
                                      cublasLtMatmulHeuristicResult_t *picked, conv_error *err);
/* The weakest alignment a float pointer can have: the fallback algos' for
 * fp32 problems (a half problem's is its 2-byte element,
 * conv_cublaslt_element_align). */
#define CONV_CUBLASLT_FLOAT_ALIGN 4u
/* The weakest alignment (bytes) a pointer to elements of `dtype` can have:
 * the element's size. */
uint32_t conv_cublaslt_element_align(conv_dtype dtype);

/* A config's algo and its stand-in for the caller's pointers that miss
 * the alignments the config was prepared for (a view into a larger
 * tensor), which run() takes instead of faulting. */
typedef struct conv_cublaslt_algos {
  cublasLtMatmulAlgo_t algo;     /* valid when the pointers meet the query's align */
  cublasLtMatmulAlgo_t fallback; /* valid for any float-aligned pointers          */
  bool has_fallback;
  size_t ws_bytes; /* the larger of the two algos' workspace needs */
} conv_cublaslt_algos;

/* The heuristic's first answer for the query's GEMM with A, B and D only
 * element-aligned (conv_cublaslt_element_align of the query's dtype), where
 * it has one (*found). */
conv_status conv_cublaslt_fallback_algo(const conv_cublaslt_query *q, bool *found,
                                        cublasLtMatmulAlgo_t *algo, size_t *ws_bytes,
                                        conv_error *err);
/* The heuristic's index-th answer under the query's alignments
 * (CONV_UNSUPPORTED where it has fewer), and its first for A, B and D only
 * element-aligned (has_fallback false where it has none). */
conv_status conv_cublaslt_pick_algos(const conv_cublaslt_query *q, int index, const char *family,
                                     conv_cublaslt_algos *out, conv_error *err);
/* How many of the heuristic's answers a family offers as configs: all it
 * has, at most `offered`. */
conv_status conv_cublaslt_offered_algos(const conv_cublaslt_query *q, int offered, int *count,
                                        conv_error *err);
/* Whether `algo` runs the query's GEMM within CONV_CUBLASLT_WS_MAX, and
 * with how much workspace. */
bool conv_cublaslt_algo_fits(const conv_cublaslt_query *q, const cublasLtMatmulAlgo_t *algo,
                             size_t *ws_bytes);
/* The algo for the last, partial chunk of a batch (query `tail`): the
 * full chunk's where it fits, else the heuristic's first for the tail. */
conv_status conv_cublaslt_tail_algo(const conv_cublaslt_query *tail,
                                    const cublasLtMatmulAlgo_t *full, const char *family,
                                    cublasLtMatmulAlgo_t *algo, size_t *ws_bytes,
                                    conv_error *err);

/* The alignment (bytes) every pointer base + i*offset keeps when base is
 * aligned to `base`: offsets in floats, entries <= 0 ignored. */
uint32_t conv_cublaslt_offsets_align(uint32_t base, const int64_t *offsets, int count);
/* The same with offsets in elements of `element_bytes` bytes (a power of
 * two at most `base`). */
uint32_t conv_cublaslt_element_offsets_align(uint32_t base, const int64_t *offsets, int count,
                                             size_t element_bytes);
bool conv_cublaslt_aligned(const void *ptr, uint32_t align);
/* `bytes` of GEMM workspace rounded up so that what follows it in the
 * workspace starts CONV_CUBLASLT_WS_ALIGN-aligned too. */
size_t conv_cublaslt_ws_round(size_t bytes);

/* D = alpha op(A) op(B) + beta D by `algo`, C in place of D as the
 * heuristic was asked about it; cuBLASLt gets `workspace` as given. */
conv_status conv_cublaslt_matmul(cublasLtHandle_t lt, cublasLtMatmulDesc_t desc,
                                 const conv_cublaslt_layouts *layouts,
                                 const cublasLtMatmulAlgo_t *algo, const void *alpha,
                                 const void *a, const void *b, const void *beta, void *d,
                                 void *workspace, size_t workspace_bytes, cudaStream_t stream,
                                 const char *prefix, conv_error *err);

/* Describes a {chunk, algo_index} config: "<chunk>=N gemm_algo=I". */
void conv_cublaslt_config_describe(const conv_config *config, const char *chunk, char *text,
                                   size_t size);

#ifdef __cplusplus
}
#endif

#endif
