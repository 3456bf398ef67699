/*
 * cudnn_graph.h -- cuDNN's backend (graph) API as the `cudnn` candidate
 * (cudnn.c, cudnn_configs.c) uses it: descriptors, the operation graph of one convolution
 * pass, its engines, their knobs and numerical notes.  Implemented in
 * cudnn_graph.c; C, internal to the library.
 */
#ifndef CONVTUNE_CUDNN_GRAPH_H
#define CONVTUNE_CUDNN_GRAPH_H

#include <stdbool.h>
#include <stdint.h>

#include "algorithms/algorithm.h"

/* Tensor ids in the operation graph and the variant pack (the bias only
 * in a fused epilogue's graph); and of the fp32 tensors a fused epilogue's
 * graph keeps on chip between its operations (virtual: no memory). */
enum { UID_X = 'x', UID_W = 'w', UID_Y = 'y', UID_BIAS = 'b', UID_CONV_SUM = 'c',
       UID_BIASED_SUM = 'a' };

/* Byte alignment promised for x, w and y.  16 lets the vectorised engines
 * in; run() checks the promise, since a plan outlives the pointers it was
 * tuned with (cudaMalloc gives 256). */
#define TENSOR_ALIGNMENT 16

/* The attribute's name goes into the error message. */
#define SET_ATTR(desc, attr, type, n, value)                                  \
  conv_cudnn_refused(err, cudnnBackendSetAttribute((desc), (attr), (type), (n), (value)), \
                     "set " #attr)
#define GET_ATTR(desc, attr, type, n, got, value)                             \
  conv_cudnn_refused(err, cudnnBackendGetAttribute((desc), (attr), (type), (n), (got), (value)), \
                     "get " #attr)
#define FINALIZE(desc, what) conv_cudnn_refused(err, cudnnBackendFinalize(desc), "finalize " what)
/* conv_cudnn_get_descs and conv_cudnn_finalize_or_free, the attribute's
 * name or what is finalized in the message. */
#define GET_DESCS(desc, attr, type, count, got, descs)                                            \
  conv_cudnn_get_descs(err, (desc), (attr), "get " #attr, (type), (count), (got), (descs))
#define FINALIZE_OR_FREE(desc, st, what)                                                          \
  conv_cudnn_finalize_or_free(err, (desc), (st), "finalize " what)
/* At run time a failure is an error, not a refusal. */
#define PACK_SET(desc, attr, type, n, value)                                               \
  conv_cudnn_failed(err, cudnnBackendSetAttribute((desc), (attr), (type), (n), (value)), \
                    "set " #attr)

/* One convolution pass as a finalized operation graph.  The parts stay
 * alive as long as the graph: cudnn-frontend keeps them too.  With a fused
 * epilogue (conv_cudnn_fuses_epilogue) the convolution writes its fp32 sum
 * to conv_sum, a pointwise add of the fp32 bias makes biased_sum (or y),
 * and a ReLU, for bias_relu, writes y: one rounding, as y is written. */
typedef struct conv_graph {
  cudnnBackendDescriptor_t x, w, y, conv, op, graph;
  cudnnBackendDescriptor_t bias, conv_sum, biased_sum, add, add_op, relu, relu_op;
} conv_graph;

typedef struct knob_info {
  int64_t type, min, max, stride;
} knob_info;

/* What an engine's numerical notes mean for this convtune. */
typedef struct engine_notes {
  bool tensor_core;       /* fp32 on tensor cores: TF32                    */
  bool down_convert;      /* inputs converted below fp32 (e.g. to fp16)    */
  bool reduced_reduction; /* accumulation below fp32                       */
  bool transform;         /* Winograd or FFT                               */
  bool nondeterministic;  /* results may differ run to run (atomics)       */
  bool runtime_compiled;  /* behaviour note: its kernel is compiled (NVRTC)
                           * as its plan is finalized, seconds a config    */
} engine_notes;

/* Records a failed cuDNN call.  While plans are being built a refusal means
 * "this config does not fit here" (CONV_UNSUPPORTED); running out of memory
 * stays an error. */
conv_status conv_cudnn_refused(conv_error *err, cudnnStatus_t code, const char *what);

/* At run time a failure is an error, reported the library-wide way. */
conv_status conv_cudnn_failed(conv_error *err, cudnnStatus_t code, const char *what);

conv_status conv_cudnn_make_desc(cudnnBackendDescriptorType_t type, cudnnBackendDescriptor_t *desc,
                                 conv_error *err);

void conv_cudnn_free_desc(cudnnBackendDescriptor_t *desc);
void conv_cudnn_free_descs(cudnnBackendDescriptor_t *descs, int64_t count);

/* Makes `count` descriptors of `type` in `descs` and reads the
 * descriptor-valued attribute `attr` of `desc` into them, *got of them
 * (which may exceed `count`); `what` names the read in messages.  The
 * caller frees all `count`, whatever the outcome. */
conv_status conv_cudnn_get_descs(conv_error *err, cudnnBackendDescriptor_t desc,
                                 cudnnBackendAttributeName_t attr, const char *what,
                                 cudnnBackendDescriptorType_t type, int64_t count, int64_t *got,
                                 cudnnBackendDescriptor_t *descs);

/* The end of making a descriptor: finalized where every attribute was set
 * (`st` is CONV_OK), and freed where one was not or it does not finalize
 * (`what` names the finalize in messages). */
conv_status conv_cudnn_finalize_or_free(conv_error *err, cudnnBackendDescriptor_t *desc,
                                        conv_status st, const char *what);

void conv_cudnn_graph_destroy(conv_graph *g);

/* Whether the problem's epilogue is part of its graph: for the half types
 * (fp32 problems add the bias after cuDNN's pass, conv_bias_act, as they
 * always have: their output is fp32 either way, and their configs stay
 * those already tuned).  A half output rounded before its bias is added
 * would be rounded twice. */
bool conv_cudnn_fuses_epilogue(const conv_problem *p);

/* Builds the graph; on failure nothing is left allocated.  The caller holds
 * env->cudnn_lock: finalizing the graph uses the shared handle.  Tensors in
 * the problem's dtype, compute in fp32; the epilogue fused where
 * conv_cudnn_fuses_epilogue says.  The
 * filters are K R S C for NHWC problems, for those whose own filters are
 * (conv_problem_krsc_filters), and with `krsc_filter` (the configs with
 * CONV_CUDNN_KNOB_KRSC_FILTER). */
conv_status conv_cudnn_graph_build(const conv_problem *p, conv_env *env, bool krsc_filter,
                                   conv_graph *g, conv_error *err);

/* convtune's own knob in a cudnn config, never passed to cuDNN, sorted
 * after cuDNN's knob types: value 1 runs the engine on a graph whose
 * filters are K R S C, into which convtune transposes the caller's K C R S
 * filters (conv_filter_to_krsc, in the plan's workspace) before each run.
 * For NCHW forward convolutions with R S > 1.  cuDNN's channels-last
 * engines, which win most such TF32 layers, otherwise transpose the
 * filters themselves, at about 1 TB/s on an H100 (15 us of the 40 that
 * resnet50's 7x7 c512 3x3 layer takes at batch 16); convtune's transpose
 * moves them at about 2 TB/s, and that layer takes 0.0325 ms against
 * 0.0376. */
#define CONV_CUDNN_KNOB_KRSC_FILTER 1000

/* convtune's other knob, last like the first (the two never meet: K R S C
 * filters are for fp32, this for the half types): value 1 runs the engine
 * on the problem's graph without its epilogue, and the bias (and ReLU)
 * after it in fp32 (conv_bias_act_any_dtype), rounding the output a second
 * time, as PyTorch's cuDNN path does.  Listed beside the fused configs of
 * a half problem with an epilogue: few of cuDNN's engines fuse a bias into
 * an NCHW half convolution, and without these such a problem had no plan. */
#define CONV_CUDNN_KNOB_UNFUSED_EPILOGUE 1001

/* The most knob pairs a config can hold. */
#define CONV_CUDNN_MAX_KNOBS ((CONV_CONFIG_MAX_VALUES - 1) / 2)

/* Whether a cudnn config carries CONV_CUDNN_KNOB_UNFUSED_EPILOGUE (its last
 * pair, once canonical, as CONV_CUDNN_KNOB_KRSC_FILTER is). */
bool conv_cudnn_config_unfused_epilogue(const conv_config *c);

/* Whether a problem's configs are also listed with the epilogue after the
 * graph (CONV_CUDNN_KNOB_UNFUSED_EPILOGUE), or on K R S C filters
 * (CONV_CUDNN_KNOB_KRSC_FILTER); cudnn_configs.c. */
bool conv_cudnn_unfused_epilogue_applies(const conv_problem *p);
bool conv_cudnn_krsc_filter_applies(const conv_problem *p);

/* Whether conv_cudnn_configs() marks best guesses for `problem` (its
 * Winograd engines on strict fp32 forward 3x3 stride-1 dense layers). */
bool conv_cudnn_marks_best_guesses(const conv_problem *problem);

/* The cudnn family's configs() (conv_algorithm), cudnn_configs.c. */
conv_status conv_cudnn_configs(const conv_problem *problem, conv_env *env, conv_config *out, int max,
                               int *count, conv_error *err);

/* The most configs of runtime-compiled engines (behaviour note
 * RUNTIME_COMPILATION) a problem lists per graph (an NCHW fp32 problem's
 * K R S C twin graph has its own), the first in the configs' order (the
 * heuristics' picks first), with no knob variants of their own: each
 * such plan compiles its kernel as it is built, 0.3-0.5 s on an H200.
 * Every config of a half graph with a fused bias is one (tests/families/
 * test_cudnn.c, half_fused_epilogue), and TF32 problems had dozens: on an
 * H200, resnet50's first forward at batch 16 in TF32 under the default
 * policy spent 107 of its 143 s of tuning building plans, against 0.4 of
 * 17 s in strict fp32; capped, 16 of 50 s, and its 31 exhaustive TF32 winners
 * the same configs as the uncapped list's, 0.98-1.03x their times
 * (BENCHMARKS-tuning.md). */
#define CONV_CUDNN_RUNTIME_COMPILED_MAX 4

conv_status conv_cudnn_engine_count(cudnnBackendDescriptor_t graph, int64_t *count,
                                    conv_error *err);

/* A finalized engine; failing to finalize means it cannot run this graph. */
conv_status conv_cudnn_make_engine(cudnnBackendDescriptor_t graph, int64_t index,
                                   cudnnBackendDescriptor_t *engine, conv_error *err);

/* The knob info attribute fills descriptors the caller created, as many as
 * it asks for; CUDNN_KNOB_TYPE_COUNTS is enough for every knob type. */
conv_status conv_cudnn_read_knobs(cudnnBackendDescriptor_t engine,
                                  knob_info knobs[CUDNN_KNOB_TYPE_COUNTS], int *count,
                                  conv_error *err);

conv_status conv_cudnn_read_notes(cudnnBackendDescriptor_t engine, engine_notes *notes,
                                  conv_error *err);

/* Knob variants the forward configs add per engine (cudnn_configs.c): with
 * `heuristic`, that engine's config from cuDNN's heuristics, its
 * neighbours, that config with one knob moved, a step each way on every
 * knob (on an H100 a 14x14 TF32 layer's best config was cuDNN's pick with
 * one cluster knob one lower, 7% faster, where moving that knob alone from
 * the engine's defaults did not get there); without, one-knob changes of
 * the engine's defaults.  The knobs take turns, stepping +1, -1, +2, -2,
 * ... strides from the heuristic's value (else the knob's minimum), so
 * that every knob is explored before any one is explored far.  Writes up
 * to `max` (at most CONV_CUDNN_NEIGHBOUR_VARIANTS or
 * CONV_CUDNN_DEFAULT_VARIANTS), distinct, each knob within its range, and
 * returns how many. */
#define CONV_CUDNN_NEIGHBOUR_VARIANTS 12
#define CONV_CUDNN_DEFAULT_VARIANTS 7
int conv_cudnn_knob_variants(int64_t engine, const knob_info *knobs, int knob_count,
                             const conv_config *heuristic, conv_config *out, int max);

/* NULL when the math mode admits the engine, else why not.  Strict mode is
 * plain fp32 FMA, so no tensor cores.  Neither mode promises inputs below
 * TF32 or a reduced-precision accumulator (PyTorch refuses
 * DOWN_CONVERT_INPUTS for fp32 too).  Half problems (whose math is always
 * strict) run on tensor cores with their inputs in their type; an engine
 * noted as reducing in reduced precision is admitted for them (PyTorch
 * takes it: resnet50's fp16 stem runs 2.2x faster on one), and
 * conv_cudnn_arith holds it to fp32 sums' accuracy. */
const char *conv_cudnn_math_refusal(const conv_problem *p, const engine_notes *notes);
/* The validation bound's kind for an admitted engine: CONV_ARITH_REDUCED_SUMS
 * (one output rounding) for a half problem's reduced-precision engine,
 * CONV_ARITH_TRANSFORM for Winograd and FFT engines, else direct. */
conv_arith conv_cudnn_arith(const conv_problem *p, const engine_notes *notes);

#endif /* CONVTUNE_CUDNN_GRAPH_H */
