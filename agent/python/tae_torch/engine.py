"""The training loop of the torch engine: the contract of docs/engine.md, in PyTorch.

Same metric lines, steps and names as tae-train (model/* at step 0, train/* and perf/* every 10
steps and at the last, eval/* every train.eval_every steps and at the last, heads/* at the end),
same checkpoint behaviour (every train.checkpoint_every steps, at the end and on SIGTERM, written
atomically; a run that finds one resumes after its step), same data-parallel arithmetic (every
rank draws the global batch and trains on its rows; gradients are summed).
"""

import contextlib
import json
import math
import os
import resource
import signal
import sys
import tempfile
import time

import torch
import torch.nn.functional as F

from . import model as model_lib
from . import spec as spec_lib
from . import tasks as tasks_lib

TRAIN_LOG_EVERY = 10
SGD_MOMENTUM = 0.9
CHECKPOINT_FILE = "checkpoint-torch.pt"
MAX_EXACT_INTEGER = 2.0 ** 53


# ---- the arithmetic of one step (shared with the equivalence test) ----

def learning_rate(t, step0):
    """The lr of 0-based step `step0`: linear warmup, then constant, linear or cosine."""
    if step0 < t.warmup:
        return t.lr * (step0 + 1) / t.warmup
    decay_steps = t.steps - t.warmup
    if t.schedule == "constant" or decay_steps <= 0:
        return t.lr
    progress = min(max((step0 - t.warmup) / decay_steps, 0.0), 1.0)
    if t.schedule == "linear":
        return t.lr * (1.0 - progress)
    return t.lr * 0.5 * (1.0 + math.cos(math.pi * progress))


def scored_cross_entropy_sum(logits, targets, mask):
    vocab = logits.size(-1)
    per_token = F.cross_entropy(logits.reshape(-1, vocab), targets.reshape(-1),
                                reduction="none").view_as(mask)
    return (per_token * mask).sum()


def masked_cross_entropy(logits, targets, mask):
    """Mean cross entropy over the positions where mask is 1."""
    return scored_cross_entropy_sum(logits, targets, mask) / mask.sum().clamp_min(1.0)


def make_optimizer(t, model):
    """AdamW (decoupled decay) or SGD with momentum 0.9; weight decay on matrices only."""
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    groups = []
    if decay:
        groups.append({"params": decay, "weight_decay": t.weight_decay})
    if no_decay:
        groups.append({"params": no_decay, "weight_decay": 0.0})
    if t.optimizer == "adamw":
        return torch.optim.AdamW(groups, lr=t.lr, betas=(0.9, 0.999), eps=1e-8)
    return torch.optim.SGD(groups, lr=t.lr, momentum=SGD_MOMENTUM)


def clip_gradients(model, grad_clip):
    """Scales the gradients to a global L2 norm of at most grad_clip (0: off); returns the norm
    before scaling."""
    max_norm = grad_clip if grad_clip > 0 else float("inf")
    return float(torch.nn.utils.clip_grad_norm_(list(model.parameters()), max_norm))


def build(config, vocab_size):
    """The model of `config` for `vocab_size` tokens, seeded with train.seed."""
    torch.manual_seed(config.train.seed)
    return model_lib.TransformerLM(config.model, vocab_size, config.train.seq_len)


class Device:
    """Where the engine computes: the XLA device when torch_xla is importable (TPU VMs), CUDA
    when available, else the CPU. TAE_TORCH_DEVICE=cpu|cuda|xla forces one."""

    def __init__(self):
        wanted = os.environ.get("TAE_TORCH_DEVICE", "")
        self.xm = None
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
            self.device = torch.device("cuda")
        elif wanted == "cuda":
            raise RuntimeError("TAE_TORCH_DEVICE=cuda but torch.cuda.is_available() is false")
        else:
            self.kind = "cpu"
            self.device = torch.device("cpu")

    def step_done(self):
        """Ends a step's lazy graph (XLA); nothing elsewhere."""
        if self.xm is not None:
            self.xm.mark_step()


def train_step(model, optimizer, batch, config, step, device, collective=None):
    """One optimiser step (1-based `step`): returns (loss, grad_norm before clipping)."""
    lr = learning_rate(config.train, step - 1)
    for group in optimizer.param_groups:
        group["lr"] = lr
    optimizer.zero_grad(set_to_none=False)
    inputs = batch.inputs.to(device.device)
    targets = batch.targets.to(device.device)
    mask = batch.mask.to(device.device)
    if collective is None:
        loss = masked_cross_entropy(model(inputs), targets, mask)
        loss.backward()
    else:
        rows = inputs.size(0) // collective.world_size
        first = rows * collective.rank
        part = slice(first, first + rows)
        loss = (scored_cross_entropy_sum(model(inputs[part]), targets[part], mask[part])
                / mask.sum().clamp_min(1.0))
        loss.backward()
        collective.all_reduce_gradients(model)
    grad_norm = clip_gradients(model, config.train.grad_clip)
    optimizer.step()
    device.step_done()
    return loss.item(), grad_norm


def evaluate(model, task, device):
    """eval loss, token accuracy and row accuracy over the task's eval batches."""
    model.eval()
    loss_sum = correct = scored = rows_right = rows = 0.0
    with torch.no_grad():
        for batch in task.eval_batches:
            inputs = batch.inputs.to(device.device)
            targets = batch.targets.to(device.device)
            mask = batch.mask.to(device.device)
            logits = model(inputs)
            batch_scored = mask.sum().item()
            loss_sum += masked_cross_entropy(logits, targets, mask).item() * batch_scored
            hits = (logits.argmax(-1) == targets).float() * mask
            correct += hits.sum().item()
            scored += batch_scored
            rows_right += (hits.sum(1) == mask.sum(1)).sum().item()
            rows += inputs.size(0)
    model.train()
    loss = loss_sum / scored if scored > 0 else float("nan")
    return {"loss": loss, "acc": correct / scored if scored > 0 else 0.0,
            "seq_acc": rows_right / rows if rows > 0 else 0.0}


def _eval_loss(model, task, device):
    loss_sum = scored = 0.0
    with torch.no_grad():
        for batch in task.eval_batches:
            mask = batch.mask.to(device.device)
            s = mask.sum().item()
            logits = model(batch.inputs.to(device.device))
            loss_sum += masked_cross_entropy(logits, batch.targets.to(device.device),
                                             mask).item() * s
            scored += s
    return loss_sum / scored if scored > 0 else 0.0


def score_heads(model, task, heads, device):
    """docs/engine.md head importance: masked-at-eval loss deltas and Michel et al.'s
    normalised |dL/dxi| per head. Returns (base_loss, {(l, h): delta}, {(l, h): score})."""
    was_training = model.training
    model.eval()
    base = _eval_loss(model, task, device)
    masked = {}
    for layer, block in enumerate(model.blocks):
        if block.attention is None:
            continue
        for h in block.attention.kept:
            gates = [None] * (layer + 1)
            gates[layer] = torch.ones(heads, device=device.device)
            gates[layer][h] = 0.0
            model.set_head_gates(gates)
            masked[(layer, h)] = _eval_loss(model, task, device) - base
    model.set_head_gates([])
    xi = [torch.ones(heads, device=device.device, requires_grad=True) for _ in model.blocks]
    with_attention = [xi[l] for l, b in enumerate(model.blocks) if b.attention is not None]
    total = [None] * len(xi)
    if with_attention:
        model.set_head_gates(xi)
        for batch in task.eval_batches:
            loss = masked_cross_entropy(model(batch.inputs.to(device.device)),
                                        batch.targets.to(device.device),
                                        batch.mask.to(device.device))
            grads = torch.autograd.grad([loss], with_attention)
            g = 0
            for layer, block in enumerate(model.blocks):
                if block.attention is None:
                    continue
                magnitude = grads[g].abs()
                g += 1
                total[layer] = magnitude if total[layer] is None else total[layer] + magnitude
        model.set_head_gates([])
    gradient = {}
    for layer, block in enumerate(model.blocks):
        if total[layer] is None:
            continue
        kept = block.attention.kept
        values = total[layer].detach().cpu()[kept]
        norm = float(values.norm())
        for i, h in enumerate(kept):
            gradient[(layer, h)] = float(values[i]) / norm if norm > 0 else 0.0
    if was_training:
        model.train()
    return base, masked, gradient


# ---- metric lines ----

def _profiler(t, primary):
    """tae_log.profile for each step (docs/profiles.md), or a no-op without tae_log."""
    try:
        import tae_log
    except ImportError:
        return lambda step: contextlib.nullcontext()
    at = t.profile_at if primary else ()
    return lambda step: tae_log.profile(step, at=at, steps=t.profile_steps)


class MetricsSink:
    """JSON metric lines on TAE_METRICS_FD (stdout without it), as tae-train writes them."""

    def __init__(self):
        fd = os.environ.get("TAE_METRICS_FD")
        if fd is None:
            self.fd = sys.stdout.fileno()
        else:
            try:
                self.fd = int(fd)
                os.fstat(self.fd)
            except (ValueError, OSError):
                raise spec_lib.SpecError(f'TAE_METRICS_FD="{fd}" is not an open file '
                                         "descriptor") from None

    def _write(self, line):
        data = (line + "\n").encode()
        while data:
            n = os.write(self.fd, data)
            data = data[n:]

    def emit(self, step, values):
        record = {"step": step}
        for name, value in values:
            if not math.isfinite(value):
                continue
            if float(value).is_integer() and abs(value) < MAX_EXACT_INTEGER:
                record[name] = int(value)
            else:
                record[name] = float(value)
        self._write(json.dumps(record, separators=(",", ":")))

    def emit_meta(self, meta):
        self._write(json.dumps({"meta": meta}, separators=(",", ":")))

    def emit_checkpoint(self, step):
        """Under an agent: the checkpoint directory holds step's checkpoint, complete now."""
        if os.environ.get("TAE_METRICS_FD") is not None:
            self._write(json.dumps({"checkpoint": {"step": step, "time": time.time()}},
                                   separators=(",", ":")))


def peak_rss_mb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


# ---- data-parallel ----

class Collective:
    """torch.distributed over gloo with TAE's rank variables: TAE_RANK, TAE_WORLD_SIZE,
    MASTER_ADDR, MASTER_PORT. Gradients are summed on the CPU (on XLA too: correct, not fast)."""

    def __init__(self, rank, world_size, addr, port):
        import torch.distributed as dist  # noqa: PLC0415
        if "GLOO_SOCKET_IFNAME" not in os.environ:
            ifname = interface_towards(addr)
            if ifname:
                os.environ["GLOO_SOCKET_IFNAME"] = ifname
        self.dist = dist
        self.rank = rank
        self.world_size = world_size
        from datetime import timedelta  # noqa: PLC0415
        dist.init_process_group("gloo", init_method=f"tcp://{addr}:{port}", rank=rank,
                                world_size=world_size, timeout=timedelta(seconds=120))

    def _flat(self, tensors):
        return torch.cat([t.detach().reshape(-1).cpu() for t in tensors])

    def _unflat(self, flat, tensors):
        offset = 0
        for t in tensors:
            t.copy_(flat[offset:offset + t.numel()].view_as(t).to(t.device))
            offset += t.numel()

    def all_reduce_gradients(self, model):
        grads = [p.grad for p in model.parameters() if p.grad is not None]
        flat = self._flat(grads)
        self.dist.all_reduce(flat)
        with torch.no_grad():
            self._unflat(flat, grads)

    def broadcast_parameters(self, model):
        params = list(model.parameters())
        flat = self._flat(params)
        self.dist.broadcast(flat, 0)
        with torch.no_grad():
            self._unflat(flat, params)

    def broadcast_object(self, value):
        holder = [value]
        self.dist.broadcast_object_list(holder, 0)
        return holder[0]

    def sum(self, values):
        t = torch.tensor(values, dtype=torch.float64)
        self.dist.all_reduce(t)
        return t.tolist()

    def close(self):
        self.dist.destroy_process_group()


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


def distributed_env(environ):
    """(rank, world_size, addr, port) from the agent's variables; world size 1 without them."""
    def number(name, default):
        text = environ.get(name, "")
        if text == "":
            return default
        try:
            return int(text)
        except ValueError:
            raise spec_lib.SpecError(f'{name}="{text}" is not an integer') from None
    world = number("TAE_WORLD_SIZE", 1)
    rank = number("TAE_RANK", 0)
    if world < 1 or not 0 <= rank < world:
        raise spec_lib.SpecError(f"TAE_RANK={rank} is not in [0, TAE_WORLD_SIZE={world})")
    if world == 1:
        return 0, 1, "", 0
    addr = environ.get("MASTER_ADDR", "")
    port = number("MASTER_PORT", 0)
    if not addr or not 0 < port < 65536:
        raise spec_lib.SpecError("a data-parallel run needs MASTER_ADDR and MASTER_PORT")
    return rank, world, addr, port


# ---- checkpoints ----

def save_checkpoint(directory, state):
    os.makedirs(directory, exist_ok=True)
    fd, temp = tempfile.mkstemp(dir=directory, prefix=CHECKPOINT_FILE + ".tmp.")
    try:
        with os.fdopen(fd, "wb") as f:
            torch.save(state, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(temp, os.path.join(directory, CHECKPOINT_FILE))
        dir_fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
    except BaseException:
        if os.path.exists(temp):
            os.unlink(temp)
        raise


def load_checkpoint(directory, fingerprint):
    path = os.path.join(directory, CHECKPOINT_FILE)
    if not os.path.exists(path):
        return None
    try:
        state = torch.load(path, map_location="cpu")
    except Exception as e:  # noqa: BLE001 (any unreadable file is the same failure)
        raise RuntimeError(f"checkpoint {path} is unreadable: {e}") from None
    if not isinstance(state, dict) or state.get("fingerprint") != fingerprint:
        raise RuntimeError(f"checkpoint {path} belongs to another config (its model.*/train.* "
                           "keys differ); remove it or use another checkpoint directory")
    return state


# ---- the run ----

class Trainer:
    def __init__(self, config, spec, task, sink, progress, checkpoint_dir, should_stop,
                 device, collective=None):
        self.config = config
        self.spec = spec
        self.task = task
        self.sink = sink
        self.progress = progress
        self.checkpoint_dir = checkpoint_dir
        self.should_stop = should_stop
        self.device = device
        self.collective = collective
        self.fingerprint = spec_lib.fingerprint(spec)
        self.last_tokens_per_s = 0.0

    def primary(self):
        return self.collective is None or self.collective.rank == 0

    def say(self, text):
        if self.progress is not None and self.primary():
            print(text, file=self.progress, flush=True)

    def run(self):
        t = self.config.train
        model = build(self.config, self.task.vocab_size).to(self.device.device)
        optimizer = make_optimizer(t, model)
        window = new_window()
        summary = {"first_train_loss": float("nan"), "last_train_loss": float("nan"),
                   "resumed_from": 0, "interrupted": False, "final_eval": None}
        first_step = self.resume(model, optimizer, window, summary)
        if self.collective is not None:
            first_step = self.sync_start(model, optimizer, first_step)
        self.report_model(model, summary)
        model.train()
        profiled = _profiler(t, self.collective is None or self.collective.rank == 0)
        for step in range(first_step, t.steps + 1):
            start = time.perf_counter()
            with profiled(step):  # a profile when TAE asks, or at train.profile_at
                batch = self.task.next_train_batch()
                loss, grad_norm = train_step(model, optimizer, batch, self.config, step,
                                             self.device, self.collective)
            window["seconds"] += time.perf_counter() - start
            window["loss_sum"] += loss
            window["grad_norm"] = grad_norm
            window["lr"] = learning_rate(t, step - 1)
            window["steps"] += 1
            window["tokens"] += t.batch_size * t.seq_len
            any_rank_stops = False
            if step % TRAIN_LOG_EVERY == 0 or step == t.steps:
                if self.collective is not None:
                    stop_here = step < t.steps and self.should_stop()
                    window["loss_sum"], stops = self.collective.sum(
                        [window["loss_sum"], 1.0 if stop_here else 0.0])
                    any_rank_stops = stops > 0
                self.report_train(step, window, summary)
                window = new_window()
            if ((t.eval_every > 0 and step % t.eval_every == 0) or step == t.steps) \
                    and self.primary():
                summary["final_eval"] = self.report_eval(model, step, summary)
            if self.collective is not None:
                stop = any_rank_stops
            else:
                stop = step < t.steps and self.should_stop()
            scheduled = t.checkpoint_every > 0 and step % t.checkpoint_every == 0
            if stop or scheduled or step == t.steps:
                self.checkpoint(model, optimizer, step, window, summary)
            if stop:
                summary["interrupted"] = True
                self.say(f"tae-torch: stopped after step {step}, checkpoint written")
                return summary
        if first_step > t.steps and self.primary():
            summary["final_eval"] = self.report_eval(model, t.steps, summary)
        if t.head_importance and self.primary():
            self.report_heads(model, t.steps)
        return summary

    def report_model(self, model, summary):
        t, m = self.config.train, self.config.model
        flops = model_lib.forward_flops_per_token(m, self.task.vocab_size, t.seq_len)
        params = model.parameter_count()
        if not self.primary():
            return
        self.sink.emit(0, [("model/params", params),
                           ("model/params_non_embedding", model.non_embedding_parameter_count()),
                           ("model/flops_per_token", flops)])
        resumed = (f", resumed after step {summary['resumed_from']}"
                   if summary["resumed_from"] > 0 else "")
        self.say(f"tae-torch: task {t.task} (vocab {self.task.vocab_size}, chance acc "
                 f"{self.task.chance:.3f}), {m.layers} layers, d_model {m.d_model}, {params} "
                 f"params, {flops:.3g} FLOPs/token, device {self.device.kind}, "
                 f"{torch.get_num_threads()} thread(s){resumed}")

    def report_train(self, step, window, summary):
        loss = window["loss_sum"] / window["steps"]
        if math.isnan(summary["first_train_loss"]):
            summary["first_train_loss"] = loss
        summary["last_train_loss"] = loss
        self.last_tokens_per_s = (window["tokens"] / window["seconds"]
                                  if window["seconds"] > 0 else 0.0)
        if self.primary():
            self.sink.emit(step, [("train/loss", loss), ("train/lr", window["lr"]),
                                  ("train/grad_norm", window["grad_norm"]),
                                  ("perf/tokens_per_s", self.last_tokens_per_s),
                                  ("perf/step_ms", 1e3 * window["seconds"] / window["steps"]),
                                  ("perf/peak_rss_mb", peak_rss_mb())])

    def report_eval(self, model, step, summary):
        result = evaluate(model, self.task, self.device)
        self.sink.emit(step, [("eval/loss", result["loss"]), ("eval/acc", result["acc"]),
                              ("eval/seq_acc", result["seq_acc"]),
                              ("eval/ppl", math.exp(result["loss"]))])
        rate = self.last_tokens_per_s
        rate_text = f"{rate / 1e6:.2f}M tok/s" if rate >= 1e6 else f"{rate / 1e3:.1f}k tok/s"
        self.say(f"step {step}/{self.config.train.steps} train/loss "
                 f"{summary['last_train_loss']:.4f} eval/loss {result['loss']:.4f} eval/acc "
                 f"{result['acc']:.4f} eval/seq_acc {result['seq_acc']:.3f} {rate_text}")
        return result

    def report_heads(self, model, step):
        base, masked, gradient = score_heads(model, self.task, self.config.model.heads,
                                             self.device)
        values = [(f"heads/L{l}H{h}", v) for (l, h), v in sorted(masked.items())]
        values += [(f"heads_grad/L{l}H{h}", v) for (l, h), v in sorted(gradient.items())]
        self.say(f"tae-torch: head importance of {len(masked)} heads (eval loss {base:.4f})")
        if values:
            self.sink.emit(step, values)

    def checkpoint(self, model, optimizer, step, window, summary):
        if not self.checkpoint_dir or not self.primary():
            return
        save_checkpoint(self.checkpoint_dir, {
            "fingerprint": self.fingerprint,
            "step": step,
            "model": {k: v.cpu() for k, v in model.state_dict().items()},
            "optimizer": _to_cpu(optimizer.state_dict()),
            "rng": torch.get_rng_state(),
            "task_stream": self.task.save_stream_state(),
            "window": dict(window),
            "first_train_loss": summary["first_train_loss"],
            "last_train_loss": summary["last_train_loss"],
        })
        self.sink.emit_checkpoint(step)

    def resume(self, model, optimizer, window, summary):
        if not self.checkpoint_dir or not self.primary():
            return 1
        state = load_checkpoint(self.checkpoint_dir, self.fingerprint)
        if state is None:
            return 1
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        torch.set_rng_state(state["rng"])
        self.task.restore_stream_state(state["task_stream"])
        window.update(state["window"])
        summary["first_train_loss"] = state["first_train_loss"]
        summary["last_train_loss"] = state["last_train_loss"]
        summary["resumed_from"] = state["step"]
        return state["step"] + 1

    def sync_start(self, model, optimizer, first_step):
        c = self.collective
        first_step = c.broadcast_object(first_step)
        if first_step > 1:
            shared = c.broadcast_object(
                {"optimizer": optimizer.state_dict(), "task": self.task.save_stream_state()}
                if c.rank == 0 else None)
            if c.rank != 0:
                optimizer.load_state_dict(shared["optimizer"])
                self.task.restore_stream_state(shared["task"])
        c.broadcast_parameters(model)
        return first_step


def _to_cpu(value):
    """A state dict with every tensor on the CPU (XLA and CUDA tensors do not pickle portably)."""
    if isinstance(value, torch.Tensor):
        return value.detach().cpu()
    if isinstance(value, dict):
        return {k: _to_cpu(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_to_cpu(v) for v in value)
    return value


def new_window():
    return {"loss_sum": 0.0, "steps": 0, "grad_norm": 0.0, "lr": 0.0, "seconds": 0.0,
            "tokens": 0}


def runtime_metadata(device, rank, world_size):
    meta = {"engine": "torch", "torch": torch.__version__.split("+")[0], "device": device.kind,
            "threads": str(torch.get_num_threads()),
            "interop_threads": str(torch.get_num_interop_threads()),
            "openblas_threads": os.environ.get("OPENBLAS_NUM_THREADS", "default"),
            "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY", "unset"),
            "python": ".".join(map(str, sys.version_info[:3])),
            "world_size": str(world_size), "rank": str(rank)}
    if device.xm is not None:
        try:
            import torch_xla  # noqa: PLC0415
            meta["torch_xla"] = torch_xla.__version__
        except (ImportError, AttributeError):
            pass
    return meta


def install_stop_handlers():
    """SIGTERM/SIGINT finish the current step, checkpoint and exit 143 (tae-train's contract)."""
    stop = {"flag": False}

    def on_signal(signum, frame):  # noqa: ARG001
        stop["flag"] = True

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    return lambda: stop["flag"]
