/* plan_support.c -- the GPU plan tests' shared pieces (plan_support.h). */
#include <stdio.h>
#include <string.h>

#include "tests/plan_support.h"

int plan_roundtrip(conv_context *ctx, const conv_problem *p, cudaStream_t stream,
                   conv_plan_source expect_source) {
  host_case hc;
  dev_case d;
  if (host_case_make(&hc, p) != TEST_PASS || dev_case_make(&d, &hc) != TEST_PASS) return TEST_FAIL;
  conv_plan *plan = NULL;
  conv_status st = conv_plan_create(ctx, p, &plan);
  CHECK_MSG(st == CONV_OK, "conv_plan_create: %s", conv_context_last_error(ctx));
  conv_plan_info info;
  CHECK_STATUS(CONV_OK, conv_plan_info_get(plan, &info));
  printf("plan: %s %s %.4f ms, source %d\n", info.algorithm, info.config, info.time_ms, (int)info.source);
  CHECK_MSG(info.source == expect_source, "source %d, expected %d", (int)info.source, (int)expect_source);
  CHECK(info.time_ms > 0);
  if (poison(&d, &hc, stream) != TEST_PASS) return TEST_FAIL;
  CHECK_STATUS(CONV_OK, conv_plan_execute(plan, stream, d.x, d.w, d.bias, d.y));
  if (check_output(&d, &hc, stream, conv_error_bound(p->math, CONV_ARITH_TRANSFORM), "plan") != TEST_PASS)
    return TEST_FAIL;
  conv_plan_destroy(plan);
  dev_case_free(&d);
  host_case_free(&hc);
  return TEST_PASS;
}

conv_problem fixed_problem(void) {
  conv_problem p;
  conv_problem_init(&p);
  p.n = 2; p.c = 16; p.h = 23; p.w = 19; p.k = 24; p.r = 3; p.s = 3;
  p.pad_h = p.pad_w = 1;
  p.epilogue = CONV_EPILOGUE_BIAS_RELU;
  return p;
}

int count_trial(const conv_cache_row *row, void *user) {
  trial_census *c = user;
  c->total++;
  c->cudnn += row->trial->algorithm_id == CONV_ALGO_CUDNN;
  snprintf(c->device, sizeof c->device, "%s", row->device);
  snprintf(c->versions, sizeof c->versions, "%s", row->versions);
  if (row->trial->status == CONV_WORKSPACE_LIMIT && row->trial->reason[0]) c->workspace_limited++;
  if (row->trial->winner) {
    c->winners++;
    c->winner_workspace = row->trial->workspace_bytes;
  }
  return 0;
}

int census_of(conv_context *ctx, const conv_problem *p, trial_census *c, bool *pending) {
  char key[CONV_PROBLEM_KEY_MAX];
  CHECK_STATUS(CONV_OK, conv_problem_key(p, key, sizeof key));
  conv_error err = {CONV_OK, ""};
  memset(c, 0, sizeof *c);
  CHECK_STATUS(CONV_OK, conv_cache_list_trials(conv_context_cache(ctx), key, count_trial, c, &err));
  const conv_cache_key k = {key, c->device, c->versions};
  CHECK_STATUS(CONV_OK, conv_cache_find_pending(conv_context_cache(ctx), &k, pending, NULL, &err));
  return TEST_PASS;
}

/* logged_context's log callback: counts the warnings that pass over a row. */
static void note_passed_over(void *user, conv_log_level level, const char *message) {
  passed_over *w = user;
  if (level != CONV_LOG_WARN || strstr(message, "passed over") == NULL) return;
  w->count++;
  snprintf(w->last, sizeof w->last, "%s", message);
}

conv_status logged_context(conv_context **ctx, const char *user, const char *system,
                           conv_policy policy, passed_over *w) {
  conv_context_options o;
  conv_context_options_init(&o);
  o.cache_path = user;
  o.system_cache_path = system;
  o.policy = policy;
  if (w != NULL) {
    memset(w, 0, sizeof *w);
    o.log = note_passed_over;
    o.log_user = w;
  }
  return conv_context_create(ctx, &o);
}

conv_status layered_context(conv_context **ctx, const char *user, const char *system,
                            conv_policy policy) {
  return logged_context(ctx, user, system, policy, NULL);
}

