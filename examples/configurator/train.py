# A character-level language model trained the way popular single-file trainers do it, and run
# unchanged under TAE (examples/configurator/study.toml): its own configurator (--key=value read
# as Python literals), a constant seed, progress lines "step N: train loss X, val loss Y", the
# checkpoint written in place with torch.save into --out_dir, --init_from=resume to go on from
# it, and optional wandb logging. Nothing here knows about TAE.
import math
import os
import time

import torch
import torch.nn as nn
from torch.nn import functional as F

# -----------------------------------------------------------------------------
# defaults, overridden by configurator.py from the command line
out_dir = "out"
eval_interval = 20
eval_iters = 4
log_interval = 10
max_iters = 120
batch_size = 16
block_size = 32
n_embd = 32
n_head = 4
dropout = 0.0
learning_rate = 1e-2
warmup_iters = 10
init_from = "scratch"  # or "resume"
always_save_checkpoint = True
wandb_log = False
wandb_project = "chars"
wandb_run_name = "run"
pause_file = ""  # for demonstrations: while this file exists, training waits after a save
seed = 1337
# -----------------------------------------------------------------------------
config_keys = [k for k, v in globals().items() if not k.startswith("_") and
               isinstance(v, (int, float, bool, str))]
exec(open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "configurator.py")).read())
config = {k: globals()[k] for k in config_keys}

torch.manual_seed(seed)
torch.set_num_threads(1)
os.makedirs(out_dir, exist_ok=True)

text = ("the quick brown fox jumps over the lazy dog. " * 40 +
        "pack my box with five dozen liquor jugs. " * 40)
chars = sorted(set(text))
stoi = {c: i for i, c in enumerate(chars)}
data = torch.tensor([stoi[c] for c in text], dtype=torch.long)
n = int(0.9 * len(data))
train_data, val_data = data[:n], data[n:]
vocab_size = len(chars)


def get_batch(split):
    d = train_data if split == "train" else val_data
    ix = torch.randint(len(d) - block_size, (batch_size,))
    x = torch.stack([d[i:i + block_size] for i in ix])
    y = torch.stack([d[i + 1:i + block_size + 1] for i in ix])
    return x, y


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.tok = nn.Embedding(vocab_size, n_embd)
        self.pos = nn.Embedding(block_size, n_embd)
        layer = nn.TransformerEncoderLayer(n_embd, n_head, 4 * n_embd, dropout, batch_first=True)
        self.blocks = nn.TransformerEncoder(layer, 1)
        self.head = nn.Linear(n_embd, vocab_size)

    def forward(self, idx, targets=None):
        t = idx.size(1)
        mask = torch.triu(torch.full((t, t), float("-inf")), diagonal=1)
        x = self.tok(idx) + self.pos(torch.arange(t))
        logits = self.head(self.blocks(x, mask=mask))
        loss = None if targets is None else F.cross_entropy(logits.view(-1, vocab_size),
                                                            targets.view(-1))
        return logits, loss


iter_num = 0
best_val_loss = 1e9
model = Model()
optimizer = torch.optim.AdamW(model.parameters(), lr=learning_rate)
if init_from == "resume":
    print(f"Resuming training from {out_dir}")
    # Its own file, restored by the agent after every blob was checked against its hash; torch
    # 1.13's weights_only loader cannot read an optimizer state, as such trainers save it.
    checkpoint = torch.load(os.path.join(out_dir, "ckpt.pt"))
    model.load_state_dict(checkpoint["model"])
    optimizer.load_state_dict(checkpoint["optimizer"])
    iter_num = checkpoint["iter_num"]
    best_val_loss = checkpoint["best_val_loss"]


@torch.no_grad()
def estimate_loss():
    out = {}
    model.eval()
    for split in ("train", "val"):
        losses = torch.zeros(eval_iters)
        for k in range(eval_iters):
            _, loss = model(*get_batch(split))
            losses[k] = loss.item()
        out[split] = losses.mean().item()
    model.train()
    return out


def get_lr(it):
    if it < warmup_iters:
        return learning_rate * (it + 1) / warmup_iters
    ratio = (it - warmup_iters) / max(1, max_iters - warmup_iters)
    return learning_rate * 0.5 * (1.0 + math.cos(math.pi * min(1.0, ratio)))


if wandb_log:
    import wandb
    wandb.init(project=wandb_project, name=wandb_run_name, config=config)

t0 = time.time()
while True:
    lr = get_lr(iter_num)
    for group in optimizer.param_groups:
        group["lr"] = lr
    if iter_num % eval_interval == 0:
        losses = estimate_loss()
        print(f"step {iter_num}: train loss {losses['train']:.4f}, val loss {losses['val']:.4f}",
              flush=True)
        if wandb_log:
            wandb.log({"mfu": 0.0}, commit=False)
            wandb.log({"iter": iter_num, "train/loss": losses["train"],
                       "val/loss": losses["val"], "lr": lr})
        if losses["val"] < best_val_loss or always_save_checkpoint:
            best_val_loss = min(best_val_loss, losses["val"])
            if iter_num > 0:
                checkpoint = {"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                              "iter_num": iter_num, "best_val_loss": best_val_loss,
                              "config": config}
                print(f"saving checkpoint to {out_dir}", flush=True)
                torch.save(checkpoint, os.path.join(out_dir, "ckpt.pt"))  # in place
                while pause_file and os.path.exists(pause_file):
                    time.sleep(0.05)
    if iter_num >= max_iters:
        break
    _, loss = model(*get_batch("train"))
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    optimizer.step()
    if iter_num % log_interval == 0:
        dt = time.time() - t0
        t0 = time.time()
        print(f"iter {iter_num}: loss {loss.item():.4f}, time {dt * 1000:.2f}ms", flush=True)
    iter_num += 1

if wandb_log:
    wandb.run.summary["best_val_loss"] = best_val_loss
    wandb.finish()
