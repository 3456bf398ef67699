"""CPU test of the compiled call path (python/convtune/_launch.c), without
torch or a GPU: stand-in tensors and a ctypes callback in place of
conv_plan_execute record what the Launcher does.  Every check runs twice:
with the Launcher reading the tensors' Python attributes, and with a torch
access table (python/convtune/_torch_access.h) of ctypes callbacks reading
the same stand-ins, as _convtune_torch_op.so's reads torch's C++ tensors.

    python3 tests/python/check_launch.py build/_convtune_launch.abi3.so

Exit 0: every check passed; 1: one failed; 77: the module is not built.
"""
import ctypes
import gc
import os
import sys
import traceback
import weakref

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
from convtune import _lib  # noqa: E402  (needs neither torch nor the library to import)

FLOAT32, FLOAT16, BFLOAT16 = object(), object(), object()
DTYPE_CODES = {FLOAT32: 0, FLOAT16: 1, BFLOAT16: 2}  # conv_dtype
CHANNELS_LAST = object()
X_SHAPE, W_SHAPE, OUT_SHAPE, BIAS_SHAPE = (2, 3, 8, 8), (4, 3, 3, 3), (2, 4, 6, 6), (4,)
X_BYTES = 2 * 3 * 8 * 8 * 4
PLAN = 0x5000


class Tensor:
    """What the Launcher reads of a torch.Tensor."""

    def __init__(self, shape, data, dtype=FLOAT32, device=0, contiguous=True, requires_grad=False,
                 memory_format=None):
        self.shape, self.dtype, self.requires_grad = tuple(shape), dtype, requires_grad
        self._data, self._device, self._contiguous = data, device, contiguous
        self._format = memory_format  # None: torch.contiguous_format

    def get_device(self):
        return self._device

    def is_contiguous(self, memory_format=None):
        return self._contiguous and memory_format is self._format

    def data_ptr(self):
        return self._data


class NotATensor:
    pass


class ExecuteFailed(Exception):
    pass


EXECUTE = ctypes.CFUNCTYPE(ctypes.c_int, *[ctypes.c_void_p] * 6)

# ---------------------------------------------------------------- the torch access table

TORCH_ACCESS_VERSION = 2  # CONVTUNE_TORCH_ACCESS_VERSION
MAX_DIMS = 8


class Facts(ctypes.Structure):
    _fields_ = [("data", ctypes.c_size_t), ("dims", ctypes.c_int), ("sizes", ctypes.c_int64 * MAX_DIMS),
                ("device", ctypes.c_int), ("dtype", ctypes.c_int), ("contiguous", ctypes.c_int),
                ("channels_last", ctypes.c_int), ("requires_grad", ctypes.c_int)]


READ = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.py_object, ctypes.POINTER(Facts))
EMPTY = ctypes.CFUNCTYPE(ctypes.py_object, ctypes.POINTER(ctypes.c_int64), ctypes.c_int, ctypes.c_int,
                         ctypes.c_int, ctypes.c_int)
STREAM = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_int)
GRAD = ctypes.CFUNCTYPE(ctypes.c_int)


class Table(ctypes.Structure):
    _fields_ = [("version", ctypes.c_int), ("read", READ), ("empty", EMPTY), ("current_stream", STREAM),
                ("grad_enabled", GRAD)]


def read_facts(tensor, facts):
    if not isinstance(tensor, Tensor):
        return 0
    try:
        data = tensor.data_ptr()
    except KeyError:
        # The C++ table sets torch's exception and returns -1; a ctypes
        # callback cannot leave an exception set, so the Launcher's NULL
        # comes out as a SystemError here.
        return -1
    f = facts.contents
    f.data, f.dims, f.device = data, len(tensor.shape), tensor.get_device()
    f.sizes[:len(tensor.shape)] = tensor.shape
    f.dtype, f.contiguous = DTYPE_CODES.get(tensor.dtype, -1), tensor.is_contiguous()
    f.channels_last = tensor.is_contiguous(memory_format=CHANNELS_LAST)
    f.requires_grad = tensor.requires_grad
    return 1


# The tables made so far: a Launcher holds only the address.
TABLES = []
EMPTY_CALLS = []  # (sizes, channels_last, dtype) of each table's empty()


def torch_access(empty, current_stream, is_grad_enabled, version=TORCH_ACCESS_VERSION):
    """A table over the Launcher's own callables, and its address."""
    def make(sizes, dims, device, channels_last, dtype):
        EMPTY_CALLS.append((tuple(sizes[:dims]), channels_last, dtype))
        return empty()

    table = Table(version, READ(read_facts), EMPTY(make), STREAM(current_stream),
                  GRAD(lambda: int(bool(is_grad_enabled()))))
    TABLES.append(table)
    return ctypes.addressof(table)


USE_TABLE = False  # main() runs the checks with and without


def make_launcher(module, execute, **changes):
    """A Launcher over the ctypes callback `execute`, with harmless defaults."""
    kwargs = dict(execute_address=ctypes.cast(execute, ctypes.c_void_p).value, plan_address=PLAN,
                  device_index=0, x_shape=X_SHAPE, w_shape=W_SHAPE, bias_shape=None, out_shape=OUT_SHAPE,
                  memory_format=None, tensor_type=Tensor, float32=FLOAT32, empty=lambda: Tensor(OUT_SHAPE, 0x90000),
                  current_stream=lambda index: 1, is_grad_enabled=lambda: False,
                  order_streams=lambda earlier, later: None, fail=lambda status: None)
    kwargs.update(changes)
    if "torch_access" in kwargs:
        return module.Launcher(**kwargs)
    if USE_TABLE:
        kwargs["torch_access"] = torch_access(kwargs["empty"], kwargs["current_stream"],
                                              kwargs["is_grad_enabled"])
    launcher = module.Launcher(**kwargs)
    assert launcher.uses_torch() == USE_TABLE
    return launcher


def expect_raises(exception, call):
    """The exception `call` raises, which must be an `exception`."""
    try:
        call()
    except exception as e:
        return e
    raise AssertionError("%s did not raise %r" % (call, exception))


class Harness:
    """A Launcher over a fake conv_plan_execute, with a log of every call."""

    def __init__(self, module, bias=False, status=0, memory_format=None):
        self.calls, self.orders, self.stream, self.grad, self.status = [], [], 0x100, False, status
        self.next_output = 0x90000
        self.made = []

        def execute(plan, stream, x, w, b, y):
            self.calls.append((plan, stream, x, w, b, y))
            return self.status

        self._execute = EXECUTE(execute)  # kept alive while the launcher may call it
        self.launcher = make_launcher(
            module, self._execute, bias_shape=BIAS_SHAPE if bias else None, empty=self.empty,
            memory_format=memory_format,
            current_stream=lambda index: self.stream, is_grad_enabled=lambda: self.grad,
            order_streams=lambda earlier, later: self.orders.append((earlier, later)), fail=self.fail)

    def empty(self):
        t = Tensor(OUT_SHAPE, self.next_output)
        self.made.append(weakref.ref(t))
        return t

    def fail(self, status):
        raise ExecuteFailed(status)

    def __call__(self, x, w, bias=None, out=None):
        return self.launcher(x, w, bias, out)


def inputs():
    return Tensor(X_SHAPE, 0x10000), Tensor(W_SHAPE, 0x20000)


def check_executes_with_the_pointers(module):
    h = Harness(module)
    x, w = inputs()
    out = Tensor(OUT_SHAPE, 0x30000)
    assert h(x, w, None, out) is out
    assert h.calls == [(PLAN, 0x100, 0x10000, 0x20000, None, 0x30000)], h.calls
    y = h(x, w)
    assert isinstance(y, Tensor) and y.data_ptr() == 0x90000 and y.shape == OUT_SHAPE
    assert h.calls[-1] == (PLAN, 0x100, 0x10000, 0x20000, None, 0x90000), h.calls
    hb = Harness(module, bias=True)
    assert hb(x, w, Tensor(BIAS_SHAPE, 0x40000), out) is out
    assert hb.calls == [(PLAN, 0x100, 0x10000, 0x20000, 0x40000, 0x30000)], hb.calls


PASS = ctypes.CFUNCTYPE(ctypes.c_int, *[ctypes.c_void_p] * 5)


def check_backward_pass(module):
    """A backward pass's Launcher calls its pass with the two inputs and the
    output, reads no requires_grad (a backward runs where grad mode may be
    on, on tensors that record), and takes no bias."""
    calls = []

    def backward(plan, stream, a, b, out):
        calls.append((plan, stream, a, b, out))
        return 0

    fn = PASS(backward)
    dy, w = Tensor(X_SHAPE, 0x10000, requires_grad=True), Tensor(W_SHAPE, 0x20000)
    launcher = make_launcher(module, fn, backward=True, is_grad_enabled=lambda: True)
    out = Tensor(OUT_SHAPE, 0x30000)
    assert launcher(dy, w, None, out) is out
    assert calls == [(PLAN, 1, 0x10000, 0x20000, 0x30000)], calls
    assert launcher(dy, w, Tensor(BIAS_SHAPE, 0x40000), None) is None  # no bias to take
    assert launcher(dy, Tensor((4, 3, 3, 2), 0x20000), None, None) is None  # w shape
    assert len(calls) == 1, calls
    expect_raises(ValueError, lambda: make_launcher(module, fn, backward=True, bias_shape=BIAS_SHAPE))


def check_refuses_what_does_not_fit(module):
    """Each misfit: None back, nothing executed, nothing allocated."""
    x, w = inputs()
    out = Tensor(OUT_SHAPE, 0x30000)
    bias = Tensor(BIAS_SHAPE, 0x40000)
    cases = {
        "x not a tensor": (NotATensor(), w, None, None),
        "x float16": (Tensor(X_SHAPE, 0x10000, dtype=FLOAT16), w, None, None),
        "x shape": (Tensor((2, 3, 8, 9), 0x10000), w, None, None),
        "w on device 1": (x, Tensor(W_SHAPE, 0x20000, device=1), None, None),
        "w on the CPU": (x, Tensor(W_SHAPE, 0x20000, device=-1), None, None),
        "x not contiguous": (Tensor(X_SHAPE, 0x10000, contiguous=False), w, None, None),
        "w misaligned": (x, Tensor(W_SHAPE, 0x20004), None, None),
        "bias without a bias plan": (x, w, bias, None),
        "out shape": (x, w, None, Tensor((2, 4, 6, 7), 0x30000)),
        "out misaligned": (x, w, None, Tensor(OUT_SHAPE, 0x30008)),
        "out over x's end": (x, w, None, Tensor(OUT_SHAPE, 0x10000 + X_BYTES - 16)),
        "out under w's start": (x, w, None, Tensor(OUT_SHAPE, 0x20000 - 16)),
    }
    h = Harness(module)
    for name, args in cases.items():
        assert h(*args) is None, name
    assert h.calls == [] and h.made == [], (h.calls, h.made)
    assert h(x, w, None, Tensor(OUT_SHAPE, 0x10000 + X_BYTES)) is not None  # adjacent is fine
    hb = Harness(module, bias=True)
    assert hb(x, w, None, out) is None, "a bias plan without bias"
    assert hb(x, w, Tensor((5,), 0x40000), out) is None, "bias shape"
    assert hb(x, w, bias, Tensor(OUT_SHAPE, 0x40000 - 16)) is None, "out over the bias"
    assert hb.calls == []


def check_channels_last_tensors(module):
    """An NHWC plan's launcher asks x, w and out for channels-last
    contiguity (is_contiguous(memory_format=...)), and the bias for plain."""
    h = Harness(module, bias=True, memory_format={"memory_format": CHANNELS_LAST})
    x_cl = Tensor(X_SHAPE, 0x10000, memory_format=CHANNELS_LAST)
    w_cl = Tensor(W_SHAPE, 0x20000, memory_format=CHANNELS_LAST)
    out_cl = Tensor(OUT_SHAPE, 0x30000, memory_format=CHANNELS_LAST)
    x, w = inputs()
    bias = Tensor(BIAS_SHAPE, 0x40000)
    assert h(x_cl, w_cl, bias, out_cl) is out_cl and len(h.calls) == 1
    assert h(x, w_cl, bias, out_cl) is None, "an NCHW x"
    assert h(x_cl, w_cl, bias, Tensor(OUT_SHAPE, 0x30000)) is None, "an NCHW out"
    assert h(x_cl, w, bias, out_cl) is None, "a KCRS w"
    assert h(x_cl, w_cl, Tensor(BIAS_SHAPE, 0x40000, memory_format=CHANNELS_LAST), out_cl) is None, \
        "the bias is read as plain contiguous"
    assert len(h.calls) == 1
    expect_raises(TypeError, lambda: make_launcher(module, h._execute, memory_format=[1]))


def check_autograd_only_when_enabled(module):
    h = Harness(module)
    x, w = inputs()
    w.requires_grad = True
    h.grad = True
    assert h(x, w) is None and h.calls == []
    h.grad = False
    assert h(x, w) is not None and len(h.calls) == 1


def check_orders_streams(module):
    h = Harness(module)
    x, w = inputs()
    h(x, w)
    h(x, w)
    assert h.orders == []
    h.stream = 0x200
    h(x, w)
    assert h.orders == [(0x100, 0x200)], h.orders
    h.stream = 0  # the legacy default stream is a valid stream
    h(x, w)
    assert h.orders[-1] == (0x200, 0) and h.calls[-1][1] is None, (h.orders, h.calls[-1])


def check_orders_again_after_a_call_during_ordering(module):
    """order_streams runs Python, where another thread may execute the
    plan on a third stream; the call must then wait for that one too."""
    x, w = inputs()
    state = {"stream": 0x100, "orders": [], "calls": [], "entered": False}

    def execute(plan, stream, xp, wp, bp, yp):
        state["calls"].append(stream)
        return 0

    def order_reentering(earlier, later):
        state["orders"].append((earlier, later))
        if not state["entered"]:
            state["entered"] = True
            saved, state["stream"] = state["stream"], 0x300
            launcher(x, w, None, None)  # executes on 0x300: orders 0x300 after 0x100
            state["stream"] = saved

    callback = EXECUTE(execute)
    launcher = make_launcher(module, callback, current_stream=lambda index: state["stream"],
                             order_streams=order_reentering)
    launcher(x, w, None, None)  # 0x100
    state["stream"] = 0x200
    launcher(x, w, None, None)
    assert state["orders"] == [(0x100, 0x200), (0x100, 0x300), (0x300, 0x200)], state["orders"]
    assert state["calls"] == [0x100, 0x300, 0x200], state["calls"]


def check_execute_failure_raises(module):
    h = Harness(module, status=10)  # CONV_CUDA_ERROR
    x, w = inputs()
    assert expect_raises(ExecuteFailed, lambda: h(x, w)).args == (10,)
    gc.collect()
    assert all(ref() is None for ref in h.made), "the output of a failed call leaked"
    h.status = 0
    h.stream = 0x200
    h(x, w)
    assert h.orders == [], "a failed execute counted as the last stream"


def check_a_fail_function_that_returns(module):
    h = Harness(module, status=10)
    h.launcher = make_launcher(module, h._execute, fail=lambda status: None)
    x, w = inputs()
    e = expect_raises(RuntimeError, lambda: h(x, w))
    assert "status 10" in str(e), e


def check_closed(module):
    h = Harness(module)
    x, w = inputs()
    h.launcher.close()
    e = expect_raises(ValueError, lambda: h(x, w))
    assert "closed" in str(e) and h.calls == [], (e, h.calls)


def check_errors_from_tensors_propagate(module):
    class Broken(Tensor):
        def data_ptr(self):
            raise KeyError("no data")

    h = Harness(module)
    _, w = inputs()
    expect_raises(SystemError if USE_TABLE else KeyError, lambda: h(Broken(X_SHAPE, 0x10000), w))
    assert h.calls == []


def check_arguments(module):
    h = Harness(module)
    x, w = inputs()
    expect_raises(TypeError, lambda: h.launcher(x, w, None))
    expect_raises(TypeError, lambda: h.launcher(x, w, None, None, out=None))
    for kwargs in ({"x_shape": [2, 3, 8, 8]}, {"plan_address": 0}, {"bias_shape": 4}):
        expect_raises((TypeError, ValueError), lambda: make_launcher(module, h._execute, **kwargs))


def check_no_reference_leaks(module):
    h = Harness(module)
    x, w = inputs()
    out = Tensor(OUT_SHAPE, 0x30000)
    h(x, w, None, out)
    h(x, w)
    watched = (x, w, out, FLOAT32, h.launcher)
    gc.collect()  # launchers of earlier checks, in cycles with their harnesses, hold FLOAT32 too
    before = [sys.getrefcount(t) for t in watched]
    for _ in range(1000):
        h(x, w, None, out)
        y = h(x, w)
        h(NotATensor(), w)
    del y
    gc.collect()
    after = [sys.getrefcount(t) for t in watched]
    assert before == after, (before, after)
    gc.collect()
    assert sum(ref() is not None for ref in h.made) == 0, "outputs outlived their callers"


def check_table_makes_the_output(module):
    """Through a table the output comes from its empty(), with the plan's
    output shape and layout; a table of another version is not used."""
    if not USE_TABLE:
        return
    for memory_format, channels_last in ((None, 0), ({"memory_format": CHANNELS_LAST}, 1)):
        h = Harness(module, memory_format=memory_format)
        del EMPTY_CALLS[:]
        layout = {} if memory_format is None else {"memory_format": CHANNELS_LAST}
        x, w = Tensor(X_SHAPE, 0x10000, **layout), Tensor(W_SHAPE, 0x20000, **layout)
        assert h(x, w) is not None
        assert EMPTY_CALLS == [(OUT_SHAPE, channels_last, 0)], EMPTY_CALLS
    stale = torch_access(lambda: None, lambda index: 1, lambda: False, version=TORCH_ACCESS_VERSION + 1)
    assert not make_launcher(module, EXECUTE(lambda *a: 0), torch_access=stale).uses_torch()
    table = torch_access(lambda: None, lambda index: 1, lambda: False)
    wide = make_launcher(module, EXECUTE(lambda *a: 0), x_shape=(1,) * (MAX_DIMS + 1), torch_access=table)
    assert not wide.uses_torch(), "a shape of more dimensions than the facts hold"


def check_half_plan(module):
    """A half plan (dtype=, dtype_code=) takes x, w and out of its type and
    the bias in float32; through a table its output is made in its type;
    overlaps are judged in its element size."""
    calls = []

    def execute(plan, stream, x, w, b, y):
        calls.append((x, w, b, y))
        return 0

    fn = EXECUTE(execute)
    out_bytes = 2 * 4 * 6 * 6 * 2
    for dtype, code in ((FLOAT16, 1), (BFLOAT16, 2)):
        made = Tensor(OUT_SHAPE, 0x90000, dtype=dtype)
        launcher = make_launcher(module, fn, bias_shape=BIAS_SHAPE, dtype=dtype, dtype_code=code,
                                 empty=lambda: made)
        x, w = Tensor(X_SHAPE, 0x10000, dtype=dtype), Tensor(W_SHAPE, 0x20000, dtype=dtype)
        bias, half_bias = Tensor(BIAS_SHAPE, 0x40000), Tensor(BIAS_SHAPE, 0x40000, dtype=dtype)
        del calls[:], EMPTY_CALLS[:]
        assert launcher(Tensor(X_SHAPE, 0x10000), w, bias, None) is None, "a float32 x"
        assert launcher(x, Tensor(W_SHAPE, 0x20000), bias, None) is None, "a float32 w"
        assert launcher(x, w, half_bias, None) is None, "a bias not float32"
        assert launcher(x, w, bias, Tensor(OUT_SHAPE, 0x30000)) is None, "a float32 out"
        other = FLOAT16 if dtype is BFLOAT16 else BFLOAT16
        assert launcher(Tensor(X_SHAPE, 0x10000, dtype=other), w, bias, None) is None, "the other half"
        assert calls == [], calls
        assert launcher(x, w, bias, None) is made
        out = Tensor(OUT_SHAPE, 0x50000, dtype=dtype)
        assert launcher(x, w, bias, out) is out
        # Adjacent in 2-byte elements; one element more overlaps.
        assert launcher(x, w, bias, Tensor(OUT_SHAPE, 0x40000 - out_bytes, dtype=dtype)) is not None
        assert launcher(x, w, bias, Tensor(OUT_SHAPE, 0x40000 - out_bytes + 16, dtype=dtype)) is None
        assert len(calls) == 3, calls
        if USE_TABLE:
            assert EMPTY_CALLS == [(OUT_SHAPE, 0, code)], EMPTY_CALLS
    expect_raises(ValueError, lambda: make_launcher(module, fn, dtype=FLOAT16, dtype_code=7))


CHECKS = [check_executes_with_the_pointers, check_half_plan, check_backward_pass, check_refuses_what_does_not_fit, check_channels_last_tensors,
          check_autograd_only_when_enabled,
          check_orders_streams, check_orders_again_after_a_call_during_ordering, check_execute_failure_raises,
          check_a_fail_function_that_returns, check_closed, check_errors_from_tensors_propagate,
          check_arguments, check_no_reference_leaks, check_table_makes_the_output]


def main(argv):
    if len(argv) != 2:
        print(__doc__)
        return 2
    if not os.path.isfile(argv[1]):
        print("SKIP: %s is not built" % argv[1])
        return 77
    module, why_not = _lib._load_launch_module(argv[1])  # the binding's own loader
    if module is None:
        print("FAIL: %s" % why_not)
        return 1
    global USE_TABLE
    failed = 0
    for USE_TABLE in (False, True):
        way = "torch access table" if USE_TABLE else "attributes"
        for check in CHECKS:
            try:
                check(module)
                print("ok   %s (%s)" % (check.__name__, way))
            except Exception:
                failed += 1
                print("FAIL %s (%s)" % (check.__name__, way))
                traceback.print_exc()
    print("%d passed, %d failed" % (2 * len(CHECKS) - failed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
