"""The run's environment: GPU, driver, library versions and files, the command line."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys

from bench_common import NoGpuError, PYTHON_DIR, UsageError, log


# Libraries whose versions are part of convtune's cache key and which
# PyTorch also ships: the harness reports which files were loaded.
SHARED_LIBS = ("libcudnn", "libcublasLt")

# ---------------------------------------------------------------- environment


def nvidia_smi_driver(device: int) -> str | None:
    try:
        done = subprocess.run(["nvidia-smi", "-i", str(device), "--query-gpu=driver_version",
                               "--format=csv,noheader"], capture_output=True, text=True,
                              timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    text = done.stdout.strip()
    return text if done.returncode == 0 and text else None


def loaded_libraries(maps_text: str, stems: tuple = SHARED_LIBS) -> dict:
    """Paths of the loaded shared libraries whose file name starts with one of
    `stems`, from the text of /proc/self/maps."""
    found = {}
    for line in maps_text.splitlines():
        path = line.split()[-1] if line.split() else ""
        name = os.path.basename(path)
        for stem in stems:
            if name.startswith(stem + ".so") and stem not in found:
                found[stem] = path
    return found


def torch_libraries() -> dict:
    """The cuDNN and cuBLASLt files this process runs (PyTorch's, since it is
    imported first); {} where /proc is missing."""
    try:
        with open("/proc/self/maps", encoding="utf-8") as f:
            return loaded_libraries(f.read())
    except OSError:
        return {}


def torch_library_dirs() -> list:
    """The folders of the cuDNN and cuBLASLt this process runs, in order."""
    return list(dict.fromkeys(os.path.dirname(p) for p in torch_libraries().values()))


def print_ld_path() -> int:
    """Prints the folders of PyTorch's cuDNN and cuBLASLt, for LD_LIBRARY_PATH
    of `build/convtune tune`: the versions of both are part of every cache
    key, so a cache tuned with other builds is all misses here."""
    try:
        import torch
    except ImportError as e:
        raise UsageError(f"cannot import torch: {e}") from e
    torch.backends.cudnn.version()          # makes sure libcudnn is loaded
    libs = torch_libraries()
    missing = [stem for stem in SHARED_LIBS if stem not in libs]
    if missing:
        log(f"note: PyTorch has not loaded {', '.join(missing)}")
    print(":".join(torch_library_dirs()))
    return 0


def parse_versions(text: str) -> dict:
    """'cuda=13000 driver=13000 cudnn=91900' -> {'cuda': '13000', ...}."""
    return dict(item.split("=", 1) for item in text.split() if "=" in item)


def cudnn_mismatch(torch_cudnn, convtune_versions: dict) -> str | None:
    theirs = convtune_versions.get("cudnn")
    if torch_cudnn is None or theirs is None:
        return None
    if str(torch_cudnn) != str(theirs):
        return (f"PyTorch runs cuDNN {torch_cudnn} but convtune runs cuDNN {theirs}: "
                "the comparison is between two cuDNN builds")
    return None


def gather_environment(convtune, device: int) -> dict:
    import torch
    props = torch.cuda.get_device_properties(device)
    versions_text = convtune.library_versions()
    versions = parse_versions(versions_text)
    torch_cudnn = torch.backends.cudnn.version()
    driver = nvidia_smi_driver(device)
    return {"gpu": torch.cuda.get_device_name(device),
            "compute_capability": f"{props.major}.{props.minor}",
            "sm_count": props.multi_processor_count,
            "memory_bytes": props.total_memory,
            "driver": driver or f"CUDA driver API {versions.get('driver', '?')} (nvidia-smi unavailable)",
            "torch_version": torch.__version__,
            "torch_cuda": torch.version.cuda,
            "torch_cudnn": torch_cudnn,
            "cudnn_benchmark_limit": getattr(torch.backends.cudnn, "benchmark_limit", None),
            "convtune_versions": versions_text,
            "libraries": torch_libraries(),
            "cudnn_mismatch": cudnn_mismatch(torch_cudnn, versions),
            "python": sys.version.split()[0]}


def command_line(argv: list, env: dict) -> str:
    """The command as typed from the repository root, with the environment
    variables that decide which convtune and which cache were used."""
    prefix = [f"{k}={shlex.quote(env[k])}" for k in ("PYTHONPATH", "CONVTUNE_LIB", "CONVTUNE_CACHE",
                                                     "CONVTUNE_POLICY")
              if env.get(k)]
    # Set but empty means no system cache at all, which matters as much.
    if "CONVTUNE_SYSTEM_CACHE" in env:
        prefix.append("CONVTUNE_SYSTEM_CACHE=" + shlex.quote(env["CONVTUNE_SYSTEM_CACHE"]))
    script = argv[0]
    try:
        script = os.path.relpath(script)
    except ValueError:
        pass
    return " ".join(prefix + ["python3", shlex.quote(script)] + [shlex.quote(a) for a in argv[1:]])


def _import_convtune():
    try:
        import convtune
        return convtune
    except ImportError:
        sys.path.append(str(PYTHON_DIR))     # PYTHONPATH still takes precedence
    import convtune
    return convtune


def import_libraries() -> tuple:
    """torch first, so its cuDNN is the one loaded; convtune's library then
    binds to the same libcudnn.so.9 instead of whatever LD_LIBRARY_PATH says."""
    try:
        import torch
    except ImportError as e:
        raise UsageError(f"cannot import torch: {e}") from e
    if not torch.cuda.is_available():
        raise NoGpuError("no CUDA GPU visible to PyTorch")
    try:
        convtune = _import_convtune()
    except (ImportError, OSError) as e:     # OSError: the binding found no libconvtune.so
        raise UsageError(f"cannot load convtune: {e} (build it with cmake, run from the "
                         "repository root, or set CONVTUNE_LIB)") from e
    return torch, convtune


def import_or_exit(tool: str) -> tuple:
    """import_libraries() for a tool's main: on failure it says why on stderr
    as `tool` and exits with status 2 (usage) or 3 (no CUDA GPU)."""
    try:
        return import_libraries()
    except UsageError as e:
        print(f"{tool}: {e}", file=sys.stderr)
        raise SystemExit(2) from None
    except NoGpuError as e:
        print(f"{tool}: {e}", file=sys.stderr)
        raise SystemExit(3) from None


def warn_versions(env: dict) -> None:
    log(f"cuDNN: PyTorch {env['torch_cudnn']}; convtune {env['convtune_versions']}")
    if env["cudnn_mismatch"]:
        bar = "!" * 78
        log(f"{bar}\nWARNING: {env['cudnn_mismatch']}\n{bar}")
