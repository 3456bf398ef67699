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
 * Half problems (fp16, bf16): x, w, dy, col and the wide dY in the type,
 * fp32 accumulation (32F compute, fp32 alpha and beta), and every sum
 * rounded to the type once: backward-data's dcol is fp32 (col2im adds its
 * taps in fp32 and rounds each dx element once; only the 1x1 path writes
 * dx from the GEMM), and backward-filter over several chunks sums them
 * into an fp32 dw buffer that is rounded into dw after the last (one
 * chunk writes dw from the GEMM).
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
#include "algorithms/common/gemm_family.h"

/* The wide kernels index in 32 bits: a chunk's col and dY each hold
 * fewer than 2^31 floats (8 GiB). */
#define GEMM_BACKWARD_BUFFER_FLOATS_MAX ((int64_t)INT32_MAX - 1)
#define GEMM_BACKWARD_ALGOS_OFFERED 4
/* The alignment prepare() assumes of the caller's tensors (cudaMalloc gives
 * 256); run() checks the real pointers and otherwise runs the fallback algo
 * picked for float alignment. */
#define GEMM_BACKWARD_BASE_ALIGN 16u

typedef struct gemm_backward_state {
  /* First (gemm_family.h); one shape, the chunk dividing the batch.  Its
   * buffers: [col or dcol | wide dY | fp32 dw], each 256-byte aligned. */
  conv_gemm_plan plan;
  conv_direction direction;
  bool direct;  /* 1x1, stride 1, unpadded, one image a chunk: col is x  */
  bool wide_dy; /* chunk > 1: dy is copied into the wide layout          */
  int64_t pq, span /* L */, crs, kg;
  conv_wide_launch col_launch; /* im2col or col2im of a chunk, unless direct */
  conv_wide_launch dy_launch;  /* dy into the wide layout, when wide_dy      */
  size_t element;              /* bytes of an element of x, w and dy         */
  /* The buffers' bytes; dw_bytes (a half problem's backward-filter over
   * several chunks: the fp32 sums of dw) may be 0. */
  size_t col_bytes, dy_bytes, dw_bytes;
} gemm_backward_state;

static const char *const gemm_backward_name = "gemm_backward";

static bool gemm_backward_is_1x1(const conv_problem *pb) {
  return pb->r == 1 && pb->s == 1 && pb->stride_h == 1 && pb->stride_w == 1 && pb->pad_h == 0 &&
         pb->pad_w == 0;
}

/* fp32, fp16 and bf16 alike: the dtype changes the GEMM's types and the
 * buffers' elements. */
static bool gemm_backward_problem_supported(const conv_problem *pb) {
  return conv_problem_supported_any_dtype(pb) && pb->layout == CONV_LAYOUT_NCHW &&
         (pb->direction == CONV_BACKWARD_DATA || pb->direction == CONV_BACKWARD_FILTER);
}

/* The bytes of a chunk's buffers (gemm_backward_state). */
typedef struct gemm_backward_buffers {
  size_t col, dy, dw;
} gemm_backward_buffers;

/* Buffer bytes a chunk of `chunk` images needs: col (or dcol) unless the
 * filter is 1x1 with one image, in the dtype (backward-filter's col) or
 * fp32 (a half problem's dcol); the wide dY past one image; and for a half
 * problem's backward-filter over more than one chunk, dw's fp32 sums.
 * False past GEMM_BACKWARD_BUFFER_FLOATS_MAX elements (which keeps every
 * later product from overflowing). */
static bool gemm_backward_buffer_bytes(const conv_problem *pb, const conv_shape *sh, int64_t chunk,
                                       gemm_backward_buffers *out) {
  const int64_t limit = GEMM_BACKWARD_BUFFER_FLOATS_MAX;
  const int64_t pq = sh->p * sh->q, crs_all = pb->c * pb->r * pb->s;
  if (pq > limit / chunk || crs_all > limit / (chunk * pq) || pb->k > limit / (chunk * pq))
    return false;
  const bool half = pb->dtype != CONV_DTYPE_F32, filter = pb->direction == CONV_BACKWARD_FILTER;
  const size_t element = conv_dtype_bytes(pb->dtype);
  const int64_t col = chunk == 1 && gemm_backward_is_1x1(pb) ? 0 : crs_all * chunk * pq;
  const int64_t dy = chunk == 1 ? 0 : pb->k * chunk * pq;
  out->col = (size_t)col * (filter ? element : sizeof(float));
  out->dy = (size_t)dy * element;
  out->dw = half && filter && chunk < pb->n ? (size_t)sh->w_elems * sizeof(float) : 0;
  return true;
}

static size_t gemm_backward_buffers_total(const gemm_backward_buffers *b) {
  return conv_cublaslt_ws_round(b->col) + conv_cublaslt_ws_round(b->dy) + b->dw;
}

/* ---------------------------------------------------------------- cuBLASLt */

/* The op on A (backward-filter) or B (backward-data); file comment. */
static conv_status gemm_backward_desc_create(const conv_problem *pb, gemm_backward_state *st,
                                             conv_error *err) {
  conv_status s;
  CONV_TRY(s,
           conv_cublaslt_desc_create(pb->dtype, pb->math, CUDA_R_32F, &st->plan.desc,
                                     gemm_backward_name, err),
           out);
  const cublasOperation_t transpose = CUBLAS_OP_T;
  const cublasLtMatmulDescAttributes_t which = st->direction == CONV_BACKWARD_FILTER
                                                   ? CUBLASLT_MATMUL_DESC_TRANSA
                                                   : CUBLASLT_MATMUL_DESC_TRANSB;
  s = conv_check_cublas(
      err, cublasLtMatmulDescSetAttribute(st->plan.desc, which, &transpose, sizeof transpose),
      "gemm_backward: cublasLtMatmulDescSetAttribute");
out:
  return s;
}

/* The element type of each matrix: the problem's, but fp32 for D where
 * it is one of our sums buffers (dcol, dw's sums). */
typedef struct gemm_backward_types {
  cudaDataType_t col, dy, filter;
} gemm_backward_types;

static gemm_backward_types gemm_backward_types_of(const conv_problem *pb,
                                                  const gemm_backward_state *st) {
  const cudaDataType_t type = conv_cublaslt_data_type(pb->dtype);
  const bool filter = st->direction == CONV_BACKWARD_FILTER;
  return (gemm_backward_types){
      .col = !filter && !st->direct ? CUDA_R_32F : type,
      .dy = type,
      .filter = filter && st->dw_bytes > 0 ? CUDA_R_32F : type,
  };
}

static size_t gemm_backward_type_bytes(cudaDataType_t type) {
  return type == CUDA_R_32F ? sizeof(float) : 2;
}

static conv_status gemm_backward_layouts_create(const conv_problem *pb, gemm_backward_state *st,
                                                conv_error *err) {
  const int32_t groups = (int32_t)pb->groups;
  const int64_t L = st->span, crs = st->crs, kg = st->kg;
  const gemm_backward_types t = gemm_backward_types_of(pb, st);
  /* The three matrices: col (or dcol), dY and the filter. */
  conv_cublaslt_layouts *lay = &st->plan.full.lay;
  cublasLtMatrixLayout_t *col, *dy, *filter;
  if (st->direction == CONV_BACKWARD_FILTER)
    col = &lay->a, dy = &lay->b, filter = &lay->d;
  else
    dy = &lay->a, filter = &lay->b, col = &lay->d;
  conv_status s;
  CONV_TRY(s, conv_cublaslt_layout_batched(col, t.col, L, crs, L, groups, crs * L, err), out);
  CONV_TRY(s, conv_cublaslt_layout_batched(dy, t.dy, L, kg, L, groups, kg * L, err), out);
  s = conv_cublaslt_layout_batched(filter, t.filter, crs, kg, crs, groups, kg * crs, err);
out:
  return s;
}

/* What run() adds to each base pointer: group strides, and the step from
 * one image to the next where the operand is the caller's tensor. */
static void gemm_backward_align_compute(const conv_problem *pb, gemm_backward_state *st) {
  const bool grouped = pb->groups > 1, images = pb->n > 1;
  const int64_t col_off[2] = {grouped ? st->crs * st->span : 0,
                              st->direct && images ? pb->c * st->pq : 0};
  const int64_t dy_off[2] = {grouped ? st->kg * st->span : 0,
                             !st->wide_dy && images ? pb->k * st->pq : 0};
  const int64_t filter_off[1] = {grouped ? st->kg * st->crs : 0};
  const gemm_backward_types t = gemm_backward_types_of(pb, st);
  const uint32_t base = GEMM_BACKWARD_BASE_ALIGN;
  const uint32_t
      col = conv_cublaslt_element_offsets_align(base, col_off, 2, gemm_backward_type_bytes(t.col)),
      dy = conv_cublaslt_element_offsets_align(base, dy_off, 2, gemm_backward_type_bytes(t.dy)),
      filter = conv_cublaslt_element_offsets_align(base, filter_off, 1,
                                                   gemm_backward_type_bytes(t.filter));
  if (st->direction == CONV_BACKWARD_FILTER)
    st->plan.align = (conv_gemm_align){col, dy, filter};
  else
    st->plan.align = (conv_gemm_align){dy, filter, col};
}

/* Sizes, layouts, alignments and the matmul descriptor for a chunk. */
static conv_status gemm_backward_create(const conv_problem *pb, int64_t chunk, void **out,
                             conv_error *err) {
  conv_shape sh;
  conv_status s = conv_problem_shape(pb, &sh);
  if (s != CONV_OK) return conv_error_set(err, s, "gemm_backward: invalid problem");
  gemm_backward_state *st = calloc(1, sizeof *st);
  if (st == NULL) return conv_error_set(err, CONV_OUT_OF_MEMORY, "gemm_backward: out of memory");
  gemm_backward_buffers bytes;
  if (!gemm_backward_buffer_bytes(pb, &sh, chunk, &bytes)) {
    s = conv_error_set(err, CONV_UNSUPPORTED,
                       "gemm_backward: buffers for %lld images reach 2^31 elements",
                       (long long)chunk);
    goto fail;
  }
  st->col_bytes = bytes.col, st->dy_bytes = bytes.dy, st->dw_bytes = bytes.dw;
  st->element = conv_dtype_bytes(pb->dtype);
  st->plan.buffer_bytes = gemm_backward_buffers_total(&bytes);
  st->plan.chunk = chunk;
  st->direction = pb->direction;
  st->direct = st->col_bytes == 0;
  st->wide_dy = st->dy_bytes > 0;
  st->pq = sh.p * sh.q;
  st->span = chunk * st->pq;
  st->crs = sh.c_per_group * pb->r * pb->s;
  st->kg = sh.k_per_group;
  if ((!st->direct && !conv_wide_plan(pb, chunk, &st->col_launch)) ||
      (st->wide_dy &&
       !conv_channels_wide_plan(pb->k, st->pq, chunk, pb->dtype, &st->dy_launch))) {
    s = conv_error_set(err, CONV_UNSUPPORTED,
                       "gemm_backward: %lld images a chunk: past the wide kernels' 32-bit indexing",
                       (long long)chunk);
    goto fail;
  }
  gemm_backward_align_compute(pb, st);
  CONV_TRY(s, gemm_backward_desc_create(pb, st, err), fail);
  CONV_TRY(s, gemm_backward_layouts_create(pb, st, err), fail);
  *out = st;
  return CONV_OK;
fail:
  conv_gemm_release(st);
  return s;
}

/* ---------------------------------------------------------------- interface */

static bool gemm_backward_applicable(const conv_problem *problem, const conv_env *env) {
  return problem != NULL && env != NULL && env->cublaslt != NULL &&
         gemm_backward_problem_supported(problem);
}

/* Chunks that divide the batch: the plan has no partial last chunk. */
static conv_status gemm_backward_check_chunk(const conv_problem *problem, int64_t chunk,
                                             conv_error *err) {
  if (chunk < 1 || chunk > problem->n || problem->n % chunk != 0)
    return conv_error_set(err, CONV_UNSUPPORTED,
                          "gemm_backward: chunk %lld does not divide the batch of %lld",
                          (long long)chunk, (long long)problem->n);
  return CONV_OK;
}

/* The largest divisor of n below `below` whose buffers fit within `cap`
 * bytes, or 0. */
static int64_t gemm_backward_chunk_below(const conv_problem *pb, const conv_shape *sh,
                                         int64_t below, size_t cap) {
  gemm_backward_buffers b;
  for (int64_t d = below - 1; d >= 1; --d)
    if (pb->n % d == 0 && gemm_backward_buffer_bytes(pb, sh, d, &b) && b.col + b.dy + b.dw <= cap)
      return d;
  return 0;
}

/* Chunks worth timing, all dividing n: the largest whose buffers fit
 * (fewest, longest GEMMs), the largest whose buffers stay within half the
 * L2 (written, then read back while cached), and 1 (least memory; for a
 * 1x1 filter, no buffer at all). */
static int gemm_backward_chunks(const conv_problem *pb, const conv_env *env,
                     int64_t out[CONV_GEMM_CHUNKS_MAX]) {
  conv_shape sh;
  if (conv_problem_shape(pb, &sh) != CONV_OK) return 0;
  const int64_t largest = gemm_backward_chunk_below(pb, &sh, pb->n + 1, SIZE_MAX);
  if (largest == 0) return 0;
  int count = 0;
  out[count++] = largest;
  const size_t half_l2 =
      (size_t)(env->device.l2_bytes > 0 ? env->device.l2_bytes : 32 << 20) / 2;
  const int64_t mid = gemm_backward_chunk_below(pb, &sh, largest, half_l2);
  if (mid > 1) out[count++] = mid;
  if (largest > 1) out[count++] = 1;
  return count;
}

static const conv_gemm_family gemm_backward_family = {
    .name = "gemm_backward",
    .prefix = "gemm_backward",
    .scope = "NCHW backward-data or backward-filter (fp32, fp16, bf16)",
    .algos_offered = GEMM_BACKWARD_ALGOS_OFFERED,
    .fallbacks = true,
    .applicable = gemm_backward_applicable,
    .chunks = gemm_backward_chunks,
    .check_chunk = gemm_backward_check_chunk,
    .create = gemm_backward_create,
};
CONV_GEMM_FAMILY_CALLBACKS(gemm_backward, gemm_backward_family)

/* ---------------------------------------------------------------- run */

/* The pass's GEMM; cuBLASLt gets the workspace its algos need, unrounded. */
static conv_status gemm_backward_matmul(const conv_exec *ex, bool use_fallback, const void *a,
                             const void *b, void *d, float beta, cudaStream_t stream,
                             conv_error *err) {
  const gemm_backward_state *st = ex->state;
  return conv_gemm_matmul(&gemm_backward_family, ex, st->plan.desc, &st->plan.full, use_fallback,
                          st->plan.full.algos.ws_bytes, a, b, beta, d, stream, err);
}

/* The buffers of a chunk in the workspace, after cuBLASLt's part: col
 * (or dcol; NULL on the 1x1 path), the wide dY, dw's fp32 sums (NULL
 * where the GEMM writes dw). */
typedef struct gemm_backward_views {
  void *col, *wide_dy;
  float *dw_sums;
} gemm_backward_views;

static gemm_backward_views gemm_backward_views_of(const conv_exec *ex) {
  const gemm_backward_state *st = ex->state;
  char *ws = ex->workspace;
  const size_t col_offset = st->plan.gemm_ws_bytes,
               dy_offset = col_offset + conv_cublaslt_ws_round(st->col_bytes),
               dw_offset = dy_offset + conv_cublaslt_ws_round(st->dy_bytes);
  return (gemm_backward_views){
      .col = st->direct ? NULL : ws + col_offset,
      .wide_dy = st->wide_dy ? ws + dy_offset : NULL,
      .dw_sums = st->dw_bytes > 0 ? (float *)(ws + dw_offset) : NULL,
  };
}

/* Images [n0, n0 + chunk): dY, then the pass's GEMM and im2col or col2im. */
static conv_status gemm_backward_run_chunk(const conv_exec *ex, int64_t n0, bool use_fallback,
                                cudaStream_t stream, conv_error *err) {
  const gemm_backward_state *st = ex->state;
  const conv_problem *pb = ex->problem;
  const gemm_backward_views v = gemm_backward_views_of(ex);
  const int64_t x_image = pb->c * pb->h * pb->w;
  const size_t e = st->element;
  const void *dy = conv_gemm_at(ex->y, n0 * pb->k * st->pq, e);
  conv_status s = CONV_OK;
  if (v.wide_dy != NULL) {
    CONV_TRY(s,
             conv_check_cuda(err, conv_im2col_wide(&st->dy_launch, ex->y, n0, v.wide_dy, stream),
                             "gemm_backward: dy to the wide layout"),
             out);
    dy = v.wide_dy;
  }
  if (st->direction == CONV_BACKWARD_FILTER) {
    if (v.col != NULL)
      CONV_TRY(s,
               conv_check_cuda(err, conv_im2col_wide(&st->col_launch, ex->x, n0, v.col, stream),
                               "gemm_backward: im2col"),
               out);
    const void *a = v.col != NULL ? v.col : conv_gemm_at(ex->x, n0 * x_image, e);
    /* Chunks sum into dw (or its fp32 sums) in order. */
    void *d = v.dw_sums != NULL ? (void *)v.dw_sums : (void *)ex->w;
    s = gemm_backward_matmul(ex, use_fallback, a, dy, d, n0 == 0 ? 0.0f : 1.0f, stream, err);
  } else {
    void *dx = (void *)ex->x;
    CONV_TRY(s,
             gemm_backward_matmul(ex, use_fallback, dy, ex->w,
                                  v.col != NULL ? v.col : conv_gemm_at_mut(dx, n0 * x_image, e),
                                  0.0f, stream, err),
             out);
    if (v.col != NULL)
      s = conv_check_cuda(err, conv_col2im_wide(&st->col_launch, v.col, n0, dx, stream),
                          "gemm_backward: col2im");
  }
out:
  return s;
}

/* A half problem's dw over several chunks: its fp32 sums, rounded once. */
static conv_status gemm_backward_round_dw(const conv_exec *ex, cudaStream_t stream,
                                          conv_error *err) {
  const gemm_backward_views v = gemm_backward_views_of(ex);
  if (v.dw_sums == NULL) return CONV_OK;
  conv_shape sh;
  conv_status s = conv_problem_shape(ex->problem, &sh);
  if (s != CONV_OK) return conv_error_set(err, s, "gemm_backward: invalid problem");
  return conv_check_cuda(err,
                         conv_round_floats(v.dw_sums, ex->problem->dtype, (void *)ex->w,
                                           sh.w_elems, stream),
                         "gemm_backward: dw to its type");
}

/* Whether the caller's tensors meet the alignments the algo was picked
 * for; if not, the float-aligned fallback runs instead of faulting. */
static conv_status gemm_backward_choose_algo(const conv_exec *ex, bool *use_fallback,
                                             conv_error *err) {
  const gemm_backward_state *st = ex->state;
  const void *tensors[3] = {ex->x, ex->w, ex->y};
  /* Each tensor serves one operand, or a kernel where a buffer stands in
   * for it; the buffers always meet GEMM_BACKWARD_BASE_ALIGN. */
  const conv_gemm_align *align = &st->plan.align;
  const bool filter = st->direction == CONV_BACKWARD_FILTER;
  const uint32_t col_align = filter ? align->a : align->d, dy_align = filter ? align->b : align->a,
                 w_align = filter ? align->d : align->b;
  const bool w_buffered = filter && st->dw_bytes > 0; /* D is dw's fp32 sums */
  const bool aligned = (w_buffered || conv_cublaslt_aligned(ex->w, w_align)) &&
                       (!st->direct || conv_cublaslt_aligned(ex->x, col_align)) &&
                       (st->wide_dy || conv_cublaslt_aligned(ex->y, dy_align));
  return conv_gemm_choose_algos(&st->plan, ex->problem->dtype, tensors, 3, aligned,
                                gemm_backward_name, use_fallback, err);
}

static conv_status gemm_backward_run(const conv_exec *ex, cudaStream_t stream, conv_error *err) {
  if (ex == NULL || ex->state == NULL || ex->problem == NULL || ex->env == NULL || ex->x == NULL ||
      ex->w == NULL || ex->y == NULL)
    return conv_error_set(err, CONV_INVALID_ARGUMENT, "gemm_backward: NULL argument");
  const gemm_backward_state *st = ex->state;
  conv_status s = conv_gemm_check_workspace(&st->plan, ex, false, gemm_backward_name, err);
  bool use_fallback = false;
  if (s == CONV_OK) s = gemm_backward_choose_algo(ex, &use_fallback, err);
  for (int64_t n0 = 0; n0 < ex->problem->n && s == CONV_OK; n0 += st->plan.chunk)
    s = gemm_backward_run_chunk(ex, n0, use_fallback, stream, err);
  if (s == CONV_OK) s = gemm_backward_round_dw(ex, stream, err);
  return s;
}

const conv_algorithm conv_algorithm_gemm_backward = {
    .id = CONV_ALGO_GEMM_BACKWARD,
    /* 2: fp16 and bf16 */
    .version = 2,
    .name = "gemm_backward",
    CONV_ALGORITHM_CALLBACKS(gemm_backward),
    .libraries = CONV_LIBRARY_CUBLASLT,
};
