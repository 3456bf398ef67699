/*
 * phases.h -- where a tuning's time went, as `convtune tune` reads it from
 * the library's INFO line at the end of each tuning ("...; phases (s):
 * setup 0.012, predict 0.000, list 0.031, prepare 0.412, validate 0.101,
 * time 0.730, cache 0.020, other 0.004"; docs/tuning.md), for --json.
 * The tool sees the library through the public header alone, so it reads
 * the line rather than a struct.
 */
#ifndef CONVTUNE_TOOLS_CLI_PHASES_H
#define CONVTUNE_TOOLS_CLI_PHASES_H

#include <stdbool.h>
#include <stdio.h>

#define TUNE_PHASES_MAX 12

typedef struct tune_phases {
  int count; /* 0: none read (the plan was not tuned in this run) */
  char name[TUNE_PHASES_MAX][16];
  double seconds[TUNE_PHASES_MAX];
} tune_phases;

/* Reads the phases of `message`; false, *out untouched, where it has none
 * or they do not parse. */
bool tune_phases_parse(const char *message, tune_phases *out);

/* {"setup": 0.012, ..., "other": 0.004, "total": 1.31}: seconds. */
void tune_phases_write_json(FILE *out, const tune_phases *phases);

#endif /* CONVTUNE_TOOLS_CLI_PHASES_H */
