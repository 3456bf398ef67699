"""Suite files (bench/suite.json) and the shapes they hold: parsing, the problem's
arithmetic (output size, FLOPs, bytes, roofline floor), and how each library is called on one."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Callable

from bench_common import MODES, UsageError


# ---------------------------------------------------------------- suite


@dataclass(frozen=True)
class Shape:
    """One convolution of a suite file, per-axis values as (h, w) pairs."""

    name: str
    N: int
    C: int
    H: int
    W: int
    K: int
    R: int
    S: int
    stride: tuple = (1, 1)
    pad: tuple = (0, 0)
    dil: tuple = (1, 1)
    groups: int = 1
    epilogue: str = "none"       # none | bias | bias_relu
    math_mode: str | None = None  # the row's "math": it pins one mode


def _int_field(row: dict, key: str, where: str, default=None) -> int:
    value = row.get(key, default)
    # bool is an int in Python; a JSON true is not a dimension.
    if isinstance(value, bool) or not isinstance(value, int):
        raise UsageError(f"{where}: field '{key}' must be an integer, got {value!r}")
    return value


def _pair_field(row: dict, key: str, where: str, default: int) -> tuple:
    value = row.get(key, default)
    if isinstance(value, list):
        if len(value) != 2:
            raise UsageError(f"{where}: field '{key}' must be an integer or [h, w]")
        return (_int_field({key: value[0]}, key, where), _int_field({key: value[1]}, key, where))
    v = _int_field({key: value}, key, where)
    return (v, v)


def parse_row(row, index: int) -> Shape:
    """Turns one suite row (an object of bench/suite.json's format) into a Shape."""
    if not isinstance(row, dict):
        raise UsageError(f"row {index}: expected an object")
    name = row.get("name")
    if not isinstance(name, str) or not name:
        raise UsageError(f"row {index}: field 'name' must be a non-empty string")
    where = f"row {index} ({name})"
    dims = {key: _int_field(row, key, where) for key in ("N", "C", "H", "W", "K", "R", "S")}
    epilogue = row.get("epilogue", "none")
    if epilogue not in ("none", "bias", "bias_relu"):
        raise UsageError(f"{where}: epilogue must be none, bias or bias_relu")
    math_mode = row.get("math")
    if math_mode is not None and math_mode not in MODES:
        raise UsageError(f"{where}: math must be strict or tf32")
    return Shape(name=name, **dims,
                 stride=_pair_field(row, "stride", where, 1),
                 pad=_pair_field(row, "pad", where, 0),
                 dil=_pair_field(row, "dil", where, 1),
                 groups=_int_field(row, "groups", where, 1),
                 epilogue=epilogue, math_mode=math_mode)


def shape_to_row(s: Shape) -> dict:
    """The inverse of parse_row: a suite row (how a child process gets it)."""
    row = {"name": s.name, "N": s.N, "C": s.C, "H": s.H, "W": s.W, "K": s.K, "R": s.R,
           "S": s.S, "stride": list(s.stride), "pad": list(s.pad), "dil": list(s.dil),
           "groups": s.groups, "epilogue": s.epilogue}
    if s.math_mode is not None:
        row["math"] = s.math_mode
    return row


def parse_suite(doc) -> tuple:
    """Returns (shapes, notes) from a suite document: {"shapes": [...]} or [...].

    Rows whose "op" is not "conv" are skipped with a note, as the convtune
    tool does; other unknown keys ("why", "bwd", ...) are ignored."""
    rows = doc.get("shapes") if isinstance(doc, dict) else doc
    if not isinstance(rows, list):
        raise UsageError('a suite is {"shapes": [ROW, ...]} or [ROW, ...]')
    shapes, notes = [], []
    for index, row in enumerate(rows):
        op = row.get("op", "conv") if isinstance(row, dict) else "conv"
        if op != "conv":
            notes.append(f"skipping {row.get('name', f'row {index}')}: op '{op}' is not a convolution")
            continue
        shapes.append(parse_row(row, index))
    names = [s.name for s in shapes]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise UsageError(f"duplicate shape names: {', '.join(duplicates)}")
    return shapes, notes


def load_suite(path: str) -> tuple:
    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
    except OSError as e:
        raise UsageError(f"{path}: {e.strerror}") from e
    except json.JSONDecodeError as e:
        raise UsageError(f"{path}:{e.lineno}:{e.colno}: {e.msg}") from e
    try:
        return parse_suite(doc)
    except UsageError as e:
        raise UsageError(f"{path}: {e}") from e


def select_shapes(shapes: list, names: str | None) -> list:
    """Keeps the shapes named in the comma-separated list (all when None)."""
    if not names:
        return list(shapes)
    wanted = [n.strip() for n in names.split(",") if n.strip()]
    known = {s.name for s in shapes}
    unknown = [n for n in wanted if n not in known]
    if unknown:
        raise UsageError(f"no conv shape named {', '.join(unknown)} in the suite")
    return [s for s in shapes if s.name in wanted]


def parse_modes(text: str) -> list:
    modes = [m.strip() for m in text.split(",") if m.strip()]
    bad = [m for m in modes if m not in MODES]
    if bad or not modes:
        raise UsageError(f"--modes takes a comma-separated subset of {','.join(MODES)}")
    return list(dict.fromkeys(modes))


def modes_for(shape: Shape, modes: list) -> list:
    """A row that pins its math mode runs in that mode only."""
    return [m for m in modes if shape.math_mode in (None, m)]


# ---------------------------------------------------------------- problem arithmetic


def output_hw(s: Shape) -> tuple:
    p = (s.H + 2 * s.pad[0] - s.dil[0] * (s.R - 1) - 1) // s.stride[0] + 1
    q = (s.W + 2 * s.pad[1] - s.dil[1] * (s.S - 1) - 1) // s.stride[1] + 1
    return p, q


def tensor_shapes(s: Shape) -> dict:
    p, q = output_hw(s)
    return {"x": (s.N, s.C, s.H, s.W), "w": (s.K, s.C // s.groups, s.R, s.S),
            "y": (s.N, s.K, p, q)}


def conv_flops(s: Shape) -> int:
    """Multiply-adds of the direct algorithm, two flops each."""
    p, q = output_hw(s)
    return 2 * s.N * s.K * p * q * (s.C // s.groups) * s.R * s.S


def conv_bytes(s: Shape) -> int:
    """Fewest bytes through DRAM: x and w read once, y written once (fp32)."""
    count = sum(math.prod(dims) for dims in tensor_shapes(s).values())
    if s.epilogue != "none":
        count += s.K
    return 4 * count


def floor_ms(s: Shape, flops_per_s: float, bytes_per_s: float) -> float:
    """Roofline floor: no implementation runs much faster than this."""
    return max(conv_flops(s) / flops_per_s, conv_bytes(s) / bytes_per_s) * 1e3


def percent_of_floor(floor: float, measured_ms: float | None) -> float | None:
    if measured_ms is None or not measured_ms > 0:
        return None
    return floor / measured_ms * 100.0


def geomean(values: list) -> float | None:
    values = [v for v in values if v is not None and v > 0]
    if not values:
        return None
    return math.exp(sum(math.log(v) for v in values) / len(values))


def spec_text(s: Shape) -> str:
    """The shape as a convtune tool spec, e.g. 'n=32 c=64 ... pad=1'."""
    parts = [f"n={s.N} c={s.C} h={s.H} w={s.W} k={s.K} r={s.R} s={s.S}"]
    for key, pair, default in (("pad", s.pad, 0), ("stride", s.stride, 1), ("dil", s.dil, 1)):
        if pair[0] == pair[1]:
            if pair[0] != default:
                parts.append(f"{key}={pair[0]}")
        else:
            parts.append(f"{key}_h={pair[0]} {key}_w={pair[1]}")
    if s.groups != 1:
        parts.append(f"groups={s.groups}")
    if s.epilogue != "none":
        parts.append(f"epilogue={s.epilogue}")
    return " ".join(parts)


# ---------------------------------------------------------------- calling both libraries


def _scalar_or_pair(pair: tuple):
    return pair[0] if pair[0] == pair[1] else tuple(pair)


def torch_conv_kwargs(s: Shape) -> dict:
    return {"stride": tuple(s.stride), "padding": tuple(s.pad), "dilation": tuple(s.dil),
            "groups": s.groups}


def convtune_plan_kwargs(s: Shape, mode: str) -> dict:
    return {"stride": _scalar_or_pair(s.stride), "padding": _scalar_or_pair(s.pad),
            "dilation": _scalar_or_pair(s.dil), "groups": s.groups,
            "bias": s.epilogue != "none",
            "activation": "relu" if s.epilogue == "bias_relu" else None, "math": mode}


def set_math_mode(mode: str) -> None:
    """TF32 for cuDNN convolutions and cuBLAS matmuls on or off, per mode.

    Only the legacy allow_tf32 flags are used: newer PyTorch refuses a mix of
    these and the fp32_precision API in one process."""
    import torch
    tf32 = mode == "tf32"
    torch.backends.cudnn.allow_tf32 = tf32
    torch.backends.cuda.matmul.allow_tf32 = tf32


def make_inputs(s: Shape, seed: int) -> tuple:
    """x ~ N(0,1); w scaled by 1/sqrt(fan-in) so outputs stay O(1); bias when
    the row has an epilogue.  fp32, contiguous, on the current CUDA device."""
    import torch
    gen = torch.Generator(device="cuda")
    gen.manual_seed(seed)
    dims = tensor_shapes(s)
    x = torch.randn(dims["x"], device="cuda", dtype=torch.float32, generator=gen)
    w = torch.randn(dims["w"], device="cuda", dtype=torch.float32, generator=gen)
    w.mul_(1.0 / math.sqrt((s.C // s.groups) * s.R * s.S))
    b = None
    if s.epilogue != "none":
        b = torch.randn((s.K,), device="cuda", dtype=torch.float32, generator=gen)
    return x, w, b


def torch_conv_fn(s: Shape, x, w, b) -> Callable:
    """The PyTorch call a user would write for this row."""
    import torch.nn.functional as F
    kwargs = torch_conv_kwargs(s)
    if s.epilogue == "bias_relu":
        return lambda: F.relu(F.conv2d(x, w, b, **kwargs), inplace=True)
    return lambda: F.conv2d(x, w, b, **kwargs)
