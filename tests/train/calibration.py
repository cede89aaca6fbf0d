#!/usr/bin/python3
"""Calibration: each task's baseline and defining ablations, tae-train next to a second model.

    calibration.py TAE_TRAIN PYTHON_DIR [--against reference|torch] [--tasks copy,induction,...]
                   [--variants baseline,1-layer,...] [--seeds 0,1,2] [--jobs 2]
                   [--old-init TASKS] [--check] [--markdown]

Trains every (task, variant, seed) with tae-train (train.engine = "libtorch", the default
model.init) and with the model it is checked against, one thread per run, and prints final
eval/acc per row over the seeds:

- --against reference (the default): tests/train/independent_reference.py, a plain PyTorch
  model with PyTorch's default initialisation and data generators of its own, written from
  docs/tasks.md without tae-train's or tae_torch's code. It cannot share their mistakes.
- --against torch: the PyTorch engine (train.engine = "torch", agent/python/tae_torch), tae-train's
  step-exact port: same initial weights, same batches.

--old-init TASKS adds a column of tae-train with model.init = "gpt2" (the default before
"torch") for those tasks' baselines. With --check it exits 1 unless, for every row, the two models' mean
eval/acc differ by no more than the seeds' spread (the larger of the two models' max - min over
seeds, at least ACC_FLOOR) and each model's mean sits within the row's bounds (what the task is
documented to show: e.g. assoc_recall's 2 layers >= 0.9, 1 layer <= 0.4). docs/tasks.md's
"Calibration" table is this script's --markdown output; ctest checks the copy row against the
torch engine and assoc_recall's baseline and 1-layer rows against the reference.
"""

import argparse
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

ACC_FLOOR = 0.02  # accuracies that all sit at 1.0 (or at chance) still differ by rounding
REFERENCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "independent_reference.py")

# What every run here changes from the defaults: one thread, one evaluation (at the end; it does
# not change the trajectory), no checkpoints.
FIXED = {"train.threads": 1, "train.eval_every": 100000, "train.checkpoint_every": 0}

NO_ATTENTION = {"model.drop_attention_layers": [0, 1]}
# task -> (settings, [(variant, overrides, (lowest, highest) mean eval/acc or None)]): the
# baseline first, then the ablations that define what the task tests (docs/tasks.md), at the
# task's documented sizes (vocab 16, seq_len 32, 2 layers, d_model 64 unless its section says).
ROWS = {
    "copy": ({"train.task": "copy", "train.steps": 300},
             [("baseline", {}, (0.99, 1.0)), ("no-attention", NO_ATTENTION, (0.0, 0.1))]),
    "reverse": ({"train.task": "reverse", "train.steps": 300},
                [("baseline", {}, (0.99, 1.0)), ("no-pos", {"model.pos_encoding": "none"},
                                                 (0.0, 0.4))]),
    "sort": ({"train.task": "sort", "train.steps": 500},
             [("baseline", {}, (0.95, 1.0)), ("no-pos", {"model.pos_encoding": "none"}, None)]),
    "assoc_recall": ({"train.task": "assoc_recall", "train.steps": 2000, "train.lr": 1e-3},
                     [("baseline", {}, (0.9, 1.0)), ("1-layer", {"model.layers": 1}, (0.0, 0.4)),
                      ("no-attention", NO_ATTENTION, (0.0, 0.2))]),
    "induction": ({"train.task": "induction", "train.steps": 1000},
                  [("baseline", {}, (0.8, 1.0)), ("1-layer", {"model.layers": 1}, (0.0, 0.6))]),
    "mod_add": ({"train.task": "mod_add", "train.steps": 1000},
                [("learned-pos", {}, None), ("rope", {"model.pos_encoding": "rope"}, None)]),
    "lm": ({"train.task": "lm", "train.steps": 300},
           [("baseline", {}, None), ("no-attention", NO_ATTENTION, None)]),
}
OLD_INIT = "gpt2"


def default_config(taectl, work):
    """The baseline run config of an experiment file that sets nothing, as taectl expands it.

    The schema's defaults (common/spec/schema.cc), so a change of default shows up here."""
    path = os.path.join(work, "defaults.toml")
    with open(path, "w") as f:
        f.write('name = "calibration"\n')
    done = subprocess.run([taectl, "submit", path, "--dry-run", "--json"], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True, check=True)
    config = json.loads(done.stdout)[0]["config"]
    return {k: v for k, v in config.items() if k.startswith(("model.", "train."))}


def final_metrics(output):
    final = {}
    for line in output.splitlines():
        if line.startswith("{\"step\""):
            record = json.loads(line)
            if "eval/acc" in record:
                final = record
    return final


def run_one(tae_train, python_dir, spec, model, work):
    """Final eval metrics of one run; model is "libtorch", "torch" or "reference"."""
    fd, path = tempfile.mkstemp(suffix=".json", dir=work)
    with os.fdopen(fd, "w") as f:
        json.dump(dict(spec, **{"train.engine": "torch" if model == "torch" else "libtorch"}), f)
    env = dict(os.environ, TAE_THREADS="1", OMP_NUM_THREADS="1")
    env.pop("TAE_METRICS_FD", None)
    env["PYTHONPATH"] = python_dir
    env.setdefault("TAE_PYTHON", sys.executable)
    if model == "reference":
        command = [sys.executable, REFERENCE, "--spec", path]
    else:
        command = [tae_train, "--spec", path, "--no-checkpoint"]
    start = time.monotonic()
    done = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          env=env, check=False)
    seconds = time.monotonic() - start
    if done.returncode != 0:
        raise RuntimeError(f"{model} {spec['train.task']} seed {spec['train.seed']}: exit "
                           f"{done.returncode}\n{done.stdout[-3000:]}")
    return dict(final_metrics(done.stdout), seconds=round(seconds, 1))


class Cache:
    """Final metrics by (model, run spec), kept in a JSON file when one is named."""

    def __init__(self, path):
        self.path, self.entries = path, {}
        if path and os.path.exists(path):
            with open(path) as f:
                self.entries = json.load(f)

    @staticmethod
    def key(model, spec):
        return model + " " + json.dumps(spec, sort_keys=True)

    def get(self, model, spec):
        return self.entries.get(self.key(model, spec))

    def put(self, model, spec, metrics):
        self.entries[self.key(model, spec)] = metrics
        if self.path:
            with open(self.path + ".tmp", "w") as f:
                json.dump(self.entries, f, indent=0)
            os.replace(self.path + ".tmp", self.path)


def cost(spec):
    """Rough relative run time, to start the longest runs first."""
    return spec["train.steps"] * max(1, spec["model.layers"]) * spec["train.seq_len"]


def fmt(accs):
    return " / ".join(f"{a:.3f}" for a in accs)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("tae_train")
    parser.add_argument("python_dir")
    parser.add_argument("--taectl", help="default: taectl beside TAE_TRAIN")
    parser.add_argument("--against", choices=("reference", "torch"), default="reference")
    parser.add_argument("--tasks", default=",".join(ROWS))
    parser.add_argument("--variants", default="", help="only these variants (default: all)")
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--old-init", default="", metavar="TASKS",
                        help=f"also tae-train with model.init = {OLD_INIT} for these tasks' "
                        "baselines")
    parser.add_argument("--cache", metavar="FILE",
                        help="reuse the final metrics of runs recorded here, record new ones")
    parser.add_argument("--check", action="store_true")
    parser.add_argument("--markdown", action="store_true")
    args = parser.parse_args()
    if importlib.util.find_spec("torch") is None or importlib.util.find_spec("numpy") is None:
        print("skipped: this python3 cannot import torch and numpy (apt-get install python3-torch)")
        return 77
    taectl = args.taectl or os.path.join(os.path.dirname(args.tae_train), "taectl")
    tasks = args.tasks.split(",")
    wanted = set(filter(None, args.variants.split(",")))
    seeds = [int(s) for s in args.seeds.split(",")]
    old_init = set(filter(None, args.old_init.split(",")))
    models = ("libtorch", args.against)
    with tempfile.TemporaryDirectory(prefix="tae-calibration-") as work:
        base = dict(default_config(taectl, work), **FIXED)
        rows, jobs = [], []
        for task in tasks:
            settings, variants = ROWS[task]
            for variant, overrides, bounds in variants:
                if wanted and variant not in wanted:
                    continue
                rows.append((task, variant, bounds))
                baseline = variant == variants[0][0]
                for model in models + ((OLD_INIT,) if task in old_init and baseline else ()):
                    for seed in seeds:
                        spec = {**base, **settings, **overrides, "train.seed": seed}
                        if model == OLD_INIT:
                            spec["model.init"] = OLD_INIT
                        jobs.append(((task, variant, model, seed), spec))
        jobs.sort(key=lambda job: -cost(job[1]))
        cache = Cache(args.cache)
        results = {}
        with ThreadPoolExecutor(max_workers=args.jobs) as pool:
            futures = {}
            for key, spec in jobs:
                model = "libtorch" if key[2] == OLD_INIT else key[2]
                if cache.get(model, spec) is None:
                    futures[key] = pool.submit(run_one, args.tae_train, args.python_dir, spec,
                                               model, work)
            for key, spec in jobs:
                model = "libtorch" if key[2] == OLD_INIT else key[2]
                if key in futures:
                    cache.put(model, spec, futures[key].result())
                results[key] = cache.get(model, spec)
                print(f"  {key}: eval/acc {results[key].get('eval/acc', float('nan')):.3f}",
                      file=sys.stderr, flush=True)
    names = {"libtorch": f"tae-train ({base['model.init']} init)",
             "reference": "independent reference", "torch": "torch engine"}
    seeds_text = ", ".join(map(str, seeds))
    header = (f"| task | variant | {names['libtorch']} eval/acc (seeds {seeds_text}) | "
              f"{names[args.against]} | gap of means | seeds' spread |")
    if old_init:
        header += f" tae-train, {OLD_INIT} init |"
    lines = [header, "|---" * header.count(" |") + "|"]
    failures = []
    for task, variant, bounds in rows:
        accs = {m: [results[(task, variant, m, s)]["eval/acc"] for s in seeds] for m in models}
        means = {m: statistics.mean(a) for m, a in accs.items()}
        gap = abs(means[models[0]] - means[models[1]])
        spread = max(max(a) - min(a) for a in accs.values())
        if gap > max(spread, ACC_FLOOR):
            failures.append(f"{task} / {variant}: gap of means {gap:.3f} > seeds' spread "
                            f"{max(spread, ACC_FLOOR):.3f}")
        for model, mean in means.items():
            if bounds and not bounds[0] <= mean <= bounds[1]:
                failures.append(f"{task} / {variant}: {names[model]} mean {mean:.3f} outside "
                                f"[{bounds[0]}, {bounds[1]}]")
        line = (f"| {task} | {variant} | {fmt(accs[models[0]])} | {fmt(accs[models[1]])} | "
                f"{gap:.3f} | {spread:.3f} |")
        if old_init:
            old = [results.get((task, variant, OLD_INIT, s)) for s in seeds]
            line += (f" {fmt(r['eval/acc'] for r in old)} |" if all(old) else " |")
        lines.append(line)
    print("\n".join(lines))
    for failure in failures:
        print(f"FAIL {failure}")
    return 1 if args.check and failures else 0


if __name__ == "__main__":
    sys.exit(main())
