"""A tiny character-level GPT that logs to TensorBoard, as PyTorch scripts and trainers do.

It writes its losses and learning rate with SummaryWriter into --log_dir (runs/ by default) and
knows nothing of TAE: study.toml names that directory (job.tensorboard) and the agent stores every
scalar as it is written. Outside TAE it runs the same way: `python3 train.py --n_layer 2`, then
`tensorboard --logdir runs`. Where the tensorboard package is missing (Debian has none),
minimal_tb.py writes the same files.

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

try:
    from torch.utils.tensorboard import SummaryWriter
except ImportError:
    from minimal_tb import SummaryWriter

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
p.add_argument("--log_dir", default="runs")
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


writer = SummaryWriter(args.log_dir)
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
        writer.add_scalar("loss/val", estimate(val_data), it)
        writer.flush()
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
        writer.add_scalar("loss/train", loss.item(), it)
        writer.add_scalar("lr", lr, it)
        writer.add_scalar("time per iter (ms)", (time.time() - t0) * 1000, it)
writer.close()
