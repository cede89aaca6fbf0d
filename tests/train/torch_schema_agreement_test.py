#!/usr/bin/python3
"""tae-train and the torch engine read a run spec by the one schema (common/spec/schema.cc): the
same specs are accepted and refused, with the same message naming the same key.

usage: torch_schema_agreement_test.py TAE_TRAIN PYTHON_DIR

The cases come from the schema itself (schema.json beside the torch engine's package, which
must be what this tae-train prints with --schema): every key missing, mistyped, at and beyond
each bound, every allowed value and one that is not, lists with bad, out-of-range and repeated
entries, unknown keys; and the combinations of keys (common/spec/checks.cc, which taed runs too,
and its port in tae_torch/spec.py), alone and several at once, so both must also find them in the
same order. tae-train checks them all in one `--check` run; the torch engine with
tae_torch.spec.parse (no torch needed). Where the torch engine refuses by a rule of its own
(compression, eval.*, is tae-train's; head scores with fsdp) the case says so and the test expects
exactly that.
"""

import copy
import json
import os
import re
import subprocess
import sys
import tempfile

TAE_TRAIN = os.path.abspath(sys.argv[1])
PYTHON_DIR = os.path.abspath(sys.argv[2])
sys.path.insert(0, PYTHON_DIR)

from tae_torch import spec as spec_lib  # noqa: E402

KEY = re.compile(r'run spec: key "([^"]+)": (.*)')


def base_spec():
    spec = spec_lib.default_spec()
    spec["train.engine"] = "torch"  # so tae-train's own bf16/fsdp refusals do not apply
    return spec


def edges(entry):
    """(value, inside) pairs at each finite bound: the bound (nudged in when open) and the
    nearest value beyond it."""
    out = []
    integers = entry["type"] in ("int", "int_array", "head_map")
    step = 1 if integers else 1e-6
    for side, sign in (("min", -1), ("max", 1)):
        if side not in entry or abs(entry[side]) > 1e12:
            continue
        bound = int(entry[side]) if integers else entry[side]
        if entry[f"{side}_open"]:
            out += [(bound - sign * step, True), (bound, False)]
        else:
            out += [(bound, True), (bound + sign * step, False)]
    return out


def cases():
    """(name, spec, own) for every case: `own` is the key the torch engine alone refuses by a
    rule of its own where tae-train accepts the spec, else None (both must give the same
    answer)."""
    base = base_spec()
    s = spec_lib.schema()
    out = [("the defaults", base, None)]

    def with_(key, value, label):
        spec = copy.deepcopy(base)
        if value is KeyError:
            del spec[key]
        else:
            spec[key] = value
        if key == "train.steps" and isinstance(value, int) and spec["train.warmup"] > value:
            spec["train.warmup"] = max(value, 0)  # warmup past steps is a combination
        entry = s["by_name"].get(key)
        own = None
        if key.startswith("eval.") and entry and spec.get(key, entry["default"]) != \
                entry["default"]:
            own = key  # a non-default eval.* value: compression is tae-train's
        out.append((f"{key} {label}", spec, own))

    for entry in s["keys"]:
        key, kind = entry["name"], entry["type"]
        with_(key, KeyError, "missing")
        with_(key, [] if kind in ("int", "float", "bool", "string", "enum") else "x", "mistyped")
        if kind == "int":
            with_(key, 1.5, "= 1.5")
        if kind in ("int", "float"):
            if key in ("model.d_model", "model.heads"):
                continue  # tied by divisibility: the combinations below
            for value, inside in edges(entry):
                with_(key, value, f"= {value!r} ({'inside' if inside else 'beyond'})")
        if kind == "enum":
            for value in entry["allowed"]:
                with_(key, value, f"= {value!r}")
            with_(key, "nonsense", "= 'nonsense'")
        if kind in ("int_array", "float_array"):
            element = 1 if kind == "int_array" else 0.5
            with_(key, ["x"], "with a string entry")
            with_(key, [element], f"= [{element}]")
            for value, inside in edges(entry):
                with_(key, [value], f"= [{value!r}] ({'inside' if inside else 'beyond'})")
            if entry["unique"]:
                with_(key, [element, element], "with an entry twice")
            if entry["non_empty"]:
                with_(key, [], "empty")
        if kind == "head_map":
            for value in ({"x": [0]}, {"0": "x"}, {"0": [-1]}, {"0": [1, 1]}, {"0": [1]},
                          {"1": []}):
                with_(key, value, f"= {json.dumps(value)}")
    for key in ("model.frobnicate", "train.frobnicate", "eval.frobnicate", "train.seeds",
                "resources.slots", "name", "params.width"):
        with_(key, 1, "(not a run key, or ignored)")
    # The combinations of keys (common/spec/checks.cc and its port in tae_torch/spec.py): the
    # same key and message, and where several are wrong, the same one first.
    for label, changes in (
            ("heads that do not divide d_model", {"model.heads": 3}),
            ("kv_heads that do not divide heads", {"model.kv_heads": 3}),
            ("rope with an odd head width", {"model.pos_encoding": "rope", "model.head_dim": 15}),
            ("rope with an odd width from d_model / heads",
             {"model.pos_encoding": "rope", "model.d_model": 12, "model.heads": 4}),
            ("head_dim set, heads need not divide", {"model.heads": 3, "model.head_dim": 16}),
            ("a dropped layer that does not exist", {"model.drop_ffn_layers": [2]}),
            ("dropped layers that do not exist, the larger first",
             {"model.drop_attention_layers": [0, 3, 2]}),
            ("pruned heads of a missing layer", {"model.prune_heads": {"2": [0]}}),
            ("pruned heads of missing layers 10 and 2",
             {"model.prune_heads": {"2": [0], "10": [0]}}),
            ("a pruned head that does not exist", {"model.prune_heads": {"0": [4]}}),
            ("pruned heads that do not exist, the larger first",
             {"model.prune_heads": {"1": [1, 6, 5]}}),
            ("every head pruned", {"model.prune_heads": {"0": [0, 1, 2, 3]}}),
            ("every head pruned, attention dropped",
             {"model.prune_heads": {"0": [0, 1, 2, 3]}, "model.drop_attention_layers": [0]}),
            ("a task that needs more positions",
             {"train.task": "assoc_recall", "train.seq_len": 7}),
            ("a task that needs more positions (induction)",
             {"train.task": "induction", "train.seq_len": 4}),
            ("a task that needs more symbols", {"train.task": "assoc_recall", "train.vocab": 3}),
            ("lm has no minimum shape", {"train.task": "lm", "train.vocab": 2}),
            ("warmup past the steps", {"train.warmup": 600}),
            ("warmup at the steps", {"train.warmup": 500}),
            ("heads and warmup both wrong", {"model.heads": 3, "train.warmup": 600}),
            ("a missing layer and a task that does not fit",
             {"model.drop_ffn_layers": [5], "train.task": "assoc_recall", "train.seq_len": 6}),
            ("a task that does not fit and warmup past the steps",
             {"train.task": "assoc_recall", "train.vocab": 2, "train.seq_len": 4,
              "train.warmup": 600})):
        spec = copy.deepcopy(base)
        spec.update(changes)
        out.append((label, spec, None))
    for label, changes, own in (
            ("head scores with fsdp", {"train.sharding": "fsdp", "train.head_importance": True},
             "train.head_importance"),):
        spec = copy.deepcopy(base)
        spec.update(changes)
        out.append((label, spec, own))
    return out


def tae_train(specs, workdir):
    """tae-train --check's answer for each spec: None (accepted) or its error."""
    paths = []
    for index, spec in enumerate(specs):
        paths.append(os.path.join(workdir, f"run{index}.json"))
        with open(paths[-1], "w") as f:
            json.dump(spec, f)
    proc = subprocess.run([TAE_TRAIN, "--check"] + paths, capture_output=True, text=True,
                          check=False)
    lines = proc.stdout.splitlines()
    if proc.returncode not in (0, 2) or len(lines) != len(paths):
        raise AssertionError(f"tae-train --check exited {proc.returncode}: {proc.stderr}")
    answers = []
    for path, line in zip(paths, lines):
        answer = line.removeprefix(f"{path}: ")
        answers.append(None if answer == "ok" else answer)
    return answers


def torch_engine(spec):
    try:
        spec_lib.parse(spec)
    except spec_lib.SpecError as e:
        return str(e)
    return None


def compare(cpp, py, own):
    """A problem with the two answers, or None."""
    if own and cpp is None:
        if py and py.startswith(f'run spec: key "{own}": '):
            return None
        return f"expected tae-train to accept and the torch engine to refuse {own}: " \
               f"tae-train: {cpp}; torch engine: {py}"
    if (cpp is None) != (py is None):
        return f"tae-train {'accepts' if cpp is None else 'refuses'}, the torch engine " \
               f"{'accepts' if py is None else 'refuses'}: {cpp or py}"
    if cpp is None:
        return None
    cpp_key, py_key = KEY.match(cpp), KEY.match(py)
    if not cpp_key or not py_key or cpp_key.group(1) != py_key.group(1):
        return f"different keys: tae-train: {cpp}; torch engine: {py}"
    same = cpp == py or ("unknown key" in cpp and "unknown key" in py)
    return None if same else f"different messages: tae-train: {cpp}; torch engine: {py}"


def main():
    printed = subprocess.run([TAE_TRAIN, "--schema"], capture_output=True, text=True, check=True)
    with open(spec_lib.schema_path()) as f:
        if json.loads(printed.stdout) != json.load(f):
            print(f"FAIL: {spec_lib.schema_path()} is not what {TAE_TRAIN} --schema prints "
                  "(rebuild tae-train)")
            return 1
    all_cases = cases()
    with tempfile.TemporaryDirectory() as workdir:
        answers = tae_train([spec for _, spec, _ in all_cases], workdir)
    failures = 0
    refused = 0
    for (name, spec, own), cpp in zip(all_cases, answers):
        py = torch_engine(spec)
        refused += cpp is not None
        problem = compare(cpp, py, own)
        if problem:
            failures += 1
            print(f"FAIL {name}: {problem}")
    print(f"{len(all_cases)} run specs, {refused} refused by tae-train, {failures} disagreements")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
