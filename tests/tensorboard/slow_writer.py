#!/usr/bin/python3
"""A training script's TensorBoard writer, slowed down: for the agent's event-file follower.

Usage: slow_writer.py DIR STEPS DELAY_S

Writes DIR/events.out.tfevents.<time>.<host> the way SummaryWriter does (a file_version record,
then one Event per step with simple_value scalars "train/loss" = step + 0.5 and "grad norm" =
2 * step), but flushes each record in two halves, DELAY_S / 2 apart, so a reader sees records
torn mid-way. Standard library only, and its own encoding: the protobuf wire format and the
TFRecord framing with CRC-32C are written out below, sharing nothing with TAE.
"""

import os
import socket
import struct
import sys
import time


def crc32c(data):
    crc = 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1
    return crc ^ 0xFFFFFFFF


def masked(data):
    crc = crc32c(data)
    return ((((crc >> 15) | (crc << 17)) & 0xFFFFFFFF) + 0xA282EAD8) & 0xFFFFFFFF


def varint(n):
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def field(number, wire_type, payload):
    key = varint((number << 3) | wire_type)
    if wire_type == 2:  # length-delimited
        return key + varint(len(payload)) + payload
    return key + payload


def event(wall_time, step, file_version=None, values=()):
    out = field(1, 1, struct.pack("<d", wall_time)) + field(2, 0, varint(step))
    if file_version is not None:
        out += field(3, 2, file_version.encode())
    if values:
        summary = b"".join(
            field(1, 2, field(1, 2, tag.encode()) + field(2, 5, struct.pack("<f", value)))
            for tag, value in values)
        out += field(5, 2, summary)
    return out


def record(data):
    header = struct.pack("<Q", len(data))
    return header + struct.pack("<I", masked(header)) + data + struct.pack("<I", masked(data))


def main(argv):
    if len(argv) != 4:
        print(__doc__, file=sys.stderr)
        return 2
    directory, steps, delay = argv[1], int(argv[2]), float(argv[3])
    os.makedirs(directory, exist_ok=True)
    now = time.time()
    path = os.path.join(directory, "events.out.tfevents.%d.%s" % (now, socket.gethostname()))
    with open(path, "ab") as out:
        out.write(record(event(now, 0, file_version="brain.Event:2")))
        out.flush()
        for step in range(1, steps + 1):
            data = record(event(time.time(), step,
                                values=[("train/loss", step + 0.5), ("grad norm", 2.0 * step)]))
            half = len(data) // 2
            out.write(data[:half])
            out.flush()
            time.sleep(delay / 2)
            out.write(data[half:])
            out.flush()
            print("wrote step", step, flush=True)
            time.sleep(delay / 2)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
