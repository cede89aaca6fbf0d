"""Metrics from your own training script to TAE, without dependencies.

    import tae_log
    tae_log.log(step=40, loss=2.31, lr=3e-4)       # one point per key at step 40
    tae_log.meta(torch=torch.__version__)           # facts about the run, shown by taectl show
    cfg = tae_log.config()                          # the run's config: cfg["params"]["rotary"]
    tae_log.checkpoint(step=40)                     # TAE_CHECKPOINT_DIR now holds step 40's

Under a TAE agent the points go as JSON lines to the file descriptor in TAE_METRICS_FD, which
the agent reads, journals and streams to taed (exactly once, across reconnects). Outside TAE
(no TAE_METRICS_FD) they are printed to stdout as `step=40 loss=2.31 lr=0.0003`, the key=value
shape TAE also parses from a job's stdout, so the same script runs unchanged on a laptop.

Keys are 1-128 printable ASCII characters without spaces or '='; values are int, float or bool
(NaN and infinities are sent as null: JSON has no such numbers, and TAE skips them). `step` is
an int >= 0; without it the agent uses the run's last step.
"""

import json
import math
import os
import sys
import time

__all__ = ["log", "meta", "config", "checkpoint", "resume_step"]

_MAX_KEY = 128
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
        return value if math.isfinite(value) else None
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
        parts = [f"{k}={'nan' if v is None else repr(v)}" for k, v in record.items()]
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

