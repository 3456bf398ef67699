/*
 * test_budget.c -- tuning budgets and early abandonment without a GPU: the
 * tuner's rules as the pure functions they are (tuner.h), the
 * tuning_budget_ms option (defaults, checks, older and newer structs),
 * the policy option, and the accounting of a tuning's phases.
 */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "convtune.h"
#include "context_checks.h"
#include "test.h"
#include "tuner/tuner.h"

/* A config stops only when it is slower than the best by the margin, after
 * enough samples (or one long run), and never before there is a best. */
static int test_abandonment_rule(void) {
  const double best = 0.100, slow = best * CONV_ABANDON_FACTOR * 1.01;
  const double at_margin = best * CONV_ABANDON_FACTOR;
  CHECK(!conv_tuner_abandons(CONV_ABANDON_MIN_SAMPLES, slow, 0));   /* no best yet */
  CHECK(!conv_tuner_abandons(CONV_ABANDON_MIN_SAMPLES, slow, -1));
  CHECK(!conv_tuner_abandons(CONV_ABANDON_MIN_SAMPLES - 1, slow, best)); /* too early */
  CHECK(conv_tuner_abandons(CONV_ABANDON_MIN_SAMPLES, slow, best));
  CHECK(conv_tuner_abandons(CONV_ABANDON_MIN_SAMPLES + 10, slow, best));
  CHECK(!conv_tuner_abandons(CONV_ABANDON_MIN_SAMPLES, at_margin, best)); /* not over it */
  CHECK(!conv_tuner_abandons(CONV_ABANDON_MIN_SAMPLES, best * 1.2, best));
  CHECK(!conv_tuner_abandons(40, best * 0.5, best)); /* faster: never */
  CHECK(!conv_tuner_abandons(CONV_ABANDON_MIN_SAMPLES, NAN, best));
  CHECK(!conv_tuner_abandons(CONV_ABANDON_MIN_SAMPLES, slow, NAN));
  /* One run of a long config says enough; a short one does not. */
  const double long_best = CONV_ABANDON_LONG_RUN_MS;
  CHECK(conv_tuner_abandons(1, long_best * 2, long_best));
  CHECK(!conv_tuner_abandons(1, slow, best));
  CHECK(!conv_tuner_abandons(0, long_best * 2, long_best));
  /* The margin is what the header says it is, and generous: the fastest
   * of the samples must exceed it, so the median does too. */
  CHECK(CONV_ABANDON_FACTOR >= 1.25 && CONV_ABANDON_MIN_SAMPLES >= 2);
  /* On the validation run alone: only a long run, and far slower. */
  const double first = CONV_ABANDON_FIRST_RUN_MS, factor = CONV_ABANDON_FIRST_RUN_FACTOR;
  CHECK(conv_tuner_abandons_first_run(1978.4, 0.023));
  CHECK(conv_tuner_abandons_first_run(first, first / factor * 0.99));
  CHECK(!conv_tuner_abandons_first_run(first, first / factor)); /* not over the factor */
  CHECK(!conv_tuner_abandons_first_run(first * 0.99, 0.001));  /* too short to judge */
  CHECK(!conv_tuner_abandons_first_run(1e4, 0));               /* no best yet */
  CHECK(!conv_tuner_abandons_first_run(NAN, 0.01));
  CHECK(!conv_tuner_abandons_first_run(1e4, NAN));
  /* Far beyond what a first launch adds (module loading: milliseconds). */
  CHECK(first >= 10 && factor >= 5);
  return TEST_PASS;
}

/* Out of contention: only a config timed in full for enough samples whose
 * median is over the (tight) factor; never before there is a best; the
 * screen is shorter than a full measurement and judged by the wider
 * abandonment margin. */
static int test_contention_rule(void) {
  const double best = 0.100, n = CONV_CONTENTION_SAMPLES;
  const double slower = best * CONV_CONTENTION_FACTOR * 1.01;
  CHECK(conv_tuner_out_of_contention(n, slower, best));
  CHECK(conv_tuner_out_of_contention(n + 20, slower, best));
  CHECK(!conv_tuner_out_of_contention(n - 1, slower, best)); /* too early */
  CHECK(!conv_tuner_out_of_contention(n, best * CONV_CONTENTION_FACTOR, best)); /* a tie */
  CHECK(!conv_tuner_out_of_contention(n, best * 1.01, best));
  CHECK(!conv_tuner_out_of_contention(40, best * 0.9, best)); /* faster: the new best */
  CHECK(!conv_tuner_out_of_contention(n, slower, 0));         /* no best yet */
  CHECK(!conv_tuner_out_of_contention(n, NAN, best));
  CHECK(!conv_tuner_out_of_contention(n, slower, NAN));
  /* Tighter than abandonment, judged on a median of at least as many
   * samples as a full measurement's minimum (trial.c's MIN_SAMPLES, 5). */
  CHECK(CONV_CONTENTION_FACTOR > 1.0 && CONV_CONTENTION_FACTOR < CONV_ABANDON_FACTOR);
  CHECK(CONV_CONTENTION_SAMPLES >= 5);
  /* The screen gives abandonment enough samples to judge, in well under
   * the 1 ms of a full sample. */
  CHECK(CONV_SCREEN_SAMPLES >= CONV_ABANDON_MIN_SAMPLES);
  CHECK(CONV_SCREEN_MS > 0 && CONV_SCREEN_MS * CONV_SCREEN_SAMPLES < 1.0);
  return TEST_PASS;
}

/* Near ties stop after CONV_TIE_SAMPLES samples unless faster than the
 * best; the contention rule judges first, at fewer samples. */
static int test_tie_rule(void) {
  const double best = 0.100, n = CONV_TIE_SAMPLES;
  CHECK(conv_tuner_tied_out(n, best, best));          /* as fast: not faster */
  CHECK(conv_tuner_tied_out(n, best * 1.02, best));
  CHECK(conv_tuner_tied_out(n + 15, best * 1.001, best));
  CHECK(!conv_tuner_tied_out(n, best * 0.999, best)); /* faster: timed in full */
  CHECK(!conv_tuner_tied_out(n - 1, best * 1.02, best)); /* too early */
  CHECK(!conv_tuner_tied_out(n, best, 0));            /* no best yet */
  CHECK(!conv_tuner_tied_out(n, NAN, best));
  CHECK(!conv_tuner_tied_out(n, best, NAN));
  /* About a third of a full measurement (trial.c: 30 samples of 1 ms). */
  CHECK(CONV_TIE_SAMPLES > CONV_CONTENTION_SAMPLES && CONV_TIE_SAMPLES <= 15);
  return TEST_PASS;
}

/* A first timed run over 3x the best drops the config before its screen;
 * the screen judges the rest. */
static int test_warm_run_rule(void) {
  const double best = 0.100;
  CHECK(conv_tuner_abandons_warm_run(best * CONV_ABANDON_WARM_FACTOR * 1.01, best));
  CHECK(conv_tuner_abandons_warm_run(50.0, best));
  CHECK(!conv_tuner_abandons_warm_run(best * CONV_ABANDON_WARM_FACTOR, best));
  CHECK(!conv_tuner_abandons_warm_run(best * 1.5, best)); /* the screen's to judge */
  CHECK(!conv_tuner_abandons_warm_run(50.0, 0));          /* no best yet */
  CHECK(!conv_tuner_abandons_warm_run(NAN, best));
  CHECK(!conv_tuner_abandons_warm_run(50.0, NAN));
  /* Looser than the screen's margin, and held longer than a launch. */
  CHECK(CONV_ABANDON_WARM_FACTOR > 2 * CONV_ABANDON_FACTOR && CONV_WARM_HOLD_US >= 100);
  return TEST_PASS;
}

/* The finalists: the fastest screens, in order, ties behind the earlier;
 * a config slower than a full list's last is not one. */
static int test_finalist_rule(void) {
  const double none[1] = {0};
  CHECK(conv_tuner_finalist_place(none, 0, 0.5) == 0); /* the first screened */
  CHECK(conv_tuner_finalist_place(none, 0, NAN) == CONV_FINALISTS);
  const double one[1] = {0.100};
  CHECK(conv_tuner_finalist_place(one, 1, 0.050) == 0);
  CHECK(conv_tuner_finalist_place(one, 1, 0.100) == 1); /* a tie: behind */
  CHECK(conv_tuner_finalist_place(one, 1, 9.0) == 1);   /* room left: any time */
  double full[CONV_FINALISTS];
  for (int i = 0; i < CONV_FINALISTS; i++) full[i] = 0.100 * (i + 1);
  const double last = full[CONV_FINALISTS - 1];
  CHECK(conv_tuner_finalist_place(full, CONV_FINALISTS, 0.010) == 0);
  CHECK(conv_tuner_finalist_place(full, CONV_FINALISTS, last * 0.99) == CONV_FINALISTS - 1);
  CHECK(conv_tuner_finalist_place(full, CONV_FINALISTS, last) == CONV_FINALISTS);
  CHECK(conv_tuner_finalist_place(full, CONV_FINALISTS, last * 2) == CONV_FINALISTS);
  CHECK(conv_tuner_finalist_place(full, CONV_FINALISTS, NAN) == CONV_FINALISTS);
  /* More than one, so that a near tie the screens misorder is timed. */
  CHECK(CONV_FINALISTS >= 2);
  return TEST_PASS;
}

/* Twins of a config far too slow (conv_tuner_rules_out_twin): its first
 * timed run of 20 ms or more and over 2x the best, or a validation run of
 * 50 ms or more, abandoned by that run's rule (over 10x). */
static int test_twin_rule(void) {
  const double first = CONV_TWIN_RULED_OUT_FIRST_RUN_MS, timed = CONV_TWIN_RULED_OUT_MS;
  const double factor = CONV_TWIN_RULED_OUT_FACTOR;
  CHECK(conv_tuner_rules_out_twin(first, true, 1.0));
  CHECK(conv_tuner_rules_out_twin(1525.0, true, 0.56)); /* cuDNN's engine 4, replk_dw31 */
  CHECK(!conv_tuner_rules_out_twin(first * 0.99, true, 1.0)); /* may be first-launch costs */
  CHECK(!conv_tuner_rules_out_twin(25.7, true, 0.87)); /* ... as one TF32 engine's were */
  CHECK(!conv_tuner_rules_out_twin(first, true, first / 9)); /* not abandoned on that run */
  CHECK(!conv_tuner_rules_out_twin(first * 10, true, 0)); /* no best yet */
  CHECK(conv_tuner_rules_out_twin(timed, false, timed / (factor * 1.01)));
  CHECK(!conv_tuner_rules_out_twin(timed, false, timed / factor)); /* not over it */
  CHECK(!conv_tuner_rules_out_twin(timed * 0.99, false, 0.001));
  CHECK(!conv_tuner_rules_out_twin(timed * 10, false, 0));
  /* A validation run's floor is the higher: it pays first-launch costs. */
  CHECK(first > timed && factor > 1);
  return TEST_PASS;
}

static int test_budget_rule(void) {
  CHECK(!conv_tuner_budget_spent(1e9, 0, true)); /* no budget */
  CHECK(!conv_tuner_budget_spent(99.9, 100, true));
  CHECK(conv_tuner_budget_spent(100, 100, true));
  CHECK(conv_tuner_budget_spent(250, 100, true));
  CHECK(!conv_tuner_budget_spent(250, 100, false)); /* nothing valid yet: go on */
  return TEST_PASS;
}

static int test_budget_option(void) {
  conv_context_options o;
  memset(&o, 0xab, sizeof o);
  conv_context_options_init(&o);
  CHECK(o.tuning_budget_ms == 0);
  o.cache_path = ":memory:";
  const double bad[] = {-1.0, -0.0001, NAN, INFINITY, -INFINITY};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    o.tuning_budget_ms = bad[i];
    if (check_refused(&o, CONV_INVALID_ARGUMENT, "tuning_budget_ms") != TEST_PASS) return TEST_FAIL;
  }
  o.tuning_budget_ms = 250;
  if (check_accepted(&o) != TEST_PASS) return TEST_FAIL;

  /* A program built before the field: its shorter struct, the default. */
  conv_context_options older;
  conv_context_options_init_sized(&older, offsetof(conv_context_options, tuning_budget_ms));
  older.cache_path = ":memory:";
  if (check_accepted(&older) != TEST_PASS) return TEST_FAIL;

  /* A newer header's field set beyond this library's struct is refused. */
  struct {
    conv_context_options o;
    double newer_field;
  } newer;
  memset(&newer, 0, sizeof newer);
  conv_context_options_init_sized(&newer.o, sizeof newer);
  newer.o.cache_path = ":memory:";
  newer.newer_field = 1;
  return check_refused(&newer.o, CONV_UNSUPPORTED, "does not know");
}

/* Every conv_policy is accepted (predict with a budget too, which its
 * fall back searches within); a value past them is refused by name. */
static int test_policy_option(void) {
  conv_context_options o;
  conv_context_options_init(&o);
  o.cache_path = ":memory:";
  const conv_policy all[] = {CONV_POLICY_EXHAUSTIVE, CONV_POLICY_FAST, CONV_POLICY_CACHE_ONLY,
                             CONV_POLICY_RECORD, CONV_POLICY_PREDICT};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
    o.policy = all[i];
    if (check_accepted(&o) != TEST_PASS) return TEST_FAIL;
  }
  o.tuning_budget_ms = 500;
  if (check_accepted(&o) != TEST_PASS) return TEST_FAIL;
  o.tuning_budget_ms = 0;
  o.policy = (conv_policy)(CONV_POLICY_PREDICT + 1);
  if (check_refused(&o, CONV_INVALID_ARGUMENT, "policy 5") != TEST_PASS) return TEST_FAIL;
  o.policy = (conv_policy)-1;
  return check_refused(&o, CONV_INVALID_ARGUMENT, "policy -1");
}

/* A tuning's phases: sums, the rest as "other" (never negative), and the
 * INFO line's text that `convtune tune` reads back. */
static int test_tuning_phases(void) {
  conv_tune_phases ph;
  memset(&ph, 0, sizeof ph);
  conv_tune_phases_add(&ph, CONV_PHASE_SETUP, 10);
  conv_tune_phases_add(&ph, CONV_PHASE_PREPARE, 400);
  conv_tune_phases_add(&ph, CONV_PHASE_PREPARE, 100);
  conv_tune_phases_add(&ph, CONV_PHASE_TIME, 1000);
  conv_tune_phases_add(&ph, CONV_PHASE_VALIDATE, -5);  /* ignored */
  conv_tune_phases_add(&ph, CONV_PHASE_CACHE, NAN);    /* ignored */
  conv_tune_phases_add(&ph, CONV_PHASE_COUNT, 7);      /* no such phase */
  conv_tune_phases_add(NULL, CONV_PHASE_TIME, 1);      /* an untimed pick keeps none */
  CHECK(ph.ms[CONV_PHASE_PREPARE] == 500 && ph.ms[CONV_PHASE_VALIDATE] == 0 &&
        ph.ms[CONV_PHASE_CACHE] == 0);
  char text[256];
  const int n = conv_tune_phases_format(&ph, 2000, text, sizeof text);
  const char *want = "phases (s): setup 0.010, predict 0.000, list 0.000, prepare 0.500, "
                     "validate 0.000, time 1.000, cache 0.000, other 0.490";
  CHECK_MSG(strcmp(text, want) == 0, "%s", text);
  CHECK(n == (int)strlen(want));
  /* A total under the phases' sum (clocks read apart): other is 0. */
  conv_tune_phases_format(&ph, 1000, text, sizeof text);
  CHECK_MSG(strstr(text, "other 0.000") != NULL, "%s", text);
  /* Cut short, it still says how long it wanted. */
  char tiny[16];
  CHECK(conv_tune_phases_format(&ph, 2000, tiny, sizeof tiny) == n);
  CHECK(strlen(tiny) == sizeof tiny - 1);
  CHECK(conv_tune_phases_format(NULL, 1, text, sizeof text) < 0);
  CHECK(strcmp(conv_tune_phase_name(CONV_PHASE_COUNT), "other") == 0);
  CHECK(strcmp(conv_tune_phase_name(-1), "?") == 0);
  return TEST_PASS;
}

static const test_case tests[] = {
    {"abandonment_rule", test_abandonment_rule},
    {"contention_rule", test_contention_rule},
    {"tie_rule", test_tie_rule},
    {"warm_run_rule", test_warm_run_rule},
    {"finalist_rule", test_finalist_rule},
    {"twin_rule", test_twin_rule},
    {"budget_rule", test_budget_rule},
    {"budget_option", test_budget_option},
    {"policy_option", test_policy_option},
    {"tuning_phases", test_tuning_phases},
};

TEST_MAIN(tests)
