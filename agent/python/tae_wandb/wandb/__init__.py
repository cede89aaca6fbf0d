"""A stand-in for the `wandb` package: an unchanged training script's wandb calls reach TAE.

    import wandb                                    # this module, when the job asks for capture
    run = wandb.init(project="lm", config=args)     # config keys become the run's facts
    wandb.define_metric("val/*", step_metric="epoch")
    for step in range(steps):
        wandb.log({"train/loss": loss, "lr": lr})   # points at wandb's own step 0, 1, 2, ...
    wandb.log({"val/acc": acc, "epoch": epoch})     # val/acc at step `epoch`
    run.summary["best_acc"] = best                  # a point at the last step when the run ends
    wandb.finish()

When a job asks TAE to capture wandb, the agent puts agent/python/tae_wandb ahead of
agent/python on PYTHONPATH, so `import wandb` finds this module and nothing else: no network, no
W&B account, no real wandb installed. Everything goes through tae_log: metric points with
tae_log.log(step=..., **values), facts about the run with tae_log.meta(...). Outside TAE (no
TAE_METRICS_FD) tae_log prints the points to stdout as key=value lines. wandb.init prints, once
per process, "wandb (TAE capture): metrics go to TAE; nothing is sent to W&B" on stderr; every
other line this module writes to stderr also begins with "wandb (TAE capture): ".

Steps, as wandb numbers them. A run has a step counter, run.step, starting at 0, and a pending
row. wandb.log(data, step=None, commit=None) (also run.log) merges data into the pending row (a
later value of a key replaces an earlier one) and then:
  - step None, commit None or True: commits the row at the current step; the step becomes +1.
  - step None, commit False: nothing more; the row waits for the next commit, at its step.
  - step N > current: the pending row (if anything was logged into it) is first committed at
    the current step, then the current step becomes N and data is merged into the new row; that
    row is committed only by a later call with a higher step, by commit=True, or by finish.
  - step N == current: data is merged; committed only with commit=True (then the step is N+1).
  - step N < current: data is ignored, the pending row is left as it is, and one line says so
    on stderr, for every such call, as wandb warns about each.
Every commit adds 1 to the step, also one of a row with nothing in it (wandb.log({})). A step
is an int (numpy and torch integers too, and floats with an integral value; a negative one is
below every current step); anything else raises ValueError. data must be a dict with str keys
(ValueError otherwise, as in wandb).

Values. int, float and bool become points (bool as 1.0/0.0; NaN and infinities as tae_log sends
them); so does anything else with an .item() returning one of those (numpy and torch scalars,
one-element arrays and tensors) or, lacking .item(), convertible with float() (Decimal,
Fraction), strings excepted. A nested dict is flattened with '/': {"a": {"b": 1}} is "a/b".
Anything else (strings, lists, None, wandb.Image, wandb.Table, wandb.plot charts, histograms)
is skipped; the first value of each type says so once on stderr: "wandb (TAE capture): skipping
str values such as 'note'; TAE records numbers". Keys become TAE metric keys: every space, '='
and character outside printable ASCII becomes '_', the key is cut to 128 characters ("" is
"_"), and the keys TAE's metric lines reserve ("step", "Step", "meta", "checkpoint",
"profile") get a '_' appended: a logged "step" is the metric "step_".

define_metric(name, step_metric=None, step_sync=None, hidden=None, summary=None, goal=None,
overwrite=None) (also run.define_metric): name is a key, or a pattern in which each '*' matches
any characters, '/' included ("val/*", "*"); names and step_metric are made keys as above. An
exact name wins over patterns; among patterns the first defined wins; defining a name again
replaces its definition. When a committed row holds a point of a metric whose definition has a
step_metric x, the point is logged at the value of x in the same row; failing that, when
step_sync is not False (wandb's default with a step_metric), at the last value of x committed
before (wandb's step_sync fills x in from its last value); failing that, at the row's wandb
step. The value must be an integer-valued number >= 0; one that is not (epoch 0.5) is not used
(the point goes to the wandb step) and says so once per step metric on stderr. x's own points
go to the wandb step unless a definition matches x too. The other options are accepted and
ignored. Points of one row at different steps go out as one tae_log.log line per step.

Config. run.config (also wandb.config after init) holds the script's settings: config.lr,
config["lr"], config.lr = v, config["lr"] = v, update(d, allow_val_change=None), setdefaults(d)
(sets only missing keys), setdefault(k, v), keys(), values(), items(), get(k, default), as_dict(),
`in`, len(), iteration, del. d and init(config=...) are a dict, an argparse Namespace, absl flags
or any object with __dict__; init's config_include_keys/config_exclude_keys filter them. Keys
are str (others are made str), stripped of leading and trailing '-' as wandb strips them.
Changing a key's value without allow_val_change=True raises wandb.errors.ConfigError, as wandb
raises (setting an equal value is fine). Every key set is recorded as the fact
"wandb.config.<key>" = str(value), a nested dict as one fact per leaf ("wandb.config.model.layers"
for {"model": {"layers": 2}}); fact keys are made keys as above and values cut to 1024 bytes. A
config given as a path (wandb's YAML file) is ignored with a line on stderr.

Summary. run.summary (also wandb.summary after init) is dict-like: summary["best"] = v,
summary.best = v, update(d), get, keys, items, `in`, del. Reading a key never set returns the
last value logged for it (as wandb's summary does). When the run finishes (run.finish(),
wandb.finish(), leaving `with wandb.init() as run:`, a reinit, or at interpreter exit when the
script never finished it) the pending row is committed, then each key the script set, nested
dicts flattened with '/', is recorded: a number as a point at the last committed step (or at
the last value of its step_metric, when a definition with one matches it), so it is among the
run's final values, and as the fact "wandb.summary.<key>" = str(value); a string as the fact
only; anything else is skipped as log() skips it. Keys set only by logging are not re-sent.

init(project=None, name=None, config=None, resume=None, id=None, reinit=None, entity=None,
group=None, job_type=None, tags=None, notes=None, dir=None, mode=None, settings=None, **kwargs)
returns a Run and sets wandb.run, wandb.config and wandb.summary. With a run active, init
without reinit (None, False, "default", "return_previous") returns that run and ignores its
arguments; reinit=True, "finish_previous" or "create_new" finishes it first and starts a new
one, whose step starts at 0 again. run.id is id, else TAE_RUN_ID, else 8 random lowercase
letters and digits; run.name is name, else run.id; run.project is project, else
"uncategorized"; run.dir is TAE_RUN_DIR, else the working directory; run.step the current step.
The run's project, name and id (and entity, group, job_type, tags and notes where given) are
recorded as facts "wandb.project", "wandb.name", ... . mode="disabled" gives a run that behaves
the same but records nothing (one line on stderr says so), as a script uses it on ranks that
should not log; other modes, WANDB_* variables, resume, settings and other arguments are
accepted and ignored. finish(exit_code=None, quiet=None) ends the run (again: nothing) and sets
wandb.run back to None; wandb.log, wandb.config and wandb.summary then raise
wandb.errors.UsageError, as they do before init; a finished run's log() does nothing and says so
once on stderr. Only the process that called init finishes a run at exit (not forked children).

Ignored, each name saying once on stderr "wandb (TAE capture): wandb.watch is ignored":
wandb.watch, unwatch, save, restore (returns None), alert, log_artifact, use_artifact,
log_model, use_model, link_model, mark_preempting, and the same methods of a run plus log_code
and link_artifact; wandb.Artifact (add_file, add_dir, add_reference, new_file... do nothing);
wandb.Table, Image, Histogram, Video, Audio, Html, Object3D, Molecule, Plotly, Graph;
wandb.plot.<any> (a callable returning an ignored chart); wandb.Settings; wandb.util.<any> (a
callable that does nothing, except wandb.util.generate_id(length=8), which makes an id).
Nothing comes from W&B: an artifact's download() (and get_path, get, file) and use_model raise
wandb.errors.CommError. wandb.login(...) returns True and says nothing.
wandb.termlog/termwarn/termerror print to stderr. wandb.__version__ is "0.0.0+tae-capture";
wandb.errors holds Error, CommError, UsageError and ConfigError (wandb.Error is Error).
There is no wandb.sdk, wandb.Api, wandb.sweep or wandb.agent.
"""

import atexit
import collections.abc
import contextlib
import math
import operator
import os
import random
import re
import string
import sys
import threading
import types

import tae_log

__version__ = "0.0.0+tae-capture"
__all__ = ["init", "log", "finish", "define_metric", "config", "summary", "run", "Run",
           "watch", "unwatch", "save", "restore", "alert", "login", "Artifact", "log_artifact",
           "use_artifact", "Table", "Image", "Histogram", "Video", "Audio", "Html", "Object3D",
           "Molecule", "Plotly", "Graph", "plot", "Settings", "util", "errors", "Error",
           "termlog", "termwarn", "termerror"]

_PREFIX = "wandb (TAE capture): "
_MAX_KEY = 128
_MAX_VALUES = 1024        # values of one metric line the agent takes
_MAX_FACTS = 256          # facts of one meta line
_MAX_FACT_BYTES = 1024    # bytes of one fact's value
_MAX_STEP = 2 ** 63 - 1
_RESERVED = frozenset({"step", "Step", "meta", "checkpoint", "profile"})

_said = set()             # the one-time stderr lines already written
_said_lock = threading.Lock()


def _say(line):
    print(_PREFIX + line, file=sys.stderr, flush=True)


def _once(what, line):
    with _said_lock:
        if what in _said:
            return
        _said.add(what)
    _say(line)


def _ignored(name):
    _once(("ignored", name), f"{name} is ignored")


# ---------------------------------------------------------------------------------------------
# wandb.errors

errors = types.ModuleType("wandb.errors", "Exceptions of the TAE stand-in for wandb.")


class Error(Exception):
    """Base of the errors this module raises."""

    def __init__(self, message="", context=None):
        super().__init__(message)
        self.message = message
        self.context = context


class CommError(Error):
    """Something would have needed W&B's servers."""

    def __init__(self, msg="", exc=None):
        super().__init__(msg)
        self.exc = exc


class UsageError(Error):
    """wandb used in a way wandb refuses."""


class ConfigError(Error):
    """A config value changed without allow_val_change=True."""


for _cls in (Error, CommError, UsageError, ConfigError):
    _cls.__module__ = "wandb.errors"
    setattr(errors, _cls.__name__, _cls)
errors.AuthenticationError = type("AuthenticationError", (CommError,),
                                  {"__module__": "wandb.errors"})
sys.modules["wandb.errors"] = errors


# ---------------------------------------------------------------------------------------------
# Keys and values

def _key(text):
    """text as a TAE metric key (see the module docstring)."""
    key = "".join(c if "!" <= c <= "~" and c != "=" else "_" for c in text)[:_MAX_KEY] or "_"
    return key + "_" if key in _RESERVED else key


def _fact_key(text):
    return "".join(c if "!" <= c <= "~" and c != "=" else "_" for c in text)[:_MAX_KEY] or "_"


def _fact_value(value):
    text = str(value)
    raw = text.encode("utf-8", "replace")
    if len(raw) <= _MAX_FACT_BYTES:
        return text
    return raw[:_MAX_FACT_BYTES - 3].decode("utf-8", "ignore") + "..."


def _float(x):
    try:
        return float(x)
    except OverflowError:  # an int beyond a double
        return math.inf if x > 0 else -math.inf


def _number(value):
    """value as a bool or float when it is a number, else None."""
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, float)):
        return _float(value)
    if isinstance(value, (str, bytes, bytearray, collections.abc.Mapping, list, tuple, set,
                          frozenset, _Ignored, _Media)) or value is None:
        return None
    item = getattr(value, "item", None)
    if callable(item):
        try:
            x = item()
        except Exception:  # noqa: BLE001 - a tensor of many elements: not a number
            return None
        if isinstance(x, bool):
            return x
        return _float(x) if isinstance(x, (int, float)) else None
    if hasattr(type(value), "__float__") or hasattr(type(value), "__index__"):
        try:
            return _float(value)
        except (TypeError, ValueError):
            return None
    return None


def _type_name(value):
    cls = type(value)
    if isinstance(value, (_Media, _Ignored)):
        return value._tae_name
    if cls.__module__ == "builtins":
        return cls.__qualname__
    return f"{cls.__module__}.{cls.__qualname__}"


def _skipped(key, value):
    name = _type_name(value)
    _once(("skip", name), f"skipping {name} values such as {key!r}; TAE records numbers")


def _flatten(data, sep, prefix=""):
    """(flat key, value) pairs of a nested mapping, keys joined with sep."""
    for k, v in data.items():
        k = prefix + str(k)
        if isinstance(v, collections.abc.Mapping):
            yield from _flatten(v, sep, k + sep)
        else:
            yield k, v


def _step_arg(step):
    """A log() step as an int, or ValueError."""
    if isinstance(step, float) and step.is_integer():
        return int(step)
    if not isinstance(step, (bool, float)):
        try:
            return operator.index(step)
        except TypeError:
            item = getattr(step, "item", None)
            if callable(item):
                x = item()
                if isinstance(x, float) and x.is_integer():
                    return int(x)
                if isinstance(x, int) and not isinstance(x, bool):
                    return x
    raise ValueError(f"wandb.log: step={step!r} is not an integer")


def _as_step(value):
    """A step metric's value as a TAE step, or None."""
    if isinstance(value, bool) or not isinstance(value, float):
        return None
    if not math.isfinite(value) or value < 0 or not value.is_integer() or value > _MAX_STEP:
        return None
    return int(value)


def _send_points(step, values):
    for chunk in _chunks(values, _MAX_VALUES):
        tae_log.log(step=step, **chunk)


def _send_facts(facts):
    for chunk in _chunks(facts, _MAX_FACTS):
        tae_log.meta(**chunk)


def _chunks(d, n):
    items = list(d.items())
    for i in range(0, len(items), n):
        yield dict(items[i:i + n])


def _same(a, b):
    try:
        return bool(a == b)
    except Exception:  # noqa: BLE001 - arrays and the like: not told apart
        return True


def _params(params, include=None, exclude=None):
    """init(config=...)/config.update's argument as a dict."""
    if params is None:
        return {}
    if isinstance(params, collections.abc.Mapping):
        d = dict(params)
    elif callable(getattr(params, "flag_values_dict", None)):  # absl flags
        d = params.flag_values_dict()
    elif hasattr(params, "__dict__"):
        d = dict(vars(params))
    else:
        raise TypeError("config must be a dict or have a __dict__ attribute.")
    if include:
        d = {k: v for k, v in d.items() if k in include}
    if exclude:
        d = {k: v for k, v in d.items() if k not in exclude}
    return d


# ---------------------------------------------------------------------------------------------
# Ignored things

class _Ignored:
    """What an ignored call returns: every attribute, call, item and `with` does nothing."""

    def __init__(self, name):
        object.__setattr__(self, "_tae_name", name)

    def __call__(self, *args, **kwargs):
        return self

    def __getattr__(self, attr):
        if attr.startswith("__"):
            raise AttributeError(attr)
        return self

    def __setattr__(self, attr, value):
        pass

    def __getitem__(self, key):
        return self

    def __setitem__(self, key, value):
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        return False

    def __iter__(self):
        return iter(())

    def __len__(self):
        return 0

    def __bool__(self):
        return True

    def __repr__(self):
        return f"<{self._tae_name}: ignored under TAE capture>"


class _Media:
    """wandb's data types (Image, Table, ...): accepted, kept out of the metrics."""

    _tae_name = "wandb.Media"

    def __init__(self, *args, **kwargs):
        _ignored(self._tae_name)

    def __getattr__(self, attr):
        if attr.startswith("__"):
            raise AttributeError(attr)
        return _Ignored(f"{self._tae_name}.{attr}")

    def __repr__(self):
        return f"<{self._tae_name}: ignored under TAE capture>"


def _media(name):
    return type(name, (_Media,), {"_tae_name": f"wandb.{name}", "__module__": "wandb",
                                  "__doc__": f"wandb.{name}, ignored under TAE capture."})


Image = _media("Image")
Histogram = _media("Histogram")
Video = _media("Video")
Audio = _media("Audio")
Html = _media("Html")
Object3D = _media("Object3D")
Molecule = _media("Molecule")
Plotly = _media("Plotly")
Graph = _media("Graph")


class Table(_Media):
    """wandb.Table: rows are accepted and dropped."""

    _tae_name = "wandb.Table"

    def __init__(self, columns=None, data=None, *args, **kwargs):
        super().__init__()
        self.columns = list(columns) if columns is not None else []
        self.data = []

    def add_data(self, *row):
        pass

    def add_column(self, name, data=None, optional=False):
        self.columns.append(name)


class Artifact:
    """wandb.Artifact: files added to it are not uploaded; one from W&B cannot be downloaded."""

    def __init__(self, name="", type="", description=None, metadata=None, **kwargs):  # noqa: A002
        _ignored("wandb.Artifact")
        self.name, self.type, self.description = name, type, description
        self.metadata = dict(metadata or {})
        self.aliases = []
        self.version = None

    def add_file(self, local_path, name=None, **kwargs):
        return None

    def add_dir(self, local_path, name=None, **kwargs):
        return None

    def add_reference(self, uri, name=None, **kwargs):
        return []

    def add(self, obj, name, **kwargs):
        return None

    @contextlib.contextmanager
    def new_file(self, name, mode="x", encoding=None):
        with open(os.devnull, "wb" if "b" in mode else "w", encoding=encoding) as f:
            yield f

    def save(self, *args, **kwargs):
        return None

    def wait(self, *args, **kwargs):
        return self

    def _nothing_from_wandb(self):
        raise CommError(f"{_PREFIX}artifact {self.name!r} cannot be downloaded: nothing comes "
                        "from W&B under TAE capture")

    def download(self, *args, **kwargs):
        self._nothing_from_wandb()

    def get_path(self, *args, **kwargs):
        self._nothing_from_wandb()

    def get_entry(self, *args, **kwargs):
        self._nothing_from_wandb()

    def get(self, *args, **kwargs):
        self._nothing_from_wandb()

    def file(self, *args, **kwargs):
        self._nothing_from_wandb()

    def __repr__(self):
        return f"<wandb.Artifact {self.name!r}: ignored under TAE capture>"


class Settings:
    """wandb.Settings: accepted, ignored."""

    def __init__(self, **kwargs):
        _ignored("wandb.Settings")
        self.__dict__.update(kwargs)

    def update(self, *args, **kwargs):
        for d in args:
            self.__dict__.update(d)
        self.__dict__.update(kwargs)


class _Namespace(types.ModuleType):
    """wandb.plot and wandb.util: any attribute is a callable that does nothing."""

    def __getattr__(self, attr):
        if attr.startswith("__"):
            raise AttributeError(attr)
        name = f"{self.__name__}.{attr}"

        def ignored(*args, **kwargs):
            _ignored(name)
            return _Ignored(name)
        ignored.__name__ = attr
        return ignored


plot = _Namespace("wandb.plot", "wandb.plot, ignored under TAE capture.")
util = _Namespace("wandb.util", "wandb.util, ignored under TAE capture (but generate_id).")


def _generate_id(length=8):
    chars = string.ascii_lowercase + string.digits
    return "".join(random.SystemRandom().choice(chars) for _ in range(length))


util.generate_id = _generate_id
sys.modules["wandb.plot"] = plot
sys.modules["wandb.util"] = util


# ---------------------------------------------------------------------------------------------
# Config and summary

class Config:
    """run.config: the script's settings, each key recorded as the fact wandb.config.<key>."""

    def __init__(self, run):
        object.__setattr__(self, "_items", {})
        object.__setattr__(self, "_run", run)

    def _set(self, items, allow_val_change=None, only_missing=False):
        facts = {}
        with self._run._lock:
            for key, value in items.items():
                key = str(key).strip("-")
                if key in self._items:
                    if only_missing:
                        continue
                    if not allow_val_change and not _same(self._items[key], value):
                        raise ConfigError(
                            f'Attempted to change value of key "{key}" from '
                            f"{self._items[key]} to {value}\nIf you really want to do this, "
                            "pass allow_val_change=True to config.update()")
                self._items[key] = value
                if isinstance(value, collections.abc.Mapping) and value:
                    for k, v in _flatten(value, ".", key + "."):
                        facts[_fact_key("wandb.config." + k)] = _fact_value(v)
                else:
                    facts[_fact_key("wandb.config." + key)] = _fact_value(value)
            self._run._facts(facts)

    def update(self, d, allow_val_change=None):
        self._set(_params(d), allow_val_change)

    def setdefaults(self, d):
        self._set(_params(d), only_missing=True)

    def setdefault(self, key, default=None):
        self._set({key: default}, only_missing=True)
        return self._items[str(key).strip("-")]

    def persist(self):
        pass

    def keys(self):
        return self._items.keys()

    def values(self):
        return self._items.values()

    def items(self):
        return self._items.items()

    def get(self, key, default=None):
        return self._items.get(key, default)

    def as_dict(self):
        return dict(self._items)

    def __getitem__(self, key):
        return self._items[key]

    def __setitem__(self, key, value):
        self._set({key: value})

    def __delitem__(self, key):
        del self._items[key]

    def __getattr__(self, attr):
        if attr.startswith("__"):
            raise AttributeError(attr)
        try:
            return self._items[attr]
        except KeyError:
            raise AttributeError(f"config has no key {attr!r}") from None

    def __setattr__(self, attr, value):
        self._set({attr: value})

    def __delattr__(self, attr):
        try:
            del self._items[attr]
        except KeyError:
            raise AttributeError(attr) from None

    def __contains__(self, key):
        return key in self._items

    def __iter__(self):
        return iter(self._items)

    def __len__(self):
        return len(self._items)

    def __repr__(self):
        return repr(self._items)


class Summary:
    """run.summary: keys set here become points at the run's last step when it finishes."""

    def __init__(self, run):
        object.__setattr__(self, "_items", {})
        object.__setattr__(self, "_run", run)

    def update(self, d=None, **kwargs):
        with self._run._lock:
            self._items.update(d or {}, **kwargs)

    def keys(self):
        return list(dict.fromkeys([*self._items, *self._run._last]))

    def items(self):
        return [(k, self[k]) for k in self.keys()]

    def values(self):
        return [self[k] for k in self.keys()]

    def get(self, key, default=None):
        try:
            return self[key]
        except KeyError:
            return default

    def as_dict(self):
        return dict(self.items())

    def __getitem__(self, key):
        if key in self._items:
            return self._items[key]
        return self._run._last[key]

    def __setitem__(self, key, value):
        with self._run._lock:
            self._items[key] = value

    def __delitem__(self, key):
        del self._items[key]

    def __getattr__(self, attr):
        if attr.startswith("__"):
            raise AttributeError(attr)
        try:
            return self[attr]
        except KeyError:
            raise AttributeError(f"summary has no key {attr!r}") from None

    def __setattr__(self, attr, value):
        self[attr] = value

    def __delattr__(self, attr):
        try:
            del self._items[attr]
        except KeyError:
            raise AttributeError(attr) from None

    def __contains__(self, key):
        return key in self._items or key in self._run._last

    def __iter__(self):
        return iter(self.keys())

    def __len__(self):
        return len(self.keys())

    def __repr__(self):
        return repr(self.as_dict())


collections.abc.Mapping.register(Config)
collections.abc.Mapping.register(Summary)


class _PreInit:
    """wandb.config and wandb.summary before init and after finish: using them raises."""

    def __init__(self, name):
        object.__setattr__(self, "_name", name)

    def _refuse(self, what):
        raise UsageError(f"You must call wandb.init() before {self._name}{what}")

    def __getattr__(self, attr):
        if attr.startswith("__"):
            raise AttributeError(attr)
        self._refuse(f".{attr}")

    def __setattr__(self, attr, value):
        self._refuse(f".{attr}")

    def __getitem__(self, key):
        self._refuse(f"[{key!r}]")

    def __setitem__(self, key, value):
        self._refuse(f"[{key!r}]")

    def __contains__(self, key):
        self._refuse(" (in)")

    def __iter__(self):
        self._refuse(" (iteration)")

    def __len__(self):
        self._refuse(" (len)")

    def __repr__(self):
        return f"<{self._name} before wandb.init()>"


# ---------------------------------------------------------------------------------------------
# The run

class _Metric:
    """What define_metric returns."""

    def __init__(self, name, step_metric, step_sync, hidden, summary, goal, overwrite):
        self.name, self.step_metric, self.step_sync = name, step_metric, step_sync
        self.hidden, self.summary, self.goal, self.overwrite = hidden, summary, goal, overwrite
        self._pattern = (re.compile(".*".join(re.escape(p) for p in name.split("*")) + r"\Z",
                                    re.DOTALL) if "*" in name else None)

    def __repr__(self):
        return f"<wandb metric {self.name!r} step_metric={self.step_metric!r}>"


class Run:
    """A wandb run whose metrics and facts go to TAE through tae_log."""

    def __init__(self, project, name, run_id, config, include, exclude, entity, group,
                 job_type, tags, notes, disabled):
        self._lock = threading.RLock()
        self._pid = os.getpid()
        self._disabled = disabled
        self._finished = False
        self._step = 0             # the current step: where the pending row commits
        self._pending = {}         # key -> bool/float of the pending row
        self._open = False         # something was logged into the pending row
        self._last_commit = None   # the step of the last commit
        self._last = {}            # key -> its last committed value
        self._metrics = {}         # name -> _Metric: exact names
        self._patterns = {}        # name -> _Metric: names with '*'
        self.id = str(run_id)
        self.name = name if name is not None else self.id
        self.project = project if project is not None else "uncategorized"
        self.entity, self.group, self.job_type, self.notes = entity, group, job_type, notes
        self.tags = tuple(tags or ())
        self.dir = os.environ.get("TAE_RUN_DIR") or os.getcwd()
        self.resumed = False
        self.offline = False
        self.disabled = disabled
        self.sweep_id = None
        self.url = None
        self.config = Config(self)
        self.summary = Summary(self)
        facts = {"wandb.project": self.project, "wandb.name": self.name, "wandb.id": self.id}
        for fact, value in (("wandb.entity", entity), ("wandb.group", group),
                            ("wandb.job_type", job_type), ("wandb.notes", notes)):
            if value is not None:
                facts[fact] = _fact_value(value)
        if tags:
            facts["wandb.tags"] = _fact_value(",".join(str(t) for t in tags))
        self._facts({k: _fact_value(v) for k, v in facts.items()})
        if isinstance(config, (str, bytes, os.PathLike)):
            _say(f"config from the file {os.fsdecode(config)!r} is ignored")
        elif config is not None:
            self.config.update(_params(config, include, exclude), allow_val_change=True)

    # -- what goes to TAE

    def _facts(self, facts):
        if facts and not self._disabled:
            _send_facts(facts)

    def _points(self, by_step):
        if not self._disabled:
            for step, values in by_step.items():
                _send_points(step, values)

    def _definition(self, key):
        m = self._metrics.get(key)
        if m is None:
            for p in self._patterns.values():
                if p._pattern.match(key):
                    return p
        return m

    def _point_step(self, key, row, default):
        """The step a point of `key` in the committed `row` is logged at."""
        m = self._definition(key)
        if m is None or not m.step_metric:
            return default
        x = m.step_metric
        if x in row:
            value = row[x]
        elif m.step_sync is not False and x in self._last:
            value = self._last[x]
        else:
            return default
        step = _as_step(value)
        if step is None:
            _once(("step_metric", x), f"step_metric {x!r} = {value!r} is not an integer >= 0; "
                                      "such points are logged at the wandb step")
            return default
        return step

    def _commit(self):
        """Commits the pending row at the current step; the step becomes +1."""
        row, step = self._pending, self._step
        self._pending, self._open = {}, False
        self._step += 1
        self._last_commit = step
        by_step = {}
        for key, value in row.items():
            by_step.setdefault(self._point_step(key, row, step), {})[key] = value
        self._last.update(row)
        self._points(by_step)

    def _merge(self, data):
        for key, value in _flatten(data, "/"):
            number = _number(value)
            if number is None:
                _skipped(key, value)
            else:
                self._pending[_key(key)] = number
        self._open = True

    # -- wandb's API

    @property
    def step(self):
        return self._step

    @property
    def path(self):
        return f"{self.entity or ''}/{self.project}/{self.id}"

    @property
    def settings(self):
        return Settings.__new__(Settings)

    def log(self, data, step=None, commit=None, sync=None):
        """Logs data at wandb's step (see the module docstring)."""
        if not isinstance(data, collections.abc.Mapping):
            raise ValueError("wandb.log must be passed a dictionary")
        if any(not isinstance(k, str) for k in data):
            raise ValueError("Key values passed to `wandb.log` must be strings.")
        with self._lock:
            if self._finished:
                _once(("finished", id(self)),
                      f"run {self.id} is finished; its log() calls are ignored")
                return
            if step is not None:
                step = _step_arg(step)
                if step < self._step:
                    _say(f"step {step} is less than the current step {self._step}; "
                         "these values are ignored, as wandb ignores them")
                    return
                if step > self._step:
                    if self._open:
                        self._commit()
                    self._step = step
            self._merge(data)
            if commit or (commit is None and step is None):
                self._commit()

    def define_metric(self, name, step_metric=None, step_sync=None, hidden=None, summary=None,
                      goal=None, overwrite=None, **kwargs):
        """Says which step metric a metric (or pattern) is logged against."""
        if isinstance(step_metric, _Metric):
            step_metric = step_metric.name
        key = _key(str(name))
        m = _Metric(key, _key(str(step_metric)) if step_metric else None, step_sync, hidden,
                    summary, goal, overwrite)
        with self._lock:
            (self._patterns if m._pattern else self._metrics)[key] = m
        return m

    def finish(self, exit_code=None, quiet=None):
        """Commits the pending row, sends the summary, and ends the run."""
        with self._lock:
            if self._finished:
                return
            self._finished = True
            if self._open:
                self._commit()
            step = self._last_commit if self._last_commit is not None else self._step
            facts, by_step = {}, {}
            for key, value in _flatten(self.summary._items, "/"):
                number = _number(value)
                if number is not None:
                    point = _key(key)
                    s = self._point_step(point, {}, step)
                    by_step.setdefault(s, {})[point] = number
                elif not isinstance(value, str):
                    _skipped(key, value)
                    continue
                facts[_fact_key("wandb.summary." + key)] = _fact_value(value)
            self._points(by_step)
            self._facts(facts)
        _forget(self)

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        self.finish(exit_code=0 if exc_type is None else 1)
        return False

    def _label(self, *args, **kwargs):
        pass

    def get_url(self):
        return None

    def get_project_url(self):
        return None

    def get_sweep_url(self):
        return None

    def watch(self, *args, **kwargs):
        _ignored("run.watch")

    def unwatch(self, *args, **kwargs):
        _ignored("run.unwatch")

    def save(self, *args, **kwargs):
        _ignored("run.save")
        return []

    def restore(self, *args, **kwargs):
        _ignored("run.restore")
        return None

    def alert(self, *args, **kwargs):
        _ignored("run.alert")

    def log_code(self, *args, **kwargs):
        _ignored("run.log_code")
        return None

    def log_artifact(self, artifact, *args, **kwargs):
        _ignored("run.log_artifact")
        return artifact

    def use_artifact(self, artifact, *args, **kwargs):
        _ignored("run.use_artifact")
        return _used_artifact(artifact)

    def link_artifact(self, *args, **kwargs):
        _ignored("run.link_artifact")

    def log_model(self, *args, **kwargs):
        _ignored("run.log_model")

    def use_model(self, *args, **kwargs):
        _ignored("run.use_model")
        raise CommError(f"{_PREFIX}run.use_model: nothing comes from W&B under TAE capture")

    def link_model(self, *args, **kwargs):
        _ignored("run.link_model")

    def mark_preempting(self):
        _ignored("run.mark_preempting")

    def __repr__(self):
        return f"<wandb Run {self.id} ({self.name}) under TAE capture>"


def _used_artifact(artifact):
    if isinstance(artifact, Artifact):
        return artifact
    used = Artifact.__new__(Artifact)
    used.name, used.type, used.description = str(artifact), "", None
    used.metadata, used.aliases, used.version = {}, [], None
    return used


# ---------------------------------------------------------------------------------------------
# The module's run

run = None
config = _PreInit("wandb.config")
summary = _PreInit("wandb.summary")
_run_lock = threading.RLock()
_told_capture = False


def _forget(finished):
    global run, config, summary
    with _run_lock:
        if run is finished:
            run = None
            config = _PreInit("wandb.config")
            summary = _PreInit("wandb.summary")


def init(project=None, name=None, config=None, resume=None, id=None, reinit=None,  # noqa: A002
         entity=None, group=None, job_type=None, tags=None, notes=None, dir=None,  # noqa: A002
         mode=None, settings=None, **kwargs):
    """Starts a run (see the module docstring); returns it."""
    global run, summary, _told_capture
    given_config = config
    with _run_lock:
        if run is not None:
            if reinit not in (True, "finish_previous", "create_new"):
                return run
            run.finish()
        if not _told_capture:
            _told_capture = True
            _say("metrics go to TAE; nothing is sent to W&B")
        disabled = mode == "disabled"
        if disabled:
            _say("mode='disabled': this run records nothing")
        run_id = id or os.environ.get("TAE_RUN_ID") or _generate_id()
        new = Run(project, name, run_id, given_config, kwargs.get("config_include_keys"),
                  kwargs.get("config_exclude_keys"), entity, group, job_type, tags, notes,
                  disabled)
        run = new
        globals()["config"] = new.config
        summary = new.summary
        return new


def _current(what):
    current = run
    if current is None:
        raise UsageError(f"You must call wandb.init() before {what}()")
    return current


def log(data, step=None, commit=None, sync=None):
    """wandb.run.log(data, step, commit)."""
    _current("wandb.log").log(data, step=step, commit=commit)


def define_metric(name, step_metric=None, step_sync=None, hidden=None, summary=None, goal=None,
                  overwrite=None, **kwargs):
    """wandb.run.define_metric(...)."""
    return _current("wandb.define_metric").define_metric(
        name, step_metric=step_metric, step_sync=step_sync, hidden=hidden, summary=summary,
        goal=goal, overwrite=overwrite, **kwargs)


def finish(exit_code=None, quiet=None):
    """Finishes the current run, if any."""
    current = run
    if current is not None:
        current.finish(exit_code=exit_code, quiet=quiet)


def login(*args, **kwargs):
    """Nothing to log in to: True."""
    return True


def watch(*args, **kwargs):
    _ignored("wandb.watch")


def unwatch(*args, **kwargs):
    _ignored("wandb.unwatch")


def save(*args, **kwargs):
    _ignored("wandb.save")
    return []


def restore(*args, **kwargs):
    _ignored("wandb.restore")
    return None


def alert(*args, **kwargs):
    _ignored("wandb.alert")


def log_artifact(artifact, *args, **kwargs):
    _ignored("wandb.log_artifact")
    return artifact


def use_artifact(artifact, *args, **kwargs):
    _ignored("wandb.use_artifact")
    return _used_artifact(artifact)


def log_model(*args, **kwargs):
    _ignored("wandb.log_model")


def use_model(*args, **kwargs):
    _ignored("wandb.use_model")
    raise CommError(f"{_PREFIX}wandb.use_model: nothing comes from W&B under TAE capture")


def link_model(*args, **kwargs):
    _ignored("wandb.link_model")


def mark_preempting():
    _ignored("wandb.mark_preempting")


def termlog(string="", newline=True, repeat=True, prefix=True):  # noqa: A002
    print(("wandb: " if prefix else "") + str(string), file=sys.stderr,
          end="\n" if newline else "", flush=True)


def termwarn(string, newline=True, repeat=True, prefix=True):  # noqa: A002
    termlog(("WARNING " if prefix else "") + str(string), newline=newline, prefix=prefix)


def termerror(string, newline=True, repeat=True, prefix=True):  # noqa: A002
    termlog(("ERROR " if prefix else "") + str(string), newline=newline, prefix=prefix)


@atexit.register
def _at_exit():
    current = run
    if current is not None and current._pid == os.getpid():
        current.finish()
