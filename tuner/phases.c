/*
 * phases.c -- a tuning's wall time by phase (tuner.h): the names, the sums
 * and the text of the INFO line at a tuning's end, which `convtune tune`
 * reads back (tools/cli/phases.c).  Pure, so that a CPU test holds the
 * accounting and the format.
 */
#include <math.h>
#include <stdio.h>

#include "tuner/tuner.h"

static const char *const phase_names[CONV_PHASE_COUNT + 1] = {
    "setup", "predict", "list", "prepare", "validate", "time", "cache", "other"};

const char *conv_tune_phase_name(int phase) {
  return phase >= 0 && phase <= CONV_PHASE_COUNT ? phase_names[phase] : "?";
}

void conv_tune_phases_add(conv_tune_phases *phases, conv_tune_phase phase, double ms) {
  if (phases == NULL || (int)phase < 0 || phase >= CONV_PHASE_COUNT || !(ms > 0) || !isfinite(ms))
    return;
  phases->ms[phase] += ms;
}

int conv_tune_phases_format(const conv_tune_phases *phases, double total_ms, char *text,
                            size_t size) {
  if (phases == NULL || text == NULL || size == 0) return -1;
  double counted = 0;
  int n = snprintf(text, size, "phases (s):");
  for (int i = 0; i <= CONV_PHASE_COUNT && n >= 0; i++) {
    double ms;
    if (i < CONV_PHASE_COUNT) {
      ms = phases->ms[i];
      counted += ms;
    } else {
      /* Clocks read at different points: a rest of -0.001 ms is 0. */
      ms = total_ms - counted > 0 ? total_ms - counted : 0;
    }
    const size_t at = (size_t)n < size ? (size_t)n : size - 1;
    const int more = snprintf(text + at, size - at, "%s %s %.3f", i == 0 ? "" : ",",
                              phase_names[i], ms * 1e-3);
    n = more < 0 ? more : n + more;
  }
  return n;
}
