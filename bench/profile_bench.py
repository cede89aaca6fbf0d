#!/usr/bin/python3
"""Profiler overhead and int8 evaluation speed of tae-train (docs/profiles.md, docs/engine.md).

Started by bench/profile_bench.sh. Model and run: bench/train_speed.py's d256 L4 GPT (byte-level
KJV, seq_len 128, batch 16), 60 steps, 2 threads.

1. Profiler overhead, three modes interleaved in every round, the same binary and spec:
     off        no TAE_PROFILE_DIR: the profiler does not exist
     idle       TAE_PROFILE_DIR and TAE_PROFILE_REQUEST set, no request: a check per step
     capturing  train.profile_at = [11], profile_steps = 50: steps 11-60 are captured
   Step time is tae-train's own perf/step_ms over windows of 10 steps; the first window is
   untimed (warm-up), so every mode is measured on steps 11-60. Ratios are against "off".
2. int8 dynamic vs fp32 evaluation: eval.quantize = "int8-dynamic" after 20 steps; tae-train
   times eval forward passes over the same batches both ways (best of three) and reports
   eval/tokens_per_s and quant/eval/tokens_per_s.
"""

import json
import os
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import train_speed  # noqa: E402  (the same model and spec)

TAE_TRAIN = os.path.abspath(os.environ.get("TAE_TRAIN", "build/bin/tae-train"))
ROUNDS = int(os.environ.get("BENCH_ROUNDS", "3"))
THREADS = int(os.environ.get("BENCH_THREADS", "2"))
STEPS = 60


def run(spec, env_extra, workdir):
    """Runs tae-train on `spec`; returns its metric lines as (step, {key: value}) pairs."""
    spec_path = os.path.join(workdir, "run.json")
    with open(spec_path, "w") as f:
        json.dump(spec, f)
    metrics_path = os.path.join(workdir, "metrics.jsonl")
    with open(metrics_path, "w") as metrics:
        env = train_speed.clean_env(TAE_METRICS_FD=str(metrics.fileno()), **env_extra)
        subprocess.run([TAE_TRAIN, "--spec", spec_path], check=True, env=env,
                       pass_fds=(metrics.fileno(),), stdout=subprocess.DEVNULL,
                       stderr=subprocess.PIPE, cwd=workdir)
    lines = []
    with open(metrics_path) as f:
        for line in f:
            doc = json.loads(line)
            if "step" in doc:
                lines.append((doc["step"], doc))
    return lines


def step_ms(lines):
    return [d["perf/step_ms"] for s, d in lines if "perf/step_ms" in d and s > 10]


def main():
    if not os.access(TAE_TRAIN, os.X_OK):
        sys.exit(f"profile_bench: {TAE_TRAIN} is missing")
    base = train_speed.tae_spec(STEPS, THREADS)
    results = {"off": [], "idle": [], "capturing": []}
    trace_bytes = 0
    for round_ in range(ROUNDS):
        for mode in results:
            with tempfile.TemporaryDirectory() as work:
                spec = dict(base)
                env = {}
                if mode != "off":
                    os.mkdir(os.path.join(work, "profile"))
                    env = {"TAE_PROFILE_DIR": os.path.join(work, "profile"),
                           "TAE_PROFILE_REQUEST": os.path.join(work, "request.json")}
                if mode == "capturing":
                    spec["train.profile_at"] = [11]
                    spec["train.profile_steps"] = STEPS - 10
                lines = run(spec, env, work)
                results[mode].extend(step_ms(lines))
                if mode == "capturing":
                    trace = os.path.join(work, "profile", "trace.json")
                    trace_bytes = os.path.getsize(trace)
        print(f"round {round_ + 1}/{ROUNDS}: " + ", ".join(
            f"{m} {statistics.median(v):.1f} ms" for m, v in results.items()), flush=True)
    off = statistics.median(results["off"])
    print(f"\nprofiler overhead (d256 L4 GPT, {THREADS} threads, median perf/step_ms over "
          f"{len(results['off'])} windows of 10 steps per mode):")
    for mode, values in results.items():
        med = statistics.median(values)
        print(f"  {mode:<10} {med:8.1f} ms/step   {med / off:5.3f}x of off   "
              f"(+{100 * (med / off - 1):.1f}%)")
    print(f"  one capture of {STEPS - 10} steps wrote a {trace_bytes / 1e6:.1f} MB trace")

    fp32, int8, engines = [], [], set()
    for _ in range(ROUNDS):
        with tempfile.TemporaryDirectory() as work:
            spec = train_speed.tae_spec(20, THREADS)
            spec["train.eval_batches"] = 4
            spec["eval.quantize"] = "int8-dynamic"
            lines = run(spec, {}, work)
            final = {}
            for _, d in lines:
                final.update(d)
            fp32.append(final["eval/tokens_per_s"])
            int8.append(final["quant/eval/tokens_per_s"])
            delta = final["quant/eval/loss_delta"]
            ratio = final["model/linear_bytes"] / final["quant/linear_bytes"]
    f, q = statistics.median(fp32), statistics.median(int8)
    print(f"\nint8 dynamic vs fp32 evaluation (d256 L4 GPT, batch 16 x 128 tokens, {THREADS} "
          "threads):")
    print(f"  fp32 {f:10.0f} tokens/s")
    print(f"  int8 {q:10.0f} tokens/s   {q / f:5.2f}x of fp32; linear weights {ratio:.2f}x "
          f"smaller; eval loss delta {delta:+.4f} (after 20 steps)")


if __name__ == "__main__":
    main()
