/*
 * launch_checks.h -- what the kernel families' "can this config launch?"
 * functions share: they answer false with a sentence in (why, why_size),
 * which the tuner records as the config's reason.
 */
#ifndef CONV_LAUNCH_CHECKS_H
#define CONV_LAUNCH_CHECKS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

/* Inside a function with parameters `char *why, size_t why_size`: writes
 * the reason (printf-style) and returns false. */
#define CONV_REJECT(...)                                                   \
  do {                                                                     \
    if (why != NULL && why_size > 0) snprintf(why, why_size, __VA_ARGS__); \
    return false;                                                          \
  } while (0)

/* The kernels index with 32-bit ints. */
static inline bool conv_fits_int(int64_t v) { return v >= 0 && v <= INT32_MAX; }

#endif /* CONV_LAUNCH_CHECKS_H */
