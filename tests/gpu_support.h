/*
 * gpu_support.h -- what the GPU test programs (test_gpu.c: the reference
 * and every family at once; the family tests, tests/families/; test_plans.c:
 * plans end to end; test_backward.c and test_dynamic.c: the backward passes
 * and the dynamic op) share: host and device test cases with the CPU
 * reference (cpu_reference.h), the family runners that judge every config,
 * backward cases, the dynamic op's shapes, contexts and temporary caches;
 * and, through random_problems.h, seeded random problems.  Definitions and
 * their comments in gpu_support.c.
 */
#ifndef CONVTUNE_TESTS_GPU_SUPPORT_H
#define CONVTUNE_TESTS_GPU_SUPPORT_H

#include <stdbool.h>
#include <stdint.h>

#include "algorithms/algorithm.h"
#include "tests/random_problems.h"
#include "tests/test.h"

#define SKIP_WITHOUT_GPU()                                                     \
  do {                                                                         \
    int count_ = 0;                                                            \
    cudaError_t rc_ = cudaGetDeviceCount(&count_);                             \
    if (rc_ != cudaSuccess || count_ == 0) {                                   \
      printf("no CUDA device (%s): skipping\n", cudaGetErrorString(rc_));     \
      return TEST_SKIP;                                                        \
    }                                                                          \
  } while (0)

#define CUDA_OK(call)                                                          \
  do {                                                                         \
    cudaError_t e_ = (call);                                                   \
    CHECK_MSG(e_ == cudaSuccess, "%s: %s", #call, cudaGetErrorString(e_));     \
  } while (0)

/* Host tensors of a problem, in any direction, plus the CPU reference of
 * the pass's output (sh.out_elems values: y, dx or dw).  dy is random for
 * the backward passes and NULL for forward.  For a half problem x, w and
 * dy hold values of its type (rounded on the device: host_case_make needs
 * a GPU then); the bias is fp32 always. */
typedef struct host_case {
  conv_problem p;
  conv_shape sh;
  float *x, *w, *bias, *dy, *ref;
} host_case;

/* Device copies of a host case (y holds dy for the backward passes) and
 * `out`, the one of x, w and y that the pass writes.  x, w and y hold
 * elements of the problem's dtype (typed float *, as conv_exec's are). */
typedef struct dev_case {
  float *x, *w, *bias, *y;
  float *out;
} dev_case;

/* Counts per family, printed as the test's summary, and the largest
 * relative L2 error of a config that matched (the evidence for the
 * validation bounds). */
typedef struct family_count {
  int ran, unsupported, wrong_caught;
  double worst_error;
} family_count;

/* Checks a family's reference test makes per case, after every config ran. */
typedef int (*case_check)(conv_env *env, const conv_problem *p, const char *name);

/* ---- runs, seeds, random problems */

/* CONVTUNE_TEST_QUICK=1 (sanitizer runs): fewer random shapes, fast tuning. */
bool quick_mode(void);
conv_policy tuning_policy(void);
/* n c h w k r s, then stride, pad, dilation (both axes), groups, epilogue, math. */
conv_problem direct_problem(int64_t n, int64_t c, int64_t h, int64_t w, int64_t k, int64_t r,
                            int64_t s, int64_t stride, int64_t pad, int64_t dil, int64_t groups,
                            conv_epilogue epilogue, conv_math math);
/* `p` with channels-last (NHWC) tensors (and so K R S C filters). */
conv_problem channels_last(conv_problem p);
void describe_problem(const conv_problem *p, char *text, size_t size);

/* ---- test cases: host tensors with the CPU reference, device copies */

int host_case_make(host_case *hc, const conv_problem *p);
/* After a test set x, w, bias and dy of its own: x, w and dy rounded to the
 * problem's dtype again and the CPU reference recomputed. */
int host_case_refresh(host_case *hc);
void host_case_free(host_case *hc);
int dev_case_make(dev_case *d, const host_case *hc);
void dev_case_free(dev_case *d);
int poison(const dev_case *d, const host_case *hc, cudaStream_t stream);
/* The device reference kernel of the case's pass into ref (sh.out_elems). */
int reference_pass(const dev_case *d, const host_case *hc, float *ref);
int check_output(const dev_case *d, const host_case *hc, cudaStream_t stream, double bound,
                 const char *what);
/* One pass of `plan` on d through the public call of `direction`
 * (conv_plan_execute with d's bias, which it ignores without an epilogue,
 * conv_plan_backward_data, conv_plan_backward_filter), on stream 0. */
conv_status execute_case(conv_plan *plan, const dev_case *d, conv_direction direction);

/* ---- candidate families */

int open_env(conv_env *env);
void close_env(conv_env *env);
/* Later run_every_config calls (and what runs through them) run only the
 * first `cap` configs a family lists, 0 every one: for families whose
 * every config is compiled at run time (a second each). */
void set_config_cap(int cap);
int run_every_config(conv_env *env, const conv_algorithm *algo, const host_case *hc,
                     const dev_case *d, const float *dev_ref, void *scratch, family_count *count);
int run_family_on_cases(const conv_algorithm *algo, const conv_problem *cases, size_t ncases,
                        case_check check, family_count *count);
/* Every config of every registered family that takes `p` (run_every_config)
 * on one case of fresh random inputs; counts[i] adds up family i's (in
 * registry order, at most `max` families). */
int run_every_family(conv_env *env, const conv_problem *p, void *scratch, family_count counts[],
                     int max);
int prepared_configs(conv_env *env, const conv_algorithm *algo, const conv_problem *p,
                     bool (*accept)(const void *state));

/* What a test that runs every family on several cases holds: the device
 * environment, the registry, each family's counts (registry order) and
 * the comparison scratch.  family_sweep_run is run_every_family on it. */
#define FAMILY_SWEEP_MAX 32
typedef struct family_sweep {
  conv_env env;
  const conv_algorithm *const *algos;
  int count;
  family_count counts[FAMILY_SWEEP_MAX];
  void *scratch;
} family_sweep;
int family_sweep_open(family_sweep *s);
int family_sweep_run(family_sweep *s, const conv_problem *p);
void family_sweep_close(family_sweep *s);

/* TEST_PASS on compute capability 9.0 (the wgmma families), else
 * TEST_SKIP (saying that `family`'s test is skipped) or TEST_FAIL. */
int wgmma_device(const char *family);

/* ---- backward passes */

/* A backward case: host tensors and the CPU reference (host_case), device
 * copies whose `out` is dx or dw (dev_case). */
typedef struct pass_case {
  host_case hc;
  dev_case d;
} pass_case;
int pass_case_make(pass_case *pc, const conv_problem *p);
void pass_case_free(pass_case *pc);
int pass_poison(const pass_case *pc);
int pass_check(const pass_case *pc, double bound, const char *what);
int family_passes_match_reference(const conv_algorithm *algo, const conv_problem *passes,
                                  size_t count, int min_ran);
void set_direction(conv_problem *cases, size_t count, conv_direction direction);

/* ---- half precision in the library families */

/* On the CPU, with stand-in handles: `algo` takes each of `takes` (their
 * dtype replaced) in fp32, fp16 and bf16, and none in a dtype out of the
 * enum; each of `refuses` in fp16 and bf16 it refuses, lists no config
 * for, and a config for it (as from a cache) prepare() refuses with
 * CONV_UNSUPPORTED and a message that names the family, nothing kept. */
int half_scope(const conv_algorithm *algo, const conv_problem *takes, size_t n_takes,
               const conv_problem *refuses, size_t n_refuses);
/* Every config of `algo` on each case made `dtype` (math strict) against
 * the CPU reference, on fresh random inputs rounded to the type, into
 * poisoned outputs, within the tuner's bound for the type
 * (run_family_on_cases); prints a summary naming `pass`.  Each case must
 * have a right config and none may be wrong. */
int half_family_matches_reference(const conv_algorithm *algo, const conv_problem *cases,
                                  size_t count, conv_dtype dtype, const char *pass);
/* The same where cuBLASLt may have no algorithm for a case (operands only
 * 2-byte aligned: odd leading dimensions or group offsets): a case `algo`
 * lists no config for is printed and passed over (the family then answers
 * nothing for it, cleanly); every config listed must be right. */
int half_family_where_listed(const conv_algorithm *algo, const conv_problem *cases,
                             size_t count, conv_dtype dtype, const char *pass);
/* An fp16 forward problem `p` (c*r*s >= 512) on inputs whose every sum is
 * past fp16's range (about 73,700): without an epilogue every config of
 * `algo` writes outputs the tuner's check (conv_relative_l2: non-finite,
 * or past the bound) rejects though the reference is finite; with
 * CONV_EPILOGUE_BIAS, a bias of about -20,000 brings the outputs back to
 * about 53,700, and every config must be right: the bias added to the
 * fp32 sums before the one rounding. */
int half_overflow_judged(const conv_algorithm *algo, conv_problem p);

/* ---- the dynamic op (CONV_OP_DYNAMIC) */

/* The three passes, in this order, and their names. */
extern const conv_direction every_direction[3];
extern const char *const every_direction_name[3];
/* Fixed shapes 0 .. DYNAMIC_SHAPES - 1, as problems. */
#define DYNAMIC_SHAPES 7
conv_problem dynamic_shape_problem(int i, conv_direction direction, conv_math math);
int dynamic_cases(conv_direction direction, conv_problem **out, size_t *count);
int dynamic_every_config(uint32_t family, bool backward_data);

/* ---- contexts and caches */

int make_context(conv_context **ctx, const char *cache, conv_policy policy, size_t ws_limit);
void temp_path(char *path, size_t size, const char *name);
void remove_db(const char *path);

/* Makes the context's plan of `p`, runs it on fresh random inputs and
 * compares it with the CPU reference; *info gets its info. */
int context_plan_matches_reference(conv_context *ctx, const conv_problem *p, conv_plan_info *info);

/* What a cache file holds, read through the public reader: its winners
 * (those tuned under this build's versions apart), its pending problems and
 * the last one's reason and device. */
typedef struct cache_counts {
  int winners, winners_now, pending;
  char reason[32], device[CONV_DEVICE_FINGERPRINT_MAX];
} cache_counts;
int read_cache_counts(const char *path, cache_counts *c);

#endif /* CONVTUNE_TESTS_GPU_SUPPORT_H */
