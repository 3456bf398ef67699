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
 * Config values: {images per GEMM, algo_index}; algo_index ranks the
 * cuBLASLt heuristic's answers for the full chunk.
 *
 * Tests: tests/families/test_gemm_nhwc.c.
 */
#include <stdint.h>
#include <stdlib.h>

#include "algorithms/common/im2col.h"
#include "algorithms/common/gemm_family.h"

/* Past this a col buffer is not worth timing (and conv_im2col_nhwc
 * indexes it in 32 bits). */
#define GEMM_NHWC_COL_BYTES_MAX ((int64_t)4 << 30)
#define GEMM_NHWC_ALGOS_OFFERED 4

typedef struct gemm_nhwc_state {
  /* First (gemm_family.h).  Its descriptor lacks the bias pointer (the
   * heuristic's); its buffer is the col buffer. */
  conv_gemm_plan plan;
  bool direct;    /* 1x1, stride 1, no padding: B is x itself */
  int64_t pixels; /* p * q: rows of one image */
  int64_t depth;  /* r * s * c: the GEMM's inner dimension */
  int64_t x_image, y_image;
} gemm_nhwc_state;

static bool gemm_nhwc_is_direct(const conv_problem *pb) {
  return pb->r == 1 && pb->s == 1 && pb->stride_h == 1 && pb->stride_w == 1 && pb->pad_h == 0 &&
         pb->pad_w == 0;
}

static bool gemm_nhwc_applicable(const conv_problem *pb, const conv_env *env) {
  return pb != NULL && (env == NULL || env->cublaslt != NULL) && conv_problem_supported(pb) &&
         pb->direction == CONV_FORWARD && pb->layout == CONV_LAYOUT_NHWC && pb->groups == 1;
}

/* The alignment (bytes, at most 16) that base + i * offset keeps for
 * every i, offset in floats. */
static uint32_t gemm_nhwc_offset_align(int64_t offset) {
  return conv_cublaslt_offsets_align(16, &offset, 1);
}

static conv_status gemm_nhwc_desc_attr(cublasLtMatmulDesc_t desc,
                                       cublasLtMatmulDescAttributes_t attr, const void *value,
                                       size_t size, conv_error *err) {
  return conv_check_cublas(err, cublasLtMatmulDescSetAttribute(desc, attr, value, size),
                           "cublasLtMatmulDescSetAttribute");
}

/* The matmul descriptor: TF32 tensor cores only in TF32 mode, A read
 * transposed, the problem's epilogue, and `bias` where it is known (run
 * time; the heuristic needs only the epilogue's kind). */
static conv_status gemm_nhwc_desc_create(const conv_problem *pb, const float *bias,
                                  cublasLtMatmulDesc_t *desc, conv_error *err) {
  conv_status st;
  CONV_TRY(st, conv_cublaslt_desc_create(pb->math, CUDA_R_32F, desc, NULL, err), out);
  const cublasOperation_t transpose = CUBLAS_OP_T;
  CONV_TRY(
      st,
      gemm_nhwc_desc_attr(*desc, CUBLASLT_MATMUL_DESC_TRANSA, &transpose, sizeof transpose, err),
      out);
  if (pb->epilogue != CONV_EPILOGUE_NONE) {
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
 * input rows (rsc x rows), D the output (k x rows). */
static conv_status gemm_nhwc_layouts(const conv_problem *pb, const void *state, int64_t images,
                              conv_cublaslt_layouts *lay, conv_error *err) {
  const gemm_nhwc_state *st = state;
  const int64_t rows = images * st->pixels;
  conv_status s;
  CONV_TRY(s, conv_cublaslt_layout(&lay->a, CUDA_R_32F, st->depth, pb->k, st->depth, NULL, err),
           out);
  CONV_TRY(s, conv_cublaslt_layout(&lay->b, CUDA_R_32F, st->depth, rows, st->depth, NULL, err),
           out);
  CONV_TRY(s, conv_cublaslt_layout(&lay->d, CUDA_R_32F, pb->k, rows, pb->k, NULL, err), out);
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
  st->pixels = sh.p * sh.q;
  st->depth = pb->r * pb->s * pb->c;
  st->x_image = pb->h * pb->w * pb->c;
  st->y_image = st->pixels * pb->k;
  if (!st->direct) {
    const int64_t per_image = st->pixels * st->depth * (int64_t)sizeof(float);
    if (st->depth > GEMM_NHWC_COL_BYTES_MAX || st->pixels > GEMM_NHWC_COL_BYTES_MAX / st->depth ||
        chunk > GEMM_NHWC_COL_BYTES_MAX / per_image) {
      s = conv_error_set(err, CONV_UNSUPPORTED,
                         "gemm_nhwc: col buffer for %lld images exceeds %lld bytes",
                         (long long)chunk, (long long)GEMM_NHWC_COL_BYTES_MAX);
      goto fail;
    }
    st->plan.buffer_bytes = (size_t)(chunk * per_image);
  }
  /* Chunks start at these offsets from x (direct) and y; the col buffer
   * and the filter start where the caller's pointers do. */
  st->plan.align.a = 16;
  st->plan.align.b = st->direct ? gemm_nhwc_offset_align(chunk * st->x_image) : 16;
  st->plan.align.d = gemm_nhwc_offset_align(chunk * st->y_image);
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

/* Chunk sizes worth timing: the whole batch (one GEMM) or, where its col
 * buffer is too large, the largest power of two that fits; and the largest
 * power of two whose col buffer stays within half the L2 (written, then
 * read back while still cached).  The 1x1 path needs no buffer. */
static int gemm_nhwc_chunks(const conv_problem *pb, const conv_env *env,
                     int64_t out[CONV_GEMM_CHUNKS_MAX]) {
  if (gemm_nhwc_is_direct(pb)) {
    out[0] = pb->n;
    return 1;
  }
  conv_shape sh;
  if (conv_problem_shape(pb, &sh) != CONV_OK) return 0;
  const int64_t depth = pb->r * pb->s * pb->c, pixels = sh.p * sh.q;
  if (depth > GEMM_NHWC_COL_BYTES_MAX || pixels > GEMM_NHWC_COL_BYTES_MAX / depth) return 0;
  const int64_t per_image = pixels * depth * (int64_t)sizeof(float);
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
    .scope = "fp32 NHWC forward convolutions with one group",
    .algos_offered = GEMM_NHWC_ALGOS_OFFERED,
    .env_optional = true,
    .applicable = gemm_nhwc_applicable,
    .chunks = gemm_nhwc_chunks,
    .check_chunk = gemm_nhwc_check_chunk,
    .create = gemm_nhwc_create,
    .layouts = gemm_nhwc_layouts,
};
CONV_GEMM_FAMILY_CALLBACKS(gemm_nhwc, gemm_nhwc_family)

/* im2col (unless 1x1) and one GEMM for images [n0, n0 + images). */
static conv_status gemm_nhwc_run_chunk(const conv_exec *ex, cublasLtMatmulDesc_t desc, int64_t n0,
                                int64_t images, cudaStream_t stream, conv_error *err) {
  const gemm_nhwc_state *st = ex->state;
  const float *b = ex->x + n0 * st->x_image;
  if (!st->direct) {
    float *col = (float *)((char *)ex->workspace + st->plan.gemm_ws_bytes);
    conv_status s = conv_check_cuda(
        err, conv_im2col_nhwc(ex->problem, ex->x, n0, images, col, stream), "im2col launch");
    if (s != CONV_OK) return s;
    b = col;
  }
  return conv_gemm_matmul(&gemm_nhwc_family, ex, desc, conv_gemm_chunk_shape(&st->plan, images),
                          false, st->plan.gemm_ws_bytes, ex->w, b, 0.0f, ex->y + n0 * st->y_image,
                          stream, err);
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
  if (ex->problem->epilogue != CONV_EPILOGUE_NONE)
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
    .version = 1,
    .name = "gemm_nhwc",
    CONV_ALGORITHM_CALLBACKS(gemm_nhwc),
};
