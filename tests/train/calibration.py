#!/usr/bin/python3
"""Calibration: each task's baseline and defining ablation, trained by both engines over seeds.

    calibration.py TAE_TRAIN PYTHON_DIR [--tasks copy,induction,...] [--seeds 0,1,2] [--jobs 2]
                   [--check] [--markdown]

Runs tae-train with train.engine = "libtorch" and = "torch" (which tae-train starts in its
place) at the same settings, one thread per run, and prints final eval/acc per (task, variant,
engine) over the seeds. With --check it exits 1 unless, for every row, the two engines' mean
eval/acc differ by no more than the seeds' spread (the larger of the two engines' max - min
over seeds, at least ACC_FLOOR). docs/tasks.md's "Calibration" table is this script's
--markdown output; ctest runs the copy row with --check.
"""

import argparse
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor

ACC_FLOOR = 0.02  # accuracies that all sit at 1.0 (or at chance) still differ by rounding

BASE = {
    "model.layers": 2, "model.d_model": 64, "model.heads": 4, "model.kv_heads": 0,
    "model.head_dim": 0, "model.ffn_mult": 4, "model.activation": "gelu",
    "model.norm": "layernorm", "model.norm_position": "pre", "model.pos_encoding": "learned",
    "model.residual": True, "model.causal": True, "model.drop_attention_layers": [],
    "model.drop_ffn_layers": [], "model.prune_heads": {}, "model.tie_embeddings": False,
    "model.bias": True, "model.dropout": 0.0, "model.init": "gpt2",
    "train.task": "copy", "train.data": "", "train.vocab": 16, "train.seq_len": 32,
    "train.batch_size": 32, "train.steps": 500, "train.optimizer": "adamw", "train.lr": 3e-3,
    "train.schedule": "cosine", "train.warmup": 50, "train.weight_decay": 0.0,
    "train.grad_clip": 1.0, "train.eval_every": 100000, "train.eval_batches": 8,
    "train.checkpoint_every": 0, "train.head_importance": False, "train.threads": 1,
    "train.seed": 0, "train.engine": "libtorch",
}

# task -> (settings, baseline name, (ablation name, overrides)): the ablation that defines what
# the task tests (docs/tasks.md).
INDUCTION = {"train.task": "induction", "train.vocab": 32, "train.seq_len": 64,
             "model.drop_ffn_layers": [0, 1], "train.lr": 1e-3, "train.steps": 1500}
ROWS = {
    "copy": ({"train.task": "copy", "train.steps": 300}, "baseline",
             ("no-attention", {"model.drop_attention_layers": [0, 1]})),
    "reverse": ({"train.task": "reverse", "train.steps": 300}, "baseline",
                ("no-pos", {"model.pos_encoding": "none"})),
    "sort": ({"train.task": "sort", "train.steps": 500}, "baseline",
             ("no-pos", {"model.pos_encoding": "none"})),
    "assoc_recall": ({"train.task": "assoc_recall", "train.vocab": 4, "train.seq_len": 8,
                      "train.steps": 1000, "train.lr": 1e-3}, "baseline",
                     ("no-attention", {"model.drop_attention_layers": [0, 1]})),
    "induction": (INDUCTION, "2 layers, attention only",
                  ("1 layer", {"model.layers": 1, "model.drop_ffn_layers": [0]})),
    "mod_add": ({"train.task": "mod_add", "train.steps": 1000}, "learned positions",
                ("rope", {"model.pos_encoding": "rope"})),
    "lm": ({"train.task": "lm", "train.steps": 300}, "baseline",
           ("no-attention", {"model.drop_attention_layers": [0, 1]})),
}


def run_one(tae_train, python_dir, spec, work):
    fd, path = tempfile.mkstemp(suffix=".json", dir=work)
    with os.fdopen(fd, "w") as f:
        json.dump(spec, f)
    env = dict(os.environ, TAE_THREADS="1")
    env.pop("TAE_METRICS_FD", None)
    env["PYTHONPATH"] = python_dir
    env.setdefault("TAE_PYTHON", sys.executable)
    done = subprocess.run([tae_train, "--spec", path, "--no-checkpoint"], stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, env=env, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{spec['train.engine']} {spec['train.task']} seed "
                           f"{spec['train.seed']}: exit {done.returncode}\n{done.stdout[-3000:]}")
    final = {}
    for line in done.stdout.splitlines():
        if line.startswith("{\"step\""):
            record = json.loads(line)
            if "eval/acc" in record:
                final = record
    return final


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("tae_train")
    parser.add_argument("python_dir")
    parser.add_argument("--tasks", default=",".join(ROWS))
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--check", action="store_true")
    parser.add_argument("--markdown", action="store_true")
    args = parser.parse_args()
    if importlib.util.find_spec("torch") is None:
        print("skipped: this python3 cannot import torch (apt-get install python3-torch)")
        return 77
    tasks = args.tasks.split(",")
    seeds = [int(s) for s in args.seeds.split(",")]
    jobs = []
    for task in tasks:
        settings, base_name, (ablation_name, overrides) = ROWS[task]
        for variant, extra in ((base_name, {}), (ablation_name, overrides)):
            for engine in ("libtorch", "torch"):
                for seed in seeds:
                    spec = {**BASE, **settings, **extra}
                    spec["train.engine"] = engine
                    spec["train.seed"] = seed
                    jobs.append(((task, variant, engine, seed), spec))
    results = {}
    with tempfile.TemporaryDirectory(prefix="tae-calibration-") as work, \
            ThreadPoolExecutor(max_workers=args.jobs) as pool:
        futures = {key: pool.submit(run_one, args.tae_train, args.python_dir, spec, work)
                   for key, spec in jobs}
        for key, future in futures.items():
            results[key] = future.result()
            print(f"  {key}: eval/acc {results[key].get('eval/acc', float('nan')):.3f}",
                  file=sys.stderr, flush=True)
    failures = []
    lines = ["| task | variant | tae-train eval/acc (seeds " + ", ".join(map(str, seeds)) +
             ") | torch engine eval/acc | gap of means | seeds' spread |",
             "|---|---|---|---|---|---|"]
    for task in tasks:
        settings, base_name, (ablation_name, _) = ROWS[task]
        for variant in (base_name, ablation_name):
            accs = {e: [results[(task, variant, e, s)]["eval/acc"] for s in seeds]
                    for e in ("libtorch", "torch")}
            gap = abs(statistics.mean(accs["libtorch"]) - statistics.mean(accs["torch"]))
            spread = max(max(a) - min(a) for a in accs.values())
            allowed = max(spread, ACC_FLOOR)
            ok = gap <= allowed
            if not ok:
                failures.append(f"{task} / {variant}: gap {gap:.3f} > spread {allowed:.3f}")
            lines.append(f"| {task} | {variant} | "
                         + " / ".join(f"{a:.3f}" for a in accs["libtorch"]) + " | "
                         + " / ".join(f"{a:.3f}" for a in accs["torch"])
                         + f" | {gap:.3f} | {spread:.3f} |")
    print("\n".join(lines))
    for failure in failures:
        print(f"FAIL {failure}")
    return 1 if args.check and failures else 0


if __name__ == "__main__":
    sys.exit(main())
