"""CPU test, without torch or a GPU: the log callback every convtune.Context
passes the library (conv_context_options.log), called through its C function
pointer as the library calls it, reaches the logging module's "convtune"
logger at the matching level.

    CONVTUNE_LIB=build/libconvtune.so python3 tests/python/check_log.py
"""
import ctypes
import logging
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
import convtune  # noqa: E402  (needs neither torch nor a GPU)
from convtune import _lib  # noqa: E402


class Records(logging.Handler):
    def __init__(self):
        super().__init__(logging.DEBUG)
        self.records = []

    def emit(self, record):
        self.records.append((record.levelno, record.getMessage()))


def main():
    records = Records()
    logger = logging.getLogger("convtune")
    logger.addHandler(records)
    logger.setLevel(logging.INFO)
    try:
        address = ctypes.cast(convtune._log_callback, ctypes.c_void_p).value
        call = _lib.LogFn(address)  # a call through the C pointer, as the library makes it
        level = _lib.LOG_LEVELS.index
        call(None, level("INFO"), b"tuning fwd f32 nchw")
        call(None, level("DEBUG"), b"timing cudnn engine=1")  # below the logger's level
        call(None, level("WARN"), b"bad \xff byte")
        call(None, level("ERROR"), b"an error")
        call(None, 9, b"unknown level")
    finally:
        logger.removeHandler(records)
    want = [(logging.INFO, "tuning fwd f32 nchw"), (logging.WARNING, "bad \ufffd byte"),
            (logging.ERROR, "an error"), (logging.ERROR, "unknown level")]
    if records.records != want:
        print("logged %r,\nexpected %r" % (records.records, want))
        return 1
    print("the contexts' log callback reaches the \"convtune\" logger at the matching levels")
    return 0


if __name__ == "__main__":
    sys.exit(main())
