#!/usr/bin/env python3
"""Accelerator check: the torch engine (python3 -m tae_torch, no taed, no tae-train) against a
plain PyTorch loop on the same model, on whatever device this machine has.

Started by bench/device_check.sh from the repository root with PYTHONPATH=agent/python; needs
only python3, torch and the run-key schema the engine reads ($TAE_SCHEMA, which building tae-train
writes; no C++ build where it runs). Prints one table: tokens/s, step time, host reads of
device values per 100 steps (.item(), .tolist(), .cpu(), float(), ... counted by wrapping the
tensor methods; the optimizer's CPU step counters are not counted), on CUDA also the
synchronising CUDA calls per 100 steps (torch.cuda.set_sync_debug_mode), for fp32 and bf16,
1 process and 2 processes (NCCL on 2 GPUs, gloo on the CPU), and FSDP. A row that fails prints
its error and the check goes on.

    bash bench/device_check.sh            # GPU sizes when CUDA is available, else --quick
    bash bench/device_check.sh --quick    # small sizes (CPU here: about a minute)

Rows run as child processes of this script ("child" sub-commands below) with a time limit each.
"""

import argparse
import atexit
import collections
import json
import os
import random
import runpy
import socket
import subprocess
import sys
import tempfile
import time
import traceback
import warnings

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PYTHON_DIR = os.path.join(ROOT, "agent", "python")
ROW_TIMEOUT_S = 75
BUDGET_S = 440  # the whole table, well under 8 minutes: later rows get what is left
TEXT_BYTES = 1 << 21

SIZES = {  # (d_model, layers, heads, seq_len, global batch, steps, log_every)
    "gpu": (512, 8, 8, 256, 32, 240, 20),
    "quick": (64, 2, 4, 64, 16, 60, 10),
}


# ---- counting host reads (inside a child) ----

READS = ("item", "tolist", "cpu", "numpy", "__float__", "__int__", "__bool__", "__index__")


class Counters:
    """Host reads of tensor values and, on CUDA, synchronising CUDA calls, counted from
    start() to the child's exit and written to $DEVICE_CHECK_COUNTS as JSON."""

    def __init__(self):
        import torch  # noqa: PLC0415
        self.torch = torch
        self.reads = 0
        self.syncs = 0
        self.setup_syncs = 0
        self.where = collections.Counter()
        self.optim_dir = os.path.join(os.path.dirname(torch.__file__), "optim") + os.sep

    def start(self):
        torch = self.torch
        for name in READS:
            setattr(torch.Tensor, name, self._counting(name, getattr(torch.Tensor, name)))
        if torch.cuda.is_available():
            torch.cuda.set_sync_debug_mode("warn")
            warnings.simplefilter("always")
            shown = warnings.showwarning

            def on_warning(message, category, *args, **kwargs):
                if "synchronizing" in str(message).lower():
                    # Setting up (the model's parameters copied to the device, one sync each) is
                    # not the step loop: counted apart.
                    if any(f.name == "prepare" and f.filename.endswith("engine.py")
                           for f in traceback.extract_stack()):
                        self.setup_syncs += 1
                    else:
                        self.syncs += 1
                    return None
                return shown(message, category, *args, **kwargs)
            warnings.showwarning = on_warning
        atexit.register(self.write)

    def _counting(self, name, original):
        def read(tensor, *args, **kwargs):
            frame = sys._getframe(1)
            if not frame.f_code.co_filename.startswith(self.optim_dir):
                self.reads += 1
                self.where[f"{name} {os.path.basename(frame.f_code.co_filename)}:"
                           f"{frame.f_lineno}"] += 1
            return original(tensor, *args, **kwargs)
        return read

    def write(self):
        path = os.environ.get("DEVICE_CHECK_COUNTS")
        if path:
            with open(path, "w") as f:
                json.dump({"reads": self.reads, "syncs": self.syncs,
                           "setup_syncs": self.setup_syncs,
                           "where": dict(self.where.most_common(8))}, f)


# ---- the children ----

def engine_threads(spec_path):
    """The engine's thread settings for this spec, set before torch loads (as its main does):
    importing torch first would start OpenBLAS and OpenMP with spinning workers."""
    from tae_torch import __main__ as engine_main, spec as spec_lib  # noqa: PLC0415
    config, _ = spec_lib.load(spec_path)
    threads = engine_main.thread_count(config.train.threads)
    engine_main.configure_threads(threads)
    return threads


def child_engine(spec_path):
    """python3 -m tae_torch --spec SPEC --no-checkpoint, counted."""
    engine_threads(spec_path)
    Counters().start()
    sys.argv = ["tae_torch", "--spec", spec_path, "--no-checkpoint"]
    runpy.run_module("tae_torch", run_name="__main__", alter_sys=True)


def child_plain(config_path):
    """A plain PyTorch training loop over the engine's model: batches indexed from the text on
    the device, autocast for bf16, clip_grad_norm_, AdamW, loss.item() every step as a usual
    loop logs it; DistributedDataParallel when TAE_WORLD_SIZE > 1."""
    with open(config_path) as f:
        c = json.load(f)
    threads = engine_threads(c["spec_path"])  # the same thread settings as the engine's rows
    counters = Counters()
    import torch  # noqa: PLC0415
    import torch.nn.functional as F  # noqa: PLC0415
    from tae_torch import model as model_lib, spec as spec_lib  # noqa: PLC0415
    rank, world = int(os.environ.get("TAE_RANK", "0")), int(os.environ.get("TAE_WORLD_SIZE", "1"))
    if torch.cuda.is_available():
        device = torch.device("cuda", rank % torch.cuda.device_count())
        torch.cuda.set_device(device)
    else:
        device = torch.device("cpu")
    torch.set_num_threads(threads)
    config = spec_lib.parse(c["spec"])
    torch.manual_seed(0)
    model = model_lib.TransformerLM(config.model, 256, config.train.seq_len).to(device)
    if world > 1:
        import torch.distributed as dist  # noqa: PLC0415
        dist.init_process_group("nccl" if device.type == "cuda" else "gloo",
                                init_method=f"tcp://127.0.0.1:{os.environ['MASTER_PORT']}",
                                rank=rank, world_size=world)
        model = torch.nn.parallel.DistributedDataParallel(
            model, device_ids=[device.index] if device.type == "cuda" else None)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.1)
    with open(c["spec"]["train.data"], "rb") as f:
        text = torch.frombuffer(bytearray(f.read()), dtype=torch.uint8).to(device)
    t = config.train
    rows = t.batch_size // world
    offsets = torch.arange(t.seq_len + 1, device=device)
    generator = torch.Generator(device=device)
    generator.manual_seed(rank)
    bf16 = t.precision == "bf16"
    counters.start()
    timed_steps, timed = 0, 0.0
    losses = []
    start = None
    for step in range(1, t.steps + 1):
        if step == c["warmup"] + 1:
            if device.type == "cuda":
                torch.cuda.synchronize()
            start = time.perf_counter()
        starts = torch.randint(0, text.numel() - t.seq_len - 1, (rows, 1), device=device,
                               generator=generator)
        window = text[starts + offsets].long()
        inputs, targets = window[:, :-1], window[:, 1:]
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=bf16):
            logits = model(inputs)
        loss = F.cross_entropy(logits.float().reshape(-1, logits.size(-1)), targets.reshape(-1))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        losses.append(loss.item())
    if device.type == "cuda":
        torch.cuda.synchronize()
    timed = time.perf_counter() - start
    timed_steps = t.steps - c["warmup"]
    if rank == 0:
        print(json.dumps({"tokens_per_s": timed_steps * t.batch_size * t.seq_len / timed,
                          "step_ms": 1e3 * timed / timed_steps,
                          "loss": sum(losses[-10:]) / len(losses[-10:])}), flush=True)


# ---- the parent: rows and the table ----

def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def spec_for(size, precision, sharding, data, threads):
    d, layers, heads, seq_len, batch, steps, log_every = size
    return {
        "train.engine": "torch", "model.init": "gpt2", "model.layers": layers,
        "model.d_model": d, "model.heads": heads, "model.kv_heads": 0, "model.head_dim": 0,
        "model.ffn_mult": 4, "model.activation": "gelu", "model.norm": "layernorm",
        "model.norm_position": "pre", "model.pos_encoding": "learned", "model.residual": True,
        "model.causal": True, "model.drop_attention_layers": [], "model.drop_ffn_layers": [],
        "model.prune_heads": {}, "model.tie_embeddings": True, "model.bias": True,
        "model.dropout": 0.0, "train.task": "lm", "train.data": data, "train.vocab": 16,
        "train.seq_len": seq_len, "train.batch_size": batch, "train.steps": steps,
        "train.optimizer": "adamw", "train.lr": 1e-3, "train.schedule": "cosine",
        "train.warmup": 10, "train.weight_decay": 0.1, "train.grad_clip": 1.0,
        "train.eval_every": 0, "train.eval_batches": 1, "train.checkpoint_every": 0,
        "train.head_importance": False, "train.threads": threads, "train.seed": 0,
        "train.log_every": log_every, "train.precision": precision, "train.sharding": sharding,
    }


def launch(argv, procs, workdir, timeout):
    """Runs `argv` as `procs` ranks; returns (rank 0's stdout, every rank's counts) or raises
    with the failing rank's output."""
    port = str(free_port())
    children = []
    for rank in range(procs):
        env = dict(os.environ, PYTHONPATH=PYTHON_DIR, TAE_RANK=str(rank),
                   TAE_WORLD_SIZE=str(procs), LOCAL_RANK=str(rank), MASTER_ADDR="127.0.0.1",
                   MASTER_PORT=port,
                   DEVICE_CHECK_COUNTS=os.path.join(workdir, f"counts{rank}.json"))
        env.pop("TAE_METRICS_FD", None)
        out = open(os.path.join(workdir, f"out{rank}.txt"), "w+")
        children.append((subprocess.Popen(argv, env=env, stdout=out, stderr=subprocess.STDOUT,
                                          cwd=workdir), out))
    deadline = time.monotonic() + timeout
    failure = None
    for proc, out in children:
        try:
            proc.wait(timeout=max(1.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            failure = f"timed out after {timeout} s"
        if proc.returncode not in (0, None) and failure is None:
            out.seek(0)
            last = [line for line in out.read().splitlines() if line.strip()][-2:]
            failure = f"exit {proc.returncode}: " + " | ".join(last)
    for proc, out in children:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    if failure is not None:
        raise RuntimeError(failure)
    outputs = []
    for _, out in children:
        out.seek(0)
        outputs.append(out.read())
        out.close()
    counts = []
    for rank in range(procs):
        with open(os.path.join(workdir, f"counts{rank}.json")) as f:
            counts.append(json.load(f))
    return outputs[0], counts


def engine_row(spec, procs, workdir, timeout, warmup):
    path = os.path.join(workdir, "run.json")
    with open(path, "w") as f:
        json.dump(spec, f)
    output, counts = launch([sys.executable, os.path.abspath(__file__), "child-engine", path],
                            procs, workdir, timeout)
    lines = [json.loads(line) for line in output.splitlines() if line.startswith('{"step"')]
    windows = [m for m in lines if "perf/step_ms" in m and m["step"] > warmup]
    if not windows:
        raise RuntimeError("no perf/step_ms after the warmup: " + output[-400:])
    step_ms = sum(m["perf/step_ms"] for m in windows) / len(windows)
    losses = [m["train/loss"] for m in lines if "train/loss" in m]
    tokens = spec["train.batch_size"] * spec["train.seq_len"]
    return {"tokens_per_s": 1e3 * tokens / step_ms, "step_ms": step_ms, "loss": losses[-1],
            "counts": counts[0]}


def plain_row(spec, procs, workdir, timeout, warmup):
    spec_path = os.path.join(workdir, "run.json")
    with open(spec_path, "w") as f:
        json.dump(spec, f)
    path = os.path.join(workdir, "plain.json")
    with open(path, "w") as f:
        json.dump({"spec": spec, "spec_path": spec_path, "warmup": warmup}, f)
    output, counts = launch([sys.executable, os.path.abspath(__file__), "child-plain", path],
                            procs, workdir, timeout)
    result = json.loads(output.strip().splitlines()[-1])
    result["counts"] = counts[0]
    return result


def write_text(path):
    """A byte text for the lm task (no KJV needed): words drawn from a small vocabulary."""
    rng = random.Random(0)
    words = ["".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(2, 9)))
             for _ in range(2000)]
    out, size = [], 0
    while size < TEXT_BYTES:
        sentence = " ".join(rng.choice(words) for _ in range(rng.randint(4, 16))) + ".\n"
        out.append(sentence)
        size += len(sentence)
    with open(path, "w") as f:
        f.write("".join(out))


def describe_machine():
    import torch  # noqa: PLC0415
    parts = [f"torch {torch.__version__}", f"python {sys.version.split()[0]}"]
    if torch.cuda.is_available():
        names = sorted({torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())})
        parts.append(f"{torch.cuda.device_count()} x {', '.join(names)}")
    else:
        parts.append(f"CPU only, {os.cpu_count()} CPUs")
    return ", ".join(parts)


def main():
    parser = argparse.ArgumentParser(description="torch engine vs plain PyTorch on this device")
    parser.add_argument("--quick", action="store_true", help="small sizes (CPU)")
    parser.add_argument("--row-timeout", type=int, default=ROW_TIMEOUT_S)
    parser.add_argument("--threads", type=int, default=0,
                        help="CPU threads per process, both programs (0: the engine's default: "
                             "TAE_THREADS, else every CPU)")
    parser.add_argument("--rows", action="append", default=[], metavar="TEXT",
                        help="only the rows whose label contains TEXT (repeatable: any of "
                             "them), e.g. --rows bf16")
    parser.add_argument("--rounds", type=int, default=1,
                        help="run the rows this many times, interleaved (row 1, row 2, ..., "
                             "row 1, ...), and report each row's median with every round's "
                             "tok/s: one round cannot tell a slower program from a busier "
                             "machine")
    args = parser.parse_args()
    if args.rounds < 1:
        parser.error("--rounds must be at least 1")
    try:
        import torch  # noqa: PLC0415
    except ImportError:
        print("device_check: this python3 cannot import torch")
        return 2
    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    size = SIZES["quick" if args.quick or gpus == 0 else "gpu"]
    d, layers, heads, seq_len, batch, steps, log_every = size
    warmup = 2 * log_every  # the first two metrics windows (compilation, allocator warm-up)
    print(f"device_check: {describe_machine()}")
    print(f"model: GPT d_model {d}, {layers} layers, {heads} heads, seq {seq_len}, global batch "
          f"{batch}, vocab 256, AdamW, clip 1.0; {steps} steps per row, the first {warmup} "
          f"untimed; engine metrics every {log_every} steps", flush=True)
    two = "2 GPUs, NCCL" if gpus >= 2 else "2 procs, gloo"
    rows = [
        ("plain pytorch, fp32, 1 proc", "plain", "fp32", "none", 1),
        ("torch engine, fp32, 1 proc", "engine", "fp32", "none", 1),
        ("plain pytorch, bf16 autocast, 1 proc", "plain", "bf16", "none", 1),
        ("torch engine, bf16, 1 proc", "engine", "bf16", "none", 1),
        (f"plain pytorch DDP, fp32, {two}", "plain", "fp32", "none", 2),
        (f"torch engine, fp32, {two}", "engine", "fp32", "none", 2),
        (f"torch engine, fp32, fsdp, {two}", "engine", "fp32", "fsdp", 2),
    ]
    if args.rows:
        rows = [r for r in rows if any(text in r[0] for text in args.rows)]
        if not rows:
            parser.error(f"no row's label contains any of {args.rows}")
    header = (f"{'row':<44}{'tok/s':>10}{'step ms':>9}{'reads/100':>10}"
              f"{'syncs/100':>10}{'loss':>8}")
    outcomes = {label: [] for label, *_ in rows}  # per row: a result dict or a reason string
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="tae-device-check-") as workdir:
        data = os.path.join(workdir, "text.txt")
        write_text(data)
        for round_index in range(args.rounds):
            for label, kind, precision, sharding, procs in rows:
                name = label if args.rounds == 1 else f"{label} [{round_index + 1}]"
                row_dir = tempfile.mkdtemp(dir=workdir)
                if procs > 1 and 0 < gpus < procs:
                    outcomes[label].append(f"skipped: {gpus} GPU on this machine")
                    print(f"{name:<44}{outcomes[label][-1]}", flush=True)
                    continue
                left = BUDGET_S - (time.monotonic() - started)
                if left < 20:
                    outcomes[label].append(f"skipped: the check's {BUDGET_S} s were used up")
                    print(f"{name:<44}{outcomes[label][-1]}", flush=True)
                    continue
                timeout = int(min(args.row_timeout, left))
                spec = spec_for(size, precision, sharding, data, args.threads)
                row_start = time.monotonic()
                try:
                    if kind == "engine":
                        r = engine_row(spec, procs, row_dir, timeout, warmup)
                    else:
                        r = plain_row(spec, procs, row_dir, timeout, warmup)
                    outcomes[label].append(r)
                    line = format_row(name, r, steps, gpus)
                except Exception as e:  # noqa: BLE001 (a failed row says why; others still run)
                    outcomes[label].append("FAILED: " + " ".join(str(e).split())[:400])
                    line = f"{name:<44}{outcomes[label][-1]}"
                print(line + f"   ({time.monotonic() - row_start:.0f} s)", flush=True)
    table = [summary_line(label, outcomes[label], steps, gpus) for label, *_ in rows]
    print(f"\ndevice_check: done in {time.monotonic() - started:.0f} s; reads/100 = host reads "
          f"of tensor values per 100 steps over the whole run (the engine: one per metrics "
          f"line, every {log_every} steps, and its final evaluation); syncs/100 = CUDA "
          "synchronising calls (torch.cuda.set_sync_debug_mode) outside setting up (the engine "
          "copying its parameters to the device, one each, is not counted)\n")
    if args.rounds > 1:
        print(f"{args.rounds} rounds: tok/s and step ms are each row's median round (of an "
              "even count, the slower middle one), every round's tok/s in brackets; reads, "
              "syncs and loss are the median round's\n")
    print(header)
    for line in table:
        print(line)
    return 0


def format_row(label, r, steps, gpus):
    per100 = 100.0 / steps
    syncs = f"{r['counts']['syncs'] * per100:.1f}" if gpus else "-"
    return (f"{label:<44}{r['tokens_per_s']:>10,.0f}{r['step_ms']:>9.2f}"
            f"{r['counts']['reads'] * per100:>10.1f}{syncs:>10}{r['loss']:>8.3f}")


def summary_line(label, outcomes, steps, gpus):
    """A row's line in the table: its one outcome, or over several rounds the median round's
    figures and every round's tok/s (a failed or skipped round is named, not averaged in)."""
    results = [r for r in outcomes if isinstance(r, dict)]
    if not results:
        return f"{label:<44}{outcomes[0]}"
    if len(outcomes) == 1:
        return format_row(label, results[0], steps, gpus)
    ordered = sorted(results, key=lambda r: r["tokens_per_s"])
    median = ordered[(len(ordered) - 1) // 2]
    rounds = ", ".join(f"{r['tokens_per_s']:,.0f}" if isinstance(r, dict) else r.split(":")[0]
                       for r in outcomes)
    return format_row(label, median, steps, gpus) + f"  [{rounds}]"


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "child-engine":
        sys.path.insert(0, PYTHON_DIR)
        child_engine(sys.argv[2])
    elif len(sys.argv) > 2 and sys.argv[1] == "child-plain":
        sys.path.insert(0, PYTHON_DIR)
        try:
            child_plain(sys.argv[2])
        except Exception:  # noqa: BLE001
            traceback.print_exc()
            sys.exit(1)
    else:
        sys.exit(main())
