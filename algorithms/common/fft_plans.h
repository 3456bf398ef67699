/*
 * fft_plans.h -- what the FFT families (`fft` forward, `fft_filter`
 * backward-filter) share on the host: transform sizes, the tiling of a
 * problem, cuFFT plans of batches of 2-D real transforms and their
 * execution, with cuFFT's errors turned into statuses, a pass's three
 * batches and the workspace they share, and the ends of describe() and
 * prepare().  The kernels around the transforms are in fft_tiles.h.
 */
#ifndef CONVTUNE_FFT_PLANS_H
#define CONVTUNE_FFT_PLANS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cufft.h>

#include "algorithms/common/fft_tiles.h"
#include "algorithms/algorithm.h"

/* Largest transform size along an axis. */
#define CONV_FFT_SIZE_MAX 4096

/* `v` rounded up to the alignment of each part of an FFT workspace. */
size_t conv_fft_round_up(size_t v);

/* A cuFFT result as a status (CONV_OUT_OF_MEMORY for failed allocations,
 * else CONV_UNSUPPORTED), the message naming `family` and `what`. */
conv_status conv_fft_check(conv_error *err, const char *family, cufftResult r, const char *what);

/* Transform sizes for one axis with `outputs` outputs and a filter of
 * `taps`, largest first: the whole padded extent (rounded up to a size
 * whose only prime factors are 2, 3, 5 and 7), then powers of two from 16
 * that leave at least `taps` outputs a tile.  Returns how many (<= 8). */
int conv_fft_axis_sizes(int64_t outputs, int64_t taps, int64_t sizes[8]);

/* The transform sizes {fh, fw} worth timing for a problem of output
 * sh->p x sh->q, as two-value configs: the whole padded output first, then
 * square power-of-two tiles (or along an axis without one, its largest
 * size).  Returns how many (<= 16; 0 where no size fits). */
int conv_fft_sizes(const conv_problem *problem, const conv_shape *shape, conv_config sizes[16]);

/* The overlap-save tiling of `problem` (its P x Q output in tiles) for
 * fh x fw transforms; CONV_UNSUPPORTED where the transform does not hold
 * the filter, is past CONV_FFT_SIZE_MAX, or counts pass 32 bits. */
conv_status conv_fft_tiles_make(const conv_problem *problem, int64_t fh, int64_t fw,
                                const char *family, conv_fft_tiles *tiles /* OUT */,
                                conv_error *err);

/* A plan of `batch` fh x fw real transforms (CUFFT_R2C or CUFFT_C2R),
 * planes and spectra each packed, without a work area of its own: *work
 * gets the size that conv_fft_exec must be given.  *have is set once the
 * handle exists (then cufftDestroy it, even on failure). */
conv_status conv_fft_plan(cufftHandle *plan, bool *have, const conv_fft_tiles *tiles,
                          int64_t batch, cufftType type, size_t *work, const char *family,
                          conv_error *err);

/* Runs `plan` on `stream` with the work area `work`: R2C from real `in` to
 * complex `out` when `forward`, else C2R. */
conv_status conv_fft_exec(cufftHandle plan, cudaStream_t stream, void *work, void *in, void *out,
                          bool forward, const char *family, conv_error *err);

/* The planes a batch of a pass transforms. */
typedef enum conv_fft_planes {
  CONV_FFT_INPUT_TILES,   /* c x m: the input's tiles                */
  CONV_FFT_OUTPUT_TILES,  /* k x m: the output's, or its gradient's  */
  CONV_FFT_FILTER_PLANES, /* k x c/groups: the filters'              */
} conv_fft_planes;

/* An FFT family's pass over a problem: its tiling, and its three batches
 * of transforms in the order it runs them, two forward (R2C) of its
 * operands, then one inverse (C2R) of their product.  Run one after
 * another, the batches share one cuFFT work area and one buffer of real
 * planes; each has its own spectra. */
typedef struct conv_fft_pass {
  conv_fft_tiles t;
  int64_t batch[3]; /* transforms in each batch              */
  cufftHandle plan[3];
  bool have[3]; /* plan[i] exists: conv_fft_pass_destroy   */
  size_t work;  /* the largest batch's work area           */
} conv_fft_pass;

/* The tiling of `problem` for fh x fw transforms (conv_fft_tiles_make)
 * and a plan per batch, in order: batches 0 and 1 forward of `first` and
 * `second`, batch 2 the inverse of `inverse`.  On failure the plans made
 * stay for conv_fft_pass_destroy. */
conv_status conv_fft_pass_make(conv_fft_pass *pass, const conv_problem *problem, int64_t fh,
                               int64_t fw, conv_fft_planes first, conv_fft_planes second,
                               conv_fft_planes inverse, const char *family, conv_error *err);
void conv_fft_pass_destroy(conv_fft_pass *pass);
/* Runs batch i with the work area `work`: R2C from real `in` to complex
 * `out` for the first two, C2R for the last. */
conv_status conv_fft_pass_exec(const conv_fft_pass *pass, int i, cudaStream_t stream, void *work,
                               void *in, void *out, const char *family, conv_error *err);
/* Bytes of the real buffer the batches share: the largest one's planes. */
size_t conv_fft_real_bytes(const conv_fft_pass *pass);
/* Bytes of batch i's spectra. */
size_t conv_fft_spectra_bytes(const conv_fft_pass *pass, int i);

/* describe()'s start for a config of `values` values whose first two are
 * the transform size: "tile=FHxFW", or "invalid config".  Returns the
 * length of the tile text (as snprintf counts it), -1 where the config is
 * invalid or there is no room for text. */
int conv_fft_describe_tile(const conv_config *config, int values, char *text, size_t size);

/* The end of an FFT family's prepare(): `state` with `workspace_bytes`.
 * cuFFT with one plan on one GPU, and our own tile kernels, which use no
 * atomics and sum in a fixed order: the same input gives the same bits. */
conv_status conv_fft_prepared(void *state, size_t workspace_bytes, conv_prepared *out);

#endif /* CONVTUNE_FFT_PLANS_H */
