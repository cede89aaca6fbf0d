#include "server/store/series_pack.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

#include "absl/strings/str_cat.h"
#include "common/api/exact.h"

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
inline bool GetVarint(std::string_view in, size_t* pos, uint64_t* v) {
  if (*pos < in.size() && static_cast<uint8_t>(in[*pos]) < 0x80) {
    *v = static_cast<uint8_t>(in[(*pos)++]);  // one byte: most steps' deltas
    return true;
  }
  uint64_t result = 0;
  if (in.size() - *pos >= 10) {
    // Room for the longest varint: no bounds check per byte (wall times' deltas take 4).
    const auto* p = reinterpret_cast<const uint8_t*>(in.data()) + *pos;
    for (int i = 0; i < 10; ++i) {
      result |= static_cast<uint64_t>(p[i] & 0x7f) << (7 * i);
      if (p[i] < 0x80) {
        *pos += static_cast<size_t>(i) + 1;
        *v = result;
        return true;
      }
    }
    return false;
  }
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

namespace {

// Whether bytes [p, p + n) are exactly `count` varints as GetVarint reads them (each at most 10
// bytes), one after another up to p + n. Without decoding them: a varint ends at each byte without
// its high bit, so this counts those 8 bytes at a time and measures only the runs of other bytes
// between them, with no chain from one varint to the next. `longest` gets the length of the
// longest but the first (0 where there are fewer than two).
bool WholeVarints(const char* p, size_t n, uint64_t count, int* longest) {
  constexpr uint64_t kHigh = 0x8080808080808080ULL;
  uint64_t ends = 0;
  int run = 0;  // bytes since the last end
  int most = 0;
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t word = 0;
    std::memcpy(&word, p + i, sizeof word);
    const uint64_t stops = ~word & kHigh;
    if (stops == 0) {
      run += 8;
      if (run >= 10) {
        return false;
      }
      continue;
    }
    int before = -1;  // the byte of the word's previous end
    for (uint64_t s = stops; s != 0; s &= s - 1) {
      const int at = __builtin_ctzll(s) >> 3;
      const int length = before < 0 ? run + at + 1 : at - before;
      if (length > 10) {
        return false;
      }
      if (ends > 0) {
        most = std::max(most, length);
      }
      ++ends;
      before = at;
    }
    run = 7 - before;
  }
  for (; i < n; ++i) {
    if ((static_cast<uint8_t>(p[i]) & 0x80) == 0) {
      if (ends > 0) {
        most = std::max(most, run + 1);
      }
      ++ends;
      run = 0;
    } else if (++run >= 10) {
      return false;
    }
  }
  *longest = most;
  return ends == count && run == 0;
}

// The wall-time sink of a walk that only checks them (WholeVarints), and bounds their deltas.
struct SkipWalls {
  int* longest;
  void operator()(uint64_t, uint64_t) const {}
};

// Walks a pack, handing its columns to the sinks as it goes: `on_count(count)` once the count is
// read, `on_step(i, step)` for each step, `on_values(bytes)` with the `count` little-endian
// doubles, `on_wall(i, bits)` for each wall time's bit pattern. nullptr when the pack is whole
// (as far as it was read: with `walls` false it stops after the values), else why it is not (the
// sinks may have been called).
template <typename OnCount, typename OnStep, typename OnValues, typename OnWall>
const char* Walk(std::string_view blob, bool walls, OnCount on_count, OnStep on_step,
                 OnValues on_values, OnWall on_wall) {
  if (blob.empty()) {
    return "empty";
  }
  if (blob[0] != kVersion) {
    return "not version 1";
  }
  size_t pos = 1;
  uint64_t count = 0;
  if (!GetVarint(blob, &pos, &count) || count > (blob.size() - pos) / kMinPointBytes) {
    return "its count does not fit its bytes";
  }
  on_count(count);
  uint64_t step = 0;
  for (uint64_t i = 0; i < count; ++i) {
    uint64_t delta = 0;
    if (!GetVarint(blob, &pos, &delta)) {
      return "its steps end early";
    }
    step += static_cast<uint64_t>(UnZigZag(delta));
    on_step(i, static_cast<int64_t>(step));
  }
  if (blob.size() - pos < count * sizeof(double)) {
    return "its values end early";
  }
  on_values(blob.data() + pos);
  pos += count * sizeof(double);
  if (!walls) {
    return nullptr;
  }
  if constexpr (std::is_same_v<OnWall, SkipWalls>) {
    return WholeVarints(blob.data() + pos, blob.size() - pos, count, on_wall.longest)
               ? nullptr
               : "its wall times are not whole varints";
  }
  uint64_t wall = 0;
  for (uint64_t i = 0; i < count; ++i) {
    uint64_t delta = 0;
    if (!GetVarint(blob, &pos, &delta)) {
      return "its wall times end early";
    }
    wall += static_cast<uint64_t>(UnZigZag(delta));
    on_wall(i, wall);
  }
  if (pos != blob.size()) {
    return "bytes after its last point";
  }
  return nullptr;
}

absl::Status Damaged(std::string_view blob, const char* why) {
  return absl::DataLossError(absl::StrCat("a packed series of ", blob.size(), " bytes: ", why));
}

}  // namespace

absl::Status UnpackSeries(std::string_view blob, std::vector<model::SeriesPoint>* out) {
  const size_t before = out->size();
  model::SeriesPoint* points = nullptr;
  const char* why = Walk(
      blob, true,
      [&](uint64_t count) {
        out->resize(before + count);
        points = out->data() + before;
      },
      [&](uint64_t i, int64_t step) { points[i].step = step; },
      [&](const char* bytes) {
        for (size_t i = 0; i < out->size() - before; ++i) {
          std::memcpy(&points[i].value, bytes + i * sizeof(double), sizeof(double));
        }
      },
      [&](uint64_t i, uint64_t bits) { points[i].wall_time = FromBits(bits); });
  if (why != nullptr) {
    out->resize(before);
    return Damaged(blob, why);
  }
  return absl::OkStatus();
}

absl::Status UnpackColumns(std::string_view blob, bool values, bool walls, SeriesColumns* out) {
  int64_t* steps = nullptr;
  size_t n = 0;
  const char* why = Walk(
      blob, walls,
      [&](uint64_t count) {
        n = count;
        out->steps.resize(n);
        out->values.resize(values ? n : 0);
        out->walls.resize(walls ? n : 0);
        steps = out->steps.data();
      },
      [&](uint64_t i, int64_t step) { steps[i] = step; },
      [&](const char* bytes) {
        if (values && n > 0) {
          std::memcpy(out->values.data(), bytes, n * sizeof(double));
        }
      },
      [&](uint64_t i, uint64_t bits) { out->walls[i] = FromBits(bits); });
  return why == nullptr ? absl::OkStatus() : Damaged(blob, why);
}

absl::StatusOr<PackInfo> CheckPack(std::string_view blob) {
  PackInfo info;
  info.min_step = std::numeric_limits<int64_t>::max();
  info.max_step = std::numeric_limits<int64_t>::min();
  int64_t previous = 0;
  int longest = 0;
  const char* why = Walk(
      blob, true, [&](uint64_t count) { info.count = static_cast<int64_t>(count); },
      [&](uint64_t i, int64_t step) {
        info.min_step = std::min(info.min_step, step);
        info.max_step = std::max(info.max_step, step);
        if (i > 0) {
          info.step_delta_bound = std::max(
              info.step_delta_bound,
              api::DeltaMagnitude(static_cast<uint64_t>(step) - static_cast<uint64_t>(previous)));
        }
        previous = step;
      },
      [&](const char* bytes) {
        for (int64_t i = 0; info.values_float && i < info.count; ++i) {
          double v = 0;
          std::memcpy(&v, bytes + i * sizeof(double), sizeof v);
          info.values_float = api::IsFloat32(v);
        }
      },
      SkipWalls{&longest});
  if (why != nullptr) {
    return Damaged(blob, why);
  }
  if (info.count == 0) {
    info.min_step = info.max_step = 0;
  }
  // A zigzag varint of L bytes holds less than 2^(7L): a delta's bound is half of that.
  info.wall_delta_bound = longest == 0    ? 0
                          : longest >= 10 ? ~uint64_t{0} >> 1
                                          : (uint64_t{1} << (7 * longest - 1)) - 1;
  return info;
}

}  // namespace tae::store
