"""Where a Context's device memory comes from (conv_context_options.device_alloc and
device_free, include/convtune.h).

By default, PyTorch's caching allocator: two C functions of the operator's library
(_torch_alloc.cpp, built into _convtune_torch_op.so beside libconvtune.so where CMake
finds a CUDA torch) call c10::cuda::CUDACachingAllocator::raw_alloc_with_stream and
raw_delete, so plan workspaces and tuning buffers are memory torch counts
(torch.cuda.memory_allocated) and reuses, and a tuning in the middle of training
takes what torch's cache holds before asking CUDA for more.  Where that library is
not loaded, the library's own cudaMalloc, with a note (INFO) on the "convtune" logger.

Only C function addresses go into the options, never Python callbacks: the library
calls them while tuning, on threads that do not hold the GIL.
"""
import ctypes
import logging
import threading

CHOICES = (None, "torch", "cuda")

_lock = threading.Lock()
_found = None   # ((alloc, free) addresses, "") or (None, why not), once looked for
_noted = False  # the fall back's note logged


def _look_up():
    try:
        import torch  # noqa: F401
    except Exception as e:  # absent, or broken
        return None, "torch does not import (%s)" % e
    try:
        from . import ops
    except Exception as e:
        return None, "convtune.ops does not import (%s)" % e
    cpp = ops._cpp
    if cpp is None:
        return None, "the operator's C++ library is not loaded: its kernel is %s" % ops.kernel
    try:
        alloc = ctypes.cast(cpp.convtune_torch_device_alloc, ctypes.c_void_p).value
        free = ctypes.cast(cpp.convtune_torch_device_free, ctypes.c_void_p).value
    except AttributeError:
        return None, "the operator's C++ library predates the allocator functions: rebuild it"
    return (alloc, free), ""


def torch_functions():
    """((alloc address, free address), "") of PyTorch's caching allocator, or (None, why
    not); looked up once (it imports torch and convtune.ops)."""
    global _found
    with _lock:
        if _found is None:
            _found = _look_up()
        return _found


def choose(allocator):
    """The (alloc, free) addresses for a Context's options, or None for cudaMalloc, with
    why not torch's ("" when it is): allocator None takes torch's where it can, else
    notes the fall back once; "torch" raises RuntimeError where it cannot; "cuda" is
    the library's own."""
    global _noted
    if allocator not in CHOICES:
        raise ValueError("allocator must be None, 'torch' or 'cuda', got %r" % (allocator,))
    if allocator == "cuda":
        return None, "allocator='cuda'"
    functions, why = torch_functions()
    if functions is not None:
        return functions, ""
    if allocator == "torch":
        raise RuntimeError("convtune: allocator='torch' is not available: %s" % why)
    with _lock:
        first, _noted = not _noted, True
    if first:
        logging.getLogger("convtune").info(
            "device memory from cudaMalloc, not PyTorch's caching allocator (%s): plan "
            "workspaces and tuning buffers do not show in torch.cuda.memory_allocated", why)
    return None, why
