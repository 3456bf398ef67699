/*
 * im2col.cu -- see im2col.h.
 */
#include "algorithms/divisor.h"
#include "algorithms/im2col.h"
#include "runtime/internal.h"

namespace {

struct im2col_params {
  int64_t c, h, w;         /* input channels (all groups), height, width */
  int64_t cg, r, s;        /* channels per group, filter height, width  */
  int64_t p, q;            /* output height, width                      */
  int64_t pad_h, pad_w;
  int64_t stride_h, stride_w;
  int64_t dil_h, dil_w;
  int64_t n0, c0;          /* first image; first channel of the group   */
  int64_t rows;            /* images * cg * r * s                       */
};

const int kThreads = 256;

}  // namespace

/* blockIdx.y walks the col rows (image, ci, ri, si), blockIdx.x and the
 * threads walk the p*q columns of one row: the row's decoding is done once
 * per row rather than per element, and writes are fully coalesced. */
__global__ static void im2col_kernel(const im2col_params prm, const float *__restrict__ x,
                                     float *__restrict__ col) {
  const int64_t pq = prm.p * prm.q;
  const int64_t crs = prm.cg * prm.r * prm.s;
  const int64_t col_step = (int64_t)gridDim.x * blockDim.x;
  for (int64_t row = blockIdx.y; row < prm.rows; row += gridDim.y) {
    const int64_t img = row / crs;
    const int64_t rc = row % crs;
    const int64_t ci = rc / (prm.r * prm.s);
    const int64_t ri = (rc / prm.s) % prm.r;
    const int64_t si = rc % prm.s;
    const float *xc = x + ((prm.n0 + img) * prm.c + prm.c0 + ci) * prm.h * prm.w;
    const int64_t ih0 = ri * prm.dil_h - prm.pad_h;
    const int64_t iw0 = si * prm.dil_w - prm.pad_w;
    float *out = col + row * pq;
    for (int64_t j = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; j < pq; j += col_step) {
      const int64_t oh = j / prm.q;
      const int64_t ih = oh * prm.stride_h + ih0;
      const int64_t iw = (j - oh * prm.q) * prm.stride_w + iw0;
      const bool inside = ih >= 0 && ih < prm.h && iw >= 0 && iw < prm.w;
      out[j] = inside ? xc[ih * prm.w + iw] : 0.0f;
    }
  }
}

static im2col_params im2col_params_make(const conv_problem *pb, int64_t n0, int64_t images,
                                        int64_t group) {
  im2col_params prm;
  prm.c = pb->c;
  prm.h = pb->h;
  prm.w = pb->w;
  prm.cg = pb->c / pb->groups;
  prm.r = pb->r;
  prm.s = pb->s;
  conv_shape shape = {}; /* stays empty (no work) for an invalid problem */
  conv_problem_shape(pb, &shape);
  prm.p = shape.p;
  prm.q = shape.q;
  prm.pad_h = pb->pad_h;
  prm.pad_w = pb->pad_w;
  prm.stride_h = pb->stride_h;
  prm.stride_w = pb->stride_w;
  prm.dil_h = pb->dil_h;
  prm.dil_w = pb->dil_w;
  prm.n0 = n0;
  prm.c0 = group * prm.cg;
  prm.rows = images * prm.cg * prm.r * prm.s;
  return prm;
}

extern "C" cudaError_t conv_im2col(const conv_problem *problem, const float *x, int64_t n0,
                                   int64_t images, int64_t group, float *col,
                                   cudaStream_t stream) {
  if (problem == NULL || x == NULL || col == NULL) return cudaErrorInvalidValue;
  if (n0 < 0 || images < 0 || n0 + images > problem->n || group < 0 ||
      group >= problem->groups)
    return cudaErrorInvalidValue;
  const im2col_params prm = im2col_params_make(problem, n0, images, group);
  const int64_t pq = prm.p * prm.q;
  if (prm.rows == 0 || pq <= 0) return cudaSuccess;

  /* gridDim.y is limited to 65535 and the kernel strides over the rest;
   * x blocks only as many as one row needs, capped for very wide rows. */
  int64_t bx = (pq + kThreads - 1) / kThreads;
  if (bx > 1024) bx = 1024;
  const int64_t by = prm.rows < 65535 ? prm.rows : 65535;
  const dim3 grid((unsigned)bx, (unsigned)by);
  im2col_kernel<<<grid, kThreads, 0, stream>>>(prm, x, col);
  return cudaGetLastError();
}

namespace {

/* conv_im2col_nhwc's sizes, in 32-bit: the launcher checks they fit. */
struct im2col_nhwc_params {
  int h, w, c, q, s;
  int pad_h, pad_w, stride_h, stride_w, dil_h, dil_w;
  int64_t x_first;           /* element offset of image n0 in x        */
  uint32_t total;            /* vectors in the chunk's col buffer      */
  conv_divisor by_vectors;   /* channel vectors per tap: c / V         */
  conv_divisor by_taps;      /* r * s                                  */
  conv_divisor by_s, by_q, by_pq;
};

/* One thread per vector of V channels of one tap of one output pixel:
 * consecutive threads write consecutive addresses and read whole channel
 * runs of x. */
template <typename V>
__global__ static void im2col_nhwc_kernel(const im2col_nhwc_params prm, const float *__restrict__ x,
                                          float *__restrict__ col) {
  constexpr int VEC = sizeof(V) / sizeof(float);
  const uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= prm.total) return;
  const uint32_t run = conv_divide(i, prm.by_vectors);
  const int ci = (int)(i - run * prm.by_vectors.divisor) * VEC;
  const uint32_t pixel = conv_divide(run, prm.by_taps);
  const uint32_t tap = run - pixel * prm.by_taps.divisor;
  const uint32_t ri = conv_divide(tap, prm.by_s), si = tap - ri * prm.by_s.divisor;
  const uint32_t img = conv_divide(pixel, prm.by_pq);
  const uint32_t in_image = pixel - img * prm.by_pq.divisor;
  const uint32_t oh = conv_divide(in_image, prm.by_q), ow = in_image - oh * prm.by_q.divisor;
  const int ih = (int)oh * prm.stride_h - prm.pad_h + (int)ri * prm.dil_h;
  const int iw = (int)ow * prm.stride_w - prm.pad_w + (int)si * prm.dil_w;
  V v{};
  if (ih >= 0 && ih < prm.h && iw >= 0 && iw < prm.w)
    v = __ldg(reinterpret_cast<const V *>(
        x + prm.x_first + (((int64_t)img * prm.h + ih) * prm.w + iw) * prm.c + ci));
  reinterpret_cast<V *>(col)[i] = v;
}

}  // namespace

extern "C" cudaError_t conv_im2col_nhwc(const conv_problem *pb, const float *x, int64_t n0,
                                        int64_t images, float *col, cudaStream_t stream) {
  if (pb == NULL || x == NULL || col == NULL || pb->layout != CONV_LAYOUT_NHWC || pb->groups != 1)
    return cudaErrorInvalidValue;
  if (n0 < 0 || images < 0 || n0 + images > pb->n) return cudaErrorInvalidValue;
  conv_shape sh = {};
  if (conv_problem_shape(pb, &sh) != CONV_OK) return cudaErrorInvalidValue;
  const int vec = pb->c % 4 == 0 ? 4 : 1;
  const int64_t floats = images * sh.p * sh.q * pb->r * pb->s * pb->c;
  if (floats == 0) return cudaSuccess;
  const int64_t dims[] = {floats, pb->h * pb->w * pb->c, sh.p * sh.q, pb->r * pb->s,
                          pb->stride_h * sh.p + pb->dil_h * pb->r,
                          pb->stride_w * sh.q + pb->dil_w * pb->s};
  for (int64_t d : dims)
    if (d >= INT32_MAX) return cudaErrorInvalidValue;
  im2col_nhwc_params prm;
  prm.h = (int)pb->h, prm.w = (int)pb->w, prm.c = (int)pb->c, prm.q = (int)sh.q;
  prm.s = (int)pb->s;
  prm.pad_h = (int)pb->pad_h, prm.pad_w = (int)pb->pad_w;
  prm.stride_h = (int)pb->stride_h, prm.stride_w = (int)pb->stride_w;
  prm.dil_h = (int)pb->dil_h, prm.dil_w = (int)pb->dil_w;
  prm.x_first = n0 * pb->h * pb->w * pb->c;
  prm.total = (uint32_t)(floats / vec);
  prm.by_vectors = conv_divisor_make((int)(pb->c / vec));
  prm.by_taps = conv_divisor_make((int)(pb->r * pb->s));
  prm.by_s = conv_divisor_make((int)pb->s);
  prm.by_q = conv_divisor_make((int)sh.q);
  prm.by_pq = conv_divisor_make((int)(sh.p * sh.q));
  const unsigned blocks = (unsigned)((prm.total + kThreads - 1) / kThreads);
  if (vec == 4)
    im2col_nhwc_kernel<float4><<<blocks, kThreads, 0, stream>>>(prm, x, col);
  else
    im2col_nhwc_kernel<float><<<blocks, kThreads, 0, stream>>>(prm, x, col);
  return cudaGetLastError();
}

/* ---------------------------------------------------------------- wide layout */

namespace {

/* The wide kernels' sizes, in 32-bit: their launchers check that a chunk's
 * x, col and dY each hold fewer than 2^31 floats. */
struct wide_params {
  int c, h, w, r, s, p, q;
  int pad_h, pad_w, stride_h, stride_w, dil_h, dil_w;
  int images;
  int64_t x_first; /* element offset of image n0 in x (dx) */
  uint32_t total;  /* threads: one per col element, or per dx element */
  conv_divisor by_pq, by_images, by_rs, by_s, by_q, by_w, by_h, by_c, by_stride_h,
      by_stride_w;
};

/* One thread per col element, in memory order: consecutive threads write
 * consecutive addresses and, along an output row, read x `stride_w` apart.
 * Every value of a thread is decoded by multiply-shift divisions, which is
 * what makes the small p*q of late layers (7x7, 8x8) cheap: a thread per
 * row of p*q would leave most of each block idle. */
__global__ static void im2col_wide_kernel(const wide_params prm, const float *__restrict__ x,
                                          float *__restrict__ col) {
  const uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= prm.total) return;
  const uint32_t row = conv_divide(i, prm.by_pq), j = i - row * prm.by_pq.divisor;
  const uint32_t rc = conv_divide(row, prm.by_images), img = row - rc * prm.images;
  const uint32_t ci = conv_divide(rc, prm.by_rs), tap = rc - ci * prm.by_rs.divisor;
  const uint32_t ri = conv_divide(tap, prm.by_s), si = tap - ri * prm.s;
  const uint32_t oh = conv_divide(j, prm.by_q), ow = j - oh * prm.q;
  const int ih = (int)oh * prm.stride_h - prm.pad_h + (int)ri * prm.dil_h;
  const int iw = (int)ow * prm.stride_w - prm.pad_w + (int)si * prm.dil_w;
  float v = 0.0f;
  if (ih >= 0 && ih < prm.h && iw >= 0 && iw < prm.w)
    v = __ldg(x + prm.x_first + ((int64_t)(img * prm.c + ci) * prm.h + ih) * prm.w + iw);
  col[i] = v;
}

/* One thread per dx element: the sum over the taps whose window touches
 * it, in the filter's (ri, si) order, so each element is one thread's
 * fixed-order sum (deterministic, no atomics). */
__global__ static void col2im_wide_kernel(const wide_params prm, const float *__restrict__ col,
                                          float *__restrict__ x) {
  const uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= prm.total) return;
  const uint32_t line = conv_divide(i, prm.by_w), iw = i - line * prm.w;
  const uint32_t plane = conv_divide(line, prm.by_h), ih = line - plane * prm.h;
  const uint32_t img = conv_divide(plane, prm.by_c), ci = plane - img * prm.c;
  const int64_t span = (int64_t)prm.images * prm.by_pq.divisor; /* one col row */
  const float *rows = col + (int64_t)ci * prm.r * prm.s * span + (int64_t)img * prm.by_pq.divisor;
  float sum = 0.0f;
  for (int ri = 0; ri < prm.r; ++ri) {
    const int th = (int)ih + prm.pad_h - ri * prm.dil_h;
    if (th < 0) break; /* and for every later ri */
    const uint32_t oh = conv_divide((uint32_t)th, prm.by_stride_h);
    if ((int)oh * prm.stride_h != th || (int)oh >= prm.p) continue;
    for (int si = 0; si < prm.s; ++si) {
      const int tw = (int)iw + prm.pad_w - si * prm.dil_w;
      if (tw < 0) break;
      const uint32_t ow = conv_divide((uint32_t)tw, prm.by_stride_w);
      if ((int)ow * prm.stride_w != tw || (int)ow >= prm.q) continue;
      sum += rows[(ri * prm.s + si) * span + oh * prm.q + ow];
    }
  }
  x[prm.x_first + i] = sum;
}

/* Every size of a chunk of `images` images of `problem`, with the
 * divisors; false where a count reaches 2^31. */
bool wide_params_make(const conv_problem *pb, int64_t n0, int64_t images, wide_params *prm) {
  conv_shape sh = {};
  if (conv_problem_shape(pb, &sh) != CONV_OK) return false;
  const int64_t col = images * pb->c * pb->r * pb->s * sh.p * sh.q;
  const int64_t x = images * pb->c * pb->h * pb->w;
  const int64_t reach_h = pb->h + pb->pad_h, reach_w = pb->w + pb->pad_w;
  if (col >= INT32_MAX || x >= INT32_MAX || reach_h >= INT32_MAX || reach_w >= INT32_MAX ||
      sh.p * pb->stride_h + pb->r * pb->dil_h >= INT32_MAX ||
      sh.q * pb->stride_w + pb->s * pb->dil_w >= INT32_MAX)
    return false;
  prm->c = (int)pb->c, prm->h = (int)pb->h, prm->w = (int)pb->w;
  prm->r = (int)pb->r, prm->s = (int)pb->s, prm->p = (int)sh.p, prm->q = (int)sh.q;
  prm->pad_h = (int)pb->pad_h, prm->pad_w = (int)pb->pad_w;
  prm->stride_h = (int)pb->stride_h, prm->stride_w = (int)pb->stride_w;
  prm->dil_h = (int)pb->dil_h, prm->dil_w = (int)pb->dil_w;
  prm->images = (int)images;
  prm->x_first = n0 * pb->c * pb->h * pb->w;
  prm->total = 0;
  prm->by_pq = conv_divisor_make((int)(sh.p * sh.q));
  prm->by_images = conv_divisor_make(images > 0 ? (int)images : 1);
  prm->by_rs = conv_divisor_make((int)(pb->r * pb->s));
  prm->by_s = conv_divisor_make((int)pb->s);
  prm->by_q = conv_divisor_make((int)sh.q);
  prm->by_w = conv_divisor_make((int)pb->w);
  prm->by_h = conv_divisor_make((int)pb->h);
  prm->by_c = conv_divisor_make((int)pb->c);
  prm->by_stride_h = conv_divisor_make((int)pb->stride_h);
  prm->by_stride_w = conv_divisor_make((int)pb->stride_w);
  return true;
}

unsigned wide_blocks(uint32_t total) { return (total + kThreads - 1) / kThreads; }

}  // namespace

extern "C" cudaError_t conv_im2col_wide(const conv_problem *problem, const float *x, int64_t n0,
                                        int64_t images, float *col, cudaStream_t stream) {
  wide_params prm;
  if (problem == NULL || x == NULL || col == NULL || n0 < 0 || images < 0 ||
      n0 + images > problem->n || !wide_params_make(problem, n0, images, &prm))
    return cudaErrorInvalidValue;
  prm.total = (uint32_t)(images * problem->c * problem->r * problem->s * prm.p * prm.q);
  if (prm.total == 0) return cudaSuccess;
  im2col_wide_kernel<<<wide_blocks(prm.total), kThreads, 0, stream>>>(prm, x, col);
  return cudaGetLastError();
}

extern "C" cudaError_t conv_col2im_wide(const conv_problem *problem, const float *col, int64_t n0,
                                        int64_t images, float *x, cudaStream_t stream) {
  wide_params prm;
  if (problem == NULL || x == NULL || col == NULL || n0 < 0 || images < 0 ||
      n0 + images > problem->n || !wide_params_make(problem, n0, images, &prm))
    return cudaErrorInvalidValue;
  prm.total = (uint32_t)(images * problem->c * problem->h * problem->w);
  if (prm.total == 0) return cudaSuccess;
  col2im_wide_kernel<<<wide_blocks(prm.total), kThreads, 0, stream>>>(prm, col, x);
  return cudaGetLastError();
}

/* A 1x1, stride-1, unpadded im2col of `channels` x 1 x `plane` images is
 * exactly the transposition asked for. */
extern "C" cudaError_t conv_channels_wide(const float *src, int64_t channels, int64_t plane,
                                          int64_t n0, int64_t images, float *dst,
                                          cudaStream_t stream) {
  if (src == NULL || dst == NULL || channels < 1 || plane < 1 || n0 < 0 || images < 0)
    return cudaErrorInvalidValue;
  conv_problem view;
  conv_problem_init(&view);
  view.n = n0 + images, view.c = view.k = channels, view.h = 1, view.w = plane;
  view.r = view.s = 1;
  return conv_im2col_wide(&view, src, n0, images, dst, stream);
}
