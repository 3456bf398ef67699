/*
 * im2col.cu -- see im2col.h.
 */
#include "algorithms/common/divisor.h"
#include "algorithms/common/elements.cuh"
#include "algorithms/common/im2col.h"
#include "algorithms/algorithm.h"

namespace {

/* conv_im2col's sizes for one launch, in 32 bits: the launcher splits the
 * images so that every index of a launch's col block fits. */
struct im2col_params {
  int h, w;
  int pad_h, pad_w, stride_h, stride_w, dil_h, dil_w;
  const void *x_first;       /* channel 0 of the group in the first image */
  int64_t image_floats;      /* c*h*w: one image of x to the next (elements) */
  uint32_t total;            /* images * cg*r*s * p*q                     */
  conv_divisor by_pq, by_crs, by_rs, by_s, by_q;
};

const int kThreads = 256;
/* Elements a thread copies per pass, their loads issued before their
 * stores: one load in flight a thread kept too few bytes in flight to
 * reach memory bandwidth (a 1x1 stride-2 subsample ran at 2 TB/s). */
const int kUnroll = 4;

}  // namespace

/* The col element at flat index i of the launch's block, an element of T
 * (copied: its bits, 0 in the padding, whatever the type). */
template <typename T>
__device__ __forceinline__ static T im2col_value(const im2col_params &prm, uint32_t i) {
  const uint32_t row = conv_divide(i, prm.by_pq);
  const uint32_t column = i - row * prm.by_pq.divisor;
  const uint32_t img = conv_divide(row, prm.by_crs);
  const uint32_t crs = row - img * prm.by_crs.divisor;
  const uint32_t ci = conv_divide(crs, prm.by_rs);
  const uint32_t tap = crs - ci * prm.by_rs.divisor;
  const uint32_t ri = conv_divide(tap, prm.by_s), si = tap - ri * prm.by_s.divisor;
  const uint32_t oh = conv_divide(column, prm.by_q), ow = column - oh * prm.by_q.divisor;
  const int ih = (int)oh * prm.stride_h - prm.pad_h + (int)ri * prm.dil_h;
  const int iw = (int)ow * prm.stride_w - prm.pad_w + (int)si * prm.dil_w;
  if (ih < 0 || ih >= prm.h || iw < 0 || iw >= prm.w) return conv_element_from_float<T>(0.0f);
  return __ldg(static_cast<const T *>(prm.x_first) + img * prm.image_floats +
               ((int64_t)ci * prm.h + ih) * prm.w + iw);
}

/* One thread per col element (kUnroll of them a pass, a grid apart),
 * flattened over (image, row, column) so that short rows (a 7x7 output
 * has 49 columns) leave no thread idle, with the index split by
 * multiply-shift divisors: the 64-bit divisions this kernel used per
 * element cost more than its copy.  Writes are coalesced.  Indices stay
 * below 2^32: total < 2^31 and a pass spans kUnroll grids of at most 2^27
 * threads. */
template <typename T>
__global__ static void im2col_kernel(const im2col_params prm, T *__restrict__ col) {
  const uint32_t stride = gridDim.x * blockDim.x;
  for (uint32_t first = blockIdx.x * blockDim.x + threadIdx.x; first < prm.total;
       first += kUnroll * stride) {
    T v[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; u++) {
      const uint32_t i = first + u * stride;
      v[u] = i < prm.total ? im2col_value<T>(prm, i) : conv_element_from_float<T>(0.0f);
    }
#pragma unroll
    for (int u = 0; u < kUnroll; u++) {
      const uint32_t i = first + u * stride;
      if (i < prm.total) col[i] = v[u];
    }
  }
}

extern "C" cudaError_t conv_im2col(const conv_problem *problem, const void *x, int64_t n0,
                                   int64_t images, int64_t group, void *col,
                                   cudaStream_t stream) {
  if (problem == NULL || x == NULL || col == NULL) return cudaErrorInvalidValue;
  if (n0 < 0 || images < 0 || n0 + images > problem->n || group < 0 ||
      group >= problem->groups)
    return cudaErrorInvalidValue;
  conv_shape shape = {}; /* stays empty (no work) for an invalid problem */
  conv_problem_shape(problem, &shape);
  const int64_t pq = shape.p * shape.q;
  const int64_t cg = problem->c / problem->groups;
  const int64_t crs = cg * problem->r * problem->s;
  if (images == 0 || pq <= 0 || crs <= 0) return cudaSuccess;
  const int64_t image_col = crs * pq;
  if (image_col >= INT32_MAX || problem->h * problem->w >= INT32_MAX ||
      problem->h + 2 * problem->pad_h >= INT32_MAX / 2 ||
      problem->w + 2 * problem->pad_w >= INT32_MAX / 2)
    return cudaErrorInvalidValue; /* past what the kernel indexes in 32 bits */
  /* A stride or dilation past int only meets a zero output or tap index
   * (a valid problem's window fits the padded input), so the casts keep
   * every (ih, iw) the kernel forms within int. */

  im2col_params prm;
  prm.h = (int)problem->h;
  prm.w = (int)problem->w;
  prm.pad_h = (int)problem->pad_h;
  prm.pad_w = (int)problem->pad_w;
  prm.stride_h = (int)problem->stride_h;
  prm.stride_w = (int)problem->stride_w;
  prm.dil_h = (int)problem->dil_h;
  prm.dil_w = (int)problem->dil_w;
  prm.image_floats = problem->c * problem->h * problem->w;
  prm.by_pq = conv_divisor_make((int)pq);
  prm.by_crs = conv_divisor_make((int)crs);
  prm.by_rs = conv_divisor_make((int)(problem->r * problem->s));
  prm.by_s = conv_divisor_make((int)problem->s);
  prm.by_q = conv_divisor_make((int)shape.q);
  /* Images per launch: every index of a launch below 2^31. */
  const int64_t per_launch = (INT32_MAX - 1) / image_col;
  const int64_t group_offset = group * cg * problem->h * problem->w;
  return conv_with_element_type(problem->dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    for (int64_t done = 0; done < images; done += per_launch) {
      const int64_t count = images - done < per_launch ? images - done : per_launch;
      prm.x_first = static_cast<const T *>(x) + (n0 + done) * prm.image_floats + group_offset;
      prm.total = (uint32_t)(count * image_col);
      const int64_t per_block = (int64_t)kThreads * kUnroll;
      const int64_t blocks_needed = (count * image_col + per_block - 1) / per_block;
      const unsigned blocks = (unsigned)(blocks_needed < 65535 * 8 ? blocks_needed : 65535 * 8);
      im2col_kernel<T><<<blocks, kThreads, 0, stream>>>(prm,
                                                        static_cast<T *>(col) + done * image_col);
      const cudaError_t e = cudaGetLastError();
      if (e != cudaSuccess) return e;
    }
    return cudaSuccess;
  });
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

/* One thread per vector of V (VEC elements of T: V is a word of
 * VEC * sizeof(T) bytes, its bits moved as they are) of one tap of one output pixel:
 * consecutive threads write consecutive addresses and read whole channel
 * runs of x.  A copy: the bits move, 0 bits (0 in every type) in the
 * padding. */
template <typename T, typename V>
__global__ static void im2col_nhwc_kernel(const im2col_nhwc_params prm, const T *__restrict__ x,
                                          T *__restrict__ col) {
  constexpr int VEC = sizeof(V) / sizeof(T);
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

/* The launch for elements of T: V the widest word (16, 4 or 2 bytes) that
 * a run of c channels divides into, whose alignment the caller's x
 * (CONV_POINTER_ALIGNMENT) and the col buffer meet.  For fp32: float4 where
 * c is a multiple of 4, else float, as before the half types. */
template <typename T>
static cudaError_t im2col_nhwc_launch(im2col_nhwc_params prm, int64_t elements, const void *x,
                                      void *col, cudaStream_t stream) {
  const int64_t row_bytes = (int64_t)prm.c * (int64_t)sizeof(T);
  const int vec = row_bytes % 16 == 0 ? 16 / (int)sizeof(T)
                  : row_bytes % 4 == 0 ? 4 / (int)sizeof(T)
                                       : 1;
  prm.total = (uint32_t)(elements / vec);
  prm.by_vectors = conv_divisor_make(prm.c / vec);
  const unsigned blocks = (unsigned)((prm.total + kThreads - 1) / kThreads);
  const T *in = static_cast<const T *>(x);
  T *out = static_cast<T *>(col);
  if (vec * sizeof(T) == 16)
    im2col_nhwc_kernel<T, float4><<<blocks, kThreads, 0, stream>>>(prm, in, out);
  else if (vec * sizeof(T) == 4)
    im2col_nhwc_kernel<T, float><<<blocks, kThreads, 0, stream>>>(prm, in, out);
  else /* one 2-byte element: an odd channel count of a half type */
    im2col_nhwc_kernel<T, unsigned short><<<blocks, kThreads, 0, stream>>>(prm, in, out);
  return cudaGetLastError();
}

extern "C" cudaError_t conv_im2col_nhwc(const conv_problem *pb, const void *x, int64_t n0,
                                        int64_t images, void *col, cudaStream_t stream) {
  if (pb == NULL || x == NULL || col == NULL || pb->layout != CONV_LAYOUT_NHWC || pb->groups != 1)
    return cudaErrorInvalidValue;
  if (n0 < 0 || images < 0 || n0 + images > pb->n) return cudaErrorInvalidValue;
  conv_shape sh = {};
  if (conv_problem_shape(pb, &sh) != CONV_OK) return cudaErrorInvalidValue;
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
  prm.by_taps = conv_divisor_make((int)(pb->r * pb->s));
  prm.by_s = conv_divisor_make((int)pb->s);
  prm.by_q = conv_divisor_make((int)sh.q);
  prm.by_pq = conv_divisor_make((int)(sh.p * sh.q));
  return conv_with_element_type(pb->dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    return im2col_nhwc_launch<T>(prm, floats, x, col, stream);
  });
}

/* ---------------------------------------------------------------- wide layout */

namespace {

/* One thread per col element, in memory order: consecutive threads write
 * consecutive addresses and, along an output row, read x `stride_w` apart.
 * Every value of a thread is decoded by multiply-shift divisions, which is
 * what makes the small p*q of late layers (7x7, 8x8) cheap: a thread per
 * row of p*q would leave most of each block idle. */
template <typename T>
__global__ static void im2col_wide_kernel(const conv_wide_launch prm, const T *__restrict__ x,
                                          T *__restrict__ col) {
  const uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= prm.col_total) return;
  const uint32_t row = conv_divide(i, prm.by_pq), j = i - row * prm.by_pq.divisor;
  const uint32_t rc = conv_divide(row, prm.by_images), img = row - rc * prm.images;
  const uint32_t ci = conv_divide(rc, prm.by_rs), tap = rc - ci * prm.by_rs.divisor;
  const uint32_t ri = conv_divide(tap, prm.by_s), si = tap - ri * prm.s;
  const uint32_t oh = conv_divide(j, prm.by_q), ow = j - oh * prm.q;
  const int ih = (int)oh * prm.stride_h - prm.pad_h + (int)ri * prm.dil_h;
  const int iw = (int)ow * prm.stride_w - prm.pad_w + (int)si * prm.dil_w;
  T v = conv_element_from_float<T>(0.0f);
  if (ih >= 0 && ih < prm.h && iw >= 0 && iw < prm.w)
    v = __ldg(x + ((int64_t)(img * prm.c + ci) * prm.h + ih) * prm.w + iw);
  col[i] = v;
}

/* One thread per dx element: the sum over the taps whose window touches
 * it, in the filter's (ri, si) order, so each element is one thread's
 * fixed-order sum (deterministic, no atomics).  col is fp32 whatever T
 * (the GEMM's sums, unrounded), the sum is fp32, and T gets it rounded
 * once. */
template <typename T>
__global__ static void col2im_wide_kernel(const conv_wide_launch prm, const float *__restrict__ col,
                                          T *__restrict__ x) {
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
  x[i] = conv_element_from_float<T>(sum);
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
  l.dtype = pb->dtype;
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
                                        conv_dtype dtype, conv_wide_launch *out) {
  if (channels < 1 || plane < 1 || images < 1) return false;
  conv_problem view;
  conv_problem_init(&view);
  view.dtype = dtype;
  view.n = images, view.c = view.k = channels, view.h = 1, view.w = plane;
  view.r = view.s = 1;
  return conv_wide_plan(&view, images, out);
}

extern "C" cudaError_t conv_im2col_wide(const conv_wide_launch *L, const void *x, int64_t n0,
                                        void *col, cudaStream_t stream) {
  if (L == NULL || x == NULL || n0 < 0) return cudaErrorInvalidValue;
  return conv_with_element_type(L->dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    return wide_launch(im2col_wide_kernel<T>, L, L->col_total,
                       static_cast<const T *>(x) + n0 * L->image_floats, static_cast<T *>(col),
                       stream);
  });
}

extern "C" cudaError_t conv_col2im_wide(const conv_wide_launch *L, const float *col, int64_t n0,
                                        void *x, cudaStream_t stream) {
  if (L == NULL || x == NULL || n0 < 0) return cudaErrorInvalidValue;
  return conv_with_element_type(L->dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    return wide_launch(col2im_wide_kernel<T>, L, L->x_total, col,
                       static_cast<T *>(x) + n0 * L->image_floats, stream);
  });
}
