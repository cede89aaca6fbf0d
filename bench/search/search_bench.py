"""ASHA against the full grid through a real taed; see bench/search_bench.sh."""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

TRAIN_GRID = """name = "asha-train-{steps}"
[model]
d_model = 32
layers = 1
heads = 2
[train]
task = "lm"
steps = {steps}
warmup = 5
eval_every = {min_steps}
eval_batches = 4
batch_size = 16
seq_len = 32
threads = 1
seeds = [0, 1]
[[ablation]]
name = "rmsnorm"
"model.norm" = "rmsnorm"
[grid]
"train.lr" = {lrs}
[search]
method = "asha"
metric = "eval/loss"
min_steps = {min_steps}
reduction = 3
"""

# (steps, min_steps): rungs at min_steps * 3^k up to steps.
TRAIN_LENGTHS = [(405, 15), (810, 10)]

# The learning rates in the order a coarse-to-fine sweep lists them, and as most files list them:
# ascending (quality improves along the list up to the best, then 1.0 diverges) and descending.
LRS = [0.01, 0.3, 0.001, 0.1, 0.0003, 0.03, 0.003, 1.0, 0.0001]
ORDERS = {"mixed": LRS, "sorted": sorted(LRS), "reversed": sorted(LRS, reverse=True)}

# The command-job grid is tests/integration/search_test.cc's sweep.
JOB_GRID = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "data",
                        "asha_sweep", "sweep.toml")


def taectl(args, home, binary):
    out = subprocess.run([os.path.join(binary, "taectl"), "--home", home] + args,
                         capture_output=True, text=True, timeout=1800)
    if out.returncode != 0:
        sys.exit(f"search_bench: taectl {' '.join(args)} failed: {out.stderr.strip()}")
    return out.stdout


def means(runs, metric):
    """Each grid point's mean final value over its seeds, where every seed succeeded with one
    (a diverged seed's final value is null)."""
    points = {}
    for run in runs:
        points.setdefault(run["variant"], []).append(run)
    out = {}
    for point, rs in points.items():
        values = [(r.get("final_metrics") or {}).get(metric) for r in rs]
        if any(r["state"] != "succeeded" for r in rs) or any(v is None for v in values):
            continue
        out[point] = sum(values) / len(values)
    return out


def chosen(runs, metric):
    best = {}
    for point, mean in means(runs, metric).items():
        variant = point.split("[")[0]
        if variant not in best or mean < best[variant][0]:
            best[variant] = (mean, point)
    return {v: p for v, (_, p) in best.items()}


def one(name, path, metric, steps, home, binary, sets=()):
    result = {}
    for method in ("asha", "grid"):
        started = time.time()
        extra = [arg for kv in sets for arg in ("--set", kv)]
        submitted = json.loads(taectl(["submit", path, "--set", f"search.method={method}"] +
                                      extra + ["--wait", "--json"], home, binary))
        exp = str(submitted["experiment"])
        runs = json.loads(taectl(["runs", exp, "--json"], home, binary))
        result[method] = {
            "seconds": time.time() - started,
            "steps": sum(r["last_step"] for r in runs),
            "full": steps * len(runs),
            "pruned": sum(r["state"] == "pruned" for r in runs),
            "runs": len(runs),
            "chosen": chosen(runs, metric),
            "means": means(runs, metric),
        }
    a, g = result["asha"], result["grid"]
    print(f"\n{name}: {a['runs']} runs, {metric}")
    print(f"  steps      asha {a['steps']:>6} of {a['full']} ({100 * a['steps'] / a['full']:.0f}%), "
          f"grid {g['steps']:>6}; wall asha {a['seconds']:.0f}s, grid {g['seconds']:.0f}s")
    print(f"  pruned     {a['pruned']} of {a['runs']} runs")
    worst_gap = 0.0
    for variant in sorted(set(a["chosen"]) | set(g["chosen"])):
        same = a["chosen"].get(variant) == g["chosen"].get(variant)
        # How far the point asha chose is from the full grid's best, both as the full grid
        # measured them (its own seeds ran to the end there).
        mine = g["means"].get(a["chosen"].get(variant))
        best = g["means"].get(g["chosen"].get(variant))
        gap = (mine - best) / abs(best) if mine is not None and best else float("inf")
        worst_gap = max(worst_gap, gap)
        print(f"  chosen     {variant}: asha {a['chosen'].get(variant)}, grid {g['chosen'].get(variant)}"
              f" -> {'same' if same else 'DIFFERENT'}; within {100 * gap:.1f}% of the grid's best")
    share = a["steps"] / a["full"]
    print(f"  verdict    {100 * share:.0f}% of the steps (bar 50%), every variant within "
          f"{100 * worst_gap:.1f}% of the grid's best (bar 10%): "
          f"{'PASS' if share <= 0.5 and worst_gap <= 0.10 else 'MISS'}")
    return result


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--bin", required=True)
    parser.add_argument("--only", choices=["train", "job"])
    parser.add_argument("--steps", type=int, choices=[s for s, _ in TRAIN_LENGTHS],
                        help="only the tae-train grid of this length")
    parser.add_argument("--order", choices=list(ORDERS),
                        help="only the tae-train grids listed in this order (405 steps for "
                             "sorted and reversed)")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="passed to both submits, e.g. search.bootstrap=1 (a design to "
                             "compare)")
    args = parser.parse_args()
    binary = os.path.abspath(args.bin)
    home = tempfile.mkdtemp(prefix="tae-search-bench-home-")
    taectl(["up", "--agents", "1", "--slots", "2"], home, binary)
    try:
        if args.only in (None, "train"):
            grids = [("mixed", steps, min_steps) for steps, min_steps in TRAIN_LENGTHS]
            grids += [(order, *TRAIN_LENGTHS[0]) for order in ("sorted", "reversed")]
            for order, steps, min_steps in grids:
                if (args.steps and steps != args.steps) or (args.order and order != args.order):
                    continue
                train_grid = os.path.join(tempfile.mkdtemp(prefix="tae-search-bench-"), "study.toml")
                with open(train_grid, "w") as f:
                    f.write(TRAIN_GRID.format(steps=steps, min_steps=min_steps,
                                              lrs=json.dumps(ORDERS[order])))
                one(f"tae-train lm grid, lr listed {order} (9 lr x 2 variants x 2 seeds, {steps} "
                    f"steps, min_steps {min_steps})", train_grid, "eval/loss", steps, home, binary,
                    args.set)
        if args.only in (None, "job"):
            one("command job sweep (9 lr x 2 variants x 2 seeds, 150 steps)", JOB_GRID, "loss",
                150, home, binary, args.set)
    finally:
        subprocess.run([os.path.join(binary, "taectl"), "--home", home, "down"],
                       capture_output=True, timeout=120)


if __name__ == "__main__":
    main()
