"""Shared by the binding's tests: one random seed for the session, the
library's default cache in a temp file, a context and the CUDA device."""
import os

import pytest

# Fresh random inputs every run; every failure message names the seed, and
# CONVTUNE_TEST_SEED replays it.  Set here, before the test modules read it.
os.environ.setdefault("CONVTUNE_TEST_SEED", str(int.from_bytes(os.urandom(4), "little")))


@pytest.fixture(scope="session", autouse=True)
def default_cache(tmp_path_factory):
    """Points the library's default cache (used by the default contexts of
    conv2d, convtune.nn and convtune.ops) at a temp file."""
    old = os.environ.get("CONVTUNE_CACHE")
    os.environ["CONVTUNE_CACHE"] = str(tmp_path_factory.mktemp("default-cache") / "cache.db")
    yield
    if old is None:
        os.environ.pop("CONVTUNE_CACHE", None)
    else:
        os.environ["CONVTUNE_CACHE"] = old


@pytest.fixture(scope="session", autouse=True)
def plans_not_raced():
    """Converted layers always run their plans (race_pytorch off): the
    tests check convtune's results and counters, which a race PyTorch's
    forward won (a timing) would replace with PyTorch's.  The race's own
    tests (test_nn.py) turn it on for their layers."""
    try:
        import convtune.nn
    except ImportError:  # no torch: the binding's torch tests skip
        yield
        return
    old = convtune.nn.Conv2d.race_pytorch
    convtune.nn.Conv2d.race_pytorch = False
    yield
    convtune.nn.Conv2d.race_pytorch = old


@pytest.fixture(scope="module")
def ctx(tmp_path_factory):
    """A context per test module, tuning with policy "fast" into a temp cache."""
    import convtune
    c = convtune.Context(cache=tmp_path_factory.mktemp("cache") / "plans.db", policy="fast")
    yield c
    c.close()


@pytest.fixture
def cuda():
    """The current CUDA device, torch seeded with the session's seed."""
    import torch
    torch.manual_seed(int(os.environ["CONVTUNE_TEST_SEED"]))
    return torch.device("cuda", torch.cuda.current_device())


@pytest.fixture
def strict_math():
    """PyTorch's cuDNN in IEEE fp32 (converted layers follow the flag)."""
    import torch
    old = torch.backends.cudnn.allow_tf32
    torch.backends.cudnn.allow_tf32 = False
    yield
    torch.backends.cudnn.allow_tf32 = old


@pytest.fixture(scope="module")
def fast_default_contexts():
    """The default contexts (converted layers, conv2d without context=)
    tune with the fast policy in the module that asks for this: a half
    channels-last graph with a fused bias is a runtime-compiled cuDNN
    engine per config (about a second each), and under the default policy
    (exhaustive where no neighbours are tuned) the autocast tests took
    minutes.  A context reads the variable when it is made, so the default
    ones are closed (made again on next use) on the way in and out."""
    import convtune
    old = os.environ.get("CONVTUNE_POLICY")
    os.environ["CONVTUNE_POLICY"] = "fast"
    for ctx in list(convtune._default_contexts.values()):
        ctx.close()
    yield
    for ctx in list(convtune._default_contexts.values()):
        ctx.close()
    if old is None:
        os.environ.pop("CONVTUNE_POLICY", None)
    else:
        os.environ["CONVTUNE_POLICY"] = old


def _replay_as_graph(model, x):
    """(output, input) of `model` captured once into a CUDA graph on a copy
    of x (after a warm-up call on a side stream, as torch.cuda.graphs asks)
    and replayed on fresh random values of x's shape."""
    import torch
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        model(x)
    torch.cuda.current_stream().wait_stream(stream)
    graph, static_x = torch.cuda.CUDAGraph(), x.clone()
    with torch.cuda.graph(graph):
        static_y = model(static_x)
    fresh = torch.randn_like(x)
    static_x.copy_(fresh)
    graph.replay()
    torch.cuda.synchronize()
    return static_y, fresh


@pytest.fixture
def replay_as_graph():
    """_replay_as_graph, for the tests that capture a model."""
    return _replay_as_graph
