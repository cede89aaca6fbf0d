#!/usr/bin/python3
"""tae-train against the PyTorch reference (agent/python/tae_torch), step by step.

For every case of a matrix of knob combinations this runs `tae-train --record-steps DIR` for a
few steps, then replays the step record in PyTorch:
  - the reference's own initial weights (same seed) must equal tae-train's bit for bit, and its
    task streams must draw the same train and eval batches;
  - starting from tae-train's initial weights and fed tae-train's batches, every step's loss,
    gradient norm (before clipping) and updated weights must agree within TOLERANCES.
Exit 0 when every case agrees; 1 with the differing quantities otherwise.

usage: torch_equivalence_test.py TAE_TRAIN PYTHON_DIR [CASE ...]
"""

import json
import math
import os
import subprocess
import sys
import tempfile

try:
    import torch
except ImportError:
    print("skipped: this python3 cannot import torch (apt-get install python3-torch)")
    sys.exit(77)

# float32 throughout; the engines sum in different orders (fused QKV vs matmul with different
# blocking, one flat AdamW pass vs per-tensor ops), so equal maths differs in the last bits.
TOLERANCES = {
    "loss_rel": 2e-5,        # |a - b| / |b| per step
    "grad_norm_rel": 2e-4,   # per step
    # weights after each step: |a - b| <= abs + rel * |b| elementwise, except that an element
    # whose gradient is at rounding level may get an AdamW update of opposite sign (m/sqrt(v) is
    # +-1 on the first step whatever |g|): at most `flip_fraction` of the weights may differ by
    # up to 2 * lr per step.
    "weight_abs": 2e-6,
    "weight_rel": 2e-4,
    "flip_fraction": 1e-3,
}

BASE = {
    "model.layers": 2, "model.d_model": 32, "model.heads": 4, "model.kv_heads": 0,
    "model.head_dim": 0, "model.ffn_mult": 2, "model.activation": "gelu",
    "model.norm": "layernorm", "model.norm_position": "pre", "model.pos_encoding": "learned",
    "model.residual": True, "model.causal": True, "model.drop_attention_layers": [],
    "model.drop_ffn_layers": [], "model.prune_heads": {}, "model.tie_embeddings": False,
    "model.bias": True, "model.dropout": 0.0, "model.init": "gpt2",
    "train.task": "copy", "train.data": "", "train.vocab": 8, "train.seq_len": 16,
    "train.batch_size": 8, "train.steps": 5, "train.optimizer": "adamw", "train.lr": 3e-3,
    "train.schedule": "cosine", "train.warmup": 2, "train.weight_decay": 0.0,
    "train.grad_clip": 1.0, "train.eval_every": 100, "train.eval_batches": 2,
    "train.checkpoint_every": 0, "train.head_importance": False, "train.threads": 1,
    "train.seed": 0, "train.engine": "libtorch",
}

# name -> overrides of BASE. Together they cover every knob value of docs/engine.md and every
# task.
CASES = {
    "baseline": {},
    "tied-relu-post": {"model.tie_embeddings": True, "model.activation": "relu",
                       "model.norm_position": "post", "train.task": "reverse", "train.seed": 1},
    "swiglu-rms-sandwich-rope": {"model.activation": "swiglu", "model.norm": "rmsnorm",
                                 "model.norm_position": "sandwich", "model.pos_encoding": "rope",
                                 "train.task": "sort"},
    "geglu-scalenorm-alibi-gqa": {"model.activation": "geglu", "model.norm": "scalenorm",
                                  "model.pos_encoding": "alibi", "model.kv_heads": 2,
                                  "train.task": "assoc_recall"},
    "mqa-headdim-sinusoidal-nobias": {"model.kv_heads": 1, "model.head_dim": 6,
                                      "model.pos_encoding": "sinusoidal", "model.bias": False,
                                      "train.task": "induction", "model.tie_embeddings": True},
    "encoder-nonorm-noresidual-nopos": {"model.causal": False, "model.norm": "none",
                                        "model.residual": False, "model.pos_encoding": "none",
                                        "train.task": "mod_add", "train.vocab": 7},
    "dropped-pruned-sgd": {"model.layers": 3, "model.drop_attention_layers": [1],
                           "model.drop_ffn_layers": [0], "model.prune_heads": {"0": [1, 3]},
                           "model.kv_heads": 2, "train.optimizer": "sgd",
                           "train.schedule": "linear", "train.weight_decay": 0.1,
                           "train.grad_clip": 0.0, "train.lr": 0.05},
    "torch-init-clipped-decay": {"model.init": "torch", "train.schedule": "constant",
                                 "train.grad_clip": 0.05, "train.weight_decay": 0.1,
                                 "train.task": "lm", "train.seq_len": 24},
    "dropout": {"model.dropout": 0.1, "train.task": "induction"},
}


def read_batch(path, batch, time):
    raw = open(path, "rb").read()
    n = batch * time
    inputs = torch.frombuffer(bytearray(raw[:8 * n]), dtype=torch.int64).view(batch, time)
    targets = torch.frombuffer(bytearray(raw[8 * n:16 * n]), dtype=torch.int64).view(batch, time)
    mask = torch.frombuffer(bytearray(raw[16 * n:20 * n]), dtype=torch.float32).view(batch, time)
    return inputs, targets, mask


def read_params(path, index):
    flat = torch.frombuffer(bytearray(open(path, "rb").read()), dtype=torch.float32)
    if flat.numel() != index["count"]:
        raise AssertionError(f"{path}: {flat.numel()} floats, params.json says {index['count']}")
    return {p["name"]: flat[p["offset"]:p["offset"] + math.prod(p["shape"])].view(p["shape"])
            for p in index["params"]}


def compare_weights(model, expected, lr):
    """(worst excess over the elementwise tolerance outside flips, flip fraction)."""
    total = flips = 0
    worst = 0.0
    for name, p in model.named_parameters():
        want = expected[name]
        diff = (p.detach() - want).abs()
        allowed = TOLERANCES["weight_abs"] + TOLERANCES["weight_rel"] * want.abs()
        bad = diff > allowed
        flip = bad & (diff <= 2.0 * lr + allowed)
        flips += int(flip.sum())
        rest = diff[bad & ~flip]
        if rest.numel() > 0:
            worst = max(worst, float(rest.max()))
        total += p.numel()
    return worst, flips / total


def run_case(name, overrides, tae_train, work):
    from tae_torch import engine, spec as spec_lib, tasks  # noqa: PLC0415

    spec = dict(BASE, **overrides)
    case_dir = os.path.join(work, name)
    os.makedirs(case_dir)
    spec_path = os.path.join(case_dir, "run.json")
    with open(spec_path, "w") as f:
        json.dump(spec, f)
    record_dir = os.path.join(case_dir, "steps")
    done = subprocess.run([tae_train, "--spec", spec_path, "--no-checkpoint", "--record-steps",
                           record_dir],
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          env=dict(os.environ, TAE_THREADS="1"), check=False)
    if done.returncode != 0:
        return [f"tae-train exited {done.returncode}: {done.stdout[-2000:]}"]
    config = spec_lib.parse(spec)
    t = config.train
    failures = []
    with open(os.path.join(record_dir, "params.json")) as f:
        index = json.load(f)
    task = tasks.make_task(config)
    model = engine.build(config, task.vocab_size)
    init = read_params(os.path.join(record_dir, "params_0.bin"), index)
    names = [n for n, _ in model.named_parameters()]
    if names != [p["name"] for p in index["params"]]:
        return [f"parameters differ: reference {names} vs tae-train "
                f"{[p['name'] for p in index['params']]}"]
    for pname, p in model.named_parameters():
        if not torch.equal(p.detach(), init[pname]):
            failures.append(f"initial {pname} differs from tae-train's (same seed): max "
                            f"{float((p.detach() - init[pname]).abs().max()):.3g}")
            break
    ev = read_batch(os.path.join(record_dir, "eval_0.bin"), t.batch_size, t.seq_len)
    mine = task.eval_batches[0]
    if not (torch.equal(mine.inputs, ev[0]) and torch.equal(mine.targets, ev[1])
            and torch.equal(mine.mask, ev[2])):
        failures.append("eval batch 0 differs from tae-train's")
    with torch.no_grad():
        for pname, p in model.named_parameters():
            p.copy_(init[pname])
    # The generator is where building the model left it, as in tae-train: dropout draws agree.
    model.train()
    optimizer = engine.make_optimizer(t, model)
    device = engine.Device()
    with open(os.path.join(record_dir, "steps.jsonl")) as f:
        steps = [json.loads(line) for line in f]
    worst = {"loss": 0.0, "grad_norm": 0.0, "weights": 0.0, "flips": 0.0}
    for record in steps:
        s = record["step"]
        inputs, targets, mask = read_batch(os.path.join(record_dir, f"batch_{s}.bin"),
                                           t.batch_size, t.seq_len)
        drawn = task.next_train_batch()
        if not (torch.equal(drawn.inputs, inputs) and torch.equal(drawn.targets, targets)
                and torch.equal(drawn.mask, mask)):
            failures.append(f"step {s}: the reference's train batch differs from tae-train's")
        batch = tasks.Batch(inputs, targets, mask)
        loss, grad_norm = (float(v) for v in
                           engine.train_step(model, optimizer, batch, config, s, device))
        loss_rel = abs(loss - record["loss"]) / max(abs(record["loss"]), 1e-12)
        norm_rel = abs(grad_norm - record["grad_norm"]) / max(abs(record["grad_norm"]), 1e-12)
        expected = read_params(os.path.join(record_dir, f"params_{s}.bin"), index)
        weight_excess, flips = compare_weights(model, expected, record["lr"])
        worst["loss"] = max(worst["loss"], loss_rel)
        worst["grad_norm"] = max(worst["grad_norm"], norm_rel)
        worst["weights"] = max(worst["weights"], weight_excess)
        worst["flips"] = max(worst["flips"], flips)
        if loss_rel > TOLERANCES["loss_rel"]:
            failures.append(f"step {s}: loss {loss:.9g} vs tae-train {record['loss']:.9g}")
        if norm_rel > TOLERANCES["grad_norm_rel"]:
            failures.append(f"step {s}: grad norm {grad_norm:.9g} vs tae-train "
                            f"{record['grad_norm']:.9g}")
        if weight_excess > 0:
            failures.append(f"step {s}: weights differ by up to {weight_excess:.3g} beyond the "
                            "tolerance")
        if flips > TOLERANCES["flip_fraction"]:
            failures.append(f"step {s}: {100 * flips:.3f}% of the weights got the opposite "
                            "update")
        if failures:
            break
    print(f"{name:34s} steps {len(steps)}  loss rel {worst['loss']:.1e}  grad norm rel "
          f"{worst['grad_norm']:.1e}  weights beyond tol {worst['weights']:.1e}  flips "
          f"{100 * worst['flips']:.3f}%  {'ok' if not failures else 'FAILED'}", flush=True)
    return failures


def main():
    if len(sys.argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    tae_train, python_dir = sys.argv[1], sys.argv[2]
    sys.path.insert(0, python_dir)
    torch.set_num_threads(1)
    wanted = sys.argv[3:] or list(CASES)
    unknown = [c for c in wanted if c not in CASES]
    if unknown:
        print(f"unknown case(s) {unknown}; cases: {list(CASES)}", file=sys.stderr)
        return 2
    failed = {}
    with tempfile.TemporaryDirectory(prefix="tae-equivalence-") as work:
        for name in wanted:
            failures = run_case(name, CASES[name], tae_train, work)
            if failures:
                failed[name] = failures
    for name, failures in failed.items():
        for failure in failures:
            print(f"FAIL {name}: {failure}")
    print(f"{len(wanted) - len(failed)}/{len(wanted)} cases agree")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
