/*
 * patch.cu -- the patch kernels (see patch.h): fp32 FMA and TF32 mma.sync
 * over many small images, with the filter bank resident in shared memory.
 *
 * Both kernels are persistent: a launch has as many blocks as fit on the
 * device, each loads its filters once and then walks image groups
 * (blockIdx.x, + gridDim.x, ...).  A block's work is a sequence of steps,
 * one per (image group, chunk of input channels); the next step's inputs
 * are fetched while this one computes, into the other of two buffers.
 */
#include <cstdio>

#include "algorithms/common/kernels.h"
#include "algorithms/patch_kernels.cuh"
#include "algorithms/common/launch_checks.h"
#include "algorithms/common/mma_tf32.cuh"

namespace {

using namespace conv_patch_detail;

/* ================================================================ FMA */

/* Stages channels [c0, c0 + chunk) of the 32 images from img0 on, as in x
 * (channel-major rows), image i at dst + i * image_floats; images past n
 * and channels past c are zeros. */
template <class G>
__device__ void fma_stage(const Args &a, float *dst, int img0, int c0) {
  constexpr int kPlane4 = G::HW / 4;
  const int per_image = a.chunk * kPlane4;
  for (int i = threadIdx.x; i < kWarp * per_image; i += blockDim.x) {
    /* i / per_image as a multiply and a shift: a division would cost more
     * than the copy. */
    const int img = (int)conv_divide((uint32_t)i, a.by_image_float4s);
    const int j = i - img * per_image;
    const bool inside = img0 + img < a.n && c0 + j / kPlane4 < a.c;
    const float *src = inside ? a.x + ((int64_t)(img0 + img) * a.c + c0) * G::HW + 4 * j : a.x;
    cp_async16(dst + img * a.image_floats + 4 * j, src, inside ? 16 : 0);
  }
}

/* The block's filters, bank[c][tap][kk] = w[k0 + kk][c][tap]: a warp's
 * channels for one tap are then one broadcast float4 load.  Read in w's
 * order (coalesced); it runs once per block. */
template <class G>
__device__ void fma_load_bank(const Args &a, float *bank, int k0) {
  const int per_k = a.c * G::TAPS;
  const float *src = a.w + (int64_t)k0 * per_k;
  load_batched(per_k * a.block_k, [&](int i) { return __ldg(src + i); },
               [&](int i, float v) {
                 const int kk = i / per_k;
                 bank[(i - kk * per_k) * a.block_k + kk] = v;
               });
}

/* Accumulates `channels` staged channels into one thread's PT x W x KT
 * outputs.  CT and CB are the rows of padding the thread's rows reach past
 * the top and bottom of the image: the input rows that exist are the ones
 * loaded, and every product with a padding row or column is left out at
 * compile time. */
template <class G, int PT, int KT, int CT, int CB>
__device__ __forceinline__ void fma_chunk(const float *rows, const float *bank, int channels,
                                          int bank_pitch, float (&acc)[PT][G::W][KT]) {
  constexpr int kAbove = G::PH - CT, kRows = kAbove + PT + G::PH - CB;
#pragma unroll 1
  for (int cc = 0; cc < channels; cc++) {
    const float *src = rows + cc * G::HW;
    float in[kRows][G::W];
#pragma unroll
    for (int i = 0; i < kRows; i++)
#pragma unroll
      for (int q = 0; q < G::W; q += 4) {
        const float4 v = *reinterpret_cast<const float4 *>(src + i * G::W + q);
        in[i][q] = v.x, in[i][q + 1] = v.y, in[i][q + 2] = v.z, in[i][q + 3] = v.w;
      }
    const float *wc = bank + cc * G::TAPS * bank_pitch;
#pragma unroll
    for (int r = 0; r < G::R; r++)
#pragma unroll
      for (int s = 0; s < G::S; s++) {
        float wv[KT];
#pragma unroll
        for (int kk = 0; kk < KT; kk += 4) {
          const float4 v = *reinterpret_cast<const float4 *>(wc + (r * G::S + s) * bank_pitch + kk);
          wv[kk] = v.x, wv[kk + 1] = v.y, wv[kk + 2] = v.z, wv[kk + 3] = v.w;
        }
#pragma unroll
        for (int i = 0; i < PT; i++) {
          const int row = i + r - G::PH + kAbove;
          if (row < 0 || row >= kRows) continue;
#pragma unroll
          for (int q = 0; q < G::W; q++) {
            const int col = q + s - G::PW;
            if (col < 0 || col >= G::W) continue;
#pragma unroll
            for (int kk = 0; kk < KT; kk++)
              acc[i][q][kk] = fmaf(in[row][col], wv[kk], acc[i][q][kk]);
          }
        }
      }
  }
}

/* Rows of padding that output rows [p0, p0 + PT) reach past the top and
 * bottom edges. */
template <class G, int PT>
__host__ __device__ constexpr int clip_top(int p0) {
  return G::PH - p0 > 0 ? G::PH - p0 : 0;
}
template <class G, int PT>
__host__ __device__ constexpr int clip_bottom(int p0) {
  return p0 + PT - 1 + G::PH - (G::H - 1) > 0 ? p0 + PT - 1 + G::PH - (G::H - 1) : 0;
}
/* Whether some row tile has clips (CT, CB): only those are compiled. */
template <class G, int PT>
__host__ __device__ constexpr bool clips_occur(int ct, int cb) {
  for (int p0 = 0; p0 < G::H; p0 += PT)
    if (clip_top<G, PT>(p0) == ct && clip_bottom<G, PT>(p0) == cb) return true;
  return false;
}

/* fma_chunk for the thread's clips, chosen at run time (uniform per warp). */
template <class G, int PT, int KT, int CT = 0, int CB = 0>
__device__ __forceinline__ void fma_chunk_clipped(int ct, int cb, const float *plane,
                                                  const float *bank, int channels, int bank_pitch,
                                                  int p0, float (&acc)[PT][G::W][KT]) {
  if constexpr (CT > G::PH) {
    return;
  } else if constexpr (CB > G::PH) {
    fma_chunk_clipped<G, PT, KT, CT + 1, 0>(ct, cb, plane, bank, channels, bank_pitch, p0, acc);
  } else {
    if constexpr (clips_occur<G, PT>(CT, CB)) {
      if (ct == CT && cb == CB) {
        fma_chunk<G, PT, KT, CT, CB>(plane + (p0 - (G::PH - CT)) * G::W, bank, channels,
                                     bank_pitch, acc);
        return;
      }
    }
    fma_chunk_clipped<G, PT, KT, CT, CB + 1>(ct, cb, plane, bank, channels, bank_pitch, p0, acc);
  }
}

/* Warp w computes rows [p0, p0 + PT) (row tile w % (H / PT)) for channels
 * k0 + (w / (H / PT)) * KT + [0, KT); lane l is image group * 32 + l. */
template <class G, int PT, int KT>
__global__ void __launch_bounds__(max_threads(PT * G::W * KT)) fma_kernel(Args a) {
  extern __shared__ float4 smem4[];
  float *const bank = reinterpret_cast<float *>(smem4);
  /* The two staging buffers: stage + (step & 1) * buffer_floats. */
  float *const stage = bank + a.bank_floats;
  const int buffer_floats = kWarp * a.image_floats;
  constexpr int kRowTiles = G::H / PT;
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
  const int p0 = warp % kRowTiles * PT, kw = warp / kRowTiles * KT;
  const int ct = clip_top<G, PT>(p0), cb = clip_bottom<G, PT>(p0);
  const int k0 = blockIdx.y * a.block_k;
  fma_stage<G>(a, stage, blockIdx.x * kWarp, 0);
  cp_async_commit();
  fma_load_bank<G>(a, bank, k0);
  float acc[PT][G::W][KT];
  int step = 0;
  for (Walk now; now.valid(a); now = now.next(a), step++) {
    const Walk next = now.next(a);
    if (next.valid(a))
      fma_stage<G>(a, stage + ((step + 1) & 1) * buffer_floats, next.group * kWarp,
                   next.chunk * a.chunk);
    cp_async_commit();
    cp_async_wait<1>();
    __syncthreads();
    if (now.chunk == 0) {
#pragma unroll
      for (int i = 0; i < PT; i++)
#pragma unroll
        for (int q = 0; q < G::W; q++)
#pragma unroll
          for (int kk = 0; kk < KT; kk++) acc[i][q][kk] = 0.0f;
    }
    const int c0 = now.chunk * a.chunk;
    const int channels = a.c - c0 < a.chunk ? a.c - c0 : a.chunk;
    fma_chunk_clipped<G, PT, KT>(ct, cb, stage + (step & 1) * buffer_floats + lane * a.image_floats,
                                 bank + c0 * G::TAPS * a.block_k + kw, channels, a.block_k, p0,
                                 acc);
    const int img = now.group * kWarp + lane;
    if (now.chunk == a.chunks - 1 && img < a.n) {
#pragma unroll
      for (int kk = 0; kk < KT; kk++) {
        const int k = k0 + kw + kk;
        const float b = a.epilogue == CONV_EPILOGUE_NONE ? 0.0f : a.bias[k];
        float *dst = a.y + ((int64_t)img * a.k + k) * G::HW + p0 * G::W;
#pragma unroll
        for (int i = 0; i < PT; i++)
#pragma unroll
          for (int q = 0; q < G::W; q += 4)
            *reinterpret_cast<float4 *>(dst + i * G::W + q) = conv_epilogue_apply4(
                a.epilogue,
                make_float4(acc[i][q][kk], acc[i][q + 1][kk], acc[i][q + 2][kk], acc[i][q + 3][kk]),
                b);
      }
    }
    __syncthreads(); /* the buffer just read is the next step's target */
  }
}

/* ================================================================ MMA */

/* The filters of the block's n tiles in B-fragment order, rounded to TF32:
 * for channel block cb (8 channels, zeros past c), tap t and the block's n
 * tile j (8 output channels from k0 + 8j), 32 lanes x 2 values, lane =
 * 4 g + i holding w[k0 + 8j + g][8cb + i][t] and w[k0 + 8j + g][8cb + i + 4][t]. */
template <class G>
__device__ void mma_load_bank(const Args &a, float *bank, int k0) {
  const int ntiles = a.block_k / 8;
  load_batched(
      a.bank_floats,
      [&](int i) {
        const int e = i & 1, lane = (i >> 1) & 31, frag = i >> 6;
        const int j = frag % ntiles, t = frag / ntiles % G::TAPS, cb = frag / ntiles / G::TAPS;
        const int k = k0 + 8 * j + lane / 4, c = 8 * cb + lane % 4 + 4 * e;
        return c < a.c ? __ldg(a.w + ((int64_t)k * a.c + c) * G::TAPS + t) : 0.0f;
      },
      [&](int i, float v) { bank[i] = __uint_as_float(to_tf32(v)); });
}

/* Warp w owns pixel tiles w * MT + [0, MT) of the block's images, for all
 * of the block's NT n tiles: output channels k0 + [0, 8 NT), k0 =
 * blockIdx.y * block_k. */
template <class G, int MT, int NT>
__global__ void __launch_bounds__(max_threads(MT * NT * 4 * 2)) mma_kernel(Args a) {
  using L = MmaLayout<G>;
  extern __shared__ float4 smem4[];
  float *const bank = reinterpret_cast<float *>(smem4);
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
  const int g = lane / 4, tig = lane % 4;
  const int tile0 = warp * MT;
  const int k0 = blockIdx.y * a.block_k; /* block_k = 8 NT: one warp along N */
  const MmaStaging staging = mma_begin<G>(a, bank);
  mma_load_bank<G>(a, bank, k0);

  int a_offset[MT], a_image[MT], a_pixel[MT];
#pragma unroll
  for (int j = 0; j < MT; j++) {
    const int tile = tile0 + j;
    a_image[j] = tile / L::kTilesPerImage;
    a_pixel[j] = tile % L::kTilesPerImage * 16;
    a_offset[j] = a_image[j] * a.image_floats + L::pixel(a_pixel[j] + g) + L::channel(tig);
  }
  float acc[MT][NT][4];
  int step = 0;
  for (Walk now; now.valid(a); now = now.next(a), step++) {
    const float *const buf = mma_step_inputs<G>(a, staging, now, step);
    if (now.chunk == 0) {
#pragma unroll
      for (int j = 0; j < MT; j++)
#pragma unroll
        for (int t = 0; t < NT; t++)
          acc[j][t][0] = acc[j][t][1] = acc[j][t][2] = acc[j][t][3] = 0.0f;
    }
    const int cblocks = mma_channel_blocks(a, now.chunk);
#pragma unroll 1
    for (int cb = 0; cb < cblocks; cb++) {
      const float *frag =
          bank + (now.chunk * (kMmaChunk / 8) + cb) * (G::TAPS * NT * 64) + 2 * lane;
      const float *cbuf = buf + L::channel(8 * cb);
#pragma unroll
      for (int r = 0; r < G::R; r++)
#pragma unroll
        for (int s = 0; s < G::S; s++) {
          uint32_t b[NT][2];
#pragma unroll
          for (int t = 0; t < NT; t++) {
            const float2 v =
                *reinterpret_cast<const float2 *>(frag + ((r * G::S + s) * NT + t) * 64);
            b[t][0] = __float_as_uint(v.x), b[t][1] = __float_as_uint(v.y);
          }
#pragma unroll
          for (int j = 0; j < MT; j++) {
            uint32_t af[4];
            load_a_fragment<G>(cbuf + a_offset[j] + r * L::kPitch + s, af);
#pragma unroll
            for (int t = 0; t < NT; t++) mma_tf32(acc[j][t], af, b[t]);
          }
        }
    }
    if (now.chunk == a.chunks - 1) {
#pragma unroll
      for (int j = 0; j < MT; j++) {
        const int img = now.group * a.images_per_block + a_image[j];
        if (img < a.n) store_fragments<G, NT>(a, acc[j], img, a_pixel[j], k0, g, tig);
      }
    }
    __syncthreads(); /* every warp is done with the buffer the next step fills */
  }
}

/* ================================================================ instances */

/* A geometry's kernels: FMA with 16 (and 8) outputs of whole rows per
 * thread for 8 and 4 channels; MMA with 1 or 2 pixel tiles and 4 or 8
 * channel tiles per warp (4 x 8 spills its accumulators). */
#define FMA(H, W, R, PT, KT)                                      \
  {H, W, R, R, CONV_PATCH_FMA, PT, KT, max_threads(PT * W * KT),    \
   fma_kernel<Geometry<H, W, R, R>, PT, KT>, nullptr},
#define MMA(H, W, R, MT, NT)                                        \
  {H, W, R, R, CONV_PATCH_MMA, MT, NT, max_threads(MT * NT * 4 * 2), \
   mma_kernel<Geometry<H, W, R, R>, MT, NT>,                        \
   MmaLayout<Geometry<H, W, R, R>>::image_floats},
#define MMA_SET(H, W, R) MMA(H, W, R, 2, 8) MMA(H, W, R, 1, 8) MMA(H, W, R, 2, 4)

const kernel_instance kInstances[] = {
    FMA(4, 4, 3, 4, 8) FMA(4, 4, 3, 4, 4) FMA(4, 4, 3, 2, 8) MMA_SET(4, 4, 3)
    FMA(8, 8, 3, 2, 8) FMA(8, 8, 3, 2, 4) FMA(8, 8, 3, 1, 8) MMA_SET(8, 8, 3)
    FMA(16, 16, 3, 1, 8) FMA(16, 16, 3, 1, 4) MMA_SET(16, 16, 3)
};

#undef MMA_SET
#undef MMA
#undef FMA

/* Calls f on every compiled kernel: this file's, then patch_wgmma.cu's. */
template <class F>
void for_each_instance(F f) {
  for (const kernel_instance &in : kInstances) f(in);
  int count = 0;
  const kernel_instance *wgmma = wgmma_instances(&count);
  for (int i = 0; i < count; i++) f(wgmma[i]);
}

const kernel_instance *find_instance(int h, int w, int r, int s, const conv_patch_tiling *t) {
  const kernel_instance *found = nullptr;
  for_each_instance([&](const kernel_instance &in) {
    if (found == nullptr && in.h == h && in.w == w && in.r == r && in.s == s &&
        (t == nullptr ||
         (in.kind == t->kind && in.rows == t->rows && in.channels == t->channels)))
      found = &in;
  });
  return found;
}

/* Staged inputs, both buffers, at most this: room for the filter bank. */
constexpr size_t kStageBytesMax = (size_t)64 << 10;
/* Shared memory an FMA block that has the SM to itself takes: within
 * sm_80's limit as well, so that these configs run on A100s too. */
constexpr size_t kWholeSmBytes = (size_t)160 << 10;

bool plan_fma(conv_patch_launch &l, char *why, size_t why_size) {
  const conv_patch_tiling &t = l.tiling;
  if (l.h % t.rows != 0) CONV_REJECT("%d rows per thread do not divide %d", t.rows, l.h);
  l.threads = kWarp * (l.h / t.rows) * t.warps;
  l.block_k = t.channels * t.warps;
  if (l.k % l.block_k != 0)
    CONV_REJECT("%d x %d channels per block do not divide K = %d", t.warps, t.channels, l.k);
  l.images_per_block = kWarp;
  l.bank_floats = l.c * l.r * l.s * l.block_k;
  /* The most channels (a power of two, up to 32, at most C rounded up)
   * whose two buffers fit: within kStageBytesMax, or, for a block that
   * has an SM to itself anyway (two would need more than the SM's 64K
   * registers), within kWholeSmBytes: fewer barriers. */
  const bool whole_sm = l.threads * (t.rows * l.w * t.channels > 64 ? 255 : 128) > 32768;
  const size_t budget = whole_sm ? kWholeSmBytes - sizeof(float) * l.bank_floats : kStageBytesMax;
  const size_t image_bytes = sizeof(float) * l.h * l.w;
  l.chunk = 32;
  while (l.chunk > 1 && (l.chunk >= 2 * l.c || 2 * kWarp * image_bytes * l.chunk > budget))
    l.chunk /= 2;
  /* Image pitch 4 (mod 8) floats: a quarter warp's float4 loads of 8
   * images then fall in 8 different bank quads. */
  l.image_floats = l.chunk * l.h * l.w + 4;
  l.smem_bytes = sizeof(float) * ((size_t)l.bank_floats + 2 * (size_t)kWarp * l.image_floats);
  const conv_divisor by_image = conv_divisor_make(l.chunk * l.h * l.w / 4);
  l.stage_div_multiplier = by_image.multiplier;
  l.stage_div_shift = by_image.shift;
  return true;
}

bool plan_mma(conv_patch_launch &l, const kernel_instance &in, char *why, size_t why_size) {
  const conv_patch_tiling &t = l.tiling;
  const int tiles_per_image = l.h * l.w / 16;
  /* A block: `warps` warps along pixel tiles, one along channels, so its
   * channels are the warp's (8 x channel tiles) and the bank holds only
   * those. */
  l.block_k = 8 * t.channels;
  /* wgmma: a warpgroup (4 warps) multiplies its 64 pixels at once. */
  if (t.kind == CONV_PATCH_WGMMA && t.warps % 4 != 0)
    CONV_REJECT("%d warps are not whole warpgroups", t.warps);
  if (l.k % l.block_k != 0)
    CONV_REJECT("%d channel tiles per warp do not divide K / 8 = %d", t.channels, l.k / 8);
  if (t.warps * t.rows % tiles_per_image != 0)
    CONV_REJECT("%d x %d pixel tiles are not whole %dx%d images", t.warps, t.rows, l.h, l.w);
  l.threads = kWarp * t.warps;
  l.images_per_block = t.warps * t.rows / tiles_per_image;
  l.chunk = kMmaChunk;
  l.image_floats = in.image_floats();
  const size_t stage = 2 * sizeof(float) * (size_t)l.images_per_block * l.image_floats;
  l.bank_floats = (l.c + 7) / 8 * 8 * l.r * l.s * l.block_k;
  l.smem_bytes = sizeof(float) * ((size_t)l.bank_floats + kMmaSlack) + stage;
  return true;
}

}  // namespace

extern "C" bool conv_patch_geometry(const conv_problem *pb) {
  return pb->stride_h == 1 && pb->stride_w == 1 && pb->dil_h == 1 && pb->dil_w == 1 &&
         pb->groups == 1 && pb->r % 2 == 1 && pb->s % 2 == 1 && pb->pad_h == (pb->r - 1) / 2 &&
         pb->pad_w == (pb->s - 1) / 2 && pb->k % 8 == 0 &&
         find_instance((int)pb->h, (int)pb->w, (int)pb->r, (int)pb->s, nullptr) != nullptr;
}

extern "C" int conv_patch_kernels(const conv_problem *pb, conv_patch_tiling *out, int max) {
  int count = 0;
  if (!conv_patch_geometry(pb)) return 0;
  for (int kind : {CONV_PATCH_FMA, CONV_PATCH_MMA, CONV_PATCH_WGMMA})
    for_each_instance([&](const kernel_instance &in) {
      if (in.kind == kind && in.h == pb->h && in.w == pb->w && in.r == pb->r && in.s == pb->s) {
        if (count < max) out[count] = {in.kind, in.rows, in.channels, 0};
        count++;
      }
    });
  return count;
}

extern "C" bool conv_patch_plan(const conv_problem *pb, const conv_patch_tiling *t,
                                conv_patch_launch *L, char *why, size_t why_size) {
  if (!conv_patch_geometry(pb))
    CONV_REJECT("no patch kernel for %lldx%lld images, %lldx%lld filters, pads %lld,%lld, K %lld",
           (long long)pb->h, (long long)pb->w, (long long)pb->r, (long long)pb->s,
           (long long)pb->pad_h, (long long)pb->pad_w, (long long)pb->k);
  const kernel_instance *in = find_instance((int)pb->h, (int)pb->w, (int)pb->r, (int)pb->s, t);
  if (in == nullptr)
    CONV_REJECT("tiling %d/%d/%d not compiled for this geometry", t->kind, t->rows, t->channels);
  if (t->kind != CONV_PATCH_FMA && pb->math != CONV_MATH_TF32)
    CONV_REJECT("the tensor-core kernel needs TF32 mode");
  if (t->warps < 1 || t->warps > kMaxThreads / kWarp) CONV_REJECT("%d warps", t->warps);
  /* Indexing inside a plane or the filter bank is 32-bit. */
  if (pb->n > INT32_MAX || pb->c * pb->r * pb->s * pb->k > INT32_MAX) CONV_REJECT("too large");

  conv_patch_launch l = {};
  l.tiling = *t;
  l.kernel = (const void *)in->fn;
  l.n = (int)pb->n, l.c = (int)pb->c, l.k = (int)pb->k, l.h = (int)pb->h, l.w = (int)pb->w;
  l.r = (int)pb->r, l.s = (int)pb->s, l.epilogue = (int)pb->epilogue;
  if (!(t->kind == CONV_PATCH_FMA ? plan_fma(l, why, why_size) : plan_mma(l, *in, why, why_size)))
    return false;
  if (l.threads > in->max_threads)
    CONV_REJECT("%d threads per block, more than %d", l.threads, in->max_threads);
  if (l.smem_bytes > CONV_PATCH_SMEM_MAX)
    CONV_REJECT("needs %zu bytes of shared memory, more than %zu", l.smem_bytes,
           (size_t)CONV_PATCH_SMEM_MAX);
  l.k_blocks = l.k / l.block_k;
  l.image_groups = (int)((pb->n + l.images_per_block - 1) / l.images_per_block);
  l.chunks = (l.c + l.chunk - 1) / l.chunk;
  *L = l;
  return true;
}

extern "C" cudaError_t conv_patch_configure(conv_patch_launch *L, int sm_count) {
  if (L == NULL || L->kernel == NULL) return cudaErrorInvalidValue;
  /* A slice of blocks per k block, each walking the image groups. */
  const cudaError_t e = conv_kernel_persistent_blocks(L->kernel, L->threads, L->smem_bytes,
                                                      sm_count, L->k_blocks, L->image_groups,
                                                      &L->grid[0]);
  if (e != cudaSuccess) return e;
  L->grid[1] = (unsigned)L->k_blocks;
  return cudaSuccess;
}

extern "C" cudaError_t conv_patch_forward(const conv_patch_launch *L, const float *x,
                                          const float *w, const float *bias, float *y,
                                          cudaStream_t stream) {
  if (L == NULL || L->kernel == NULL || L->grid[0] == 0 || x == NULL || w == NULL || y == NULL ||
      (L->epilogue != CONV_EPILOGUE_NONE && bias == NULL))
    return cudaErrorInvalidValue;
  const Args a = {x,         w,           bias,     y,
                  L->n,      L->c,        L->k,     L->epilogue,
                  L->images_per_block, L->block_k, L->image_groups, L->chunk,
                  L->chunks, L->image_floats, L->bank_floats,
                  {(uint32_t)(L->chunk * L->h * L->w / 4), L->stage_div_multiplier,
                   L->stage_div_shift}};
  const kernel_fn fn = (kernel_fn)L->kernel;
  fn<<<dim3(L->grid[0], L->grid[1]), dim3((unsigned)L->threads), L->smem_bytes, stream>>>(a);
  return cudaGetLastError();
}

/* One thread per element of wt, reading w mirrored: both are a few
 * thousand floats, read once per execute. */
__global__ static void transpose_filter_kernel(const float *__restrict__ w, int k, int c, int r,
                                               int s, float *__restrict__ wt) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  const int taps = r * s;
  if (i >= k * c * taps) return;
  const int tap = i % taps, ck = i / taps; /* wt's (c, k) pair, c major */
  const int ci = ck / k, ko = ck % k;
  wt[i] = w[((int64_t)ko * c + ci) * taps + (taps - 1 - tap)];
}

extern "C" cudaError_t conv_patch_transpose_filter(const float *w, int64_t k, int64_t c,
                                                   int64_t r, int64_t s, float *wt,
                                                   cudaStream_t stream) {
  if (w == NULL || wt == NULL || k < 1 || c < 1 || r < 1 || s < 1 || k * c * r * s >= INT32_MAX)
    return cudaErrorInvalidValue;
  const int total = (int)(k * c * r * s), threads = 256;
  transpose_filter_kernel<<<(total + threads - 1) / threads, threads, 0, stream>>>(
      w, (int)k, (int)c, (int)r, (int)s, wt);
  return cudaGetLastError();
}
