"""Plans: one tuned convolution pass, called on PyTorch tensors (Plan), and
the checks and stream ordering its calls need.  Made by Context.plan."""
import ctypes
import functools
import math
import threading

from . import _base, _lib
from ._base import ConvtuneError, _torch


def _check_tensor(name, t, shape, device, channels_last=False, layout="nhwc", dtype=None):
    """Raises where t is not what the plan takes: dtype None is float32."""
    torch = _base._torch_mod  # imported by now: a Plan exists
    dtype = torch.float32 if dtype is None else dtype
    # For inputs, say how to fix them; `out` must be fixed by the caller's allocation.
    fix = (lambda hint: ": pass %s%s" % (name, hint)) if name != "out" else (lambda hint: "")
    if not isinstance(t, torch.Tensor):
        raise TypeError("%s must be a torch.Tensor, got %s" % (name, type(t).__name__))
    if t.device != device:
        raise ValueError("%s is on %s, but this plan runs on %s%s"
                         % (name, t.device, device, fix(".to(%r)" % str(device))))
    if t.dtype != dtype:
        what = ("the bias is float32 whatever the plan's type" if name == "bias" and dtype == torch.float32
                else "this plan takes %s" % dtype)
        raise TypeError("%s has dtype %s; %s%s" % (name, t.dtype, what, fix(".to(%s)" % dtype)))
    if t.shape != shape:  # torch.Size compares with a tuple
        raise ValueError("%s has shape %s, but the plan %s %s"
                         % (name, tuple(t.shape), "outputs" if name == "out" else "was made for", shape))
    if channels_last:
        if t.layout != torch.strided or not t.is_contiguous(memory_format=torch.channels_last):
            raise ValueError("%s is not in channels-last memory format (this plan was made with "
                             "layout=%r)%s" % (name, layout,
                                               fix(".contiguous(memory_format=torch.channels_last)")))
    elif t.layout != torch.strided or not t.is_contiguous():
        raise ValueError("%s is not contiguous (convtune reads and writes dense NCHW)%s" % (name, fix(".contiguous()")))
    ptr = t.data_ptr()
    if ptr % _lib.POINTER_ALIGNMENT:
        raise ValueError("%s's data (0x%x) is not %d-byte aligned, as happens with a view at an offset "
                         "into a larger tensor%s" % (name, ptr, _lib.POINTER_ALIGNMENT, fix(".clone()")))


def _stream_query(torch):
    """A function of a device index giving the raw cudaStream_t of torch's
    current stream there.

    torch._C._cuda_getCurrentRawStream skips building a Stream object (a few
    microseconds per call); the public API is the fallback if it goes away.
    """
    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    if raw is not None:
        return raw
    return lambda device_index: torch.cuda.current_stream(device_index).cuda_stream


def _order_streams(torch, device_index, earlier, later):
    """Makes raw stream `later` wait for the work queued so far on `earlier`.

    Not while `later` (torch's current stream) is being captured into a CUDA
    graph: a capture cannot wait for work outside it, and the graph's replays
    are ordered by whoever launches them.
    """
    if torch.cuda.is_current_stream_capturing():
        return
    first = torch.cuda.ExternalStream(earlier, device=device_index)
    second = torch.cuda.ExternalStream(later, device=device_index)
    event = torch.cuda.Event()
    event.record(first)
    second.wait_event(event)


def _overlaps(a, b):
    a0, b0 = a.data_ptr(), b.data_ptr()
    return a0 < b0 + b.numel() * b.element_size() and b0 < a0 + a.numel() * a.element_size()


# is_contiguous() arguments of a dense NCHW tensor (Plan._tensor_fits).
_DENSE = {}

# Calls without out= make outputs up to this size from a kept prototype (Plan._output_maker).
_PROTOTYPE_MAX_BYTES = 1 << 20


class Plan:
    """A tuned convolution for one problem on one device; made by Context.plan.

    .info: algorithm, config, time_ms (median at tuning; -1 untimed), workspace_bytes,
    source ("memory", "cache", "tuned", "system", "heuristic": untimed, policy "record", or
    "carried": a winner tuned under other library versions, re-validated, its time_ms the
    one measured then; docs/caches.md, "Upgrades")
    and replay ("graph": each call is one
    CUDA graph launch; "direct", with replay_note; "pending" before a call), call
    ("extension (torch C++)": calls run through the compiled module, holding
    the GIL, reading tensors through torch's C++ API; "extension": the same
    through the tensors' Python attributes, where the operator's C++ library
    is not built; "ctypes (why)" otherwise) and direction ("fwd", "bwd_data" or "bwd_filter");
    .output_shape: what the plan's pass writes, the
    output (N, K, P, Q) of a forward plan, dx or dw of a backward one;
    .key: the problem's cache key.  Call a forward plan as plan(x, w, bias=None,
    out=None); a backward one as plan.backward_data(dy, w) or
    plan.backward_filter(x, dy).  A plan owns one workspace: calls from different streams are ordered one
    after the other (the later stream waits for the earlier one).

    A dynamic convolution's plan (Context.dynamic_plan) takes the per-pixel
    filters, weights (B, G, k*k, P, Q), where a convolution's takes w:
    plan(x, weights), plan.backward_data(dy, weights), and
    plan.backward_filter(x, dy) gives the weights' gradient; no bias.
    """

    def __init__(self):
        raise TypeError("Plans are made by Context.plan(...)")

    @classmethod
    def _create(cls, context, key):
        torch = _torch()  # before anything is allocated: a plan is useless without it
        lib = context._lib
        problem = _lib.Problem()
        lib.conv_problem_init_sized(ctypes.byref(problem), ctypes.sizeof(problem))
        for field, value in zip(_lib.PROBLEM_FIELDS, key):
            setattr(problem, field, value)
        ctx_handle = context._handle
        handle = _lib.PlanPtr()

        def create():
            status = lib.conv_plan_create(ctx_handle, ctypes.byref(problem), ctypes.byref(handle))
            # Read at once: the next call on the context replaces the message.
            return status, (_lib.last_error(lib, ctx_handle) if status != _lib.OK else "")

        (status, message), interrupted = context._run_interruptible(create)
        if interrupted:
            if status == _lib.OK:
                lib.conv_plan_destroy(handle)
            raise KeyboardInterrupt
        if status != _lib.OK:
            raise ConvtuneError(status, message)

        self = object.__new__(cls)
        self._handle = handle
        self._lock = threading.RLock()
        self._context = context
        self._ctx_handle = ctx_handle
        self._execute = lib.conv_plan_execute
        self._destroy = lib.conv_plan_destroy
        self._last_stream = None
        try:
            info = _lib.PlanInfo()
            status = lib.conv_plan_info_get_sized(handle, ctypes.byref(info), ctypes.sizeof(info))
            if status != _lib.OK:
                raise ConvtuneError(status, "conv_plan_info_get_sized failed")
            p, q = ctypes.c_int64(), ctypes.c_int64()
            status = lib.conv_problem_output_dims(ctypes.byref(problem), ctypes.byref(p), ctypes.byref(q))
            if status != _lib.OK:
                raise ConvtuneError(status, "conv_problem_output_dims failed on a planned problem")
            text = ctypes.create_string_buffer(_lib.PROBLEM_KEY_SIZE)
            status = lib.conv_problem_key(ctypes.byref(problem), text, len(text))
            if status != _lib.OK:
                raise ConvtuneError(status, "conv_problem_key failed on a planned problem")
        except BaseException:
            self._release()
            raise
        self._problem_fields = key
        fields = dict(zip(_lib.PROBLEM_FIELDS, key))
        n, c, h, w, k, r, s, groups = (fields[f] for f in "n c h w k r s groups".split())
        self._x_shape = (n, c, h, w)
        self._dynamic = fields["op"] == _lib.OP_DYNAMIC
        if self._dynamic:  # the per-pixel filters wt[B][G][k*k][P][Q] (convtune.h, conv_op)
            self._w_shape, self._w_name = (n, groups, r * s, p.value, q.value), "weights"
        else:
            self._w_shape, self._w_name = (k, c // groups, r, s), "w"
        self._has_bias = fields["epilogue"] != _lib.EPILOGUE_NONE
        self._channels_last = fields["layout"] == _lib.LAYOUT_NHWC
        self._memory_format = ({"memory_format": torch.channels_last} if self._channels_last
                                   else _DENSE)
        # w's format: the activations', or channels-last for K R S C filters
        # (layout "nchw_krsc").
        krsc = fields["filter_layout"] == _lib.FILTER_KRSC
        self._w_channels_last = self._channels_last or krsc
        self._w_layout = "nchw_krsc" if krsc else "nhwc"  # what an error about w names
        self._w_memory_format = ({"memory_format": torch.channels_last}
                                 if self._w_channels_last else _DENSE)
        self._device = torch.device("cuda", context.device)
        self._device_index = context.device
        self._torch, self._tensor_type, self._float32 = torch, torch.Tensor, torch.float32
        # x's, w's and the output's element type; the bias is float32 (convtune.h).
        self._dtype_code = fields["dtype"]
        self._dtype = {_lib.DTYPE_F16: torch.float16, _lib.DTYPE_BF16: torch.bfloat16}.get(
            self._dtype_code, torch.float32)
        self._bias_shape = torch.Size((k,))
        self._direction = fields["direction"]
        self._backward_plans = {}  # a forward plan's, by direction (_autograd.backward_plan)
        self._y_shape = (n, k, p.value, q.value)
        # What the pass writes: y, or dx (x's shape) or dw (w's shape).
        self.output_shape = {_lib.BACKWARD_DATA: self._x_shape,
                             _lib.BACKWARD_FILTER: self._w_shape}.get(self._direction, self._y_shape)
        self.key = text.value.decode()
        self._current_stream = _stream_query(torch)
        try:
            self._new_output = self._output_maker(torch)
            self._launcher, call = self._make_launcher(torch, lib)
        except BaseException:
            self._release()
            raise
        source = info.source
        self._info = {
            "algorithm": info.algorithm.decode("utf-8", "replace"),
            "config": info.config.decode("utf-8", "replace"),
            "time_ms": info.time_ms,
            "workspace_bytes": info.workspace_bytes,
            "source": _lib.SOURCES[source] if 0 <= source < len(_lib.SOURCES) else "unknown(%d)" % source,
            "replay": "pending",
            "replay_note": "",
            "graph_launches": 0,
            "graph_captures": 0,
            "direct_runs": 0,
            "call": call,
            "direction": {v: k for k, v in _lib.DIRECTIONS.items()}.get(info.direction, "unknown(%d)" % info.direction),
            "deterministic": bool(info.deterministic),
            "dtype": str(self._dtype).replace("torch.", ""),
        }
        return self

    def _output_maker(self, torch):
        """A function making an output tensor for a call without out=.

        Small outputs copy a kept prototype with torch.empty_like, whose
        arguments parse in about half the time of torch.empty's (1.7 against
        3.0 us on the H200 machine's host), which matters where a call's host
        time exceeds its GPU time; larger outputs are not worth a prototype.
        """
        shape = self.output_shape
        if _lib.DTYPE_BYTES[self._dtype_code] * math.prod(shape) <= _PROTOTYPE_MAX_BYTES:
            # 5-D for a dynamic plan's weights; empty_like keeps the prototype's memory format.
            prototype = torch.empty(shape, dtype=self._dtype, device=self._device,
                                    **self._memory_format)
            return functools.partial(torch.empty_like, prototype)
        return functools.partial(torch.empty, shape, dtype=self._dtype, device=self._device,
                                 **self._memory_format)

    def _make_launcher(self, torch, lib):
        """The compiled call path for this plan (python/convtune/_launch.c),
        or None with the reason; info["call"] says which one calls run."""
        module, why_not = _lib.launch_module()
        if module is None:
            return None, "ctypes (%s)" % why_not
        from . import ops  # loads the operator's library, which holds the torch access table
        ctx_lib, ctx_handle = lib, self._ctx_handle

        def fail(status):  # no reference to the Plan: the launcher makes no cycle
            raise ConvtuneError(status, _lib.last_error(ctx_lib, ctx_handle))

        # A backward pass's launcher takes its two inputs in the places of x and w.
        execute, inputs = {
            _lib.BACKWARD_DATA: (lib.conv_plan_backward_data, (self._y_shape, self._w_shape)),
            _lib.BACKWARD_FILTER: (lib.conv_plan_backward_filter, (self._x_shape, self._y_shape)),
        }.get(self._direction, (lib.conv_plan_execute, (self._x_shape, self._w_shape)))
        launcher = module.Launcher(
            execute_address=ctypes.cast(execute, ctypes.c_void_p).value,
            plan_address=ctypes.cast(self._handle, ctypes.c_void_p).value,
            device_index=self._device_index,
            x_shape=inputs[0], w_shape=inputs[1],
            bias_shape=tuple(self._bias_shape) if self._has_bias else None,
            out_shape=self.output_shape,
            memory_format=self._memory_format or None,
            w_memory_format=self._w_memory_format or None,
            tensor_type=torch.Tensor, float32=torch.float32,
            dtype=self._dtype, dtype_code=self._dtype_code,
            empty=self._new_output,
            current_stream=self._current_stream,
            is_grad_enabled=torch.is_grad_enabled,
            order_streams=functools.partial(_order_streams, torch, self._device_index),
            fail=fail, backward=self._direction != _lib.FORWARD,
            torch_access=ops.torch_access_address())
        return launcher, "extension (torch C++)" if launcher.uses_torch() else "extension"

    @property
    def info(self):
        """algorithm, config, time_ms, workspace_bytes, source ("memory", "cache", "tuned", "system",
        "heuristic" or "carried"),
        as of the last call replay ("pending", "graph" or "direct") with replay_note,
        the calls so far by how they ran (graph_launches, graph_captures, direct_runs:
        see conv_plan_execute in include/convtune.h), and call ("extension (torch C++)",
        "extension" or "ctypes (why)": see the class's docstring)."""
        with self._lock:
            if self._handle is not None:  # closed: the last values read
                raw = _lib.PlanInfo()
                if self._context._lib.conv_plan_info_get_sized(
                        self._handle, ctypes.byref(raw), ctypes.sizeof(raw)) == _lib.OK:
                    replay = raw.replay
                    self._info["replay"] = (_lib.REPLAYS[replay] if 0 <= replay < len(_lib.REPLAYS)
                                            else "unknown(%d)" % replay)
                    self._info["replay_note"] = raw.replay_note.decode("utf-8", "replace")
                    for name in ("graph_launches", "graph_captures", "direct_runs"):
                        self._info[name] = getattr(raw, name)
            return dict(self._info)

    @property
    def context(self):
        return self._context

    @property
    def closed(self):
        return self._handle is None

    def __call__(self, x, w, bias=None, out=None):
        """out = conv(x, w) [+ bias [then ReLU]] on torch's current stream; returns out.

        x (N, C, H, W), w (K, C/groups, R, S), bias (K,) exactly when the plan was made
        with bias=True, out (N, K, P, Q) or None to allocate it.  x, w and out of the
        plan's dtype (float32, float16 or bfloat16), the bias float32; all 16-byte aligned, on the plan's device; x, w and out contiguous (layout "nchw")
        or channels-last (layout "nhwc"); with layout "nchw_krsc", x and out
        contiguous and w channels-last.
        """
        launcher = self._launcher
        if launcher is not None and self._direction == _lib.FORWARD:
            y = launcher(x, w, bias, out)  # checks, allocates and executes in C
            if y is not None:
                return y
            self._explain_bad_arguments(x, w, bias, out)  # raises with the reason
            raise ValueError("convtune: the arguments do not fit this plan")
        self._check_direction(_lib.FORWARD)
        return self._call_through_ctypes(x, w, bias, out)

    def backward_data(self, dy, w, out=None):
        """dx, the gradient for x, from dy (N, K, P, Q) and w, for a plan made with
        direction="bwd_data"; out (N, C, H, W) or None to allocate it.  Tensors as
        for a forward call (the plan's dtype and layout, aligned); out is overwritten."""
        self._check_direction(_lib.BACKWARD_DATA)
        if self._launcher is not None:
            dx = self._launcher(dy, w, None, out)  # checks, allocates and executes in C
            if dx is not None:
                return dx
        return self._backward(self._context._lib.conv_plan_backward_data,
                              (("dy", dy, self._y_shape), (self._w_name, w, self._w_shape)), out)

    def backward_filter(self, x, dy, out=None):
        """dw, the gradient for w, from x and dy (N, K, P, Q), for a plan made with
        direction="bwd_filter"; out (K, C/groups, R, S) or None to allocate it."""
        self._check_direction(_lib.BACKWARD_FILTER)
        if self._launcher is not None:
            dw = self._launcher(x, dy, None, out)
            if dw is not None:
                return dw
        return self._backward(self._context._lib.conv_plan_backward_filter,
                              (("x", x, self._x_shape), ("dy", dy, self._y_shape)), out)

    def _check_direction(self, direction):
        if self._direction != direction:
            calls = {_lib.FORWARD: "plan(x, w, bias)", _lib.BACKWARD_DATA: "plan.backward_data(dy, w)",
                     _lib.BACKWARD_FILTER: "plan.backward_filter(x, dy)"}
            raise ValueError("this plan (%s) runs %s, not %s"
                             % (self.key, calls[self._direction], calls[direction]))

    def _backward(self, execute, inputs, out):
        for name, t, shape in inputs:
            _check_tensor(name, t, shape, self._device, self._channels_last, dtype=self._dtype)
        if out is None:
            out = self._new_output()
        else:
            _check_tensor("out", out, self.output_shape, self._device, self._channels_last,
                          dtype=self._dtype)
            for name, t, _ in inputs:
                if _overlaps(out, t):
                    raise ValueError("out overlaps %s: convtune cannot write its output over an input" % name)
        self._launch(execute, inputs[0][1].data_ptr(), inputs[1][1].data_ptr(), out.data_ptr())
        return out

    def _call_through_ctypes(self, x, w, bias, out):
        if not self._arguments_fit(x, w, bias, out):
            self._explain_bad_arguments(x, w, bias, out)  # raises with the reason, if any
        if out is None:
            out = self._new_output()
        self._launch(self._execute, x.data_ptr(), w.data_ptr(),
                     None if bias is None else bias.data_ptr(), out.data_ptr())
        return out

    def _launch(self, execute, *pointers):
        """execute(plan, stream, *pointers) on torch's current stream, after the
        plan's last stream where that was another one."""
        stream = self._current_stream(self._device_index)
        with self._lock:  # one execution at a time: the plan has one workspace
            handle = self._handle
            if handle is None:
                raise ValueError("this convtune Plan is closed")
            if self._last_stream is not None and self._last_stream != stream:
                # The workspace may still be in use by the other stream's launch.
                _order_streams(self._torch, self._device_index, self._last_stream, stream)
            # The library makes the plan's device current and restores the caller's.
            status = execute(handle, stream, *pointers)
            if status != _lib.OK:
                raise ConvtuneError(status, _lib.last_error(self._context._lib, self._ctx_handle))
            self._last_stream = stream

    def _tensor_fits(self, t, shape, formats=_DENSE, dtype=None):
        # The common case in a few attribute reads; _explain_bad_arguments says what is wrong.
        dtype = self._dtype if dtype is None else dtype
        return (isinstance(t, self._tensor_type) and t.dtype is dtype and t.shape == shape
                and t.get_device() == self._device_index and t.is_contiguous(**formats)
                and t.data_ptr() % _lib.POINTER_ALIGNMENT == 0)

    def _arguments_fit(self, x, w, bias, out):
        activations = self._memory_format  # x and out: the plan's layout
        if not (self._tensor_fits(x, self._x_shape, activations)
                and self._tensor_fits(w, self._w_shape, self._w_memory_format)):
            return False
        if (bias is None) == self._has_bias or (
                bias is not None and not self._tensor_fits(bias, self._bias_shape, dtype=self._float32)):
            return False
        if out is not None and (not self._tensor_fits(out, self.output_shape, activations)
                                or any(t is not None and _overlaps(out, t) for t in (x, w, bias))):
            return False
        return not (self._torch.is_grad_enabled()
                    and (x.requires_grad or w.requires_grad or (bias is not None and bias.requires_grad)))

    def _explain_bad_arguments(self, x, w, bias, out):
        torch, device = self._torch, self._device
        _check_tensor("x", x, self._x_shape, device, self._channels_last, dtype=self._dtype)
        _check_tensor(self._w_name, w, self._w_shape, device, self._w_channels_last, self._w_layout,
                      dtype=self._dtype)
        k = self._bias_shape[0]
        if self._has_bias:
            if bias is None:
                raise ValueError("this plan adds a bias (made with bias=True): pass bias, a float32 "
                                 "tensor of shape (%d,)" % k)
            _check_tensor("bias", bias, (k,), device)
        elif bias is not None:
            if self._dynamic:
                raise ValueError("a dynamic convolution takes no bias: add it to the output")
            raise ValueError("this plan was made without bias, so a bias would be ignored: make the "
                             "plan with bias=True")
        if torch.is_grad_enabled() and any(t is not None and t.requires_grad for t in (x, w, bias)):
            raise NotImplementedError("a Plan call records no gradients: use %s, which %s "
                                      "differentiable, or run under torch.no_grad() / "
                                      "torch.inference_mode()"
                                      % (("convtune.dynamic_conv2d", "is") if self._dynamic else
                                         ("convtune.conv2d or convtune.nn.Conv2d", "are")))
        if out is not None:
            _check_tensor("out", out, self.output_shape, device, self._channels_last, dtype=self._dtype)
            for name, t in (("x", x), (self._w_name, w), ("bias", bias)):
                if t is not None and _overlaps(out, t):
                    raise ValueError("out overlaps %s: convtune cannot write its output over an input" % name)

    def _release(self):
        with self._lock:
            handle, self._handle = self._handle, None
            launcher = getattr(self, "_launcher", None)
            if launcher is not None:
                launcher.close()  # before the plan is freed: later calls raise
            if handle is not None:
                self._destroy(handle)  # waits for queued executions (cudaFree)

    def close(self):
        """Frees the plan and its workspace; the Context makes a new one on the next plan() call."""
        if self._handle is not None:
            self._release()

    def __del__(self):
        try:
            if getattr(self, "_handle", None) is not None:
                self._release()
        except Exception:
            pass

    def __repr__(self):
        state = " closed" if self._handle is None else ""
        i = self._info
        return "<convtune.Plan %s: %s %s, %.4g ms, %s%s>" % (
            self.key, i["algorithm"], i["config"], i["time_ms"], i["source"], state)
