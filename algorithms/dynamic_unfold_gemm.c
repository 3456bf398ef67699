/*
 * dynamic_unfold_gemm.c -- the `dynamic_unfold_gemm` candidate: the dynamic
 * op (CONV_OP_DYNAMIC) as unfold + cuBLASLt strided-batched GEMMs, the
 * baseline the direct kernels are measured against (what PyTorch's
 * unfold + einsum does).  Forward and backward-filter; backward-data would
 * need a fold (col2im) of per-pixel outer products and is left to
 * dynamic_direct.
 *
 * The workspace holds the unfolded input of a chunk of images,
 * u[b][g][pixel][ci][tap] (dynamic.h), in which every pixel's window is a
 * k*k x cg column-major matrix at a uniform stride.  Per image b and group
 * g one strided-batched GEMM, batched over the P*Q pixels, takes the
 * weights and y (or dy, dwt) where they lie: a pixel's row of weights or
 * outputs is a 1 x n matrix with ld = P*Q, and the next pixel's starts one
 * element later (batch stride 1):
 *   forward          y_pix  (1 x cg)  = wt_pix (1 x k*k) * U_pix (k*k x cg)
 *   backward-filter  dwt_pix (1 x k*k) = dy_pix (1 x cg) * U_pix^T (cg x k*k)
 * Across images and groups the weights' and outputs' pixels do not share
 * one stride (their planes are k*k and cg planes apart), hence a GEMM per
 * (b, g).
 *
 * Config values: {images, algo_index}: images unfolded at a time (the
 * workspace is their unfolded tensor, which the context's workspace limit
 * bounds), and the rank of cuBLASLt's heuristic answer.
 *
 * Tests: tests/families/test_dynamic_unfold_gemm.c.
 */
#include <stdint.h>
#include <stdlib.h>

#include "algorithms/dynamic_unfold_gemm.h"
#include "algorithms/common/gemm_family.h"

#define DYNAMIC_UNFOLD_GEMM_ALGOS_OFFERED 3
/* One launch per image and group: past this the baseline is only launches. */
#define DYNAMIC_UNFOLD_GEMM_MAX_GEMMS 65536
/* Past this an unfolded chunk is not worth timing. */
#define DYNAMIC_UNFOLD_GEMM_UNFOLD_BYTES_MAX ((int64_t)8 << 30)

typedef struct dynamic_unfold_gemm_state {
  /* First (gemm_family.h): one GEMM shape, whatever the chunk; its buffer
   * is the unfolded input u. */
  conv_gemm_plan plan;
  conv_dynamic_dims d;
  conv_direction direction;
  int images; /* per unfold */
} dynamic_unfold_gemm_state;

static bool dynamic_unfold_gemm_applicable(const conv_problem *pb, const conv_env *env) {
  return pb != NULL && env != NULL && env->cublaslt != NULL && conv_problem_dynamic(pb) &&
         pb->direction != CONV_BACKWARD_DATA && pb->groups >= 1 &&
         pb->n <= DYNAMIC_UNFOLD_GEMM_MAX_GEMMS / pb->groups;
}

/* Bytes of u per image, or -1 past DYNAMIC_UNFOLD_GEMM_UNFOLD_BYTES_MAX. */
static int64_t dynamic_unfold_gemm_unfold_bytes_per_image(const conv_dynamic_dims *d) {
  const int64_t elems = (int64_t)d->c * d->taps * d->p * d->q; /* < 2^31 * 49 */
  const int64_t bytes = elems * (int64_t)sizeof(float);
  return bytes > DYNAMIC_UNFOLD_GEMM_UNFOLD_BYTES_MAX ? -1 : bytes;
}

/* rows x cols column-major, batched over the P*Q pixels.  Not
 * conv_cublaslt_layout_batched: our messages name the attribute set. */
static conv_status dynamic_unfold_gemm_layout(cublasLtMatrixLayout_t *layout, int64_t rows,
                                              int64_t cols, int64_t ld, int pixels,
                                              int64_t batch_stride, conv_error *err) {
  conv_status st =
      conv_cublaslt_layout(layout, CUDA_R_32F, rows, cols, ld, "dynamic_unfold_gemm", err);
  const int32_t count = pixels;
  if (st == CONV_OK)
    st = conv_check_cublas(err, cublasLtMatrixLayoutSetAttribute(*layout,
                                                                 CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT,
                                                                 &count, sizeof count),
                           "dynamic_unfold_gemm: batch count");
  if (st == CONV_OK)
    st = conv_check_cublas(err, cublasLtMatrixLayoutSetAttribute(
                                    *layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                                    &batch_stride, sizeof batch_stride),
                           "dynamic_unfold_gemm: batch stride");
  return st;
}

/* The descriptor and the three layouts of one (b, g) GEMM (file comment). */
static conv_status dynamic_unfold_gemm_gemm_describe(const conv_problem *pb,
                                                     dynamic_unfold_gemm_state *st,
                                                     conv_error *err) {
  const conv_dynamic_dims *d = &st->d;
  const int64_t plane = (int64_t)d->p * d->q, u_stride = (int64_t)d->cg * d->taps;
  conv_cublaslt_layouts *lay = &st->plan.full.lay;
  conv_status s;
  CONV_TRY(s,
           conv_cublaslt_desc_create(CONV_DTYPE_F32, pb->math, CUDA_R_32F, &st->plan.desc,
                                     "dynamic_unfold_gemm", err),
           out);
  const int pixels = (int)plane;
  if (st->direction == CONV_FORWARD) {
    CONV_TRY(s, dynamic_unfold_gemm_layout(&lay->a, 1, d->taps, plane, pixels, 1, err), out);
    CONV_TRY(s, dynamic_unfold_gemm_layout(&lay->b, d->taps, d->cg, d->taps, pixels, u_stride, err),
             out);
    CONV_TRY(s, dynamic_unfold_gemm_layout(&lay->d, 1, d->cg, plane, pixels, 1, err), out);
  } else {
    const cublasOperation_t transpose = CUBLAS_OP_T;
    CONV_TRY(s, conv_check_cublas(err, cublasLtMatmulDescSetAttribute(
                                           st->plan.desc, CUBLASLT_MATMUL_DESC_TRANSB, &transpose,
                                           sizeof transpose),
                                  "dynamic_unfold_gemm: transb"), out);
    CONV_TRY(s, dynamic_unfold_gemm_layout(&lay->a, 1, d->cg, plane, pixels, 1, err), out);
    CONV_TRY(s, dynamic_unfold_gemm_layout(&lay->b, d->taps, d->cg, d->taps, pixels, u_stride, err),
             out);
    CONV_TRY(s, dynamic_unfold_gemm_layout(&lay->d, 1, d->taps, plane, pixels, 1, err), out);
  }
out:
  return s;
}

static conv_status dynamic_unfold_gemm_create(const conv_problem *pb, int64_t images, void **out,
                             conv_error *err) {
  dynamic_unfold_gemm_state *st = calloc(1, sizeof *st);
  if (st == NULL) return conv_error_set(err, CONV_OUT_OF_MEMORY, "dynamic_unfold_gemm: malloc");
  conv_status s = CONV_OK;
  if (!conv_dynamic_dims_make(pb, &st->d)) {
    s = conv_error_set(err, CONV_UNSUPPORTED, "dynamic_unfold_gemm: not a valid dynamic problem");
    goto fail;
  }
  st->direction = pb->direction;
  const int64_t per_image = dynamic_unfold_gemm_unfold_bytes_per_image(&st->d);
  if (images < 1 || images > st->d.b || per_image < 0 ||
      images > DYNAMIC_UNFOLD_GEMM_UNFOLD_BYTES_MAX / per_image) {
    s = conv_error_set(err, CONV_UNSUPPORTED,
                       "dynamic_unfold_gemm: %lld images a chunk: not in [1, %d], or their "
                       "unfolded input past %lld bytes",
                       (long long)images, st->d.b, (long long)DYNAMIC_UNFOLD_GEMM_UNFOLD_BYTES_MAX);
    goto fail;
  }
  st->images = (int)images;
  st->plan.buffer_bytes = (size_t)(images * per_image);
  /* Every pointer is only float-aligned: pixels are one element apart. */
  st->plan.align = (conv_gemm_align){4, 4, 4};
  CONV_TRY(s, dynamic_unfold_gemm_gemm_describe(pb, st, err), fail);
  *out = st;
  return CONV_OK;
fail:
  conv_gemm_release(st);
  return s;
}

static void dynamic_unfold_gemm_release(void *state) { conv_gemm_release(state); }

/* The shell's pieces that dynamic_unfold_gemm uses; its configs(),
 * prepare() and run() are its own. */
static const conv_gemm_family dynamic_unfold_gemm_family = {
    .name = "dynamic_unfold_gemm",
    .prefix = "dynamic_unfold_gemm",
    .algos_offered = DYNAMIC_UNFOLD_GEMM_ALGOS_OFFERED,
    .create = dynamic_unfold_gemm_create,
};

static conv_status dynamic_unfold_gemm_prepare(const conv_problem *problem, conv_env *env,
                              const conv_config *config, conv_prepared *out, conv_error *err) {
  if (problem == NULL || env == NULL || config == NULL || out == NULL)
    return conv_error_set(err, CONV_INVALID_ARGUMENT, "dynamic_unfold_gemm: NULL argument");
  if (!dynamic_unfold_gemm_applicable(problem, env))
    return conv_error_set(err, CONV_UNSUPPORTED,
                          "dynamic_unfold_gemm: only dynamic forward and backward-filter, at "
                          "most %d images x groups",
                          DYNAMIC_UNFOLD_GEMM_MAX_GEMMS);
  conv_status s = conv_config_check(config, "dynamic_unfold_gemm", 2, 0, 1 << 30, err);
  if (s != CONV_OK) return s;
  if (config->values[1] >= CONV_CUBLASLT_HEURISTIC_MAX)
    return conv_error_set(err, CONV_UNSUPPORTED,
                          "dynamic_unfold_gemm: gemm algo %lld not in [0, %d)",
                          (long long)config->values[1], CONV_CUBLASLT_HEURISTIC_MAX);
  void *state = NULL;
  CONV_TRY(s, dynamic_unfold_gemm_create(problem, config->values[0], &state, err), fail);
  conv_gemm_plan *plan = state;
  const conv_cublaslt_query q =
      conv_gemm_query(&dynamic_unfold_gemm_family, plan, &plan->full, problem, env);
  cublasLtMatmulHeuristicResult_t picked;
  CONV_TRY(s,
           conv_cublaslt_ranked_algo(&q, (int)config->values[1], "dynamic_unfold_gemm", &picked,
                                     err),
           fail);
  plan->full.algos.algo = picked.algo;
  plan->gemm_ws_bytes = conv_cublaslt_ws_round(picked.workspaceSize);
  /* Deterministic as the GEMM families are (conv_gemm_prepared): the
   * unfold is a copy. */
  return conv_gemm_prepared(state, conv_gemm_workspace(plan), out);
fail:
  conv_gemm_release(state);
  return s;
}

/* Chunks worth timing: the whole batch (fewest unfold launches) and one
 * image (least workspace, so a tight limit still leaves a candidate). */
static conv_status dynamic_unfold_gemm_configs(const conv_problem *problem, conv_env *env,
                                               conv_config *out, int max, int *count,
                                               conv_error *err) {
  if (problem == NULL || count == NULL || max < 0 || (max > 0 && out == NULL))
    return conv_error_set(err, CONV_INVALID_ARGUMENT,
                          "dynamic_unfold_gemm: bad configs() arguments");
  *count = 0;
  if (!dynamic_unfold_gemm_applicable(problem, env)) return CONV_OK;
  const int64_t chunks[2] = {problem->n, 1};
  int n = 0;
  for (int c = 0; c < (problem->n > 1 ? 2 : 1); c++) {
    int offered = 0;
    const conv_status s =
        conv_gemm_count_algos(&dynamic_unfold_gemm_family, problem, env, chunks[c], &offered, err);
    if (s == CONV_UNSUPPORTED) continue; /* too large unfolded: not offered */
    if (s != CONV_OK) return s;
    for (int a = 0; a < offered && n < max; a++) out[n++] = (conv_config){2, {chunks[c], a}, 0};
  }
  *count = n;
  return CONV_OK;
}

/* The (b, g) GEMMs of one unfolded chunk of images [b0, b0 + images). */
static conv_status dynamic_unfold_gemm_gemms(const conv_exec *ex, int b0, int images,
                                             const float *u, cudaStream_t stream, conv_error *err) {
  const dynamic_unfold_gemm_state *st = ex->state;
  const conv_dynamic_dims *d = &st->d;
  const int64_t plane = (int64_t)d->p * d->q;
  conv_status s = CONV_OK;
  for (int i = 0; i < images * d->groups && s == CONV_OK; i++) {
    const int b = b0 + i / d->groups, g = i % d->groups;
    const float *ub = u + (int64_t)i * plane * d->cg * d->taps;
    const int64_t channels = ((int64_t)b * d->c + (int64_t)g * d->cg) * plane;
    const int64_t weights = ((int64_t)b * d->groups + g) * d->taps * plane;
    const float *a = st->direction == CONV_FORWARD ? ex->w + weights : ex->y + channels;
    float *out = st->direction == CONV_FORWARD ? ex->y + channels : (float *)ex->w + weights;
    s = conv_gemm_matmul(&dynamic_unfold_gemm_family, ex, st->plan.desc, &st->plan.full, false,
                         st->plan.gemm_ws_bytes, a, ub, 0.0f, out, stream, err);
  }
  return s;
}

static conv_status dynamic_unfold_gemm_run(const conv_exec *ex, cudaStream_t stream,
                                           conv_error *err) {
  if (ex == NULL || ex->state == NULL || ex->env == NULL || ex->x == NULL || ex->w == NULL ||
      ex->y == NULL)
    return conv_error_set(err, CONV_INVALID_ARGUMENT, "dynamic_unfold_gemm: NULL argument");
  const dynamic_unfold_gemm_state *st = ex->state;
  conv_status s = conv_gemm_check_workspace(&st->plan, ex, false, "dynamic_unfold_gemm", err);
  if (s != CONV_OK) return s;
  float *u = (float *)((char *)ex->workspace + st->plan.gemm_ws_bytes);
  for (int b0 = 0; b0 < st->d.b && s == CONV_OK; b0 += st->images) {
    const int images = st->d.b - b0 < st->images ? st->d.b - b0 : st->images;
    s = conv_check_cuda(err, conv_dynamic_unfold(&st->d, ex->x, b0, images, u, stream),
                        "dynamic_unfold_gemm: unfold launch");
    if (s == CONV_OK) s = dynamic_unfold_gemm_gemms(ex, b0, images, u, stream, err);
  }
  return s;
}

static void dynamic_unfold_gemm_describe(const conv_config *config, char *text, size_t size) {
  conv_cublaslt_config_describe(config, "images", text, size);
}

const conv_algorithm conv_algorithm_dynamic_unfold_gemm = {
    .id = CONV_ALGO_DYNAMIC_UNFOLD_GEMM,
    .version = 1,
    .name = "dynamic_unfold_gemm",
    CONV_ALGORITHM_CALLBACKS(dynamic_unfold_gemm),
    .libraries = CONV_LIBRARY_CUBLASLT,
};
