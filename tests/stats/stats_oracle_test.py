#!/usr/bin/python3
"""TAE's table statistics against independent implementations (issue 52's oracle).

Random samples (2 to 12 seeds per arm, seed-SD ratios 1 to 30, offsets, ties, one constant arm,
large and tiny scales) and random families of p values (1 to 15, ties, NaN) go through
tests/stats/stats_replay.cc, which calls common/stats (Welch, TableTest, PairedT, DeltaInterval,
DetectableEffect, AdjustedP, IntervalLevels); every number must match
  - scipy.stats.ttest_ind(equal_var=False) and ttest_rel (t, p), and the t distribution's ppf/sf
    for the table's calibrated dof (its formula written here again, from family.h's statement);
  - statsmodels' CompareMeans.tconfint_diff(usevar="unequal") and DescrStatsW.tconfint_mean for
    the intervals of a difference;
  - statsmodels' multipletests(method="holm" / "bonferroni") for the adjusted p values; and each
    Holm interval level must agree with the decision (p <= level exactly when rejected).

Usage: stats_oracle_test.py REPLAY_BINARY [--cases N] [--seed S]
Exit 0: all agree; 1: a disagreement (printed); 77 with the TAE-SKIPPED marker: python3-scipy or
python3-statsmodels is not installed.
"""

import argparse
import json
import math
import random
import subprocess
import sys

try:
    import numpy as np
    from scipy import stats
    from statsmodels.stats.multitest import multipletests
    from statsmodels.stats.weightstats import CompareMeans, DescrStatsW
except ImportError as e:
    print(f"TAE-SKIPPED: {e.name} is not installed (apt-get install python3-scipy "
          "python3-statsmodels; deploy/install-deps.sh lists them)")
    sys.exit(77)


def close(x, y, rel=1e-8, abs_=1e-12):
    if x is None or y is None:
        return x is None and y is None
    return abs(x - y) <= abs_ + rel * max(abs(x), abs(y))


def sample_case(rng):
    n_a, n_b = rng.randint(2, 12), rng.randint(2, 12)
    if rng.random() < 0.3:
        n_b = n_a  # paired designs have equal sizes
    scale = 10 ** rng.uniform(-4, 3)
    ratio = rng.choice([1, 1, 3, 5, 30]) if rng.random() < 0.8 else rng.uniform(0.03, 30)
    offset = rng.choice([0, 0, 1, 1000]) * scale
    shift = rng.gauss(0, 2) * scale
    a = [offset + shift + rng.gauss(0, scale * ratio) for _ in range(n_a)]
    b = [offset + rng.gauss(0, scale) for _ in range(n_b)]
    if rng.random() < 0.2:  # ties: a discrete metric
        q = scale / 2
        a = [round(x / q) * q for x in a]
        b = [round(x / q) * q for x in b]
    if rng.random() < 0.05:  # one constant arm: Welch becomes a one-sample test
        b = [b[0]] * n_b
    return {"a": a, "b": b, "level": rng.choice([0.05, 0.05, 0.01, 0.005, 0.0125])}


def p_case(rng):
    m = rng.randint(1, 15)
    p = [rng.random() ** rng.choice([1, 2, 4, 8]) for _ in range(m)]
    if rng.random() < 0.3 and m > 1:
        p[rng.randrange(m)] = p[0]  # a tie
    if rng.random() < 0.2:
        p[rng.randrange(m)] = float("nan")  # not part of the family
    return {"p": p, "alpha": rng.choice([0.05, 0.05, 0.01, 0.1])}


def table_dof(welch_dof, n_a, n_b):
    low = min(n_a, n_b) - 1
    return low + (welch_dof - low) / 4


def check_two(case, got, problems):
    a, b, level = np.array(case["a"]), np.array(case["b"]), case["level"]
    va, vb = a.var(ddof=1), b.var(ddof=1)
    delta = a.mean() - b.mean()
    if va == 0 and vb == 0:
        for key in ("welch", "table"):
            if got[key] is not None:
                problems.append(f"{key}: a test where both arms are constant: {case}")
        return
    ref = stats.ttest_ind(a, b, equal_var=False)
    se2a, se2b = va / len(a), vb / len(b)
    dof = (se2a + se2b) ** 2 / (se2a ** 2 / (len(a) - 1) + se2b ** 2 / (len(b) - 1))
    w = got["welch"]
    if not (close(w["t"], float(ref.statistic), 1e-8) and close(w["p"], float(ref.pvalue), 1e-7, 1e-15)
            and close(w["dof"], dof, 1e-9)):
        problems.append(f"welch {w} vs scipy t={ref.statistic} p={ref.pvalue} dof={dof}: {case}")
    if va > 0 and vb > 0:
        lo, hi = CompareMeans(DescrStatsW(a), DescrStatsW(b)).tconfint_diff(
            alpha=level, usevar="unequal")
        width = hi - lo  # endpoints near 0: agree to a share of the interval's width
        if not (close(w["lo"], lo, 1e-7, 1e-8 * width) and close(w["hi"], hi, 1e-7, 1e-8 * width)):
            problems.append(f"welch interval [{w['lo']}, {w['hi']}] vs statsmodels [{lo}, {hi}]: {case}")
    t = got["table"]
    tdof = table_dof(dof, len(a), len(b))
    p = 2 * stats.t.sf(abs(float(ref.statistic)), tdof)
    q = stats.t.ppf(1 - level / 2, tdof)
    se = math.sqrt(se2a + se2b)
    if not (close(t["dof"], tdof, 1e-9) and close(t["p"], p, 1e-7, 1e-15)
            and close(t["lo"], delta - q * se, 1e-7, 2e-8 * q * se)
            and close(t["hi"], delta + q * se, 1e-7, 2e-8 * q * se)):
        problems.append(f"table {t} vs dof {tdof} p {p} [{delta - q * se}, {delta + q * se}]: {case}")
    detect = (stats.t.ppf(1 - level / 2, tdof) + stats.t.ppf(0.8, tdof)) * se
    if not close(t["detectable"], detect, 1e-7):
        problems.append(f"detectable {t['detectable']} vs {detect}: {case}")
    if len(a) == len(b):
        d = a - b
        if d.var(ddof=1) == 0:
            if got["paired"] is not None:
                problems.append(f"paired: a test of constant differences: {case}")
            return
        ref = stats.ttest_rel(a, b)
        lo, hi = DescrStatsW(d).tconfint_mean(alpha=level)
        pr = got["paired"]
        sd = math.sqrt(d.var(ddof=1) / len(d))
        if not (close(pr["t"], float(ref.statistic), 1e-7) and close(pr["p"], float(ref.pvalue), 1e-7, 1e-15)
                and close(pr["lo"], lo, 1e-7, 1e-8 * sd) and close(pr["hi"], hi, 1e-7, 1e-8 * sd)):
            problems.append(f"paired {pr} vs scipy t={ref.statistic} p={ref.pvalue} [{lo}, {hi}]: {case}")
    elif got["paired"] is not None:
        problems.append(f"paired test of unequal sizes: {case}")


def check_family(case, got, problems):
    p, alpha = case["p"], case["alpha"]
    keep = [i for i, x in enumerate(p) if not math.isnan(x)]
    finite = [p[i] for i in keep]
    for method in ("holm", "bonferroni"):
        ref = multipletests(finite, alpha=alpha, method=method)[1] if finite else []
        mine = got[method]
        for j, i in enumerate(keep):
            if not close(mine[i], float(ref[j]), 1e-12, 1e-15):
                problems.append(f"{method}[{i}] {mine[i]} vs statsmodels {ref[j]}: {case}")
        for i, x in enumerate(p):
            if math.isnan(x) and mine[i] is not None:
                problems.append(f"{method}[{i}]: NaN p adjusted to {mine[i]}: {case}")
    if finite:
        rejected = multipletests(finite, alpha=alpha, method="holm")[0]
        for j, i in enumerate(keep):
            level = got["levels"][i]
            if level is None or level > alpha * (1 + 1e-12):
                problems.append(f"level[{i}] {level} above alpha: {case}")
            elif bool(rejected[j]) != (p[i] <= level):
                problems.append(f"level[{i}] {level} disagrees with Holm's decision "
                                f"(rejected {bool(rejected[j])}, p {p[i]}): {case}")


def main():
    np.seterr(all="ignore")
    import warnings
    warnings.simplefilter("ignore", RuntimeWarning)  # scipy's notes on near-constant samples
    parser = argparse.ArgumentParser()
    parser.add_argument("replay")
    parser.add_argument("--cases", type=int, default=4000)
    parser.add_argument("--seed", type=int, default=52)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    cases = [sample_case(rng) if i % 4 else p_case(rng) for i in range(args.cases)]
    def wire(case):  # JSON has no NaN: null stands for it
        return {k: [None if isinstance(x, float) and math.isnan(x) else x for x in v]
                if isinstance(v, list) else v for k, v in case.items()}
    lines = "\n".join(json.dumps(wire(c), allow_nan=False) for c in cases) + "\n"
    out = subprocess.run([args.replay], input=lines, capture_output=True, text=True, check=True)
    answers = [json.loads(x) for x in out.stdout.splitlines()]
    if len(answers) != len(cases):
        print(f"{len(answers)} answers to {len(cases)} cases")
        return 1
    problems = []
    for case, got in zip(cases, answers):
        (check_two if "a" in case else check_family)(case, got, problems)
    twos = sum(1 for c in cases if "a" in c)
    print(f"{twos} pairs of samples, {len(cases) - twos} families: "
          f"{'all agree' if not problems else f'{len(problems)} disagreements'}")
    for p in problems[:20]:
        print(p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
