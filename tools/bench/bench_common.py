"""What every part of the benchmark harness shares: paths, modes, errors, progress lines."""

from __future__ import annotations

import os
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

def read_notes(path: str | None) -> dict:
    """{"notes_md", "notes_path"} from --notes, or {} without one."""
    if path is None:
        return {}
    try:
        return {"notes_md": Path(path).read_text(encoding="utf-8"), "notes_path": path}
    except OSError as e:
        raise UsageError(f"cannot read --notes {path}: {e.strerror}") from e


def output_paths(args) -> tuple:
    """(markdown, json) paths, JSON beside the Markdown by default; their
    folders made and checked now rather than after minutes of measuring."""
    out_json = args.out_json
    if out_json is None and args.out_md:
        out_json = str(Path(args.out_md).with_suffix(".json"))
    for path in (args.out_md, out_json):
        if path:
            folder = Path(path).resolve().parent
            try:
                folder.mkdir(parents=True, exist_ok=True)
            except OSError as e:
                raise UsageError(f"cannot create {folder}: {e.strerror}") from e
            if not os.access(folder, os.W_OK):
                raise UsageError(f"cannot write to {folder}")
    return args.out_md, out_json


def exit_status(tool: str, run) -> int:
    """run()'s exit status, a usage error 2 and no GPU 3, their message
    on stderr named after the tool: what every harness script's main does."""
    try:
        return run()
    except UsageError as e:
        print(f"{tool}: {e}", file=sys.stderr)
        return 2
    except NoGpuError as e:
        print(f"{tool}: {e}", file=sys.stderr)
        return 3


def settle_row(row: dict, ok: bool, error: str, torch_ms: float, convtune_ms: float) -> None:
    """A timed row's verdict: "ok" with its ratio (PyTorch time / convtune
    time), or "FAIL" with `error`, why its output is not within bounds."""
    if ok:
        row["status"] = "ok"
        row["ratio"] = torch_ms / convtune_ms
    else:
        row["status"] = "FAIL"
        row["error"] = error


def skip_graph(row: dict) -> None:
    """A row run without CUDA graphs (--no-graph)."""
    row["graph_status"], row["graph_note"] = "skipped", "not measured (--no-graph)"


def plan_text(convtune_timing: dict) -> str:
    """Where a row's convtune plan came from, what it runs and what making it cost."""
    c = convtune_timing
    return f"{c['source']}, {c['algorithm']} {c['config']}, plan {c['plan_ms']:.0f} ms"


def verdict_text(row: dict) -> str:
    """A settled row's verdict for a progress line (settle_row)."""
    return f", ratio {row['ratio']:.2f}x" if row["status"] == "ok" else f", FAIL: {row['error']}"
