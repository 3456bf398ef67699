/*
 * shell_callbacks.h -- the conv_algorithm callbacks a family shell
 * (kernel_family.h, gemm_family.h) gives each of its families: static
 * functions with the names the family's conv_algorithm lists, each one
 * call into the shell with the family's description.
 */
#ifndef CONVTUNE_SHELL_CALLBACKS_H
#define CONVTUNE_SHELL_CALLBACKS_H

#include "algorithms/algorithm.h"

/* `prefix`_configs, `prefix`_prepare and `prefix`_describe, calling
 * `shell`_configs, `shell`_prepare and `shell`_describe with &`family`
 * first. */
#define CONV_SHELL_CALLBACKS(prefix, shell, family)                                               \
  static conv_status prefix##_configs(const conv_problem *problem, conv_env *env,                 \
                                      conv_config *out, int max, int *count, conv_error *err) {   \
    return shell##_configs(&(family), problem, env, out, max, count, err);                        \
  }                                                                                               \
  static conv_status prefix##_prepare(const conv_problem *problem, conv_env *env,                 \
                                      const conv_config *config, conv_prepared *out,              \
                                      conv_error *err) {                                          \
    return shell##_prepare(&(family), problem, env, config, out, err);                            \
  }                                                                                               \
  static void prefix##_describe(const conv_config *config, char *text, size_t size) {             \
    shell##_describe(&(family), config, text, size);                                              \
  }

#endif /* CONVTUNE_SHELL_CALLBACKS_H */
