"""The training loop of the torch engine: the contract of docs/engine.md, in PyTorch.

Same metric lines, steps and names as tae-train (model/* at step 0, train/* and perf/* every
train.log_every steps and at the last, eval/* every train.eval_every steps and at the last,
heads/* at the end), same checkpoint behaviour (every train.checkpoint_every steps, at the end
and on SIGTERM, written atomically; a run that finds one resumes after its step), same
data-parallel arithmetic (every rank draws the global batch and trains on its rows; gradients
are summed).

The step loop never waits for the device: the loss, gradient norm and stop flag stay device
tensors and are read once per metrics line and once per evaluation (device.Device.read), and
the next batches are drawn and moved on a background thread (prefetch.Prefetcher).
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
from . import parallel
from . import prefetch
from . import spec as spec_lib
from .device import Device  # noqa: F401 (the engine's public name for it)

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


def make_optimizer(t, model, matrices=None):
    """AdamW (decoupled decay) or SGD with momentum 0.9; weight decay on matrices only.
    `matrices`: the names of the matrix parameters when the model's own shapes no longer say
    (FSDP shards them flat)."""
    def is_matrix(name, p):
        if matrices is None:
            return p.dim() >= 2
        return name.replace("_fsdp_wrapped_module.", "") in matrices
    named = list(model.named_parameters())
    decay = [p for n, p in named if is_matrix(n, p)]
    no_decay = [p for n, p in named if not is_matrix(n, p)]
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
    before scaling as a device tensor (computed and applied on the device, never read here)."""
    if hasattr(model, "clip_grad_norm_"):  # FSDP: the norm over every rank's shards
        return model.clip_grad_norm_(grad_clip if grad_clip > 0 else float("inf"))
    if grad_clip > 0:
        return torch.nn.utils.clip_grad_norm_(list(model.parameters()), grad_clip)
    grads = [p.grad.detach() for p in model.parameters() if p.grad is not None]
    if not grads:
        return torch.zeros(())
    return torch.norm(torch.stack([torch.norm(g, 2.0) for g in grads]), 2.0)


def build(config, vocab_size):
    """The model of `config` for `vocab_size` tokens, seeded with train.seed."""
    torch.manual_seed(config.train.seed)
    return model_lib.TransformerLM(config.model, vocab_size, config.train.seq_len)


def train_step(model, optimizer, batch, config, step, device, collective=None):
    """One optimiser step (1-based `step`) on a prefetch.DeviceBatch (or a task Batch, placed
    here): returns (loss, grad_norm before clipping) as device tensors. Nothing is read back.
    The loss is this rank's rows' summed cross entropy over the global batch's scored positions,
    so the ranks' gradients sum to the one-process gradient."""
    lr = learning_rate(config.train, step - 1)
    for group in optimizer.param_groups:
        group["lr"] = lr
    if not isinstance(batch, prefetch.DeviceBatch):
        rank, world = (0, 1) if collective is None else (collective.rank, collective.world_size)
        batch = prefetch.place(batch, device, rank, world)
    optimizer.zero_grad(set_to_none=False)
    with device.autocast(config.train.precision):
        logits = model(batch.inputs)
    loss = scored_cross_entropy_sum(logits.float(), batch.targets, batch.mask) / batch.total_scored
    if config.train.sharding == "fsdp" and collective is not None:
        # FSDP averages the ranks' gradients; the engine's arithmetic sums them.
        (loss * collective.world_size).backward()
    else:
        loss.backward()
        if collective is not None:
            collective.all_reduce_gradients(model)
    grad_norm = clip_gradients(model, config.train.grad_clip)
    optimizer.step()
    return loss.detach(), grad_norm.detach()


def evaluate(model, task, device, precision="fp32"):
    """eval loss, token accuracy and row accuracy over the task's eval batches, summed on the
    device and read back once."""
    model.eval()
    sums = torch.zeros(4, device=device.device)  # loss, correct, scored, rows right
    rows = 0
    with torch.no_grad():
        for batch in task.eval_batches:
            b = prefetch.place(batch, device)
            with device.autocast(precision):
                logits = model(b.inputs)
            logits = logits.float()
            hits = (logits.argmax(-1) == b.targets).float() * b.mask
            sums += torch.stack([scored_cross_entropy_sum(logits, b.targets, b.mask),
                                 hits.sum(), b.mask.sum(),
                                 (hits.sum(1) == b.mask.sum(1)).float().sum()])
            rows += batch.inputs.size(0)
    model.train()
    device.step_done()
    loss_sum, correct, scored, rows_right = device.read(list(sums))
    loss = loss_sum / scored if scored > 0 else float("nan")
    return {"loss": loss, "acc": correct / scored if scored > 0 else 0.0,
            "seq_acc": rows_right / rows if rows > 0 else 0.0}


def _eval_loss(model, task, device):
    sums = torch.zeros(2, device=device.device)
    with torch.no_grad():
        for batch in task.eval_batches:
            b = prefetch.place(batch, device)
            sums += torch.stack([scored_cross_entropy_sum(model(b.inputs), b.targets, b.mask),
                                 b.mask.sum()])
    device.step_done()
    loss_sum, scored = device.read(list(sums))
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
                # A diverged value: the agent reads "nan", "inf" and "-inf" back as that value.
                record[name] = "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
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

# torch.load(weights_only=True) (torch 1.13's) rebuilds tensors, dicts, lists, tuples, strings,
# ints, bools and None, but not floats: they are stored as (FLOAT_MARK, repr) pairs, which
# round-trip exactly (nan and inf included).
FLOAT_MARK = "\0float"


def _weights_only_safe(value):
    if isinstance(value, float):
        return (FLOAT_MARK, repr(value))
    if isinstance(value, dict):
        return {k: _weights_only_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_weights_only_safe(v) for v in value)
    return value


def _from_weights_only_safe(value):
    if isinstance(value, tuple) and len(value) == 2 and value[0] == FLOAT_MARK:
        return float(value[1])
    if isinstance(value, dict):
        return {k: _from_weights_only_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_from_weights_only_safe(v) for v in value)
    return value


def save_checkpoint(directory, state):
    """Writes `state` (tensors, containers, strings, numbers) atomically; loadable with
    torch.load(weights_only=True), so restoring one never runs pickled code."""
    state = _weights_only_safe(state)
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
        state = _from_weights_only_safe(torch.load(path, map_location="cpu", weights_only=True))
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
        # One rank has nothing to shard: it trains the same arithmetic unwrapped.
        self.fsdp = config.train.sharding == "fsdp" and collective is not None
        self.fingerprint = spec_lib.fingerprint(spec)
        self.last_tokens_per_s = 0.0

    def primary(self):
        return self.collective is None or self.collective.rank == 0

    def evaluates(self):
        """Whether this rank runs evaluations: rank 0, or every rank when FSDP's forward needs
        all of them (rank 0 alone reports)."""
        return self.primary() or self.fsdp

    def say(self, text):
        if self.progress is not None and self.primary():
            print(text, file=self.progress, flush=True)

    def prepare(self):
        """(model, optimizer, first step, window, summary), resumed and in step across ranks."""
        t = self.config.train
        model = build(self.config, self.task.vocab_size).to(self.device.device)
        counts = (model.parameter_count(), model.non_embedding_parameter_count())
        matrices = None
        if self.fsdp:
            why = parallel.fsdp_unavailable(self.device)
            if why is not None:
                raise RuntimeError(f'train.sharding = "fsdp": {why}')
            matrices = {n for n, p in model.named_parameters() if p.dim() >= 2}
            model = parallel.wrap_fsdp(model, self.device, model_lib.Block)
        optimizer = make_optimizer(t, model, matrices)
        window = new_window()
        summary = {"first_train_loss": float("nan"), "last_train_loss": float("nan"),
                   "resumed_from": 0, "interrupted": False, "final_eval": None}
        if self.fsdp:
            first_step = self.resume_sharded(model, optimizer, window, summary)
        else:
            first_step = self.resume(model, optimizer, window, summary)
            if self.collective is not None:
                first_step = self.sync_start(model, optimizer, first_step)
                self.collective.attach_flat_gradients(model)
        self.report_model(counts, summary)
        return model, optimizer, first_step, window, summary

    def run(self):
        t = self.config.train
        model, optimizer, first_step, window, summary = self.prepare()
        model.train()
        profiled = _profiler(t, self.primary())
        rank, world = ((0, 1) if self.collective is None
                       else (self.collective.rank, self.collective.world_size))
        batches = prefetch.Prefetcher(self.task, self.device, rank, world) \
            if first_step <= t.steps else None
        loss_sum = torch.tensor(window["loss_sum"], device=self.device.device)
        grad_norm = torch.tensor(window["grad_norm"], device=self.device.device)
        stream_state = None
        window_start = None
        try:
            for step in range(first_step, t.steps + 1):
                if window_start is None:
                    window_start = time.perf_counter()
                with profiled(step):  # a profile when TAE asks, or at train.profile_at
                    batch = batches.next()
                    loss, grad_norm = train_step(model, optimizer, batch, self.config, step,
                                                 self.device, self.collective)
                stream_state = batch.stream_state
                loss_sum = loss_sum + loss
                window["lr"] = learning_rate(t, step - 1)
                window["steps"] += 1
                window["tokens"] += t.batch_size * t.seq_len
                logged = {}
                if step % t.log_every == 0 or step == t.steps:
                    self.read_window(step, loss_sum, grad_norm, logged)
                self.device.step_done()  # XLA: runs the step's graph and the read above
                if logged:
                    window["seconds"] += time.perf_counter() - window_start
                    window["loss_sum"], window["grad_norm"] = logged["loss_sum"], logged["norm"]
                    self.report_train(step, window, summary)
                    window, window_start = new_window(), None
                    loss_sum = torch.zeros((), device=self.device.device)
                paused = time.perf_counter()
                if ((t.eval_every > 0 and step % t.eval_every == 0) or step == t.steps) \
                        and self.evaluates():
                    summary["final_eval"] = self.report_eval(model, step, summary)
                if self.collective is not None:
                    stop = logged.get("stop", False)
                else:
                    stop = step < t.steps and self.should_stop()
                scheduled = t.checkpoint_every > 0 and step % t.checkpoint_every == 0
                if (stop or scheduled or step == t.steps) and self.checkpoint_dir:
                    saved = dict(window)
                    if window_start is not None:  # a partial window: its values so far
                        saved["seconds"] += paused - window_start
                        saved["loss_sum"], saved["grad_norm"] = self.device.read(
                            [loss_sum, grad_norm])
                    self.checkpoint(model, optimizer, step, saved, summary, stream_state)
                if window_start is not None:  # evaluation and checkpoints are not steps
                    window_start += time.perf_counter() - paused
                if stop:
                    summary["interrupted"] = True
                    self.say(f"tae-torch: stopped after step {step}, checkpoint written")
                    return summary
        finally:
            if batches is not None:
                batches.close()
        if first_step > t.steps and self.evaluates():
            summary["final_eval"] = self.report_eval(model, t.steps, summary)
        if t.head_importance and self.primary():
            self.report_heads(model, t.steps)
        return summary

    def read_window(self, step, loss_sum, grad_norm, into):
        """Reads the window's loss (summed over the ranks), the latest grad norm and, across
        ranks, whether any rank was asked to stop: one device read, into `into` (at once, or
        on XLA when the step's graph has run)."""
        values = [loss_sum, grad_norm]
        if self.collective is not None:
            stop_here = step < self.config.train.steps and self.should_stop()
            shared = torch.stack([loss_sum, torch.full((), 1.0 if stop_here else 0.0,
                                                       device=self.device.device)])
            self.collective.sum_(shared)
            values = [shared[0], grad_norm, shared[1]]

        def consume(read):
            into["loss_sum"], into["norm"] = read[0], read[1]
            into["stop"] = len(read) > 2 and read[2] > 0
        self.device.read_later(values, consume)

    def report_model(self, counts, summary):
        t, m = self.config.train, self.config.model
        flops = model_lib.forward_flops_per_token(m, self.task.vocab_size, t.seq_len)
        params, non_embedding = counts
        if not self.primary():
            return
        self.sink.emit(0, [("model/params", params),
                           ("model/params_non_embedding", non_embedding),
                           ("model/flops_per_token", flops)])
        resumed = (f", resumed after step {summary['resumed_from']}"
                   if summary["resumed_from"] > 0 else "")
        self.say(f"tae-torch: task {t.task} (vocab {self.task.vocab_size}, chance acc "
                 f"{self.task.chance:.3f}), {m.layers} layers, d_model {m.d_model}, {params} "
                 f"params, {flops:.3g} FLOPs/token, device {self.device.kind}, precision "
                 f"{t.precision}, sharding {t.sharding if self.fsdp else 'none'}, "
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
        result = evaluate(model, self.task, self.device, self.config.train.precision)
        if not self.primary():
            return result
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

    def checkpoint(self, model, optimizer, step, window, summary, stream_state):
        """Writes step's checkpoint (rank 0). Under FSDP every rank takes part in gathering the
        whole model and optimizer state, so the file is the same for any world size."""
        if not self.checkpoint_dir:
            return
        if self.fsdp:
            model_state, optim_state = parallel.full_state(model, optimizer)
        elif self.primary():
            model_state = model.state_dict()
            optim_state = optimizer_state_by_name(model, optimizer, optimizer.state_dict())
        if not self.primary():
            return
        save_checkpoint(self.checkpoint_dir, {
            "fingerprint": self.fingerprint,
            "step": step,
            "model": _to_cpu(dict(model_state)),
            "optimizer": _to_cpu(optim_state),
            "rng": torch.get_rng_state(),
            "task_stream": (stream_state if stream_state is not None
                            else self.task.save_stream_state()),
            "window": {k: float(v) for k, v in window.items()},
            "first_train_loss": summary["first_train_loss"],
            "last_train_loss": summary["last_train_loss"],
        })
        self.sink.emit_checkpoint(step)

    def _restore_host_state(self, state, window, summary):
        torch.set_rng_state(state["rng"])
        self.task.restore_stream_state(state["task_stream"])
        window.update({k: (int(v) if k in ("steps", "tokens") else v)
                       for k, v in state["window"].items()})
        summary["first_train_loss"] = state["first_train_loss"]
        summary["last_train_loss"] = state["last_train_loss"]
        summary["resumed_from"] = state["step"]

    def resume(self, model, optimizer, window, summary):
        if not self.checkpoint_dir or not self.primary():
            return 1
        state = load_checkpoint(self.checkpoint_dir, self.fingerprint)
        if state is None:
            return 1
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(optimizer_state_by_index(model, optimizer, state["optimizer"]))
        self._restore_host_state(state, window, summary)
        return state["step"] + 1

    def resume_sharded(self, model, optimizer, window, summary):
        """FSDP: rank 0 reads the whole checkpoint, every rank loads its shards of it."""
        state = None
        if self.checkpoint_dir and self.primary():
            state = load_checkpoint(self.checkpoint_dir, self.fingerprint)
        state = self.collective.broadcast_object(state)
        if state is None:
            return 1
        parallel.load_full_state(model, optimizer, state["model"], state["optimizer"])
        self._restore_host_state(state, window, summary)
        return state["step"] + 1

    def sync_start(self, model, optimizer, first_step):
        c = self.collective
        first_step = c.broadcast_object(first_step)
        if first_step > 1:
            shared = c.broadcast_object(
                {"optimizer": _to_cpu(optimizer.state_dict()),
                 "task": self.task.save_stream_state()} if c.rank == 0 else None)
            if c.rank != 0:
                optimizer.load_state_dict(shared["optimizer"])
                self.task.restore_stream_state(shared["task"])
        c.broadcast_parameters(model)
        return first_step


def _parameter_names(model, optimizer):
    """The names of the optimizer's parameters in its state_dict's index order."""
    names = {id(p): n.replace("_fsdp_wrapped_module.", "") for n, p in model.named_parameters()}
    return [names[id(p)] for group in optimizer.param_groups for p in group["params"]]


def optimizer_state_by_name(model, optimizer, state):
    """An optimizer state_dict keyed by parameter name, as FSDP's full optim_state_dict is: the
    checkpoint's one format, whatever the sharding and world size that wrote it."""
    names = _parameter_names(model, optimizer)
    return {"state": {names[i]: v for i, v in state["state"].items()},
            "param_groups": [dict(g, params=[names[i] for i in g["params"]])
                             for g in state["param_groups"]]}


def optimizer_state_by_index(model, optimizer, state):
    """The inverse of optimizer_state_by_name, for optimizer.load_state_dict."""
    index = {n: i for i, n in enumerate(_parameter_names(model, optimizer))}
    try:
        return {"state": {index[n]: v for n, v in state["state"].items()},
                "param_groups": [dict(g, params=[index[n] for n in g["params"]])
                                 for g in state["param_groups"]]}
    except KeyError as e:
        raise RuntimeError(f"checkpoint: optimizer state for an unknown parameter {e}") from None


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
    """A metrics window's host-side counters (its loss sum and grad norm live on the device
    until the window is read)."""
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
