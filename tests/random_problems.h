/*
 * random_problems.h -- seeded random numbers and random valid convolution
 * problems (odd sizes, strides, padding, dilation, groups, both layouts),
 * for the CPU and the GPU tests.  CONVTUNE_TEST_SEED=N replays a run.
 */
#ifndef CONVTUNE_TESTS_RANDOM_PROBLEMS_H
#define CONVTUNE_TESTS_RANDOM_PROBLEMS_H

#include <stdint.h>

#include "convtune.h"

/* Seeds the generator from CONVTUNE_TEST_SEED or the clock, and prints it. */
void seed_rng(void);
int64_t rng_int(int64_t lo, int64_t hi);
float rng_float(void); /* in [-1, 1) */
conv_problem random_problem(conv_math math);
conv_problem random_nhwc_depthwise_problem(conv_math math);
conv_problem random_nhwc_problem(conv_math math);
/* A random valid dynamic problem (CONV_OP_DYNAMIC; see random_problems.c). */
conv_problem random_dynamic_problem(conv_math math);

#endif /* CONVTUNE_TESTS_RANDOM_PROBLEMS_H */
