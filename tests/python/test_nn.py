"""Tests of convtune.nn (the drop-in Conv2d, convert) and convtune.ops
(torch.compile, torch.export, CUDA graphs) against the same layers run by
PyTorch.  Needs torch (else skipped) and a CUDA GPU for all but the
conversion tests.  Inputs are fresh random numbers (seed in the failures,
CONVTUNE_TEST_SEED replays it); plans are tuned with policy "fast", except
the operator's, which come from the default context (policy "predict",
into the session's temporary default cache).
"""
import collections
import copy
import gc
import os
import weakref

import pytest

torch = pytest.importorskip("torch")
nn = torch.nn

import convtune  # noqa: E402
import convtune.nn  # noqa: E402

gpu = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA GPU visible to torch")
SEED = int(os.environ["CONVTUNE_TEST_SEED"])  # drawn by conftest.py unless given
STRICT_BOUND = 1e-5
TF32_BOUND = 5e-3  # relative L2 against PyTorch's strict fp32 output


def rel_l2(y, ref):
    return ((y.double() - ref.double()).norm() / ref.double().norm()).item()


class Net(nn.Module):
    """Three layers of one shape (one plan, three weight sets), then others."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(3, 16, 3, padding=1)
        self.body = nn.Sequential(*[nn.Conv2d(16, 16, 3, padding=1) for _ in range(3)])
        self.down = nn.Conv2d(16, 32, 3, stride=2, padding=1, bias=False)
        self.dw = nn.Conv2d(32, 32, 3, padding=1, groups=32)
        self.head = nn.Conv2d(32, 10, 1)

    def forward(self, x):
        x = torch.relu(self.stem(x))
        for layer in self.body:
            x = torch.relu(layer(x)) + x
        return self.head(torch.relu(self.dw(self.down(x)))).mean((2, 3))


def converted_pair(model, device, **options):
    """(the model as PyTorch runs it, a converted deep copy) on `device`."""
    model = model.to(device).eval()
    ours = copy.deepcopy(model)
    report = convtune.convert(ours, **options)
    return model, ours, report


# ---------------------------------------------------------------- conversion (no GPU)


def test_convert_swaps_plain_conv2d_in_place():
    class Special(nn.Conv2d):
        pass

    model = nn.Sequential(nn.Conv2d(3, 8, 3), nn.ReLU(), Special(8, 8, 1), nn.Conv2d(8, 8, 1).double())
    keys = list(model.state_dict())
    first_weight = model[0].weight
    hook_calls = []
    model[0].register_forward_hook(lambda *args: hook_calls.append(1))
    report = convtune.convert(model, math="strict")
    assert report.converted == ["0"]
    assert [name for name, _ in report.left] == ["2", "3"]
    assert "subclass" in dict(report.left)["2"] and "float64" in dict(report.left)["3"]
    assert "1 layers converted, 2 left" in str(report)
    layer = model[0]
    assert type(layer) is convtune.nn.Conv2d and isinstance(layer, nn.Conv2d)
    assert layer.weight is first_weight and layer.math == "strict"
    assert list(model.state_dict()) == keys
    assert convtune.convert(model).converted == ["0"]  # converting again changes nothing
    # On the CPU a converted layer runs PyTorch's forward, hooks included.
    y = layer(torch.randn(2, 3, 8, 8))
    assert y.shape == (2, 8, 6, 6) and hook_calls == [1]
    assert layer.fallbacks == collections.Counter({"input on cpu": 1})
    assert report.pytorch_calls() == {"0": {"input on cpu": 1}}
    assert "  0 ran PyTorch's forward (1 calls): input on cpu" in str(report).splitlines()
    with pytest.raises(ValueError, match="math"):
        convtune.convert(model, math="fp16")
    with pytest.raises(TypeError):
        convtune.convert("not a model")


def test_report_does_not_keep_the_model_alive():
    """A ConvertReport kept after its model is dropped frees the converted
    layers (and their weights) with it; what convert() did stays readable."""
    model = nn.Sequential(nn.Conv2d(3, 8, 3), nn.ReLU(), nn.Conv2d(8, 8, 1))
    report = convtune.convert(model)
    model[0](torch.randn(1, 3, 8, 8))
    assert report.pytorch_calls() == {"0": {"input on cpu": 1}}
    layer = weakref.ref(model[0])
    del model
    gc.collect()
    assert layer() is None
    assert report.converted == ["0", "2"] and report.pytorch_calls() == {}
    assert "2 layers converted, 0 left" in str(report)


def test_constructor_and_state_dict_match_torch():
    torch.manual_seed(SEED)
    ours = convtune.nn.Conv2d(4, 6, (3, 5), stride=2, padding="valid", dilation=(1, 2), groups=2,
                              bias=False, padding_mode="zeros", math="tf32")
    plain = nn.Conv2d(4, 6, (3, 5), stride=2, padding="valid", dilation=(1, 2), groups=2, bias=False)
    plain.load_state_dict(ours.state_dict())
    assert ours.weight.shape == plain.weight.shape and ours.bias is None
    assert "math='tf32'" in repr(ours)
    clone = copy.deepcopy(ours)
    assert type(clone) is convtune.nn.Conv2d and torch.equal(clone.weight, ours.weight)
    with pytest.raises(ValueError, match="math"):
        convtune.nn.Conv2d(1, 1, 1, math="half")


# ---------------------------------------------------------------- eager, on the GPU

LAYERS = [
    dict(in_channels=8, out_channels=16, kernel_size=3, padding=1),
    dict(in_channels=8, out_channels=16, kernel_size=3, stride=2, padding=1, bias=False),
    dict(in_channels=8, out_channels=8, kernel_size=3, padding=2, dilation=2, groups=8),
    dict(in_channels=8, out_channels=12, kernel_size=(1, 3), padding=(0, 1), groups=4),
    dict(in_channels=8, out_channels=16, kernel_size=3, padding="same"),
    dict(in_channels=8, out_channels=16, kernel_size=4, padding="same", dilation=1),  # odd half
    dict(in_channels=8, out_channels=16, kernel_size=(2, 3), padding="same", dilation=(3, 1)),
    dict(in_channels=8, out_channels=16, kernel_size=3, padding="valid"),
    dict(in_channels=8, out_channels=16, kernel_size=3, padding=1, padding_mode="reflect"),
    dict(in_channels=8, out_channels=16, kernel_size=3, padding=(1, 2), padding_mode="replicate"),
    dict(in_channels=8, out_channels=16, kernel_size=3, padding=1, padding_mode="circular"),
]


@gpu
@pytest.mark.parametrize("options", LAYERS, ids=lambda o: ",".join("%s=%s" % kv for kv in o.items()))
def test_layer_matches_pytorch(options, ctx, cuda, strict_math):
    plain = nn.Conv2d(**options).to(cuda)
    ours = convtune.nn.Conv2d.from_torch(copy.deepcopy(plain), context=ctx)
    with torch.inference_mode():
        for shape in ((3, 8, 13, 11), (8, 13, 11), (1, 8, 5, 6), (3, 8, 13, 11)):
            x = torch.randn(shape, device=cuda)
            y, ref = ours(x), plain(x)
            assert y.shape == ref.shape and rel_l2(y, ref) < STRICT_BOUND, (SEED, shape)
        empty = torch.randn(0, 8, 9, 9, device=cuda)
        assert ours(empty).shape == plain(empty).shape
    assert ours.plan_info()["algorithm"]
    assert set(ours.fallbacks) == {"empty input"}, ours.fallbacks


@gpu
def test_fallbacks_give_pytorch_results(ctx, cuda):
    plain = nn.Conv2d(8, 16, 3, padding=1).to(cuda)
    ours = convtune.nn.Conv2d.from_torch(copy.deepcopy(plain), math="strict", context=ctx)
    x = torch.randn(2, 8, 10, 10, device=cuda, requires_grad=True)
    with torch.inference_mode():
        with pytest.raises(RuntimeError):  # PyTorch's error: input and weight types differ
            ours(x.detach().half())
        assert ours(x.detach().transpose(2, 3)).shape == (2, 16, 10, 10)
        offset = torch.randn(2 * 8 * 10 * 10 + 1, device=cuda)[1:].view(2, 8, 10, 10)
        assert ours(offset).shape == (2, 16, 10, 10)
        with pytest.raises(RuntimeError):  # PyTorch's own error for a wrong channel count
            ours(torch.randn(2, 7, 10, 10, device=cuda))
    assert set(ours.fallbacks) == {"dtype torch.float16, weight torch.float32",
                                   "input data not 16-byte aligned",
                                   "input shape (2, 7, 10, 10)"}, ours.fallbacks


def _raced_layer(cuda, ctx):
    """(nn.Conv2d, its converted copy with race_pytorch on)."""
    plain = nn.Conv2d(8, 16, 3, padding=1).to(cuda).eval()
    ours = convtune.nn.Conv2d.from_torch(copy.deepcopy(plain), math="strict", context=ctx)
    ours.race_pytorch = True
    return plain, ours


def _fixed_race(result, races):
    """A stand-in for convtune.nn._race returning `result` and counting calls."""
    def race(ours, theirs, device):
        assert device.type == "cuda"
        ours(), theirs()  # both paths callable on the raced input
        races.append(torch.backends.cudnn.benchmark)
        return result
    return race


@gpu
def test_race_lost_runs_pytorch_from_then_on(ctx, cuda, strict_math, monkeypatch, replay_as_graph):
    """A shape whose race PyTorch's forward won runs it in eager mode and in
    a graph captured later, counted in fallbacks and in the report; another
    shape races again; a training call never races."""
    races = []
    monkeypatch.setattr(convtune.nn, "_race", _fixed_race((0.0021, 0.0019), races))
    plain, ours = _raced_layer(cuda, ctx)
    report = convtune.convert(ours)
    x = torch.randn(2, 8, 10, 10, device=cuda)
    monkeypatch.setattr(torch.backends.cudnn, "benchmark", True)
    with torch.inference_mode():
        for _ in range(3):
            y = ours(x)
        assert torch.backends.cudnn.benchmark
        assert len(races) == 1 and rel_l2(y, plain(x)) < STRICT_BOUND, SEED
        [(why, calls)] = ours.fallbacks.items()
        assert why == "PyTorch's forward was faster (1.9 against 2.1 us a call)" and calls == 3, why
        assert ours._last_plan is None  # no convtune call ran
        y, fresh = replay_as_graph(ours, x)
        assert rel_l2(y, plain(fresh)) < STRICT_BOUND, SEED
        assert len(races) == 1
        ours(torch.randn(3, 8, 10, 10, device=cuda))  # a new shape races
        assert len(races) == 2
    assert "ran PyTorch's forward" in str(report) and report.pytorch_calls() == {"": dict(ours.fallbacks)}
    assert races == [True, True]  # PyTorch's forward races as set up: benchmark mode on
    ours(torch.randn(4, 8, 10, 10, device=cuda, requires_grad=True)).sum().backward()
    assert len(races) == 2
    # A TF32 layer whose K R S C plan was faster keeps its weight only where
    # the plan won: PyTorch's forward reads the weight as the user left it.
    tf32 = convtune.nn.Conv2d.from_torch(copy.deepcopy(plain), math="tf32", context=ctx)
    tf32.race_pytorch = True
    with torch.inference_mode():
        y = tf32(x)
    assert len(races) == 3 and tf32.weight.is_contiguous() and y.is_contiguous()


@gpu
def test_race_within_margin_keeps_the_plan(ctx, cuda, strict_math, monkeypatch):
    """A plan within RACE_MARGIN of PyTorch's forward keeps the calls; a
    layer with race_pytorch off never races."""
    races = []
    monkeypatch.setattr(convtune.nn, "_race", _fixed_race((0.00103, 0.00100), races))
    plain, ours = _raced_layer(cuda, ctx)
    x = torch.randn(2, 8, 10, 10, device=cuda)
    with torch.inference_mode():
        for _ in range(3):
            y = ours(x)
        assert len(races) == 1 and not ours.fallbacks and ours._last_plan is not None
        assert rel_l2(y, plain(x)) < STRICT_BOUND, SEED
        ours.race_pytorch = False
        ours(torch.randn(5, 8, 10, 10, device=cuda))
    assert len(races) == 1 and not ours.fallbacks


@gpu
def test_no_race_where_pytorch_changes_the_layout(ctx, cuda, strict_math, monkeypatch):
    """A layer whose PyTorch forward would return another memory layout
    than its plan's (as PyTorch's depthwise kernel returns NCHW for a
    channels-last input) keeps the plan without a race: the layers after
    it would get inputs of another layout."""
    races = []
    monkeypatch.setattr(convtune.nn, "_race", _fixed_race((0.0021, 0.0019), races))
    plain, ours = _raced_layer(cuda, ctx)
    pytorch_forward = ours._pytorch_forward
    monkeypatch.setattr(ours, "_pytorch_forward", lambda input: pytorch_forward(input).contiguous())
    x = torch.randn(2, 8, 10, 10, device=cuda).contiguous(memory_format=torch.channels_last)
    with torch.inference_mode():
        y = ours(x)
    assert not races and not ours.fallbacks and ours._last_plan is not None
    assert y.is_contiguous(memory_format=torch.channels_last) and rel_l2(y, plain(x)) < STRICT_BOUND, SEED


@gpu
def test_race_under_autocast_times_the_operator(cuda, monkeypatch):
    """Under autocast, a layer on the default context races the operator,
    as its later calls of the shape call it (autocast's kernel casts the
    weight through autocast's cache, as F.conv2d's does), and PyTorch's
    forward after the check a layer that lost its race makes."""
    if convtune.nn._autocast_ops is None:
        pytest.skip("the operators have no C++ autocast kernel in this build")
    calls = collections.Counter()

    def counted(name, op):
        def call(*args):
            calls[name] += 1
            return op(*args)
        return call
    training, inference = convtune.nn._autocast_ops
    monkeypatch.setattr(convtune.nn, "_autocast_ops",
                        (counted("training", training), counted("inference", inference)))
    raced = []

    def race(ours, theirs, device):
        before = calls["inference"]
        raced.append((ours(), theirs()))
        assert calls["inference"] == before + 1, calls  # ours is the operator's call
        return 0.0010, 0.0011
    monkeypatch.setattr(convtune.nn, "_race", race)
    plain = nn.Conv2d(8, 16, 3, padding=1).to(cuda).eval()
    ours = convtune.nn.Conv2d.from_torch(copy.deepcopy(plain))
    ours.race_pytorch = True
    x = torch.randn(2, 8, 10, 10, device=cuda)
    with torch.inference_mode(), torch.autocast("cuda", dtype=torch.bfloat16):
        ys = [ours(x)]
        after_race = calls["inference"]
        ys += [ours(x) for _ in range(2)]
        ref = plain(x)
    [(timed, pytorch)] = raced
    assert calls == {"inference": after_race + 2}, calls  # later calls run the operator
    assert timed.dtype == pytorch.dtype == torch.bfloat16 and rel_l2(timed, pytorch) < 2e-2, SEED
    assert all(rel_l2(y, ref) < 2e-2 for y in ys) and not ours.fallbacks, SEED


@gpu
def test_race_times_host_and_device(cuda):
    """_per_call_ms counts a call's host time where it is the longer
    (a sleep) and its device time where that is (a long kernel queued
    without waiting)."""
    import time
    big = torch.randn(2048, 2048, device=cuda)
    big @ big @ big  # the first call, as _race_entry makes it before timing
    sleep_ms, matmul_ms = convtune.nn._per_call_ms((lambda: time.sleep(0.002), lambda: big @ big @ big))
    assert 1.9 < sleep_ms < 10, sleep_ms
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(10):
        big @ big @ big
    stop.record()
    torch.cuda.synchronize()
    device_ms = start.elapsed_time(stop) / 10
    assert 0.8 * device_ms < matmul_ms < 1.5 * device_ms + 0.05, (matmul_ms, device_ms)


@gpu
def test_strided_inputs_run_convtune(ctx, cuda, strict_math):
    """Inputs neither contiguous nor channels-last (channel slices, as
    ShuffleNet's chunk() makes, and transposes) are copied, as PyTorch's
    cuDNN path copies them, into the memory format PyTorch's output gets."""
    plain = nn.Conv2d(8, 16, 3, padding=1).to(cuda)
    ours = convtune.nn.Conv2d.from_torch(copy.deepcopy(plain), context=ctx)
    nchw = torch.randn(2, 16, 10, 12, device=cuda)
    inputs = {
        "channel slice": nchw[:, 8:],
        "channels-last slice": nchw.contiguous(memory_format=torch.channels_last)[:, 3:11],
        "transpose": torch.randn(2, 8, 12, 10, device=cuda).transpose(2, 3),
        "unbatched, unaligned window": nchw[0, 4:12, :, 1:11],
    }
    with torch.inference_mode():
        for name, x in inputs.items():
            for _ in range(2):  # the second call comes after a launcher is kept
                y, ref = ours(x), plain(x)
                assert y.shape == ref.shape and rel_l2(y, ref) < STRICT_BOUND, (SEED, name)
                if x.dim() == 4:
                    assert (y.is_contiguous(memory_format=torch.channels_last)
                            == ref.is_contiguous(memory_format=torch.channels_last)), name
    assert not ours.fallbacks, ours.fallbacks


class ConvNeXtLike(nn.Module):
    """Depthwise convolutions fed channels-last activations, as ConvNeXt's
    blocks make them (a permute around LayerNorm), and a dense one (its
    downsampling)."""

    def __init__(self, channels=32):
        super().__init__()
        self.dw7 = nn.Conv2d(channels, channels, 7, padding=3, groups=channels)
        self.norm = nn.LayerNorm(channels)
        self.dw3 = nn.Conv2d(channels, 2 * channels, 3, stride=2, padding=1, groups=channels,
                             bias=False)
        self.dense = nn.Conv2d(2 * channels, 16, 2, stride=2)

    def forward(self, x):
        x = self.norm(x.permute(0, 2, 3, 1)).permute(0, 3, 1, 2)  # channels-last strides
        x = x + self.dw7(x)
        return self.dense(torch.relu(self.dw3(x)))


@gpu
def test_channels_last_weight_runs_krsc_plans(ctx, cuda, strict_math):
    """A channels-last weight on an NCHW input: read as it is (K R S C
    filters, layout "nchw_krsc"), forward and in training; at the first
    inference call of a shape a layer may make its weight so where that plan
    was timed faster, values kept; relayout_filters=False keeps it as it is."""
    torch.manual_seed(SEED)
    layer = nn.Conv2d(16, 64, 3, padding=1).to(cuda)
    ours = copy.deepcopy(layer)
    convtune.convert(ours, context=ctx)
    ours.weight.data = ours.weight.data.contiguous(memory_format=torch.channels_last)
    assert not ours.weight.is_contiguous()
    x = torch.randn(2, 16, 12, 10, device=cuda)
    with torch.no_grad():
        for _ in range(2):  # the second call takes the fast path
            y = ours(x)
            assert rel_l2(y, layer(x)) < STRICT_BOUND, SEED
    assert ours._last_plan.key.endswith(" krsc"), ours._last_plan.key
    assert not ours.fallbacks and not ours.weight.is_contiguous()
    # Training: the forward reads the weight as it is, the backward passes a
    # K C R S copy; the gradient lands in the weight's own layout.
    xg = x.clone().requires_grad_()
    xr = x.clone().requires_grad_()
    g = torch.randn_like(y)
    (ours(xg) * g).sum().backward()
    (layer(xr) * g).sum().backward()
    for got, want in ((xg.grad, xr.grad), (ours.weight.grad, layer.weight.grad),
                      (ours.bias.grad, layer.bias.grad)):
        assert rel_l2(got, want) < STRICT_BOUND, SEED
    # A layer with a K C R S weight: under no_grad in TF32 it may keep the
    # weight K R S C (when that plan was faster), with the same values
    # either way; in strict fp32 it never tries (nor tunes the twin).
    for relayout, math, bound in ((True, "tf32", TF32_BOUND), (False, "tf32", TF32_BOUND),
                                  (True, "strict", STRICT_BOUND)):
        fresh = copy.deepcopy(layer)
        convtune.convert(fresh, context=ctx, math=math)
        fresh.relayout_filters = relayout
        with torch.inference_mode():
            y = fresh(x)
            assert rel_l2(y, layer(x)) < bound, SEED
            assert torch.equal(fresh.weight, layer.weight)
            if not relayout or math == "strict":
                assert fresh.weight.is_contiguous()
                assert not fresh._last_plan.key.endswith(" krsc"), fresh._last_plan.key
            elif not fresh.weight.is_contiguous():
                assert fresh.weight.is_contiguous(memory_format=torch.channels_last)
                assert fresh._last_plan.key.endswith(" krsc")
                assert rel_l2(fresh(x), layer(x)) < bound, SEED
        assert not fresh.fallbacks
        # Trainable afterwards: the weight is no inference tensor.
        opt = torch.optim.SGD(fresh.parameters(), lr=0.1)
        fresh(x.clone().requires_grad_()).sum().backward()
        opt.step()


@gpu
def test_channels_last_input_runs_nhwc_plans(ctx, cuda, strict_math):
    model, ours, _ = converted_pair(ConvNeXtLike(), cuda, context=ctx)
    x = torch.randn(2, 32, 15, 14, device=cuda)
    with torch.inference_mode():
        for _ in range(3):  # the first call plans, the later ones take the fast path
            y = ours(x)
        assert rel_l2(y, model(x)) < STRICT_BOUND, SEED
        for layer in (ours.dw7, ours.dw3, ours.dense):
            assert not layer.fallbacks, layer.fallbacks
            assert layer._last_plan.key.split()[2] == "nhwc"
        # Channels-last in, channels-last out, as PyTorch does it.
        xs = ours.norm(x.permute(0, 2, 3, 1)).permute(0, 3, 1, 2)
        out = ours.dw7(xs)
        assert out.is_contiguous(memory_format=torch.channels_last)
        assert rel_l2(out, torch.nn.functional.conv2d(xs.double(), ours.dw7.weight.double(),
                                                      ours.dw7.bias.double(), padding=3,
                                                      groups=32)) < STRICT_BOUND, SEED
        # A dense layer reads its (contiguous) weight from a channels-last
        # copy made for the call; the weight itself is left as it was.
        h = torch.relu(ours.dw3(xs)).detach()
        assert ours.dense.weight.is_contiguous()
        out = ours.dense(h)
        assert out.is_contiguous(memory_format=torch.channels_last)
        assert ours.dense.weight.is_contiguous()
        assert rel_l2(out, torch.nn.functional.conv2d(h.double(), ours.dense.weight.double(),
                                                      ours.dense.bias.double(), stride=2)) < STRICT_BOUND, SEED
        # A weight changed in place (through .data, which no version
        # counter sees) is read afresh.
        ours.dense.weight.data.mul_(-1)
        assert rel_l2(ours.dense(h), torch.nn.functional.conv2d(
            h.double(), ours.dense.weight.double(), ours.dense.bias.double(),
            stride=2)) < STRICT_BOUND, SEED
        ours.dense.weight.data.mul_(-1)
        # A model converted to channels-last (weights too) runs without copies.
        cl = copy.deepcopy(ours).to(memory_format=torch.channels_last)
        assert rel_l2(cl(x.to(memory_format=torch.channels_last)), model(x)) < STRICT_BOUND, SEED
        assert all(not layer.fallbacks for layer in (cl.dw7, cl.dw3, cl.dense))
        # Under torch.compile the operator gets the layout, and keeps it.
        torch._dynamo.reset()
        compiled = torch.compile(ours, fullgraph=True)
        assert rel_l2(compiled(x), model(x)) < STRICT_BOUND, SEED


@gpu
def test_tf32_follows_cudnn_flag_unless_math_given(ctx, cuda):
    layer = convtune.nn.Conv2d(16, 16, 3, padding=1, context=ctx).to(cuda)
    fixed = convtune.nn.Conv2d(16, 16, 3, padding=1, context=ctx, math="strict").to(cuda)
    x = torch.randn(4, 16, 12, 12, device=cuda)
    old = torch.backends.cudnn.allow_tf32
    try:
        with torch.inference_mode():
            for flag, expected in ((False, "strict"), (True, "tf32"), (False, "strict")):
                torch.backends.cudnn.allow_tf32 = flag
                layer(x)
                fixed(x)
                # The plan key reads "fwd f32 nchw <math> ...".
                assert layer._last_plan.key.split()[3] == expected
                assert fixed._last_plan.key.split()[3] == "strict"
    finally:
        torch.backends.cudnn.allow_tf32 = old


@gpu
@pytest.mark.skipif(not hasattr(torch.backends.cudnn, "conv"),
                    reason="this PyTorch has no torch.backends.cudnn.conv.fp32_precision")
def test_tf32_follows_fp32_precision_api(ctx, cuda):
    """PyTorch's current precision API: after it is used, reading the legacy
    torch.backends.cudnn.allow_tf32 raises, which once made every layer with
    math=None fail."""
    layer = convtune.nn.Conv2d(16, 16, 3, padding=1, context=ctx).to(cuda)
    x = torch.randn(4, 16, 12, 12, device=cuda)
    old = torch.backends.cudnn.allow_tf32
    try:
        with torch.inference_mode():
            for precision, expected in (("ieee", "strict"), ("tf32", "tf32"), ("ieee", "strict")):
                torch.backends.cudnn.conv.fp32_precision = precision
                ref = torch.nn.functional.conv2d(x, layer.weight, layer.bias, padding=1)
                assert rel_l2(layer(x), ref) < TF32_BOUND
                assert layer._last_plan.key.split()[3] == expected
                assert rel_l2(convtune.conv2d(x, layer.weight, layer.bias, padding=1), ref) < TF32_BOUND
    finally:
        torch.backends.cudnn.allow_tf32 = old  # the legacy setter sets both APIs' flags
    assert torch.backends.cudnn.allow_tf32 == old


@gpu
def test_cudnn_deterministic_makes_plans_deterministic(ctx, cuda):
    """torch.backends.cudnn.deterministic makes PyTorch's convolutions
    deterministic; a converted layer follows it as it follows
    torch.use_deterministic_algorithms."""
    layer = convtune.nn.Conv2d(16, 16, 3, padding=1, context=ctx).to(cuda)
    x = torch.randn(4, 16, 12, 12, device=cuda)
    old = torch.backends.cudnn.deterministic
    try:
        with torch.inference_mode():
            torch.backends.cudnn.deterministic = True
            layer(x)
            assert layer._last_plan.key.endswith(" det"), layer._last_plan.key
    finally:
        torch.backends.cudnn.deterministic = old


@gpu
def test_model_loop_replays_graphs_without_recapturing(ctx, cuda, strict_math):
    """Layers sharing a plan, called with their own weights and the
    allocator's activations: after a warm-up, every call replays a kept
    graph (none is recorded again) and results stay PyTorch's."""
    model, ours, report = converted_pair(Net(), cuda, context=ctx)
    assert len(report.converted) == 7 and not report.left
    x = torch.randn(4, 3, 24, 24, device=cuda)
    with torch.inference_mode():
        ref = model(x)
        for _ in range(5):  # first sightings, then captures (the allocator may alternate)
            ours(x)
        plans = {id(layer._last_plan): layer._last_plan for layer in ours.modules()
                 if isinstance(layer, convtune.nn.Conv2d)}
        assert len(plans) == 5  # the three body layers share one
        before = {key: plan.info for key, plan in plans.items()}
        for _ in range(10):
            y = ours(x)
        after = {key: plan.info for key, plan in plans.items()}
    assert rel_l2(y, ref) < STRICT_BOUND, SEED
    for key, info in after.items():
        if info["replay"] == "direct" and "first run" not in info["replay_note"]:
            continue  # a family that cannot be captured runs directly, by design
        calls = 30 if key == id(ours.body[0]._last_plan) else 10
        assert info["graph_captures"] == before[key]["graph_captures"], info
        assert info["graph_launches"] - before[key]["graph_launches"] == calls, info


# ---------------------------------------------------------------- graphs, compile, export


@gpu
def test_whole_model_cuda_graph_capture(ctx, cuda, strict_math):
    model, ours, _ = converted_pair(Net(), cuda, context=ctx)
    static_x = torch.randn(4, 3, 24, 24, device=cuda)
    side = torch.cuda.Stream()
    with torch.inference_mode():
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3):
                ours(static_x)
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, stream=side):
            static_y = ours(static_x)
        for _ in range(2):  # new inputs through the same graph
            x = torch.randn_like(static_x)
            static_x.copy_(x)
            static_y.fill_(float("nan"))
            graph.replay()
            torch.cuda.synchronize()
            assert rel_l2(static_y, model(x)) < STRICT_BOUND, SEED


def _graph_recorder(graphs):
    def backend(gm, example_inputs):
        graphs.append(str(gm.graph))
        return gm.forward
    return backend


@gpu
def test_torch_compile_fullgraph_traces_the_operator(cuda, strict_math):
    model, ours, _ = converted_pair(Net(), cuda)
    x = torch.randn(2, 3, 16, 16, device=cuda)
    graphs = []
    with torch.no_grad():
        traced = torch.compile(ours, fullgraph=True, backend=_graph_recorder(graphs))
        y = traced(x)
        assert rel_l2(y, model(x)) < STRICT_BOUND, SEED
        # No gradient to record: the operator without an autograd formula.
        assert len(graphs) == 1 and graphs[0].count("convtune.conv2d_inference") == 7, graphs
        torch._dynamo.reset()
        compiled = torch.compile(ours, fullgraph=True)  # inductor
        assert rel_l2(compiled(x), model(x)) < STRICT_BOUND, SEED
    torch._dynamo.reset()
    graphs.clear()
    y = torch.compile(ours, fullgraph=True, backend=_graph_recorder(graphs))(x)
    assert rel_l2(y.detach(), model(x)) < STRICT_BOUND, SEED
    assert (len(graphs) == 1 and graphs[0].count("convtune.conv2d") == 7
            and "conv2d_inference" not in graphs[0]), graphs


@gpu
def test_operators_pass_opcheck(cuda, strict_math):
    """torch.library.opcheck on the operator, its inference twin and its two
    backward operators (schema, fake kernels, autograd registration, AOT
    dispatch), in deterministic mode, whose plans repeat their results bit
    for bit."""
    x = torch.randn(2, 4, 9, 7, device=cuda, requires_grad=True)
    w = torch.randn(6, 2, 3, 3, device=cuda, requires_grad=True)
    b = torch.randn(6, device=cuda, requires_grad=True)
    pass_args = ([2, 1], [1, 0], [1, 1], 2, "strict")
    dy = torch.randn(2, 6, 5, 5, device=cuda)
    was = torch.are_deterministic_algorithms_enabled()
    torch.use_deterministic_algorithms(True, warn_only=True)
    try:
        torch.library.opcheck(torch.ops.convtune.conv2d, (x, w, b) + pass_args)
        torch.library.opcheck(torch.ops.convtune.conv2d_inference,
                              (x.detach(), w.detach(), b.detach()) + pass_args)
        for layout in ("nchw", "nhwc"):
            torch.library.opcheck(torch.ops.convtune.conv2d_backward_data,
                                  (dy, w.detach(), list(x.shape)) + pass_args + (layout,))
            torch.library.opcheck(torch.ops.convtune.conv2d_backward_filter,
                                  (x.detach(), dy, list(w.shape)) + pass_args + (layout,))
    finally:
        torch.use_deterministic_algorithms(was)
    xd, wd, bd = (t.detach().double().requires_grad_() for t in (x, w, b))
    ref = torch.nn.functional.conv2d(xd, wd, bd, (2, 1), (1, 0), 1, 2)
    dx, dw, db = torch.autograd.grad(torch.ops.convtune.conv2d(x, w, b, *pass_args), (x, w, b), dy)
    rx, rw, rb = torch.autograd.grad(ref, (xd, wd, bd), dy.double())
    for got, want in ((dx, rx), (dw, rw), (db, rb)):
        assert rel_l2(got, want) < STRICT_BOUND, SEED


@gpu
def test_torch_compile_trains_through_convtune(cuda, strict_math):
    """A converted model compiled with fullgraph=True trains through convtune
    in both directions: its gradients match the model's in float64, and the
    backward operators made their plans."""
    import convtune.ops as ops
    model, ours, _ = converted_pair(Net(), cuda)
    ref = copy.deepcopy(model).double()
    compiled = torch.compile(ours, fullgraph=True)
    before = set(ops._plans)
    ops.close()  # the C++ kernels' plans: from none, all this test's are new
    for step in range(2):
        x = torch.randn(2, 3, 16, 16, device=cuda)
        ours.zero_grad()
        ref.zero_grad()
        y = compiled(x)
        g = torch.randn_like(y)
        (y * g).sum().backward()
        (ref(x.double()) * g.double()).sum().backward()
        for (name, got), want in zip(ours.named_parameters(), ref.parameters()):
            assert rel_l2(got.grad, want.grad) < 2 * STRICT_BOUND, (SEED, step, name)
    # Five conv shapes: each a backward-filter plan, and all but the stem
    # (whose input records no gradient) a backward-data plan, made by the
    # C++ kernels (which keep their own plans, the five forward ones too:
    # 14, and 5 without the backward passes) or the Python ones.
    if ops._cpp is not None:
        made = ops._cpp.convtune_torch_op_plans()
        assert made == 14, made
    else:
        added = sorted(k[:3] for k in set(ops._plans) - before if k[0] != "fwd")
        assert len(added) == 9 and {k[0] for k in added} == {"bwd_data", "bwd_filter"}, added


@gpu
def test_torch_export_keeps_the_operator(cuda, strict_math):
    model, ours, _ = converted_pair(Net(), cuda)
    x = torch.randn(2, 3, 16, 16, device=cuda)
    with torch.no_grad():
        exported = torch.export.export(ours, (x,))
        text = str(exported.graph)
        # Exported under no_grad: the operator without an autograd formula.
        assert text.count("convtune.conv2d_inference") == 7, text
        x2 = torch.randn_like(x)
        assert rel_l2(exported.module()(x2), model(x2)) < STRICT_BOUND, SEED


@gpu
def test_operator_checks_and_fake_shapes(cuda):
    x = torch.randn(2, 4, 9, 7, device=cuda)
    w = torch.randn(6, 2, 3, 3, device=cuda)
    b = torch.randn(6, device=cuda)
    y = torch.ops.convtune.conv2d(x[:, :, :, :], w, b, [2, 1], [1, 0], [1, 1], 2, "strict")
    ref = torch.nn.functional.conv2d(x.double(), w.double(), b.double(), stride=(2, 1), padding=(1, 0),
                                     groups=2)
    assert y.shape == ref.shape and rel_l2(y, ref) < STRICT_BOUND
    # Non-contiguous inputs are made contiguous, not refused.
    xt = torch.randn(2, 4, 7, 9, device=cuda).transpose(2, 3)
    ref_t = torch.nn.functional.conv2d(xt.double(), w.double(), b.double(), groups=2)
    assert rel_l2(torch.ops.convtune.conv2d(xt, w, b, [1, 1], [0, 0], [1, 1], 2, "strict"), ref_t) < STRICT_BOUND
    from torch._subclasses.fake_tensor import FakeTensorMode
    with FakeTensorMode() as mode:
        fake = torch.ops.convtune.conv2d(mode.from_tensor(x), mode.from_tensor(w), None,
                                         [2, 1], [1, 0], [1, 1], 2, "tf32")
        assert fake.shape == ref.shape
    with pytest.raises(Exception, match="float16 or (torch.)?bfloat16"):
        torch.ops.convtune.conv2d(x.double(), w.double(), None, [1, 1], [0, 0], [1, 1], 2, "strict")
    with pytest.raises(Exception, match="of one type|this plan takes"):
        torch.ops.convtune.conv2d(x.half(), w, None, [1, 1], [0, 0], [1, 1], 2, "strict")
    # layout="nhwc": a depthwise convolution in channels-last memory format,
    # whatever the input's format; the fake kernel gives the same strides.
    xd = torch.randn(2, 8, 9, 7, device=cuda)
    wd = torch.randn(8, 1, 3, 3, device=cuda)
    ref_d = torch.nn.functional.conv2d(xd.double(), wd.double(), padding=1, groups=8)
    yd = torch.ops.convtune.conv2d(xd, wd, None, [1, 1], [1, 1], [1, 1], 8, "strict", "nhwc")
    assert yd.is_contiguous(memory_format=torch.channels_last) and rel_l2(yd, ref_d) < STRICT_BOUND
    with FakeTensorMode() as mode:
        fake = torch.ops.convtune.conv2d(mode.from_tensor(xd), mode.from_tensor(wd), None,
                                         [1, 1], [1, 1], [1, 1], 8, "strict", "nhwc")
        assert fake.shape == yd.shape and fake.stride() == yd.stride()
    with pytest.raises(Exception, match="layout"):
        torch.ops.convtune.conv2d(xd, wd, None, [1, 1], [1, 1], [1, 1], 8, "strict", "hwcn")


def test_every_operator_has_its_kernels():
    """Each operator has a CUDA kernel and conv2d an autograd formula,
    whichever of C++ and Python serves them (a C++ library from an older
    tree leaves its missing ones to Python)."""
    import convtune.ops as ops
    has = torch._C._dispatch_has_kernel_for_dispatch_key
    for name in ("conv2d", "conv2d_inference", "conv2d_backward_data", "conv2d_backward_filter"):
        assert has("convtune::" + name, "CUDA"), (name, ops.kernel)
    assert has("convtune::conv2d", "Autograd"), ops.kernel
    assert ops.formula in ("C++", "Python"), ops.formula
    assert (ops.formula == "C++") == (ops.kernel.startswith("C++") and "conv2d's formula" not in ops.kernel)


@gpu
def test_operator_cpp_kernel(cuda):
    """The C++ kernel serves the operator wherever it is built, reads any
    layout and alignment, orders a plan's calls on two streams, says what is
    wrong with bad arguments, and makes its plans again after close()."""
    import convtune.ops as ops
    built = os.path.isfile(os.path.join(os.path.dirname(convtune._lib._lib_path), ops.TORCH_OP_FILE))
    if not built or os.environ.get("CONVTUNE_TORCH_OP", "1") == "0":
        pytest.skip("the operator runs its Python kernel: " + ops.kernel)
    assert ops.kernel.startswith("C++"), ops.kernel
    # Built from this tree, it registers every operator and the formula.
    assert "Python for" not in ops.kernel and ops.formula == "C++", ops.kernel
    op = torch.ops.convtune.conv2d
    x = torch.randn(3, 16, 11, 10, device=cuda)
    w = torch.randn(24, 16, 3, 3, device=cuda)
    b = torch.randn(24, device=cuda)
    ref = torch.nn.functional.conv2d(x.double(), w.double(), b.double(), padding=1)
    y = op(x, w, b, [1, 1], [1, 1], [1, 1], 1, "strict")
    assert y.is_contiguous() and rel_l2(y, ref) < STRICT_BOUND, SEED
    # A dense layer in channels-last: the weight is made KRSC for the call.
    y_cl = op(x, w, b, [1, 1], [1, 1], [1, 1], 1, "strict", "nhwc")
    assert y_cl.is_contiguous(memory_format=torch.channels_last) and rel_l2(y_cl, ref) < STRICT_BOUND, SEED
    # Data at an offset that is not 16-byte aligned is copied first.
    shifted = torch.randn(x.numel() + 1, device=cuda)[1:].view_as(x).copy_(x)
    assert rel_l2(op(shifted, w, b, [1, 1], [1, 1], [1, 1], 1, "strict"), ref) < STRICT_BOUND, SEED
    # The same plan on another stream waits for its last call's workspace.
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        y_side = op(x, w, b, [1, 1], [1, 1], [1, 1], 1, "strict")
    torch.cuda.current_stream().wait_stream(side)
    assert rel_l2(y_side, ref) < STRICT_BOUND, SEED
    with pytest.raises(RuntimeError, match="math must be 'strict' or 'tf32'"):
        op(x, w, b, [1, 1], [1, 1], [1, 1], 1, "fast")
    with pytest.raises(RuntimeError, match="x has 16 channels, weight takes 8 per group x 1 groups"):
        op(x, w[:, :8].contiguous(), b, [1, 1], [1, 1], [1, 1], 1, "strict")
    with pytest.raises(RuntimeError, match="bias must be a tensor of shape"):
        op(x, w, b[:5], [1, 1], [1, 1], [1, 1], 1, "strict")
    with pytest.raises(RuntimeError, match="no plan for"):  # a filter larger than the padded input
        op(x, torch.randn(4, 16, 13, 3, device=cuda), None, [1, 1], [0, 0], [1, 1], 1, "strict")
    assert ops.close() >= 2  # the nchw and nhwc plans at least
    assert rel_l2(op(x, w, b, [1, 1], [1, 1], [1, 1], 1, "strict"), ref) < STRICT_BOUND, SEED
