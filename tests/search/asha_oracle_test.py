#!/usr/bin/python3
"""TAE's asha decisions against Optuna's SuccessiveHalvingPruner (issue 27's oracle).

Randomised studies (grid points x seeds of one or more variants, within = variant or study,
eta 2..4, either goal, ties, NaN, crashed seeds, late starters, resent reports) are recorded as
metric reports in arrival order and replayed
  - through server/search's GridSearch (tests/search/asha_replay.cc), some with a simulated taed
    restart every few events, and
  - through Optuna 3.1's SuccessiveHalvingPruner(min_resource = min_steps, reduction_factor = eta,
    min_early_stopping_rate = 0), one Optuna trial per grid point, one study per competition
    group: a point reports step k (the mean over its seeds that reported k, summed in seed order)
    once each of its seeds has reported k or ended, then asks should_prune().
Both must prune the same points at the same event, and record the same value at every rung.

Usage: asha_oracle_test.py REPLAY_BINARY [--studies N] [--seed S] [--save FILE]
Exit 0: all agree; 1: a disagreement (the study is printed, and written to --save); 77 (with
the TAE-SKIPPED marker): python3-optuna is not installed.
"""

import argparse
import json
import math
import random
import subprocess
import sys
import warnings

try:
    import optuna
except ImportError:
    print("TAE-SKIPPED: python3-optuna is not installed (apt-get install python3-optuna; "
          "deploy/install-deps.sh lists it)")
    sys.exit(77)

METRIC = "eval/loss"


def make_study(rng, index):
    eta = rng.choice([2, 3, 3, 4])
    min_steps = rng.choice([1, 2, 3, 5, 10])
    maximize = rng.random() < 0.5
    within = rng.choice(["variant", "study"])
    variants = ["baseline"] + [f"abl{i}" for i in range(rng.randint(0, 2))]
    points = rng.randint(1, 14)
    seeds = rng.choice([1, 1, 2, 3])
    eval_every = rng.choice([1, 2, 3, 5, 10])
    total = eval_every * rng.randint(3, 30)
    discrete = rng.random() < 0.6  # quarters: exact sums, many ties
    steps = list(range(eval_every, total + 1, eval_every))

    runs = []
    streams = []
    for variant in variants:
        for p in range(points):
            name = f"{variant}[x={p}]"
            quality = rng.gauss(0, 1)
            for s in range(seeds):
                run_id = len(runs) + 1
                runs.append([run_id, name])
                reported = steps
                if rng.random() < 0.12:  # the run fails part way
                    reported = steps[:rng.randint(0, len(steps))]
                t = rng.uniform(0, 30) if rng.random() < 0.3 else rng.uniform(0, 3)
                speed = rng.uniform(0.5, 2.0)
                events = []
                for i, step in enumerate(reported):
                    t += speed * rng.uniform(0.5, 1.5)
                    value = quality * (1 + 1.0 / (1 + i)) + rng.gauss(0, 0.3)
                    if discrete:
                        value = round(value * 4) / 4
                    if rng.random() < 0.004:
                        value = None  # NaN
                    events.append((t, {"run": run_id, "step": step, "value": value}))
                    if i > 0 and rng.random() < 0.03:  # a resumed attempt resends a step
                        again = reported[rng.randint(0, i)]
                        events.append((t + 0.01, {"run": run_id, "step": again,
                                                  "value": rng.gauss(0, 1)}))
                last = reported[-1] if reported else 0
                events.append((t + 0.02, {"end": run_id, "last_step": last}))
                streams.append(events)
    merged = sorted((e for events in streams for e in events), key=lambda e: e[0])
    return {
        "header": {"metric": METRIC, "min_steps": min_steps, "reduction": eta,
                   "maximize": maximize, "within": within, "runs": runs,
                   "restart_every": rng.choice([0, 0, 7, 23]) if index % 2 else 0},
        "steps": steps,
        "events": [e for _, e in merged],
    }


def optuna_decisions(study):
    """Replays the study through Optuna; returns (prunes {point: event}, values {point: [..]})."""
    header = study["header"]
    point_of = {run_id: point for run_id, point in header["runs"]}
    runs_of = {}
    for run_id, point in header["runs"]:
        runs_of.setdefault(point, []).append(run_id)
    group_of = {p: (p.split("[")[0] if header["within"] == "variant" else "") for p in runs_of}
    direction = "maximize" if header["maximize"] else "minimize"
    studies = {}
    trials = {}
    for point in runs_of:  # one trial per point, in one study per group
        group = group_of[point]
        if group not in studies:
            studies[group] = optuna.create_study(
                direction=direction, sampler=optuna.samplers.RandomSampler(seed=0),
                pruner=optuna.pruners.SuccessiveHalvingPruner(
                    min_resource=header["min_steps"], reduction_factor=header["reduction"],
                    min_early_stopping_rate=0))
        trials[point] = studies[group].ask()
    seen = {run_id: {} for run_id in point_of}
    ended = set()
    next_index = {point: 0 for point in runs_of}
    finished = set()  # pruned, or every step reported
    prunes = {}

    def advance(point, event):
        while point not in finished:
            i = next_index[point]
            if i >= len(study["steps"]):
                finished.add(point)
                return
            step = study["steps"][i]
            if any(step not in seen[r] and r not in ended for r in runs_of[point]):
                return
            next_index[point] += 1
            values = [seen[r][step] for r in runs_of[point] if step in seen[r]]
            if not values:
                continue
            total = 0.0
            for v in values:
                total += v
            trial = trials[point]
            trial.report(total / len(values), step)
            if trial.should_prune():
                prunes[point] = event
                finished.add(point)
                studies[group_of[point]].tell(trial, state=optuna.trial.TrialState.PRUNED)

    for index, event in enumerate(study["events"]):
        if "run" in event:
            run_id = event["run"]
            point = point_of[run_id]
            if point in finished or event["step"] in seen[run_id]:
                continue
            value = event["value"]
            seen[run_id][event["step"]] = math.nan if value is None else value
            advance(point, index)
        else:
            ended.add(event["end"])
            advance(point_of[event["end"]], index)
    values = {}
    for point, trial in trials.items():
        attrs = studies[group_of[point]]._storage.get_trial_system_attrs(trial._trial_id)
        rungs = []
        while f"completed_rung_{len(rungs)}" in attrs:
            rungs.append(attrs[f"completed_rung_{len(rungs)}"])
        values[point] = rungs
    return prunes, values


def tae_decisions(binary, studies):
    lines = []
    for study in studies:
        lines.append(json.dumps({"study": study["header"]}))
        lines.extend(json.dumps(e) for e in study["events"])
        lines.append(json.dumps({"done": True}))
    out = subprocess.run([binary], input="\n".join(lines) + "\n", capture_output=True, text=True,
                         check=True).stdout
    results = [[]]
    for line in out.splitlines():
        record = json.loads(line)
        if record.get("done"):
            results.append([])
        else:
            results[-1].append(record)
    return results[:-1]


def compare(study, decisions):
    """A list of disagreements between TAE's decisions and Optuna's."""
    problems = [d["error"] for d in decisions if "error" in d]
    prunes, values = optuna_decisions(study)
    tae_prunes = {d["point"]: d["event"] for d in decisions if d.get("verdict") == "prune"}
    if tae_prunes != prunes:
        problems.append(f"pruned: tae {sorted(tae_prunes.items())} optuna {sorted(prunes.items())}")
    tae_values = {point: [] for point in values}
    for d in decisions:
        if d.get("verdict") in ("keep", "prune") and d["value"] is not None:
            tae_values[d["point"]].append(d["value"])
    if tae_values != values:
        diff = {p: (tae_values[p], values[p]) for p in values if tae_values[p] != values[p]}
        problems.append(f"rung values (tae, optuna): {diff}")
    return problems, len(prunes)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("binary")
    parser.add_argument("--studies", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=27)
    parser.add_argument("--save", default="")
    args = parser.parse_args()
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    warnings.simplefilter("ignore")
    rng = random.Random(args.seed)
    studies = [make_study(rng, i) for i in range(args.studies)]
    results = tae_decisions(args.binary, studies)
    assert len(results) == len(studies), (len(results), len(studies))
    reports = sum(sum(1 for e in s["events"] if "run" in e) for s in studies)
    points = sum(len({p for _, p in s["header"]["runs"]}) for s in studies)
    pruned = 0
    judged = sum(1 for r in results for d in r if d.get("verdict") in ("keep", "prune"))
    restarted = sum(1 for s in studies if s["header"]["restart_every"])
    failures = 0
    for i, (study, decisions) in enumerate(zip(studies, results)):
        problems, n = compare(study, decisions)
        pruned += n
        if problems:
            failures += 1
            if failures <= 3:
                print(f"study {i} ({json.dumps(study['header'])[:300]}...):")
                for problem in problems:
                    print("  " + problem[:2000])
                if args.save:
                    with open(args.save, "w") as f:
                        json.dump(study, f)
    print(f"{len(studies)} studies ({restarted} with restarts), {points} grid points, "
          f"{reports} metric reports, {judged} rung judgements, {pruned} points pruned: "
          f"{len(studies) - failures} agree with Optuna {optuna.__version__}, {failures} differ")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
