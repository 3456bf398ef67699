/* kernel_family.c -- the host shell of our own kernels' families (kernel_family.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "algorithms/common/kernel_family.h"

void conv_kernel_tiling(const conv_config *config, int values, void *tiling) {
  int ints[CONV_CONFIG_MAX_VALUES];
  for (int i = 0; i < values; i++) ints[i] = (int)config->values[i];
  memcpy(tiling, ints, (size_t)values * sizeof ints[0]);
}

/* The scratch bytes a planned launch needs (kernel_family.h, workspace_at). */
static size_t launch_workspace(const conv_kernel_family *family, const void *launch) {
  if (family->workspace_at == 0) return 0;
  size_t bytes;
  memcpy(&bytes, (const char *)launch + family->workspace_at - 1, sizeof bytes);
  return bytes;
}

static bool listed_before(const conv_config *out, int n, const conv_config *config) {
  for (int i = 0; i < n; i++)
    if (conv_config_equal(&out[i], config)) return true;
  return false;
}

bool conv_kernel_plans_any(const conv_kernel_family *family, const conv_problem *problem,
                           const conv_env *env) {
  conv_config *listed = malloc(CONV_KERNEL_LIST_MAX * sizeof *listed);
  void *launch = malloc(family->launch_bytes);
  bool any = false;
  if (listed != NULL && launch != NULL) {
    const int n = family->list(problem, env, listed, CONV_KERNEL_LIST_MAX);
    for (int i = 0; i < n && !any; i++)
      any = family->plan(problem, env, &listed[i], launch, NULL, 0);
  }
  free(listed);
  free(launch);
  return any;
}

conv_status conv_kernel_configs(const conv_kernel_family *family, const conv_problem *problem,
                                conv_env *env, conv_config *out, int max, int *count,
                                conv_error *err) {
  if (problem == NULL || count == NULL || max < 0 || (max > 0 && out == NULL))
    return conv_error_set(err, CONV_INVALID_ARGUMENT, "%s: bad configs() arguments",
                          family->name);
  *count = 0;
  if (!family->applicable(problem, env)) return CONV_OK;
  /* On the heap: a full list is 130 KB, too much for a caller's stack. */
  conv_config *listed = malloc(CONV_KERNEL_LIST_MAX * sizeof *listed);
  void *launch = malloc(family->launch_bytes);
  if (listed == NULL || launch == NULL) {
    free(listed);
    free(launch);
    return conv_error_set(err, CONV_OUT_OF_MEMORY, "%s: configs", family->name);
  }
  const int n = family->list(problem, env, listed, CONV_KERNEL_LIST_MAX);
  for (int i = 0; i < n && *count < max; i++)
    if (family->plan(problem, env, &listed[i], launch, NULL, 0) &&
        !listed_before(out, *count, &listed[i]))
      out[(*count)++] = listed[i];
  free(listed);
  free(launch);
  return n < 0 ? conv_error_set(err, CONV_INVALID_ARGUMENT, "%s: invalid problem", family->name)
               : CONV_OK;
}

conv_status conv_kernel_prepare(const conv_kernel_family *family, const conv_problem *problem,
                                conv_env *env, const conv_config *config, conv_prepared *out,
                                conv_error *err) {
  if (problem == NULL || env == NULL || config == NULL || out == NULL)
    return conv_error_set(err, CONV_INVALID_ARGUMENT, "%s: NULL argument", family->name);
  if (!family->applicable(problem, env))
    return conv_error_set(err, CONV_UNSUPPORTED, "%s: only %s", family->name, family->scope);
  /* The range here; what the values mean for this problem, in plan(). */
  conv_status st = conv_config_check(config, family->name, family->values, family->value_min,
                                     family->value_max, err);
  if (st != CONV_OK) return st;
  void *launch = calloc(1, family->launch_bytes);
  if (launch == NULL) return conv_error_set(err, CONV_OUT_OF_MEMORY, "%s: malloc", family->name);
  char why[160];
  if (!family->plan(problem, env, config, launch, why, sizeof why)) {
    free(launch);
    return conv_error_set(err, CONV_UNSUPPORTED, "%s: %s", family->name, why);
  }
  const cudaError_t configured =
      family->configure != NULL ? family->configure(launch, env) : cudaSuccess;
  st = conv_prepared_own_kernel(launch, configured, family->name, out, err);
  if (st == CONV_OK) out->workspace_bytes = launch_workspace(family, launch);
  return st;
}

conv_status conv_kernel_run(const conv_kernel_family *family, const conv_exec *exec,
                            cudaStream_t stream, conv_error *err) {
  /* Every pass reads two of x, w and y and writes the third. */
  if (exec == NULL || exec->state == NULL || exec->x == NULL || exec->w == NULL || exec->y == NULL)
    return conv_error_set(err, CONV_INVALID_ARGUMENT, "%s: NULL argument", family->name);
  const size_t needed = launch_workspace(family, exec->state);
  if (needed > 0 && (exec->workspace == NULL || exec->workspace_bytes < needed))
    return conv_error_set(err, CONV_INVALID_ARGUMENT, "%s: %zu bytes of workspace, %zu needed",
                          family->name, exec->workspace_bytes, needed);
  const cudaError_t launched = family->launch(exec->state, exec, stream);
  if (launched == cudaSuccess) return CONV_OK;
  char what[64];
  snprintf(what, sizeof what, "%s: kernel launch", family->name);
  return conv_check_cuda(err, launched, what);
}

void conv_kernel_release(void *launch) { free(launch); }

void conv_kernel_describe(const conv_kernel_family *family, const conv_config *config,
                          char *text, size_t size) {
  if (text == NULL || size == 0) return;
  if (config == NULL || config->count != family->values) {
    snprintf(text, size, "invalid config");
    return;
  }
  family->describe(config->values, text, size);
}
