/*
 * channel_split.cu -- kernels of the `channel_split` candidate; see
 * channel_split.h for the scheme.
 */
#include <stdint.h>
#include <stdio.h>

#include "algorithms/channel_split.h"
#include "algorithms/epilogue.cuh"

namespace {

constexpr int kThreads = CONV_SPLIT_THREADS;
constexpr int kPerThread = CONV_SPLIT_K_PER_THREAD;
static_assert(kPerThread == 8, "a thread reads its filters as two float4s");

struct Args {
  const float *x, *filters, *bias;
  float *out; /* y with one split, else the partial sums */
  int n, c, h, w, k, p, q, r, s;
  int stride_h, stride_w, pad_h, pad_w, dil_h, dil_w;
  int k_tile, k_pitch, pixels_per_block, c_per_split, stage_channels, splits, epilogue;
};

/* Stages the filters of input channels [c0, c0 + count) and output
 * channels [k0, k0 + k_tile) as ws[channel][tap][k] (zero past K).
 * Consecutive threads read consecutive taps and channels of one filter. */
__device__ void stage_filters(const Args &a, float *ws, int k0, int c0, int count, int taps) {
  const int total = a.k_tile * count * taps;
  for (int i = threadIdx.x; i < total; i += kThreads) {
    const int tap = i % taps;
    const int channel = (i / taps) % count;
    const int kk = i / (taps * count);
    const int k = k0 + kk;
    const float v = k < a.k ? __ldg(a.filters + ((size_t)k * a.c + c0 + channel) * taps + tap) : 0.0f;
    ws[(channel * taps + tap) * a.k_pitch + kk] = v;
  }
}

/* Adds input channel `xc`'s taps for one output pixel into acc, with the
 * staged filters of that channel at `wc` (this thread's 8 outputs). */
template <int R, int S>
__device__ __forceinline__ void add_channel(const Args &a, const float *xc, const float *wc,
                                            int ih0, int iw0, float acc[kPerThread]) {
  const int rows = R > 0 ? R : a.r, cols = S > 0 ? S : a.s;
#pragma unroll
  for (int r = 0; r < rows; r++) {
    const int ih = ih0 + r * a.dil_h;
    const bool row_inside = (unsigned)ih < (unsigned)a.h;
#pragma unroll
    for (int s = 0; s < cols; s++) {
      const int iw = iw0 + s * a.dil_w;
      const float v =
          row_inside && (unsigned)iw < (unsigned)a.w ? __ldg(xc + ih * a.w + iw) : 0.0f;
      const float4 *f = reinterpret_cast<const float4 *>(wc + (r * cols + s) * a.k_pitch);
      const float4 lo = f[0], hi = f[1];
      acc[0] = fmaf(v, lo.x, acc[0]);
      acc[1] = fmaf(v, lo.y, acc[1]);
      acc[2] = fmaf(v, lo.z, acc[2]);
      acc[3] = fmaf(v, lo.w, acc[3]);
      acc[4] = fmaf(v, hi.x, acc[4]);
      acc[5] = fmaf(v, hi.y, acc[5]);
      acc[6] = fmaf(v, hi.z, acc[6]);
      acc[7] = fmaf(v, hi.w, acc[7]);
    }
  }
}

/* One block: pixels_per_block output pixels x k_tile output channels of
 * one image, summed over one split's input channels.  R, S: the filter
 * size when compiled for it, 0 for any. */
template <int R, int S>
__global__ void __launch_bounds__(kThreads) split_partial(Args a) {
  extern __shared__ float4 smem[];
  float *ws = reinterpret_cast<float *>(smem);
  const int taps = (R > 0 ? R : a.r) * (S > 0 ? S : a.s);
  const int pq = a.p * a.q;
  /* A warp shares its 8 output channels: filter reads are broadcasts. */
  const int group = threadIdx.x / a.pixels_per_block;
  const int pixel = blockIdx.x * a.pixels_per_block + threadIdx.x % a.pixels_per_block;
  const int k0 = blockIdx.y * a.k_tile;
  const int image = blockIdx.z / a.splits, split = blockIdx.z % a.splits;
  const int c_begin = split * a.c_per_split;
  const int c_end = min(a.c, c_begin + a.c_per_split);
  const bool active = pixel < pq;
  const int oh = active ? pixel / a.q : 0, ow = active ? pixel % a.q : 0;
  const int ih0 = oh * a.stride_h - a.pad_h, iw0 = ow * a.stride_w - a.pad_w;
  float acc[kPerThread] = {};
  for (int c0 = c_begin; c0 < c_end; c0 += a.stage_channels) {
    const int count = min(a.stage_channels, c_end - c0);
    __syncthreads(); /* the previous channels' filters are used up */
    stage_filters(a, ws, k0, c0, count, taps);
    __syncthreads();
    if (!active) continue;
    for (int channel = 0; channel < count; channel++) {
      const float *xc = a.x + ((size_t)image * a.c + c0 + channel) * a.h * a.w;
      add_channel<R, S>(a, xc, ws + channel * taps * a.k_pitch + group * kPerThread, ih0, iw0,
                        acc);
    }
  }
  if (!active) return;
#pragma unroll
  for (int j = 0; j < kPerThread; j++) {
    const int k = k0 + group * kPerThread + j;
    if (k >= a.k) break;
    if (a.splits == 1) {
      const float b = a.epilogue != CONV_EPILOGUE_NONE ? a.bias[k] : 0.0f;
      a.out[((size_t)image * a.k + k) * pq + pixel] = conv_epilogue_apply(a.epilogue, acc[j], b);
    } else {
      a.out[(((size_t)split * a.n + image) * a.k + k) * pq + pixel] = acc[j];
    }
  }
}

/* y = epilogue(sum of the splits' partial sums + bias), splits added in
 * order so that a plan always gives the same bits. */
__global__ void __launch_bounds__(kThreads)
    split_sum(const float *partial, const float *bias, float *y, int splits, int count, int pq,
              int k, int epilogue) {
  for (int i = blockIdx.x * kThreads + threadIdx.x; i < count; i += gridDim.x * kThreads) {
    float acc = 0.0f;
    for (int s = 0; s < splits; s++) acc += partial[(size_t)s * count + i];
    const float b = epilogue != CONV_EPILOGUE_NONE ? bias[(i / pq) % k] : 0.0f;
    y[i] = conv_epilogue_apply(epilogue, acc, b);
  }
}

typedef void (*partial_fn)(Args);

partial_fn partial_kernel(int r, int s) {
  if (r == 3 && s == 3) return split_partial<3, 3>;
  if (r == 1 && s == 1) return split_partial<1, 1>;
  return split_partial<0, 0>;
}

bool refuse(char *why, size_t size, const char *text) {
  if (why != NULL && size > 0) snprintf(why, size, "%s", text);
  return false;
}

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

}  // namespace

extern "C" bool conv_split_applicable(const conv_problem *problem) {
  int64_t p, q;
  if (problem == NULL || problem->groups != 1 || problem->k < 8 ||
      conv_problem_output_dims(problem, &p, &q) != CONV_OK)
    return false;
  return problem->n * p * q <= 8192;
}

extern "C" bool conv_split_plan(const conv_problem *pr, const conv_split_tiling *t,
                                conv_split_launch *L, char *why, size_t why_size) {
  if (pr == NULL || t == NULL || L == NULL) return refuse(why, why_size, "NULL argument");
  if (!conv_split_applicable(pr))
    return refuse(why, why_size, "needs one group, K >= 8 and at most 8192 output pixels");
  if (t->k_tile != 16 && t->k_tile != 32 && t->k_tile != 64)
    return refuse(why, why_size, "k_tile is not 16, 32 or 64");
  if (t->splits < 1 || t->splits > pr->c) return refuse(why, why_size, "splits not in [1, C]");
  const int64_t c_per_split = ceil_div(pr->c, t->splits);
  if ((t->splits - 1) * c_per_split >= pr->c)
    return refuse(why, why_size, "fewer splits give the same channels per split");
  int64_t p, q;
  conv_problem_output_dims(pr, &p, &q);
  const int64_t taps = pr->r * pr->s, pitch = t->k_tile + 4;
  const int64_t stage = CONV_SPLIT_STAGE_FLOATS / (taps * pitch);
  if (stage < 1) return refuse(why, why_size, "one input channel's filters do not fit in shared memory");
  const int64_t limit = INT32_MAX;
  if (pr->n * pr->c * pr->h * pr->w > limit || pr->k * pr->c * taps > limit ||
      t->splits * pr->n * pr->k * p * q > limit)
    return refuse(why, why_size, "sizes past 32-bit indexing");
  const int64_t pixels_per_block = kThreads / (t->k_tile / kPerThread);
  const int64_t grid_k = ceil_div(pr->k, t->k_tile), grid_z = pr->n * t->splits;
  if (grid_k > 65535 || grid_z > 65535) return refuse(why, why_size, "grid too large");
  *L = conv_split_launch{};
  L->tiling = *t;
  L->kernel = (const void *)partial_kernel((int)pr->r, (int)pr->s);
  L->n = (int)pr->n, L->c = (int)pr->c, L->h = (int)pr->h, L->w = (int)pr->w;
  L->k = (int)pr->k, L->p = (int)p, L->q = (int)q, L->r = (int)pr->r, L->s = (int)pr->s;
  L->stride_h = (int)pr->stride_h, L->stride_w = (int)pr->stride_w;
  L->pad_h = (int)pr->pad_h, L->pad_w = (int)pr->pad_w;
  L->dil_h = (int)pr->dil_h, L->dil_w = (int)pr->dil_w;
  L->epilogue = (int)pr->epilogue;
  L->pixels_per_block = (int)pixels_per_block;
  L->c_per_split = (int)c_per_split;
  L->stage_channels = (int)(stage < c_per_split ? stage : c_per_split);
  L->k_pitch = (int)pitch;
  L->grid[0] = (unsigned)ceil_div(p * q, pixels_per_block);
  L->grid[1] = (unsigned)grid_k;
  L->grid[2] = (unsigned)grid_z;
  L->smem_bytes = (size_t)L->stage_channels * taps * pitch * sizeof(float);
  L->workspace_bytes =
      t->splits > 1 ? (size_t)(t->splits * pr->n * pr->k * p * q) * sizeof(float) : 0;
  return true;
}

extern "C" cudaError_t conv_split_forward(const conv_split_launch *L, const float *x,
                                          const float *w, const float *bias, float *y,
                                          float *workspace, cudaStream_t stream) {
  if (L == NULL || L->kernel == NULL || x == NULL || w == NULL || y == NULL ||
      (L->epilogue != CONV_EPILOGUE_NONE && bias == NULL) ||
      (L->workspace_bytes > 0 && workspace == NULL))
    return cudaErrorInvalidValue;
  const int splits = L->tiling.splits;
  const Args a = {x, w, bias, splits == 1 ? y : workspace,
                  L->n, L->c, L->h, L->w, L->k, L->p, L->q, L->r, L->s,
                  L->stride_h, L->stride_w, L->pad_h, L->pad_w, L->dil_h, L->dil_w,
                  L->tiling.k_tile, L->k_pitch, L->pixels_per_block, L->c_per_split,
                  L->stage_channels, splits, L->epilogue};
  const partial_fn partial = (partial_fn)L->kernel;
  partial<<<dim3(L->grid[0], L->grid[1], L->grid[2]), kThreads, L->smem_bytes, stream>>>(a);
  cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess || splits == 1) return e;
  const int count = L->n * L->k * L->p * L->q;
  const int blocks = (int)(ceil_div(count, kThreads) < 1024 ? ceil_div(count, kThreads) : 1024);
  split_sum<<<blocks, kThreads, 0, stream>>>(workspace, bias, y, splits, count, L->p * L->q, L->k,
                                             L->epilogue);
  return cudaGetLastError();
}
