"""Data-parallel and fully sharded training across TAE's ranks (docs/engine.md).

The ranks come from the agent's variables (TAE_RANK, TAE_WORLD_SIZE, MASTER_ADDR, MASTER_PORT)
and the collectives run where the tensors are: gloo on the CPU, NCCL on CUDA, torch_xla's `xla`
process-group backend on XLA. Gradients are reduced on the device: on the CPU and CUDA every
parameter's .grad is a view into one flat buffer, so a step's reduction is one all-reduce of that
buffer with no copies; on XLA the gradients are concatenated inside the step's graph.
"""

import os
from datetime import timedelta

import torch

BACKENDS = {"cpu": "gloo", "cuda": "nccl", "xla": "xla"}
SHARDINGS = ("none", "fsdp")
TIMEOUT = timedelta(seconds=120)


class Collective:
    def __init__(self, rank, world_size, addr, port, device):
        import torch.distributed as dist  # noqa: PLC0415
        self.dist = dist
        self.rank = rank
        self.world_size = world_size
        self.device = device
        self.flat_grads = None
        self.backend = BACKENDS[device.kind]
        if self.backend == "gloo" and "GLOO_SOCKET_IFNAME" not in os.environ:
            ifname = interface_towards(addr)
            if ifname:
                os.environ["GLOO_SOCKET_IFNAME"] = ifname
        if self.backend == "xla":
            import torch_xla.distributed.xla_backend  # noqa: F401,PLC0415 (registers "xla")
        dist.init_process_group(self.backend, init_method=f"tcp://{addr}:{port}", rank=rank,
                                world_size=world_size, timeout=TIMEOUT)

    def attach_flat_gradients(self, model):
        """Makes every parameter's .grad a view into one flat device buffer (CPU and CUDA), so
        backward accumulates into it and the reduction needs no copies."""
        if self.backend == "xla":
            return
        params = list(model.parameters())
        total = sum(p.numel() for p in params)
        self.flat_grads = torch.zeros(total, dtype=params[0].dtype, device=params[0].device)
        offset = 0
        for p in params:
            p.grad = self.flat_grads[offset:offset + p.numel()].view_as(p)
            offset += p.numel()

    def all_reduce_gradients(self, model):
        """Sums every rank's gradients in place, on the device."""
        if self.flat_grads is not None:
            self.dist.all_reduce(self.flat_grads)
            return
        grads = [p.grad for p in model.parameters() if p.grad is not None]
        flat = torch.cat([g.reshape(-1) for g in grads])
        self.dist.all_reduce(flat)
        _unflatten_into(flat, grads)

    def broadcast_parameters(self, model):
        params = list(model.parameters())
        with torch.no_grad():
            flat = torch.cat([p.detach().reshape(-1) for p in params])
            self.dist.broadcast(flat, 0)
            _unflatten_into(flat, params)

    def broadcast_object(self, value):
        holder = [value]
        self.dist.broadcast_object_list(holder, 0)
        return holder[0]

    def sum_(self, tensor):
        """All-reduces a device tensor in place (a sum) and returns it."""
        self.dist.all_reduce(tensor)
        return tensor

    def close(self):
        self.dist.destroy_process_group()


def _unflatten_into(flat, tensors):
    offset = 0
    with torch.no_grad():
        for t in tensors:
            t.copy_(flat[offset:offset + t.numel()].view_as(t))
            offset += t.numel()


def fsdp_unavailable(device):
    """Why train.sharding = "fsdp" cannot run with this torch on `device`, or None."""
    if device.kind == "xla":
        return ("not on XLA yet: the engine gathers and restores whole checkpoints through "
                "torch's FSDP state-dict API, which torch_xla's FSDP does not implement")
    try:
        from torch.distributed.fsdp import FullyShardedDataParallel  # noqa: F401,PLC0415
    except Exception as e:  # noqa: BLE001 (torch 1.13 under Python 3.11 raises ValueError)
        return (f"torch {torch.__version__} cannot import torch.distributed.fsdp here "
                f"({type(e).__name__}: {e})")
    major, minor = (int(x) for x in torch.__version__.split(".")[:2])
    if (major, minor) < (2, 1):
        return (f"the engine's FSDP path (CPU/gloo support, optim_state_dict) needs torch >= "
                f"2.1, this is {torch.__version__}")
    return None


def wrap_fsdp(model, device, block_type):
    """The model fully sharded over the process group (CPU/gloo, CUDA/NCCL), one FSDP unit per
    Transformer block and one for the rest; parameters keep their names (use_orig_params)."""
    from torch.distributed.fsdp import FullyShardedDataParallel as Fsdp  # noqa: PLC0415
    from torch.distributed.fsdp.wrap import ModuleWrapPolicy  # noqa: PLC0415
    kwargs = {"auto_wrap_policy": ModuleWrapPolicy({block_type}), "use_orig_params": True}
    if device.kind in ("cuda", "cpu"):
        # Named for the CPU too: without it FSDP computes on the current CUDA device wherever
        # one exists, and a gloo run on a GPU machine stops at its first step ("An FSDP-managed
        # module unexpectedly has parameters on cpu").
        kwargs["device_id"] = device.device
    wrapped = Fsdp(model, **kwargs)
    # The model's forward walks its plain list of blocks: point it at the wrapped ones.
    model.blocks = [getattr(model, f"block{i}") for i in range(len(model.blocks))]
    return wrapped


def _offload_to_cpu(model):
    """Whether a full state dict should be gathered to host memory: only from an accelerator.
    On the CPU there is nothing to offload, and torch 2.11's FSDP with offload_to_cpu=True on
    CPU parameters segfaults cloning the gathered tensors (seen on rank 0 of a 2-rank gloo run)."""
    return next(model.parameters()).device.type != "cpu"


def full_state(model, optimizer):
    """(model state, optimizer state) of an FSDP model, gathered whole on rank 0 (None
    elsewhere): a checkpoint that any world size can load."""
    from torch.distributed.fsdp import FullStateDictConfig, StateDictType  # noqa: PLC0415
    from torch.distributed.fsdp import FullyShardedDataParallel as Fsdp  # noqa: PLC0415
    from torch.distributed.fsdp import FullOptimStateDictConfig  # noqa: PLC0415
    offload = _offload_to_cpu(model)
    with Fsdp.state_dict_type(model, StateDictType.FULL_STATE_DICT,
                              FullStateDictConfig(offload_to_cpu=offload, rank0_only=True),
                              FullOptimStateDictConfig(offload_to_cpu=offload, rank0_only=True)):
        model_state = model.state_dict()
        optim_state = Fsdp.optim_state_dict(model, optimizer)
    return model_state, optim_state


def load_full_state(model, optimizer, model_state, optim_state):
    """Loads a whole (unsharded) checkpoint into this rank's shards; every rank passes the same
    full state (rank 0's, broadcast)."""
    from torch.distributed.fsdp import FullStateDictConfig, StateDictType  # noqa: PLC0415
    from torch.distributed.fsdp import FullyShardedDataParallel as Fsdp  # noqa: PLC0415
    with Fsdp.state_dict_type(model, StateDictType.FULL_STATE_DICT,
                              FullStateDictConfig(offload_to_cpu=_offload_to_cpu(model),
                                                  rank0_only=False)):
        model.load_state_dict(model_state)
        optimizer.load_state_dict(Fsdp.optim_state_dict_to_load(model, optimizer, optim_state))


def interface_towards(addr):
    """The name of the interface whose address this host uses to reach `addr` (gloo binds
    there, as tae-train's Collective does), or None."""
    import fcntl  # noqa: PLC0415
    import socket  # noqa: PLC0415
    import struct  # noqa: PLC0415
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
            probe.connect((addr, 9))
            local = probe.getsockname()[0]
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            for _, name in socket.if_nameindex():
                try:
                    packed = fcntl.ioctl(s.fileno(), 0x8915,  # SIOCGIFADDR
                                         struct.pack("256s", name.encode()[:15]))
                except OSError:
                    continue
                if socket.inet_ntoa(packed[20:24]) == local:
                    return name
    except OSError:
        return None
    return None
