"""One timing policy for both libraries: CUDA events around batches of
back-to-back calls (eager), replays of a CUDA graph of calls (graph), the
ceilings (copy bandwidth, matmul rates), and the output check (relative L2).

torch is imported inside the functions that need it."""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field
from typing import Callable

from bench_common import MODES
from bench_suite import set_math_mode


# Relative L2 error allowed between convtune and PyTorch.  Strict: both are
# fp32, but either may use Winograd/FFT transforms (about 1e-5..1e-4).  TF32:
# both round inputs to 10-bit mantissas, at different places.
REL_L2_LIMIT = {"strict": 1e-4, "tf32": 1e-2}

# Timing: batches of back-to-back calls long enough that event resolution and
# launch gaps between batches do not matter, enough batches for a stable
# median, and a cap so that the whole suite stays inside ten minutes.
WARMUP_CALLS = 3
TARGET_BATCH_MS = 1.0
MAX_CALLS_PER_BATCH = 4096
MIN_BATCHES = 7
MIN_TOTAL_MS = 100.0
MEASURE_CAP_MS = 1500.0
# Each implementation is timed in two rounds (A B A B) so clock or thermal
# drift hits both alike, and so the two medians give a run-to-run spread.
ROUNDS = 2

# Graph timing: one CUDA graph holds `calls` back-to-back calls of a library,
# sized like an eager batch (about TARGET_BATCH_MS of GPU time) and replayed
# between CUDA events.  The cap bounds capture time, node count and the
# graph's memory for kernels of a few microseconds.
GRAPH_WARMUP_CALLS = 3
MAX_GRAPH_CALLS = 2000
GRAPH_NOTE_CHARS = 200

# Ceilings.  2 GiB copy: far larger than L2, so it measures DRAM.
COPY_BYTES = 2 << 30
MATMUL_N = 8192

# rel L2 is accumulated in chunks so that a 655 MB output does not need
# three more float64 copies of itself at once.
REL_L2_CHUNK = 1 << 26

# ---------------------------------------------------------------- timing


@dataclass
class Timing:
    """Per-call milliseconds of one implementation, from batched event timing."""

    batch_ms: list = field(default_factory=list)   # every batch, all rounds
    round_medians: list = field(default_factory=list)
    calls_per_batch: int = 0

    @property
    def per_call(self) -> list:
        return [t / self.calls_per_batch for t in self.batch_ms]

    @property
    def median_ms(self) -> float:
        return statistics.median(self.per_call)

    @property
    def spread(self) -> float:
        """Relative difference between the rounds' medians: the noise floor."""
        if len(self.round_medians) < 2:
            return 0.0
        lo, hi = min(self.round_medians), max(self.round_medians)
        return (hi - lo) / lo if lo > 0 else 0.0

    def summary(self) -> dict:
        per_call = sorted(self.per_call)
        return {"median_ms": self.median_ms, "min_ms": per_call[0], "max_ms": per_call[-1],
                "batches": len(per_call), "calls_per_batch": self.calls_per_batch,
                "round_median_ms": list(self.round_medians), "spread": self.spread}


def _run_batch(fn: Callable, calls: int) -> float:
    import torch
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(calls):
        fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end)


def calibrate(fn: Callable) -> tuple:
    """Doubles (or jumps) the batch until it lasts TARGET_BATCH_MS of GPU time.

    Returns (calls per batch, that batch's ms).  The probes double as
    warm-up."""
    calls = 1
    while True:
        ms = _run_batch(fn, calls)
        if ms >= TARGET_BATCH_MS or calls >= MAX_CALLS_PER_BATCH:
            return calls, ms
        calls = grow_calls(calls, ms, MAX_CALLS_PER_BATCH)


def grow_calls(calls: int, ms: float, cap: int) -> int:
    """The next batch size after a batch of `calls` lasted `ms`.

    Aims a little past the target; grows at least 2x and at most 16x per
    probe, since a microsecond batch says little about its rate."""
    guess = math.ceil(calls * 1.2 * TARGET_BATCH_MS / max(ms, 1e-3))
    return min(cap, max(2 * calls, min(16 * calls, guess)))


def batch_count(batch_ms: float, cap_ms: float) -> int:
    """Enough batches for MIN_TOTAL_MS, at least MIN_BATCHES, within cap_ms
    unless MIN_BATCHES alone exceed it (one call of a huge shape)."""
    wanted = math.ceil(MIN_TOTAL_MS / max(batch_ms, 1e-6))
    allowed = math.floor(cap_ms / max(batch_ms, 1e-6))
    return max(MIN_BATCHES, min(wanted, allowed))


def time_round(fn: Callable, timing: Timing, cap_ms: float) -> None:
    """One round: warm-up, (calibration), then all batches enqueued back to
    back with their events and read after a single synchronisation."""
    import torch
    for _ in range(WARMUP_CALLS):
        fn()
    if timing.calls_per_batch == 0:
        timing.calls_per_batch, probe_ms = calibrate(fn)
    else:
        probe_ms = _run_batch(fn, timing.calls_per_batch)
    events = []
    for _ in range(batch_count(probe_ms, cap_ms)):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(timing.calls_per_batch):
            fn()
        end.record()
        events.append((start, end))
    torch.cuda.synchronize()
    batch_ms = [s.elapsed_time(e) for s, e in events]
    timing.batch_ms.extend(batch_ms)
    timing.round_medians.append(statistics.median(batch_ms) / timing.calls_per_batch)


def time_gpu(fn: Callable, cap_ms: float = MEASURE_CAP_MS) -> Timing:
    """Times one function (used for the ceilings)."""
    timing = Timing()
    for _ in range(ROUNDS):
        time_round(fn, timing, cap_ms / ROUNDS)
    return timing


def time_pair(fn_a: Callable, fn_b: Callable, cap_ms: float = MEASURE_CAP_MS) -> tuple:
    """Times two functions in alternating rounds (A B A B) with one helper."""
    a, b = Timing(), Timing()
    for _ in range(ROUNDS):
        time_round(fn_a, a, cap_ms / ROUNDS)
        time_round(fn_b, b, cap_ms / ROUNDS)
    return a, b


# ---------------------------------------------------------------- graph timing
#
# Eager timing of a launch-bound shape measures the host (Python dispatch,
# binding, launch), not the kernels.  Graph timing replays the same calls
# from a CUDA graph, so no host code runs between them: what is left is GPU
# time plus the graph's own gap between kernels, the same for both libraries.


@dataclass
class CapturedGraph:
    """A CUDA graph of `calls` back-to-back calls of one function."""

    graph: object
    calls: int
    out: object          # what the last captured call returned; each replay rewrites it


@dataclass
class GraphResult:
    """Graph timing of one library: a Timing, or a note saying why there is none."""

    timing: Timing | None = None
    note: str | None = None
    out: object = None   # the last call's output after a replay (for the check)


# Graphs whose failed capture could not be undone (see undo_failed_capture):
# the caching allocator still refers to them, so they are kept alive, no
# further capture is tried, and empty_cache is not called (it would fail an
# internal assert of the allocator for the rest of the process).
_STUCK_CAPTURES: list = []
STUCK_NOTE = "not measured: an earlier failed capture could not be undone in this PyTorch"


def error_text(e: BaseException, limit: int = GRAPH_NOTE_CHARS) -> str:
    """One short line for a note: exception type and the message's first line."""
    text = f"{type(e).__name__}: {e}".splitlines()[0]
    return text if len(text) <= limit else text[:limit - 3] + "..."


def empty_cache_if_safe() -> None:
    import torch
    if not _STUCK_CAPTURES:
        torch.cuda.empty_cache()


def _end_pool_routing(device: int, pool) -> bool | None:
    """Ends the allocator's routing of allocations into `pool` that a capture
    began.  True: ended here; False: it was not routing any more (capture
    end got that far); None: no binding of this PyTorch could do it.

    Private bindings, hence the getattr and both names: PyTorch 2.8 renamed
    _cuda_endAllocateCurrentStreamToPool to _cuda_endAllocateToPool."""
    import torch
    for name in ("_cuda_endAllocateToPool", "_cuda_endAllocateCurrentStreamToPool"):
        end = getattr(torch._C, name, None)
        if end is None:
            continue
        try:
            end(device, pool)
        except TypeError:        # another signature (older PyTorch): try the next
            continue
        except RuntimeError:     # "not currently recording to mempool_id"
            return False
        return True
    return None


def undo_failed_capture(graph, pool, caller) -> None:
    """Puts PyTorch back into a usable state after a capture that raised.

    torch.cuda.graph's exit ends the capture, then restores the stream.  When
    ending raises (the capture was invalidated: something in it cannot be
    captured), neither the rest of capture end nor the stream restore runs:
    the current stream stays the side stream, and the caching allocator keeps
    routing allocations into the graph's pool and refuses empty_cache from
    then on.  So: restore the stream; end the routing if capture end did not,
    and release the pool (the graph will not, as its capture never ended).
    The graph object must outlive this: the allocator's routing refers to it.
    """
    import torch
    torch.cuda.set_stream(caller)
    device = torch.cuda.current_device()
    ended = _end_pool_routing(device, pool)
    if ended is None:
        _STUCK_CAPTURES.append(graph)
    elif ended:
        release = getattr(torch._C, "_cuda_releasePool", None)
        if release is not None:
            try:
                release(device, pool)
            except RuntimeError:
                pass             # the pool's memory stays reserved; harmless


def settle_cuda() -> str | None:
    """After a failed capture or replay, returns None once CUDA works again,
    else the error that remains.

    CUDA keeps a refused call inside a capture as its last error (not
    sticky), and PyTorch's next kernel-launch check would report it as its
    own failure: a throwaway launch consumes it.  If a second one also
    fails, the context is broken (a sticky error); the rows after this one
    then error out one by one rather than crash the run."""
    import torch
    error = None
    for _ in range(2):
        try:
            torch.cuda.synchronize()
            torch.zeros(1, device="cuda").add_(1.0)
            torch.cuda.synchronize()
            return None
        except RuntimeError as e:
            error = error_text(e)
    return error


def capture_graph(fn: Callable, calls: int) -> CapturedGraph:
    """Captures `calls` back-to-back calls of fn into one CUDA graph.

    PyTorch's documented recipe: warm up on a side stream, then capture on
    that same stream.  "Same" matters for convtune: its Plan remembers the
    stream it last ran on and, on a new stream, makes it wait for the old one
    with an event; recorded outside the capture, that wait is illegal inside
    it.  After the warm-up the plan's last stream is the capture stream, so
    no such wait happens.  Outputs allocated inside come from the graph's
    private pool; freed ones are reused by later calls of the capture, so
    its memory stays about two outputs plus workspace whatever `calls` is."""
    import torch
    caller = torch.cuda.current_stream()
    side = torch.cuda.Stream()
    side.wait_stream(caller)
    with torch.cuda.stream(side):
        for _ in range(GRAPH_WARMUP_CALLS):
            fn()
    caller.wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    # A pool handle of our own: graph.pool() is refused after a failed
    # capture, and undoing one needs the pool's id.
    pool = torch.cuda.graph_pool_handle()
    out = None
    try:
        with torch.cuda.graph(graph, pool=pool, stream=side):
            for _ in range(calls):
                out = fn()
    except BaseException:
        out = None
        undo_failed_capture(graph, pool, caller)
        raise
    return CapturedGraph(graph=graph, calls=calls, out=out)


def _replay_ms(graph) -> float:
    """One replay on the current stream between events, read when done."""
    import torch
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    graph.replay()
    end.record()
    end.synchronize()
    return start.elapsed_time(end)


def first_graph_calls(guess_ms: float | None) -> int:
    """The first graph size to try: enough calls for TARGET_BATCH_MS if each
    took guess_ms (the eager per-call time).  Eager time is at least the GPU
    time (a launch-bound shape leaves the GPU idle between calls), so this
    is at most the size needed, and calibrate_graph grows from there."""
    if guess_ms is None or not guess_ms > 0:
        return 1
    return max(1, min(MAX_GRAPH_CALLS, math.ceil(1.2 * TARGET_BATCH_MS / guess_ms)))


def calibrate_graph(fn: Callable, guess_ms: float | None) -> CapturedGraph:
    """Captures graphs of growing size until one replay lasts TARGET_BATCH_MS
    of GPU time (or holds MAX_GRAPH_CALLS calls), by the rule of calibrate.
    A graph that is too short is freed before the next capture."""
    calls = first_graph_calls(guess_ms)
    while True:
        captured = capture_graph(fn, calls)
        captured.graph.replay()          # the first replay also uploads the graph
        ms = _replay_ms(captured.graph)
        if ms >= TARGET_BATCH_MS or calls >= MAX_GRAPH_CALLS:
            return captured
        calls = grow_calls(calls, ms, MAX_GRAPH_CALLS)
        del captured


def graph_round(captured: CapturedGraph, timing: Timing, cap_ms: float) -> None:
    """One round, as time_round: a replay that is warm-up and probe, then all
    replays enqueued back to back, each between its own events, read after
    a single synchronisation."""
    import torch
    probe_ms = _replay_ms(captured.graph)
    events = []
    for _ in range(batch_count(probe_ms, cap_ms)):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        captured.graph.replay()
        end.record()
        events.append((start, end))
    torch.cuda.synchronize()
    batch_ms = [s.elapsed_time(e) for s, e in events]
    timing.batch_ms.extend(batch_ms)
    timing.round_medians.append(statistics.median(batch_ms) / timing.calls_per_batch)


def replayed_output(captured: CapturedGraph):
    """The last captured call's output as a replay writes it: poisoned with
    NaN first, so that an element the replay does not write fails the check."""
    import torch
    captured.out.fill_(math.nan)
    captured.graph.replay()
    torch.cuda.synchronize()
    return captured.out


def _graph_failed(result: GraphResult, stage: str, e: Exception) -> None:
    """Records why a library has no graph time, and gets CUDA usable again."""
    result.timing, result.out = None, None
    result.note = f"{stage} failed: {error_text(e)}"
    if e.__context__ is not None:
        # Capture end's "operation failed due to a previous error during
        # capture" hides the call that failed; it is the context.
        result.note += f" (after {error_text(e.__context__)})"
    broken = settle_cuda()
    if broken is not None:
        result.note += f" (CUDA still failing afterwards: {broken})"


def time_graph_pair(fn_a: Callable, fn_b: Callable, guess_a: float | None,
                    guess_b: float | None, cap_ms: float = MEASURE_CAP_MS) -> tuple:
    """Graph timing of two functions with one policy: each captured once
    (calibrated from its eager per-call time), then replayed in alternating
    rounds (A B A B) as time_pair does, then replayed once more for its
    output.  A library whose capture or replay raises gets no Timing and a
    note; the other goes on.  The graphs are freed before returning; the
    outputs (GraphResult.out) are the caller's to drop."""
    import torch
    results = (GraphResult(), GraphResult())
    graphs = [None, None]
    try:
        for i, (fn, guess) in enumerate(((fn_a, guess_a), (fn_b, guess_b))):
            if _STUCK_CAPTURES:
                results[i].note = STUCK_NOTE
                continue
            try:
                graphs[i] = calibrate_graph(fn, guess)
                results[i].timing = Timing(calls_per_batch=graphs[i].calls)
            except Exception as e:        # noqa: BLE001 - any failure is one library's note
                graphs[i] = None
                _graph_failed(results[i], "capture", e)
        for _ in range(ROUNDS):
            for i in (0, 1):
                if graphs[i] is None:
                    continue
                try:
                    graph_round(graphs[i], results[i].timing, cap_ms / ROUNDS)
                except Exception as e:    # noqa: BLE001
                    graphs[i] = None
                    _graph_failed(results[i], "replay", e)
        for i in (0, 1):
            if graphs[i] is None:
                continue
            try:
                results[i].out = replayed_output(graphs[i])
            except Exception as e:        # noqa: BLE001
                graphs[i] = None
                _graph_failed(results[i], "output replay", e)
    finally:
        # Replays are finished (every path above synchronised); dropping the
        # graphs frees their executables and hands their pools back.
        graphs.clear()
        try:
            torch.cuda.synchronize()
            empty_cache_if_safe()
        except RuntimeError:
            pass                          # a broken context shows in the next row
    return results


# ---------------------------------------------------------------- ceilings


def copy_rate() -> float:
    """Bytes per second of a large device-to-device copy, read plus written.
    The buffers are freed on return."""
    import torch
    src = torch.empty(COPY_BYTES // 4, device="cuda", dtype=torch.float32).uniform_()
    dst = torch.empty_like(src)
    t = time_gpu(lambda: dst.copy_(src))
    return 2 * COPY_BYTES / (t.median_ms * 1e-3)


def matmul_rates() -> dict:
    """FLOP/s of torch.mm in each mode, on one set of random matrices."""
    import torch
    a = torch.randn(MATMUL_N, MATMUL_N, device="cuda")
    b = torch.randn(MATMUL_N, MATMUL_N, device="cuda")
    c = torch.empty_like(a)
    rates = {}
    for mode in MODES:
        set_math_mode(mode)
        t = time_gpu(lambda: torch.mm(a, b, out=c))
        rates[mode] = 2 * MATMUL_N ** 3 / (t.median_ms * 1e-3)
    return rates


def measure_ceilings() -> dict:
    """Device copy bandwidth and fp32 / TF32 matmul rates, measured now."""
    import torch
    copy_bytes_per_s = copy_rate()
    torch.cuda.empty_cache()
    rates = matmul_rates()
    torch.cuda.empty_cache()
    return {"copy_bytes_per_s": copy_bytes_per_s, "copy_buffer_bytes": COPY_BYTES,
            "fp32_flops_per_s": rates["strict"], "tf32_flops_per_s": rates["tf32"],
            "matmul_n": MATMUL_N}


def peak_for(mode: str, ceilings: dict) -> float:
    return ceilings["tf32_flops_per_s" if mode == "tf32" else "fp32_flops_per_s"]


# ---------------------------------------------------------------- correctness


def rel_l2(y, ref) -> float:
    """||y - ref|| / ||ref|| in float64 on the GPU; NaN anywhere gives NaN."""
    import torch
    if tuple(y.shape) != tuple(ref.shape):
        return math.inf
    num = torch.zeros((), dtype=torch.float64, device=ref.device)
    den = torch.zeros((), dtype=torch.float64, device=ref.device)
    for a, b in zip(y.reshape(-1).split(REL_L2_CHUNK), ref.reshape(-1).split(REL_L2_CHUNK)):
        a64, b64 = a.double(), b.double()
        num += (a64 - b64).square().sum()
        den += b64.square().sum()
    num, den = num.item(), den.item()
    if den == 0.0:
        return 0.0 if num == 0.0 else math.inf
    return math.sqrt(num / den)


def within_limit(err: float, mode: str) -> bool:
    return err <= REL_L2_LIMIT[mode]      # False for NaN too
