"""Study-shaped frames over one experiment: runs(), history(), report(), curves(), plot(), and
live use (refresh(), wait()). Every number comes from taed (or a bundle it wrote): the statistics
live in one implementation, taed's; this module only reshapes them into pandas."""

import math
import re
import sys
import time

import numpy as np
import pandas as pd

from ._cache import SeriesCache
from ._errors import BadRequest, NotFound

_FINAL = {"succeeded", "failed", "cancelled", "pruned"}
_POINT = re.compile(r"^(?P<ablation>[^\[]*)(\[(?P<point>.*)\])?$")


def _point_of(variant):
    """"no-pos[lr=0.001,layers=2]" -> ("no-pos", {"lr": 0.001, "layers": 2}), values typed as
    taed's JSON types them (api::PointJson)."""
    m = _POINT.match(variant)
    ablation, point = m.group("ablation"), {}
    for part in (m.group("point") or "").split(","):
        if "=" not in part:
            continue
        key, text = part.split("=", 1)
        try:
            import json
            point[key] = json.loads(text)
        except ValueError:
            point[key] = text
    return ablation, point


def _grid_key(short, config):
    """The dotted config key a grid point's short name stands for ("lr" -> "train.lr")."""
    if short in config:
        return short
    matches = [k for k in config if k.endswith("." + short)]
    return matches[0] if len(matches) == 1 else short


_NAT = np.iinfo(np.int64).min  # pandas' NaT as nanoseconds
_INT64 = (np.iinfo(np.int64).min, np.iinfo(np.int64).max)


def _column_dtype(values):
    """The dtype pandas' infer_objects gives a column of `values` (config values as JSON has
    them, NaN for absent): bool when all are bools, int64 when all are ints within its range,
    float64 when all are numbers (not bools), else object."""
    kinds = set()
    for v in values:
        if isinstance(v, bool):
            kinds.add("bool")
        elif isinstance(v, int):
            kinds.add("int" if _INT64[0] <= v <= _INT64[1] else "other")
        elif isinstance(v, float):
            kinds.add("float")
        else:
            kinds.add("other")
    if kinds == {"bool"}:
        return np.dtype(bool)
    if kinds == {"int"}:
        return np.dtype(np.int64)
    if kinds and kinds <= {"int", "float"}:
        return np.dtype(np.float64)
    return np.dtype(object)


class ReportFrame(pd.DataFrame):
    """The ablation table, one row per (variant, metric): exactly the numbers of `taectl report
    --json`. What the table controls, its banners, the frontier, a ladder's fit (`scale`, a
    ScaleFrame) and the JSON itself are attributes; to_latex() and to_markdown() are taed's own renderings (`taectl report --format
    latex|md`), and str() is `taectl report`'s table. Frames derived from it are plain
    DataFrames."""

    _metadata = ["json", "correction", "banners", "frontier", "view", "scale", "_texts"]

    @property
    def _constructor(self):
        return pd.DataFrame

    def _text(self, fmt):
        if fmt not in self._texts[1]:
            fetch = self._texts[0]
            self._texts[1][fmt] = fetch(fmt)
        return self._texts[1][fmt]

    def to_latex(self, *args, **kwargs):
        """taed's booktabs tabular, as `taectl report --format latex` prints it."""
        if args or kwargs:
            return pd.DataFrame(self).to_latex(*args, **kwargs)
        return self._text("latex")

    def to_markdown(self, *args, **kwargs):
        """taed's markdown table, as `taectl report --format md` prints it."""
        if args or kwargs:
            return pd.DataFrame(self).to_markdown(*args, **kwargs)
        return self._text("md")

    def text(self):
        """`taectl report`'s table, legend and banners."""
        return self._text("table")

    def __str__(self):
        return self.text()


_CELL_FIELDS = ["n", "mean", "std", "ci95", "best", "delta", "rel_delta", "delta_lo", "delta_hi",
                "delta_level", "p_value", "p_adjusted", "mark", "decision", "decision_n",
                "decision_final", "decision_futile", "decision_held", "detectable", "note",
                "margin", "diverged", "diverged_step", "level_kind", "level_value", "level_what"]


_SCALE_COLUMNS = ["point", "variant", "baseline", "rung", "params", "params_from", "overrides",
                  "n", "mean", "ci95", "delta", "delta_lo", "delta_hi", "decision", "mark",
                  "multiplier", "multiplier_lo", "multiplier_hi", "trend", "slope", "slope_lo",
                  "slope_hi", "crossing", "skipped_runs", "at_effect", "at_lo", "at_hi",
                  "at_refused"]


class ScaleFrame(pd.DataFrame):
    """A [scale] ladder's fit as taed computes it (`taectl report --scale --json`): one row per
    (grid point, variant, rung) with the rung's N, the variant's mean and its effect against the
    rung's baseline, and the variant's multiplier, trend and (with `at`) extrapolated effect
    repeated on each of its rows. `fits` is the JSON (one fit per grid point); `exponent` and
    `irreducible` the first fit's alpha and E as (value, lo, hi); str() is `taectl report
    --scale`'s text."""

    _metadata = ["fits", "exponent", "irreducible", "_text"]

    @property
    def _constructor(self):
        return pd.DataFrame

    def text(self):
        """`taectl report --scale`'s text."""
        return self._text()

    def __str__(self):
        return self.text()


def _estimate(e):
    e = e or {}
    lo, hi = e.get("ci95") or (None, None)
    return _num(e.get("value")), _num(lo), _num(hi)


def _num(x):
    return np.nan if x is None else float(x)


def scale_frame(fits, text):
    if isinstance(fits, dict):
        fits = [fits]
    rows = []
    for fit in fits:
        rungs = {r["rung"]: r for r in fit.get("rungs", [])}
        variants = fit.get("variants", [])
        for k, v in enumerate(variants):
            m, m_lo, m_hi = _estimate(v.get("multiplier"))
            b, b_lo, b_hi = _estimate(v.get("slope"))
            at = v.get("at") or {}
            a, a_lo, a_hi = _estimate(at.get("effect"))
            for e in v.get("rungs", []):
                rung = rungs.get(e["rung"], {})
                lo, hi = e.get("delta_ci") or (None, None)
                rows.append({
                    "point": fit.get("point"), "variant": v["variant"], "baseline": k == 0,
                    "rung": e["rung"], "params": _num(rung.get("params")),
                    "params_from": rung.get("params_from"), "overrides": rung.get("overrides"),
                    "n": e.get("n", 0), "mean": _num(e.get("mean")), "ci95": _num(e.get("ci95")),
                    "delta": _num(e.get("delta")), "delta_lo": _num(lo), "delta_hi": _num(hi),
                    "decision": e.get("decision"), "mark": e.get("mark"),
                    "multiplier": m, "multiplier_lo": m_lo, "multiplier_hi": m_hi,
                    "trend": v.get("trend"), "slope": b, "slope_lo": b_lo, "slope_hi": b_hi,
                    "crossing": _num(v.get("crossing")),
                    "skipped_runs": (v.get("skipped") or {}).get("runs", 0),
                    "at_effect": a, "at_lo": a_lo, "at_hi": a_hi,
                    "at_refused": at.get("refused")})
    frame = ScaleFrame(pd.DataFrame(rows, columns=_SCALE_COLUMNS))
    for column in ("rung", "n", "skipped_runs"):
        frame[column] = frame[column].astype("int64")
    frame.fits = fits
    first = fits[0] if fits else {}
    frame.exponent = _estimate(first.get("exponent"))
    frame.irreducible = _estimate(first.get("irreducible"))
    frame._text = text
    return frame


def report_frame(report, texts, scale_text=None):
    rows = []
    for row in report.get("rows", []):
        base = {"variant": row["variant"], "baseline": row["variant"] == report.get("baseline")}
        for key in ("ablation", "point_name", "point", "points", "candidates", "confirm_runs",
                    "confirm_pending"):
            if key in row:
                base[key] = row[key]
        for metric, cell in row.get("metrics", {}).items():
            r = dict(base)
            r["metric"] = metric
            for field in _CELL_FIELDS:
                r[field] = cell.get(field)
            interval = cell.get("delta_ci95")
            r["delta_lo"], r["delta_hi"] = (interval if interval else (None, None))
            level = cell.get("level") or {}
            r["level_kind"], r["level_value"], r["level_what"] = (
                level.get("kind"), level.get("value"), level.get("what"))
            for key in ("runs", "runs_total", "runs_pruned", "runs_failed", "seeds_identical",
                        "params", "flops_per_token", "tokens_per_s"):
                r[key] = row.get(key)
            rows.append(r)
    columns = ["variant", "metric", "baseline"] + [
        k for k in ("ablation", "point_name", "point", "points", "candidates", "confirm_runs",
                    "confirm_pending") if any(k in r for r in rows)] + _CELL_FIELDS + [
        "runs", "runs_total", "runs_pruned", "runs_failed", "seeds_identical", "params",
        "flops_per_token", "tokens_per_s"]
    frame = ReportFrame(pd.DataFrame(rows, columns=columns))
    for column in ("n", "runs", "runs_total", "runs_pruned", "runs_failed", "diverged"):
        frame[column] = frame[column].astype("int64")
    frame.json = report
    frame.correction = report.get("correction")
    frame.banners = report.get("banners", [])
    frame.frontier = report.get("frontier")
    frame.view = report.get("view")
    frame.scale = (scale_frame(report["scale"], scale_text)
                   if report.get("scale") is not None else None)
    frame._texts = (texts, {})
    return frame


class Experiment:
    """One experiment of a connection or a bundle (tae.connect().experiment("quickstart"))."""

    def __init__(self, source, record, cache=True):
        self._source = source
        self.record = record
        identity = source.cache_identity() if cache else None
        self._cache = SeriesCache(identity) if identity else None
        self._runs = None
        self._history = {}  # metric -> {run: (entry, page, index in the page)}

    @property
    def id(self):
        return self.record["id"]

    @property
    def name(self):
        return self.record["name"]

    @property
    def state(self):
        return self.record["state"]

    def __repr__(self):
        c = self.record.get("counts", {})
        return (f"<tae.Experiment e{self.id} {self.name!r} {self.state}: {c.get('succeeded', 0)}"
                f"/{c.get('total', 0)} runs succeeded>")

    # --- runs -------------------------------------------------------------------------------
    def _run_records(self, fresh=False):
        if self._runs is None or fresh:
            self._runs = self._source.runs(self.id)
        return self._runs

    def runs(self):
        """One row per run: run, variant (as taed names it, grid point included), ablation,
        baseline, seed, confirm, the grid point's keys, state, attempt, agent, last_step,
        created/started/finished (UTC), failed, diverged, every config key under its dotted name
        (typed as stored), and every final metric under its name."""
        table = self._run_records()
        baseline_name = "baseline"
        n = table["rows"]
        cols = table["columns"]
        none = [None] * n

        def field(name):
            return cols.get(name) or none

        # Each distinct config (a variant's, or a bundle run's own) is read once; the runs'
        # differences are laid over it.
        bases = table["configs"]
        ref = np.asarray(table["config_ref"], dtype=np.int64)
        config_keys = list(dict.fromkeys(k for b in bases for k in b))
        seen = set(config_keys)
        config_keys += [k for k in dict.fromkeys(k for _, k, _ in table["config_diff"])
                        if k not in seen]
        variants = field("variant")
        points = {v: _point_of(v) for v in dict.fromkeys(variants)}
        grid_keys = []
        first_of = {}
        for i, v in enumerate(variants):
            first_of.setdefault(v, i)
        for v, (_, point) in points.items():
            for short in point:
                key = _grid_key(short, bases[ref[first_of[v]]] if n else {})
                if key not in grid_keys:
                    grid_keys.append(key)
        diffs = {}
        for i, key, value in table["config_diff"]:
            diffs.setdefault(key, []).append((i, value))
        absent = {}
        for i, key in table["config_absent"]:
            absent.setdefault(key, []).append(i)
        config = {}
        for key in config_keys:
            per_base = [b.get(key, math.nan) for b in bases]
            changed = diffs.get(key, ())
            # Typed once from its few distinct values (as infer_objects would type the column),
            # then spread over the runs.
            dtype = _column_dtype(per_base + [v for _, v in changed] +
                                  ([math.nan] if key in absent else []))
            typed = np.empty(len(bases), dtype=dtype)
            for j, value in enumerate(per_base):  # one by one: a value may be a list
                typed[j] = value
            column = typed[ref] if n else np.empty(0, dtype=dtype)
            for i, value in changed:
                column[i] = value
            for i in absent.get(key, ()):
                column[i] = math.nan
            config[key] = column

        def times(name):
            # To the nanosecond as pd.Timestamp(seconds, unit="s") has it: whole seconds, then
            # the fraction rounded to 9 places.
            ns = np.array([_NAT if t in (None, 0) else
                           int(t) * 1_000_000_000 + int(round(t - int(t), 9) * 1e9)
                           for t in field(name)], dtype=np.int64)
            return pd.to_datetime(ns, unit="ns", utc=True)

        states = field("state")
        ablations = [points[v][0] for v in variants]
        finals = table["final_metrics"]
        final = {k: np.array([math.nan if x is None else x for x in values], dtype=np.float64)
                 for k, values in finals.items()}
        # Diverged: a final metric taed sends as null (NaN or inf; one a run lacks is left out).
        diverged = np.zeros(n, dtype=bool)
        for row, _ in table["final_null"]:
            diverged[row] = True
        data = {
            "run": np.asarray(field("id"), dtype=np.int64),
            "variant": variants,
            "ablation": ablations,
            "baseline": np.array([a == baseline_name for a in ablations], dtype=bool),
            "seed": field("seed"),
            "confirm": np.array([bool(c) for c in field("confirm")], dtype=bool),
        }
        for key in grid_keys:
            data[key] = config[key]
        data.update({
            "state": states,
            "attempt": field("attempt"),
            "agent": field("agent"),
            "last_step": [x or 0 for x in field("last_step")],
            "created_at": times("created_at"),
            "started_at": times("started_at"),
            "finished_at": times("finished_at"),
            "failed": np.array([x == "failed" for x in states], dtype=bool),
            "diverged": diverged,
            "reason": [x or "" for x in field("reason")],
        })
        for key in config_keys:
            if key not in data:
                data[key] = config[key]
        for key in finals:  # a final metric whose name a column has already is "final:NAME"
            data["final:" + key if key in data else key] = final[key]
        # Object columns typed by what they hold, all in one pass (as Series.infer_objects would
        # each: numbers, bools, strings and mixed columns stay what they are).
        return pd.DataFrame(data, columns=list(data)).infer_objects()

    # --- history ------------------------------------------------------------------------------
    def metrics(self):
        """The metric names some run of the experiment has."""
        return list(self._source.metrics(self.id)["metrics"])

    def _series(self, metric, refresh=False):
        """{run: (entry, page, k)} of every run with points of `metric` (the k-th run of a
        _columns.Page): ended runs from memory or the local cache, the others (and new runs)
        from taed."""
        return self._fetch(metric, refresh)[0]

    def _fetch(self, metric, refresh=False, fill=False):
        """(_series's answer, a _Filling of every run's columns where `fill` and every run came
        from taed in this call (a first read), else None)."""
        have = self._history.get(metric)
        if have is None:
            have = self._cache.load(self.record, metric) if self._cache else {}
        keep = {}
        wanted = None  # every run: what a first read asks, without listing the runs first
        if have:
            table = self._run_records(fresh=refresh)
            cols = table["columns"]
            records = {run: (state, attempt) for run, state, attempt in
                       zip(cols.get("id") or [], cols.get("state") or [],
                           cols.get("attempt") or [])}
            # A kept series stays valid while its run is final at the same attempt.
            keep = {run: v for run, v in have.items() if run in records and
                    records[run][0] in _FINAL and v[0].get("final") and
                    v[0].get("attempt") == records[run][1]}
            wanted = [run for run in records if run not in keep]
            if len(wanted) == len(records):
                wanted = None
        fetched = {}
        filling = _Filling() if fill and wanted is None and not keep else None
        if wanted is None or wanted:
            chosen = None if wanted is None else set(wanted)
            for page in self._source.history(self.id, metric, wanted):
                for k, entry in enumerate(page.runs):
                    if entry["count"] > 0 and (chosen is None or entry["run"] in chosen):
                        fetched[entry["run"]] = (entry, page, k)
                if filling is not None:
                    filling.add(page)  # while the next page is on its way
        series = dict(keep)
        series.update(fetched)
        self._history[metric] = series
        if self._cache is not None:
            finals = {run: v for run, v in series.items() if v[0].get("final")}
            if set(finals) - set(keep):
                self._cache.store(self.record, metric, finals)
        return series, filling

    def history(self, metrics=None, runs=None, x="step"):
        """Every stored point, never sampled, in long form: run, step, metric, value, wall_time,
        tokens (step x tokens per step where the run's config says, else NaN); joinable to
        runs() on `run`. metrics: a name or a list (default: every metric); runs: run ids."""
        if x not in ("step", "tokens", "wall"):
            raise BadRequest(f"x: '{x}' is not one of step, tokens, wall")
        if metrics is None:
            metrics = self.metrics()
        elif isinstance(metrics, str):
            metrics = [metrics]
        known = set(self.metrics())
        for metric in metrics:
            if metric not in known:
                raise NotFound(f"e{self.id} has no points of '{metric}' (its metrics: "
                               f"{', '.join(sorted(known)) or 'none yet'})")
        wanted = None if runs is None else set(int(r) for r in runs)
        parts = []
        for metric in metrics:
            series, filling = self._fetch(metric, fill=True)
            ids = sorted(r for r in series if wanted is None or r in wanted)
            if not ids:
                continue
            filled = filling.columns(ids) if filling is not None else None
            if filled is None:
                total = sum(series[r][0]["count"] for r in ids)
                steps, values, walls = _decode_runs([series[r] for r in ids], total)
                run, tokens = np.empty(total, dtype=np.int64), np.empty(total)
                _runs_and_tokens([series[r][0] for r in ids], steps, run, tokens)
            else:
                run, steps, values, walls, tokens = filled
            parts.append(pd.DataFrame({
                "run": run,
                "step": steps,
                "metric": pd.Categorical.from_codes(np.zeros(len(steps), dtype=np.int8),
                                                    [metric]),
                "value": values,
                "wall_time": walls,
                "tokens": tokens,
            }, copy=False))  # the arrays just decoded are the frame's own: no second copy
        if not parts:
            return pd.DataFrame({"run": pd.Series(dtype="int64"),
                                 "step": pd.Series(dtype="int64"),
                                 "metric": pd.Series(dtype="object"),
                                 "value": pd.Series(dtype="float64"),
                                 "wall_time": pd.Series(dtype="float64"),
                                 "tokens": pd.Series(dtype="float64")})
        if len(parts) == 1:
            return parts[0]
        frame = pd.concat(parts, ignore_index=True)
        frame["metric"] = frame["metric"].astype("category")
        return frame

    # --- the table ----------------------------------------------------------------------------
    def report(self, metrics=None, baseline=None, sort=None, view=None, frontier=None, cost=None,
               scale=False, at=None):
        """The ablation table as taed computes it (`taectl report --json`), one row per
        (variant, metric); see ReportFrame. view: "tuned" | "grid"; frontier: a bar such as
        "eval/acc>=0.99"; cost: params | flops | tokens_per_s. scale=True (a [scale] ladder):
        the fit across sizes as `.scale`, a ScaleFrame (`taectl report --scale`); at: a size N
        to extrapolate each effect to."""
        if at is not None and not scale:
            raise BadRequest("at: the size the scale fit extrapolates to; pass scale=True")
        params = {"metrics": ",".join(metrics) if isinstance(metrics, (list, tuple)) else metrics,
                  "baseline": baseline, "sort": sort, "view": view, "frontier": frontier,
                  "cost": cost, "scale": "1" if scale else None,
                  "at": None if at is None else repr(float(at))}
        params = {k: v for k, v in params.items() if v not in (None, "")}
        report = self._source.report(self.id, params)
        # The table's own renderings are the plain report's; the ladder's text is --scale's.
        plain = {k: v for k, v in params.items() if k not in ("scale", "at")}
        return report_frame(report,
                            lambda fmt: self._source.report_text(self.id, fmt, plain),
                            lambda: self._source.report_text(self.id, "table", params))

    # --- curves -------------------------------------------------------------------------------
    def curves(self, metric=None, x="step", smooth=None, variants=None, delta=False,
               baseline=None):
        """The bands the dashboard draws: per variant and x, the mean over seeds with its 95% CI,
        min, max and n (long form: x, variant, n, mean, lo, hi, min, max)."""
        params = {"metric": metric, "x": None if x == "step" else x,
                  "smooth": None if not smooth else smooth,
                  "variants": ",".join(variants) if variants else None,
                  "delta": "1" if delta else None, "baseline": baseline}
        params = {k: v for k, v in params.items() if v not in (None, "")}
        data = self._source.curves(self.id, params)
        xs = data.get("x", [])
        parts = []
        for band in data.get("variants", []):
            part = {"x": xs, "variant": band["variant"]}
            for key in ("n", "mean", "lo", "hi", "min", "max"):
                values = band.get(key) or [None] * len(xs)
                part[key] = [np.nan if v is None else v for v in values]
            parts.append(pd.DataFrame(part))
        frame = (pd.concat(parts, ignore_index=True) if parts else
                 pd.DataFrame(columns=["x", "variant", "n", "mean", "lo", "hi", "min", "max"]))
        frame.attrs["metric"] = data.get("metric", metric)
        frame.attrs["x"] = x
        return frame

    def plot(self, metric=None, ax=None, x="step", smooth=None, variants=None, delta=False,
             logy=False):
        """Draws curves() with matplotlib: a line per variant and its 95% band. Returns the
        axes."""
        import matplotlib.pyplot as plt
        frame = self.curves(metric, x=x, smooth=smooth, variants=variants, delta=delta)
        if ax is None:
            _, ax = plt.subplots(figsize=(7, 4))
        for variant, band in frame.groupby("variant", sort=False):
            band = band.dropna(subset=["mean"])
            line, = ax.plot(band["x"], band["mean"], label=variant, linewidth=1.5)
            ax.fill_between(band["x"], band["lo"], band["hi"], color=line.get_color(),
                            alpha=0.2, linewidth=0)
        ax.set_xlabel(x)
        ax.set_ylabel(("Δ " if delta else "") + str(frame.attrs.get("metric") or metric))
        if logy:
            ax.set_yscale("log")
        ax.legend(fontsize="small")
        ax.set_title(f"{self.name} (e{self.id})")
        return ax

    # --- live use -----------------------------------------------------------------------------
    def refresh(self):
        """Fetches what is new: the experiment's state and runs, and the points of the metrics
        already read (ended runs' series are kept, never fetched again)."""
        self.record = self._source.experiment(self.id)
        self._run_records(fresh=True)
        for metric in list(self._history):
            self._series(metric)
        return self

    def wait(self, progress=True, timeout=None, poll=2.0):
        """Waits until every run is final; progress: a line on stderr as counts change."""
        start = time.monotonic()
        last = None
        while True:
            self.record = self._source.experiment(self.id)
            c = self.record.get("counts", {})
            line = (f"e{self.id} {self.name}: {self.record['state']}, {c.get('succeeded', 0)} "
                    f"succeeded, {c.get('running', 0)} running, {c.get('queued', 0)} queued, "
                    f"{c.get('failed', 0)} failed of {c.get('total', 0)}")
            if progress and line != last:
                print(line, file=sys.stderr, flush=True)
                last = line
            final = sum(c.get(k, 0) for k in ("succeeded", "failed", "cancelled", "pruned"))
            if c.get("total", 0) > 0 and final >= c.get("total", 0):
                self._runs = None
                return self
            if timeout is not None and time.monotonic() - start > timeout:
                raise TimeoutError(f"e{self.id} still has runs going after {timeout:.0f} s")
            time.sleep(poll)


def _decode_runs(chosen, points):
    """(steps, values, walls) of the runs `chosen` ([(entry, page, k)], in order), `points` in
    all, decoded straight into new arrays: the runs that follow each other in one page as one
    span (a running sum over it), never a copy of a whole column twice."""
    steps = np.empty(points, dtype=np.int64)
    values = np.empty(points, dtype=np.float64)
    walls = np.empty(points, dtype=np.float64)
    at, i = 0, 0
    while i < len(chosen):
        _, page, lo = chosen[i]
        hi, j = lo + 1, i + 1
        # The next run continues the span if it is in the same page with no points between.
        while j < len(chosen) and chosen[j][1] is page and chosen[j][2] >= hi and \
                page.starts[chosen[j][2]] == page.starts[hi]:
            hi, j = chosen[j][2] + 1, j + 1
        n = int(page.starts[hi] - page.starts[lo])
        page.decode_runs(lo, hi, steps[at:at + n], values[at:at + n], walls[at:at + n])
        at, i = at + n, j
    return steps, values, walls


def _runs_and_tokens(entries, steps, run, tokens):
    """Fills `run` with each point's run id and `tokens` with step x the run's tokens per step
    (NaN where its config does not say) for the runs `entries` (their header entries, in order)
    whose points' steps are `steps`."""
    counts = np.array([e["count"] for e in entries], dtype=np.int64)
    run[:] = np.repeat(np.array([e["run"] for e in entries], dtype=np.int64), counts)
    per_run = np.array([e.get("tokens_per_step") or np.nan for e in entries], dtype=np.float64)
    if np.isnan(per_run).all():
        tokens.fill(np.nan)  # none known: no repeat, no product
    else:
        tokens[:] = np.repeat(per_run, counts)
        tokens *= steps


class _Filling:
    """A first read's frame columns (run, step, value, wall_time, tokens), filled page by page
    as the pages come, while the next is on its way (taed's first page says how many points all
    of them hold: "remaining_points"); given up, for _decode_runs to do afterwards, where a page
    does not fit."""

    def __init__(self):
        self.ids, self.arrays, self.at, self.ok = [], None, 0, True

    def add(self, page):
        if not self.ok:
            return
        if self.arrays is None:
            total = page.header.get("remaining_points")
            if not isinstance(total, int) or total < page.points:
                self.ok = False
                return
            self.arrays = (np.empty(total, dtype=np.int64), np.empty(total, dtype=np.int64),
                           np.empty(total, dtype=np.float64), np.empty(total, dtype=np.float64),
                           np.empty(total, dtype=np.float64))
        n = page.points
        if self.at + n > len(self.arrays[0]):
            self.ok = False
            return
        run, steps, values, walls, tokens = (a[self.at:self.at + n] for a in self.arrays)
        page.decode_runs(0, len(page.runs), steps, values, walls)
        entries = [entry for entry in page.runs if entry["count"] > 0]
        _runs_and_tokens(entries, steps, run, tokens)
        self.ids.extend(entry["run"] for entry in entries)
        self.at += n

    def columns(self, ids):
        """(run, steps, values, walls, tokens) when they are exactly the runs `ids`' in order,
        else None."""
        if not self.ok or self.arrays is None or self.at != len(self.arrays[0]) or \
                self.ids != ids:
            return None
        arrays, self.arrays = self.arrays, None  # the frame's own from here on
        return arrays
