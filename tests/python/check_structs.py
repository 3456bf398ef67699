"""CPU test, without torch or a GPU: the binding's ctypes structs
(python/convtune/_lib.py) have the C compiler's layout of include/convtune.h,
field by field, and no field the header lacks; and its policy and plan-source
names have the header's values, every one of them.

    python3 tests/python/check_structs.py build/struct_layout
"""
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
from convtune import _lib  # noqa: E402  (needs neither torch nor a GPU)

MIRRORS = {"conv_problem": _lib.Problem, "conv_context_options": _lib.ContextOptions,
           "conv_plan_info": _lib.PlanInfo, "conv_cache_entry": _lib.CacheEntry,
           "conv_cache_pending_entry": _lib.CachePendingEntry}


def c_layouts(program):
    layouts = {}
    for line in subprocess.run([program], check=True, capture_output=True, text=True).stdout.splitlines():
        struct, field, value = line.split()
        layouts.setdefault(struct, {})[field] = int(value)
    return layouts


def differences(struct, c_layout, mirror):
    import ctypes
    python = {name: getattr(mirror, name).offset for name, _ in mirror._fields_}
    python["sizeof"] = ctypes.sizeof(mirror)
    return ["%s.%s: C %s, ctypes %s" % (struct, f, c_layout.get(f), python.get(f))
            for f in sorted(set(c_layout) | set(python)) if c_layout.get(f) != python.get(f)]


def enum_differences(layouts):
    """The binding's names for conv_policy and conv_plan_source against the header's."""
    policies = layouts.pop("conv_policy")
    sources = layouts.pop("conv_plan_source")
    wrong = ["conv_policy %s: C %s, Python %s" % (n, policies.get(n), _lib.POLICIES.get(n))
             for n in sorted(set(policies) | set(_lib.POLICIES)) if policies.get(n) != _lib.POLICIES.get(n)]
    python_sources = {n: i for i, n in enumerate(_lib.SOURCES)}
    wrong += ["conv_plan_source %s: C %s, Python %s" % (n, sources.get(n), python_sources.get(n))
              for n in sorted(set(sources) | set(python_sources)) if sources.get(n) != python_sources.get(n)]
    return wrong


def main(argv):
    layouts = c_layouts(argv[1])
    wrong = enum_differences(layouts)
    wrong += [d for struct, mirror in MIRRORS.items() for d in differences(struct, layouts[struct], mirror)]
    if wrong:
        print("\n".join(wrong))
        return 1
    print("%d structs, %d fields: the ctypes mirror matches the C layout"
          % (len(MIRRORS), sum(len(v) - 1 for v in layouts.values())))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
