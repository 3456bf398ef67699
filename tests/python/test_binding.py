"""Tests of the Python binding (python/convtune) against torch.nn.functional.conv2d.

Needs torch (else the file is skipped) and a CUDA GPU (else the GPU tests are
skipped).  Run from the repository root with PYTHONPATH=python and
CONVTUNE_LIB=<build>/libconvtune.so; CTest sets both.  Inputs are fresh random
numbers each run; the seed is in every failure message (CONVTUNE_TEST_SEED
replays it).  Plans are tuned with policy "fast" into temporary caches.
"""
import contextlib
import ctypes
import logging
import os
import pathlib
import re

import pytest

torch = pytest.importorskip("torch")
F = torch.nn.functional

import convtune  # noqa: E402
from convtune import _lib  # noqa: E402

REPO = pathlib.Path(__file__).resolve().parents[2]
HEADER = REPO / "include" / "convtune.h"
NAN = float("nan")
STRICT_BOUND = 1e-5  # relative L2 error against a float64 reference
TF32_BOUND = 5e-3

gpu = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA GPU visible to torch")

SEED = int(os.environ["CONVTUNE_TEST_SEED"])  # drawn by conftest.py unless given


# ---------------------------------------------------------------- fixtures and helpers


def rel_l2(y, ref):
    return ((y.double() - ref).norm() / ref.norm()).item()


def reference(x, w, b=None, activation=None, **conv):
    """The convolution in float64 on the GPU."""
    y = F.conv2d(x.double(), w.double(), None if b is None else b.double(), **conv)
    return y.relu() if activation == "relu" else y


def sleep_stream(ms=30):
    """Keeps the current stream busy for a while, so that a launch on the wrong stream runs early."""
    if hasattr(torch.cuda, "_sleep"):
        torch.cuda._sleep(int(ms * 2e6))  # cycles at about 2 GHz
    else:
        a = torch.randn(2048, 2048, device="cuda")
        for _ in range(20):
            a = a @ a / 2048


# ---------------------------------------------------------------- library only (no GPU needed)


def test_status_names_follow_the_header():
    text = HEADER.read_text()
    block = text[text.index("#define CONV_STATUS_MAP"):text.index("typedef enum conv_status")]
    entries = re.findall(r'X\((\w+),\s*"([^"]*)"\)', block)
    assert [name for name, _ in entries] == list(_lib.STATUS_NAMES)
    lib = _lib.load()
    for code, (name, message) in enumerate(entries):
        assert lib.conv_status_string(code).decode() == message, name
    assert lib.conv_status_string(len(entries)) == b"unknown status"


def test_struct_layouts():
    # LP64 sizes of the header's structs (checked against a C program's sizeof/offsetof).
    # struct_size, 14 int64_t, 6 ints, `op`, padded to 8 bytes.
    assert ctypes.sizeof(_lib.Problem) == 8 + 14 * 8 + 8 * 4
    assert _lib.Problem.op.offset == 8 + 14 * 8 + 6 * 4
    assert _lib.Problem.n.offset == 8
    assert _lib.Problem.math.offset == 8 + 14 * 8 + 3 * 4
    assert _lib.Problem.deterministic.offset == 8 + 14 * 8 + 5 * 4
    assert ctypes.sizeof(_lib.ContextOptions) == 128
    assert _lib.ContextOptions.retime_stale.offset == 120
    assert _lib.ContextOptions.device_alloc.offset == 96
    assert _lib.ContextOptions.device_free.offset == 104
    assert _lib.ContextOptions.allocator_user.offset == 112
    assert _lib.ContextOptions.system_cache_path.offset == 80
    assert _lib.ContextOptions.tuning_budget_ms.offset == 88
    assert _lib.ContextOptions.device.offset == 8
    assert _lib.ContextOptions.workspace_limit.offset == 32
    assert _lib.ContextOptions.direct_launches.offset == 44
    assert _lib.ContextOptions.deterministic.offset == 48
    assert _lib.ContextOptions.log.offset == 56 and _lib.ContextOptions.log_user.offset == 64
    assert _lib.ContextOptions.log_level.offset == 72
    assert ctypes.sizeof(_lib.PlanInfo) == 352 and _lib.PlanInfo.deterministic.offset == 340
    assert _lib.PlanInfo.dtype.offset == 344
    assert _lib.PlanInfo.time_ms.offset == 160 and _lib.PlanInfo.source.offset == 176
    assert _lib.PlanInfo.replay.offset == 180 and _lib.PlanInfo.replay_note.offset == 184
    assert _lib.PlanInfo.graph_launches.offset == 312 and _lib.PlanInfo.direct_runs.offset == 328


def test_library_versions():
    versions = convtune.library_versions()
    assert "cudnn=" in versions and "cuda=" in versions, versions


def test_error_carries_status_and_message():
    e = convtune.ConvtuneError(5, "groups = 3 must divide k = 8")
    assert (e.status, e.status_name, e.message) == (5, "BAD_GROUPS", "groups = 3 must divide k = 8")
    assert "BAD_GROUPS" in str(e) and "k = 8" in str(e) and isinstance(e, RuntimeError)


def test_plan_argument_errors_before_any_device():
    # Checked in Python, before the library or a device is touched.
    key = convtune._problem_key
    args = dict(stride=1, padding=0, dilation=1, groups=1, bias=False, activation=None, math="strict")
    with pytest.raises(ValueError, match="expected input.*to have 3 channels, but got 4"):
        key((1, 4, 8, 8), (5, 3, 3, 3), **args)
    with pytest.raises(ValueError, match="needs bias.*ReLU only after a bias"):
        key((1, 4, 8, 8), (4, 4, 3, 3), **dict(args, activation="relu"))
    with pytest.raises(ValueError, match="math"):
        key((1, 4, 8, 8), (4, 4, 3, 3), **dict(args, math="fp16"))
    with pytest.raises(TypeError, match="stride"):
        key((1, 4, 8, 8), (4, 4, 3, 3), **dict(args, stride=1.5))
    assert key((1, 4, 8, 8), (4, 4, 3, 3), **dict(args, padding=(1, 1))) == \
        key((1, 4, 8, 8), (4, 4, 3, 3), **dict(args, padding=1))
    with pytest.raises(ValueError, match="layout"):
        key((1, 4, 8, 8), (4, 1, 3, 3), **dict(args, groups=4), layout="NHWC")


# ---------------------------------------------------------------- correctness

CASES = [  # x shape, w shape, conv2d keyword arguments
    ((2, 3, 9, 11), (4, 3, 3, 3), dict(stride=2, padding=1)),
    ((1, 4, 10, 10), (6, 4, 3, 3), dict(padding=2, dilation=2)),
    ((2, 4, 8, 8), (6, 2, 3, 3), dict(padding=1, groups=2)),
    ((2, 4, 7, 9), (4, 1, 3, 3), dict(padding=1, groups=4)),  # depthwise
    ((2, 3, 8, 10), (5, 3, 3, 2), dict(stride=(1, 2), padding=(1, 0), bias=True, activation="relu")),
    ((1, 8, 6, 6), (8, 8, 1, 1), dict(bias=True)),
]


def make_inputs(x_shape, w_shape, with_bias, device):
    x = torch.randn(x_shape, device=device)
    w = torch.randn(w_shape, device=device)
    b = torch.randn(w_shape[0], device=device) if with_bias else None
    return x, w, b


@gpu
@pytest.mark.parametrize("math", ["strict", "tf32"])
@pytest.mark.parametrize("x_shape,w_shape,kw", CASES)
def test_conv2d_matches_torch(ctx, cuda, x_shape, w_shape, kw, math):
    kw = dict(kw)
    with_bias, activation = kw.pop("bias", False), kw.pop("activation", None)
    x, w, b = make_inputs(x_shape, w_shape, with_bias, cuda)
    y = convtune.conv2d(x, w, b, activation=activation, math=math, context=ctx, **kw)
    ref = reference(x, w, b, activation, **kw)
    assert y.shape == ref.shape and y.dtype == torch.float32 and y.device == cuda
    plan = ctx.plan(x_shape, w_shape, bias=with_bias, activation=activation, math=math, **kw)
    assert plan.output_shape == tuple(ref.shape)
    err = rel_l2(y, ref)
    bound = TF32_BOUND if math == "tf32" else STRICT_BOUND
    assert err < bound, "rel L2 %.3g >= %g with %s (seed %d)" % (err, bound, plan.info, SEED)


@gpu
@pytest.mark.parametrize("math", ["strict", "tf32"])
def test_patches_fold_into_the_batch(ctx, cuda, math):
    # B x P patches of 4x4, one filter bank: the patch candidate's shape.
    x, w, b = make_inputs((3, 22, 8, 4, 4), (32, 8, 3, 3), True, cuda)
    y = convtune.conv2d(x, w, b, padding=1, activation="relu", math=math, context=ctx)
    ref = reference(x.view(66, 8, 4, 4), w, b, "relu", padding=1).view(3, 22, 32, 4, 4)
    assert y.shape == (3, 22, 32, 4, 4)
    bound = TF32_BOUND if math == "tf32" else STRICT_BOUND
    assert rel_l2(y, ref) < bound, "seed %d" % SEED
    out = torch.full((3, 22, 32, 4, 4), NAN, device=cuda)
    assert convtune.conv2d(x, w, b, padding=1, activation="relu", math=math, context=ctx,
                           out=out) is not None
    assert rel_l2(out, ref) < bound, "seed %d" % SEED
    with pytest.raises(ValueError, match="5-D input.*contiguous"):
        convtune.conv2d(x.transpose(3, 4), w, b, padding=1, context=ctx)
    with pytest.raises(ValueError, match="out must be a contiguous"):
        convtune.conv2d(x, w, b, padding=1, context=ctx, out=out.view(66, 32, 4, 4))
    with pytest.raises(ValueError, match="same B and P"):
        convtune.conv2d(x, w, b, padding=1, context=ctx, out=out.view(6, 11, 32, 4, 4))


def test_set_patches_in_the_c_api():
    lib = _lib.load()
    p = _lib.Problem()
    lib.conv_problem_init_sized(ctypes.byref(p), ctypes.sizeof(p))
    assert lib.conv_problem_set_patches(ctypes.byref(p), 8, 2560) == _lib.OK and p.n == 20480
    assert lib.conv_problem_set_patches(ctypes.byref(p), 0, 3) != _lib.OK and p.n == 20480


@gpu
def test_out_is_written_in_full(ctx, cuda):
    x, w, b = make_inputs((2, 3, 8, 10), (5, 3, 3, 3), True, cuda)
    plan = ctx.plan(x.shape, w.shape, padding=1, bias=True, activation="relu")
    out = torch.full(plan.output_shape, NAN, device=cuda)
    y = plan(x, w, b, out=out)
    assert y is out
    assert not torch.isnan(out).any(), "NaN left in the output (seed %d)" % SEED
    assert rel_l2(out, reference(x, w, b, "relu", padding=1)) < STRICT_BOUND
    out.fill_(NAN)
    convtune.conv2d(x, w, b, padding=1, activation="relu", out=out, context=ctx)
    assert rel_l2(out, reference(x, w, b, "relu", padding=1)) < STRICT_BOUND


@gpu
def test_default_context(cuda):
    x, w, b = make_inputs((1, 3, 6, 6), (2, 3, 3, 3), True, cuda)
    y = convtune.conv2d(x, w, b, padding=1)
    assert rel_l2(y, reference(x, w, b, padding=1)) < STRICT_BOUND, "seed %d" % SEED
    ctx = convtune._default_contexts[cuda.index]
    assert ctx.cache is None and ctx.device == cuda.index and ctx.policy == "predict"
    assert convtune._default_context(cuda.index) is ctx


@gpu
def test_runs_on_the_current_stream(ctx, cuda):
    x_src, w, _ = make_inputs((2, 4, 9, 9), (6, 4, 3, 3), False, cuda)
    plan = ctx.plan(x_src.shape, w.shape, padding=1)
    x = torch.zeros_like(x_src)
    torch.cuda.synchronize()
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        out = torch.full(plan.output_shape, NAN, device=cuda)
        sleep_stream()  # a launch on another stream would now read x's zeros
        x.copy_(x_src)
        y1 = plan(x, w, out=out)
        y2 = convtune.conv2d(x, w, padding=1, context=ctx)
    torch.cuda.current_stream().wait_stream(s)
    ref = reference(x_src, w, padding=1)
    assert rel_l2(y1, ref) < STRICT_BOUND, "seed %d" % SEED
    assert rel_l2(y2, ref) < STRICT_BOUND, "seed %d" % SEED


@gpu
def test_one_plan_on_two_streams(ctx, cuda):
    w = torch.randn(6, 4, 3, 3, device=cuda)
    xs = [torch.randn(2, 4, 9, 9, device=cuda) for _ in range(2)]
    plan = ctx.plan(xs[0].shape, w.shape, padding=1)
    torch.cuda.synchronize()
    streams = [torch.cuda.Stream(), torch.cuda.Stream()]
    ys = []
    for s, x in zip(streams, xs):
        with torch.cuda.stream(s):
            sleep_stream(10)
            ys.append(plan(x, w))
    for s in streams:
        torch.cuda.current_stream().wait_stream(s)
    for x, y in zip(xs, ys):
        assert rel_l2(y, reference(x, w, padding=1)) < STRICT_BOUND, "seed %d" % SEED


# ---------------------------------------------------------------- the two call paths


def launch_module_path():
    _lib.load()
    return pathlib.Path(_lib._lib_path).parent / _lib.LAUNCH_FILE


def torch_access_built():
    from convtune import ops
    return ops.torch_access_address() != 0


@gpu
def test_call_path_is_the_extension_where_built(small):
    plan = small[0]
    if not launch_module_path().is_file():
        assert plan.info["call"].startswith("ctypes (")
    elif torch_access_built():
        assert plan.info["call"] == "extension (torch C++)"
    else:
        assert plan.info["call"] == "extension"


@gpu
def test_call_paths_agree(tmp_path, cuda, monkeypatch):
    """The C call path (reading tensors through torch's C++ API where the
    operator's library is built, and through their attributes) and the
    ctypes one run the same plan to the same bits, allocating or into out=,
    on one stream and across two."""
    if not launch_module_path().is_file():
        pytest.skip("%s is not built" % _lib.LAUNCH_FILE)
    cache = tmp_path / "plans.db"
    x, w, b = make_inputs((2, 8, 12, 12), (16, 8, 3, 3), True, cuda)
    kw = dict(padding=1, bias=True, activation="relu")
    ref = reference(x, w, b, "relu", padding=1)
    with contextlib.ExitStack() as contexts:
        def plan_in_a_new_context(policy):
            context = contexts.enter_context(convtune.Context(cache=cache, policy=policy))
            return context.plan(x.shape, w.shape, **kw)

        plans = [plan_in_a_new_context("fast")]
        if torch_access_built():
            assert plans[0].info["call"] == "extension (torch C++)"
            with monkeypatch.context() as m:
                m.setenv("CONVTUNE_TORCH_ACCESS", "0")
                plans.append(plan_in_a_new_context("cache_only"))
            assert plans[-1].info["call"] == "extension"
        monkeypatch.setattr(_lib, "_launch", (None, "disabled by the test"))
        plans.append(plan_in_a_new_context("cache_only"))
        assert plans[-1].info["call"] == "ctypes (disabled by the test)"
        for plan in plans[1:]:
            assert (plan.info["algorithm"], plan.info["config"]) == (plans[0].info["algorithm"], plans[0].info["config"])
        outs = [torch.full(plans[0].output_shape, NAN, device=cuda) for _ in plans]
        streams = [torch.cuda.Stream(), torch.cuda.Stream()]
        results = []
        for plan, out in zip(plans, outs):
            got = [plan(x, w, b), plan(x, w, b, out=out)]
            for s in streams:  # the second stream waits for the first's launch
                with torch.cuda.stream(s):
                    sleep_stream(5)
                    got.append(plan(x, w, b))
            for s in streams:
                torch.cuda.current_stream().wait_stream(s)
            results.append(got)
        torch.cuda.synchronize()
    for outputs in zip(*results):
        for other in outputs[1:]:
            assert torch.equal(outputs[0], other), "the call paths differ (seed %d)" % SEED
        assert rel_l2(outputs[0], ref) < STRICT_BOUND, "seed %d" % SEED


@gpu
def test_threads_share_a_plan(ctx, cuda):
    """Four threads call one plan, each on its own stream: every result is right."""
    import threading
    w = torch.randn(16, 8, 3, 3, device=cuda)
    xs = [torch.randn(2, 8, 12, 12, device=cuda) for _ in range(4)]
    plan = ctx.plan(xs[0].shape, w.shape, padding=1)
    results, errors = [None] * 4, []

    def work(i):
        try:
            torch.cuda.set_device(cuda)
            s = torch.cuda.Stream()
            with torch.cuda.stream(s):
                for _ in range(50):
                    y = plan(xs[i], w)
            s.synchronize()
            results[i] = y
        except BaseException as e:  # reported below, not lost in the thread
            errors.append(e)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    for x, y in zip(xs, results):
        assert rel_l2(y, reference(x, w, padding=1)) < STRICT_BOUND, "seed %d" % SEED


@gpu
@pytest.mark.parametrize("hw", [(8, 8), (640, 640)])  # outputs of 256 B and 1.6 MB (no prototype)
def test_each_call_returns_a_new_output(ctx, cuda, hw):
    x, w, _ = make_inputs((1, 1) + hw, (1, 1, 3, 3), False, cuda)
    plan = ctx.plan(x.shape, w.shape, padding=1)
    first = plan(x, w)
    x2 = torch.randn_like(x)
    second = plan(x2, w)
    assert first.data_ptr() != second.data_ptr()
    assert first.shape == second.shape == plan.output_shape and first.is_contiguous()
    assert not first.requires_grad and first.dtype == torch.float32 and first.device == cuda
    assert rel_l2(first, reference(x, w, padding=1)) < STRICT_BOUND, "seed %d" % SEED
    assert rel_l2(second, reference(x2, w, padding=1)) < STRICT_BOUND, "seed %d" % SEED


@gpu
def test_extension_refuses_like_ctypes(small, cuda):
    """A refused call through the extension raises the binding's message
    and writes nothing."""
    plan, x, w = small
    out = torch.full(plan.output_shape, NAN, device=cuda)
    shared = torch.randn(x.numel() + out.numel(), device=cuda)
    x_in_shared = shared[: x.numel()].view(x.shape)
    with pytest.raises(ValueError, match="out overlaps x"):  # out starts 64 elements before x's end
        plan(x_in_shared, w, out=shared[x.numel() - 64: x.numel() - 64 + out.numel()].view(out.shape))
    with pytest.raises(TypeError, match="w has dtype torch.float64"):
        plan(x, w.double(), out=out)
    torch.cuda.synchronize()
    assert torch.isnan(out).all()


@gpu
def test_extension_reads_subclasses_and_refuses_meta(small, cuda):
    """A Parameter (a Tensor subclass) is read as its tensor; a meta tensor,
    which has no data, is refused with the binding's message, as a sparse
    one is."""
    plan, x, w = small
    assert torch.equal(plan(x, torch.nn.Parameter(w, requires_grad=False)), plan(x, w))
    with pytest.raises(ValueError, match="x is on meta"):
        plan(torch.empty(x.shape, device="meta"), w)
    with pytest.raises((ValueError, RuntimeError)):
        plan(x.to_sparse(), w)


# ---------------------------------------------------------------- plans, cache, sources


@gpu
def test_tuning_logs_to_the_convtune_logger(tmp_path, cuda, caplog, capfd):
    # The library prints nothing; its messages reach logging: INFO as a tuning
    # starts and ends, and with verbose=True each candidate at DEBUG.
    caplog.set_level(logging.DEBUG, logger="convtune")
    shapes = ((1, 3, 8, 8), (4, 3, 3, 3))
    with convtune.Context(cache=tmp_path / "quiet.db", policy="fast") as c:
        c.plan(*shapes, padding=1)
    quiet = [(r.levelno, r.getMessage()) for r in caplog.records if r.name == "convtune"]
    assert [level for level, _ in quiet] == [logging.INFO, logging.INFO], quiet
    assert quiet[0][1].startswith("tuning fwd ") and quiet[1][1].startswith("tuned in "), quiet
    caplog.clear()
    with convtune.Context(cache=tmp_path / "verbose.db", policy="fast", verbose=True) as c:
        c.plan(*shapes, padding=1)
    messages = [r.getMessage() for r in caplog.records if r.levelno == logging.DEBUG]
    assert any(m.startswith("timing ") for m in messages), messages
    assert len(messages) >= 2 * sum(m.startswith("timing ") for m in messages)
    out, err = capfd.readouterr()
    assert out == "" and err == "", (out, err)



@gpu
def test_plan_info_and_sources(tmp_path, cuda):
    cache = tmp_path / "plans.db"
    shapes = ((1, 3, 8, 8), (4, 3, 3, 3))
    with convtune.Context(cache=cache, policy="fast") as c1:
        p1 = c1.plan(*shapes, padding=1)
        info = p1.info
        assert set(info) == {"algorithm", "config", "time_ms", "workspace_bytes", "source",
                             "replay", "replay_note", "call", "graph_launches", "graph_captures",
                             "direct_runs", "direction", "deterministic", "dtype"}
        assert info["direction"] == "fwd"
        assert info["source"] == "tuned" and info["replay"] == "pending"
        assert isinstance(info["algorithm"], str) and info["algorithm"]
        assert isinstance(info["config"], str)
        assert isinstance(info["time_ms"], float) and info["time_ms"] > 0
        assert isinstance(info["workspace_bytes"], int) and info["workspace_bytes"] >= 0
        assert p1.output_shape == (1, 4, 8, 8)
        assert p1.key == "fwd f32 nchw strict none n1 c3 h8 w8 k4 r3 s3 pad1,1 str1,1 dil1,1 g1"
        assert c1.plan(*shapes, padding=(1, 1), stride=(1, 1)) is p1  # repeated calls are cheap
        p1.close()
        p1b = c1.plan(*shapes, padding=1)
        assert p1b is not p1 and p1b.info["source"] == "memory"
        x, w, _ = make_inputs(*shapes, False, cuda)
        y = torch.empty(p1b.output_shape, device=cuda)
        assert rel_l2(p1b(x, w, out=y), reference(x, w, padding=1)) < STRICT_BOUND
        # First sight of these pointers: run directly; then captured, then replayed.
        assert p1b.info["replay"] == "direct" and "first run" in p1b.info["replay_note"]
        for _ in range(3):
            p1b(x, w, out=y)
        counts = {k: p1b.info[k] for k in ("direct_runs", "graph_captures", "graph_launches")}
        if p1b.info["replay"] == "graph":  # our kernels always capture
            assert counts == {"direct_runs": 1, "graph_captures": 1, "graph_launches": 3}, counts
        else:
            assert p1b.info["replay_note"] and counts["direct_runs"] == 4, (p1b.info, counts)
    assert c1.closed and p1b.closed
    with pytest.raises(ValueError, match="closed"):
        p1b(x, w)
    with convtune.Context(cache=cache, policy="fast") as c2:
        p2 = c2.plan(*shapes, padding=1)
        assert p2.info["source"] == "cache"
        assert (p2.info["algorithm"], p2.info["config"]) == (info["algorithm"], info["config"])
    with convtune.Context(cache=str(cache), policy="cache_only") as c3:
        assert c3.plan(*shapes, padding=1).info["source"] == "cache"


# ---------------------------------------------------------------- library-side failures


@gpu
def test_cache_miss(tmp_path, cuda):
    with convtune.Context(cache=tmp_path / "empty.db", policy="cache_only") as c:
        with pytest.raises(convtune.ConvtuneError) as e:
            c.plan((1, 3, 8, 8), (4, 3, 3, 3))
    assert e.value.status_name == "CACHE_MISS" and e.value.status == _lib.STATUS_NAMES.index("CACHE_MISS")
    assert "cache" in e.value.message and e.value.message in str(e.value)


@gpu
def test_policy_from_the_environment(tmp_path, cuda, monkeypatch):
    """$CONVTUNE_POLICY sets the policy of a Context whose code names none."""
    monkeypatch.setenv("CONVTUNE_POLICY", "cache_only")
    with convtune.Context(cache=tmp_path / "empty.db") as c:
        assert c.policy == "cache_only"
        with pytest.raises(convtune.ConvtuneError) as e:
            c.plan((1, 3, 8, 8), (4, 3, 3, 3))
    assert e.value.status_name == "CACHE_MISS"
    with convtune.Context(cache=tmp_path / "empty.db", policy="fast") as c:
        assert c.policy == "fast"  # the code's own choice stands


@gpu
def test_filter_too_large(ctx, cuda):
    with pytest.raises(convtune.ConvtuneError) as e:
        ctx.plan((1, 1, 4, 4), (1, 1, 3, 3), dilation=3)
    assert e.value.status_name == "FILTER_TOO_LARGE"
    assert "dilated filter 7x7" in e.value.message and "FILTER_TOO_LARGE" in str(e.value)
    x, w = torch.randn(1, 1, 4, 4, device=cuda), torch.randn(1, 1, 3, 3, device=cuda)
    with pytest.raises(convtune.ConvtuneError, match="FILTER_TOO_LARGE"):
        convtune.conv2d(x, w, dilation=3, context=ctx)


@gpu
def test_bad_groups(ctx, cuda):
    # groups divides C but not K: the library's check.
    with pytest.raises(convtune.ConvtuneError) as e:
        ctx.plan((1, 4, 8, 8), (5, 2, 3, 3), groups=2)
    assert e.value.status_name == "BAD_GROUPS" and "groups = 2" in e.value.message
    # conv2d checks first, with PyTorch's wording.
    x, w = torch.randn(1, 4, 8, 8, device=cuda), torch.randn(5, 2, 3, 3, device=cuda)
    with pytest.raises(ValueError, match="groups=2, expected weight to be divisible by 2"):
        convtune.conv2d(x, w, groups=2, context=ctx)
    with pytest.raises(ValueError, match="to have 6 channels, but got 4"):
        convtune.conv2d(x, w, groups=3, context=ctx)
    with pytest.raises(ValueError, match="groups must be a positive"):
        convtune.conv2d(x, w, groups=0, context=ctx)


@gpu
def test_no_such_device():
    n = torch.cuda.device_count()
    with pytest.raises(convtune.ConvtuneError) as e:
        convtune.Context(device=n, cache=":memory:")
    # The library's own text ("device N requested but N present") follows the binding's prefix.
    assert e.value.status_name == "NO_DEVICE" and ("device %d requested" % n) in e.value.message


# ---------------------------------------------------------------- argument checking


@pytest.fixture
def small(ctx, cuda):
    """A plan without bias and matching tensors."""
    x, w, _ = make_inputs((2, 3, 8, 8), (4, 3, 3, 3), False, cuda)
    return ctx.plan(x.shape, w.shape, padding=1), x, w


@gpu
def test_rejects_cpu_tensors(small):
    plan, x, w = small
    with pytest.raises(ValueError, match=r"x is on cpu.*cuda"):
        plan(x.cpu(), w)
    with pytest.raises(ValueError, match="w is on cpu"):
        plan(x, w.cpu())
    with pytest.raises(ValueError, match="CUDA"):
        convtune.conv2d(x.cpu(), w.cpu(), padding=1)


@gpu
def test_rejects_other_dtypes(small):
    plan, x, w = small
    with pytest.raises(TypeError, match="x has dtype torch.float64; this plan takes torch.float32"):
        plan(x.double(), w)
    with pytest.raises(TypeError, match="w has dtype torch.float16"):
        plan(x, w.half())
    with pytest.raises(TypeError, match="torch.Tensor"):
        plan(x.tolist(), w)


@gpu
def test_rejects_non_contiguous(small):
    plan, x, w = small
    with pytest.raises(ValueError, match=r"x is not contiguous.*\.contiguous\(\)"):
        plan(x.transpose(2, 3), w)  # same shape (H == W), other strides
    with pytest.raises(ValueError, match="x is not contiguous"):
        plan(x.to(memory_format=torch.channels_last), w)
    assert rel_l2(plan(x.transpose(2, 3).contiguous(), w),
                  reference(x.transpose(2, 3), w, padding=1)) < STRICT_BOUND


@gpu
def test_channels_last_plans(ctx, cuda):
    """layout="nhwc": channels-last in and out; an NCHW tensor is refused
    with the fix; dense and grouped filters must be channels-last (KRSC)."""
    x = torch.randn(2, 12, 9, 10, device=cuda).to(memory_format=torch.channels_last)
    w = torch.randn(12, 1, 5, 5, device=cuda)
    b = torch.randn(12, device=cuda)
    plan = ctx.plan(x.shape, w.shape, padding=2, groups=12, bias=True, layout="nhwc")
    assert plan.key.startswith("fwd f32 nhwc strict bias")
    y = plan(x, w, b)
    assert y.is_contiguous(memory_format=torch.channels_last)
    assert rel_l2(y, reference(x, w, b, padding=2, groups=12)) < STRICT_BOUND
    out = torch.full_like(y, float("nan"))
    assert plan(x, w, b, out=out) is out and rel_l2(out, y) == 0
    with pytest.raises(ValueError, match=r"x is not in channels-last.*channels_last"):
        plan(x.contiguous(), w, b)
    with pytest.raises(ValueError, match="out is not in channels-last"):
        plan(x, w, b, out=torch.empty(y.shape, device=cuda))
    # Dense and grouped filters: KRSC, that is channels-last too.
    for groups in (1, 2):
        wd = torch.randn(8, 12 // groups, 3, 3, device=cuda)
        dense = ctx.plan(x.shape, wd.shape, padding=1, groups=groups, layout="nhwc")
        with pytest.raises(ValueError, match=r"w is not in channels-last.*channels_last"):
            dense(x, wd)
        yd = dense(x, wd.contiguous(memory_format=torch.channels_last))
        assert yd.is_contiguous(memory_format=torch.channels_last)
        assert rel_l2(yd, reference(x, wd, padding=1, groups=groups)) < STRICT_BOUND


@gpu
def test_rejects_wrong_shapes(small, cuda):
    plan, x, w = small
    with pytest.raises(ValueError, match=r"x has shape \(2, 3, 8, 9\).*\(2, 3, 8, 8\)"):
        plan(torch.randn(2, 3, 8, 9, device=cuda), w)
    with pytest.raises(ValueError, match="w has shape"):
        plan(x, torch.randn(4, 3, 5, 5, device=cuda))
    with pytest.raises(ValueError, match="out has shape"):
        plan(x, w, out=torch.empty(2, 4, 6, 6, device=cuda))
    with pytest.raises(TypeError, match="out has dtype"):
        plan(x, w, out=torch.empty(plan.output_shape, device=cuda, dtype=torch.float64))
    with pytest.raises(ValueError, match=r"Expected 3D \(unbatched\) or 4D \(batched\) input"):
        convtune.conv2d(x[0, 0], w)  # 2-D (x[0], 3-D, is an unbatched image: test_dropin.py)


@gpu
def test_bias_missing_or_extra(ctx, small, cuda):
    plan, x, w = small
    b = torch.randn(4, device=cuda)
    with pytest.raises(ValueError, match="without bias"):
        plan(x, w, b)
    biased = ctx.plan(x.shape, w.shape, padding=1, bias=True)
    with pytest.raises(ValueError, match="pass bias"):
        biased(x, w)
    with pytest.raises(ValueError, match=r"bias has shape \(5,\)"):
        biased(x, w, torch.randn(5, device=cuda))
    with pytest.raises(ValueError, match="expected bias to be 1-dimensional with 4 elements"):
        convtune.conv2d(x, w, torch.randn(5, device=cuda), padding=1, context=ctx)


@gpu
def test_rejects_misaligned_views(small, cuda):
    plan, x, w = small
    buf = torch.empty(x.numel() + 1, device=cuda)
    view = buf[1:].view(x.shape)  # contiguous, but 4 bytes past an aligned start
    view.copy_(x)
    with pytest.raises(ValueError, match=r"x's data .* not 16-byte aligned.*x\.clone\(\)"):
        plan(view, w)
    assert rel_l2(plan(view.clone(), w), reference(x, w, padding=1)) < STRICT_BOUND


@gpu
def test_relu_needs_bias(ctx, small):
    plan, x, w = small
    with pytest.raises(ValueError, match="ReLU only after a bias"):
        ctx.plan(x.shape, w.shape, padding=1, activation="relu")
    with pytest.raises(ValueError, match="ReLU only after a bias"):
        convtune.conv2d(x, w, padding=1, activation="relu", context=ctx)


@gpu
def test_rejects_out_over_an_input(ctx, cuda):
    x, w, _ = make_inputs((2, 4, 8, 8), (4, 4, 1, 1), False, cuda)
    plan = ctx.plan(x.shape, w.shape)
    with pytest.raises(ValueError, match="out overlaps x"):
        plan(x, w, out=x)


@gpu
def test_refuses_autograd(small):
    plan, x, w = small
    w = w.clone().requires_grad_()
    with pytest.raises(NotImplementedError, match="no_grad"):
        plan(x, w)
    with torch.no_grad():
        assert rel_l2(plan(x, w), reference(x, w.detach(), padding=1)) < STRICT_BOUND
