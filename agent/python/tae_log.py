"""Metrics from your own training script to TAE, without dependencies.

    import tae_log
    tae_log.log(step=40, loss=2.31, lr=3e-4)       # one point per key at step 40
    tae_log.meta(torch=torch.__version__)           # facts about the run, shown by taectl show
    cfg = tae_log.config()                          # the run's config: cfg["params"]["rotary"]
    tae_log.checkpoint(step=40)                     # TAE_CHECKPOINT_DIR now holds step 40's
    for step in range(start, steps):
        with tae_log.profile(step):                 # profiles these steps when TAE asks
            train_step()

Under a TAE agent the points go as JSON lines to the file descriptor in TAE_METRICS_FD, which
the agent reads, journals and streams to taed (exactly once, across reconnects). Outside TAE
(no TAE_METRICS_FD) they are printed to stdout as `step=40 loss=2.31 lr=0.0003`, the key=value
shape TAE also parses from a job's stdout, so the same script runs unchanged on a laptop.

Keys are 1-128 printable ASCII characters without spaces or '='; values are int, float or bool
(NaN and infinities are sent as the strings "nan", "inf" and "-inf", which TAE reads as a
diverged metric: a search counts it as the worst value, a report never shows the last finite
value before it as the run's final one). `step` is
an int >= 0; without it the agent uses the run's last step.

Profiles on demand: the agent asks by writing {"id": "p3", "steps": 5, "seconds": 0} to the
file named in TAE_PROFILE_REQUEST; tae_log.profile() around each training step sees it when a
step begins, runs the framework's profiler (jax.profiler, torch_xla's, or torch.profiler) for
that many steps (or seconds), writes its files into TAE_PROFILE_DIR and answers on the metrics
stream. Outside TAE (no TAE_PROFILE_DIR or TAE_METRICS_FD) profile() does nothing.
"""

import json
import math
import os
import shutil
import sys
import time

__all__ = ["log", "meta", "config", "checkpoint", "resume_step", "profile",
           "profile_requested", "profile_done"]

_MAX_KEY = 128
_MAX_PROFILE_ID = 48
_out = None


def _stream():
    global _out
    if _out is None:
        fd = os.environ.get("TAE_METRICS_FD")
        if fd:
            _out = os.fdopen(int(fd), "w", buffering=1, encoding="utf-8", closefd=False)
        else:
            _out = False  # stdout, key=value
    return _out


def _check_key(key):
    if not isinstance(key, str) or not 0 < len(key) <= _MAX_KEY or any(
            not ("!" <= c <= "~") or c == "=" for c in key):
        raise ValueError(f"tae_log: {key!r} is not a metric key (1-{_MAX_KEY} printable "
                         "ASCII characters, no spaces or '=')")


def _number(key, value):
    if isinstance(value, bool):
        return 1.0 if value else 0.0
    if isinstance(value, (int, float)):
        value = float(value)
        if math.isfinite(value):
            return value
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    raise ValueError(f"tae_log: {key}={value!r} is not a number")


def log(step=None, **values):
    """Records numeric values at `step` (an int >= 0, or None: the run's last step)."""
    if step is not None and (isinstance(step, bool) or not isinstance(step, int) or step < 0):
        raise ValueError(f"tae_log: step={step!r} is not an int >= 0")
    record = {} if step is None else {"step": step}
    for key, value in values.items():
        _check_key(key)
        record[key] = _number(key, value)
    out = _stream()
    if out:
        out.write(json.dumps(record, separators=(",", ":")) + "\n")
    else:
        parts = [f"{k}={v if isinstance(v, str) else repr(v)}" for k, v in record.items()]
        print(" ".join(parts), file=sys.stdout, flush=True)


def config():
    """The run's resolved config as a nested dict ({"params": {"rotary": False}, "train": ...}).

    TAE writes it for every run and names the file in TAE_CONFIG; outside TAE (no TAE_CONFIG)
    this is an empty dict, so a script can fall back to its own defaults.
    """
    path = os.environ.get("TAE_CONFIG")
    if not path:
        return {}
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def meta(**facts):
    """Records facts about the run (strings: library versions, hardware), merged key by key."""
    strings = {}
    for key, value in facts.items():
        _check_key(key)
        strings[key] = str(value)
    out = _stream()
    if out:
        out.write(json.dumps({"meta": strings}, separators=(",", ":")) + "\n")


def checkpoint(step):
    """Says that TAE_CHECKPOINT_DIR now holds the complete checkpoint of `step` (an int >= 0).

    Call it after the files are written. The agent captures the directory at once and uploads
    what taed does not have yet; a later attempt on any machine starts with the run's last
    uploaded checkpoint restored into TAE_CHECKPOINT_DIR and its step in TAE_RESUME_STEP.
    Write each checkpoint to new files and rename them into place (torch.save to a temporary
    name, then os.replace): a file rewritten in place while it is uploaded spoils that upload.
    Outside TAE (no TAE_METRICS_FD) this does nothing.
    """
    if isinstance(step, bool) or not isinstance(step, int) or step < 0:
        raise ValueError(f"tae_log: checkpoint step={step!r} is not an int >= 0")
    out = _stream()
    if out:
        out.write(json.dumps({"checkpoint": {"step": step, "time": time.time()}},
                             separators=(",", ":")) + "\n")


def resume_step():
    """The step of the checkpoint TAE restored into TAE_CHECKPOINT_DIR, or None."""
    value = os.environ.get("TAE_RESUME_STEP")
    return int(value) if value else None


# Profiles on demand. The agent writes a request file (TAE_PROFILE_REQUEST, atomically) and
# deletes it only after it has handled the answer, so the same request may be read many times:
# _handled keeps the ids this process has answered, _bad the malformed files it has answered.
_profile_paths = None  # (TAE_PROFILE_DIR, TAE_PROFILE_REQUEST), read once
_handled = set()
_bad = set()
_capture = None  # the _Capture in progress
_self_steps = 0  # steps of a self-initiated capture (profile(at=...)) waiting to begin


class _Refused(Exception):
    """A profile that cannot be taken here; its message is the answer's "error"."""


def _paths():
    global _profile_paths
    if _profile_paths is None:
        _profile_paths = (os.environ.get("TAE_PROFILE_DIR") or None,
                          os.environ.get("TAE_PROFILE_REQUEST") or None)
    return _profile_paths


def _answer(profile_id, fields):
    _handled.add(profile_id)
    out = _stream()
    if out:
        record = {"id": profile_id, "time": time.time()}
        record.update(fields)
        out.write(json.dumps({"profile": record}, separators=(",", ":")) + "\n")


def _is_profile_id(value):
    return isinstance(value, str) and 0 < len(value) <= _MAX_PROFILE_ID


def _count(value, integral):
    """value as a number >= 0 (an int if integral), or None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if not math.isfinite(value) or value < 0 or (integral and value != int(value)):
        return None
    return int(value) if integral else value


def profile_requested():
    """The pending profile request, {"id": "p3", "steps": 5, "seconds": 0}, or None.

    Exactly one of steps and seconds is > 0. A request stays pending until profile_done()
    answers its id (profile() does that itself). This costs one attempt to open the file named
    in TAE_PROFILE_REQUEST; outside TAE (no TAE_PROFILE_REQUEST) it is None at once. A malformed
    request is answered once with an error, so the agent is not left waiting, and is None.
    """
    path = _paths()[1]
    if path is None:
        return None
    try:
        with open(path, "rb") as f:
            raw = f.read(65536)
    except OSError:
        return None
    if not raw.strip() or raw in _bad:  # empty: a writer that does not rename into place
        return None
    try:
        request = json.loads(raw)
    except ValueError:
        request = None
    profile_id = request.get("id") if isinstance(request, dict) else None
    if not _is_profile_id(profile_id):
        # The agent takes only string ids: one that cannot be read is answered as "malformed".
        problem = (f"no \"id\" of 1-{_MAX_PROFILE_ID} characters" if request is not None
                   else "not JSON")
        profile_id = "malformed"
    elif profile_id in _handled or (_capture is not None and _capture.id == profile_id):
        return None
    else:
        steps = _count(request.get("steps", 0), True)
        seconds = _count(request.get("seconds", 0), False)
        if steps is not None and seconds is not None and (steps > 0) != (seconds > 0):
            return {"id": profile_id, "steps": steps, "seconds": seconds}
        problem = "exactly one of \"steps\" (an int) and \"seconds\" must be > 0"
    _bad.add(raw)
    _answer(profile_id, {"error": f"malformed profile request {path}: {problem}: "
                                  f"{raw[:200].decode('utf-8', 'replace')}"})
    return None


def profile_done(request_or_id, step=None, steps=0, tool=None, error=None):
    """Says that TAE_PROFILE_DIR now holds the complete profile of a request, or why not.

    request_or_id is what profile_requested() returned, or its id; a profile the job takes on
    its own initiative has an id of its own starting with "step" ("step120"). step is the
    first profiled step (or None), steps how many steps it captured, tool the profiler that
    wrote it ("torch.profiler"). With error (a string), the answer is a refusal instead. Call
    it after the files are written; the id is never acted on again by this process. profile()
    calls it itself. Outside TAE (no TAE_METRICS_FD) this sends nothing.
    """
    profile_id = request_or_id.get("id") if isinstance(request_or_id, dict) else request_or_id
    if not _is_profile_id(profile_id):
        raise ValueError(f"tae_log: profile id {profile_id!r} is not a string of "
                         f"1-{_MAX_PROFILE_ID} characters")
    if error is not None:
        _answer(profile_id, {"error": str(error)})
        return
    if step is not None and (isinstance(step, bool) or not isinstance(step, int) or step < 0):
        raise ValueError(f"tae_log: profile step={step!r} is not an int >= 0")
    if isinstance(steps, bool) or not isinstance(steps, int) or steps < 0:
        raise ValueError(f"tae_log: profile steps={steps!r} is not an int >= 0")
    _answer(profile_id, {"step": step, "steps": steps, "tool": tool})


def _start_profiler(directory):
    """Starts the profiler of the framework in use; returns (tool, stop, annotate).

    stop() ends the capture and leaves its files in directory; annotate(step) is a context
    manager marking one step in the trace, or None.
    """
    if "jax" in sys.modules:
        import jax.profiler
        jax.profiler.start_trace(directory)

        def annotate(step):
            if step is None:
                return jax.profiler.TraceAnnotation("train")
            return jax.profiler.StepTraceAnnotation("train", step_num=step)
        return "jax.profiler", jax.profiler.stop_trace, annotate
    if "torch_xla" in sys.modules:
        import torch_xla.debug.profiler as xp
        if not hasattr(xp, "start_trace") or not hasattr(xp, "stop_trace"):
            raise _Refused("this torch_xla's torch_xla.debug.profiler has no start_trace/"
                           "stop_trace (a newer torch_xla has); profile it with "
                           "xp.start_server() and xp.trace() instead")
        xp.start_trace(directory)
        return "torch_xla.debug.profiler", xp.stop_trace, None
    try:
        import torch
        import torch.profiler
    except ImportError:
        raise _Refused("no profiler importable (torch, torch_xla, jax)") from None
    activities = [torch.profiler.ProfilerActivity.CPU]
    if torch.cuda.is_available():
        activities.append(torch.profiler.ProfilerActivity.CUDA)
    profiler = torch.profiler.profile(activities=activities, record_shapes=True,
                                      profile_memory=True, with_stack=False)
    profiler.start()

    def stop():
        profiler.stop()
        profiler.export_chrome_trace(os.path.join(directory, "trace.json"))
        # Input shapes and memory are in the trace only where torch has kineto; this table
        # has them everywhere.
        table = profiler.key_averages(group_by_input_shape=True).table(
            sort_by="self_cpu_time_total", row_limit=100, max_name_column_width=80)
        with open(os.path.join(directory, "key_averages.txt"), "w", encoding="utf-8") as f:
            f.write(table + "\n")

    def annotate(step):
        return torch.profiler.record_function(f"ProfilerStep#{'' if step is None else step}")
    return "torch.profiler", stop, annotate


class _Capture:
    """A profile in progress: its id, how long it runs, and the profiler to stop."""

    def __init__(self, profile_id, steps, seconds):
        self.id, self.steps, self.seconds = profile_id, steps, seconds
        self.first_step, self.done, self.inside = None, 0, False
        self.tool = self.stop = self.annotate = None
        self.began = time.monotonic()


def _fail(profile_id, error):
    """Answers a profile that failed, leaving TAE_PROFILE_DIR empty for the next one."""
    directory = _paths()[0]
    try:
        for entry in os.scandir(directory):
            if entry.is_dir(follow_symlinks=False):
                shutil.rmtree(entry.path, ignore_errors=True)
            else:
                os.remove(entry.path)
    except OSError:
        pass
    _answer(profile_id, {"error": error})


def _begin(profile_id, steps, seconds):
    """Starts a capture into TAE_PROFILE_DIR, or answers why not; False if it must wait."""
    global _capture
    directory = _paths()[0]
    try:
        with os.scandir(directory) as entries:
            if next(entries, None) is not None:
                return False  # the agent has not taken the last profile's files yet
    except OSError as e:
        _answer(profile_id, {"error": f"TAE_PROFILE_DIR {directory}: {e.strerror or e}"})
        return True
    capture = _Capture(profile_id, steps, seconds)
    try:
        capture.tool, capture.stop, capture.annotate = _start_profiler(directory)
    except _Refused as e:
        _fail(profile_id, str(e))
        return True
    except Exception as e:  # noqa: BLE001 - never into the training loop
        _fail(profile_id, f"starting the profiler: {type(e).__name__}: {e}")
        return True
    _capture = capture
    return True


def _finish():
    global _capture
    capture, _capture = _capture, None
    try:
        capture.stop()
    except Exception as e:  # noqa: BLE001
        _fail(capture.id, f"{capture.tool}: {type(e).__name__}: {e}")
        return
    _answer(capture.id, {"step": capture.first_step, "steps": capture.done,
                         "tool": capture.tool})


class _Step:
    """One training step under profile(): begins, counts and ends captures."""

    __slots__ = ("step", "at", "steps", "capture", "annotation")

    def __init__(self, step, at, steps):
        self.step, self.at, self.steps = step, at, steps
        self.capture = self.annotation = None

    def __enter__(self):
        global _self_steps
        if self.at and self.step is not None and self.step in self.at and self.steps > 0:
            _self_steps = self.steps
        if _capture is None:
            request = profile_requested()
            if request is not None:
                _begin(request["id"], request["steps"], request["seconds"])
            elif _self_steps and _begin(f"step{self.step}", _self_steps, 0):
                _self_steps = 0
        capture = _capture
        if capture is not None and not capture.inside:
            capture.inside = True
            if capture.done == 0:
                capture.first_step = self.step
            self.capture = capture
            if capture.annotate is not None:
                try:
                    self.annotation = capture.annotate(self.step)
                    self.annotation.__enter__()
                except Exception:  # noqa: BLE001 - a step without its mark
                    self.annotation = None
        return self

    def __exit__(self, *exc_info):
        capture = self.capture
        if capture is None or capture is not _capture:
            return False
        if self.annotation is not None:
            try:
                self.annotation.__exit__(None, None, None)
            except Exception:  # noqa: BLE001
                pass
        capture.inside = False
        capture.done += 1
        if ((capture.steps and capture.done >= capture.steps) or
                (capture.seconds and time.monotonic() - capture.began >= capture.seconds)):
            _finish()
        return False


class _Nothing:
    """profile() outside TAE."""

    __slots__ = ()

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        return False


_NOTHING = _Nothing()


def profile(step=None, at=(), steps=5):
    """A context manager around one training step that profiles when TAE asks.

        for step in range(start, total):
            with tae_log.profile(step):
                train_step()

    When a request is pending (profile_requested()) as a step begins, it starts the profiler
    of the framework in use: jax.profiler when jax is imported, else torch_xla's profiler when
    torch_xla is, else torch.profiler (CPU, and CUDA when available, with shapes and memory).
    After the requested number of steps, or the first step that ends once the requested
    seconds have passed, it writes the profile into TAE_PROFILE_DIR (torch: trace.json, a
    Chrome trace, and key_averages.txt) and answers with profile_done(). A profile that fails
    is answered with its error; nothing is raised into the training loop. A profile begins
    only when TAE_PROFILE_DIR is empty, i.e. once the agent has taken the previous one.

    With at (steps, e.g. {1000, 5000}) the job also profiles on its own: when step is in at,
    `steps` steps from there, under the id f"step{step}"; a pending request goes first.
    Outside TAE (no TAE_PROFILE_DIR or TAE_METRICS_FD) this does nothing. Use it from the
    training loop's thread; a profile() inside another one's step is not counted.
    """
    if _paths()[0] is None or not _stream():
        return _NOTHING
    return _Step(step, at, steps)
