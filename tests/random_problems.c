/* random_problems.c -- seeded random convolution problems (random_problems.h). */
#include <stdio.h>
#include <stdlib.h>

#include <uv.h>

#include "tests/random_problems.h"

static uint64_t rng_state;

void seed_rng(void) {
  const char *fixed = getenv("CONVTUNE_TEST_SEED");
  rng_state = fixed ? strtoull(fixed, NULL, 10) : (uint64_t)uv_hrtime();
  printf("CONVTUNE_TEST_SEED=%llu\n", (unsigned long long)rng_state);
}

static uint64_t rng_next(void) { /* splitmix64 */
  uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

int64_t rng_int(int64_t lo, int64_t hi) {
  return lo + (int64_t)(rng_next() % (uint64_t)(hi - lo + 1));
}

float rng_float(void) { return (float)((rng_next() >> 11) * (2.0 / 9007199254740992.0) - 1.0); }

/* A random valid problem with odd sizes, strides, padding, dilation, groups. */
conv_problem random_problem(conv_math math) {
  for (;;) {
    conv_problem p;
    conv_problem_init(&p);
    p.groups = rng_int(1, 3);
    p.n = rng_int(1, 3);
    p.c = p.groups * rng_int(1, 6);
    p.k = p.groups * rng_int(1, 6);
    p.h = rng_int(1, 21);
    p.w = rng_int(1, 21);
    p.r = rng_int(1, 5);
    p.s = rng_int(1, 5);
    p.pad_h = rng_int(0, 3);
    p.pad_w = rng_int(0, 3);
    p.stride_h = rng_int(1, 3);
    p.stride_w = rng_int(1, 3);
    p.dil_h = rng_int(1, 3);
    p.dil_w = rng_int(1, 3);
    p.math = math;
    p.epilogue = (conv_epilogue)rng_int(0, 2);
    if (conv_problem_validate(&p, NULL, 0) == CONV_OK) return p;
  }
}

/* A random valid channels-last depthwise problem, with a channel
 * multiplier of 1 or 2 (depthwise_nhwc and cuDNN take it). */
conv_problem random_nhwc_depthwise_problem(conv_math math) {
  for (;;) {
    conv_problem p = random_problem(math);
    p.layout = CONV_LAYOUT_NHWC;
    p.c = p.groups = rng_int(1, 3) == 1 ? rng_int(1, 7) : 4 * rng_int(1, 12);
    p.k = p.c * rng_int(1, 2);
    if (conv_problem_validate(&p, NULL, 0) == CONV_OK) return p;
  }
}

/* A random valid channels-last problem: half of them depthwise, half any
 * (dense and grouped ones, which only cuDNN runs in NHWC). */
conv_problem random_nhwc_problem(conv_math math) {
  if (rng_int(0, 1)) return random_nhwc_depthwise_problem(math);
  conv_problem p = random_problem(math);
  p.layout = CONV_LAYOUT_NHWC;
  return p;
}

/* A random valid dynamic problem (CONV_OP_DYNAMIC): odd and even image
 * sizes from 1, k in {3, 5, 7} (now and then 1), dilation 1 or 2, groups
 * 1, 2 or 4 with 1 to 6 channels each, stride 1 or 2, 'same' padding. */
conv_problem random_dynamic_problem(conv_math math) {
  static const int64_t groups[] = {1, 2, 4}, windows[] = {3, 5, 7, 1};
  conv_problem p;
  conv_problem_init(&p);
  p.op = CONV_OP_DYNAMIC;
  p.groups = groups[rng_int(0, 2)];
  p.n = rng_int(1, 3);
  p.c = p.k = p.groups * rng_int(1, 6);
  p.h = rng_int(1, 23);
  p.w = rng_int(1, 23);
  p.r = p.s = windows[rng_int(0, 9) == 0 ? 3 : rng_int(0, 2)];
  p.dil_h = p.dil_w = rng_int(1, 2);
  p.stride_h = p.stride_w = rng_int(1, 2);
  p.pad_h = p.pad_w = (p.r - 1) / 2 * p.dil_h;
  p.math = math;
  return p;
}
