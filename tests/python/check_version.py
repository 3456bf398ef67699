"""CPU test, without torch or a GPU: the Python package's __version__ is the
C header's CONVTUNE_VERSION_MAJOR.MINOR.PATCH and the loaded library's
conv_version().

    CONVTUNE_LIB=build/libconvtune.so python3 tests/python/check_version.py include/convtune.h
"""
import os
import re
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
import convtune  # noqa: E402  (needs neither torch nor a GPU)


def header_version(path):
    text = open(path, encoding="utf-8").read()
    parts = [re.search(r"^#define CONVTUNE_VERSION_%s (\d+)$" % p, text, re.M) for p in ("MAJOR", "MINOR", "PATCH")]
    if not all(parts):
        raise SystemExit("%s: no CONVTUNE_VERSION_MAJOR/MINOR/PATCH" % path)
    return ".".join(m.group(1) for m in parts)


def main(argv):
    want = header_version(argv[1])
    got = {"convtune.__version__": convtune.__version__, "library": convtune.library_version()}
    wrong = {k: v for k, v in got.items() if v != want}
    if wrong:
        print("header %s; differ: %s" % (want, wrong))
        return 1
    print("version %s: header, package and library agree" % want)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
