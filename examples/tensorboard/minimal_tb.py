"""A stand-in for torch.utils.tensorboard.SummaryWriter where the tensorboard package is missing
(Debian has none): the same add_scalar / flush / close, writing the same event files (TFRecord
records of Event protos with simple_value scalars). train.py uses the real SummaryWriter when it
can import it; TAE reads either file the same way.
"""

import os
import socket
import struct
import time


def _crc32c(data):
    crc = 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1
    return crc ^ 0xFFFFFFFF


def _masked(data):
    crc = _crc32c(data)
    return ((((crc >> 15) | (crc << 17)) & 0xFFFFFFFF) + 0xA282EAD8) & 0xFFFFFFFF


def _varint(n):
    out = bytearray()
    while True:
        out.append((n & 0x7F) | (0x80 if n > 0x7F else 0))
        n >>= 7
        if not n:
            return bytes(out)


def _field(number, wire_type, payload):
    key = _varint((number << 3) | wire_type)
    return key + (_varint(len(payload)) + payload if wire_type == 2 else payload)


class SummaryWriter:
    def __init__(self, log_dir):
        os.makedirs(log_dir, exist_ok=True)
        name = "events.out.tfevents.%d.%s.%d.0" % (time.time(), socket.gethostname(), os.getpid())
        self._file = open(os.path.join(log_dir, name), "ab")
        self._write(_field(1, 1, struct.pack("<d", time.time())) +
                    _field(3, 2, b"brain.Event:2"))

    def _write(self, event):
        header = struct.pack("<Q", len(event))
        self._file.write(header + struct.pack("<I", _masked(header)) + event +
                         struct.pack("<I", _masked(event)))

    def add_scalar(self, tag, value, global_step):
        value_msg = _field(1, 2, tag.encode()) + _field(2, 5, struct.pack("<f", float(value)))
        self._write(_field(1, 1, struct.pack("<d", time.time())) +
                    _field(2, 0, _varint(int(global_step))) + _field(5, 2, _field(1, 2, value_msg)))

    def flush(self):
        self._file.flush()

    def close(self):
        self._file.close()
