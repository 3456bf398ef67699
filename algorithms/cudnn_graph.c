/*
 * cudnn_graph.c -- see cudnn_graph.h: building a convolution pass as a
 * cuDNN operation graph, and reading its engines' knobs and notes.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "algorithms/cudnn_graph.h"

/* Sanity bound on the engine count an operation graph reports. */
#define MAX_ENGINES 4096

/* ---------------------------------------------------------------- errors */

/* cudnnGetLastErrorString often says which constraint failed; it can span
 * lines (JSON, then a warning), and messages are one line. */
static void last_error(char *detail, size_t size) {
  detail[0] = '\0';
  cudnnGetLastErrorString(detail, size);
  detail[size - 1] = '\0';
  for (char *c = detail; *c; c++)
    if (*c == '\n' || *c == '\r' || *c == '\t') *c = ' ';
}

/* Records a failed cuDNN call.  While plans are being built a refusal means
 * "this config does not fit here" (CONV_UNSUPPORTED); running out of memory
 * stays an error. */
conv_status conv_cudnn_refused(conv_error *err, cudnnStatus_t code, const char *what) {
  if (code == CUDNN_STATUS_SUCCESS) return CONV_OK;
  char detail[256];
  last_error(detail, sizeof detail);
  conv_status st = code == CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED ||
                           code == CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED
                       ? CONV_OUT_OF_MEMORY
                       : CONV_UNSUPPORTED;
  return conv_error_set(err, st, "%s: %s%s%.200s", what, cudnnGetErrorString(code),
                        detail[0] ? ": " : "", detail);
}

/* At run time a failure is an error, reported the library-wide way. */
conv_status conv_cudnn_failed(conv_error *err, cudnnStatus_t code, const char *what) {
  conv_status st = conv_check_cudnn(err, code, what);
  if (st == CONV_OK || err == NULL) return st;
  char detail[256];
  last_error(detail, sizeof detail);
  size_t used = strlen(err->message);
  if (detail[0] && used + 4 < sizeof err->message)
    snprintf(err->message + used, sizeof err->message - used, " (%.200s)", detail);
  return st;
}

/* ---------------------------------------------------------------- descriptors */

conv_status conv_cudnn_make_desc(cudnnBackendDescriptorType_t type, cudnnBackendDescriptor_t *desc,
                                 conv_error *err) {
  *desc = NULL;
  return conv_cudnn_refused(err, cudnnBackendCreateDescriptor(type, desc),
                            "cudnnBackendCreateDescriptor");
}

void conv_cudnn_free_desc(cudnnBackendDescriptor_t *desc) {
  if (*desc != NULL) cudnnBackendDestroyDescriptor(*desc);
  *desc = NULL;
}

void conv_cudnn_free_descs(cudnnBackendDescriptor_t *descs, int64_t count) {
  for (int64_t i = 0; i < count; i++) conv_cudnn_free_desc(&descs[i]);
}

/* A descriptor-valued attribute is read into descriptors the caller
 * created, as many as it asks for. */
conv_status conv_cudnn_get_descs(conv_error *err, cudnnBackendDescriptor_t desc,
                                 cudnnBackendAttributeName_t attr, const char *what,
                                 cudnnBackendDescriptorType_t type, int64_t count, int64_t *got,
                                 cudnnBackendDescriptor_t *descs) {
  for (int64_t i = 0; i < count; i++) {
    const conv_status st = conv_cudnn_make_desc(type, &descs[i], err);
    if (st != CONV_OK) return st;
  }
  return conv_cudnn_refused(
      err, cudnnBackendGetAttribute(desc, attr, CUDNN_TYPE_BACKEND_DESCRIPTOR, count, got, descs),
      what);
}

conv_status conv_cudnn_finalize_or_free(conv_error *err, cudnnBackendDescriptor_t *desc,
                                        conv_status st, const char *what) {
  if (st == CONV_OK) st = conv_cudnn_refused(err, cudnnBackendFinalize(*desc), what);
  if (st != CONV_OK) conv_cudnn_free_desc(desc);
  return st;
}


/* ---------------------------------------------------------------- graph */


void conv_cudnn_graph_destroy(conv_graph *g) {
  conv_cudnn_free_desc(&g->graph);
  conv_cudnn_free_desc(&g->relu_op);
  conv_cudnn_free_desc(&g->relu);
  conv_cudnn_free_desc(&g->add_op);
  conv_cudnn_free_desc(&g->add);
  conv_cudnn_free_desc(&g->biased_sum);
  conv_cudnn_free_desc(&g->conv_sum);
  conv_cudnn_free_desc(&g->bias);
  conv_cudnn_free_desc(&g->op);
  conv_cudnn_free_desc(&g->conv);
  conv_cudnn_free_desc(&g->y);
  conv_cudnn_free_desc(&g->w);
  conv_cudnn_free_desc(&g->x);
}

/* The tensors' element type in cuDNN's words. */
static cudnnDataType_t data_type(conv_dtype dtype) {
  return dtype == CONV_DTYPE_F16    ? CUDNN_DATA_HALF
         : dtype == CONV_DTYPE_BF16 ? CUDNN_DATA_BFLOAT16
                                    : CUDNN_DATA_FLOAT;
}

/* A packed tensor of `type`.  dims are (N, C, H, W) whatever the layout, as
 * cuDNN wants them; the strides say where the channels are: NCHW, or NHWC
 * (channels innermost; for the filter KRSC).  A virtual tensor lives
 * between two operations of the graph, in no memory of ours. */
static conv_status make_tensor(int64_t uid, const int64_t dims[4], conv_layout layout,
                               cudnnDataType_t type, bool is_virtual,
                               cudnnBackendDescriptor_t *desc, conv_error *err) {
  int64_t strides[4] = {dims[1] * dims[2] * dims[3], dims[2] * dims[3], dims[3], 1};
  if (layout == CONV_LAYOUT_NHWC) {
    strides[1] = 1;
    strides[3] = dims[1];
    strides[2] = dims[3] * dims[1];
    strides[0] = dims[2] * dims[3] * dims[1];
  }
  int64_t alignment = TENSOR_ALIGNMENT;
  conv_status st;
  CONV_TRY(st, conv_cudnn_make_desc(CUDNN_BACKEND_TENSOR_DESCRIPTOR, desc, err), done);
  CONV_TRY(st, SET_ATTR(*desc, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &type), done);
  if (is_virtual)
    CONV_TRY(st, SET_ATTR(*desc, CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, 1, &is_virtual),
             done);
  CONV_TRY(st, SET_ATTR(*desc, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, dims), done);
  CONV_TRY(st, SET_ATTR(*desc, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4, strides), done);
  CONV_TRY(st, SET_ATTR(*desc, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid), done);
  CONV_TRY(st, SET_ATTR(*desc, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &alignment),
           done);
done:
  return FINALIZE_OR_FREE(desc, st, "tensor");
}

static conv_status make_conv_desc(const conv_problem *p, cudnnBackendDescriptor_t *desc,
                                  conv_error *err) {
  cudnnDataType_t compute = CUDNN_DATA_FLOAT;
  cudnnConvolutionMode_t mode = CUDNN_CROSS_CORRELATION;
  int64_t spatial = 2;
  int64_t pads[2] = {p->pad_h, p->pad_w};
  int64_t strides[2] = {p->stride_h, p->stride_w};
  int64_t dilations[2] = {p->dil_h, p->dil_w};
  conv_status st;
  CONV_TRY(st, conv_cudnn_make_desc(CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR, desc, err), done);
  CONV_TRY(st, SET_ATTR(*desc, CUDNN_ATTR_CONVOLUTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &compute),
           done);
  CONV_TRY(st, SET_ATTR(*desc, CUDNN_ATTR_CONVOLUTION_CONV_MODE, CUDNN_TYPE_CONVOLUTION_MODE, 1,
                        &mode), done);
  CONV_TRY(st, SET_ATTR(*desc, CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS, CUDNN_TYPE_INT64, 1, &spatial),
           done);
  CONV_TRY(st, SET_ATTR(*desc, CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, CUDNN_TYPE_INT64, 2, pads),
           done);
  CONV_TRY(st, SET_ATTR(*desc, CUDNN_ATTR_CONVOLUTION_POST_PADDINGS, CUDNN_TYPE_INT64, 2, pads),
           done);
  CONV_TRY(st, SET_ATTR(*desc, CUDNN_ATTR_CONVOLUTION_DILATIONS, CUDNN_TYPE_INT64, 2, dilations),
           done);
  CONV_TRY(st, SET_ATTR(*desc, CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES, CUDNN_TYPE_INT64, 2,
                        strides), done);
done:
  return FINALIZE_OR_FREE(desc, st, "convolution descriptor");
}

/* The operation descriptor and its attributes for one direction.  The
 * tensors keep their forward roles: x (dx), w (dw), y (dy). */
typedef struct conv_op_kind {
  cudnnBackendDescriptorType_t type;
  cudnnBackendAttributeName_t x, w, y, conv, alpha, beta;
  const char *what;
} conv_op_kind;

static const conv_op_kind *op_kind(conv_direction direction) {
  static const conv_op_kind forward = {
      CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR,
      CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X,
      CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W,
      CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y,
      CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC,
      CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA,
      CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA,
      "finalize convolution forward operation"};
  static const conv_op_kind backward_data = {
      CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR,
      CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DX,
      CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_W,
      CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DY,
      CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_CONV_DESC,
      CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_ALPHA,
      CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_BETA,
      "finalize convolution backward-data operation"};
  static const conv_op_kind backward_filter = {
      CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_FILTER_DESCRIPTOR,
      CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_X,
      CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DW,
      CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DY,
      CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_CONV_DESC,
      CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_ALPHA,
      CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_BETA,
      "finalize convolution backward-filter operation"};
  return direction == CONV_BACKWARD_DATA     ? &backward_data
         : direction == CONV_BACKWARD_FILTER ? &backward_filter
                                             : &forward;
}

/* out = 1 * pass(inputs) + 0 * out: beta 0 so that the output is
 * write-only.  A forward pass with a fused epilogue writes its sum to the
 * virtual conv_sum, which the epilogue reads. */
static conv_status make_conv_op(conv_direction direction, conv_graph *g, conv_error *err) {
  const conv_op_kind *kind = op_kind(direction);
  float alpha = 1.0f, beta = 0.0f;
  cudnnBackendDescriptor_t out = g->conv_sum != NULL ? g->conv_sum : g->y;
  conv_status st;
  CONV_TRY(st, conv_cudnn_make_desc(kind->type, &g->op, err), done);
  CONV_TRY(st, SET_ATTR(g->op, kind->x, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &g->x), done);
  CONV_TRY(st, SET_ATTR(g->op, kind->w, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &g->w), done);
  CONV_TRY(st, SET_ATTR(g->op, kind->y, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &out), done);
  CONV_TRY(st, SET_ATTR(g->op, kind->conv, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &g->conv), done);
  CONV_TRY(st, SET_ATTR(g->op, kind->alpha, CUDNN_TYPE_FLOAT, 1, &alpha), done);
  CONV_TRY(st, SET_ATTR(g->op, kind->beta, CUDNN_TYPE_FLOAT, 1, &beta), done);
done:
  return conv_cudnn_finalize_or_free(err, &g->op, st, kind->what);
}

/* A pointwise operation of `mode` in fp32: y = mode(x) or y = mode(x, b). */
static conv_status make_pointwise(cudnnPointwiseMode_t mode, cudnnBackendDescriptor_t x,
                                  cudnnBackendDescriptor_t b, cudnnBackendDescriptor_t y,
                                  cudnnBackendDescriptor_t *pointwise,
                                  cudnnBackendDescriptor_t *op, conv_error *err) {
  cudnnDataType_t precision = CUDNN_DATA_FLOAT;
  conv_status st;
  CONV_TRY(st, conv_cudnn_make_desc(CUDNN_BACKEND_POINTWISE_DESCRIPTOR, pointwise, err), done);
  CONV_TRY(st, SET_ATTR(*pointwise, CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &mode),
           done);
  CONV_TRY(st, SET_ATTR(*pointwise, CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1,
                        &precision), done);
  CONV_TRY(st, FINALIZE(*pointwise, "pointwise descriptor"), done);
  CONV_TRY(st, conv_cudnn_make_desc(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR, op, err), done);
  CONV_TRY(st, SET_ATTR(*op, CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR,
                        CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, pointwise), done);
  CONV_TRY(st, SET_ATTR(*op, CUDNN_ATTR_OPERATION_POINTWISE_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR,
                        1, &x), done);
  if (b != NULL)
    CONV_TRY(st, SET_ATTR(*op, CUDNN_ATTR_OPERATION_POINTWISE_BDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR,
                          1, &b), done);
  CONV_TRY(st, SET_ATTR(*op, CUDNN_ATTR_OPERATION_POINTWISE_YDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR,
                        1, &y), done);
  CONV_TRY(st, FINALIZE(*op, "pointwise operation"), done);
done:
  return st; /* the caller's graph_destroy frees what was made */
}

bool conv_cudnn_fuses_epilogue(const conv_problem *p) {
  return p->dtype != CONV_DTYPE_F32 && p->epilogue != CONV_EPILOGUE_NONE;
}

/* The fused epilogue's tensors (before the convolution, which writes
 * conv_sum): the fp32 sums, the fp32 bias b[k] (dims 1, K, 1, 1 in the
 * problem's layout, as cudnn-frontend's samples lay it out), and with ReLU
 * the biased sums between the add and the ReLU. */
static conv_status make_epilogue_tensors(const conv_problem *p, const int64_t y_dims[4],
                                         conv_graph *g, conv_error *err) {
  const int64_t bias_dims[4] = {1, p->k, 1, 1};
  conv_status st;
  CONV_TRY(st, make_tensor(UID_CONV_SUM, y_dims, p->layout, CUDNN_DATA_FLOAT, true, &g->conv_sum,
                           err), done);
  CONV_TRY(st, make_tensor(UID_BIAS, bias_dims, p->layout, CUDNN_DATA_FLOAT, false, &g->bias, err),
           done);
  if (p->epilogue == CONV_EPILOGUE_BIAS_RELU)
    CONV_TRY(st, make_tensor(UID_BIASED_SUM, y_dims, p->layout, CUDNN_DATA_FLOAT, true,
                             &g->biased_sum, err), done);
done:
  return st;
}

/* The fused epilogue's operations: y = sum + b, or biased = sum + b and
 * y = max(biased, 0). */
static conv_status make_epilogue_ops(conv_graph *g, conv_error *err) {
  cudnnBackendDescriptor_t added = g->biased_sum != NULL ? g->biased_sum : g->y;
  conv_status st = make_pointwise(CUDNN_POINTWISE_ADD, g->conv_sum, g->bias, added, &g->add,
                                  &g->add_op, err);
  if (st == CONV_OK && g->biased_sum != NULL)
    st = make_pointwise(CUDNN_POINTWISE_RELU_FWD, g->biased_sum, NULL, g->y, &g->relu,
                        &g->relu_op, err);
  return st;
}

/* Builds the graph; on failure nothing is left allocated.  The caller holds
 * env->cudnn_lock: finalizing the graph uses the shared handle. */
conv_status conv_cudnn_graph_build(const conv_problem *p, conv_env *env, bool krsc_filter,
                                   conv_graph *g, conv_error *err) {
  memset(g, 0, sizeof *g);
  conv_shape shape;
  conv_status st = conv_problem_shape(p, &shape);
  if (st != CONV_OK) return conv_error_set(err, st, "cudnn: invalid problem");
  int64_t x_dims[4] = {p->n, p->c, p->h, p->w};
  int64_t w_dims[4] = {p->k, shape.c_per_group, p->r, p->s};
  int64_t y_dims[4] = {p->n, p->k, shape.p, shape.q};
  const cudnnDataType_t type = data_type(p->dtype);
  const bool fused = conv_cudnn_fuses_epilogue(p);
  CONV_TRY(st, make_tensor(UID_X, x_dims, p->layout, type, false, &g->x, err), done);
  /* K R S C is the NHWC strides of (K, C, R, S): a problem's own
   * (conv_problem.filter_layout) or convtune's transposed copy. */
  const bool krsc = krsc_filter || conv_problem_krsc_filters(p);
  const conv_layout w_layout = krsc ? CONV_LAYOUT_NHWC : p->layout;
  CONV_TRY(st, make_tensor(UID_W, w_dims, w_layout, type, false, &g->w, err), done);
  CONV_TRY(st, make_tensor(UID_Y, y_dims, p->layout, type, false, &g->y, err), done);
  if (fused) CONV_TRY(st, make_epilogue_tensors(p, y_dims, g, err), done);
  CONV_TRY(st, make_conv_desc(p, &g->conv, err), done);
  CONV_TRY(st, make_conv_op(p->direction, g, err), done);
  if (fused) CONV_TRY(st, make_epilogue_ops(g, err), done);
  cudnnBackendDescriptor_t ops[3] = {g->op, g->add_op, g->relu_op};
  const int64_t op_count = !fused ? 1 : g->relu_op != NULL ? 3 : 2;
  CONV_TRY(st, conv_cudnn_make_desc(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR, &g->graph, err), done);
  CONV_TRY(st, SET_ATTR(g->graph, CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR,
                        op_count, ops), done);
  CONV_TRY(st, SET_ATTR(g->graph, CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1,
                        &env->cudnn), done);
  CONV_TRY(st, FINALIZE(g->graph, "operation graph"), done);
done:
  if (st != CONV_OK) conv_cudnn_graph_destroy(g);
  return st;
}

conv_status conv_cudnn_engine_count(cudnnBackendDescriptor_t graph, int64_t *count,
                                    conv_error *err) {
  int64_t got = 0;
  *count = 0;
  conv_status st = GET_ATTR(graph, CUDNN_ATTR_OPERATIONGRAPH_ENGINE_GLOBAL_COUNT, CUDNN_TYPE_INT64,
                            1, &got, count);
  if (st == CONV_OK && (*count < 0 || *count > MAX_ENGINES))
    st = conv_error_set(err, CONV_UNSUPPORTED, "cudnn: implausible engine count %" PRId64, *count);
  return st;
}

/* ---------------------------------------------------------------- engines */



/* A finalized engine; failing to finalize means it cannot run this graph. */
conv_status conv_cudnn_make_engine(cudnnBackendDescriptor_t graph, int64_t index,
                                   cudnnBackendDescriptor_t *engine, conv_error *err) {
  conv_status st;
  CONV_TRY(st, conv_cudnn_make_desc(CUDNN_BACKEND_ENGINE_DESCRIPTOR, engine, err), done);
  CONV_TRY(st, SET_ATTR(*engine, CUDNN_ATTR_ENGINE_OPERATION_GRAPH, CUDNN_TYPE_BACKEND_DESCRIPTOR,
                        1, &graph), done);
  CONV_TRY(st, SET_ATTR(*engine, CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, 1, &index),
           done);
done:
  return FINALIZE_OR_FREE(engine, st, "engine");
}

/* CUDNN_KNOB_TYPE_COUNTS knob infos are enough for every knob type. */
conv_status conv_cudnn_read_knobs(cudnnBackendDescriptor_t engine,
                                  knob_info knobs[CUDNN_KNOB_TYPE_COUNTS], int *count,
                                  conv_error *err) {
  cudnnBackendDescriptor_t info[CUDNN_KNOB_TYPE_COUNTS] = {0};
  int64_t n = 0, got = 0;
  conv_status st = CONV_OK;
  *count = 0;
  CONV_TRY(st, GET_DESCS(engine, CUDNN_ATTR_ENGINE_KNOB_INFO, CUDNN_BACKEND_KNOB_INFO_DESCRIPTOR,
                         CUDNN_KNOB_TYPE_COUNTS, &n, info), done);
  if (n > CUDNN_KNOB_TYPE_COUNTS) n = CUDNN_KNOB_TYPE_COUNTS;
  for (int64_t i = 0; i < n; i++) {
    cudnnBackendKnobType_t type;
    knob_info *k = &knobs[*count];
    CONV_TRY(st, GET_ATTR(info[i], CUDNN_ATTR_KNOB_INFO_TYPE, CUDNN_TYPE_KNOB_TYPE, 1, &got, &type),
             done);
    CONV_TRY(st, GET_ATTR(info[i], CUDNN_ATTR_KNOB_INFO_MINIMUM_VALUE, CUDNN_TYPE_INT64, 1, &got,
                          &k->min), done);
    CONV_TRY(st, GET_ATTR(info[i], CUDNN_ATTR_KNOB_INFO_MAXIMUM_VALUE, CUDNN_TYPE_INT64, 1, &got,
                          &k->max), done);
    CONV_TRY(st, GET_ATTR(info[i], CUDNN_ATTR_KNOB_INFO_STRIDE, CUDNN_TYPE_INT64, 1, &got,
                          &k->stride), done);
    k->type = (int64_t)type;
    (*count)++;
  }
done:
  conv_cudnn_free_descs(info, CUDNN_KNOB_TYPE_COUNTS);
  return st;
}

conv_status conv_cudnn_read_notes(cudnnBackendDescriptor_t engine, engine_notes *notes,
                                  conv_error *err) {
  /* Room for note types newer than these headers. */
  cudnnBackendNumericalNote_t list[32];
  int64_t n = 0;
  memset(notes, 0, sizeof *notes);
  conv_status st = GET_ATTR(engine, CUDNN_ATTR_ENGINE_NUMERICAL_NOTE, CUDNN_TYPE_NUMERICAL_NOTE,
                            32, &n, list);
  if (st != CONV_OK) return st;
  if (n > 32) n = 32;
  for (int64_t i = 0; i < n; i++) {
    switch (list[i]) {
      case CUDNN_NUMERICAL_NOTE_TENSOR_CORE: notes->tensor_core = true; break;
      case CUDNN_NUMERICAL_NOTE_DOWN_CONVERT_INPUTS: notes->down_convert = true; break;
      case CUDNN_NUMERICAL_NOTE_REDUCED_PRECISION_REDUCTION: notes->reduced_reduction = true; break;
      case CUDNN_NUMERICAL_NOTE_FFT:
      case CUDNN_NUMERICAL_NOTE_WINOGRAD:
      case CUDNN_NUMERICAL_NOTE_WINOGRAD_TILE_4x4:
      case CUDNN_NUMERICAL_NOTE_WINOGRAD_TILE_6x6:
      case CUDNN_NUMERICAL_NOTE_WINOGRAD_TILE_13x13: notes->transform = true; break;
      case CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC: notes->nondeterministic = true; break;
      default: break; /* NaN handling does not matter here */
    }
  }
  /* An engine whose behaviour notes cannot be read is taken as compiled
   * ahead of time, as every engine was before they were read. */
  cudnnBackendBehaviorNote_t behaviour[32];
  n = 0;
  if (cudnnBackendGetAttribute(engine, CUDNN_ATTR_ENGINE_BEHAVIOR_NOTE, CUDNN_TYPE_BEHAVIOR_NOTE,
                               32, &n, behaviour) != CUDNN_STATUS_SUCCESS)
    n = 0;
  if (n > 32) n = 32;
  for (int64_t i = 0; i < n; i++)
    if (behaviour[i] == CUDNN_BEHAVIOR_NOTE_RUNTIME_COMPILATION) notes->runtime_compiled = true;
  return CONV_OK;
}

const char *conv_cudnn_math_refusal(const conv_problem *p, const engine_notes *notes) {
  const bool fp32 = p->dtype == CONV_DTYPE_F32;
  if (fp32 && p->math == CONV_MATH_STRICT && notes->tensor_core) return "uses TF32 tensor cores";
  if (notes->down_convert) return fp32 ? "down-converts its fp32 inputs" : "down-converts its inputs";
  if (fp32 && notes->reduced_reduction) return "accumulates in reduced precision";
  return NULL;
}

conv_arith conv_cudnn_arith(const conv_problem *p, const engine_notes *notes) {
  if (p->dtype != CONV_DTYPE_F32 && notes->reduced_reduction) return CONV_ARITH_REDUCED_SUMS;
  return notes->transform ? CONV_ARITH_TRANSFORM : CONV_ARITH_DIRECT;
}
