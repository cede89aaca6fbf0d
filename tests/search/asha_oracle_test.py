#!/usr/bin/python3
"""TAE's asha decisions against Optuna's SuccessiveHalvingPruner (issue 27's oracle).

Randomised studies (grid points x seeds of one or more variants, within = variant or study,
eta 2..4, either goal, ties, diverged seeds (NaN from some step on), failed and cancelled seeds,
late starters, resent reports) are recorded as metric reports in arrival order and replayed
  - through server/search's GridSearch (tests/search/asha_replay.cc), some with a simulated taed
    restart every few events, and
  - with bootstrap 1: through Optuna 3.1's SuccessiveHalvingPruner(min_resource = min_steps,
    reduction_factor = eta, min_early_stopping_rate = 0, bootstrap_count = 0), one Optuna trial
    per grid point, one study per competition group: a point reports step k (the mean over its
    seeds that reported k, summed in seed order) once each of its seeds has reported k or ended,
    then asks should_prune(). A seed that diverged (at or before k) or failed before k makes the
    point's value at k the worst (+inf, -inf for max) at once, which Optuna records like any
    value (the oracle records it at the rung in Optuna's storage and prunes, as TAE does, where
    Optuna's pruner would keep a worst value that ties the best so far).
    Both must prune the same points at the same event, and record the same value at every rung.
  - with bootstrap > 1 (a rung waits for that many points, asha.h): every keep or prune must be
    what Optuna's promotion rule (_is_trial_promotable_to_next_rung) gives over the values
    recorded at that rung so far (when a rung judges is tests/unit/asha_test.cc's).

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
    bootstrap = 1 if index % 3 else rng.choice([2, 3, 4, 6])
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
                failed = False
                if rng.random() < 0.12:  # the run ends part way: failed, or cancelled
                    reported = steps[:rng.randint(0, len(steps))]
                    failed = rng.random() < 0.5
                diverged = False
                t = rng.uniform(0, 30) if rng.random() < 0.3 else rng.uniform(0, 3)
                speed = rng.uniform(0.5, 2.0)
                events = []
                for i, step in enumerate(reported):
                    t += speed * rng.uniform(0.5, 1.5)
                    value = quality * (1 + 1.0 / (1 + i)) + rng.gauss(0, 0.3)
                    if discrete:
                        value = round(value * 4) / 4
                    if diverged or rng.random() < 0.004:
                        value = None  # NaN: the run diverged, and stays so
                        diverged = True
                    events.append((t, {"run": run_id, "step": step, "value": value}))
                    if i > 0 and rng.random() < 0.03:  # a resumed attempt resends a step
                        again = reported[rng.randint(0, i)]
                        events.append((t + 0.01, {"run": run_id, "step": again,
                                                  "value": rng.gauss(0, 1)}))
                last = reported[-1] if reported else 0
                events.append((t + 0.02, {"end": run_id, "last_step": last, "failed": failed}))
                streams.append(events)
    merged = sorted((e for events in streams for e in events), key=lambda e: e[0])
    return {
        "header": {"metric": METRIC, "min_steps": min_steps, "reduction": eta,
                   "maximize": maximize, "within": within, "runs": runs,
                   "bootstrap": bootstrap, "train_steps": total,
                   "restart_every": rng.choice([0, 0, 7, 23]) if index % 2 else 0},
        "steps": steps,
        "events": [e for _, e in merged],
    }


def rungs_of(study, trial):
    """How many rungs Optuna has recorded a value of `trial` at."""
    attrs = study._storage.get_trial_system_attrs(trial._trial_id)
    return sum(1 for key in attrs if key.startswith("completed_rung_"))


def number(value):
    """A decision's value as the replay prints it: null (NaN), "inf", "-inf" or a number."""
    if value in ("inf", "-inf"):
        return float(value)
    return value


def check_judgements(study, decisions):
    """bootstrap > 1: each keep or prune against Optuna's promotion rule over the values recorded
    at its rung then."""
    from optuna.pruners._successive_halving import _is_trial_promotable_to_next_rung
    from optuna.study import StudyDirection
    header = study["header"]
    direction = StudyDirection.MAXIMIZE if header["maximize"] else StudyDirection.MINIMIZE
    recorded = {}  # (group, rung) -> values
    waiting = set()  # (point, rung)
    problems = []
    for d in decisions:
        if d.get("verdict") not in ("wait", "keep", "prune"):
            continue
        key = (d["group"], d["rung"])
        value = number(d["value"])
        if d["verdict"] == "wait":
            recorded.setdefault(key, []).append(value)
            waiting.add((d["point"], d["rung"]))
            continue
        if (d["point"], d["rung"]) in waiting:
            waiting.discard((d["point"], d["rung"]))
        else:
            recorded.setdefault(key, []).append(value)
        values = recorded[key]
        if math.isinf(value) and value == (-math.inf if header["maximize"] else math.inf):
            expected = "prune"
        else:
            keep = _is_trial_promotable_to_next_rung(value, list(values), header["reduction"],
                                                     direction)
            expected = "keep" if keep else "prune"
        if expected != d["verdict"]:
            problems.append(f"{d['point']} rung {d['rung']}: {d['verdict']}, Optuna's rule over "
                            f"{values} says {expected}")
    return problems


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
    diverged_at = {}  # run -> its first NaN step: NaN at every step from there
    failed = set()
    worst = -math.inf if header["maximize"] else math.inf
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
            # TAE knows a point's next rung is its worst as soon as a seed diverged or failed
            # without a value there: go straight to the first step at or past that rung.
            rung_step = header["min_steps"] * header["reduction"] ** rungs_of(
                studies[group_of[point]], trials[point])
            at_rung = next((j for j in range(i, len(study["steps"]))
                            if study["steps"][j] >= rung_step), None)
            if at_rung is not None and any(
                    (r in diverged_at or r in failed) and study["steps"][at_rung] not in seen[r]
                    for r in runs_of[point]):
                next_index[point] = i = at_rung
            step = study["steps"][i]
            # A seed that diverged or failed without a value at this step never gets one.
            bad = any((r in diverged_at or r in failed) and step not in seen[r]
                      for r in runs_of[point])
            # TAE judges no rung at or past train.steps, and no report at a run's last step: a
            # run that trained to its end is never pruned. A seed that failed or diverged is
            # still its point's worst at a rung before train.steps.
            if step >= header["train_steps"] and not (bad and rung_step < header["train_steps"]):
                # Done once every seed has ended (one may yet fail before its end).
                if all(r in ended or r in diverged_at for r in runs_of[point]):
                    finished.add(point)
                return
            if not bad and any(step not in seen[r] and r not in ended for r in runs_of[point]):
                return
            next_index[point] += 1
            values = [seen[r][step] for r in runs_of[point] if step in seen[r]]
            if not values and not bad:
                continue
            total = 0.0
            for v in values:
                total += v
            trial = trials[point]
            trial.report(worst if bad else total / len(values), step)
            group_study = studies[group_of[point]]
            if bad:
                # Recorded at the rung like any value, and always pruned (Optuna's pruner would
                # keep a worst value that ties the best so far, and go on to the next rung).
                k = rungs_of(group_study, trial)
                prune = step >= header["min_steps"] * header["reduction"] ** k
                if prune:
                    group_study._storage.set_trial_system_attr(
                        trial._trial_id, f"completed_rung_{k}", worst)
            else:
                prune = trial.should_prune()
            if prune:
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
            if run_id in diverged_at:
                continue
            if value is None:
                diverged_at[run_id] = event["step"]
            else:
                seen[run_id][event["step"]] = value
            advance(point, index)
        else:
            ended.add(event["end"])
            if event.get("failed"):
                failed.add(event["end"])
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
    if study["header"].get("bootstrap", 1) > 1:
        problems += check_judgements(study, decisions)
        return problems, sum(1 for d in decisions if d.get("verdict") == "prune")
    prunes, values = optuna_decisions(study)
    tae_prunes = {d["point"]: d["event"] for d in decisions if d.get("verdict") == "prune"}
    if tae_prunes != prunes:
        problems.append(f"pruned: tae {sorted(tae_prunes.items())} optuna {sorted(prunes.items())}")
    tae_values = {point: [] for point in values}
    for d in decisions:
        if d.get("verdict") in ("keep", "prune") and d["value"] is not None:
            tae_values[d["point"]].append(number(d["value"]))
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
