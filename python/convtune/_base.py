"""What the package's modules share: torch imported on first need, the
error type and CUDA device ordinals (convtune re-exports ConvtuneError)."""
import sys

from . import _lib

_torch_mod = None


def _torch():
    """torch, imported on first need so that the module imports without it."""
    global _torch_mod
    if _torch_mod is None:
        try:
            import torch
        except ImportError as e:
            raise ImportError("convtune works on PyTorch tensors: install torch") from e
        _torch_mod = torch
    return _torch_mod


def _deterministic_reader(torch):
    """A function returning whether PyTorch asks for deterministic convolutions now:
    torch.use_deterministic_algorithms(True), or torch.backends.cudnn.deterministic, which
    makes PyTorch's own convolutions deterministic (read through their C getters: layers
    read this on every call)."""
    algorithms = (getattr(torch._C, "_get_deterministic_algorithms", None)
                  or torch.are_deterministic_algorithms_enabled)
    cudnn = getattr(torch._C, "_get_cudnn_deterministic", None) or (
        lambda: torch.backends.cudnn.deterministic)
    return lambda: bool(algorithms()) or bool(cudnn())


_readers = {}


def _reader(torch, make):
    """make(torch) (_deterministic_reader, _conv_tf32_reader), made once for the process:
    every call of a layer or conv2d reads the settings, never the lookups behind them."""
    read = _readers.get(make)
    if read is None:
        read = _readers[make] = make(torch)
    return read


def _torch_deterministic():
    """_deterministic_reader's answer, or False where torch is not imported."""
    torch = sys.modules.get("torch")
    return torch is not None and _reader(torch, _deterministic_reader)()


def _conv_tf32_reader(torch):
    """A function returning whether PyTorch lets cuDNN convolutions use TF32 now.

    PyTorch 2.9 and later set it with torch.backends.cudnn.conv.fp32_precision ("tf32",
    "ieee", or "none" to inherit), and raise on a read of the legacy
    torch.backends.cudnn.allow_tf32 once the new API was used; so the new setting is read
    first, through its C getter (the property costs twice as much, and layers read this on
    every call), and the legacy flag only where the new one says "none" or does not exist.
    """
    legacy = getattr(torch._C, "_get_cudnn_allow_tf32", None) or (
        lambda: torch.backends.cudnn.allow_tf32)
    getter = getattr(torch._C, "_get_fp32_precision_getter", None)
    try:
        if getter is not None:
            getter("cuda", "conv")
    except Exception:  # an older spelling of the private getter: the legacy flag alone
        getter = None
    if getter is None:
        return lambda: bool(legacy())

    def conv_tf32():
        precision = getter("cuda", "conv")
        if precision == "tf32":
            return True
        if precision == "ieee":
            return False
        return bool(legacy())
    return conv_tf32


class ConvtuneError(RuntimeError):
    """A failing status from libconvtune.

    .status is the conv_status code, .status_name its name ("BAD_GROUPS"),
    .message the library's detailed message (conv_context_last_error).
    """

    def __init__(self, status, message=""):
        self.status = int(status)
        self.status_name = _lib.status_name(self.status)
        self.message = message
        text = _lib.status_text(self.status)
        head = "%s (%s)" % (self.status_name, text) if text else self.status_name
        super().__init__("%s: %s" % (head, message) if message else head)

    def __reduce__(self):  # pickle with the constructor's arguments
        return (type(self), (self.status, self.message))


ConvtuneError.__module__ = "convtune"  # the public name


def _device_index(device):
    """A CUDA ordinal from None (torch's current device), an int, a torch.device or a string."""
    if device is None:
        torch = _torch()
        # Without a usable GPU, let the library report NO_DEVICE with its reason.
        return torch.cuda.current_device() if torch.cuda.is_available() else 0
    if isinstance(device, int):
        return device
    torch = _torch()
    d = torch.device(device)
    if d.type != "cuda":
        raise ValueError("convtune runs on CUDA devices, got %s" % d)
    if d.index is not None:
        return d.index
    return torch.cuda.current_device() if torch.cuda.is_available() else 0


# ---------------------------------------------------------------- plans
