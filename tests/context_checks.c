/* context_checks.c -- see context_checks.h. */
#include "context_checks.h"

#include <string.h>

#include "test.h"

int check_refused(const conv_context_options *o, conv_status expected, const char *word) {
  conv_context *ctx = (conv_context *)1;
  CHECK_STATUS(expected, conv_context_create(&ctx, o));
  CHECK(ctx == NULL);
  CHECK_MSG(strstr(conv_context_last_error(NULL), word) != NULL, "message: %s",
            conv_context_last_error(NULL));
  return TEST_PASS;
}

int check_accepted(const conv_context_options *o) {
  conv_context *ctx = NULL;
  conv_status st = conv_context_create(&ctx, o);
  CHECK_MSG(st == CONV_OK || st == CONV_NO_DEVICE, "%s: %s", conv_status_string(st),
            conv_context_last_error(NULL));
  CHECK_STATUS(CONV_OK, conv_context_destroy(ctx));
  return TEST_PASS;
}
