"""GPU tests: a Context's device memory comes from PyTorch's caching allocator
(python/convtune/_allocator.py, _torch_alloc.cpp): tuning buffers show in
torch.cuda.max_memory_allocated while a shape tunes, a plan's workspace in
torch.cuda.memory_allocated while the plan lives, and all of it is given back when
the context closes; allocator="cuda" keeps it outside torch, which is how these tests
know they measure the allocator.  The operator's own contexts (torch.ops.convtune)
tune in torch's memory too.

Needs torch, a CUDA GPU, and the operator's C++ library built beside libconvtune.so
(where it is not, the tests that need it are skipped, saying so).
"""
import math
import os

import pytest

torch = pytest.importorskip("torch")
F = torch.nn.functional

import convtune  # noqa: E402
from convtune import _allocator, _plan  # noqa: E402

gpu = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA GPU visible to torch")
_functions, _why_not = _allocator.torch_functions()
torch_allocator = pytest.mark.skipif(_functions is None, reason="no torch allocator: %s" % _why_not)

SEED = int(os.environ["CONVTUNE_TEST_SEED"])
# Relative L2 error against a float64 reference: loose for strict fp32 (the sums here
# run to 12544 products), tight against memory that is not the plan's own.
BOUND = 1e-4
# torch's caching allocator rounds a block up to 512 bytes, and may hand out a cached
# block up to 1 MiB larger than asked for without splitting it (and count all of it).
BLOCK = 512
UNSPLIT = 1 << 20


def rounded(n):
    return -(-n // BLOCK) * BLOCK


def tuning_tensor_bytes(n, c, h, w, k, r, s, p, q):
    """What a forward fp32 tuning allocates before any candidate: x, w, y, the fp32
    reference of y and the bias."""
    return 4 * (n * c * h * w + k * c * r * s + 2 * n * k * p * q + k)


def prototype_bytes(plan):
    """What the Python Plan itself holds of torch's memory: the prototype of a small
    output (_plan.Plan._output_maker), freed with the Plan object, not with close()."""
    size = 4 * math.prod(plan.output_shape)
    return rounded(size) if size <= _plan._PROTOTYPE_MAX_BYTES else 0


def settled():
    torch.cuda.synchronize()
    return torch.cuda.memory_allocated()


def rel_l2(y, ref):
    return ((y.double() - ref).norm() / ref.norm()).item()


@gpu
@torch_allocator
def test_tuning_buffers_come_from_torch(tmp_path):
    torch.cuda.set_device(0)
    start = settled()
    ctx = convtune.Context(device=0, cache=tmp_path / "plans.db", policy="fast")
    assert (ctx.allocator, ctx.allocator_note) == ("torch", "")
    n, c, h, w, k = 8, 32, 40, 40, 48
    before = settled()
    assert before == start, "making a context allocates nothing"
    torch.cuda.reset_peak_memory_stats()
    plan = ctx.plan((n, c, h, w), (k, c, 3, 3), padding=1)
    peak = torch.cuda.max_memory_allocated()
    assert plan.info["source"] == "tuned"
    needed = tuning_tensor_bytes(n, c, h, w, k, 3, 3, h, w)
    assert peak - before >= needed, "peak %d bytes over the start, the tuning's tensors %d" % (
        peak - before, needed)
    # Tuning gave its buffers back; the plan's workspace alone is left.
    ws = plan.info["workspace_bytes"]
    held = settled() - before - prototype_bytes(plan)
    assert rounded(ws) <= held <= (rounded(ws) + UNSPLIT if ws else 0), (ws, held)
    ctx.close()
    assert settled() == start + prototype_bytes(plan), "the context gave back everything"


@gpu
def test_cuda_allocator_stays_outside_torch(tmp_path):
    torch.cuda.set_device(0)
    ctx = convtune.Context(device=0, cache=tmp_path / "plans.db", policy="fast", allocator="cuda")
    assert ctx.allocator == "cuda" and ctx.allocator_note == "allocator='cuda'"
    before = settled()
    torch.cuda.reset_peak_memory_stats()
    plan = ctx.plan((8, 32, 40, 40), (48, 32, 3, 3), padding=1)
    assert plan.info["source"] == "tuned"
    assert torch.cuda.max_memory_allocated() == before + prototype_bytes(plan)
    assert settled() == before + prototype_bytes(plan)
    ctx.close()


# Shapes whose plans are likely to hold a workspace (the test needs one; it is skipped,
# naming the plans, where none of them does): kwargs of Context.plan.
WORKSPACE_CANDIDATES = (
    dict(x_shape=(16, 64, 28, 28), w_shape=(64, 64, 3, 3), padding=1, direction="bwd_filter"),
    dict(x_shape=(16, 64, 56, 56), w_shape=(64, 64, 3, 3), padding=1),
    dict(x_shape=(16, 64, 56, 56), w_shape=(64, 64, 3, 3), padding=1, layout="nchw_krsc"),
    dict(x_shape=(8, 64, 64, 64), w_shape=(64, 64, 7, 7), padding=3),
)


def check_plan_runs(plan, shapes):
    """The plan's pass against torch's, in float64."""
    x = torch.randn(shapes["x_shape"], device="cuda")
    w = torch.randn(shapes["w_shape"], device="cuda")
    padding = shapes["padding"]
    if shapes.get("direction") == "bwd_filter":
        dy = torch.randn_like(F.conv2d(x, w, padding=padding))
        got = plan.backward_filter(x, dy)
        ref = torch.nn.grad.conv2d_weight(x.double(), w.shape, dy.double(), padding=padding)
    else:
        if shapes.get("layout") == "nchw_krsc":
            w = w.contiguous(memory_format=torch.channels_last)
        got = plan(x, w)
        ref = F.conv2d(x.double(), w.double(), padding=padding)
    assert rel_l2(got, ref) < BOUND, "seed %d" % SEED


@gpu
@torch_allocator
def test_plan_workspace_in_memory_allocated(tmp_path):
    torch.cuda.set_device(0)
    torch.manual_seed(SEED)
    ctx = convtune.Context(device=0, cache=tmp_path / "plans.db", policy="fast")
    seen = []
    for shapes in WORKSPACE_CANDIDATES:
        before = settled()
        plan = ctx.plan(**shapes)
        held = settled() - before - prototype_bytes(plan)
        ws = plan.info["workspace_bytes"]
        seen.append("%s %s: %d bytes" % (plan.info["algorithm"], plan.info["config"], ws))
        if ws == 0:
            assert held == 0, "a plan without a workspace holds %d bytes" % held
            continue
        assert rounded(ws) <= held <= rounded(ws) + UNSPLIT, (ws, held)
        check_plan_runs(plan, shapes)  # in torch's memory
        torch.cuda.synchronize()
        kept = settled()
        plan.close()
        assert kept - settled() == held, "the workspace went back with its plan"
        ctx.close()
        return
    ctx.close()
    pytest.skip("no plan here needed a workspace: " + "; ".join(seen))


@gpu
@torch_allocator
def test_operator_tunes_in_torch_memory():
    if not convtune.ops.kernel.startswith("C++"):
        pytest.skip("the operator runs its Python kernel: %s" % convtune.ops.kernel)
    torch.manual_seed(SEED)
    n, c, h, w, k = 3, 24, 37, 29, 40  # a shape no other test tunes in the default cache
    x = torch.randn(n, c, h, w, device="cuda")
    wt = torch.randn(k, c, 3, 3, device="cuda")
    before = settled()
    torch.cuda.reset_peak_memory_stats()
    y = torch.ops.convtune.conv2d(x, wt, None, [1, 1], [1, 1], [1, 1], 1, "strict", "nchw")
    peak = torch.cuda.max_memory_allocated()
    # Its output alone is n*k*h*w floats; the tuning needed more than that of torch.
    needed = tuning_tensor_bytes(n, c, h, w, k, 3, 3, h, w)
    assert peak - before >= needed, (peak - before, needed)
    assert rel_l2(y, F.conv2d(x.double(), wt.double(), padding=1)) < BOUND, "seed %d" % SEED
