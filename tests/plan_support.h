/*
 * plan_support.h -- what the GPU tests of plans end to end share
 * (test_plans.c, test_predict_plans.c): a plan made, executed and checked,
 * a fixed problem, the census of a problem's trials, and contexts over a
 * user and a system cache.  Definitions in plan_support.c.
 */
#ifndef CONVTUNE_TESTS_PLAN_SUPPORT_H
#define CONVTUNE_TESTS_PLAN_SUPPORT_H

#include <stdbool.h>
#include <stddef.h>

#include "cache/cache.h"
#include "runtime/context.h"
#include "tests/gpu_support.h"

/* Creates a plan, executes it on `stream` and checks the output. */
int plan_roundtrip(conv_context *ctx, const conv_problem *p, cudaStream_t stream,
                   conv_plan_source expect_source);
/* n2 c16 23x19 k24, 3x3 pad 1, bias and ReLU. */
conv_problem fixed_problem(void);

typedef struct trial_census {
  int total, workspace_limited, winners, cudnn;
  size_t winner_workspace;
  char device[256], versions[512]; /* the last row's, to look its pending state up */
} trial_census;
/* Counts one trial into the census `user` (a conv_cache_row_fn). */
int count_trial(const conv_cache_row *row, void *user);
/* The trials of one problem in the context's cache, and whether it is pending. */
int census_of(conv_context *ctx, const conv_problem *p, trial_census *c, bool *pending);

/* The library's warnings that pass over a cached row (the log callback). */
typedef struct passed_over {
  int count;
  char last[1024];
} passed_over;
/* Creates a context over `user` and `system` (NULL: the environment's),
 * counting its warnings that pass over a cached row in *w (reset; NULL:
 * none counted). */
conv_status logged_context(conv_context **ctx, const char *user, const char *system,
                           conv_policy policy, passed_over *w);
conv_status layered_context(conv_context **ctx, const char *user, const char *system,
                            conv_policy policy);

#endif /* CONVTUNE_TESTS_PLAN_SUPPORT_H */
