#!/usr/bin/python3
"""Mock taed for working on the dashboard without building taed.

Serves web/src and uPlot's dist files at /assets/, index.html at / with an import map of
unhashed URLs where the embedder puts the hashed one, and fixture JSON for every /api endpoint
the dashboard uses. The numbers are synthetic but shaped like taed's: a finished quickstart, a
grid sweep, a study that keeps running (its curves grow by one eval point a second), a paused
one, a failed one, one with 1000 runs; agents, VMs, a queue; logs that grow.

    /usr/bin/python3 web/dev_server.py [--port 8765] [--no-auth]

Open the printed URL (it carries the token, like `taectl ui`). Python 3 standard library only.
"""

import argparse
import bisect
import json
import math
import os
import re
import sys
import threading
import time
import zlib
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.join(HERE, "src")
UPLOT = os.path.join(HERE, "node_modules", "uplot", "dist")
TOKEN = "dev"
SESSION = "dev-session-cookie"
CSRF = "0123456789abcdef0123456789abcdef"
VERSION = "0.4.0-dev"
START = time.time()
NOW0 = START

LOCK = threading.Lock()
VERSION_COUNTER = [1]
MIME = {".js": "text/javascript; charset=utf-8", ".css": "text/css; charset=utf-8",
        ".html": "text/html; charset=utf-8", ".svg": "image/svg+xml", ".png": "image/png",
        ".json": "application/json", ".map": "application/json"}


def tick():
    return int(time.time() - START)


# ---- deterministic noise ----------------------------------------------------
def u01(*key):
    return (zlib.crc32(repr(key).encode()) & 0xFFFFFFFF) / 2 ** 32


def gauss(*key):
    # sum of uniforms: close enough to a normal for fixtures
    return sum(u01(*key, i) for i in range(4)) * math.sqrt(3) - 2 * math.sqrt(3)


def nz(a, b):
    x = math.sin(a * 12.9898 + b * 78.233) * 43758.5453
    return x - math.floor(x) - 0.5


# ---- statistics (for the report) -----------------------------------------
T95 = [12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145,
       2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042]


def t95(df):
    return T95[df - 1] if 1 <= df <= 30 else 1.96


def betacf(a, b, x):
    tiny = 1e-300
    qab, qap, qam = a + b, a + 1, a - 1
    c, d = 1.0, 1 - qab * x / qap
    d = 1 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 200):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1 + aa * d
        d = 1 / (d if abs(d) > tiny else tiny)
        c = 1 + aa / c
        c = c if abs(c) > tiny else tiny
        h *= d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1 + aa * d
        d = 1 / (d if abs(d) > tiny else tiny)
        c = 1 + aa / c
        c = c if abs(c) > tiny else tiny
        de = d * c
        h *= de
        if abs(de - 1) < 3e-12:
            break
    return h


def betainc(a, b, x):
    if x <= 0:
        return 0.0
    if x >= 1:
        return 1.0
    lbt = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log(1 - x)
    if x < (a + 1) / (a + b + 2):
        return math.exp(lbt) * betacf(a, b, x) / a
    return 1 - math.exp(lbt) * betacf(b, a, 1 - x) / b


def welch(x, y):
    if len(x) < 2 or len(y) < 2:
        return None
    mx, my = sum(x) / len(x), sum(y) / len(y)
    vx = sum((v - mx) ** 2 for v in x) / (len(x) - 1)
    vy = sum((v - my) ** 2 for v in y) / (len(y) - 1)
    se2 = vx / len(x) + vy / len(y)
    if se2 == 0:
        return None
    t = (mx - my) / math.sqrt(se2)
    df = se2 ** 2 / ((vx / len(x)) ** 2 / (len(x) - 1) + (vy / len(y)) ** 2 / (len(y) - 1))
    return betainc(df / 2, 0.5, df / (df + t * t))


def mark(p):
    if p is None:
        return ""
    return "***" if p < 0.001 else "**" if p < 0.01 else "*" if p < 0.05 else ""


# ---- fixtures ----------------------------------------------------------------
BASE_CFG = {
    "model": {"layers": 2, "d_model": 64, "heads": 4, "d_ff": 256, "pos_encoding": "learned", "attention": True,
              "norm": "pre", "dropout": 0.0, "prune_heads": [], "drop_attention_layers": []},
    "train": {"task": "copy", "steps": 2000, "batch": 32, "seq_len": 64, "lr": 0.001, "warmup": 100,
              "optimizer": "adamw", "weight_decay": 0.01, "eval_every": 50, "head_importance": True, "seeds": [0, 1, 2]},
    "data": {"vocab": 16},
}


def deep_set(cfg, dotted, value):
    parts = dotted.split(".")
    for p in parts[:-1]:
        cfg = cfg.setdefault(p, {})
    cfg[parts[-1]] = value


def copy_cfg(c):
    return json.loads(json.dumps(c))


class Variant:
    def __init__(self, name, overrides, floor, acc, tau, params, flops, tps, speed=1.0):
        self.name, self.overrides = name, overrides
        self.floor, self.acc, self.tau = floor, acc, tau
        self.params, self.flops, self.tps, self.speed = params, flops, tps, speed
        self.baseline = "baseline"


class Exp:
    def __init__(self, eid, name, spec, created, mode, variants, seeds, steps, eval_every, desc="", fail=None,
                 p0=0, paused=False, grid=None):
        self.id, self.name, self.spec_path, self.created_at = eid, name, spec, created
        self.mode, self.variants, self.seeds, self.steps = mode, variants, seeds, steps
        self.eval_every, self.description, self.fail = eval_every, desc, fail or {}
        self.p0, self.paused, self.grid = p0, paused, grid
        self.cancelled_at = None
        self.retried = False
        self.spec_hash = "%016x" % zlib.crc32(name.encode()) + "a3f09c1e"
        self.runs = []


def grid_variants(ablations, grid):
    out = []
    keys = list(grid)
    points = [{}]
    for k in keys:
        points = [dict(p, **{k: v}) for p in points for v in grid[k]]
    for pt in points:
        suffix = "[" + ",".join(f"{k.split('.')[-1]}={v}" for k, v in pt.items()) + "]"
        for a in ablations:
            layers = pt.get("model.layers", 2)
            lr = pt.get("train.lr", 0.001)
            scale = (1.0 / layers) ** 0.5 * (1 + 2.5 * abs(math.log10(lr / 0.002)))
            v = Variant(a.name + suffix, dict(a.overrides, **pt), a.floor * scale + 0.002 * u01(a.name, suffix),
                        min(1.0, a.acc * (1 - 0.03 * scale)), a.tau * scale, int(a.params * layers / 2),
                        int(a.flops * layers / 2), a.tps * 2 / layers, a.speed * layers / 2)
            v.baseline = "baseline" + suffix
            out.append(v)
    return out


def make_fixtures():
    day = 86400
    qs = [Variant("baseline", {}, 0.0016, 1.0, 300, 105000, 215000, 74400),
          Variant("no-attention", {"model.attention": False}, 2.7735, 0.0643, 250, 71000, 134000, 143000, 0.55),
          Variant("no-pos", {"model.pos_encoding": "none"}, 1.3238, 0.537, 400, 103000, 215000, 75700)]
    pos = [Variant("baseline", {}, 0.41, 0.86, 2500, 812000, 1.64e6, 31200),
           Variant("no-pos", {"model.pos_encoding": "none"}, 0.93, 0.61, 3000, 804000, 1.64e6, 31900),
           Variant("alibi", {"model.pos_encoding": "alibi"}, 0.37, 0.88, 2300, 804000, 1.66e6, 30100),
           Variant("rope", {"model.pos_encoding": "rope"}, 0.35, 0.89, 2200, 804000, 1.70e6, 29400, 1.1)]
    sweep = grid_variants(
        [Variant("baseline", {}, 0.05, 0.99, 400, 105000, 215000, 74400),
         Variant("no-pos", {"model.pos_encoding": "none"}, 1.2, 0.55, 500, 103000, 215000, 75700)],
        {"model.layers": [1, 2, 4], "train.lr": [0.001, 0.003]})
    ind = [Variant("baseline", {}, 0.2, 0.95, 900, 210000, 430000, 52000),
           Variant("one-layer", {"model.layers": 1}, 1.9, 0.31, 900, 105000, 215000, 98000),
           Variant("three-layers", {"model.layers": 3}, 0.15, 0.97, 800, 315000, 645000, 36000),
           Variant("no-residual", {"model.residual": False}, 2.4, 0.12, 900, 210000, 430000, 52500)]
    enc = [Variant("baseline", {}, 0.6, 0.8, 700, 400000, 800000, 40000),
           Variant("sinusoidal", {"model.pos_encoding": "sinusoidal"}, 0.62, 0.79, 700, 396000, 800000, 40300),
           Variant("no-norm", {"model.norm": "none"}, 3.1, 0.05, 700, 398000, 790000, 41000)]
    big = [Variant("baseline" if i == 0 else f"drop-layer-{i}", {} if i == 0 else {"model.drop_attention_layers": [i]},
                   0.3 + 0.04 * i + 0.01 * nz(i, 1), 0.9 - 0.01 * i, 2000, 1.2e6, 2.4e6, 21000 + 300 * i) for i in range(10)]
    exps = [
        Exp(8, "layer-drop-scale", "studies/layer-drop.toml", NOW0 - 9 * day, "done", big, list(range(100)), 20000, 20,
            desc="1000 runs: every layer's attention dropped, 100 seeds"),
        Exp(9, "quickstart", "examples/quickstart.toml", NOW0 - 6 * day, "cancelled", copy_variants(qs), [0, 1, 2], 2000, 50),
        Exp(10, "encoder-positions", "examples/encoder-positions.toml", NOW0 - 4 * day, "done", enc, [0, 1, 2], 3000, 100,
            fail={("no-norm", 0): 1200, ("no-norm", 1): 900, ("no-norm", 2): 1500}),
        Exp(11, "lr-layers-sweep", "studies/sweep.toml", NOW0 - 2 * day, "done", sweep, [0, 1, 2], 2000, 50,
            desc="grid: layers × lr"),
        Exp(12, "quickstart", "examples/quickstart.toml", NOW0 - 3 * 3600, "done", copy_variants(qs), [0, 1, 2], 2000, 50),
        Exp(13, "pos-encodings", "studies/pos.toml", NOW0 - 1200, "running", pos, [0, 1, 2], 30000, 100,
            fail={("rope", 2): 3000}, p0=6000, desc="long-context copy, 4 position schemes"),
        Exp(14, "induction-layers", "examples/induction-layers.toml", NOW0 - 300, "queued", ind, [0, 1, 2], 5000, 100,
            paused=True),
    ]
    rid = 1
    for e in exps:
        for v in e.variants:
            for s in e.seeds:
                cfg = copy_cfg(BASE_CFG)
                for k, val in v.overrides.items():
                    deep_set(cfg, k, val)
                cfg["train"]["steps"] = e.steps
                cfg["train"]["seed"] = s
                cfg["train"]["eval_every"] = e.eval_every
                e.runs.append({"id": rid, "variant": v, "seed": s, "config": cfg, "cancelled": False,
                               "attempt": 2 if (e.id == 12 and v.name == "no-pos" and s == 1) else 1})
                rid += 1
    return {e.id: e for e in exps}


def copy_variants(vs):
    return [Variant(v.name, v.overrides, v.floor, v.acc, v.tau, v.params, v.flops, v.tps, v.speed) for v in vs]


EXPS = make_fixtures()
RUNS = {r["id"]: (e, r) for e in EXPS.values() for r in e.runs}
AGENTS = [
    {"id": "local-0", "host": "box", "state": "busy", "slots": 2, "labels": {"accelerator": "cpu", "provider": "local"},
     "version": "0.4.0", "connected_at": NOW0 - 3000},
    {"id": "local-1", "host": "box", "state": "busy", "slots": 2, "labels": {"accelerator": "cpu", "provider": "local"},
     "version": "0.4.0", "connected_at": NOW0 - 3000},
    {"id": "tae-v4-1-w0", "host": "t1v-n-5c2e-w-0", "state": "busy", "slots": 4,
     "labels": {"accelerator": "tpu-v4", "provider": "gcloud", "slice": "s0", "worker": "0"}, "version": "0.4.0",
     "connected_at": NOW0 - 1500},
    {"id": "tae-v4-1-w1", "host": "t1v-n-5c2e-w-1", "state": "draining", "slots": 4,
     "labels": {"accelerator": "tpu-v4", "provider": "gcloud", "slice": "s0", "worker": "1"}, "version": "0.4.0",
     "connected_at": NOW0 - 1500},
    {"id": "old-box", "host": "old-box", "state": "lost", "slots": 1, "labels": {"accelerator": "cuda"}, "version": "0.3.2",
     "connected_at": NOW0 - 90000, "last_seen": NOW0 - 420},
]


# ---- run state over time -------------------------------------------------------
def progress(e):
    if e.mode == "running":
        return min(e.steps, e.p0 + 100 * tick())
    return e.steps


def run_info(e, r):
    """(state, last_step, started_at, finished_at, exit_code, reason)"""
    v, s = r["variant"], r["seed"]
    dt = 0.05 / v.speed * (e.steps / 2000 if e.steps > 2000 else 1) * 0.2
    started = e.created_at + 4 + 0.7 * (e.seeds.index(s) % 8)
    fail = e.fail.get((v.name, s))
    if r["cancelled"] or (e.cancelled_at is not None and e.mode == "running" and progress(e) < e.steps):
        last = min(progress(e), fail or e.steps)
        return "cancelled", last, started, started + last * dt, None, "cancelled from the dashboard"
    if e.mode == "queued":
        return "queued", None, None, None, None, "experiment e%d is paused" % e.id if e.paused else "waiting for a free slot"
    if e.mode == "cancelled":
        if s == 2:
            return "cancelled", None, None, None, None, "cancelled by taectl cancel e9"
        last = e.steps if s == 0 else 1100
        st = "succeeded" if s == 0 else "cancelled"
        return st, last, started, started + last * dt, 0 if s == 0 else -15, "" if s == 0 else "cancelled by taectl cancel e9"
    p = progress(e)
    if fail is not None and fail <= p:
        if e.retried:
            return "queued", None, None, None, None, "retried: waiting for a free slot"
        return "failed", fail, started, started + fail * dt, 1, "exit status 1: loss is NaN at step %d" % fail
    if p >= e.steps:
        return "succeeded", e.steps, started, started + e.steps * dt, 0, ""
    return "running", p, started, None, None, ""


def last_step_of(e, r):
    st, last, *_ = run_info(e, r)
    return last or 0


def exp_counts(e):
    c = {"total": 0, "queued": 0, "running": 0, "succeeded": 0, "failed": 0, "cancelled": 0, "lost": 0}
    for r in e.runs:
        st = run_info(e, r)[0]
        c["total"] += 1
        c["queued" if st == "assigned" else st] += 1
    return c


def exp_state(e):
    c = exp_counts(e)
    if e.cancelled_at is not None or e.mode == "cancelled":
        return "cancelled"
    if c["running"]:
        return "running"
    if c["queued"] == c["total"]:
        return "queued"
    if c["queued"]:
        return "running"
    if c["failed"] or c["lost"]:
        return "failed"
    return "succeeded"


def exp_json(e):
    return {"id": e.id, "name": e.name, "description": e.description, "state": exp_state(e), "paused": e.paused,
            "spec_hash": e.spec_hash, "spec_path": e.spec_path, "created_at": e.created_at,
            "variants": [v.name for v in e.variants], "counts": exp_counts(e)}


# ---- metric model -------------------------------------------------------------
METRICS = ["eval/acc", "eval/loss", "model/flops_per_token", "model/params", "perf/step_ms", "perf/tokens_per_s", "train/loss",
           "train/lr", "train/grad_norm"]
GOAL = {"eval/loss": "min", "train/loss": "min", "eval/acc": "max", "perf/tokens_per_s": "max", "perf/step_ms": "min"}


def value(e, v, seed, metric, step):
    """One seed's value of a metric at a step (smooth decay + seed offset + step noise)."""
    k = (step + 1) / v.tau
    decay = math.exp(-k)
    so = 0.04 * gauss(e.id, v.name, seed, metric)
    if metric in ("eval/loss", "train/loss"):
        start = 2.8
        base = v.floor + (start - v.floor) * decay
        noise = (0.06 if metric == "train/loss" else 0.02) * nz(step * 0.013 + seed, zlib.crc32(v.name.encode()) % 97) * (base + 0.05)
        return max(1e-5, base * (1 + so) + noise)
    if metric == "eval/acc":
        a0 = 1 / 16
        base = v.acc + (a0 - v.acc) * decay
        return min(1.0, max(0.0, base + 0.01 * so + 0.01 * nz(step * 0.01, seed)))
    if metric == "perf/step_ms":
        return 1000 * 32 * 64 / v.tps * (1 + 0.08 * nz(step, seed)) * (1.4 if step < 50 else 1)
    if metric == "perf/tokens_per_s":
        return v.tps * (1 + 0.05 * nz(step, seed + 1)) * (0.7 if step < 50 else 1)
    if metric == "train/lr":
        lr = float(v.overrides.get("train.lr", 0.001))
        return lr * min(1, step / 100) * 0.5 * (1 + math.cos(math.pi * min(step, e.steps) / e.steps))
    if metric == "train/grad_norm":
        return 0.3 + 2.5 * decay + 0.2 * abs(nz(step, seed))
    if metric == "model/params":
        return float(v.params)
    if metric == "model/flops_per_token":
        return float(v.flops)
    return 0.0


def interval(e, metric):
    return e.eval_every if metric.startswith("eval/") else max(1, e.eval_every // 5)


def seed_last_step(e, r):
    st, last, *_ = run_info(e, r)
    return last or 0


def final_values(e, v, metric):
    vals = []
    for r in e.runs:
        if r["variant"] is v and run_info(e, r)[0] == "succeeded":
            vals.append(value(e, v, r["seed"], metric, e.steps))
    return vals


def report(e, baseline, asked, sort):
    metrics = asked or ["eval/loss", "eval/acc"]
    by = {v.name: v for v in e.variants}
    rows = []
    for v in e.variants:
        base_name = v.baseline
        if baseline and baseline in by:
            # with a grid: the asked ablation at this row's grid point
            point = v.name[v.name.index("["):] if "[" in v.name else ""
            ablation = baseline.split("[")[0]
            base_name = ablation + point if ablation + point in by else v.baseline
        succ = [r for r in e.runs if r["variant"] is v and run_info(e, r)[0] == "succeeded"]
        row = {"variant": v.name, "baseline": base_name, "runs": len(succ),
               "runs_total": sum(1 for r in e.runs if r["variant"] is v), "metrics": {}}
        for m in metrics:
            xs = final_values(e, v, m)
            n = len(xs)
            mean = sum(xs) / n if n else None
            std = math.sqrt(sum((x - mean) ** 2 for x in xs) / (n - 1)) if n > 1 else None
            ci = t95(n - 1) * std / math.sqrt(n) if n > 1 else None
            best = None
            if n:
                best = mean * (0.995 if GOAL.get(m) == "min" else 1.0)
            st = {"n": n, "mean": mean, "std": std, "ci95": ci, "best": best, "delta": None, "rel_delta": None,
                  "p_value": None, "mark": ""}
            if base_name != v.name and base_name in by and n:
                ys = final_values(e, by[base_name], m)
                if ys:
                    bm = sum(ys) / len(ys)
                    st["delta"] = mean - bm
                    st["rel_delta"] = (mean - bm) / abs(bm) if bm else None
                    p = welch(xs, ys)
                    st["p_value"] = p
                    st["mark"] = mark(p)
            row["metrics"][m] = st
        row["params"] = float(v.params) if succ else None
        row["flops_per_token"] = float(v.flops) if succ else None
        row["tokens_per_s"] = v.tps if succ else None
        rows.append(row)
    if sort != "spec":
        first = metrics[0]
        rows.sort(key=lambda r: (r["variant"] != r["baseline"],
                                 -abs(r["metrics"][first]["rel_delta"] or 0) if r["variant"] != r["baseline"] else 0))
    keys = set()
    for v in e.variants:
        keys.update(v.overrides)
    cfgs = {}
    for v in e.variants:
        cfg = copy_cfg(BASE_CFG)
        for k, val in v.overrides.items():
            deep_set(cfg, k, val)
        cfgs[v.name] = cfg

    def get(cfg, k):
        for p in k.split("."):
            cfg = cfg.get(p) if isinstance(cfg, dict) else None
        return cfg
    varying = {v.name: {k: get(cfgs[v.name], k) for k in sorted(keys)} for v in e.variants}
    return {"experiment": e.id, "name": e.name, "state": exp_state(e), "baseline": baseline or "baseline",
            "metrics": metrics, "metrics_source": "asked" if asked else "default",
            "goal": {m: GOAL[m] for m in metrics if m in GOAL}, "varying": varying, "rows": rows}


def ema(a, w):
    if not w:
        return a
    out, acc, norm = [], 0.0, 0.0
    for x in a:
        if x is None:
            out.append(None)
            continue
        acc = w * acc + (1 - w) * x
        norm = w * norm + (1 - w)
        out.append(acc / norm)
    return out


class BadRequest(Exception):
    pass


def zoom_bounds(q):
    """x_min/x_max as taed parses them: finite numbers, x_min <= x_max; absent: unbounded."""
    out = []
    for name, dflt in (("x_min", -math.inf), ("x_max", math.inf)):
        text = q.get(name, "")
        if text == "":
            out.append(dflt)
            continue
        try:
            v = float(text)
        except ValueError:
            v = math.nan
        if not math.isfinite(v):
            raise BadRequest(f"{name}: a number (the zoom's x range)")
        out.append(v)
    if out[0] > out[1]:
        raise BadRequest("x_min: larger than x_max")
    return out


def curves(e, q):
    metric = q.get("metric", "eval/loss")
    xk = q.get("x", "step")
    width = max(50, min(4000, int(float(q.get("width", 900)))))
    smooth = max(0.0, min(0.99, float(q.get("smooth", 0) or 0)))
    delta = q.get("delta", "0") in ("1", "true")
    x_lo, x_hi = zoom_bounds(q)
    want = [s for s in q.get("variants", "").split(",") if s]
    by = {v.name: v for v in e.variants}
    shown = [v for v in e.variants if not want or v.name in want]
    base_override = q.get("baseline") or None
    step_iv = interval(e, metric)
    maxp = max((seed_last_step(e, r) for r in e.runs), default=0)
    buckets = 2 * width
    npts = maxp // step_iv  # the points of the longest run: point i is at step step_iv * (i + 1)

    def dt(v):
        return 0.05 / v.speed * (e.steps / 2000 if e.steps > 2000 else 1) * 0.2

    # x of point i, and for every variant the step it corresponds to
    if xk in ("step", "tokens"):
        mult = 32 * 64 if xk == "tokens" else 1

        def x_at(i):
            return step_iv * (i + 1) * mult

        def step_of(v, i):
            return step_iv * (i + 1)
    else:
        t0 = e.created_at + 4 if xk == "wall" else 0
        tmax = max((dt(v) * maxp for v in e.variants), default=0)

        def x_at(i):
            return t0 + tmax * (i + 1) / npts

        def step_of(v, i):
            return round(tmax * (i + 1) / npts / dt(v) / step_iv) * step_iv

    # As taed: only the points with x in [x_min, x_max], at most 2 x width of them (here picked,
    # not averaged), smoothed over the whole series (here from far enough back: w^n < 1e-4).
    picked = [i for i in range(npts) if x_lo <= x_at(i) <= x_hi]
    if len(picked) > buckets:
        picked = [picked[round(k * (len(picked) - 1) / (buckets - 1))] for k in range(buckets)]
    if smooth and picked:
        warm = math.ceil(math.log(1e-4) / math.log(smooth))
        idx = list(range(max(0, picked[0] - warm), picked[-1] + 1))
    else:
        idx = picked
    xs = [x_at(i) for i in picked]

    def agg(v):
        runs = [r for r in e.runs if r["variant"] is v]
        lasts = [(r, seed_last_step(e, r)) for r in runs]
        n_max = sum(1 for _, l in lasts if l > 0)
        sorted_lasts = sorted(l for _, l in lasts)
        out = {k: [] for k in ("mean", "lo", "hi", "min", "max", "n")}
        many = len(runs) > 12
        for i in idx:
            s = step_of(v, i)
            nn = len(sorted_lasts) - bisect.bisect_left(sorted_lasts, s) if s > 0 else 0
            if not nn:
                for k in out:
                    out[k].append(None)
                continue
            if many:
                m = value(e, v, 0, metric, s) * (1 + 0.01 * nz(s, 3))
                sd = abs(m) * 0.04 + 1e-6
                lo, hi = m - 1.98 * sd / math.sqrt(nn), m + 1.98 * sd / math.sqrt(nn)
                mn, mx = m - 2.6 * sd, m + 2.6 * sd
            else:
                vals = [value(e, v, r["seed"], metric, s) for r, l in lasts if l >= s]
                m = sum(vals) / nn
                sd = math.sqrt(sum((x - m) ** 2 for x in vals) / (nn - 1)) if nn > 1 else 0
                half = t95(nn - 1) * sd / math.sqrt(nn) if nn > 1 else 0
                lo, hi, mn, mx = m - half, m + half, min(vals), max(vals)
            out["mean"].append(m)
            out["lo"].append(lo)
            out["hi"].append(hi)
            out["min"].append(mn)
            out["max"].append(mx)
            out["n"].append(nn)
        out["n_max"] = n_max
        out["runs"] = [r["id"] for r in runs]
        return out

    cache = {}

    def get(v):
        if v.name not in cache:
            cache[v.name] = agg(v)
        return cache[v.name]

    at = {i: j for j, i in enumerate(idx)}
    keep = [at[i] for i in picked]
    res = []
    for v in shown:
        a = dict(get(v))
        bname = base_override if base_override in by and "[" not in v.name else v.baseline
        if delta and bname in by:
            b = get(by[bname])
            for k in ("mean", "lo", "hi", "min", "max"):
                a[k] = list(a[k])
            for i in range(len(idx)):
                if a["mean"][i] is None or b["mean"][i] is None:
                    for k in ("mean", "lo", "hi", "min", "max"):
                        a[k][i] = None
                    continue
                hv = (a["hi"][i] - a["lo"][i]) / 2
                hb = (b["hi"][i] - b["lo"][i]) / 2
                d = a["mean"][i] - b["mean"][i]
                hw = math.sqrt(hv * hv + hb * hb)
                a["min"][i] -= b["mean"][i]
                a["max"][i] -= b["mean"][i]
                a["mean"][i], a["lo"][i], a["hi"][i] = d, d - hw, d + hw
        for k in ("mean", "lo", "hi", "min", "max"):
            sm = ema(a[k], smooth)
            a[k] = [None if sm[j] is None else round(sm[j], 7) for j in keep]
        a["n"] = [a["n"][j] for j in keep]
        res.append({"variant": v.name, "baseline": bname, "runs": a["runs"], "n_max": a["n_max"],
                    "mean": a["mean"], "lo": a["lo"], "hi": a["hi"], "min": a["min"], "max": a["max"], "n": a["n"]})
    return {"experiment": e.id, "metric": metric, "goal": GOAL.get(metric), "x_kind": xk, "smooth": smooth,
            "delta": delta, "baseline": base_override or "baseline", "buckets": len(xs), "x": xs, "variants": res}


def curves_csv(c):
    lines = [c["x_kind"] + ",variant,n,mean,lo,hi,min,max"]
    for v in c["variants"]:
        for i, x in enumerate(c["x"]):
            if v["mean"][i] is None:
                continue
            lines.append(",".join(str(t) for t in (x, v["variant"], v["n"][i], v["mean"][i], v["lo"][i], v["hi"][i],
                                                    v["min"][i], v["max"][i])))
    return "\n".join(lines) + "\n"


def curves_svg(c):
    W, H, P = 720, 420, 50
    pts = [(x, y) for v in c["variants"] for x, y in zip(c["x"], v["mean"]) if y is not None]
    if not pts:
        return f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}"><text x="20" y="40">no points</text></svg>'
    x0, x1 = min(p[0] for p in pts), max(p[0] for p in pts)
    y0, y1 = min(p[1] for p in pts), max(p[1] for p in pts)
    sx = lambda x: P + (x - x0) / ((x1 - x0) or 1) * (W - 2 * P)
    sy = lambda y: H - P - (y - y0) / ((y1 - y0) or 1) * (H - 2 * P)
    cols = ["#1f77b4", "#e8590c", "#2b8a3e", "#c92a2a", "#7048e8", "#8c564b"]
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-family="sans-serif" font-size="12">',
           f'<text x="{P}" y="24">{c["metric"]} (mock)</text>']
    for k, v in enumerate(c["variants"]):
        d = " ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y in zip(c["x"], v["mean"]) if y is not None)
        out.append(f'<polyline fill="none" stroke="{cols[k % len(cols)]}" stroke-width="1.5" points="{d}"/>')
    out.append("</svg>")
    return "\n".join(out)


# ---- runs -----------------------------------------------------------------------
def run_json(e, r, detail=False):
    st, last, started, finished, code, reason = run_info(e, r)
    v = r["variant"]
    agent = None
    if st in ("running", "succeeded", "failed", "cancelled") and started:
        agent = ["local-0", "local-1", "tae-v4-1-w0"][r["id"] % 3]
    finals = {}
    if st == "succeeded" or (st in ("failed", "cancelled") and last):
        for m in ("eval/loss", "eval/acc", "train/loss", "perf/tokens_per_s"):
            finals[m] = value(e, v, r["seed"], m, last)
    out = {"id": r["id"], "experiment": e.id, "variant": v.name, "seed": r["seed"], "state": st, "attempt": r["attempt"],
           "agent": agent, "pid": 40000 + r["id"] if st == "running" else None, "exit_code": code, "reason": reason,
           "created_at": e.created_at + 1, "started_at": started, "finished_at": finished, "last_step": last,
           "final_metrics": finals,
           "meta": {"libtorch": "2.5.1", "blas": "openblas", "intra_op_threads": "2", "inter_op_threads": "1",
                    "OMP_WAIT_POLICY": "passive", "OMP_PROC_BIND": "unset"} if started else {},
           "config": r["config"]}
    if not detail:
        return out
    t = []
    at = e.created_at + 1
    t.append({"attempt": 1, "from": "", "to": "queued", "reason": "submitted", "at": at})
    if started:
        if r["attempt"] == 2:
            t.append({"attempt": 1, "from": "queued", "to": "assigned", "reason": "placed on old-box", "at": started - 30})
            t.append({"attempt": 1, "from": "assigned", "to": "running", "reason": "pid 31337", "at": started - 29})
            t.append({"attempt": 1, "from": "running", "to": "lost", "reason": "agent old-box stopped answering (no heartbeat for 30 s)", "at": started - 10})
            t.append({"attempt": 2, "from": "lost", "to": "queued", "reason": "requeued after the agent was lost (attempt 2 of 3)", "at": started - 10})
        t.append({"attempt": r["attempt"], "from": "queued", "to": "assigned", "reason": f"placed on {agent}", "at": started - 0.4})
        t.append({"attempt": r["attempt"], "from": "assigned", "to": "running", "reason": f"pid {40000 + r['id']}", "at": started})
        if finished:
            t.append({"attempt": r["attempt"], "from": "running", "to": st, "reason": reason or "exit status 0", "at": finished})
    out["transitions"] = t
    sums = []
    if last:
        for m in METRICS:
            iv = interval(e, m)
            n = last // iv
            vals = [value(e, v, r["seed"], m, s) for s in range(iv, last + 1, max(iv, last // 200))]
            sums.append({"key": m, "last_step": (last // iv) * iv, "last": value(e, v, r["seed"], m, (last // iv) * iv),
                         "min": min(vals), "max": max(vals), "count": n})
    out["summaries"] = sums
    out["heads"] = None
    if e.id in (12, 9) and st == "succeeded":
        L, Hh = 2, 4
        cells = [["scored"] * Hh for _ in range(L)]
        masked = [[round(0.004 * u01(r["id"], i, j) * (3 if j == 0 else 1), 6) for j in range(Hh)] for i in range(L)]
        grad = [[round(u01(r["id"], i, j, "g"), 4) for j in range(Hh)] for i in range(L)]
        if v.name == "no-attention":
            cells = [["removed"] * Hh for _ in range(L)]
        cells[1][2] = "pruned" if v.name == "baseline" else cells[1][2]
        if v.name == "no-pos":
            masked[0][3] = None
            grad[0][3] = None
        for i in range(L):
            for j in range(Hh):
                if cells[i][j] != "scored":
                    masked[i][j] = None
                    grad[i][j] = None
        out["heads"] = {"run": r["id"], "layers": L, "heads": Hh, "masked": masked, "gradient": grad, "cells": cells}
    return out


def series(e, r, metric, width):
    v = r["variant"]
    last = seed_last_step(e, r)
    iv = interval(e, metric)
    n = last // iv
    if n <= 0:
        return {"run": r["id"], "metric": metric, "x": [], "value": [], "min": [], "max": []}
    buckets = max(1, min(n, 2 * width))
    per = n / buckets
    xs, val, mn, mx = [], [], [], []
    for b in range(buckets):
        lo_i, hi_i = int(b * per), max(int(b * per) + 1, int((b + 1) * per))
        steps = [iv * (i + 1) for i in range(lo_i, hi_i)]
        vals = [value(e, v, r["seed"], metric, s) for s in steps[:: max(1, len(steps) // 8)]]
        xs.append(steps[len(steps) // 2])
        val.append(sum(vals) / len(vals))
        mn.append(min(vals))
        mx.append(max(vals))
    return {"run": r["id"], "metric": metric, "x": xs, "value": val, "min": mn, "max": mx}


# ---- logs -----------------------------------------------------------------------
def log_count(e, r):
    st, last, *_ = run_info(e, r)
    if not last:
        return 0
    base = 6 + last // 5  # a line every 5 steps
    if e.id == 8 and r["id"] == e.runs[0]["id"]:
        base = 120000  # one long log
    return base + (2 if st in ("succeeded", "failed", "cancelled") else 0)


def log_line(e, r, i):
    """Line i (0-based) of a run's log: cursor i + 1."""
    v = r["variant"]
    st, last, started, finished, code, reason = run_info(e, r)
    total = log_count(e, r)
    attempt = 1 if (r["attempt"] == 2 and i < 40) else r["attempt"]
    t = (started or e.created_at) + i * 0.05
    stream, text = "stdout", ""
    if i == 0:
        text = "tae-train 0.4.0 (libtorch 2.5.1, BLAS openblas, 2 intra-op threads)"
    elif i == 1:
        text = f"config: variant={v.name} seed={r['seed']} layers={r['config']['model']['layers']} d_model=64 heads=4 lr={r['config']['train']['lr']}"
    elif i == 2:
        text = "data: synthetic copy task, vocab 16, seq_len 64, batch 32"
    elif st in ("succeeded", "failed", "cancelled") and i >= total - 2:
        if st == "failed":
            stream = "stderr"
            text = "error: loss is NaN at step %d; stopping" % last if i == total - 2 else "exit status 1"
        else:
            text = "final: " + " ".join(f"{m}={value(e, v, r['seed'], m, last):.4f}" for m in ("eval/loss", "eval/acc")) \
                if i == total - 2 else "done in %.1f s" % ((finished or t) - (started or t))
    else:
        step = (i - 2) * 5
        if i % 97 == 13:
            stream = "stderr"
            text = f"W{time.strftime('%m%d %H:%M:%S', time.localtime(t))} warning: gradient norm {3 + 10 * u01(r['id'], i):.1f} clipped to 1.0"
        elif step % e.eval_every == 0:
            text = f"eval step {step}: eval/loss {value(e, v, r['seed'], 'eval/loss', step):.4f} eval/acc {value(e, v, r['seed'], 'eval/acc', step):.4f}"
        else:
            text = f"step {step:>6} loss {value(e, v, r['seed'], 'train/loss', step):.4f} lr {value(e, v, r['seed'], 'train/lr', step):.2e} {value(e, v, r['seed'], 'perf/tokens_per_s', step):,.0f} tok/s"
    return {"cursor": i + 1, "attempt": attempt, "stream": stream, "text": text, "time": round(t, 3)}


def log_page(e, r, after, limit):
    total = log_count(e, r)
    lines = [log_line(e, r, i) for i in range(after, min(total, after + limit))]
    final = run_info(e, r)[0] in ("succeeded", "failed", "cancelled", "lost")
    nxt = lines[-1]["cursor"] if lines else after
    return {"lines": lines, "next": nxt, "finished": final and nxt >= total}


def log_page_before(e, r, before, limit):
    """As taed's tail=N (before=0) and before=C: the last `limit` lines with cursor < C, ascending;
    next is the last line's cursor (0 if none), finished says the run is final (tail only)."""
    total = log_count(e, r)
    end = total if before <= 0 else min(total, before - 1)  # line i has cursor i + 1
    lines = [log_line(e, r, i) for i in range(max(0, end - limit), end)]
    final = run_info(e, r)[0] in ("succeeded", "failed", "cancelled", "lost")
    return {"lines": lines, "next": lines[-1]["cursor"] if lines else 0, "finished": before <= 0 and final}


LOG_TEXTS = {}


def log_texts(e, r):
    """The lowercased lines, for search (kept once the run is final: the long log takes seconds)."""
    total = log_count(e, r)
    got = LOG_TEXTS.get(r["id"])
    if got is None or len(got) != total:
        got = [log_line(e, r, i)["text"].lower() for i in range(total)]
        if run_info(e, r)[0] in ("succeeded", "failed", "cancelled", "lost"):
            LOG_TEXTS[r["id"]] = got
    return got


# ---- fleet ----------------------------------------------------------------------
def fleet():
    now = time.time()
    running = [(e, r) for e in EXPS.values() for r in e.runs if run_info(e, r)[0] == "running"]
    agents = []
    for i, a in enumerate(AGENTS):
        mine = [r["id"] for e, r in running if run_json(e, r)["agent"] == a["id"]][: a["slots"]]
        state = a["state"]
        if state in ("busy", "ready"):
            state = "busy" if mine else "ready"
        if state in ("lost", "draining") and a["state"] == "lost":
            mine = []
        agents.append({"id": a["id"], "host": a["host"], "state": state, "slots": a["slots"],
                       "busy_slots": len(mine) if state != "lost" else 0, "labels": a["labels"], "version": a["version"],
                       "connected_at": a["connected_at"], "last_seen": a.get("last_seen", now - (i % 3) - 0.4),
                       "runs": mine})
    queue = []
    for e in EXPS.values():
        for r in e.runs:
            if run_info(e, r)[0] == "queued":
                j = run_json(e, r)
                queue.append(j)
    vms = [{"provider": "gcloud-tpu", "name": "tae-v4-1", "pool": "v4", "zone": "us-central2-b", "state": "READY"},
           {"provider": "gcloud-tpu", "name": "tae-v4-2", "pool": "v4", "zone": "us-central2-b", "state": "CREATING"},
           {"provider": "gcloud-tpu", "name": "tae-v5e-1", "pool": "v5e", "zone": "us-west4-a", "state": "PREEMPTED"}]
    # as taed sends them: VMs {provider, pool, name, zone, state}, events {time, provider, subject, event, detail}
    evs = [{"time": now - 3600, "provider": "gcloud-tpu", "subject": "tae-v4-1", "event": "create", "detail": "gcloud compute tpus tpu-vm create tae-v4-1 --zone us-central2-b --accelerator-type v4-8 --spot"},
           {"time": now - 3400, "provider": "gcloud-tpu", "subject": "tae-v4-1", "event": "ready", "detail": "2 workers joined: tae-v4-1-w0, tae-v4-1-w1"},
           {"time": now - 900, "provider": "gcloud-tpu", "subject": "tae-v5e-1", "event": "preempted", "detail": "spot VM preempted; 1 run requeued (r37 resumes from its step-1200 checkpoint)"},
           {"time": now - 600, "provider": "local", "subject": "local-1", "event": "restart", "detail": "exit status 137; restarted"},
           {"time": now - 120, "provider": "gcloud-tpu", "subject": "tae-v4-2", "event": "create", "detail": "queue has 36 runs waiting: creating a second v4-8"}]
    return {"agents": agents, "vms": vms, "provider_events": evs, "queue": queue[:200]}


def resolve_experiment(ref):
    """12, e12 or a name (the newest experiment of that name), as taed resolves them."""
    from urllib.parse import unquote
    ref = unquote(ref)
    if re.fullmatch(r"e?\d+", ref):
        return EXPS.get(int(ref.lstrip("e")))
    named = [e for e in EXPS.values() if e.name == ref]
    return max(named, key=lambda e: e.id) if named else None


# ---- HTTP -----------------------------------------------------------------------
class Handler(BaseHTTPRequestHandler):
    server_version = "taed-mock/" + VERSION
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):
        if self.server.verbose:
            sys.stderr.write("%s %s\n" % (self.log_date_time_string(), fmt % args))

    # -- helpers
    def send(self, code, body, ctype="application/json", headers=None):
        if isinstance(body, (dict, list)):
            body = json.dumps(body, separators=(",", ":"), allow_nan=False)
        if isinstance(body, str):
            body = body.encode()
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def err(self, code, msg):
        self.send(code, {"error": msg})

    def authed(self):
        if self.server.no_auth:
            return True
        return f"tae_session={SESSION}" in (self.headers.get("Cookie") or "")

    # -- GET
    def do_GET(self):
        u = urlsplit(self.path)
        q = {k: v[-1] for k, v in parse_qs(u.query, keep_blank_values=True).items()}
        path = u.path
        if path == "/" or path == "/index.html":
            if "token" in q:
                if q["token"] != TOKEN:
                    return self.send(403, "wrong token\n", "text/plain")
                return self.send(302, b"", "text/plain", {"Location": "/",
                                 "Set-Cookie": f"tae_session={SESSION}; Path=/; HttpOnly; SameSite=Strict"})
            return self.index()
        if path.startswith("/assets/"):
            return self.asset(path[len("/assets/"):])
        if path == "/favicon.ico":
            return self.send(204, b"", "image/x-icon")
        if not path.startswith("/api/"):
            return self.send(404, "not found\n", "text/plain")
        if not self.authed():
            return self.err(401, "not signed in: open the URL that taectl ui prints")
        delay = self.server.delay
        if delay:
            time.sleep(delay)
        try:
            return self.api(path, q)
        except (BrokenPipeError, ConnectionResetError):
            pass

    do_HEAD = do_GET

    def index(self):
        with open(os.path.join(SRC, "index.html"), encoding="utf-8") as f:
            html = f.read()
        imports = {"uplot": "/assets/uPlot.esm.js"}
        for name in sorted(os.listdir(SRC)):
            if name.endswith(".js"):
                imports[f"/assets/{name}"] = f"/assets/{name}"
        tag = '<script type="importmap">' + json.dumps({"imports": imports}) + "</script>"
        if "<!--TAE:IMPORTMAP-->" not in html:
            return self.send(500, "index.html lacks <!--TAE:IMPORTMAP-->\n", "text/plain")
        self.send(200, html.replace("<!--TAE:IMPORTMAP-->", tag), "text/html; charset=utf-8")

    def asset(self, name):
        if "/" in name or name.startswith("."):
            return self.send(404, "not found\n", "text/plain")
        if name in ("uPlot.esm.js", "uPlot.min.css"):
            fn = os.path.join(UPLOT, name)
        else:
            fn = os.path.join(SRC, name)
        if not os.path.isfile(fn):
            return self.send(404, "not found\n", "text/plain")
        with open(fn, "rb") as f:
            data = f.read()
        self.send(200, data, MIME.get(os.path.splitext(name)[1], "application/octet-stream"))

    def api(self, path, q):
        if path == "/api/session":
            return self.send(200, {"csrf": CSRF, "version": VERSION})
        if path == "/api/experiments":
            return self.send(200, {"experiments": [exp_json(e) for e in EXPS.values()]})
        if path == "/api/fleet":
            return self.send(200, fleet())
        if path == "/api/events":
            return self.sse_changed(None)
        m = re.fullmatch(r"/api/experiments/([^/]+)(/[a-z.]+)?", path)
        if m:
            e = resolve_experiment(m.group(1))
            if not e:
                return self.err(404, f"no experiment e{m.group(1)}")
            sub = m.group(2) or ""
            if sub == "":
                return self.send(200, exp_json(e))
            if sub == "/report":
                ms = [s for s in q.get("metrics", "").split(",") if s]
                for mm in ms:
                    if mm not in METRICS:
                        return self.err(400, f"e{e.id} has no metric {mm}")
                return self.send(200, report(e, q.get("baseline") or None, ms, q.get("sort", "effect")))
            if sub == "/runs":
                return self.send(200, {"runs": [run_json(e, r) for r in e.runs]})
            if sub == "/metrics":
                has = any(run_info(e, r)[1] for r in e.runs)
                return self.send(200, {"metrics": METRICS if has else [], "default": ["eval/loss", "eval/acc"] if has else []})
            if sub in ("/curves", "/curves.csv", "/curves.svg"):
                if q.get("metric") and q["metric"] not in METRICS:
                    return self.err(400, f"e{e.id} has no metric {q['metric']}")
                try:
                    c = curves(e, q)
                except BadRequest as ex:
                    return self.err(400, str(ex))
                fname = f"e{e.id}-{c['metric'].replace('/', '_')}"
                if sub == "/curves.csv":
                    return self.send(200, curves_csv(c), "text/csv; charset=utf-8",
                                     {"Content-Disposition": f'attachment; filename="{fname}.csv"'})
                if sub == "/curves.svg":
                    return self.send(200, curves_svg(c), "image/svg+xml",
                                     {"Content-Disposition": f'attachment; filename="{fname}.svg"'})
                hdr = {"Content-Disposition": f'attachment; filename="{fname}.json"'} if q.get("download") == "1" else None
                return self.send(200, c, "application/json", hdr)
            if sub == "/events":
                return self.sse_changed(e.id)
            return self.err(404, "no such endpoint")
        m = re.fullmatch(r"/api/runs/(\d+)(/[a-z./]+)?", path)
        if m:
            er = RUNS.get(int(m.group(1)))
            if not er:
                return self.err(404, f"no run r{m.group(1)}")
            e, r = er
            sub = m.group(2) or ""
            if sub == "":
                return self.send(200, run_json(e, r, detail=True))
            if sub == "/series":
                metric = q.get("metric", "train/loss")
                return self.send(200, series(e, r, metric, int(float(q.get("width", 600)))))
            if sub == "/logs":
                # after=C: forward from C; tail=N: the last N lines; before=C: the last limit lines
                # before C (both ascending). after cannot be combined with tail or before.
                try:
                    tail = int(q.get("tail", 0) or 0)
                    before = int(q.get("before", 0) or 0)
                    after = int(q.get("after", 0) or 0)
                    limit = int(q.get("limit", 1000) or 1000)
                except ValueError:
                    return self.err(400, "after, before, tail, limit: integers")
                if not 1 <= limit <= 10000 or not 0 <= tail <= 10000 or before < 0 or after < 0:
                    return self.err(400, "limit: must be 1..10000")
                if (tail > 0 or before > 0) and q.get("after", "") != "":
                    return self.err(400, "after: not with tail or before (one direction at a time)")
                if tail > 0 or before > 0:
                    return self.send(200, log_page_before(e, r, before, tail if tail > 0 else limit))
                return self.send(200, log_page(e, r, after, limit))
            if sub == "/logs/search":
                needle = q.get("q", "").lower()
                if not needle:
                    return self.send(200, {"matches": [], "truncated": False})
                out = []
                for i, text in enumerate(log_texts(e, r)):
                    if needle in text:
                        out.append(i + 1)
                        if len(out) > 10000:
                            break
                return self.send(200, {"matches": out[:10000], "truncated": len(out) > 10000})
            if sub == "/logs.txt":
                lines = [log_line(e, r, i) for i in range(log_count(e, r))]
                body = "".join(f"{l['text']}\n" for l in lines)
                return self.send(200, body, "text/plain; charset=utf-8",
                                 {"Content-Disposition": f'attachment; filename="r{r["id"]}.log"'})
            if sub == "/logs/stream":
                return self.sse_logs(e, r, int(q.get("after", 0) or 0))
            return self.err(404, "no such endpoint")
        return self.err(404, "no such endpoint")

    # -- SSE
    def sse_start(self):
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-store")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True

    def sse_send(self, event, data):
        self.wfile.write(f"event: {event}\ndata: {json.dumps(data, separators=(',', ':'))}\n\n".encode())
        self.wfile.flush()

    def sse_changed(self, eid):
        self.sse_start()
        try:
            self.wfile.write(b": hello\n\n")
            self.wfile.flush()
            while not self.server.stopping:
                time.sleep(1)
                with LOCK:
                    VERSION_COUNTER[0] += 1
                    n = VERSION_COUNTER[0]
                self.sse_send("changed", {"version": n} if eid is None else {"experiment": eid, "version": n})
        except (BrokenPipeError, ConnectionResetError, OSError):
            pass

    def sse_logs(self, e, r, after):
        self.sse_start()
        try:
            self.wfile.write(b": hello\n\n")
            self.wfile.flush()
            while not self.server.stopping:
                page = log_page(e, r, after, 1000)
                if page["lines"]:
                    self.sse_send("lines", page)
                    after = page["next"]
                if page["finished"]:
                    self.sse_send("end", {"next": page["next"]})  # as taed: the run is final
                    return
                if len(page["lines"]) < 1000:
                    time.sleep(1)
        except (BrokenPipeError, ConnectionResetError, OSError):
            pass

    # -- POST
    def do_POST(self):
        u = urlsplit(self.path)
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        if not self.authed():
            return self.err(401, "not signed in")
        if self.headers.get("X-CSRF-Token") != CSRF:
            return self.err(403, "missing or wrong X-CSRF-Token")
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            return self.err(400, "the body is not JSON")
        m = re.fullmatch(r"/api/experiments/([^/]+)/(cancel|pause|resume|retry)", u.path)
        if m:
            e = resolve_experiment(m.group(1))
            if not e:
                return self.err(404, f"no experiment e{m.group(1)}")
            act = m.group(2)
            st = exp_state(e)
            if act in ("cancel", "pause", "resume") and st in ("succeeded", "failed", "cancelled"):
                return self.err(409, f"e{e.id} is {st}: nothing to {act}")
            if act == "cancel":
                e.cancelled_at = time.time()
                for r in e.runs:
                    if run_info(e, r)[0] in ("queued", "running"):
                        r["cancelled"] = True
            elif act == "pause":
                e.paused = True
            elif act == "resume":
                e.paused = False
            elif act == "retry":
                c = exp_counts(e)
                if not (c["failed"] or c["cancelled"] or c["lost"]):
                    return self.err(409, f"e{e.id} has no failed, cancelled or lost run to retry")
                e.retried = True
            return self.send(200, {"ok": True})
        m = re.fullmatch(r"/api/runs/(\d+)/cancel", u.path)
        if m:
            er = RUNS.get(int(m.group(1)))
            if not er:
                return self.err(404, f"no run r{m.group(1)}")
            e, r = er
            if run_info(e, r)[0] not in ("queued", "assigned", "running"):
                return self.err(409, f"r{r['id']} is {run_info(e, r)[0]}: nothing to cancel")
            r["cancelled"] = True
            return self.send(200, {"ok": True})
        m = re.fullmatch(r"/api/agents/([^/]+)/drain", u.path)
        if m:
            a = next((a for a in AGENTS if a["id"] == m.group(1)), None)
            if not a:
                return self.err(404, f"no agent {m.group(1)}")
            if a["state"] in ("lost", "gone"):
                return self.err(409, f"{a['id']} is {a['state']}")
            a["state"] = "draining" if body.get("drain") else "busy"
            return self.send(200, {"ok": True})
        return self.err(404, "no such endpoint")


class Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    stopping = False


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=8765)
    ap.add_argument("--no-auth", action="store_true", help="serve /api without the session cookie")
    ap.add_argument("--delay", type=float, default=0.0, help="seconds to wait before every API answer")
    ap.add_argument("-v", "--verbose", action="store_true", help="log every request")
    a = ap.parse_args()
    srv = Server((a.host, a.port), Handler)
    srv.no_auth, srv.verbose, srv.delay = a.no_auth, a.verbose, a.delay
    if not os.path.isdir(UPLOT):
        print("warning: web/node_modules/uplot is missing: run `npm ci` in web/", file=sys.stderr)
    print(f"http://{a.host}:{srv.server_address[1]}/?token={TOKEN}", flush=True)
    try:
        srv.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        srv.stopping = True
        srv.server_close()


if __name__ == "__main__":
    main()
