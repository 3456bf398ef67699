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
#include "algorithms/common/cublaslt.h"

/* Past this a col buffer is not worth timing (and conv_im2col_nhwc
 * indexes it in 32 bits). */
#define GN_COL_BYTES_MAX ((int64_t)4 << 30)
#define GN_ALGOS_OFFERED 4

typedef struct gn_gemm {
  conv_cublaslt_layouts lay;
  cublasLtMatmulAlgo_t algo;
  size_t ws_bytes;
} gn_gemm;

typedef struct gn_state {
  cublasLtMatmulDesc_t desc; /* without the bias pointer: the heuristic's */
  gn_gemm full, tail;        /* tail: the last, partial chunk of images   */
  bool has_tail;
  bool direct; /* 1x1, stride 1, no padding: B is x itself */
  int64_t chunk;
  int64_t pixels; /* p * q: rows of one image */
  int64_t depth;  /* r * s * c: the GEMM's inner dimension */
  int64_t x_image, y_image;
  conv_gemm_align align;
  size_t gemm_ws_bytes, col_offset, col_bytes;
} gn_state;

static bool gn_is_direct(const conv_problem *pb) {
  return pb->r == 1 && pb->s == 1 && pb->stride_h == 1 && pb->stride_w == 1 && pb->pad_h == 0 &&
         pb->pad_w == 0;
}

static bool gn_applicable(const conv_problem *pb, const conv_env *env) {
  return pb != NULL && (env == NULL || env->cublaslt != NULL) && conv_problem_supported(pb) &&
         pb->direction == CONV_FORWARD && pb->layout == CONV_LAYOUT_NHWC && pb->groups == 1;
}

static void gn_release(void *state) {
  gn_state *st = state;
  if (st == NULL) return;
  conv_cublaslt_layouts_destroy(&st->full.lay);
  conv_cublaslt_layouts_destroy(&st->tail.lay);
  if (st->desc) cublasLtMatmulDescDestroy(st->desc);
  free(st);
}

/* The alignment (bytes, at most 16) that base + i * offset keeps for
 * every i, offset in floats. */
static uint32_t gn_offset_align(int64_t offset) {
  return conv_cublaslt_offsets_align(16, &offset, 1);
}

static conv_status gn_desc_attr(cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attr,
                                const void *value, size_t size, conv_error *err) {
  return conv_check_cublas(err, cublasLtMatmulDescSetAttribute(desc, attr, value, size),
                           "cublasLtMatmulDescSetAttribute");
}

/* The matmul descriptor: TF32 tensor cores only in TF32 mode, A read
 * transposed, the problem's epilogue, and `bias` where it is known (run
 * time; the heuristic needs only the epilogue's kind). */
static conv_status gn_desc_create(const conv_problem *pb, const float *bias,
                                  cublasLtMatmulDesc_t *desc, conv_error *err) {
  conv_status st;
  CONV_TRY(st, conv_cublaslt_desc_create(pb->math, CUDA_R_32F, desc, NULL, err), out);
  const cublasOperation_t transpose = CUBLAS_OP_T;
  CONV_TRY(st, gn_desc_attr(*desc, CUBLASLT_MATMUL_DESC_TRANSA, &transpose, sizeof transpose, err),
           out);
  if (pb->epilogue != CONV_EPILOGUE_NONE) {
    const cublasLtEpilogue_t epilogue = pb->epilogue == CONV_EPILOGUE_BIAS_RELU
                                            ? CUBLASLT_EPILOGUE_RELU_BIAS
                                            : CUBLASLT_EPILOGUE_BIAS;
    CONV_TRY(st, gn_desc_attr(*desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof epilogue,
                              err),
             out);
    if (bias != NULL)
      CONV_TRY(st, gn_desc_attr(*desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias, err),
               out);
  }
out:
  return st;
}

/* The layouts of one chunk of `images`: A the filter (rsc x k), B the
 * input rows (rsc x rows), D the output (k x rows). */
static conv_status gn_gemm_layouts(const conv_problem *pb, const gn_state *st, int64_t images,
                                   gn_gemm *g, conv_error *err) {
  const int64_t rows = images * st->pixels;
  conv_status s;
  CONV_TRY(s, conv_cublaslt_layout(&g->lay.a, CUDA_R_32F, st->depth, pb->k, st->depth, NULL, err),
           out);
  CONV_TRY(s, conv_cublaslt_layout(&g->lay.b, CUDA_R_32F, st->depth, rows, st->depth, NULL, err),
           out);
  CONV_TRY(s, conv_cublaslt_layout(&g->lay.d, CUDA_R_32F, pb->k, rows, pb->k, NULL, err), out);
out:
  return s;
}

/* GEMM `g` as the heuristic is asked about it. */
static conv_cublaslt_query gn_query(const conv_problem *pb, const conv_env *env,
                                    const gn_state *st, const gn_gemm *g) {
  return (conv_cublaslt_query){.lt = env->cublaslt, .desc = st->desc, .layouts = &g->lay,
                               .math = pb->math, .align = &st->align, .prefix = NULL};
}

/* Shapes, alignments, descriptor and the full chunk's layouts. */
static conv_status gn_state_create(const conv_problem *pb, int64_t chunk, gn_state **out,
                                   conv_error *err) {
  conv_shape sh;
  if (conv_problem_shape(pb, &sh) != CONV_OK)
    return conv_error_set(err, CONV_INVALID_ARGUMENT, "gemm_nhwc: invalid problem");
  gn_state *st = calloc(1, sizeof *st);
  if (st == NULL) return conv_error_set(err, CONV_OUT_OF_MEMORY, "gemm_nhwc: out of memory");
  conv_status s = CONV_OK;
  st->chunk = chunk;
  st->direct = gn_is_direct(pb);
  st->pixels = sh.p * sh.q;
  st->depth = pb->r * pb->s * pb->c;
  st->x_image = pb->h * pb->w * pb->c;
  st->y_image = st->pixels * pb->k;
  if (!st->direct) {
    const int64_t per_image = st->pixels * st->depth * (int64_t)sizeof(float);
    if (st->depth > GN_COL_BYTES_MAX || st->pixels > GN_COL_BYTES_MAX / st->depth ||
        chunk > GN_COL_BYTES_MAX / per_image) {
      s = conv_error_set(err, CONV_UNSUPPORTED,
                         "gemm_nhwc: col buffer for %lld images exceeds %lld bytes",
                         (long long)chunk, (long long)GN_COL_BYTES_MAX);
      goto fail;
    }
    st->col_bytes = (size_t)(chunk * per_image);
  }
  /* Chunks start at these offsets from x (direct) and y; the col buffer
   * and the filter start where the caller's pointers do. */
  st->align.a = 16;
  st->align.b = st->direct ? gn_offset_align(chunk * st->x_image) : 16;
  st->align.d = gn_offset_align(chunk * st->y_image);
  CONV_TRY(s, gn_desc_create(pb, NULL, &st->desc, err), fail);
  CONV_TRY(s, gn_gemm_layouts(pb, st, chunk, &st->full, err), fail);
  *out = st;
  return CONV_OK;
fail:
  gn_release(st);
  return s;
}

/* The full chunk's algo (the heuristic's algo_index-th) and, where the
 * batch does not divide, the same algo for the tail if it takes it, else
 * the heuristic's first for the tail's shape. */
static conv_status gn_pick_algos(const conv_problem *pb, conv_env *env, gn_state *st,
                                 int algo_index, conv_error *err) {
  const conv_cublaslt_query full = gn_query(pb, env, st, &st->full);
  cublasLtMatmulHeuristicResult_t picked;
  conv_status s;
  CONV_TRY(s, conv_cublaslt_ranked_algo(&full, algo_index, "gemm_nhwc", &picked, err), out);
  st->full.algo = picked.algo;
  st->full.ws_bytes = picked.workspaceSize;
  const int64_t rest = pb->n % st->chunk;
  if (rest != 0) {
    st->has_tail = true;
    gn_gemm *t = &st->tail;
    CONV_TRY(s, gn_gemm_layouts(pb, st, rest, t, err), out);
    const conv_cublaslt_query tail = gn_query(pb, env, st, t);
    CONV_TRY(s,
             conv_cublaslt_tail_algo(&tail, &st->full.algo, "gemm_nhwc", &t->algo, &t->ws_bytes,
                                     err),
             out);
  }
out:
  return s;
}

static conv_status gn_prepare(const conv_problem *pb, conv_env *env, const conv_config *config,
                              conv_prepared *out, conv_error *err) {
  if (pb == NULL || env == NULL || env->cublaslt == NULL || config == NULL || out == NULL)
    return conv_error_set(err, CONV_INVALID_ARGUMENT, "gemm_nhwc: NULL argument");
  if (!gn_applicable(pb, env))
    return conv_error_set(err, CONV_UNSUPPORTED,
                          "gemm_nhwc: only fp32 NHWC forward convolutions with one group");
  /* The config may come from a shipped cache: trust none of it. */
  const conv_status checked = conv_config_check(config, "gemm_nhwc", 2, INT64_MIN, INT64_MAX, err);
  if (checked != CONV_OK) return checked;
  const int64_t chunk = config->values[0], algo_index = config->values[1];
  if (chunk < 1 || chunk > pb->n)
    return conv_error_set(err, CONV_UNSUPPORTED, "gemm_nhwc: batch chunk %lld not in [1, %lld]",
                          (long long)chunk, (long long)pb->n);
  if (algo_index < 0 || algo_index >= CONV_CUBLASLT_HEURISTIC_MAX)
    return conv_error_set(err, CONV_UNSUPPORTED, "gemm_nhwc: gemm algo %lld not in [0, %d)",
                          (long long)algo_index, CONV_CUBLASLT_HEURISTIC_MAX);
  gn_state *st = NULL;
  conv_status s;
  CONV_TRY(s, gn_state_create(pb, chunk, &st, err), fail);
  CONV_TRY(s, gn_pick_algos(pb, env, st, (int)algo_index, err), fail);
  size_t ws = st->full.ws_bytes;
  if (st->has_tail && st->tail.ws_bytes > ws) ws = st->tail.ws_bytes;
  st->gemm_ws_bytes = conv_cublaslt_ws_round(ws);
  st->col_offset = st->gemm_ws_bytes;
  out->state = st;
  out->workspace_bytes = st->col_offset + st->col_bytes;
  out->arith = CONV_ARITH_DIRECT;
  /* A fixed cuBLASLt algorithm gives bit-identical results run to run on
   * one GPU (cuBLAS's reproducibility: split-K sums are sequential). */
  out->deterministic = true;
  return CONV_OK;
fail:
  gn_release(st);
  return s;
}

/* Chunk sizes worth timing: the whole batch (one GEMM) or, where its col
 * buffer is too large, the largest power of two that fits; and the largest
 * power of two whose col buffer stays within half the L2 (written, then
 * read back while still cached).  The 1x1 path needs no buffer. */
static int gn_chunks(const conv_problem *pb, const conv_env *env, int64_t out[2]) {
  if (gn_is_direct(pb)) {
    out[0] = pb->n;
    return 1;
  }
  conv_shape sh;
  if (conv_problem_shape(pb, &sh) != CONV_OK) return 0;
  const int64_t depth = pb->r * pb->s * pb->c, pixels = sh.p * sh.q;
  if (depth > GN_COL_BYTES_MAX || pixels > GN_COL_BYTES_MAX / depth) return 0;
  const int64_t per_image = pixels * depth * (int64_t)sizeof(float);
  if (per_image > GN_COL_BYTES_MAX) return 0;
  int64_t whole = pb->n;
  while (whole > 1 && whole > GN_COL_BYTES_MAX / per_image) whole = (whole + 1) / 2;
  int count = 0;
  out[count++] = whole;
  const int64_t l2 = env != NULL && env->device.l2_bytes > 0 ? env->device.l2_bytes
                                                             : ((int64_t)32 << 20);
  int64_t cached = 1;
  while (cached * 2 < whole && cached * 2 * per_image <= l2 / 2) cached *= 2;
  if (cached < whole && cached * per_image <= l2 / 2) out[count++] = cached;
  return count;
}

/* Algos configs() offers for one chunk (0: none). */
static conv_status gn_count_algos(const conv_problem *pb, conv_env *env, int64_t chunk,
                                  int *count, conv_error *err) {
  gn_state *st = NULL;
  conv_status s = gn_state_create(pb, chunk, &st, err);
  if (s == CONV_OK) {
    const conv_cublaslt_query q = gn_query(pb, env, st, &st->full);
    s = conv_cublaslt_offered_algos(&q, GN_ALGOS_OFFERED, count, err);
  }
  gn_release(st);
  return s;
}

static conv_status gn_configs(const conv_problem *pb, conv_env *env, conv_config *out, int max,
                              int *count, conv_error *err) {
  if (pb == NULL || count == NULL || (max > 0 && out == NULL))
    return conv_error_set(err, CONV_INVALID_ARGUMENT, "gemm_nhwc: NULL argument");
  *count = 0;
  if (env == NULL || !gn_applicable(pb, env)) return CONV_OK;
  int64_t chunks[2];
  const int n_chunks = gn_chunks(pb, env, chunks);
  return conv_cublaslt_chunk_configs(pb, env, chunks, n_chunks, gn_count_algos, out, max, count,
                                     err);
}

/* im2col (unless 1x1) and one GEMM for images [n0, n0 + images). */
static conv_status gn_run_chunk(const conv_exec *ex, cublasLtMatmulDesc_t desc, int64_t n0,
                                int64_t images, cudaStream_t stream, conv_error *err) {
  const gn_state *st = ex->state;
  const gn_gemm *g = images == st->chunk ? &st->full : &st->tail;
  const float *b = ex->x + n0 * st->x_image;
  if (!st->direct) {
    float *col = (float *)((char *)ex->workspace + st->col_offset);
    conv_status s = conv_check_cuda(
        err, conv_im2col_nhwc(ex->problem, ex->x, n0, images, col, stream), "im2col launch");
    if (s != CONV_OK) return s;
    b = col;
  }
  const float one = 1.0f, zero = 0.0f;
  float *d = ex->y + n0 * st->y_image;
  return conv_check_cublas(err,
                           cublasLtMatmul(ex->env->cublaslt, desc, &one, ex->w, g->lay.a, b,
                                          g->lay.b, &zero, d, g->lay.d, d, g->lay.d, &g->algo,
                                          st->gemm_ws_bytes ? ex->workspace : NULL,
                                          st->gemm_ws_bytes, stream),
                           "cublasLtMatmul");
}

static conv_status gn_run(const conv_exec *ex, cudaStream_t stream, conv_error *err) {
  if (ex == NULL || ex->state == NULL || ex->problem == NULL || ex->env == NULL || ex->x == NULL ||
      ex->w == NULL || ex->y == NULL ||
      (ex->problem->epilogue != CONV_EPILOGUE_NONE && ex->bias == NULL))
    return conv_error_set(err, CONV_INVALID_ARGUMENT, "gemm_nhwc: NULL argument");
  const gn_state *st = ex->state;
  const size_t need = st->col_offset + st->col_bytes;
  if (need > 0 && (ex->workspace == NULL || ex->workspace_bytes < need ||
                   !conv_cublaslt_aligned(ex->workspace, CONV_CUBLASLT_WS_ALIGN)))
    return conv_error_set(err, CONV_INVALID_ARGUMENT,
                          "gemm_nhwc: workspace of %zu bytes (%u-byte aligned), %zu needed",
                          ex->workspace_bytes, CONV_CUBLASLT_WS_ALIGN, need);
  const void *ptrs[] = {ex->x, ex->w, ex->y, ex->bias};
  for (int i = 0; i < 4; ++i)
    if (ptrs[i] != NULL && !conv_cublaslt_aligned(ptrs[i], CONV_POINTER_ALIGNMENT))
      return conv_error_set(err, CONV_INVALID_ARGUMENT,
                            "gemm_nhwc: a tensor pointer is not %d-byte aligned",
                            CONV_POINTER_ALIGNMENT);
  /* The bias pointer lives in the descriptor, and a plan may run on
   * several threads at once: each run describes its own matmul. */
  cublasLtMatmulDesc_t desc = st->desc;
  conv_status s = CONV_OK;
  if (ex->problem->epilogue != CONV_EPILOGUE_NONE)
    s = gn_desc_create(ex->problem, ex->bias, &desc, err);
  for (int64_t n0 = 0; n0 < ex->problem->n && s == CONV_OK; n0 += st->chunk) {
    const int64_t rest = ex->problem->n - n0;
    s = gn_run_chunk(ex, desc, n0, rest < st->chunk ? rest : st->chunk, stream, err);
  }
  if (desc != st->desc && desc != NULL) cublasLtMatmulDescDestroy(desc);
  return s;
}

static void gn_describe(const conv_config *config, char *text, size_t size) {
  conv_cublaslt_config_describe(config, "batch", text, size);
}

const conv_algorithm conv_algorithm_gemm_nhwc = {
    .id = CONV_ALGO_GEMM_NHWC,
    .version = 1,
    .name = "gemm_nhwc",
    CONV_ALGORITHM_CALLBACKS(gn),
};
