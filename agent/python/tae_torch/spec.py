"""The run spec (run.json) of one run, as the torch engine reads it.

run.json is the flat object taed writes for every run: experiment-file keys such as
"model.layers" and "train.lr" (docs/design.md section 10, docs/engine.md). The keys, their
ranges and the combinations that cannot work are the ones tae-train checks
(agent/train/config.cc); an error names the key, as tae-train's do.
"""

import json
from dataclasses import dataclass, field
from typing import Dict, List


class SpecError(ValueError):
    """A key of the run spec is missing, of the wrong type or out of range."""


ACTIVATIONS = ("relu", "gelu", "swiglu", "geglu")
NORMS = ("layernorm", "rmsnorm", "scalenorm", "none")
NORM_POSITIONS = ("pre", "post", "sandwich")
POS_ENCODINGS = ("none", "sinusoidal", "learned", "rope", "alibi")
INITS = ("gpt2", "torch")
OPTIMIZERS = ("adamw", "sgd")
SCHEDULES = ("constant", "linear", "cosine")
TASKS = ("copy", "reverse", "sort", "assoc_recall", "induction", "mod_add", "lm")
ENGINES = ("libtorch", "torch")
PRECISIONS = ("fp32", "bf16")
SHARDINGS = ("none", "fsdp")

# Keys a spec may leave out (with these values): those added after the first run.json format.
# model.init: such specs were stored before the key existed, when every run started from gpt2 (a
# retried or resumed run keeps it); new specs name the key, at the schema's default "torch".
OPTIONAL = {"model.init": "gpt2", "train.engine": "libtorch", "train.log_every": 10,
            "train.precision": "fp32", "train.sharding": "none"}

# Keys that do not change the training trajectory, left out of the checkpoint fingerprint.
NOT_FINGERPRINTED = ("train.threads", "train.checkpoint_every", "train.head_importance",
                     "train.eval_every", "train.profile_at", "train.profile_steps",
                     "train.log_every")


@dataclass
class ModelConfig:
    layers: int = 2
    d_model: int = 64
    heads: int = 4
    kv_heads: int = 0
    head_dim: int = 0
    ffn_mult: int = 4
    activation: str = "gelu"
    norm: str = "layernorm"
    norm_position: str = "pre"
    pos_encoding: str = "learned"
    residual: bool = True
    causal: bool = True
    drop_attention_layers: List[int] = field(default_factory=list)
    drop_ffn_layers: List[int] = field(default_factory=list)
    prune_heads: Dict[int, List[int]] = field(default_factory=dict)
    tie_embeddings: bool = False
    bias: bool = True
    dropout: float = 0.0
    init: str = "torch"

    def kv(self):
        return self.kv_heads if self.kv_heads > 0 else self.heads

    def hd(self):
        return self.head_dim if self.head_dim > 0 else self.d_model // self.heads

    def kept_heads(self, layer):
        pruned = set(self.prune_heads.get(layer, []))
        return [h for h in range(self.heads) if h not in pruned]


@dataclass
class TrainingConfig:
    task: str = "copy"
    data: str = ""
    vocab: int = 16
    seq_len: int = 32
    batch_size: int = 32
    steps: int = 500
    optimizer: str = "adamw"
    lr: float = 3e-3
    schedule: str = "cosine"
    warmup: int = 50
    weight_decay: float = 0.0
    grad_clip: float = 1.0
    eval_every: int = 100
    eval_batches: int = 8
    checkpoint_every: int = 0
    head_importance: bool = False
    threads: int = 0
    seed: int = 0
    engine: str = "libtorch"
    profile_at: tuple = ()  # steps that start a profile of profile_steps steps (docs/profiles.md)
    profile_steps: int = 5
    log_every: int = 10  # steps per train/* and perf/* line
    precision: str = "fp32"  # bf16: autocast forward passes, fp32 master weights
    sharding: str = "none"  # fsdp: parameters, gradients and optimizer state sharded


@dataclass
class RunConfig:
    model: ModelConfig
    train: TrainingConfig


class _Reader:
    def __init__(self, spec):
        self.spec = spec

    def get(self, key):
        if key in self.spec:
            return self.spec[key]
        if key in OPTIONAL:
            return OPTIONAL[key]
        raise SpecError(f'run spec: key "{key}": missing')

    def int(self, key, low, high):
        value = self.get(key)
        if isinstance(value, bool) or not isinstance(value, int):
            raise SpecError(f'run spec: key "{key}": must be an integer, got {json.dumps(value)}')
        if not low <= value <= high:
            raise SpecError(f'run spec: key "{key}": must be in [{low}, {high}], got {value}')
        return value

    def float(self, key, low, high):
        value = self.get(key)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise SpecError(f'run spec: key "{key}": must be a number, got {json.dumps(value)}')
        if not low <= value <= high:
            raise SpecError(f'run spec: key "{key}": must be in [{low}, {high}], got {value}')
        return float(value)

    def bool(self, key):
        value = self.get(key)
        if not isinstance(value, bool):
            raise SpecError(f'run spec: key "{key}": must be true or false, got {json.dumps(value)}')
        return value

    def str(self, key):
        value = self.get(key)
        if not isinstance(value, str):
            raise SpecError(f'run spec: key "{key}": must be a string, got {json.dumps(value)}')
        return value

    def enum(self, key, names):
        value = self.str(key)
        if value not in names:
            raise SpecError(f'run spec: key "{key}": must be one of {"|".join(names)}, '
                            f'got "{value}"')
        return value

    def layers(self, key, layers):
        value = self.get(key)
        if not isinstance(value, list) or any(
                isinstance(v, bool) or not isinstance(v, int) for v in value):
            raise SpecError(f'run spec: key "{key}": must be a list of layer indices')
        for v in value:
            if not 0 <= v < layers:
                raise SpecError(f'run spec: key "{key}": layer {v} does not exist '
                                f'(model.layers is {layers})')
        return sorted(set(value))


KNOWN_KEYS = (
    "model.layers", "model.d_model", "model.heads", "model.kv_heads", "model.head_dim",
    "model.ffn_mult", "model.activation", "model.norm", "model.norm_position",
    "model.pos_encoding", "model.residual", "model.causal", "model.drop_attention_layers",
    "model.drop_ffn_layers", "model.prune_heads", "model.tie_embeddings", "model.bias",
    "model.dropout", "model.init", "train.task", "train.data", "train.vocab", "train.seq_len",
    "train.batch_size", "train.steps", "train.optimizer", "train.lr", "train.schedule",
    "train.warmup", "train.weight_decay", "train.grad_clip", "train.eval_every",
    "train.eval_batches", "train.checkpoint_every", "train.head_importance", "train.threads",
    "train.seed", "train.engine", "train.profile_at", "train.profile_steps", "train.log_every",
    "train.precision", "train.sharding")


def parse(spec):
    """RunConfig of a run.json object; SpecError names the first bad key."""
    if not isinstance(spec, dict):
        raise SpecError("run spec: not a JSON object")
    for key in spec:
        if key.startswith(("model.", "train.")) and key not in KNOWN_KEYS and key != "train.seeds":
            raise SpecError(f'run spec: key "{key}": unknown key (is the torch engine older '
                            'than taectl?)')
    for key, default in (("eval.prune_heads_by_importance", []), ("eval.quantize", "none")):
        if spec.get(key, default) != default:
            raise SpecError(f'run spec: key "{key}": not supported by the torch engine '
                            '(train.engine = "libtorch" evaluates compression)')
    r = _Reader(spec)
    m = ModelConfig()
    m.layers = r.int("model.layers", 0, 64)
    m.d_model = r.int("model.d_model", 1, 1 << 16)
    m.heads = r.int("model.heads", 1, 1 << 16)
    m.head_dim = r.int("model.head_dim", 0, 1 << 16)
    if m.head_dim == 0 and m.d_model % m.heads != 0:
        raise SpecError(f'run spec: key "model.heads": {m.heads} heads do not divide d_model '
                        f'{m.d_model} (set model.head_dim)')
    m.kv_heads = r.int("model.kv_heads", 0, m.heads)
    if m.heads % m.kv() != 0:
        raise SpecError(f'run spec: key "model.kv_heads": {m.kv_heads} does not divide '
                        f'model.heads {m.heads}')
    m.ffn_mult = r.int("model.ffn_mult", 1, 64)
    m.activation = r.enum("model.activation", ACTIVATIONS)
    m.norm = r.enum("model.norm", NORMS)
    m.norm_position = r.enum("model.norm_position", NORM_POSITIONS)
    m.pos_encoding = r.enum("model.pos_encoding", POS_ENCODINGS)
    if m.pos_encoding == "rope" and m.hd() % 2 != 0:
        raise SpecError(f'run spec: key "model.pos_encoding": rope needs an even head width, '
                        f'got {m.hd()}')
    m.residual = r.bool("model.residual")
    m.causal = r.bool("model.causal")
    m.drop_attention_layers = r.layers("model.drop_attention_layers", m.layers)
    m.drop_ffn_layers = r.layers("model.drop_ffn_layers", m.layers)
    m.prune_heads = _prune_heads(r.get("model.prune_heads"), m)
    m.tie_embeddings = r.bool("model.tie_embeddings")
    m.bias = r.bool("model.bias")
    m.dropout = r.float("model.dropout", 0.0, 0.99)
    m.init = r.enum("model.init", INITS)

    t = TrainingConfig()
    t.task = r.enum("train.task", TASKS)
    t.data = r.str("train.data")
    t.vocab = r.int("train.vocab", 1, 1 << 20)
    t.seq_len = r.int("train.seq_len", 2, 1 << 16)
    t.batch_size = r.int("train.batch_size", 1, 1 << 16)
    t.steps = r.int("train.steps", 1, 1 << 40)
    t.optimizer = r.enum("train.optimizer", OPTIMIZERS)
    t.lr = r.float("train.lr", 1e-12, 1e3)
    t.schedule = r.enum("train.schedule", SCHEDULES)
    t.warmup = r.int("train.warmup", 0, 1 << 40)
    if t.warmup > t.steps:
        raise SpecError(f'run spec: key "train.warmup": {t.warmup} is more than train.steps '
                        f'{t.steps}')
    t.weight_decay = r.float("train.weight_decay", 0.0, 1e3)
    t.grad_clip = r.float("train.grad_clip", 0.0, 1e9)
    t.eval_every = r.int("train.eval_every", 0, 1 << 40)
    t.eval_batches = r.int("train.eval_batches", 1, 1 << 20)
    t.checkpoint_every = r.int("train.checkpoint_every", 0, 1 << 40)
    t.head_importance = r.bool("train.head_importance")
    t.threads = r.int("train.threads", 0, 4096)
    t.seed = r.int("train.seed", 0, (1 << 63) - 1)
    if "train.profile_at" in spec:
        at = spec["train.profile_at"]
        if not isinstance(at, list) or any(isinstance(v, bool) or not isinstance(v, int) or v < 1
                                           for v in at):
            raise SpecError('run spec: key "train.profile_at": must be a list of steps >= 1, '
                            f'got {json.dumps(at)}')
        t.profile_at = tuple(sorted(set(at)))
    if "train.profile_steps" in spec:
        t.profile_steps = r.int("train.profile_steps", 1, 1000)
    t.engine = r.enum("train.engine", ENGINES)
    t.log_every = r.int("train.log_every", 1, 1 << 40)
    t.precision = r.enum("train.precision", PRECISIONS)
    t.sharding = r.enum("train.sharding", SHARDINGS)
    if t.sharding == "fsdp" and t.head_importance:
        raise SpecError('run spec: key "train.head_importance": not supported with '
                        'train.sharding = "fsdp" (head scores take gradients of gates, not of '
                        'the sharded weights)')
    return RunConfig(m, t)


def _prune_heads(value, m):
    if not isinstance(value, dict):
        raise SpecError('run spec: key "model.prune_heads": must be an object '
                        '{ "layer": [heads] }')
    out = {}
    for layer_text, heads in value.items():
        try:
            layer = int(layer_text)
        except ValueError:
            raise SpecError(f'run spec: key "model.prune_heads": "{layer_text}" is not a layer '
                            'index') from None
        if not 0 <= layer < m.layers:
            raise SpecError(f'run spec: key "model.prune_heads": layer {layer} does not exist '
                            f'(model.layers is {m.layers})')
        if not isinstance(heads, list) or any(
                isinstance(h, bool) or not isinstance(h, int) or not 0 <= h < m.heads
                for h in heads):
            raise SpecError(f'run spec: key "model.prune_heads": layer {layer}: heads must be '
                            f'indices in [0, {m.heads})')
        if heads:
            out[layer] = sorted(set(heads))
        if len(out.get(layer, [])) == m.heads and layer not in m.drop_attention_layers:
            raise SpecError(f'run spec: key "model.prune_heads": every head of layer {layer} is '
                            'pruned (use model.drop_attention_layers)')
    return out


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
    """What identifies a run for checkpoints: its model.*/train.* keys that change the
    trajectory, as compact JSON with sorted keys."""
    kept = {k: v for k, v in spec.items()
            if k.startswith(("model.", "train.")) and k not in NOT_FINGERPRINTED
            and k != "train.seeds"}
    return json.dumps(kept, sort_keys=True, separators=(",", ":"))
