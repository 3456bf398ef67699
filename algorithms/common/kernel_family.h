/*
 * kernel_family.h -- the host shell of a family that runs our own kernel:
 * one launch plan (a malloc'd struct) per config, no other state.  The
 * family describes what differs (which configs to try, how a config
 * plans, how it launches, how it reads); configs(), prepare(), run(),
 * release() and describe(), with their argument guards, applicability
 * checks, config range checks and error messages, are written once here.
 *
 * A family file then holds its applicable(), its config list, small
 * adapters between conv_config and its kernels' plan and launch
 * functions, a describe of its values, all prefixed with the family's
 * name, and
 *
 *     static const conv_kernel_family xx_family = {...};
 *     CONV_KERNEL_FAMILY_ALGORITHM(xx, CONV_ALGO_XX, version, krsc_filters)
 *
 * A new element type (fp16, bf16) is one more config value that plan()
 * reads with the problem's dtype to pick its kernel instantiation, and
 * more configs in list(): the shell, the registry and the tuner are
 * unchanged.
 */
#ifndef CONVTUNE_KERNEL_FAMILY_H
#define CONVTUNE_KERNEL_FAMILY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "algorithms/common/shell_callbacks.h"
#include "algorithms/algorithm.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Room for the configs a family's list() may write (the largest writes
 * about 150 today). */
#define CONV_KERNEL_LIST_MAX 512

typedef struct conv_kernel_family {
  const char *name;  /* the conv_algorithm's name, for messages */
  /* What applicable() takes, as prepare()'s refusal says it: "only ...". */
  const char *scope;
  /* Every config has `values` values, each in [value_min, value_max]:
   * checked before plan() reads a config from a (possibly shipped) cache. */
  int values;
  int64_t value_min, value_max;
  size_t launch_bytes; /* sizeof the family's launch plan */
  bool (*applicable)(const conv_problem *problem, const conv_env *env);
  /* Writes up to `max` configs to try, most promising first, and returns
   * their number (< 0: the problem is not valid).  They need not plan:
   * the shell keeps those that do, each once, in this order. */
  int (*list)(const conv_problem *problem, const conv_env *env, conv_config *out, int max);
  /* Fills *launch for `config` (values already range-checked), or returns
   * false with the reason in `why`. */
  bool (*plan)(const conv_problem *problem, const conv_env *env, const conv_config *config,
               void *launch, char *why, size_t why_size);
  /* Sets the planned kernel up on the device (shared memory opt-in) once,
   * when a plan is made; NULL: nothing to set up. */
  cudaError_t (*configure)(void *launch, const conv_env *env);
  /* Where the launch plan keeps the bytes of device scratch a launch needs
   * (a size_t member: CONV_KERNEL_WORKSPACE(its type)); 0: it needs none. */
  size_t workspace_at;
  /* Enqueues the pass on `stream` (the exec's tensors, as algorithm.h says). */
  cudaError_t (*launch)(const void *launch, const conv_exec *exec, cudaStream_t stream);
  /* Human-readable values of a config with `values` values. */
  void (*describe)(const int64_t *values, char *text, size_t size);
} conv_kernel_family;

/* Whether any config family->list() writes for `problem` plans: the end of
 * an applicable() whose scope is whatever its compiled tilings can run.
 * The family's `list` and `plan` must not call its applicable(). */
bool conv_kernel_plans_any(const conv_kernel_family *family, const conv_problem *problem,
                           const conv_env *env);

conv_status conv_kernel_configs(const conv_kernel_family *family, const conv_problem *problem,
                                conv_env *env, conv_config *out, int max, int *count /* OUT */,
                                conv_error *err);
conv_status conv_kernel_prepare(const conv_kernel_family *family, const conv_problem *problem,
                                conv_env *env, const conv_config *config,
                                conv_prepared *out /* OUT */, conv_error *err);
conv_status conv_kernel_run(const conv_kernel_family *family, const conv_exec *exec,
                            cudaStream_t stream, conv_error *err);
void conv_kernel_release(void *launch);
void conv_kernel_describe(const conv_kernel_family *family, const conv_config *config,
                          char *text, size_t size);

/* Fills `tiling`, a struct of `values` ints in config order (a family's
 * tiling type), from a config's values, already range-checked to ints. */
void conv_kernel_tiling(const conv_config *config, int values, void *tiling);

/* `family`_plan for a family whose tiling type is `values` ints in config
 * order, planned by plan_fn(problem, &tiling, launch, why, why_size). */
#define CONV_KERNEL_PLAN(family, tiling_type, values, plan_fn)                                     \
  _Static_assert(sizeof(tiling_type) == (values) * sizeof(int),                                    \
                 #tiling_type " is " #values " ints, as its configs' values");                     \
  static bool family##_plan(const conv_problem *problem, const conv_env *env,                      \
                            const conv_config *config, void *launch, char *why, size_t why_size) { \
    (void)env;                                                                                     \
    tiling_type tiling;                                                                            \
    conv_kernel_tiling(config, (values), &tiling);                                                 \
    return plan_fn(problem, &tiling, launch, why, why_size);                                       \
  }

/* conv_kernel_family.workspace_at for a launch plan of type `launch_type`
 * whose size_t workspace_bytes says how much scratch a launch needs (one
 * past the member's offset, so that 0 can mean none). */
#define CONV_KERNEL_WORKSPACE(launch_type) (offsetof(launch_type, workspace_bytes) + 1)

/* `family`_configure for a kernel whose one-time set-up needs only its
 * launch plan: configure_fn(launch). */
#define CONV_KERNEL_CONFIGURE(family, configure_fn)                                                \
  static cudaError_t family##_configure(void *launch, const conv_env *env) {                      \
    (void)env;                                                                                     \
    return configure_fn(launch);                                                                   \
  }

/* `family`_launch for a forward kernel that reads x and w and writes y with
 * the problem's epilogue: forward_fn(launch, x, w, bias, y, stream). */
#define CONV_KERNEL_FORWARD(family, forward_fn)                                                    \
  static cudaError_t family##_launch(const void *launch, const conv_exec *ex,                      \
                                     cudaStream_t stream) {                                        \
    return forward_fn(launch, ex->x, ex->w, ex->bias, ex->y, stream);                              \
  }

/* Defines conv_algorithm_`family` for the family `family`_family describes,
 * with its callbacks (`family`_configs, _prepare, _run, _describe: each one
 * call into the shell) and `family`_applicable;
 * id, version and krsc_filters as conv_algorithm says. */
#define CONV_KERNEL_FAMILY_ALGORITHM(family, algo_id, algo_version, reads_krsc)                    \
  CONV_KERNEL_FAMILY_ALGORITHM_MARKS(family, algo_id, algo_version, reads_krsc, NULL)

/* The same for a family whose list() marks CONV_CONFIG_BEST_GUESS configs
 * where `marks`(problem) says (conv_algorithm.marks_best_guesses). */
#define CONV_KERNEL_FAMILY_ALGORITHM_MARKS(family, algo_id, algo_version, reads_krsc, marks)       \
  CONV_SHELL_CALLBACKS(family, conv_kernel, family##_family)                                       \
  static conv_status family##_run(const conv_exec *exec, cudaStream_t stream, conv_error *err) {   \
    return conv_kernel_run(&family##_family, exec, stream, err);                                   \
  }                                                                                                \
  const conv_algorithm conv_algorithm_##family = {                                                 \
      .id = (algo_id), .version = (algo_version), .name = #family,                                 \
      .applicable = family##_applicable, .configs = family##_configs, .prepare = family##_prepare, \
      .run = family##_run, .release = conv_kernel_release, .describe = family##_describe,          \
      .marks_best_guesses = (marks), .krsc_filters = (reads_krsc)}

#ifdef __cplusplus
}
#endif
#endif /* CONVTUNE_KERNEL_FAMILY_H */
