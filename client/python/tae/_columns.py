"""Reads the columnar form of metric points (common/api/columns.h). Version 2 ("TAECOL2\\n"): a
little-endian uint32 header length, the JSON header (points, runs with their counts, columns with
their codings), zero padding to a multiple of 8, then one section per column (step, value,
wall_time), each "plain" (8-byte values), "f4" (float32s, each exactly its double) or "delta"
(each run's first value as an int64, then 1-, 2- or 4-byte differences; a float column codes its
bit patterns). Version 1 ("TAECOL1\\n": three plain columns) is still read.

A Page keeps the body as it came and decodes runs straight into the arrays a frame is made of:
numpy does the work (a running sum per column), never Python per point."""

import json
import struct

import numpy as np

from ._errors import BundleError

MAGIC = b"TAECOL2\n"
MAGIC_V1 = b"TAECOL1\n"
NAMES = ("step", "value", "wall_time")
_WIDTHS = {1: np.dtype("<i1"), 2: np.dtype("<i2"), 4: np.dtype("<i4")}
_I8 = np.dtype("<i8")
_F8 = np.dtype("<f8")
_F4 = np.dtype("<f4")


def _pad8(n):
    return n + (8 - n % 8) % 8


class _Column:
    """One column's section: coding "plain" (values), "f4" (values) or "delta" (firsts,
    deltas)."""

    __slots__ = ("coding", "dtype", "values", "firsts", "deltas")

    def __init__(self, coding, dtype, values=None, firsts=None, deltas=None):
        self.coding, self.dtype = coding, dtype
        self.values, self.firsts, self.deltas = values, firsts, deltas


class Page:
    """A decoded header and its columns, each run decodable on its own or in spans of runs."""

    def __init__(self, header, columns, body, where):
        self.header = header
        self.body = body  # kept whole: the local cache writes it back as it came
        self.where = where
        self.runs = header.get("runs") or []
        self.points = header["points"]
        self.counts = np.array([r["count"] for r in self.runs], dtype=np.int64)
        self.starts = np.zeros(len(self.runs) + 1, dtype=np.int64)
        np.cumsum(self.counts, out=self.starts[1:])
        self._columns = columns

    def decode(self, name, lo, hi, out):
        """Column `name` of the page's runs lo..hi-1 (consecutive) into `out` (their points, an
        int64 array for step, float64 for value and wall_time)."""
        column = self._columns[name]
        a, b = int(self.starts[lo]), int(self.starts[hi])
        if column.coding == "plain" or column.coding == "f4":
            np.copyto(out, column.values[a:b], casting="unsafe" if column.coding == "f4"
                      else "no")
            return
        target = out.view(_I8) if out.dtype != _I8 else out
        # The running sum of the span, then each run moved to start at its first value (a run
        # whose first delta already chained it to the previous one needs no move).
        np.cumsum(column.deltas[a:b], dtype=_I8, out=target)
        counts = self.counts[lo:hi]
        nonempty = np.flatnonzero(counts)
        if len(nonempty) == 0:
            return
        at = self.starts[lo:hi][nonempty] - a
        shift = column.firsts[lo:hi][nonempty] - target[at]
        moved = np.flatnonzero(shift)
        if len(moved) > max(16, (b - a) // 256):
            target += np.repeat(shift, counts[nonempty])
            return
        ends = at + counts[nonempty]
        for k in moved:
            target[at[k]:ends[k]] += shift[k]

    def decode_runs(self, lo, hi, steps, values, walls):
        """Every column of the page's runs lo..hi-1 into `steps`, `values` and `walls` (their
        points each)."""
        for name, out in zip(NAMES, (steps, values, walls)):
            self.decode(name, lo, hi, out)

    def run_arrays(self, k, hi=None):
        """(steps, values, walls) of the page's runs k..hi-1 (hi: k + 1) as new arrays."""
        hi = k + 1 if hi is None else hi
        n = int(self.starts[hi] - self.starts[k])
        arrays = np.empty(n, _I8), np.empty(n, _F8), np.empty(n, _F8)
        self.decode_runs(k, hi, *arrays)
        return arrays

    def arrays(self):
        """Every point: (steps, values, walls)."""
        return self.run_arrays(0, len(self.runs))

def decode(body, where="taed's answer"):
    """A Page of a body; BundleError where it is damaged."""
    view = memoryview(body)
    magic = bytes(view[: len(MAGIC)]) if len(view) >= len(MAGIC) + 4 else b""
    if magic not in (MAGIC, MAGIC_V1):
        raise BundleError(f"{where}: not TAE columns (no TAECOL2 or TAECOL1 magic)")
    (length,) = struct.unpack_from("<I", view, len(MAGIC))
    head = len(MAGIC) + 4 + length
    if len(view) < head:
        raise BundleError(f"{where}: the header runs past the end ({len(view)} bytes)")
    try:
        header = json.loads(bytes(view[len(MAGIC) + 4 : head]).decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        raise BundleError(f"{where}: the header is not JSON ({e})") from None
    if not isinstance(header, dict) or not isinstance(header.get("points"), int):
        raise BundleError(f"{where}: the header has no point count")
    n = header["points"]
    offset = _pad8(head)
    runs = header.get("runs")
    if (not isinstance(runs, list) or
            not all(isinstance(r, dict) and isinstance(r.get("count"), int) and r["count"] >= 0
                    for r in runs) or sum(r["count"] for r in runs) != n):
        raise BundleError(f"{where}: the runs' counts do not add up to its {n} points")
    specs = header.get("columns") or []
    if [c.get("name") if isinstance(c, dict) else None for c in specs] != list(NAMES):
        raise BundleError(f"{where}: the columns are not step, value, wall_time")
    columns = {}
    for spec in specs:
        name = spec["name"]
        if magic == MAGIC_V1:
            coding, size = "plain", 8 * n
        else:
            coding, size = spec.get("coding"), spec.get("bytes")
        dtype = _I8 if name == "step" else _F8
        if spec.get("dtype") != dtype.str or not isinstance(size, int) or size < 0:
            raise BundleError(f"{where}: column {name!r} has an unknown dtype or size")
        if offset + size > len(view):
            raise BundleError(f"{where}: {len(view)} bytes, shorter than its columns say "
                              "(a truncated download or file)")
        if coding == "plain" and size == 8 * n:
            columns[name] = _Column(coding, dtype, np.frombuffer(body, dtype, n, offset))
        elif coding == "f4" and name != "step" and size == _pad8(4 * n):
            columns[name] = _Column(coding, dtype, np.frombuffer(body, _F4, n, offset))
        elif coding == "delta" and spec.get("width") in _WIDTHS and \
                size == _pad8(8 * len(runs) + spec["width"] * n):
            columns[name] = _Column(coding, dtype,
                                    firsts=np.frombuffer(body, _I8, len(runs), offset),
                                    deltas=np.frombuffer(body, _WIDTHS[spec["width"]], n,
                                                         offset + 8 * len(runs)))
        else:
            raise BundleError(f"{where}: column {name!r}: coding {coding!r} of {size} bytes "
                              f"does not hold {n} points")
        offset += size
    if offset != len(view):
        raise BundleError(f"{where}: {len(view)} bytes, not the {offset} that its {n} points "
                          "take (a truncated download or file)")
    return Page(header, columns, body, where)


def encode(header, runs, arrays):
    """A version-2 body of plain columns: `header` plus "points", "runs" (their entries) and
    "columns"; arrays: (steps, values, walls) of every point. For the runs of a page that the
    local cache keeps when not all of it is final."""
    steps, values, walls = arrays
    n = len(steps)
    header = dict(header)
    header["points"] = int(n)
    header["runs"] = list(runs)
    header["columns"] = [{"name": name, "dtype": dtype, "coding": "plain", "bytes": 8 * n}
                         for name, dtype in zip(NAMES, ("<i8", "<f8", "<f8"))]
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    head = len(MAGIC) + 4 + len(text)
    return b"".join([MAGIC, struct.pack("<I", len(text)), text, b"\0" * (_pad8(head) - head),
                     np.ascontiguousarray(steps, _I8).tobytes(),
                     np.ascontiguousarray(values, _F8).tobytes(),
                     np.ascontiguousarray(walls, _F8).tobytes()])
