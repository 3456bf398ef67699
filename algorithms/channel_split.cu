/*
 * channel_split.cu -- kernels of the `channel_split` candidate; see
 * channel_split.h for the scheme.
 */
#include <stdint.h>
#include <stdio.h>

#include "algorithms/channel_split.h"
#include "algorithms/common/kernels.h"
#include "algorithms/common/launch_plan.cuh"
#include "algorithms/common/epilogue.cuh"
#include "algorithms/common/staging.cuh"

namespace {

constexpr int kMaxThreads = CONV_SPLIT_MAX_THREADS;
constexpr int kPerThread = CONV_SPLIT_K_PER_THREAD;
static_assert(kPerThread == 8, "a thread reads its filters as two float4s");

struct Args {
  const float *x, *filters, *bias;
  float *out; /* y with one split, else the partial sums */
  int n, c, h, w, k, p, q, r, s;
  int stride_h, stride_w, pad_h, pad_w, dil_h, dil_w;
  int k_tile, k_pitch, tx, ty, tiles_q, window_h, window_w;
  int c_per_split, stage_channels, splits, epilogue;
  conv_divisor by_span, by_plane, by_window_w; /* stage_channels * taps, window_h * window_w */
};

/* Stages input channels [c0, c0 + count): their filters for output
 * channels [k0, k0 + k_tile) as ws[channel][tap][k] (zero past K), and the
 * block's input window, zero where it lies on the padding, as
 * xs[channel][row][column], so that the sums read taps without checks.
 * Always stage_channels channels' worth, zeros past count: the divisions
 * below are then by launch constants.  One batched copy, so that all its
 * loads are in flight together. */
__device__ void stage(const Args &a, float *ws, float *xs, int image, int k0, int c0, int count,
                      int taps, int ih0, int iw0) {
  /* Filter element i: output channel k0 + i / span and (channel, tap) =
   * i % span, its offset in that output channel's run of span floats.
   * Consecutive i: consecutive taps and channels of one filter, or
   * consecutive columns of the window. */
  const int span = (int)a.by_span.divisor, filters = a.k_tile * span;
  const int plane = (int)a.by_plane.divisor, staged = count * taps;
  auto load = [&](int i) -> float {
    if (i < filters) {
      const int kk = (int)conv_divide((uint32_t)i, a.by_span), j = i - kk * span;
      const int k = k0 + kk;
      return k < a.k && j < staged ? __ldg(a.filters + ((size_t)k * a.c + c0) * taps + j) : 0.0f;
    }
    i -= filters;
    const int channel = (int)conv_divide((uint32_t)i, a.by_plane), at = i - channel * plane;
    const int row = (int)conv_divide((uint32_t)at, a.by_window_w);
    const int ih = ih0 + row, iw = iw0 + at - row * a.window_w;
    const bool inside = channel < count && (unsigned)ih < (unsigned)a.h && (unsigned)iw < (unsigned)a.w;
    return inside ? __ldg(a.x + (((size_t)image * a.c + c0 + channel) * a.h + ih) * a.w + iw) : 0.0f;
  };
  auto store = [&](int i, float v) {
    if (i < filters) {
      const int kk = (int)conv_divide((uint32_t)i, a.by_span);
      ws[(i - kk * span) * a.k_pitch + kk] = v;
    } else {
      xs[i - filters] = v;
    }
  };
  load_batched(filters + a.stage_channels * plane, load, store);
}

/* Window offsets of the taps, r dil_h window_w + s dil_w: computed once
 * per thread, so that a tap costs its loads and FMAs only.  For filters
 * compiled for their size (the generic kernel computes them per tap). */
template <int R, int S>
struct TapOffsets {
  int at[R * S];
  __device__ explicit TapOffsets(const Args &a) {
#pragma unroll
    for (int r = 0; r < R; r++)
#pragma unroll
      for (int s = 0; s < S; s++) at[r * S + s] = r * a.dil_h * a.window_w + s * a.dil_w;
  }
  __device__ int operator()(const Args &, int r, int s) const { return at[r * S + s]; }
};
template <>
struct TapOffsets<0, 0> {
  __device__ explicit TapOffsets(const Args &) {}
  __device__ int operator()(const Args &a, int r, int s) const {
    return r * a.dil_h * a.window_w + s * a.dil_w;
  }
};

/* Adds one staged input channel into acc: the thread's PIXELS outputs
 * (columns tx apart, window at xc) x 8 output channels (filters at wc,
 * K_TILE + 4 floats a tap). */
template <int R, int S, int PIXELS, int K_TILE>
__device__ __forceinline__ void add_channel(const Args &a, const float *xc, const float *wc,
                                            const TapOffsets<R, S> &taps,
                                            float (&acc)[PIXELS][kPerThread]) {
  const int rows = R > 0 ? R : a.r, cols = S > 0 ? S : a.s;
  const int pixel_step = a.tx * a.stride_w;
#pragma unroll
  for (int r = 0; r < rows; r++) {
#pragma unroll
    for (int s = 0; s < cols; s++) {
      const float4 *f = reinterpret_cast<const float4 *>(wc + (r * cols + s) * (K_TILE + 4));
      const float4 lo = f[0], hi = f[1];
      const float *xt = xc + taps(a, r, s);
#pragma unroll
      for (int j = 0; j < PIXELS; j++) {
        const float v = xt[j * pixel_step];
        acc[j][0] = fmaf(v, lo.x, acc[j][0]);
        acc[j][1] = fmaf(v, lo.y, acc[j][1]);
        acc[j][2] = fmaf(v, lo.z, acc[j][2]);
        acc[j][3] = fmaf(v, lo.w, acc[j][3]);
        acc[j][4] = fmaf(v, hi.x, acc[j][4]);
        acc[j][5] = fmaf(v, hi.y, acc[j][5]);
        acc[j][6] = fmaf(v, hi.z, acc[j][6]);
        acc[j][7] = fmaf(v, hi.w, acc[j][7]);
      }
    }
  }
}

/* One block: a tile of ty output rows x tx * PIXELS columns x K_TILE
 * output channels of one image, summed over one split's input channels.
 * Thread (group, py, px) computes output channels k0 + 8 group .. + 7 of
 * row oh0 + py, columns ow0 + px + j tx.  R, S: the filter size when
 * compiled for it, 0 for any. */
template <int R, int S, int PIXELS, int K_TILE>
__global__ void __launch_bounds__(kMaxThreads) split_partial(Args a) {
  extern __shared__ float4 smem[];
  constexpr int kPitch = K_TILE + 4;
  const int taps = (R > 0 ? R : a.r) * (S > 0 ? S : a.s);
  float *ws = reinterpret_cast<float *>(smem);
  float *xs = ws + a.stage_channels * taps * kPitch;
  const int plane = a.window_h * a.window_w;
  const int pixel_threads = a.tx * a.ty;
  /* A warp shares its 8 output channels where it can: filter reads are broadcasts. */
  const int group = threadIdx.x / pixel_threads;
  const int px = threadIdx.x % pixel_threads % a.tx, py = threadIdx.x % pixel_threads / a.tx;
  const int oh0 = blockIdx.x / a.tiles_q * a.ty, ow0 = blockIdx.x % a.tiles_q * a.tx * PIXELS;
  const int k0 = blockIdx.y * K_TILE;
  const int image = blockIdx.z / a.splits, split = blockIdx.z % a.splits;
  const int c_begin = split * a.c_per_split;
  const int c_end = min(a.c, c_begin + a.c_per_split);
  const int oh = oh0 + py;
  const float *wt = ws + group * kPerThread;
  const float *xt = xs + py * a.stride_h * a.window_w + px * a.stride_w;
  const TapOffsets<R, S> tap_offsets(a);
  float acc[PIXELS][kPerThread] = {};
  for (int c0 = c_begin; c0 < c_end; c0 += a.stage_channels) {
    const int count = min(a.stage_channels, c_end - c0);
    __syncthreads(); /* the previous channels are used up */
    stage(a, ws, xs, image, k0, c0, count, taps, oh0 * a.stride_h - a.pad_h,
          ow0 * a.stride_w - a.pad_w);
    __syncthreads();
    for (int channel = 0; channel < count; channel++)
      add_channel<R, S, PIXELS, K_TILE>(a, xt + channel * plane, wt + channel * taps * kPitch,
                                        tap_offsets, acc);
  }
  if (oh >= a.p) return;
  const int pq = a.p * a.q;
#pragma unroll
  for (int j = 0; j < PIXELS; j++) {
    const int ow = ow0 + px + j * a.tx;
    if (ow >= a.q) break;
    const int pixel = oh * a.q + ow;
#pragma unroll
    for (int kk = 0; kk < kPerThread; kk++) {
      const int k = k0 + group * kPerThread + kk;
      if (k >= a.k) break;
      if (a.splits == 1) {
        const float b = a.epilogue != CONV_EPILOGUE_NONE ? a.bias[k] : 0.0f;
        a.out[((size_t)image * a.k + k) * pq + pixel] = conv_epilogue_apply(a.epilogue, acc[j][kk], b);
      } else {
        a.out[(((size_t)split * a.n + image) * a.k + k) * pq + pixel] = acc[j][kk];
      }
    }
  }
}

/* y = epilogue(sum of the splits' partial sums + bias), splits added in
 * order so that a plan always gives the same bits. */
__global__ void __launch_bounds__(kMaxThreads)
    split_sum(const float *partial, const float *bias, float *y, int splits, int count, int pq,
              int k, int epilogue) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < count; i += gridDim.x * blockDim.x) {
    float acc = 0.0f;
#pragma unroll 16 /* the loads go out together; the adds stay in order */
    for (int s = 0; s < splits; s++) acc += partial[(size_t)s * count + i];
    const float b = epilogue != CONV_EPILOGUE_NONE ? bias[(i / pq) % k] : 0.0f;
    y[i] = conv_epilogue_apply(epilogue, acc, b);
  }
}

typedef void (*partial_fn)(Args);

template <int PIXELS, int K_TILE>
partial_fn partial_for_filter(int r, int s) {
  if (r == 3 && s == 3) return split_partial<3, 3, PIXELS, K_TILE>;
  if (r == 1 && s == 1) return split_partial<1, 1, PIXELS, K_TILE>;
  return split_partial<0, 0, PIXELS, K_TILE>;
}

template <int K_TILE>
partial_fn partial_for_pixels(int r, int s, int pixels) {
  switch (pixels) {
    case 1: return partial_for_filter<1, K_TILE>(r, s);
    case 2: return partial_for_filter<2, K_TILE>(r, s);
    case 4: return partial_for_filter<4, K_TILE>(r, s);
    default: return NULL;
  }
}

partial_fn partial_kernel(int r, int s, int pixels, int k_tile) {
  switch (k_tile) {
    case 16: return partial_for_pixels<16>(r, s, pixels);
    case 32: return partial_for_pixels<32>(r, s, pixels);
    case 64: return partial_for_pixels<64>(r, s, pixels);
    default: return NULL;
  }
}

int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

}  // namespace

extern "C" bool conv_split_applicable(const conv_problem *problem) {
  int64_t p, q;
  if (problem == NULL || problem->groups != 1 || problem->k < 8 ||
      conv_problem_output_dims(problem, &p, &q) != CONV_OK)
    return false;
  return problem->n * p * q <= 8192;
}

extern "C" void conv_split_block_tile(int64_t p, int64_t q, const conv_split_tiling *t,
                                      int *tx, int *ty) {
  const int64_t pixel_threads = kMaxThreads / (t->k_tile / kPerThread);
  *tx = (int)min64(conv_ceil_div(q, t->pixels), pixel_threads);
  *ty = (int)min64(p, pixel_threads / *tx);
}

extern "C" bool conv_split_plan(const conv_problem *pr, const conv_split_tiling *t,
                                conv_split_launch *L, char *why, size_t why_size) {
  if (pr == NULL || t == NULL || L == NULL) return conv_refuse(why, why_size, "NULL argument");
  if (!conv_split_applicable(pr))
    return conv_refuse(why, why_size, "needs one group, K >= 8 and at most 8192 output pixels");
  if (t->k_tile != 16 && t->k_tile != 32 && t->k_tile != 64)
    return conv_refuse(why, why_size, "k_tile is not 16, 32 or 64");
  if (t->pixels != 1 && t->pixels != 2 && t->pixels != 4)
    return conv_refuse(why, why_size, "pixels a thread is not 1, 2 or 4");
  if (t->splits < 1 || t->splits > pr->c) return conv_refuse(why, why_size, "splits not in [1, C]");
  const int64_t c_per_split = conv_ceil_div(pr->c, t->splits);
  if ((t->splits - 1) * c_per_split >= pr->c)
    return conv_refuse(why, why_size, "fewer splits give the same channels per split");
  int64_t p, q;
  conv_problem_output_dims(pr, &p, &q);
  int tx, ty;
  conv_split_block_tile(p, q, t, &tx, &ty);
  if (t->pixels > 1 && (int64_t)tx * (t->pixels - 1) >= q)
    return conv_refuse(why, why_size, "fewer pixels a thread cover the row");
  const int64_t window_h = (ty - 1) * pr->stride_h + (pr->r - 1) * pr->dil_h + 1;
  const int64_t window_w = ((int64_t)tx * t->pixels - 1) * pr->stride_w + (pr->s - 1) * pr->dil_w + 1;
  const int64_t taps = pr->r * pr->s, pitch = t->k_tile + 4;
  const int64_t per_channel = taps * pitch + window_h * window_w;
  const int64_t stage = CONV_SPLIT_STAGE_FLOATS / per_channel;
  if (stage < 1)
    return conv_refuse(why, why_size,
                  "one input channel's filters and window do not fit in shared memory");
  const int64_t limit = INT32_MAX;
  if (pr->n * pr->c * pr->h * pr->w > limit || pr->k * pr->c * taps > limit ||
      t->splits * pr->n * pr->k * p * q > limit)
    return conv_refuse(why, why_size, "sizes past 32-bit indexing");
  const int64_t tiles_q = conv_ceil_div(q, (int64_t)tx * t->pixels);
  const int64_t tiles = tiles_q * conv_ceil_div(p, ty);
  const int64_t grid_k = conv_ceil_div(pr->k, t->k_tile), grid_z = pr->n * t->splits;
  if (grid_k > 65535 || grid_z > 65535) return conv_refuse(why, why_size, "grid too large");
  *L = conv_split_launch{};
  L->tiling = *t;
  L->kernel = (const void *)partial_kernel((int)pr->r, (int)pr->s, t->pixels, t->k_tile);
  conv_launch_set_geometry(*L, pr, p, q);
  L->epilogue = (int)pr->epilogue;
  L->tx = tx, L->ty = ty, L->tiles_q = (int)tiles_q;
  L->window_h = (int)window_h, L->window_w = (int)window_w;
  L->threads = (t->k_tile / kPerThread) * tx * ty;
  L->c_per_split = (int)c_per_split;
  L->stage_channels = (int)(stage < c_per_split ? stage : c_per_split);
  L->k_pitch = (int)pitch;
  L->grid[0] = (unsigned)tiles;
  L->grid[1] = (unsigned)grid_k;
  L->grid[2] = (unsigned)grid_z;
  L->by_span = conv_divisor_make((int)(L->stage_channels * taps));
  L->by_plane = conv_divisor_make((int)(window_h * window_w));
  L->by_window_w = conv_divisor_make((int)window_w);
  L->smem_bytes = (size_t)L->stage_channels * per_channel * sizeof(float);
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
                  L->tiling.k_tile, L->k_pitch, L->tx, L->ty, L->tiles_q, L->window_h,
                  L->window_w, L->c_per_split, L->stage_channels, splits, L->epilogue,
                  L->by_span, L->by_plane, L->by_window_w};
  const partial_fn partial = (partial_fn)L->kernel;
  partial<<<dim3(L->grid[0], L->grid[1], L->grid[2]), L->threads, L->smem_bytes, stream>>>(a);
  cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess || splits == 1) return e;
  const int count = L->n * L->k * L->p * L->q;
  const int blocks = (int)min64(conv_ceil_div(count, kMaxThreads), 1024);
  split_sum<<<blocks, kMaxThreads, 0, stream>>>(workspace, bias, y, splits, count, L->p * L->q,
                                                L->k, L->epilogue);
  return cudaGetLastError();
}
