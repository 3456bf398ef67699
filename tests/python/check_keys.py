"""CPU test, without torch or a GPU: the binding's problem keys for the half
types (python/convtune/_problem.py) are the library's reading of the same
specs: dtype f16 / bf16, math made strict (a half problem ignores it), and
the dtype names the binding takes.

    CONVTUNE_LIB=build/libconvtune.so python3 tests/python/check_keys.py
"""
import ctypes
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
import convtune  # noqa: E402  (needs neither torch nor a GPU)
from convtune import _lib  # noqa: E402


def library_key(spec):
    """The library's problem for a spec, as the binding's field tuple."""
    lib = _lib.load()
    parsed, message = _lib.Problem(), ctypes.create_string_buffer(_lib.MESSAGE_SIZE)
    status = lib.conv_problem_parse_sized(spec.encode(), ctypes.byref(parsed), ctypes.sizeof(parsed),
                                          message, len(message))
    assert status == _lib.OK, message.value
    return tuple(getattr(parsed, f) for f in _lib.PROBLEM_FIELDS)


def key_text(fields):
    lib = _lib.load()
    problem = _lib.Problem()
    lib.conv_problem_init_sized(ctypes.byref(problem), ctypes.sizeof(problem))
    for field, value in zip(_lib.PROBLEM_FIELDS, fields):
        setattr(problem, field, value)
    text = ctypes.create_string_buffer(_lib.PROBLEM_KEY_SIZE)
    assert lib.conv_problem_key(ctypes.byref(problem), text, len(text)) == _lib.OK
    return text.value.decode()


def expect_type_error(call):
    try:
        call()
    except TypeError as e:
        return str(e)
    raise AssertionError("no TypeError")


def main():
    key = convtune._problem_key
    shapes = ((16, 64, 56, 56), (64, 64, 3, 3))
    for name, spec_dtype in (("float16", "f16"), ("bfloat16", "bf16")):
        for math in ("strict", "tf32"):
            ours = key(*shapes, 1, 1, 1, 1, True, "relu", math, "nhwc", dtype=name)
            spec = ("n=16 c=64 h=56 w=56 k=64 r=3 s=3 pad=1 layout=nhwc epilogue=bias_relu "
                    "dtype=%s" % spec_dtype)
            assert ours == library_key(spec), (ours, library_key(spec))
            text = key_text(ours)
            assert text.startswith("fwd %s nhwc strict bias_relu" % spec_dtype), text
        # The names a torch dtype prints as, and the short ones, are one type.
        for other in ("torch." + name, {"float16": "half", "bfloat16": "bfloat16"}[name]):
            assert key(*shapes, 1, 1, 1, 1, False, None, "strict", dtype=other) == \
                key(*shapes, 1, 1, 1, 1, False, None, "strict", dtype=name)
    f32 = key(*shapes, 1, 1, 1, 1, False, None, "tf32")
    assert key_text(f32).startswith("fwd f32 nchw tf32 none"), key_text(f32)
    assert f32 == key(*shapes, 1, 1, 1, 1, False, None, "tf32", dtype="float")
    for bad in ("float64", "torch.int8", 3):
        message = expect_type_error(lambda: key(*shapes, 1, 1, 1, 1, False, None, "strict", dtype=bad))
        assert "float16" in message and "bfloat16" in message, message
    print("problem keys of the half types match the library's reading of their specs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
