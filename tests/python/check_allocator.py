"""CPU test, without torch or a GPU: how a Context chooses its device allocator
(python/convtune/_allocator.py) where torch cannot be imported (torch is blocked here,
so the answer is the same on a machine that has it): the default falls back to the
library's cudaMalloc with one INFO note, "torch" refuses, "cuda" is chosen quietly, any
other value is a ValueError; and the options the binding fills carry no allocator by
default, while one callback without the other is refused by the library before any
device is touched, the context not made.

    CONVTUNE_LIB=build/libconvtune.so python3 tests/python/check_allocator.py
"""
import ctypes
import logging
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))
sys.modules["torch"] = None  # `import torch` raises ImportError from here on
import convtune  # noqa: E402  (needs neither torch nor a GPU)
from convtune import _allocator, _lib  # noqa: E402


class Records(logging.Handler):
    def __init__(self):
        super().__init__(logging.DEBUG)
        self.records = []

    def emit(self, record):
        self.records.append(record)


def check(failures, cond, what):
    if not cond:
        print("FAIL:", what)
        failures.append(what)


def check_choices(failures):
    records = Records()
    logger = logging.getLogger("convtune")
    logger.addHandler(records)
    logger.setLevel(logging.DEBUG)
    try:
        _allocator.choose("pytorch")
        check(failures, False, "an unknown allocator raises")
    except ValueError as e:
        check(failures, "pytorch" in str(e), "the error names the value: %s" % e)
    check(failures, _allocator.choose("cuda") == (None, "allocator='cuda'"), "cuda is cudaMalloc")
    check(failures, not records.records, "choosing cuda notes nothing")
    functions, why = _allocator.choose(None)
    check(failures, functions is None and "torch does not import" in why, "the default falls back: %r" % why)
    check(failures, len(records.records) == 1 and records.records[0].levelno == logging.INFO
          and "cudaMalloc" in records.records[0].getMessage(), "one INFO note says so")
    _allocator.choose(None)
    check(failures, len(records.records) == 1, "the note is given once")
    try:
        _allocator.choose("torch")
        check(failures, False, "allocator='torch' without torch raises")
    except RuntimeError as e:
        check(failures, "torch does not import" in str(e), "the error says why: %s" % e)
    try:
        convtune.Context(allocator="malloc")
        check(failures, False, "Context(allocator='malloc') raises")
    except ValueError as e:
        check(failures, "malloc" in str(e), "Context names the value: %s" % e)
    logger.removeHandler(records)


def check_options(failures):
    lib = _lib.load()
    options = _lib.ContextOptions()
    ctypes.memset(ctypes.byref(options), 0xAB, ctypes.sizeof(options))
    lib.conv_context_options_init_sized(ctypes.byref(options), ctypes.sizeof(options))
    check(failures, options.device_alloc is None and options.device_free is None
          and options.allocator_user is None, "no allocator by default")
    # Any address will do: the library refuses before calling it.
    address = ctypes.cast(lib.conv_version, ctypes.c_void_p).value
    options.cache_path = b":memory:"
    for alloc, free in ((address, None), (None, address)):
        options.device_alloc, options.device_free = alloc, free
        handle = _lib.ContextPtr()
        status = lib.conv_context_create(ctypes.byref(handle), ctypes.byref(options))
        message = _lib.last_error(lib, None)
        check(failures, _lib.status_name(status) == "INVALID_ARGUMENT" and not handle,
              "one callback without the other: %s, %s" % (_lib.status_name(status), message))
        check(failures, "device_alloc" in message and "device_free" in message, "named: %s" % message)


def check_names(failures):
    """_allocator.py looks up the names _torch_alloc.cpp exports (built only with torch)."""
    with open(os.path.join(HERE, "..", "..", "python", "convtune", "_torch_alloc.cpp")) as f:
        source = f.read()
    with open(_allocator.__file__) as f:
        binding = f.read()
    for name in ("convtune_torch_device_alloc", "convtune_torch_device_free"):
        check(failures, ("CONVTUNE_EXPORT int " + name in source or "CONVTUNE_EXPORT void " + name in source)
              and "cpp." + name in binding, "%s exported and looked up" % name)


def main():
    failures = []
    check_choices(failures)
    check_options(failures)
    check_names(failures)
    if failures:
        return 1
    print("allocator choice, options and names: all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
