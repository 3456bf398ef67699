/*
 * progress.h -- the line `convtune tune` redraws in place on a terminal:
 * shapes done of total, elapsed time, ETA, the shape being tuned and the
 * candidate being timed.  A pure function of its state, so that it is
 * tested without a terminal (test_cli); tune.c draws it.
 */
#ifndef CONVTUNE_TOOLS_CLI_PROGRESS_H
#define CONVTUNE_TOOLS_CLI_PROGRESS_H

#include <stddef.h>

typedef struct progress {
  size_t done, total;    /* shapes finished, shapes in all                    */
  const char *shape;     /* the shape being tuned; NULL or "" between shapes  */
  const char *candidate; /* the candidate config being timed; NULL or ""      */
  double elapsed_s;      /* since tuning began                                */
  double finished_s;     /* of elapsed_s, what the `done` shapes took         */
} progress;

/* Seconds left: the mean time of a finished shape times the shapes not yet
 * finished, less what the current one has taken so far (never below 0);
 * -1 while no shape has finished. */
double progress_eta(const progress *p);

/* A duration rounded to whole seconds: "42s" under a minute, "3:07" under
 * an hour, then "1:02:03"; "?" for a negative or non-finite one.  Returns buf. */
const char *format_duration(double seconds, char *buf, size_t size);

/* Writes the progress line into buf (NUL-terminated, at most size - 1
 * bytes) and returns its length in bytes.  It takes at most width - 1
 * columns (a terminal that wraps at its last column does not scroll), one
 * column per character: a 20-cell bar from 80 columns (10 from 60), then
 * "done/total", the elapsed time, "ETA ..." (or "ETA ?" before the first
 * shape is done), then the shape and the candidate, each cut to what is
 * left with "..." at the end; "done" once all shapes are.  Parts that do
 * not fit are left out whole.  The shape and candidate texts are made
 * printable first (text_printable): nothing in them can drive the
 * terminal. */
size_t progress_line(char *buf, size_t size, const progress *p, int width);

#endif /* CONVTUNE_TOOLS_CLI_PROGRESS_H */
