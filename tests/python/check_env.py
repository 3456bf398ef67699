"""CPU test, without torch or a GPU: the deployment controls the binding reads from
the environment: $CONVTUNE_POLICY (a Context's policy when its code names none) and
$CONVTUNE_LOG (the level the library passes on, shown on stderr where the
application set up no handler).

    CONVTUNE_LIB=build/libconvtune.so python3 tests/python/check_env.py
"""
import logging
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
import convtune  # noqa: E402  (needs neither torch nor a GPU)
from convtune import _lib  # noqa: E402


def check(failures, cond, what):
    if not cond:
        print("FAIL:", what)
        failures.append(what)


def main():
    failures = []
    os.environ.pop("CONVTUNE_POLICY", None)
    os.environ.pop("CONVTUNE_LOG", None)
    check(failures, convtune._env_policy() == "predict", "unset policy is predict")
    for value in ("cache_only", "RECORD", " exhaustive "):
        os.environ["CONVTUNE_POLICY"] = value
        check(failures, convtune._env_policy() == value.strip().lower(), "policy %r" % value)
    os.environ["CONVTUNE_POLICY"] = "fastest"
    try:
        convtune._env_policy()
        check(failures, False, "a bad policy raises")
    except ValueError as e:
        check(failures, "CONVTUNE_POLICY" in str(e), "the error names the variable: %s" % e)

    logger = logging.getLogger("convtune")
    check(failures, convtune._env_log_level() is None, "unset log level is None")
    check(failures, not logger.handlers, "no handler added while unset")
    os.environ["CONVTUNE_LOG"] = "debug"
    check(failures, convtune._env_log_level() == _lib.LOG_LEVELS.index("DEBUG"), "debug level")
    check(failures, len(logger.handlers) == 1 and logger.level == logging.DEBUG,
          "a stderr handler at DEBUG")
    os.environ["CONVTUNE_LOG"] = "warn"
    check(failures, convtune._env_log_level() == _lib.LOG_LEVELS.index("WARN"), "warn level")
    check(failures, len(logger.handlers) == 1, "one handler, not one per context")
    os.environ["CONVTUNE_LOG"] = "loud"
    try:
        convtune._env_log_level()
        check(failures, False, "a bad log level raises")
    except ValueError as e:
        check(failures, "CONVTUNE_LOG" in str(e), "the error names the variable: %s" % e)
    print("%d failed" % len(failures) if failures else "0 failed: environment controls ok")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
