/*
 * patch_wgmma.cu -- the patch candidate's wgmma kernel (see patch.h): the
 * mma.sync kernel's implicit GEMM on Hopper's warpgroup tensor cores.
 *
 * wgmma exists only for the arch-specific target sm_90a, so this file is
 * compiled for it alone (CMakeLists.txt) and patch.c offers the kernel on
 * compute capability 9.0 only.  Staging, rounding, the walk and the store
 * are the mma.sync kernel's (patch_kernels.cuh); what changes is the
 * product.  Each warp still loads the A fragment of its 16 pixels (rows)
 * and 8 input channels (k) from the padded staging, but one wgmma
 * m64nNk8 per warpgroup and tap then multiplies the 4 warps' 64 pixels by
 * all N output channels, reading B straight from the filter bank: no B
 * fragment loads, and one instruction where mma.sync took 4 x N / 8.
 */
#include "algorithms/patch_kernels.cuh"
#include "algorithms/common/wgmma.cuh"

#if defined(__CUDA_ARCH__) && !defined(__CUDA_ARCH_FEAT_SM90_ALL)
#error "patch_wgmma.cu is compiled for sm_90a only"
#endif

namespace conv_patch_detail {
namespace {

/* The block's filters, rounded to TF32, as wgmma's B operands: for
 * channel block cb (8 channels, zeros past c) and tap t, an 8 x N matrix
 * stored K-major in core matrices: [half][n][4], half = channels 4 half +
 * [0, 4), so 16 bytes per output channel n, N x 16 bytes from one half to
 * the other. */
template <class G, int NT>
__device__ void wgmma_load_bank(const Args &a, float *bank, int k0) {
  constexpr int N = 8 * NT;
  load_batched(
      a.bank_floats,
      [&](int i) {
        const int matrix = i / (8 * N), e = i % (8 * N);
        const int half = e / (4 * N), n = e / 4 % N, ci = e % 4;
        const int t = matrix % G::TAPS, cb = matrix / G::TAPS;
        const int c = 8 * cb + 4 * half + ci;
        return c < a.c ? __ldg(a.w + ((int64_t)(k0 + n) * a.c + c) * G::TAPS + t) : 0.0f;
      },
      [&](int i, float v) { bank[i] = __uint_as_float(to_tf32(v)); });
}

/* Warp w owns pixel tile w of the block's images (16 pixels), warpgroup
 * w / 4 the 64 pixels of its 4 warps, for all N = 8 NT output channels
 * k0 + [0, N), k0 = blockIdx.y * N. */
template <class G, int NT>
__global__ void __launch_bounds__(kMaxThreads) wgmma_kernel(Args a) {
  using L = MmaLayout<G>;
  constexpr int N = 8 * NT;
  extern __shared__ float4 smem4[];
  float *const bank = reinterpret_cast<float *>(smem4);
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
  const int g = lane / 4, tig = lane % 4;
  const int k0 = blockIdx.y * N;
  const MmaStaging staging = mma_begin<G>(a, bank);
  wgmma_load_bank<G, NT>(a, bank, k0);
  fence_proxy_async(); /* the first step's barrier then orders it for every thread */

  const int image = warp / L::kTilesPerImage, pixel = warp % L::kTilesPerImage * 16;
  const int a_offset = image * a.image_floats + L::pixel(pixel + g) + L::channel(tig);
  /* One B matrix: 8 x N floats; its halves N x 16 bytes apart, output
   * channels 8 x 16 bytes apart per 8. */
  constexpr uint32_t kMatrixBytes = 8 * N * sizeof(float);
  const uint64_t bank_matrix =
      wgmma_smem_matrix((uint32_t)__cvta_generic_to_shared(bank), N * 16, 128);
  float acc[NT][4];
  int step = 0;
  for (Walk now; now.valid(a); now = now.next(a), step++) {
    const float *const buf = mma_step_inputs<G>(a, staging, now, step);
    if (now.chunk == 0) {
#pragma unroll
      for (int t = 0; t < NT; t++) acc[t][0] = acc[t][1] = acc[t][2] = acc[t][3] = 0.0f;
    }
    const int cblocks = mma_channel_blocks(a, now.chunk);
#pragma unroll
    for (int cb = 0; cb < kMmaChunk / 8; cb++) {
      if (cb >= cblocks) break;
      const float *p0 = buf + L::channel(8 * cb) + a_offset;
      const int matrix0 = (now.chunk * (kMmaChunk / 8) + cb) * G::TAPS;
      /* One filter row at a time: its A fragments load while the previous
       * row multiplies, and at most two rows' fragments are live (more
       * would make ptxas serialize every wgmma for want of registers). */
#pragma unroll
      for (int r = 0; r < G::R; r++) {
        uint32_t af[G::S][4];
#pragma unroll
        for (int s = 0; s < G::S; s++) load_a_fragment<G>(p0 + r * L::kPitch + s, af[s]);
        wgmma_acc_fence(acc);
        wgmma_fence();
#pragma unroll
        for (int s = 0; s < G::S; s++)
          wgmma_tf32_rs<NT>(acc, af[s],
                            bank_matrix + (matrix0 + r * G::S + s) * (kMatrixBytes >> 4));
        wgmma_commit();
        wgmma_wait<1>();
      }
    }
    wgmma_wait<0>();
    wgmma_acc_fence(acc);
    if (now.chunk == a.chunks - 1) {
      const int img = now.group * a.images_per_block + image;
      if (img < a.n) store_fragments<G, NT>(a, acc, img, pixel, k0, g, tig);
    }
    __syncthreads(); /* every warp is done with the buffer the next step fills */
  }
}

/* Every geometry of patch.cu, with 8 and 4 channel tiles (N = 64, 32). */
#define WGMMA(H, W, R, NT)                                                                  \
  {H, W, R, R, CONV_PATCH_WGMMA, 1, NT, kMaxThreads, wgmma_kernel<Geometry<H, W, R, R>, NT>, \
   MmaLayout<Geometry<H, W, R, R>>::image_floats},

const kernel_instance kWgmmaInstances[] = {
    WGMMA(4, 4, 3, 8) WGMMA(4, 4, 3, 4) WGMMA(8, 8, 3, 8) WGMMA(8, 8, 3, 4)
    WGMMA(16, 16, 3, 8) WGMMA(16, 16, 3, 4)
};

#undef WGMMA

}  // namespace

const kernel_instance *wgmma_instances(int *count) {
  *count = (int)(sizeof kWgmmaInstances / sizeof kWgmmaInstances[0]);
  return kWgmmaInstances;
}

}  // namespace conv_patch_detail
