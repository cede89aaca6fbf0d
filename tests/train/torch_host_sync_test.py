#!/usr/bin/python3
"""The torch engine reads device values only when a metrics line or an evaluation needs them.

Every way a tensor's value reaches Python (.item(), .tolist(), .cpu(), .numpy(), float(),
int(), bool(), index()) is wrapped and counted while the engine trains 100 steps; on an
accelerator each of these waits for the device. The count must be exactly one per train/* line
(train.log_every) plus one per evaluation. The one exception is the optimizer's own step
counter, which torch keeps on the CPU on every device (calls from torch/optim are not counted).

usage: torch_host_sync_test.py PYTHON_DIR     (exit 77 when torch cannot be imported)
"""

import collections
import os
import sys
import traceback
import unittest

try:
    import torch
except ImportError:
    print("skipped: this python3 cannot import torch (apt-get install python3-torch)")
    sys.exit(77)

PYTHON_DIR = os.path.abspath(sys.argv.pop(1)) if len(sys.argv) > 1 else ""
sys.path.insert(0, PYTHON_DIR)

from tae_torch import engine, spec as spec_lib, tasks  # noqa: E402

SPEC = {
    "model.layers": 2, "model.d_model": 32, "model.heads": 4, "model.kv_heads": 0,
    "model.head_dim": 0, "model.ffn_mult": 2, "model.activation": "gelu",
    "model.norm": "layernorm", "model.norm_position": "pre", "model.pos_encoding": "learned",
    "model.residual": True, "model.causal": True, "model.drop_attention_layers": [],
    "model.drop_ffn_layers": [], "model.prune_heads": {}, "model.tie_embeddings": False,
    "model.bias": True, "model.dropout": 0.1, "model.init": "gpt2",
    "train.task": "copy", "train.data": "", "train.vocab": 8, "train.seq_len": 16,
    "train.batch_size": 8, "train.steps": 100, "train.optimizer": "adamw", "train.lr": 0.01,
    "train.schedule": "cosine", "train.warmup": 5, "train.weight_decay": 0.0,
    "train.grad_clip": 1.0, "train.eval_every": 50, "train.eval_batches": 2,
    "train.checkpoint_every": 0, "train.head_importance": False, "train.threads": 1,
    "train.seed": 3, "train.engine": "torch", "train.log_every": 10,
}

READS = ("item", "tolist", "cpu", "numpy", "__float__", "__int__", "__bool__", "__index__")
OPTIMIZER_DIR = os.path.join(os.path.dirname(torch.__file__), "optim") + os.sep


class HostReads:
    """Counts the value reads of every tensor while active, with where each came from."""

    def __init__(self):
        self.where = collections.Counter()
        self.saved = {}

    def __enter__(self):
        for name in READS:
            original = getattr(torch.Tensor, name)
            self.saved[name] = original
            setattr(torch.Tensor, name, self._counting(name, original))
        return self

    def __exit__(self, *exc):
        for name, original in self.saved.items():
            setattr(torch.Tensor, name, original)

    def _counting(self, name, original):
        def read(tensor, *args, **kwargs):
            caller = traceback.extract_stack(limit=2)[0]
            if not caller.filename.startswith(OPTIMIZER_DIR):
                self.where[f"{name} at {caller.filename}:{caller.lineno}"] += 1
            return original(tensor, *args, **kwargs)
        return read

    def total(self):
        return sum(self.where.values())


class ListSink:
    def __init__(self):
        self.lines = []

    def emit(self, step, values):
        self.lines.append((step, dict(values)))

    def emit_meta(self, meta):
        pass

    def emit_checkpoint(self, step):
        pass


def train(spec):
    config = spec_lib.parse(spec)
    sink = ListSink()
    task = tasks.make_task(config)
    device = engine.Device()
    trainer = engine.Trainer(config, spec, task, sink, None, "", lambda: False, device)
    with HostReads() as reads:
        trainer.run()
    return reads, device, sink.lines


class HostSyncTest(unittest.TestCase):
    def check(self, overrides, train_lines, evaluations):
        torch.set_num_threads(1)
        reads, device, lines = train(dict(SPEC, **overrides))
        self.assertEqual(sum(1 for _, v in lines if "train/loss" in v), train_lines)
        self.assertEqual(sum(1 for _, v in lines if "eval/loss" in v), evaluations)
        expected = train_lines + evaluations
        self.assertEqual(reads.total(), expected, "reads by place:\n" + "\n".join(
            f"  {n} x {where}" for where, n in sorted(reads.where.items())))
        self.assertEqual(device.reads, expected)

    def test_one_read_per_metrics_line_and_per_evaluation(self):
        # 100 steps: train/* at 10, 20, ..., 100; eval/* at 50 and 100.
        self.check({}, train_lines=10, evaluations=2)

    def test_the_read_schedule_follows_log_every(self):
        # train/* at 25, 50, 75, 100 and the last step's evaluation only.
        self.check({"train.log_every": 25, "train.eval_every": 0}, train_lines=4, evaluations=1)

    def test_bf16_and_no_clipping_read_no_more(self):
        self.check({"train.precision": "bf16", "train.grad_clip": 0.0, "train.log_every": 20},
                   train_lines=5, evaluations=2)

    def test_the_counter_sees_a_read_in_the_step(self):
        # The instrument itself: a loss read every step (what the engine used to do) is seen.
        original = engine.train_step

        def reading_step(*args, **kwargs):
            loss, norm = original(*args, **kwargs)
            loss.item()
            return loss, norm
        engine.train_step = reading_step
        try:
            reads, _, _ = train(SPEC)
        finally:
            engine.train_step = original
        self.assertEqual(reads.total(), 100 + 10 + 2)


if __name__ == "__main__":
    unittest.main(verbosity=2)
