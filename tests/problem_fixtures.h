/*
 * problem_fixtures.h -- named suite shapes and devices the CPU config
 * tests share (header-only: no library to link).
 */
#ifndef CONVTUNE_TESTS_PROBLEM_FIXTURES_H
#define CONVTUNE_TESTS_PROBLEM_FIXTURES_H

#include <string.h>

#include "convtune.h"
#include "runtime/internal.h"

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

#endif /* CONVTUNE_TESTS_PROBLEM_FIXTURES_H */
