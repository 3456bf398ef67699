#!/usr/bin/env python3
"""file_loops.py BUILD TARGET[+TARGET...]... -- no loop of files: among each
target's object files (targets joined by + are read as one), where one file calls a function another defines, the calls
never come back round (no strongly connected set of two or more files).
Reads the objects' symbols with nm; prints each loop and fails on one."""
import collections
import glob
import os
import subprocess
import sys


def call_graph(objects):
    defined, used = {}, collections.defaultdict(set)
    for obj in objects:
        source = obj.split(".dir/", 1)[1][: -len(".o")]
        out = subprocess.run(["nm", obj], capture_output=True, text=True, check=True).stdout
        for line in out.splitlines():
            fields = line.split()
            if len(fields) == 3 and fields[1] in "TDRB":
                defined[fields[2]] = source
            elif len(fields) == 2 and fields[0] == "U":
                used[source].add(fields[1])
    graph = collections.defaultdict(set)
    for source, symbols in used.items():
        graph[source] |= {defined[s] for s in symbols if s in defined and defined[s] != source}
    return graph


def loops(graph):
    """Tarjan's strongly connected components of two or more files."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in list(graph):
        if v not in index:
            visit(v)
    return found


def main():
    build, targets = sys.argv[1], sys.argv[2:]
    bad = 0
    for target in targets:
        objects = [obj for part in target.split("+")
                   for obj in glob.glob(os.path.join(build, "CMakeFiles", part + ".dir", "**", "*.o"),
                                        recursive=True)]
        if not objects:
            print(f"file_loops: no objects for {target} under {build}")
            return 1
        for component in loops(call_graph(objects)):
            print(f"file_loops: {target}: these files call each other round: {', '.join(component)}")
            bad = 1
        if not bad:
            print(f"file_loops: {target}: {len(objects)} files, no loop")
    return bad


if __name__ == "__main__":
    sys.exit(main())
