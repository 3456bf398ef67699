/*
 * fft_tiles.cu -- see fft_tiles.h.  The tile kernels run one block per
 * plane (tile) and chunk of its rows, whose threads walk those rows and
 * columns, so the index decoding happens once per thread, not once per
 * element.  The kernels that touch the problem's tensors are instantiated
 * per element type T (elements.cuh), reading it as float and writing it
 * from float.
 */
#include "algorithms/common/elements.cuh"
#include "algorithms/common/epilogue.cuh"
#include "algorithms/common/fft_tiles.h"

namespace {

/* Blocks of 32 x 8 threads: a warp spans 32 columns of one row.  Block
 * (plane, chunk) covers 8 * rows_per_thread rows of a plane, so that a
 * thread copies about 32 values for one decoding of the plane's index. */
const dim3 kTileBlock(32, 8);

int rows_per_thread(int rows, int cols) {
  const int col_steps = (cols + 31) / 32, per_thread = 32 / col_steps;
  const int most = (rows + 7) / 8;
  return per_thread < 1 ? 1 : per_thread > most ? most : per_thread;
}

dim3 tile_grid(int64_t planes, int rows, int cols) {
  const int per_block = 8 * rows_per_thread(rows, cols);
  return dim3((unsigned)planes, (unsigned)((rows + per_block - 1) / per_block));
}

/* The rows [first, end) of the plane that this thread copies, every 8th. */
struct row_range {
  int first, end;
};
__device__ __forceinline__ row_range my_rows(int rows, int rpt) {
  const int start = blockIdx.y * 8 * rpt;
  return {start + (int)threadIdx.y, min(rows, start + 8 * rpt)};
}

/* The tile of plane channel * m + tile (m tiles a channel): its channel,
 * its image and its row and column among the image's tiles. */
struct tile_place {
  int channel, n, ty, tx;
};
__device__ __forceinline__ tile_place tile_of_plane(const conv_fft_tiles &T, int plane) {
  const int channel = plane / T.m, tile = plane - channel * T.m;
  const int per_image = T.tiles_h * T.tiles_w;
  const int n = tile / per_image, t = tile - n * per_image;
  const int ty = t / T.tiles_w, tx = t - ty * T.tiles_w;
  return {channel, n, ty, tx};
}

/* Where element (row, column) of channel `channel`'s plane of image n lies
 * in an n x channels x rows x cols tensor: NCHW, or with `nhwc` NHWC (a
 * row's elements `channels` apart). */
struct plane_at {
  int64_t base, row_step, col_step;
};
__device__ __forceinline__ plane_at plane_of(bool nhwc, int n, int channel, int channels,
                                             int rows, int cols) {
  if (nhwc)
    return {(int64_t)n * rows * cols * channels + channel, (int64_t)cols * channels, channels};
  return {((int64_t)n * channels + channel) * rows * cols, cols, 1};
}

template <typename E>
__global__ void cut_input(const conv_fft_tiles T, int rpt, const E *__restrict__ x,
                          float *__restrict__ tiles) {
  const int plane = blockIdx.x; /* ci*m + tile */
  const tile_place at = tile_of_plane(T, plane);
  const int iy0 = at.ty * T.th - T.pad_h, ix0 = at.tx * T.tw - T.pad_w;
  const plane_at in = plane_of(T.nhwc, at.n, at.channel, T.c, T.h, T.w);
  const E *src = x + in.base;
  float *dst = tiles + (int64_t)plane * T.fh * T.fw;
  const row_range rr = my_rows(T.fh, rpt);
  for (int i = rr.first; i < rr.end; i += 8) {
    const int iy = iy0 + i;
    const bool row_inside = (unsigned)iy < (unsigned)T.h;
    for (int j = threadIdx.x; j < T.fw; j += 32) {
      const int ix = ix0 + j;
      dst[i * T.fw + j] = row_inside && (unsigned)ix < (unsigned)T.w
                              ? conv_element_to_float(src[iy * in.row_step + ix * in.col_step])
                              : 0.0f;
    }
  }
}

/* TRANSPOSED (backward-data's view, T its tiles): the view's filter
 * [kk][cc] (kk = g*kg + o, cc < cg) is the problem's w[g*cg + cc][o]
 * mirrored, so tap (rr, ss) reads w[g*cg + cc][o][r-1-rr][s-1-ss]. */
template <bool TRANSPOSED, typename E>
__global__ void place_filters(const conv_fft_tiles T, int rpt, const E *__restrict__ w,
                              float *__restrict__ planes) {
  const int64_t plane = blockIdx.x; /* k*cg + ci of the convolution computed */
  int64_t filter = plane;           /* w's (filter, channel) plane to read */
  if (TRANSPOSED) {
    const int64_t kk = plane / T.cg, cc = plane - kk * T.cg;
    const int64_t g = kk / T.kg, o = kk - g * T.kg;
    filter = (g * T.cg + cc) * T.kg + o;
  }
  /* K C R S: the plane's taps in a row.  K R S C: its filter's taps
   * `channels` apart, from the plane's channel. */
  const int64_t channels = TRANSPOSED ? T.kg : T.cg; /* per filter of w */
  const int64_t taps = (int64_t)T.r * T.s;
  const E *src = T.nhwc ? w + (filter / channels) * taps * channels + filter % channels
                        : w + filter * taps;
  const int64_t tap_step = T.nhwc ? channels : 1;
  float *dst = planes + plane * T.fh * T.fw;
  const row_range rows = my_rows(T.fh, rpt);
  for (int i = rows.first; i < rows.end; i += 8) {
    const int rr = i == 0 ? 0 : T.fh - i;
    for (int j = threadIdx.x; j < T.fw; j += 32) {
      const int ss = j == 0 ? 0 : T.fw - j;
      const int tap = TRANSPOSED ? (T.r - 1 - rr) * T.s + (T.s - 1 - ss) : rr * T.s + ss;
      dst[i * T.fw + j] =
          rr < T.r && ss < T.s ? conv_element_to_float(src[tap * tap_step]) : 0.0f;
    }
  }
}

/* Plane = k*m + tile: one output tile of one output channel; the scale,
 * bias and ReLU in fp32, then one rounding to E. */
template <typename E>
__global__ void crop_output(const conv_fft_tiles T, int rpt, const float *__restrict__ tiles,
                            float scale, const float *__restrict__ bias, E *__restrict__ y) {
  const int plane = blockIdx.x;
  const tile_place at = tile_of_plane(T, plane);
  const int k = at.channel, p0 = at.ty * T.th, q0 = at.tx * T.tw;
  const int cols = min(T.tw, T.q - q0);
  const float b = conv_epilogue_bias(T.epilogue, bias, k);
  const float *src = tiles + (int64_t)plane * T.fh * T.fw;
  const plane_at out = plane_of(T.nhwc, at.n, k, T.k, T.p, T.q);
  E *dst = y + out.base + p0 * out.row_step + q0 * out.col_step;
  const row_range rows = my_rows(min(T.th, T.p - p0), rpt);
  for (int i = rows.first; i < rows.end; i += 8)
    for (int j = threadIdx.x; j < cols; j += 32)
      dst[i * out.row_step + j * out.col_step] = conv_element_from_float<E>(
          conv_epilogue_apply(T.epilogue, scale * src[i * T.fw + j], b));
}

/* Plane = k*m + tile: the output gradient of one output tile, at the
 * plane's origin, zeros past the tile and past the output. */
template <typename E>
__global__ void cut_grad(const conv_fft_tiles T, int rpt, const E *__restrict__ dy,
                         float *__restrict__ tiles) {
  const int plane = blockIdx.x;
  const tile_place at = tile_of_plane(T, plane);
  const int p0 = at.ty * T.th, q0 = at.tx * T.tw;
  const int rows = min(T.th, T.p - p0), cols = min(T.tw, T.q - q0);
  const E *src = dy + (((int64_t)at.n * T.k + at.channel) * T.p + p0) * T.q + q0;
  float *dst = tiles + (int64_t)plane * T.fh * T.fw;
  const row_range rr = my_rows(T.fh, rpt);
  for (int i = rr.first; i < rr.end; i += 8)
    for (int j = threadIdx.x; j < T.fw; j += 32)
      dst[i * T.fw + j] =
          i < rows && j < cols ? conv_element_to_float(src[(int64_t)i * T.q + j]) : 0.0f;
}

/* Plane = k*cg + ci: dw[k][ci][r][s] = scale * the plane's correlation at
 * lag (r, s), rounded once to E. */
template <typename E>
__global__ void crop_filter(const conv_fft_tiles T, int rpt, const float *__restrict__ planes,
                            float scale, E *__restrict__ dw) {
  const int64_t plane = blockIdx.x;
  const float *src = planes + plane * T.fh * T.fw;
  E *dst = dw + plane * T.r * T.s;
  const row_range rr = my_rows(T.r, rpt);
  for (int i = rr.first; i < rr.end; i += 8)
    for (int j = threadIdx.x; j < T.s; j += 32)
      dst[i * T.s + j] = conv_element_from_float<E>(scale * src[i * T.fw + j]);
}

/* Outputs a thread accumulates: MB tiles x KB output channels. */
const int kMB = 4, kKB = 4, kMultiplyThreads = 128;

__device__ __forceinline__ float2 cmad(float2 a, float2 b, float2 acc) {
  acc.x = fmaf(a.x, b.x, fmaf(-a.y, b.y, acc.x));
  acc.y = fmaf(a.x, b.y, fmaf(a.y, b.x, acc.y));
  return acc;
}

/* Thread: one frequency, kMB tiles from blockIdx.y*kMB, kKB output channels
 * from blockIdx.z*kKB.  Consecutive threads take consecutive frequencies,
 * so every load and store is coalesced.  GROUPED: the output channels'
 * groups may differ (kg below kKB, depthwise), so each reads its own input
 * channels. */
template <bool GROUPED>
__global__ void __launch_bounds__(kMultiplyThreads)
    multiply(const conv_fft_tiles T, const float2 *__restrict__ x, const float2 *__restrict__ w,
             float2 *__restrict__ y) {
  const int f = blockIdx.x * blockDim.x + threadIdx.x;
  if (f >= T.freqs) return;
  const int m0 = blockIdx.y * kMB, k0 = blockIdx.z * kKB;
  const int64_t F = T.freqs;
  float2 acc[kMB][kKB];
#pragma unroll
  for (int a = 0; a < kMB; a++)
#pragma unroll
    for (int b = 0; b < kKB; b++) acc[a][b] = make_float2(0.0f, 0.0f);
  for (int ci = 0; ci < T.cg; ci++) {
    float2 wv[kKB];
#pragma unroll
    for (int b = 0; b < kKB; b++)
      wv[b] = k0 + b < T.k ? __ldg(w + ((int64_t)(k0 + b) * T.cg + ci) * F + f) : make_float2(0, 0);
    if (GROUPED) {
#pragma unroll
      for (int b = 0; b < kKB; b++) {
        const int64_t xc = (int64_t)min(k0 + b, T.k - 1) / T.kg * T.cg + ci;
#pragma unroll
        for (int a = 0; a < kMB; a++)
          if (m0 + a < T.m)
            acc[a][b] = cmad(__ldg(x + (xc * T.m + m0 + a) * F + f), wv[b], acc[a][b]);
      }
    } else {
      float2 xv[kMB];
#pragma unroll
      for (int a = 0; a < kMB; a++)
        xv[a] = m0 + a < T.m ? __ldg(x + ((int64_t)ci * T.m + m0 + a) * F + f) : make_float2(0, 0);
#pragma unroll
      for (int a = 0; a < kMB; a++)
#pragma unroll
        for (int b = 0; b < kKB; b++) acc[a][b] = cmad(xv[a], wv[b], acc[a][b]);
    }
  }
#pragma unroll
  for (int a = 0; a < kMB; a++)
#pragma unroll
    for (int b = 0; b < kKB; b++)
      if (m0 + a < T.m && k0 + b < T.k) y[((int64_t)(k0 + b) * T.m + m0 + a) * F + f] = acc[a][b];
}

/* Filter planes a thread of `correlate` accumulates: KB output x CB
 * input channels. */
const int kCB = 4, kCorrelateThreads = 128;

/* acc + conj(a) * b */
__device__ __forceinline__ float2 conj_mad(float2 a, float2 b, float2 acc) {
  acc.x = fmaf(a.x, b.x, fmaf(a.y, b.y, acc.x));
  acc.y = fmaf(a.x, b.y, fmaf(-a.y, b.x, acc.y));
  return acc;
}

/* Thread: one frequency, kKB output channels from blockIdx.y*kKB and kCB
 * of their group's input channels from blockIdx.z*kCB, summing over the
 * tiles in order (so the result does not depend on scheduling).
 * Consecutive threads take consecutive frequencies: every load and store
 * is coalesced.  GROUPED: the output channels' groups may differ (kg below
 * kKB, depthwise), so each reads its own input channels. */
template <bool GROUPED>
__global__ void __launch_bounds__(kCorrelateThreads)
    correlate(const conv_fft_tiles T, const float2 *__restrict__ dy, const float2 *__restrict__ x,
              float2 *__restrict__ dw) {
  const int f = blockIdx.x * blockDim.x + threadIdx.x;
  if (f >= T.freqs) return;
  const int k0 = blockIdx.y * kKB, c0 = blockIdx.z * kCB;
  const int64_t F = T.freqs;
  /* Input channel of (output channel k0 + a, c0 + b): x_base[a] + b. */
  int x_base[kKB];
#pragma unroll
  for (int a = 0; a < kKB; a++) x_base[a] = (GROUPED ? (k0 + a) / T.kg * T.cg : 0) + c0;
  float2 acc[kKB][kCB];
#pragma unroll
  for (int a = 0; a < kKB; a++)
#pragma unroll
    for (int b = 0; b < kCB; b++) acc[a][b] = make_float2(0.0f, 0.0f);
  for (int tile = 0; tile < T.m; tile++) {
    float2 dv[kKB];
#pragma unroll
    for (int a = 0; a < kKB; a++)
      dv[a] = k0 + a < T.k ? __ldg(dy + ((int64_t)(k0 + a) * T.m + tile) * F + f)
                           : make_float2(0, 0);
    if (GROUPED) {
#pragma unroll
      for (int a = 0; a < kKB; a++)
#pragma unroll
        for (int b = 0; b < kCB; b++)
          if (k0 + a < T.k && c0 + b < T.cg)
            acc[a][b] = conj_mad(dv[a], __ldg(x + ((int64_t)(x_base[a] + b) * T.m + tile) * F + f),
                                 acc[a][b]);
    } else {
      float2 xv[kCB];
#pragma unroll
      for (int b = 0; b < kCB; b++)
        xv[b] = c0 + b < T.c ? __ldg(x + ((int64_t)(c0 + b) * T.m + tile) * F + f)
                             : make_float2(0, 0);
#pragma unroll
      for (int a = 0; a < kKB; a++)
#pragma unroll
        for (int b = 0; b < kCB; b++) acc[a][b] = conj_mad(dv[a], xv[b], acc[a][b]);
    }
  }
#pragma unroll
  for (int a = 0; a < kKB; a++)
#pragma unroll
    for (int b = 0; b < kCB; b++)
      if (k0 + a < T.k && c0 + b < T.cg)
        dw[((int64_t)(k0 + a) * T.cg + c0 + b) * F + f] = acc[a][b];
}

/* 32 x 32 tiles through shared memory; blocks of 32 x 8 threads. */
__global__ void transpose(const float2 *__restrict__ in, int64_t rows, int64_t cols,
                          float2 *__restrict__ out) {
  __shared__ float2 tile[32][33];
  const int64_t r0 = (int64_t)blockIdx.y * 32, c0 = (int64_t)blockIdx.x * 32;
  for (int i = threadIdx.y; i < 32; i += 8)
    if (r0 + i < rows && c0 + threadIdx.x < cols)
      tile[i][threadIdx.x] = in[(r0 + i) * cols + c0 + threadIdx.x];
  __syncthreads();
  for (int i = threadIdx.y; i < 32; i += 8)
    if (c0 + i < cols && r0 + threadIdx.x < rows)
      out[(c0 + i) * rows + r0 + threadIdx.x] = tile[threadIdx.x][i];
}

/* A tile kernel's launch over `planes` planes of rows x cols values:
 * tile_grid's blocks of kTileBlock, rows_per_thread's rows a thread. */
template <typename... Params, typename... Args>
cudaError_t launch_tiles(void (*kernel)(const conv_fft_tiles, int, Params...),
                         const conv_fft_tiles *t, int64_t planes, int rows, int cols,
                         cudaStream_t stream, Args... args) {
  kernel<<<tile_grid(planes, rows, cols), kTileBlock, 0, stream>>>(
      *t, rows_per_thread(rows, cols), args...);
  return cudaGetLastError();
}

/* A frequency kernel's launch (multiply, correlate): `threads` threads a
 * block along the frequencies, y_blocks x z_blocks blocks of channels or
 * tiles. */
template <typename... Params, typename... Args>
cudaError_t launch_frequencies(void (*kernel)(const conv_fft_tiles, Params...),
                               const conv_fft_tiles *t, int threads, int y_blocks, int z_blocks,
                               cudaStream_t stream, Args... args) {
  const dim3 grid((unsigned)((t->freqs + threads - 1) / threads), (unsigned)y_blocks,
                  (unsigned)z_blocks);
  if (grid.y > 65535 || grid.z > 65535) return cudaErrorInvalidConfiguration;
  kernel<<<grid, threads, 0, stream>>>(*t, args...);
  return cudaGetLastError();
}

}  // namespace

extern "C" cudaError_t conv_fft_cut_input(const conv_fft_tiles *t, const void *x, float *tiles,
                                          cudaStream_t stream) {
  return conv_with_element_type((conv_dtype)t->dtype, [&](auto tag) {
    using E = typename decltype(tag)::type;
    return launch_tiles(cut_input<E>, t, (int64_t)t->c * t->m, t->fh, t->fw, stream,
                        (const E *)x, tiles);
  });
}

extern "C" cudaError_t conv_fft_place_filters(const conv_fft_tiles *t, const void *w,
                                              bool transposed, float *planes,
                                              cudaStream_t stream) {
  return conv_with_element_type((conv_dtype)t->dtype, [&](auto tag) {
    using E = typename decltype(tag)::type;
    return launch_tiles(transposed ? place_filters<true, E> : place_filters<false, E>, t,
                        (int64_t)t->k * t->cg, t->fh, t->fw, stream, (const E *)w, planes);
  });
}

extern "C" cudaError_t conv_fft_multiply(const conv_fft_tiles *t, const float2 *x, const float2 *w,
                                         float2 *y, cudaStream_t stream) {
  return launch_frequencies(t->groups > 1 ? multiply<true> : multiply<false>, t, kMultiplyThreads,
                            (t->m + kMB - 1) / kMB, (t->k + kKB - 1) / kKB, stream, x, w, y);
}

extern "C" cudaError_t conv_fft_transpose(const float2 *in, int64_t rows, int64_t cols,
                                          float2 *out, cudaStream_t stream) {
  const dim3 grid((unsigned)((cols + 31) / 32), (unsigned)((rows + 31) / 32));
  if (grid.y > 65535) return cudaErrorInvalidConfiguration;
  transpose<<<grid, dim3(32, 8), 0, stream>>>(in, rows, cols, out);
  return cudaGetLastError();
}

extern "C" cudaError_t conv_fft_crop_output(const conv_fft_tiles *t, const float *tiles,
                                            float scale, const float *bias, void *y,
                                            cudaStream_t stream) {
  return conv_with_element_type((conv_dtype)t->dtype, [&](auto tag) {
    using E = typename decltype(tag)::type;
    return launch_tiles(crop_output<E>, t, (int64_t)t->k * t->m, t->th, t->tw, stream, tiles,
                        scale, bias, (E *)y);
  });
}

extern "C" cudaError_t conv_fft_cut_grad(const conv_fft_tiles *t, const void *dy, float *tiles,
                                         cudaStream_t stream) {
  return conv_with_element_type((conv_dtype)t->dtype, [&](auto tag) {
    using E = typename decltype(tag)::type;
    return launch_tiles(cut_grad<E>, t, (int64_t)t->k * t->m, t->fh, t->fw, stream,
                        (const E *)dy, tiles);
  });
}

extern "C" cudaError_t conv_fft_correlate(const conv_fft_tiles *t, const float2 *dy,
                                          const float2 *x, float2 *dw, cudaStream_t stream) {
  return launch_frequencies(t->groups > 1 ? correlate<true> : correlate<false>, t,
                            kCorrelateThreads, (t->k + kKB - 1) / kKB, (t->cg + kCB - 1) / kCB,
                            stream, dy, x, dw);
}

extern "C" cudaError_t conv_fft_crop_filter(const conv_fft_tiles *t, const float *planes,
                                            float scale, void *dw, cudaStream_t stream) {
  return conv_with_element_type((conv_dtype)t->dtype, [&](auto tag) {
    using E = typename decltype(tag)::type;
    return launch_tiles(crop_filter<E>, t, (int64_t)t->k * t->cg, t->r, t->s, stream, planes,
                        scale, (E *)dw);
  });
}
