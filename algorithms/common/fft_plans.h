/*
 * fft_plans.h -- what the FFT families (`fft` forward, `fft_filter`
 * backward-filter) share on the host: transform sizes, the tiling of a
 * problem, cuFFT plans of batches of 2-D real transforms and their
 * execution, with cuFFT's errors turned into statuses.  The kernels around
 * the transforms are in fft_tiles.h.
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

#endif /* CONVTUNE_FFT_PLANS_H */
