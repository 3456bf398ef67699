"""Tests of convtune's backward passes from Python: backward plans
(Context.plan(direction=...), Plan.backward_data / backward_filter), the
differentiable convtune.conv2d and convtune.nn.Conv2d, and training a
converted model, each against PyTorch run in float64 on fresh random
inputs (seed in the failures, CONVTUNE_TEST_SEED replays it).  Strict fp32
throughout; plans tuned with policy "fast".
"""
import copy
import os
import random

import pytest

torch = pytest.importorskip("torch")
nn = torch.nn
F = torch.nn.functional

import convtune  # noqa: E402
import convtune.nn  # noqa: E402

gpu = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA GPU visible to torch")
SEED = int(os.environ["CONVTUNE_TEST_SEED"])
STRICT_BOUND = 1e-5
# Through a fused ReLU: an output within rounding of zero may fall on the
# other side of it in float32 than in float64, and zero its gradient.
RELU_BOUND = 1e-4


def rel_l2(y, ref):
    """||y - ref|| / ||ref||; against an all-zero reference (a fused ReLU
    can zero every output of a tiny random case, and so every gradient),
    ||y - ref|| itself, which only an exact zero passes."""
    diff, norm = (y.double() - ref.double()).norm().item(), ref.double().norm().item()
    return diff / norm if norm > 0 else diff


def random_conv(rng):
    """(x shape, w shape, stride, padding, dilation, groups) of a random valid convolution."""
    while True:
        groups = rng.choice((1, 1, 2, 3))
        c, k = groups * rng.randint(1, 5), groups * rng.randint(1, 5)
        r, s = rng.randint(1, 4), rng.randint(1, 4)
        stride, dil = (rng.randint(1, 3), rng.randint(1, 3)), (rng.randint(1, 2), rng.randint(1, 2))
        pad = (rng.randint(0, 2), rng.randint(0, 2))
        h, w = rng.randint(3, 17), rng.randint(3, 17)
        if all(hw + 2 * p >= d * (f - 1) + 1 for hw, p, d, f in ((h, pad[0], dil[0], r), (w, pad[1], dil[1], s))):
            return (rng.randint(1, 3), c, h, w), (k, c // groups, r, s), stride, pad, dil, groups


@gpu
@pytest.mark.parametrize("layout", ["nchw", "nhwc"])
def test_backward_plans_match_pytorch(ctx, cuda, layout):
    rng = random.Random(SEED)
    fmt = {"memory_format": torch.channels_last} if layout == "nhwc" else {}
    for case in range(6):
        x_shape, w_shape, stride, pad, dil, groups = random_conv(rng)
        x = torch.randn(x_shape, device=cuda).contiguous(**fmt)
        w = torch.randn(w_shape, device=cuda).contiguous(**fmt)
        y_shape = F.conv2d(x, w, None, stride, pad, dil, groups).shape
        dy = torch.randn(y_shape, device=cuda).contiguous(**fmt)
        args = (x_shape, w_shape, stride, pad, dil, groups)
        data = ctx.plan(*args, math="strict", layout=layout, direction="bwd_data")
        filt = ctx.plan(*args, math="strict", layout=layout, direction="bwd_filter")
        assert data.output_shape == x_shape and filt.output_shape == w_shape
        assert data.info["direction"] == "bwd_data" and filt.info["direction"] == "bwd_filter"
        dx, dw = data.backward_data(dy, w), filt.backward_filter(x, dy)
        ref_dx = torch.nn.grad.conv2d_input(x_shape, w.double(), dy.double(), stride, pad, dil, groups)
        ref_dw = torch.nn.grad.conv2d_weight(x.double(), w_shape, dy.double(), stride, pad, dil, groups)
        assert rel_l2(dx, ref_dx) < STRICT_BOUND, (SEED, case, args, data.info)
        assert rel_l2(dw, ref_dw) < STRICT_BOUND, (SEED, case, args, filt.info)
        if layout == "nhwc":
            assert dx.is_contiguous(memory_format=torch.channels_last)
        out = torch.full(x_shape, float("nan"), device=cuda).contiguous(**fmt)
        assert data.backward_data(dy, w, out=out) is out and rel_l2(out, ref_dx) < STRICT_BOUND


@gpu
def test_passes_refuse_other_calls(ctx, cuda):
    x = torch.randn(2, 4, 9, 9, device=cuda)
    w = torch.randn(6, 4, 3, 3, device=cuda)
    dy = torch.randn(2, 6, 9, 9, device=cuda)
    data = ctx.plan(x.shape, w.shape, padding=1, direction="bwd_data")
    with pytest.raises(ValueError, match=r"runs plan.backward_data\(dy, w\), not plan\(x, w, bias\)"):
        data(x, w)
    with pytest.raises(ValueError, match="not plan.backward_filter"):
        data.backward_filter(x, dy)
    with pytest.raises(ValueError, match="dy has shape"):
        data.backward_data(x, w)
    forward = ctx.plan(x.shape, w.shape, padding=1)
    assert forward.info["direction"] == "fwd"
    # Backward calls take the compiled path where forward calls do.
    assert data.info["call"] == forward.info["call"]
    with pytest.raises(ValueError, match="runs plan"):
        forward.backward_data(dy, w)
    with pytest.raises(ValueError, match="no bias or activation"):
        ctx.plan(x.shape, w.shape, padding=1, bias=True, direction="bwd_filter")
    with pytest.raises(ValueError, match="direction"):
        ctx.plan(x.shape, w.shape, direction="backward")


@gpu
@pytest.mark.parametrize("activation", [None, "bias", "relu"])
def test_conv2d_gradients_match_pytorch(ctx, cuda, activation):
    rng = random.Random(SEED + 1)
    for case in range(6):
        x_shape, w_shape, stride, pad, dil, groups = random_conv(rng)
        x = torch.randn(x_shape, device=cuda, requires_grad=True)
        w = torch.randn(w_shape, device=cuda, requires_grad=True)
        b = torch.randn(w_shape[0], device=cuda, requires_grad=True) if activation else None
        y = convtune.conv2d(x, w, b, stride, pad, dil, groups, activation="relu" if activation == "relu" else None,
                            math="strict", context=ctx)
        g = torch.randn_like(y)
        (y * g).sum().backward()
        xd, wd = x.detach().double().requires_grad_(), w.detach().double().requires_grad_()
        bd = b.detach().double().requires_grad_() if b is not None else None
        ref = F.conv2d(xd, wd, bd, stride, pad, dil, groups)
        if activation == "relu":
            ref = torch.relu(ref)
        (ref * g.double()).sum().backward()
        bound = RELU_BOUND if activation == "relu" else STRICT_BOUND
        what = (SEED, case, x_shape, w_shape, stride, pad, dil, groups)
        assert rel_l2(y, ref) < bound, what
        assert rel_l2(x.grad, xd.grad) < bound, what
        assert rel_l2(w.grad, wd.grad) < bound, what
        if b is not None:
            assert rel_l2(b.grad, bd.grad) < bound, what


@gpu
def test_gradcheck_through_fp32(ctx, cuda):
    """torch.autograd.gradcheck on a tiny case: the convolution is linear in
    each input, so central differences in float32 with a large step are exact
    but for rounding, and the tolerances can stay at 1e-2."""
    torch.manual_seed(SEED)
    x = torch.randn(1, 2, 5, 6, device=cuda, requires_grad=True)
    w = torch.randn(3, 2, 3, 3, device=cuda, requires_grad=True)
    b = torch.randn(3, device=cuda, requires_grad=True)

    def fn(x, w, b):
        return convtune.conv2d(x, w, b, stride=(1, 2), padding=1, math="strict", context=ctx)

    with pytest.warns(UserWarning):  # float32 inputs: gradcheck warns, and checks anyway
        assert torch.autograd.gradcheck(fn, (x, w, b), eps=1e-2, atol=1e-2, rtol=1e-2)


@gpu
def test_double_backward_is_refused(ctx, cuda):
    x = torch.randn(1, 2, 6, 6, device=cuda, requires_grad=True)
    w = torch.randn(2, 2, 3, 3, device=cuda, requires_grad=True)
    y = convtune.conv2d(x, w, context=ctx)
    (gx,) = torch.autograd.grad(y.square().sum(), x, create_graph=True)
    with pytest.raises(RuntimeError):
        gx.sum().backward()
    with pytest.raises(RuntimeError, match="out="):
        convtune.conv2d(x, w, context=ctx, out=torch.empty_like(y))


class SmallNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(3, 16, 3, padding=1)
        self.body = nn.Conv2d(16, 16, 3, padding=1, bias=False)
        self.down = nn.Conv2d(16, 32, 3, stride=2, padding=1)
        self.dw = nn.Conv2d(32, 32, 3, padding=1, groups=32)
        self.head = nn.Linear(32, 5)

    def forward(self, x):
        x = torch.relu(self.stem(x))
        x = torch.relu(self.body(x)) + x
        x = torch.relu(self.dw(torch.relu(self.down(x))))
        return self.head(x.mean((2, 3)))


@gpu
@pytest.mark.parametrize("channels_last", [False, True])
def test_converted_model_trains_like_pytorch(ctx, cuda, strict_math, channels_last):
    torch.manual_seed(SEED)
    fmt = torch.channels_last if channels_last else torch.contiguous_format
    plain = SmallNet().to(cuda).to(memory_format=fmt)
    ours = copy.deepcopy(plain)
    report = convtune.convert(ours, math="strict", context=ctx)
    assert len(report.converted) == 4 and not report.left
    x = torch.randn(4, 3, 16, 16, device=cuda).contiguous(memory_format=fmt)
    target = torch.randint(0, 5, (4,), device=cuda)
    optimizers = [torch.optim.SGD(m.parameters(), lr=0.05, momentum=0.9) for m in (plain, ours)]
    for step in range(5):
        losses = []
        for model, opt in zip((plain, ours), optimizers):
            opt.zero_grad()
            loss = F.cross_entropy(model(x), target)
            loss.backward()
            opt.step()
            losses.append(loss.item())
        assert abs(losses[0] - losses[1]) <= 1e-4 * abs(losses[0]), (SEED, step, losses)
    for (name, p), q in zip(plain.named_parameters(), ours.parameters()):
        assert rel_l2(q, p) < 1e-4, (SEED, name)
    layers = [m for m in ours.modules() if isinstance(m, convtune.nn.Conv2d)]
    assert all(not m.fallbacks for m in layers), [m.fallbacks for m in layers]
    assert all(m.plan_info()["algorithm"] for m in layers)


def _step_matches_float64(layer, ref, shape, cuda):
    """One forward and backward of `layer` and of `ref` (its float64 twin)
    on a fresh input of `shape`: output and every gradient within the strict
    bound of the float64 ones."""
    x = torch.randn(shape, device=cuda, requires_grad=True)
    xr = x.detach().double().requires_grad_()
    layer.zero_grad()
    ref.zero_grad()
    y = layer(x)
    g = torch.randn_like(y)
    (y * g).sum().backward()
    yr = ref(xr)
    (yr * g.double()).sum().backward()
    assert rel_l2(y, yr) < STRICT_BOUND, (SEED, shape)
    for got, want in ((x.grad, xr.grad), (layer.weight.grad, ref.weight.grad),
                      (layer.bias.grad, ref.bias.grad)):
        assert rel_l2(got, want) < STRICT_BOUND, (SEED, shape)


@gpu
def test_training_calls_take_the_fast_path(ctx, cuda, strict_math):
    """In training, a converted layer's repeated call runs its last plan's
    launcher inside the autograd function (not the full path), with the
    same gradients; an input the last plan does not fit takes the full path
    (and its own plan), and so does the first shape again after it."""
    layer = convtune.nn.Conv2d(4, 6, 3, padding=1, math="strict", context=ctx).to(cuda)
    ref = nn.Conv2d(4, 6, 3, padding=1).to(cuda)
    ref.load_state_dict(layer.state_dict())
    ref = ref.double()
    full = []
    eager = layer._eager_forward
    layer._eager_forward = lambda inp: (full.append(tuple(inp.shape)), eager(inp))[1]
    shapes = [(2, 4, 9, 11), (2, 4, 9, 11), (3, 4, 7, 8), (2, 4, 9, 11)]
    for shape in shapes:
        _step_matches_float64(layer, ref, shape, cuda)
    assert full == [shapes[0], shapes[2], shapes[3]], full
    assert not layer.fallbacks


def _bits(t):
    return t.detach().contiguous().view(torch.int32).cpu()


@gpu
def test_deterministic_mode_repeats_gradients(ctx, cuda, strict_math):
    """With torch.use_deterministic_algorithms(True), a converted layer's
    forward and backward plans are deterministic ones (their keys end in
    " det"), its gradients match PyTorch's in float64, and two backward
    passes on the same inputs give the same bits; switched off, the layer
    takes its other plans again."""
    torch.manual_seed(SEED)
    layer = convtune.nn.Conv2d(32, 48, 3, padding=1, math="strict", context=ctx).to(cuda)
    ref = nn.Conv2d(32, 48, 3, padding=1).to(cuda)
    ref.load_state_dict(layer.state_dict())
    ref = ref.double()
    x = torch.randn(8, 32, 20, 20, device=cuda, requires_grad=True)
    g = torch.randn(8, 48, 20, 20, device=cuda)
    xr = x.detach().double().requires_grad_()
    (ref(xr) * g.double()).sum().backward()

    def gradients():
        x.grad = None
        layer.zero_grad()
        (layer(x) * g).sum().backward()
        return x.grad.clone(), layer.weight.grad.clone(), layer.bias.grad.clone()

    was = torch.are_deterministic_algorithms_enabled()
    torch.use_deterministic_algorithms(True, warn_only=True)
    try:
        first, again = gradients(), gradients()
        plan = layer._last_plan
        data = ctx.plan((8, 32, 20, 20), (48, 32, 3, 3), 1, 1, direction="bwd_data")
        filt = ctx.plan((8, 32, 20, 20), (48, 32, 3, 3), 1, 1, direction="bwd_filter")
    finally:
        torch.use_deterministic_algorithms(was)
    for p in (plan, data, filt):
        assert p.key.endswith(" det") and p.info["deterministic"], p.key
    assert plan._backward_plans[convtune._lib.BACKWARD_FILTER] is filt
    for a, b, want in zip(first, again, (xr.grad, ref.weight.grad, ref.bias.grad)):
        assert rel_l2(a, want) < STRICT_BOUND, SEED
        assert torch.equal(_bits(a), _bits(b)), SEED
    gradients()
    assert not layer._last_plan.key.endswith(" det")


@gpu
def test_training_calls_run_the_operator(cuda, strict_math):
    """A converted layer on the default context, in training, calls the
    operator after its first call (with the C++ kernels, its formula runs
    the backward passes in C++): the same gradients as PyTorch's in
    float64, for the layer's shape and another one."""
    import convtune.ops as ops
    if ops.formula != "C++":  # nn.Conv2d then trains through convtune.conv2d's function
        pytest.skip("the operator's autograd formula is Python: " + ops.kernel)
    torch.manual_seed(SEED)
    layer = convtune.nn.Conv2d(8, 12, 3, padding=1, stride=2, math="strict").to(cuda)
    ref = nn.Conv2d(8, 12, 3, padding=1, stride=2).to(cuda)
    ref.load_state_dict(layer.state_dict())
    ref = ref.double()
    plans_before = ops._cpp.convtune_torch_op_plans()
    for shape in [(4, 8, 15, 13), (4, 8, 15, 13), (4, 8, 15, 13), (2, 8, 9, 9)]:
        _step_matches_float64(layer, ref, shape, cuda)
    # The operator's plans: forward, backward-data and backward-filter of both shapes.
    assert ops._cpp.convtune_torch_op_plans() - plans_before == 6
    assert not layer.fallbacks
