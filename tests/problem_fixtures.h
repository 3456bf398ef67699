/*
 * problem_fixtures.h -- named suite shapes, devices and scope checks the
 * CPU config tests share (header-only: no library to link).
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
