/*
 * test_registry.c -- the registry of candidate families (algorithms/registry.c)
 * against the contract algorithm.h states: ids stable and append-only, the
 * CONV_ALGO_* enum equal to the array, names unique, every callback there.
 * Cache rows name families by id, so a renumbered or reused id would make
 * shipped caches run the wrong family.
 */
#include <stdio.h>
#include <string.h>

#include "algorithms/algorithm.h"
#include "tests/test.h"

/* The families as they were first registered.  Append new ones; never edit
 * or reorder a line. */
static const struct {
  uint32_t id;
  const char *name;
} registered[] = {
    {CONV_ALGO_CUDNN, "cudnn"},
    {CONV_ALGO_IM2COL_GEMM, "im2col_gemm"},
    {CONV_ALGO_FFT, "fft"},
    {CONV_ALGO_DIRECT_CHANNEL, "direct_channel"},
    {CONV_ALGO_PATCH, "patch"},
    {CONV_ALGO_DYNAMIC_DIRECT, "dynamic_direct"},
    {CONV_ALGO_CHANNEL_SPLIT, "channel_split"},
    {CONV_ALGO_DEPTHWISE_NHWC, "depthwise_nhwc"},
    {CONV_ALGO_FILTER_REDUCE, "filter_reduce"},
    {CONV_ALGO_DATA_GATHER, "data_gather"},
    {CONV_ALGO_DYNAMIC_UNFOLD_GEMM, "dynamic_unfold_gemm"},
    {CONV_ALGO_GEMM_NHWC, "gemm_nhwc"},
    {CONV_ALGO_IMPLICIT_GEMM, "implicit_gemm"},
    {CONV_ALGO_FFT_FILTER, "fft_filter"},
    {CONV_ALGO_GEMM_BACKWARD, "gemm_backward"},
    {CONV_ALGO_PATCH_FILTER, "patch_filter"},
    {CONV_ALGO_PADDED_GEMM, "padded_gemm"},
    {CONV_ALGO_STEM_GEMM, "stem_gemm"},
};
#define REGISTERED ((int)(sizeof registered / sizeof registered[0]))

/* Ids 1, 2, 3, ... in array order, each the enum's value for its name. */
static int ids_are_the_enum_in_order(void) {
  int count = 0;
  const conv_algorithm *const *algos = conv_registry(&count);
  CHECK_MSG(count >= REGISTERED, "%d families registered, %d before", count, REGISTERED);
  for (int i = 0; i < count; i++)
    CHECK_MSG(algos[i]->id == (uint32_t)i + 1, "entry %d has id %u", i, algos[i]->id);
  for (int i = 0; i < REGISTERED; i++) {
    CHECK_MSG(registered[i].id == (uint32_t)i + 1, "CONV_ALGO for %s is %u", registered[i].name,
              registered[i].id);
    CHECK_MSG(strcmp(algos[i]->name, registered[i].name) == 0, "id %u is %s, was %s",
              registered[i].id, algos[i]->name, registered[i].name);
  }
  return TEST_PASS;
}

static int names_unique_and_found(void) {
  int count = 0;
  const conv_algorithm *const *algos = conv_registry(&count);
  for (int i = 0; i < count; i++) {
    for (int j = 0; j < i; j++)
      CHECK_MSG(strcmp(algos[i]->name, algos[j]->name) != 0, "%s registered twice",
                algos[i]->name);
    CHECK(conv_registry_find(algos[i]->id) == algos[i]);
    CHECK(conv_registry_find_name(algos[i]->name) == algos[i]);
  }
  CHECK(conv_registry_find(0) == NULL);
  CHECK(conv_registry_find((uint32_t)count + 1) == NULL);
  CHECK(conv_registry_find_name("no_such_family") == NULL);
  return TEST_PASS;
}

/* The tuner and plans call every callback unguarded. */
static int every_callback_present(void) {
  int count = 0;
  const conv_algorithm *const *algos = conv_registry(&count);
  for (int i = 0; i < count; i++) {
    const conv_algorithm *a = algos[i];
    CHECK_MSG(a->version >= 1, "%s: version %u", a->name, a->version);
    CHECK_MSG(a->applicable && a->configs && a->prepare && a->run && a->release && a->describe,
              "%s lacks a callback", a->name);
    CHECK_MSG(strlen(a->name) < 32, "%s: a cache row keeps 31 characters of a name", a->name);
  }
  return TEST_PASS;
}

static const test_case tests[] = {
    {"ids_are_the_enum_in_order", ids_are_the_enum_in_order},
    {"names_unique_and_found", names_unique_and_found},
    {"every_callback_present", every_callback_present},
};
TEST_MAIN(tests)
