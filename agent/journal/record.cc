#include "agent/journal/record.h"

#include <array>
#include <cstring>

namespace tae::agent::journal_internal {
namespace {

// CRC-32C (Castagnoli), reflected polynomial, slicing by 8: ~2 GB/s, so checking a journal
// costs far less than reading it.
struct Crc32cTables {
  std::array<std::array<uint32_t, 256>, 8> t;
  Crc32cTables() {
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k) {
        c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
      }
      t[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; ++i) {
      for (size_t k = 1; k < 8; ++k) {
        t[k][i] = (t[k - 1][i] >> 8) ^ t[0][t[k - 1][i] & 0xff];
      }
    }
  }
};

const Crc32cTables& Tables() {
  static const Crc32cTables tables;
  return tables;
}

void PutFixed32(std::string* out, uint32_t v) {
  char b[4];
  for (int i = 0; i < 4; ++i) {
    b[i] = static_cast<char>(v >> (8 * i));
  }
  out->append(b, 4);
}

void PutFixed64(std::string* out, uint64_t v) {
  char b[8];
  for (int i = 0; i < 8; ++i) {
    b[i] = static_cast<char>(v >> (8 * i));
  }
  out->append(b, 8);
}

void PutVarint(std::string* out, uint64_t v) {
  while (v >= 0x80) {
    out->push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out->push_back(static_cast<char>(v));
}

uint32_t LoadFixed32(const char* p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) {
    v |= static_cast<uint32_t>(static_cast<unsigned char>(p[i])) << (8 * i);
  }
  return v;
}

uint64_t LoadFixed64(const char* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) {
    v |= static_cast<uint64_t>(static_cast<unsigned char>(p[i])) << (8 * i);
  }
  return v;
}

// Reads from the front of a payload, refusing to run past its end.
class Reader {
 public:
  explicit Reader(std::string_view data) : data_(data) {}

  bool Byte(uint8_t* v) {
    if (data_.empty()) {
      return false;
    }
    *v = static_cast<uint8_t>(data_[0]);
    data_.remove_prefix(1);
    return true;
  }
  bool Varint(uint64_t* v) {
    uint64_t result = 0;
    for (int shift = 0; shift < 64 && !data_.empty(); shift += 7) {
      const auto byte = static_cast<unsigned char>(data_[0]);
      data_.remove_prefix(1);
      result |= static_cast<uint64_t>(byte & 0x7f) << shift;
      if ((byte & 0x80) == 0) {
        *v = result;
        return true;
      }
    }
    return false;
  }
  bool Bytes(size_t n, std::string_view* v) {
    if (data_.size() < n) {
      return false;
    }
    *v = data_.substr(0, n);
    data_.remove_prefix(n);
    return true;
  }
  // A count of items of at least `min_item_bytes` each, which must fit in what is left.
  bool Count(size_t min_item_bytes, uint64_t* n) {
    return Varint(n) && *n <= data_.size() / min_item_bytes;
  }
  bool done() const { return data_.empty(); }

 private:
  std::string_view data_;
};

}  // namespace

uint32_t Crc32c(const char* data, size_t size, uint32_t crc) {
  const auto& t = Tables().t;
  const auto* p = reinterpret_cast<const unsigned char*>(data);
  uint32_t c = ~crc;
  while (size >= 8) {
    const uint32_t lo = c ^ (static_cast<uint32_t>(p[0]) | static_cast<uint32_t>(p[1]) << 8 |
                             static_cast<uint32_t>(p[2]) << 16 | static_cast<uint32_t>(p[3]) << 24);
    c = t[7][lo & 0xff] ^ t[6][(lo >> 8) & 0xff] ^ t[5][(lo >> 16) & 0xff] ^ t[4][lo >> 24] ^
        t[3][p[4]] ^ t[2][p[5]] ^ t[1][p[6]] ^ t[0][p[7]];
    p += 8;
    size -= 8;
  }
  while (size-- > 0) {
    c = t[0][(c ^ *p++) & 0xff] ^ (c >> 8);
  }
  return ~c;
}

void AppendRecord(uint8_t flags, uint64_t first_seq, const std::vector<std::string>& events,
                  const std::vector<SourceMark>& marks, const std::vector<RunKey>& forgets,
                  std::string* out) {
  const size_t start = out->size();
  out->append(kHeaderBytes, '\0');
  out->push_back(1);  // format
  out->push_back(static_cast<char>(flags));
  PutVarint(out, first_seq);
  PutVarint(out, events.size());
  for (const std::string& event : events) {
    PutVarint(out, event.size());
    out->append(event);
  }
  PutVarint(out, marks.size());
  for (const SourceMark& mark : marks) {
    PutFixed64(out, static_cast<uint64_t>(mark.run_id));
    PutFixed32(out, static_cast<uint32_t>(mark.attempt));
    PutFixed32(out, static_cast<uint32_t>(mark.stream));
    PutFixed64(out, mark.offset);
  }
  PutVarint(out, forgets.size());
  for (const RunKey& key : forgets) {
    PutFixed64(out, static_cast<uint64_t>(key.run_id));
    PutFixed32(out, static_cast<uint32_t>(key.attempt));
  }
  const auto length = static_cast<uint32_t>(out->size() - start - kHeaderBytes);
  char* header = out->data() + start;
  for (int i = 0; i < 4; ++i) {
    header[i] = static_cast<char>(length >> (8 * i));
  }
  uint32_t crc = Crc32c(header, 4);
  crc = Crc32c(header + kHeaderBytes, length, crc);
  for (int i = 0; i < 4; ++i) {
    header[4 + i] = static_cast<char>(crc >> (8 * i));
  }
}

bool ReadFrame(std::string_view data, size_t offset, std::string_view* payload) {
  if (offset > data.size() || data.size() - offset < kHeaderBytes) {
    return false;
  }
  const char* header = data.data() + offset;
  const uint32_t length = LoadFixed32(header);
  if (length == 0 || length > kMaxPayloadBytes || length > data.size() - offset - kHeaderBytes) {
    return false;
  }
  uint32_t crc = Crc32c(header, 4);
  crc = Crc32c(header + kHeaderBytes, length, crc);
  if (crc != LoadFixed32(header + 4)) {
    return false;
  }
  *payload = std::string_view(header + kHeaderBytes, length);
  return true;
}

bool DecodeGroup(std::string_view payload, Group* group) {
  Reader in(payload);
  uint8_t format = 0;
  uint64_t n = 0;
  if (!in.Byte(&format) || format != 1 || !in.Byte(&group->flags) ||
      !in.Varint(&group->first_seq) || !in.Count(1, &n)) {
    return false;
  }
  group->events.clear();
  group->events.reserve(n);
  for (uint64_t i = 0; i < n; ++i) {
    uint64_t size = 0;
    std::string_view event;
    if (!in.Varint(&size) || !in.Bytes(size, &event)) {
      return false;
    }
    group->events.push_back(event);
  }
  constexpr size_t kMarkBytes = 24;
  if (!in.Count(kMarkBytes, &n)) {
    return false;
  }
  group->marks.clear();
  for (uint64_t i = 0; i < n; ++i) {
    std::string_view b;
    in.Bytes(kMarkBytes, &b);
    group->marks.push_back(SourceMark{static_cast<int64_t>(LoadFixed64(b.data())),
                                      static_cast<int32_t>(LoadFixed32(b.data() + 8)),
                                      static_cast<int32_t>(LoadFixed32(b.data() + 12)),
                                      LoadFixed64(b.data() + 16)});
  }
  constexpr size_t kForgetBytes = 12;
  if (!in.Count(kForgetBytes, &n)) {
    return false;
  }
  group->forgets.clear();
  for (uint64_t i = 0; i < n; ++i) {
    std::string_view b;
    in.Bytes(kForgetBytes, &b);
    group->forgets.push_back(RunKey{static_cast<int64_t>(LoadFixed64(b.data())),
                                    static_cast<int32_t>(LoadFixed32(b.data() + 8))});
  }
  return in.done();
}

}  // namespace tae::agent::journal_internal
