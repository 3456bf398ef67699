/*
 * data_gather.cu -- see data_gather.h.
 */
#include "algorithms/data_gather.h"
#include "algorithms/common/launch_checks.h"
#include "algorithms/common/launch_plan.cuh"
#include "algorithms/common/tap_source.cuh"
#include "algorithms/algorithm.h"

#include <stdio.h>

namespace {

const int kMaxThreads = 512;

/* A thread's image, channel (its group and index in it), and row and
 * column (of dx, or of 2x2 blocks); n < 0 past the end. */
struct place {
  int n, c, g, ci, row, col;
};

__device__ __forceinline__ place place_of_thread(const conv_data_gather_launch &L) {
  place at;
  const uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
  at.n = -1;
  if (i >= L.threads_needed) return at;
  const uint32_t line = conv_divide(i, L.by_cols);
  at.col = (int)(i - line * (uint32_t)L.cols);
  const uint32_t plane = conv_divide(line, L.by_rows);
  at.row = (int)(line - plane * (uint32_t)L.rows);
  const uint32_t n = conv_divide(plane, L.by_c);
  at.n = (int)n;
  at.c = (int)(plane - n * (uint32_t)L.c);
  at.g = (int)conv_divide((uint32_t)at.c, L.by_cg);
  at.ci = at.c - at.g * L.cg;
  return at;
}

/* ELEMENT: one thread per dx element.  STRIDE: both strides when nonzero
 * (2, the common case, divides by a shift), else the launch's. */
template <int R, int S, int STRIDE>
__global__ void __launch_bounds__(kMaxThreads)
    gather_kernel(const conv_data_gather_launch L, const float *__restrict__ dy,
                  const float *__restrict__ w, float *__restrict__ dx) {
  const place at = place_of_thread(L);
  if (at.n < 0) return;
  const int n = at.n, c = at.c, g = at.g, ci = at.ci, iy = at.row, ix = at.col;

  int rows[R], cols[S];
#pragma unroll
  for (int r = 0; r < R; r++)
    rows[r] = conv_tap_source<STRIDE>(iy, L.pad_h, r, L.dil_h, L.stride_h, L.p);
#pragma unroll
  for (int s = 0; s < S; s++)
    cols[s] = conv_tap_source<STRIDE>(ix, L.pad_w, s, L.dil_w, L.stride_w, L.q);

  const int64_t plane_out = (int64_t)L.p * L.q;
  const float *dyg = dy + ((int64_t)n * L.k + (int64_t)g * L.kg) * plane_out;
  const float *wg = w + ((int64_t)g * L.kg * L.cg + ci) * (R * S);
  float acc = 0.0f;
  for (int k = 0; k < L.kg; k++) {
    const float *dyk = dyg + k * plane_out;
    const float *wk = wg + (int64_t)k * L.cg * (R * S);
#pragma unroll
    for (int r = 0; r < R; r++) {
      if (rows[r] < 0) continue;
      const float *dyr = dyk + (int64_t)rows[r] * L.q;
#pragma unroll
      for (int s = 0; s < S; s++)
        if (cols[s] >= 0) acc = fmaf(__ldg(dyr + cols[s]), __ldg(wk + r * S + s), acc);
    }
  }
  dx[(((int64_t)n * L.c + c) * L.h + iy) * L.w + ix] = acc;
}

/* QUAD: stride 2; the thread's dx elements are rows 2a + ey and columns
 * 2b + ex (ey, ex in {0, 1}).  Tap r reaches row 2a + ey when
 * t = ey + pad_h - r * dil_h is even, from output row a + t / 2: the test
 * is the same for every thread (no divergence), and only the bounds check
 * depends on a. */
template <int R, int S>
__global__ void __launch_bounds__(kMaxThreads)
    quad_kernel(const conv_data_gather_launch L, const float *__restrict__ dy,
                const float *__restrict__ w, float *__restrict__ dx) {
  const place at = place_of_thread(L);
  if (at.n < 0) return;
  const int a = at.row, b = at.col;
  const int64_t plane_out = (int64_t)L.p * L.q;
  const float *dyg = dy + ((int64_t)at.n * L.k + (int64_t)at.g * L.kg) * plane_out;
  const float *wg = w + ((int64_t)at.g * L.kg * L.cg + at.ci) * (R * S);
  float acc[2][2] = {};
  for (int k = 0; k < L.kg; k++) {
    const float *dyk = dyg + k * plane_out;
    const float *wk = wg + (int64_t)k * L.cg * (R * S);
#pragma unroll
    for (int ey = 0; ey < 2; ey++) {
#pragma unroll
      for (int r = 0; r < R; r++) {
        const int t = ey + L.pad_h - r * L.dil_h;
        if (t & 1) continue;
        const int py = a + (t >> 1); /* t is even: the shift divides exactly */
        if ((unsigned)py >= (unsigned)L.p) continue;
        const float *dyr = dyk + (int64_t)py * L.q;
#pragma unroll
        for (int ex = 0; ex < 2; ex++) {
#pragma unroll
          for (int s = 0; s < S; s++) {
            const int u = ex + L.pad_w - s * L.dil_w;
            if (u & 1) continue;
            const int px = b + (u >> 1);
            if ((unsigned)px < (unsigned)L.q)
              acc[ey][ex] = fmaf(__ldg(dyr + px), __ldg(wk + r * S + s), acc[ey][ex]);
          }
        }
      }
    }
  }
  const int iy = 2 * a, ix = 2 * b;
  float *out = dx + (((int64_t)at.n * L.c + at.c) * L.h + iy) * L.w + ix;
#pragma unroll
  for (int ey = 0; ey < 2; ey++)
#pragma unroll
    for (int ex = 0; ex < 2; ex++)
      if (iy + ey < L.h && ix + ex < L.w) out[ey * L.w + ex] = acc[ey][ex];
}

typedef void (*gather_fn)(conv_data_gather_launch, const float *, const float *, float *);

struct instance {
  int kernel, size, stride; /* stride 0: any */
  gather_fn fn;
};

#define SIZE(n)                                                                       \
  {CONV_GATHER_ELEMENT, n, 2, gather_kernel<n, n, 2>},                                \
      {CONV_GATHER_ELEMENT, n, 0, gather_kernel<n, n, 0>}, {CONV_GATHER_QUAD, n, 2, quad_kernel<n, n>}
const instance kInstances[] = {SIZE(1), SIZE(2), SIZE(3), SIZE(4), SIZE(5), SIZE(7)};
#undef SIZE

gather_fn find_kernel(int kernel, int64_t r, int64_t s, int64_t stride_h, int64_t stride_w) {
  if (r != s) return nullptr;
  const int stride = stride_h == 2 && stride_w == 2 ? 2 : 0;
  for (const instance &in : kInstances)
    if (in.kernel == kernel && in.size == r && in.stride == stride) return in.fn;
  return nullptr;
}

}  // namespace

extern "C" bool conv_data_gather_compiled(int64_t r, int64_t s) {
  return find_kernel(CONV_GATHER_ELEMENT, r, s, 1, 1) != nullptr;
}

extern "C" bool conv_data_gather_plan(const conv_problem *pb, const conv_data_gather_tiling *t,
                                      conv_data_gather_launch *L, char *why, size_t why_size) {
  if (pb->direction != CONV_BACKWARD_DATA || pb->layout != CONV_LAYOUT_NCHW)
    CONV_REJECT("only NCHW backward-data passes");
  const int threads = t->threads;
  if (threads < 32 || threads > kMaxThreads || threads % 32 != 0)
    CONV_REJECT("%d threads: not a multiple of 32 in [32, %d]", threads, kMaxThreads);
  if (t->kernel != CONV_GATHER_ELEMENT && t->kernel != CONV_GATHER_QUAD)
    CONV_REJECT("no kernel %d", t->kernel);
  const bool quad = t->kernel == CONV_GATHER_QUAD;
  if (quad && (pb->stride_h != 2 || pb->stride_w != 2)) CONV_REJECT("the quad kernel needs stride 2");
  conv_shape shape;
  if (conv_problem_shape(pb, &shape) != CONV_OK) CONV_REJECT("invalid problem");
  const gather_fn kernel = find_kernel(t->kernel, pb->r, pb->s, pb->stride_h, pb->stride_w);
  if (kernel == nullptr)
    CONV_REJECT("no kernel compiled for a %lld x %lld filter", (long long)pb->r, (long long)pb->s);
  const int64_t dims[] = {shape.x_elems, shape.y_elems, shape.w_elems, pb->pad_h + pb->h,
                          pb->pad_w + pb->w, pb->dil_h * pb->r, pb->dil_w * pb->s,
                          shape.x_elems + threads};
  for (int64_t d : dims)
    if (!conv_fits_int(d)) CONV_REJECT("a size past 32-bit indexing");

  conv_data_gather_launch l = {};
  l.tiling = *t;
  l.kernel = (const void *)kernel;
  conv_launch_set_geometry(l, pb, shape.p, shape.q);
  l.cg = (int)shape.c_per_group, l.kg = (int)shape.k_per_group;
  l.rows = quad ? (l.h + 1) / 2 : l.h;
  l.cols = quad ? (l.w + 1) / 2 : l.w;
  l.threads_needed = (uint32_t)((int64_t)l.n * l.c * l.rows * l.cols);
  l.by_cols = conv_divisor_make(l.cols), l.by_rows = conv_divisor_make(l.rows);
  l.by_c = conv_divisor_make(l.c), l.by_cg = conv_divisor_make(l.cg);
  l.blocks = (unsigned)((l.threads_needed + (uint32_t)threads - 1) / (uint32_t)threads);
  *L = l;
  return true;
}

extern "C" cudaError_t conv_data_gather_run(const conv_data_gather_launch *L, const float *dy,
                                            const float *w, float *dx, cudaStream_t stream) {
  if (L == NULL || L->kernel == NULL || dy == NULL || w == NULL || dx == NULL)
    return cudaErrorInvalidValue;
  ((gather_fn)L->kernel)<<<L->blocks, (unsigned)L->tiling.threads, 0, stream>>>(*L, dy, w, dx);
  return cudaGetLastError();
}
