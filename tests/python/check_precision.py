"""CPU test, without torch or a GPU: how the binding reads PyTorch's TF32 and
determinism settings (convtune._base), against stand-ins for torch's getters.
PyTorch 2.9 and later raise on a read of torch.backends.cudnn.allow_tf32 once
torch.backends.cudnn.conv.fp32_precision was set; the reader must never read
the legacy flag then.

    CONVTUNE_LIB=build/libconvtune.so python3 tests/python/check_precision.py
"""
import os
import sys
import types

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
from convtune._base import _conv_tf32_reader, _deterministic_reader  # noqa: E402


def fake_torch(precision=None, legacy=True, legacy_raises=False, det_algorithms=False,
               det_cudnn=False):
    """torch's getters as the reader finds them; precision None: a PyTorch without the
    current API."""
    def legacy_getter():
        if legacy_raises:
            raise RuntimeError("mix of the legacy and new APIs")
        return legacy

    c = types.SimpleNamespace(_get_cudnn_allow_tf32=legacy_getter,
                              _get_deterministic_algorithms=lambda: det_algorithms,
                              _get_cudnn_deterministic=lambda: det_cudnn)
    if precision is not None:
        c._get_fp32_precision_getter = lambda backend, op: (
            precision if (backend, op) == ("cuda", "conv") else "none")
    return types.SimpleNamespace(_C=c)


def main():
    cases = [
        # (torch's state, TF32 expected)
        (dict(precision="ieee", legacy_raises=True), False),  # the reported crash
        (dict(precision="tf32", legacy_raises=True), True),
        (dict(precision="none", legacy=True), True),           # inherits: the legacy flag
        (dict(precision="none", legacy=False), False),
        (dict(precision=None, legacy=True), True),             # an older PyTorch
        (dict(precision=None, legacy=False), False),
    ]
    failed = 0
    for state, expected in cases:
        try:
            got = _conv_tf32_reader(fake_torch(**state))()
        except Exception as e:  # noqa: BLE001  (a raise is the defect)
            got = "raised %r" % (e,)
        if got != expected:
            print("FAIL: TF32 for %s: %r, expected %r" % (state, got, expected))
            failed += 1
    for algorithms, cudnn in ((False, False), (True, False), (False, True), (True, True)):
        got = _deterministic_reader(fake_torch(det_algorithms=algorithms, det_cudnn=cudnn))()
        if got != (algorithms or cudnn):
            print("FAIL: deterministic for algorithms=%s cudnn=%s: %r" % (algorithms, cudnn, got))
            failed += 1
    print("%d passed, %d failed" % (len(cases) + 4 - failed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
