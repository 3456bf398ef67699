"""Cache files without a GPU or torch: reading their tunings and pending
problems and copying tunings between them (the C API's conv_cache_reader_*
and conv_cache_merge, which `convtune list`, `show`, `merge`, `export` and
`import` run)."""
import ctypes
import os

from . import _lib
from ._base import ConvtuneError

_MESSAGE_BYTES = 1024


def _text(value):
    return "" if value is None else value.decode("utf-8", "replace")


def _entry(e):
    """A conv_cache_entry as a dict (its strings copied: they live during the callback only)."""
    return {
        "problem": _text(e.problem), "device": _text(e.device), "versions": _text(e.versions),
        "tuned_at": _text(e.tuned_at), "algorithm": _text(e.algorithm), "algorithm_id": e.algorithm_id,
        "config": _text(e.config), "config_values": list(e.config_values[:max(0, e.config_count)]),
        "status": _lib.status_name(e.status), "reason": _text(e.reason),
        "time_ms": e.time_ms if e.time_ms >= 0 else None,
        "rel_error": e.rel_error if e.rel_error >= 0 else None,
        "workspace_bytes": e.workspace_bytes, "heuristic_pick": bool(e.heuristic_pick),
        "winner": bool(e.winner), "deterministic": None if e.deterministic < 0 else bool(e.deterministic),
    }


def _fail_if(status, message):
    if status != _lib.OK:
        raise ConvtuneError(status, _text(message.value))


def default_cache_path(create_dirs=False):
    """The cache file a Context uses without `cache=`: $CONVTUNE_CACHE, else
    $XDG_CACHE_HOME/convtune/cache.db, else ~/.cache/convtune/cache.db."""
    lib = _lib.load()
    path, message = ctypes.create_string_buffer(4096), ctypes.create_string_buffer(_MESSAGE_BYTES)
    _fail_if(lib.conv_cache_default_path(path, len(path), int(bool(create_dirs)), message, len(message)),
             message)
    return os.fsdecode(path.value)


def system_cache_files(system_cache=None):
    """The read-only system caches a Context(system_cache=...) opens, in the
    order plans look them up: None follows the search path
    ($CONVTUNE_SYSTEM_CACHE, the caches installed with the package, then
    $XDG_DATA_DIRS/convtune/caches), "" is none, a path is that file or
    that directory's *.db files.  Needs no GPU and opens nothing."""
    lib = _lib.load()
    found = []

    def collect(path, named, user):
        found.append(os.fsdecode(path))
        return 0

    callback = _lib.SystemCacheFn(collect)
    arg = None if system_cache is None else os.fsencode(os.fspath(system_cache))
    message = ctypes.create_string_buffer(_MESSAGE_BYTES)
    _fail_if(lib.conv_system_cache_files(arg, callback, None, message, len(message)), message)
    return found


def _pending(e):
    """A conv_cache_pending_entry as a dict (its strings copied)."""
    return {"problem": _text(e.problem), "device": _text(e.device), "versions": _text(e.versions),
            "reason": _text(e.reason), "recorded_at": _text(e.recorded_at)}


def _read(path, walk, convert=_entry, callback_type=None):
    """Opens the cache at `path` (None: the default one) read-only and collects
    what walk(lib, reader, callback, message) passes to the callback, each
    through convert()."""
    lib = _lib.load()
    path = default_cache_path() if path is None else os.fsdecode(os.fspath(path))
    message = ctypes.create_string_buffer(_MESSAGE_BYTES)
    reader = _lib.CacheReaderPtr()
    _fail_if(lib.conv_cache_reader_open(os.fsencode(path), ctypes.byref(reader), message, len(message)),
             message)
    entries = []

    def collect(entry, _user):
        entries.append(convert(entry.contents))
        return 0

    callback = (callback_type or _lib.CacheEntryFn)(collect)  # alive until the walk returns
    try:
        _fail_if(walk(lib, reader, callback, message), message)
    finally:
        lib.conv_cache_reader_close(reader)
    return entries


def cache_winners(path=None):
    """Every tuned shape's winner in the cache at `path` (None: the default
    cache), as dicts (problem, device, versions, tuned_at, algorithm, config,
    config_values, status, reason, time_ms, rel_error, workspace_bytes,
    heuristic_pick, winner, deterministic), ordered by problem key."""
    return _read(path, lambda lib, reader, fn, msg: lib.conv_cache_reader_winners(reader, fn, None, msg,
                                                                                 len(msg)))


def cache_trials(problem, path=None):
    """Every trial of the shape whose key is `problem` (as Plan.info's key, or
    a cache_winners row's "problem"), each tuning's winner first."""
    key = problem.encode() if isinstance(problem, str) else bytes(problem)
    return _read(path, lambda lib, reader, fn, msg: lib.conv_cache_reader_trials(reader, key, fn, None, msg,
                                                                                len(msg)))


def cache_pending(path=None):
    """The problems waiting for `convtune tune --pending` in the cache at `path`
    (None: the default cache), oldest first, as dicts (problem, device,
    versions, reason, recorded_at): reason "untuned" for a shape a
    policy="record" context ran untimed, "incomplete" for a tuning its
    budget cut short.  A cache written before 0.4 has none."""
    return _read(path, lambda lib, reader, fn, msg: lib.conv_cache_reader_pending(reader, fn, None, msg,
                                                                                 len(msg)),
                 _pending, _lib.CachePendingEntryFn)


def merge_caches(source, into, device=None):
    """Copies the finished tunings of the cache file `source` into `into`
    (created if missing), each with all of its trials as measured; where
    `into` has a tuning of the same problem, device and versions, the faster
    winner stays.  device: only that GPU's tunings (a fingerprint as in
    cache_winners rows).  Returns {"added": n, "replaced": n, "kept": n}."""
    lib = _lib.load()
    counts = [ctypes.c_size_t(0) for _ in range(3)]
    message = ctypes.create_string_buffer(_MESSAGE_BYTES)
    status = lib.conv_cache_merge(os.fsencode(os.fspath(source)), os.fsencode(os.fspath(into)),
                                  None if device is None else device.encode(),
                                  *(ctypes.byref(c) for c in counts), message, len(message))
    _fail_if(status, message)
    return dict(zip(("added", "replaced", "kept"), (c.value for c in counts)))
