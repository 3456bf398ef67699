/*
 * probe.c -- proof that a sanitizer build really checks.  Each mode makes
 * one deliberate error; CTest passes the mode only when the sanitizer's
 * report appears (PASS_REGULAR_EXPRESSION in CMakeLists.txt), so a build
 * whose flags stop instrumenting, or that recovers from a report, fails.
 *
 *   sanitizer_probe library_overflow  an 8-byte read by library code from a
 *                                   4-byte heap block: only instrumented
 *                                   library code can see it (no libc call
 *                                   is involved for an interceptor to check)
 *   sanitizer_probe signed_overflow signed int overflow in this file
 *   sanitizer_probe leak            a block that is never freed
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "convtune.h"

static int library_overflow(void) {
  /* conv_problem_set_patches reads problem->struct_size (8 bytes at offset 0). */
  conv_problem *too_small = malloc(4);
  if (too_small == NULL) return 2;
  conv_status st = conv_problem_set_patches(too_small, 2, 3);
  printf("not caught: conv_problem_set_patches returned %s\n", conv_status_string(st));
  free(too_small);
  return 0;
}

static int signed_overflow(void) {
  volatile int big = 2147483647, one = 1;
  int sum = big + one;
  printf("not caught: INT_MAX + 1 = %d\n", sum);
  return 0;
}

static int leak(void) {
  volatile char *lost = malloc(64);
  if (lost == NULL) return 2;
  lost[0] = 1;
  lost = NULL;
  printf("leaked 64 bytes; LeakSanitizer reports them at exit\n");
  return 0;
}

int main(int argc, char **argv) {
  static const struct {
    const char *name;
    int (*fn)(void);
  } modes[] = {{"library_overflow", library_overflow},
               {"signed_overflow", signed_overflow},
               {"leak", leak}};
  for (size_t i = 0; argc == 2 && i < sizeof modes / sizeof modes[0]; i++)
    if (strcmp(argv[1], modes[i].name) == 0) return modes[i].fn();
  fprintf(stderr, "usage: sanitizer_probe library_overflow|signed_overflow|leak\n");
  return 2;
}
