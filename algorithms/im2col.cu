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
