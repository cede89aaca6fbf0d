#!/usr/bin/env python3
"""The `tae` Python library (client/python/tae) against a real taed with real runs: a plain study
(tae-train), a grid (also read in its tuned view), an adaptive-seeds study and a command job.

usage: tae_library_test.py BIN_DIR PYTHON_DIR BUILD_PYTHON_DIR

Checks: runs() has every run with typed columns; history() returns every stored point (compared
with `taectl export --format csv`); report() equals `taectl report --json` cell by cell (plain,
grid, tuned, adaptive), and a [scale] ladder's fit equals `taectl report --scale --json` and its to_latex()/to_markdown() equal `--format latex|md`; the offline
bundle (`taectl export --bundle`) gives the same frames with taed stopped; ended runs' series are
fetched once; each named error is raised where it should be.

Exits 77 (ctest: skipped) with "TAE-SKIPPED: reason" when pandas or numpy is missing.
"""
import io
import json
import math
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest

BIN = sys.argv[1] if len(sys.argv) > 1 else "build/bin"
sys.path[:0] = [sys.argv[2] if len(sys.argv) > 2 else "client/python",
                sys.argv[3] if len(sys.argv) > 3 else "build/python"]
del sys.argv[1:]


def skip(reason):
    print(f"TAE-SKIPPED: {reason}")
    sys.exit(77)


try:
    import numpy as np
    import pandas as pd
except ImportError as e:
    skip(f"{e.name} is not installed for {sys.executable} (apt-get install python3-pandas)")

import tae  # noqa: E402

PLAIN = """name = "plain"
[model]
layers = 1
d_model = 16
heads = 2
[train]
task = "copy"
vocab = 8
seq_len = 16
batch_size = 8
steps = 60
eval_every = 10
eval_batches = 2
warmup = 5
threads = 1
seeds = [0, 1, 2]
[[ablation]]
name = "no-pos"
"model.pos_encoding" = "none"
"""

GRID = PLAIN.replace('name = "plain"', 'name = "grid"').replace(
    "seeds = [0, 1, 2]", "seeds = [0, 1]") + """[grid]
"train.lr" = [0.001, 0.01]
"""

SCORE = """#!/bin/sh
noise=$(echo "0.05 -0.08 0.11 -0.02 0.07 -0.12 0.03 -0.06 0.09 -0.04" | cut -d' ' -f$(( $2 % 10 + 1 )))
for step in 1 2 3; do
  awk "BEGIN { print \\"score=\\" (1000 * $1 + $noise + 1 / $step) \\" step=$step\\" }"
done
"""

ADAPTIVE = """name = "adaptive"
[train]
lr = 0.001
seeds = { min = 3, max = 5 }
[[ablation]]
name = "far"
"train.lr" = 0.011
[[ablation]]
name = "close"
"train.lr" = 0.00113
[report]
metrics = ["score"]
[job]
code = "src"
command = "sh score.sh {train.lr} {train.seed}"
"""


LAW = """#!/bin/sh
awk -v n="$1" -v m="$2" -v s="$3" 'BEGIN {
  srand(s * 7919 + int(log(n) * 1000) + int(m * 100) * 13)
  u1 = rand(); u2 = rand(); if (u1 < 1e-12) u1 = 1e-12
  z = sqrt(-2 * log(u1)) * cos(6.283185307179586 * u2)
  loss = (2 + 100 * exp(-0.3 * log(m * n))) * exp(0.005 * z)
  printf "step=1 params=%d loss=%.9f\\n", n, loss
}'
"""

LADDER = """name = "ladder"
[params]
n = 1e6
m = 1.0
[train]
seeds = [0, 1, 2]
[report]
metrics = ["loss"]
[[ablation]]
name = "wide"
"params.m" = 1.5
[scale]
"params.n" = [1e6, 4e6, 1.6e7, 6.4e7]
[job]
code = "src"
command = "sh law.sh {params.n} {params.m} {train.seed}"
"""


def taectl(home, *args, timeout=600, check=True):
    p = subprocess.run([os.path.join(BIN, "taectl"), "--home", home, *args], capture_output=True,
                       text=True, timeout=timeout)
    if check and p.returncode != 0:
        raise AssertionError(f"taectl {' '.join(args)}: exit {p.returncode}\n{p.stdout}\n{p.stderr}")
    return p.stdout


def same(a, b):
    """JSON values equal, NaN/None alike, floats exactly (both come from taed's one number)."""
    if isinstance(a, float) and isinstance(b, float):
        return a == b or (math.isnan(a) and math.isnan(b))
    if a is None or b is None:
        return (a is None or (isinstance(a, float) and math.isnan(a))) and \
               (b is None or (isinstance(b, float) and math.isnan(b)))
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, (np.integer, np.floating, np.bool_)):
        a = a.item()
    if isinstance(b, (np.integer, np.floating, np.bool_)):
        b = b.item()
    return a == b


class Library(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="tae-python-")
        cls.home = os.path.join(cls.tmp, "home")
        os.environ["TAE_HOME"] = cls.home
        os.environ["XDG_CACHE_HOME"] = os.path.join(cls.tmp, "cache")
        taectl(cls.home, "up", "--agents", "1", "--slots", "3", timeout=120)
        os.makedirs(os.path.join(cls.tmp, "src"))
        with open(os.path.join(cls.tmp, "src", "score.sh"), "w") as f:
            f.write(SCORE)
        with open(os.path.join(cls.tmp, "src", "law.sh"), "w") as f:
            f.write(LAW)
        for name, text in (("plain", PLAIN), ("grid", GRID), ("adaptive", ADAPTIVE),
                           ("ladder", LADDER)):
            path = os.path.join(cls.tmp, f"{name}.toml")
            with open(path, "w") as f:
                f.write(text)
            taectl(cls.home, "submit", path)
        for name in ("plain", "grid", "adaptive", "ladder"):
            taectl(cls.home, "wait", name, "--timeout", "300")
        cls.c = tae.connect()

    @classmethod
    def tearDownClass(cls):
        taectl(cls.home, "down", check=False, timeout=120)
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def cli_json(self, *args):
        return json.loads(taectl(self.home, *args))

    # --- runs ---------------------------------------------------------------------------------
    def test_runs_has_every_run_with_typed_columns(self):
        e = self.c.experiment("grid")
        runs = e.runs()
        listed = json.loads(taectl(self.home, "runs", "grid", "--json"))
        listed = listed["runs"] if isinstance(listed, dict) else listed
        self.assertEqual(sorted(runs["run"].tolist()), sorted(r["id"] for r in listed))
        self.assertEqual(len(runs), 8)  # 2 variants x 2 points x 2 seeds
        self.assertEqual(runs["model.d_model"].dtype, np.int64)
        self.assertEqual(runs["train.lr"].dtype, np.float64)
        self.assertEqual(runs["seed"].dtype, np.int64)
        self.assertEqual(runs["baseline"].dtype, bool)
        self.assertEqual(sorted(set(runs["train.lr"])), [0.001, 0.01])
        self.assertEqual(runs.columns.tolist().index("train.lr"),
                         runs.columns.tolist().index("confirm") + 1)  # the grid key up front
        self.assertEqual(set(runs["state"]), {"succeeded"})
        self.assertTrue(runs["eval/loss"].notna().all())
        self.assertEqual(runs["eval/loss"].dtype, np.float64)
        self.assertEqual(sorted(set(runs["ablation"])), ["baseline", "no-pos"])
        self.assertEqual(int(runs["baseline"].sum()), 4)
        self.assertFalse(runs["failed"].any())
        self.assertTrue((runs["finished_at"] >= runs["started_at"]).all())
        for _, row in runs.iterrows():
            self.assertEqual(row["last_step"], 60)

    # --- history -------------------------------------------------------------------------------
    def test_history_returns_every_stored_point_as_the_export_does(self):
        e = self.c.experiment("plain")
        csv = taectl(self.home, "export", "plain", "--format", "csv")
        expected = pd.read_csv(io.StringIO(csv))
        got = e.history()
        self.assertEqual(len(got), len(expected))
        self.assertEqual(set(got["metric"]), set(expected["metric"]))
        key = ["run", "metric", "step"]
        a = got.assign(metric=got["metric"].astype(str)).sort_values(key).reset_index(drop=True)
        b = expected.sort_values(key).reset_index(drop=True)
        np.testing.assert_array_equal(a["run"].to_numpy(), b["run"].to_numpy())
        np.testing.assert_array_equal(a["step"].to_numpy(), b["step"].to_numpy())
        np.testing.assert_allclose(a["value"].to_numpy(), b["value"].to_numpy(), rtol=1e-12)
        np.testing.assert_allclose(a["wall_time"].to_numpy(), b["wall_time"].to_numpy(),
                                   rtol=1e-12)
        # tokens: step x batch x seq_len for tae-train
        one = got[got["metric"] == "train/loss"]
        np.testing.assert_array_equal(one["tokens"].to_numpy(), one["step"].to_numpy() * 8 * 16)
        # joinable to runs()
        joined = one.merge(e.runs()[["run", "variant", "seed"]], on="run", how="left")
        self.assertFalse(joined["variant"].isna().any())

    def test_history_of_one_metric_and_some_runs(self):
        e = self.c.experiment("plain")
        runs = e.runs()["run"].tolist()[:2]
        got = e.history("eval/loss", runs=runs)
        self.assertEqual(set(got["run"]), set(runs))
        self.assertEqual(set(got["metric"]), {"eval/loss"})
        self.assertEqual(len(got), 2 * 6)  # eval every 10 of 60 steps

    def test_ended_runs_series_are_fetched_once(self):
        e = self.c.experiment("plain")
        e.history("train/loss")
        fresh = tae.connect().experiment("plain")
        calls = []
        real = fresh._source.history

        def counting(*args, **kwargs):
            calls.append(args)
            return real(*args, **kwargs)
        fresh._source.history = counting
        again = fresh.history("train/loss")
        self.assertEqual(calls, [])  # every run ended: from the local cache
        self.assertEqual(len(again), len(e.history("train/loss")))
        fresh.refresh()
        self.assertEqual(calls, [])

    def test_submit_wait_and_refresh(self):
        path = os.path.join(self.tmp, "live.toml")
        with open(path, "w") as f:
            f.write(PLAIN.replace('name = "plain"', 'name = "live"')
                    .replace("seeds = [0, 1, 2]", "seeds = [0, 1]"))
        e = self.c.submit(path, sets=["train.steps=40"])
        self.assertEqual(e.name, "live")
        self.assertEqual(e.record["counts"]["total"], 4)  # two variants, two seeds
        # A first read once a point exists, while runs may still be going: what was final then
        # is never asked again.
        deadline = time.monotonic() + 300
        while "train/loss" not in e.metrics():
            self.assertLess(time.monotonic(), deadline, "no train/loss point within 300 s")
            time.sleep(0.05)
        first = e.history("train/loss")
        table = e.runs()
        final_then = set(table[table["state"].isin(["succeeded", "failed", "cancelled"])]["run"]) \
            & set(first["run"])
        lines = io.StringIO()
        stderr, sys.stderr = sys.stderr, lines
        try:
            self.assertIs(e.wait(progress=True, timeout=300, poll=0.2), e)
        finally:
            sys.stderr = stderr
        said = lines.getvalue().strip().splitlines()
        self.assertTrue(said, "wait(progress=True) said nothing")
        self.assertIn("4 succeeded, 0 running, 0 queued, 0 failed of 4", said[-1])
        asked = []
        real = e._source.history

        def counting(exp_id, metric, runs=None):
            asked.append(runs)
            return real(exp_id, metric, runs)
        e._source.history = counting
        e.refresh()
        for runs in asked:  # only the runs that had not ended at the first read (None: all)
            self.assertFalse(set(runs if runs is not None else first["run"]) & final_then,
                             (runs, final_then))
        after = e.history("train/loss")
        frame = e.runs()
        self.assertEqual(sorted(frame["state"]), ["succeeded"] * 4)
        self.assertTrue((frame["train.steps"] == 40).all())
        self.assertEqual(set(after["run"]), set(frame["run"]))
        # Every stored point, as the export has them (the runs that were going at the first read
        # included).
        csv = pd.read_csv(io.StringIO(taectl(self.home, "export", "live", "--format", "csv",
                                              "--metric", "train/loss")))
        self.assertEqual(len(after), len(csv))
        # A file taectl refuses: BadRequest with taectl's own message, nothing submitted.
        bad = os.path.join(self.tmp, "bad.toml")
        with open(bad, "w") as f:
            f.write('name = "bad"\n[train]\nstepz = 3\n')
        with self.assertRaises(tae.BadRequest) as caught:
            self.c.submit(bad)
        self.assertIn("bad.toml", str(caught.exception))
        self.assertIn("stepz", str(caught.exception))
        self.assertNotIn("bad", self.c.experiments()["name"].tolist())

    # --- the table -----------------------------------------------------------------------------
    def assert_report_equals_cli(self, frame, cli):
        self.assertEqual(frame.correction, cli.get("correction"))
        self.assertEqual(frame.banners, cli.get("banners"))
        self.assertEqual(frame.view, cli.get("view"))
        cells = 0
        for row in cli["rows"]:
            for metric, cell in row["metrics"].items():
                got = frame[(frame["variant"] == row["variant"]) & (frame["metric"] == metric)]
                self.assertEqual(len(got), 1, (row["variant"], metric))
                got = got.iloc[0]
                for field, value in cell.items():
                    if field == "delta_ci95":
                        mine = None if value is None else [got["delta_lo"], got["delta_hi"]]
                    elif field == "level":
                        mine = None if value is None else {
                            "kind": got["level_kind"], "value": got["level_value"],
                            "what": got["level_what"]}
                    else:
                        mine = got[field]
                    self.assertTrue(same(mine, value),
                                    f"{row['variant']} {metric} {field}: {mine!r} != {value!r}")
                for field in ("runs", "runs_total", "runs_failed", "seeds_identical", "params"):
                    self.assertTrue(same(got[field], row[field]), field)
                cells += 1
        self.assertEqual(cells, len(frame))

    def test_report_equals_taectl_report_json_cell_by_cell(self):
        for name, args, kwargs in (("plain", [], {}), ("grid", [], {}),
                                   ("grid", ["--tuned"], {"view": "tuned"}),
                                   ("adaptive", [], {})):
            with self.subTest(study=name, args=args):
                frame = self.c.experiment(name).report(**kwargs)
                cli = self.cli_json("report", name, "--json", *args)
                self.assert_report_equals_cli(frame, cli)
        tuned = self.c.experiment("grid").report(view="tuned")
        self.assertIn("point", tuned.columns)
        self.assertEqual(tuned.json["view"], "tuned")

    def test_report_texts_equal_taectl_report_formats(self):
        r = self.c.experiment("plain").report()
        self.assertEqual(r.to_latex(), taectl(self.home, "report", "plain", "--format", "latex"))
        self.assertEqual(r.to_markdown(), taectl(self.home, "report", "plain", "--format", "md"))
        self.assertEqual(str(r), taectl(self.home, "report", "plain"))
        derived = r[r["metric"] == "eval/loss"]
        self.assertIs(type(derived), pd.DataFrame)  # a slice is a plain frame, not the table

    def test_frontier_is_the_reports(self):
        r = self.c.experiment("plain").report(frontier="eval/acc>=0.2", cost="params")
        self.assertIsNotNone(r.frontier)
        cli = self.cli_json("report", "plain", "--json", "--frontier", "eval/acc>=0.2",
                            "--cost", "params")
        self.assertTrue(same(r.frontier["points"], cli["points"]))

    def test_scale_fit_is_taectl_report_scale(self):
        e = self.c.experiment("ladder")
        r = e.report(scale=True, at=2e8)
        cli = self.cli_json("report", "ladder", "--scale", "--at", "2e8", "--json")
        self.assertTrue(same(r.scale.fits[0], cli["scale"]))
        s = r.scale
        self.assertEqual(len(s), 2 * 4)  # baseline and wide at 4 rungs
        self.assertEqual(sorted(set(s["variant"])), ["baseline", "wide"])
        self.assertEqual(s["rung"].dtype, np.int64)
        self.assertEqual(sorted(set(s["params"])), [1e6, 4e6, 1.6e7, 6.4e7])
        wide = s[s["variant"] == "wide"].iloc[0]
        fit = cli["scale"]["variants"][1]
        self.assertEqual(wide["multiplier"], fit["multiplier"]["value"])
        self.assertEqual((wide["multiplier_lo"], wide["multiplier_hi"]),
                         tuple(fit["multiplier"]["ci95"]))
        self.assertEqual(wide["trend"], fit["trend"])
        self.assertEqual(wide["at_effect"], fit["at"]["effect"]["value"])
        # The law's multiplier, 1.5, inside the interval taed gives.
        self.assertLess(wide["multiplier_lo"], 1.5)
        self.assertGreater(wide["multiplier_hi"], 1.5)
        self.assertEqual(s.exponent, (cli["scale"]["exponent"]["value"],
                                      *cli["scale"]["exponent"]["ci95"]))
        self.assertEqual(str(s), taectl(self.home, "report", "ladder", "--scale", "--at", "2e8"))
        self.assertEqual(str(r), taectl(self.home, "report", "ladder"))  # the table stays the table
        self.assertIsNone(e.report().scale)
        with self.assertRaises(tae.BadRequest):
            e.report(at=2e8)  # at without scale
        with self.assertRaises(tae.BadRequest) as raised:
            self.c.experiment("plain").report(scale=True)
        self.assertIn("no [scale] ladder", str(raised.exception))

    # --- curves --------------------------------------------------------------------------------
    def test_curves_are_the_dashboards_bands(self):
        e = self.c.experiment("plain")
        bands = e.curves("eval/loss")
        self.assertEqual(sorted(set(bands["variant"])), ["baseline", "no-pos"])
        self.assertTrue((bands.dropna()["lo"] <= bands.dropna()["mean"]).all())
        self.assertEqual(int(bands["n"].max()), 3)
        import matplotlib
        matplotlib.use("Agg")
        ax = e.plot("eval/loss")
        self.assertEqual(len(ax.get_lines()), 2)

    # --- offline -------------------------------------------------------------------------------
    def test_the_bundle_gives_the_same_frames(self):
        for name in ("grid", "adaptive"):
            with self.subTest(study=name):
                out = os.path.join(self.tmp, f"{name}-bundle")
                taectl(self.home, "export", name, "--bundle", out)
                live = self.c.experiment(name)
                offline = tae.open_bundle(out)
                pd.testing.assert_frame_equal(offline.runs(), live.runs())
                pd.testing.assert_frame_equal(offline.history(), live.history())
                pd.testing.assert_frame_equal(pd.DataFrame(offline.report()),
                                              pd.DataFrame(live.report()))
                self.assertEqual(offline.report().to_latex(), live.report().to_latex())
                metric = live.metrics()[0]
                pd.testing.assert_frame_equal(offline.curves(metric), live.curves(metric))
                with self.assertRaises(tae.BadRequest):
                    offline.report(view="tuned")
                with self.assertRaises(tae.NotFound):
                    offline.report(scale=True)  # not a ladder
        out = os.path.join(self.tmp, "ladder-bundle")
        taectl(self.home, "export", "ladder", "--bundle", out)
        live, offline = self.c.experiment("ladder"), tae.open_bundle(out)
        pd.testing.assert_frame_equal(pd.DataFrame(offline.report(scale=True).scale),
                                      pd.DataFrame(live.report(scale=True).scale))
        self.assertEqual(str(offline.report(scale=True).scale), str(live.report(scale=True).scale))
        with self.assertRaises(tae.BadRequest):
            offline.report(scale=True, at=1e9)  # exported without one

    # --- errors --------------------------------------------------------------------------------
    def test_each_named_error_where_it_should_be(self):
        with self.assertRaises(tae.NotFound) as ctx:
            self.c.experiment("no-such-study")
        self.assertNotIn("Traceback", str(ctx.exception))
        with self.assertRaises(tae.NotFound) as ctx:
            self.c.experiment("plain").history("no/such/metric")
        self.assertIn("eval/loss", str(ctx.exception))  # names what there is
        with self.assertRaises(tae.BadRequest):
            self.c.experiment("plain").report(view="sideways")
        with self.assertRaises(tae.Unauthorized):
            tae.connect(url=self.c.url, token="0" * 64)
        with self.assertRaises(tae.Unavailable) as ctx:
            tae.connect(home=os.path.join(self.tmp, "nowhere"))
        self.assertIn("taectl up", str(ctx.exception))
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            dead = s.getsockname()[1]
        with self.assertRaises(tae.Unavailable):
            tae.connect(url=f"http://127.0.0.1:{dead}", token="x")
        real = tae.__version__
        try:
            tae.__version__ = "0.0.0-other"
            with self.assertRaises(tae.VersionMismatch) as ctx:
                tae.connect()
            self.assertIn("0.0.0-other", str(ctx.exception))
            self.assertIn(real, str(ctx.exception))
        finally:
            tae.__version__ = real
        with self.assertRaises(tae.BundleError):
            tae.open_bundle(os.path.join(self.tmp, "src"))

    def test_a_connection_lost_mid_answer_is_named(self):
        listener = socket.socket()
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        port = listener.getsockname()[1]

        def serve():
            conn, _ = listener.accept()
            conn.recv(65536)
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                         b"Content-Length: 1000\r\n\r\n{\"version\": ")
            conn.close()
        threading.Thread(target=serve, daemon=True).start()
        with self.assertRaises(tae.ConnectionLost):
            tae.connect(url=f"http://127.0.0.1:{port}", token="x")
        listener.close()


class ColumnTypes(unittest.TestCase):
    """runs() types each config column from its variants' few values instead of asking pandas to
    infer the dtype of 10,000 objects; pandas' own infer_objects is the reference."""

    def test_config_columns_are_typed_as_infer_objects_types_them(self):
        from tae._experiment import _column_dtype
        import random
        pool = [True, False, 0, 1, -3, 2**62, 2**63, -2**63, -2**63 - 1, 0.5, -1e300, math.nan,
                math.inf, "x", "", None, [1, 2], {"a": 1}]
        rng = random.Random(5)
        for _ in range(3000):
            values = [rng.choice(pool) for _ in range(rng.randint(1, 5))]
            expected = pd.Series(values, dtype=object).infer_objects().dtype
            got = _column_dtype(values)
            if got == object:
                continue  # left to infer_objects, which then types the column itself
            self.assertEqual(got, expected, values)


class ColumnsFormat(unittest.TestCase):
    """The columnar form's codings (common/api/columns.h) read by _columns.Page, against bodies
    written here from the header's description alone: each run decoded alone and in spans of
    runs, with and without a chained first delta, every value back bit for bit; and the local
    cache's file written and read back, a page whole and a page of which some runs are kept."""

    @staticmethod
    def body(runs, steps, values, walls, width, f4, chain, rng):
        import struct
        n, r = len(steps), len(runs)
        sections, specs = [], []

        def pad(b):
            return b + b"\0" * ((8 - len(b) % 8) % 8)

        def delta(ints, w):
            firsts, deltas, at, last = [], [], 0, None
            for run in runs:
                c = run["count"]
                firsts.append(int(ints[at]) if c else 0)
                for i in range(c):
                    if i == 0:
                        d = ((int(ints[at]) - last + 2**63) % 2**64 - 2**63) if last is not None \
                            else 0
                        fits = -(2**(8 * w - 1)) <= d < 2**(8 * w - 1)
                        d = d if chain and fits else (rng.randrange(-3, 3) if w == 8 else 0)
                    else:
                        d = (int(ints[at + i]) - int(ints[at + i - 1]) + 2**63) % 2**64 - 2**63
                    deltas.append(d)
                if c:
                    last = int(ints[at + c - 1])
                at += c
            return pad(np.array(firsts, dtype="<i8").tobytes() +
                       np.array(deltas, dtype={1: "<i1", 2: "<i2", 4: "<i4"}[w]).tobytes())

        step_bytes = delta(steps, width) if width else steps.astype("<i8").tobytes()
        specs.append({"name": "step", "dtype": "<i8", "coding": "delta" if width else "plain",
                      "width": width, "bytes": len(step_bytes)})
        value_bytes = pad(values.astype("<f4").tobytes()) if f4 else values.tobytes()
        specs.append({"name": "value", "dtype": "<f8", "coding": "f4" if f4 else "plain",
                      "bytes": len(value_bytes)})
        wall_bits = walls.view("<i8")
        wall_bytes = delta(wall_bits, 4)
        specs.append({"name": "wall_time", "dtype": "<f8", "coding": "delta", "width": 4,
                      "bytes": len(wall_bytes)})
        text = json.dumps({"metric": "m", "points": n, "runs": runs, "columns": specs}).encode()
        head = b"TAECOL2\n" + struct.pack("<I", len(text)) + text
        return pad(head) + step_bytes + value_bytes + wall_bytes

    def random_page(self, rng, width, f4, chain):
        runs, steps, values, walls = [], [], [], []
        for k in range(rng.randrange(1, 9)):
            count = 0 if rng.random() < 0.2 else rng.randrange(1, 40)
            runs.append({"run": k + 1, "count": count, "final": rng.random() < 0.7,
                         "attempt": 1})
            step = rng.randrange(-2**40, 2**40) if width == 4 else rng.randrange(-50, 50)
            wall = 1.79e9 + rng.random() * 1e4
            for _ in range(count):
                steps.append(step)
                step += rng.randrange(0, {1: 100, 2: 30000, 4: 2**31 - 1}[width or 4])
                v = rng.choice([rng.random(), math.nan, -0.0, math.inf, 1e-300])
                values.append(float(np.float32(v)) if f4 else v)
                walls.append(wall)
                wall += rng.random() * 100
        return (runs, np.array(steps, dtype=np.int64), np.array(values, dtype=np.float64),
                np.array(walls, dtype=np.float64))

    def test_pages_decode_bit_for_bit_alone_and_in_spans(self):
        import random
        from tae import _columns
        from tae._experiment import _decode_runs
        rng = random.Random(11)
        for trial in range(400):
            width = rng.choice([0, 1, 2, 4])
            f4, chain = rng.random() < 0.5, rng.random() < 0.5
            runs, steps, values, walls = self.random_page(rng, width, f4, chain)
            page = _columns.decode(self.body(runs, steps, values, walls, width, f4, chain, rng))
            got = page.arrays()
            for a, b in zip(got, (steps, values, walls)):
                self.assertEqual(a.tobytes(), b.tobytes(), (trial, width, f4, chain))
            # A random choice of the runs with points, decoded as one frame's columns.
            starts = np.concatenate([[0], np.cumsum([r["count"] for r in runs])])
            chosen = [k for k, r in enumerate(runs) if r["count"] and rng.random() < 0.6]
            if not chosen:
                continue
            expect = [np.concatenate([col[starts[k]:starts[k + 1]] for k in chosen])
                      for col in (steps, values, walls)]
            total = sum(runs[k]["count"] for k in chosen)
            for a, b in zip(_decode_runs([(runs[k], page, k) for k in chosen], total), expect):
                self.assertEqual(a.tobytes(), b.tobytes(), (trial, chosen))
            for k in chosen:
                alone = page.run_arrays(k)
                self.assertEqual(alone[0].tobytes(), steps[starts[k]:starts[k + 1]].tobytes())

    def test_a_version_1_body_is_read_and_a_damaged_one_refused(self):
        import struct
        from tae import _columns
        from tae._errors import BundleError
        steps = np.array([1, 2, 3, 10], dtype="<i8")
        values = np.array([0.5, math.nan, -0.0, 2.0], dtype="<f8")
        walls = np.array([1.8e9, 1.8e9 + 1, 1.8e9 + 2, 1.8e9 + 3], dtype="<f8")
        header = {"points": 4, "runs": [{"run": 3, "count": 3}, {"run": 5, "count": 1}],
                  "columns": [{"name": "step", "dtype": "<i8"},
                              {"name": "value", "dtype": "<f8"},
                              {"name": "wall_time", "dtype": "<f8"}]}
        text = json.dumps(header).encode()
        head = b"TAECOL1\n" + struct.pack("<I", len(text)) + text
        body = head + b"\0" * ((8 - len(head) % 8) % 8) + steps.tobytes() + values.tobytes() + \
            walls.tobytes()
        page = _columns.decode(body)
        for a, b in zip(page.arrays(), (steps, values, walls)):
            self.assertEqual(a.tobytes(), b.tobytes())
        self.assertEqual(page.run_arrays(1)[0].tolist(), [10])
        for damaged in (body[:-8], body + b"\0" * 8, b"TAECOL3\n" + body[8:], body[:10]):
            with self.assertRaises(BundleError):
                _columns.decode(damaged)

    def test_the_local_cache_keeps_whole_pages_and_parts_of_pages(self):
        import random
        from tae import _columns
        from tae._cache import SeriesCache
        rng = random.Random(3)
        with tempfile.TemporaryDirectory() as d:
            cache = SeriesCache("http://x", d)
            experiment = {"id": 4, "created_at": 123.5}
            for trial in range(60):
                pages = []
                for _ in range(rng.randrange(1, 4)):
                    width = rng.choice([0, 1, 2, 4])
                    runs, steps, values, walls = self.random_page(rng, width, True, True)
                    for r in runs:
                        r["run"] += 100 * len(pages)
                    pages.append(_columns.decode(self.body(runs, steps, values, walls, width,
                                                           True, True, rng)))
                kept = {e["run"]: (e, p, k) for p in pages for k, e in enumerate(p.runs)
                        if e["count"] and (e["final"] or trial % 2)}
                if not kept:
                    continue
                cache.store(experiment, "m", kept).join()
                back = cache.load(experiment, "m")
                self.assertEqual(sorted(back), sorted(kept))
                for run, (entry, page, k) in kept.items():
                    self.assertEqual(back[run][0], entry)
                    for a, b in zip(back[run][1].run_arrays(back[run][2]), page.run_arrays(k)):
                        self.assertEqual(a.tobytes(), b.tobytes())
                self.assertEqual(cache.load({"id": 4, "created_at": 9.0}, "m"), {})


if __name__ == "__main__":
    unittest.main(verbosity=2)
