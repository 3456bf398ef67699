// _convtune_torch_op: the CUDA kernels of torch.ops.convtune.conv2d and of
// its backward passes (conv2d_backward_data, conv2d_backward_filter) in
// C++, the operator's autograd formula, which calls them through the
// dispatcher, and its AutocastCUDA kernel (x and the weight cast to
// autocast's type through autocast's weight cache, as F.conv2d's are).
// Tensors are float32, float16 or bfloat16, one type per call; the bias is
// float32 or x's type, and the library adds it in float32.  Optional:
// python/convtune/ops.py registers Python kernels and a Python formula
// where this library is not built or does not load.
//
// Why C++ for the formula: a converted layer in training calls the
// operator, so its backward runs without entering Python (a Python
// autograd function's backward cost more host time than the plans' own
// calls, and training steps of small layers are host-bound).
//
// Why C++: torch.compile's generated code calls the operator once per
// convolution.  Through a Python kernel each call pays the dispatcher's
// boxing into Python objects, the interpreter and the tensor attribute
// reads, 25-30 us of host time on the H100 machine against 40 for
// F.conv2d; a compiled model of small layers is host-bound, so that was
// its whole loss.  Here tensor metadata is read from C++ and the plan is
// found in one hash lookup.  It also serves torch.export'ed models run
// without Python.  C++ is what torch's operator registration
// (TORCH_LIBRARY_IMPL) takes; the library itself stays C.
//
// It keeps its own convtune context per device, made on first use with
// the library's defaults (the default cache, the predict policy) and
// torch's caching allocator (_torch_alloc.h), as convtune.Context(device)
// is: plans are not shared with the Python binding's, so no plan is
// executed from both sides.  Plans live until
// convtune_torch_op_close(), which the binding calls at exit.
//
// Threads: torch releases the GIL around operator calls, so a mutex per
// plan keeps two threads from executing one plan at once (one workspace),
// and a map mutex guards the contexts and plans.

#include <ATen/ATen.h>
#include <ATen/autocast_mode.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/autograd.h>
#include <torch/library.h>

#include <cuda_runtime_api.h>

#include <array>
#include <cstdio>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "_torch_alloc.h"
#include "convtune.h"

namespace {

// Statuses meaning "convtune has no plan for this problem", as in nn.py.
bool no_plan_status(conv_status s) {
  return s == CONV_UNSUPPORTED || s == CONV_FILTER_TOO_LARGE || s == CONV_SIZE_OVERFLOW ||
         s == CONV_NO_CANDIDATE || s == CONV_CACHE_MISS || s == CONV_WORKSPACE_LIMIT;
}

// One plan and what its calls need: the output's shape, and the stream of
// the last execute (whose use of the workspace a call on another stream
// waits for).
struct PlanEntry {
  conv_plan *plan = nullptr;
  std::array<int64_t, 4> y_shape{};  // the convolution's output (dy's shape)
  std::mutex lock;
  cudaStream_t last_stream = nullptr;
  bool has_last_stream = false;
  cudaEvent_t order_event = nullptr;  // made when first needed
};

// The map key: the problem a plan serves, one field per position.
enum KeyField {
  kDevice, kNhwc, kTf32, kEpilogue, kN, kC, kH, kW, kK, kR, kS, kStrideH, kStrideW, kPadH, kPadW,
  kDilH, kDilW, kGroups, kDeterministic, kDirection, kKrsc, kDtype, kKeyFields
};
using Key = std::array<int64_t, kKeyFields>;

struct State {
  std::mutex lock;
  std::map<int, conv_context *> contexts;
  std::map<Key, std::unique_ptr<PlanEntry>> plans;
};

State &state() {
  static State *s = new State;  // never destroyed: see convtune_torch_op_close
  return *s;
}

conv_context *context_for(State &s, int device) {
  auto found = s.contexts.find(device);
  if (found != s.contexts.end()) return found->second;
  conv_context_options options;
  conv_context_options_init(&options);
  options.device = device;
  // Workspaces and tuning buffers from torch's caching allocator, as the
  // binding's contexts take them (_torch_alloc.h).
  options.device_alloc = convtune_torch_device_alloc;
  options.device_free = convtune_torch_device_free;
  conv_context *ctx = nullptr;
  conv_status st = conv_context_create(&ctx, &options);
  TORCH_CHECK(st == CONV_OK, "convtune: cannot open a context on cuda:", device, ": ",
              conv_status_string(st), ": ", conv_context_last_error(nullptr));
  s.contexts[device] = ctx;
  return ctx;
}

// What the three operators share after the tensors: stride, padding,
// dilation, groups, math and layout, checked.  Layout "nchw_krsc" is NCHW
// with the filters K R S C (a channels-last weight) for the forward pass;
// the backward passes read the weight K C R S (krsc is the forward's).
struct PassArgs {
  at::IntArrayRef stride, padding, dilation;
  int64_t groups;
  bool tf32, nhwc, krsc;
  at::MemoryFormat format;    // x, y and their gradients
  at::MemoryFormat w_format;  // the forward's weight
};

void check_pair(const char *op, at::IntArrayRef v, const char *name) {
  TORCH_CHECK(v.size() == 2, op, ": ", name, " must have 2 values, got ", v.size());
}

PassArgs check_pass_args(const char *op, at::IntArrayRef stride, at::IntArrayRef padding,
                         at::IntArrayRef dilation, int64_t groups, c10::string_view math,
                         c10::string_view layout) {
  TORCH_CHECK(math == "strict" || math == "tf32", op, ": math must be 'strict' or 'tf32', got '",
              std::string(math), "'");
  TORCH_CHECK(layout == "nchw" || layout == "nhwc" || layout == "nchw_krsc", op,
              ": layout must be 'nchw', 'nhwc' or 'nchw_krsc', got '", std::string(layout), "'");
  check_pair(op, stride, "stride");
  check_pair(op, padding, "padding");
  check_pair(op, dilation, "dilation");
  TORCH_CHECK(groups > 0, op, ": groups must be positive, got ", groups);
  const bool nhwc = layout == "nhwc", krsc = layout == "nchw_krsc";
  const at::MemoryFormat format = nhwc ? at::MemoryFormat::ChannelsLast : at::MemoryFormat::Contiguous;
  return {stride, padding, dilation, groups, math == "tf32", nhwc, krsc, format,
          krsc ? at::MemoryFormat::ChannelsLast : format};
}

// The conv_dtype of a tensor type convtune computes in.
conv_dtype dtype_of(const char *op, at::ScalarType type) {
  TORCH_CHECK(type == at::kFloat || type == at::kHalf || type == at::kBFloat16, op,
              ": float32, float16 or bfloat16 only, got ", type);
  return type == at::kHalf ? CONV_DTYPE_F16 : type == at::kBFloat16 ? CONV_DTYPE_BF16 : CONV_DTYPE_F32;
}

// 4-D tensors of one type (float32, float16 or bfloat16) on one CUDA device.
conv_dtype check_tensors(const char *op,
                         std::initializer_list<std::pair<const char *, const at::Tensor *>> ts) {
  const at::Tensor &first = *ts.begin()->second;
  const conv_dtype dtype = dtype_of(op, first.scalar_type());
  for (const auto &[name, t] : ts) {
    TORCH_CHECK(t->dim() == 4, op, ": ", name, " must be 4-D, got ", t->dim(), "-D");
    TORCH_CHECK(t->scalar_type() == first.scalar_type(), op, ": tensors of one type, got ",
                first.scalar_type(), " and ", t->scalar_type(), " for ", name);
    TORCH_CHECK(t->is_cuda() && t->device() == first.device(), op,
                ": tensors must be on one CUDA device, got ", name, " on ", t->device());
  }
  return dtype;
}

void check_sizes(const char *op, at::IntArrayRef size, const char *name) {
  TORCH_CHECK(size.size() == 4, op, ": ", name, " must have 4 values, got ", size.size());
}

Key make_key(int device, conv_direction direction, conv_dtype dtype, const PassArgs &a,
             conv_epilogue epilogue, bool deterministic, at::IntArrayRef x, at::IntArrayRef w) {
  Key k{};
  // The half types ignore math (convtune.h): one plan whatever the setting.
  k[kDevice] = device, k[kNhwc] = a.nhwc, k[kTf32] = a.tf32 && dtype == CONV_DTYPE_F32;
  k[kEpilogue] = epilogue, k[kDtype] = dtype;
  k[kN] = x[0], k[kC] = x[1], k[kH] = x[2], k[kW] = x[3];
  k[kK] = w[0], k[kR] = w[2], k[kS] = w[3];
  k[kStrideH] = a.stride[0], k[kStrideW] = a.stride[1];
  k[kPadH] = a.padding[0], k[kPadW] = a.padding[1];
  k[kDilH] = a.dilation[0], k[kDilW] = a.dilation[1];
  k[kGroups] = a.groups, k[kDeterministic] = deterministic, k[kDirection] = direction;
  k[kKrsc] = a.krsc && direction == CONV_FORWARD;
  return k;
}

// The problem a key stands for; built only on a miss.
conv_problem problem_of(const Key &k) {
  conv_problem p;
  conv_problem_init(&p);
  p.layout = k[kNhwc] ? CONV_LAYOUT_NHWC : CONV_LAYOUT_NCHW;
  p.math = k[kTf32] ? CONV_MATH_TF32 : CONV_MATH_STRICT;
  p.epilogue = static_cast<conv_epilogue>(k[kEpilogue]);
  p.n = k[kN], p.c = k[kC], p.h = k[kH], p.w = k[kW];
  p.k = k[kK], p.r = k[kR], p.s = k[kS];
  p.stride_h = k[kStrideH], p.stride_w = k[kStrideW];
  p.pad_h = k[kPadH], p.pad_w = k[kPadW];
  p.dil_h = k[kDilH], p.dil_w = k[kDilW];
  p.groups = k[kGroups];
  p.deterministic = k[kDeterministic] != 0;
  p.direction = static_cast<conv_direction>(k[kDirection]);
  p.filter_layout = k[kKrsc] ? CONV_FILTER_KRSC : CONV_FILTER_DEFAULT;
  p.dtype = static_cast<conv_dtype>(k[kDtype]);
  return p;
}

// The entry for this problem, made (the plan looked up or tuned) on first use.
PlanEntry &entry_for(const Key &key) {
  State &s = state();
  std::lock_guard<std::mutex> guard(s.lock);
  auto found = s.plans.find(key);
  if (found != s.plans.end()) return *found->second;
  conv_context *ctx = context_for(s, static_cast<int>(key[kDevice]));
  const conv_problem problem = problem_of(key);
  char problem_text[CONV_PROBLEM_KEY_MAX];
  if (conv_problem_key(&problem, problem_text, sizeof problem_text) != CONV_OK)  // invalid
    snprintf(problem_text, sizeof problem_text, "n%lld c%lld h%lld w%lld k%lld r%lld s%lld",
             (long long)problem.n, (long long)problem.c, (long long)problem.h,
             (long long)problem.w, (long long)problem.k, (long long)problem.r,
             (long long)problem.s);
  int64_t p = 0, q = 0;
  conv_status st = conv_problem_output_dims(&problem, &p, &q);
  conv_plan *plan = nullptr;
  if (st == CONV_OK) st = conv_plan_create(ctx, &problem, &plan);
  TORCH_CHECK(st == CONV_OK, "convtune: ",
              no_plan_status(st) ? "no plan for " : "planning failed for ", problem_text, ": ",
              conv_status_string(st), ": ", conv_context_last_error(ctx));
  auto entry = std::make_unique<PlanEntry>();
  entry->plan = plan;
  entry->y_shape = {problem.n, problem.k, p, q};
  PlanEntry &made = *entry;
  s.plans.emplace(key, std::move(entry));
  return made;
}

// The entry of a pass, for the library's deterministic setting now.
PlanEntry &entry_for_pass(conv_direction direction, const PassArgs &a, conv_epilogue epilogue,
                          at::IntArrayRef x, at::IntArrayRef w, const at::Tensor &any) {
  // torch.use_deterministic_algorithms(True): a deterministic plan.
  const bool deterministic = at::globalContext().deterministicAlgorithms();
  const conv_dtype dtype = dtype_of("convtune", any.scalar_type());
  return entry_for(make_key(any.get_device(), direction, dtype, a, epilogue, deterministic, x, w));
}

// t contiguous in `format` with its data aligned as the library needs.
at::Tensor dense(const at::Tensor &t, at::MemoryFormat format) {
  at::Tensor d = t.contiguous(format);
  if (reinterpret_cast<uintptr_t>(d.data_ptr()) % CONV_POINTER_ALIGNMENT != 0)
    d = d.clone(format);
  return d;
}

// Whether `stream` is being captured into a CUDA graph (as _plan.py asks
// torch.cuda.is_current_stream_capturing()).
bool capturing(cudaStream_t stream) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  C10_CUDA_CHECK(cudaStreamIsCapturing(stream, &status));
  return status != cudaStreamCaptureStatusNone;
}

// The workspace may still be in use by the last execute, on another stream.
// Not while `stream` is captured: a capture cannot wait for work outside it
// (cudaErrorStreamCaptureIsolation), and the graph's replays are ordered by
// whoever launches them, as in _plan.py.
void order_after_last_stream(PlanEntry &e, cudaStream_t stream, bool captured) {
  if (captured || !e.has_last_stream || e.last_stream == stream) return;
  if (e.order_event == nullptr)
    C10_CUDA_CHECK(cudaEventCreateWithFlags(&e.order_event, cudaEventDisableTiming));
  C10_CUDA_CHECK(cudaEventRecord(e.order_event, e.last_stream));
  C10_CUDA_CHECK(cudaStreamWaitEvent(stream, e.order_event, 0));
}

// Runs execute(stream) for the entry's plan on torch's current stream.
template <typename Execute>
void execute_on_current_stream(const char *op, PlanEntry &e, const at::Tensor &any,
                               Execute execute) {
  const c10::cuda::CUDAGuard device_guard(any.device());
  cudaStream_t stream = at::cuda::getCurrentCUDAStream(any.get_device()).stream();
  std::lock_guard<std::mutex> guard(e.lock);
  const bool captured = capturing(stream);
  order_after_last_stream(e, stream, captured);
  conv_status st = execute(stream);
  TORCH_CHECK(st == CONV_OK, "convtune: ", op, ": ", conv_status_string(st));
  if (captured) return;  // nothing ran: a replay runs it, where its launcher orders it
  e.last_stream = stream;
  e.has_last_stream = true;
}

// Whether the forward's activation is a fused ReLU ("relu"; "none" else),
// which the library applies after the bias (epilogue BIAS_RELU).
bool fused_relu(const char *op, c10::string_view activation, bool has_bias) {
  TORCH_CHECK(activation == "none" || activation == "relu", op,
              ": activation must be 'none' or 'relu', got '", std::string(activation), "'");
  TORCH_CHECK(activation == "none" || has_bias, op,
              ": activation 'relu' needs a bias (epilogue BIAS_RELU)");
  return activation == "relu";
}

void check_channels(const char *op, int64_t c, const at::IntArrayRef w, int64_t groups) {
  TORCH_CHECK(c == w[1] * groups, op, ": x has ", c, " channels, weight takes ", w[1],
              " per group x ", groups, " groups");
}

// ------------------------------------------------------------ the passes

at::Tensor conv2d_cuda(const at::Tensor &x_in, const at::Tensor &w_in,
                       const c10::optional<at::Tensor> &bias_in, at::IntArrayRef stride,
                       at::IntArrayRef padding, at::IntArrayRef dilation, int64_t groups,
                       c10::string_view math, c10::string_view layout,
                       c10::string_view activation) {
  const char *op = "convtune.conv2d";
  const PassArgs a = check_pass_args(op, stride, padding, dilation, groups, math, layout);
  check_tensors(op, {{"x", &x_in}, {"weight", &w_in}});
  const bool has_bias = bias_in.has_value() && bias_in->defined();
  const bool relu = fused_relu(op, activation, has_bias);
  if (has_bias)
    TORCH_CHECK((bias_in->scalar_type() == at::kFloat || bias_in->scalar_type() == x_in.scalar_type()) &&
                    bias_in->device() == x_in.device() && bias_in->dim() == 1 &&
                    bias_in->size(0) == w_in.size(0),
                op, ": bias must be a tensor of shape (", w_in.size(0), ",) on ", x_in.device(),
                ", float32 or x's type (", x_in.scalar_type(), ")");
  check_channels(op, x_in.size(1), w_in.sizes(), groups);
  const at::Tensor x = dense(x_in, a.format), w = dense(w_in, a.w_format);
  // The library adds a float32 bias whatever x's type (convtune.h).
  const at::Tensor bias =
      has_bias ? dense(bias_in->to(at::kFloat), at::MemoryFormat::Contiguous) : at::Tensor();
  const conv_epilogue epilogue =
      relu ? CONV_EPILOGUE_BIAS_RELU : has_bias ? CONV_EPILOGUE_BIAS : CONV_EPILOGUE_NONE;
  PlanEntry &e = entry_for_pass(CONV_FORWARD, a, epilogue, x.sizes(), w.sizes(), x);
  at::Tensor y = at::empty(e.y_shape, x.options().memory_format(a.format));
  execute_on_current_stream(op, e, x, [&](cudaStream_t stream) {
    return conv_plan_execute(e.plan, stream, x.data_ptr(), w.data_ptr(),
                             has_bias ? bias.data_ptr() : nullptr, y.data_ptr());
  });
  return y;
}

// What the two backward passes share after their checks: `first` and
// `second` are the library call's inputs (dy and w, or x and dy), made
// dense here, and out_size the size of its output (dx or dw).
using PassFn = conv_status (*)(conv_plan *, void *, const void *, const void *, void *);

at::Tensor backward_pass(const char *op, conv_direction direction, const PassArgs &a,
                         const at::Tensor &first_in, const at::Tensor &second_in,
                         at::IntArrayRef out_size, PassFn pass) {
  const at::Tensor first = dense(first_in, a.format), second = dense(second_in, a.format);
  const bool data = direction == CONV_BACKWARD_DATA;
  const at::Tensor &dy = data ? first : second;
  PlanEntry &e = entry_for_pass(direction, a, CONV_EPILOGUE_NONE, data ? out_size : first.sizes(),
                                data ? second.sizes() : out_size, first);
  TORCH_CHECK(dy.sizes() == at::IntArrayRef(e.y_shape), op, ": grad has shape ", dy.sizes(),
              ", the convolution's output ", at::IntArrayRef(e.y_shape));
  at::Tensor out = at::empty(out_size, first.options().memory_format(a.format));
  execute_on_current_stream(op, e, first, [&](cudaStream_t stream) {
    return pass(e.plan, stream, first.data_ptr(), second.data_ptr(), out.data_ptr());
  });
  return out;
}

at::Tensor conv2d_backward_data_cuda(const at::Tensor &grad, const at::Tensor &w,
                                     c10::SymIntArrayRef input_size, at::IntArrayRef stride,
                                     at::IntArrayRef padding, at::IntArrayRef dilation,
                                     int64_t groups, c10::string_view math,
                                     c10::string_view layout) {
  const char *op = "convtune.conv2d_backward_data";
  const PassArgs a = check_pass_args(op, stride, padding, dilation, groups, math, layout);
  check_tensors(op, {{"grad", &grad}, {"weight", &w}});
  const at::IntArrayRef x_size = C10_AS_INTARRAYREF_SLOW(input_size);
  check_sizes(op, x_size, "input_size");
  check_channels(op, x_size[1], w.sizes(), groups);
  return backward_pass(op, CONV_BACKWARD_DATA, a, grad, w, x_size, conv_plan_backward_data);
}

at::Tensor conv2d_backward_filter_cuda(const at::Tensor &x, const at::Tensor &grad,
                                       c10::SymIntArrayRef weight_size, at::IntArrayRef stride,
                                       at::IntArrayRef padding, at::IntArrayRef dilation,
                                       int64_t groups, c10::string_view math,
                                       c10::string_view layout) {
  const char *op = "convtune.conv2d_backward_filter";
  const PassArgs a = check_pass_args(op, stride, padding, dilation, groups, math, layout);
  check_tensors(op, {{"x", &x}, {"grad", &grad}});
  const at::IntArrayRef w_size = C10_AS_INTARRAYREF_SLOW(weight_size);
  check_sizes(op, w_size, "weight_size");
  check_channels(op, x.size(1), w_size, groups);
  return backward_pass(op, CONV_BACKWARD_FILTER, a, x, grad, w_size, conv_plan_backward_filter);
}

// ------------------------------------------------------------ autograd

// The operators as the dispatcher calls them: the autograd formula goes
// through it, so that torch.compile traces the backward passes (their
// fake kernels) where eager mode runs the CUDA kernels above.
using Conv2dSignature = at::Tensor(const at::Tensor &, const at::Tensor &,
                                   const c10::optional<at::Tensor> &, at::IntArrayRef,
                                   at::IntArrayRef, at::IntArrayRef, int64_t, c10::string_view,
                                   c10::string_view, c10::string_view);
using BackwardSignature = at::Tensor(const at::Tensor &, const at::Tensor &, c10::SymIntArrayRef,
                                     at::IntArrayRef, at::IntArrayRef, at::IntArrayRef, int64_t,
                                     c10::string_view, c10::string_view);

const c10::TypedOperatorHandle<Conv2dSignature> &conv2d_op() {
  static const auto handle =
      c10::Dispatcher::singleton().findSchemaOrThrow("convtune::conv2d", "").typed<Conv2dSignature>();
  return handle;
}

const c10::TypedOperatorHandle<Conv2dSignature> &conv2d_inference_op() {
  static const auto handle = c10::Dispatcher::singleton()
                                 .findSchemaOrThrow("convtune::conv2d_inference", "")
                                 .typed<Conv2dSignature>();
  return handle;
}

const c10::TypedOperatorHandle<BackwardSignature> &backward_data_op() {
  static const auto handle = c10::Dispatcher::singleton()
                                 .findSchemaOrThrow("convtune::conv2d_backward_data", "")
                                 .typed<BackwardSignature>();
  return handle;
}

const c10::TypedOperatorHandle<BackwardSignature> &backward_filter_op() {
  static const auto handle = c10::Dispatcher::singleton()
                                 .findSchemaOrThrow("convtune::conv2d_backward_filter", "")
                                 .typed<BackwardSignature>();
  return handle;
}

// y = conv2d(x, w) + bias, or relu of it: dx and dw from the backward
// operators, db the sum of grad over n, h and w (grad masked by y > 0
// first, where the ReLU is fused).
class Conv2dFunction : public torch::autograd::Function<Conv2dFunction> {
 public:
  static at::Tensor forward(torch::autograd::AutogradContext *ctx, const at::Tensor &x,
                            const at::Tensor &w, const c10::optional<at::Tensor> &bias,
                            at::IntArrayRef stride, at::IntArrayRef padding,
                            at::IntArrayRef dilation, int64_t groups, c10::string_view math,
                            c10::string_view layout, c10::string_view activation) {
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    at::Tensor y = conv2d_op().call(x, w, bias, stride, padding, dilation, groups, math, layout,
                                    activation);
    const bool relu = activation == "relu";
    ctx->save_for_backward({x, w, relu ? y : at::Tensor()});
    ctx->saved_data["stride"] = stride.vec();
    ctx->saved_data["padding"] = padding.vec();
    ctx->saved_data["dilation"] = dilation.vec();
    ctx->saved_data["groups"] = groups;
    ctx->saved_data["math"] = std::string(math);
    ctx->saved_data["layout"] = std::string(layout);
    ctx->saved_data["has_bias"] = bias.has_value() && bias->defined();
    return y;
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext *ctx,
                                                 torch::autograd::variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor &x = saved[0], &w = saved[1], &y = saved[2];
    const at::Tensor dy = y.defined() ? grads[0] * y.gt(0) : grads[0];
    const std::vector<int64_t> stride = ctx->saved_data["stride"].toIntVector(),
                               padding = ctx->saved_data["padding"].toIntVector(),
                               dilation = ctx->saved_data["dilation"].toIntVector();
    const int64_t groups = ctx->saved_data["groups"].toInt();
    const std::string math = ctx->saved_data["math"].toStringRef(),
                      layout = ctx->saved_data["layout"].toStringRef();
    at::Tensor dx, dw, db;
    if (ctx->needs_input_grad(0))
      dx = backward_data_op().call(dy, w, x.sym_sizes(), stride, padding, dilation, groups, math,
                                   layout);
    if (ctx->needs_input_grad(1))
      dw = backward_filter_op().call(x, dy, w.sym_sizes(), stride, padding, dilation, groups,
                                     math, layout);
    // Summed in float32; autograd casts it to the bias's type.
    if (ctx->saved_data["has_bias"].toBool() && ctx->needs_input_grad(2))
      db = dy.sum({0, 2, 3}, /*keepdim=*/false, at::kFloat);
    return {dx, dw, db, at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor(),
            at::Tensor(), at::Tensor()};
  }
};

at::Tensor conv2d_autograd(const at::Tensor &x, const at::Tensor &w,
                           const c10::optional<at::Tensor> &bias, at::IntArrayRef stride,
                           at::IntArrayRef padding, at::IntArrayRef dilation, int64_t groups,
                           c10::string_view math, c10::string_view layout,
                           c10::string_view activation) {
  return Conv2dFunction::apply(x, w, bias, stride, padding, dilation, groups, math, layout,
                               activation);
}

// ------------------------------------------------------------ autocast

// Under CUDA autocast: x and the weight cast to autocast's type as
// autocast casts F.conv2d's inputs, through its cache (a weight that is a
// leaf requiring grad is cast once per autocast region), then the operator
// below autocast.  The bias stays as it is: the library adds it in float32.
at::Tensor autocast_call(const c10::TypedOperatorHandle<Conv2dSignature> &op, const at::Tensor &x,
                         const at::Tensor &w, const c10::optional<at::Tensor> &bias,
                         at::IntArrayRef stride, at::IntArrayRef padding, at::IntArrayRef dilation,
                         int64_t groups, c10::string_view math, c10::string_view layout,
                         c10::string_view activation) {
  c10::impl::ExcludeDispatchKeyGuard no_autocast(c10::DispatchKey::AutocastCUDA);
  const at::ScalarType type = at::autocast::get_autocast_dtype(at::kCUDA);
  return op.call(at::autocast::cached_cast(type, x, c10::DeviceType::CUDA),
                 at::autocast::cached_cast(type, w, c10::DeviceType::CUDA), bias, stride, padding,
                 dilation, groups, math, layout, activation);
}

at::Tensor conv2d_autocast(const at::Tensor &x, const at::Tensor &w,
                           const c10::optional<at::Tensor> &bias, at::IntArrayRef stride,
                           at::IntArrayRef padding, at::IntArrayRef dilation, int64_t groups,
                           c10::string_view math, c10::string_view layout,
                           c10::string_view activation) {
  return autocast_call(conv2d_op(), x, w, bias, stride, padding, dilation, groups, math, layout,
                       activation);
}

at::Tensor conv2d_inference_autocast(const at::Tensor &x, const at::Tensor &w,
                                     const c10::optional<at::Tensor> &bias, at::IntArrayRef stride,
                                     at::IntArrayRef padding, at::IntArrayRef dilation,
                                     int64_t groups, c10::string_view math,
                                     c10::string_view layout, c10::string_view activation) {
  return autocast_call(conv2d_inference_op(), x, w, bias, stride, padding, dilation, groups, math,
                       layout, activation);
}

}  // namespace

// The schemas are defined by python/convtune/ops.py before it loads this
// library.  conv2d_inference is the forward without an autograd formula.
TORCH_LIBRARY_IMPL(convtune, CUDA, m) {
  m.impl("conv2d", &conv2d_cuda);
  m.impl("conv2d_inference", &conv2d_cuda);
  m.impl("conv2d_backward_data", &conv2d_backward_data_cuda);
  m.impl("conv2d_backward_filter", &conv2d_backward_filter_cuda);
}

TORCH_LIBRARY_IMPL(convtune, Autograd, m) { m.impl("conv2d", &conv2d_autograd); }

TORCH_LIBRARY_IMPL(convtune, AutocastCUDA, m) {
  m.impl("conv2d", &conv2d_autocast);
  m.impl("conv2d_inference", &conv2d_inference_autocast);
}

// Frees every plan and context (the binding calls it at exit, while CUDA
// is still up); later calls make new ones.  Returns the number of plans freed.
extern "C" __attribute__((visibility("default"))) int convtune_torch_op_close(void) {
  State &s = state();
  std::lock_guard<std::mutex> guard(s.lock);
  int freed = 0;
  for (auto &kv : s.plans) {
    std::lock_guard<std::mutex> plan_guard(kv.second->lock);
    conv_plan_destroy(kv.second->plan);
    if (kv.second->order_event != nullptr) cudaEventDestroy(kv.second->order_event);
    freed++;
  }
  s.plans.clear();
  for (auto &kv : s.contexts) conv_context_destroy(kv.second);
  s.contexts.clear();
  return freed;
}

// How many plans the operator holds (tests).
extern "C" __attribute__((visibility("default"))) int convtune_torch_op_plans(void) {
  State &s = state();
  std::lock_guard<std::mutex> guard(s.lock);
  return (int)s.plans.size();
}
