/*
 * context_checks.h -- what the option tests of conv_context_create share:
 * a refusal (status, message, no context made) and an acceptance (a
 * context, or no device on a machine without a GPU).
 */
#ifndef CONVTUNE_TESTS_CONTEXT_CHECKS_H
#define CONVTUNE_TESTS_CONTEXT_CHECKS_H

#include "convtune.h"

/* conv_context_create refuses `o` with `expected`, its message naming
 * `word`, and makes no context.  TEST_PASS or TEST_FAIL. */
int check_refused(const conv_context_options *o, conv_status expected, const char *word);

/* Past the options' checks: a context (destroyed again), or CONV_NO_DEVICE
 * here.  TEST_PASS or TEST_FAIL. */
int check_accepted(const conv_context_options *o);

#endif
