/*
 * rules.c -- the tuner's decisions that need no GPU (tuner.h): when a
 * config being timed is abandoned or out of contention, which configs are
 * timed in full (the finalists), and when a budgeted tuning stops.
 * Pure functions, so that CPU tests can hold them to their documented
 * behaviour.
 */
#include <math.h>

#include "tuner/tuner.h"

bool conv_tuner_abandons(int samples, double fastest_ms, double best_ms) {
  if (!(best_ms > 0) || !(fastest_ms > CONV_ABANDON_FACTOR * best_ms)) return false;
  if (samples >= CONV_ABANDON_MIN_SAMPLES) return true;
  /* A run this long is timed launched directly, where one run varies
   * little: its first says enough. */
  return samples >= 1 && fastest_ms >= CONV_ABANDON_LONG_RUN_MS;
}

bool conv_tuner_out_of_contention(int samples, double median_ms, double best_ms) {
  return best_ms > 0 && samples >= CONV_CONTENTION_SAMPLES &&
         median_ms > CONV_CONTENTION_FACTOR * best_ms;
}

bool conv_tuner_tied_out(int samples, double median_ms, double best_ms) {
  return best_ms > 0 && samples >= CONV_TIE_SAMPLES && median_ms >= best_ms;
}

bool conv_tuner_abandons_first_run(double first_run_ms, double best_ms) {
  return best_ms > 0 && first_run_ms >= CONV_ABANDON_FIRST_RUN_MS &&
         first_run_ms > CONV_ABANDON_FIRST_RUN_FACTOR * best_ms;
}

bool conv_tuner_abandons_warm_run(double warm_ms, double best_ms) {
  return best_ms > 0 && warm_ms > CONV_ABANDON_WARM_FACTOR * best_ms;
}

bool conv_tuner_rules_out_twin(double run_ms, bool validation_run, double best_ms) {
  if (validation_run)
    return conv_tuner_abandons_first_run(run_ms, best_ms) &&
           run_ms >= CONV_TWIN_RULED_OUT_FIRST_RUN_MS;
  return best_ms > 0 && run_ms >= CONV_TWIN_RULED_OUT_MS &&
         run_ms > CONV_TWIN_RULED_OUT_FACTOR * best_ms;
}

int conv_tuner_finalist_place(const double *screened_ms, int count, double candidate_ms) {
  if (isnan(candidate_ms)) return CONV_FINALISTS;
  int place = 0;
  while (place < count && screened_ms[place] <= candidate_ms) place++;
  return place;
}

bool conv_tuner_budget_spent(double elapsed_ms, double budget_ms, bool have_valid) {
  return budget_ms > 0 && have_valid && elapsed_ms >= budget_ms;
}
