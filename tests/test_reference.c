/*
 * test_reference.c -- the CPU reference convolutions (cpu_reference.c), on
 * the CPU: each direction against small cases worked out by hand, and the
 * two backward directions as adjoints of forward on random problems of
 * both layouts (sum(forward(x, w) * dy) == sum(x * backward_data(dy, w))
 * == sum(w * backward_filter(x, dy)) for any x, w, dy).  The GPU tests
 * then judge the library against these.
 */
#include <math.h>
#include <stdlib.h>

#include "tests/cpu_reference.h"
#include "tests/random_problems.h"
#include "tests/test.h"

static conv_problem small_problem(int64_t c, int64_t h, int64_t w, int64_t k, int64_t r,
                                  int64_t s, int64_t stride, int64_t pad, int64_t dil,
                                  int64_t groups) {
  conv_problem p;
  conv_problem_init(&p);
  p.n = 1, p.c = c, p.h = h, p.w = w, p.k = k, p.r = r, p.s = s;
  p.stride_h = p.stride_w = stride;
  p.pad_h = p.pad_w = pad;
  p.dil_h = p.dil_w = dil;
  p.groups = groups;
  return p;
}

static int check_values(const char *what, const double *got, const double *want, int64_t count) {
  for (int64_t i = 0; i < count; i++)
    CHECK_MSG(got[i] == want[i], "%s[%lld] = %g, expected %g", what, (long long)i, got[i], want[i]);
  return TEST_PASS;
}

/* x = 1..9 in a 3x3 image throughout. */
static const float ramp[18] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18};
static const float ones[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};

static int test_forward_by_hand(void) {
  conv_shape sh;
  double y[4];
  /* [[1, 0], [0, -1]]: every output is x[i][j] - x[i+1][j+1] = -4. */
  static const float diagonal[4] = {1, 0, 0, -1};
  conv_problem p = small_problem(1, 3, 3, 1, 2, 2, 1, 0, 1, 1);
  CHECK_STATUS(CONV_OK, conv_problem_shape(&p, &sh));
  cpu_forward(&p, &sh, ramp, diagonal, y);
  if (check_values("2x2 diagonal", y, (const double[]){-4, -4, -4, -4}, 4) != TEST_PASS)
    return TEST_FAIL;
  /* A 3x3 box, stride 2, padding 1: the windows centred on the corners
   * hold 2x2 blocks of x. */
  p = small_problem(1, 3, 3, 1, 3, 3, 2, 1, 1, 1);
  CHECK_STATUS(CONV_OK, conv_problem_shape(&p, &sh));
  cpu_forward(&p, &sh, ramp, ones, y);
  if (check_values("3x3 box, stride 2, pad 1", y, (const double[]){12, 16, 24, 28}, 4) != TEST_PASS)
    return TEST_FAIL;
  /* Two groups of one channel, a 2x2 box dilated by 2: each output sums
   * its own channel's corners (1 + 3 + 7 + 9, 10 + 12 + 16 + 18). */
  p = small_problem(2, 3, 3, 2, 2, 2, 1, 0, 2, 2);
  CHECK_STATUS(CONV_OK, conv_problem_shape(&p, &sh));
  cpu_forward(&p, &sh, ramp, ones, y);
  return check_values("grouped, dilated", y, (const double[]){20, 56}, 2);
}

static int test_backward_by_hand(void) {
  conv_shape sh;
  double dx[9], dw[4];
  static const float diagonal[4] = {1, 0, 0, -1};
  conv_problem p = small_problem(1, 3, 3, 1, 2, 2, 1, 0, 1, 1);
  CHECK_STATUS(CONV_OK, conv_problem_shape(&p, &sh));
  /* dy = 1 everywhere: dx[i][j] sums the filter taps that read (i, j). */
  cpu_backward_data(&p, &sh, ones, diagonal, dx);
  if (check_values("backward data", dx, (const double[]){1, 1, 0, 1, 0, -1, 0, -1, -1}, 9) !=
      TEST_PASS)
    return TEST_FAIL;
  /* dw[r][t] sums the 2x2 block of x at offset (r, t). */
  cpu_backward_filter(&p, &sh, ramp, ones, dw);
  if (check_values("backward filter", dw, (const double[]){12, 16, 24, 28}, 4) != TEST_PASS)
    return TEST_FAIL;
  /* Stride 2, padding 1, 3x3 box, dy = 1 at the two outputs of the top
   * row: input pixels read by both windows (column 1, rows 0-1) get 2. */
  p = small_problem(1, 3, 3, 1, 3, 3, 2, 1, 1, 1);
  CHECK_STATUS(CONV_OK, conv_problem_shape(&p, &sh));
  static const float top_row[4] = {1, 1, 0, 0};
  cpu_backward_data(&p, &sh, top_row, ones, dx);
  return check_values("strided backward data", dx, (const double[]){1, 2, 1, 1, 2, 1, 0, 0, 0}, 9);
}

static float *random_floats(int64_t count) {
  float *v = malloc((size_t)count * sizeof *v);
  if (v != NULL)
    for (int64_t i = 0; i < count; i++) v[i] = rng_float();
  return v;
}

static double dot(const float *a, const double *b, int64_t count, double *magnitude) {
  double sum = 0, mag = 0;
  for (int64_t i = 0; i < count; i++) {
    sum += a[i] * b[i];
    mag += fabs(a[i] * b[i]);
  }
  *magnitude = mag;
  return sum;
}

/* One random problem: the three inner products agree to rounding. */
static int check_adjoint(const conv_problem *p) {
  conv_shape sh;
  CHECK_STATUS(CONV_OK, conv_problem_shape(p, &sh));
  float *x = random_floats(sh.x_elems), *w = random_floats(sh.w_elems),
        *dy = random_floats(sh.y_elems);
  double *y = malloc((size_t)sh.y_elems * sizeof *y), *dx = malloc((size_t)sh.x_elems * sizeof *dx),
         *dw = malloc((size_t)sh.w_elems * sizeof *dw);
  int rc = TEST_FAIL;
  if (x && w && dy && y && dx && dw) {
    cpu_forward(p, &sh, x, w, y);
    cpu_backward_data(p, &sh, dy, w, dx);
    cpu_backward_filter(p, &sh, x, dy, dw);
    double mag_y, mag_x, mag_w;
    const double through_y = dot(dy, y, sh.y_elems, &mag_y);
    const double through_x = dot(x, dx, sh.x_elems, &mag_x);
    const double through_w = dot(w, dw, sh.w_elems, &mag_w);
    const double tolerance = 1e-12 * (mag_y + mag_x + mag_w) + 1e-300;
    rc = fabs(through_y - through_x) <= tolerance && fabs(through_y - through_w) <= tolerance
             ? TEST_PASS
             : TEST_FAIL;
    if (rc != TEST_PASS) {
      char key[CONV_PROBLEM_KEY_MAX];
      if (conv_problem_key(p, key, sizeof key) != CONV_OK) snprintf(key, sizeof key, "(no key)");
      fprintf(stderr, "%s: <y, dy> %.17g, <x, dx> %.17g, <w, dw> %.17g (tolerance %.3g)\n", key,
              through_y, through_x, through_w, tolerance);
    }
  } else {
    fprintf(stderr, "out of memory\n");
  }
  free(x), free(w), free(dy), free(y), free(dx), free(dw);
  return rc;
}

static int test_backward_is_adjoint_of_forward(void) {
  seed_rng();
  for (int i = 0; i < 200; i++) {
    conv_problem p = i % 2 ? random_nhwc_problem(CONV_MATH_STRICT) : random_problem(CONV_MATH_STRICT);
    if (check_adjoint(&p) != TEST_PASS) return TEST_FAIL;
  }
  printf("200 random problems: backward-data and backward-filter are forward's adjoints\n");
  return TEST_PASS;
}

/* A reference that is wrong must fail the adjoint check: forward against a
 * backward of a problem with the filter flipped (an easy slip). */
static int test_adjoint_check_catches_a_wrong_backward(void) {
  conv_problem p = small_problem(1, 3, 3, 1, 2, 2, 1, 0, 1, 1);
  conv_shape sh;
  CHECK_STATUS(CONV_OK, conv_problem_shape(&p, &sh));
  static const float w[4] = {1, 2, 3, 4}, flipped[4] = {4, 3, 2, 1};
  static const float dy[4] = {1, -1, 2, 0.5f};
  double y[4], dx[9], mag;
  cpu_forward(&p, &sh, ramp, w, y);
  cpu_backward_data(&p, &sh, dy, flipped, dx);
  const double through_y = dot(dy, y, 4, &mag), through_x = dot(ramp, dx, 9, &mag);
  CHECK_MSG(fabs(through_y - through_x) > 1e-6, "<y, dy> %g == <x, dx> %g with a flipped filter",
            through_y, through_x);
  return TEST_PASS;
}

/* ---------------------------------------------------------------- dynamic */

static conv_problem dynamic_problem(int64_t c, int64_t h, int64_t w, int64_t k, int64_t stride,
                                    int64_t dil, int64_t groups) {
  conv_problem p;
  conv_problem_init(&p);
  p.op = CONV_OP_DYNAMIC;
  p.n = 1, p.c = p.k = c, p.h = h, p.w = w, p.r = p.s = k;
  p.stride_h = p.stride_w = stride;
  p.dil_h = p.dil_w = dil;
  p.pad_h = p.pad_w = (k - 1) / 2 * dil;
  p.groups = groups;
  return p;
}

/* Weights wt[tap][p][q] of one image and group over a 3x3 output where
 * pixel (p, q) takes tap 8 - (3p + q) alone: row 2 - p, column 2 - q of
 * its window, which is input pixel (1, 1) for every output. */
static void centre_picking(float wt[81]) {
  for (int tap = 0; tap < 9; tap++)
    for (int pix = 0; pix < 9; pix++) wt[tap * 9 + pix] = tap == 8 - pix ? 1.0f : 0.0f;
}

static int test_dynamic_forward_by_hand(void) {
  conv_shape sh;
  double y[12];
  float box[81], pick[81];
  for (int i = 0; i < 81; i++) box[i] = 1;
  centre_picking(pick);
  /* All-ones 3x3 windows, 'same' padding: each output sums the in-image
   * part of its neighbourhood (corners 4 pixels, edges 6, centre 9). */
  conv_problem p = dynamic_problem(1, 3, 3, 3, 1, 1, 1);
  CHECK_STATUS(CONV_OK, conv_problem_shape(&p, &sh));
  CHECK(sh.p == 3 && sh.q == 3 && sh.w_elems == 81 && sh.y_elems == 9);
  cpu_dynamic_forward(&p, &sh, ramp, box, y);
  if (check_values("dynamic box", y, (const double[]){12, 21, 16, 27, 45, 33, 24, 39, 28}, 9) !=
      TEST_PASS)
    return TEST_FAIL;
  /* Per-pixel filters in tap order i*k + j: every pixel picks x[1][1]. */
  cpu_dynamic_forward(&p, &sh, ramp, pick, y);
  if (check_values("dynamic per-pixel taps", y, (const double[]){5, 5, 5, 5, 5, 5, 5, 5, 5}, 9) !=
      TEST_PASS)
    return TEST_FAIL;
  /* 5x5 ramp 1..25, 3x3 box dilated by 2, stride 2: output (p, q) sums
   * x[2p - 2 + 2i][2q - 2 + 2j] inside the image; (1, 1) is every
   * even-indexed pixel (117), (0, 0) the four at rows and columns 0, 2. */
  float ramp25[25];
  for (int i = 0; i < 25; i++) ramp25[i] = (float)(i + 1);
  p = dynamic_problem(1, 5, 5, 3, 2, 2, 1);
  CHECK_STATUS(CONV_OK, conv_problem_shape(&p, &sh));
  CHECK(sh.p == 3 && sh.q == 3 && p.pad_h == 2);
  cpu_dynamic_forward(&p, &sh, ramp25, box, y);
  if (check_values("dynamic dilated, strided", y,
                   (const double[]){28, 48, 36, 72, 117, 84, 68, 108, 76}, 9) != TEST_PASS)
    return TEST_FAIL;
  /* Two groups of two channels, 1x3 images: group 0's filter is the left
   * tap (3) weighted 1, group 1's the right tap (5) weighted 2, so its
   * channels shift the other way, doubled, with zeros from the border. */
  const float x4[12] = {1, 2, 3, 11, 12, 13, 21, 22, 23, 31, 32, 33};
  float wt[2 * 9 * 3] = {0};
  for (int q = 0; q < 3; q++) wt[(0 * 9 + 3) * 3 + q] = 1, wt[(1 * 9 + 5) * 3 + q] = 2;
  p = dynamic_problem(4, 1, 3, 3, 1, 1, 2);
  CHECK_STATUS(CONV_OK, conv_problem_shape(&p, &sh));
  CHECK(sh.w_elems == 54);
  cpu_dynamic_forward(&p, &sh, x4, wt, y);
  return check_values("dynamic groups", y,
                      (const double[]){0, 1, 2, 0, 11, 12, 44, 46, 0, 64, 66, 0}, 12);
}

static int test_dynamic_backward_by_hand(void) {
  conv_shape sh;
  double dx[18], dwt[81];
  float pick[81];
  centre_picking(pick);
  conv_problem p = dynamic_problem(1, 3, 3, 3, 1, 1, 1);
  CHECK_STATUS(CONV_OK, conv_problem_shape(&p, &sh));
  /* Every output read x[1][1] alone: dx gathers all nine dy there. */
  cpu_dynamic_backward_data(&p, &sh, ones, pick, dx);
  if (check_values("dynamic backward data", dx, (const double[]){0, 0, 0, 0, 9, 0, 0, 0, 0}, 9) !=
      TEST_PASS)
    return TEST_FAIL;
  /* dy = 1: dwt[tap][p][q] is the pixel tap reads, 0 outside the image;
   * with two channels in the group, their sum. */
  p = dynamic_problem(2, 3, 3, 3, 1, 1, 1);
  CHECK_STATUS(CONV_OK, conv_problem_shape(&p, &sh));
  const float dy2[18] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1};
  cpu_dynamic_backward_filter(&p, &sh, ramp, dy2, dwt);
  /* Centre tap: x0 + x1 = 11, 13, ..., 27; tap 0 (up-left) at (1, 1)
   * reads (0, 0): 1 + 10; tap 8 (down-right) at (2, 2) is outside. */
  for (int pix = 0; pix < 9; pix++)
    CHECK_MSG(dwt[4 * 9 + pix] == 11 + 2 * pix, "centre tap at %d: %g", pix, dwt[4 * 9 + pix]);
  CHECK(dwt[0 * 9 + 4] == 11 && dwt[8 * 9 + 8] == 0 && dwt[0 * 9 + 0] == 0);
  CHECK(dwt[8 * 9 + 0] == 5 + 14); /* (0, 0) down-right reads (1, 1) */
  /* Stride 2 over a 3x3 image: outputs (0, 0), (0, 1), (1, 0), (1, 1)
   * sit on input pixels (0, 0), (0, 2), (2, 0), (2, 2); with all-ones
   * windows, dx counts the windows that cover each pixel. */
  p = dynamic_problem(1, 3, 3, 3, 2, 1, 1);
  CHECK_STATUS(CONV_OK, conv_problem_shape(&p, &sh));
  CHECK(sh.p == 2 && sh.q == 2);
  float box[36];
  for (int i = 0; i < 36; i++) box[i] = 1;
  cpu_dynamic_backward_data(&p, &sh, ones, box, dx);
  return check_values("dynamic strided backward data", dx,
                      (const double[]){1, 2, 1, 2, 4, 2, 1, 2, 1}, 9);
}

/* <y, dy> == <x, dx> == <wt, dwt> for the dynamic op too: y is bilinear
 * in x and wt. */
static int check_dynamic_adjoint(const conv_problem *p) {
  conv_shape sh;
  CHECK_STATUS(CONV_OK, conv_problem_shape(p, &sh));
  float *x = random_floats(sh.x_elems), *wt = random_floats(sh.w_elems),
        *dy = random_floats(sh.y_elems);
  double *y = malloc((size_t)sh.y_elems * sizeof *y), *dx = malloc((size_t)sh.x_elems * sizeof *dx),
         *dwt = malloc((size_t)sh.w_elems * sizeof *dwt);
  int rc = TEST_FAIL;
  if (x && wt && dy && y && dx && dwt) {
    cpu_dynamic_forward(p, &sh, x, wt, y);
    cpu_dynamic_backward_data(p, &sh, dy, wt, dx);
    cpu_dynamic_backward_filter(p, &sh, x, dy, dwt);
    double mag_y, mag_x, mag_w;
    const double through_y = dot(dy, y, sh.y_elems, &mag_y);
    const double through_x = dot(x, dx, sh.x_elems, &mag_x);
    const double through_w = dot(wt, dwt, sh.w_elems, &mag_w);
    const double tolerance = 1e-12 * (mag_y + mag_x + mag_w) + 1e-300;
    rc = fabs(through_y - through_x) <= tolerance && fabs(through_y - through_w) <= tolerance
             ? TEST_PASS
             : TEST_FAIL;
    if (rc != TEST_PASS) {
      char key[CONV_PROBLEM_KEY_MAX];
      if (conv_problem_key(p, key, sizeof key) != CONV_OK) snprintf(key, sizeof key, "(no key)");
      fprintf(stderr, "%s: <y, dy> %.17g, <x, dx> %.17g, <wt, dwt> %.17g\n", key, through_y,
              through_x, through_w);
    }
  } else {
    fprintf(stderr, "out of memory\n");
  }
  free(x), free(wt), free(dy), free(y), free(dx), free(dwt);
  return rc;
}

static int test_dynamic_backward_is_adjoint(void) {
  seed_rng();
  for (int i = 0; i < 200; i++) {
    conv_problem p = random_dynamic_problem(CONV_MATH_STRICT);
    if (check_dynamic_adjoint(&p) != TEST_PASS) return TEST_FAIL;
  }
  printf("200 random dynamic problems: both backward passes are forward's adjoints\n");
  return TEST_PASS;
}

static const test_case tests[] = {
    {"forward_by_hand", test_forward_by_hand},
    {"backward_by_hand", test_backward_by_hand},
    {"backward_is_adjoint_of_forward", test_backward_is_adjoint_of_forward},
    {"adjoint_check_catches_a_wrong_backward", test_adjoint_check_catches_a_wrong_backward},
    {"dynamic_forward_by_hand", test_dynamic_forward_by_hand},
    {"dynamic_backward_by_hand", test_dynamic_backward_by_hand},
    {"dynamic_backward_is_adjoint", test_dynamic_backward_is_adjoint},
};

TEST_MAIN(tests)
