/*
 * widen.c -- how wide a prediction's candidate set is (tuner.h,
 * conv_predict_scope_of): every candidate, the neighbours' family alone,
 * that and every family's own best guesses, or, where the neighbours'
 * families differ, a split between cuDNN's ranked configs and every
 * other family's.  Pure, so that CPU tests hold it to its rules
 * (tests/test_predict.c).
 *
 * Why: the neighbours' ranking knows only what ran on them.  fft_few_ch_31
 * (n8 c4 512x512, 31x31 filter) with the suite's other rows as neighbours
 * was predicted from 3x3 layers' winners, and a config the neighbours never
 * timed (FFT's whole-image transform, its exhaustive winner) counted as 2x
 * slower on each and was never timed: 7.5x slower than exhaustive.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "algorithms/algorithm.h"
#include "tuner/tuner.h"

/* The sizes the range rule compares, with their names for the log. */
enum { AXIS_TAPS, AXIS_C, AXIS_K, AXIS_PIXELS, AXIS_C_PER_GROUP, AXES };
static const char *const axis_names[AXES] = {"filter taps (r*s)", "input channels",
                                             "output channels", "output pixels (p*q)",
                                             "channels per group"};

static bool depthwise(const conv_problem *p) { return p->groups == p->c && p->groups > 1; }

static void axes_of(const conv_problem *p, const conv_shape *sh, double v[AXES]) {
  v[AXIS_TAPS] = (double)p->r * (double)p->s;
  v[AXIS_C] = (double)p->c;
  v[AXIS_K] = (double)p->k;
  v[AXIS_PIXELS] = (double)sh->p * (double)sh->q;
  v[AXIS_C_PER_GROUP] = (double)(p->c / p->groups);
}

/* The neighbours' problems, parsed from their keys; false where one does
 * not parse (another version's key, which conv_predict_neighbours skips,
 * so only a hand-made prediction has one). */
static bool neighbour_problems(const conv_prediction *pr, conv_problem out[]) {
  for (int i = 0; i < pr->neighbours; i++) {
    conv_shape sh;
    if (conv_problem_from_key(pr->neighbour[i].problem, &out[i]) != CONV_OK ||
        conv_problem_shape(&out[i], &sh) != CONV_OK)
      return false;
  }
  return true;
}

static bool far_rule(const conv_problem *p, const conv_problem nb[], int count, char *why,
                     size_t size) {
  double farthest = 0;
  for (int i = 0; i < count; i++) {
    const double d = conv_predict_distance(p, &nb[i]);
    farthest = d > farthest ? d : farthest;
  }
  if (!(farthest > CONV_PREDICT_FAR)) return false;
  snprintf(why, size, "far: its farthest of %d nearest tuned neighbours is %.1f away (over %.0f)",
           count, farthest, CONV_PREDICT_FAR);
  return true;
}

static bool range_rule(const conv_problem *p, const conv_problem nb[], int count, char *why,
                       size_t size) {
  conv_shape sh;
  if (count < 1 || conv_problem_shape(p, &sh) != CONV_OK) return false; /* validated before tuning */
  double mine[AXES], lo[AXES] = {0}, hi[AXES] = {0};
  axes_of(p, &sh, mine);
  int same_kind = 0;
  for (int i = 0; i < count; i++) {
    double v[AXES];
    conv_shape nsh;
    (void)conv_problem_shape(&nb[i], &nsh); /* parsed and shaped by neighbour_problems */
    axes_of(&nb[i], &nsh, v);
    for (int a = 0; a < AXES; a++) {
      lo[a] = i == 0 || v[a] < lo[a] ? v[a] : lo[a];
      hi[a] = i == 0 || v[a] > hi[a] ? v[a] : hi[a];
    }
    same_kind += depthwise(&nb[i]) == depthwise(p);
  }
  for (int a = 0; a < AXES; a++)
    if (mine[a] > hi[a] * CONV_PREDICT_RANGE_FACTOR || mine[a] * CONV_PREDICT_RANGE_FACTOR < lo[a]) {
      snprintf(why, size, "out of range: %s %.0f, its neighbours' %.0f..%.0f (over %.0fx outside)",
               axis_names[a], mine[a], lo[a], hi[a], CONV_PREDICT_RANGE_FACTOR);
      return true;
    }
  if (same_kind == 0) {
    snprintf(why, size, "out of range: %s, none of its neighbours is",
             depthwise(p) ? "depthwise" : "not depthwise");
    return true;
  }
  return false;
}

/* An FFT config's shape class: 0 for a transform that holds the whole
 * padded image (one tile a plane), else the tile, fh * 2^20 + fw.  The
 * output an FFT family tiles is the pass's: y (forward, and fft_filter's
 * correlation over the forward's tiles), or dx for backward-data (the
 * transposed view's output). */
static int64_t fft_class(const conv_problem *p, const conv_config *c) {
  conv_shape sh;
  if (c->count < 2 || conv_problem_shape(p, &sh) != CONV_OK) return -1;
  const bool data = p->direction == CONV_BACKWARD_DATA;
  const int64_t out_h = data ? p->h : sh.p, out_w = data ? p->w : sh.q;
  if (c->values[0] >= out_h + p->r - 1 && c->values[1] >= out_w + p->s - 1) return 0;
  return c->values[0] * ((int64_t)1 << 20) + c->values[1];
}

static bool classes_rule(const conv_prediction *pr, const conv_problem nb[], char *why,
                         size_t size) {
  const uint32_t family = pr->neighbour[0].algorithm_id;
  if (family != CONV_ALGO_FFT && family != CONV_ALGO_FFT_FILTER) return false;
  const int64_t first = fft_class(&nb[0], &pr->neighbour[0].config);
  for (int i = 1; i < pr->neighbours; i++) {
    const int64_t other = fft_class(&nb[i], &pr->neighbour[i].config);
    if (other == first) continue;
    const conv_config *a = &pr->neighbour[0].config, *b = &pr->neighbour[i].config;
    snprintf(why, size,
             "classes: its neighbours' FFT winners differ in shape (transform %lldx%lld%s against "
             "%lldx%lld%s)",
             (long long)a->values[0], (long long)a->values[1], first == 0 ? ", whole image" : "",
             (long long)b->values[0], (long long)b->values[1], other == 0 ? ", whole image" : "");
    return true;
  }
  return false;
}

conv_predict_scope conv_predict_scope_of(const conv_problem *problem,
                                         const conv_prediction *pr, char *why,
                                         size_t why_size) {
  char ignored[8];
  if (why == NULL || why_size == 0) {
    why = ignored;
    why_size = sizeof ignored;
  }
  why[0] = '\0';
  if (problem == NULL || pr == NULL) {
    snprintf(why, why_size, "no problem or prediction");
    return CONV_PREDICT_ALL;
  }
  if (pr->neighbours < CONV_PREDICT_NEIGHBOURS || pr->neighbours > CONV_PREDICT_NEIGHBOURS) {
    snprintf(why, why_size, "%d tuned neighbours of its kind (%d needed)", pr->neighbours,
             CONV_PREDICT_NEIGHBOURS);
    return CONV_PREDICT_ALL;
  }
  for (int i = 1; i < pr->neighbours; i++)
    if (pr->neighbour[i].algorithm_id != pr->neighbour[0].algorithm_id) {
      snprintf(why, why_size, "its %d nearest tuned neighbours' winners differ in family",
               pr->neighbours);
      return CONV_PREDICT_SPLIT;
    }
  conv_problem nb[CONV_PREDICT_NEIGHBOURS];
  if (!neighbour_problems(pr, nb)) {
    snprintf(why, why_size, "far: a neighbour's key does not parse");
    return CONV_PREDICT_WIDE;
  }
  if (far_rule(problem, nb, pr->neighbours, why, why_size) ||
      range_rule(problem, nb, pr->neighbours, why, why_size) ||
      classes_rule(pr, nb, why, why_size))
    return CONV_PREDICT_WIDE;
  return CONV_PREDICT_NARROW;
}
