"""convtune.fuse: BatchNorm folded into the convolution before it, ReLU fused
into its plan's epilogue, every Conv2d converted; and the operators'
activation argument, forward and gradients.

Each fused model is compared with the unfused model computed in float64
(BatchNorm with random running statistics, so that a missing or doubled
fold shows), in float32 and under bfloat16 / float16 autocast, eagerly,
as a CUDA graph and compiled.
"""
import copy
import os

import pytest

torch = pytest.importorskip("torch")
nn = torch.nn
F = torch.nn.functional

import convtune  # noqa: E402
import convtune.nn  # noqa: E402
from convtune import _lib  # noqa: E402

gpu = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA GPU visible to torch")

SEED = int(os.environ["CONVTUNE_TEST_SEED"])
# float32: the library's fp32 bound; half: the type's base bound times its
# growth factor (test_half.py), the BatchNorm-free graph rounding at other places.
BOUND = {torch.float32: 1e-4, torch.float16: 4 * 2e-3, torch.bfloat16: 4 * 1e-2}
_EPILOGUE = _lib.PROBLEM_FIELDS.index("epilogue")


# The default contexts tune with the fast policy in this module (conftest.py says why).
pytestmark = pytest.mark.usefixtures("fast_default_contexts")


def rel_l2(y, ref):
    return ((y.double() - ref.double()).norm() / ref.double().norm()).item()


class Net(nn.Module):
    """Each pattern fuse looks for, and the ones it must leave:
    conv-bn-relu (module ReLU, shared), conv-bn (then an add and the shared
    ReLU: only the fold), conv with bias then F.relu, conv without bias then
    torch.relu (no epilogue without a bias: left), a conv whose output has
    two users (left), and a BatchNorm after a non-conv (left)."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(3, 16, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(16)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(16, 16, 3, padding=1, groups=16, bias=False)
        self.bn2 = nn.BatchNorm2d(16)
        self.conv3 = nn.Conv2d(16, 32, 1)
        self.conv4 = nn.Conv2d(32, 32, 3, padding=1, bias=False)
        self.conv5 = nn.Conv2d(32, 32, 1)
        self.bn5 = nn.BatchNorm2d(32)
        self.head = nn.Conv2d(32, 8, 1)

    def forward(self, x):
        x = self.relu(self.bn1(self.stem(x)))
        x = self.relu(self.bn2(self.conv2(x)) + x)
        x = F.relu(self.conv3(x))
        x = torch.relu(self.conv4(x))
        y = self.conv5(x)
        x = self.bn5(y * 0.5 + y)
        return self.head(x).float().mean((2, 3))


def random_net(device):
    torch.manual_seed(SEED)
    net = Net()
    for m in net.modules():
        if isinstance(m, nn.BatchNorm2d):
            m.running_mean.uniform_(-0.5, 0.5)
            m.running_var.uniform_(0.5, 2.0)
            m.weight.data.uniform_(0.5, 1.5)
            m.bias.data.uniform_(-0.5, 0.5)
    return net.to(device).eval()


def reference(net, x):
    with torch.no_grad():
        return copy.deepcopy(net).double()(x.double())


def fused_layers(model):
    return {name: m for name, m in model.named_modules() if isinstance(m, convtune.nn.Conv2d)}


@gpu
def test_report_names_what_was_folded_and_fused(cuda):
    net = random_net(cuda)
    fused, report = convtune.fuse(net)
    assert sorted(report.folded) == ["conv2", "stem"], report
    assert sorted(report.relu) == ["conv3", "stem"], report
    assert not report.left and sorted(report.converted) == sorted(fused_layers(fused)), report
    assert "2 BatchNorm folded, 2 ReLU fused" in str(report)
    layers = fused_layers(fused)
    assert layers["stem"].activation == "relu" and layers["stem"].bias is not None
    assert layers["conv4"].activation is None and layers["conv4"].bias is None
    # The model given is left as it was.
    assert isinstance(net.bn1, nn.BatchNorm2d) and type(net.stem) is nn.Conv2d
    # A model converted before is fused the same way (its layers traced as leaves).
    convtune.convert(net)
    again = convtune.fuse(net)[1]
    assert (sorted(again.folded), sorted(again.relu)) == (sorted(report.folded), sorted(report.relu))


@gpu
def test_fused_model_matches_float64_float32(cuda):
    net = random_net(cuda)
    fused, _ = convtune.fuse(net, math="strict")
    x = torch.randn(4, 3, 24, 24, device=cuda)
    ref = reference(net, x)
    with torch.no_grad():
        for _ in range(2):  # the first call plans, the second takes the launchers
            assert rel_l2(fused(x), ref) < BOUND[torch.float32], SEED
    layers = fused_layers(fused)
    for name in ("stem", "conv3"):
        assert layers[name]._last_plan._problem_fields[_EPILOGUE] == _lib.EPILOGUE_BIAS_RELU, name
    assert all(not m.fallbacks for m in layers.values())


@gpu
@pytest.mark.parametrize("dtype", (torch.float16, torch.bfloat16), ids=str)
def test_fused_model_under_autocast_graph_and_compile(dtype, cuda, replay_as_graph):
    net = random_net(cuda).to(memory_format=torch.channels_last)
    fused, _ = convtune.fuse(net)
    x = torch.randn(8, 3, 24, 24, device=cuda).contiguous(memory_format=torch.channels_last)
    ref = reference(net, x)
    with torch.inference_mode(), torch.autocast("cuda", dtype=dtype):
        for _ in range(3):  # planning call, then the operators
            assert rel_l2(fused(x), ref) < BOUND[dtype], (SEED, dtype)
        static_y, fresh = replay_as_graph(fused, x)
        assert rel_l2(static_y, reference(net, fresh)) < BOUND[dtype], (SEED, dtype)
        compiled = torch.compile(fused, fullgraph=True)
        assert rel_l2(compiled(x), ref) < BOUND[dtype], (SEED, dtype)
    assert all(not m.fallbacks for m in fused_layers(fused).values())


def test_on_the_cpu_pytorch_runs_each_layer_with_its_relu():
    """A CPU model fuses the same way; its layers run PyTorch's forward
    (convtune computes on CUDA tensors), the fused ReLU applied after it."""
    net = random_net("cpu")
    fused, report = convtune.fuse(net)
    assert sorted(report.relu) == ["conv3", "stem"], report
    x = torch.randn(2, 3, 16, 16)
    with torch.no_grad():
        assert rel_l2(fused(x), reference(net, x)) < 1e-5, SEED
    assert all(m.fallbacks for m in fused_layers(fused).values())


def test_layers_convert_leaves_keep_their_relu():
    """float64 parameters: convert leaves the layers (PyTorch's forward has no
    epilogue), so each ReLU stays in the graph; BatchNorm is folded all the same."""
    net = random_net("cpu").double()
    fused, report = convtune.fuse(net)
    assert report.relu == [] and sorted(report.folded) == ["conv2", "stem"], report
    assert len(report.left) == 6 and not report.converted, report
    x = torch.randn(2, 3, 16, 16, dtype=torch.float64)
    with torch.no_grad():
        assert rel_l2(fused(x), net(x)) < 1e-12, SEED


@gpu
def test_fuse_refuses_a_model_in_training_mode(cuda):
    net = random_net(cuda).train()
    with pytest.raises(ValueError, match="eval"):
        convtune.fuse(net)
    assert all(m.training for m in net.modules())


@gpu
def test_activation_needs_a_bias(cuda):
    layer = convtune.nn.Conv2d(4, 4, 3, bias=False).to(cuda)
    with pytest.raises(ValueError, match="bias"):
        layer.activation = "relu"
    with pytest.raises(ValueError):
        convtune.nn.Conv2d(4, 4, 3).activation = "gelu"
    x, w = torch.randn(1, 4, 8, 8, device=cuda), torch.randn(4, 4, 3, 3, device=cuda)
    with pytest.raises((RuntimeError, ValueError), match="bias"):
        torch.ops.convtune.conv2d(x, w, None, [1, 1], [1, 1], [1, 1], 1, "strict", "nchw", "relu")


@gpu
@pytest.mark.parametrize("dtype", (torch.float32, torch.bfloat16), ids=str)
def test_operator_relu_forward_and_gradients(dtype, cuda):
    """torch.ops.convtune.conv2d(..., activation="relu") against relu(F.conv2d)
    in float64: the output, and dx, dw, db through the fused ReLU's mask."""
    torch.manual_seed(SEED)
    x = torch.randn(2, 8, 12, 12, device=cuda, dtype=dtype, requires_grad=True)
    w = torch.randn(16, 8, 3, 3, device=cuda, dtype=dtype, requires_grad=True)
    b = torch.randn(16, device=cuda, requires_grad=True)
    y = torch.ops.convtune.conv2d(x, w, b, [1, 1], [1, 1], [1, 1], 1, "strict", "nchw", "relu")
    xr, wr, br = (t.detach().double().requires_grad_() for t in (x, w, b))
    ref = F.relu(F.conv2d(xr, wr, br, padding=1))
    assert (y >= 0).all() and (y == 0).any()
    assert rel_l2(y, ref) < BOUND[dtype], (SEED, dtype)
    dy = torch.randn_like(y)
    y.backward(dy)
    ref.backward(dy.double())
    for name, ours, want in (("dx", x.grad, xr.grad), ("dw", w.grad, wr.grad), ("db", b.grad, br.grad)):
        assert rel_l2(ours, want) < BOUND[dtype], (name, SEED, dtype)


def test_operator_fake_kernel_takes_the_activation():
    """The operators' activation argument as torch.compile traces it, through
    the fake kernel (no GPU needed): the output's shape and format, and the
    refusals of "relu" without a bias and of an unknown activation."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    args = ([1, 1], [1, 1], [1, 1], 1, "strict", "nhwc")
    with FakeTensorMode() as mode:
        x, w, b = (mode.from_tensor(t) for t in (torch.empty(2, 4, 9, 9), torch.empty(8, 4, 3, 3),
                                                 torch.empty(8)))
        for op in (torch.ops.convtune.conv2d, torch.ops.convtune.conv2d_inference):
            y = op(x, w, b, *args, "relu")
            assert y.shape == (2, 8, 9, 9) and y.is_contiguous(memory_format=torch.channels_last)
            with pytest.raises(Exception, match="needs a bias"):
                op(x, w, None, *args, "relu")
            with pytest.raises(Exception, match="activation must be"):
                op(x, w, b, *args, "gelu")
