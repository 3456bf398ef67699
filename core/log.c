/* log.c -- the library's messages, routed to the context's log callback. */
#include <stdarg.h>
#include <stdio.h>

#include "core/core.h"

conv_logger conv_logger_from_options(const conv_context_options *options) {
  conv_logger logger = {options->log, options->log_user,
                        options->log_level == 0 ? CONV_LOG_INFO : options->log_level};
  if (options->verbose) logger.level = CONV_LOG_DEBUG;
  return logger;
}

bool conv_log_enabled(const conv_logger *logger, conv_log_level level) {
  return logger != NULL && logger->fn != NULL && level <= logger->level;
}

void conv_log(const conv_logger *logger, conv_log_level level, const char *fmt, ...) {
  if (!conv_log_enabled(logger, level)) return;
  char message[1024];
  va_list args;
  va_start(args, fmt);
  vsnprintf(message, sizeof message, fmt, args);
  va_end(args);
  for (char *c = message; *c; c++) /* one line, as the header promises */
    if (*c == '\n' || *c == '\r') *c = ' ';
  logger->fn(logger->user, level, message);
}
