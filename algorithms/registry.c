/* registry.c -- every candidate family, with stable, append-only ids. */
#include <string.h>

#include "algorithms/algorithm.h"

/* Ordered by id.  Adding a family: append it here and reserve its id in
 * algorithm.h; never renumber or reuse a retired id (cache rows name them). */
static const conv_algorithm *const registry[] = {
    &conv_algorithm_cudnn,
    &conv_algorithm_im2col_gemm,
    &conv_algorithm_fft,
    &conv_algorithm_direct_channel,
    &conv_algorithm_patch,
    &conv_algorithm_dynamic_direct,
    &conv_algorithm_channel_split,
    &conv_algorithm_depthwise_nhwc,
    &conv_algorithm_filter_reduce,
    &conv_algorithm_data_gather,
    &conv_algorithm_dynamic_unfold_gemm,
    &conv_algorithm_gemm_nhwc,
    &conv_algorithm_implicit_gemm,
    &conv_algorithm_fft_filter,
    &conv_algorithm_gemm_backward,
    &conv_algorithm_patch_filter,
    &conv_algorithm_padded_gemm,
    &conv_algorithm_stem_gemm,
};

const conv_algorithm *const *conv_registry(int *count) {
  *count = (int)(sizeof registry / sizeof registry[0]);
  return registry;
}

const conv_algorithm *conv_registry_find(uint32_t id) {
  for (size_t i = 0; i < sizeof registry / sizeof registry[0]; i++)
    if (registry[i]->id == id) return registry[i];
  return NULL;
}

const conv_algorithm *conv_registry_find_name(const char *name) {
  for (size_t i = 0; i < sizeof registry / sizeof registry[0]; i++)
    if (strcmp(registry[i]->name, name) == 0) return registry[i];
  return NULL;
}
