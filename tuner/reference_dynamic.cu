/*
 * reference_dynamic.cu -- the dynamic op's reference kernels, which the
 * tuner validates the dynamic families against (check.h's
 * conv_reference_* entry points call these for a dynamic problem).  Like
 * reference.cu: one thread per output element, the textbook loops, 64-bit
 * indices, products accumulated in double; each direction computes its own
 * sums (backward-data gathers, it does not scatter the forward loop).
 */
#include "algorithms/common/views.h"
#include "tuner/check.h"
#include "core/core.h"

namespace {

/* By value, 64-bit: every index product below is exact. */
struct dyn_params {
  int64_t b, c, h, w, groups, cg, k, dil, stride, pad, p, q;
  int64_t count; /* elements of the pass's output */
};

dyn_params dyn_params_make(const conv_problem *pb, int64_t count_of_direction[3]) {
  dyn_params prm = {};
  conv_dynamic_dims d;
  if (!conv_dynamic_dims_make(pb, &d)) return prm; /* count 0: no work */
  prm.b = d.b, prm.c = d.c, prm.h = d.h, prm.w = d.w, prm.groups = d.groups, prm.cg = d.cg;
  prm.k = d.k, prm.dil = d.dil, prm.stride = d.stride, prm.pad = d.pad, prm.p = d.p, prm.q = d.q;
  count_of_direction[CONV_FORWARD] = prm.b * prm.c * prm.p * prm.q;
  count_of_direction[CONV_BACKWARD_DATA] = prm.b * prm.c * prm.h * prm.w;
  count_of_direction[CONV_BACKWARD_FILTER] = prm.b * prm.groups * prm.k * prm.k * prm.p * prm.q;
  prm.count = count_of_direction[pb->direction];
  return prm;
}

__device__ int64_t weights_at(const dyn_params &d, int64_t b, int64_t g, int64_t tap, int64_t p,
                              int64_t q) {
  return (((b * d.groups + g) * d.k * d.k + tap) * d.p + p) * d.q + q;
}

unsigned blocks_for(int64_t count, int threads) {
  const int64_t max_blocks = 1 << 20; /* the grid-stride loops do the rest */
  const int64_t blocks = (count + threads - 1) / threads;
  return (unsigned)(blocks > max_blocks ? max_blocks : blocks);
}

}  // namespace

/* y[b][c][p][q] per grid-stride step. */
__global__ static void dyn_reference_forward(const dyn_params d, const float *__restrict__ x,
                                             const float *__restrict__ wt,
                                             float *__restrict__ y) {
  const int64_t step = (int64_t)gridDim.x * blockDim.x;
  for (int64_t o = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; o < d.count; o += step) {
    const int64_t q = o % d.q, p = (o / d.q) % d.p, c = (o / (d.q * d.p)) % d.c;
    const int64_t b = o / (d.q * d.p * d.c), g = c / d.cg;
    double acc = 0.0;
    for (int64_t i = 0; i < d.k; ++i) {
      const int64_t ih = p * d.stride - d.pad + i * d.dil;
      if (ih < 0 || ih >= d.h) continue;
      for (int64_t j = 0; j < d.k; ++j) {
        const int64_t iw = q * d.stride - d.pad + j * d.dil;
        if (iw < 0 || iw >= d.w) continue;
        acc += (double)x[((b * d.c + c) * d.h + ih) * d.w + iw] *
               (double)wt[weights_at(d, b, g, i * d.k + j, p, q)];
      }
    }
    y[o] = (float)acc;
  }
}

/* dx[b][c][ih][iw] per step: the outputs whose tap (i, j) read this pixel,
 * p = (ih + pad - i*dil) / stride where the division is exact. */
__global__ static void dyn_reference_backward_data(const dyn_params d, const float *__restrict__ dy,
                                                   const float *__restrict__ wt,
                                                   float *__restrict__ dx) {
  const int64_t step = (int64_t)gridDim.x * blockDim.x;
  for (int64_t o = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; o < d.count; o += step) {
    const int64_t iw = o % d.w, ih = (o / d.w) % d.h, c = (o / (d.w * d.h)) % d.c;
    const int64_t b = o / (d.w * d.h * d.c), g = c / d.cg;
    double acc = 0.0;
    for (int64_t i = 0; i < d.k; ++i) {
      const int64_t th = ih + d.pad - i * d.dil;
      if (th < 0 || th % d.stride != 0 || th / d.stride >= d.p) continue;
      for (int64_t j = 0; j < d.k; ++j) {
        const int64_t tw = iw + d.pad - j * d.dil;
        if (tw < 0 || tw % d.stride != 0 || tw / d.stride >= d.q) continue;
        const int64_t p = th / d.stride, q = tw / d.stride;
        acc += (double)dy[((b * d.c + c) * d.p + p) * d.q + q] *
               (double)wt[weights_at(d, b, g, i * d.k + j, p, q)];
      }
    }
    dx[o] = (float)acc;
  }
}

/* dwt[b][g][tap][p][q] per step: the group's channels' products of dy and
 * the input pixel the tap read. */
__global__ static void dyn_reference_backward_filter(const dyn_params d,
                                                     const float *__restrict__ x,
                                                     const float *__restrict__ dy,
                                                     float *__restrict__ dwt) {
  const int64_t step = (int64_t)gridDim.x * blockDim.x;
  for (int64_t o = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; o < d.count; o += step) {
    const int64_t q = o % d.q, p = (o / d.q) % d.p, tap = (o / (d.q * d.p)) % (d.k * d.k);
    const int64_t g = (o / (d.q * d.p * d.k * d.k)) % d.groups;
    const int64_t b = o / (d.q * d.p * d.k * d.k * d.groups);
    const int64_t ih = p * d.stride - d.pad + tap / d.k * d.dil;
    const int64_t iw = q * d.stride - d.pad + tap % d.k * d.dil;
    double acc = 0.0;
    if (ih >= 0 && ih < d.h && iw >= 0 && iw < d.w)
      for (int64_t c = g * d.cg; c < (g + 1) * d.cg; ++c)
        acc += (double)x[((b * d.c + c) * d.h + ih) * d.w + iw] *
               (double)dy[((b * d.c + c) * d.p + p) * d.q + q];
    dwt[o] = (float)acc;
  }
}

/* The pass's dims, or count 0 (nothing to launch) for a problem that is
 * not a valid dynamic one of `direction`. */
static dyn_params dyn_launch_params(const conv_problem *problem, conv_direction direction) {
  int64_t counts[3] = {0, 0, 0};
  dyn_params d = {};
  if (problem != NULL && problem->direction == direction) d = dyn_params_make(problem, counts);
  return d;
}

static const int kThreads = 256;

extern "C" cudaError_t conv_reference_dynamic_forward(const conv_problem *problem, const float *x,
                                                      const float *wt, float *y,
                                                      cudaStream_t stream) {
  const dyn_params d = dyn_launch_params(problem, CONV_FORWARD);
  if (d.count <= 0) return problem && problem->direction == CONV_FORWARD ? cudaSuccess
                                                                         : cudaErrorInvalidValue;
  dyn_reference_forward<<<blocks_for(d.count, kThreads), kThreads, 0, stream>>>(d, x, wt, y);
  return cudaGetLastError();
}

extern "C" cudaError_t conv_reference_dynamic_backward_data(const conv_problem *problem,
                                                            const float *dy, const float *wt,
                                                            float *dx, cudaStream_t stream) {
  const dyn_params d = dyn_launch_params(problem, CONV_BACKWARD_DATA);
  if (d.count <= 0) return problem && problem->direction == CONV_BACKWARD_DATA
                               ? cudaSuccess
                               : cudaErrorInvalidValue;
  dyn_reference_backward_data<<<blocks_for(d.count, kThreads), kThreads, 0, stream>>>(d, dy, wt,
                                                                                     dx);
  return cudaGetLastError();
}

extern "C" cudaError_t conv_reference_dynamic_backward_filter(const conv_problem *problem,
                                                              const float *x, const float *dy,
                                                              float *dwt, cudaStream_t stream) {
  const dyn_params d = dyn_launch_params(problem, CONV_BACKWARD_FILTER);
  if (d.count <= 0) return problem && problem->direction == CONV_BACKWARD_FILTER
                               ? cudaSuccess
                               : cudaErrorInvalidValue;
  dyn_reference_backward_filter<<<blocks_for(d.count, kThreads), kThreads, 0, stream>>>(d, x, dy,
                                                                                       dwt);
  return cudaGetLastError();
}
