/*
 * fft_tiles.h -- the kernels around the `fft` candidate's transforms:
 * cutting the input into zero-padded tiles, placing the filters for a
 * correlation, the per-frequency products, transposes between plane-major
 * and frequency-major spectra, and cropping the inverse transforms into the
 * output with the epilogue.  C linkage; implemented in fft_tiles.cu, driven
 * by fft.c and fft_filter.c.
 *
 * The problem's tensors (x, w, y; dy and dw backward) are of its dtype
 * (t->dtype): fp32, fp16 or bf16.  Everything between the cuts and the
 * crops is fp32: the cuts read the type exactly as float, and the crops
 * apply the scale and the epilogue in fp32 before one rounding to it.
 *
 * Overlap-save in 2-D: an fh x fw transform of an input tile yields
 * th = fh - r + 1 by tw = fw - s + 1 outputs that the circular product does
 * not wrap.  Output tile (ty, tx) of an image starts at output row ty*th,
 * column tx*tw; its input tile starts at input row ty*th - pad_h, column
 * tx*tw - pad_w.  Tiles are numbered m = n*tiles_h*tiles_w + ty*tiles_w + tx.
 */
#ifndef CONVTUNE_FFT_TILES_H
#define CONVTUNE_FFT_TILES_H

#include <stdbool.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#include "convtune.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The tiling of one problem, derived by fft.c, which keeps every count of
 * planes, and every plane's size, below 2^31. */
typedef struct conv_fft_tiles {
  int n, c, h, w, k, r, s, p, q, pad_h, pad_w;
  int groups, cg, kg;   /* groups, input and output channels per group */
  int fh, fw;           /* transform size                             */
  int th, tw;           /* outputs per tile: fh - r + 1, fw - s + 1   */
  int tiles_h, tiles_w; /* tiles per image along rows, columns        */
  int m;                /* n * tiles_h * tiles_w                      */
  int freqs;            /* fh * (fw/2 + 1): complex values a spectrum */
  int epilogue;         /* conv_epilogue                              */
  int dtype;            /* conv_dtype of the problem's tensors        */
  /* x and y channels-last (NHWC) and w K R S C, for the cut, the filter
   * placement and the crop; the backward-filter kernels read NCHW only. */
  int nhwc;
} conv_fft_tiles;

/* tiles[ci*m + tile][fh][fw] = x[n][ci][...] around the tile (x[n][...][ci]
 * with t->nhwc), zeros outside the image. */
cudaError_t conv_fft_cut_input(const conv_fft_tiles *t, const void *x, float *tiles,
                               cudaStream_t stream);

/* planes[k*cg + ci][fh][fw] = w[k][ci] placed for a correlation by a
 * circular convolution: tap (rr, ss) at ((fh - rr) % fh, (fw - ss) % fw),
 * zeros elsewhere.  `transposed` (backward-data, t being its transposed
 * view): the view's filter [g*kg + j][ci] is w[g*cg + ci][j] mirrored (w
 * has t->c filters of t->kg channels). */
cudaError_t conv_fft_place_filters(const conv_fft_tiles *t, const void *w, bool transposed,
                                   float *planes, cudaStream_t stream);

/* The per-frequency products on plane-major spectra (float2 = complex),
 * g = k / kg the output channel's group:
 * y[k*m + tile][f] = sum over ci < cg of x[(g*cg + ci)*m + tile][f] * w[k*cg + ci][f]. */
cudaError_t conv_fft_multiply(const conv_fft_tiles *t, const float2 *x, const float2 *w,
                              float2 *y, cudaStream_t stream);

/* out[col][row] = in[row][col] for a rows x cols complex matrix. */
cudaError_t conv_fft_transpose(const float2 *in, int64_t rows, int64_t cols, float2 *out,
                               cudaStream_t stream);

/* y[n][k][p][q] = epilogue(scale * tiles[k*m + tile][i][j] + bias[k]) for the
 * tile and position (i, j) that own output (p, q).  `scale` undoes the
 * unnormalised inverse transform. */
cudaError_t conv_fft_crop_output(const conv_fft_tiles *t, const float *tiles, float scale,
                                 const float *bias, void *y, cudaStream_t stream);

/* Backward-filter: tiles[k*m + tile][fh][fw] = dy[n][k] of the output
 * tile at the plane's origin, zeros past the tile and the output. */
cudaError_t conv_fft_cut_grad(const conv_fft_tiles *t, const void *dy, float *tiles,
                              cudaStream_t stream);

/* Backward-filter, on plane-major spectra: with g = k / kg the output
 * channel's group, dw[k*cg + ci][f] = sum over tiles, in order, of
 * conj(dy[k*m + tile][f]) * x[(g*cg + ci)*m + tile][f]. */
cudaError_t conv_fft_correlate(const conv_fft_tiles *t, const float2 *dy, const float2 *x,
                               float2 *dw, cudaStream_t stream);

/* Backward-filter: dw[k][ci][r][s] = scale * planes[k*cg + ci][r][s]. */
cudaError_t conv_fft_crop_filter(const conv_fft_tiles *t, const float *planes, float scale,
                                 void *dw, cudaStream_t stream);

#ifdef __cplusplus
}
#endif
#endif /* CONVTUNE_FFT_TILES_H */
