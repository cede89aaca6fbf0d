"""Train batches drawn ahead of the step that needs them, off the step's critical path.

A background thread draws the task's batches in stream order, keeps this rank's rows, counts the
global batch's scored positions and moves the tensors to the device (asynchronously from pinned
memory on CUDA; on XLA through torch_xla's MpDeviceLoader, which does the transfers on threads of
its own). Each batch carries the task stream's position after it, so a checkpoint records where
the *consumed* stream stands, not how far the thread has run ahead.
"""

import queue
import threading


DEPTH = 2  # batches ready ahead of the step


class DeviceBatch:
    """One step's rows on the device: inputs, targets, mask of this rank's rows, and the scored
    positions of the whole global batch (the loss's denominator)."""

    def __init__(self, inputs, targets, mask, total_scored, stream_state=None):
        self.inputs = inputs
        self.targets = targets
        self.mask = mask
        self.total_scored = total_scored
        self.stream_state = stream_state


def host_rows(batch, rank, world_size):
    """(inputs, targets, mask, total_scored) on the host: this rank's rows of the global
    batch and the whole batch's scored positions (clamped to at least 1)."""
    total = batch.mask.sum().clamp_min(1.0)
    if world_size == 1:
        return batch.inputs, batch.targets, batch.mask, total
    rows = batch.inputs.size(0) // world_size
    part = slice(rows * rank, rows * (rank + 1))
    return batch.inputs[part], batch.targets[part], batch.mask[part], total


def place(batch, device, rank=0, world_size=1):
    """A task Batch as this rank's DeviceBatch, moved on the calling thread."""
    return DeviceBatch(*(device.place(t) for t in host_rows(batch, rank, world_size)))


class Prefetcher:
    """next() is the next train batch of `task` as a DeviceBatch; close() stops the thread."""

    def __init__(self, task, device, rank=0, world_size=1, depth=DEPTH):
        self.task = task
        self.device = device
        self.rank = rank
        self.world_size = world_size
        self.stopped = threading.Event()
        self.failure = None
        if device.kind == "xla":
            self._iterator = self._xla_loader(depth)
            return
        self.ready = queue.Queue(maxsize=depth)
        self.thread = threading.Thread(target=self._fill, name="tae-prefetch", daemon=True)
        self.thread.start()
        self._iterator = None

    def _draw(self):
        batch = self.task.next_train_batch()
        state = self.task.save_stream_state()
        return host_rows(batch, self.rank, self.world_size), state

    def _fill(self):
        try:
            while not self.stopped.is_set():
                tensors, state = self._draw()
                item = DeviceBatch(*(self.device.place(t) for t in tensors), state)
                while not self.stopped.is_set():
                    try:
                        self.ready.put(item, timeout=0.1)
                        break
                    except queue.Full:
                        continue
        except BaseException as e:  # noqa: BLE001 (handed to the consumer, raised there)
            self.failure = e
            self.ready.put(None)

    def _xla_loader(self, depth):
        import torch_xla.distributed.parallel_loader as pl  # noqa: PLC0415
        states = {}

        def batches():
            index = 0
            while not self.stopped.is_set():
                tensors, states[index] = self._draw()
                yield tensors
                index += 1

        loader = pl.MpDeviceLoader(batches(), self.device.device, loader_prefetch_size=depth,
                                   device_prefetch_size=depth)
        consumed = 0
        for inputs, targets, mask, total in loader:  # in the order batches() yielded them
            yield DeviceBatch(inputs, targets, mask, total, states.pop(consumed))
            consumed += 1

    def next(self):
        if self._iterator is not None:
            return next(self._iterator)
        item = self.ready.get()
        if item is None:
            raise RuntimeError(f"drawing a train batch failed: {self.failure}") from self.failure
        return item

    def close(self):
        self.stopped.set()
        if self._iterator is None:
            self.thread.join()
