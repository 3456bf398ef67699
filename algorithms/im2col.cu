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

/* One thread per col element, in memory order: consecutive threads write
 * consecutive addresses and, along an output row, read x `stride_w` apart.
 * Every value of a thread is decoded by multiply-shift divisions, which is
 * what makes the small p*q of late layers (7x7, 8x8) cheap: a thread per
 * row of p*q would leave most of each block idle. */
__global__ static void im2col_wide_kernel(const conv_wide_launch prm, const float *__restrict__ x,
                                          float *__restrict__ col) {
  const uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= prm.col_total) return;
  const uint32_t row = conv_divide(i, prm.by_pq), j = i - row * prm.by_pq.divisor;
  const uint32_t rc = conv_divide(row, prm.by_images), img = row - rc * prm.images;
  const uint32_t ci = conv_divide(rc, prm.by_rs), tap = rc - ci * prm.by_rs.divisor;
  const uint32_t ri = conv_divide(tap, prm.by_s), si = tap - ri * prm.s;
  const uint32_t oh = conv_divide(j, prm.by_q), ow = j - oh * prm.q;
  const int ih = (int)oh * prm.stride_h - prm.pad_h + (int)ri * prm.dil_h;
  const int iw = (int)ow * prm.stride_w - prm.pad_w + (int)si * prm.dil_w;
  float v = 0.0f;
  if (ih >= 0 && ih < prm.h && iw >= 0 && iw < prm.w)
    v = __ldg(x + ((int64_t)(img * prm.c + ci) * prm.h + ih) * prm.w + iw);
  col[i] = v;
}

/* One thread per dx element: the sum over the taps whose window touches
 * it, in the filter's (ri, si) order, so each element is one thread's
 * fixed-order sum (deterministic, no atomics). */
__global__ static void col2im_wide_kernel(const conv_wide_launch prm, const float *__restrict__ col,
                                          float *__restrict__ x) {
  const uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= prm.x_total) return;
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
  x[i] = sum;
}

/* One launch of a wide kernel, a thread per element of its output (col,
 * or the chunk's dx); `in` and `out` already point at the chunk. */
template <class Kernel, class In, class Out>
cudaError_t wide_launch(Kernel kernel, const conv_wide_launch *L, uint32_t total, In in, Out out,
                        cudaStream_t stream) {
  if (L == NULL || in == NULL || out == NULL) return cudaErrorInvalidValue;
  if (total == 0) return cudaSuccess;
  kernel<<<(total + kThreads - 1) / kThreads, kThreads, 0, stream>>>(*L, in, out);
  return cudaGetLastError();
}

}  // namespace

extern "C" bool conv_wide_plan(const conv_problem *pb, int64_t images, conv_wide_launch *out) {
  conv_shape sh = {};
  if (pb == NULL || out == NULL || images < 1 || conv_problem_shape(pb, &sh) != CONV_OK)
    return false;
  const int64_t col = images * pb->c * pb->r * pb->s * sh.p * sh.q;
  const int64_t x = images * pb->c * pb->h * pb->w;
  const int64_t reach_h = pb->h + pb->pad_h, reach_w = pb->w + pb->pad_w;
  if (col >= INT32_MAX || x >= INT32_MAX || reach_h >= INT32_MAX || reach_w >= INT32_MAX ||
      sh.p * pb->stride_h + pb->r * pb->dil_h >= INT32_MAX ||
      sh.q * pb->stride_w + pb->s * pb->dil_w >= INT32_MAX)
    return false;
  conv_wide_launch l = {};
  l.c = (int)pb->c, l.h = (int)pb->h, l.w = (int)pb->w;
  l.r = (int)pb->r, l.s = (int)pb->s, l.p = (int)sh.p, l.q = (int)sh.q;
  l.pad_h = (int)pb->pad_h, l.pad_w = (int)pb->pad_w;
  l.stride_h = (int)pb->stride_h, l.stride_w = (int)pb->stride_w;
  l.dil_h = (int)pb->dil_h, l.dil_w = (int)pb->dil_w;
  l.images = (int)images;
  l.image_floats = pb->c * pb->h * pb->w;
  l.col_total = (uint32_t)col, l.x_total = (uint32_t)x;
  l.by_pq = conv_divisor_make((int)(sh.p * sh.q));
  l.by_images = conv_divisor_make((int)images);
  l.by_rs = conv_divisor_make((int)(pb->r * pb->s));
  l.by_s = conv_divisor_make((int)pb->s);
  l.by_q = conv_divisor_make((int)sh.q);
  l.by_w = conv_divisor_make((int)pb->w);
  l.by_h = conv_divisor_make((int)pb->h);
  l.by_c = conv_divisor_make((int)pb->c);
  l.by_stride_h = conv_divisor_make((int)pb->stride_h);
  l.by_stride_w = conv_divisor_make((int)pb->stride_w);
  *out = l;
  return true;
}

/* A 1x1, stride-1, unpadded im2col of `channels` x 1 x `plane` images is
 * exactly the transposition asked for. */
extern "C" bool conv_channels_wide_plan(int64_t channels, int64_t plane, int64_t images,
                                        conv_wide_launch *out) {
  if (channels < 1 || plane < 1 || images < 1) return false;
  conv_problem view;
  conv_problem_init(&view);
  view.n = images, view.c = view.k = channels, view.h = 1, view.w = plane;
  view.r = view.s = 1;
  return conv_wide_plan(&view, images, out);
}

extern "C" cudaError_t conv_im2col_wide(const conv_wide_launch *L, const float *x, int64_t n0,
                                        float *col, cudaStream_t stream) {
  if (L == NULL || x == NULL || n0 < 0) return cudaErrorInvalidValue;
  return wide_launch(im2col_wide_kernel, L, L->col_total, x + n0 * L->image_floats, col, stream);
}

extern "C" cudaError_t conv_col2im_wide(const conv_wide_launch *L, const float *col, int64_t n0,
                                        float *x, cudaStream_t stream) {
  if (L == NULL || x == NULL || n0 < 0) return cudaErrorInvalidValue;
  return wide_launch(col2im_wide_kernel, L, L->x_total, col, x + n0 * L->image_floats, stream);
}
