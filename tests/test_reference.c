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

static const test_case tests[] = {
    {"forward_by_hand", test_forward_by_hand},
    {"backward_by_hand", test_backward_by_hand},
    {"backward_is_adjoint_of_forward", test_backward_is_adjoint_of_forward},
    {"adjoint_check_catches_a_wrong_backward", test_adjoint_check_catches_a_wrong_backward},
};

TEST_MAIN(tests)
