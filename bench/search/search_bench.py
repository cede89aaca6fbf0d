"""ASHA against the full grid through a real taed; see bench/search_bench.sh."""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

TRAIN_GRID = """name = "asha-train"
[model]
d_model = 32
layers = 1
heads = 2
[train]
task = "copy"
steps = 240
warmup = 5
eval_every = 10
eval_batches = 2
batch_size = 16
seq_len = 16
threads = 1
seeds = [0, 1]
[[ablation]]
name = "rmsnorm"
"model.norm" = "rmsnorm"
[grid]
"train.lr" = [0.01, 0.3, 0.001, 0.1, 0.0003, 0.03, 0.003, 1.0, 0.0001]
[search]
method = "asha"
metric = "eval/loss"
min_steps = 10
reduction = 3
"""

JOB = """import math, sys, time
lr, offset, seed = float(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3])
for step in range(1, 151):
    loss = (math.log10(lr) + 2) ** 2 + offset + 3 / math.sqrt(step) + seed / 1000
    print(f"step={step} loss={loss:.6f}", flush=True)
    time.sleep(0.02)
"""

JOB_GRID = """name = "asha-job"
[train]
seeds = [0, 1]
[params]
offset = 0.0
[[ablation]]
name = "worse"
"params.offset" = 0.5
[grid]
"train.lr" = [0.01, 1.0, 0.0001, 0.03, 0.0003, 0.3, 0.001, 0.003, 0.1]
[search]
method = "asha"
metric = "loss"
min_steps = 4
reduction = 3
[job]
code = "src"
command = "/usr/bin/python3 sweep.py {train.lr} {params.offset} {train.seed}"
"""


def taectl(args, home, binary):
    out = subprocess.run([os.path.join(binary, "taectl"), "--home", home] + args,
                         capture_output=True, text=True, timeout=1800)
    if out.returncode != 0:
        sys.exit(f"search_bench: taectl {' '.join(args)} failed: {out.stderr.strip()}")
    return out.stdout


def chosen(runs, metric):
    points = {}
    for run in runs:
        points.setdefault(run["variant"], []).append(run)
    best = {}
    for point, rs in points.items():
        if any(r["state"] != "succeeded" for r in rs):
            continue
        mean = sum(r["final_metrics"][metric] for r in rs) / len(rs)
        variant = point.split("[")[0]
        if variant not in best or mean < best[variant][0]:
            best[variant] = (mean, point)
    return {v: p for v, (_, p) in best.items()}


def one(name, spec, metric, steps, home, binary, files):
    work = tempfile.mkdtemp(prefix=f"tae-search-bench-{name}-")
    for path, text in files.items():
        os.makedirs(os.path.dirname(os.path.join(work, path)), exist_ok=True)
        with open(os.path.join(work, path), "w") as f:
            f.write(text)
    path = os.path.join(work, "study.toml")
    with open(path, "w") as f:
        f.write(spec)
    result = {}
    for method in ("asha", "grid"):
        started = time.time()
        submitted = json.loads(taectl(["submit", path, "--set", f"search.method={method}",
                                       "--wait", "--json"], home, binary))
        exp = str(submitted["experiment"])
        runs = json.loads(taectl(["runs", exp, "--json"], home, binary))
        result[method] = {
            "seconds": time.time() - started,
            "steps": sum(r["last_step"] for r in runs),
            "full": steps * len(runs),
            "pruned": sum(r["state"] == "pruned" for r in runs),
            "runs": len(runs),
            "chosen": chosen(runs, metric),
        }
    a, g = result["asha"], result["grid"]
    print(f"\n{name}: {a['runs']} runs, {metric}")
    print(f"  steps      asha {a['steps']:>6} of {a['full']} ({100 * a['steps'] / a['full']:.0f}%), "
          f"grid {g['steps']:>6}; wall asha {a['seconds']:.0f}s, grid {g['seconds']:.0f}s")
    print(f"  pruned     {a['pruned']} of {a['runs']} runs")
    for variant in sorted(set(a["chosen"]) | set(g["chosen"])):
        same = a["chosen"].get(variant) == g["chosen"].get(variant)
        print(f"  chosen     {variant}: asha {a['chosen'].get(variant)}, grid {g['chosen'].get(variant)}"
              f" -> {'same' if same else 'DIFFERENT'}")
    return result


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--bin", required=True)
    parser.add_argument("--only", choices=["train", "job"])
    args = parser.parse_args()
    binary = os.path.abspath(args.bin)
    home = tempfile.mkdtemp(prefix="tae-search-bench-home-")
    taectl(["up", "--agents", "1", "--slots", "2"], home, binary)
    try:
        if args.only in (None, "train"):
            one("tae-train copy grid (9 lr x 2 variants x 2 seeds, 240 steps)", TRAIN_GRID,
                "eval/loss", 240, home, binary, {})
        if args.only in (None, "job"):
            one("command job sweep (9 lr x 2 variants x 2 seeds, 150 steps)", JOB_GRID, "loss",
                150, home, binary, {"src/sweep.py": JOB})
    finally:
        subprocess.run([os.path.join(binary, "taectl"), "--home", home, "down"],
                       capture_output=True, timeout=120)


if __name__ == "__main__":
    main()
