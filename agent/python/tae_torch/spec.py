"""The run spec (run.json) of one run, as the torch engine reads it.

run.json is the flat object taed writes for every run: experiment-file keys such as
"model.layers" and "train.lr" (docs/design.md section 10, docs/engine.md). The keys themselves
(names, types, defaults, ranges, allowed values, which keys a spec may leave out and which are on
the training trajectory) are not written here: they are the one schema, common/spec/schema.cc,
which `tae-train --schema` prints and the build writes to schema.json beside this file
($TAE_SCHEMA names another copy). A spec is checked against it as tae-train checks it
(common/spec/run_spec.cc), with the same messages; then the combinations of keys, as taed and
tae-train check them (common/spec/checks.cc and task_checks.cc: the same order and messages);
then what this engine alone refuses. An error names the key.
"""

import copy
import functools
import json
import math
import os
from dataclasses import dataclass

SCHEMA_ENV = "TAE_SCHEMA"
SCHEMA_FILE = "schema.json"
MAX_SHOWN = 60
INT64 = 1 << 63


class SpecError(ValueError):
    """A key of the run spec is missing, of the wrong type or out of range."""


# ---- the schema ----

def schema_path():
    """$TAE_SCHEMA, else schema.json beside this file (where the build and install put it)."""
    return os.environ.get(SCHEMA_ENV) or os.path.join(
        os.path.dirname(os.path.abspath(__file__)), SCHEMA_FILE)


@functools.lru_cache(maxsize=None)
def _load_schema(path):
    try:
        with open(path, encoding="utf-8") as f:
            loaded = json.load(f)
    except OSError as e:
        raise SpecError(
            f"the run-key schema {path} cannot be read ({e.strerror}): building tae-train writes "
            "it beside the tae_torch package it runs (share/tae/python/tae_torch/schema.json); "
            f"where TAE's C++ is not built, copy one (`tae-train --schema > schema.json`) and "
            f"set {SCHEMA_ENV} to it") from None
    except json.JSONDecodeError as e:
        raise SpecError(f"the run-key schema {path} is not JSON: {e}") from None
    loaded["by_name"] = {entry["name"]: entry for entry in loaded["keys"]}
    return loaded


def schema():
    """The run-spec schema: {"tables", "ignored", "keys": [entry, ...], "by_name"}."""
    return _load_schema(schema_path())


def default_spec():
    """A run spec with every key at the schema's default (train.seed 0)."""
    return {entry["name"]: copy.deepcopy(entry["default"]) for entry in schema()["keys"]}


def _table(name):
    return name.split(".", 1)[0] if "." in name else ""


def _leaf(name):
    return name.split(".", 1)[1]


# ---- the typed config ----

class _Table:
    """The keys of one table of a run spec as attributes ("model.layers" -> .layers): the
    schema's defaults, then the values given."""

    TABLE = ""

    def __init__(self, **values):
        fields = {_leaf(entry["name"]): copy.deepcopy(entry["default"])
                  for entry in schema()["keys"] if _table(entry["name"]) == self.TABLE}
        unknown = sorted(set(values) - set(fields))
        if unknown:
            raise TypeError(f"{type(self).__name__}: no key {self.TABLE}.{unknown[0]}")
        fields.update(values)
        self.__dict__.update(fields)

    def __eq__(self, other):
        return type(self) is type(other) and vars(self) == vars(other)

    def __repr__(self):
        items = ", ".join(f"{k}={v!r}" for k, v in vars(self).items())
        return f"{type(self).__name__}({items})"


class ModelConfig(_Table):
    TABLE = "model"

    def kv(self):
        return self.kv_heads if self.kv_heads > 0 else self.heads

    def hd(self):
        return self.head_dim if self.head_dim > 0 else self.d_model // self.heads

    def kept_heads(self, layer):
        pruned = set(self.prune_heads.get(layer, []))
        return [h for h in range(self.heads) if h not in pruned]


class TrainingConfig(_Table):
    TABLE = "train"


class EvalConfig(_Table):
    TABLE = "eval"


@dataclass
class RunConfig:
    model: ModelConfig
    train: TrainingConfig
    eval: EvalConfig


# ---- one value against its schema entry (common/spec/run_spec.cc's CheckValue) ----

def _error(key, why):
    return SpecError(f'run spec: key "{key}": {why}')


def _shown(value):
    text = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    return text[:MAX_SHOWN] + "..." if len(text) > MAX_SHOWN else text


def _is_int(value):
    return isinstance(value, int) and not isinstance(value, bool)


def _is_int64(value):
    return _is_int(value) and -INT64 <= value < INT64


def _is_number(value):
    return (_is_int(value) or isinstance(value, float)) and math.isfinite(value)


def _in_range(entry, value):
    """Within the entry's bounds (an absent min or max is unbounded)."""
    if "min" in entry:
        low = entry["min"]
        if not (value > low if entry["min_open"] else value >= low):
            return False
    if "max" in entry:
        high = entry["max"]
        if not (value < high if entry["max_open"] else value <= high):
            return False
    return True


def _out_of_range(entry, value):
    if not entry["range"]:
        return f"is out of range, got {_shown(value)}"
    return f"must be {entry['range']}, got {_shown(value)}"


def _check_elements(entry, values, integers, prefix):
    seen = set()
    kind = "integers" if integers else "numbers"
    for item in values:
        typed = _is_int64(item) if integers else _is_number(item)
        if not typed or not _in_range(entry, item):
            bounds = f" {entry['range']}" if entry["range"] else ""
            return f"{prefix}entries must be {kind}{bounds}, got {_shown(item)}"
        if entry.get("unique") and float(item) in seen:
            return f"{prefix}{_shown(item)} is listed twice"
        seen.add(float(item))
    return None


def _check_head_map(entry, value):
    if not isinstance(value, dict):
        return f"must be an object of layer -> head indices, got {_shown(value)}"
    for layer in sorted(value):  # in the order tae-train's JSON object keeps them
        heads = value[layer]
        if not 0 < len(layer) <= 6 or any(c not in "0123456789" for c in layer):
            return f'"{layer}" is not a layer index'
        if not isinstance(heads, list):
            return f"layer {layer}: must be a list of head indices, got {_shown(heads)}"
        why = _check_elements(entry, heads, True, f"layer {layer}: ")
        if why:
            return why
    return None


def _check_value(entry, value):
    kind = entry["type"]
    if kind == "int":
        if not _is_int(value):
            return f"must be an integer, got {_shown(value)}"
        if not _is_int64(value) or not _in_range(entry, value):
            return _out_of_range(entry, value)
    elif kind == "float":
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return f"must be a number, got {_shown(value)}"
        if not _is_number(value) or not _in_range(entry, value):
            return _out_of_range(entry, value)
    elif kind == "bool":
        if not isinstance(value, bool):
            return f"must be true or false, got {_shown(value)}"
    elif kind in ("string", "enum"):
        if not isinstance(value, str):
            return f"must be a string, got {_shown(value)}"
        if kind == "enum" and value not in entry["allowed"]:
            return f"must be one of {'|'.join(entry['allowed'])}, got {_shown(value)}"
    elif kind in ("int_array", "float_array"):
        integers = kind == "int_array"
        if not isinstance(value, list):
            return f"must be a list of {'integers' if integers else 'numbers'}, got {_shown(value)}"
        if entry.get("non_empty") and not value:
            return "must not be empty"
        return _check_elements(entry, value, integers, "")
    elif kind == "head_map":
        return _check_head_map(entry, value)
    else:
        return "has a type run specs do not hold"
    return None


def check(spec):
    """The trainer keys of a run.json object, checked by the schema and complete (a key a spec may
    leave out stands for its absent value); SpecError names the first bad key."""
    if not isinstance(spec, dict):
        raise SpecError("run spec: must be a JSON object")
    s = schema()
    for name in spec:
        if _table(name) in s["tables"] and name not in s["by_name"] and name not in s["ignored"]:
            raise _error(name, "unknown key (is the torch engine older than taectl?)")
    checked = {}
    for entry in s["keys"]:
        name = entry["name"]
        if name not in spec:
            if "absent" not in entry:
                raise _error(name, "missing")
            checked[name] = copy.deepcopy(entry["absent"])
            continue
        why = _check_value(entry, spec[name])
        if why:
            raise _error(name, why)
        checked[name] = spec[name]
    return checked


def _typed(entry, value):
    """The attribute form of a checked value: sorted lists, {layer: sorted heads}, floats."""
    kind = entry["type"]
    if kind == "int_array":
        return sorted(value)
    if kind == "float_array":
        return sorted(float(v) for v in value)
    if kind == "head_map":
        return {int(layer): sorted(heads) for layer, heads in value.items()}
    if kind == "float":
        return float(value)
    return value


# ---- the combinations of keys: a port of common/spec/checks.cc and task_checks.cc, which taed
# and tae-train run (same order, same messages; tests/train/torch_schema_agreement_test.py) ----

# Of each generated task (every task but lm): the smallest train.seq_len and what the positions
# are for, the smallest train.vocab and what the symbols are for (docs/tasks.md).
_TASK_NEEDS = {
    "copy": (2, "a symbol, SEP and its copy", 2, ""),
    "reverse": (4, "a sequence of at least 2 symbols, SEP and its rearrangement", 2, ""),
    "sort": (4, "a sequence of at least 2 symbols, SEP and its rearrangement", 2, ""),
    "assoc_recall": (8, "2 key-value pairs, SEP and 2 queries with their answers", 4,
                     "keys are the lower half of the symbols and values the upper half"),
    "induction": (5, "a block of 2 or 3 symbols and its repeat, so the length can vary", 2, ""),
    "mod_add": (4, "one problem a + b = c is 5 tokens", 2, ""),
}


def _check_layers(c, key):
    layers = c["model.layers"]
    for layer in c[key]:
        if layer >= layers:
            raise _error(key, f"layer {layer} does not exist (model.layers is {layers})")


def _check_pruned_heads(c):
    key = "model.prune_heads"
    layers, heads = c["model.layers"], c["model.heads"]
    for layer_text, pruned in sorted(c[key].items()):  # tae-train's JSON object keeps this order
        layer = int(layer_text)
        if layer >= layers:
            raise _error(key, f"layer {layer} does not exist (model.layers is {layers})")
        for head in pruned:
            if head >= heads:
                raise _error(key, f"layer {layer}: head {head} does not exist "
                             f"(model.heads is {heads})")
        if len(pruned) == heads and layer not in c["model.drop_attention_layers"]:
            raise _error(key, f"layer {layer}: all {heads} heads are pruned but the layer keeps "
                         f"its attention (add {layer} to model.drop_attention_layers to remove "
                         "the sublayer)")


def task_shape_problem(task, vocab, seq_len):
    """(key, why) when train.vocab or train.seq_len leaves no room for the task's layout, else
    None: the one table of what each task needs, which tasks.py's generators ask too."""
    if task not in _TASK_NEEDS:
        return None
    min_seq_len, needs, min_vocab, vocab_needs = _TASK_NEEDS[task]
    if vocab < min_vocab:
        why = f" ({vocab_needs})" if vocab_needs else ""
        return "train.vocab", f"task {task} needs at least {min_vocab} symbols{why}, got {vocab}"
    if seq_len < min_seq_len:
        return "train.seq_len", (f"task {task} needs at least {min_seq_len} positions ({needs}), "
                                 f"got {seq_len}")
    return None


def _check_task(c):
    problem = task_shape_problem(c["train.task"], c["train.vocab"], c["train.seq_len"])
    if problem:
        raise _error(*problem)


def _check_config(c):
    """The combinations of keys of `c`, a spec that check() returned (flat, values as given)."""
    d_model, heads, head_dim = c["model.d_model"], c["model.heads"], c["model.head_dim"]
    if head_dim == 0 and d_model % heads != 0:
        raise _error("model.heads", f"{heads} does not divide model.d_model {d_model}")
    kv_heads = c["model.kv_heads"]  # 0 = "= model.heads", which always divides
    if kv_heads != 0 and heads % kv_heads != 0:
        raise _error("model.kv_heads", f"{kv_heads} does not divide model.heads {heads}")
    width = head_dim if head_dim != 0 else d_model // heads
    if c["model.pos_encoding"] == "rope" and width % 2 != 0:
        raise _error("model.pos_encoding", f"rope needs an even head width, got {width} (set "
                     "model.head_dim or change model.heads)")
    _check_pruned_heads(c)
    _check_layers(c, "model.drop_attention_layers")
    _check_layers(c, "model.drop_ffn_layers")
    _check_task(c)
    if c["train.warmup"] > c["train.steps"]:
        raise _error("train.warmup", f"{c['train.warmup']} is more than train.steps "
                     f"{c['train.steps']}")


# ---- what the torch engine alone refuses ----

def _check_engine(t, e):
    if t.sharding == "fsdp" and t.head_importance:
        raise _error("train.head_importance", 'not supported with train.sharding = "fsdp" (head '
                     "scores take gradients of gates, not of the sharded weights)")
    for entry in schema()["keys"]:
        name = entry["name"]
        if _table(name) == "eval" and getattr(e, _leaf(name)) != _typed(entry, entry["default"]):
            raise _error(name, 'not supported by the torch engine (train.engine = "libtorch" '
                         "evaluates compression)")


def parse(spec):
    """RunConfig of a run.json object; SpecError names the first bad key."""
    checked = check(spec)
    _check_config(checked)
    tables = {"model": {}, "train": {}, "eval": {}}
    for entry in schema()["keys"]:
        name = entry["name"]
        tables[_table(name)][_leaf(name)] = _typed(entry, checked[name])
    config = RunConfig(ModelConfig(**tables["model"]), TrainingConfig(**tables["train"]),
                       EvalConfig(**tables["eval"]))
    # 0 stays "= model.heads" (ModelConfig.kv resolves it, as tae-train's KvHeads does).
    _check_engine(config.train, config.eval)
    return config


def load(path):
    """The RunConfig and the JSON object of the run.json at `path`."""
    try:
        with open(path, encoding="utf-8") as f:
            spec = json.load(f)
    except OSError as e:
        raise SpecError(f"cannot read {path}: {e.strerror}") from None
    except json.JSONDecodeError as e:
        raise SpecError(f"{path}: not JSON: {e}") from None
    return parse(spec), spec


def fingerprint(spec):
    """What identifies a run for checkpoints: its keys on the training trajectory (the schema's
    "trajectory"), as compact JSON with sorted keys."""
    by_name = schema()["by_name"]
    kept = {k: v for k, v in spec.items() if k in by_name and by_name[k]["trajectory"]}
    return json.dumps(kept, sort_keys=True, separators=(",", ":"))
