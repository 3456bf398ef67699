/* test_configs.c -- CPU tests of what several candidate families share:
 * the kernels' division by a launch constant (divisor.h), programmatic
 * dependent launch in the launch-bound families' plans, and the rule that
 * each family's own cases are in tests/families/test_FAMILY.c.  No GPU
 * needed. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "algorithms/direct_channel.h"
#include "algorithms/filter_reduce.h"
#include "algorithms/algorithm.h"
#include "tests/problem_fixtures.h"
#include "tests/test.h"

/* The kernels' division by a launch constant: (umulhi(n, m) + n) >> s in
 * 32-bit arithmetic, as direct_window.cu computes it, must be n / d. */
static uint32_t divide_like_kernel(uint32_t n, conv_divisor d) {
  const uint32_t hi = (uint32_t)(((uint64_t)n * d.multiplier) >> 32);
  return (hi + n) >> d.shift;
}

static int divisor_matches_division(void) {
  uint64_t state = 0x9E3779B97F4A7C15ull;
  for (int d = 1; d <= 70000; d += d < 300 ? 1 : 997) {
    const conv_divisor v = conv_divisor_make(d);
    CHECK(v.divisor == (uint32_t)d);
    const uint32_t edges[] = {0, 1, (uint32_t)d - 1, (uint32_t)d, (uint32_t)d + 1,
                              2u * (uint32_t)d - 1, 0x7FFFFFFFu, 0x7FFFFFFFu - (uint32_t)d};
    for (size_t i = 0; i < sizeof edges / sizeof edges[0]; i++)
      CHECK_MSG(divide_like_kernel(edges[i], v) == edges[i] / (uint32_t)d, "%u / %d",
                edges[i], d);
    for (int i = 0; i < 2000; i++) {
      state = state * 6364136223846793005ull + 1442695040888963407ull;
      const uint32_t n = (uint32_t)(state >> 33); /* below 2^31 */
      CHECK_MSG(divide_like_kernel(n, v) == n / (uint32_t)d, "%u / %d", n, d);
    }
  }
  return TEST_PASS;
}

/* Whether a prepared plan of `algo` for `p` launches with programmatic
 * dependent launch, on a device of compute capability `major`.x;
 * -1 if it does not prepare. */
static int prepared_pdl(const conv_algorithm *algo, const conv_problem *p,
                        const conv_config *config, int major) {
  conv_env env;
  memset(&env, 0, sizeof env);
  env.device.cc_major = major;
  conv_prepared prep;
  if (algo->prepare(p, &env, config, &prep, NULL) != CONV_OK) return -1;
  const bool pdl = algo->id == CONV_ALGO_DIRECT_CHANNEL
                       ? ((const conv_direct_launch *)prep.state)->pdl
                       : ((const conv_filter_reduce_launch *)prep.state)->pdl;
  algo->release(prep.state);
  return pdl;
}

/* The launch-bound families (direct_channel, filter_reduce) launch with
 * programmatic dependent launch on sm_90 and later, not before, and not
 * where CONVTUNE_PDL=0 is set when the plan is made. */
static int launch_bound_plans_use_pdl_on_sm90(void) {
  const conv_algorithm *dc = conv_registry_find(CONV_ALGO_DIRECT_CHANNEL);
  const conv_algorithm *fr = conv_registry_find(CONV_ALGO_FILTER_REDUCE);
  CHECK(dc != NULL && fr != NULL);
  const conv_problem forward = depthwise_problem();
  conv_problem filter = forward;
  filter.direction = CONV_BACKWARD_FILTER;
  const conv_config window = {6, {CONV_DIRECT_WINDOW, 2, 8, 1, 28, 7}, 0};
  const conv_config bands = {5, {8, 128, 1, 0, 0}, 0};
  CHECK(unsetenv("CONVTUNE_PDL") == 0);
  CHECK(prepared_pdl(dc, &forward, &window, 9) == 1 && prepared_pdl(dc, &forward, &window, 8) == 0);
  CHECK(prepared_pdl(fr, &filter, &bands, 9) == 1 && prepared_pdl(fr, &filter, &bands, 8) == 0);
  CHECK(setenv("CONVTUNE_PDL", "0", 1) == 0);
  const int dc_off = prepared_pdl(dc, &forward, &window, 9);
  const int fr_off = prepared_pdl(fr, &filter, &bands, 9);
  CHECK(unsetenv("CONVTUNE_PDL") == 0);
  CHECK(dc_off == 0 && fr_off == 0);
  return TEST_PASS;
}

/* Every registered family has its tests/families/test_FAMILY.c, and every
 * file there is a registered family's, so that "where is family X tested"
 * has one answer and CMake (which builds each file there) runs them all. */
static int every_family_has_tests(void) {
  int count;
  const conv_algorithm *const *algos = conv_registry(&count);
  char path[4096];
  for (int i = 0; i < count; i++) {
    snprintf(path, sizeof path, "%s/tests/families/test_%s.c", CONVTUNE_SOURCE_DIR,
             algos[i]->name);
    CHECK_MSG(access(path, R_OK) == 0, "%s has no test file (%s)", algos[i]->name, path);
  }
  snprintf(path, sizeof path, "%s/tests/families", CONVTUNE_SOURCE_DIR);
  DIR *dir = opendir(path);
  CHECK_MSG(dir != NULL, "%s", path);
  int files = 0;
  for (struct dirent *e = readdir(dir); e != NULL; e = readdir(dir)) {
    const size_t len = strlen(e->d_name);
    if (len < 8 || strncmp(e->d_name, "test_", 5) != 0 || strcmp(e->d_name + len - 2, ".c") != 0)
      continue;
    char family[256];
    snprintf(family, sizeof family, "%.*s", (int)(len - 7), e->d_name + 5);
    CHECK_MSG(conv_registry_find_name(family) != NULL, "tests/families/%s: no family %s",
              e->d_name, family);
    files++;
  }
  closedir(dir);
  CHECK_MSG(files == count, "%d family test files, %d families", files, count);
  return TEST_PASS;
}

static const test_case tests[] = {
    {"divisor_matches_division", divisor_matches_division},
    {"launch_bound_plans_use_pdl_on_sm90", launch_bound_plans_use_pdl_on_sm90},
    {"every_family_has_tests", every_family_has_tests},
};
TEST_MAIN(tests)
