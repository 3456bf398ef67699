/*
 * dynamic_direct.cu -- see dynamic_direct.h.
 */
#include "algorithms/dynamic_direct.h"
#include "algorithms/common/launch_checks.h"
#include "algorithms/common/launch_plan.cuh"
#include "algorithms/common/staging.cuh"
#include "algorithms/common/tap_source.cuh"

#include <stdio.h>

namespace {

const int kMaxThreads = 256;
const size_t kMaxShared = 48 * 1024; /* without opting in to more */

/* A block's place: its image, group, channel chunk and tile. */
struct block_place {
  int b, g, c0, c1; /* channels [c0, c1) */
  int x0, y0;       /* the tile's first column and row (of the pass's pixels) */
};

__device__ __forceinline__ block_place place_of_block(const conv_dyn_direct_launch &L) {
  unsigned i = blockIdx.x;
  block_place at;
  const int tx = (int)(i % (unsigned)L.tiles_x);
  i /= (unsigned)L.tiles_x;
  const int ty = (int)(i % (unsigned)L.tiles_y);
  i /= (unsigned)L.tiles_y;
  const int chunk = (int)(i % (unsigned)L.chunks);
  i /= (unsigned)L.chunks;
  at.g = (int)(i % (unsigned)L.d.groups);
  at.b = (int)(i / (unsigned)L.d.groups);
  at.c0 = at.g * L.d.cg + chunk * L.tiling.cb;
  at.c1 = min(at.c0 + L.tiling.cb, (at.g + 1) * L.d.cg);
  at.x0 = tx * L.tiling.tw * L.tiling.px;
  at.y0 = ty * L.tiling.th;
  return at;
}

/* Channels staged a step: independent sums for the FMA pipes, and half
 * the barriers. */
const int kStepChannels = 2;

/* Where a block's tiles come from: planes of `height` x `width` floats
 * (x, or dy for backward-data), channel c's at src + (b*C + c) * plane, and
 * the tile's first row and column in them (negative in the padding). */
struct tile_source {
  const float *src;
  int height, width, top, left;
};

/* Starts copying one plane's in_h x in_w tile into `tile` (cp.async's zero
 * fill outside the plane), rows by threadIdx.y and columns by threadIdx.x:
 * no division per element. */
__device__ __forceinline__ void stage_tile_async(const conv_dyn_direct_launch &L,
                                                 const tile_source &from, const float *plane,
                                                 float *tile) {
  for (int r = threadIdx.y; r < L.in_h; r += blockDim.y) {
    const int ih = from.top + r;
    const bool row_inside = ih >= 0 && ih < from.height;
    for (int col = threadIdx.x; col < L.in_w; col += blockDim.x) {
      const int iw = from.left + col;
      const bool inside = row_inside && iw >= 0 && iw < from.width;
      /* A zero-byte copy still names a valid address. */
      cp_async4(tile + r * L.in_w + col, inside ? plane + ih * from.width + iw : plane,
                inside ? 4 : 0);
    }
  }
}

/* The block's channels [c0, c1) in steps of kStepChannels, each step's
 * tiles double-buffered: step s + 1 is copied while step s is summed.
 * `use(tiles, tile_floats, c, count)` reads the staged tiles of channels
 * c .. c+count-1 (tiles + i * tile_floats); the caller's shared memory
 * holds 2 * kStepChannels tiles. */
template <typename Use>
__device__ __forceinline__ void for_channel_steps(const conv_dyn_direct_launch &L,
                                                  const tile_source &from, const block_place &at,
                                                  float *smem, Use use) {
  const int tile_floats = L.in_h * L.in_w;
  const int steps = (at.c1 - at.c0 + kStepChannels - 1) / kStepChannels;
  const size_t plane = (size_t)from.height * from.width;
  auto issue = [&](int step) {
    float *buffer = smem + (step & 1) * kStepChannels * tile_floats;
    for (int i = 0; i < kStepChannels; i++) {
      const int c = at.c0 + step * kStepChannels + i;
      if (c < at.c1)
        stage_tile_async(L, from, from.src + ((size_t)at.b * L.d.c + c) * plane,
                         buffer + i * tile_floats);
    }
    cp_async_commit();
  };
  issue(0);
  for (int step = 0; step < steps; step++) {
    if (step + 1 < steps) {
      issue(step + 1);
      cp_async_wait<1>();
    } else {
      cp_async_wait<0>();
    }
    __syncthreads();
    const int c = at.c0 + step * kStepChannels;
    use(smem + (step & 1) * kStepChannels * tile_floats, tile_floats, c,
        min(kStepChannels, at.c1 - c));
    __syncthreads(); /* the buffer is restaged two steps on */
  }
}

/* Forward and backward-filter read x around their output tile. */
template <int S>
__device__ __forceinline__ tile_source input_tiles(const conv_dyn_direct_launch &L,
                                                   const float *x, const block_place &at) {
  return {x, L.d.h, L.d.w, at.y0 * S - L.d.pad, at.x0 * S - L.d.pad};
}

/* The window's row offsets in a staged tile for this thread's (first)
 * pixel; PX pixels a thread, side by side. */
template <int K, int S, int PX = 1>
__device__ __forceinline__ void window_rows(const conv_dyn_direct_launch &L, int dil, int rows[K]) {
#pragma unroll
  for (int i = 0; i < K; i++) rows[i] = (threadIdx.y * S + i * dil) * L.in_w + threadIdx.x * PX * S;
}

/* One row of the window of a thread's PX = 2 pixels side by side: the
 * tile's floats at row + [0, 2 * PAIRS), read as float2s (rows and tiles
 * start at even offsets: in_w is even), which both pixels' taps share. */
template <int K, int S, int D>
struct pixel_pair {
  static constexpr int PAIRS = (S + (K - 1) * D) / 2 + 1;
  __device__ __forceinline__ static void sum_row(const float *row, const float *f0, const float *f1,
                                                 float &acc0, float &acc1) {
    float v[2 * PAIRS];
#pragma unroll
    for (int i = 0; i < PAIRS; i++) {
      const float2 two = reinterpret_cast<const float2 *>(row)[i];
      v[2 * i] = two.x, v[2 * i + 1] = two.y;
    }
#pragma unroll
    for (int j = 0; j < K; j++) {
      acc0 = fmaf(f0[j], v[j * D], acc0);
      acc1 = fmaf(f1[j], v[S + j * D], acc1);
    }
  }
};

/* FORWARD: the thread's filters (of PX pixels side by side) in registers,
 * applied to every channel of the chunk against the staged tiles.  D: the
 * dilation when it is 1 or 2 (the taps' offsets are then constants), else
 * 0 (PX = 1 only). */
template <int K, int S, int D, int PX>
__global__ void __launch_bounds__(kMaxThreads)
    forward_kernel(const conv_dyn_direct_launch L, const float *__restrict__ x,
                   const float *__restrict__ wt, float *__restrict__ y) {
  static_assert(PX == 1 || (PX == 2 && D > 0), "pixel pairs need a constant dilation");
  extern __shared__ float smem[];
  const block_place at = place_of_block(L);
  const int q0 = at.x0 + threadIdx.x * PX, p = at.y0 + threadIdx.y;
  const int plane = L.d.p * L.d.q;
  bool inside[PX];
  float f[PX][K * K];
  const float *wp = wt + ((size_t)at.b * L.d.groups + at.g) * (K * K) * plane + p * L.d.q + q0;
#pragma unroll
  for (int u = 0; u < PX; u++) {
    inside[u] = p < L.d.p && q0 + u < L.d.q;
#pragma unroll
    for (int t = 0; t < K * K; t++) f[u][t] = inside[u] ? __ldg(wp + (size_t)t * plane + u) : 0.0f;
  }
  const int dil = D > 0 ? D : L.d.dil;
  int rows[K];
  window_rows<K, S, PX>(L, dil, rows);
  for_channel_steps(L, input_tiles<S>(L, x, at), at, smem,
                    [&](const float *tiles, int tile_floats, int c, int count) {
    if (!inside[0]) return;
    float acc[kStepChannels][PX];
#pragma unroll
    for (int n = 0; n < kStepChannels; n++)
#pragma unroll
      for (int u = 0; u < PX; u++) acc[n][u] = 0.0f;
#pragma unroll
    for (int i = 0; i < K; i++)
#pragma unroll
      for (int n = 0; n < kStepChannels; n++) {
        const float *row = tiles + n * tile_floats + rows[i];
        if constexpr (PX == 2) {
          pixel_pair<K, S, D>::sum_row(row, f[0] + i * K, f[1] + i * K, acc[n][0], acc[n][1]);
        } else {
#pragma unroll
          for (int j = 0; j < K; j++) acc[n][0] = fmaf(f[0][i * K + j], row[j * dil], acc[n][0]);
        }
      }
#pragma unroll
    for (int n = 0; n < kStepChannels; n++) {
      if (n >= count) break;
      float *out = y + ((size_t)at.b * L.d.c + c + n) * plane + p * L.d.q + q0;
#pragma unroll
      for (int u = 0; u < PX; u++)
        if (inside[u]) out[u] = acc[n][u];
    }
  });
}

/* BACKWARD_DATA: one dx pixel a thread; its taps' sources and weights are
 * found once and serve every channel of the chunk. */
template <int K, int S>
__global__ void __launch_bounds__(kMaxThreads)
    backward_data_kernel(const conv_dyn_direct_launch L, const float *__restrict__ dy,
                         const float *__restrict__ wt, float *__restrict__ dx) {
  const block_place at = place_of_block(L);
  const int iw = at.x0 + threadIdx.x, ih = at.y0 + threadIdx.y;
  if (ih >= L.d.h || iw >= L.d.w) return; /* no barrier below */
  const int plane = L.d.p * L.d.q;
  int rows[K], cols[K];
#pragma unroll
  for (int i = 0; i < K; i++) rows[i] = conv_tap_source<S>(ih, L.d.pad, i, L.d.dil, S, L.d.p);
#pragma unroll
  for (int j = 0; j < K; j++) cols[j] = conv_tap_source<S>(iw, L.d.pad, j, L.d.dil, S, L.d.q);
  float wv[K * K];
  const float *wg = wt + (at.b * L.d.groups + at.g) * (K * K) * plane;
#pragma unroll
  for (int i = 0; i < K; i++)
#pragma unroll
    for (int j = 0; j < K; j++)
      wv[i * K + j] = rows[i] >= 0 && cols[j] >= 0
                          ? __ldg(wg + (i * K + j) * plane + rows[i] * L.d.q + cols[j])
                          : 0.0f;
  for (int c = at.c0; c < at.c1; c++) {
    const float *dyc = dy + (at.b * L.d.c + c) * plane;
    float acc = 0.0f;
#pragma unroll
    for (int i = 0; i < K; i++) {
      if (rows[i] < 0) continue;
#pragma unroll
      for (int j = 0; j < K; j++)
        /* Skipped, not multiplied by 0: dy may hold an Inf elsewhere. */
        if (cols[j] >= 0) acc = fmaf(wv[i * K + j], __ldg(dyc + rows[i] * L.d.q + cols[j]), acc);
    }
    dx[(at.b * L.d.c + c) * L.d.h * L.d.w + ih * L.d.w + iw] = acc;
  }
}

/* BACKWARD_DATA with stride 1: dx[ih][iw] gathers dy at (ih + pad - i*dil,
 * iw + pad - j*dil) for every tap, so the dy tiles around the block's dx
 * tile are staged as forward stages x (zeros outside dy, where the weights
 * are 0 too), and each thread's weights serve every channel. */
template <int K, int D>
__global__ void __launch_bounds__(kMaxThreads)
    backward_data_staged_kernel(const conv_dyn_direct_launch L, const float *__restrict__ dy,
                                const float *__restrict__ wt, float *__restrict__ dx) {
  extern __shared__ float smem[];
  const block_place at = place_of_block(L);
  const int iw = at.x0 + threadIdx.x, ih = at.y0 + threadIdx.y;
  const bool inside = ih < L.d.h && iw < L.d.w;
  const int plane = L.d.p * L.d.q, dil = D > 0 ? D : L.d.dil;
  float wv[K * K];
  const float *wg = wt + ((size_t)at.b * L.d.groups + at.g) * (K * K) * plane;
#pragma unroll
  for (int i = 0; i < K; i++)
#pragma unroll
    for (int j = 0; j < K; j++) {
      const int o_row = ih + L.d.pad - i * dil, o_col = iw + L.d.pad - j * dil;
      const bool source = inside && o_row >= 0 && o_row < L.d.p && o_col >= 0 && o_col < L.d.q;
      wv[i * K + j] =
          source ? __ldg(wg + (size_t)(i * K + j) * plane + o_row * L.d.q + o_col) : 0.0f;
    }
  int rows[K];
#pragma unroll
  for (int i = 0; i < K; i++) rows[i] = (threadIdx.y + (K - 1 - i) * dil) * L.in_w + threadIdx.x;
  const int reach = (K - 1) * dil - L.d.pad; /* the tile starts this far above and left */
  const tile_source from = {dy, L.d.p, L.d.q, at.y0 - reach, at.x0 - reach};
  for_channel_steps(L, from, at, smem, [&](const float *tiles, int tile_floats, int c, int count) {
    if (!inside) return;
    float acc[kStepChannels];
#pragma unroll
    for (int n = 0; n < kStepChannels; n++) acc[n] = 0.0f;
#pragma unroll
    for (int i = 0; i < K; i++)
#pragma unroll
      for (int n = 0; n < kStepChannels; n++) {
        const float *row = tiles + n * tile_floats + rows[i];
#pragma unroll
        for (int j = 0; j < K; j++) acc[n] = fmaf(wv[i * K + j], row[(K - 1 - j) * dil], acc[n]);
      }
#pragma unroll
    for (int n = 0; n < kStepChannels; n++) {
      if (n >= count) break;
      dx[((size_t)at.b * L.d.c + c + n) * L.d.h * L.d.w + ih * L.d.w + iw] = acc[n];
    }
  });
}

/* BACKWARD_FILTER: the k*k gradients of one output pixel in registers,
 * summed over the group's channels in order; the input tiles staged as in
 * forward. */
template <int K, int S, int D>
__global__ void __launch_bounds__(kMaxThreads)
    backward_filter_kernel(const conv_dyn_direct_launch L, const float *__restrict__ x,
                           const float *__restrict__ dy, float *__restrict__ dwt) {
  extern __shared__ float smem[];
  const block_place at = place_of_block(L);
  const int q = at.x0 + threadIdx.x, p = at.y0 + threadIdx.y;
  const bool inside = p < L.d.p && q < L.d.q;
  const int plane = L.d.p * L.d.q, pixel = p * L.d.q + q;
  float acc[K * K];
#pragma unroll
  for (int t = 0; t < K * K; t++) acc[t] = 0.0f;
  const int dil = D > 0 ? D : L.d.dil;
  int rows[K];
  window_rows<K, S>(L, dil, rows);
  for_channel_steps(L, input_tiles<S>(L, x, at), at, smem,
                    [&](const float *tiles, int tile_floats, int c, int count) {
    if (!inside) return;
    /* Channel by channel, in order: the sum's order is fixed. */
#pragma unroll
    for (int n = 0; n < kStepChannels; n++) {
      if (n >= count) break;
      const float g = __ldg(dy + ((size_t)at.b * L.d.c + c + n) * plane + pixel);
#pragma unroll
      for (int i = 0; i < K; i++)
#pragma unroll
        for (int j = 0; j < K; j++)
          acc[i * K + j] = fmaf(g, tiles[n * tile_floats + rows[i] + j * dil], acc[i * K + j]);
    }
  });
  if (!inside) return;
  float *out = dwt + ((size_t)at.b * L.d.groups + at.g) * (K * K) * plane + pixel;
#pragma unroll
  for (int t = 0; t < K * K; t++) out[(size_t)t * plane] = acc[t];
}

/* FORWARD, RESIDENT form (conv_dyn_direct_form): the chunk's channels
 * (at most CB) staged at once, then the window a row of taps at a time:
 * the row's filters of PX pixels in registers, the next row's loading
 * while this one is applied to every channel. */
template <int K, int S, int D, int PX, int CB>
__global__ void __launch_bounds__(kMaxThreads)
    forward_resident_kernel(const conv_dyn_direct_launch L, const float *__restrict__ x,
                            const float *__restrict__ wt, float *__restrict__ y) {
  static_assert(D > 0, "constant tap offsets");
  extern __shared__ float smem[];
  const block_place at = place_of_block(L);
  const int count = at.c1 - at.c0; /* <= CB: the plan checks cb */
  const int tile_floats = L.in_h * L.in_w;
  const tile_source from = input_tiles<S>(L, x, at);
  const size_t in_plane = (size_t)L.d.h * L.d.w;
  for (int n = 0; n < count; n++)
    stage_tile_async(L, from, x + ((size_t)at.b * L.d.c + at.c0 + n) * in_plane,
                     smem + n * tile_floats);
  cp_async_commit();

  const int q0 = at.x0 + threadIdx.x * PX, p = at.y0 + threadIdx.y;
  const int plane = L.d.p * L.d.q;
  bool inside[PX];
#pragma unroll
  for (int u = 0; u < PX; u++) inside[u] = p < L.d.p && q0 + u < L.d.q;
  const float *wp = wt + ((size_t)at.b * L.d.groups + at.g) * (K * K) * plane + p * L.d.q + q0;
  float f[2][PX][K]; /* this row's filters and the next's */
  auto load_row = [&](int i, float (&row)[PX][K]) {
#pragma unroll
    for (int u = 0; u < PX; u++)
#pragma unroll
      for (int j = 0; j < K; j++)
        row[u][j] = inside[u] ? __ldg(wp + (size_t)(i * K + j) * plane + u) : 0.0f;
  };
  load_row(0, f[0]);
  int rows[K];
  window_rows<K, S, PX>(L, D, rows);
  float acc[CB][PX];
#pragma unroll
  for (int n = 0; n < CB; n++)
#pragma unroll
    for (int u = 0; u < PX; u++) acc[n][u] = 0.0f;
  cp_async_wait<0>();
  __syncthreads();
#pragma unroll
  for (int i = 0; i < K; i++) {
    if (i + 1 < K) load_row(i + 1, f[(i + 1) & 1]);
    const float(&now)[PX][K] = f[i & 1];
#pragma unroll
    for (int n = 0; n < CB; n++) {
      if (n >= count) break;
      const float *row = smem + n * tile_floats + rows[i];
      if constexpr (PX == 2) {
        pixel_pair<K, S, D>::sum_row(row, now[0], now[1], acc[n][0], acc[n][1]);
      } else {
#pragma unroll
        for (int j = 0; j < K; j++) acc[n][0] = fmaf(now[0][j], row[j * D], acc[n][0]);
      }
    }
  }
#pragma unroll
  for (int n = 0; n < CB; n++) {
    if (n >= count) break;
    float *out = y + ((size_t)at.b * L.d.c + at.c0 + n) * plane + p * L.d.q + q0;
#pragma unroll
    for (int u = 0; u < PX; u++)
      if (inside[u]) out[u] = acc[n][u];
  }
}

typedef void (*forward_fn)(const conv_dyn_direct_launch, const float *, const float *, float *);

/* The RESIDENT kernel for the launch's window, stride, dilation, pixels
 * and chunk; NULL where none is compiled (the plan refuses those). */
template <int K, int S, int D>
forward_fn resident_kernel_pd(const conv_dyn_direct_launch &L) {
  const bool few = L.tiling.cb <= 4;
  if (L.tiling.px == 2)
    return few ? forward_resident_kernel<K, S, D, 2, 4> : forward_resident_kernel<K, S, D, 2, 16>;
  return few ? forward_resident_kernel<K, S, D, 1, 4> : forward_resident_kernel<K, S, D, 1, 16>;
}

template <int K>
forward_fn resident_kernel_k(const conv_dyn_direct_launch &L) {
  const bool two = L.d.dil == 2;
  if (L.d.stride == 1) return two ? resident_kernel_pd<K, 1, 2>(L) : resident_kernel_pd<K, 1, 1>(L);
  return two ? resident_kernel_pd<K, 2, 2>(L) : resident_kernel_pd<K, 2, 1>(L);
}

forward_fn resident_kernel(const conv_dyn_direct_launch &L) {
  switch (L.d.k) {
    case 3: return resident_kernel_k<3>(L);
    case 5: return resident_kernel_k<5>(L);
    case 7: return resident_kernel_k<7>(L);
  }
  return NULL;
}

template <int K, int S, int D>
cudaError_t launch(const conv_dyn_direct_launch &L, float *x, float *wt, float *y,
                   cudaStream_t stream) {
  const dim3 block((unsigned)L.tiling.tw, (unsigned)L.tiling.th);
  switch (L.direction) {
    case CONV_FORWARD:
      if (L.tiling.form == CONV_DYN_DIRECT_RESIDENT) {
        const forward_fn kernel = resident_kernel(L);
        if (kernel == NULL) return cudaErrorInvalidValue;
        kernel<<<L.blocks, block, L.smem_bytes, stream>>>(L, x, wt, y);
        break;
      }
      if constexpr (D > 0) {
        if (L.tiling.px == 2) {
          forward_kernel<K, S, D, 2><<<L.blocks, block, L.smem_bytes, stream>>>(L, x, wt, y);
          break;
        }
      }
      forward_kernel<K, S, D, 1><<<L.blocks, block, L.smem_bytes, stream>>>(L, x, wt, y);
      break;
    case CONV_BACKWARD_DATA:
      if (S == 1)
        backward_data_staged_kernel<K, D><<<L.blocks, block, L.smem_bytes, stream>>>(L, y, wt, x);
      else
        backward_data_kernel<K, S><<<L.blocks, block, 0, stream>>>(L, y, wt, x);
      break;
    case CONV_BACKWARD_FILTER:
      backward_filter_kernel<K, S, D><<<L.blocks, block, L.smem_bytes, stream>>>(L, x, y, wt);
      break;
    default:
      return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

template <int K, int S>
cudaError_t launch_s(const conv_dyn_direct_launch &L, float *x, float *wt, float *y,
                     cudaStream_t stream) {
  switch (L.d.dil) {
    case 1: return launch<K, S, 1>(L, x, wt, y, stream);
    case 2: return launch<K, S, 2>(L, x, wt, y, stream);
    default: return launch<K, S, 0>(L, x, wt, y, stream);
  }
}

template <int K>
cudaError_t launch_k(const conv_dyn_direct_launch &L, float *x, float *wt, float *y,
                     cudaStream_t stream) {
  return L.d.stride == 1 ? launch_s<K, 1>(L, x, wt, y, stream)
                         : launch_s<K, 2>(L, x, wt, y, stream);
}

}  // namespace

extern "C" bool conv_dyn_direct_compiled(int64_t k) { return k == 1 || k == 3 || k == 5 || k == 7; }

extern "C" bool conv_dyn_direct_plan(const conv_problem *pb, const conv_dyn_direct_tiling *t,
                                     conv_dyn_direct_launch *L, char *why, size_t why_size) {
  conv_dyn_direct_launch l = {};
  if (pb == NULL || t == NULL || L == NULL) CONV_REJECT("NULL argument");
  if (!conv_dynamic_dims_make(pb, &l.d)) CONV_REJECT("not a valid dynamic problem");
  if (!conv_dyn_direct_compiled(l.d.k)) CONV_REJECT("no kernel for a %dx%d window", l.d.k, l.d.k);
  if (l.d.stride != 1 && l.d.stride != 2) CONV_REJECT("stride %d is not 1 or 2", l.d.stride);
  if (t->tw < 8 || t->tw % 8 != 0 || t->th < 1 || t->tw * t->th > kMaxThreads)
    CONV_REJECT("tile %dx%d: tw a multiple of 8, at most %d threads", t->tw, t->th, kMaxThreads);
  if (t->cb < 1 || t->cb > l.d.cg) CONV_REJECT("cb = %d is not in [1, %d]", t->cb, l.d.cg);
  l.direction = pb->direction;
  if (t->px != 1 && t->px != 2) CONV_REJECT("px = %d is not 1 or 2", t->px);
  if (t->px == 2 && (l.direction != CONV_FORWARD || (l.d.dil != 1 && l.d.dil != 2)))
    CONV_REJECT("two pixels a thread: forward only, dilation 1 or 2");
  if (l.direction == CONV_BACKWARD_FILTER && t->cb != l.d.cg)
    CONV_REJECT("backward-filter sums the whole group: cb must be %d", l.d.cg);
  const bool resident = t->form == CONV_DYN_DIRECT_RESIDENT;
  if (!resident && t->form != CONV_DYN_DIRECT_STEPS) CONV_REJECT("form %d is unknown", t->form);
  if (resident && (l.direction != CONV_FORWARD || l.d.k == 1 || (l.d.dil != 1 && l.d.dil != 2)))
    CONV_REJECT("the resident form: forward only, k of 3, 5 or 7, dilation 1 or 2");
  if (resident && t->cb > CONV_DYN_DIRECT_RESIDENT_MAX)
    CONV_REJECT("the resident form stages at most %d channels, not cb = %d",
                CONV_DYN_DIRECT_RESIDENT_MAX, t->cb);
  l.tiling = *t;
  const bool data = l.direction == CONV_BACKWARD_DATA;
  const int tile_w = t->tw * t->px; /* pixels */
  l.tiles_x = conv_ceil_div(data ? l.d.w : l.d.q, tile_w);
  l.tiles_y = conv_ceil_div(data ? l.d.h : l.d.p, t->th);
  l.chunks = conv_ceil_div(l.d.cg, t->cb);
  const int64_t blocks =
      (int64_t)l.tiles_x * l.tiles_y * l.chunks * l.d.groups * (int64_t)l.d.b;
  if (!conv_fits_int(blocks)) CONV_REJECT("%lld blocks: past 2^31 - 1", (long long)blocks);
  l.blocks = (unsigned)blocks;
  /* Staged tiles: forward and backward-filter stage x, backward-data with
   * stride 1 stages dy (the same extent: its window reaches as far). */
  if (!data || l.d.stride == 1) {
    const int64_t span = (int64_t)(l.d.k - 1) * l.d.dil + 1;
    const int64_t stride = data ? 1 : l.d.stride;
    int64_t in_w = (int64_t)(tile_w - 1) * stride + span;
    const int64_t in_h = (int64_t)(t->th - 1) * stride + span;
    if (t->px == 2) in_w += in_w & 1; /* even: rows are read as float2s */
    /* STEPS: two buffers of kStepChannels tiles (for_channel_steps);
     * RESIDENT: the chunk's tiles. */
    const int64_t tiles = resident ? t->cb : 2 * kStepChannels;
    const int64_t bytes = tiles * in_w * in_h * (int64_t)sizeof(float);
    const size_t limit = resident ? (size_t)CONV_DYN_DIRECT_SMEM_MAX : kMaxShared;
    if (bytes > (int64_t)limit)
      CONV_REJECT("staged tiles %lldx%lld x %lld need %lld bytes of shared memory, over %zu",
                  (long long)in_h, (long long)in_w, (long long)tiles, (long long)bytes, limit);
    l.in_w = (int)in_w, l.in_h = (int)in_h;
    l.smem_bytes = (size_t)bytes;
  }
  *L = l;
  return true;
}

extern "C" cudaError_t conv_dyn_direct_configure(const conv_dyn_direct_launch *L) {
  if (L == NULL) return cudaErrorInvalidValue;
  if (L->tiling.form != CONV_DYN_DIRECT_RESIDENT || L->smem_bytes <= kMaxShared) return cudaSuccess;
  const forward_fn kernel = resident_kernel(*L);
  if (kernel == NULL) return cudaErrorInvalidValue;
  /* Always the same value, never this plan's own need: the attribute
   * belongs to the kernel, which other plans share. */
  return cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                              CONV_DYN_DIRECT_SMEM_MAX);
}

extern "C" cudaError_t conv_dyn_direct_run(const conv_dyn_direct_launch *L, float *x, float *wt,
                                           float *y, cudaStream_t stream) {
  if (L == NULL || x == NULL || wt == NULL || y == NULL) return cudaErrorInvalidValue;
  switch (L->d.k) {
    case 1: return launch_k<1>(*L, x, wt, y, stream);
    case 3: return launch_k<3>(*L, x, wt, y, stream);
    case 5: return launch_k<5>(*L, x, wt, y, stream);
    case 7: return launch_k<7>(*L, x, wt, y, stream);
  }
  return cudaErrorInvalidValue;
}
