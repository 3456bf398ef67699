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
