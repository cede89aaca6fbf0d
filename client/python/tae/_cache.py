"""The local cache of ended runs' series: a run that is final never changes its points (a retry
is a new attempt, and the cache is keyed by attempt and count), so its columns are fetched once.
One file per (taed, experiment, metric) under $XDG_CACHE_HOME/tae (else ~/.cache/tae), in the
columnar form taed sends (common/api/columns.h); written atomically."""

import hashlib
import os
import tempfile

import numpy as np

from . import _columns
from ._errors import BundleError


def cache_dir():
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "tae")


class SeriesCache:
    def __init__(self, identity, directory=None):
        self.identity = identity
        self.directory = directory or cache_dir()

    def _path(self, experiment, metric):
        key = hashlib.sha256(f"{self.identity}\n{experiment}\n{metric}".encode()).hexdigest()[:32]
        return os.path.join(self.directory, f"e{experiment['id']}-{key}.tcol")

    def load(self, experiment, metric):
        """{run id: (entry, steps, values, walls)} of the runs kept, {} when none or damaged."""
        try:
            with open(self._path(experiment, metric), "rb") as f:
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
        """Writes the final runs' series `kept` ({run: (entry, steps, values, walls)})."""
        if not kept:
            return
        runs = sorted(kept)
        header = {"experiment": experiment["id"], "experiment_created": experiment.get(
            "created_at"), "metric": metric, "runs": [kept[r][0] for r in runs]}
        body = _columns.encode(header, np.concatenate([kept[r][1] for r in runs]),
                               np.concatenate([kept[r][2] for r in runs]),
                               np.concatenate([kept[r][3] for r in runs]))
        try:
            os.makedirs(self.directory, mode=0o700, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=self.directory, prefix=".tmp-")
            with os.fdopen(fd, "wb") as f:
                f.write(body)
            os.replace(tmp, self._path(experiment, metric))
        except OSError:
            pass  # a cache that cannot be written only costs a fetch next time
