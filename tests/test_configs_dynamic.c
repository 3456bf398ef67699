/* test_configs_dynamic.c -- a CPU test of the dynamic op's scope
 * (CONV_OP_DYNAMIC): which families take its problems, and that no other
 * family lists or prepares a config for one.  The dynamic families' own
 * cases: tests/families/test_dynamic_direct.c and
 * test_dynamic_unfold_gemm.c; test_dynamic runs the op's plans. */
#include <string.h>

#include "algorithms/algorithm.h"
#include "tests/test.h"

/* Which families take dynamic problems: the two dynamic ones (the unfold
 * GEMM not backward-data) and no other, whatever the direction; and the
 * dynamic ones no convolution.  The handles only need to be non-NULL. */
static int dynamic_scope(void) {
  conv_env env;
  memset(&env, 0, sizeof env);
  env.cudnn = (cudnnHandle_t)&env;
  env.cublaslt = (cublasLtHandle_t)&env;
  conv_problem dyn;
  conv_problem_init(&dyn);
  dyn.op = CONV_OP_DYNAMIC;
  dyn.n = 2; dyn.c = dyn.k = 8; dyn.h = dyn.w = 15; dyn.r = dyn.s = 3;
  dyn.pad_h = dyn.pad_w = 1;
  dyn.groups = 8; /* depthwise-like: the shape direct_channel would take */
  conv_problem conv = dyn;
  conv.op = CONV_OP_CONVOLUTION;
  int count;
  const conv_algorithm *const *algos = conv_registry(&count);
  const conv_direction directions[] = {CONV_FORWARD, CONV_BACKWARD_DATA, CONV_BACKWARD_FILTER};
  for (int i = 0; i < count; i++)
    for (int d = 0; d < 3; d++) {
      dyn.direction = conv.direction = directions[d];
      const bool direct = algos[i]->id == CONV_ALGO_DYNAMIC_DIRECT;
      const bool unfold = algos[i]->id == CONV_ALGO_DYNAMIC_UNFOLD_GEMM;
      const bool takes = direct || (unfold && directions[d] != CONV_BACKWARD_DATA);
      CHECK_MSG(algos[i]->applicable(&dyn, &env) == takes, "%s on a dynamic problem, direction %d",
                algos[i]->name, d);
      if (direct || unfold)
        CHECK_MSG(!algos[i]->applicable(&conv, &env), "%s on a convolution", algos[i]->name);
      /* configs() of a convolution family lists nothing for it. */
      conv_config configs[8];
      int n = -1;
      if (!direct && !unfold && algos[i]->id != CONV_ALGO_CUDNN &&
          algos[i]->id != CONV_ALGO_IM2COL_GEMM && algos[i]->id != CONV_ALGO_FFT) {
        CHECK_STATUS(CONV_OK, algos[i]->configs(&dyn, &env, configs, 8, &n, NULL));
        CHECK_MSG(n == 0, "%s lists %d configs for a dynamic problem", algos[i]->name, n);
      }
      conv_prepared prepared = {0};
      conv_error err = {CONV_OK, ""};
      if (!direct && !unfold && algos[i]->id != CONV_ALGO_CUDNN) {
        CHECK_STATUS(CONV_UNSUPPORTED, algos[i]->prepare(&dyn, &env, &(conv_config){0}, &prepared,
                                                         &err));
        CHECK(prepared.state == NULL);
      }
    }
  return TEST_PASS;
}

static const test_case tests[] = {
    {"dynamic_scope", dynamic_scope},
};
TEST_MAIN(tests)
