#include "server/store/series_pack.h"

#include <cstdint>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace tae::store {
namespace {

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "packs store doubles little-endian");

constexpr char kVersion = 1;
// The least a point takes: a step byte, 8 value bytes, a wall time byte.
constexpr size_t kMinPointBytes = 10;

uint64_t ZigZag(int64_t v) {
  return (static_cast<uint64_t>(v) << 1) ^ static_cast<uint64_t>(v >> 63);
}

int64_t UnZigZag(uint64_t v) { return static_cast<int64_t>(v >> 1) ^ -static_cast<int64_t>(v & 1); }

void PutVarint(uint64_t v, std::string* out) {
  while (v >= 0x80) {
    out->push_back(static_cast<char>(v | 0x80));
    v >>= 7;
  }
  out->push_back(static_cast<char>(v));
}

// Reads a varint at *pos; false when the bytes end first or it runs past 10 bytes.
bool GetVarint(std::string_view in, size_t* pos, uint64_t* v) {
  uint64_t result = 0;
  for (int shift = 0; shift < 64 && *pos < in.size(); shift += 7) {
    const auto byte = static_cast<uint8_t>(in[(*pos)++]);
    result |= static_cast<uint64_t>(byte & 0x7f) << shift;
    if (byte < 0x80) {
      *v = result;
      return true;
    }
  }
  return false;
}

uint64_t Bits(double d) {
  uint64_t bits = 0;
  std::memcpy(&bits, &d, sizeof bits);
  return bits;
}

double FromBits(uint64_t bits) {
  double d = 0;
  std::memcpy(&d, &bits, sizeof d);
  return d;
}

}  // namespace

std::string PackSeries(const std::vector<model::SeriesPoint>& points) {
  std::string out;
  out.reserve(16 + points.size() * 14);
  out.push_back(kVersion);
  PutVarint(points.size(), &out);
  int64_t step = 0;
  for (const model::SeriesPoint& p : points) {
    PutVarint(
        ZigZag(static_cast<int64_t>(static_cast<uint64_t>(p.step) - static_cast<uint64_t>(step))),
        &out);
    step = p.step;
  }
  const size_t values = out.size();
  out.resize(values + points.size() * sizeof(double));
  for (size_t i = 0; i < points.size(); ++i) {
    std::memcpy(&out[values + i * sizeof(double)], &points[i].value, sizeof(double));
  }
  uint64_t wall = 0;
  for (const model::SeriesPoint& p : points) {
    const uint64_t bits = Bits(p.wall_time);
    PutVarint(ZigZag(static_cast<int64_t>(bits - wall)), &out);
    wall = bits;
  }
  return out;
}

absl::Status UnpackSeries(std::string_view blob, std::vector<model::SeriesPoint>* out) {
  auto bad = [&](const char* why) {
    return absl::DataLossError(absl::StrCat("a packed series of ", blob.size(), " bytes: ", why));
  };
  if (blob.empty() || blob[0] != kVersion) {
    return bad(blob.empty() ? "empty" : "not version 1");
  }
  size_t pos = 1;
  uint64_t count = 0;
  if (!GetVarint(blob, &pos, &count) || count > (blob.size() - pos) / kMinPointBytes) {
    return bad("its count does not fit its bytes");
  }
  const size_t before = out->size();
  out->resize(before + count);
  model::SeriesPoint* points = out->data() + before;
  uint64_t step = 0;
  for (uint64_t i = 0; i < count; ++i) {
    uint64_t delta = 0;
    if (!GetVarint(blob, &pos, &delta)) {
      out->resize(before);
      return bad("its steps end early");
    }
    step += static_cast<uint64_t>(UnZigZag(delta));
    points[i].step = static_cast<int64_t>(step);
  }
  if (blob.size() - pos < count * sizeof(double)) {
    out->resize(before);
    return bad("its values end early");
  }
  for (uint64_t i = 0; i < count; ++i) {
    std::memcpy(&points[i].value, blob.data() + pos + i * sizeof(double), sizeof(double));
  }
  pos += count * sizeof(double);
  uint64_t wall = 0;
  for (uint64_t i = 0; i < count; ++i) {
    uint64_t delta = 0;
    if (!GetVarint(blob, &pos, &delta)) {
      out->resize(before);
      return bad("its wall times end early");
    }
    wall += static_cast<uint64_t>(UnZigZag(delta));
    points[i].wall_time = FromBits(wall);
  }
  if (pos != blob.size()) {
    out->resize(before);
    return bad("bytes after its last point");
  }
  return absl::OkStatus();
}

}  // namespace tae::store
