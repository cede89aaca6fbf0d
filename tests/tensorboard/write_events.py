#!/usr/bin/python3
"""Writes TensorBoard event files, plus a description of what a reader must find in them.

This is an independent test fixture for an event-file reader. It shares nothing with the code
under test: the TFRecord framing and the CRC-32C below are written here from the format's
description, and the Event messages are defined at run time from TensorBoard's field numbers
(tensorboard/compat/proto/{event,summary,tensor,tensor_shape,types}.proto) with the Python
protobuf runtime. The output is deterministic: the same bytes on every run.

Usage: write_events.py OUT_DIR

Writes five event files under OUT_DIR and OUT_DIR/expected.json, which maps each file's path
(relative to OUT_DIR) to:
  "scalars":         the points a correct reader reports, in file order:
                     {"tag", "step", "value", "wall_time"}, value as the float the file holds;
  "size":            the file's size in bytes;
  "torn_at":         (torn file only) offset where the incomplete last record begins, i.e. how
                     many bytes a reader may consume before it has to wait for more;
  "skipped_offsets": (corrupt file only) start offsets of the damaged records and of the garbage
                     that a reader must skip.
"""

import json
import os
import struct
import sys

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

# ---------------------------------------------------------------------------------------------
# CRC-32C (Castagnoli), table-driven: reflected polynomial 0x82F63B78, initial value and final
# xor 0xFFFFFFFF.

_CRC32C_POLY = 0x82F63B78


def _crc32c_table():
    table = []
    for byte in range(256):
        crc = byte
        for _ in range(8):
            crc = (crc >> 1) ^ _CRC32C_POLY if crc & 1 else crc >> 1
        table.append(crc)
    return table


_CRC32C_TABLE = _crc32c_table()


def crc32c(data):
    crc = 0xFFFFFFFF
    for byte in data:
        crc = _CRC32C_TABLE[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def masked_crc32c(data):
    """The CRC as TFRecord stores it: rotated right by 15 bits plus a constant, mod 2^32."""
    crc = crc32c(data)
    return ((((crc >> 15) | (crc << 17)) & 0xFFFFFFFF) + 0xA282EAD8) & 0xFFFFFFFF


# Published check values: the CRC catalogue's "123456789", and RFC 3720 appendix B.4.
_CRC32C_CHECKS = [
    (b"123456789", 0xE3069283),
    (bytes(32), 0x8A9136AA),
    (b"\xff" * 32, 0x62A8AB43),
    (bytes(range(32)), 0x46DD794E),
    (bytes(range(31, -1, -1)), 0x113FDB5C),
]


def check_crc32c():
    """Returns a list of failure descriptions; empty when every check value matches."""
    failures = []
    for data, want in _CRC32C_CHECKS:
        got = crc32c(data)
        if got != want:
            failures.append("crc32c(%r) = 0x%08X, expected 0x%08X" % (data, got, want))
    return failures


# ---------------------------------------------------------------------------------------------
# TFRecord framing: uint64 LE length, uint32 LE masked CRC of those 8 bytes, the data, uint32 LE
# masked CRC of the data.

def frame_record(data):
    header = struct.pack("<Q", len(data))
    return (header + struct.pack("<I", masked_crc32c(header)) + data
            + struct.pack("<I", masked_crc32c(data)))


HEADER_SIZE = 12  # length + its CRC
FOOTER_SIZE = 4   # data CRC

# ---------------------------------------------------------------------------------------------
# Message definitions, built at run time. Only the fields the fixture uses (and their oneof
# siblings where they matter) are declared; field numbers and types are TensorBoard's.

_F = descriptor_pb2.FieldDescriptorProto
PACKAGE = "tbfixture"

# tensorboard/compat/proto/types.proto (subset)
DT_FLOAT, DT_DOUBLE, DT_INT32, DT_STRING, DT_INT64, DT_BFLOAT16, DT_HALF = 1, 2, 3, 7, 9, 14, 19
# tensorboard/compat/proto/summary.proto, enum DataClass
DATA_CLASS_UNKNOWN, DATA_CLASS_SCALAR, DATA_CLASS_TENSOR, DATA_CLASS_BLOB_SEQUENCE = 0, 1, 2, 3
# tensorboard/compat/proto/event.proto, LogMessage.Level (declared as a plain int32 here)
LOG_INFO = 20


def _add_field(msg, name, number, ftype, label=_F.LABEL_OPTIONAL, type_name=None, oneof=None,
               packed=False):
    field = msg.field.add(name=name, number=number, type=ftype, label=label)
    if type_name:
        field.type_name = "." + PACKAGE + "." + type_name
    if oneof is not None:
        field.oneof_index = oneof
    if packed:
        field.options.packed = True
    return field


def _add_enum(file_proto, name, values):
    enum = file_proto.enum_type.add(name=name)
    for value_name, number in values:
        enum.value.add(name=value_name, number=number)


def _file_descriptor():
    fd = descriptor_pb2.FileDescriptorProto(
        name="tbfixture/events.proto", package=PACKAGE, syntax="proto3")
    repeated = _F.LABEL_REPEATED

    # types.proto: DataType (proto3 enums must start at zero)
    _add_enum(fd, "DataType", [
        ("DT_INVALID", 0), ("DT_FLOAT", DT_FLOAT), ("DT_DOUBLE", DT_DOUBLE),
        ("DT_INT32", DT_INT32), ("DT_STRING", DT_STRING), ("DT_INT64", DT_INT64),
        ("DT_BFLOAT16", DT_BFLOAT16), ("DT_HALF", DT_HALF)])
    # summary.proto: DataClass
    _add_enum(fd, "DataClass", [
        ("DATA_CLASS_UNKNOWN", DATA_CLASS_UNKNOWN), ("DATA_CLASS_SCALAR", DATA_CLASS_SCALAR),
        ("DATA_CLASS_TENSOR", DATA_CLASS_TENSOR),
        ("DATA_CLASS_BLOB_SEQUENCE", DATA_CLASS_BLOB_SEQUENCE)])

    # tensor_shape.proto: TensorShapeProto { repeated Dim dim = 2; bool unknown_rank = 3; }
    shape = fd.message_type.add(name="TensorShapeProto")
    dim = shape.nested_type.add(name="Dim")
    _add_field(dim, "size", 1, _F.TYPE_INT64)
    _add_field(dim, "name", 2, _F.TYPE_STRING)
    _add_field(shape, "dim", 2, _F.TYPE_MESSAGE, repeated, "TensorShapeProto.Dim")
    _add_field(shape, "unknown_rank", 3, _F.TYPE_BOOL)

    # tensor.proto: TensorProto (the value fields the fixture uses)
    tensor = fd.message_type.add(name="TensorProto")
    _add_field(tensor, "dtype", 1, _F.TYPE_ENUM, type_name="DataType")
    _add_field(tensor, "tensor_shape", 2, _F.TYPE_MESSAGE, type_name="TensorShapeProto")
    _add_field(tensor, "version_number", 3, _F.TYPE_INT32)
    _add_field(tensor, "tensor_content", 4, _F.TYPE_BYTES)
    _add_field(tensor, "float_val", 5, _F.TYPE_FLOAT, repeated, packed=True)
    _add_field(tensor, "double_val", 6, _F.TYPE_DOUBLE, repeated, packed=True)
    _add_field(tensor, "int_val", 7, _F.TYPE_INT32, repeated, packed=True)
    _add_field(tensor, "string_val", 8, _F.TYPE_BYTES, repeated)
    _add_field(tensor, "int64_val", 10, _F.TYPE_INT64, repeated, packed=True)
    _add_field(tensor, "half_val", 13, _F.TYPE_INT32, repeated, packed=True)

    # summary.proto: SummaryMetadata { PluginData plugin_data = 1; ... DataClass data_class = 4; }
    meta = fd.message_type.add(name="SummaryMetadata")
    plugin = meta.nested_type.add(name="PluginData")
    _add_field(plugin, "plugin_name", 1, _F.TYPE_STRING)
    _add_field(plugin, "content", 2, _F.TYPE_BYTES)
    _add_field(meta, "plugin_data", 1, _F.TYPE_MESSAGE, type_name="SummaryMetadata.PluginData")
    _add_field(meta, "display_name", 2, _F.TYPE_STRING)
    _add_field(meta, "summary_description", 3, _F.TYPE_STRING)
    _add_field(meta, "data_class", 4, _F.TYPE_ENUM, type_name="DataClass")

    # summary.proto: Summary { repeated Value value = 1; }. Value's oneof "value" also holds
    # image = 4, histo = 5 and audio = 6, which the fixture never writes and so leaves out.
    summary = fd.message_type.add(name="Summary")
    value = summary.nested_type.add(name="Value")
    value.oneof_decl.add(name="value")
    _add_field(value, "tag", 1, _F.TYPE_STRING)
    _add_field(value, "node_name", 7, _F.TYPE_STRING)
    _add_field(value, "metadata", 9, _F.TYPE_MESSAGE, type_name="SummaryMetadata")
    _add_field(value, "simple_value", 2, _F.TYPE_FLOAT, oneof=0)
    _add_field(value, "obsolete_old_style_histogram", 3, _F.TYPE_BYTES, oneof=0)
    _add_field(value, "tensor", 8, _F.TYPE_MESSAGE, type_name="TensorProto", oneof=0)
    _add_field(summary, "value", 1, _F.TYPE_MESSAGE, repeated, "Summary.Value")

    # event.proto: LogMessage (level is an enum there; int32 is the same on the wire)
    log = fd.message_type.add(name="LogMessage")
    _add_field(log, "level", 1, _F.TYPE_INT32)
    _add_field(log, "message", 2, _F.TYPE_STRING)

    # event.proto: Event, oneof "what" over fields 3..6 (TensorBoard's 7..10 left out)
    event = fd.message_type.add(name="Event")
    event.oneof_decl.add(name="what")
    _add_field(event, "wall_time", 1, _F.TYPE_DOUBLE)
    _add_field(event, "step", 2, _F.TYPE_INT64)
    _add_field(event, "file_version", 3, _F.TYPE_STRING, oneof=0)
    _add_field(event, "graph_def", 4, _F.TYPE_BYTES, oneof=0)
    _add_field(event, "summary", 5, _F.TYPE_MESSAGE, type_name="Summary", oneof=0)
    _add_field(event, "log_message", 6, _F.TYPE_MESSAGE, type_name="LogMessage", oneof=0)
    return fd


def message_classes():
    """Returns {"Event": class, "TensorProto": class, ...} from a private descriptor pool."""
    pool = descriptor_pool.DescriptorPool()
    pool.Add(_file_descriptor())
    if hasattr(message_factory, "GetMessageClass"):  # protobuf >= 4.22
        get_class = message_factory.GetMessageClass
    else:
        get_class = message_factory.MessageFactory(pool).GetPrototype
    names = ["Event", "Summary", "SummaryMetadata", "TensorProto", "TensorShapeProto",
             "LogMessage"]
    return {name: get_class(pool.FindMessageTypeByName(PACKAGE + "." + name)) for name in names}


# ---------------------------------------------------------------------------------------------
# Number helpers: the value a reader should report is exactly what the file's bytes decode to.

def as_float32(value):
    return struct.unpack("<f", struct.pack("<f", value))[0]


def half_bits(value):
    """IEEE 754 binary16 bit pattern of value, as TensorProto.half_val carries it."""
    return struct.unpack("<H", struct.pack("<e", value))[0]


def from_half_bits(bits):
    return struct.unpack("<e", struct.pack("<H", bits))[0]


# ---------------------------------------------------------------------------------------------
# Event file builder

FILE_VERSION = "brain.Event:2"


class EventFile:
    """Accumulates the bytes of one event file and what a reader should find in it."""

    def __init__(self, classes, path, start_time):
        self.classes = classes
        self.path = path
        self.start_time = start_time
        self.data = bytearray()
        self.scalars = []
        self.extra = {}
        # Every event file opens with a file_version event, as both PyTorch and TF write it.
        first = classes["Event"](wall_time=start_time, file_version=FILE_VERSION)
        self.append_event(first)

    def wall_time(self, step):
        # Binary fractions only, so the JSON value is exactly the stored double.
        return self.start_time + step * 0.5

    def append_event(self, event):
        """Appends event as one record; returns the record's start offset and its framed bytes."""
        offset = len(self.data)
        record = frame_record(event.SerializeToString())
        self.data += record
        return offset, record

    def append_raw(self, raw):
        offset = len(self.data)
        self.data += raw
        return offset

    def expect(self, tag, step, value):
        self.scalars.append({"tag": tag, "step": step, "value": float(value),
                             "wall_time": self.wall_time(step)})

    def new_event(self, step):
        return self.classes["Event"](wall_time=self.wall_time(step), step=step)

    def simple_value_event(self, tag, step, value):
        """A PyTorch-style scalar: Summary.Value.simple_value, no metadata."""
        event = self.new_event(step)
        event.summary.value.add(tag=tag, simple_value=value)
        return event

    def add_simple_value(self, tag, step, value):
        self.expect(tag, step, as_float32(value))
        return self.append_event(self.simple_value_event(tag, step, value))

    def tensor_event(self, tag, step, plugin=None, data_class=DATA_CLASS_UNKNOWN):
        """An event with one tensor-valued Summary.Value; returns (event, value.tensor).

        When plugin is given the value carries SummaryMetadata naming it; otherwise none.
        """
        event = self.new_event(step)
        value = event.summary.value.add(tag=tag)
        if plugin is not None:
            value.metadata.plugin_data.plugin_name = plugin
            value.metadata.data_class = data_class
        tensor = value.tensor
        tensor.tensor_shape.SetInParent()  # rank 0 unless the caller adds dims
        return event, tensor

    def result(self):
        entry = {"scalars": self.scalars, "size": len(self.data)}
        entry.update(self.extra)
        return entry


# ---------------------------------------------------------------------------------------------
# The five files

def write_pytorch(classes):
    """PyTorch SummaryWriter.add_scalar: one event per point, Summary.Value.simple_value."""
    f = EventFile(classes, "pytorch/events.out.tfevents.1700000000.host.1.0", 1700000000.0)
    special_loss = {0: 0.0, 7: -1.5, 13: 1e-30, 21: 3e38, 22: -3e38, 35: -1e-30}
    for step in range(50):
        loss = special_loss.get(step, 2.0 * 0.9 ** step + 0.01 * step)
        f.add_simple_value("train/loss", step, loss)
        if step % 10 == 0:
            f.add_simple_value("lr", step, 0.1 * 0.5 ** (step // 10))
        if step % 5 == 4:
            f.add_simple_value("eval/acc", step, 0.5 + step / 100.0)
    return f


def write_tf2(classes):
    """tf.summary.scalar in TF2: rank-0 tensors, metadata only on each tag's first event."""
    f = EventFile(classes, "tf2/events.out.tfevents.1700000001.host.2.v2", 1700000001.0)
    seen = set()

    def scalar_tensor_event(tag, step, dtype):
        plugin = None
        if tag not in seen:
            seen.add(tag)
            plugin = "scalars"
        event, tensor = f.tensor_event(tag, step, plugin, DATA_CLASS_SCALAR)
        tensor.dtype = dtype
        return event, tensor

    half_values = [1.0, -2.5, 65504.0, 2.0 ** -14, 1.0 / 3.0]
    float_val_values = [0.5, -0.125, 1e-30]
    for step in range(20):
        for tag, value in (("loss", 1.0 / (step + 1)), ("accuracy", step / 20.0)):
            event, tensor = scalar_tensor_event(tag, step, DT_FLOAT)
            tensor.tensor_content = struct.pack("<f", value)
            f.append_event(event)
            f.expect(tag, step, as_float32(value))
        if step % 10 == 0:
            value = 0.1 / (step + 1)  # not representable as float32: the reader must keep double
            event, tensor = scalar_tensor_event("lr_double", step, DT_DOUBLE)
            tensor.double_val.append(value)
            f.append_event(event)
            f.expect("lr_double", step, value)
        if step < len(half_values):
            bits = half_bits(half_values[step])
            event, tensor = scalar_tensor_event("half", step, DT_HALF)
            tensor.half_val.append(bits)
            f.append_event(event)
            f.expect("half", step, from_half_bits(bits))
        if step < len(float_val_values):
            value = float_val_values[step]
            event, tensor = scalar_tensor_event("via_float_val", step, DT_FLOAT)
            tensor.float_val.append(value)
            f.append_event(event)
            f.expect("via_float_val", step, as_float32(value))
    return f


def write_other(classes):
    """Events that are not scalars, around two genuine simple_value points."""
    f = EventFile(classes, "other/events.out.tfevents.1700000002.host.3.v2", 1700000002.0)

    # graph_def holds a serialized GraphDef; this one has a single NodeDef {name: "x", op: "Const"}.
    node = b"\x0a\x01x" + b"\x12\x05Const"
    event = f.new_event(0)
    event.graph_def = b"\x0a" + bytes([len(node)]) + node
    f.append_event(event)

    event = f.new_event(0)
    event.log_message.level = LOG_INFO
    event.log_message.message = "fixture log message"
    f.append_event(event)

    f.add_simple_value("real/one", 1, 1.0)

    # A rank-1 float tensor of 3 elements from the histograms plugin.
    event, tensor = f.tensor_event("hist/weights", 1, "histograms", DATA_CLASS_TENSOR)
    tensor.dtype = DT_FLOAT
    tensor.tensor_shape.dim.add(size=3)
    tensor.tensor_content = struct.pack("<3f", 0.0, 1.0, 4.0)
    f.append_event(event)

    # A rank-0 string tensor from the text plugin.
    event, tensor = f.tensor_event("notes/text", 1, "text", DATA_CLASS_TENSOR)
    tensor.dtype = DT_STRING
    tensor.string_val.append(b"hello")
    f.append_event(event)

    # A rank-0 float tensor whose plugin is hparams: shaped like a scalar, but not one.
    event, tensor = f.tensor_event("_hparams_/session_start_info", 1, "hparams")
    event.summary.value[0].metadata.plugin_data.content = b"\x08\x00"
    tensor.dtype = DT_FLOAT
    tensor.tensor_content = struct.pack("<f", 1.0)
    f.append_event(event)

    # The same tag again without metadata, as TF2 writes later events: it still belongs to the
    # hparams plugin, whose metadata the tag's first event carried.
    event, tensor = f.tensor_event("_hparams_/session_start_info", 2)
    tensor.dtype = DT_FLOAT
    tensor.tensor_content = struct.pack("<f", 2.0)
    f.append_event(event)

    f.add_simple_value("real/one", 2, 2.0)
    return f


def write_torn(classes):
    """Ten complete records, then only the first 20 bytes of an eleventh."""
    f = EventFile(classes, "torn/events.out.tfevents.1700000003.host.4.0", 1700000003.0)
    for step in range(10):
        f.add_simple_value("t", step, step * 0.5)
    last = frame_record(f.simple_value_event("t", 10, 5.0).SerializeToString())
    f.extra["torn_at"] = f.append_raw(last[:20])
    return f


def _valid_header_at(data, offset):
    if offset + HEADER_SIZE > len(data):
        return False
    (stored,) = struct.unpack_from("<I", data, offset + 8)
    return stored == masked_crc32c(bytes(data[offset:offset + 8]))


def write_corrupt(classes):
    """Two damaged records and a run of garbage among valid ones."""
    f = EventFile(classes, "corrupt/events.out.tfevents.1700000004.host.5.0", 1700000004.0)
    skipped = []
    for step in range(10):
        value = step * 1.25
        event = f.simple_value_event("c", step, value)
        if step == 3:
            # Stored data CRC with one bit flipped; the data itself is intact.
            record = bytearray(frame_record(event.SerializeToString()))
            record[-FOOTER_SIZE] ^= 0x01
            skipped.append(f.append_raw(bytes(record)))
        elif step == 6:
            # One data byte flipped after the CRC was computed. The last data byte is the top
            # byte of the float32 simple_value, so the flip turns 7.5 into -7.5: a reader that
            # ignored the data CRC would report a wrong point.
            record = bytearray(frame_record(event.SerializeToString()))
            last_data_byte = len(record) - FOOTER_SIZE - 1
            assert record[last_data_byte - 3:last_data_byte + 1] == struct.pack("<f", value)
            record[last_data_byte] ^= 0x80
            skipped.append(f.append_raw(bytes(record)))
        else:
            f.expect("c", step, as_float32(value))
            f.append_event(event)
    garbage_at = f.append_raw(b"\xde\xad\xbe\xef\x00\x17\x42")
    skipped.append(garbage_at)
    for step in (10, 11):
        f.add_simple_value("c", step, step * 1.25)
    # A reader that resynchronises by scanning for a valid header must find none that starts
    # inside the garbage; the next one is the step-10 record.
    for offset in range(garbage_at, garbage_at + 7):
        assert not _valid_header_at(f.data, offset), offset
    assert _valid_header_at(f.data, garbage_at + 7)
    f.extra["skipped_offsets"] = skipped
    return f


def main(argv):
    if len(argv) != 2:
        sys.stderr.write("usage: write_events.py OUT_DIR\n")
        return 2
    failures = check_crc32c()
    if failures:
        for failure in failures:
            sys.stderr.write("write_events.py: CRC-32C self-check failed: %s\n" % failure)
        return 1
    out_dir = argv[1]
    classes = message_classes()
    files = [write_pytorch(classes), write_tf2(classes), write_other(classes),
             write_torn(classes), write_corrupt(classes)]
    expected = {}
    for f in files:
        path = os.path.join(out_dir, f.path)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as out:
            out.write(f.data)
        expected[f.path] = f.result()
    with open(os.path.join(out_dir, "expected.json"), "w") as out:
        json.dump(expected, out, indent=1)
        out.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
