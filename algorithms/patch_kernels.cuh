/*
 * patch_kernels.cuh -- device code shared by the patch kernels of patch.cu
 * (FMA, mma.sync) and patch_wgmma.cu (wgmma, compiled for sm_90a only):
 * kernel arguments, the persistent walk, cp.async staging into the padded
 * TF32 layout, the store of m16n8 accumulator fragments, and the table of
 * compiled kernels.  Included by .cu files only.
 */
#ifndef CONVTUNE_PATCH_KERNELS_CUH
#define CONVTUNE_PATCH_KERNELS_CUH

#include <cstdint>

#include "algorithms/common/divisor.h"
#include "algorithms/common/launch_checks.h"
#include "algorithms/common/epilogue.cuh"
#include "algorithms/patch.h"
#include "algorithms/common/staging.cuh"

/* Named, not anonymous: patch.cu finds the wgmma kernels of patch_wgmma.cu
 * through kernel_instance. */
namespace conv_patch_detail {

constexpr int kWarp = 32;
/* Threads per block: up to 512 for kernels with at most 64 accumulators a
 * thread (16 warps at up to 128 registers fill an SM with one block, whose
 * image groups then split evenly over the SMs), else 256. */
constexpr int kMaxThreads = 512;
constexpr int max_threads(int accumulators) { return accumulators <= 64 ? 512 : 256; }

template <int H_, int W_, int R_, int S_>
struct Geometry {
  static constexpr int H = H_, W = W_, R = R_, S = S_;
  static constexpr int PH = (R_ - 1) / 2, PW = (S_ - 1) / 2; /* "same" padding */
  static constexpr int HW = H_ * W_, TAPS = R_ * S_;
  static_assert(W_ % 4 == 0 && HW % 16 == 0, "rows are float4s; MMA tiles are 16 pixels");
};

/* Kernel arguments (conv_patch_launch's, plus the tensors). */
struct Args {
  const float *x, *w, *bias;
  float *y;
  int n, c, k, epilogue;
  int images_per_block, block_k, image_groups, chunk, chunks, image_floats, bank_floats;
  conv_divisor by_image_float4s; /* FMA staging: float4s of one image chunk */
};

/* A block's walk: steps over (image group, chunk of channels), chunks
 * innermost, groups blockIdx.x, + gridDim.x, ...; counters rather than
 * divisions, which would cost more than a step's bookkeeping. */
struct Walk {
  int group, chunk;
  __device__ Walk() : group((int)blockIdx.x), chunk(0) {}
  __device__ bool valid(const Args &a) const { return group < a.image_groups; }
  __device__ Walk next(const Args &a) const {
    Walk w = *this;
    if (++w.chunk == a.chunks) w.chunk = 0, w.group += (int)gridDim.x;
    return w;
  }
};

/* Input channels the MMA kernel stages at once: two 8-channel blocks of
 * the mma's reduction per step (a step's bookkeeping costs about as much as
 * one block's mma), and a compile-time constant so that placing a staged
 * element is shifts and masks. */
constexpr int kMmaChunk = 16;
constexpr int kMmaSlack = 4;

/* One staged image chunk of the MMA kernel: channel planes of the
 * zero-padded image.  A row is `kPitch` floats with the image row at
 * column 4 (16-byte aligned, for cp.async); the left padding is the
 * columns before it and the right padding the next row's first columns,
 * which staging never writes, so they stay zero (up to 4 columns each
 * side).  The last row's right padding is past the plane: in the gap to
 * the next plane, in the next plane's unused first columns, or, after the
 * last plane of the last image, in kMmaSlack zeros after the buffers.
 * Pitches are chosen so that a fragment's 32 loads (8 pixels x 4 channels)
 * hit 32 different banks: 8-pixel rows with planes 8 or 24 (mod 32) floats
 * apart; 4-pixel rows (two per 8 pixels, 8 floats apart) with planes 16
 * (mod 32) apart and every other pair of channels shifted by 4. */
template <class G>
struct MmaLayout {
  static_assert(G::PW <= 4 && G::PW >= 1, "the padding columns live in columns 0-3");
  static constexpr int kRows = G::H + 2 * G::PH;
  static constexpr int kPitch = G::W + 4;
  static constexpr int kRaw = kRows * kPitch;
  static constexpr int kPlane =
      G::W == 4 ? ((kRaw + 15) / 16 % 2 ? (kRaw + 15) / 16 * 16 : (kRaw + 15) / 16 * 16 + 16)
                : ((kRaw + 7) / 8 % 2 ? (kRaw + 7) / 8 * 8 : (kRaw + 7) / 8 * 8 + 8);
  static constexpr int kSwizzle = G::W == 4 ? 4 : 0;
  /* Offset of pixel m + 8 from pixel m within a 16-pixel tile. */
  static constexpr int kHalf = G::W >= 16 ? 8 : (8 / G::W) * kPitch;
  static constexpr int kTilesPerImage = G::HW / 16;
  __host__ __device__ static constexpr int channel(int c) {
    return c * kPlane + ((c >> 1) & 1) * kSwizzle;
  }
  /* Floats of one staged image chunk. */
  __host__ __device__ static constexpr int image_floats() { return kMmaChunk * kPlane + kSwizzle; }
  /* Where input row `row`, column `col` of a channel plane is staged. */
  __device__ static int input(int row, int col) { return (row + G::PH) * kPitch + 4 + col; }
  /* Offset of the input that output pixel m meets at tap (0, 0). */
  __device__ static int pixel(int m) { return m / G::W * kPitch + m % G::W + 4 - G::PW; }
};

__device__ __forceinline__ uint32_t to_tf32(float v) {
  uint32_t t;
  asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(t) : "f"(v));
  return t;
}

/* Staged element idx (float4s, in x's order): image, channel, row, column. */
template <class G>
__device__ __forceinline__ void mma_decode(int idx, int &img, int &c, int &row, int &col) {
  constexpr int kRow4 = G::W / 4;
  col = idx % kRow4 * 4;
  row = idx / kRow4 % G::H;
  const int plane = idx / (G::HW / 4);
  c = plane % kMmaChunk;
  img = plane / kMmaChunk;
}

/* Stages channels [c0, c0 + kMmaChunk) of the block's images from img0 on
 * into the padded layout; images past n and channels past c are zeros. */
template <class G>
__device__ void mma_stage(const Args &a, float *dst, int img0, int c0) {
  using L = MmaLayout<G>;
  const int count = a.images_per_block * kMmaChunk * G::HW / 4;
  for (int idx = threadIdx.x; idx < count; idx += blockDim.x) {
    int img, c, row, col;
    mma_decode<G>(idx, img, c, row, col);
    const bool inside = img0 + img < a.n && c0 + c < a.c;
    const float *src =
        inside ? a.x + ((int64_t)(img0 + img) * a.c + c0 + c) * G::HW + row * G::W + col : a.x;
    cp_async16(dst + img * a.image_floats + L::channel(c) + L::input(row, col), src,
               inside ? 16 : 0);
  }
}

/* Rounds what this thread staged (its own cp.async copies, complete) to
 * TF32, as cuDNN and cuBLAS do: the tensor cores would truncate. */
template <class G>
__device__ void mma_round_staged(const Args &a, float *dst) {
  using L = MmaLayout<G>;
  const int count = a.images_per_block * kMmaChunk * G::HW / 4;
  for (int idx = threadIdx.x; idx < count; idx += blockDim.x) {
    int img, c, row, col;
    mma_decode<G>(idx, img, c, row, col);
    float4 *p = reinterpret_cast<float4 *>(dst + img * a.image_floats + L::channel(c) +
                                           L::input(row, col));
    float4 v = *p;
    v.x = __uint_as_float(to_tf32(v.x)), v.y = __uint_as_float(to_tf32(v.y));
    v.z = __uint_as_float(to_tf32(v.z)), v.w = __uint_as_float(to_tf32(v.w));
    *p = v;
  }
}

/* The tensor-core kernels' staging, in shared memory after the filter
 * bank: two buffers of buffer_floats, step s's at stage + (s & 1) *
 * buffer_floats, then kMmaSlack zeros. */
struct MmaStaging {
  float *stage;
  int buffer_floats;
};

/* The tensor-core kernels' start, `bank` at the start of their shared
 * memory: zero both staging buffers (the padding is never written again)
 * and start staging the block's first step. */
template <class G>
__device__ MmaStaging mma_begin(const Args &a, float *bank) {
  const MmaStaging s = {bank + a.bank_floats, a.images_per_block * a.image_floats};
  for (int i = threadIdx.x; i < 2 * s.buffer_floats + kMmaSlack; i += blockDim.x) s.stage[i] = 0.0f;
  __syncthreads();
  mma_stage<G>(a, s.stage, blockIdx.x * a.images_per_block, 0);
  cp_async_commit();
  return s;
}

/* The start of step `step` (at `now`): starts staging the next step into
 * the other buffer, waits for this step's, rounds it to TF32 and returns
 * it once every thread's copies are in. */
template <class G>
__device__ float *mma_step_inputs(const Args &a, const MmaStaging &s, const Walk &now, int step) {
  const Walk next = now.next(a);
  if (next.valid(a))
    mma_stage<G>(a, s.stage + ((step + 1) & 1) * s.buffer_floats, next.group * a.images_per_block,
                 next.chunk * kMmaChunk);
  cp_async_commit();
  cp_async_wait<1>();
  float *const buf = s.stage + (step & 1) * s.buffer_floats;
  mma_round_staged<G>(a, buf);
  __syncthreads();
  return buf;
}

/* Channel blocks of 8 in chunk `chunk` that the bank has (C rounded up to 8). */
__device__ __forceinline__ int mma_channel_blocks(const Args &a, int chunk) {
  return min(kMmaChunk / 8, (a.c + 7) / 8 - chunk * (kMmaChunk / 8));
}

/* A warp's m16n8k8 A fragment at p (pixel g, channel tig of its tile and
 * tap): rows g and g + 8, channels tig and tig + 4. */
template <class G>
__device__ __forceinline__ void load_a_fragment(const float *p, uint32_t (&f)[4]) {
  using L = MmaLayout<G>;
  f[0] = __float_as_uint(p[0]), f[1] = __float_as_uint(p[L::kHalf]);
  f[2] = __float_as_uint(p[4 * L::kPlane]), f[3] = __float_as_uint(p[4 * L::kPlane + L::kHalf]);
}

/* Stores one warp's m16n8 accumulator fragments (mma.sync's layout, and
 * each warp's share of a wgmma m64nN result) with the epilogue: rows are
 * pixels pixel + g and pixel + g + 8 of image img, columns output channels
 * k0 + 8t + 2 tig and the next. */
template <class G, int NT>
__device__ __forceinline__ void store_fragments(const Args &a, const float (&acc)[NT][4], int img,
                                                int pixel, int k0, int g, int tig) {
#pragma unroll
  for (int t = 0; t < NT; t++) {
    const int k = k0 + t * 8 + 2 * tig;
    const float b0 = a.epilogue == CONV_EPILOGUE_NONE ? 0.0f : a.bias[k];
    const float b1 = a.epilogue == CONV_EPILOGUE_NONE ? 0.0f : a.bias[k + 1];
    float *y0 = a.y + ((int64_t)img * a.k + k) * G::HW + pixel + g;
    float *y1 = y0 + G::HW;
    y0[0] = conv_epilogue_apply(a.epilogue, acc[t][0], b0);
    y1[0] = conv_epilogue_apply(a.epilogue, acc[t][1], b1);
    y0[8] = conv_epilogue_apply(a.epilogue, acc[t][2], b0);
    y1[8] = conv_epilogue_apply(a.epilogue, acc[t][3], b1);
  }
}

using kernel_fn = void (*)(Args);

/* One compiled kernel: its geometry, tiling and launch limits. */
struct kernel_instance {
  int h, w, r, s, kind, rows, channels, max_threads;
  kernel_fn fn;
  int (*image_floats)(); /* tensor cores: MmaLayout's size of a staged image chunk */
};

/* The wgmma kernels (patch_wgmma.cu); *count of them. */
const kernel_instance *wgmma_instances(int *count);

}  // namespace conv_patch_detail

#endif /* CONVTUNE_PATCH_KERNELS_CUH */
