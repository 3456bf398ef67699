/* cublaslt.c -- the cuBLASLt plumbing every GEMM candidate shares (cublaslt.h). */
#include <stdio.h>

#include "algorithms/common/cublaslt.h"

/* conv_check_cublas, naming `call` after `prefix` for the families whose
 * messages carry their name. */
static conv_status lt_check(conv_error *err, cublasStatus_t code, const char *prefix,
                            const char *call) {
  if (code == CUBLAS_STATUS_SUCCESS || prefix == NULL) return conv_check_cublas(err, code, call);
  char what[128];
  snprintf(what, sizeof what, "%s: %s", prefix, call);
  return conv_check_cublas(err, code, what);
}

static conv_status pref_set(cublasLtMatmulPreference_t pref,
                            cublasLtMatmulPreferenceAttributes_t attr, const void *value,
                            size_t size, conv_error *err) {
  return conv_check_cublas(err, cublasLtMatmulPreferenceSetAttribute(pref, attr, value, size),
                           "cublasLtMatmulPreferenceSetAttribute");
}

cudaDataType_t conv_cublaslt_data_type(conv_dtype dtype) {
  return dtype == CONV_DTYPE_F16 ? CUDA_R_16F : dtype == CONV_DTYPE_BF16 ? CUDA_R_16BF : CUDA_R_32F;
}

uint32_t conv_cublaslt_element_align(conv_dtype dtype) {
  return dtype == CONV_DTYPE_F32 ? CONV_CUBLASLT_FLOAT_ALIGN : (uint32_t)conv_dtype_bytes(dtype);
}

conv_status conv_cublaslt_pref_fill(cublasLtMatmulPreference_t pref, conv_dtype dtype,
                                    conv_math math, uint64_t max_workspace,
                                    const conv_gemm_align *align, conv_error *err) {
  conv_status st;
  CONV_TRY(st, pref_set(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &max_workspace,
                        sizeof max_workspace, err), out);
  /* The heuristic cannot see our pointers and, untold, assumes 256-byte
   * alignment: kernels picked that way may fault on x, w or y slices. */
  CONV_TRY(st, pref_set(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &align->a,
                        sizeof align->a, err), out);
  CONV_TRY(st, pref_set(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &align->b,
                        sizeof align->b, err), out);
  /* C is D (beta = 0, in place). */
  CONV_TRY(st, pref_set(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &align->d,
                        sizeof align->d, err), out);
  CONV_TRY(st, pref_set(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &align->d,
                        sizeof align->d, err), out);
  if (dtype != CONV_DTYPE_F32) {
    /* Half inputs run on the tensor cores (their products are exact in
     * fp32); what must never happen is an fp16 accumulator, nor a split-K
     * whose partial sums are added up in the output's type (in place in D,
     * or in the workspace in D's type): a half D would round each part.
     * Split-K with fp32 parts (COMPUTE_TYPE) and none at all remain. */
    const uint64_t mask = ~(uint64_t)CUBLASLT_NUMERICAL_IMPL_FLAGS_ACCUMULATOR_16F;
    CONV_TRY(st, pref_set(pref, CUBLASLT_MATMUL_PREF_IMPL_MASK, &mask, sizeof mask, err), out);
    const uint32_t reductions = CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE;
    CONV_TRY(st,
             pref_set(pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, &reductions,
                      sizeof reductions, err),
             out);
  } else if (math == CONV_MATH_STRICT) {
    /* Belt and braces for STRICT: refuse any tensor-core or reduced-input
     * implementation even if a library setting would allow it. */
    const uint64_t mask = ~(uint64_t)(CUBLASLT_NUMERICAL_IMPL_FLAGS_TENSOR_OP_MASK |
                                      CUBLASLT_NUMERICAL_IMPL_FLAGS_INPUT_16F |
                                      CUBLASLT_NUMERICAL_IMPL_FLAGS_INPUT_16BF |
                                      CUBLASLT_NUMERICAL_IMPL_FLAGS_INPUT_TF32);
    CONV_TRY(st, pref_set(pref, CUBLASLT_MATMUL_PREF_IMPL_MASK, &mask, sizeof mask, err), out);
  }
out:
  return st;
}

conv_status conv_cublaslt_desc_create(conv_dtype dtype, conv_math math, cudaDataType_t scale,
                                      cublasLtMatmulDesc_t *desc, const char *prefix,
                                      conv_error *err) {
  /* STRICT must never reach TF32 tensor cores: plain 32F compute guarantees
   * IEEE fp32 products (the preference's mask double-checks).  Half inputs
   * take 32F compute whatever the math: fp32 sums of exact products. */
  const cublasComputeType_t compute = dtype == CONV_DTYPE_F32 && math == CONV_MATH_TF32
                                          ? CUBLAS_COMPUTE_32F_FAST_TF32
                                          : CUBLAS_COMPUTE_32F;
  return lt_check(err, cublasLtMatmulDescCreate(desc, compute, scale), prefix,
                  "cublasLtMatmulDescCreate");
}

conv_status conv_cublaslt_layout(cublasLtMatrixLayout_t *layout, cudaDataType_t type, int64_t rows,
                                 int64_t cols, int64_t ld, const char *prefix, conv_error *err) {
  return lt_check(err, cublasLtMatrixLayoutCreate(layout, type, (uint64_t)rows, (uint64_t)cols, ld),
                  prefix, "cublasLtMatrixLayoutCreate");
}

static conv_status layout_set(cublasLtMatrixLayout_t layout, cublasLtMatrixLayoutAttribute_t attr,
                              const void *value, size_t size, conv_error *err) {
  return conv_check_cublas(err, cublasLtMatrixLayoutSetAttribute(layout, attr, value, size),
                           "cublasLtMatrixLayoutSetAttribute");
}

conv_status conv_cublaslt_layout_batched(cublasLtMatrixLayout_t *layout, cudaDataType_t type,
                                         int64_t rows, int64_t cols, int64_t ld, int32_t count,
                                         int64_t stride, conv_error *err) {
  conv_status st;
  CONV_TRY(st, conv_cublaslt_layout(layout, type, rows, cols, ld, NULL, err), out);
  CONV_TRY(st, layout_set(*layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof count, err),
           out);
  CONV_TRY(st,
           layout_set(*layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride,
                      sizeof stride, err),
           out);
out:
  return st;
}

void conv_cublaslt_layouts_destroy(const conv_cublaslt_layouts *layouts) {
  if (layouts->a) cublasLtMatrixLayoutDestroy(layouts->a);
  if (layouts->b) cublasLtMatrixLayoutDestroy(layouts->b);
  if (layouts->d) cublasLtMatrixLayoutDestroy(layouts->d);
}

conv_status conv_cublaslt_heuristic(const conv_cublaslt_query *q,
                                    cublasLtMatmulHeuristicResult_t
                                        results[CONV_CUBLASLT_HEURISTIC_MAX],
                                    int *found, conv_error *err) {
  const conv_cublaslt_layouts *l = q->layouts;
  cublasLtMatmulPreference_t pref = NULL;
  conv_status st;
  *found = 0;
  CONV_TRY(st,
           lt_check(err, cublasLtMatmulPreferenceCreate(&pref), q->prefix,
                    "cublasLtMatmulPreferenceCreate"),
           out);
  CONV_TRY(st,
           conv_cublaslt_pref_fill(pref, q->dtype, q->math, CONV_CUBLASLT_WS_MAX, q->align, err),
           out);
  int returned = 0;
  const cublasStatus_t cs =
      cublasLtMatmulAlgoGetHeuristic(q->lt, q->desc, l->a, l->b, l->d, l->d, pref,
                                     CONV_CUBLASLT_HEURISTIC_MAX, results, &returned);
  /* NOT_SUPPORTED: no algorithm for this shape, which only means no candidate. */
  if (cs == CUBLAS_STATUS_NOT_SUPPORTED) goto out;
  CONV_TRY(st, lt_check(err, cs, q->prefix, "cublasLtMatmulAlgoGetHeuristic"), out);
  while (*found < returned && results[*found].state == CUBLAS_STATUS_SUCCESS &&
         results[*found].workspaceSize <= CONV_CUBLASLT_WS_MAX)
    ++*found;
out:
  if (pref) cublasLtMatmulPreferenceDestroy(pref);
  return st;
}

conv_status conv_cublaslt_ranked_algo(const conv_cublaslt_query *q, int index,
                                      const char *family,
                                      cublasLtMatmulHeuristicResult_t *picked, conv_error *err) {
  cublasLtMatmulHeuristicResult_t res[CONV_CUBLASLT_HEURISTIC_MAX];
  int found = 0;
  const conv_status st = conv_cublaslt_heuristic(q, res, &found, err);
  if (st != CONV_OK) return st;
  if (found <= index)
    return conv_error_set(err, CONV_UNSUPPORTED,
                          "%s: cuBLASLt offers %d algorithms for this GEMM, not %d", family, found,
                          index + 1);
  *picked = res[index];
  return CONV_OK;
}

conv_status conv_cublaslt_fallback_algo(const conv_cublaslt_query *q, bool *found,
                                        cublasLtMatmulAlgo_t *algo, size_t *ws_bytes,
                                        conv_error *err) {
  const uint32_t element = conv_cublaslt_element_align(q->dtype);
  const conv_gemm_align weakest = {element, element, element};
  conv_cublaslt_query loose = *q;
  loose.align = &weakest;
  cublasLtMatmulHeuristicResult_t res[CONV_CUBLASLT_HEURISTIC_MAX];
  int answers = 0;
  const conv_status st = conv_cublaslt_heuristic(&loose, res, &answers, err);
  if (st != CONV_OK) return st;
  *found = answers > 0;
  if (*found) {
    *algo = res[0].algo;
    *ws_bytes = res[0].workspaceSize;
  }
  return CONV_OK;
}

conv_status conv_cublaslt_pick_algos(const conv_cublaslt_query *q, int index, const char *family,
                                     conv_cublaslt_algos *out, conv_error *err) {
  cublasLtMatmulHeuristicResult_t picked;
  conv_status st = conv_cublaslt_ranked_algo(q, index, family, &picked, err);
  if (st != CONV_OK) return st;
  out->algo = picked.algo;
  out->ws_bytes = picked.workspaceSize;
  size_t fallback_ws = 0;
  st = conv_cublaslt_fallback_algo(q, &out->has_fallback, &out->fallback, &fallback_ws, err);
  if (st == CONV_OK && out->has_fallback && fallback_ws > out->ws_bytes)
    out->ws_bytes = fallback_ws;
  return st;
}

conv_status conv_cublaslt_offered_algos(const conv_cublaslt_query *q, int offered, int *count,
                                        conv_error *err) {
  cublasLtMatmulHeuristicResult_t res[CONV_CUBLASLT_HEURISTIC_MAX];
  int found = 0;
  const conv_status st = conv_cublaslt_heuristic(q, res, &found, err);
  if (st != CONV_OK) return st;
  *count = found < offered ? found : offered;
  return CONV_OK;
}

bool conv_cublaslt_algo_fits(const conv_cublaslt_query *q, const cublasLtMatmulAlgo_t *algo,
                             size_t *ws_bytes) {
  const conv_cublaslt_layouts *l = q->layouts;
  cublasLtMatmulHeuristicResult_t res;
  if (cublasLtMatmulAlgoCheck(q->lt, q->desc, l->a, l->b, l->d, l->d, algo, &res) !=
      CUBLAS_STATUS_SUCCESS)
    return false;
  if (res.workspaceSize > CONV_CUBLASLT_WS_MAX) return false;
  *ws_bytes = res.workspaceSize;
  return true;
}

conv_status conv_cublaslt_tail_algo(const conv_cublaslt_query *tail,
                                    const cublasLtMatmulAlgo_t *full, const char *family,
                                    cublasLtMatmulAlgo_t *algo, size_t *ws_bytes,
                                    conv_error *err) {
  /* Keeping the full chunk's kernel keeps the timing honest. */
  if (conv_cublaslt_algo_fits(tail, full, ws_bytes)) {
    *algo = *full;
    return CONV_OK;
  }
  cublasLtMatmulHeuristicResult_t res[CONV_CUBLASLT_HEURISTIC_MAX];
  int found = 0;
  const conv_status st = conv_cublaslt_heuristic(tail, res, &found, err);
  if (st != CONV_OK) return st;
  if (found == 0)
    return conv_error_set(err, CONV_UNSUPPORTED,
                          "%s: cuBLASLt has no algorithm for the last partial chunk", family);
  *algo = res[0].algo;
  *ws_bytes = res[0].workspaceSize;
  return CONV_OK;
}

uint32_t conv_cublaslt_element_offsets_align(uint32_t base, const int64_t *offsets, int count,
                                             size_t element_bytes) {
  uint32_t align = base;
  for (int i = 0; i < count; ++i) {
    if (offsets[i] <= 0) continue;
    const uint64_t low = (uint64_t)offsets[i] & (~(uint64_t)offsets[i] + 1u);
    if (low < align / element_bytes) align = (uint32_t)(low * element_bytes);
  }
  return align;
}

uint32_t conv_cublaslt_offsets_align(uint32_t base, const int64_t *offsets, int count) {
  return conv_cublaslt_element_offsets_align(base, offsets, count, sizeof(float));
}

bool conv_cublaslt_aligned(const void *ptr, uint32_t align) {
  return ((uintptr_t)ptr & (uintptr_t)(align - 1u)) == 0;
}

size_t conv_cublaslt_ws_round(size_t bytes) {
  return (bytes + CONV_CUBLASLT_WS_ALIGN - 1) / CONV_CUBLASLT_WS_ALIGN * CONV_CUBLASLT_WS_ALIGN;
}

conv_status conv_cublaslt_matmul(cublasLtHandle_t lt, cublasLtMatmulDesc_t desc,
                                 const conv_cublaslt_layouts *layouts,
                                 const cublasLtMatmulAlgo_t *algo, const void *alpha,
                                 const void *a, const void *b, const void *beta, void *d,
                                 void *workspace, size_t workspace_bytes, cudaStream_t stream,
                                 const char *prefix, conv_error *err) {
  return lt_check(err,
                  cublasLtMatmul(lt, desc, alpha, a, layouts->a, b, layouts->b, beta, d,
                                 layouts->d, d, layouts->d, algo, workspace, workspace_bytes,
                                 stream),
                  prefix, "cublasLtMatmul");
}

void conv_cublaslt_config_describe(const conv_config *config, const char *chunk, char *text,
                                   size_t size) {
  if (text == NULL || size == 0) return;
  if (config == NULL || config->count != 2)
    snprintf(text, size, "invalid config");
  else
    snprintf(text, size, "%s=%lld gemm_algo=%lld", chunk, (long long)config->values[0],
             (long long)config->values[1]);
}
