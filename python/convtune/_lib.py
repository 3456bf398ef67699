"""ctypes mirror of include/convtune.h and the loading of libconvtune.so.

Everything here follows the header exactly; keep the two in step (the tests
compare the status list with the header).  No torch in this module, so it
can be imported and checked on machines without a GPU.
"""
import ctypes
import os
import threading
from ctypes import POINTER, Structure, c_char, c_char_p, c_double, c_int, c_int64, c_size_t, c_void_p

# CONV_STATUS_MAP, in the header's order: the enum value is the index.
STATUS_NAMES = (
    "OK",
    "INVALID_ARGUMENT",
    "BAD_DIMENSION",
    "SIZE_OVERFLOW",
    "FILTER_TOO_LARGE",
    "BAD_GROUPS",
    "BAD_PADDING",
    "BAD_STRIDE",
    "UNSUPPORTED",
    "NO_DEVICE",
    "CUDA_ERROR",
    "CUDNN_ERROR",
    "CUBLAS_ERROR",
    "OUT_OF_MEMORY",
    "WORKSPACE_LIMIT",
    "CACHE_ERROR",
    "CACHE_MISS",
    "NO_CANDIDATE",
    "VALIDATION_FAILED",
    "INTERRUPTED",
    "INTERNAL",
    "BUSY",
    "EVEN_FILTER",
)
OK = 0

POINTER_ALIGNMENT = 16  # CONV_POINTER_ALIGNMENT

DTYPE_F32, DTYPE_F16, DTYPE_BF16 = 0, 1, 2  # conv_dtype
# The binding's element types (torch dtypes' names): conv_dtype values.
DTYPES = {"float32": DTYPE_F32, "float16": DTYPE_F16, "bfloat16": DTYPE_BF16}
DTYPE_BYTES = {DTYPE_F32: 4, DTYPE_F16: 2, DTYPE_BF16: 2}
LAYOUT_NCHW = 0
LAYOUT_NHWC = 1
LAYOUTS = {"nchw": LAYOUT_NCHW, "nhwc": LAYOUT_NHWC}
FILTER_DEFAULT, FILTER_KCRS, FILTER_KRSC = 0, 1, 2  # conv_filter_layout
# The binding's layout names: (conv_layout, conv_filter_layout).  "nchw_krsc":
# x and y NCHW, the filters K R S C (a channels-last weight).
LAYOUT_NAMES = {"nchw": (LAYOUT_NCHW, FILTER_DEFAULT), "nhwc": (LAYOUT_NHWC, FILTER_DEFAULT),
                "nchw_krsc": (LAYOUT_NCHW, FILTER_KRSC)}
FORWARD, BACKWARD_DATA, BACKWARD_FILTER = 0, 1, 2
DIRECTIONS = {"fwd": FORWARD, "bwd_data": BACKWARD_DATA, "bwd_filter": BACKWARD_FILTER}
MATH = {"strict": 0, "tf32": 1}
EPILOGUE_NONE, EPILOGUE_BIAS, EPILOGUE_BIAS_RELU = 0, 1, 2
OP_CONVOLUTION, OP_DYNAMIC = 0, 1  # conv_op
POLICIES = {"exhaustive": 0, "fast": 1, "cache_only": 2, "record": 3, "predict": 4}  # conv_policy values
SOURCES = ("memory", "cache", "tuned", "system", "heuristic", "carried")  # conv_plan_source values
REPLAYS = ("pending", "graph", "direct")  # conv_replay values

PROBLEM_KEY_SIZE = 256  # CONV_PROBLEM_KEY_MAX of convtune.h
MESSAGE_SIZE = 512  # the library's messages are at most this long


def status_name(status):
    """The CONV_ name (without the prefix) of a status code."""
    status = int(status)
    return STATUS_NAMES[status] if 0 <= status < len(STATUS_NAMES) else "UNKNOWN_%d" % status


# ---------------------------------------------------------------- structs

PROBLEM_INT_FIELDS = ("n", "c", "h", "w", "k", "r", "s", "pad_h", "pad_w",
                      "stride_h", "stride_w", "dil_h", "dil_w", "groups")
PROBLEM_ENUM_FIELDS = ("dtype", "layout", "direction", "math", "epilogue", "deterministic")
# Every field a problem key (_problem.py) sets, in the struct's order.
PROBLEM_FIELDS = PROBLEM_INT_FIELDS + PROBLEM_ENUM_FIELDS + ("op", "filter_layout")


class Problem(Structure):
    """struct conv_problem: its size, 14 int64_t, then 5 enums and an int (all int-sized),
    then `op` (conv_op: OP_CONVOLUTION or OP_DYNAMIC) and `filter_layout`
    (conv_filter_layout).  The library reads struct_size (set by conv_problem_init_sized
    with ctypes.sizeof of this definition), so a newer library still reads it.  `op` is in
    the key, so that a dynamic problem's key never equals a convolution's with the same
    numbers."""
    _fields_ = ([("struct_size", c_size_t)] + [(f, c_int64) for f in PROBLEM_INT_FIELDS]
                + [(f, c_int) for f in PROBLEM_ENUM_FIELDS] + [("op", c_int),
                                                               ("filter_layout", c_int)])


# enum conv_log_level, most severe first: the enum value is the index (0, as
# conv_context_options.log_level, is the default: INFO).
LOG_LEVELS = ("DEFAULT", "ERROR", "WARN", "INFO", "DEBUG")

# conv_log_fn: void (*)(void *user, conv_log_level level, const char *message).
LogFn = ctypes.CFUNCTYPE(None, c_void_p, c_int, c_char_p)


class ContextOptions(Structure):
    """struct conv_context_options."""
    _fields_ = [
        ("struct_size", c_size_t),
        ("device", c_int),
        ("cache_path", c_char_p),
        ("policy", c_int),
        ("workspace_limit", c_size_t),
        ("verbose", c_int),
        ("direct_launches", c_int),
        ("deterministic", c_int),
        ("log", LogFn),
        ("log_user", c_void_p),
        ("log_level", c_int),
        ("system_cache_path", c_char_p),
        ("tuning_budget_ms", ctypes.c_double),
        # conv_device_alloc_fn and conv_device_free_fn: addresses of C functions only
        # (_allocator.py), never Python callbacks, which the library would call from
        # tunings without the GIL.
        ("device_alloc", c_void_p),
        ("device_free", c_void_p),
        ("allocator_user", c_void_p),
        ("retime_stale", c_int),
    ]


CACHE_CONFIG_MAX = 32  # CONV_CACHE_CONFIG_MAX


class CacheEntry(Structure):
    """struct conv_cache_entry: one trial as a cache reader passes it (valid in the callback only)."""
    _fields_ = [
        ("struct_size", c_size_t),
        ("problem", c_char_p),
        ("device", c_char_p),
        ("versions", c_char_p),
        ("tuned_at", c_char_p),
        ("algorithm", c_char_p),
        ("algorithm_id", c_int),
        ("config", c_char_p),
        ("config_count", c_int),
        ("config_values", c_int64 * CACHE_CONFIG_MAX),
        ("status", c_int),
        ("reason", c_char_p),
        ("time_ms", c_double),
        ("rel_error", c_double),
        ("workspace_bytes", c_size_t),
        ("heuristic_pick", c_int),
        ("winner", c_int),
        ("deterministic", c_int),
    ]


# int (*conv_cache_entry_fn)(const conv_cache_entry *entry, void *user)
CacheEntryFn = ctypes.CFUNCTYPE(c_int, POINTER(CacheEntry), c_void_p)


class CachePendingEntry(ctypes.Structure):
    """conv_cache_pending_entry (valid during the callback only)."""
    _fields_ = [
        ("struct_size", c_size_t),
        ("problem", c_char_p),
        ("device", c_char_p),
        ("versions", c_char_p),
        ("reason", c_char_p),
        ("recorded_at", c_char_p),
    ]


# int (*conv_cache_pending_entry_fn)(const conv_cache_pending_entry *entry, void *user)
CachePendingEntryFn = ctypes.CFUNCTYPE(c_int, POINTER(CachePendingEntry), c_void_p)
# conv_system_cache_fn: (path, named, user) -> nonzero to stop.
SystemCacheFn = ctypes.CFUNCTYPE(c_int, c_char_p, c_int, c_void_p)
CacheReaderPtr = c_void_p


class PlanInfo(Structure):
    """struct conv_plan_info."""
    _fields_ = [
        ("algorithm", c_char * 32),
        ("config", c_char * 128),
        ("time_ms", c_double),
        ("workspace_bytes", c_size_t),
        ("source", c_int),
        ("replay", c_int),
        ("replay_note", c_char * 128),
        ("graph_launches", ctypes.c_uint64),
        ("graph_captures", ctypes.c_uint64),
        ("direct_runs", ctypes.c_uint64),
        ("direction", c_int),
        ("deterministic", c_int),
        ("dtype", c_int),
    ]


# Opaque handle types, distinct so that ctypes refuses a plan where a
# context is expected.
class _ContextStruct(Structure):
    pass


class _PlanStruct(Structure):
    pass


ContextPtr = POINTER(_ContextStruct)
PlanPtr = POINTER(_PlanStruct)

_status = c_int  # conv_status: a C enum, int-sized

_SIGNATURES = {
    "conv_status_string": (c_char_p, [_status]),
    # The *_sized functions behind the header's macros: callers pass
    # ctypes.sizeof of the struct (see the versions note in convtune.h).
    "conv_problem_init_sized": (None, [POINTER(Problem), c_size_t]),
    "conv_problem_validate": (_status, [POINTER(Problem), c_char_p, c_size_t]),
    "conv_problem_output_dims": (_status, [POINTER(Problem), POINTER(c_int64), POINTER(c_int64)]),
    "conv_problem_key": (_status, [POINTER(Problem), c_char_p, c_size_t]),
    "conv_problem_parse_sized": (_status, [c_char_p, POINTER(Problem), c_size_t, c_char_p, c_size_t]),
    "conv_problem_set_patches": (_status, [POINTER(Problem), c_int64, c_int64]),
    "conv_context_options_init_sized": (None, [POINTER(ContextOptions), c_size_t]),
    "conv_context_create": (_status, [POINTER(ContextPtr), POINTER(ContextOptions)]),
    "conv_context_destroy": (_status, [ContextPtr]),
    "conv_context_last_error": (c_char_p, [ContextPtr]),
    "conv_context_interrupt": (None, [ContextPtr]),
    "conv_plan_create": (_status, [ContextPtr, POINTER(Problem), POINTER(PlanPtr)]),
    # plan, stream, x, w, bias, y: the pointers are passed as Python ints.
    "conv_plan_execute": (_status, [PlanPtr, c_void_p, c_void_p, c_void_p, c_void_p, c_void_p]),
    # plan, stream, then dy, w, dx / x, dy, dw.
    "conv_plan_backward_data": (_status, [PlanPtr, c_void_p, c_void_p, c_void_p, c_void_p]),
    "conv_plan_backward_filter": (_status, [PlanPtr, c_void_p, c_void_p, c_void_p, c_void_p]),
    "conv_plan_info_get_sized": (_status, [PlanPtr, POINTER(PlanInfo), c_size_t]),
    "conv_plan_destroy": (None, [PlanPtr]),
    "conv_library_versions": (c_char_p, []),
    "conv_cache_reader_open": (_status, [c_char_p, POINTER(CacheReaderPtr), c_char_p, c_size_t]),
    "conv_cache_reader_close": (None, [CacheReaderPtr]),
    "conv_cache_reader_winners": (_status, [CacheReaderPtr, CacheEntryFn, c_void_p, c_char_p, c_size_t]),
    "conv_cache_reader_trials": (_status, [CacheReaderPtr, c_char_p, CacheEntryFn, c_void_p, c_char_p,
                                           c_size_t]),
    "conv_cache_reader_pending": (_status, [CacheReaderPtr, CachePendingEntryFn, c_void_p, c_char_p,
                                            c_size_t]),
    "conv_cache_default_path": (_status, [c_char_p, c_size_t, c_int, c_char_p, c_size_t]),
    "conv_system_cache_files": (_status, [c_char_p, SystemCacheFn, c_void_p, c_char_p, c_size_t]),
    "conv_cache_merge": (_status, [c_char_p, c_char_p, c_char_p, POINTER(c_size_t), POINTER(c_size_t),
                                   POINTER(c_size_t), c_char_p, c_size_t]),
    "conv_version": (c_int, []),
}

# ---------------------------------------------------------------- loading

_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))
REPO_DIR = os.path.dirname(os.path.dirname(_PACKAGE_DIR))

_lib = None
_lib_path = None
_load_lock = threading.Lock()


def candidate_paths():
    """Where libconvtune.so is looked for, in order: $CONVTUNE_LIB alone; else
    the package's own folder (pip install), then a build of this repository."""
    env = os.environ.get("CONVTUNE_LIB")
    if env:
        return [env]
    return [os.path.join(_PACKAGE_DIR, "libconvtune.so")] + [
        os.path.join(REPO_DIR, d, "libconvtune.so") for d in ("build", "build-gpu")]


def _find():
    paths = candidate_paths()
    for path in paths:
        if os.path.isfile(path):
            return path
    if os.environ.get("CONVTUNE_LIB"):
        raise OSError("convtune: CONVTUNE_LIB=%s does not exist; point it at a built libconvtune.so"
                      % paths[0])
    raise OSError("convtune: libconvtune.so not found (tried %s). Build it with "
                  "`cmake -S . -B build && cmake --build build --target convtune_shared` "
                  "or set CONVTUNE_LIB to its path." % ", ".join(paths))


def _declare(lib, path):
    for name, (restype, argtypes) in _SIGNATURES.items():
        try:
            fn = getattr(lib, name)
        except AttributeError:
            raise OSError("convtune: %s does not export %s; is it from another version?" % (path, name)) from None
        fn.restype = restype
        fn.argtypes = argtypes
    # The enum above and the library's CONV_STATUS_MAP must have the same
    # length; an out-of-range status reads "unknown status".
    count = len(STATUS_NAMES)
    if lib.conv_status_string(count - 1) == b"unknown status" or lib.conv_status_string(count) != b"unknown status":
        raise OSError("convtune: the status list of %s differs from this binding's; rebuild one or the other" % path)


def load():
    """The loaded library with every function declared; OSError when unavailable.

    Retried at each call until it succeeds, so that fixing CONVTUNE_LIB in a
    running interpreter works.
    """
    global _lib, _lib_path
    if _lib is not None:
        return _lib
    with _load_lock:
        if _lib is None:
            path = _find()
            # If torch can be imported, load it first: the library links
            # libcudnn.so.9 and libcublasLt dynamically, and whichever copy is
            # loaded first serves both, so torch keeps the cuDNN it was built
            # against (and convtune records that version in its cache keys).
            try:
                import torch  # noqa: F401
            except Exception:  # absent or broken: the library loads its own
                pass
            try:
                lib = ctypes.CDLL(path)
            except OSError as e:
                raise OSError("convtune: cannot load %s: %s. Its dependencies (libcudnn.so.9, "
                              "libcublasLt, libsqlite3, libuv) must be on the loader's path "
                              "(LD_LIBRARY_PATH)." % (path, e)) from None
            _declare(lib, path)
            _lib, _lib_path = lib, path
    return _lib


LAUNCH_MODULE = "_convtune_launch"
LAUNCH_FILE = LAUNCH_MODULE + ".abi3.so"
_launch = None  # (module or None, why not), once looked for


def launch_module():
    """(module, "") for the compiled call path (python/convtune/_launch.c)
    built beside the loaded libconvtune.so, else (None, why not): plans then
    call through ctypes."""
    global _launch
    if _launch is None:
        load()
        with _load_lock:
            if _launch is None:
                _launch = _load_launch_module(os.path.join(os.path.dirname(_lib_path), LAUNCH_FILE))
    return _launch


def _load_launch_module(path):
    if not os.path.isfile(path):
        return None, "%s is not built" % path
    import importlib.machinery
    import importlib.util
    try:
        loader = importlib.machinery.ExtensionFileLoader(LAUNCH_MODULE, path)
        spec = importlib.util.spec_from_loader(LAUNCH_MODULE, loader, origin=path)
        module = importlib.util.module_from_spec(spec)
        loader.exec_module(module)
    except Exception as e:  # e.g. a free-threaded interpreter, which has no stable ABI
        return None, "%s does not load: %s" % (path, e)
    return module, ""


def last_error(lib, context):
    """conv_context_last_error as str (context None: the last failed create in this thread)."""
    raw = lib.conv_context_last_error(context)
    return raw.decode("utf-8", "replace") if raw else ""


def status_text(status):
    """conv_status_string as str, or "" when the library cannot be loaded."""
    try:
        raw = load().conv_status_string(int(status))
    except OSError:
        return ""
    return raw.decode("utf-8", "replace") if raw else ""
