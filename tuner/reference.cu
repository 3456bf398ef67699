/*
 * reference.cu -- the direct convolution every candidate is validated
 * against, in each direction.  It is written to be checked by reading, not
 * to be fast: one thread per output element (a warp for the filter
 * gradient's long sums), the textbook loops, double accumulation.  Inputs
 * of any conv_dtype (each kernel instantiated for the problem's element
 * type T, every element read as a double, exactly); the output, the
 * reference, is fp32.
 */
#include "algorithms/common/elements.cuh"
#include "tuner/check.h"
#include "core/core.h"

namespace {

/* Everything the kernel needs, by value: the kernel never dereferences host
 * memory, and int64 fields keep every index product exact. */
struct reference_params {
  int64_t n, c, h, w;
  int64_t k, r, s;
  int64_t p, q;
  int64_t pad_h, pad_w;
  int64_t stride_h, stride_w;
  int64_t dil_h, dil_w;
  int64_t c_per_group, k_per_group;
  int64_t count; /* elements of the pass's output: y, dx or dw */
  /* Element strides of the n, c (k), h (p) and w (q) dims for the layout;
   * the filter's are of k, c/groups, r and s. */
  int64_t xs[4], ws[4], ys[4];
};

/* Strides of a packed tensor of dims (n, c, h, w), NCHW or NHWC. */
void layout_strides(conv_layout layout, int64_t n, int64_t c, int64_t h, int64_t w,
                    int64_t out[4]) {
  (void)n;
  if (layout == CONV_LAYOUT_NHWC) {
    out[0] = h * w * c, out[1] = 1, out[2] = w * c, out[3] = c;
  } else {
    out[0] = c * h * w, out[1] = h * w, out[2] = w, out[3] = 1;
  }
}

}  // namespace

/* One output y[ni][ko][oh][ow] (in the problem's layout) per grid-stride
 * step.  Consecutive threads take consecutive ow, so in NCHW the input reads
 * of a warp are close together and the filter reads are mostly one
 * broadcast address. */
template <conv_epilogue EPILOGUE, typename T>
__global__ static void reference_kernel(const reference_params prm, const T *__restrict__ x,
                                        const T *__restrict__ w,
                                        const float *__restrict__ bias, float *__restrict__ y) {
  const int64_t step = (int64_t)gridDim.x * blockDim.x;
  for (int64_t o = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; o < prm.count; o += step) {
    const int64_t ow = o % prm.q;
    const int64_t oh = (o / prm.q) % prm.p;
    const int64_t ko = (o / (prm.q * prm.p)) % prm.k;
    const int64_t ni = o / (prm.q * prm.p * prm.k);
    const int64_t c0 = (ko / prm.k_per_group) * prm.c_per_group;

    double acc = 0.0;
    for (int64_t ci = 0; ci < prm.c_per_group; ++ci) {
      const T *xc = x + ni * prm.xs[0] + (c0 + ci) * prm.xs[1];
      const T *wc = w + ko * prm.ws[0] + ci * prm.ws[1];
      for (int64_t ri = 0; ri < prm.r; ++ri) {
        const int64_t ih = oh * prm.stride_h - prm.pad_h + ri * prm.dil_h;
        if (ih < 0 || ih >= prm.h) continue;
        for (int64_t si = 0; si < prm.s; ++si) {
          const int64_t iw = ow * prm.stride_w - prm.pad_w + si * prm.dil_w;
          if (iw < 0 || iw >= prm.w) continue;
          acc += (double)conv_element_to_float(xc[ih * prm.xs[2] + iw * prm.xs[3]]) *
                 (double)conv_element_to_float(wc[ri * prm.ws[2] + si * prm.ws[3]]);
        }
      }
    }
    if (EPILOGUE != CONV_EPILOGUE_NONE) acc += (double)bias[ko];
    if (EPILOGUE == CONV_EPILOGUE_BIAS_RELU && acc < 0.0) acc = 0.0;
    y[ni * prm.ys[0] + ko * prm.ys[1] + oh * prm.ys[2] + ow * prm.ys[3]] = (float)acc;
  }
}

static reference_params reference_params_make(const conv_problem *pb) {
  reference_params prm;
  prm.n = pb->n;
  prm.c = pb->c;
  prm.h = pb->h;
  prm.w = pb->w;
  prm.k = pb->k;
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
  prm.c_per_group = pb->c / pb->groups;
  prm.k_per_group = pb->k / pb->groups;
  prm.count = pb->direction == CONV_BACKWARD_DATA     ? prm.n * prm.c * prm.h * prm.w
              : pb->direction == CONV_BACKWARD_FILTER ? prm.k * prm.c_per_group * prm.r * prm.s
                                                      : prm.n * prm.k * prm.p * prm.q;
  layout_strides(pb->layout, prm.n, prm.c, prm.h, prm.w, prm.xs);
  /* The filters: the layout's own order, or K R S C (filter_layout). */
  layout_strides(pb->filter_layout == CONV_FILTER_KRSC ? CONV_LAYOUT_NHWC : pb->layout, prm.k,
                 prm.c_per_group, prm.r, prm.s, prm.ws);
  layout_strides(pb->layout, prm.n, prm.k, prm.p, prm.q, prm.ys);
  return prm;
}

/* One dx[ni][ci][ih][iw] per grid-stride step: the sum over the outputs
 * its pixel fed, found by inverting oh * stride - pad + ri * dil = ih
 * (only where the stride divides), not by scattering the forward loop. */
template <typename T>
__global__ static void reference_backward_data_kernel(const reference_params prm,
                                                      const T *__restrict__ dy,
                                                      const T *__restrict__ w,
                                                      float *__restrict__ dx) {
  const int64_t step = (int64_t)gridDim.x * blockDim.x;
  for (int64_t o = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; o < prm.count; o += step) {
    const int64_t iw = o % prm.w;
    const int64_t ih = (o / prm.w) % prm.h;
    const int64_t ci = (o / (prm.w * prm.h)) % prm.c;
    const int64_t ni = o / (prm.w * prm.h * prm.c);
    const int64_t group = ci / prm.c_per_group, cg = ci % prm.c_per_group;

    double acc = 0.0;
    for (int64_t ko = group * prm.k_per_group; ko < (group + 1) * prm.k_per_group; ++ko) {
      for (int64_t ri = 0; ri < prm.r; ++ri) {
        const int64_t th = ih + prm.pad_h - ri * prm.dil_h;
        if (th < 0 || th % prm.stride_h != 0 || th / prm.stride_h >= prm.p) continue;
        for (int64_t si = 0; si < prm.s; ++si) {
          const int64_t tw = iw + prm.pad_w - si * prm.dil_w;
          if (tw < 0 || tw % prm.stride_w != 0 || tw / prm.stride_w >= prm.q) continue;
          acc += (double)conv_element_to_float(dy[ni * prm.ys[0] + ko * prm.ys[1] +
                                                   th / prm.stride_h * prm.ys[2] +
                                                   tw / prm.stride_w * prm.ys[3]]) *
                 (double)conv_element_to_float(
                     w[ko * prm.ws[0] + cg * prm.ws[1] + ri * prm.ws[2] + si * prm.ws[3]]);
        }
      }
    }
    dx[ni * prm.xs[0] + ci * prm.xs[1] + ih * prm.xs[2] + iw * prm.xs[3]] = (float)acc;
  }
}

/* One dw[ko][cg][ri][si] per warp and grid-stride step: the sum over
 * every image and output pixel of the input it multiplied times dy.  Its
 * n*p*q terms (a million for one 1024x1024 image) are split over the
 * warp's lanes, each summing every 32nd, then added up in a fixed order:
 * one thread per element would take seconds. */
template <typename T>
__global__ static void reference_backward_filter_kernel(const reference_params prm,
                                                        const T *__restrict__ x,
                                                        const T *__restrict__ dy,
                                                        float *__restrict__ dw) {
  const int lane = threadIdx.x % 32;
  const int64_t warps = (int64_t)gridDim.x * blockDim.x / 32;
  const int64_t terms = prm.n * prm.p * prm.q;
  for (int64_t o = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) / 32; o < prm.count; o += warps) {
    const int64_t si = o % prm.s;
    const int64_t ri = (o / prm.s) % prm.r;
    const int64_t cg = (o / (prm.s * prm.r)) % prm.c_per_group;
    const int64_t ko = o / (prm.s * prm.r * prm.c_per_group);
    const int64_t ci = (ko / prm.k_per_group) * prm.c_per_group + cg;

    double acc = 0.0;
    for (int64_t t = lane; t < terms; t += 32) {
      const int64_t ow = t % prm.q, oh = (t / prm.q) % prm.p, ni = t / (prm.q * prm.p);
      const int64_t ih = oh * prm.stride_h - prm.pad_h + ri * prm.dil_h;
      const int64_t iw = ow * prm.stride_w - prm.pad_w + si * prm.dil_w;
      if (ih < 0 || ih >= prm.h || iw < 0 || iw >= prm.w) continue;
      acc += (double)conv_element_to_float(
                 x[ni * prm.xs[0] + ci * prm.xs[1] + ih * prm.xs[2] + iw * prm.xs[3]]) *
             (double)conv_element_to_float(
                 dy[ni * prm.ys[0] + ko * prm.ys[1] + oh * prm.ys[2] + ow * prm.ys[3]]);
    }
    for (int offset = 16; offset > 0; offset /= 2)
      acc += __shfl_down_sync(0xFFFFFFFFu, acc, offset);
    if (lane == 0)
      dw[ko * prm.ws[0] + cg * prm.ws[1] + ri * prm.ws[2] + si * prm.ws[3]] = (float)acc;
  }
}

/* Enough blocks to fill any current GPU many times over; the grid-stride
 * loops cover the rest, so huge outputs never overflow gridDim.x. */
static unsigned reference_blocks(int64_t count, int threads) {
  const int64_t max_blocks = 1 << 20;
  int64_t blocks = (count + threads - 1) / threads;
  return (unsigned)(blocks > max_blocks ? max_blocks : blocks);
}

template <conv_epilogue EPILOGUE, typename T>
static cudaError_t reference_launch(const reference_params &prm, const T *x, const T *w,
                                    const float *bias, float *y, cudaStream_t stream) {
  const int threads = 256;
  reference_kernel<EPILOGUE, T><<<reference_blocks(prm.count, threads), threads, 0, stream>>>(
      prm, x, w, bias, y);
  return cudaGetLastError();
}

/* The dynamic op's references read fp32 (validation refuses it any other
 * dtype); a problem that is not one of its valid ones gets no launch. */
static bool dynamic_fp32(const conv_problem *problem) {
  return problem->op == CONV_OP_DYNAMIC && problem->dtype == CONV_DTYPE_F32;
}

extern "C" cudaError_t conv_reference_forward(const conv_problem *problem, const void *x,
                                              const void *w, const float *bias, float *y,
                                              cudaStream_t stream) {
  if (problem == NULL || problem->direction != CONV_FORWARD) return cudaErrorInvalidValue;
  if (dynamic_fp32(problem))
    return conv_reference_dynamic_forward(problem, (const float *)x, (const float *)w, y, stream);
  if (problem->op != CONV_OP_CONVOLUTION) return cudaErrorInvalidValue;
  const reference_params prm = reference_params_make(problem);
  if (prm.count <= 0) return cudaSuccess;
  return conv_with_element_type(problem->dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T *xt = (const T *)x, *wt = (const T *)w;
    switch (problem->epilogue) {
      case CONV_EPILOGUE_NONE:
        return reference_launch<CONV_EPILOGUE_NONE>(prm, xt, wt, bias, y, stream);
      case CONV_EPILOGUE_BIAS:
        return reference_launch<CONV_EPILOGUE_BIAS>(prm, xt, wt, bias, y, stream);
      case CONV_EPILOGUE_BIAS_RELU:
        return reference_launch<CONV_EPILOGUE_BIAS_RELU>(prm, xt, wt, bias, y, stream);
    }
    return cudaErrorInvalidValue;
  });
}

extern "C" cudaError_t conv_reference_backward_data(const conv_problem *problem, const void *dy,
                                                    const void *w, float *dx,
                                                    cudaStream_t stream) {
  if (problem == NULL || problem->direction != CONV_BACKWARD_DATA) return cudaErrorInvalidValue;
  if (dynamic_fp32(problem))
    return conv_reference_dynamic_backward_data(problem, (const float *)dy, (const float *)w, dx,
                                                stream);
  if (problem->op != CONV_OP_CONVOLUTION) return cudaErrorInvalidValue;
  const reference_params prm = reference_params_make(problem);
  if (prm.count <= 0) return cudaSuccess;
  const int threads = 256;
  return conv_with_element_type(problem->dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    reference_backward_data_kernel<T><<<reference_blocks(prm.count, threads), threads, 0,
                                        stream>>>(prm, (const T *)dy, (const T *)w, dx);
    return cudaGetLastError();
  });
}

extern "C" cudaError_t conv_reference_backward_filter(const conv_problem *problem, const void *x,
                                                      const void *dy, float *dw,
                                                      cudaStream_t stream) {
  if (problem == NULL || problem->direction != CONV_BACKWARD_FILTER)
    return cudaErrorInvalidValue;
  if (dynamic_fp32(problem))
    return conv_reference_dynamic_backward_filter(problem, (const float *)x, (const float *)dy, dw,
                                                  stream);
  if (problem->op != CONV_OP_CONVOLUTION) return cudaErrorInvalidValue;
  const reference_params prm = reference_params_make(problem);
  if (prm.count <= 0) return cudaSuccess;
  /* A warp per output (the whole warp loops together: the shuffles need
   * every lane); 2 warps a block spread few outputs over many SMs. */
  const int threads = 64;
  return conv_with_element_type(problem->dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    reference_backward_filter_kernel<T><<<reference_blocks(prm.count * 32, threads), threads, 0,
                                          stream>>>(prm, (const T *)x, (const T *)dy, dw);
    return cudaGetLastError();
  });
}
