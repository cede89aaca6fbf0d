"""Reads the columnar form of metric points (common/api/columns.h): the magic "TAECOL1\\n", a
little-endian uint32 header length, the JSON header, zero padding to a multiple of 8, then each
column (int64 steps, float64 values, float64 wall times) of `points` rows. numpy reads the columns
in place, without a parse per point."""

import json
import struct

import numpy as np

from ._errors import BundleError

MAGIC = b"TAECOL1\n"
_DTYPES = {"<i8": np.dtype("<i8"), "<f8": np.dtype("<f8")}


def decode(body, where="taed's answer"):
    """(header dict, {column name: numpy array}) from a body; BundleError where it is damaged."""
    view = memoryview(body)
    if len(view) < len(MAGIC) + 4 or bytes(view[: len(MAGIC)]) != MAGIC:
        raise BundleError(f"{where}: not TAE columns (no TAECOL1 magic)")
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
    offset = head + (8 - head % 8) % 8
    columns = header.get("columns") or []
    expected = offset + 8 * n * len(columns)
    if len(view) != expected:
        raise BundleError(f"{where}: {len(view)} bytes, not the {expected} that {n} points take "
                          "(a truncated download or file)")
    out = {}
    for column in columns:
        dtype = _DTYPES.get(column.get("dtype"))
        if dtype is None:
            raise BundleError(f"{where}: column {column.get('name')!r} has an unknown dtype")
        out[column["name"]] = np.frombuffer(body, dtype=dtype, count=n, offset=offset)
        offset += 8 * n
    return header, out


def encode_head(header, points):
    """The bytes before the columns of `points` rows of step, value and wall_time."""
    header = dict(header)
    header["points"] = int(points)
    header["columns"] = [{"name": "step", "dtype": "<i8"}, {"name": "value", "dtype": "<f8"},
                         {"name": "wall_time", "dtype": "<f8"}]
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    head = len(MAGIC) + 4 + len(text)
    return b"".join([MAGIC, struct.pack("<I", len(text)), text, b"\0" * ((8 - head % 8) % 8)])
