"""The local cache of ended runs' series: a run that is final never changes its points (a retry
is a new attempt, and the cache is keyed by attempt and count), so its columns are fetched once.
One file per (taed, experiment, metric) under $XDG_CACHE_HOME/tae (else ~/.cache/tae), in the
columnar form taed sends (common/api/columns.h); written atomically."""

import hashlib
import os
import tempfile
import threading

import numpy as np

from . import _columns
from ._errors import BundleError


def cache_dir():
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "tae")


class SeriesCache:
    _writing = {}  # path: the thread writing it (a load of that path waits for it)
    _lock = threading.Lock()

    def __init__(self, identity, directory=None):
        self.identity = identity
        self.directory = directory or cache_dir()

    def _path(self, experiment, metric):
        key = hashlib.sha256(f"{self.identity}\n{experiment}\n{metric}".encode()).hexdigest()[:32]
        return os.path.join(self.directory, f"e{experiment['id']}-{key}.tcol")

    def load(self, experiment, metric):
        """{run id: (entry, steps, values, walls)} of the runs kept, {} when none or damaged."""
        path = self._path(experiment, metric)
        with SeriesCache._lock:
            writer = SeriesCache._writing.get(path)
        if writer is not None:
            writer.join()
        try:
            with open(path, "rb") as f:
                body = f.read()
            header, columns = _columns.decode(body, "the local series cache")
        except (OSError, BundleError):
            return {}
        if header.get("experiment_created") != experiment.get("created_at"):
            return {}  # another taed's experiment of the same id
        out, offset = {}, 0
        for entry in header.get("runs", []):
            n = entry["count"]
            out[entry["run"]] = (entry, columns["step"][offset:offset + n],
                                 columns["value"][offset:offset + n],
                                 columns["wall_time"][offset:offset + n])
            offset += n
        return out

    def store(self, experiment, metric, kept):
        """Writes the final runs' series `kept` ({run: (entry, steps, values, walls)}) on a
        thread of its own, so that the frame is built meanwhile (the write syscalls release the
        GIL); the interpreter waits for it at exit. Returns the thread."""
        if not kept:
            return None
        path = self._path(experiment, metric)
        with SeriesCache._lock:
            before = SeriesCache._writing.get(path)
            writer = threading.Thread(target=self._write,
                                      args=(experiment, metric, dict(kept), before),
                                      name="tae-cache-write")
            SeriesCache._writing[path] = writer
        writer.start()
        return writer

    def _write(self, experiment, metric, kept, before):
        if before is not None:
            before.join()  # the older write first: the newer one is what stays
        try:
            self._write_file(experiment, metric, kept)
        finally:
            path = self._path(experiment, metric)
            with SeriesCache._lock:
                if SeriesCache._writing.get(path) is threading.current_thread():
                    del SeriesCache._writing[path]

    def _write_file(self, experiment, metric, kept):
        runs = sorted(kept)
        header = {"experiment": experiment["id"], "experiment_created": experiment.get(
            "created_at"), "metric": metric, "runs": [kept[r][0] for r in runs]}
        points = sum(len(kept[r][1]) for r in runs)
        try:
            os.makedirs(self.directory, mode=0o700, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=self.directory, prefix=".tmp-")
            try:
                # Run by run through the file's buffer: no copy of the whole series in memory.
                with os.fdopen(fd, "wb") as f:
                    f.write(_columns.encode_head(header, points))
                    for column, dtype in ((1, "<i8"), (2, "<f8"), (3, "<f8")):
                        for r in runs:
                            f.write(memoryview(np.ascontiguousarray(kept[r][column],
                                                                    dtype=dtype)).cast("B"))
                os.replace(tmp, self._path(experiment, metric))
            except BaseException:
                os.unlink(tmp)
                raise
        except OSError:
            pass  # a cache that cannot be written only costs a fetch next time
