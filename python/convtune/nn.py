"""convtune.nn: a drop-in for torch.nn.Conv2d, convert(model), and Involution.

    import convtune

    report = convtune.convert(model)    # every plain nn.Conv2d now runs through convtune
    print(report)                       # which layers were left, and why

    layer = convtune.nn.Conv2d(64, 128, 3, padding=1)   # nn.Conv2d's constructor, plus math=, context=

A converted layer is an nn.Conv2d (same parameters, buffers, hooks and
state_dict) whose forward runs a convtune plan when it can:

- float32, float16 or bfloat16 CUDA input (the weight's type), 4-D or
  unbatched 3-D: contiguous or channels-last
  (the output is then channels-last too, as in PyTorch) and 16-byte
  aligned, or any other strides (a channel slice, as ShuffleNet's and
  CSP blocks' chunk() makes), copied into the memory format PyTorch would
  pick, as its cuDNN path copies; the weight is read in the input's
  format, copied for the call where it is in the other one, as PyTorch
  does;
- under CUDA autocast (torch.autocast("cuda", dtype=torch.bfloat16 or
  torch.float16)), the convolution runs in autocast's type, its inputs
  cast as autocast casts them for F.conv2d: through the operator
  torch.ops.convtune.conv2d, whose autocast kernel takes the weight's
  cast from autocast's own cache (one cast per weight per autocast
  region, as PyTorch's), where the operator's C++ library is built and
  the layer is on the default context; else cast here, once per call.
  The bias stays float32 (the library adds a float32 bias).

Training works: where the input or the parameters record gradients, the
call goes through an autograd function whose backward runs tuned
backward-data and backward-filter plans of the layer's convolution: after
its first call, a layer on the default context calls the operator
torch.ops.convtune.conv2d, whose formula is C++ where its C++ kernels are
built (convtune.ops), and otherwise convtune.conv2d's Python function.
Under torch.compile it calls the operator, whose autograd formula calls
the backward passes' operators (convtune.ops), so compiled training runs
convtune's plans in both directions.

K R S C filters: at the first call of an input shape in inference (no
gradient recorded, outside CUDA graph capture), a dense layer with an R x S
> 1 filter on an NCHW input in TF32 tunes its convolution twice, for its
K C R S weight and for the same weight K R S C (layout "nchw_krsc"), and
where the second plan was timed faster (by 2%), it keeps its weight
channels-last from then on: the same values and shape, as
model.to(memory_format=torch.channels_last) leaves a weight, so nothing
transposes the filters again on any later call (cuDNN's channels-last
engines, which win most TF32 layers, otherwise do on every call).  Not in
strict fp32: of 34 such twins tuned exhaustively on an H200 none was kept
(the best at 0.98x its K C R S plan's speed), and each costs a tuning.
`weight.is_contiguous()` is then False; the state_dict holds the same
values.  Set relayout_filters = False on a layer (or the class) to keep
weights as they are.  A channels-last weight is read as it is by every
forward call on an NCHW input (later shapes get K R S C plans); the
backward passes of training read a K C R S copy of it.

Never slower in eager mode: at the first inference call of an input shape
(nothing records gradients, outside CUDA graph capture), a layer races its
plan against PyTorch's own forward of the same input, each timed as a
model loop pays a call: back-to-back calls and one synchronise, so that a
call costs its host time or its device time, whichever is longer (median
of 3 alternating rounds of about 0.5 ms, after one call of each: with
torch.backends.cudnn.benchmark on, PyTorch's first call of a shape
searches cuDNN's engines, and that search lands in convtune's first
forward).  No race where PyTorch's output would have another layout than
the plan's.  Where the plan's call cost more than
RACE_MARGIN (1.03) times PyTorch's, that shape runs PyTorch's forward from
then on, in eager mode and in any CUDA graph captured later, and
`layer.fallbacks` and the printed ConvertReport say so with both times.
A race costs a few milliseconds a shape on top of the first call.  Set
race_pytorch = False on a layer (or the class) to always run the plan.

Anything else runs PyTorch's own forward, so results and errors are
PyTorch's; `layer.fallbacks` counts those calls by reason.  padding="same"
/ "valid" and the non-zero padding modes are done as nn.Conv2d does them.
TF32 follows PyTorch's cuDNN setting (torch.backends.cudnn.conv.fp32_precision,
or allow_tf32 where PyTorch has no such setting) at each call unless math=
("strict" or "tf32") is given; with torch.use_deterministic_algorithms(True)
or torch.backends.cudnn.deterministic = True every plan, forward and backward, is deterministic (bit-identical results
run to run).  Plans come from `context`, by default the
module's Context per device (the library's default cache, exhaustive
tuning: the first call of each shape tunes it).

Under torch.compile and torch.export the layer calls the operator
torch.ops.convtune.conv2d (convtune.ops), which both can trace.
"""
import collections
import statistics
import time
import weakref

import torch
import torch.nn.functional as F

from . import ConvtuneError, _autograd, _default_context, _lib, dynamic_conv2d
from . import ops as _ops
from ._base import _conv_tf32_reader, _deterministic_reader, _reader
from ._problem import _same_padding

__all__ = ["Conv2d", "Involution", "convert", "ConvertReport"]

# Statuses that mean "convtune has no plan for this problem": the layer
# then runs PyTorch's forward, as a drop-in must.  Anything else (CUDA
# errors, out of memory, a broken cache) is raised.
_NO_PLAN = frozenset(_lib.STATUS_NAMES.index(name) for name in (
    "UNSUPPORTED", "FILTER_TOO_LARGE", "SIZE_OVERFLOW", "NO_CANDIDATE", "CACHE_MISS",
    "WORKSPACE_LIMIT"))

_compiling = torch.compiler.is_compiling
_cudnn_tf32 = _reader(torch, _conv_tf32_reader)
_grad_enabled = torch.is_grad_enabled
_autocast_enabled = torch.is_autocast_enabled
_autocast_dtype = torch.get_autocast_dtype
# The element types convtune computes in (x and the weight of one of them).
_FLOATS = (torch.float32, torch.float16, torch.bfloat16)
_HALVES = (torch.float16, torch.bfloat16)
# In training, a layer on the default context calls the operator, whose C++
# autograd formula runs the backward passes without Python; without that
# formula (or on a context of its own) it uses convtune.conv2d's autograd
# function.
_training_op = torch.ops.convtune.conv2d if _ops.formula == "C++" else None
# Under autocast, a layer on the default context calls the operators, whose
# autocast kernel casts through autocast's weight cache, where it is C++.
_autocast_ops = ((torch.ops.convtune.conv2d, torch.ops.convtune.conv2d_inference)
                 if _ops.autocast == "C++" else None)


# A layer runs PyTorch's forward where its plan's call cost more than this
# times PyTorch's in the race (_race_entry): within it the two are a tie,
# and the plan keeps the call.
RACE_MARGIN = 1.03
# The start of the fallbacks reason of a shape whose race PyTorch's forward
# won (the times follow in parentheses).
LOST_RACE = "PyTorch's forward was faster"
_RACE_ROUNDS = 3
_RACE_ROUND_MS = 0.5


def _per_call_ms(fns, device=None):
    """Each function's cost a call, in ms, as a model loop in eager mode pays
    it: the median over _RACE_ROUNDS alternating rounds of the wall time of
    back-to-back calls (enough for _RACE_ROUND_MS, 1 to 200 of them) and
    one synchronise of `device` (None: the current one), so that a call
    costs its host time or its device time, whichever is longer.  The
    caller has called each once already (a first call may tune: PyTorch's
    benchmark mode); none of those calls is timed here."""
    clock = time.perf_counter

    def sync():
        torch.cuda.synchronize(device)
    calls = []
    sync()
    for fn in fns:
        started = clock()
        fn()
        sync()
        calls.append(max(1, min(200, int(_RACE_ROUND_MS * 1e-3 / (clock() - started)))))
    samples = [[] for _ in fns]
    for _ in range(_RACE_ROUNDS):
        for fn, n, times in zip(fns, calls, samples):
            started = clock()
            for _ in range(n):
                fn()
            sync()
            times.append((clock() - started) * 1e3 / n)
    return [statistics.median(times) for times in samples]


def _same_format(y, other):
    """Whether two outputs of a layer have one type and one memory layout
    (the strides of C, H and W: a batch of one and an unbatched call alike)."""
    return (y is not None and other is not None and y.dtype == other.dtype
            and y.stride()[-3:] == other.stride()[-3:])


def _race(ours, theirs, device):
    """(our per-call ms, PyTorch's) on `device`: the race's timing (tests
    replace it)."""
    return tuple(_per_call_ms((ours, theirs), device))


def _autocast_on():
    return torch.is_autocast_enabled("cuda")


def _math_now(math):
    """The math a call runs in: the layer's, else torch's cuDNN TF32 setting."""
    if math is not None:
        return math
    return "tf32" if _cudnn_tf32() else "strict"


# Whether torch asks for deterministic convolutions, without Python frames:
# the fast path reads it on every call.
_deterministic_now = _reader(torch, _deterministic_reader)


@torch.compiler.assume_constant_result
def _traced_cudnn_tf32():
    # Read once when a graph is traced (Dynamo cannot trace the flag's
    # getter): a compiled model keeps the math it was traced with.
    return _cudnn_tf32()


class Conv2d(torch.nn.Conv2d):
    """torch.nn.Conv2d run through convtune where it can (see the module's doc).

    Takes nn.Conv2d's arguments, plus:
    math: None (follow PyTorch's cuDNN TF32 setting at each call), "strict"
    or "tf32".
    context: the convtune.Context whose plans it uses; None is the module's
    default Context for the input's device.

    .fallbacks: {reason: calls} of the calls PyTorch's forward ran.
    .plan_info(): the info of the plan its last convtune call used.
    .relayout_filters: True (the default) lets an inference call keep the
    weight K R S C (channels-last) where that plan was timed faster; False
    keeps it as it is.
    .race_pytorch: True (the default) times, at an inference call's first
    input shape, the plan's call (as later calls make it: under autocast
    the operator's) against PyTorch's forward and runs PyTorch's where
    that was faster (see the module's doc); False always runs the plan.
    .activation: None (the default), or "relu" on a layer with a bias: the
    layer's output is then relu(conv + bias), the ReLU fused into its plan
    (epilogue BIAS_RELU) and into PyTorch's forward where that runs it.
    convtune.fuse sets it.
    """

    relayout_filters = True
    race_pytorch = True
    _activation = None

    @property
    def activation(self):
        return self._activation

    @activation.setter
    def activation(self, value):
        if value not in (None, "relu"):
            raise ValueError("activation must be None or 'relu', got %r" % (value,))
        if value == "relu" and self.bias is None:
            raise ValueError("activation='relu' needs a bias: convtune fuses ReLU only after a bias "
                             "add (epilogue BIAS_RELU)")
        self.__dict__["_activation"] = value
        self._forget_plans()  # they were made for the old epilogue

    def __init__(self, *args, math=None, context=None, **kwargs):
        super().__init__(*args, **kwargs)
        self._convtune_init(math, context)

    def _convtune_init(self, math, context):
        if math not in (None, "strict", "tf32"):
            raise ValueError("math must be None, 'strict' or 'tf32', got %r" % (math,))
        self.math = math
        self.context = context
        self.fallbacks = collections.Counter()
        self._forget_plans()

    def _forget_plans(self):
        # (input shape, math, deterministic, layout) -> (launch, plan), or
        # (None, why PyTorch runs it); launch(x, w, bias, out) returns y, or
        # None when the tensors do not fit.
        self._plans = {}
        self._launch = None  # the last one used, tried first
        self._launch_plan = None  # its plan (the autograd function runs it)
        self._launch_math = None
        self._launch_deterministic = None
        self._launch_op_args = None  # the operator's arguments after x, w and bias
        self._launch_format = None  # the memory format its weight is read in
        self._launch_copies = False  # whether that is a copy (_weight_in)
        self._launch_bias_cast = False  # whether the bias is cast to float32 for the call
        # Under autocast: (autocast dtype, deterministic, the operators'
        # arguments after x, w and bias, input shape) of the last call that
        # ran convtune, for the operators.
        self._autocast_launch = None
        self._last_plan = None
        # (call key, why) of the last shape whose race PyTorch's forward won:
        # its calls go straight there.
        self._lost_race = None

    # Plans and launchers hold a device's library handles: they are not
    # copied or pickled with the module, which makes its own on first use.
    def __getstate__(self):
        state = super().__getstate__().copy()
        for name in ("_plans", "_launch", "_launch_plan", "_launch_math", "_launch_deterministic",
                     "_launch_op_args", "_launch_format", "_launch_copies", "_launch_bias_cast",
                     "_autocast_launch", "_last_plan", "_lost_race"):
            state.pop(name, None)
        return state

    def __setstate__(self, state):
        super().__setstate__(state)
        self._forget_plans()

    def _apply(self, fn, *args, **kwargs):
        # .to(), .cuda(), .float() and the like: plans for the old device go.
        self._forget_plans()
        return super()._apply(fn, *args, **kwargs)

    def extra_repr(self):
        text = super().extra_repr()
        text += ", math=%r" % self.math if self.math is not None else ""
        return text + (", activation=%r" % self.activation if self.activation is not None else "")

    def _pytorch_forward(self, input):
        """nn.Conv2d's forward, then the fused activation."""
        y = super().forward(input)
        return F.relu(y) if self.activation == "relu" else y

    def _activation_arg(self):
        """The operators' activation argument: "none" or "relu"."""
        return self.activation or "none"

    # ------------------------------------------------------------ forward

    def forward(self, input):
        if _compiling():
            return self._traced_forward(input)
        if _autocast_enabled("cuda"):
            return self._autocast_forward(input)
        # The steady state of a model loop: the last plan's launcher checks
        # the tensors in C and returns None when anything does not fit; in
        # training it runs inside the autograd function.
        # Written out flat: every call of a model's every layer pays for
        # this code, so it avoids Python calls it can (the checks of
        # _math_now, _autocast_on and records_gradients inline) and
        # nn.Module's attribute lookup of parameters.
        launch = self._launch
        if (launch is not None
                and self._launch_math == (self.math or ("tf32" if _cudnn_tf32() else "strict"))
                and self._launch_deterministic == _deterministic_now()):
            try:
                params = self._parameters
                w, b = params["weight"], params["bias"]
            except KeyError:  # parametrized: the properties compute them
                w, b = self.weight, self.bias
            if self._launch_copies:
                w = w.contiguous(memory_format=self._launch_format)
            if self._launch_bias_cast:
                b = b.float()
            if _grad_enabled() and (input.requires_grad or w.requires_grad
                                    or (b is not None and b.requires_grad)):
                if _training_op is not None and self.context is None:
                    return _training_op(input, w, b, *self._launch_op_args)
                y = _autograd.conv2d(self._launch_plan, input, w, b, launch)
            else:
                y = launch(input, w, b, None)
            if y is not None:
                return y
        if self._lost_race is not None:
            return self._pytorch_if_raced(input)
        return self._eager_forward(input)

    def _pytorch_if_raced(self, input):
        """PyTorch's forward where this call is the one whose race PyTorch
        won (same shape, strides, type, math, determinism), else the eager
        path: a layer that lost its race costs one comparison a call more
        than PyTorch's own."""
        key, why = self._lost_race
        if not self._is_call(input, key):
            return self._eager_forward(input)
        self.fallbacks[why] += 1
        return self._pytorch_forward(input)

    def _is_call(self, input, key):
        """Whether this call is the one `key` (_call_key) names."""
        return self._call_key(input, _math_now(self.math), _deterministic_now()) == key

    @staticmethod
    def _call_key(input, math, deterministic):
        autocast = _autocast_dtype("cuda") if _autocast_enabled("cuda") else None
        return (input.shape, input.stride(), input.dtype, autocast, math, deterministic)

    def _weight_in(self, memory_format, dtype):
        """The weight in memory_format and dtype: itself, or a copy made for
        this call.  PyTorch's cuDNN path copies the same way; a copy kept
        across calls could go stale where the weight changes through .data,
        which no version counter sees."""
        w = self.weight
        return (w if w.dtype == dtype else w.to(dtype)).contiguous(memory_format=memory_format)

    def _bias_in(self):
        """The bias as the library adds it: float32, cast for the call where it is half."""
        b = self.bias
        return b if b is None or b.dtype == torch.float32 else b.float()

    def _autocast_forward(self, input):
        """A call under CUDA autocast: the operators where this layer's last
        autocast call ran convtune in the same type (their autocast kernel
        casts x and the weight), else the eager path, which decides."""
        last = self._autocast_launch
        if (last is not None and _autocast_ops is not None and self.context is None
                and last[0] == _autocast_dtype("cuda") and last[1] == _deterministic_now()
                and isinstance(input, torch.Tensor) and input.shape == last[3]
                and input.dtype in _FLOATS and input.device == self.weight.device):
            try:
                params = self._parameters
                w, b = params["weight"], params["bias"]
            except KeyError:
                w, b = self.weight, self.bias
            records = _grad_enabled() and (input.requires_grad or w.requires_grad
                                           or (b is not None and b.requires_grad))
            op = _autocast_ops[0] if records else _autocast_ops[1]
            return op(input, w, b, *last[2])
        if self._lost_race is not None:
            return self._pytorch_if_raced(input)
        return self._eager_forward(input)

    def _why_pytorch(self, x):
        """Why PyTorch's forward runs this call, or None when convtune does."""
        if not isinstance(x, torch.Tensor):
            return "input is not a tensor"
        if x.device.type != "cuda" or self.weight.device != x.device:
            return "input on %s" % x.device.type if x.device.type != "cuda" else "weight on another device"
        why = self._why_not_dtype(x)
        if why is not None:
            return why
        if x.dim() not in (3, 4) or x.shape[-3] != self.in_channels:
            return "input shape %s" % (tuple(x.shape),)  # PyTorch raises its error
        if x.numel() == 0:
            return "empty input"
        # A strided input is copied (_eager_forward), which aligns it.
        if x.data_ptr() % _lib.POINTER_ALIGNMENT and self._layout_of(x) is not None:
            return "input data not 16-byte aligned"
        b = self.bias
        if b is not None and (not b.is_contiguous() or b.data_ptr() % _lib.POINTER_ALIGNMENT):
            return "bias not contiguous and 16-byte aligned"
        return None

    def _why_not_dtype(self, x):
        """Why the element types keep this call from convtune, or None."""
        w_type, b = self.weight.dtype, self.bias
        if _autocast_on():  # autocast casts every floating input to its type
            dtype = _autocast_dtype("cuda")
            if dtype not in _HALVES:
                return "autocast dtype %s" % dtype
            if x.dtype not in _FLOATS or w_type not in _FLOATS:
                return "dtype %s" % (x.dtype if x.dtype not in _FLOATS else w_type)
        elif x.dtype not in _FLOATS or w_type != x.dtype:
            return "dtype %s" % (x.dtype if x.dtype not in _FLOATS else "%s, weight %s" % (x.dtype, w_type))
        if b is not None and b.dtype not in (torch.float32, w_type):
            return "bias dtype %s" % b.dtype
        return None

    def _call_dtype(self, x):
        """The element type this call computes in: autocast's, else x's."""
        return _autocast_dtype("cuda") if _autocast_on() else x.dtype

    @staticmethod
    def _layout_of(x):
        """The plan layout that reads x as it is: "nchw", "nhwc" (channels-last), or None."""
        if x.is_contiguous():
            return "nchw"
        if x.dim() == 4 and x.is_contiguous(memory_format=torch.channels_last):
            return "nhwc"
        return None

    @staticmethod
    def _dense_copy(x):
        """(a contiguous copy of a strided 4-D input, its plan layout), in the
        memory format PyTorch's convolution would give it: channels-last
        where channels vary fastest (a channel slice of a channels-last
        tensor), else NCHW."""
        s = x.stride()
        if s[1] < s[3] <= s[2]:
            return x.contiguous(memory_format=torch.channels_last), "nhwc"
        return x.contiguous(), "nchw"

    def _padded_input(self, x):
        """(input as the convolution reads it, the symmetric padding left,
        whether the input was padded here), as nn.Conv2d pads: F.pad for
        padding modes other than zeros and for the odd half of "same"."""
        if self.padding_mode != "zeros":
            return F.pad(x, self._reversed_padding_repeated_twice, mode=self.padding_mode), (0, 0), True
        if self.padding == "valid":
            return x, (0, 0), False
        if self.padding == "same":  # as convtune.conv2d: _same_padding
            pad, extra = _same_padding(self.kernel_size, self.dilation)
            if extra[0] or extra[1]:  # the odd pixel goes right / below, as in PyTorch
                return F.pad(x, (0, extra[1], 0, extra[0])), pad, True
            return x, pad, False
        return x, tuple(self.padding), False

    def _eager_forward(self, input):
        why = self._why_pytorch(input)
        if why is not None:
            self.fallbacks[why] += 1
            return self._pytorch_forward(input)
        unbatched = input.dim() == 3
        x = input.unsqueeze(0) if unbatched else input
        dtype = self._call_dtype(x)
        if x.dtype != dtype:
            x = x.to(dtype)  # autocast's cast
        x, padding, padded = self._padded_input(x)
        math, deterministic = _math_now(self.math), _deterministic_now()
        layout = self._layout_of(x)
        if layout is None:  # strided input (or F.pad's output of it)
            x, layout = self._dense_copy(x)
        layout = self._with_filters(layout)
        key = (tuple(x.shape), math, deterministic, layout, dtype)
        entry = self._plans.get(key)
        if entry is None:
            entry = self._plans[key] = self._plan_entry(x, padding, math, layout, deterministic)
            faster = (self._faster_krsc_entry(x, padding, math, deterministic, entry)
                      if layout == "nchw" and self.weight.dtype == dtype else None)
            # The race before the relayout: PyTorch's forward, where it wins,
            # reads the weight as the user left it (a channels-last weight
            # would make its outputs, and the layers after, channels-last).
            chosen = entry if faster is None else faster
            raced = self._race_entry(input, x, padding, math, deterministic,
                                     "nchw_krsc" if faster is not None else layout, chosen)
            if raced is not chosen:
                entry = self._plans[key] = raced
            elif faster is not None:
                self._keep_weight_krsc()
                layout = "nchw_krsc"
                key = (tuple(x.shape), math, deterministic, layout, dtype)
                entry = self._plans[key] = faster
        launch, plan = entry
        if launch is None:  # no convtune plan for this shape: `plan` says why
            self.fallbacks[plan] += 1
            if plan.startswith(LOST_RACE) and not (unbatched or padded):
                self._lost_race = (self._call_key(input, math, deterministic), plan)
            return self._pytorch_forward(input)
        memory_format = _ops.filter_memory_format(layout)
        w, b = self._weight_in(memory_format, dtype), self._bias_in()
        if _autograd.records_gradients(x, w, b):
            y = _autograd.conv2d(plan, x, w, b)
        else:
            y = launch(x, w, b, None)
        if y is None:  # _why_pytorch passed, so this is a bug: let the plan say what
            plan(x, w, b)
            raise RuntimeError("convtune: the plan refused arguments it was made for")
        self._last_plan = plan
        if not (unbatched or padded):  # later calls skip the checks above
            op_args = self._op_args(padding, math, layout)
            if _autocast_on():
                self._autocast_launch = (dtype, deterministic, op_args, input.shape)
            else:
                self._launch, self._launch_plan = launch, plan
                self._launch_math, self._launch_deterministic = math, deterministic
                self._launch_op_args = op_args
                self._launch_format, self._launch_copies = memory_format, w is not self.weight
                self._launch_bias_cast = b is not self.bias
        return y.squeeze(0) if unbatched else y

    def _with_filters(self, layout):
        """The plan layout for an input read as `layout` and the weight as it
        is: "nchw_krsc" for an NCHW input and a channels-last weight (K R S
        C filters, read without a copy), else `layout`."""
        w = self.weight
        if layout == "nchw" and not w.is_contiguous() and w.is_contiguous(
                memory_format=torch.channels_last):
            return "nchw_krsc"
        return layout

    def _faster_krsc_entry(self, x, padding, math, deterministic, entry):
        """The (launch, plan) of this NCHW input with the weight K R S C,
        where that plan was timed at least 2% faster than `entry`'s (K C R
        S), else None: for a dense R x S > 1 layer with a K C R S weight
        in TF32, where nothing records gradients (inference: the backward
        passes read the weight K C R S), outside CUDA graph capture, and
        while relayout_filters is True."""
        w = self.weight
        if (not self.relayout_filters or math != "tf32" or entry[0] is None
                or "weight" not in self._parameters
                or self.kernel_size == (1, 1) or self.in_channels == self.groups
                or not w.is_contiguous() or _autograd.records_gradients(x, w, self.bias)
                or torch.cuda.is_current_stream_capturing()):
            return None
        kcrs_ms = entry[1].info["time_ms"]
        krsc = self._plan_entry(x, padding, math, "nchw_krsc", deterministic)
        if krsc[0] is None or kcrs_ms <= 0 or not 0 < krsc[1].info["time_ms"] < 0.98 * kcrs_ms:
            return None
        return krsc

    def _op_args(self, padding, math, layout):
        """The operators' arguments after x, the weight and the bias."""
        return (list(self.stride), list(padding), list(self.dilation), self.groups, math, layout,
                self._activation_arg())

    def _race_entry(self, input, x, padding, math, deterministic, layout, entry):
        """`entry`, or (None, why) where PyTorch's forward of this input was
        timed faster than the plan's call (its weight in `layout`'s filter
        order) by more than RACE_MARGIN, each as a call costs in eager mode
        (_per_call_ms: host and device, back to back): for an inference
        call (nothing records gradients) outside CUDA graph capture, while
        race_pytorch is True.

        Each side is timed as this layer's later calls of the shape would
        make it: ours as the operator under autocast (its autocast kernel
        casts the weight through autocast's cache, as F.conv2d's does), else
        the launch with the weight copied or cast per call where the plan
        needs it so; PyTorch's after the key check that a layer which lost
        its race makes.  No race where PyTorch's output would have another
        type or memory layout than the plan's.  PyTorch's forward runs as
        the user set it: with cuDNN's benchmark mode on, its first call
        searches, and keeps what it found in PyTorch's own plan cache for
        every later call of the shape.  (Racing it with benchmark mode off
        would leave its heuristic choice in that cache, where benchmark
        mode then finds it and never searches: every other PyTorch
        convolution of the shape would run it.)"""
        launch = entry[0]
        if (launch is None or not self.race_pytorch
                or _autograd.records_gradients(x, self.weight, self.bias)
                or torch.cuda.is_current_stream_capturing()):
            return entry
        if _autocast_on() and _autocast_ops is not None and self.context is None:
            op, op_args = _autocast_ops[1], self._op_args(padding, math, layout)

            def ours():
                return op(x, self.weight, self.bias, *op_args)
        else:
            memory_format, dtype = _ops.filter_memory_format(layout), x.dtype
            # The K R S C candidate: a layer that keeps it makes its weight
            # so once (_keep_weight_krsc), and no later call copies it.
            kept = self._weight_in(memory_format, dtype) if layout == "nchw_krsc" else None

            def ours():
                weight = kept if kept is not None else self._weight_in(memory_format, dtype)
                return launch(x, weight, self._bias_in(), None)
        key = self._call_key(input, math, deterministic)

        def theirs():
            if self._is_call(input, key):
                return self._pytorch_forward(input)
        # Each side's first call (PyTorch's may search, in benchmark mode),
        # which _race does not time.
        if not _same_format(ours(), theirs()):
            # The layers after would get inputs of another layout: new
            # problems to tune and other calls there, which this race
            # cannot time.
            return entry
        ours_ms, theirs_ms = _race(ours, theirs, x.device)
        if ours_ms <= RACE_MARGIN * theirs_ms:
            return entry
        return None, "%s (%.1f against %.1f us a call)" % (LOST_RACE, theirs_ms * 1e3, ours_ms * 1e3)

    def _keep_weight_krsc(self):
        """Makes the weight channels-last (K R S C), values unchanged: what
        PyTorch's model.to(memory_format=torch.channels_last) does to it.
        Made outside inference mode, so that the weight never becomes an
        inference tensor, which training could not update."""
        w = self.weight
        with torch.inference_mode(False):
            w.data = w.data.contiguous(memory_format=torch.channels_last)

    def _plan_entry(self, x, padding, math, layout, deterministic):
        """(launch, plan) for this input, or (None, why PyTorch runs it)."""
        context = self.context if self.context is not None else _default_context(x.device.index)
        try:
            plan = context.plan(tuple(x.shape), tuple(self.weight.shape), self.stride, padding,
                                self.dilation, self.groups, self.bias is not None, self.activation,
                                math, layout, deterministic=deterministic, dtype=x.dtype)
        except ConvtuneError as e:
            if e.status not in _NO_PLAN:
                raise
            return None, "no convtune plan: %s" % e.status_name
        return _ops.plan_launch(plan), plan

    def _traced_forward(self, x):
        # What the eager path would hand to PyTorch goes to PyTorch here too
        # (decided on the traced tensors' metadata).
        # Under autocast the operators' autocast kernel casts x and the weight.
        if (x.device.type != "cuda" or self._why_not_dtype(x) is not None
                or x.dim() not in (3, 4) or x.numel() == 0):
            return self._pytorch_forward(x)
        unbatched = x.dim() == 3
        if unbatched:
            x = x.unsqueeze(0)
        x, padding, _ = self._padded_input(x)
        math = self.math or ("tf32" if _traced_cudnn_tf32() else "strict")
        # Decided on the traced strides, and passed on, so that the compiled
        # graph's output strides (the fake kernel's) are the plan's.
        layout = self._layout_of(x)
        if layout is None:
            x, layout = self._dense_copy(x)
        layout = self._with_filters(layout)
        w = self.weight.contiguous(memory_format=_ops.filter_memory_format(layout))
        b = self.bias
        records = _grad_enabled() and (x.requires_grad or w.requires_grad
                                       or (b is not None and b.requires_grad))
        # Without a gradient to record, the operator without an autograd
        # formula, whose calls enter no Python (convtune.ops).
        op = torch.ops.convtune.conv2d if records else torch.ops.convtune.conv2d_inference
        y = op(x, w, b, list(self.stride), list(padding), list(self.dilation), self.groups, math,
               layout, self._activation_arg())
        return y.squeeze(0) if unbatched else y

    def plan_info(self):
        """The info dict of the plan the last convtune call used (None before one)."""
        plan = self._last_plan
        return None if plan is None else plan.info

    @classmethod
    def from_torch(cls, layer, math=None, context=None):
        """Turns a torch.nn.Conv2d into this class in place (its parameters,
        hooks and state_dict stay as they are) and returns it."""
        if type(layer) is cls:
            return layer
        if type(layer) is not torch.nn.Conv2d:
            raise TypeError("from_torch converts torch.nn.Conv2d itself, got %s" % type(layer).__name__)
        layer.__class__ = cls
        layer._convtune_init(math, context)
        return layer


# ---------------------------------------------------------------- involution


def unfold_dynamic_conv2d(x, weights, stride=1, dilation=1):
    """convtune.dynamic_conv2d's result computed by PyTorch (F.unfold), for any
    device and dtype: what Involution runs where convtune cannot.  Holds the
    unfolded input, k*k times x's size."""
    b, c, _, _ = x.shape
    _, g, kk, p, q = weights.shape
    k = int(round(kk ** 0.5))
    u = F.unfold(x, k, dilation=dilation, padding=(k - 1) // 2 * dilation, stride=stride)
    u = u.view(b, g, c // g, kk, p, q)
    return (u * weights.unsqueeze(2)).sum(3).view(b, c, p, q)


class Involution(torch.nn.Module):
    """Involution (Li et al., "Involution: Inverting the Inherence of Convolution for
    Visual Recognition", CVPR 2021), its per-pixel filters applied by
    convtune.dynamic_conv2d.

    The filters are generated from the input: average pooling by `stride` (when
    stride > 1), a 1x1 convolution reducing channels by reduction_ratio (no bias),
    BatchNorm, ReLU, and a 1x1 convolution spanning to groups * k*k channels (with
    bias), reshaped to (B, groups, k*k, P, Q); each group of channels // groups
    channels shares its pixel's filter.  groups None: channels // 16 (16 channels a
    group, the paper's choice), 1 for fewer than 16 channels or a count 16 does not
    divide.  The parameters are named as in the official implementation
    (conv1.conv, conv1.bn, conv2.conv), so its state_dicts load.

    Unlike the official code, the pooling rounds up (ceil_mode), so that odd sizes
    give the P = ceil(H / stride) pixels the filters are applied at; for even sizes
    nothing changes.  math and context are dynamic_conv2d's.  Inputs convtune does
    not take (not float32 CUDA, or under autocast) run PyTorch's unfold instead
    (unfold_dynamic_conv2d).
    """

    def __init__(self, channels, kernel_size, stride=1, groups=None, reduction_ratio=4, dilation=1, *,
                 math=None, context=None):
        super().__init__()
        if groups is None:
            groups = channels // 16 if channels >= 16 and channels % 16 == 0 else 1
        if kernel_size < 1 or kernel_size % 2 == 0:
            raise ValueError("kernel_size must be a positive odd int, got %r" % (kernel_size,))
        if groups < 1 or channels % groups:
            raise ValueError("groups=%r must divide channels=%r" % (groups, channels))
        if min(stride, dilation, reduction_ratio) < 1:  # convtune runs strides 1 and 2 (ConvtuneError else)
            raise ValueError("stride, dilation and reduction_ratio must be positive")
        if math not in (None, "strict", "tf32"):
            raise ValueError("math must be None, 'strict' or 'tf32', got %r" % (math,))
        self.channels, self.kernel_size, self.stride = channels, kernel_size, stride
        self.groups, self.dilation, self.math, self.context = groups, dilation, math, context
        hidden = max(1, channels // reduction_ratio)
        self.avgpool = torch.nn.AvgPool2d(stride, stride, ceil_mode=True) if stride > 1 else torch.nn.Identity()
        self.conv1 = torch.nn.Sequential(collections.OrderedDict(
            conv=torch.nn.Conv2d(channels, hidden, 1, bias=False),
            bn=torch.nn.BatchNorm2d(hidden),
            activate=torch.nn.ReLU(inplace=True)))
        self.conv2 = torch.nn.Sequential(collections.OrderedDict(
            conv=torch.nn.Conv2d(hidden, groups * kernel_size * kernel_size, 1)))

    def kernel_weights(self, x):
        """The per-pixel filters of input x: (B, groups, k*k, P, Q), contiguous."""
        w = self.conv2(self.conv1(self.avgpool(x)))
        b, _, p, q = w.shape
        return w.reshape(b, self.groups, self.kernel_size * self.kernel_size, p, q).contiguous()

    def forward(self, x):
        weights = self.kernel_weights(x)
        if (x.device.type == "cuda" and x.dtype == torch.float32 and weights.dtype == torch.float32
                and not _autocast_on()):
            return dynamic_conv2d(x.contiguous(), weights, self.stride, self.dilation, self.groups,
                                  math=self.math, context=self.context)
        return unfold_dynamic_conv2d(x, weights, self.stride, self.dilation)

    def extra_repr(self):
        return "%d, kernel_size=%d, stride=%d, groups=%d, dilation=%d%s" % (
            self.channels, self.kernel_size, self.stride, self.groups, self.dilation,
            ", math=%r" % self.math if self.math is not None else "")


# ---------------------------------------------------------------- convert

class ConvertReport:
    """What convert() did: converted, the names of the layers now run through
    convtune (including ones converted before); left, (name, reason) of the
    Conv2d-like layers it left.  pytorch_calls() and the printed report also
    say, from the calls made since, which converted layers ran PyTorch's
    forward and why (a race PyTorch's forward won among them)."""

    def __init__(self, converted, left, layers=None):
        self.converted, self.left = converted, left
        # name -> converted layer, held weakly: a report kept after its model
        # is dropped must not keep the layers' weights alive.
        self._layers = weakref.WeakValueDictionary(layers or {})

    def pytorch_calls(self):
        """{layer name: {reason: calls}} of the converted layers' calls that
        ran PyTorch's forward so far (layers since freed are not listed)."""
        return {name: dict(layer.fallbacks) for name, layer in self._layers.items() if layer.fallbacks}

    def __repr__(self):
        return "ConvertReport(converted=%r, left=%r)" % (self.converted, self.left)

    def __str__(self):
        lines = ["convtune.convert: %d layers converted, %d left" % (len(self.converted), len(self.left))]
        lines += ["  left %s: %s" % (name or "(the model)", why) for name, why in self.left]
        for name, reasons in self.pytorch_calls().items():
            lines += ["  %s ran PyTorch's forward (%d calls): %s" % (name or "(the model)", calls, why)
                      for why, calls in reasons.items()]
        return "\n".join(lines)


def _why_left(layer):
    if type(layer) is not torch.nn.Conv2d:
        return "%s is a subclass of nn.Conv2d: its forward may differ" % type(layer).__name__
    dtypes = {p.dtype for p in layer.parameters()}
    if dtypes - set(_FLOATS):
        return ("parameters are %s; convtune computes float32, float16 and bfloat16"
                % ", ".join(sorted(map(str, dtypes))))
    return None


def convert(model, *, math=None, context=None):
    """Makes every torch.nn.Conv2d of `model` (itself included) a convtune.nn.Conv2d,
    in place: parameters, buffers, hooks and state_dict keys stay as they were.

    math, context: as for convtune.nn.Conv2d, set on every converted layer.
    Layers of a subclass of nn.Conv2d (whose forward may differ) and layers with
    parameters other than float32, float16 or bfloat16 are left.  Returns a ConvertReport; print it
    for the list of layers left and why.
    """
    if not isinstance(model, torch.nn.Module):
        raise TypeError("convert takes a torch.nn.Module, got %s" % type(model).__name__)
    if math not in (None, "strict", "tf32"):
        raise ValueError("math must be None, 'strict' or 'tf32', got %r" % (math,))
    converted, left, layers = [], [], {}
    for name, layer in model.named_modules():
        if isinstance(layer, Conv2d):
            converted.append(name)
            layers[name] = layer
        elif isinstance(layer, torch.nn.Conv2d):
            why = _why_left(layer)
            if why is None:
                Conv2d.from_torch(layer, math, context)
                converted.append(name)
                layers[name] = layer
            else:
                left.append((name, why))
    return ConvertReport(converted, left, layers)
