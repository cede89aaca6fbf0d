#!/usr/bin/python3
"""The ladder fit (common/stats/ladder.h) against an independent one written with scipy.

Simulated ladders of every shape of bench/scale/ladder_sim.cc (known E, A, alpha and multipliers,
seed noise) are written by `tae-ladder-sim --dump` with TAE's point fit. Each is fitted again here
with scipy.optimize.least_squares (loss="huber", f_scale = the same delta, on log residuals), in
its own parametrisation (log E, log A, alpha, log m_v; no centring), from its own grid of starts.
The two must reach the same minimum: the same exponent, E and multipliers (to 1e-3 relative), or,
where scipy's minimum differs, TAE's objective must be no worse than scipy's.

Usage: ladder_oracle_test.py LADDER_SIM_BINARY [--ladders N]
Exit 0: all agree; 1: a disagreement (printed); 77 with the TAE-SKIPPED marker: no python3-scipy.
"""

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile

try:
    import numpy as np
    from scipy.optimize import least_squares
except ImportError as e:
    print(f"TAE-SKIPPED: {e.name} is not installed (apt-get install python3-scipy; "
          "deploy/install-deps.sh lists it)")
    sys.exit(77)

DELTA = 0.05  # LadderFitOptions::huber_delta


def residuals(theta, variant, log_n, log_y, variants):
    log_e, log_a, alpha = theta[0], theta[1], theta[2]
    log_m = np.concatenate([[0.0], theta[3:3 + variants - 1]])
    law = np.exp(log_e) + np.exp(log_a - alpha * (log_m[variant] + log_n))
    return np.log(law) - log_y


def huber(r):
    a = np.abs(r)
    return float(np.sum(np.where(a <= DELTA, 0.5 * r * r, DELTA * (a - 0.5 * DELTA))))


def scipy_fit(ladder):
    sizes = np.array(ladder["sizes"])
    pts = np.array(ladder["points"], dtype=float)
    variant = pts[:, 0].astype(int)
    log_n = np.log(sizes[pts[:, 1].astype(int)])
    y = pts[:, 3]
    log_y = np.log(y)
    v = ladder["variants"]
    best = None
    for alpha in (0.1, 0.25, 0.4, 0.6, 1.0):
        for frac in (0.3, 0.7, 0.9):
            e = frac * y.min()
            log_a = float(np.mean(np.log(np.maximum(y - e, 1e-9)) + alpha * log_n))
            x0 = np.array([math.log(e), log_a, alpha] + [0.0] * (v - 1))
            try:
                r = least_squares(residuals, x0, args=(variant, log_n, log_y, v), loss="huber",
                                  f_scale=DELTA, method="trf", x_scale="jac", max_nfev=5000,
                                  ftol=1e-14, xtol=1e-14, gtol=1e-14)
            except (ValueError, FloatingPointError):
                continue
            obj = huber(residuals(r.x, variant, log_n, log_y, v))
            if best is None or obj < best[0]:
                best = (obj, r.x)
    return best, (variant, log_n, log_y, v)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("sim")
    parser.add_argument("--ladders", type=int, default=200)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "ladders.jsonl")
        subprocess.run([args.sim, "--dump", path, "--dump-ladders", str(args.ladders)], check=True)
        ladders = [json.loads(line) for line in open(path)]
    failures = 0
    same = 0
    better = 0
    worst = 0.0
    for k, ladder in enumerate(ladders):
        fit = ladder["fit"]
        if not fit["ok"]:
            print(f"ladder {k}: TAE's fit failed")
            failures += 1
            continue
        (obj, theta), data = scipy_fit(ladder)
        v = ladder["variants"]
        ours = np.array([math.log(fit["E"]), math.log(fit["A"]), fit["alpha"]] +
                        fit["log_multiplier"][1:])
        our_obj = huber(residuals(ours, *data))
        if not math.isclose(our_obj, fit["loss"], rel_tol=1e-6, abs_tol=1e-12):
            print(f"ladder {k}: TAE's stated objective {fit['loss']} is not its fit's {our_obj}")
            failures += 1
        diffs = [abs(fit["alpha"] - theta[2]) / theta[2],
                 abs(fit["E"] - math.exp(theta[0])) / math.exp(theta[0])]
        diffs += [abs(math.exp(fit["log_multiplier"][i]) - math.exp(theta[2 + i])) /
                  math.exp(theta[2 + i]) for i in range(1, v)]
        if max(diffs) <= 1e-3:
            same += 1
            worst = max(worst, max(diffs))
        elif our_obj <= obj * (1 + 1e-9) + 1e-15:
            better += 1  # a different point, at least as good: scipy stopped elsewhere
        else:
            failures += 1
            print(f"ladder {k} ({ladder['shape']}): TAE alpha {fit['alpha']:.6g} E {fit['E']:.6g} "
                  f"objective {our_obj:.9g}; scipy alpha {theta[2]:.6g} E {math.exp(theta[0]):.6g} "
                  f"objective {obj:.9g}")
    print(f"{len(ladders)} ladders: {same} at the same minimum (largest relative difference "
          f"{worst:.2e}), {better} where TAE's minimum is lower than scipy's, {failures} "
          "disagreements")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
