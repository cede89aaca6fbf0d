#!/usr/bin/python3
"""The torch engine's contract (docs/engine.md): exact resume, refused checkpoints of other
configs, errors that name the key, data-parallel ranks that reproduce one process.

usage: torch_engine_test.py PYTHON_DIR     (exit 77 when torch cannot be imported)
"""

import json
import os
import socket
import subprocess
import sys
import tempfile
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
    "train.batch_size": 8, "train.steps": 40, "train.optimizer": "adamw", "train.lr": 0.01,
    "train.schedule": "cosine", "train.warmup": 5, "train.weight_decay": 0.0,
    "train.grad_clip": 1.0, "train.eval_every": 10, "train.eval_batches": 2,
    "train.checkpoint_every": 0, "train.head_importance": False, "train.threads": 1,
    "train.seed": 3, "train.engine": "torch",
}


class ListSink:
    def __init__(self):
        self.lines = []
        self.checkpoints = []  # steps whose checkpoint was marked complete

    def emit(self, step, values):
        self.lines.append((step, dict(values)))

    def emit_meta(self, meta):
        pass

    def emit_checkpoint(self, step):
        self.checkpoints.append(step)


def train(spec, checkpoint_dir, stop_after=None):
    config = spec_lib.parse(spec)
    sink = ListSink()
    state = {"step": 0}
    task = tasks.make_task(config)

    def should_stop():
        state["step"] += 1
        return stop_after is not None and state["step"] >= stop_after

    trainer = engine.Trainer(config, spec, task, sink, None, checkpoint_dir, should_stop,
                             engine.Device())
    summary = trainer.run()
    train.last_checkpoints = sink.checkpoints
    return summary, sink.lines


def without_perf(lines):
    return [(step, {k: v for k, v in values.items() if not k.startswith("perf/")})
            for step, values in lines]


class ResumeTest(unittest.TestCase):
    def test_a_stopped_run_resumes_with_the_uninterrupted_values(self):
        torch.set_num_threads(1)
        with tempfile.TemporaryDirectory() as d:
            _, whole = train(SPEC, "")
            summary, first = train(SPEC, d, stop_after=17)
            self.assertTrue(summary["interrupted"])
            # The stop saved a checkpoint at step 17 and marked it complete only after the save.
            self.assertEqual(train.last_checkpoints[-1], 17)
            self.assertTrue(os.path.exists(os.path.join(d, engine.CHECKPOINT_FILE)))
            summary, rest = train(SPEC, d)
            self.assertEqual(summary["resumed_from"], 17)
            self.assertFalse(summary["interrupted"])
        # step 0's model lines come again after the resume; dropout is on, so the RNG state
        # must have been restored too.
        resumed = [line for line in rest if line[0] > 0]
        self.assertEqual(without_perf(first + resumed), without_perf(whole))

    def test_a_checkpoint_of_another_config_is_refused(self):
        with tempfile.TemporaryDirectory() as d:
            train(dict(SPEC, **{"train.steps": 10}), d)
            with self.assertRaisesRegex(RuntimeError, "another config"):
                train(dict(SPEC, **{"train.steps": 10, "train.lr": 0.02}), d)


class SpecTest(unittest.TestCase):
    def test_errors_name_the_key(self):
        cases = [({"model.heads": 3}, "model.heads"),
                 ({"model.norm": "batchnorm"}, 'key "model.norm": must be one of'),
                 ({"model.frobnicate": 1}, 'key "model.frobnicate": unknown key'),
                 ({"train.warmup": 50, "train.steps": 10}, "train.warmup"),
                 ({"model.prune_heads": {"0": [0, 1, 2, 3]}},
                  "layer 0: all 4 heads are pruned")]
        for overrides, message in cases:
            with self.subTest(overrides=overrides):
                with self.assertRaisesRegex(spec_lib.SpecError, message):
                    spec_lib.parse(dict(SPEC, **overrides))
        missing = dict(SPEC)
        del missing["train.lr"]
        with self.assertRaisesRegex(spec_lib.SpecError, 'key "train.lr": missing'):
            spec_lib.parse(missing)

    def test_keys_added_later_may_be_absent(self):
        old = {k: v for k, v in SPEC.items() if k not in ("model.init", "train.engine")}
        config = spec_lib.parse(old)
        # Specs stored before model.init existed started from gpt2; new ones name the key, and
        # the schema's default (what a spec written today says) is torch.
        self.assertEqual(config.model.init, "gpt2")
        self.assertEqual(spec_lib.ModelConfig().init, "torch")
        self.assertEqual(config.train.engine, "libtorch")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_cli(spec, env_extra, workdir):
    path = os.path.join(workdir, "run.json")
    with open(path, "w") as f:
        json.dump(spec, f)
    env = dict(os.environ, PYTHONPATH=PYTHON_DIR, TAE_THREADS="1", **env_extra)
    env.pop("TAE_METRICS_FD", None)
    return subprocess.Popen([sys.executable, "-m", "tae_torch", "--spec", path,
                             "--no-checkpoint"], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, env=env, cwd=workdir)


def metric_lines(output):
    out = {}
    for line in output.splitlines():
        if line.startswith('{"step"'):
            record = json.loads(line)
            for k, v in record.items():
                if k != "step":
                    out.setdefault(k, {})[record["step"]] = v
    return out


class DataParallelTest(unittest.TestCase):
    def test_two_ranks_on_loopback_reproduce_one_process(self):
        spec = dict(SPEC, **{"model.dropout": 0.0, "train.steps": 30})
        with tempfile.TemporaryDirectory() as d:
            os.makedirs(os.path.join(d, "one"))
            one = run_cli(spec, {}, os.path.join(d, "one"))
            port = str(free_port())
            ranks = []
            for rank in range(2):
                os.makedirs(os.path.join(d, f"r{rank}"))
                ranks.append(run_cli(spec, {"TAE_RANK": str(rank), "TAE_WORLD_SIZE": "2",
                                            "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": port},
                                     os.path.join(d, f"r{rank}")))
            outputs = [p.communicate(timeout=300)[0] for p in [one] + ranks]
        for p, output in zip([one] + ranks, outputs):
            self.assertEqual(p.returncode, 0, output[-3000:])
        a, b = metric_lines(outputs[0]), metric_lines(outputs[1])
        self.assertEqual(metric_lines(outputs[2]), {})  # rank 1 reports nothing
        for key in ("train/loss", "train/grad_norm", "eval/loss"):
            self.assertGreaterEqual(len(a[key]), 3, key)
            self.assertEqual(sorted(a[key]), sorted(b[key]), key)
            for step, value in a[key].items():
                self.assertLessEqual(abs(b[key][step] - value), 1e-4 * abs(value),
                                     f"{key} at step {step}")


class ExitCodeTest(unittest.TestCase):
    def test_a_bad_spec_exits_2_naming_the_key(self):
        with tempfile.TemporaryDirectory() as d:
            p = run_cli(dict(SPEC, **{"model.norm": "batchnorm"}), {}, d)
            output = p.communicate(timeout=120)[0]
        self.assertEqual(p.returncode, 2)
        self.assertIn('key "model.norm"', output)


if __name__ == "__main__":
    unittest.main(verbosity=2)
