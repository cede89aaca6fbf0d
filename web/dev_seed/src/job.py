"""A stand-in training script for the dashboard's seeded study (web/dev_taed.py).

Writes a loss curve that falls towards a floor set by its knobs, eval points every
--eval-every steps, a log line per step (a warning on stderr every tenth) and, as asked, fails,
fails only on its first attempt, sleeps between steps, or pads its log to --log-lines lines.
Deterministic per (knobs, seed), so a seeded study looks the same every time.
"""
import argparse
import math
import os
import random
import sys
import time

import tae_log


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--eval-every", type=int, default=10)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--width", type=int, default=64)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--penalty", type=float, default=0.0, help="added to the loss floor")
    ap.add_argument("--sleep", type=float, default=0.0, help="seconds per step")
    ap.add_argument("--fail-at", type=int, default=0, help="exit 1 at this step (0: never)")
    ap.add_argument("--flaky", type=lambda v: v == "true", default=False,
                    help="true: fail at --fail-at on attempt 1 only")
    ap.add_argument("--log-lines", type=int, default=0, help="pad the log to this many lines")
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    rng = random.Random(f"{a.lr} {a.width} {a.warmup} {a.penalty} {a.seed}")
    attempt = int(os.environ.get("TAE_ATTEMPT", "1"))
    print(f"config: lr={a.lr} width={a.width} warmup={a.warmup} seed={a.seed} attempt={attempt}",
          flush=True)
    # A lower floor for an lr near 3e-3 and a wider model; the penalty is the ablation's cost.
    floor = 0.05 + 0.15 * abs(math.log10(a.lr / 3e-3)) + 8.0 / a.width + a.penalty
    tau = max(a.steps / 5, 1) * (1.5 if a.warmup == 0 else 1.0)
    pad = max(a.log_lines - 2 * a.steps, 0) // max(a.steps, 1)
    loss = 2.8
    for step in range(1, a.steps + 1):
        if a.fail_at and step == a.fail_at and (attempt == 1 or not a.flaky):
            print("Traceback (most recent call last):", file=sys.stderr, flush=True)
            print('  File "job.py", line 60, in main', file=sys.stderr)
            print(f"RuntimeError: CUDA out of memory at step {step} (simulated)", file=sys.stderr,
                  flush=True)
            sys.exit(1)
        loss = floor + (2.8 - floor) * math.exp(-step / tau) + rng.gauss(0, 0.03)
        speed = round(8000 * 64 / a.width + rng.gauss(0, 150))
        tae_log.log(step=step, **{"train/loss": round(loss, 5), "train/lr": a.lr,
                                  "perf/tokens_per_s": speed})
        print(f"step {step}: loss {loss:.4f}", flush=True)
        for i in range(pad):
            print(f"step {step} batch {i}: {rng.random():.6f}")
        if step % 10 == 0:
            print(f"warning: step {step}: gradient norm {1 + rng.random():.3f} clipped",
                  file=sys.stderr, flush=True)
        if step % a.eval_every == 0 or step == a.steps:
            ev = loss + 0.05 + rng.gauss(0, 0.01)
            acc = max(0.0, min(1.0, 1.0 - ev / 2.8 + rng.gauss(0, 0.01)))
            tae_log.log(step=step, **{"eval/loss": round(ev, 5), "eval/acc": round(acc, 5)})
            print(f"eval step {step}: loss {ev:.4f} acc {acc:.4f}", flush=True)
        if a.sleep:
            time.sleep(a.sleep)
    print(f"done: final loss {loss:.4f}", flush=True)


if __name__ == "__main__":
    main()
