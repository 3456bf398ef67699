/*
 * stem_gemm.cu -- the stem_gemm candidate's kernel and launch (see
 * stem_gemm.h): a convolution with a short reduction as TF32 wgmmas over
 * 128-position segments of output rows, the filters resident in shared
 * memory, the im2col fragments gathered into registers, a persistent grid
 * of two-warpgroup blocks.
 *
 * wgmma exists only for the arch-specific target sm_90a, so this file is
 * compiled for it alone (CMakeLists.txt) and stem_gemm.c offers the
 * candidate on compute capability 9.0 only.
 */
#include <climits>
#include <cstdint>
#include <cstring>

#include "algorithms/common/epilogue.cuh"
#include "algorithms/common/kernels.h"
#include "algorithms/common/launch_plan.cuh"
#include "algorithms/common/mma_tf32.cuh"
#include "algorithms/common/pdl.cuh"
#include "algorithms/common/staging.cuh"
#include "algorithms/stem_gemm.h"
#include "algorithms/common/wgmma.cuh"

#if defined(__CUDA_ARCH__) && !defined(__CUDA_ARCH_FEAT_SM90_ALL)
#error "stem_gemm.cu is compiled for sm_90a only"
#endif

namespace {

constexpr int kThreads = 256;     /* two warpgroups                        */
constexpr int kPositions = 128;   /* a tile: 64 output positions each      */
constexpr int kMaxReduction = 256;
constexpr size_t kSmemMax = (size_t)200 << 10;

/* The launch's numbers, by value: the kernel never reads host memory. */
struct st_params {
  const float *x, *w, *bias;
  float *y;
  int c, h, w_in, k, r, s, out_h, out_w;
  int stride_h, stride_w, pad_h, pad_w, dil_h, dil_w;
  int reduction, steps, segments, tiles, field_rows, field_width, field_floats, patch_floats;
  int plane_in, plane_out, x_image, y_image, epilogue;
};


/* A tile: image, output row, and the first output column of its segment. */
struct st_tile {
  int n, oy, ox0;
};

__device__ __forceinline__ st_tile tile_at(const st_params &p, int tile) {
  const int per_image = p.out_h * p.segments;
  const int n = tile / per_image, rem = tile - n * per_image;
  const int oy = rem / p.segments;
  return {n, oy, (rem - oy * p.segments) * kPositions};
}

/* The tile's receptive field into `patch`: field_rows input rows of each
 * channel, field_width columns from the segment's first, zero where they
 * fall in the padding.  A warp copies a row at a time. */
__device__ __forceinline__ void stage(const st_params &p, int tile, float *patch) {
  const st_tile t = tile_at(p, tile);
  const int iy0 = t.oy * p.stride_h - p.pad_h, ix0 = t.ox0 * p.stride_w - p.pad_w;
  const float *image = p.x + (int64_t)t.n * p.x_image;
  const int lane = (int)threadIdx.x % 32;
  for (int row = (int)threadIdx.x / 32; row < p.c * p.field_rows; row += kThreads / 32) {
    const int ci = row / p.field_rows, iy = iy0 + row - ci * p.field_rows;
    const bool row_inside = iy >= 0 && iy < p.h;
    const float *src = image + (int64_t)ci * p.plane_in + (int64_t)iy * p.w_in + ix0;
    float *dst = patch + row * p.field_width;
    for (int col = lane; col < p.field_width; col += 32) {
      const bool ok = row_inside && ix0 + col >= 0 && ix0 + col < p.w_in;
      cp_async4(dst + col, ok ? src + col : p.x, ok ? 4 : 0);
    }
  }
}

/* Every filter, TF32-rounded, as wgmma's K-major B operand: reduction
 * index i of output channel k at [i / 4][k][i % 4] (zero past C R S and
 * past K); and each reduction index's offset in a staged field (past
 * C R S: the zeros after the field, which every position's column of
 * them reads). */
template <int N>
__device__ __forceinline__ void load_filters(const st_params &p, float *filters, int *offsets) {
  const int kr = p.steps * 8;
  for (int i = (int)threadIdx.x; i < kr; i += kThreads) {
    int offset = p.field_floats;
    if (i < p.reduction) {
      const int ci = i / (p.r * p.s), rr = i / p.s - ci * p.r, ss = i - (i / p.s) * p.s;
      offset = (ci * p.field_rows + rr * p.dil_h) * p.field_width + ss * p.dil_w;
    }
    offsets[i] = offset;
  }
  for (int i = (int)threadIdx.x; i < N * kr; i += kThreads) {
    const int k = i / kr, kk = i - k * kr;
    const float v = k < p.k && kk < p.reduction ? __ldg(p.w + (int64_t)k * p.reduction + kk) : 0.0f;
    filters[((kk / 4) * N + k) * 4 + kk % 4] = __uint_as_float(tf32_round(v));
  }
}

/* One warpgroup's 64 positions x N channels of a tile: per batch of k8
 * steps, its fragments gathered from the field (rows `pos0` and `pos1`
 * of the field, columns through the offset table), then their wgmmas,
 * done before the next batch is gathered (gathering while a group still
 * reads the last fragments makes ptxas serialise every wgmma).  The steps
 * are a whole number of batches (the plan pads them with zeros): a wgmma
 * under a condition makes ptxas fence each one. */
template <int NT, int BATCH>
__device__ __forceinline__ void multiply(const st_params &p, const float *patch, const int *offsets,
                                         uint32_t filters, int pos0, int pos1,
                                         float (&acc)[NT][4]) {
  constexpr int N = 8 * NT;
  const int tig = (int)threadIdx.x % 4;
#pragma unroll
  for (int t = 0; t < NT; t++) acc[t][0] = acc[t][1] = acc[t][2] = acc[t][3] = 0.0f;
  for (int b = 0; b < p.steps; b += BATCH) {
    uint32_t a[BATCH][4];
#pragma unroll
    for (int j = 0; j < BATCH; j++) {
      const int lo = offsets[(b + j) * 8 + tig], hi = offsets[(b + j) * 8 + tig + 4];
      a[j][0] = tf32_round(patch[pos0 + lo]);
      a[j][1] = tf32_round(patch[pos1 + lo]);
      a[j][2] = tf32_round(patch[pos0 + hi]);
      a[j][3] = tf32_round(patch[pos1 + hi]);
    }
    wgmma_acc_fence(acc);
    wgmma_fence();
#pragma unroll
    for (int j = 0; j < BATCH; j++)
      wgmma_tf32_rs<NT>(acc, a[j],
                        wgmma_smem_matrix(filters + (b + j) * 2 * N * 16, N * 16, 128));
    wgmma_commit();
    wgmma_wait<0>();
    wgmma_acc_fence(acc);
  }
}

/* Persistent blocks walk the tiles (blockIdx.x, + gridDim.x, ...), copying
 * the next tile's field while they multiply this one's. */
template <int NT, int BATCH>
__global__ void __launch_bounds__(kThreads, 2) stem_gemm_kernel(st_params p) {
  constexpr int N = 8 * NT;
  extern __shared__ float4 smem4[];
  float *const filters = reinterpret_cast<float *>(smem4);
  int *const offsets = reinterpret_cast<int *>(filters + p.steps * 8 * N);
  float *const patches = reinterpret_cast<float *>(offsets + p.steps * 8);
  const int tid = (int)threadIdx.x, lane = tid % 32;
  int tile = (int)blockIdx.x;
  stage(p, tile, patches);
  cp_async_commit();
  load_filters<N>(p, filters, offsets);
  for (int i = tid; i < p.patch_floats - p.field_floats; i += kThreads)
    patches[p.field_floats + i] = patches[p.patch_floats + p.field_floats + i] = 0.0f;
  fence_proxy_async(); /* the filters' stores before wgmma reads them */
  const uint32_t filters_at = (uint32_t)__cvta_generic_to_shared(filters);
  /* This thread's rows of the tile: 64 per warpgroup, 16 per warp. */
  const int m0 = (tid / 128) * 64 + (tid % 128 / 32) * 16 + lane / 4, m1 = m0 + 8;
  for (int i = 0; tile < p.tiles; tile += (int)gridDim.x, i ^= 1) {
    const int next = tile + (int)gridDim.x;
    if (next < p.tiles) stage(p, next, patches + (i ^ 1) * p.patch_floats);
    cp_async_commit();
    cp_async_wait<1>();
    __syncthreads();
    float acc[NT][4];
    multiply<NT, BATCH>(p, patches + i * p.patch_floats, offsets, filters_at, m0 * p.stride_w,
                        m1 * p.stride_w, acc);
    /* Fragments straight to y: per register, a warp writes 8 consecutive
     * positions of 4 output channels (four 32-byte runs). */
    const st_tile t = tile_at(p, tile);
    float *y = p.y + (int64_t)t.n * p.y_image + t.oy * p.out_w + t.ox0;
#pragma unroll
    for (int nt = 0; nt < NT; nt++)
#pragma unroll
      for (int e = 0; e < 2; e++) {
        const int k = 8 * nt + 2 * (lane % 4) + e;
        if (k >= p.k) continue;
        const float bias = conv_epilogue_bias(p.epilogue, p.bias, k);
        if (t.ox0 + m0 < p.out_w)
          y[(int64_t)k * p.plane_out + m0] = conv_epilogue_apply(p.epilogue, acc[nt][e], bias);
        if (t.ox0 + m1 < p.out_w)
          y[(int64_t)k * p.plane_out + m1] =
              conv_epilogue_apply(p.epilogue, acc[nt][2 + e], bias);
      }
    __syncthreads(); /* this field is read before the next-but-one tile's copy lands in it */
  }
}

struct st_instance {
  conv_stem_tiling tiling;
  const void *kernel;
};

const st_instance kInstances[] = {
    {{64, 4}, (const void *)stem_gemm_kernel<8, 4>},
    {{64, 8}, (const void *)stem_gemm_kernel<8, 8>},
    {{128, 4}, (const void *)stem_gemm_kernel<16, 4>},
};
constexpr int kInstanceCount = (int)(sizeof kInstances / sizeof kInstances[0]);
}  // namespace

extern "C" int conv_stem_tilings(conv_stem_tiling *out, int max) {
  return conv_list_tilings(kInstances, out, max);
}

extern "C" bool conv_stem_plan(const conv_problem *p, const conv_stem_tiling *tiling,
                               conv_stem_launch *L, char *why, size_t why_size) {
  if (!conv_plan_tf32_nchw_forward(p, tiling, L, why, why_size)) return false;
  if (p->groups != 1) return conv_refuse(why, why_size, "only one group");
  const int64_t reduction = p->c * p->r * p->s;
  if (reduction > kMaxReduction) return conv_refuse(why, why_size, "C R S past 256");
  const st_instance *inst = NULL;
  for (int i = 0; i < kInstanceCount; i++)
    if (kInstances[i].tiling.channels == tiling->channels &&
        kInstances[i].tiling.batch == tiling->batch)
      inst = &kInstances[i];
  if (inst == NULL) return conv_refuse(why, why_size, "tiling not compiled");
  if (p->k > tiling->channels) return conv_refuse(why, why_size, "K past the tiling's channels");
  const int64_t out_h = conv_output_size(p->h, p->r, p->stride_h, p->pad_h, p->dil_h);
  const int64_t out_w = conv_output_size(p->w, p->s, p->stride_w, p->pad_w, p->dil_w);
  const int64_t segments = (out_w + kPositions - 1) / kPositions;
  const int64_t tiles = p->n * out_h * segments;
  const int64_t field_rows = (p->r - 1) * p->dil_h + 1;
  const int64_t field_width = (kPositions - 1) * p->stride_w + (p->s - 1) * p->dil_w + 1;
  const int64_t field_floats = p->c * field_rows * field_width;
  /* Past the field, zeros for the padded reduction indices to read at
   * every position's column. */
  const int64_t patch_floats = (field_floats + (kPositions - 1) * p->stride_w + 1 + 3) / 4 * 4;
  /* k8 steps, a whole number of batches. */
  const int64_t steps = ((reduction + 7) / 8 + tiling->batch - 1) / tiling->batch * tiling->batch;
  if (p->n * p->c * p->h * p->w > INT_MAX || p->n * p->k * out_h * out_w > INT_MAX ||
      tiles > INT_MAX || field_floats > INT_MAX / 4)
    return conv_refuse(why, why_size, "sizes past 32-bit indexing");
  const size_t smem = (size_t)(steps * 8 * tiling->channels + steps * 8 + 2 * patch_floats) * 4;
  if (smem > kSmemMax)
    return conv_refuse(why, why_size, "the filters and two fields need past 200 KiB");
  memset(L, 0, sizeof *L);
  L->tiling = *tiling;
  L->kernel = inst->kernel;
  L->n = (int)p->n, L->c = (int)p->c, L->h = (int)p->h, L->w = (int)p->w, L->k = (int)p->k;
  L->r = (int)p->r, L->s = (int)p->s, L->out_h = (int)out_h, L->out_w = (int)out_w;
  L->stride_h = (int)p->stride_h, L->stride_w = (int)p->stride_w;
  L->pad_h = (int)p->pad_h, L->pad_w = (int)p->pad_w;
  L->dil_h = (int)p->dil_h, L->dil_w = (int)p->dil_w;
  L->epilogue = (int)p->epilogue;
  L->reduction = (int)reduction, L->steps = (int)steps;
  L->segments = (int)segments, L->tiles = (int)tiles;
  L->field_rows = (int)field_rows, L->field_width = (int)field_width;
  L->patch_floats = (int)patch_floats;
  L->threads = kThreads;
  L->smem_bytes = smem;
  return true;
}

extern "C" cudaError_t conv_stem_configure(conv_stem_launch *L, int sm_count) {
  if (L == NULL || L->kernel == NULL) return cudaErrorInvalidValue;
  return conv_kernel_persistent_blocks(L->kernel, L->threads, L->smem_bytes, sm_count, 1,
                                       L->tiles, &L->grid);
}

extern "C" cudaError_t conv_stem_forward(const conv_stem_launch *L, const float *x,
                                         const float *w, const float *bias, float *y,
                                         cudaStream_t stream) {
  if (L == NULL || L->kernel == NULL || L->grid == 0) return cudaErrorInvalidValue;
  st_params a;
  a.x = x, a.w = w, a.bias = bias, a.y = y;
  a.c = L->c, a.h = L->h, a.w_in = L->w, a.k = L->k, a.r = L->r, a.s = L->s;
  a.out_h = L->out_h, a.out_w = L->out_w;
  a.stride_h = L->stride_h, a.stride_w = L->stride_w, a.pad_h = L->pad_h, a.pad_w = L->pad_w;
  a.dil_h = L->dil_h, a.dil_w = L->dil_w;
  a.reduction = L->reduction, a.steps = L->steps, a.segments = L->segments, a.tiles = L->tiles;
  a.field_rows = L->field_rows, a.field_width = L->field_width;
  a.field_floats = L->c * L->field_rows * L->field_width, a.patch_floats = L->patch_floats;
  a.plane_in = L->h * L->w, a.plane_out = L->out_h * L->out_w;
  a.x_image = L->c * a.plane_in, a.y_image = L->k * a.plane_out;
  a.epilogue = L->epilogue;
  return conv_launch(false, (void (*)(st_params))L->kernel, dim3(L->grid),
                     dim3((unsigned)L->threads), L->smem_bytes, stream, a);
}
