/*
 * problem_fixtures.h -- named suite shapes, devices and scope checks the
 * CPU config tests (the families' CPU cases, tests/families/, and
 * test_configs*.c) share (header-only: no library to link).
 */
#ifndef CONVTUNE_TESTS_PROBLEM_FIXTURES_H
#define CONVTUNE_TESTS_PROBLEM_FIXTURES_H

#include <string.h>

#include "convtune.h"
#include "algorithms/algorithm.h"
#include "tests/test.h"

/* The suite's fft_few_ch_31 (8 images of 4 channels, 512x512, a 31x31
 * "same" filter, 4 outputs), in `direction`. */
static inline conv_problem few_channels_31x31(conv_direction direction) {
  conv_problem p;
  conv_problem_init(&p);
  p.n = 8; p.c = 4; p.h = 512; p.w = 512; p.k = 4; p.r = 31; p.s = 31;
  p.pad_h = p.pad_w = 15;
  p.direction = direction;
  return p;
}

/* MobileNetV2's depthwise 3x3 layer at 56x56 (144 channels, "same"
 * padding), batch 32. */
static inline conv_problem depthwise_problem(void) {
  conv_problem p;
  conv_problem_init(&p);
  p.n = 32; p.c = 144; p.h = 56; p.w = 56; p.k = 144; p.r = 3; p.s = 3;
  p.pad_h = p.pad_w = 1;
  p.groups = 144;
  return p;
}

/* A pass in `direction` over 2 images of 37x29: c -> k channels in
 * `groups`, a square r x r filter, equal strides, padding and dilation on
 * both axes. */
static inline conv_problem pass_problem(int64_t c, int64_t k, int64_t groups, int64_t r,
                                        int64_t stride, int64_t pad, int64_t dil,
                                        conv_direction direction) {
  conv_problem p;
  conv_problem_init(&p);
  p.n = 2; p.c = c; p.h = 37; p.w = 29; p.k = k; p.r = p.s = r;
  p.stride_h = p.stride_w = stride;
  p.pad_h = p.pad_w = pad;
  p.dil_h = p.dil_w = dil;
  p.groups = groups;
  p.direction = direction;
  return p;
}

/* An H100 as the families see it (compute capability 9.0, 132 SMs), for
 * the families built for sm_90a only. */
static inline conv_env hopper_env(void) {
  conv_env env;
  memset(&env, 0, sizeof env);
  env.device.sm_count = 132, env.device.cc_major = 9, env.device.cc_minor = 0;
  return env;
}

/* A TF32-only family: `p` (TF32) in strict fp32 is not its to take, and
 * it lists no config for it. */
static inline int refuses_strict(const conv_algorithm *a, const conv_problem *p,
                                 conv_env *env) {
  conv_problem strict = *p;
  strict.math = CONV_MATH_STRICT;
  CHECK(!a->applicable(&strict, env));
  conv_config configs[8];
  int n = -1;
  CHECK_STATUS(CONV_OK, a->configs(&strict, env, configs, 8, &n, NULL));
  CHECK(n == 0);
  return TEST_PASS;
}

/* The scope checks every TF32 wgmma family (padded_gemm, stem_gemm)
 * shares: registered under `id` and `name`; takes `p` on an H100 and with
 * no device (the problem decides); not `p` in strict fp32, where it lists
 * no config; neither offers nor prepares `config` on compute capability
 * 8.0, saying why ("name: ... 9.0"). */
static inline int wgmma_family_scope(uint32_t id, const char *name, const conv_problem *p,
                                     const conv_config *config) {
  const conv_algorithm *a = conv_registry_find(id);
  CHECK(a != NULL && strcmp(a->name, name) == 0);
  CHECK(conv_registry_find_name(name) == a);
  conv_env env = hopper_env();
  CHECK(a->applicable(p, &env));
  CHECK(a->applicable(p, NULL));
  if (refuses_strict(a, p, &env) != TEST_PASS) return TEST_FAIL;
  conv_env ampere = env;
  ampere.device.cc_major = 8;
  CHECK(!a->applicable(p, &ampere));
  conv_prepared prep;
  conv_error err = {CONV_OK, ""};
  CHECK_STATUS(CONV_UNSUPPORTED, a->prepare(p, &ampere, config, &prep, &err));
  const size_t len = strlen(name);
  CHECK(strncmp(err.message, name, len) == 0 && err.message[len] == ':' &&
        strstr(err.message, "9.0") != NULL);
  return TEST_PASS;
}

#endif /* CONVTUNE_TESTS_PROBLEM_FIXTURES_H */
