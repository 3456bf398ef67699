/*
 * gemm_nhwc.c -- dense convolution on channels-last tensors as one
 * cuBLASLt GEMM per chunk of images:
 *   y[(n p q)][k] = col[(n p q)][(r s c)] * w[k][(r s c)]^T
 *
 * In NHWC the output is already the GEMM's row-major (pixels x channels)
 * result and the KRSC filter its row-major (k x rsc) operand, so nothing
 * but the input windows has to move.  A 1x1 filter with stride 1 and no
 * padding reads x itself (pixels x c); any other filter first gathers each
 * output pixel's window into a row of a col buffer (conv_im2col_nhwc).
 * ConvNeXt's 2x2 stride-2 and 4x4 stride-4 "patchify" layers are the case
 * that made this family: their windows do not overlap, so col is x
 * reordered and no larger, and cuDNN's fp32 NHWC engines run them at a
 * third of the GEMM's speed.
 *
 * cuBLASLt is column-major, and a row-major matrix is its transpose seen
 * column-major, so we ask for
 *   D (m = k, n = rows, ld = k) = op(A) (k x rsc) * B (rsc x rows, ld = rsc)
 * with A the filter read transposed (rsc x k, ld = rsc) and B col (or x,
 * ld = c).  The bias and ReLU run in cuBLASLt's epilogue, whose bias is one
 * value per row of D: per output channel here.
 *
 * Half problems (fp16, bf16): A, B and D of the type, fp32 accumulation
 * (32F compute, fp32 alpha and beta).  With an epilogue the GEMM writes
 * its fp32 sums to a buffer instead and conv_bias_act_round adds the fp32
 * bias, applies the ReLU and rounds once: cuBLASLt documents the bias of
 * its epilogue as D's type for these kernels (cublasLt.h,
 * CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE: fp32 is an exception for IMMA and
 * fp8 kernels only), and rounding our fp32 bias to half, or the sums to
 * half before the bias, would be a second rounding.
 *
 * Config values: {images per GEMM, algo_index}; algo_index ranks the
 * cuBLASLt heuristic's answers for the full chunk.
 *
 * Tests: tests/families/test_gemm_nhwc.c.
 */
#include <stdint.h>
#include <stdlib.h>

#include "algorithms/common/im2col.h"
#include "algorithms/common/kernels.h"
#include "algorithms/common/gemm_family.h"

/* Past this a col buffer is not worth timing (and conv_im2col_nhwc
 * indexes it in 32 bits). */
#define GEMM_NHWC_COL_BYTES_MAX ((int64_t)4 << 30)
#define GEMM_NHWC_ALGOS_OFFERED 4

typedef struct gemm_nhwc_state {
  /* First (gemm_family.h).  Its descriptor lacks the bias pointer (the
   * heuristic's); its buffers: [col | fp32 sums], each 256-byte aligned. */
  conv_gemm_plan plan;
  bool direct;    /* 1x1, stride 1, no padding: B is x itself */
  /* A half problem with an epilogue: D is the fp32 sums buffer, which
   * conv_bias_act_round takes to y. */
  bool round_after;
  size_t element;    /* bytes of an element of x, w and y */
  size_t col_bytes;  /* the col buffer's, rounded up to CONV_CUBLASLT_WS_ALIGN */
  int64_t pixels; /* p * q: rows of one image */
  int64_t depth;  /* r * s * c: the GEMM's inner dimension */
  int64_t x_image, y_image;
} gemm_nhwc_state;

static bool gemm_nhwc_is_direct(const conv_problem *pb) {
  return pb->r == 1 && pb->s == 1 && pb->stride_h == 1 && pb->stride_w == 1 && pb->pad_h == 0 &&
         pb->pad_w == 0;
}

/* fp32, fp16 and bf16 alike: the dtype only changes the GEMM's types. */
static bool gemm_nhwc_applicable(const conv_problem *pb, const conv_env *env) {
  return pb != NULL && (env == NULL || env->cublaslt != NULL) &&
         conv_problem_supported_any_dtype(pb) && pb->direction == CONV_FORWARD &&
         pb->layout == CONV_LAYOUT_NHWC && pb->groups == 1;
}

/* A half problem whose epilogue runs after the GEMM (file comment). */
static bool gemm_nhwc_rounds_after(const conv_problem *pb) {
  return pb->dtype != CONV_DTYPE_F32 && pb->epilogue != CONV_EPILOGUE_NONE;
}

/* The alignment (bytes, at most 16) that base + i * offset keeps for
 * every i, offset in elements of `element` bytes. */
static uint32_t gemm_nhwc_offset_align(int64_t offset, size_t element) {
  return conv_cublaslt_element_offsets_align(16, &offset, 1, element);
}

static conv_status gemm_nhwc_desc_attr(cublasLtMatmulDesc_t desc,
                                       cublasLtMatmulDescAttributes_t attr, const void *value,
                                       size_t size, conv_error *err) {
  return conv_check_cublas(err, cublasLtMatmulDescSetAttribute(desc, attr, value, size),
                           "cublasLtMatmulDescSetAttribute");
}

/* The matmul descriptor: TF32 tensor cores only for fp32 in TF32 mode, A
 * read transposed, the problem's epilogue (unless it runs after the GEMM),
 * and `bias` where it is known (run time; the heuristic needs only the
 * epilogue's kind). */
static conv_status gemm_nhwc_desc_create(const conv_problem *pb, const float *bias,
                                  cublasLtMatmulDesc_t *desc, conv_error *err) {
  conv_status st;
  CONV_TRY(st, conv_cublaslt_desc_create(pb->dtype, pb->math, CUDA_R_32F, desc, NULL, err), out);
  const cublasOperation_t transpose = CUBLAS_OP_T;
  CONV_TRY(
      st,
      gemm_nhwc_desc_attr(*desc, CUBLASLT_MATMUL_DESC_TRANSA, &transpose, sizeof transpose, err),
      out);
  if (pb->epilogue != CONV_EPILOGUE_NONE && !gemm_nhwc_rounds_after(pb)) {
    const cublasLtEpilogue_t epilogue = pb->epilogue == CONV_EPILOGUE_BIAS_RELU
                                            ? CUBLASLT_EPILOGUE_RELU_BIAS
                                            : CUBLASLT_EPILOGUE_BIAS;
    CONV_TRY(
        st,
        gemm_nhwc_desc_attr(*desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof epilogue, err),
        out);
    if (bias != NULL)
      CONV_TRY(
          st,
          gemm_nhwc_desc_attr(*desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias, err),
          out);
  }
out:
  return st;
}

/* The layouts of one chunk of `images`: A the filter (rsc x k), B the
 * input rows (rsc x rows), D the output (k x rows), in the problem's
 * dtype; D fp32 where the epilogue runs after the GEMM. */
static conv_status gemm_nhwc_layouts(const conv_problem *pb, const void *state, int64_t images,
                              conv_cublaslt_layouts *lay, conv_error *err) {
  const gemm_nhwc_state *st = state;
  const int64_t rows = images * st->pixels;
  const cudaDataType_t type = conv_cublaslt_data_type(pb->dtype),
                       d_type = st->round_after ? CUDA_R_32F : type;
  conv_status s;
  CONV_TRY(s, conv_cublaslt_layout(&lay->a, type, st->depth, pb->k, st->depth, NULL, err), out);
  CONV_TRY(s, conv_cublaslt_layout(&lay->b, type, st->depth, rows, st->depth, NULL, err), out);
  CONV_TRY(s, conv_cublaslt_layout(&lay->d, d_type, pb->k, rows, pb->k, NULL, err), out);
out:
  return s;
}

/* Shapes, alignments, descriptor and the full chunk's layouts. */
static conv_status gemm_nhwc_create(const conv_problem *pb, int64_t chunk, void **out,
                             conv_error *err) {
  conv_shape sh;
  if (conv_problem_shape(pb, &sh) != CONV_OK)
    return conv_error_set(err, CONV_INVALID_ARGUMENT, "gemm_nhwc: invalid problem");
  gemm_nhwc_state *st = calloc(1, sizeof *st);
  if (st == NULL) return conv_error_set(err, CONV_OUT_OF_MEMORY, "gemm_nhwc: out of memory");
  conv_status s = CONV_OK;
  st->plan.chunk = chunk;
  st->direct = gemm_nhwc_is_direct(pb);
  st->round_after = gemm_nhwc_rounds_after(pb);
  st->element = conv_dtype_bytes(pb->dtype);
  st->pixels = sh.p * sh.q;
  st->depth = pb->r * pb->s * pb->c;
  st->x_image = pb->h * pb->w * pb->c;
  st->y_image = st->pixels * pb->k;
  if (!st->direct) {
    const int64_t per_image = st->pixels * st->depth * (int64_t)st->element;
    if (st->depth > GEMM_NHWC_COL_BYTES_MAX || st->pixels > GEMM_NHWC_COL_BYTES_MAX / st->depth ||
        chunk > GEMM_NHWC_COL_BYTES_MAX / per_image) {
      s = conv_error_set(err, CONV_UNSUPPORTED,
                         "gemm_nhwc: col buffer for %lld images exceeds %lld bytes",
                         (long long)chunk, (long long)GEMM_NHWC_COL_BYTES_MAX);
      goto fail;
    }
    st->col_bytes = (size_t)(chunk * per_image);
  }
  st->plan.buffer_bytes = st->col_bytes;
  if (st->round_after) {
    /* The sums of a chunk, fp32: y_image < 2^31 (a valid problem) and the
     * chunk at most the batch. */
    st->col_bytes = conv_cublaslt_ws_round(st->col_bytes);
    st->plan.buffer_bytes = st->col_bytes + (size_t)(chunk * st->y_image) * sizeof(float);
  }
  /* Chunks start at these offsets from x (direct) and y; the col buffer,
   * the sums buffer and the filter start where the caller's pointers (or
   * a 256-byte boundary of the workspace) do. */
  st->plan.align.a = 16;
  st->plan.align.b =
      st->direct ? gemm_nhwc_offset_align(chunk * st->x_image, st->element) : 16;
  st->plan.align.d =
      st->round_after ? 16 : gemm_nhwc_offset_align(chunk * st->y_image, st->element);
  CONV_TRY(s, gemm_nhwc_desc_create(pb, NULL, &st->plan.desc, err), fail);
  CONV_TRY(s, gemm_nhwc_layouts(pb, st, chunk, &st->plan.full.lay, err), fail);
  *out = st;
  return CONV_OK;
fail:
  conv_gemm_release(st);
  return s;
}

static conv_status gemm_nhwc_check_chunk(const conv_problem *pb, int64_t chunk, conv_error *err) {
  if (chunk < 1 || chunk > pb->n)
    return conv_error_set(err, CONV_UNSUPPORTED, "gemm_nhwc: batch chunk %lld not in [1, %lld]",
                          (long long)chunk, (long long)pb->n);
  return CONV_OK;
}

/* Chunk sizes worth timing: the whole batch (one GEMM) or, where its
 * buffers are too large, the largest power of two that fits; and the
 * largest power of two whose buffers stay within half the L2 (written,
 * then read back while still cached).  The buffers: col, unless 1x1, and
 * a half problem's fp32 sums where its epilogue runs after the GEMM; the
 * 1x1 path of the others needs none. */
static int gemm_nhwc_chunks(const conv_problem *pb, const conv_env *env,
                     int64_t out[CONV_GEMM_CHUNKS_MAX]) {
  const bool direct = gemm_nhwc_is_direct(pb);
  if (direct && !gemm_nhwc_rounds_after(pb)) {
    out[0] = pb->n;
    return 1;
  }
  conv_shape sh;
  if (conv_problem_shape(pb, &sh) != CONV_OK) return 0;
  const int64_t depth = pb->r * pb->s * pb->c, pixels = sh.p * sh.q;
  if (depth > GEMM_NHWC_COL_BYTES_MAX || pixels > GEMM_NHWC_COL_BYTES_MAX / depth) return 0;
  const int64_t col_image = direct ? 0 : pixels * depth * (int64_t)conv_dtype_bytes(pb->dtype);
  const int64_t sums_image =
      gemm_nhwc_rounds_after(pb) ? pixels * pb->k * (int64_t)sizeof(float) : 0;
  const int64_t per_image = col_image + sums_image;
  if (per_image > GEMM_NHWC_COL_BYTES_MAX) return 0;
  int64_t whole = pb->n;
  while (whole > 1 && whole > GEMM_NHWC_COL_BYTES_MAX / per_image) whole = (whole + 1) / 2;
  int count = 0;
  out[count++] = whole;
  const int64_t l2 = env != NULL && env->device.l2_bytes > 0 ? env->device.l2_bytes
                                                             : ((int64_t)32 << 20);
  int64_t cached = 1;
  while (cached * 2 < whole && cached * 2 * per_image <= l2 / 2) cached *= 2;
  if (cached < whole && cached * per_image <= l2 / 2) out[count++] = cached;
  return count;
}

static const conv_gemm_family gemm_nhwc_family = {
    .name = "gemm_nhwc",
    .scope = "NHWC forward convolutions with one group (fp32, fp16, bf16)",
    .algos_offered = GEMM_NHWC_ALGOS_OFFERED,
    .env_optional = true,
    .applicable = gemm_nhwc_applicable,
    .chunks = gemm_nhwc_chunks,
    .check_chunk = gemm_nhwc_check_chunk,
    .create = gemm_nhwc_create,
    .layouts = gemm_nhwc_layouts,
};
CONV_GEMM_FAMILY_CALLBACKS(gemm_nhwc, gemm_nhwc_family)

/* The sums of a half problem's chunk, fp32 (gemm_nhwc_state.round_after):
 * y's images, with the bias and ReLU still to come, rounded once. */
static conv_status gemm_nhwc_round_chunk(const conv_exec *ex, const float *sums, int64_t n0,
                                         int64_t images, cudaStream_t stream, conv_error *err) {
  const gemm_nhwc_state *st = ex->state;
  conv_problem chunk = *ex->problem;
  chunk.n = images;
  return conv_check_cuda(err,
                         conv_bias_act_round(&chunk, sums,
                                             conv_gemm_at_mut(ex->y, n0 * st->y_image, st->element),
                                             ex->bias, stream),
                         "gemm_nhwc: bias/activation launch");
}

/* im2col (unless 1x1) and one GEMM for images [n0, n0 + images), and the
 * epilogue's pass where it runs after the GEMM. */
static conv_status gemm_nhwc_run_chunk(const conv_exec *ex, cublasLtMatmulDesc_t desc, int64_t n0,
                                int64_t images, cudaStream_t stream, conv_error *err) {
  const gemm_nhwc_state *st = ex->state;
  char *buffers =
      st->plan.buffer_bytes > 0 ? (char *)ex->workspace + st->plan.gemm_ws_bytes : NULL;
  const void *b = conv_gemm_at(ex->x, n0 * st->x_image, st->element);
  if (!st->direct) {
    conv_status s = conv_check_cuda(
        err, conv_im2col_nhwc(ex->problem, ex->x, n0, images, buffers, stream), "im2col launch");
    if (s != CONV_OK) return s;
    b = buffers;
  }
  float *sums = st->round_after ? (float *)(buffers + st->col_bytes) : NULL;
  void *d = sums != NULL ? (void *)sums : conv_gemm_at_mut(ex->y, n0 * st->y_image, st->element);
  conv_status s = conv_gemm_matmul(&gemm_nhwc_family, ex, desc,
                                   conv_gemm_chunk_shape(&st->plan, images), false,
                                   st->plan.gemm_ws_bytes, ex->w, b, 0.0f, d, stream, err);
  if (s == CONV_OK && sums != NULL) s = gemm_nhwc_round_chunk(ex, sums, n0, images, stream, err);
  return s;
}

static conv_status gemm_nhwc_run(const conv_exec *ex, cudaStream_t stream, conv_error *err) {
  conv_status s = conv_gemm_check_forward_run(ex, false, "gemm_nhwc", err);
  if (s != CONV_OK) return s;
  const void *ptrs[] = {ex->x, ex->w, ex->y, ex->bias};
  for (int i = 0; i < 4; ++i)
    if (ptrs[i] != NULL && !conv_cublaslt_aligned(ptrs[i], CONV_POINTER_ALIGNMENT))
      return conv_error_set(err, CONV_INVALID_ARGUMENT,
                            "gemm_nhwc: a tensor pointer is not %d-byte aligned",
                            CONV_POINTER_ALIGNMENT);
  /* The bias pointer lives in the descriptor, and a plan may run on
   * several threads at once: each run describes its own matmul. */
  const gemm_nhwc_state *st = ex->state;
  cublasLtMatmulDesc_t desc = st->plan.desc;
  if (ex->problem->epilogue != CONV_EPILOGUE_NONE && !st->round_after)
    s = gemm_nhwc_desc_create(ex->problem, ex->bias, &desc, err);
  const int64_t chunk = st->plan.chunk;
  for (int64_t n0 = 0; n0 < ex->problem->n && s == CONV_OK; n0 += chunk) {
    const int64_t rest = ex->problem->n - n0;
    s = gemm_nhwc_run_chunk(ex, desc, n0, rest < chunk ? rest : chunk, stream, err);
  }
  if (desc != st->plan.desc && desc != NULL) cublasLtMatmulDescDestroy(desc);
  return s;
}

const conv_algorithm conv_algorithm_gemm_nhwc = {
    .id = CONV_ALGO_GEMM_NHWC,
    /* 2: fp16 and bf16 */
    .version = 2,
    .name = "gemm_nhwc",
    CONV_ALGORITHM_CALLBACKS(gemm_nhwc),
    .libraries = CONV_LIBRARY_CUBLASLT,
};
