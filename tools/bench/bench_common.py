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


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)
