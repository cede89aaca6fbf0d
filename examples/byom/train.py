"""A small Transformer language model in plain PyTorch, as a researcher would write it.

TAE runs it as a [job] (see study.toml): its knobs arrive as ordinary argparse flags through
`{params:argparse}`, it logs with tae_log, and it saves and resumes checkpoints in
TAE_CHECKPOINT_DIR. Outside TAE it runs the same way: `python3 train.py --steps 200`.

Device: the XLA device (a TPU VM's chips) when torch_xla is importable, else the CPU. Data: a
synthetic "copy with noise" character stream by default (no downloads), or any text file
(--data FILE, e.g. /usr/share/bible-kjv from Debian's bible-kjv package).
Multi-host: with WORLD_SIZE > 1 (TAE sets it for a resources.hosts = N run) the ranks train
data-parallel over torch.distributed (gloo on CPU, xla on TPU).
"""

import argparse
import contextlib
import math
import os
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

try:  # TAE puts tae_log on PYTHONPATH; outside TAE metrics print as key=value lines.
    import tae_log
except ImportError:  # pragma: no cover
    tae_log = None


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    flag = lambda s: s.lower() in ("1", "true", "yes")
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--d_model", type=int, default=64)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--rotary", type=flag, default=True, help="rotary positions, else learned")
    p.add_argument("--dropout", type=float, default=0.0)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--seq_len", type=int, default=64)
    p.add_argument("--eval_every", type=int, default=50)
    p.add_argument("--checkpoint_every", type=int, default=100)
    p.add_argument("--seed", type=int, default=int(os.environ.get("TAE_SEED", "0")))
    p.add_argument("--data", default="", help="a text file; default: a synthetic stream")
    return p.parse_args()


def device():
    try:
        import torch_xla.core.xla_model as xm  # noqa: F401

        return xm.xla_device(), xm
    except ImportError:
        return torch.device("cpu"), None


def rotary(x):
    # x: (batch, heads, time, head_dim); rotate channel pairs by position-dependent angles.
    t, d = x.shape[-2], x.shape[-1]
    inv = 1.0 / (10000 ** (torch.arange(0, d, 2, device=x.device, dtype=x.dtype) / d))
    ang = torch.arange(t, device=x.device, dtype=x.dtype)[:, None] * inv[None, :]
    cos, sin = ang.cos(), ang.sin()
    x1, x2 = x[..., 0::2], x[..., 1::2]
    return torch.stack((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1).flatten(-2)


class Block(nn.Module):
    def __init__(self, a):
        super().__init__()
        self.heads, self.rotary = a.heads, a.rotary
        self.ln1, self.ln2 = nn.LayerNorm(a.d_model), nn.LayerNorm(a.d_model)
        self.qkv = nn.Linear(a.d_model, 3 * a.d_model)
        self.out = nn.Linear(a.d_model, a.d_model)
        self.ffn = nn.Sequential(nn.Linear(a.d_model, 4 * a.d_model), nn.GELU(),
                                 nn.Linear(4 * a.d_model, a.d_model))
        self.drop = nn.Dropout(a.dropout)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(c, dim=-1)
        q, k, v = (z.view(b, t, self.heads, c // self.heads).transpose(1, 2) for z in (q, k, v))
        if self.rotary:
            q, k = rotary(q), rotary(k)
        att = (q @ k.transpose(-2, -1)) / math.sqrt(k.shape[-1])
        mask = torch.ones(t, t, device=x.device, dtype=torch.bool).tril()
        att = att.masked_fill(~mask, float("-inf")).softmax(-1)
        y = (self.drop(att) @ v).transpose(1, 2).reshape(b, t, c)
        x = x + self.drop(self.out(y))
        return x + self.drop(self.ffn(self.ln2(x)))


class LM(nn.Module):
    def __init__(self, a, vocab):
        super().__init__()
        self.emb = nn.Embedding(vocab, a.d_model)
        self.pos = None if a.rotary else nn.Parameter(torch.zeros(a.seq_len, a.d_model))
        self.blocks = nn.ModuleList(Block(a) for _ in range(a.layers))
        self.ln = nn.LayerNorm(a.d_model)
        self.head = nn.Linear(a.d_model, vocab)

    def forward(self, idx):
        x = self.emb(idx)
        if self.pos is not None:
            x = x + self.pos[: idx.shape[1]]
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln(x))


def corpus(a):
    if a.data:
        with open(a.data, "rb") as f:
            data = torch.tensor(list(f.read()[: 1 << 20]), dtype=torch.long)
        return data, 256
    # Synthetic: random 16-symbol words each followed by its copy, so attention pays.
    g = torch.Generator().manual_seed(1234)
    words = torch.randint(1, 16, (4096, 8), generator=g)
    return torch.cat([words, words], dim=1).flatten(), 16


def batch(data, a, g, dev):
    starts = torch.randint(0, len(data) - a.seq_len - 1, (a.batch,), generator=g)
    x = torch.stack([data[s : s + a.seq_len] for s in starts])
    y = torch.stack([data[s + 1 : s + a.seq_len + 1] for s in starts])
    return x.to(dev), y.to(dev)


def log(step, **values):
    if tae_log:
        tae_log.log(step=step, **values)
    else:
        print(" ".join([f"step={step}"] + [f"{k}={v}" for k, v in values.items()]), flush=True)


def main():
    a = parse_args()
    rank, world = int(os.environ.get("RANK", "0")), int(os.environ.get("WORLD_SIZE", "1"))
    dev, xm = device()
    if world > 1:
        import torch.distributed as dist

        dist.init_process_group("xla" if xm else "gloo", rank=rank, world_size=world)
    torch.manual_seed(a.seed)  # the same initial weights on every rank
    data, vocab = corpus(a)
    model = LM(a, vocab).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=a.lr)
    g = torch.Generator().manual_seed(a.seed * 1000 + rank)

    # Resume: before a new attempt starts, on whatever machine, TAE restores the run's last
    # uploaded checkpoint into TAE_CHECKPOINT_DIR (rank 0's, on every rank of a gang).
    ckpt_dir = os.environ.get("TAE_CHECKPOINT_DIR", "")
    ckpt = os.path.join(ckpt_dir, "model.pt") if ckpt_dir else ""
    first = 1
    if ckpt and os.path.exists(ckpt):
        # weights_only: a checkpoint is data, never code; it holds tensors, dicts and ints only
        # (the optimizer's hyper-parameters come from the flags, not from the file).
        state = torch.load(ckpt, map_location="cpu", weights_only=True)
        model.load_state_dict(state["model"])
        opt_state = opt.state_dict()
        opt_state["state"] = state["opt_state"]
        opt.load_state_dict(opt_state)
        g.set_state(state["rng"])
        first = state["step"] + 1
        print(f"resumed from step {state['step']}", file=sys.stderr, flush=True)
    if tae_log:
        tae_log.meta(device=str(dev), torch=torch.__version__, world_size=world)

    started, tokens = time.time(), 0
    # `taectl profile rN` captures steps here (torch.profiler, or torch_xla's on a TPU VM).
    profiled = tae_log.profile if tae_log else (lambda step: contextlib.nullcontext())
    for step in range(first, a.steps + 1):
        model.train()
        with profiled(step):
            x, y = batch(data, a, g, dev)
            loss = F.cross_entropy(model(x).reshape(-1, vocab), y.reshape(-1))
            opt.zero_grad()
            loss.backward()
            if world > 1:
                for p in model.parameters():
                    torch.distributed.all_reduce(p.grad)
                    p.grad /= world
            if xm:
                xm.optimizer_step(opt)
            else:
                opt.step()
        tokens += x.numel()
        if step % 10 == 0 and rank == 0:
            log(step, **{"train/loss": loss.item(),
                         "Rate": tokens / max(time.time() - started, 1e-9)})
        if step % a.eval_every == 0 or step == a.steps:
            model.eval()
            with torch.no_grad():
                ex, ey = batch(data, a, torch.Generator().manual_seed(99), dev)
                logits = model(ex)
                val = F.cross_entropy(logits.reshape(-1, vocab), ey.reshape(-1)).item()
                acc = (logits.argmax(-1) == ey).float().mean().item()
            if rank == 0:
                log(step, **{"val/loss": val, "val/acc": acc})
        if ckpt and rank == 0 and (step % a.checkpoint_every == 0 or step == a.steps):
            os.makedirs(ckpt_dir, exist_ok=True)
            torch.save({"model": model.state_dict(), "opt_state": opt.state_dict()["state"],
                        "rng": g.get_state(), "step": step}, ckpt + ".tmp")
            os.replace(ckpt + ".tmp", ckpt)  # whole or absent, never half-written
            if tae_log:
                tae_log.checkpoint(step)  # TAE uploads it: a preempted run resumes elsewhere
    return 0


if __name__ == "__main__":
    sys.exit(main())
