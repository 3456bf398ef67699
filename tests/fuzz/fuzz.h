/* fuzz.h -- what the fuzz targets share. */
#ifndef CONVTUNE_TESTS_FUZZ_H
#define CONVTUNE_TESTS_FUZZ_H

#include <stdio.h>
#include <stdlib.h>

/* A property of the output that must hold: abort() (a finding) if not. */
#define REQUIRE(cond)                                                          \
  do {                                                                         \
    if (!(cond)) {                                                             \
      fprintf(stderr, "%s:%d: REQUIRE failed: %s\n", __FILE__, __LINE__,      \
              #cond);                                                          \
      abort();                                                                 \
    }                                                                          \
  } while (0)

#endif /* CONVTUNE_TESTS_FUZZ_H */
