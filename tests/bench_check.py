#!/usr/bin/env python3
"""bench_check.py SRC TMP: the benchmark harness's pure parts without torch or a GPU.

half.py (tools/bench): option parsing, one run per geometry, the half
floor's bytes, the error limit, the summary per type and layout, rendering
(and --render from a saved JSON); models.py and train.py: the AMP modes'
checks, labels, bounds and rendering.  Exit status 0 when every check holds.
"""
import contextlib
import copy
import io
import json
import math
import os
import sys


def main():
    src, tmp = sys.argv[1], sys.argv[2]
    os.makedirs(tmp, exist_ok=True)
    sys.path.insert(0, os.path.join(src, "tools", "bench"))
    os.chdir(src)
    import bench_common
    import bench_suite
    import half
    import models
    import train

    # ------------------------------------------------------------ half.py
    assert half.parse_choices("bf16, f16,bf16", half.DTYPES, "--dtypes") == ["bf16", "f16"]
    assert half.parse_choices("NHWC", half.LAYOUTS, "--layouts") == ["nhwc"]
    for bad in ("f32", "", "f16,fp8"):
        try:
            half.parse_choices(bad, half.DTYPES, "--dtypes")
        except bench_common.UsageError:
            pass
        else:
            raise AssertionError(f"--dtypes {bad!r} accepted")

    row = {"name": "a", "N": 2, "C": 8, "H": 10, "W": 12, "K": 16, "R": 3, "S": 3, "pad": 1}
    a = bench_suite.parse_row(row, 0)
    a_tf32 = bench_suite.parse_row({**row, "name": "a_tf32", "math": "tf32"}, 1)
    b = bench_suite.parse_row({**row, "name": "b", "epilogue": "bias"}, 2)
    kept, notes = half.unique_shapes([a, a_tf32, b])
    assert [s.name for s in kept] == ["a", "b"], kept
    assert len(notes) == 1 and "a_tf32" in notes[0] and "as a " in notes[0], notes

    # x 2*8*10*12, w 16*8*3*3, y 2*16*10*12; 2 bytes each, the bias 4 bytes per channel.
    elements = 2 * 8 * 10 * 12 + 16 * 8 * 9 + 2 * 16 * 10 * 12
    assert half.half_bytes(a) == 2 * elements
    assert half.half_bytes(b) == 2 * elements + 4 * 16
    flops = bench_suite.conv_flops(a)
    assert math.isclose(half.half_floor_ms(a, flops / 1e-3, 1e30), 1.0)   # FLOP-bound: 1 ms
    assert math.isclose(half.half_floor_ms(a, 1e30, 2 * elements / 2e-3), 2.0)  # byte-bound

    assert half.error_limit("bf16", None) == 4e-2
    assert math.isclose(half.error_limit("f16", 1e-3), 8e-3)
    assert math.isclose(half.error_limit("f16", 1e-2), 2e-2)       # twice PyTorch's
    assert half.error_limit("f16", math.nan) == 8e-3
    assert half.within(1e-3, 8e-3) and not half.within(math.nan, 8e-3)
    assert not half.within(None, 1.0) and not half.within(math.inf, 1.0)

    ceilings = {"copy_bytes_per_s": 4.0e12, "copy_buffer_bytes": 2 << 30, "matmul_n": 8192,
                "matmul_flops_per_s": {"f16": 7.0e14, "bf16": 6.9e14}, "matmul_flags": {}}

    def timed(ms, spread=0.01):
        return {"median_ms": ms, "min_ms": ms, "max_ms": ms, "batches": 7, "calls_per_batch": 1,
                "round_median_ms": [ms, ms], "spread": spread}

    def make_row(shape, dtype, layout, torch_ms, ct_ms, err=1e-3, status="ok", graph=True):
        r = half.row_template(shape, dtype, layout, ceilings)
        if status == "error":
            r["error"] = "ConvtuneError: UNSUPPORTED"
            return r
        r["torch"] = {**timed(torch_ms), "first_call_ms": 5.0,
                      "percent_floor": bench_suite.percent_of_floor(r["floor_ms"], torch_ms)}
        r["convtune"] = {**timed(ct_ms), "plan_ms": 1234.0, "source": "tuned", "algorithm": "cudnn",
                         "config": "engine=3", "tuned_ms": ct_ms, "workspace_bytes": 0, "dtype": dtype,
                         "percent_floor": bench_suite.percent_of_floor(r["floor_ms"], ct_ms)}
        r["torch_rel_l2"], r["rel_l2"] = 1e-3, err
        r["rel_l2_limit"] = half.error_limit(dtype, 1e-3)
        r["status"] = status
        if status == "ok":
            r["ratio"] = torch_ms / ct_ms
        else:
            r["error"] = "rel L2 too large"
        if graph:
            r["torch_graph_ms"], r["convtune_graph_ms"] = torch_ms * 0.9, ct_ms * 0.8
            r["graph_rel_l2"], r["graph_status"] = err, "ok"
            r["graph_ratio"] = r["torch_graph_ms"] / r["convtune_graph_ms"]
        else:
            r["graph_status"], r["graph_note"] = "skipped", "not measured (--no-graph)"
        return r

    rows = [make_row(a, "f16", "nhwc", 1.0, 0.5), make_row(b, "f16", "nhwc", 1.0, 2.0),
            make_row(a, "bf16", "nhwc", 1.0, 0.8, err=1.0, status="FAIL"),
            make_row(b, "bf16", "nhwc", 0, 0, status="error")]
    blocks = half.make_blocks(rows, ["f16", "bf16"], ["nhwc"])
    s16, sbf = blocks[0]["summary"], blocks[1]["summary"]
    assert s16["rows"] == 2 and s16["ok_rows"] == 2 and math.isclose(s16["geomean_ratio"], 1.0)
    assert [e["name"] for e in s16["below"]] == ["b"] and s16["failed"] == [] and s16["errors"] == []
    assert math.isclose(s16["graph_geomean_ratio"], 0.9 / 0.8)
    assert sbf["ok_rows"] == 0 and sbf["geomean_ratio"] is None and sbf["failed"] == ["a"]
    assert [e["name"] for e in sbf["errors"]] == ["b"]
    assert sbf["median_floor"]["convtune"] == rows[2]["convtune"]["percent_floor"]

    env = json.load(open("BENCHMARKS.json", encoding="utf-8"))["environment"]
    results = {"run": {"command": "python3 tools/bench/half.py", "suite": "bench/suite.json",
                       "cache": "build/half.db", "policy": "exhaustive", "graph": True,
                       "dtypes": ["f16", "bf16"], "layouts": ["nhwc"], "date_utc": "2026-01-01 00:00 UTC",
                       "elapsed_s": 12.0},
               "environment": env, "ceilings": ceilings, "blocks": blocks, "notes": notes,
               "json_path": os.path.join(tmp, "half.json")}
    text = half.render_markdown(results)
    for needle in ("## Summary", "fp16, NHWC (channels_last)", "bf16, NHWC (channels_last)",
                   "b (0.50x)", "| a |", "**FAIL**", "ERROR", "fp16 matmul", "1234 (tuned)", "a_tf32"):
        assert needle in text, needle
    # --render: the saved JSON drawn again, the same text.
    with open(results["json_path"], "w", encoding="utf-8") as f:
        json.dump(half.json_safe(results), f)
    out_md = os.path.join(tmp, "half.md")
    with contextlib.redirect_stderr(io.StringIO()):
        assert half.main(["half.py", "--render", results["json_path"], "--out-md", out_md]) == 0
        assert half.main(["half.py", "--dtypes", "f32"]) == 2          # before torch is needed
        assert half.main(["half.py", "--layouts", "nchw,nhcw"]) == 2
    assert open(out_md, encoding="utf-8").read() == text
    nograph = copy.deepcopy(results)
    nograph["run"]["graph"] = False
    nograph["blocks"] = half.make_blocks([make_row(a, "f16", "nhwc", 1.0, 0.5, graph=False)],
                                         ["f16"], ["nhwc"])
    assert "graph ratio" not in half.render_markdown(nograph)

    # ------------------------------------------------------------ models.py
    assert models.mode_label("strict") == "strict" and models.mode_label("tf32") == "tf32"
    assert models.mode_label("bf16") == "bf16 amp, channels_last"
    assert models.check_modes(["bf16", "strict", "f16"], "--modes") == ["bf16", "strict", "f16"]
    with contextlib.redirect_stderr(io.StringIO()):
        for bad in (["fp16"], []):
            try:
                models.check_modes(bad, "--modes")
            except SystemExit as e:
                assert e.code == 2
            else:
                raise AssertionError(f"models.py --modes {bad} accepted")
    assert models.amp_dtype("strict") is None and models.amp_fn(len, "tf32") is len
    assert models.MODEL_LIMIT["bf16"] == 5e-2 and models.MODEL_LIMIT["f16"] == 1e-2
    assert "bf16" in models.parse_args([]).compile_modes
    assert models.model_names("resnet50,zoo")[0] == "resnet50" and len(models.model_names("zoo")) == 19
    assert set(models.MODELS) <= set(models.ZOO) and len(set(models.ZOO)) == len(models.ZOO)
    assert models.image_size("inception_v3") == 299 and models.image_size("resnet50") == 224
    saved = json.load(open("BENCHMARKS-models.json", encoding="utf-8"))
    plain = models.render(saved)
    assert "Mixed-precision" not in plain, "an fp32-only run renders as before"
    amp_row = copy.deepcopy(saved["rows"][0])
    amp_row["mode"] = "bf16"
    saved["rows"].append(amp_row)
    text = models.render(saved)
    assert "| bf16 amp, channels_last |" in text and "Mixed-precision rows" in text

    # ------------------------------------------------------------ train.py
    assert train.mode_label("f16") == "f16 amp + GradScaler, channels_last"
    assert train.LOSS_BOUND["bf16"] == 5e-2 and train.LOSS_BOUND["f16"] == 2e-2
    verdict = train.loss_verdict({"pytorch": [0.01, 0.03], "pytorch_default": [0.02, 0.01],
                                  "convtune": [0.04, 0.06]}, "bf16")
    assert math.isclose(verdict["loss_limit"], 0.06) and verdict["losses_ok"]
    verdict = train.loss_verdict({"pytorch": [1e-3], "pytorch_default": [1e-3],
                                  "convtune": [3e-2]}, "f16")
    assert verdict["loss_limit"] == 2e-2 and not verdict["losses_ok"]
    saved = json.load(open("BENCHMARKS-train.json", encoding="utf-8"))
    assert "Mixed-precision" not in train.render(saved)
    amp_row = copy.deepcopy(saved["rows"][0])
    amp_row.update({"mode": "f16", "calls": {"skipped": "AMP"}, "calls_ok": True,
                    "loss_scales": {"pytorch": 32768.0, "convtune": 32768.0}})
    saved["rows"].append(amp_row)
    text = train.render(saved)
    assert "| f16 amp + GradScaler, channels_last |" in text and "not audited (AMP)" in text
    assert "GradScaler" in train.brief(amp_row)
    with contextlib.redirect_stderr(io.StringIO()):
        assert train.main(["train.py", "--modes", "bf16,fp8"]) == 2
    # ------------------------------------------------------------ known_slow.py
    import known_slow

    def key(h, c, groups):
        return (f"fwd f32 nchw strict none n16 c{c} h{h} w{h} k{c} r3 s3 pad1,1 str1,1 dil1,1 "
                f"g{groups}")

    def tuning(configs):
        # configs: [(config, ms)], the fastest the winner; 60 valid trials make a search.
        best = min(ms for _, ms in configs)
        trials = [{"config": (1, c), "ok": True, "reason": "", "ms": ms, "winner": ms == best}
                  for c, ms in configs]
        return trials + [{"config": (9, str(i)), "ok": True, "reason": "", "ms": best * 2,
                          "winner": False} for i in range(60)]

    dw_a = (key(112, 32, 32), tuning([("fast", 0.015), ("engine3", 1664.8), ("short", 0.9)]))
    dense = (key(56, 64, 1), tuning([("fast", 0.02), ("dense_slow", 50.0)]))
    target = (key(7, 960, 960), tuning([("fast", 0.008), ("engine3", 1230.0), ("dense_slow", 0.0085),
                                        ("short", 0.5)]))
    slow = known_slow.known_slow(target[0], [dw_a, dense], 8, 1.0, 10.0, True)
    assert slow == {(1, "engine3")}, slow  # not the 0.9 ms one, nor the dense layer's
    assert (1, "dense_slow") in known_slow.known_slow(target[0], [dw_a, dense], 8, 1.0, 10.0, False)
    left, seconds, harmful = known_slow.measure([dw_a, dense, target], 8, 1.0, 10.0, True)
    assert left == 1 and math.isclose(seconds, (2 * 1230.0 + 3.0) / 1e3) and not harmful, (left, seconds)
    # Without the depthwise split the dense layer's slow config, at
    # 0.0085 ms there against the winner's 0.008, is left out: counted as harmful.
    left, _, harmful = known_slow.measure([dw_a, dense, target], 8, 1.0, 10.0, False)
    assert left == 2 and len(harmful) == 1 and "dense_slow" in harmful[0], harmful
    # ------------------------------------------------------------ tuning_phases.py
    import tuning_phases

    log = """convtune: INFO: tuning A
convtune: INFO: A: no prediction (0 tuned neighbours of its kind (3 needed)); timing every candidate
convtune: INFO: tuned in 3.00 s: 9 configs, 0 failed, 0 abandoned; fastest x y (0.1 ms); phases (s): setup 1.000, time 2.000
convtune: INFO: A: 2 configs not run: each ran 1 ms or more
convtune: INFO: tuning B
convtune: INFO: B: prediction split (its 3 nearest tuned neighbours' winners differ in family): 8 configs
convtune: INFO: tuned in 0.50 s: 9 configs, 0 failed, 0 abandoned; fastest x y (0.1 ms); phases (s): setup 0.100, time 0.400
convtune: INFO: B: predicted from its tuned neighbours (split), 9 configs timed
convtune: INFO: tuning C
convtune: INFO: tuned in 0.25 s: 9 configs, 0 failed, 0 abandoned; fastest x y (0.1 ms); phases (s): setup 0.050, time 0.200
convtune: INFO: C: predicted from its tuned neighbours, 9 configs timed; marked incomplete
convtune: INFO: tuning D
convtune: INFO: tuned in 1.00 s: 9 configs, 0 failed, 0 abandoned; fastest x y (0.1 ms); phases (s): setup 0.500, time 0.500
convtune: INFO: tuning E
""".splitlines(True)
    rules = tuning_phases.read_rules(log)
    assert rules == {"full": [1, 3.0], "split": [1, 0.5], "widened": [0, 0.0], "narrow": [1, 0.25],
                     "unpredicted": [1, 1.0]}, rules  # E never ended: not counted
    tunings, totals = tuning_phases.read_phases(log)
    assert tunings == 4 and math.isclose(totals["time"], 3.1), (tunings, totals)
    # ------------------------------------------------------------ predict_loo.py
    import predict_loo

    def shape_of(key, texts):
        return {"key": key, "by_text": {t: t for t in texts}}

    im2col = [(predict_loo.IM2COL_GEMM, f"batch=16 gemm_algo={a}") for a in range(10)]
    winograd = [(predict_loo.CUDNN, "engine=4"), (predict_loo.CUDNN, "engine=6")]
    one = shape_of("fwd f32 nchw tf32 none n16 c1024 h14 w14 k512 r1 s1 pad0,0 str1,1 dil1,1 g1",
                   im2col + winograd)
    assert predict_loo.marked_guesses(one) == set(im2col[:8]), predict_loo.marked_guesses(one)
    grouped = shape_of("fwd f32 nchw tf32 none n16 c64 h14 w14 k64 r1 s1 pad0,0 str2,2 dil1,1 g2",
                       im2col)
    assert predict_loo.marked_guesses(grouped) == set()
    three = shape_of("fwd f32 nchw strict none n16 c64 h56 w56 k64 r3 s3 pad1,1 str1,1 dil1,1 g1",
                     im2col + winograd)
    assert predict_loo.marked_guesses(three) == set(winograd)
    # channel_split's two guesses, as test_channel_split.channel_split_guesses_first
    # has them from the C list: GPU-filling splits, 4 input channels a split at least.
    dense = "fwd f32 nchw tf32 none n16 c128 h7 w7 k32 r3 s3 pad1,1 str1,1 dil1,1 g1"
    few = "fwd f32 nchw strict none n1 c16 h8 w8 k64 r3 s3 pad1,1 str1,1 dil1,1 g1"
    assert predict_loo.channel_split_guesses(dense, 132) == [
        "k_tile=64 pixels=2 splits=32", "k_tile=32 pixels=1 splits=32"]
    assert predict_loo.channel_split_guesses(few, 132)[1] == "k_tile=32 pixels=1 splits=4"
    assert predict_loo.channel_split_guesses(dense.replace("h7 w7", "h56 w56"), 132) == []
    split = shape_of(dense, [(predict_loo.CHANNEL_SPLIT, "k_tile=32 pixels=1 splits=32")] + winograd)
    split["group"] = ("fwd", "NVIDIA H200|sm90|132sm|l2=62914560", "v")
    assert predict_loo.marked_guesses(split) == {(predict_loo.CHANNEL_SPLIT,
                                                  "k_tile=32 pixels=1 splits=32")}
    # ------------------------------------------------------------ plan_quality.py
    import plan_quality
    import sqlite3

    def cache(path, winners, pending):
        if os.path.exists(path):
            os.remove(path)
        db = sqlite3.connect(path)
        db.execute("CREATE TABLE trials (problem, device, versions, algorithm, config_text, "
                   "time_ms, winner)")
        db.execute("CREATE TABLE pending (problem, device, versions, reason)")
        for problem, t, plan in winners:
            db.execute("INSERT INTO trials VALUES (?, 'd', 'v', ?, 'c', ?, 1)", (problem, plan, t))
            db.execute("INSERT INTO trials VALUES (?, 'd', 'v', 'other', 'c', ?, 0)",
                       (problem, t * 3))
        for problem in pending:
            db.execute("INSERT INTO pending VALUES (?, 'd', 'v', 'incomplete')", (problem,))
        db.commit()
        db.close()

    pred, fin = os.path.join(tmp, "pq-predicted.db"), os.path.join(tmp, "pq-finished.db")
    cache(pred, [("A", 1.5, "cudnn"), ("B", 1.0, "fft"), ("C", 2.0, "cudnn")], ["A", "B"])
    cache(fin, [("A", 1.0, "im2col_gemm"), ("B", 1.0, "fft"), ("C", 2.0, "cudnn")], [])
    rows, full, summed = plan_quality.compare(pred, fin)
    assert full == 1 and [(r[0], r[1]) for r in rows] == [(1.5, "A"), (1.0, "B")], (rows, full)
    assert math.isclose(summed, 4.5 / 4.0), summed
    text = plan_quality.render([("m", rows, full, summed)])
    assert "| m | 2 | 1 | 1.250 | 1.225 | 1.50 | 1/2 | 1.125 |" in text, text
    assert "| m | 1.50 | A | cudnn c | im2col_gemm c |" in text, text
    with contextlib.redirect_stderr(io.StringIO()):
        assert plan_quality.main([pred]) == 2  # not a pair
        assert plan_quality.main([fin, pred]) == 2  # nothing pending in the first
    print("bench_check: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
