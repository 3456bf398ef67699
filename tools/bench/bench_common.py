"""What every part of the benchmark harness shares: paths, modes, errors, progress lines."""

from __future__ import annotations

import sys
from pathlib import Path


REPO_ROOT = Path(__file__).resolve().parents[2]
PYTHON_DIR = REPO_ROOT / "python"

MODES = ("strict", "tf32")


class UsageError(Exception):
    """Bad command line or suite file (exit status 2)."""


class NoGpuError(Exception):
    """No usable CUDA device (exit status 3)."""


def print_json_result(compute) -> int:
    """Prints compute()'s dict as one JSON line and returns 0; any failure
    becomes {"error": "Type: first line"} and 1, so that the parent process
    running a fresh-process measurement gets a table cell either way."""
    import json
    try:
        result = compute()
    except Exception as e:  # noqa: BLE001 -- any failure becomes the caller's table cell
        print(json.dumps({"error": f"{type(e).__name__}: {e}".splitlines()[0]}))
        return 1
    print(json.dumps(result))
    return 0


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)
