/* status.c -- status strings and the error record every call fills. */
#include <stdarg.h>
#include <stdio.h>

#include "core/core.h"

static const char *const status_messages[] = {
#define CONV_STATUS_STRING_(name, msg) msg,
    CONV_STATUS_MAP(CONV_STATUS_STRING_)
#undef CONV_STATUS_STRING_
};

const char *conv_status_string(conv_status status) {
  if ((int)status < 0 || status >= CONV_STATUS_COUNT_) return "unknown status";
  return status_messages[status];
}

conv_status conv_error_set(conv_error *err, conv_status status, const char *fmt, ...) {
  if (err == NULL) return status;
  err->status = status;
  va_list args;
  va_start(args, fmt);
  vsnprintf(err->message, sizeof err->message, fmt, args);
  va_end(args);
  return status;
}
