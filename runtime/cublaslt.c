/* cublaslt.c -- what every cuBLASLt GEMM candidate asks of cuBLASLt's heuristic. */
#include "runtime/internal.h"

static conv_status pref_set(cublasLtMatmulPreference_t pref,
                            cublasLtMatmulPreferenceAttributes_t attr, const void *value,
                            size_t size, conv_error *err) {
  return conv_check_cublas(err, cublasLtMatmulPreferenceSetAttribute(pref, attr, value, size),
                           "cublasLtMatmulPreferenceSetAttribute");
}

conv_status conv_cublaslt_pref_fill(cublasLtMatmulPreference_t pref, conv_math math,
                                    uint64_t max_workspace, const conv_gemm_align *align,
                                    conv_error *err) {
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
  if (math == CONV_MATH_STRICT) {
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
