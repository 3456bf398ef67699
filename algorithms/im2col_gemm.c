/*
 * im2col_gemm.c -- convolution as im2col + one cuBLASLt GEMM per group and
 * chunk of images.
 *
 * Per image n and group g the output block Y[n][g*kg .. (g+1)*kg)[pq] is the
 * row-major product W_g (kg x crs) * col_{n,g} (crs x pq).  cuBLASLt is
 * column-major, and a row-major matrix is its transpose seen column-major,
 * so we ask for
 *   D (m = pq, n = kg, ld = pq) = A (pq x crs, ld = pq) * B (crs x kg, ld = crs)
 * with A = col, B = W_g, no transposes.  Strided batching covers a chunk of
 * images in one call: A and D advance by one image, B (the filter) has batch
 * stride 0.  A 1x1 filter with stride 1 and no padding reads x directly: its
 * "col" matrix is already the image's group slice, with ld = h*w = pq.
 *
 * Half problems (fp16, bf16): im2col in the type and the GEMM's A, B and D
 * in it, fp32 accumulation (32F compute, fp32 alpha and beta).  With an
 * epilogue, D is an fp32 buffer of the chunk's sums instead, from which
 * conv_bias_act_round writes y with the bias and ReLU applied in fp32 and
 * one rounding (an fp32 problem's bias pass runs in place on y).
 *
 * Config values: {batch_chunk, algo_index}; algo_index ranks the cuBLASLt
 * heuristic's answers for the full chunk.
 *
 * Tests: tests/families/test_im2col_gemm.c.
 */
#include <stdint.h>
#include <stdlib.h>

#include "algorithms/common/im2col.h"
#include "algorithms/common/kernels.h"
#include "algorithms/common/gemm_family.h"

/* Past this an im2col buffer is not worth timing. */
#define IM2COL_GEMM_COL_BYTES_MAX ((int64_t)8 << 30)
/* The most chunks (each an im2col launch and a GEMM) its least-memory
 * config makes (im2col_gemm_chunks). */
#define IM2COL_GEMM_CHUNKS_MAX 64
#define IM2COL_GEMM_ALGOS_OFFERED 16
/* The ranked algos marked best guesses on 1x1 layers (im2col_gemm_guessed_algos). */
#define IM2COL_GEMM_ALGOS_GUESSED 8
/* The pointer alignment prepare() assumes for x, w, y and the workspace.
 * 16 bytes is what vector loads and TMA need; cudaMalloc gives 256, and
 * run() checks the real pointers before trusting the assumption. */
#define IM2COL_GEMM_BASE_ALIGN 16u

/* ---------------------------------------------------------------- state */

/* The GEMM one group of a batch of images needs, in cuBLASLt's terms. */
typedef struct im2col_gemm_dims {
  int64_t m, n, k;        /* pq, kg, crs                                   */
  int64_t a_batch_stride; /* crs*pq in the col buffer; c*h*w reading x     */
  int64_t d_batch_stride; /* k*pq                                          */
} im2col_gemm_dims;

typedef struct im2col_gemm_state {
  /* First (gemm_family.h); its buffers: [col | fp32 sums], each 256-byte
   * aligned. */
  conv_gemm_plan plan;
  bool direct;         /* 1x1 path: A is x itself, no im2col */
  /* A half problem with an epilogue: D is the fp32 sums of a chunk, which
   * conv_bias_act_round takes to y. */
  bool round_after;
  size_t element;      /* bytes of an element of x, w and y */
  size_t col_bytes;    /* the col buffer's, rounded up to CONV_CUBLASLT_WS_ALIGN */
  im2col_gemm_dims dims;
  /* Element offsets between consecutive images and groups. */
  int64_t x_image, x_group, w_group, y_image, y_group;
} im2col_gemm_state;

static bool im2col_gemm_is_direct(const conv_problem *pb) {
  /* Dilation does not matter for a 1x1 filter: it touches one pixel. */
  return pb->r == 1 && pb->s == 1 && pb->stride_h == 1 && pb->stride_w == 1 && pb->pad_h == 0 &&
         pb->pad_w == 0;
}

static void im2col_gemm_dims_make(const conv_problem *pb, const conv_shape *sh, bool direct,
                                  im2col_gemm_dims *d) {
  d->m = sh->p * sh->q;
  d->n = sh->k_per_group;
  d->k = sh->c_per_group * pb->r * pb->s;
  d->a_batch_stride = direct ? pb->c * pb->h * pb->w : d->k * d->m;
  d->d_batch_stride = pb->k * d->m;
}

/* Bytes of col buffer one image needs, elements of `element` bytes, or -1
 * past IM2COL_GEMM_COL_BYTES_MAX (which also keeps every later product far
 * from overflowing). */
static int64_t im2col_gemm_col_bytes_per_image(const im2col_gemm_dims *d, size_t element) {
  const int64_t limit = IM2COL_GEMM_COL_BYTES_MAX / (int64_t)element;
  if (d->k > limit || d->m > limit / d->k) return -1;
  return d->k * d->m * (int64_t)element;
}

/* A half problem whose epilogue runs after the GEMM (file comment). */
static bool im2col_gemm_rounds_after(const conv_problem *pb) {
  return pb->dtype != CONV_DTYPE_F32 && pb->epilogue != CONV_EPILOGUE_NONE;
}

/* ---------------------------------------------------------------- alignment */

/* What run() will add to each base pointer: chunk starts, group starts and
 * cuBLASLt's own batch strides.  Only offsets that actually occur count, so
 * that, e.g., a single-group problem is not penalised for kg*pq.  (Each is a
 * multiple of the matrix's ld, whose alignment the heuristic checks itself;
 * counting them anyway costs nothing and relies on no such reasoning.) */
static void im2col_gemm_align_compute(const conv_problem *pb, im2col_gemm_state *st) {
  const int64_t chunk_step = pb->n > st->plan.chunk ? st->plan.chunk : 0;
  const bool grouped = pb->groups > 1;
  const size_t e = st->element;
  conv_gemm_align *align = &st->plan.align;
  if (st->direct) {
    const int64_t a_off[3] = {chunk_step * st->x_image, grouped ? st->x_group : 0,
                              st->dims.a_batch_stride};
    align->a = conv_cublaslt_element_offsets_align(IM2COL_GEMM_BASE_ALIGN, a_off, 3, e);
  } else {
    /* The col buffer starts at a 256-byte boundary of the workspace. */
    const int64_t a_off[1] = {st->dims.a_batch_stride};
    align->a = conv_cublaslt_element_offsets_align(IM2COL_GEMM_BASE_ALIGN, a_off, 1, e);
  }
  const int64_t b_off[1] = {grouped ? st->w_group : 0};
  align->b = conv_cublaslt_element_offsets_align(IM2COL_GEMM_BASE_ALIGN, b_off, 1, e);
  /* The sums buffer starts at a 256-byte boundary too and holds a chunk
   * as y does: its offsets are the group's and the batch stride. */
  const int64_t d_off[3] = {st->round_after ? 0 : chunk_step * st->y_image,
                            grouped ? st->y_group : 0, st->dims.d_batch_stride};
  align->d = conv_cublaslt_element_offsets_align(IM2COL_GEMM_BASE_ALIGN, d_off, 3,
                                                 st->round_after ? sizeof(float) : e);
}

/* ---------------------------------------------------------------- cuBLASLt */

/* A, B and D of one group for a chunk of `images` (file comment). */
static conv_status im2col_gemm_layouts(const conv_problem *pb, const void *state, int64_t images,
                              conv_cublaslt_layouts *lay, conv_error *err) {
  const im2col_gemm_state *s = state;
  const im2col_gemm_dims *d = &s->dims;
  const cudaDataType_t type = conv_cublaslt_data_type(pb->dtype),
                       d_type = s->round_after ? CUDA_R_32F : type;
  conv_status st;
  CONV_TRY(st,
           conv_cublaslt_layout_batched(&lay->a, type, d->m, d->k, d->m, (int)images,
                                        d->a_batch_stride, err),
           out);
  /* Every image of the batch multiplies the same filter block. */
  CONV_TRY(st,
           conv_cublaslt_layout_batched(&lay->b, type, d->k, d->n, d->k, (int)images, 0, err),
           out);
  CONV_TRY(st,
           conv_cublaslt_layout_batched(&lay->d, d_type, d->m, d->n, d->m, (int)images,
                                        d->d_batch_stride, err),
           out);
out:
  return st;
}

/* ---------------------------------------------------------------- build */

/* Shapes, offsets, alignments, the matmul descriptor and the full chunk's
 * layouts: everything both configs() and prepare() need. */
static conv_status im2col_gemm_create(const conv_problem *pb, int64_t chunk, void **out,
                             conv_error *err) {
  conv_shape sh;
  conv_status s = conv_problem_shape(pb, &sh);
  if (s != CONV_OK) return conv_error_set(err, s, "im2col_gemm: invalid problem");
  im2col_gemm_state *st = calloc(1, sizeof *st);
  if (st == NULL) return conv_error_set(err, CONV_OUT_OF_MEMORY, "im2col_gemm: out of memory");

  st->plan.chunk = chunk;
  st->direct = im2col_gemm_is_direct(pb);
  st->round_after = im2col_gemm_rounds_after(pb);
  st->element = conv_dtype_bytes(pb->dtype);
  im2col_gemm_dims_make(pb, &sh, st->direct, &st->dims);
  st->x_image = pb->c * pb->h * pb->w;
  st->x_group = sh.c_per_group * pb->h * pb->w;
  st->w_group = st->dims.n * st->dims.k;
  st->y_image = pb->k * st->dims.m;
  st->y_group = st->dims.n * st->dims.m;
  if (!st->direct) {
    const int64_t per_image = im2col_gemm_col_bytes_per_image(&st->dims, st->element);
    if (per_image < 0 || chunk > IM2COL_GEMM_COL_BYTES_MAX / per_image) {
      s = conv_error_set(err, CONV_UNSUPPORTED,
                         "im2col_gemm: im2col buffer for %lld images exceeds %lld bytes",
                         (long long)chunk, (long long)IM2COL_GEMM_COL_BYTES_MAX);
      goto fail;
    }
    st->col_bytes = (size_t)(chunk * per_image);
  }
  st->plan.buffer_bytes = st->col_bytes;
  if (st->round_after) {
    /* A chunk's sums, fp32: y_image < 2^31 (a valid problem), the chunk
     * at most the batch. */
    st->col_bytes = conv_cublaslt_ws_round(st->col_bytes);
    st->plan.buffer_bytes = st->col_bytes + (size_t)(chunk * st->y_image) * sizeof(float);
  }
  im2col_gemm_align_compute(pb, st);
  CONV_TRY(s,
           conv_cublaslt_desc_create(pb->dtype, pb->math, CUDA_R_32F, &st->plan.desc, NULL, err),
           fail);
  CONV_TRY(s, im2col_gemm_layouts(pb, st, chunk, &st->plan.full.lay, err), fail);
  *out = st;
  return CONV_OK;
fail:
  conv_gemm_release(st);
  return s;
}

/* ---------------------------------------------------------------- interface */

/* NCHW forward in fp32, fp16 or bf16 (conv_problem_nchw in any dtype). */
static bool im2col_gemm_applicable(const conv_problem *problem, const conv_env *env) {
  return problem != NULL && env != NULL && env->cublaslt != NULL &&
         conv_problem_supported_any_dtype(problem) && problem->layout == CONV_LAYOUT_NCHW &&
         problem->direction == CONV_FORWARD;
}

static conv_status im2col_gemm_check_chunk(const conv_problem *problem, int64_t chunk,
                                           conv_error *err) {
  if (chunk < 1 || chunk > problem->n || chunk > INT32_MAX)
    return conv_error_set(err, CONV_UNSUPPORTED, "im2col_gemm: batch chunk %lld not in [1, %lld]",
                          (long long)chunk, (long long)problem->n);
  return CONV_OK;
}

static int64_t im2col_gemm_pow2_below(int64_t v) {
  int64_t p = 1;
  while (p * 2 < v) p *= 2;
  return p;
}

/* Chunk sizes worth timing: the largest batch that fits (fewest, biggest
 * GEMMs), the largest power of two whose buffers stay within half the L2
 * (written then read back while still cached), and the least memory, so
 * that a tight workspace limit still leaves a candidate: 1 image, or,
 * where that would make more than IM2COL_GEMM_CHUNKS_MAX chunks, the
 * smallest power of two that does not (an H200 ran seed1_patch4's 20480
 * one-image chunks in 320-430 ms, its best config in 0.24 ms; no tuned
 * winner in the suite or the shipped file is chunked).  The buffers: col
 * unless 1x1, and a half problem's fp32 sums where its epilogue runs after
 * the GEMM; the 1x1 path of the others needs none, so only the whole
 * batch makes sense there. */
static int im2col_gemm_chunks(const conv_problem *pb, const conv_env *env,
                     int64_t out[CONV_GEMM_CHUNKS_MAX]) {
  conv_shape sh;
  if (conv_problem_shape(pb, &sh) != CONV_OK) return 0;
  const int64_t cap = pb->n < INT32_MAX ? pb->n : ((int64_t)1 << 30);
  const bool direct = im2col_gemm_is_direct(pb);
  if (direct && !im2col_gemm_rounds_after(pb)) {
    out[0] = cap;
    return 1;
  }
  im2col_gemm_dims d;
  im2col_gemm_dims_make(pb, &sh, false, &d);
  int64_t per_image =
      direct ? 0 : im2col_gemm_col_bytes_per_image(&d, conv_dtype_bytes(pb->dtype));
  if (per_image < 0) return 0;
  if (im2col_gemm_rounds_after(pb)) per_image += pb->k * d.m * (int64_t)sizeof(float);

  int count = 0;
  int64_t c = cap;
  while (c > 1 && c > IM2COL_GEMM_COL_BYTES_MAX / per_image) c = im2col_gemm_pow2_below(c);
  out[count++] = c;

  const int64_t l2 = env->device.l2_bytes > 0 ? env->device.l2_bytes : ((int64_t)32 << 20);
  int64_t mid = im2col_gemm_pow2_below(c);
  while (mid > 1 && mid * per_image > l2 / 2) mid /= 2;
  if (mid > 1 && mid < c) out[count++] = mid;
  int64_t least = 1;
  while (least < c && least * IM2COL_GEMM_CHUNKS_MAX < pb->n) least *= 2;
  if (least < c && (count == 1 || least < mid)) out[count++] = least;
  return count;
}

/* A 1x1 dense layer is one GEMM, and its winner among cuBLASLt's algos is
 * not always among the heuristic's first 3: in the shipped H200 file's
 * exhaustive tunings the whole batch's 4th to 8th algos won 27 of the 513
 * 1x1 dense forward problems (181 won by im2col_gemm, none by a later
 * algo), at 1.02-2.71x cuDNN's default.  A prediction from cuDNN-won
 * neighbours timed none of them: densenet121's c1024 k512 TF32 layer got
 * a plan 1.53x the exhaustive winner's time.  So a prediction times the
 * first 8 whatever its neighbours won. */
static int im2col_gemm_guessed_algos(const conv_problem *pb) {
  const bool one_by_one = pb->r == 1 && pb->s == 1 && pb->pad_h == 0 && pb->pad_w == 0;
  return one_by_one && pb->groups == 1 ? IM2COL_GEMM_ALGOS_GUESSED : 0;
}

static const conv_gemm_family im2col_gemm_family = {
    .name = "im2col_gemm",
    .scope = "NCHW forward (fp32 in strict or tf32 math, fp16, bf16)",
    .algos_offered = IM2COL_GEMM_ALGOS_OFFERED,
    .fallbacks = true,
    .applicable = im2col_gemm_applicable,
    .chunks = im2col_gemm_chunks,
    .check_chunk = im2col_gemm_check_chunk,
    .create = im2col_gemm_create,
    .layouts = im2col_gemm_layouts,
    .guessed_algos = im2col_gemm_guessed_algos,
};
CONV_GEMM_FAMILY_CALLBACKS(im2col_gemm, im2col_gemm_family)

static bool im2col_gemm_marks_best_guesses(const conv_problem *problem) {
  return im2col_gemm_guessed_algos(problem) > 0;
}

/* ---------------------------------------------------------------- run */

/* The col buffer, after cuBLASLt's part of the workspace. */
static void *im2col_gemm_col(const conv_exec *ex) {
  const im2col_gemm_state *st = ex->state;
  return (char *)ex->workspace + st->plan.gemm_ws_bytes;
}

/* A half problem's fp32 sums of a chunk, after the col buffer; NULL where
 * the GEMM writes y. */
static float *im2col_gemm_sums(const conv_exec *ex) {
  const im2col_gemm_state *st = ex->state;
  return st->round_after ? (float *)((char *)im2col_gemm_col(ex) + st->col_bytes) : NULL;
}

/* The chunk's y, bias and ReLU applied to its fp32 sums, rounded once. */
static conv_status im2col_gemm_round_chunk(const conv_exec *ex, int64_t n0, int64_t images,
                                           cudaStream_t stream, conv_error *err) {
  const im2col_gemm_state *st = ex->state;
  conv_problem chunk = *ex->problem;
  chunk.n = images;
  return conv_check_cuda(err,
                         conv_bias_act_round(&chunk, im2col_gemm_sums(ex),
                                             conv_gemm_at_mut(ex->y, n0 * st->y_image, st->element),
                                             ex->bias, stream),
                         "bias/activation launch");
}

/* im2col (unless 1x1) and one batched GEMM per group for images
 * [n0, n0 + images), into y or, where the epilogue runs after the GEMM,
 * the sums buffer and then y. */
static conv_status im2col_gemm_run_chunk(const conv_exec *ex, int64_t n0, int64_t images,
                                bool use_fallback, cudaStream_t stream, conv_error *err) {
  const im2col_gemm_state *st = ex->state;
  const conv_problem *pb = ex->problem;
  const conv_gemm_shape *g = conv_gemm_chunk_shape(&st->plan, images);
  const size_t e = st->element;
  float *sums = im2col_gemm_sums(ex);
  conv_status s = CONV_OK;
  for (int64_t grp = 0; grp < pb->groups && s == CONV_OK; ++grp) {
    const void *a;
    if (st->direct) {
      a = conv_gemm_at(ex->x, n0 * st->x_image + grp * st->x_group, e);
    } else {
      /* Only here is the workspace known to be non-NULL. */
      void *col = im2col_gemm_col(ex);
      s = conv_check_cuda(err, conv_im2col(pb, ex->x, n0, images, grp, col, stream),
                          "im2col launch");
      if (s != CONV_OK) break;
      a = col;
    }
    void *d = sums != NULL ? (void *)(sums + grp * st->y_group)
                           : conv_gemm_at_mut(ex->y, n0 * st->y_image + grp * st->y_group, e);
    s = conv_gemm_matmul(&im2col_gemm_family, ex, st->plan.desc, g, use_fallback,
                         st->plan.gemm_ws_bytes, a, conv_gemm_at(ex->w, grp * st->w_group, e),
                         0.0f, d, stream, err);
  }
  if (s == CONV_OK && sums != NULL) s = im2col_gemm_round_chunk(ex, n0, images, stream, err);
  return s;
}

/* Whether the caller's pointers meet the alignment the chosen algos were
 * picked for; if not, the float-aligned fallbacks run instead of faulting. */
static conv_status im2col_gemm_choose_algos(const conv_exec *ex, bool *use_fallback,
                                            conv_error *err) {
  const im2col_gemm_state *st = ex->state;
  const void *a_base = st->direct ? (const void *)ex->x : (const void *)im2col_gemm_col(ex);
  const void *d_base = st->round_after ? (const void *)im2col_gemm_sums(ex) : (const void *)ex->y;
  const void *ptrs[4] = {ex->x, ex->w, ex->y, a_base};
  const conv_gemm_align *align = &st->plan.align;
  const bool aligned = conv_cublaslt_aligned(a_base, align->a) &&
                       conv_cublaslt_aligned(ex->w, align->b) &&
                       conv_cublaslt_aligned(d_base, align->d);
  return conv_gemm_choose_algos(&st->plan, ex->problem->dtype, ptrs, 4, aligned, "im2col_gemm",
                                use_fallback, err);
}

static conv_status im2col_gemm_run(const conv_exec *ex, cudaStream_t stream, conv_error *err) {
  /* The col buffer copes with any float alignment (im2col_gemm_choose_algos). */
  conv_status s = conv_gemm_check_forward_run(ex, true, "im2col_gemm", err);
  if (s != CONV_OK) return s;
  const im2col_gemm_state *st = ex->state;
  bool use_fallback = false;
  s = im2col_gemm_choose_algos(ex, &use_fallback, err);
  const int64_t chunk = st->plan.chunk;
  for (int64_t n0 = 0; n0 < ex->problem->n && s == CONV_OK; n0 += chunk) {
    const int64_t rest = ex->problem->n - n0;
    s = im2col_gemm_run_chunk(ex, n0, rest < chunk ? rest : chunk, use_fallback, stream, err);
  }
  if (s != CONV_OK || st->round_after) return s;
  /* cuBLASLt's BIAS epilogue adds a vector along the rows of D, i.e. one
   * value per output pixel here; ours varies along D's columns (one per
   * output channel), so bias and ReLU run as a separate pass over y (a
   * no-op without an epilogue, the case of every half problem here). */
  return conv_check_cuda(err, conv_bias_act(ex->problem, ex->y, ex->bias, stream),
                         "bias/activation launch");
}

const conv_algorithm conv_algorithm_im2col_gemm = {
    .id = CONV_ALGO_IM2COL_GEMM,
    /* 2: the im2col kernel one thread per element, multiply-shift
     * divisions; 3: four elements a thread, loads before stores; 4: fp16
     * and bf16 */
    .version = 4,
    .name = "im2col_gemm",
    CONV_ALGORITHM_CALLBACKS(im2col_gemm),
    .marks_best_guesses = im2col_gemm_marks_best_guesses,
    .libraries = CONV_LIBRARY_CUBLASLT,
};
