#!/usr/bin/python3
"""Plain PyTorch eager training of tae-train's GPT at the benchmark's knobs.

The model is the torch engine's (agent/python/tae_torch/model.py, imported, not copied; built
from a run spec its reader checks by the one schema), trained by a plain eager loop here, so the
benchmark measures what PyTorch itself costs on the model tae-train trains:
  model: d_model 256, 4 layers, 4 heads, ffn_mult 4, gelu, layernorm (pre-norm), learned
         positions, causal, bias on, dropout 0, token embedding tied to the output head, GPT-2
         init (N(0, 0.02) matrices, zero biases)
  train: task lm (bytes, vocab 256), seq_len 128, batch 16, AdamW (weight decay only on tensors
         with dim >= 2), grad-norm clipping 1.0, warmup + cosine lr
so that both programs do the same arithmetic per step as agent/train/{model,layers,trainer,
schedule,lm_task}.cc:
  - attention is the engine's manual formulation (fused qkv Linear with bias, view/permute/split,
    matmul, scale, masked_fill with a fresh triu mask, softmax, matmul, transpose + reshape, out
    Linear); --attention sdpa uses F.scaled_dot_product_attention instead when the installed
    torch has it (torch >= 2.0; Debian 12's 1.13 does not);
  - the loss is MaskedCrossEntropy (per-token cross entropy * mask, summed / mask sum);
  - each step: next batch, forward, loss, zero_grad (zeroing, not None, as libtorch 1.13's
    Optimizer::zero_grad), backward, clip_grad_norm_ (whose value is read, like tae-train's
    double), optimizer step, loss.item();
  - a step's time covers all of that, like Trainer::RunOrThrow's per-step clock.
Data: random windows of seq_len + 1 bytes from the first 90% of the KJV text tae-train caches
(~/.cache/tae/kjv.txt), uniformly chosen offsets as in LmTask::Windows.

tae_torch is imported from --python-dir (default: build/share/tae/python, the copy beside the
built tae-train, with the schema.json the build writes there).

Prints one JSON object on the last line of stdout (tokens_per_s, step_ms, ... of the timed steps).
--phases additionally times data / forward / backward / clip / optimizer separately.
"""

import argparse
import json
import math
import os
import random
import sys
import time
import types

import torch
import torch.nn.functional as F

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def engine_model(args):
    """The torch engine's TransformerLM (agent/python/tae_torch/model.py) at the benchmark's
    knobs, from a run spec the engine's own reader checks (tae_torch/spec.py, by the schema)."""
    sys.path.insert(0, os.path.abspath(args.python_dir))
    from tae_torch import model as model_lib, spec as spec_lib  # noqa: PLC0415
    spec = spec_lib.default_spec()
    spec.update({
        "model.layers": args.layers, "model.d_model": args.d_model, "model.heads": args.heads,
        "model.kv_heads": 0, "model.head_dim": 0, "model.ffn_mult": args.ffn_mult,
        "model.activation": "gelu", "model.norm": "layernorm", "model.norm_position": "pre",
        "model.pos_encoding": "learned", "model.residual": True, "model.causal": True,
        "model.drop_attention_layers": [], "model.drop_ffn_layers": [], "model.prune_heads": {},
        "model.tie_embeddings": True, "model.bias": True, "model.dropout": 0.0,
        "model.init": "gpt2", "train.task": "lm", "train.seq_len": args.seq_len,
        "train.batch_size": args.batch_size, "train.steps": args.steps,
        "train.warmup": min(args.lr_warmup, args.steps)})
    config = spec_lib.parse(spec)
    model = model_lib.TransformerLM(config.model, 256, args.seq_len)
    if args.attention == "sdpa":
        for block in model.blocks:
            block.attention.forward = types.MethodType(sdpa_forward, block.attention)
    return model


def sdpa_forward(self, x):
    """The engine's Attention.forward with F.scaled_dot_product_attention in place of scores,
    mask, softmax and the product with v (the benchmark's model: no dropout, gates or alibi)."""
    batch, time_, _ = x.shape
    q, k, v = self.project(x)
    mixed = F.scaled_dot_product_attention(q, k, v, is_causal=self.causal)
    return self.out(mixed.transpose(1, 2).reshape(batch, time_, self.n_q * self.hd))


def masked_cross_entropy(logits, targets, mask):
    vocab = logits.size(-1)
    per_token = F.cross_entropy(
        logits.reshape(-1, vocab), targets.reshape(-1), reduction="none").view_as(mask)
    return (per_token * mask).sum() / mask.sum().clamp_min(1.0)


def learning_rate(peak, warmup, steps, step):
    """schedule.cc LearningRate with schedule cosine; `step` counts from 0."""
    if step < warmup:
        return peak * (step + 1) / warmup
    decay_steps = steps - warmup
    if decay_steps <= 0:
        return peak
    progress = min(max((step - warmup) / decay_steps, 0.0), 1.0)
    return peak * 0.5 * (1.0 + math.cos(math.pi * progress))


class Batches:
    """LmTask::NextTrainBatch: rows of seq_len + 1 bytes at uniform offsets in the train split."""

    def __init__(self, path, seq_len, batch_size, seed):
        with open(path, "rb") as f:
            text = f.read()
        size = len(text)
        train_end = size // 10 * 9 + (size % 10) * 9 // 10
        self.text = torch.frombuffer(bytearray(text[:train_end]), dtype=torch.uint8)
        self.row_len = seq_len + 1
        self.batch_size = batch_size
        self.rng = random.Random(seed)
        self.offsets = torch.arange(self.row_len)

    def next(self):
        last = self.text.numel() - self.row_len
        starts = torch.tensor([self.rng.randint(0, last) for _ in range(self.batch_size)])
        rows = self.text[starts.unsqueeze(1) + self.offsets].long()
        inputs = rows[:, :-1].contiguous()
        targets = rows[:, 1:].contiguous()
        mask = torch.ones(self.batch_size, self.row_len - 1)
        return inputs, targets, mask


def make_optimizer(model, lr, weight_decay, foreach):
    """trainer.cc MakeOptimizer: decay for dim >= 2, none for biases and norm gains."""
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    groups = [{"params": decay, "weight_decay": weight_decay},
              {"params": no_decay, "weight_decay": 0.0}]
    kwargs = {"foreach": True} if foreach else {}
    return torch.optim.AdamW(groups, lr=lr, **kwargs)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default=os.path.expanduser("~/.cache/tae/kjv.txt"))
    parser.add_argument("--threads", type=int, default=0,
                        help="torch.set_num_threads; 0 keeps torch's default")
    parser.add_argument("--steps", type=int, default=60, help="total steps, warmup included")
    parser.add_argument("--warmup-steps", type=int, default=10,
                        help="first steps left out of the timing")
    parser.add_argument("--attention", choices=["manual", "sdpa"], default="manual")
    parser.add_argument("--foreach", action="store_true",
                        help="AdamW(foreach=True) instead of the default per-tensor loop")
    parser.add_argument("--phases", action="store_true",
                        help="also time data/forward/backward/clip/optimizer per step")
    parser.add_argument("--d-model", type=int, default=256)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--ffn-mult", type=int, default=4)
    parser.add_argument("--seq-len", type=int, default=128)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--lr-warmup", type=int, default=10)
    parser.add_argument("--weight-decay", type=float, default=0.1)
    parser.add_argument("--grad-clip", type=float, default=1.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--python-dir",
                        default=os.path.join(REPO, "build", "share", "tae", "python"),
                        help="where tae_torch (the torch engine) and its schema.json are: the "
                             "build's copy, which building tae-train writes")
    args = parser.parse_args()

    if args.attention == "sdpa" and not hasattr(F, "scaled_dot_product_attention"):
        print(json.dumps({"skipped": f"torch {torch.__version__} has no public "
                          "torch.nn.functional.scaled_dot_product_attention"}))
        return 0
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    model = engine_model(args)
    model.train()
    optimizer = make_optimizer(model, args.lr, args.weight_decay, args.foreach)
    batches = Batches(args.data, args.seq_len, args.batch_size, args.seed)
    params = list(model.parameters())
    max_norm = args.grad_clip if args.grad_clip > 0 else float("inf")

    phase_names = ["data", "forward", "backward", "clip", "optimizer"]
    phase_seconds = dict.fromkeys(phase_names, 0.0)
    timed_seconds = 0.0
    losses = []
    clock = time.perf_counter
    for step in range(1, args.steps + 1):
        start = clock()
        lr = learning_rate(args.lr, args.lr_warmup, args.steps, step - 1)
        for group in optimizer.param_groups:
            group["lr"] = lr
        inputs, targets, mask = batches.next()
        t_data = clock()
        logits = model(inputs)
        loss = masked_cross_entropy(logits, targets, mask)
        t_forward = clock()
        optimizer.zero_grad()
        loss.backward()
        t_backward = clock()
        grad_norm = float(torch.nn.utils.clip_grad_norm_(params, max_norm))
        t_clip = clock()
        optimizer.step()
        losses.append(loss.item())
        end = clock()
        if step > args.warmup_steps:
            timed_seconds += end - start
            if args.phases:
                for name, seconds in zip(phase_names, [t_data - start, t_forward - t_data,
                                                       t_backward - t_forward, t_clip - t_backward,
                                                       end - t_clip]):
                    phase_seconds[name] += seconds
    timed_steps = args.steps - args.warmup_steps
    tokens = timed_steps * args.batch_size * args.seq_len
    result = {
        "program": "pytorch",
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "openblas_threads": os.environ.get("OPENBLAS_NUM_THREADS", "default"),
        "attention": args.attention,
        "foreach": args.foreach,
        "timed_steps": timed_steps,
        "tokens_per_s": tokens / timed_seconds,
        "step_ms": 1e3 * timed_seconds / timed_steps,
        "first_loss": losses[0],
        "last_loss": sum(losses[-10:]) / len(losses[-10:]),
        "grad_norm": grad_norm,
    }
    if args.phases:
        result["phase_ms"] = {k: 1e3 * v / timed_steps for k, v in phase_seconds.items()}
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
