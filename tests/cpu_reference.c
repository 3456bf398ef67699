/* cpu_reference.c -- plain CPU convolutions in double (cpu_reference.h).
 * The layouts and the window arithmetic are written out here apart from
 * the library's reference kernel, so that the two are independent.  Each
 * direction gathers into one element of its output at a time, each with
 * its own index arithmetic: backward-data finds the outputs that read an
 * input pixel by dividing by the stride, as a backward kernel would, so
 * checking that it is the adjoint of forward (test_reference.c) compares
 * two different computations. */
#include "tests/cpu_reference.h"

int64_t tensor_offset(conv_layout layout, int64_t a, int64_t b, int64_t i, int64_t j, int64_t B,
                      int64_t I, int64_t J) {
  return layout == CONV_LAYOUT_NHWC ? ((a * I + i) * J + j) * B + b : ((a * B + b) * I + i) * J + j;
}

/* The filters' order, as the layout of a (K, C/groups, R, S) tensor: the
 * problem's filter_layout where it names one, else its layout's. */
static conv_layout filter_order(const conv_problem *p) {
  return p->filter_layout == CONV_FILTER_KRSC   ? CONV_LAYOUT_NHWC
         : p->filter_layout == CONV_FILTER_KCRS ? CONV_LAYOUT_NCHW
                                                : p->layout;
}

void cpu_forward(const conv_problem *p, const conv_shape *s, const float *x, const float *w,
                 double *y) {
  const conv_layout L = p->layout;
  for (int64_t n = 0; n < p->n; n++)
    for (int64_t k = 0; k < p->k; k++) {
      const int64_t g = k / s->k_per_group;
      for (int64_t op = 0; op < s->p; op++)
        for (int64_t oq = 0; oq < s->q; oq++) {
          double acc = 0;
          for (int64_t cg = 0; cg < s->c_per_group; cg++)
            for (int64_t r = 0; r < p->r; r++)
              for (int64_t t = 0; t < p->s; t++) {
                const int64_t ih = op * p->stride_h - p->pad_h + r * p->dil_h;
                const int64_t iw = oq * p->stride_w - p->pad_w + t * p->dil_w;
                if (ih < 0 || ih >= p->h || iw < 0 || iw >= p->w) continue;
                const int64_t c = g * s->c_per_group + cg;
                acc += (double)x[tensor_offset(L, n, c, ih, iw, p->c, p->h, p->w)] *
                       w[tensor_offset(filter_order(p), k, cg, r, t, s->c_per_group, p->r, p->s)];
              }
          y[tensor_offset(L, n, k, op, oq, p->k, s->p, s->q)] = acc;
        }
    }
}

/* The output index along one axis whose window tap `tap` reads input
 * index `in`, or -1 where there is none. */
static int64_t output_reading(int64_t in, int64_t tap, int64_t stride, int64_t pad, int64_t dil,
                              int64_t out_size) {
  const int64_t at = in + pad - tap * dil;
  if (at < 0 || at % stride != 0 || at / stride >= out_size) return -1;
  return at / stride;
}

void cpu_backward_data(const conv_problem *p, const conv_shape *s, const float *dy,
                       const float *w, double *dx) {
  const conv_layout L = p->layout;
  for (int64_t n = 0; n < p->n; n++)
    for (int64_t c = 0; c < p->c; c++) {
      const int64_t g = c / s->c_per_group, cg = c % s->c_per_group;
      for (int64_t ih = 0; ih < p->h; ih++)
        for (int64_t iw = 0; iw < p->w; iw++) {
          double acc = 0;
          for (int64_t r = 0; r < p->r; r++) {
            const int64_t op = output_reading(ih, r, p->stride_h, p->pad_h, p->dil_h, s->p);
            if (op < 0) continue;
            for (int64_t t = 0; t < p->s; t++) {
              const int64_t oq = output_reading(iw, t, p->stride_w, p->pad_w, p->dil_w, s->q);
              if (oq < 0) continue;
              for (int64_t kg = 0; kg < s->k_per_group; kg++) {
                const int64_t k = g * s->k_per_group + kg;
                acc += (double)dy[tensor_offset(L, n, k, op, oq, p->k, s->p, s->q)] *
                       w[tensor_offset(filter_order(p), k, cg, r, t, s->c_per_group, p->r, p->s)];
              }
            }
          }
          dx[tensor_offset(L, n, c, ih, iw, p->c, p->h, p->w)] = acc;
        }
    }
}

void cpu_backward_filter(const conv_problem *p, const conv_shape *s, const float *x,
                         const float *dy, double *dw) {
  const conv_layout L = p->layout;
  for (int64_t k = 0; k < p->k; k++) {
    const int64_t c0 = k / s->k_per_group * s->c_per_group;
    for (int64_t cg = 0; cg < s->c_per_group; cg++)
      for (int64_t r = 0; r < p->r; r++)
        for (int64_t t = 0; t < p->s; t++) {
          double acc = 0;
          for (int64_t n = 0; n < p->n; n++)
            for (int64_t op = 0; op < s->p; op++)
              for (int64_t oq = 0; oq < s->q; oq++) {
                const int64_t ih = op * p->stride_h - p->pad_h + r * p->dil_h;
                const int64_t iw = oq * p->stride_w - p->pad_w + t * p->dil_w;
                if (ih < 0 || ih >= p->h || iw < 0 || iw >= p->w) continue;
                acc += (double)x[tensor_offset(L, n, c0 + cg, ih, iw, p->c, p->h, p->w)] *
                       dy[tensor_offset(L, n, k, op, oq, p->k, s->p, s->q)];
              }
          dw[tensor_offset(filter_order(p), k, cg, r, t, s->c_per_group, p->r, p->s)] = acc;
        }
  }
}

/* ---------------------------------------------------------------- dynamic */

/* Offset of wt[n][g][tap][op][oq], the dynamic op's weights. */
static int64_t weights_offset(const conv_problem *p, const conv_shape *s, int64_t n, int64_t g,
                              int64_t tap, int64_t op, int64_t oq) {
  return (((n * p->groups + g) * (p->r * p->s) + tap) * s->p + op) * s->q + oq;
}

void cpu_dynamic_forward(const conv_problem *p, const conv_shape *s, const float *x,
                         const float *wt, double *y) {
  for (int64_t n = 0; n < p->n; n++)
    for (int64_t c = 0; c < p->c; c++) {
      const int64_t g = c / s->c_per_group;
      for (int64_t op = 0; op < s->p; op++)
        for (int64_t oq = 0; oq < s->q; oq++) {
          double acc = 0;
          for (int64_t r = 0; r < p->r; r++)
            for (int64_t t = 0; t < p->s; t++) {
              const int64_t ih = op * p->stride_h - p->pad_h + r * p->dil_h;
              const int64_t iw = oq * p->stride_w - p->pad_w + t * p->dil_w;
              if (ih < 0 || ih >= p->h || iw < 0 || iw >= p->w) continue;
              acc += (double)x[((n * p->c + c) * p->h + ih) * p->w + iw] *
                     wt[weights_offset(p, s, n, g, r * p->s + t, op, oq)];
            }
          y[((n * p->c + c) * s->p + op) * s->q + oq] = acc;
        }
    }
}

/* Gathers, as cpu_backward_data does: the outputs whose window tap reads
 * input pixel (ih, iw), found by dividing by the stride. */
void cpu_dynamic_backward_data(const conv_problem *p, const conv_shape *s, const float *dy,
                               const float *wt, double *dx) {
  for (int64_t n = 0; n < p->n; n++)
    for (int64_t c = 0; c < p->c; c++) {
      const int64_t g = c / s->c_per_group;
      for (int64_t ih = 0; ih < p->h; ih++)
        for (int64_t iw = 0; iw < p->w; iw++) {
          double acc = 0;
          for (int64_t r = 0; r < p->r; r++) {
            const int64_t op = output_reading(ih, r, p->stride_h, p->pad_h, p->dil_h, s->p);
            if (op < 0) continue;
            for (int64_t t = 0; t < p->s; t++) {
              const int64_t oq = output_reading(iw, t, p->stride_w, p->pad_w, p->dil_w, s->q);
              if (oq < 0) continue;
              acc += (double)dy[((n * p->c + c) * s->p + op) * s->q + oq] *
                     wt[weights_offset(p, s, n, g, r * p->s + t, op, oq)];
            }
          }
          dx[((n * p->c + c) * p->h + ih) * p->w + iw] = acc;
        }
    }
}

void cpu_dynamic_backward_filter(const conv_problem *p, const conv_shape *s, const float *x,
                                 const float *dy, double *dwt) {
  for (int64_t n = 0; n < p->n; n++)
    for (int64_t g = 0; g < p->groups; g++)
      for (int64_t r = 0; r < p->r; r++)
        for (int64_t t = 0; t < p->s; t++)
          for (int64_t op = 0; op < s->p; op++)
            for (int64_t oq = 0; oq < s->q; oq++) {
              const int64_t ih = op * p->stride_h - p->pad_h + r * p->dil_h;
              const int64_t iw = oq * p->stride_w - p->pad_w + t * p->dil_w;
              double acc = 0;
              for (int64_t cg = 0; cg < s->c_per_group && ih >= 0 && ih < p->h && iw >= 0 &&
                                   iw < p->w;
                   cg++) {
                const int64_t c = g * s->c_per_group + cg;
                acc += (double)x[((n * p->c + c) * p->h + ih) * p->w + iw] *
                       dy[((n * p->c + c) * s->p + op) * s->q + oq];
              }
              dwt[weights_offset(p, s, n, g, r * p->s + t, op, oq)] = acc;
            }
}
