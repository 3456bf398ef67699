/*
 * gemm_backward.c -- the `gemm_backward` candidate: both backward passes
 * as cuBLASLt GEMMs on im2col's wide layout (im2col.h), for any stride,
 * padding, dilation and groups of an NCHW problem.
 *
 * For a chunk of images with L = images*p*q output pixels, crs = cg*r*s,
 * and group g's filter W_g (kg x crs, row-major):
 *
 *   backward-filter:  dW_g (kg x crs) = sum over chunks of
 *                     dY_g (kg x L) * col_g^T (L x crs),   col = im2col(x)
 *   backward-data:    dcol_g (crs x L) = W_g^T (crs x kg) * dY_g (kg x L),
 *                     dx = col2im(dcol)
 *
 * dY is dy in the wide layout (conv_channels_wide_plan), which for a chunk
 * of one image is dy itself.  Every group is one batch entry of a single
 * strided-batched matmul, so a chunk is at most three launches.  A 1x1,
 * stride-1, unpadded filter with one image a chunk needs neither im2col
 * nor col2im: col is x and dcol is dx.
 *
 * In cuBLASLt's column-major terms (a row-major a x b matrix is its b x a
 * transpose), batch stride in brackets:
 *   filter: D (crs x kg, ld crs) [kg*crs] = A^T * B,
 *           A = col (L x crs, ld L) [crs*L], B = dY (L x kg, ld L) [kg*L]
 *   data:   D (L x crs, ld L) [crs*L] = A * B^T,
 *           A = dY (L x kg, ld L) [kg*L], B = W (crs x kg, ld crs) [kg*crs]
 * The layouts are the same whether a matrix is a buffer or the caller's
 * tensor; only the pointers differ.
 *
 * Backward-filter's chunks accumulate into dw in order (beta 1 after the
 * first), and cuBLASLt with a fixed algorithm gives bit-identical results
 * run to run (im2col_gemm.c): deterministic.  col2im is one thread's sum a
 * dx element.
 *
 * Config values: {chunk, algo_index}: a chunk of images that divides n (no
 * partial last chunk), and the rank of the cuBLASLt heuristic's answer.
 *
 * Tests: tests/families/test_gemm_backward.c.
 */
#include <stdint.h>
#include <stdlib.h>

#include "algorithms/common/im2col.h"
#include "algorithms/common/kernels.h"
#include "algorithms/common/cublaslt.h"

/* The wide kernels index in 32 bits: a chunk's col and dY each hold
 * fewer than 2^31 floats (8 GiB). */
#define GB_BUFFER_FLOATS_MAX ((int64_t)INT32_MAX - 1)
#define GB_ALGOS_OFFERED 4
#define GB_CHUNKS_MAX 3
/* The alignment prepare() assumes of the caller's tensors (cudaMalloc gives
 * 256); run() checks the real pointers and otherwise runs the fallback algo
 * picked for float alignment. */
#define GB_BASE_ALIGN 16u

typedef struct gb_state {
  conv_direction direction;
  cublasLtMatmulDesc_t desc;
  conv_cublaslt_layouts lay;
  conv_cublaslt_algos algos; /* prepared for `align` */
  bool direct;  /* 1x1, stride 1, unpadded, one image a chunk: col is x  */
  bool wide_dy; /* chunk > 1: dy is copied into the wide layout          */
  int64_t chunk, pq, span /* L */, crs, kg;
  conv_wide_launch col_launch; /* im2col or col2im of a chunk, unless direct */
  conv_wide_launch dy_launch;  /* dy into the wide layout, when wide_dy      */
  conv_gemm_align align; /* alignments of A, B and D its algo relies on */
  /* Workspace: [GEMM workspace | col or dcol | wide dY], each part
   * 256-byte aligned. */
  size_t col_offset, col_bytes, dy_offset, dy_bytes, total;
} gb_state;

static const char *const gb_name = "gemm_backward";

static bool gb_is_1x1(const conv_problem *pb) {
  return pb->r == 1 && pb->s == 1 && pb->stride_h == 1 && pb->stride_w == 1 && pb->pad_h == 0 &&
         pb->pad_w == 0;
}

static bool gb_problem_supported(const conv_problem *pb) {
  return conv_problem_supported(pb) && pb->layout == CONV_LAYOUT_NCHW &&
         (pb->direction == CONV_BACKWARD_DATA || pb->direction == CONV_BACKWARD_FILTER);
}

static void gb_release(void *state) {
  gb_state *st = state;
  if (st == NULL) return;
  conv_cublaslt_layouts_destroy(&st->lay);
  if (st->desc) cublasLtMatmulDescDestroy(st->desc);
  free(st);
}

/* Buffer bytes a chunk of `chunk` images needs: col (or dcol) unless the
 * filter is 1x1 with one image, and the wide dY past one image; false past
 * GB_BUFFER_FLOATS_MAX (which keeps every later product from overflowing). */
static bool gb_buffer_bytes(const conv_problem *pb, const conv_shape *sh, int64_t chunk,
                            size_t *col_bytes, size_t *dy_bytes) {
  const int64_t limit = GB_BUFFER_FLOATS_MAX;
  const int64_t pq = sh->p * sh->q, crs_all = pb->c * pb->r * pb->s;
  if (pq > limit / chunk || crs_all > limit / (chunk * pq) || pb->k > limit / (chunk * pq))
    return false;
  const int64_t col = chunk == 1 && gb_is_1x1(pb) ? 0 : crs_all * chunk * pq;
  const int64_t dy = chunk == 1 ? 0 : pb->k * chunk * pq;
  *col_bytes = (size_t)col * sizeof(float);
  *dy_bytes = (size_t)dy * sizeof(float);
  return true;
}

/* ---------------------------------------------------------------- cuBLASLt */

/* The op on A (backward-filter) or B (backward-data); file comment. */
static conv_status gb_desc_create(const conv_problem *pb, gb_state *st, conv_error *err) {
  conv_status s;
  CONV_TRY(s, conv_cublaslt_desc_create(pb->math, CUDA_R_32F, &st->desc, gb_name, err), out);
  const cublasOperation_t transpose = CUBLAS_OP_T;
  const cublasLtMatmulDescAttributes_t which = st->direction == CONV_BACKWARD_FILTER
                                                   ? CUBLASLT_MATMUL_DESC_TRANSA
                                                   : CUBLASLT_MATMUL_DESC_TRANSB;
  s = conv_check_cublas(
      err, cublasLtMatmulDescSetAttribute(st->desc, which, &transpose, sizeof transpose),
      "gemm_backward: cublasLtMatmulDescSetAttribute");
out:
  return s;
}

static conv_status gb_layouts_create(const conv_problem *pb, gb_state *st, conv_error *err) {
  const int32_t groups = (int32_t)pb->groups;
  const int64_t L = st->span, crs = st->crs, kg = st->kg;
  /* The three matrices: col (or dcol), dY and the filter. */
  cublasLtMatrixLayout_t *col, *dy, *filter;
  if (st->direction == CONV_BACKWARD_FILTER)
    col = &st->lay.a, dy = &st->lay.b, filter = &st->lay.d;
  else
    dy = &st->lay.a, filter = &st->lay.b, col = &st->lay.d;
  conv_status s;
  CONV_TRY(s, conv_cublaslt_layout_batched(col, CUDA_R_32F, L, crs, L, groups, crs * L, err), out);
  CONV_TRY(s, conv_cublaslt_layout_batched(dy, CUDA_R_32F, L, kg, L, groups, kg * L, err), out);
  s = conv_cublaslt_layout_batched(filter, CUDA_R_32F, crs, kg, crs, groups, kg * crs, err);
out:
  return s;
}

/* What run() adds to each base pointer: group strides, and the step from
 * one image to the next where the operand is the caller's tensor. */
static void gb_align_compute(const conv_problem *pb, gb_state *st) {
  const bool grouped = pb->groups > 1, images = pb->n > 1;
  const int64_t col_off[2] = {grouped ? st->crs * st->span : 0,
                              st->direct && images ? pb->c * st->pq : 0};
  const int64_t dy_off[2] = {grouped ? st->kg * st->span : 0,
                             !st->wide_dy && images ? pb->k * st->pq : 0};
  const int64_t filter_off[1] = {grouped ? st->kg * st->crs : 0};
  const uint32_t col = conv_cublaslt_offsets_align(GB_BASE_ALIGN, col_off, 2),
                 dy = conv_cublaslt_offsets_align(GB_BASE_ALIGN, dy_off, 2),
                 filter = conv_cublaslt_offsets_align(GB_BASE_ALIGN, filter_off, 1);
  if (st->direction == CONV_BACKWARD_FILTER)
    st->align = (conv_gemm_align){col, dy, filter};
  else
    st->align = (conv_gemm_align){dy, filter, col};
}

static conv_cublaslt_query gb_query(const conv_problem *pb, const conv_env *env,
                                    const gb_state *st, const conv_gemm_align *al) {
  return (conv_cublaslt_query){.lt = env->cublaslt, .desc = st->desc, .layouts = &st->lay,
                               .math = pb->math, .align = al, .prefix = gb_name};
}

/* Sizes, layouts, alignments and the matmul descriptor for a chunk. */
static conv_status gb_state_create(const conv_problem *pb, int64_t chunk, gb_state **out,
                                   conv_error *err) {
  conv_shape sh;
  conv_status s = conv_problem_shape(pb, &sh);
  if (s != CONV_OK) return conv_error_set(err, s, "gemm_backward: invalid problem");
  gb_state *st = calloc(1, sizeof *st);
  if (st == NULL) return conv_error_set(err, CONV_OUT_OF_MEMORY, "gemm_backward: out of memory");
  if (!gb_buffer_bytes(pb, &sh, chunk, &st->col_bytes, &st->dy_bytes)) {
    s = conv_error_set(err, CONV_UNSUPPORTED,
                       "gemm_backward: buffers for %lld images reach 2^31 floats",
                       (long long)chunk);
    goto fail;
  }
  st->direction = pb->direction;
  st->chunk = chunk;
  st->direct = st->col_bytes == 0;
  st->wide_dy = st->dy_bytes > 0;
  st->pq = sh.p * sh.q;
  st->span = chunk * st->pq;
  st->crs = sh.c_per_group * pb->r * pb->s;
  st->kg = sh.k_per_group;
  if ((!st->direct && !conv_wide_plan(pb, chunk, &st->col_launch)) ||
      (st->wide_dy && !conv_channels_wide_plan(pb->k, st->pq, chunk, &st->dy_launch))) {
    s = conv_error_set(err, CONV_UNSUPPORTED,
                       "gemm_backward: %lld images a chunk: past the wide kernels' 32-bit indexing",
                       (long long)chunk);
    goto fail;
  }
  gb_align_compute(pb, st);
  CONV_TRY(s, gb_desc_create(pb, st, err), fail);
  CONV_TRY(s, gb_layouts_create(pb, st, err), fail);
  *out = st;
  return CONV_OK;
fail:
  gb_release(st);
  return s;
}

static void gb_workspace_layout(gb_state *st) {
  size_t at = conv_cublaslt_ws_round(st->algos.ws_bytes);
  st->col_offset = at, at += conv_cublaslt_ws_round(st->col_bytes);
  st->dy_offset = at, at += conv_cublaslt_ws_round(st->dy_bytes);
  st->total = at;
}

/* ---------------------------------------------------------------- interface */

static bool gb_applicable(const conv_problem *problem, const conv_env *env) {
  return problem != NULL && env != NULL && env->cublaslt != NULL && gb_problem_supported(problem);
}

static conv_status gb_prepare(const conv_problem *problem, conv_env *env,
                              const conv_config *config, conv_prepared *out, conv_error *err) {
  if (problem == NULL || env == NULL || env->cublaslt == NULL || config == NULL || out == NULL)
    return conv_error_set(err, CONV_INVALID_ARGUMENT, "gemm_backward: NULL argument");
  if (!gb_problem_supported(problem))
    return conv_error_set(err, CONV_UNSUPPORTED,
                          "gemm_backward: only fp32 NCHW backward-data or backward-filter");
  /* The config may come from a shipped cache: trust none of it. */
  const conv_status checked = conv_config_check(config, gb_name, 2, INT64_MIN, INT64_MAX, err);
  if (checked != CONV_OK) return checked;
  const int64_t chunk = config->values[0], algo_index = config->values[1];
  if (chunk < 1 || chunk > problem->n || problem->n % chunk != 0)
    return conv_error_set(err, CONV_UNSUPPORTED,
                          "gemm_backward: chunk %lld does not divide the batch of %lld",
                          (long long)chunk, (long long)problem->n);
  if (algo_index < 0 || algo_index >= CONV_CUBLASLT_HEURISTIC_MAX)
    return conv_error_set(err, CONV_UNSUPPORTED, "gemm_backward: gemm algo %lld not in [0, %d)",
                          (long long)algo_index, CONV_CUBLASLT_HEURISTIC_MAX);
  gb_state *st = NULL;
  conv_status s;
  CONV_TRY(s, gb_state_create(problem, chunk, &st, err), fail);
  const conv_cublaslt_query q = gb_query(problem, env, st, &st->align);
  CONV_TRY(s, conv_cublaslt_pick_algos(&q, (int)algo_index, gb_name, &st->algos, err), fail);
  gb_workspace_layout(st);
  out->state = st;
  out->workspace_bytes = st->total;
  out->arith = CONV_ARITH_DIRECT;
  out->deterministic = true; /* file comment */
  return CONV_OK;
fail:
  gb_release(st);
  return s;
}

/* Algos configs() offers for one chunk (0: none). */
static conv_status gb_count_algos(const conv_problem *pb, conv_env *env, int64_t chunk,
                                  int *count, conv_error *err) {
  gb_state *st = NULL;
  conv_status s;
  CONV_TRY(s, gb_state_create(pb, chunk, &st, err), out);
  const conv_cublaslt_query q = gb_query(pb, env, st, &st->align);
  s = conv_cublaslt_offered_algos(&q, GB_ALGOS_OFFERED, count, err);
out:
  gb_release(st);
  return s;
}

/* The largest divisor of n below `below` whose buffers fit within `cap`
 * bytes, or 0. */
static int64_t gb_chunk_below(const conv_problem *pb, const conv_shape *sh, int64_t below,
                              size_t cap) {
  size_t col = 0, dy = 0;
  for (int64_t d = below - 1; d >= 1; --d)
    if (pb->n % d == 0 && gb_buffer_bytes(pb, sh, d, &col, &dy) && col + dy <= cap) return d;
  return 0;
}

/* Chunks worth timing, all dividing n: the largest whose buffers fit
 * (fewest, longest GEMMs), the largest whose buffers stay within half the
 * L2 (written, then read back while cached), and 1 (least memory; for a
 * 1x1 filter, no buffer at all). */
static int gb_chunks(const conv_problem *pb, const conv_env *env, int64_t out[GB_CHUNKS_MAX]) {
  conv_shape sh;
  if (conv_problem_shape(pb, &sh) != CONV_OK) return 0;
  const int64_t largest = gb_chunk_below(pb, &sh, pb->n + 1, SIZE_MAX);
  if (largest == 0) return 0;
  int count = 0;
  out[count++] = largest;
  const size_t half_l2 =
      (size_t)(env->device.l2_bytes > 0 ? env->device.l2_bytes : 32 << 20) / 2;
  const int64_t mid = gb_chunk_below(pb, &sh, largest, half_l2);
  if (mid > 1) out[count++] = mid;
  if (largest > 1) out[count++] = 1;
  return count;
}

static conv_status gb_configs(const conv_problem *problem, conv_env *env, conv_config *out,
                              int max, int *count, conv_error *err) {
  if (problem == NULL || env == NULL || count == NULL || (max > 0 && out == NULL))
    return conv_error_set(err, CONV_INVALID_ARGUMENT, "gemm_backward: NULL argument");
  *count = 0;
  if (!gb_applicable(problem, env)) return CONV_OK;
  int64_t chunks[GB_CHUNKS_MAX];
  const int n_chunks = gb_chunks(problem, env, chunks);
  return conv_cublaslt_chunk_configs(problem, env, chunks, n_chunks, gb_count_algos, out, max,
                                     count, err);
}

/* ---------------------------------------------------------------- run */

static conv_status gb_matmul(const conv_exec *ex, bool use_fallback, const float *a,
                             const float *b, float *d, float beta, cudaStream_t stream,
                             conv_error *err) {
  const gb_state *st = ex->state;
  const float one = 1.0f;
  void *ws = st->algos.ws_bytes ? ex->workspace : NULL;
  return conv_check_cublas(err,
                           cublasLtMatmul(ex->env->cublaslt, st->desc, &one, a, st->lay.a, b,
                                          st->lay.b, &beta, d, st->lay.d, d, st->lay.d,
                                          use_fallback ? &st->algos.fallback : &st->algos.algo,
                                          ws, st->algos.ws_bytes, stream),
                           "gemm_backward: cublasLtMatmul");
}

/* Images [n0, n0 + chunk): dY, then the pass's GEMM and im2col or col2im. */
static conv_status gb_run_chunk(const conv_exec *ex, int64_t n0, bool use_fallback,
                                cudaStream_t stream, conv_error *err) {
  const gb_state *st = ex->state;
  const conv_problem *pb = ex->problem;
  char *ws = ex->workspace;
  const int64_t x_image = pb->c * pb->h * pb->w;
  float *col = st->direct ? NULL : (float *)(ws + st->col_offset);
  const float *dy = ex->y + n0 * pb->k * st->pq;
  conv_status s = CONV_OK;
  if (st->wide_dy) {
    float *wide = (float *)(ws + st->dy_offset);
    CONV_TRY(s, conv_check_cuda(err, conv_im2col_wide(&st->dy_launch, ex->y, n0, wide, stream),
                                "gemm_backward: dy to the wide layout"), out);
    dy = wide;
  }
  if (st->direction == CONV_BACKWARD_FILTER) {
    if (col != NULL)
      CONV_TRY(s, conv_check_cuda(err, conv_im2col_wide(&st->col_launch, ex->x, n0, col, stream),
                                  "gemm_backward: im2col"), out);
    const float *a = col != NULL ? col : ex->x + n0 * x_image;
    /* Chunks sum into dw in order. */
    s = gb_matmul(ex, use_fallback, a, dy, (float *)ex->w, n0 == 0 ? 0.0f : 1.0f, stream, err);
  } else {
    float *dx = (float *)ex->x;
    CONV_TRY(s, gb_matmul(ex, use_fallback, dy, ex->w, col != NULL ? col : dx + n0 * x_image,
                          0.0f, stream, err), out);
    if (col != NULL)
      s = conv_check_cuda(err, conv_col2im_wide(&st->col_launch, col, n0, dx, stream),
                          "gemm_backward: col2im");
  }
out:
  return s;
}

/* Whether the caller's tensors meet the alignments the algo was picked
 * for; if not, the float-aligned fallback runs instead of faulting. */
static conv_status gb_choose_algo(const conv_exec *ex, bool *use_fallback, conv_error *err) {
  const gb_state *st = ex->state;
  const void *tensors[3] = {ex->x, ex->w, ex->y};
  for (int i = 0; i < 3; ++i)
    if (!conv_cublaslt_aligned(tensors[i], CONV_CUBLASLT_FLOAT_ALIGN))
      return conv_error_set(err, CONV_INVALID_ARGUMENT,
                            "gemm_backward: a tensor pointer is not 4-byte aligned");
  /* Each tensor serves one operand, or a kernel where a buffer stands in
   * for it; the buffers always meet GB_BASE_ALIGN. */
  const bool filter = st->direction == CONV_BACKWARD_FILTER;
  const uint32_t col_align = filter ? st->align.a : st->align.d,
                 dy_align = filter ? st->align.b : st->align.a,
                 w_align = filter ? st->align.d : st->align.b;
  *use_fallback = !conv_cublaslt_aligned(ex->w, w_align) ||
                  (st->direct && !conv_cublaslt_aligned(ex->x, col_align)) ||
                  (!st->wide_dy && !conv_cublaslt_aligned(ex->y, dy_align));
  if (*use_fallback && !st->algos.has_fallback)
    return conv_error_set(err, CONV_UNSUPPORTED,
                          "gemm_backward: pointers less aligned than the plan's %u/%u/%u bytes "
                          "and cuBLASLt has no fallback algorithm",
                          st->align.a, st->align.b, st->align.d);
  return CONV_OK;
}

static conv_status gb_run(const conv_exec *ex, cudaStream_t stream, conv_error *err) {
  if (ex == NULL || ex->state == NULL || ex->problem == NULL || ex->env == NULL || ex->x == NULL ||
      ex->w == NULL || ex->y == NULL)
    return conv_error_set(err, CONV_INVALID_ARGUMENT, "gemm_backward: NULL argument");
  const gb_state *st = ex->state;
  if (st->total > 0 && (ex->workspace == NULL || ex->workspace_bytes < st->total))
    return conv_error_set(err, CONV_INVALID_ARGUMENT,
                          "gemm_backward: workspace of %zu bytes, %zu needed", ex->workspace_bytes,
                          st->total);
  if (st->total > 0 && !conv_cublaslt_aligned(ex->workspace, CONV_CUBLASLT_WS_ALIGN))
    return conv_error_set(err, CONV_INVALID_ARGUMENT, "gemm_backward: workspace not %u-byte aligned",
                          CONV_CUBLASLT_WS_ALIGN);
  bool use_fallback = false;
  conv_status s = gb_choose_algo(ex, &use_fallback, err);
  for (int64_t n0 = 0; n0 < ex->problem->n && s == CONV_OK; n0 += st->chunk)
    s = gb_run_chunk(ex, n0, use_fallback, stream, err);
  return s;
}

static void gb_describe(const conv_config *config, char *text, size_t size) {
  conv_cublaslt_config_describe(config, "batch", text, size);
}

const conv_algorithm conv_algorithm_gemm_backward = {
    .id = CONV_ALGO_GEMM_BACKWARD,
    .version = 1,
    .name = "gemm_backward",
    CONV_ALGORITHM_CALLBACKS(gb),
};
