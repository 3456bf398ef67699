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
 * Config values: {batch_chunk, algo_index}; algo_index ranks the cuBLASLt
 * heuristic's answers for the full chunk.
 *
 * Tests: tests/families/test_im2col_gemm.c.
 */
#include <stdint.h>
#include <stdlib.h>

#include "algorithms/common/im2col.h"
#include "algorithms/common/kernels.h"
#include "algorithms/common/cublaslt.h"

/* Past this an im2col buffer is not worth timing. */
#define IG_COL_BYTES_MAX ((int64_t)8 << 30)
#define IG_ALGOS_OFFERED 16
#define IG_CHUNKS_MAX 3
/* The pointer alignment prepare() assumes for x, w, y and the workspace.
 * 16 bytes is what vector loads and TMA need; cudaMalloc gives 256, and
 * run() checks the real pointers before trusting the assumption. */
#define IG_BASE_ALIGN 16u

/* ---------------------------------------------------------------- state */

/* The GEMM one group of a batch of images needs, in cuBLASLt's terms. */
typedef struct ig_dims {
  int64_t m, n, k;        /* pq, kg, crs                                   */
  int64_t a_batch_stride; /* crs*pq in the col buffer; c*h*w reading x     */
  int64_t d_batch_stride; /* k*pq                                          */
} ig_dims;

/* One matmul shape (full chunk or the last, partial one) and its algos. */
typedef struct ig_gemm {
  conv_cublaslt_layouts lay;
  conv_cublaslt_algos algos; /* prepared for ig_state.align */
} ig_gemm;

typedef struct ig_state {
  cublasLtMatmulDesc_t desc;
  ig_gemm full;
  ig_gemm tail; /* used when n % chunk != 0 */
  bool has_tail;
  bool direct; /* 1x1 path: A is x itself, no im2col */
  int64_t chunk;
  ig_dims dims;
  conv_gemm_align align; /* pointer alignments its algos rely on */
  /* Element offsets between consecutive images and groups. */
  int64_t x_image, x_group, w_group, y_image, y_group;
  /* Workspace: [GEMM workspace | col buffer]; the GEMM part first so that
   * both start 256-byte aligned. */
  size_t gemm_ws_bytes;
  size_t col_offset;
  size_t col_bytes;
} ig_state;

static bool ig_is_direct(const conv_problem *pb) {
  /* Dilation does not matter for a 1x1 filter: it touches one pixel. */
  return pb->r == 1 && pb->s == 1 && pb->stride_h == 1 && pb->stride_w == 1 && pb->pad_h == 0 &&
         pb->pad_w == 0;
}


static void ig_dims_make(const conv_problem *pb, const conv_shape *sh, bool direct, ig_dims *d) {
  d->m = sh->p * sh->q;
  d->n = sh->k_per_group;
  d->k = sh->c_per_group * pb->r * pb->s;
  d->a_batch_stride = direct ? pb->c * pb->h * pb->w : d->k * d->m;
  d->d_batch_stride = pb->k * d->m;
}

/* Bytes of col buffer one image needs, or -1 past IG_COL_BYTES_MAX (which
 * also keeps every later product far from overflowing). */
static int64_t ig_col_bytes_per_image(const ig_dims *d) {
  const int64_t limit = IG_COL_BYTES_MAX / (int64_t)sizeof(float);
  if (d->k > limit || d->m > limit / d->k) return -1;
  return d->k * d->m * (int64_t)sizeof(float);
}

static void ig_release(void *state) {
  ig_state *st = state;
  if (st == NULL) return;
  conv_cublaslt_layouts_destroy(&st->full.lay);
  conv_cublaslt_layouts_destroy(&st->tail.lay);
  if (st->desc) cublasLtMatmulDescDestroy(st->desc);
  free(st);
}

/* ---------------------------------------------------------------- alignment */

/* What run() will add to each base pointer: chunk starts, group starts and
 * cuBLASLt's own batch strides.  Only offsets that actually occur count, so
 * that, e.g., a single-group problem is not penalised for kg*pq.  (Each is a
 * multiple of the matrix's ld, whose alignment the heuristic checks itself;
 * counting them anyway costs nothing and relies on no such reasoning.) */
static void ig_align_compute(const conv_problem *pb, ig_state *st) {
  const int64_t chunk_step = pb->n > st->chunk ? st->chunk : 0;
  const bool grouped = pb->groups > 1;
  if (st->direct) {
    const int64_t a_off[3] = {chunk_step * st->x_image, grouped ? st->x_group : 0,
                              st->dims.a_batch_stride};
    st->align.a = conv_cublaslt_offsets_align(IG_BASE_ALIGN, a_off, 3);
  } else {
    /* The col buffer starts at a 256-byte boundary of the workspace. */
    const int64_t a_off[1] = {st->dims.a_batch_stride};
    st->align.a = conv_cublaslt_offsets_align(IG_BASE_ALIGN, a_off, 1);
  }
  const int64_t b_off[1] = {grouped ? st->w_group : 0};
  st->align.b = conv_cublaslt_offsets_align(IG_BASE_ALIGN, b_off, 1);
  const int64_t d_off[3] = {chunk_step * st->y_image, grouped ? st->y_group : 0,
                            st->dims.d_batch_stride};
  st->align.d = conv_cublaslt_offsets_align(IG_BASE_ALIGN, d_off, 3);
}

/* ---------------------------------------------------------------- cuBLASLt */

/* A, B and D of one group for a chunk of `images` (file comment). */
static conv_status ig_gemm_layouts(const ig_dims *d, int images, ig_gemm *g, conv_error *err) {
  conv_status st;
  CONV_TRY(st,
           conv_cublaslt_layout_batched(&g->lay.a, CUDA_R_32F, d->m, d->k, d->m, images,
                                        d->a_batch_stride, err),
           out);
  /* Every image of the batch multiplies the same filter block. */
  CONV_TRY(st,
           conv_cublaslt_layout_batched(&g->lay.b, CUDA_R_32F, d->k, d->n, d->k, images, 0, err),
           out);
  CONV_TRY(st,
           conv_cublaslt_layout_batched(&g->lay.d, CUDA_R_32F, d->m, d->n, d->m, images,
                                        d->d_batch_stride, err),
           out);
out:
  return st;
}

/* GEMM `g` under alignments `al`, as the heuristic is asked about it. */
static conv_cublaslt_query ig_query(const conv_problem *pb, const conv_env *env,
                                    const ig_state *st, const ig_gemm *g,
                                    const conv_gemm_align *al) {
  return (conv_cublaslt_query){.lt = env->cublaslt, .desc = st->desc, .layouts = &g->lay,
                               .math = pb->math, .align = al, .prefix = NULL};
}

static size_t ig_max_size(size_t a, size_t b) { return a > b ? a : b; }

/* The full chunk's algos: result[algo_index] under the prepared alignment,
 * and the heuristic's first choice for float-aligned pointers. */
static conv_status ig_pick_full(const conv_problem *pb, conv_env *env, ig_state *st,
                                int algo_index, conv_error *err) {
  const conv_cublaslt_query q = ig_query(pb, env, st, &st->full, &st->align);
  return conv_cublaslt_pick_algos(&q, algo_index, "im2col_gemm", &st->full.algos, err);
}

/* The tail's algos: the full chunk's where they fit, else the heuristic's
 * first choice for the tail's own shape. */
static conv_status ig_pick_tail(const conv_problem *pb, conv_env *env, ig_state *st,
                                conv_error *err) {
  conv_cublaslt_algos *t = &st->tail.algos;
  const conv_cublaslt_query q = ig_query(pb, env, st, &st->tail, &st->align);
  conv_status s;
  CONV_TRY(s,
           conv_cublaslt_tail_algo(&q, &st->full.algos.algo, "im2col_gemm", &t->algo,
                                   &t->ws_bytes, err),
           out);

  size_t ws = 0;
  t->has_fallback = false;
  if (st->full.algos.has_fallback && conv_cublaslt_algo_fits(&q, &st->full.algos.fallback, &ws)) {
    t->fallback = st->full.algos.fallback;
    t->has_fallback = true;
  } else {
    const conv_gemm_align weakest = {CONV_CUBLASLT_FLOAT_ALIGN, CONV_CUBLASLT_FLOAT_ALIGN,
                                     CONV_CUBLASLT_FLOAT_ALIGN};
    const conv_cublaslt_query loose = ig_query(pb, env, st, &st->tail, &weakest);
    cublasLtMatmulHeuristicResult_t res[CONV_CUBLASLT_HEURISTIC_MAX];
    int found = 0;
    CONV_TRY(s, conv_cublaslt_heuristic(&loose, res, &found, err), out);
    if (found > 0) {
      t->fallback = res[0].algo;
      t->has_fallback = true;
      ws = res[0].workspaceSize;
    }
  }
  if (t->has_fallback) t->ws_bytes = ig_max_size(t->ws_bytes, ws);
out:
  return s;
}

/* ---------------------------------------------------------------- build */

/* Shapes, offsets, alignments, the matmul descriptor and the full chunk's
 * layouts: everything both configs() and prepare() need. */
static conv_status ig_state_create(const conv_problem *pb, int64_t chunk, ig_state **out,
                                   conv_error *err) {
  conv_shape sh;
  conv_status s = conv_problem_shape(pb, &sh);
  if (s != CONV_OK) return conv_error_set(err, s, "im2col_gemm: invalid problem");
  ig_state *st = calloc(1, sizeof *st);
  if (st == NULL) return conv_error_set(err, CONV_OUT_OF_MEMORY, "im2col_gemm: out of memory");

  st->chunk = chunk;
  st->direct = ig_is_direct(pb);
  ig_dims_make(pb, &sh, st->direct, &st->dims);
  st->x_image = pb->c * pb->h * pb->w;
  st->x_group = sh.c_per_group * pb->h * pb->w;
  st->w_group = st->dims.n * st->dims.k;
  st->y_image = pb->k * st->dims.m;
  st->y_group = st->dims.n * st->dims.m;
  if (!st->direct) {
    const int64_t per_image = ig_col_bytes_per_image(&st->dims);
    if (per_image < 0 || chunk > IG_COL_BYTES_MAX / per_image) {
      s = conv_error_set(err, CONV_UNSUPPORTED,
                         "im2col_gemm: im2col buffer for %lld images exceeds %lld bytes",
                         (long long)chunk, (long long)IG_COL_BYTES_MAX);
      goto fail;
    }
    st->col_bytes = (size_t)(chunk * per_image);
  }
  ig_align_compute(pb, st);
  CONV_TRY(s, conv_cublaslt_desc_create(pb->math, CUDA_R_32F, &st->desc, NULL, err), fail);
  CONV_TRY(s, ig_gemm_layouts(&st->dims, (int)chunk, &st->full, err), fail);
  *out = st;
  return CONV_OK;
fail:
  ig_release(st);
  return s;
}

/* ---------------------------------------------------------------- interface */

static bool ig_applicable(const conv_problem *problem, const conv_env *env) {
  return problem != NULL && env != NULL && env->cublaslt != NULL &&
         conv_problem_nchw(problem);
}

static conv_status ig_prepare(const conv_problem *problem, conv_env *env,
                              const conv_config *config, conv_prepared *out, conv_error *err) {
  if (problem == NULL || env == NULL || env->cublaslt == NULL || config == NULL || out == NULL)
    return conv_error_set(err, CONV_INVALID_ARGUMENT, "im2col_gemm: NULL argument");
  if (!conv_problem_nchw(problem))
    return conv_error_set(err, CONV_UNSUPPORTED,
                          "im2col_gemm: only fp32 NCHW forward, strict or tf32 math");
  /* The config may come from a shipped cache: trust none of it. */
  /* Then each value against its own range. */
  const conv_status checked =
      conv_config_check(config, "im2col_gemm", 2, INT64_MIN, INT64_MAX, err);
  if (checked != CONV_OK) return checked;
  const int64_t chunk = config->values[0], algo_index = config->values[1];
  if (chunk < 1 || chunk > problem->n || chunk > INT32_MAX)
    return conv_error_set(err, CONV_UNSUPPORTED, "im2col_gemm: batch chunk %lld not in [1, %lld]",
                          (long long)chunk, (long long)problem->n);
  if (algo_index < 0 || algo_index >= CONV_CUBLASLT_HEURISTIC_MAX)
    return conv_error_set(err, CONV_UNSUPPORTED, "im2col_gemm: gemm algo %lld not in [0, %d)",
                          (long long)algo_index, CONV_CUBLASLT_HEURISTIC_MAX);

  ig_state *st = NULL;
  conv_status s;
  CONV_TRY(s, ig_state_create(problem, chunk, &st, err), fail);
  CONV_TRY(s, ig_pick_full(problem, env, st, (int)algo_index, err), fail);
  st->gemm_ws_bytes = st->full.algos.ws_bytes;
  const int64_t rest = problem->n % chunk;
  if (rest != 0) {
    st->has_tail = true;
    CONV_TRY(s, ig_gemm_layouts(&st->dims, (int)rest, &st->tail, err), fail);
    CONV_TRY(s, ig_pick_tail(problem, env, st, err), fail);
    st->gemm_ws_bytes = ig_max_size(st->gemm_ws_bytes, st->tail.algos.ws_bytes);
  }
  st->gemm_ws_bytes = conv_cublaslt_ws_round(st->gemm_ws_bytes);
  st->col_offset = st->gemm_ws_bytes;

  out->state = st;
  out->workspace_bytes = st->col_offset + st->col_bytes;
  out->arith = CONV_ARITH_DIRECT;
  /* cuBLASLt with a fixed algorithm (the config) gives bit-identical
   * results run to run on one GPU (cuBLAS's "results reproducibility"):
   * its split-K reductions are sequential, without atomics. */
  out->deterministic = true;
  return CONV_OK;
fail:
  ig_release(st);
  return s;
}

/* Number of algos configs() offers for one chunk size (0: none). */
static conv_status ig_count_algos(const conv_problem *pb, conv_env *env, int64_t chunk, int *count,
                                  conv_error *err) {
  ig_state *st = NULL;
  conv_status s;
  CONV_TRY(s, ig_state_create(pb, chunk, &st, err), out);
  const conv_cublaslt_query q = ig_query(pb, env, st, &st->full, &st->align);
  s = conv_cublaslt_offered_algos(&q, IG_ALGOS_OFFERED, count, err);
out:
  ig_release(st);
  return s;
}

static int64_t ig_pow2_below(int64_t v) {
  int64_t p = 1;
  while (p * 2 < v) p *= 2;
  return p;
}

/* Chunk sizes worth timing: the largest batch that fits (fewest, biggest
 * GEMMs), the largest power of two whose col buffer stays within half the L2
 * (written then read back while still cached), and 1 (least memory, so a
 * tight workspace limit still leaves a candidate).  The 1x1 path needs no
 * buffer, so only the whole batch makes sense there. */
static int ig_chunks(const conv_problem *pb, const conv_env *env, int64_t out[IG_CHUNKS_MAX]) {
  conv_shape sh;
  if (conv_problem_shape(pb, &sh) != CONV_OK) return 0;
  const int64_t cap = pb->n < INT32_MAX ? pb->n : ((int64_t)1 << 30);
  if (ig_is_direct(pb)) {
    out[0] = cap;
    return 1;
  }
  ig_dims d;
  ig_dims_make(pb, &sh, false, &d);
  const int64_t per_image = ig_col_bytes_per_image(&d);
  if (per_image < 0) return 0;

  int count = 0;
  int64_t c = cap;
  while (c > 1 && c > IG_COL_BYTES_MAX / per_image) c = ig_pow2_below(c);
  out[count++] = c;

  const int64_t l2 = env->device.l2_bytes > 0 ? env->device.l2_bytes : ((int64_t)32 << 20);
  int64_t mid = ig_pow2_below(c);
  while (mid > 1 && mid * per_image > l2 / 2) mid /= 2;
  if (mid > 1 && mid < c) out[count++] = mid;
  if (c > 1) out[count++] = 1;
  return count;
}

static conv_status ig_configs(const conv_problem *problem, conv_env *env, conv_config *out,
                              int max, int *count, conv_error *err) {
  if (problem == NULL || env == NULL || count == NULL || (max > 0 && out == NULL))
    return conv_error_set(err, CONV_INVALID_ARGUMENT, "im2col_gemm: NULL argument");
  *count = 0;
  if (!ig_applicable(problem, env)) return CONV_OK;
  int64_t chunks[IG_CHUNKS_MAX];
  const int n_chunks = ig_chunks(problem, env, chunks);
  return conv_cublaslt_chunk_configs(problem, env, chunks, n_chunks, ig_count_algos, out, max,
                                     count, err);
}

/* ---------------------------------------------------------------- run */

static conv_status ig_matmul(const conv_exec *ex, const ig_gemm *g, bool use_fallback,
                             const float *a, const float *b, float *d, cudaStream_t stream,
                             conv_error *err) {
  const ig_state *st = ex->state;
  const float one = 1.0f, zero = 0.0f;
  void *ws = st->gemm_ws_bytes ? ex->workspace : NULL;
  return conv_check_cublas(err,
                           cublasLtMatmul(ex->env->cublaslt, st->desc, &one, a, g->lay.a, b,
                                          g->lay.b, &zero, d, g->lay.d, d, g->lay.d,
                                          use_fallback ? &g->algos.fallback : &g->algos.algo, ws,
                                          st->gemm_ws_bytes, stream),
                           "cublasLtMatmul");
}

/* im2col (unless 1x1) and one batched GEMM per group for images
 * [n0, n0 + images). */
static conv_status ig_run_chunk(const conv_exec *ex, int64_t n0, int64_t images,
                                bool use_fallback, cudaStream_t stream, conv_error *err) {
  const ig_state *st = ex->state;
  const conv_problem *pb = ex->problem;
  const ig_gemm *g = images == st->chunk ? &st->full : &st->tail;
  conv_status s = CONV_OK;
  for (int64_t grp = 0; grp < pb->groups && s == CONV_OK; ++grp) {
    const float *a;
    if (st->direct) {
      a = ex->x + n0 * st->x_image + grp * st->x_group;
    } else {
      /* Only here is the workspace known to be non-NULL. */
      float *col = (float *)((char *)ex->workspace + st->col_offset);
      s = conv_check_cuda(err, conv_im2col(pb, ex->x, n0, images, grp, col, stream),
                          "im2col launch");
      if (s != CONV_OK) break;
      a = col;
    }
    s = ig_matmul(ex, g, use_fallback, a, ex->w + grp * st->w_group,
                  ex->y + n0 * st->y_image + grp * st->y_group, stream, err);
  }
  return s;
}

/* Whether the caller's pointers meet the alignment the chosen algos were
 * picked for; if not, the float-aligned fallbacks run instead of faulting. */
static conv_status ig_choose_algos(const conv_exec *ex, bool *use_fallback, conv_error *err) {
  const ig_state *st = ex->state;
  const void *a_base = st->direct ? (const void *)ex->x
                                  : (const void *)((const char *)ex->workspace + st->col_offset);
  const void *ptrs[4] = {ex->x, ex->w, ex->y, a_base};
  for (int i = 0; i < 4; ++i)
    if (!conv_cublaslt_aligned(ptrs[i], CONV_CUBLASLT_FLOAT_ALIGN))
      return conv_error_set(err, CONV_INVALID_ARGUMENT,
                            "im2col_gemm: a tensor pointer is not 4-byte aligned");
  *use_fallback = !(conv_cublaslt_aligned(a_base, st->align.a) &&
                    conv_cublaslt_aligned(ex->w, st->align.b) &&
                    conv_cublaslt_aligned(ex->y, st->align.d));
  if (*use_fallback &&
      (!st->full.algos.has_fallback || (st->has_tail && !st->tail.algos.has_fallback)))
    return conv_error_set(err, CONV_UNSUPPORTED,
                          "im2col_gemm: pointers less aligned than the plan's %u/%u/%u bytes "
                          "and cuBLASLt has no fallback algorithm",
                          st->align.a, st->align.b, st->align.d);
  return CONV_OK;
}

static conv_status ig_run(const conv_exec *ex, cudaStream_t stream, conv_error *err) {
  if (ex == NULL || ex->state == NULL || ex->problem == NULL || ex->env == NULL || ex->x == NULL ||
      ex->w == NULL || ex->y == NULL ||
      (ex->problem->epilogue != CONV_EPILOGUE_NONE && ex->bias == NULL))
    return conv_error_set(err, CONV_INVALID_ARGUMENT, "im2col_gemm: NULL argument");
  const ig_state *st = ex->state;
  const size_t need = st->col_offset + st->col_bytes;
  if (need > 0 && (ex->workspace == NULL || ex->workspace_bytes < need))
    return conv_error_set(err, CONV_INVALID_ARGUMENT,
                          "im2col_gemm: workspace of %zu bytes, %zu needed", ex->workspace_bytes,
                          need);
  if (st->gemm_ws_bytes > 0 && !conv_cublaslt_aligned(ex->workspace, CONV_CUBLASLT_WS_ALIGN))
    return conv_error_set(err, CONV_INVALID_ARGUMENT,
                          "im2col_gemm: workspace not %u-byte aligned", CONV_CUBLASLT_WS_ALIGN);
  bool use_fallback = false;
  conv_status s = ig_choose_algos(ex, &use_fallback, err);
  for (int64_t n0 = 0; n0 < ex->problem->n && s == CONV_OK; n0 += st->chunk) {
    const int64_t rest = ex->problem->n - n0;
    s = ig_run_chunk(ex, n0, rest < st->chunk ? rest : st->chunk, use_fallback, stream, err);
  }
  if (s != CONV_OK) return s;
  /* cuBLASLt's BIAS epilogue adds a vector along the rows of D, i.e. one
   * value per output pixel here; ours varies along D's columns (one per
   * output channel), so bias and ReLU run as a separate pass over y. */
  return conv_check_cuda(err, conv_bias_act(ex->problem, ex->y, ex->bias, stream),
                         "bias/activation launch");
}

static void ig_describe(const conv_config *config, char *text, size_t size) {
  conv_cublaslt_config_describe(config, "batch", text, size);
}

const conv_algorithm conv_algorithm_im2col_gemm = {
    .id = CONV_ALGO_IM2COL_GEMM,
    /* 2: the im2col kernel one thread per element, multiply-shift
     * divisions; 3: four elements a thread, loads before stores */
    .version = 3,
    .name = "im2col_gemm",
    CONV_ALGORITHM_CALLBACKS(ig),
};
