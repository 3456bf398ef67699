"""Shared by the binding's tests: the library's default cache goes to a temp file."""
import os

import pytest


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
