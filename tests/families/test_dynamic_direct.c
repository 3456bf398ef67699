/* test_dynamic_direct.c -- the dynamic_direct family (the dynamic op,
 * CONV_OP_DYNAMIC, by direct per-pixel kernels).  CPU: every listed config
 * plans and its grid covers the pass's pixels, channels and images, in all
 * three directions, and what it refuses, with reasons (where planning a
 * config needs a device, what it must get without one).  GPU (skipped
 * without one): every config of the three directions against the CPU
 * reference, on the dynamic op's fixed shapes and random ones
 * (gpu_support.c).  Which families take dynamic problems:
 * test_configs_dynamic.c. */
#include <stdint.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "algorithms/dynamic_direct.h"
#include "tests/gpu_support.h"

/* dynamic_direct: every listed config plans and its grid covers the
 * pass's pixels, channels and images; what it refuses, with reasons. */
static int dynamic_direct_configs(void) {
  conv_env env;
  memset(&env, 0, sizeof env);
  const conv_algorithm *dd = conv_registry_find(CONV_ALGO_DYNAMIC_DIRECT);
  CHECK(dd != NULL && strcmp(dd->name, "dynamic_direct") == 0);
  conv_problem p;
  char message[256];
  CHECK_STATUS(CONV_OK, conv_problem_parse("op=dynamic n=32 c=64 h=56 w=56 r=7 g=4", &p, message,
                                           sizeof message));
  const conv_direction directions[] = {CONV_FORWARD, CONV_BACKWARD_DATA, CONV_BACKWARD_FILTER};
  int devices = 0;
  const bool gpu = cudaGetDeviceCount(&devices) == cudaSuccess && devices > 0;
  conv_config configs[256];
  for (int d = 0; d < 3; d++)
    for (int stride = 1; stride <= 2; stride++) {
      p.direction = directions[d];
      p.stride_h = p.stride_w = stride;
      int n = -1, resident = 0;
      CHECK_STATUS(CONV_OK, dd->configs(&p, &env, configs, 256, &n, NULL));
      CHECK_MSG(n > 0 && n < 256, "direction %d stride %d: %d configs", d, stride, n);
      for (int i = 0; i < n; i++) {
        CHECK(configs[i].count == 5);
        const conv_dyn_direct_tiling t = {(int)configs[i].values[0], (int)configs[i].values[1],
                                          (int)configs[i].values[2], (int)configs[i].values[3],
                                          (int)configs[i].values[4]};
        resident += t.form == CONV_DYN_DIRECT_RESIDENT;
        conv_dyn_direct_launch l;
        char why[160] = "";
        CHECK_MSG(conv_dyn_direct_plan(&p, &t, &l, why, sizeof why), "%s", why);
        const bool data = p.direction == CONV_BACKWARD_DATA;
        CHECK(t.px == 1 || (t.px == 2 && p.direction == CONV_FORWARD));
        CHECK((int64_t)l.tiles_x * t.tw * t.px >= (data ? p.w : l.d.q));
        CHECK((int64_t)l.tiles_y * t.th >= (data ? p.h : l.d.p));
        CHECK((int64_t)l.chunks * t.cb >= 16 && (int64_t)(l.chunks - 1) * t.cb < 16);
        CHECK((int64_t)l.blocks == (int64_t)l.tiles_x * l.tiles_y * l.chunks * 4 * 32);
        CHECK(p.direction != CONV_BACKWARD_FILTER || t.cb == 16);
        /* Staged: all but backward-data with stride 2; float2 rows with pixel pairs. */
        if (data && stride == 2) CHECK(l.smem_bytes == 0);
        else CHECK(l.in_w >= (t.tw * t.px - 1) * (data ? 1 : stride) + 7);
        if (t.form == CONV_DYN_DIRECT_RESIDENT)
          CHECK(p.direction == CONV_FORWARD && t.cb <= CONV_DYN_DIRECT_RESIDENT_MAX &&
                l.smem_bytes == (size_t)t.cb * l.in_w * l.in_h * 4 &&
                l.smem_bytes <= CONV_DYN_DIRECT_SMEM_MAX);
        else CHECK(l.smem_bytes <= 48 * 1024);
        CHECK(t.px == 1 || l.in_w % 2 == 0);
        conv_prepared prepared = {0};
        /* Past 48 KiB the kernel's shared memory limit is raised, which
         * takes a device: without one, prepare says so. */
        const bool needs_device = l.smem_bytes > 48 * 1024;
        CHECK_STATUS(needs_device && !gpu ? CONV_CUDA_ERROR : CONV_OK,
                     dd->prepare(&p, &env, &configs[i], &prepared, NULL));
        if (prepared.state == NULL) continue;
        CHECK(prepared.deterministic && prepared.workspace_bytes == 0);
        dd->release(prepared.state);
      }
      /* Forward lists both forms; the backward passes the stepped one. */
      CHECK_MSG((resident > 0) == (p.direction == CONV_FORWARD), "direction %d: %d resident", d,
                resident);
    }
  /* Refusals. */
  p.direction = CONV_FORWARD;
  p.stride_h = p.stride_w = 1;
  conv_dyn_direct_launch l;
  char why[160] = "";
  CHECK(!conv_dyn_direct_plan(&p, &(conv_dyn_direct_tiling){12, 8, 16, 1, 0}, &l, why, sizeof why));
  CHECK(strstr(why, "multiple of 8") != NULL);
  CHECK(!conv_dyn_direct_plan(&p, &(conv_dyn_direct_tiling){32, 16, 16, 1, 0}, &l, why, sizeof why));
  CHECK(!conv_dyn_direct_plan(&p, &(conv_dyn_direct_tiling){32, 8, 17, 1, 0}, &l, why, sizeof why));
  CHECK(strstr(why, "cb = 17") != NULL);
  CHECK(!conv_dyn_direct_plan(&p, &(conv_dyn_direct_tiling){32, 8, 16, 3, 0}, &l, why, sizeof why));
  CHECK(strstr(why, "px = 3") != NULL);
  CHECK(!conv_dyn_direct_plan(&p, &(conv_dyn_direct_tiling){32, 8, 16, 1, 2}, &l, why, sizeof why));
  CHECK(strstr(why, "form 2") != NULL);
  /* The resident form: at most 16 channels staged, forward only, and its
   * shared memory is the chunk's tiles. */
  conv_problem wide_group = p;
  wide_group.c = wide_group.k = 128;
  CHECK(!conv_dyn_direct_plan(&wide_group, &(conv_dyn_direct_tiling){32, 8, 32, 1, 1}, &l, why,
                              sizeof why));
  CHECK(strstr(why, "at most 16 channels") != NULL);
  CHECK(conv_dyn_direct_plan(&wide_group, &(conv_dyn_direct_tiling){32, 8, 16, 1, 1}, &l, why,
                             sizeof why));
  CHECK(l.smem_bytes == (size_t)16 * (32 + 6) * (8 + 6) * 4);
  conv_problem dilated = p;
  dilated.dil_h = dilated.dil_w = 3;
  dilated.pad_h = dilated.pad_w = 9;
  CHECK(conv_dyn_direct_plan(&dilated, &(conv_dyn_direct_tiling){32, 8, 16, 1, 0}, &l, why, sizeof why));
  CHECK(!conv_dyn_direct_plan(&dilated, &(conv_dyn_direct_tiling){32, 8, 16, 2, 0}, &l, why, sizeof why));
  CHECK(strstr(why, "dilation 1 or 2") != NULL);
  CHECK(!conv_dyn_direct_plan(&dilated, &(conv_dyn_direct_tiling){32, 8, 16, 1, 1}, &l, why,
                              sizeof why));
  CHECK(strstr(why, "resident form") != NULL);
  p.direction = CONV_BACKWARD_FILTER;
  CHECK(!conv_dyn_direct_plan(&p, &(conv_dyn_direct_tiling){32, 8, 4, 1, 0}, &l, why, sizeof why));
  CHECK(strstr(why, "whole group") != NULL);
  CHECK(!conv_dyn_direct_plan(&p, &(conv_dyn_direct_tiling){32, 8, 16, 2, 0}, &l, why, sizeof why));
  CHECK(strstr(why, "forward only") != NULL);
  CHECK(!conv_dyn_direct_plan(&p, &(conv_dyn_direct_tiling){32, 8, 16, 1, 1}, &l, why, sizeof why));
  CHECK(strstr(why, "resident form: forward only") != NULL);
  /* A dilation whose halo does not fit in shared memory. */
  conv_problem wide = p;
  wide.dil_h = wide.dil_w = 200;
  wide.pad_h = wide.pad_w = 600;
  CHECK(!conv_dyn_direct_plan(&wide, &(conv_dyn_direct_tiling){32, 8, 16, 1, 0}, &l, why, sizeof why));
  CHECK(strstr(why, "shared memory") != NULL);
  /* 9x9 has no kernel: not applicable, and a cached config is refused. */
  conv_problem nine = p;
  nine.r = nine.s = 9;
  nine.pad_h = nine.pad_w = 4;
  CHECK_STATUS(CONV_OK, conv_problem_validate(&nine, NULL, 0));
  CHECK(!dd->applicable(&nine, &env));
  conv_prepared prepared = {0};
  CHECK_STATUS(CONV_UNSUPPORTED,
               dd->prepare(&nine, &env, &(conv_config){5, {32, 8, 16, 1, 0}, 0}, &prepared, NULL));
  CHECK_STATUS(CONV_UNSUPPORTED,
               dd->prepare(&p, &env, &(conv_config){5, {32, 8, -1, 1, 0}, 0}, &prepared, NULL));
  /* A version 2 config (four values) is refused, not misread. */
  CHECK_STATUS(CONV_UNSUPPORTED,
               dd->prepare(&p, &env, &(conv_config){4, {32, 8, 16, 1}, 0}, &prepared, NULL));
  CHECK_STATUS(CONV_UNSUPPORTED, dd->prepare(&p, &env, &(conv_config){2, {32, 8}, 0}, &prepared, NULL));
  return TEST_PASS;
}

static int dynamic_direct_every_config(void) {
  return dynamic_every_config(CONV_ALGO_DYNAMIC_DIRECT, true);
}

static const labelled_test_case tests[] = {
    {"dynamic_direct_configs", dynamic_direct_configs, "cpu"},
    {"dynamic_direct_every_config", dynamic_direct_every_config, "gpu"},
};
TEST_MAIN(tests)
