/* views.c -- the problem views several families share (views.h). */
#include "algorithms/algorithm.h"
#include "algorithms/common/views.h"

bool conv_direct_backward_data_view(const conv_problem *pb, conv_problem *forward) {
  if (!conv_problem_supported_any_dtype(pb) || pb->direction != CONV_BACKWARD_DATA ||
      pb->layout != CONV_LAYOUT_NCHW || pb->stride_h != 1 || pb->stride_w != 1)
    return false;
  const int64_t pad_h = pb->dil_h * (pb->r - 1) - pb->pad_h;
  const int64_t pad_w = pb->dil_w * (pb->s - 1) - pb->pad_w;
  conv_shape shape;
  if (pad_h < 0 || pad_w < 0 || conv_problem_shape(pb, &shape) != CONV_OK) return false;
  conv_problem f = *pb;
  f.direction = CONV_FORWARD;
  f.c = pb->k, f.h = shape.p, f.w = shape.q;
  f.k = pb->c;
  f.pad_h = pad_h, f.pad_w = pad_w;
  f.epilogue = CONV_EPILOGUE_NONE;
  *forward = f;
  return true;
}
