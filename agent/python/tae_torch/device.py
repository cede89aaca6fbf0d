"""Where the torch engine computes, and the one door through which values leave it.

The step loop never reads a device tensor: loss, gradient norm and the stop flag stay on the
device and are read together when a metrics line is due (`Device.read`), once per line and once
per evaluation. On XLA the read is a step closure that runs when `mark_step` has materialised
the step's graph, so the host keeps tracing the next steps while the device computes.
"""

import contextlib
import os

import torch

PRECISIONS = ("fp32", "bf16")


class Device:
    """The XLA device when torch_xla is importable (TPU VMs), CUDA when available, else the CPU.
    TAE_TORCH_DEVICE=cpu|cuda|xla forces one. `local_rank` picks the GPU of a process when a
    host runs several ranks (LOCAL_RANK when set, else the rank modulo the GPUs)."""

    def __init__(self, local_rank=0):
        wanted = os.environ.get("TAE_TORCH_DEVICE", "")
        self.xm = None
        self.reads = 0  # host reads of device values so far (tests hold it to the schedule)
        if wanted in ("", "xla"):
            try:
                import torch_xla.core.xla_model as xm  # noqa: PLC0415 (optional dependency)
                self.xm = xm
            except ImportError:
                if wanted == "xla":
                    raise RuntimeError("TAE_TORCH_DEVICE=xla but torch_xla is not importable")
        if self.xm is not None:
            self.kind = "xla"
            self.device = self.xm.xla_device()
        elif wanted in ("", "cuda") and torch.cuda.is_available():
            self.kind = "cuda"
            index = local_rank % torch.cuda.device_count()
            torch.cuda.set_device(index)
            self.device = torch.device("cuda", index)
        elif wanted == "cuda":
            raise RuntimeError("TAE_TORCH_DEVICE=cuda but torch.cuda.is_available() is false")
        else:
            self.kind = "cpu"
            self.device = torch.device("cpu")

    def step_done(self):
        """Ends a step's lazy graph (XLA: mark_step, which also runs pending step closures);
        nothing elsewhere."""
        if self.xm is not None:
            self.xm.mark_step()

    def read(self, tensors):
        """The values of 0-d device tensors as Python floats: one transfer for all of them."""
        self.reads += 1
        if not tensors:
            return []
        stacked = torch.stack([t.detach().float().reshape(()) for t in tensors])
        return stacked.tolist()  # one transfer (and one wait) on an accelerator

    def read_later(self, tensors, consume):
        """consume(values) with `tensors` read in one transfer: at once on CPU and CUDA, in a
        step closure on XLA (it runs inside the next step_done, once the graph has run)."""
        if self.xm is None:
            consume(self.read(tensors))
            return
        self.xm.add_step_closure(lambda ts: consume(self.read(ts)), args=(list(tensors),))

    def place(self, tensor):
        """A host tensor on the device; asynchronous on CUDA (from pinned memory)."""
        if self.kind == "cuda":
            return tensor.pin_memory().to(self.device, non_blocking=True)
        return tensor.to(self.device)

    def autocast(self, precision):
        """The forward pass's context: bf16 autocast (master weights stay fp32), or nothing."""
        if precision == "fp32":
            return contextlib.nullcontext()
        if self.kind == "xla":
            try:
                return torch.autocast("xla", dtype=torch.bfloat16)
            except RuntimeError:
                import torch_xla.amp  # noqa: PLC0415 (older torch_xla: its own autocast)
                return torch_xla.amp.autocast(self.device, dtype=torch.bfloat16)
        return torch.autocast(self.kind, dtype=torch.bfloat16)
