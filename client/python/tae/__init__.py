"""tae: a study's runs, every stored point, and its ablation table, in pandas.

    import tae
    c = tae.connect()                      # the taed of $TAE_HOME, as taectl finds it
    e = c.experiment("quickstart")         # a name (the newest with it), "e12" or 12
    e.runs()                               # one row per run, every config key typed
    e.history("train/loss")                # every stored point, long form
    e.report()                             # the table, exactly as `taectl report --json`
    e.plot("eval/loss")                    # the dashboard's bands, with matplotlib
    b = tae.open_bundle("e12-bundle")      # the same calls, offline

docs/python.md is the reference."""

import os
import shutil
import subprocess
import json

from ._errors import (BadRequest, BundleError, ConnectionLost, NotFound, ServerError, TaeError,
                      Unauthorized, Unavailable, VersionMismatch)
from ._experiment import Experiment, ReportFrame
from ._sources import BundleSource, HttpSource, default_home

try:  # written by the build (CMake: the project's version and where its programs are)
    from _tae_build import BIN_DIR as _BIN_DIR, VERSION as __version__
except ImportError:  # pragma: no cover - a copy of the package without a build beside it
    __version__ = None
    _BIN_DIR = None

__all__ = ["connect", "open_bundle", "Connection", "Experiment", "ReportFrame", "TaeError",
           "NotFound", "Unavailable", "ConnectionLost", "Unauthorized", "VersionMismatch",
           "BadRequest", "ServerError", "BundleError", "__version__"]


class _Studies:
    """What a connection and a bundle share: experiments() and experiment()."""

    def __init__(self, source):
        self._source = source

    def experiments(self):
        """One row per experiment, newest first: id, name, state, counts, created_at."""
        import pandas as pd
        rows = []
        for e in self._source.experiments():
            c = e.get("counts", {})
            rows.append({"id": e["id"], "name": e["name"], "state": e["state"],
                         "runs": c.get("total", 0), "succeeded": c.get("succeeded", 0),
                         "failed": c.get("failed", 0), "running": c.get("running", 0),
                         "queued": c.get("queued", 0),
                         "created_at": pd.Timestamp(e.get("created_at") or 0, unit="s",
                                                    tz="UTC"),
                         "description": e.get("description", "")})
        return pd.DataFrame(rows, columns=["id", "name", "state", "runs", "succeeded", "failed",
                                           "running", "queued", "created_at", "description"])

    def experiment(self, name):
        """An experiment by id (12), "e12" or name (the newest with that name)."""
        return Experiment(self._source, self._source.experiment(name))


class Connection(_Studies):
    """A running taed (tae.connect())."""

    def __init__(self, source, server_version):
        super().__init__(source)
        self.url = source.url
        self.home = source.home
        self.server_version = server_version

    def __repr__(self):
        return f"<tae.Connection {self.url} taed {self.server_version}>"

    def submit(self, path, sets=(), new=False, wait=False):
        """Submits an experiment file as `taectl submit` does (its [job] code is mounted from
        beside the file) and returns the Experiment. sets: "key=value" overrides."""
        taectl = os.path.join(_BIN_DIR, "taectl") if _BIN_DIR else shutil.which("taectl")
        if not taectl or not os.path.exists(taectl):
            raise Unavailable("submit needs taectl (not found beside this library or on PATH)")
        argv = [taectl, "--home", self.home, "submit", path, "--json"]
        for s in sets:
            argv += ["--set", s]
        if new:
            argv.append("--new")
        out = subprocess.run(argv, capture_output=True, text=True)
        if out.returncode != 0:
            message = out.stderr.strip().splitlines()[-1] if out.stderr.strip() else "failed"
            raise BadRequest(f"taectl submit {path}: {message}")
        experiment = self.experiment(json.loads(out.stdout)["experiment"])
        return experiment.wait() if wait else experiment


def connect(url=None, token=None, home=None, timeout=120.0):
    """The taed of $TAE_HOME (or `home`), found as taectl finds it, or the one at `url` (e.g.
    "http://127.0.0.1:8750" through an ssh tunnel) with its `token` ($TAE_HOME/http.token there).
    Checks that taed is this library's version: VersionMismatch names both."""
    source = HttpSource(url=url, token=token, home=home, timeout=timeout)
    session = source.session()
    server = session.get("version")
    if __version__ is not None and server != __version__:
        raise VersionMismatch(f"taed at {source.url} is version {server}, this tae library is "
                              f"{__version__}: use the library of the same build as taed "
                              "(or restart taed from this build)")
    return Connection(source, server)


def open_bundle(path):
    """A bundle `taectl export EXP --bundle DIR` wrote: the same calls as a connection's
    experiment, with no taed running. Returns the Experiment it holds."""
    if not os.path.isdir(path):
        raise BundleError(f"{path}: not a directory (write one with `taectl export EXP --bundle "
                          f"{path}`)")
    source = BundleSource(path)
    record = source.experiment_record
    return Experiment(source, record, cache=False)
