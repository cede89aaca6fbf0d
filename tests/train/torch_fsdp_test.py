#!/usr/bin/python3
"""train.sharding = "fsdp" in the torch engine: 2 ranks on loopback (gloo on the CPU) train the
same model as 1 process, within the tolerance of the data-parallel test (1e-4 relative on
train/loss, train/grad_norm and eval/loss), and rank 0's checkpoint holds whole (unsharded)
tensors that a 1-process run resumes from.

On a CUDA machine it also runs the engine's CUDA path of FSDP on one GPU: a process group of
one rank on NCCL (the engine itself trains a world of 1 unwrapped, so the test builds that
rank's collective; two NCCL ranks cannot share one GPU) trains as the unwrapped model on the
same GPU within 1e-4, and its checkpoint, gathered whole to host memory from the GPU
(offload_to_cpu), resumes both an unsharded run and a sharded one on the GPU.

Skipped (exit 77, with the reason) where this torch has no usable FSDP: Debian 12's torch 1.13
under Python 3.11 cannot even import torch.distributed.fsdp, and the engine's FSDP path needs
torch >= 2.1 (CPU/gloo FSDP, optim_state_dict). The GPU tests are skipped without CUDA.

usage: torch_fsdp_test.py PYTHON_DIR
"""

import json
import os
import socket
import subprocess
import sys
import tempfile
import unittest

try:
    import torch  # noqa: F401
except ImportError:
    print("skipped: this python3 cannot import torch (apt-get install python3-torch)")
    sys.exit(77)

PYTHON_DIR = os.path.abspath(sys.argv.pop(1)) if len(sys.argv) > 1 else ""
sys.path.insert(0, PYTHON_DIR)
os.environ.setdefault("TAE_TORCH_DEVICE", "cpu")

from tae_torch import device as device_lib, engine, parallel  # noqa: E402

# Set in the child that trains one FSDP rank on the GPU (see one_gpu_rank below).
ONE_RANK_SPEC = "TAE_FSDP_TEST_ONE_RANK_SPEC"
ONE_RANK_CHECKPOINT = "TAE_FSDP_TEST_ONE_RANK_CHECKPOINT"

WHY = parallel.fsdp_unavailable(device_lib.Device())
if WHY is not None:
    print(f"skipped: {WHY}")
    sys.exit(77)

SPEC = {
    "model.layers": 2, "model.d_model": 32, "model.heads": 4, "model.kv_heads": 0,
    "model.head_dim": 0, "model.ffn_mult": 2, "model.activation": "gelu",
    "model.norm": "layernorm", "model.norm_position": "pre", "model.pos_encoding": "learned",
    "model.residual": True, "model.causal": True, "model.drop_attention_layers": [],
    "model.drop_ffn_layers": [], "model.prune_heads": {}, "model.tie_embeddings": False,
    "model.bias": True, "model.dropout": 0.0, "model.init": "gpt2",
    "train.task": "copy", "train.data": "", "train.vocab": 8, "train.seq_len": 16,
    "train.batch_size": 8, "train.steps": 30, "train.optimizer": "adamw", "train.lr": 0.01,
    "train.schedule": "cosine", "train.warmup": 5, "train.weight_decay": 0.1,
    "train.grad_clip": 1.0, "train.eval_every": 10, "train.eval_batches": 2,
    "train.checkpoint_every": 0, "train.head_importance": False, "train.threads": 1,
    "train.seed": 3, "train.engine": "torch",
}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_cli(spec, env_extra, workdir, checkpoint_dir=None):
    path = os.path.join(workdir, "run.json")
    with open(path, "w") as f:
        json.dump(spec, f)
    env = dict(os.environ, PYTHONPATH=PYTHON_DIR, TAE_THREADS="1", **env_extra)
    env.pop("TAE_METRICS_FD", None)
    flags = ["--checkpoint-dir", checkpoint_dir] if checkpoint_dir else ["--no-checkpoint"]
    return subprocess.Popen([sys.executable, "-m", "tae_torch", "--spec", path] + flags,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env=env, cwd=workdir)


def metric_lines(output):
    out = {}
    for line in output.splitlines():
        if line.startswith('{"step"'):
            record = json.loads(line)
            for k, v in record.items():
                if k != "step":
                    out.setdefault(k, {})[record["step"]] = v
    return out


def assert_same_training(test, reference, other):
    """`other`'s train/loss, train/grad_norm and eval/loss (3 or more each) at the steps of
    `reference`'s, each within 1e-4 relative (the data-parallel test's tolerance)."""
    a, b = metric_lines(reference), metric_lines(other)
    for key in ("train/loss", "train/grad_norm", "eval/loss"):
        test.assertGreaterEqual(len(a[key]), 3, key)
        test.assertEqual(sorted(a[key]), sorted(b[key]), key)
        for step, value in a[key].items():
            test.assertLessEqual(abs(b[key][step] - value), 1e-4 * abs(value),
                                 f"{key} at step {step}")


def one_gpu_rank(spec_path, checkpoint_dir):
    """The child's work: tae_torch's main for one rank of FSDP on the GPU. The engine trains a
    world of 1 without a process group, so this builds the rank's NCCL collective itself, as
    __main__ does for a world of 2 or more."""
    from tae_torch import spec as spec_lib, tasks  # noqa: PLC0415
    config, spec = spec_lib.load(spec_path)
    device = device_lib.Device(0)
    collective = parallel.Collective(0, 1, "127.0.0.1", free_port(), device)
    assert collective.backend == "nccl", collective.backend
    trainer = engine.Trainer(config, spec, tasks.make_task(config), engine.MetricsSink(),
                             sys.stdout, checkpoint_dir, lambda: False, device, collective)
    assert trainer.fsdp
    trainer.run()
    collective.close()


def run_one_gpu_rank(spec, workdir, checkpoint_dir=""):
    path = os.path.join(workdir, "run.json")
    with open(path, "w") as f:
        json.dump(spec, f)
    env = dict(os.environ, PYTHONPATH=PYTHON_DIR, TAE_THREADS="1", TAE_TORCH_DEVICE="cuda",
               **{ONE_RANK_SPEC: path, ONE_RANK_CHECKPOINT: checkpoint_dir})
    env.pop("TAE_METRICS_FD", None)
    return subprocess.Popen([sys.executable, os.path.abspath(__file__), PYTHON_DIR],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env=env, cwd=workdir)


def two_ranks(spec, d, checkpoint_dir=None):
    port = str(free_port())
    ranks = []
    for rank in range(2):
        os.makedirs(os.path.join(d, f"r{rank}"))
        ranks.append(run_cli(spec, {"TAE_RANK": str(rank), "TAE_WORLD_SIZE": "2",
                                    "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": port},
                             os.path.join(d, f"r{rank}"), checkpoint_dir))
    return ranks


class FsdpTest(unittest.TestCase):
    def test_two_sharded_ranks_reproduce_one_process(self):
        with tempfile.TemporaryDirectory() as d:
            os.makedirs(os.path.join(d, "one"))
            one = run_cli(SPEC, {}, os.path.join(d, "one"))
            ranks = two_ranks(dict(SPEC, **{"train.sharding": "fsdp"}), d)
            outputs = [p.communicate(timeout=300)[0] for p in [one] + ranks]
        for p, output in zip([one] + ranks, outputs):
            self.assertEqual(p.returncode, 0, output[-3000:])
        assert_same_training(self, outputs[0], outputs[1])

    def test_a_sharded_checkpoint_resumes_on_one_rank(self):
        fsdp = dict(SPEC, **{"train.sharding": "fsdp"})
        with tempfile.TemporaryDirectory() as d:
            checkpoint = os.path.join(d, "checkpoint")
            ranks = two_ranks(dict(fsdp, **{"train.steps": 20, "train.warmup": 5}), d,
                              checkpoint)
            for p in ranks:
                output = p.communicate(timeout=300)[0]
                self.assertEqual(p.returncode, 0, output[-3000:])
            path = os.path.join(checkpoint, engine.CHECKPOINT_FILE)
            saved = torch.load(path, map_location="cpu", weights_only=True)
            shapes = {k: tuple(v.shape) for k, v in saved["model"].items()}
            self.assertEqual(shapes["block0.attention.qkv.weight"], (96, 32))
            # The same config on one process (fsdp over 1 rank trains unsharded) takes it up.
            os.makedirs(os.path.join(d, "one"))
            one = run_cli(dict(fsdp, **{"train.steps": 20, "train.warmup": 5}), {},
                          os.path.join(d, "one"), checkpoint)
            output = one.communicate(timeout=300)[0]
        self.assertEqual(one.returncode, 0, output[-3000:])
        self.assertIn("resumed after step 20", output)


def cuda_available():
    return torch.cuda.is_available()


@unittest.skipUnless(cuda_available(), "no CUDA device: the GPU path of FSDP needs one")
class OneGpuFsdpTest(unittest.TestCase):
    def assert_done(self, proc):
        output = proc.communicate(timeout=300)[0]
        self.assertEqual(proc.returncode, 0, output[-3000:])
        return output

    def test_one_sharded_rank_on_the_gpu_trains_as_the_unwrapped_model(self):
        with tempfile.TemporaryDirectory() as d:
            for name in ("plain", "fsdp"):
                os.makedirs(os.path.join(d, name))
            plain = self.assert_done(run_cli(SPEC, {"TAE_TORCH_DEVICE": "cuda"},
                                             os.path.join(d, "plain")))
            sharded = self.assert_done(run_one_gpu_rank(dict(SPEC, **{"train.sharding": "fsdp"}),
                                                        os.path.join(d, "fsdp")))
        self.assertIn("device cuda", plain)
        self.assertIn("device cuda, precision fp32, sharding fsdp", sharded)
        assert_same_training(self, plain, sharded)

    def test_a_checkpoint_gathered_from_the_gpu_resumes_sharded_and_unsharded(self):
        fsdp = dict(SPEC, **{"train.sharding": "fsdp", "train.steps": 20, "train.warmup": 5})
        with tempfile.TemporaryDirectory() as d:
            checkpoint = os.path.join(d, "checkpoint")
            for name in ("write", "sharded", "plain"):
                os.makedirs(os.path.join(d, name))
            self.assert_done(run_one_gpu_rank(fsdp, os.path.join(d, "write"), checkpoint))
            saved = torch.load(os.path.join(checkpoint, engine.CHECKPOINT_FILE),
                               map_location="cpu", weights_only=True)
            shapes = {k: tuple(v.shape) for k, v in saved["model"].items()}
            self.assertEqual(shapes["block0.attention.qkv.weight"], (96, 32))
            sharded = self.assert_done(run_one_gpu_rank(fsdp, os.path.join(d, "sharded"),
                                                        checkpoint))
            plain = self.assert_done(run_cli(fsdp, {"TAE_TORCH_DEVICE": "cuda"},
                                             os.path.join(d, "plain"), checkpoint))
        self.assertIn("resumed after step 20", sharded)
        self.assertIn("resumed after step 20", plain)


if __name__ == "__main__":
    if os.environ.get(ONE_RANK_SPEC):
        one_gpu_rank(os.environ[ONE_RANK_SPEC], os.environ.get(ONE_RANK_CHECKPOINT, ""))
        sys.exit(0)
    unittest.main(verbosity=2)
