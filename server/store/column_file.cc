#include "server/store/column_file.h"

#include <algorithm>
#include <cstring>
#include <limits>

#include "absl/strings/str_cat.h"

namespace tae::store {
namespace {

constexpr char kMagic[] = "TAECPK1\n";
constexpr char kEndMagic[] = "TAECPKE\n";

void PutU64(uint64_t v, std::string* out) {
  char bytes[8];
  for (int i = 0; i < 8; ++i) {
    bytes[i] = static_cast<char>((v >> (8 * i)) & 0xff);
  }
  out->append(bytes, 8);
}

uint64_t GetU64(std::string_view in, size_t pos) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) {
    v = (v << 8) | static_cast<unsigned char>(in[pos + static_cast<size_t>(i)]);
  }
  return v;
}

absl::Status Damaged(const std::string& why) {
  return absl::DataLossError(absl::StrCat("column file: ", why));
}

}  // namespace

std::string ColumnHeader(const ColumnId& id) {
  std::string out(kMagic, 8);
  PutU64(static_cast<uint64_t>(id.experiment_id), &out);
  PutU64(static_cast<uint64_t>(id.key_id), &out);
  PutU64(id.generation, &out);
  return out;
}

void AppendColumnEntryHead(int64_t run_id, size_t pack_bytes, std::string* out) {
  PutU64(static_cast<uint64_t>(run_id), out);
  PutU64(pack_bytes, out);
}

std::string ColumnTrailer(int64_t runs) {
  std::string out;
  PutU64(static_cast<uint64_t>(runs), &out);
  out.append(kEndMagic, 8);
  return out;
}

absl::Status ParseColumn(std::string_view file, const ColumnId& id, int64_t runs,
                         std::vector<std::pair<int64_t, std::string_view>>* entries) {
  entries->clear();
  if (file.size() < kColumnHeaderBytes + kColumnTrailerBytes) {
    return Damaged(absl::StrCat("only ", file.size(), " bytes"));
  }
  if (std::memcmp(file.data(), kMagic, 8) != 0 ||
      std::memcmp(file.data() + file.size() - 8, kEndMagic, 8) != 0) {
    return Damaged("not a version-1 column file (its first or last 8 bytes)");
  }
  if (GetU64(file, 8) != static_cast<uint64_t>(id.experiment_id) ||
      GetU64(file, 16) != static_cast<uint64_t>(id.key_id) || GetU64(file, 24) != id.generation) {
    return Damaged("another column's file (experiment, key or generation)");
  }
  const uint64_t count = GetU64(file, file.size() - kColumnTrailerBytes);
  if (runs < 0 || count != static_cast<uint64_t>(runs)) {
    return Damaged(absl::StrCat("it holds ", count, " runs where ", runs, " were written"));
  }
  const size_t end = file.size() - kColumnTrailerBytes;
  size_t pos = kColumnHeaderBytes;
  int64_t last = std::numeric_limits<int64_t>::min();
  entries->reserve(static_cast<size_t>(std::min<uint64_t>(count, end / 16)));
  while (pos < end) {
    if (end - pos < 16) {
      entries->clear();
      return Damaged(absl::StrCat("an entry cut short at byte ", pos));
    }
    const uint64_t run = GetU64(file, pos);
    const uint64_t size = GetU64(file, pos + 8);
    pos += 16;
    if (run > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) ||
        static_cast<int64_t>(run) <= last) {
      entries->clear();
      return Damaged(absl::StrCat("run ids not ascending at byte ", pos - 16));
    }
    if (size > end - pos) {
      entries->clear();
      return Damaged(absl::StrCat("a pack of ", size, " bytes past the file's end at byte ", pos));
    }
    last = static_cast<int64_t>(run);
    entries->emplace_back(last, file.substr(pos, size));
    pos += size;
  }
  if (entries->size() != count) {
    const size_t found = entries->size();
    entries->clear();
    return Damaged(absl::StrCat("it holds ", found, " entries where its trailer says ", count));
  }
  return absl::OkStatus();
}

}  // namespace tae::store
