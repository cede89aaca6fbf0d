#!/usr/bin/python3
"""train.precision = "bf16" in the torch engine: the forward passes run under bf16 autocast (the
losses differ from fp32's), the weights stay fp32, and the copy task's calibration row still
trains to eval/acc >= 0.99.

usage: torch_bf16_test.py PYTHON_DIR     (exit 77 when torch cannot be imported)
"""

import os
import sys
import unittest

try:
    import torch
except ImportError:
    print("skipped: this python3 cannot import torch (apt-get install python3-torch)")
    sys.exit(77)

PYTHON_DIR = os.path.abspath(sys.argv.pop(1)) if len(sys.argv) > 1 else ""
sys.path.insert(0, PYTHON_DIR)

from tae_torch import engine, spec as spec_lib, tasks  # noqa: E402

# tests/train/calibration.py's copy row (docs/tasks.md "Calibration"), on the torch engine.
SPEC = {
    "model.layers": 2, "model.d_model": 64, "model.heads": 4, "model.kv_heads": 0,
    "model.head_dim": 0, "model.ffn_mult": 4, "model.activation": "gelu",
    "model.norm": "layernorm", "model.norm_position": "pre", "model.pos_encoding": "learned",
    "model.residual": True, "model.causal": True, "model.drop_attention_layers": [],
    "model.drop_ffn_layers": [], "model.prune_heads": {}, "model.tie_embeddings": False,
    "model.bias": True, "model.dropout": 0.0, "model.init": "gpt2",
    "train.task": "copy", "train.data": "", "train.vocab": 16, "train.seq_len": 32,
    "train.batch_size": 32, "train.steps": 300, "train.optimizer": "adamw", "train.lr": 3e-3,
    "train.schedule": "cosine", "train.warmup": 50, "train.weight_decay": 0.0,
    "train.grad_clip": 1.0, "train.eval_every": 100000, "train.eval_batches": 8,
    "train.checkpoint_every": 0, "train.head_importance": False, "train.threads": 1,
    "train.seed": 0, "train.engine": "torch",
}


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
    """(metric lines, dtypes of the trained weights)."""
    config = spec_lib.parse(spec)
    sink = ListSink()
    trainer = engine.Trainer(config, spec, tasks.make_task(config), sink, None, "",
                             lambda: False, engine.Device())
    built = {}
    original = engine.build

    def keep(config_, vocab):
        built["model"] = original(config_, vocab)
        return built["model"]
    engine.build = keep
    try:
        trainer.run()
    finally:
        engine.build = original
    return sink.lines, {p.dtype for p in built["model"].parameters()}


def metric(lines, key):
    return {step: values[key] for step, values in lines if key in values}


class Bf16Test(unittest.TestCase):
    def test_bf16_trains_the_copy_task_with_fp32_weights(self):
        torch.set_num_threads(1)
        lines, dtypes = train(dict(SPEC, **{"train.precision": "bf16"}))
        self.assertEqual(dtypes, {torch.float32})
        acc = metric(lines, "eval/acc")
        self.assertGreaterEqual(acc[SPEC["train.steps"]], 0.99, acc)

    def test_bf16_computes_differently_from_fp32(self):
        torch.set_num_threads(1)
        short = {"train.steps": 10, "train.warmup": 5}
        fp32, _ = train(dict(SPEC, **short))
        bf16, _ = train(dict(SPEC, **short, **{"train.precision": "bf16"}))
        a, b = metric(fp32, "train/loss")[10], metric(bf16, "train/loss")[10]
        self.assertNotEqual(a, b)  # autocast is in effect
        self.assertLess(abs(a - b), 0.05 * abs(a))  # and it is the same model


if __name__ == "__main__":
    unittest.main(verbosity=2)
