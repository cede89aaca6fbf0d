"""The local cache of ended runs' series: a run that is final never changes its points (a retry
is a new attempt, and the cache is keyed by attempt and count), so its columns are fetched once.
One file per (taed, experiment, metric) under $XDG_CACHE_HOME/tae (else ~/.cache/tae), written
atomically: the magic "TAESER2\n", a little-endian uint32 length, a JSON header (the
experiment's creation time, the byte length of each page), then the pages, each a body in the
columnar form taed sends (common/api/columns.h), as it came where every run in it is kept."""

import hashlib
import json
import os
import struct
import tempfile
import threading

import numpy as np

from . import _columns
from ._errors import BundleError

MAGIC = b"TAESER2\n"


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
        return os.path.join(self.directory, f"e{experiment['id']}-{key}.tser")

    def load(self, experiment, metric):
        """{run id: (entry, page, k)} of the runs kept, {} when none or damaged."""
        path = self._path(experiment, metric)
        with SeriesCache._lock:
            writer = SeriesCache._writing.get(path)
        if writer is not None:
            writer.join()
        try:
            with open(path, "rb") as f:
                body = f.read()
            if body[:len(MAGIC)] != MAGIC or len(body) < len(MAGIC) + 4:
                return {}
            (length,) = struct.unpack_from("<I", body, len(MAGIC))
            at = len(MAGIC) + 4 + length
            header = json.loads(body[len(MAGIC) + 4:at].decode("utf-8"))
            if header.get("experiment_created") != experiment.get("created_at"):
                return {}  # another taed's experiment of the same id
            view = memoryview(body)
            out = {}
            for size in header.get("pages", []):
                page = _columns.decode(view[at:at + size], "the local series cache")
                at += size
                for k, entry in enumerate(page.runs):
                    if entry["count"] > 0:
                        out[entry["run"]] = (entry, page, k)
            if at != len(body):
                return {}
            return out
        except (OSError, BundleError, ValueError, UnicodeDecodeError, TypeError, KeyError,
                struct.error):
            return {}

    def store(self, experiment, metric, kept):
        """Writes the final runs' series `kept` ({run: (entry, page, k)}) on a thread of its
        own, so that the frame is built meanwhile (the write syscalls release the GIL); the
        interpreter waits for it at exit. Returns the thread."""
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

    @staticmethod
    def _bodies(kept):
        """Each page's body once: as it came where every run with points in it is kept from it,
        else its kept runs written anew (plain columns)."""
        pages = {}  # id(page): (page, [k, ...]), in the order of the runs
        for run in sorted(kept):
            _, page, k = kept[run]
            pages.setdefault(id(page), (page, []))[1].append(k)
        for page, ks in pages.values():
            if len(ks) == int(np.count_nonzero(page.counts)):
                yield page.body
                continue
            arrays = [page.run_arrays(k) for k in ks]
            yield _columns.encode({"metric": page.header.get("metric")},
                                  [page.runs[k] for k in ks],
                                  [np.concatenate([a[i] for a in arrays]) for i in range(3)])

    def _write_file(self, experiment, metric, kept):
        bodies = list(self._bodies(kept))
        header = {"experiment": experiment["id"], "experiment_created": experiment.get(
            "created_at"), "metric": metric, "pages": [len(b) for b in bodies]}
        text = json.dumps(header, separators=(",", ":")).encode("utf-8")
        try:
            os.makedirs(self.directory, mode=0o700, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=self.directory, prefix=".tmp-")
            try:
                with os.fdopen(fd, "wb") as f:
                    f.write(MAGIC + struct.pack("<I", len(text)) + text)
                    for body in bodies:
                        f.write(body)
                os.replace(tmp, self._path(experiment, metric))
            except BaseException:
                os.unlink(tmp)
                raise
        except OSError:
            pass  # a cache that cannot be written only costs a fetch next time
