"""convtune: autotuned 2-D convolutions on PyTorch CUDA tensors.

A thin binding of libconvtune.so (include/convtune.h): ctypes, plus a small
compiled module for the per-call path where it is built (_launch.c)::

    import torch, convtune

    y = convtune.conv2d(x, w, b, padding=1, activation="relu")  # relu(F.conv2d(x, w, b, padding=1))

    with convtune.Context(cache="plans.db", policy="fast") as ctx:
        plan = ctx.plan(x.shape, w.shape, padding=1)   # tuned once, then from memory or the cache
        y = plan(x, w)                                  # on torch's current stream
        print(plan.info)

    y = convtune.dynamic_conv2d(x, weights)  # per-pixel filters (B, G, k*k, P, Q): involution

Whole models: convtune.convert(model) turns every nn.Conv2d into a
convtune.nn.Conv2d (see convtune/nn.py); convtune.fuse(model) makes an
inference copy with BatchNorm folded and ReLU fused into the convolutions
(convtune/_fuse.py); torch.ops.convtune.conv2d is the
operator torch.compile and torch.export trace (convtune/ops.py);
convtune.nn.Involution is the involution layer on dynamic_conv2d.

float32, contiguous NCHW (or channels-last) tensors on one CUDA device,
each data pointer 16-byte aligned.  convtune.conv2d, convtune.dynamic_conv2d
and convtune.nn's layers are differentiable; a Plan runs one pass (forward, or with direction=
"bwd_data" / "bwd_filter" a backward one) and records no gradients.  The library is
$CONVTUNE_LIB, else build/libconvtune.so or build-gpu/libconvtune.so of
this repository.
"""
import atexit
import ctypes
import logging
import os
import threading
import weakref

from . import _allocator, _lib
from ._base import ConvtuneError, _conv_tf32_reader, _device_index, _reader, _torch, _torch_deterministic
from ._plan import Plan
from ._cache import (cache_pending, cache_trials, cache_winners, default_cache_path, merge_caches,
                     system_cache_files)

__all__ = ["ConvtuneError", "ConvArgumentError", "ConvTypeError", "Context", "Plan", "conv2d", "convert", "fuse", "dynamic_conv2d", "library_version",
           "library_versions", "cache_winners", "cache_trials", "cache_pending", "merge_caches",
           "default_cache_path", "system_cache_files", "nn", "ops",
           "__version__"]

# The package's version: the C header's (CONVTUNE_VERSION_*), which
# tests/python/check_version.py holds it to, with the loaded library's.
__version__ = "0.7.0"


def __getattr__(name):
    """convtune.nn, convtune.ops, convtune.convert and convtune.fuse, imported on first use
    (they import torch; the rest of the package imports without it)."""
    if name in ("nn", "ops"):
        import importlib
        return importlib.import_module("." + name, __name__)
    if name == "convert":
        from .nn import convert
        return convert
    if name == "fuse":
        from ._fuse import fuse
        return fuse
    raise AttributeError("module %r has no attribute %r" % (__name__, name))


def library_version():
    """The loaded libconvtune's version, "MAJOR.MINOR.PATCH" (conv_version())."""
    v = _lib.load().conv_version()
    return "%d.%d.%d" % (v // 10000, v // 100 % 100, v % 100)


def library_versions():
    """The CUDA, driver, cuDNN and cuBLAS versions the library runs with (part of every cache key)."""
    raw = _lib.load().conv_library_versions()
    return raw.decode("utf-8", "replace") if raw else ""


# Argument checks and problem keys: _problem.py.
from ._problem import (ConvArgumentError, ConvTypeError, _channels_error, _conv_geometry,  # noqa: E402
                       _dynamic_key, _dynamic_shapes, _groups, _int, _problem_key)


# ---------------------------------------------------------------- contexts

_live_contexts = weakref.WeakSet()

# The library never prints: every Context passes its messages (conv_log_level)
# to this logger, at the matching logging level.
_logger = logging.getLogger("convtune")
_LOG_LEVELS = {_lib.LOG_LEVELS.index("ERROR"): logging.ERROR, _lib.LOG_LEVELS.index("WARN"): logging.WARNING,
               _lib.LOG_LEVELS.index("INFO"): logging.INFO, _lib.LOG_LEVELS.index("DEBUG"): logging.DEBUG}


def _log_message(user, level, message):
    """The contexts' conv_log_fn, called on the thread that tunes (GIL taken by ctypes)."""
    try:
        py_level = _LOG_LEVELS.get(level, logging.ERROR)
        if _logger.isEnabledFor(py_level):
            _logger.log(py_level, "%s", message.decode("utf-8", "replace"))
    except Exception:  # nothing may propagate into the C caller
        pass


# One C function pointer for every context; the module and each Context hold it.
_log_callback = _lib.LogFn(_log_message)


def _env_choice(name, choices):
    """The environment variable `name`, one of `choices` (any case), or None where unset
    or empty; another value is a ValueError that names the variable."""
    value = os.environ.get(name, "").strip().lower()
    if not value:
        return None
    if value not in choices:
        raise ValueError("$%s must be one of %s, got %r" % (name, ", ".join(choices), value))
    return value


def _env_policy():
    """$CONVTUNE_POLICY, for a Context made with policy=None (the default contexts among
    them): a deployment sets "cache_only" or "record" there, so that nothing tunes in
    production whatever the model's code says."""
    return _env_choice("CONVTUNE_POLICY", tuple(_lib.POLICIES)) or "predict"


def _env_log_level():
    """$CONVTUNE_LOG ("error", "warn", "info" or "debug"): the most detailed level the
    library passes on, shown on stderr where the "convtune" logger has no handler of the
    application's.  None where unset: INFO reaches the logger, which shows WARNING and up."""
    level = _env_choice("CONVTUNE_LOG", ("error", "warn", "info", "debug"))
    if level is None:
        return None
    py_level = {"error": logging.ERROR, "warn": logging.WARNING, "info": logging.INFO,
                "debug": logging.DEBUG}[level]
    if not _logger.handlers:
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("convtune: %(levelname)s: %(message)s"))
        _logger.addHandler(handler)
    _logger.setLevel(py_level)
    return _lib.LOG_LEVELS.index(level.upper())


class Context:
    """A libconvtune context on one CUDA device: cuDNN/cuBLASLt handles, the plan cache, plans.

    device: a CUDA ordinal, torch.device or "cuda:N"; None is torch's current device.
    cache: SQLite cache file; None follows the library's rules ($CONVTUNE_CACHE,
    $XDG_CACHE_HOME/convtune/cache.db, ~/.cache/convtune/cache.db); ":memory:" keeps nothing.
    policy: None (the default) reads $CONVTUNE_POLICY, else "predict"; "predict" (a miss times only the configs its 3 nearest shapes tuned
    in this cache or system_cache suggest, all where they disagree or fewer than 3 are tuned,
    and is marked incomplete for `convtune tune --pending`; include/convtune.h,
    CONV_POLICY_PREDICT), "exhaustive" (time every config), "fast" (a few best guesses),
    "cache_only" (never tune: a miss raises ConvtuneError CACHE_MISS) or "record" (never
    tune: a miss runs an untimed, validated plan, cuDNN's heuristic choice first, with
    plan.info["source"] "heuristic" and time_ms -1, and is recorded as pending in the cache
    for `convtune tune --pending` to tune later).
    workspace_limit: bytes of scratch a candidate may use; 0 is a quarter of the free memory.
    verbose: also log each candidate config as it is timed (DEBUG).  The library's messages go
    to the logging module's "convtune" logger: warnings, and at INFO a line as each tuning
    starts and ends (logging.basicConfig(level=logging.INFO) shows them); nothing is printed.
    $CONVTUNE_LOG ("error", "warn", "info" or "debug") sets the level the library passes on
    and shows the messages on stderr where the application gave the logger no handler.
    deterministic: every plan of this context deterministic (see Context.plan).
    system_cache: a read-only cache (e.g. one shipped per GPU model), or a directory of them,
    looked up after `cache` before a shape is tuned, never written (plan.info["source"]
    "system"); None takes the library's search path ($CONVTUNE_SYSTEM_CACHE, the caches
    installed with convtune, such as this package's convtune/caches, then
    $XDG_DATA_DIRS/convtune/caches; README, "The cache"), "" is none.
    tuning_budget_ms: per problem, a tuning that has run this long keeps the fastest config so
    far (each family's best guesses are timed first) and is marked incomplete in the cache, for
    `convtune tune --pending` or a later context without a budget to finish; 0 is none.
    allocator: where plan workspaces and tuning buffers come from.  None (the default):
    PyTorch's caching allocator where the operator's C++ library is built (they then show in
    torch.cuda.memory_allocated, and torch reuses the memory), else the library's cudaMalloc,
    noted once on the "convtune" logger (INFO); "torch": PyTorch's or RuntimeError; "cuda":
    cudaMalloc.  The attribute `allocator` says which ("torch" or "cuda"), `allocator_note`
    why not torch.  Tuning holds the problem's tensors and one candidate's workspace (at
    most workspace_limit) at a time; a plan holds one workspace (include/convtune.h).
    """

    def __init__(self, device=None, cache=None, policy=None, workspace_limit=0, verbose=False,
                 deterministic=False, system_cache=None, tuning_budget_ms=0, allocator=None):
        self._handle = None  # first, so that close() and __del__ work if __init__ fails
        self._plans = {}
        self._lock = threading.RLock()
        if policy is None:
            policy = _env_policy()
        if policy not in _lib.POLICIES:
            raise ValueError("policy must be one of %s, got %r" % (", ".join(map(repr, _lib.POLICIES)), policy))
        workspace_limit = _int("workspace_limit", workspace_limit)
        if workspace_limit < 0:
            raise ValueError("workspace_limit must not be negative, got %d" % workspace_limit)
        memory, self.allocator_note = _allocator.choose(allocator)
        self.allocator = "cuda" if memory is None else "torch"
        lib = _lib.load()
        self.device = _device_index(device)
        self.cache = None if cache is None else os.fsdecode(os.fspath(cache))
        self.system_cache = None if system_cache is None else os.fsdecode(os.fspath(system_cache))
        self.policy = policy
        self.workspace_limit = workspace_limit
        self.verbose = bool(verbose)
        self.deterministic = bool(deterministic)

        options = _lib.ContextOptions()
        lib.conv_context_options_init_sized(ctypes.byref(options), ctypes.sizeof(options))
        options.device = self.device
        # The library copies the path during create; the bytes only need to live until then.
        options.cache_path = None if cache is None else os.fsencode(self.cache)
        options.system_cache_path = None if system_cache is None else os.fsencode(self.system_cache)
        options.policy = _lib.POLICIES[policy]
        options.workspace_limit = workspace_limit
        options.verbose = int(self.verbose)
        options.deterministic = int(self.deterministic)
        options.tuning_budget_ms = float(tuning_budget_ms)
        if memory is not None:  # C functions: called without the GIL (_allocator.py)
            options.device_alloc, options.device_free = memory
        self._log_callback = _log_callback  # lives while the context can call it
        options.log = _log_callback  # at the default level, INFO (DEBUG with verbose)
        env_level = _env_log_level()
        if env_level is not None and not self.verbose:
            options.log_level = env_level
        handle = _lib.ContextPtr()
        # The library leaves torch's current device as it was, in every call.
        status = lib.conv_context_create(ctypes.byref(handle), ctypes.byref(options))
        if status != _lib.OK:
            # Thread-local message of the failed create, read in the same thread.
            message = "cannot create a context on CUDA device %d: %s" % (self.device, _lib.last_error(lib, None))
            if status == _lib.STATUS_NAMES.index("NO_DEVICE"):
                message += " (convtune needs an NVIDIA GPU and its driver: does nvidia-smi list device %d?)" % self.device
            raise ConvtuneError(status, message)
        # Bound here so that close() needs no module globals at interpreter exit.
        self._lib = lib
        self._destroy = lib.conv_context_destroy
        self._handle = handle
        _live_contexts.add(self)

    @property
    def closed(self):
        return self._handle is None

    def _check_open(self):
        if self._handle is None:
            raise ValueError("this convtune Context is closed")

    def plan(self, x_shape, w_shape, stride=1, padding=0, dilation=1, groups=1, bias=False,
             activation=None, math="strict", layout="nchw", direction="fwd", deterministic=None,
             dtype="float32"):
        """The Plan for a convolution of x_shape (N, C, H, W) with w_shape (K, C/groups, R, S).

        stride, padding, dilation: ints or (h, w) pairs, as in torch.nn.functional.conv2d.
        bias=True adds a bias of shape (K,); activation="relu" (needs bias) applies ReLU after it.
        math: "strict" (IEEE fp32) or "tf32" (TF32 tensor cores allowed); ignored for
        the half types.
        dtype: the element type of x, w and the output: torch.float32 (or "float32"),
        torch.float16 or torch.bfloat16; sums are fp32 and the output is rounded once;
        the bias is float32 whatever the dtype.
        layout: "nchw" (x, w and the output contiguous) or "nhwc" (x, w and the output
        in torch.channels_last memory format; shapes stay (N, C, H, W) as in PyTorch), or
        "nchw_krsc" (x and the output contiguous, w channels-last: forward only; the
        families that read such filters run it, docs/tuning.md).
        A depthwise or 1x1 filter is both at once.
        direction: "fwd" (call the plan), or a backward pass of the same convolution,
        "bwd_data" (plan.backward_data(dy, w) gives dx) or "bwd_filter"
        (plan.backward_filter(x, dy) gives dw); backward passes take no bias or activation.
        deterministic: True admits only candidates whose results are bit-identical run
        to run (no float atomics); None follows torch.are_deterministic_algorithms_enabled()
        or torch.backends.cudnn.deterministic (False where torch is not imported); a deterministic context makes every plan so.
        The first call for a problem looks it up in the cache or tunes it (milliseconds
        to seconds); later calls return the same Plan object.
        """
        if deterministic is None:
            deterministic = _torch_deterministic()
        return self._plan_for_key(_problem_key(x_shape, w_shape, stride, padding, dilation, groups,
                                               bias, activation, math, layout, direction,
                                               deterministic or self.deterministic, dtype))

    def dynamic_plan(self, x_shape, kernel_size, stride=1, dilation=1, groups=1, math="strict",
                     direction="fwd", deterministic=None):
        """The Plan for a per-pixel dynamic convolution (involution) of x_shape (B, C, H, W)
        with a kernel_size x kernel_size window (odd), each output pixel of each image
        having its own filter per group of C/groups channels:

            y[b, c, p, q] = sum over i, j of weights[b, c // (C/groups), i*k + j, p, q]
                            * x[b, c, p*stride + (i - k//2)*dilation, q*stride + (j - k//2)*dilation]

        zero outside the image ('same' padding, so P = ceil(H / stride)).  The plan takes
        weights (B, groups, k*k, P, Q) where a convolution's takes w: plan(x, weights) -> y
        (B, C, P, Q); direction "bwd_data": plan.backward_data(dy, weights) -> dx;
        "bwd_filter": plan.backward_filter(x, dy) -> the weights' gradient.  math and
        deterministic as in Context.plan; NCHW float32 only, no bias.
        """
        if deterministic is None:
            deterministic = _torch_deterministic()
        return self._plan_for_key(_dynamic_key(x_shape, kernel_size, stride, dilation, groups, math,
                                               direction, deterministic or self.deterministic))

    def _plan_for_key(self, key):
        """The Plan for a _problem_key tuple: from this context's dict, else made."""
        plan = self._plans.get(key)  # lock-free fast path: dict reads are atomic
        if plan is not None and plan._handle is not None:
            return plan
        with self._lock:
            self._check_open()
            plan = self._plans.get(key)
            if plan is None or plan._handle is None:
                plan = Plan._create(self, key)
                self._plans[key] = plan
            return plan

    def _run_interruptible(self, call):
        """Runs call() (a long C call) so that Ctrl-C in the main thread stops tuning cleanly.

        A blocking ctypes call cannot be interrupted, so in the main thread it
        runs in a worker; on KeyboardInterrupt the library is asked to stop after
        the candidate it is timing (what it measured stays in the cache).
        Returns (result, interrupted).
        """
        if threading.current_thread() is not threading.main_thread():
            return call(), False
        box = []
        done = threading.Event()

        def work():
            try:
                box.append((True, call()))
            except BaseException as e:  # ctypes calls do not raise, but never lose one
                box.append((False, e))
            finally:
                done.set()

        threading.Thread(target=work, name="convtune-plan", daemon=True).start()
        interrupted = False
        # An Event, not Thread.join: a join cut by KeyboardInterrupt can leave
        # is_alive() False while the thread still runs.
        while not done.is_set():
            try:
                done.wait()
            except KeyboardInterrupt:
                interrupted = True
                self.interrupt()  # then keep waiting: the worker still uses the context
        ok, value = box[0]
        if not ok:
            raise value
        return value, interrupted

    def interrupt(self):
        """Asks a tuning in progress on this context (any thread) to stop after its current candidate."""
        handle = self._handle
        if handle is not None:
            self._lib.conv_context_interrupt(handle)

    def close(self):
        """Destroys the context's plans, then the context.  Idempotent."""
        with self._lock:
            handle, self._handle = self._handle, None
            if handle is None:
                return
            plans = list(self._plans.values())
            self._plans.clear()
            for plan in plans:  # plans must go before their context
                plan._release()
            status = self._destroy(handle)
            if status != _lib.OK:  # CONV_BUSY: a plan outlived its release (a bug here)
                raise ConvtuneError(status, _lib.last_error(self._lib, handle))

    def __enter__(self):
        self._check_open()
        return self

    # A context is a shared resource: copies of a model (copy.deepcopy of a
    # converted module) share it rather than fail on its handle and lock.
    def __copy__(self):
        return self

    def __deepcopy__(self, memo):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    def __repr__(self):
        return "<convtune.Context device=%s cache=%r policy=%r%s>" % (
            getattr(self, "device", "?"), getattr(self, "cache", None), getattr(self, "policy", "?"),
            " closed" if self._handle is None else "")


_default_contexts = {}
_default_lock = threading.Lock()


def _default_context(device):
    """The module's Context for a device (library defaults), made on first use."""
    ctx = _default_contexts.get(device)
    if ctx is not None and not ctx.closed:
        return ctx
    with _default_lock:
        ctx = _default_contexts.get(device)
        if ctx is None or ctx.closed:
            ctx = Context(device)
            _default_contexts[device] = ctx
        return ctx


def conv2d(x, w, bias=None, stride=1, padding=0, dilation=1, groups=1, activation=None,
           math="strict", *, out=None, context=None):
    """torch.nn.functional.conv2d through convtune, optionally followed by ReLU (activation="relu", needs bias).

    Takes what F.conv2d takes: x (N, C, H, W), or unbatched (C, H, W) (the
    output is then (K, P, Q)), and w (K, C/groups, R, S), CUDA tensors of one
    type, float32, float16 or bfloat16 (sums in fp32, the output of x's type);
    bias is of that type or float32; stride, padding and dilation an int or 1
    or 2 ints; padding also "valid" (none) or "same" (stride 1 only: the output
    has x's size; where the total padding d * (R - 1) is odd, the extra row or
    column goes below or right, padded by F.pad, as PyTorch does).  What
    F.conv2d refuses is refused with PyTorch's message, as a ConvArgumentError
    (both a ValueError and PyTorch's RuntimeError), a ConvTypeError (TypeError
    and RuntimeError) for mismatched dtypes, or a ConvtuneError (a RuntimeError)
    for a non-positive stride or dilation, a negative padding or a dilated
    filter larger than the padded input.  A batch of 0 returns an empty output
    (x's dtype and memory format) without planning anything.

    math="tf32" allows TF32 tensor cores (float32 only).  x contiguous runs an
    NCHW plan, x channels-last an NHWC one (the output is channels-last, as
    PyTorch's); w is read as it is where its memory format serves the plan
    (channels-last w with contiguous x: K R S C filters), else copied for the
    call, as PyTorch's cuDNN path copies it.  Plans come from `context`, by
    default one Context per device with the library's default cache and
    exhaustive tuning (the first call of each shape tunes it).  out: optional
    preallocated output (of the output's shape: 3-D for an unbatched x).

    Differentiable: where x, w or bias requires grad (and grad mode is on), the
    backward pass runs tuned backward-data and backward-filter plans from the
    same context (made, and tuned, on the first backward), the bias gradient is
    dy summed, and the fused ReLU's gradient is masked by the output.

    Batches of patches: a contiguous 5-D x (B, P, C, H, W) is convolved as the
    B * P images it holds (no copy: the layout is the same) and the output is
    (B, P, K, P', Q'); out, if given, has that shape too.
    """
    torch = _torch()
    for name, t in (("x", x), ("w", w)):
        if not isinstance(t, torch.Tensor):
            raise TypeError("conv2d: %s must be a torch.Tensor, got %s" % (name, type(t).__name__))
    if bias is not None and not isinstance(bias, torch.Tensor):
        raise TypeError("conv2d: bias must be a torch.Tensor or None, got %s" % type(bias).__name__)
    patches = None
    given_out = out  # returned as it was passed, whatever view of it the plan writes
    unbatched = x.dim() == 3
    if unbatched:  # (C, H, W): one image, as F.conv2d takes it
        x = x.unsqueeze(0)
        if out is not None:
            if not isinstance(out, torch.Tensor) or out.dim() != 3:
                raise ConvArgumentError("conv2d: with an unbatched input (C, H, W), out must be a "
                                        "(K, P, Q) tensor")
            out = out.unsqueeze(0)
    elif x.dim() == 5:  # (B, P, C, H, W): the patches fold into the batch
        if not x.is_contiguous():
            raise ValueError("conv2d: a 5-D input (B, P, C, H, W) must be contiguous to fold into "
                             "B * P images; call .contiguous() first")
        patches = tuple(x.shape[:2])
        x = x.view(patches[0] * patches[1], *x.shape[2:])  # not -1: B * P may be 0
        if out is not None:
            if (not isinstance(out, torch.Tensor) or out.dim() != 5 or not out.is_contiguous()
                    or tuple(out.shape[:2]) != patches):
                raise ValueError("conv2d: with a 5-D input (B, P, C, H, W), out must be a contiguous "
                                 "(B, P, K, P', Q') tensor with the same B and P")
            out = out.view(patches[0] * patches[1], *out.shape[2:])
    if x.dim() != 4:
        raise ConvArgumentError("Expected 3D (unbatched) or 4D (batched) input to conv2d, but got "
                                "input of size: %s (convtune also takes 5D (B, P, C, H, W) patches)"
                                % list(x.shape))
    if w.dim() != 4:
        raise ConvArgumentError("Expected 4D weight (K, C/groups, R, S) for conv2d, but got weight of "
                                "size: %s" % list(w.shape))
    stride, padding, dilation, extra, out_hw = _conv_geometry(
        tuple(x.shape[2:]), tuple(w.shape[2:]), stride, padding, dilation)
    groups = _groups(groups)
    if w.shape[1] * groups != x.shape[1]:
        raise _channels_error(groups, tuple(w.shape), tuple(x.shape))
    if w.shape[0] % groups != 0:
        raise ConvArgumentError("Given groups=%d, expected weight to be divisible by %d at dimension 0, "
                                "but got weight of size %s instead" % (groups, groups, list(w.shape)))
    if bias is not None and (bias.dim() != 1 or bias.shape[0] != w.shape[0]):
        raise ConvArgumentError("Given weight of size %s, expected bias to be 1-dimensional with %d "
                                "elements, but got bias of size %s instead"
                                % (list(w.shape), w.shape[0], list(bias.shape)))
    if w.dtype != x.dtype:
        raise ConvTypeError("conv2d: Input type (%s) and weight type (%s) should be the same"
                            % (x.dtype, w.dtype))
    if x.device.type != "cuda":
        raise ValueError("conv2d: x is on %s; convtune runs on CUDA tensors" % x.device)
    if context is None:
        context = _default_context(x.device.index)
    elif context.device != x.device.index:
        raise ValueError("conv2d: x is on %s but the context is on cuda:%d" % (x.device, context.device))
    if x.shape[0] == 0:  # nothing to compute: no plan (the library takes no empty batch)
        y = _empty_conv2d(torch, x, w, bias, out_hw, out, activation)
    else:
        if extra[0] or extra[1]:  # "same" with an odd total: the extra pixel below / right
            x = torch.nn.functional.pad(x, (0, extra[1], 0, extra[0]))
        y = _conv2d_planned(torch, context, x, w, bias, stride, padding, dilation, groups, activation,
                            math, out)
    if given_out is not None:
        return given_out
    if unbatched:
        return y.squeeze(0)
    return y if patches is None else y.view(*patches, *y.shape[1:])


def _conv2d_planned(torch, context, x, w, bias, stride, padding, dilation, groups, activation, math, out):
    """conv2d's call of a plan, on a 4-D x with a batch, its arguments checked."""
    layout, x, w = _plan_layout(torch, x, w)
    plan = context.plan(tuple(x.shape), tuple(w.shape), stride, padding, dilation, groups,
                        bias is not None, activation, math, layout, dtype=x.dtype)
    if bias is not None and bias.dtype != torch.float32 and bias.dtype == x.dtype:
        bias = bias.float()  # the library adds a float32 bias (differentiable: a cast)
    from . import _autograd  # imports torch: not at package import
    if _autograd.records_gradients(x, w, bias):
        if out is not None:  # as PyTorch: out= functions are not differentiable
            raise RuntimeError("conv2d(): functions with out=... arguments don't support automatic "
                               "differentiation, but one of the arguments requires grad.")
        return _autograd.conv2d(plan, x, w, bias)
    return plan(x, w, bias, out=out)


def _empty_conv2d(torch, x, w, bias, out_hw, out, activation):
    """conv2d of a batch of 0 (N, C, H, W) -> (0, K, P, Q): x's dtype, and its
    memory format (channels-last where x's channels are innermost: an empty
    tensor counts as contiguous in both formats, so its strides say which);
    differentiable, with zero gradients for w and bias, as PyTorch's."""
    if activation not in (None, "relu"):
        raise ValueError("activation must be None or 'relu', got %r" % (activation,))
    if activation == "relu" and bias is None:
        raise ValueError("activation='relu' needs bias: convtune fuses ReLU only after a bias add "
                         "(epilogue BIAS_RELU). Pass a bias (zeros give a plain ReLU) or apply "
                         "torch.relu to the output")
    for name, t in (("w", w), ("bias", bias)):
        if t is not None and t.device != x.device:
            raise ValueError("conv2d: %s is on %s but x is on %s" % (name, t.device, x.device))
    shape = (0, w.shape[0]) + tuple(out_hw)
    channels_last = x.stride(1) == 1 and x.shape[1] > 1 and x.shape[2] * x.shape[3] > 1
    memory_format = torch.channels_last if channels_last else torch.contiguous_format
    if out is not None:
        if not isinstance(out, torch.Tensor) or tuple(out.shape) != shape:
            raise ValueError("conv2d: out has shape %s; this convolution's output is %s"
                             % (list(getattr(out, "shape", ())), list(shape)))
        if out.dtype != x.dtype:
            raise TypeError("conv2d: out has dtype %s; the output is %s" % (out.dtype, x.dtype))
        return out
    from . import _autograd  # imports torch: not at package import
    if _autograd.records_gradients(x, w, bias):
        return _autograd.empty_conv2d(x, w, bias, shape, memory_format)
    return torch.empty(shape, dtype=x.dtype, device=x.device, memory_format=memory_format)


def _plan_layout(torch, x, w):
    """(plan layout, x, w) for conv2d: "nhwc" for a channels-last x (w made
    channels-last if it is not), "nchw_krsc" for a contiguous x and a
    channels-last w of R x S > 1 taps, else "nchw" (x and w as they are:
    the plan refuses other strides and says how to fix them)."""
    cl = torch.channels_last
    if not x.is_contiguous() and x.is_contiguous(memory_format=cl):
        if not w.is_contiguous(memory_format=cl):
            w = w.contiguous(memory_format=cl)
        return "nhwc", x, w
    if (x.is_contiguous() and not w.is_contiguous() and w.is_contiguous(memory_format=cl)
            and w.shape[1] > 1 and w.shape[2] * w.shape[3] > 1):
        return "nchw_krsc", x, w
    return "nchw", x, w


def _check_dynamic_tensors(torch, x, weights, stride, dilation, groups, weights_layout="bgkhw"):
    """dynamic_conv2d's checks, all before any plan or device work: types, shapes
    (ValueError naming the expected one), dtype (TypeError), device and memory
    layout (ValueError saying how to fix them).  Returns (k, groups)."""
    for name, t in (("x", x), ("weights", weights)):
        if not isinstance(t, torch.Tensor):
            raise TypeError("dynamic_conv2d: %s must be a torch.Tensor, got %s" % (name, type(t).__name__))
    if x.dim() != 4:
        raise ValueError("dynamic_conv2d: x must be 4-D (B, C, H, W), got shape %s" % list(x.shape))
    k, groups = _dynamic_shapes(tuple(x.shape), tuple(weights.shape), stride, dilation, groups,
                                weights_layout)
    for name, t in (("x", x), ("weights", weights)):
        if t.dtype != torch.float32:
            raise TypeError("dynamic_conv2d: %s has dtype %s; convtune computes in float32 only: pass "
                            "%s.float()" % (name, t.dtype, name))
    if x.device.type != "cuda":
        raise ValueError("dynamic_conv2d: x is on %s; convtune runs on CUDA tensors" % x.device)
    if weights.device != x.device:
        raise ValueError("dynamic_conv2d: weights are on %s but x is on %s" % (weights.device, x.device))
    # As conv2d's plans refuse them: a copy is the caller's choice.  Weights
    # "kbghw" are copied into the library's order anyway (any strides do).
    checked = (("x", x), ("weights", weights)) if weights_layout == "bgkhw" else (("x", x),)
    for name, t in checked:
        if not t.is_contiguous():
            raise ValueError("dynamic_conv2d: %s is not contiguous (convtune reads dense NCHW): pass "
                             "%s.contiguous()" % (name, name))
    return k, groups


def _math_default(torch, math):
    """math=None: TF32 where PyTorch lets cuDNN's convolutions use it, as convtune.nn.Conv2d."""
    if math is None:
        return "tf32" if _reader(torch, _conv_tf32_reader)() else "strict"
    if math not in _lib.MATH:
        raise ValueError("math must be None, 'strict' or 'tf32', got %r" % (math,))
    return math


def dynamic_conv2d(x, weights, stride=1, dilation=1, groups=None, math=None, *, weights_layout="bgkhw",
                   out=None, context=None):
    """The per-pixel dynamic convolution (involution's, Li et al. CVPR 2021) through convtune.

    x (B, C, H, W) and weights (B, G, k*k, P, Q), float32 contiguous CUDA tensors: every
    output pixel of every image has its own k x k filter (k odd) per group of C/G
    channels, applied with zero 'same' padding (k-1)/2 * dilation, so P = ceil(H / stride)
    and Q = ceil(W / stride):

        y[b, c, p, q] = sum over i, j < k of weights[b, c // (C/G), i*k + j, p, q]
                        * x[b, c, p*stride + (i - k//2)*dilation, q*stride + (j - k//2)*dilation]

    which is F.unfold(x, k, dilation, (k-1)//2*dilation, stride) viewed as
    (B, G, C/G, k*k, P, Q), times weights.unsqueeze(2), summed over k*k.  The seed's
    form, one filter shared by all channels, is G = 1.  groups: None takes G from the
    weights; a number must equal it.  stride: 1 or 2 in this version.  math: "strict",
    "tf32", or None to follow PyTorch's cuDNN TF32 setting (as convtune.nn.Conv2d).
    Plans come from `context` as in conv2d (default: one Context per device).
    Returns y (B, C, P, Q); out: optional preallocated y.

    weights_layout: the order of the weights' dimensions, named, never guessed from
    the shape: "bgkhw" (the default), (B, G, k*k, P, Q), involution's and the
    library's; or "kbghw", (k*k, B, G, P, Q), tap first: the seed's (k*k, B, 1, H, W)
    weights are this with G = 1.  Weights "kbghw" may have any strides: the binding
    copies them into the library's order for the call (a copy of the weights' size,
    none where B = G = 1, the two orders then holding the same bytes), and their gradient
    comes back in their own layout, (k*k, B, G, P, Q).

    Differentiable in x and weights: the backward runs tuned backward-data and
    backward-filter plans of the same problem, from the same context.
    """
    torch = _torch()
    k, groups = _check_dynamic_tensors(torch, x, weights, stride, dilation, groups, weights_layout)
    math = _math_default(torch, math)
    if context is None:
        context = _default_context(x.device.index)
    elif context.device != x.device.index:
        raise ValueError("dynamic_conv2d: x is on %s but the context is on cuda:%d" % (x.device, context.device))
    from . import _autograd  # imports torch: not at package import
    if _autograd.records_gradients(x, weights) and out is not None:  # as PyTorch: out= is not differentiable
        raise RuntimeError("dynamic_conv2d(): functions with out=... arguments don't support automatic "
                           "differentiation, but one of the arguments requires grad.")
    plan = context.dynamic_plan(tuple(x.shape), k, stride, dilation, groups, math)
    if weights_layout == "kbghw":
        # (k*k, B, G, P, Q) -> (B, G, k*k, P, Q): a view, then dense (a copy
        # unless B = G = 1); both recorded by autograd, so the gradient returns
        # in the caller's layout.
        weights = weights.permute(1, 2, 0, 3, 4).contiguous()
    if _autograd.records_gradients(x, weights):
        return _autograd.dynamic_conv2d(plan, x, weights)
    return plan(x, weights, out=out)


@atexit.register
def _close_all():
    # Destroy every context while CUDA is still up: C atexit handlers (the
    # CUDA runtime's teardown) run after Python's.
    for ctx in list(_live_contexts):
        try:
            ctx.close()
        except Exception:
            pass
