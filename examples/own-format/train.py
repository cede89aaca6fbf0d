"""A tiny character-level GPT that reports the way most research scripts do: in its own words.

It prints its progress like nanoGPT (`iter 190: loss 2.5321, time 21.72ms` and, every
--eval_interval iterations, `step 200: train loss 2.4102, val loss 2.4388`) and knows nothing of
TAE: study.toml turns those lines into metrics with [job.metrics] patterns. Outside TAE it runs
the same way: `python3 train.py --n_layer 2`.

Data: a synthetic text (numbered lines of a few repeated sentences with random letters mixed
in), so it downloads nothing; the model must learn the sentences and the counting.
"""

import argparse
import math
import random
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
p.add_argument("--n_layer", type=int, default=2)
p.add_argument("--n_embd", type=int, default=32)
p.add_argument("--n_head", type=int, default=4)
p.add_argument("--block_size", type=int, default=32)
p.add_argument("--batch_size", type=int, default=16)
p.add_argument("--max_iters", type=int, default=200)
p.add_argument("--eval_interval", type=int, default=50)
p.add_argument("--learning_rate", type=float, default=3e-3)
p.add_argument("--seed", type=int, default=0)
args = p.parse_args()
torch.manual_seed(args.seed)
torch.set_num_threads(1)

rng = random.Random(1234)  # the same text for every seed
sentences = ["the cat sat on the mat.", "a dog ran in the fog.", "we fit models to text."]
lines = []
for i in range(3000):
    s = list(rng.choice(sentences))
    for _ in range(2):  # noise: two random letters
        s[rng.randrange(len(s))] = rng.choice("abcdefghijklmnopqrstuvwxyz")
    lines.append(f"{i % 100:02d} {''.join(s)}")
text = "\n".join(lines)
chars = sorted(set(text))
data = torch.tensor([chars.index(c) for c in text], dtype=torch.long)
split = int(0.9 * len(data))
train_data, val_data = data[:split], data[split:]


def batch(source):
    ix = torch.randint(len(source) - args.block_size - 1, (args.batch_size,))
    x = torch.stack([source[i:i + args.block_size] for i in ix])
    y = torch.stack([source[i + 1:i + 1 + args.block_size] for i in ix])
    return x, y


class GPT(nn.Module):
    def __init__(self):
        super().__init__()
        self.tok = nn.Embedding(len(chars), args.n_embd)
        self.pos = nn.Embedding(args.block_size, args.n_embd)
        layer = nn.TransformerEncoderLayer(args.n_embd, args.n_head, 4 * args.n_embd, dropout=0.0,
                                           batch_first=True, norm_first=True)
        self.blocks = nn.TransformerEncoder(layer, args.n_layer)
        self.head = nn.Linear(args.n_embd, len(chars))
        mask = torch.triu(torch.full((args.block_size, args.block_size), float("-inf")), 1)
        self.register_buffer("mask", mask)

    def forward(self, x, y):
        t = x.shape[1]
        h = self.tok(x) + self.pos(torch.arange(t))
        h = self.blocks(h, mask=self.mask[:t, :t])
        logits = self.head(h)
        return F.cross_entropy(logits.view(-1, logits.shape[-1]), y.view(-1))


model = GPT()
opt = torch.optim.AdamW(model.parameters(), lr=args.learning_rate)


@torch.no_grad()
def estimate(source):
    model.eval()
    losses = [model(*batch(source)).item() for _ in range(8)]
    model.train()
    return sum(losses) / len(losses)


for it in range(args.max_iters + 1):
    if it % args.eval_interval == 0:
        print(f"step {it}: train loss {estimate(train_data):.4f}, val loss {estimate(val_data):.4f}",
              flush=True)
    if it == args.max_iters:
        break
    t0 = time.time()
    lr = args.learning_rate * min(1.0, (it + 1) / 20) * 0.5 * (1 + math.cos(math.pi * it / args.max_iters))
    for group in opt.param_groups:
        group["lr"] = lr
    loss = model(*batch(train_data))
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    if it % 10 == 0:
        print(f"iter {it}: loss {loss.item():.4f}, time {(time.time() - t0) * 1000:.2f}ms",
              flush=True)
