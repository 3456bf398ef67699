/*
 * algorithm.c -- what every family shares behind the contract
 * (algorithm.h): the checks the tuner and plans apply to all families
 * before a family's own, and the ends of prepare() that families share.
 */
#include <stdio.h>
#include <stdlib.h>

#include "algorithms/algorithm.h"

bool conv_algorithm_applicable(const conv_algorithm *algo, const conv_problem *problem,
                               const conv_env *env) {
  if (algo == NULL || problem == NULL) return false;
  if (conv_problem_krsc_filters(problem) && !algo->krsc_filters) return false;
  return algo->applicable(problem, env);
}

conv_status conv_prepared_admits(const conv_problem *problem, const conv_prepared *prepared,
                                 const char *family, conv_error *err) {
  if (problem->deterministic && !prepared->deterministic)
    return conv_error_set(err, CONV_UNSUPPORTED,
                          "%s: not deterministic (its results may differ run to run)", family);
  return CONV_OK;
}

conv_status conv_prepared_own_kernel(void *launch, cudaError_t configured, const char *family,
                                     conv_prepared *out, conv_error *err) {
  if (configured != cudaSuccess) {
    free(launch);
    if (configured == cudaErrorInvalidConfiguration)
      return conv_error_set(err, CONV_UNSUPPORTED,
                            "%s: no block of this config fits this GPU (shared memory or registers)",
                            family);
    char what[64];
    snprintf(what, sizeof what, "%s: configuring the kernel", family);
    return conv_check_cuda(err, configured, what);
  }
  out->state = launch;
  out->workspace_bytes = 0;
  out->arith = CONV_ARITH_DIRECT;
  out->deterministic = true;
  return CONV_OK;
}
