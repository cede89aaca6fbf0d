"""python3 -m tae_torch --spec run.json: one run of the torch engine (docs/engine.md).

tae-train starts this for a spec with train.engine = "torch" (same flags, same environment, same
exit codes: 0 success, 1 runtime failure, 2 bad spec/flag/environment, 143 stopped by SIGTERM
after writing a checkpoint).
"""

import argparse
import os
import sys
import time

EXIT_RUNTIME = 1
EXIT_USAGE = 2
EXIT_STOPPED = 143


def fail(code, message):
    print(f"tae-torch: {message}", file=sys.stderr, flush=True)
    return code


M_TRIM_THRESHOLD = -1  # glibc's mallopt parameters (malloc.h)
M_MMAP_THRESHOLD = -3


def keep_freed_blocks():
    """tae-train's malloc settings: freed activation and gradient blocks stay in the heap
    between steps. With glibc's dynamic mmap threshold every block of a few MB went back to
    the kernel when freed and was faulted in again the next step (~8,600 page faults per step
    at bench/train_speed.py's shapes here, 629k vs 110k over 60 steps). A no-op off glibc."""
    try:
        import ctypes  # noqa: PLC0415
        libc = ctypes.CDLL("libc.so.6")
        libc.mallopt(M_MMAP_THRESHOLD, 32 << 20)
        libc.mallopt(M_TRIM_THRESHOLD, 256 << 20)
    except (OSError, AttributeError):
        pass


def configure_threads(threads):
    """Call before torch is imported: OpenBLAS and OpenMP read these when torch loads them: one
    pool of `threads`, and workers that sleep instead of spinning on shared cores (tae-train's
    settings, agent/train/threads.h). Variables already set are kept."""
    os.environ.setdefault("OPENBLAS_NUM_THREADS", str(threads))
    os.environ.setdefault("OMP_NUM_THREADS", str(threads))
    if threads > 1:
        os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    keep_freed_blocks()


def thread_count(config_threads):
    if config_threads > 0:
        return config_threads
    env = os.environ.get("TAE_THREADS", "")
    if env:
        try:
            value = int(env)
        except ValueError:
            raise ValueError(f'TAE_THREADS="{env}" is not a thread count') from None
        if value > 0:
            return value
    return len(os.sched_getaffinity(0))


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog="tae-torch",
        description="Trains one run of a TAE spec with the PyTorch engine (train.engine = "
                    "\"torch\"): the model, metrics, checkpoints and head importance of "
                    "tae-train, on the XLA device when torch_xla is importable, else CUDA, else "
                    "the CPU (TAE_TORCH_DEVICE=cpu|cuda|xla forces one).")
    parser.add_argument("--spec", required=True, help="the run's flat run.json")
    parser.add_argument("--checkpoint-dir", default=None,
                        help="default: $TAE_CHECKPOINT_DIR, else ./checkpoint")
    parser.add_argument("--no-checkpoint", action="store_true",
                        help="neither write nor resume checkpoints")
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:
        return EXIT_USAGE if e.code else 0
    from . import spec as spec_lib  # no torch: a bad spec is reported before torch loads

    try:
        config, spec = spec_lib.load(args.spec)
        threads = thread_count(config.train.threads)
    except (spec_lib.SpecError, ValueError) as e:
        return fail(EXIT_USAGE, str(e))
    configure_threads(threads)
    try:
        import torch
    except ImportError:
        return fail(EXIT_USAGE, f'train.engine = "torch" needs PyTorch for {sys.executable}, '
                    "which cannot import torch: install it (Debian: apt-get install "
                    "python3-torch; TPU VMs: pip install torch torch_xla), or use "
                    'train.engine = "libtorch"')
    from . import engine, parallel, tasks

    try:
        rank, world, addr, port = engine.distributed_env(os.environ)
        if config.train.batch_size % world != 0:
            raise spec_lib.SpecError(f"train.batch_size {config.train.batch_size} (the global "
                                     f"batch) does not split evenly over {world} ranks")
        sink = engine.MetricsSink()
    except (spec_lib.SpecError, ValueError) as e:
        return fail(EXIT_USAGE, str(e))
    torch.set_num_threads(threads)
    torch.set_num_interop_threads(1)
    checkpoint_dir = args.checkpoint_dir or os.environ.get("TAE_CHECKPOINT_DIR") or "checkpoint"
    if args.no_checkpoint:
        checkpoint_dir = ""
    start = time.monotonic()
    try:
        device = engine.Device(int(os.environ.get("LOCAL_RANK", rank)))
        task = tasks.make_task(config)
        collective = None
        if world > 1:
            print(f"tae-torch: rank {rank} of {world}, connecting to {addr}:{port}", flush=True)
            collective = parallel.Collective(rank, world, addr, port, device)
        meta = engine.runtime_metadata(device, rank, world)
        print("tae-torch: runtime " + " ".join(f"{k}={v}" for k, v in meta.items()), flush=True)
        if rank == 0:
            sink.emit_meta(meta)
        should_stop = engine.install_stop_handlers()
        trainer = engine.Trainer(config, spec, task, sink, sys.stdout if rank == 0 else None,
                                 checkpoint_dir, should_stop, device, collective)
        summary = trainer.run()
    except (RuntimeError, ValueError, OSError) as e:
        return fail(EXIT_RUNTIME, str(e))
    if summary["interrupted"]:
        return EXIT_STOPPED
    seconds = time.monotonic() - start
    if rank == 0:
        final = summary["final_eval"] or {"acc": float("nan"), "loss": float("nan")}
        print(f"tae-torch: done in {seconds:.1f} s, eval/acc {final['acc']:.4f} eval/loss "
              f"{final['loss']:.4f}", flush=True)
    else:
        print(f"tae-torch: rank {rank} done in {seconds:.1f} s", flush=True)
    if collective is not None:
        collective.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
