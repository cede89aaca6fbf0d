#!/usr/bin/python3
"""An independent reference for tae-train: tasks and model written from the documents alone.

    independent_reference.py --spec run.json      (prints one JSON line: final eval metrics)

tae_torch (the PyTorch engine) is a step-exact port of tae-train: it shares the initial weights
and the batches, so it agrees with tae-train, mistakes included. This file shares neither. Its
data generators follow the row layouts of docs/tasks.md (numpy's PCG64, not tae-train's
Mersenne Twister), and its model is a plain GPT-style PyTorch model that keeps PyTorch's default
module initialisation (nn.Linear, nn.Embedding, nn.LayerNorm as constructed). It reads the same
run spec keys as tae-train for the knobs the calibration uses and refuses any other value, so a
calibration row cannot silently compare different settings. It imports nothing from this
repository; tests/train/calibration.py runs it beside tae-train over seeds.
"""

import argparse
import json
import math
import os
import subprocess
import sys

os.environ.setdefault("OMP_NUM_THREADS", "1")  # one thread per run, set before torch starts
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

# The knobs this reference implements; any other value of these keys is refused.
SUPPORTED = {
    "model.kv_heads": (0,), "model.head_dim": (0,), "model.activation": ("gelu",),
    "model.norm": ("layernorm",), "model.norm_position": ("pre",),
    "model.pos_encoding": ("learned", "none", "rope"), "model.residual": (True,),
    "model.causal": (True,), "model.prune_heads": ({},), "model.tie_embeddings": (False,),
    "model.bias": (True,), "model.dropout": (0.0, 0), "train.optimizer": ("adamw",),
    "train.schedule": ("cosine",),
}
EXTRA_TOKENS = {"copy": 3, "reverse": 3, "sort": 3, "assoc_recall": 3, "induction": 3,
                "mod_add": 5}
TRAIN_STREAM, EVAL_STREAM = 1, 2


# ----- data (docs/tasks.md row layouts) -----

class Task:
    """Batches of (inputs [B, T], targets [B, T], scored mask [B, T]) for one task."""

    def __init__(self, name, vocab, seq_len, data_path):
        self.name, self.v, self.t = name, vocab, seq_len
        self.sep, self.pad, self.mask = vocab, vocab + 1, vocab + 2
        self.plus, self.eq = vocab + 3, vocab + 4
        if name == "lm":
            self.model_vocab = 256
            text = load_text(data_path)
            cut = len(text) * 9 // 10
            self.splits = {TRAIN_STREAM: text[:cut], EVAL_STREAM: text[cut:]}
        else:
            self.model_vocab = vocab + EXTRA_TOKENS[name]

    def batch(self, rng, size, stream):
        rows, scored = getattr(self, "_" + self.name)(rng, size, stream)
        rows = torch.from_numpy(rows.astype(np.int64))
        return rows[:, :-1], rows[:, 1:], torch.from_numpy(scored)

    def _half_rows(self, first, second):
        size, half = first.shape
        pad = np.full((size, self.t + 1 - 2 * half - 1), self.pad)
        rows = np.concatenate([first, np.full((size, 1), self.sep), second, pad], axis=1)
        scored = np.zeros((size, self.t), dtype=bool)
        scored[:, half:2 * half] = True  # position L reads SEP and predicts the first answer
        return rows, scored

    def _copy(self, rng, size, _):
        s = rng.integers(0, self.v, (size, self.t // 2))
        return self._half_rows(s, s)

    def _reverse(self, rng, size, _):
        s = rng.integers(0, self.v, (size, self.t // 2))
        return self._half_rows(s, s[:, ::-1])

    def _sort(self, rng, size, _):
        s = rng.integers(0, self.v, (size, self.t // 2))
        return self._half_rows(s, np.sort(s, axis=1))

    def _assoc_recall(self, rng, size, _):
        half = self.v // 2
        pairs = min(half, self.t // 4)
        queries = self.t // 2 - pairs
        keys = np.argsort(rng.random((size, half)), axis=1)[:, :pairs]  # distinct, lower half
        values = rng.integers(half, self.v, (size, pairs))  # upper half, may repeat
        asked = rng.integers(0, pairs, (size, queries))
        q = np.take_along_axis(keys, asked, axis=1)
        a = np.take_along_axis(values, asked, axis=1)
        context = np.stack([keys, values], axis=2).reshape(size, 2 * pairs)
        tail = np.stack([q, a], axis=2).reshape(size, 2 * queries)
        pad = np.full((size, self.t + 1 - 2 * pairs - 1 - 2 * queries), self.pad)
        rows = np.concatenate([context, np.full((size, 1), self.sep), tail, pad], axis=1)
        scored = np.zeros((size, self.t), dtype=bool)
        scored[:, 2 * pairs + 1:2 * pairs + 2 * queries:2] = True
        return rows, scored

    def _induction(self, rng, size, _):
        rows = np.empty((size, self.t + 1), dtype=np.int64)
        scored = np.zeros((size, self.t), dtype=bool)
        index = np.arange(self.t + 1)
        for r in range(size):
            n = int(rng.integers(2, (self.t + 1) // 2 + 1))
            block = rng.integers(0, self.v, n)
            rows[r] = block[index % n]
            scored[r, n:] = True
        return rows, scored

    def _mod_add(self, rng, size, _):
        problems = (self.t + 1) // 5
        a = rng.integers(0, self.v, (size, problems))
        b = rng.integers(0, self.v, (size, problems))
        c = (a + b) % self.v
        body = np.stack([a, np.full_like(a, self.plus), b, np.full_like(a, self.eq), c], axis=2)
        pad = np.full((size, self.t + 1 - 5 * problems), self.pad)
        rows = np.concatenate([body.reshape(size, 5 * problems), pad], axis=1)
        scored = np.zeros((size, self.t), dtype=bool)
        scored[:, 3:5 * problems:5] = True
        return rows, scored

    def _lm(self, rng, size, stream):
        text = self.splits[stream]
        starts = rng.integers(0, len(text) - self.t, size)
        rows = np.stack([text[s:s + self.t + 1] for s in starts])
        return rows, np.ones((size, self.t), dtype=bool)


def load_text(path):
    if not path:  # docs/tasks.md: the KJV from Debian's bible-kjv, cached by tae-train
        cache = os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache")
        path = os.path.join(cache, "tae", "kjv.txt")
        if not os.path.exists(path):
            text = subprocess.run(["bible", "-f", "gen1:1-rev22:21"], check=True,
                                  stdout=subprocess.PIPE).stdout
            return np.frombuffer(text, dtype=np.uint8)
    with open(path, "rb") as f:
        return np.frombuffer(f.read(), dtype=np.uint8)


# ----- model: pre-norm GPT, PyTorch default init -----

def rotate(x, cos, sin):
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half], x[..., half:]
    return x * cos + torch.cat([-x2, x1], dim=-1) * sin


class Attention(nn.Module):
    def __init__(self, width, heads, rope):
        super().__init__()
        self.heads, self.rope = heads, rope
        self.qkv = nn.Linear(width, 3 * width)
        self.out = nn.Linear(width, width)

    def forward(self, x, rotary):
        b, t, width = x.shape
        q, k, v = self.qkv(x).view(b, t, 3, self.heads, width // self.heads).unbind(dim=2)
        q, k, v = (z.transpose(1, 2) for z in (q, k, v))  # [b, heads, t, head width]
        if self.rope:
            q, k = rotate(q, *rotary), rotate(k, *rotary)
        scores = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
        future = torch.ones(t, t, dtype=torch.bool).triu(1)
        y = scores.masked_fill(future, float("-inf")).softmax(dim=-1) @ v
        return self.out(y.transpose(1, 2).reshape(b, t, width))


class Block(nn.Module):
    def __init__(self, width, heads, ffn_mult, attention, ffn, rope):
        super().__init__()
        self.attn_norm = nn.LayerNorm(width) if attention else None
        self.attn = Attention(width, heads, rope) if attention else None
        self.ffn_norm = nn.LayerNorm(width) if ffn else None
        self.ffn = nn.Sequential(nn.Linear(width, ffn_mult * width), nn.GELU(),
                                 nn.Linear(ffn_mult * width, width)) if ffn else None

    def forward(self, x, rotary):
        if self.attn is not None:
            x = x + self.attn(self.attn_norm(x), rotary)
        if self.ffn is not None:
            x = x + self.ffn(self.ffn_norm(x))
        return x


class GPT(nn.Module):
    def __init__(self, spec, vocab):
        super().__init__()
        width, heads, seq_len = spec["model.d_model"], spec["model.heads"], spec["train.seq_len"]
        pos = spec["model.pos_encoding"]
        self.embed = nn.Embedding(vocab, width)
        self.positions = nn.Embedding(seq_len, width) if pos == "learned" else None
        self.blocks = nn.ModuleList(
            Block(width, heads, spec["model.ffn_mult"],
                  i not in spec["model.drop_attention_layers"],
                  i not in spec["model.drop_ffn_layers"], pos == "rope")
            for i in range(spec["model.layers"]))
        self.norm = nn.LayerNorm(width)
        self.head = nn.Linear(width, vocab)
        self.rotary = None
        if pos == "rope":
            dim = width // heads
            freq = 10000.0 ** (-torch.arange(0, dim, 2, dtype=torch.float32) / dim)
            angle = torch.outer(torch.arange(seq_len, dtype=torch.float32), freq)
            angle = torch.cat([angle, angle], dim=-1)
            self.rotary = (angle.cos(), angle.sin())

    def forward(self, tokens):
        x = self.embed(tokens)
        if self.positions is not None:
            x = x + self.positions(torch.arange(tokens.shape[1]))
        for block in self.blocks:
            x = block(x, self.rotary)
        return self.head(self.norm(x))


# ----- training -----

def lr_at(spec, step):
    """Linear warmup to train.lr over train.warmup steps, then cosine to 0 at train.steps."""
    peak, warmup, steps = spec["train.lr"], spec["train.warmup"], spec["train.steps"]
    if step < warmup:
        return peak * (step + 1) / warmup
    progress = (step - warmup) / max(1, steps - warmup)
    return peak * 0.5 * (1.0 + math.cos(math.pi * progress))


def check(spec):
    for key, allowed in SUPPORTED.items():
        if key in spec and spec[key] not in allowed:
            raise SystemExit(f"independent_reference: {key} = {spec[key]!r} is not implemented "
                             f"here (only {allowed})")


def train(spec):
    check(spec)
    torch.set_num_threads(1)
    seed = spec["train.seed"]
    torch.manual_seed(seed)
    task = Task(spec["train.task"], spec["train.vocab"], spec["train.seq_len"],
                spec.get("train.data", ""))
    model = GPT(spec, task.model_vocab)
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    optimizer = torch.optim.AdamW(
        [{"params": decay, "weight_decay": spec["train.weight_decay"]},
         {"params": no_decay, "weight_decay": 0.0}], lr=spec["train.lr"])
    train_rng = np.random.Generator(np.random.PCG64([seed, TRAIN_STREAM]))
    eval_rng = np.random.Generator(np.random.PCG64([seed, EVAL_STREAM]))
    batch = spec["train.batch_size"]
    evals = [task.batch(eval_rng, batch, EVAL_STREAM) for _ in range(spec["train.eval_batches"])]
    for step in range(spec["train.steps"]):
        for group in optimizer.param_groups:
            group["lr"] = lr_at(spec, step)
        inputs, targets, scored = task.batch(train_rng, batch, TRAIN_STREAM)
        logits = model(inputs)
        loss = F.cross_entropy(logits[scored], targets[scored])
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if spec["train.grad_clip"] > 0:
            nn.utils.clip_grad_norm_(model.parameters(), spec["train.grad_clip"])
        optimizer.step()
    model.eval()
    loss_sum, right, count = 0.0, 0, 0
    with torch.no_grad():
        for inputs, targets, scored in evals:
            logits = model(inputs)[scored]
            loss_sum += F.cross_entropy(logits, targets[scored], reduction="sum").item()
            right += (logits.argmax(dim=-1) == targets[scored]).sum().item()
            count += int(scored.sum())
    return {"step": spec["train.steps"], "eval/loss": loss_sum / count, "eval/acc": right / count}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spec", required=True, help="a run spec (JSON), as tae-train reads")
    args = parser.parse_args()
    with open(args.spec) as f:
        spec = json.load(f)
    print(json.dumps(train(spec)), flush=True)


if __name__ == "__main__":
    sys.exit(main())
