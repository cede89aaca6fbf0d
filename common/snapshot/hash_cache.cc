// HashCache: the stat-keyed hash cache and its file format.
//
// File format, version 2 (integers little-endian):
//   header   "TAEHASHC" (8 bytes), u32 version = 2, u32 reserved = 0, i64 reference time (ns since
//            the epoch), 32-byte snapshot id of the saved walk (raw SHA-256; all zero if none),
//            u64 entry count
//   entry    u64 dev, u64 ino, u64 size, i64 mtime_ns, i64 ctime_ns, u32 st_mode, u32 path length,
//            32-byte SHA-256 digest (raw), path bytes
//   trailer  32-byte SHA-256 of everything before it
// Anything else (short, long, bad magic, version or checksum, duplicate path) loads as empty.

#include <fcntl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "common/clock/clock.h"
#include "common/fs/fs.h"
#include "common/snapshot/snapshot.h"

namespace tae::snapshot {
namespace {

constexpr char kMagic[8] = {'T', 'A', 'E', 'H', 'A', 'S', 'H', 'C'};
constexpr uint32_t kVersion = 2;
constexpr size_t kHeaderBytes = 8 + 4 + 4 + 8 + 32 + 8;
constexpr size_t kDigestBytes = 32;
constexpr size_t kEntryFixedBytes = 5 * 8 + 4 + 4 + kDigestBytes;
constexpr uint64_t kRacyMarginNs = 1'000'000'000;
constexpr char kZeroDigest[kDigestBytes] = {};

// The racy rule (see snapshot.h): an entry is racy unless its mtime is earlier than R - 1 s.
bool IsRacy(int64_t mtime_ns, int64_t reference_ns) {
  if (mtime_ns >= reference_ns) {
    return true;
  }
  // Exact in unsigned arithmetic once mtime < R, whatever the values.
  return static_cast<uint64_t>(reference_ns) - static_cast<uint64_t>(mtime_ns) <= kRacyMarginNs;
}

int64_t NowNs() { return clock::WallNanos(); }

void PutU32(std::string& out, uint32_t value) {
  char bytes[4];
  for (int i = 0; i < 4; ++i) {
    bytes[i] = static_cast<char>((value >> (8 * i)) & 0xff);
  }
  out.append(bytes, sizeof(bytes));
}

void PutU64(std::string& out, uint64_t value) {
  char bytes[8];
  for (int i = 0; i < 8; ++i) {
    bytes[i] = static_cast<char>((value >> (8 * i)) & 0xff);
  }
  out.append(bytes, sizeof(bytes));
}

// Reads little-endian integers from a byte string, failing (sticky) past its end.
class Reader {
 public:
  explicit Reader(std::string_view bytes) : bytes_(bytes) {}

  uint64_t U64() { return Uint(8); }
  uint32_t U32() { return static_cast<uint32_t>(Uint(4)); }
  int64_t I64() { return static_cast<int64_t>(Uint(8)); }
  std::string_view Bytes(size_t n) {
    if (!ok_ || bytes_.size() - pos_ < n) {
      ok_ = false;
      return {};
    }
    std::string_view out = bytes_.substr(pos_, n);
    pos_ += n;
    return out;
  }
  bool ok() const { return ok_; }
  size_t remaining() const { return bytes_.size() - pos_; }

 private:
  uint64_t Uint(size_t n) {
    std::string_view raw = Bytes(n);
    uint64_t value = 0;
    for (size_t i = 0; i < raw.size(); ++i) {
      value |= uint64_t{static_cast<unsigned char>(raw[i])} << (8 * i);
    }
    return value;
  }

  std::string_view bytes_;
  size_t pos_ = 0;
  bool ok_ = true;
};

int HexValue(char c) {
  if (c >= '0' && c <= '9') {
    return c - '0';
  }
  if (c >= 'a' && c <= 'f') {
    return c - 'a' + 10;
  }
  return -1;
}

// 64 lowercase hex digits to 32 bytes; false if `hex` is anything else.
bool HexToDigest(std::string_view hex, std::array<char, kDigestBytes>& digest) {
  if (hex.size() != 2 * kDigestBytes) {
    return false;
  }
  for (size_t i = 0; i < kDigestBytes; ++i) {
    int high = HexValue(hex[2 * i]);
    int low = HexValue(hex[2 * i + 1]);
    if (high < 0 || low < 0) {
      return false;
    }
    digest[i] = static_cast<char>(high << 4 | low);
  }
  return true;
}

std::string DigestToHex(std::string_view digest) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string hex;
  hex.reserve(2 * digest.size());
  for (char c : digest) {
    const auto byte = static_cast<unsigned char>(c);
    hex.push_back(kHex[byte >> 4]);
    hex.push_back(kHex[byte & 15]);
  }
  return hex;
}

absl::Status ErrnoError(absl::string_view what, const std::string& path) {
  return absl::InternalError(
      absl::StrCat(what, " \"", absl::CHexEscape(path), "\": ", std::strerror(errno)));
}

// Creates `dir` and its missing parents with mode 0700.
absl::Status MakeDirs(const std::string& dir) {
  if (dir.empty()) {
    return absl::OkStatus();
  }
  for (size_t slash = dir.find('/', 1);; slash = dir.find('/', slash + 1)) {
    const std::string prefix = dir.substr(0, slash);
    if (mkdir(prefix.c_str(), 0700) != 0 && errno != EEXIST) {
      return ErrnoError("create directory", prefix);
    }
    if (slash == std::string::npos) {
      return absl::OkStatus();
    }
  }
}

}  // namespace

StatIdentity StatIdentity::Of(const struct stat& st) {
  StatIdentity id;
  id.dev = static_cast<uint64_t>(st.st_dev);
  id.ino = static_cast<uint64_t>(st.st_ino);
  id.size = static_cast<uint64_t>(st.st_size);
  id.mtime_ns = static_cast<int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec;
  id.ctime_ns = static_cast<int64_t>(st.st_ctim.tv_sec) * 1'000'000'000 + st.st_ctim.tv_nsec;
  id.mode = static_cast<uint32_t>(st.st_mode);
  return id;
}

HashCache::HashCache() : reference_ns_(NowNs()) {}

HashCache HashCache::Load(const std::string& path) {
  HashCache cache;
  absl::StatusOr<std::string> read = fs::ReadFile(path);
  if (!read.ok() || read->size() < kHeaderBytes + kDigestBytes) {
    return cache;
  }
  const std::string& bytes = *read;
  const std::string_view body(bytes.data(), bytes.size() - kDigestBytes);
  std::array<char, kDigestBytes> expected;
  if (!HexToDigest(Sha256Hex(body), expected) ||
      std::string_view(bytes).substr(body.size()) !=
          std::string_view(expected.data(), expected.size())) {
    return cache;
  }
  Reader reader(body);
  if (reader.Bytes(sizeof(kMagic)) != std::string_view(kMagic, sizeof(kMagic)) ||
      reader.U32() != kVersion || reader.U32() != 0) {
    return cache;
  }
  const int64_t loaded_reference_ns = reader.I64();
  const std::string_view id_digest = reader.Bytes(kDigestBytes);
  const uint64_t count = reader.U64();
  if (count > reader.remaining() / kEntryFixedBytes) {
    return cache;
  }
  absl::flat_hash_map<std::string, Item> items;
  items.reserve(count);
  for (uint64_t i = 0; i < count; ++i) {
    Item item;
    item.loaded = true;
    item.stat.dev = reader.U64();
    item.stat.ino = reader.U64();
    item.stat.size = reader.U64();
    item.stat.mtime_ns = reader.I64();
    item.stat.ctime_ns = reader.I64();
    item.stat.mode = reader.U32();
    const uint32_t path_bytes = reader.U32();
    std::string_view digest = reader.Bytes(kDigestBytes);
    std::copy(digest.begin(), digest.end(), item.digest.begin());
    std::string_view rel = reader.Bytes(path_bytes);
    if (!reader.ok() || !items.emplace(rel, std::move(item)).second) {
      return cache;
    }
  }
  if (!reader.ok() || reader.remaining() != 0) {
    return cache;
  }
  cache.loaded_count_ = items.size();
  cache.items_ = std::move(items);
  cache.loaded_reference_ns_ = loaded_reference_ns;
  if (id_digest != std::string_view(kZeroDigest, kDigestBytes)) {
    cache.loaded_snapshot_id_ = DigestToHex(id_digest);
  }
  return cache;
}

std::optional<std::string> HashCache::Lookup(const std::string& rel, const struct stat& st) const {
  auto it = items_.find(rel);
  if (it != items_.end()) {
    const Item& item = it->second;
    const int64_t reference_ns = item.recorded ? reference_ns_ : loaded_reference_ns_;
    const StatIdentity now = StatIdentity::Of(st);
    if (now == item.stat && !IsRacy(item.stat.mtime_ns, reference_ns)) {
      ++hits_;
      return DigestToHex(std::string_view(item.digest.data(), item.digest.size()));
    }
  }
  ++misses_;
  return std::nullopt;
}

std::optional<std::string> HashCache::Take(const std::string& rel, const struct stat& st) {
  TakeStats stats;
  std::optional<std::string> sha256 = TakeShared(rel, st, &stats);
  AddStats(stats);
  return sha256;
}

std::optional<std::string> HashCache::TakeShared(const std::string& rel, const struct stat& st,
                                                 TakeStats* stats) {
  auto it = items_.find(rel);
  if (it != items_.end()) {
    Item& item = it->second;
    const int64_t reference_ns = item.recorded ? reference_ns_ : loaded_reference_ns_;
    if (StatIdentity::Of(st) == item.stat && !IsRacy(item.stat.mtime_ns, reference_ns)) {
      ++stats->hits;
      if (item.loaded && !item.recorded) {
        ++stats->unchanged;
      }
      item.recorded = true;  // equal stat data: nothing else to update
      return DigestToHex(std::string_view(item.digest.data(), item.digest.size()));
    }
  }
  ++stats->misses;
  return std::nullopt;
}

void HashCache::AddStats(const TakeStats& stats) {
  hits_ += stats.hits;
  misses_ += stats.misses;
  unchanged_ += stats.unchanged;
}

void HashCache::Record(const std::string& rel, const struct stat& st, const std::string& sha256) {
  std::array<char, kDigestBytes> digest;
  if (!HexToDigest(sha256, digest)) {
    return;
  }
  Item& item = items_[rel];
  const StatIdentity now = StatIdentity::Of(st);
  const bool same_line = item.loaded && item.digest == digest && item.stat.size == now.size &&
                         (item.stat.mode & S_IXUSR) == (now.mode & S_IXUSR);
  if (same_line && !item.recorded) {
    ++unchanged_;
  }
  item.stat = now;
  item.loaded = same_line;
  item.digest = digest;
  item.recorded = true;
}

absl::Status HashCache::Save(const std::string& path) const {
  std::string bytes;
  bytes.reserve(kHeaderBytes + items_.size() * (kEntryFixedBytes + 64) + kDigestBytes);
  bytes.append(kMagic, sizeof(kMagic));
  PutU32(bytes, kVersion);
  PutU32(bytes, 0);
  PutU64(bytes, static_cast<uint64_t>(reference_ns_));
  std::array<char, kDigestBytes> id_digest{};
  if (!HexToDigest(snapshot_id_, id_digest)) {
    id_digest.fill(0);
  }
  bytes.append(id_digest.data(), id_digest.size());
  const size_t count_at = bytes.size();
  PutU64(bytes, 0);  // patched below
  uint64_t count = 0;
  for (const auto& [rel, item] : items_) {
    if (!item.recorded) {
      continue;
    }
    PutU64(bytes, item.stat.dev);
    PutU64(bytes, item.stat.ino);
    PutU64(bytes, item.stat.size);
    PutU64(bytes, static_cast<uint64_t>(item.stat.mtime_ns));
    PutU64(bytes, static_cast<uint64_t>(item.stat.ctime_ns));
    PutU32(bytes, item.stat.mode);
    PutU32(bytes, static_cast<uint32_t>(rel.size()));
    bytes.append(item.digest.data(), item.digest.size());
    bytes += rel;
    ++count;
  }
  std::string count_bytes;
  PutU64(count_bytes, count);
  bytes.replace(count_at, count_bytes.size(), count_bytes);
  std::array<char, kDigestBytes> checksum;
  HexToDigest(Sha256Hex(bytes), checksum);
  bytes.append(checksum.data(), checksum.size());

  const size_t slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : path.substr(0, slash);
  if (slash != std::string::npos) {
    if (absl::Status status = MakeDirs(dir); !status.ok()) {
      return status;
    }
  }
  // No fsync: the cache is only an optimisation, and a file a crash leaves empty or torn fails its
  // checksum and loads as an empty cache.
  return fs::WriteFileAtomically(path, bytes, {0600, fs::Durability::kNone});
}

std::vector<std::string> HashCache::KnownHashes() const {
  static constexpr char kHex[] = "0123456789abcdef";
  std::vector<std::string> out;
  out.reserve(items_.size());
  for (const auto& [rel, item] : items_) {
    if (!item.loaded) {
      continue;
    }
    std::string hex(64, '0');
    for (size_t i = 0; i < 32; ++i) {
      const auto byte = static_cast<unsigned char>(item.digest[i]);
      hex[2 * i] = kHex[byte >> 4];
      hex[2 * i + 1] = kHex[byte & 0xf];
    }
    out.push_back(std::move(hex));
  }
  return out;
}

}  // namespace tae::snapshot
