"""CPU test, without torch or a GPU: convtune.cache_winners, cache_trials,
cache_pending, merge_caches and default_cache_path against a cache whose
rows are written here with Python's sqlite3 (the library makes the file and
its schema).

    CONVTUNE_LIB=build/libconvtune.so python3 tests/python/check_cache.py TMPDIR
"""
import os
import sqlite3
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
import convtune  # noqa: E402  (needs neither torch nor a GPU)

P1 = "fwd f32 nchw strict none n32 c64 h56 w56 k64 r3 s3 pad1,1 str1,1 dil1,1 g1"
P2 = "fwd f32 nchw tf32 none n8 c3 h224 w224 k64 r7 s7 pad3,3 str2,2 dil1,1 g1"
D1 = "Test GPU A|sm90|132sm|l2=52428800|mem=2619000kHz*5120bit"
D2 = "Test GPU B|sm80|108sm|l2=41943040|mem=1593000kHz*5120bit"
V = "cuda=13000 driver=13000 cudnn=91900"

# (problem, device, algorithm id, name, config values, time ms or None, winner, heuristic pick, reason)
ROWS = [
    (P1, D1, 1, "cudnn", (12, 3), 0.25, 1, 0, ""),
    (P1, D1, 1, "cudnn", (1, 3), 0.5, 0, 1, ""),
    (P1, D1, 2, "im2col_gemm", (32, 2), None, 0, 0, "does not fit the workspace"),
    (P2, D2, 3, "fft", (16, 0), 1.5, 1, 0, ""),
]


def write_rows(path):
    with sqlite3.connect(path) as db:
        for i, (p, d, aid, name, values, ms, winner, pick, reason) in enumerate(ROWS):
            status = 0 if ms is not None else convtune._lib.STATUS_NAMES.index("UNSUPPORTED")
            db.execute("INSERT INTO trials (problem, device, versions, algorithm_id, algorithm, config,"
                       " config_text, status, status_name, reason, time_ms, rel_error, workspace_bytes,"
                       " heuristic_pick, winner, tuned_at, deterministic)"
                       " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                       (p, d, V, aid, name, ",".join(map(str, values)), "config %d" % i, status, "x",
                        reason, ms, 1e-7 if ms is not None else None, 1024 * i, pick, winner,
                        "2026-11-2%dT10:00:00Z" % i, 1))
        db.execute("INSERT INTO pending (problem, device, versions, reason, recorded_at)"
                   " VALUES (?, ?, ?, 'incomplete', '2026-11-25T10:00:00Z')", (P2, D2, V))
        db.execute("INSERT INTO pending (problem, device, versions, reason, recorded_at)"
                   " VALUES (?, ?, ?, 'untuned', '2026-11-24T10:00:00Z')", (P1, D1, V))
    db.close()


def expect_error(name, call):
    try:
        call()
    except convtune.ConvtuneError as e:
        assert e.status_name == name, (e.status_name, str(e))
        return e
    raise AssertionError("no %s error" % name)


def main(tmp):
    os.environ["CONVTUNE_CACHE"] = os.path.join(tmp, "default.db")
    assert convtune.default_cache_path() == os.path.join(tmp, "default.db")
    empty, source, into = (os.path.join(tmp, n) for n in ("empty.db", "source.db", "into.db"))
    for p in (empty, source, into):
        for suffix in ("", "-wal", "-shm"):
            if os.path.exists(p + suffix):
                os.remove(p + suffix)
    open(empty, "wb").close()  # an empty file is an empty cache
    assert convtune.merge_caches(empty, source) == {"added": 0, "replaced": 0, "kept": 0}
    write_rows(source)

    winners = convtune.cache_winners(source)
    assert [(w["problem"], w["device"]) for w in winners] == [(P1, D1), (P2, D2)], winners
    w = winners[0]
    assert (w["algorithm"], w["config_values"], w["time_ms"], w["winner"], w["versions"]) == \
        ("cudnn", [12, 3], 0.25, True, V), w
    trials = convtune.cache_trials(P1, source)
    assert [t["config_values"] for t in trials] == [[12, 3], [1, 3], [32, 2]], trials
    assert trials[1]["heuristic_pick"] and not trials[1]["winner"]
    assert trials[2]["time_ms"] is None and trials[2]["status"] == "UNSUPPORTED"
    assert trials[2]["reason"] == "does not fit the workspace" and trials[0]["deterministic"] is True

    assert convtune.merge_caches(source, into, device=D1) == {"added": 1, "replaced": 0, "kept": 0}
    copied = convtune.cache_trials(P1, into)
    assert [t["tuned_at"] for t in copied] == [t["tuned_at"] for t in trials], copied
    assert convtune.cache_winners(into)[0]["device"] == D1 and len(convtune.cache_winners(into)) == 1
    assert convtune.merge_caches(source, into) == {"added": 1, "replaced": 0, "kept": 1}

    pending = convtune.cache_pending(source)
    assert [(p["problem"], p["device"], p["reason"]) for p in pending] == \
        [(P1, D1, "untuned"), (P2, D2, "incomplete")], pending  # oldest first
    assert pending[0]["recorded_at"] == "2026-11-24T10:00:00Z" and pending[0]["versions"] == V
    assert convtune.cache_pending(empty) == []

    expect_error("CACHE_ERROR", lambda: convtune.cache_winners(os.path.join(tmp, "missing.db")))
    expect_error("CACHE_ERROR", lambda: convtune.cache_pending(os.path.join(tmp, "missing.db")))
    e = expect_error("INVALID_ARGUMENT", lambda: convtune.merge_caches(into, into))
    assert "merged into" in e.message, e.message
    check_system_cache_files(tmp, source, into)
    print("cache reading and merging from Python: %d winners, %d trials, %d pending, merges as counted"
          % (len(winners), len(trials), len(pending)))
    return 0


def check_system_cache_files(tmp, first, second):
    """convtune.system_cache_files: the search path's files in order, a
    directory's *.db files by name, "" none, a missing named file refused."""
    folder = os.path.join(tmp, "system")
    os.makedirs(folder, exist_ok=True)
    for name, src in (("b.db", first), ("a.db", second)):
        with open(src, "rb") as f, open(os.path.join(folder, name), "wb") as out:
            out.write(f.read())
    open(os.path.join(folder, "notes.txt"), "w").close()  # not a *.db: not a cache
    expected = [os.path.join(folder, "a.db"), os.path.join(folder, "b.db")]
    assert convtune.system_cache_files(folder) == expected, convtune.system_cache_files(folder)
    assert convtune.system_cache_files(first) == [first]
    assert convtune.system_cache_files("") == []
    old = os.environ.get("CONVTUNE_SYSTEM_CACHE")
    try:
        os.environ["CONVTUNE_SYSTEM_CACHE"] = first + ":" + folder
        assert convtune.system_cache_files()[:3] == [first] + expected, convtune.system_cache_files()
        os.environ["CONVTUNE_SYSTEM_CACHE"] = ""
        assert convtune.system_cache_files() == []
    finally:
        if old is None:
            os.environ.pop("CONVTUNE_SYSTEM_CACHE", None)
        else:
            os.environ["CONVTUNE_SYSTEM_CACHE"] = old
    expect_error("CACHE_ERROR", lambda: convtune.system_cache_files(os.path.join(tmp, "missing.db")))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
