#include "common/tensorboard/tensorboard.h"

#include <unistd.h>

#include <array>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <optional>
#include <system_error>
#include <utility>

#include "absl/strings/str_cat.h"
#include "tensorboard/event.pb.h"

namespace tae::tensorboard {
namespace {

constexpr size_t kHeaderSize = 12;  // uint64 length + uint32 masked CRC of the length.
constexpr size_t kFooterSize = 4;   // uint32 masked CRC of the data.
constexpr size_t kWriteBufferSize = 1 << 20;

constexpr std::array<uint32_t, 256> MakeCrc32cTable() {
  std::array<uint32_t, 256> table{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t crc = i;
    for (int bit = 0; bit < 8; ++bit) {
      crc = (crc & 1) ? (crc >> 1) ^ 0x82F63B78u : crc >> 1;
    }
    table[i] = crc;
  }
  return table;
}

constexpr std::array<uint32_t, 256> kCrc32cTable = MakeCrc32cTable();

void PutLittleEndian(uint64_t value, int bytes, char* out) {
  for (int i = 0; i < bytes; ++i) {
    out[i] = static_cast<char>((value >> (8 * i)) & 0xFF);
  }
}

uint64_t GetLittleEndian(const char* in, int bytes) {
  uint64_t value = 0;
  for (int i = 0; i < bytes; ++i) {
    value |= static_cast<uint64_t>(static_cast<unsigned char>(in[i])) << (8 * i);
  }
  return value;
}

std::string HostName() {
  char host[256] = {};
  if (gethostname(host, sizeof(host) - 1) != 0 || host[0] == '\0') {
    return "localhost";
  }
  return host;
}

absl::Status DataLoss(const std::string& path, uint64_t offset, const std::string& what) {
  return absl::DataLossError(
      absl::StrCat(path, ": ", what, " in the record at byte offset ", offset));
}

// Reads one framed record at `offset`. Returns false at a clean end of file.
absl::StatusOr<bool> ReadRecord(std::ifstream& in, const std::string& path, uint64_t offset,
                                uint64_t file_size, std::string* data) {
  char header[kHeaderSize];
  in.read(header, kHeaderSize);
  if (in.gcount() == 0) {
    return false;
  }
  if (static_cast<size_t>(in.gcount()) < kHeaderSize) {
    return DataLoss(path, offset, "truncated header");
  }
  if (MaskedCrc32c(std::string_view(header, 8)) != GetLittleEndian(header + 8, 4)) {
    return DataLoss(path, offset, "bad length CRC");
  }
  uint64_t length = GetLittleEndian(header, 8);
  if (length > file_size - offset - kHeaderSize ||
      file_size - offset - kHeaderSize - length < kFooterSize) {
    return DataLoss(path, offset, absl::StrCat("truncated data (", length, " bytes announced)"));
  }
  data->resize(length);
  char footer[kFooterSize];
  in.read(data->data(), static_cast<std::streamsize>(length));
  in.read(footer, kFooterSize);
  if (!in) {
    return DataLoss(path, offset, "truncated data");
  }
  if (MaskedCrc32c(*data) != GetLittleEndian(footer, 4)) {
    return DataLoss(path, offset, "bad data CRC");
  }
  return true;
}

}  // namespace

uint32_t Crc32c(std::string_view data) {
  uint32_t crc = 0xFFFFFFFFu;
  for (char c : data) {
    crc = kCrc32cTable[(crc ^ static_cast<unsigned char>(c)) & 0xFF] ^ (crc >> 8);
  }
  return crc ^ 0xFFFFFFFFu;
}

uint32_t MaskedCrc32c(std::string_view data) {
  uint32_t crc = Crc32c(data);
  return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}

std::string EventFileName(double file_wall_time) {
  return absl::StrCat("events.out.tfevents.", static_cast<int64_t>(std::floor(file_wall_time)), ".",
                      HostName());
}

EventFileWriter::EventFileWriter(std::string path)
    : path_(std::move(path)), buffer_(new char[kWriteBufferSize]) {}

absl::StatusOr<std::unique_ptr<EventFileWriter>> EventFileWriter::Create(const std::string& dir,
                                                                         double file_wall_time) {
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  if (error) {
    return absl::InternalError(absl::StrCat("cannot create ", dir, ": ", error.message()));
  }
  std::string path = (std::filesystem::path(dir) / EventFileName(file_wall_time)).string();
  std::unique_ptr<EventFileWriter> writer(new EventFileWriter(path));
  // The buffer must be installed before the file is opened to take effect.
  writer->out_.rdbuf()->pubsetbuf(writer->buffer_.get(), kWriteBufferSize);
  writer->out_.open(path, std::ios::binary | std::ios::trunc);
  if (!writer->out_) {
    return absl::InternalError(absl::StrCat("cannot open ", path, " for writing"));
  }
  Event event;
  event.set_wall_time(file_wall_time);
  event.set_file_version(std::string(kFileVersion));
  event.SerializeToString(&writer->record_);
  if (absl::Status status = writer->WriteRecord(writer->record_); !status.ok()) {
    return status;
  }
  return writer;
}

absl::Status EventFileWriter::Append(const Scalar& scalar) {
  Event event;
  event.set_wall_time(scalar.wall_time);
  event.set_step(scalar.step);
  Summary::Value* value = event.mutable_summary()->add_value();
  value->set_tag(scalar.tag);
  value->set_simple_value(static_cast<float>(scalar.value));
  event.SerializeToString(&record_);
  return WriteRecord(record_);
}

absl::Status EventFileWriter::WriteRecord(std::string_view data) {
  char header[kHeaderSize];
  PutLittleEndian(data.size(), 8, header);
  PutLittleEndian(MaskedCrc32c(std::string_view(header, 8)), 4, header + 8);
  char footer[kFooterSize];
  PutLittleEndian(MaskedCrc32c(data), 4, footer);
  out_.write(header, kHeaderSize);
  out_.write(data.data(), static_cast<std::streamsize>(data.size()));
  out_.write(footer, kFooterSize);
  if (!out_) {
    return absl::InternalError(absl::StrCat("cannot write ", path_));
  }
  return absl::OkStatus();
}

absl::Status EventFileWriter::Close() {
  out_.close();
  if (out_.fail()) {
    return absl::InternalError(absl::StrCat("cannot write ", path_));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> WriteEventFile(const std::string& dir,
                                           const std::vector<Scalar>& scalars,
                                           double file_wall_time) {
  absl::StatusOr<std::unique_ptr<EventFileWriter>> writer =
      EventFileWriter::Create(dir, file_wall_time);
  if (!writer.ok()) {
    return writer.status();
  }
  for (const Scalar& scalar : scalars) {
    if (absl::Status status = (*writer)->Append(scalar); !status.ok()) {
      return status;
    }
  }
  if (absl::Status status = (*writer)->Close(); !status.ok()) {
    return status;
  }
  return (*writer)->path();
}

absl::StatusOr<std::vector<Scalar>> ReadEventFile(const std::string& path) {
  std::error_code error;
  uint64_t file_size = std::filesystem::file_size(path, error);
  if (error) {
    return absl::NotFoundError(absl::StrCat("cannot read ", path, ": ", error.message()));
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::NotFoundError(absl::StrCat("cannot open ", path));
  }
  std::vector<Scalar> scalars;
  std::string data;
  Event event;
  uint64_t offset = 0;
  while (true) {
    absl::StatusOr<bool> more = ReadRecord(in, path, offset, file_size, &data);
    if (!more.ok()) {
      return more.status();
    }
    if (!*more) {
      return scalars;
    }
    if (!event.ParseFromString(data)) {
      return DataLoss(path, offset, "not an Event proto");
    }
    if (event.has_summary()) {
      for (const Summary::Value& value : event.summary().value()) {
        if (value.value_case() == Summary::Value::kSimpleValue) {
          scalars.push_back({value.tag(), event.step(), event.wall_time(), value.simple_value()});
        }
      }
    }
    offset += kHeaderSize + data.size() + kFooterSize;
  }
}

namespace {

// A half-precision (IEEE binary16) value from its bits.
double FromHalf(uint32_t bits) {
  const int sign = (bits >> 15) & 1;
  const int exponent = (bits >> 10) & 0x1F;
  const int mantissa = bits & 0x3FF;
  double value;
  if (exponent == 0) {
    value = std::ldexp(mantissa, -24);
  } else if (exponent == 31) {
    value = mantissa == 0 ? INFINITY : NAN;
  } else {
    value = std::ldexp(mantissa + 1024, exponent - 25);
  }
  return sign ? -value : value;
}

// A bfloat16 value from its bits: the top half of a float32.
double FromBfloat16(uint32_t bits) {
  const uint32_t wide = (bits & 0xFFFF) << 16;
  float value;
  std::memcpy(&value, &wide, sizeof(value));
  return value;
}

// The number a rank-0 tensor holds, or nullopt (not a number type, or not one element).
std::optional<double> TensorScalar(const TensorProto& tensor) {
  if (tensor.tensor_shape().unknown_rank() || tensor.tensor_shape().dim_size() != 0) {
    return std::nullopt;
  }
  const std::string& raw = tensor.tensor_content();
  auto raw_as = [&](size_t size) -> std::optional<uint64_t> {
    if (raw.size() != size) {
      return std::nullopt;
    }
    return GetLittleEndian(raw.data(), static_cast<int>(size));
  };
  switch (tensor.dtype()) {
    case 1: {  // DT_FLOAT
      if (tensor.float_val_size() == 1) {
        return tensor.float_val(0);
      }
      std::optional<uint64_t> bits = raw_as(4);
      if (!bits.has_value()) {
        return std::nullopt;
      }
      const uint32_t narrow = static_cast<uint32_t>(*bits);
      float value;
      std::memcpy(&value, &narrow, sizeof(value));
      return value;
    }
    case 2: {  // DT_DOUBLE
      if (tensor.double_val_size() == 1) {
        return tensor.double_val(0);
      }
      std::optional<uint64_t> bits = raw_as(8);
      if (!bits.has_value()) {
        return std::nullopt;
      }
      double value;
      std::memcpy(&value, &*bits, sizeof(value));
      return value;
    }
    case 3: {  // DT_INT32
      if (tensor.int_val_size() == 1) {
        return tensor.int_val(0);
      }
      std::optional<uint64_t> bits = raw_as(4);
      return bits.has_value() ? std::optional<double>(static_cast<int32_t>(*bits)) : std::nullopt;
    }
    case 9: {  // DT_INT64
      if (tensor.int64_val_size() == 1) {
        return static_cast<double>(tensor.int64_val(0));
      }
      std::optional<uint64_t> bits = raw_as(8);
      return bits.has_value() ? std::optional<double>(static_cast<int64_t>(*bits)) : std::nullopt;
    }
    case 14:    // DT_BFLOAT16
    case 19: {  // DT_HALF
      std::optional<uint64_t> bits;
      if (tensor.half_val_size() == 1) {
        bits = static_cast<uint32_t>(tensor.half_val(0)) & 0xFFFF;
      } else {
        bits = raw_as(2);
      }
      if (!bits.has_value()) {
        return std::nullopt;
      }
      return tensor.dtype() == 19 ? FromHalf(static_cast<uint32_t>(*bits))
                                  : FromBfloat16(static_cast<uint32_t>(*bits));
    }
    default:
      return std::nullopt;
  }
}

}  // namespace

EventRecords ReadEventRecords(std::string_view data, uint64_t offset,
                              std::map<std::string, std::string>* plugins) {
  EventRecords out;
  Event event;
  size_t at = 0;
  size_t skipping_from = std::string_view::npos;  // start of a run of bytes being skipped
  auto end_skip = [&]() {
    if (skipping_from != std::string_view::npos) {
      out.warnings.push_back(absl::StrCat("byte offset ", offset + skipping_from, ": ",
                                          at - skipping_from,
                                          " bytes that are not a record (bad length checksum) "
                                          "skipped"));
      skipping_from = std::string_view::npos;
    }
  };
  while (data.size() - at >= kHeaderSize) {
    const char* header = data.data() + at;
    const uint64_t length = GetLittleEndian(header, 8);
    const uint32_t length_crc = static_cast<uint32_t>(GetLittleEndian(header + 8, 4));
    if (length_crc != MaskedCrc32c(std::string_view(header, 8)) || length > kMaxRecordBytes) {
      if (skipping_from == std::string_view::npos) {
        skipping_from = at;
      }
      ++at;
      out.consumed = at;
      continue;
    }
    end_skip();
    if (data.size() - at - kHeaderSize < length + kFooterSize) {
      break;  // still being written
    }
    const std::string_view record = data.substr(at + kHeaderSize, length);
    const uint32_t data_crc =
        static_cast<uint32_t>(GetLittleEndian(record.data() + record.size(), 4));
    const uint64_t record_offset = offset + at;
    at += kHeaderSize + length + kFooterSize;
    out.consumed = at;
    if (data_crc != MaskedCrc32c(record)) {
      out.warnings.push_back(absl::StrCat("byte offset ", record_offset, ": a record of ", length,
                                          " bytes whose data fails its checksum skipped"));
      continue;
    }
    if (!event.ParseFromArray(record.data(), static_cast<int>(record.size()))) {
      out.warnings.push_back(
          absl::StrCat("byte offset ", record_offset, ": a record that is not an Event skipped"));
      continue;
    }
    if (!event.has_summary()) {
      continue;
    }
    for (const Summary::Value& value : event.summary().value()) {
      std::optional<double> number;
      if (value.value_case() == Summary::Value::kSimpleValue) {
        number = value.simple_value();
      } else if (value.value_case() == Summary::Value::kTensor) {
        if (value.has_metadata() && !value.metadata().plugin_data().plugin_name().empty()) {
          (*plugins)[value.tag()] = value.metadata().plugin_data().plugin_name();
        }
        auto named = plugins->find(value.tag());
        if (named == plugins->end() || named->second == "scalars") {
          number = TensorScalar(value.tensor());
        }
      }
      if (number.has_value()) {
        out.scalars.push_back({value.tag(), event.step(), event.wall_time(), *number});
      }
    }
  }
  end_skip();  // bytes skipped up to what is left: said now, as the next read starts after them
  return out;
}

}  // namespace tae::tensorboard
