// _convtune_torch_op: the CUDA kernel of torch.ops.convtune.conv2d in C++.
// Optional: python/convtune/ops.py registers a Python kernel where this
// library is not built or does not load.
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
// the library's defaults (the default cache, exhaustive tuning), as
// convtune.Context(device) is: plans are not shared with the Python
// binding's, so no plan is executed from both sides.  Plans live until
// convtune_torch_op_close(), which the binding calls at exit.
//
// Threads: torch releases the GIL around operator calls, so a mutex per
// plan keeps two threads from executing one plan at once (one workspace),
// and a map mutex guards the contexts and plans.

#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include <cuda_runtime_api.h>

#include <array>
#include <cstdio>
#include <map>
#include <memory>
#include <mutex>
#include <string>

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
  std::array<int64_t, 4> out_shape{};
  std::mutex lock;
  cudaStream_t last_stream = nullptr;
  bool has_last_stream = false;
  cudaEvent_t order_event = nullptr;  // made when first needed
};

// The problem: device, layout, math, bias, x and w sizes, stride, padding,
// dilation, groups, deterministic.
using Key = std::array<int64_t, 20>;

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
  conv_context *ctx = nullptr;
  conv_status st = conv_context_create(&ctx, &options);
  TORCH_CHECK(st == CONV_OK, "convtune: cannot open a context on cuda:", device, ": ",
              conv_status_string(st), ": ", conv_context_last_error(nullptr));
  s.contexts[device] = ctx;
  return ctx;
}

conv_problem make_problem(const at::Tensor &x, const at::Tensor &w, bool has_bias,
                          at::IntArrayRef stride, at::IntArrayRef padding, at::IntArrayRef dilation,
                          int64_t groups, bool tf32, bool nhwc, bool deterministic) {
  conv_problem p;
  conv_problem_init(&p);
  p.n = x.size(0), p.c = x.size(1), p.h = x.size(2), p.w = x.size(3);
  p.k = w.size(0), p.r = w.size(2), p.s = w.size(3);
  p.stride_h = stride[0], p.stride_w = stride[1];
  p.pad_h = padding[0], p.pad_w = padding[1];
  p.dil_h = dilation[0], p.dil_w = dilation[1];
  p.groups = groups;
  p.math = tf32 ? CONV_MATH_TF32 : CONV_MATH_STRICT;
  p.layout = nhwc ? CONV_LAYOUT_NHWC : CONV_LAYOUT_NCHW;
  p.epilogue = has_bias ? CONV_EPILOGUE_BIAS : CONV_EPILOGUE_NONE;
  p.deterministic = deterministic;
  return p;
}

// The entry for this problem, made (the plan looked up or tuned) on first use.
PlanEntry &entry_for(const Key &key, int device, const conv_problem &problem) {
  State &s = state();
  std::lock_guard<std::mutex> guard(s.lock);
  auto found = s.plans.find(key);
  if (found != s.plans.end()) return *found->second;
  conv_context *ctx = context_for(s, device);
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
  entry->out_shape = {problem.n, problem.k, p, q};
  PlanEntry &made = *entry;
  s.plans.emplace(key, std::move(entry));
  return made;
}

// t contiguous in `format` with its data aligned as the library needs.
at::Tensor dense(const at::Tensor &t, at::MemoryFormat format) {
  at::Tensor d = t.contiguous(format);
  if (reinterpret_cast<uintptr_t>(d.data_ptr()) % CONV_POINTER_ALIGNMENT != 0)
    d = d.clone(format);
  return d;
}

void check_pair(at::IntArrayRef v, const char *name) {
  TORCH_CHECK(v.size() == 2, "convtune.conv2d: ", name, " must have 2 values, got ", v.size());
}

// The workspace may still be in use by the last execute, on another stream.
void order_after_last_stream(PlanEntry &e, cudaStream_t stream) {
  if (!e.has_last_stream || e.last_stream == stream) return;
  if (e.order_event == nullptr)
    C10_CUDA_CHECK(cudaEventCreateWithFlags(&e.order_event, cudaEventDisableTiming));
  C10_CUDA_CHECK(cudaEventRecord(e.order_event, e.last_stream));
  C10_CUDA_CHECK(cudaStreamWaitEvent(stream, e.order_event, 0));
}

at::Tensor conv2d_cuda(const at::Tensor &x_in, const at::Tensor &w_in,
                       const c10::optional<at::Tensor> &bias_in, at::IntArrayRef stride,
                       at::IntArrayRef padding, at::IntArrayRef dilation, int64_t groups,
                       c10::string_view math, c10::string_view layout) {
  TORCH_CHECK(math == "strict" || math == "tf32",
              "convtune.conv2d: math must be 'strict' or 'tf32', got '", std::string(math), "'");
  TORCH_CHECK(layout == "nchw" || layout == "nhwc",
              "convtune.conv2d: layout must be 'nchw' or 'nhwc', got '", std::string(layout), "'");
  check_pair(stride, "stride");
  check_pair(padding, "padding");
  check_pair(dilation, "dilation");
  TORCH_CHECK(x_in.dim() == 4 && w_in.dim() == 4,
              "convtune.conv2d: x and weight must be 4-D, got ", x_in.dim(), "-D and ", w_in.dim(),
              "-D");
  TORCH_CHECK(x_in.scalar_type() == at::kFloat && w_in.scalar_type() == at::kFloat,
              "convtune.conv2d: float32 only, got ", x_in.scalar_type(), " and ",
              w_in.scalar_type());
  TORCH_CHECK(x_in.is_cuda() && w_in.device() == x_in.device(),
              "convtune.conv2d: x and weight must be on one CUDA device, got ", x_in.device(),
              " and ", w_in.device());
  const bool has_bias = bias_in.has_value() && bias_in->defined();
  if (has_bias)
    TORCH_CHECK(bias_in->scalar_type() == at::kFloat && bias_in->device() == x_in.device() &&
                    bias_in->dim() == 1 && bias_in->size(0) == w_in.size(0),
                "convtune.conv2d: bias must be a float32 tensor of shape (", w_in.size(0),
                ",) on ", x_in.device());
  TORCH_CHECK(groups > 0 && x_in.size(1) == w_in.size(1) * groups,
              "convtune.conv2d: x has ", x_in.size(1), " channels, weight takes ", w_in.size(1),
              " per group x ", groups, " groups");

  const bool nhwc = layout == "nhwc", tf32 = math == "tf32";
  const at::MemoryFormat format = nhwc ? at::MemoryFormat::ChannelsLast : at::MemoryFormat::Contiguous;
  const at::Tensor x = dense(x_in, format), w = dense(w_in, format);
  const at::Tensor bias = has_bias ? dense(*bias_in, at::MemoryFormat::Contiguous) : at::Tensor();
  const int device = x.get_device();
  // torch.use_deterministic_algorithms(True): a deterministic plan.
  const bool deterministic = at::globalContext().deterministicAlgorithms();
  const Key key = {device, nhwc, tf32, has_bias, x.size(0), x.size(1), x.size(2), x.size(3),
                   w.size(0), w.size(2), w.size(3), stride[0], stride[1], padding[0],
                   padding[1], dilation[0], dilation[1], groups, deterministic, 0};
  PlanEntry &e = entry_for(key, device, make_problem(x, w, has_bias, stride, padding, dilation,
                                                     groups, tf32, nhwc, deterministic));
  at::Tensor y = at::empty(e.out_shape, x.options().memory_format(format));
  const c10::cuda::CUDAGuard device_guard(x.device());
  cudaStream_t stream = at::cuda::getCurrentCUDAStream(device).stream();
  std::lock_guard<std::mutex> guard(e.lock);
  order_after_last_stream(e, stream);
  conv_status st = conv_plan_execute(e.plan, stream, x.data_ptr(), w.data_ptr(),
                                     has_bias ? bias.data_ptr() : nullptr, y.data_ptr());
  TORCH_CHECK(st == CONV_OK, "convtune: conv_plan_execute: ", conv_status_string(st));
  e.last_stream = stream;
  e.has_last_stream = true;
  return y;
}

}  // namespace

// conv2d_inference is the same forward without an autograd formula (ops.py).
TORCH_LIBRARY_IMPL(convtune, CUDA, m) {
  m.impl("conv2d", &conv2d_cuda);
  m.impl("conv2d_inference", &conv2d_cuda);
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
