/* view_family.c -- prepare()'s first checks in a family that runs views (view_family.h). */
#include <stdarg.h>
#include <stdio.h>

#include "algorithms/common/view_family.h"

conv_status conv_view_prepare_check(const char *family, conv_view_of view_of,
                                    const conv_problem *problem, const conv_env *env,
                                    const conv_config *config, const conv_prepared *out,
                                    conv_problem *view, conv_error *err, const char *refusal,
                                    ...) {
  if (problem == NULL || env == NULL || config == NULL || out == NULL)
    return conv_error_set(err, CONV_INVALID_ARGUMENT, "%s: NULL argument", family);
  if (view_of(problem, view)) return CONV_OK;
  if (err == NULL) return CONV_UNSUPPORTED;
  char why[sizeof err->message];
  va_list args;
  va_start(args, refusal);
  vsnprintf(why, sizeof why, refusal, args);
  va_end(args);
  return conv_error_set(err, CONV_UNSUPPORTED, "%s: %s", family, why);
}
