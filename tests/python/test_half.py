"""Half precision through the binding: convtune.conv2d, plans and converted
layers in float16 and bfloat16 (sums in fp32, the bias float32), and
converted models under torch.autocast in eager mode, CUDA graphs,
torch.compile and mixed-precision training with a GradScaler.

Outputs are compared with a float64 reference of the same (rounded)
inputs, within each type's bound: the tuner's base bound (README: 2e-3
relative L2 for float16, 1e-2 for bfloat16) times its largest growth
factor, 4, which is what a plan may reach and still be validated.
"""
import copy
import os

import pytest

torch = pytest.importorskip("torch")
nn = torch.nn
F = torch.nn.functional

import convtune  # noqa: E402
import convtune.nn  # noqa: E402
import convtune.ops  # noqa: E402

gpu = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA GPU visible to torch")

SEED = int(os.environ["CONVTUNE_TEST_SEED"])
HALVES = (torch.float16, torch.bfloat16)
BOUND = {torch.float16: 4 * 2e-3, torch.bfloat16: 4 * 1e-2}


# The default contexts tune with the fast policy in this module (conftest.py says why).
pytestmark = pytest.mark.usefixtures("fast_default_contexts")


def rel_l2(y, ref):
    return ((y.double() - ref.double()).norm() / ref.double().norm()).item()


def reference(x, w, bias, stride, padding, groups):
    """conv2d of the same values in float64."""
    return F.conv2d(x.double(), w.double(), None if bias is None else bias.double(),
                    stride=stride, padding=padding, groups=groups)


SHAPES = [  # (x shape, w shape, stride, padding, groups)
    ((4, 32, 14, 14), (64, 32, 3, 3), 1, 1, 1),
    ((2, 64, 9, 11), (32, 64, 1, 1), 1, 0, 1),
    ((3, 48, 16, 16), (48, 1, 3, 3), 2, 1, 48),
]


@gpu
@pytest.mark.parametrize("dtype", HALVES, ids=str)
@pytest.mark.parametrize("channels_last", (False, True), ids=("nchw", "nhwc"))
@pytest.mark.parametrize("bias_dtype", (None, torch.float32, "same"), ids=("nobias", "fp32bias", "halfbias"))
def test_conv2d_half_matches_float64(dtype, channels_last, bias_dtype, ctx, cuda):
    fmt = torch.channels_last if channels_last else torch.contiguous_format
    for x_shape, w_shape, stride, padding, groups in SHAPES:
        x = torch.randn(x_shape, device=cuda).to(dtype).contiguous(memory_format=fmt)
        w = (torch.randn(w_shape, device=cuda) / (w_shape[1] * 9) ** 0.5).to(dtype)
        w = w.contiguous(memory_format=fmt)
        bias = None if bias_dtype is None else torch.randn(w_shape[0], device=cuda).to(
            dtype if bias_dtype == "same" else bias_dtype)
        y = convtune.conv2d(x, w, bias, stride, padding, groups=groups, context=ctx)
        ref = reference(x, w, bias, stride, padding, groups)
        what = (SEED, x_shape, w_shape, dtype, channels_last, bias_dtype)
        assert y.dtype == dtype and y.shape == ref.shape, what
        assert y.is_contiguous(memory_format=fmt), what
        assert torch.isfinite(y).all() and rel_l2(y, ref) < BOUND[dtype], (rel_l2(y, ref),) + what


@gpu
@pytest.mark.parametrize("dtype", HALVES, ids=str)
def test_plan_takes_its_dtype_and_says_so(dtype, ctx, cuda):
    plan = ctx.plan((2, 16, 8, 8), (32, 16, 3, 3), padding=1, bias=True, dtype=dtype)
    assert plan.info["dtype"] == str(dtype).replace("torch.", "")
    assert (" %s " % {torch.float16: "f16", torch.bfloat16: "bf16"}[dtype]) in " %s " % plan.key
    # One plan whatever the math: the half types ignore it.
    assert ctx.plan((2, 16, 8, 8), (32, 16, 3, 3), padding=1, bias=True, math="tf32",
                    dtype=dtype) is plan
    x = torch.randn(2, 16, 8, 8, device=cuda).to(dtype)
    w = torch.randn(32, 16, 3, 3, device=cuda).to(dtype)
    b = torch.randn(32, device=cuda)
    out = torch.full(plan.output_shape, float("nan"), device=cuda, dtype=dtype)  # poisoned
    assert plan(x, w, b, out=out) is out
    assert rel_l2(out, reference(x, w, b, 1, 1, 1)) < BOUND[dtype], SEED
    with pytest.raises(TypeError, match="x has dtype torch.float32; this plan takes"):
        plan(x.float(), w, b)
    with pytest.raises(TypeError, match="bias has dtype .*float32 whatever"):
        plan(x, w, b.to(dtype))
    with pytest.raises(TypeError, match="Input type .* and weight type .* should be the same"):
        convtune.conv2d(x, w.float(), context=ctx)
    with pytest.raises(TypeError, match="dtype must be"):
        ctx.plan((2, 16, 8, 8), (32, 16, 3, 3), dtype=torch.float64)


@gpu
@pytest.mark.parametrize("dtype", HALVES, ids=str)
@pytest.mark.parametrize("channels_last", (False, True), ids=("nchw", "nhwc"))
def test_conv2d_half_gradients(dtype, channels_last, ctx, cuda):
    fmt = torch.channels_last if channels_last else torch.contiguous_format
    x64 = torch.randn(4, 32, 12, 12, device=cuda, dtype=torch.float64)
    w64 = torch.randn(48, 32, 3, 3, device=cuda, dtype=torch.float64) / 17
    b64 = torch.randn(48, device=cuda, dtype=torch.float64)
    dy = torch.randn(4, 48, 12, 12, device=cuda).to(dtype).contiguous(memory_format=fmt)
    x = x64.to(dtype).contiguous(memory_format=fmt).requires_grad_()
    w = w64.to(dtype).contiguous(memory_format=fmt).requires_grad_()
    b = b64.float().requires_grad_()
    y = convtune.conv2d(x, w, b, padding=1, context=ctx)
    y.backward(dy)
    xr, wr, br = (t.detach().double().requires_grad_() for t in (x, w, b))
    F.conv2d(xr, wr, br, padding=1).backward(dy.double())
    for name, ours, ref in (("dx", x.grad, xr.grad), ("dw", w.grad, wr.grad), ("db", b.grad, br.grad)):
        assert ours.dtype == (torch.float32 if name == "db" else dtype), name
        assert rel_l2(ours, ref) < BOUND[dtype], (name, rel_l2(ours, ref), SEED, dtype)


class Block(nn.Module):
    """Conv, batch norm, ReLU, a depthwise and a 1x1 layer: the layers a
    mixed-precision vision model has."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(3, 32, 3, stride=2, padding=1, bias=False)
        self.bn = nn.BatchNorm2d(32)
        self.dw = nn.Conv2d(32, 32, 3, padding=1, groups=32)
        self.pw = nn.Conv2d(32, 64, 1)
        self.head = nn.Conv2d(64, 10, 3, padding=1)

    def forward(self, x):
        x = torch.relu(self.bn(self.stem(x)))
        x = torch.relu(self.pw(torch.relu(self.dw(x))))
        return self.head(x).float().mean((2, 3))


def pair(cuda, train=False):
    model = Block().to(cuda).train(train)
    ours = copy.deepcopy(model)
    report = convtune.convert(ours)
    assert not report.left, report
    return model, ours


def convtune_layers(model):
    return [m for m in model.modules() if isinstance(m, convtune.nn.Conv2d)]


@gpu
@pytest.mark.parametrize("dtype", HALVES, ids=str)
@pytest.mark.parametrize("channels_last", (False, True), ids=("nchw", "nhwc"))
def test_autocast_runs_convtune_in_its_type(dtype, channels_last, cuda):
    model, ours = pair(cuda)
    fmt = torch.channels_last if channels_last else torch.contiguous_format
    model, ours = model.to(memory_format=fmt), ours.to(memory_format=fmt)
    x = torch.randn(8, 3, 32, 32, device=cuda).contiguous(memory_format=fmt)
    with torch.inference_mode(), torch.autocast("cuda", dtype=dtype):
        for _ in range(3):  # the first call plans, the later ones take the operators
            y, ref = ours(x), model(x)
            assert rel_l2(y, ref) < BOUND[dtype], (SEED, dtype, channels_last)
        layer_out = ours.pw(torch.randn(8, 32, 16, 16, device=cuda).contiguous(memory_format=fmt))
        assert layer_out.dtype == dtype
        if channels_last:
            assert layer_out.is_contiguous(memory_format=torch.channels_last)
    for layer in convtune_layers(ours):
        assert not layer.fallbacks, layer.fallbacks
        assert layer.plan_info()["dtype"] == str(dtype).replace("torch.", "")


@gpu
def test_half_model_runs_convtune(cuda):
    """model.half() / .bfloat16(): half parameters, half bias (cast to float32 for the call)."""
    for dtype in HALVES:
        model, ours = pair(cuda)
        model, ours = model.to(dtype), ours.to(dtype)
        x = torch.randn(4, 3, 32, 32, device=cuda).to(dtype)
        with torch.inference_mode():
            for _ in range(2):
                y, ref = ours(x), model(x)
                assert y.dtype == torch.float32 and rel_l2(y, ref) < BOUND[dtype], (SEED, dtype)
        assert all(not layer.fallbacks for layer in convtune_layers(ours))


@gpu
def test_autocast_cuda_graph_and_compile(cuda, replay_as_graph):
    model, ours = pair(cuda)
    model, ours = model.to(memory_format=torch.channels_last), ours.to(memory_format=torch.channels_last)
    x = torch.randn(16, 3, 32, 32, device=cuda).contiguous(memory_format=torch.channels_last)
    with torch.inference_mode(), torch.autocast("cuda", dtype=torch.bfloat16):
        ref = model(x)
        ours(x)  # plans made before capture
        static_y, fresh = replay_as_graph(ours, x)
        assert rel_l2(static_y, model(fresh)) < BOUND[torch.bfloat16], SEED
        compiled = torch.compile(ours, fullgraph=True)
        assert rel_l2(compiled(x), ref) < BOUND[torch.bfloat16], SEED


@gpu
@pytest.mark.parametrize("dtype", HALVES, ids=str)
def test_mixed_precision_training_steps(dtype, cuda):
    """Five SGD steps under autocast (float16 with a GradScaler) land where
    PyTorch's own steps do, within the type's bound, for the loss and every
    parameter."""
    model, ours = pair(cuda, train=True)
    x = torch.randn(8, 3, 32, 32, device=cuda).contiguous(memory_format=torch.channels_last)
    target = torch.randint(0, 10, (8,), device=cuda)
    losses = {}
    for name, net in (("torch", model), ("convtune", ours)):
        net = net.to(memory_format=torch.channels_last)
        opt = torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9)
        scaler = torch.amp.GradScaler("cuda", enabled=dtype == torch.float16)
        losses[name] = []
        for _ in range(5):
            opt.zero_grad(set_to_none=True)
            with torch.autocast("cuda", dtype=dtype):
                loss = F.cross_entropy(net(x), target)
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
            losses[name].append(loss.item())
    for a, b in zip(losses["torch"], losses["convtune"]):
        assert abs(a - b) <= BOUND[dtype] * max(1.0, abs(a)), (losses, SEED)
    for (name, p), q in zip(ours.named_parameters(), model.parameters()):
        assert p.dtype == torch.float32 and rel_l2(p, q) < BOUND[dtype], (name, SEED)
    assert all(not layer.fallbacks for layer in convtune_layers(ours))


def test_autocast_kernel_is_registered():
    assert convtune.ops.autocast in ("C++", "Python"), convtune.ops.autocast
    has = torch._C._dispatch_has_kernel_for_dispatch_key
    for name in ("conv2d", "conv2d_inference"):
        assert has("convtune::" + name, "AutocastCUDA"), name
