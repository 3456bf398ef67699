/*
 * cpu_reference.h -- plain CPU convolutions accumulated in double: the
 * tests' second opinion on the library's reference kernel and candidates.
 * Forward, and the two backward directions (the gradients with respect to
 * the input and to the filter), in either layout: NCHW, or NHWC with KRSC
 * filters.  No epilogue: callers add bias and ReLU themselves.
 */
#ifndef CONVTUNE_TESTS_CPU_REFERENCE_H
#define CONVTUNE_TESTS_CPU_REFERENCE_H

#include <stdint.h>

#include "algorithms/algorithm.h"

/* Offset of element (a, b, i, j) of a packed tensor of dims (A, B, I, J),
 * NCHW-like, or with b innermost for NHWC. */
int64_t tensor_offset(conv_layout layout, int64_t a, int64_t b, int64_t i, int64_t j, int64_t B,
                      int64_t I, int64_t J);

/* y = x (*) w: x and w as the problem lays them out, y of shape->y_elems. */
void cpu_forward(const conv_problem *p, const conv_shape *shape, const float *x, const float *w,
                 double *y);

/* dx = the gradient of sum(y * dy) with respect to x: dy of y's shape,
 * dx of shape->x_elems. */
void cpu_backward_data(const conv_problem *p, const conv_shape *shape, const float *dy,
                       const float *w, double *dx);

/* dw = the gradient of sum(y * dy) with respect to w: dw of shape->w_elems. */
void cpu_backward_filter(const conv_problem *p, const conv_shape *shape, const float *x,
                         const float *dy, double *dw);

/* The dynamic op (CONV_OP_DYNAMIC, convtune.h's conv_op): per-pixel
 * filters wt[n][groups][r*s][p][q] applied to every channel of their group,
 * NCHW.  cpu_dynamic_forward: y (shape->y_elems) from x and wt;
 * cpu_dynamic_backward_data: dx (x_elems) from dy and wt;
 * cpu_dynamic_backward_filter: dwt (w_elems) from x and dy. */
void cpu_dynamic_forward(const conv_problem *p, const conv_shape *shape, const float *x,
                         const float *wt, double *y);
void cpu_dynamic_backward_data(const conv_problem *p, const conv_shape *shape, const float *dy,
                               const float *wt, double *dx);
void cpu_dynamic_backward_filter(const conv_problem *p, const conv_shape *shape, const float *x,
                                 const float *dy, double *dwt);

#endif /* CONVTUNE_TESTS_CPU_REFERENCE_H */
