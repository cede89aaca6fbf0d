"""Where the data comes from: a running taed over its HTTP API (HttpSource), or a bundle that
`taectl export EXP --bundle DIR` wrote (BundleSource). Both answer the same calls with the same
shapes, so every frame is built by one code path (_experiment.py)."""

import http.client
import json
import os
import queue
import socket
import threading
import urllib.error
import urllib.parse
import urllib.request

from . import _columns, _runs
from ._errors import (BadRequest, BundleError, ConnectionLost, NotFound, ServerError,
                      Unauthorized, Unavailable)


def default_home():
    """taectl's data dir: $TAE_HOME, else $XDG_DATA_HOME/tae, else ~/.local/share/tae."""
    if os.environ.get("TAE_HOME"):
        return os.environ["TAE_HOME"]
    if os.environ.get("XDG_DATA_HOME"):
        return os.path.join(os.environ["XDG_DATA_HOME"], "tae")
    return os.path.join(os.path.expanduser("~"), ".local", "share", "tae")


def _read_line(path):
    with open(path, "r", encoding="utf-8") as f:
        return f.read().strip()


class HttpSource:
    """taed's HTTP API with the token as a bearer credential (docs/dashboard.md, "Security")."""

    def __init__(self, url=None, token=None, home=None, timeout=120.0):
        self.home = home or default_home()
        if url is None:
            try:
                url = "http://" + _read_line(os.path.join(self.home, "http.addr"))
            except OSError:
                raise Unavailable(f"taed is not running on {self.home} (no http.addr there): "
                                  "start it with `taectl up`, or pass url= and token=") from None
        if token is None:
            try:
                token = _read_line(os.path.join(self.home, "http.token"))
            except OSError as e:
                raise Unauthorized(f"no token: cannot read {self.home}/http.token "
                                   f"({e.strerror}); pass token=") from None
        self.url = url.rstrip("/")
        self._token = token
        self.timeout = timeout
        self.where = f"taed at {self.url}"

    def _open(self, path, params=None):
        query = ""
        if params:
            pairs = [(k, str(v)) for k, v in params.items() if v is not None and v != ""]
            query = "?" + urllib.parse.urlencode(pairs) if pairs else ""
        request = urllib.request.Request(self.url + path + query, headers={
            "Authorization": "Bearer " + self._token, "Accept": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                return response.read()
        except urllib.error.HTTPError as e:
            raise self._error(e.code, e.read(), path) from None
        except urllib.error.URLError as e:
            reason = e.reason
            if isinstance(reason, (ConnectionRefusedError, FileNotFoundError)):
                raise Unavailable(f"{self.where} is not answering (connection refused): is taed "
                                  "running? `taectl up` starts it") from None
            if isinstance(reason, socket.timeout):
                raise Unavailable(f"{self.where} did not answer within {self.timeout:.0f} s") \
                    from None
            raise Unavailable(f"{self.where}: {reason}") from None
        except (http.client.IncompleteRead, ConnectionResetError, BrokenPipeError,
                http.client.RemoteDisconnected) as e:
            raise ConnectionLost(f"{self.where} closed the connection mid-answer "
                                 f"({type(e).__name__}): it may have restarted; try again") \
                from None
        except socket.timeout:
            raise Unavailable(f"{self.where} did not answer within {self.timeout:.0f} s") from None

    def _error(self, status, body, path):
        try:
            message = json.loads(body.decode("utf-8")).get("error") or ""
        except (ValueError, UnicodeDecodeError, AttributeError):
            message = ""
        message = message or f"HTTP {status}"
        if status == 404:
            return NotFound(message)
        if status in (401, 403):
            return Unauthorized(f"{self.where}: {message}")
        if status == 400:
            return BadRequest(message)
        if status == 503:
            return Unavailable(f"{self.where}: {message}")
        return ServerError(f"{self.where}: {path}: {message} (HTTP {status})")

    def json(self, path, params=None):
        body = self._open(path, params)
        try:
            return json.loads(body.decode("utf-8"))
        except (ValueError, UnicodeDecodeError):
            raise ServerError(f"{self.where}: {path} answered with something that is not JSON") \
                from None

    # The calls the frames are built from.
    def session(self):
        return self.json("/api/session")

    def experiments(self):
        return self.json("/api/experiments")["experiments"]

    def experiment(self, name):
        return self.json(f"/api/experiments/{urllib.parse.quote(str(name), safe='')}")

    def runs(self, exp_id):
        """Every run, as a _runs table (taed's ?form=columns, page by page)."""
        table, after = _runs.empty(), 0
        while True:
            page = self.json(f"/api/experiments/{exp_id}/runs",
                             {"limit": 5000, "after": after, "form": "columns"})
            _runs.append(table, page)
            after = page.get("next_after") or 0
            if not after:
                return table

    def metrics(self, exp_id):
        return self.json(f"/api/experiments/{exp_id}/metrics")

    def history(self, exp_id, metric, runs=None):
        """Yields the pages (_columns.Page) of every point of `metric` of the runs (all, or the
        ids in `runs`). The next page is fetched on a thread of its own while the caller works
        on this one (the socket's reads release the GIL)."""
        listed = ",".join(str(r) for r in runs) if runs else None
        pages = queue.Queue(maxsize=1)
        stop = threading.Event()

        def fetch():
            after = 0
            try:
                while not stop.is_set():
                    body = self._open(f"/api/experiments/{exp_id}/history",
                                      {"metric": metric, "runs": listed, "after": after})
                    page = _columns.decode(body, f"{self.where}: history of {metric}")
                    after = page.header.get("next_after") or 0
                    pages.put((page, None))
                    if not after:
                        return
            except BaseException as e:  # handed to the caller, raised there
                pages.put((None, e))

        fetcher = threading.Thread(target=fetch, name="tae-history-fetch", daemon=True)
        fetcher.start()
        try:
            while True:
                page, error = pages.get()
                if error is not None:
                    raise error
                yield page
                if not page.header.get("next_after"):
                    return
        finally:
            stop.set()
            try:
                pages.get_nowait()  # a fetch waiting to hand over its page ends
            except queue.Empty:
                pass

    def report(self, exp_id, params):
        return self.json(f"/api/experiments/{exp_id}/report", params)

    def report_text(self, exp_id, fmt, params):
        p = dict(params or {})
        p["format"] = fmt
        return self._open(f"/api/experiments/{exp_id}/report.txt", p).decode("utf-8")

    def curves(self, exp_id, params):
        return self.json(f"/api/experiments/{exp_id}/curves", params)

    def cache_identity(self):
        return self.url


class BundleSource:
    """A directory `taectl export EXP --bundle DIR` wrote: manifest.json, experiment.json,
    runs.json, metrics.json, report.json, report.md, report.tex (report-scale.json and .txt for a
    ladder), history/<metric>.tcol and
    curves/<metric>.json (docs/python.md, "Offline")."""

    def __init__(self, path):
        self.path = os.path.abspath(path)
        self.where = f"bundle {self.path}"
        manifest = self._json("manifest.json")
        if manifest.get("format") != "tae-bundle-1":
            raise BundleError(f"{self.where}: manifest.json is not a tae bundle (format "
                              f"{manifest.get('format')!r}, expected 'tae-bundle-1')")
        self.manifest = manifest

    def _file(self, name):
        return os.path.join(self.path, name)

    def _json(self, name):
        try:
            with open(self._file(name), "r", encoding="utf-8") as f:
                return json.load(f)
        except FileNotFoundError:
            raise BundleError(f"{self.where}: no {name}") from None
        except (OSError, ValueError) as e:
            raise BundleError(f"{self.where}: {name}: {e}") from None

    def _check_exp(self, exp):
        e = self.experiment_record
        if str(exp) not in (str(e["id"]), f"e{e['id']}", e["name"]):
            raise NotFound(f"{self.where} holds e{e['id']} {e['name']!r}, not {exp!r}")

    @property
    def experiment_record(self):
        return self._json("experiment.json")

    def session(self):
        return {"version": self.manifest.get("version")}

    def experiments(self):
        return [self.experiment_record]

    def experiment(self, name):
        self._check_exp(name)
        return self.experiment_record

    def runs(self, exp_id):
        self._check_exp(exp_id)
        return _runs.of_records(self._json("runs.json"))

    def metrics(self, exp_id):
        self._check_exp(exp_id)
        return self._json("metrics.json")

    def history(self, exp_id, metric, runs=None):
        self._check_exp(exp_id)
        name = self.manifest.get("history", {}).get(metric)
        if name is None:
            known = ", ".join(sorted(self.manifest.get("history", {}))) or "none"
            raise NotFound(f"{self.where} has no points of '{metric}' (metrics: {known})")
        try:
            with open(self._file(name), "rb") as f:
                body = f.read()
        except OSError as e:
            raise BundleError(f"{self.where}: {name}: {e.strerror}") from None
        yield _columns.decode(body, f"{self.where}: {name}")  # the caller picks `runs` from it

    def _defaults_only(self, params, what):
        extra = {k: v for k, v in (params or {}).items() if v not in (None, "")}
        if extra:
            raise BadRequest(f"{self.where} holds the {what} as exported (default arguments); "
                             f"{', '.join(sorted(extra))} need a running taed")

    def _scale_only(self, params):
        """params asks for the ladder fit as exported (scale=1, nothing else): True; else the
        defaults are required."""
        params = {k: v for k, v in (params or {}).items() if v not in (None, "")}
        if params.pop("scale", None) is None:
            self._defaults_only(params, "report")
            return False
        self._defaults_only(params, "scale fit")
        if not self.manifest.get("scale"):
            why = self.manifest.get("scale_missing") or "the experiment has no [scale] ladder"
            raise NotFound(f"{self.where} holds no scale fit: {why}")
        return True

    def report(self, exp_id, params):
        self._check_exp(exp_id)
        if self._scale_only(params):
            return self._json(self.manifest["scale"])
        return self._json("report.json")

    def report_text(self, exp_id, fmt, params):
        self._check_exp(exp_id)
        if self._scale_only(params):
            if fmt != "table":
                raise BadRequest(f"format: the scale fit is text (table), not {fmt}")
            fmt = "scale"
        name = {"md": "report.md", "latex": "report.tex", "table": "report.txt",
                "csv": "report.csv", "scale": "report-scale.txt"}.get(fmt)
        if name is None:
            raise BadRequest(f"format: '{fmt}' is not one of table, md, csv, latex")
        try:
            with open(self._file(name), "r", encoding="utf-8") as f:
                return f.read()
        except OSError as e:
            raise BundleError(f"{self.where}: {name}: {e.strerror}") from None

    def curves(self, exp_id, params):
        self._check_exp(exp_id)
        params = dict(params or {})
        metric = params.pop("metric", None)
        self._defaults_only(params, "curves")
        name = self.manifest.get("curves", {}).get(metric)
        if name is None:
            raise NotFound(f"{self.where} has no curves of '{metric}'")
        return self._json(name)

    def cache_identity(self):
        return None  # nothing to cache: the files are local

