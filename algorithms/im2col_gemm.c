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
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "algorithms/im2col.h"
#include "algorithms/kernels.h"
#include "runtime/internal.h"

/* cuBLAS recommends 32 MiB of workspace on Hopper (4 MiB before). */
#define IG_GEMM_WS_MAX ((size_t)32 << 20)
/* Past this an im2col buffer is not worth timing. */
#define IG_COL_BYTES_MAX ((int64_t)8 << 30)
/* prepare() accepts algo_index below this; configs() offers fewer. */
#define IG_HEURISTIC_MAX 8
#define IG_ALGOS_OFFERED 4
#define IG_CHUNKS_MAX 3
/* The pointer alignment prepare() assumes for x, w, y and the workspace.
 * 16 bytes is what vector loads and TMA need; cudaMalloc gives 256, and
 * run() checks the real pointers before trusting the assumption. */
#define IG_BASE_ALIGN 16u
/* The weakest alignment a float pointer can have: the fallback algos'. */
#define IG_MIN_ALIGN 4u
/* cuBLAS documents 256-byte alignment for its workspace (cublasSetWorkspace);
 * we hold cuBLASLt's to the same, which cudaMalloc always meets. */
#define IG_WS_ALIGN 256u

/* ---------------------------------------------------------------- state */

/* The GEMM one group of a batch of images needs, in cuBLASLt's terms. */
typedef struct ig_dims {
  int64_t m, n, k;        /* pq, kg, crs                                   */
  int64_t a_batch_stride; /* crs*pq in the col buffer; c*h*w reading x     */
  int64_t d_batch_stride; /* k*pq                                          */
} ig_dims;

/* One matmul shape (full chunk or the last, partial one) and its algos. */
typedef struct ig_gemm {
  cublasLtMatrixLayout_t a, b, d;
  cublasLtMatmulAlgo_t algo;     /* valid when pointers meet ig_state.align */
  cublasLtMatmulAlgo_t fallback; /* valid for any float-aligned pointers     */
  bool has_fallback;
  size_t ws_bytes; /* the larger of the two algos' workspace needs */
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
  const ig_gemm *gemms[2] = {&st->full, &st->tail};
  for (int i = 0; i < 2; ++i) {
    if (gemms[i]->a) cublasLtMatrixLayoutDestroy(gemms[i]->a);
    if (gemms[i]->b) cublasLtMatrixLayoutDestroy(gemms[i]->b);
    if (gemms[i]->d) cublasLtMatrixLayoutDestroy(gemms[i]->d);
  }
  if (st->desc) cublasLtMatmulDescDestroy(st->desc);
  free(st);
}

/* ---------------------------------------------------------------- alignment */

/* The alignment (bytes) every pointer base + i*offset keeps when base is
 * aligned to `base`: offsets in elements, 0 entries ignored. */
static uint32_t ig_offsets_align(uint32_t base, const int64_t *offsets, int count) {
  uint32_t align = base;
  for (int i = 0; i < count; ++i) {
    if (offsets[i] <= 0) continue;
    const uint64_t low = (uint64_t)offsets[i] & (~(uint64_t)offsets[i] + 1u);
    if (low < align / sizeof(float)) align = (uint32_t)(low * sizeof(float));
  }
  return align;
}

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
    st->align.a = ig_offsets_align(IG_BASE_ALIGN, a_off, 3);
  } else {
    /* The col buffer starts at a 256-byte boundary of the workspace. */
    const int64_t a_off[1] = {st->dims.a_batch_stride};
    st->align.a = ig_offsets_align(IG_BASE_ALIGN, a_off, 1);
  }
  const int64_t b_off[1] = {grouped ? st->w_group : 0};
  st->align.b = ig_offsets_align(IG_BASE_ALIGN, b_off, 1);
  const int64_t d_off[3] = {chunk_step * st->y_image, grouped ? st->y_group : 0,
                            st->dims.d_batch_stride};
  st->align.d = ig_offsets_align(IG_BASE_ALIGN, d_off, 3);
}

static bool ig_aligned(const void *ptr, uint32_t align) {
  return ((uintptr_t)ptr & (uintptr_t)(align - 1u)) == 0;
}

/* ---------------------------------------------------------------- cuBLASLt */

static conv_status ig_desc_create(conv_math math, cublasLtMatmulDesc_t *desc, conv_error *err) {
  /* STRICT must never reach TF32 tensor cores: plain 32F compute guarantees
   * IEEE fp32 products (the preference mask below double-checks). */
  const cublasComputeType_t compute =
      math == CONV_MATH_TF32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  return conv_check_cublas(err, cublasLtMatmulDescCreate(desc, compute, CUDA_R_32F),
                           "cublasLtMatmulDescCreate");
}

static conv_status ig_layout_set(cublasLtMatrixLayout_t layout,
                                 cublasLtMatrixLayoutAttribute_t attr, const void *value,
                                 size_t size, conv_error *err) {
  return conv_check_cublas(err, cublasLtMatrixLayoutSetAttribute(layout, attr, value, size),
                           "cublasLtMatrixLayoutSetAttribute");
}

/* A batch of `images` column-major rows x cols fp32 matrices; a created
 * layout is kept in *layout (and destroyed by ig_release) even on failure. */
static conv_status ig_layout_create(cublasLtMatrixLayout_t *layout, int64_t rows, int64_t cols,
                                    int64_t ld, int images, int64_t batch_stride,
                                    conv_error *err) {
  conv_status st;
  CONV_TRY(st,
           conv_check_cublas(err,
                             cublasLtMatrixLayoutCreate(layout, CUDA_R_32F, (uint64_t)rows,
                                                        (uint64_t)cols, ld),
                             "cublasLtMatrixLayoutCreate"),
           out);
  const int32_t count = images;
  CONV_TRY(st,
           ig_layout_set(*layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof count, err),
           out);
  CONV_TRY(st,
           ig_layout_set(*layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &batch_stride,
                         sizeof batch_stride, err),
           out);
out:
  return st;
}

static conv_status ig_gemm_layouts(const ig_dims *d, int images, ig_gemm *g, conv_error *err) {
  conv_status st;
  CONV_TRY(st, ig_layout_create(&g->a, d->m, d->k, d->m, images, d->a_batch_stride, err), out);
  /* Every image of the batch multiplies the same filter block. */
  CONV_TRY(st, ig_layout_create(&g->b, d->k, d->n, d->k, images, 0, err), out);
  CONV_TRY(st, ig_layout_create(&g->d, d->m, d->n, d->m, images, d->d_batch_stride, err), out);
out:
  return st;
}

/* Ranked algos for gemm `g` under alignments `al`; *found counts the usable
 * leading results (0 when cuBLASLt has none, which is not an error). */
static conv_status ig_heuristic(cublasLtHandle_t lt, cublasLtMatmulDesc_t desc, const ig_gemm *g,
                                conv_math math, const conv_gemm_align *al,
                                cublasLtMatmulHeuristicResult_t results[IG_HEURISTIC_MAX],
                                int *found, conv_error *err) {
  cublasLtMatmulPreference_t pref = NULL;
  conv_status st;
  CONV_TRY(st,
           conv_check_cublas(err, cublasLtMatmulPreferenceCreate(&pref),
                             "cublasLtMatmulPreferenceCreate"),
           out);
  CONV_TRY(st, conv_cublaslt_pref_fill(pref, math, IG_GEMM_WS_MAX, al, err), out);
  int returned = 0;
  const cublasStatus_t cs = cublasLtMatmulAlgoGetHeuristic(lt, desc, g->a, g->b, g->d, g->d, pref,
                                                           IG_HEURISTIC_MAX, results, &returned);
  if (cs == CUBLAS_STATUS_NOT_SUPPORTED) {
    returned = 0;
  } else {
    CONV_TRY(st, conv_check_cublas(err, cs, "cublasLtMatmulAlgoGetHeuristic"), out);
  }
  int usable = 0;
  while (usable < returned && results[usable].state == CUBLAS_STATUS_SUCCESS &&
         results[usable].workspaceSize <= IG_GEMM_WS_MAX)
    ++usable;
  *found = usable;
out:
  if (pref) cublasLtMatmulPreferenceDestroy(pref);
  return st;
}

/* Whether `algo`, chosen for the full chunk, also runs the tail's shape;
 * keeping the same kernel keeps the timing honest. */
static bool ig_algo_fits(cublasLtHandle_t lt, cublasLtMatmulDesc_t desc, const ig_gemm *g,
                         const cublasLtMatmulAlgo_t *algo, size_t *ws_bytes) {
  cublasLtMatmulHeuristicResult_t res;
  if (cublasLtMatmulAlgoCheck(lt, desc, g->a, g->b, g->d, g->d, algo, &res) !=
      CUBLAS_STATUS_SUCCESS)
    return false;
  if (res.workspaceSize > IG_GEMM_WS_MAX) return false;
  *ws_bytes = res.workspaceSize;
  return true;
}

static size_t ig_max_size(size_t a, size_t b) { return a > b ? a : b; }

/* The full chunk's algos: result[algo_index] under the prepared alignment,
 * and the heuristic's first choice for float-aligned pointers. */
static conv_status ig_pick_full(const conv_problem *pb, conv_env *env, ig_state *st,
                                int algo_index, conv_error *err) {
  cublasLtMatmulHeuristicResult_t res[IG_HEURISTIC_MAX];
  int found = 0;
  conv_status s;
  CONV_TRY(s, ig_heuristic(env->cublaslt, st->desc, &st->full, pb->math, &st->align, res, &found,
                           err),
           out);
  if (found <= algo_index) {
    s = conv_error_set(err, CONV_UNSUPPORTED,
                       "im2col_gemm: cuBLASLt offers %d algorithms for this GEMM, not %d", found,
                       algo_index + 1);
    goto out;
  }
  st->full.algo = res[algo_index].algo;
  st->full.ws_bytes = res[algo_index].workspaceSize;

  const conv_gemm_align weakest = {IG_MIN_ALIGN, IG_MIN_ALIGN, IG_MIN_ALIGN};
  CONV_TRY(s, ig_heuristic(env->cublaslt, st->desc, &st->full, pb->math, &weakest, res, &found,
                           err),
           out);
  st->full.has_fallback = found > 0;
  if (found > 0) {
    st->full.fallback = res[0].algo;
    st->full.ws_bytes = ig_max_size(st->full.ws_bytes, res[0].workspaceSize);
  }
out:
  return s;
}

/* The tail's algos: the full chunk's where they fit, else the heuristic's
 * first choice for the tail's own shape. */
static conv_status ig_pick_tail(const conv_problem *pb, conv_env *env, ig_state *st,
                                conv_error *err) {
  cublasLtMatmulHeuristicResult_t res[IG_HEURISTIC_MAX];
  int found = 0;
  size_t ws = 0;
  conv_status s = CONV_OK;
  ig_gemm *t = &st->tail;
  if (ig_algo_fits(env->cublaslt, st->desc, t, &st->full.algo, &ws)) {
    t->algo = st->full.algo;
  } else {
    CONV_TRY(s, ig_heuristic(env->cublaslt, st->desc, t, pb->math, &st->align, res, &found, err),
             out);
    if (found == 0) {
      s = conv_error_set(err, CONV_UNSUPPORTED,
                         "im2col_gemm: cuBLASLt has no algorithm for the last partial chunk");
      goto out;
    }
    t->algo = res[0].algo;
    ws = res[0].workspaceSize;
  }
  t->ws_bytes = ws;

  t->has_fallback = false;
  if (st->full.has_fallback &&
      ig_algo_fits(env->cublaslt, st->desc, t, &st->full.fallback, &ws)) {
    t->fallback = st->full.fallback;
    t->has_fallback = true;
  } else {
    const conv_gemm_align weakest = {IG_MIN_ALIGN, IG_MIN_ALIGN, IG_MIN_ALIGN};
    CONV_TRY(s, ig_heuristic(env->cublaslt, st->desc, t, pb->math, &weakest, res, &found, err),
             out);
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
  CONV_TRY(s, ig_desc_create(pb->math, &st->desc, err), fail);
  CONV_TRY(s, ig_gemm_layouts(&st->dims, (int)chunk, &st->full, err), fail);
  *out = st;
  return CONV_OK;
fail:
  ig_release(st);
  return s;
}

static size_t ig_round_up(size_t v, size_t to) { return (v + to - 1) / to * to; }

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
  if (algo_index < 0 || algo_index >= IG_HEURISTIC_MAX)
    return conv_error_set(err, CONV_UNSUPPORTED, "im2col_gemm: gemm algo %lld not in [0, %d)",
                          (long long)algo_index, IG_HEURISTIC_MAX);

  ig_state *st = NULL;
  conv_status s;
  CONV_TRY(s, ig_state_create(problem, chunk, &st, err), fail);
  CONV_TRY(s, ig_pick_full(problem, env, st, (int)algo_index, err), fail);
  st->gemm_ws_bytes = st->full.ws_bytes;
  const int64_t rest = problem->n % chunk;
  if (rest != 0) {
    st->has_tail = true;
    CONV_TRY(s, ig_gemm_layouts(&st->dims, (int)rest, &st->tail, err), fail);
    CONV_TRY(s, ig_pick_tail(problem, env, st, err), fail);
    st->gemm_ws_bytes = ig_max_size(st->gemm_ws_bytes, st->tail.ws_bytes);
  }
  st->gemm_ws_bytes = ig_round_up(st->gemm_ws_bytes, IG_WS_ALIGN);
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
  cublasLtMatmulHeuristicResult_t res[IG_HEURISTIC_MAX];
  int found = 0;
  conv_status s;
  CONV_TRY(s, ig_state_create(pb, chunk, &st, err), out);
  CONV_TRY(s, ig_heuristic(env->cublaslt, st->desc, &st->full, pb->math, &st->align, res, &found,
                           err),
           out);
  *count = found < IG_ALGOS_OFFERED ? found : IG_ALGOS_OFFERED;
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
  int written = 0;
  if (ig_applicable(problem, env)) {
    int64_t chunks[IG_CHUNKS_MAX];
    const int n_chunks = ig_chunks(problem, env, chunks);
    for (int i = 0; i < n_chunks && written < max; ++i) {
      int algos = 0;
      const conv_status s = ig_count_algos(problem, env, chunks[i], &algos, err);
      /* A shape cuBLASLt or we refuse is simply not offered. */
      if (s == CONV_UNSUPPORTED) continue;
      if (s != CONV_OK) return s;
      for (int a = 0; a < algos && written < max; ++a) {
        conv_config *cfg = &out[written++];
        cfg->count = 2;
        cfg->values[0] = chunks[i];
        cfg->values[1] = a;
        cfg->flags = 0;
      }
    }
  }
  *count = written;
  return CONV_OK;
}

/* ---------------------------------------------------------------- run */

static conv_status ig_matmul(const conv_exec *ex, const ig_gemm *g, bool use_fallback,
                             const float *a, const float *b, float *d, cudaStream_t stream,
                             conv_error *err) {
  const ig_state *st = ex->state;
  const float one = 1.0f, zero = 0.0f;
  void *ws = st->gemm_ws_bytes ? ex->workspace : NULL;
  return conv_check_cublas(err,
                           cublasLtMatmul(ex->env->cublaslt, st->desc, &one, a, g->a, b, g->b,
                                          &zero, d, g->d, d, g->d,
                                          use_fallback ? &g->fallback : &g->algo, ws,
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
    if (!ig_aligned(ptrs[i], IG_MIN_ALIGN))
      return conv_error_set(err, CONV_INVALID_ARGUMENT,
                            "im2col_gemm: a tensor pointer is not 4-byte aligned");
  *use_fallback = !(ig_aligned(a_base, st->align.a) && ig_aligned(ex->w, st->align.b) &&
                    ig_aligned(ex->y, st->align.d));
  if (*use_fallback && (!st->full.has_fallback || (st->has_tail && !st->tail.has_fallback)))
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
  if (st->gemm_ws_bytes > 0 && !ig_aligned(ex->workspace, IG_WS_ALIGN))
    return conv_error_set(err, CONV_INVALID_ARGUMENT,
                          "im2col_gemm: workspace not %u-byte aligned", IG_WS_ALIGN);
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
  if (text == NULL || size == 0) return;
  if (config == NULL || config->count != 2)
    snprintf(text, size, "invalid config");
  else
    snprintf(text, size, "batch=%lld gemm_algo=%lld", (long long)config->values[0],
             (long long)config->values[1]);
}

const conv_algorithm conv_algorithm_im2col_gemm = {
    .id = CONV_ALGO_IM2COL_GEMM,
    .version = 1,
    .name = "im2col_gemm",
    .applicable = ig_applicable,
    .configs = ig_configs,
    .prepare = ig_prepare,
    .run = ig_run,
    .release = ig_release,
    .describe = ig_describe,
};
