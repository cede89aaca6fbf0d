// HashCache (common/snapshot): a stat-keyed cache that lets WalkTree skip re-reading unchanged
// files, with git's racy rule, and that is only ever an optimisation (bad cache files load empty).
#include <fcntl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <string>
#include <vector>

#include "common/snapshot/snapshot.h"
#include "tests/unit/temp_dir.h"

namespace tae::snapshot {
namespace {

namespace fs = std::filesystem;

constexpr int64_t kSecondNs = 1'000'000'000;

using tae::testing::TempDir;

int64_t NowNs(clockid_t clock = CLOCK_REALTIME) {
  struct timespec now;
  clock_gettime(clock, &now);
  return static_cast<int64_t>(now.tv_sec) * kSecondNs + now.tv_nsec;
}

// Sets the mtime of `path` (following symlinks), leaving atime alone; ctime becomes "now".
void SetMtimeNs(const std::string& path, int64_t mtime_ns) {
  struct timespec times[2];
  times[0].tv_sec = 0;
  times[0].tv_nsec = UTIME_OMIT;
  times[1].tv_sec = mtime_ns / kSecondNs;
  times[1].tv_nsec = mtime_ns % kSecondNs;
  REQUIRE(utimensat(AT_FDCWD, path.c_str(), times, 0) == 0);
}

// Moves the mtime of each file an hour into the past, so that a cache trusts them.
void Age(const TempDir& dir, const std::vector<std::string>& rels) {
  const int64_t past = NowNs() - 3600 * kSecondNs;
  for (const std::string& rel : rels) {
    SetMtimeNs(dir.Full(rel), past);
  }
}

struct stat StatOf(const std::string& path) {
  struct stat st;
  REQUIRE(stat(path.c_str(), &st) == 0);
  return st;
}

std::string ReadBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

void WriteBytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << bytes;
  REQUIRE(out.good());
}

Walk MustWalk(const std::string& root, HashCache* cache) {
  WalkOptions options;
  options.cache = cache;
  absl::StatusOr<Walk> walk = WalkTree(root, options);
  REQUIRE(walk.ok());
  return *std::move(walk);
}

// Walks `root` with the cache at `cache_path` and saves it, as a mount would.
Walk WalkAndSave(const std::string& root, const std::string& cache_path) {
  HashCache cache = HashCache::Load(cache_path);
  Walk walk = MustWalk(root, &cache);
  REQUIRE(cache.Save(cache_path).ok());
  return walk;
}

}  // namespace

TEST_CASE("a second walk with a saved cache reads nothing and gives the same manifest",
          "[snapshot][hash_cache]") {
  TempDir tree;
  TempDir state;
  tree.Write("a.txt", "alpha");
  tree.Write("src/main.cc", "int main() { return 0; }\n");
  tree.Write("src/run.sh", "#!/bin/sh\n");
  REQUIRE(chmod(tree.Full("src/run.sh").c_str(), 0755) == 0);
  tree.Write("real/data.txt", "payload");
  REQUIRE(symlink("real/data.txt", tree.Full("link.txt").c_str()) == 0);
  Age(tree, {"a.txt", "src/main.cc", "src/run.sh", "real/data.txt"});
  const std::string cache_path = state.path() + "/nested/dir/snapshot.cache";

  absl::StatusOr<Walk> plain = WalkTree(tree.path());
  REQUIRE(plain.ok());
  REQUIRE(plain->files.size() == 5);
  CHECK(plain->hashed_bytes == plain->total_bytes);

  HashCache first = HashCache::Load(cache_path);  // missing: empty
  CHECK(first.size() == 0);
  Walk cold = MustWalk(tree.path(), &first);
  CHECK(cold.hashed_bytes == cold.total_bytes);
  CHECK(first.hits() == 0);
  CHECK(first.misses() == 5);
  REQUIRE(first.Save(cache_path).ok());
  CHECK((StatOf(state.path() + "/nested").st_mode & 0777) == 0700);
  CHECK((StatOf(state.path() + "/nested/dir").st_mode & 0777) == 0700);
  CHECK(std::distance(fs::directory_iterator(state.path() + "/nested/dir"),
                      fs::directory_iterator()) == 1);  // no temp file left behind

  HashCache second = HashCache::Load(cache_path);
  CHECK(second.size() == 5);
  Walk warm = MustWalk(tree.path(), &second);
  CHECK(warm.hashed_bytes == 0);
  CHECK(warm.total_bytes == plain->total_bytes);
  CHECK(second.hits() == 5);
  CHECK(second.misses() == 0);
  CHECK(ManifestText(warm.files) == ManifestText(plain->files));
  CHECK(SnapshotId(warm.files) == SnapshotId(plain->files));
  CHECK(warm.excluded == plain->excluded);

  // Hits are recorded again, so a cache saved after a warm walk is as good as the first.
  REQUIRE(second.Save(cache_path).ok());
  HashCache third = HashCache::Load(cache_path);
  CHECK(MustWalk(tree.path(), &third).hashed_bytes == 0);
  CHECK(third.hits() == 5);
}

TEST_CASE("a same-size rewrite with the mtime restored is caught by the ctime",
          "[snapshot][hash_cache]") {
  TempDir tree;
  TempDir state;
  const std::string cache_path = state.path() + "/cache";
  tree.Write("f", "aaaa");
  Age(tree, {"f"});
  const struct stat before = StatOf(tree.Full("f"));
  WalkAndSave(tree.path(), cache_path);

  // ctime cannot be set; it can only equal the recorded one if the change below lands on the same
  // kernel timestamp tick as the utimensat above (only possible on kernels without multigrain
  // timestamps, where ticks are the coarse clock). Wait (bounded) for the coarse clock to pass the
  // recorded ctime so the test says the same on every kernel.
  const int64_t recorded_ctime = StatIdentity::Of(before).ctime_ns;
  const int64_t deadline = NowNs(CLOCK_MONOTONIC) + kSecondNs;
  while (NowNs(CLOCK_REALTIME_COARSE) <= recorded_ctime && NowNs(CLOCK_MONOTONIC) < deadline) {
  }
  REQUIRE(NowNs(CLOCK_REALTIME_COARSE) > recorded_ctime);

  tree.Write("f", "bbbb");  // in place: same inode, same size
  SetMtimeNs(tree.Full("f"), StatIdentity::Of(before).mtime_ns);
  const struct stat after = StatOf(tree.Full("f"));
  const StatIdentity old_id = StatIdentity::Of(before);
  const StatIdentity new_id = StatIdentity::Of(after);
  REQUIRE(new_id.ino == old_id.ino);
  REQUIRE(new_id.size == old_id.size);
  REQUIRE(new_id.mtime_ns == old_id.mtime_ns);
  CHECK(new_id.ctime_ns != old_id.ctime_ns);  // what actually happens

  HashCache cache = HashCache::Load(cache_path);
  Walk walk = MustWalk(tree.path(), &cache);
  REQUIRE(walk.files.size() == 1);
  CHECK(walk.files[0].sha256 == Sha256Hex("bbbb"));
  CHECK(walk.hashed_bytes == 4);
  CHECK(cache.hits() == 0);

  // The ctime is the only thing that told them apart: with the old ctime, the cache would trust
  // the stale hash (the documented limit, shared with git).
  HashCache reloaded = HashCache::Load(cache_path);
  struct stat forged = after;
  forged.st_ctim = before.st_ctim;
  CHECK(reloaded.Lookup("f", forged) == Sha256Hex("aaaa"));
}

TEST_CASE("an entry whose mtime is within a second of the cache's reference time is racy",
          "[snapshot][hash_cache]") {
  TempDir tree;
  TempDir state;
  const std::string cache_path = state.path() + "/cache";
  tree.Write("old", "old");
  tree.Write("new", "new");
  const int64_t before_cache = NowNs();
  HashCache cache;  // its reference time R is in [before_cache, after_cache]
  const int64_t after_cache = NowNs();
  SetMtimeNs(tree.Full("old"), before_cache - 2 * kSecondNs);  // R - mtime >= 2 s: trusted
  SetMtimeNs(tree.Full("new"), after_cache - kSecondNs / 2);   // R - mtime <= 0.5 s: racy
  const struct stat old_st = StatOf(tree.Full("old"));
  const struct stat new_st = StatOf(tree.Full("new"));

  // Record a hash that no longer matches, as if each file had been rewritten right after it was
  // hashed within the same timestamp tick: only the racy rule can catch that.
  cache.Record("old", old_st, Sha256Hex("stale"));
  cache.Record("new", new_st, Sha256Hex("stale"));
  CHECK(cache.Lookup("old", old_st) == Sha256Hex("stale"));
  CHECK(cache.Lookup("new", new_st) == std::nullopt);
  CHECK(cache.hits() == 1);
  CHECK(cache.misses() == 1);

  REQUIRE(cache.Save(cache_path).ok());
  HashCache loaded = HashCache::Load(cache_path);
  CHECK(loaded.size() == 2);
  CHECK(loaded.Lookup("old", old_st) == Sha256Hex("stale"));
  CHECK(loaded.Lookup("new", new_st) == std::nullopt);

  // Through the walker: the racy file is re-read (and gets its true hash), the other is not.
  // "old" is trusted, so its (deliberately wrong) recorded hash is used as is.
  Walk walk = MustWalk(tree.path(), &loaded);
  REQUIRE(walk.files.size() == 2);
  CHECK(walk.files[0].path == "new");
  CHECK(walk.files[0].sha256 == Sha256Hex("new"));
  CHECK(walk.files[1].sha256 == Sha256Hex("stale"));
  CHECK(walk.hashed_bytes == 3);
}

TEST_CASE("a file with an mtime after the cache's reference time is hashed by every walk",
          "[snapshot][hash_cache]") {
  TempDir tree;
  TempDir state;
  const std::string cache_path = state.path() + "/cache";
  tree.Write("fresh", "fresh content");
  SetMtimeNs(tree.Full("fresh"), NowNs() + 3600 * kSecondNs);  // e.g. a skewed clock
  WalkAndSave(tree.path(), cache_path);

  HashCache second = HashCache::Load(cache_path);
  CHECK(second.size() == 1);  // recorded, but racy
  Walk walk = MustWalk(tree.path(), &second);
  CHECK(walk.hashed_bytes == 13);
  CHECK(second.misses() == 1);
  CHECK(walk.files[0].sha256 == Sha256Hex("fresh content"));

  Age(tree, {"fresh"});  // a new ctime: one more miss, then trusted
  WalkAndSave(tree.path(), cache_path);
  HashCache fourth = HashCache::Load(cache_path);
  CHECK(MustWalk(tree.path(), &fourth).hashed_bytes == 0);
  CHECK(fourth.hits() == 1);
}

TEST_CASE("a corrupt or truncated cache file loads as an empty cache", "[snapshot][hash_cache]") {
  TempDir tree;
  TempDir state;
  const std::string cache_path = state.path() + "/cache";
  tree.Write("one", "first file");
  tree.Write("dir/two", "second file");
  Age(tree, {"one", "dir/two"});
  const Walk plain = WalkAndSave(tree.path(), cache_path);
  const std::string good = ReadBytes(cache_path);
  REQUIRE(good.size() > 100);
  REQUIRE(HashCache::Load(cache_path).size() == 2);  // the intact file loads

  std::string flipped = good;
  flipped[good.size() / 2] ^= 0x01;
  // Another version (the one before, the one after) with a valid checksum (layout in
  // hash_cache.cc: version at byte 8, a raw SHA-256 of the rest as the last 32 bytes).
  auto with_version = [&](char version) {
    std::string other = good.substr(0, good.size() - 32);
    other[8] = version;
    const std::string hex = Sha256Hex(other);
    for (size_t i = 0; i < 64; i += 2) {
      other.push_back(static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
    }
    return other;
  };
  const std::vector<std::string> bad = {
      "",
      "not a cache file\n",
      good.substr(0, good.size() - 1),
      good.substr(0, good.size() / 2),
      good.substr(0, 32),
      good + "x",
      flipped,
      with_version(1),
      with_version(3),
  };
  for (size_t i = 0; i < bad.size(); ++i) {
    INFO("bad cache file #" << i);
    WriteBytes(cache_path, bad[i]);
    HashCache cache = HashCache::Load(cache_path);
    CHECK(cache.size() == 0);
    Walk walk = MustWalk(tree.path(), &cache);
    CHECK(cache.hits() == 0);
    CHECK(walk.hashed_bytes == walk.total_bytes);
    CHECK(ManifestText(walk.files) == ManifestText(plain.files));
  }

  REQUIRE(fs::remove(cache_path));
  REQUIRE(fs::create_directory(cache_path));  // not even a file
  CHECK(HashCache::Load(cache_path).size() == 0);
}

TEST_CASE("files gone since the last walk are dropped from the saved cache",
          "[snapshot][hash_cache]") {
  TempDir tree;
  TempDir state;
  const std::string cache_path = state.path() + "/cache";
  tree.Write("keep", "kept");
  tree.Write("gone", "deleted later");
  Age(tree, {"keep", "gone"});
  const struct stat keep_st = StatOf(tree.Full("keep"));
  const struct stat gone_st = StatOf(tree.Full("gone"));
  WalkAndSave(tree.path(), cache_path);

  REQUIRE(fs::remove(tree.Full("gone")));
  HashCache loaded = HashCache::Load(cache_path);
  CHECK(loaded.Lookup("gone", gone_st) == Sha256Hex("deleted later"));  // still in the old file
  Walk walk = MustWalk(tree.path(), &loaded);
  CHECK(walk.files.size() == 1);
  REQUIRE(loaded.Save(cache_path).ok());

  HashCache saved = HashCache::Load(cache_path);
  CHECK(saved.size() == 1);
  CHECK(saved.Lookup("gone", gone_st) == std::nullopt);
  CHECK(saved.Lookup("keep", keep_st) == Sha256Hex("kept"));
}

TEST_CASE("hits and misses count what the cache could and could not answer",
          "[snapshot][hash_cache]") {
  TempDir tree;
  TempDir state;
  const std::string cache_path = state.path() + "/cache";
  tree.Write("a", "1");
  tree.Write("b", "22");
  tree.Write("c", "333");
  Age(tree, {"a", "b", "c"});
  WalkAndSave(tree.path(), cache_path);

  tree.Write("b", "a longer b");  // changed
  tree.Write("d", "4444");        // new
  Age(tree, {"b", "d"});
  HashCache cache = HashCache::Load(cache_path);
  Walk walk = MustWalk(tree.path(), &cache);
  CHECK(cache.hits() == 2);
  CHECK(cache.misses() == 2);
  CHECK(walk.hashed_bytes == 10 + 4);
  CHECK(walk.total_bytes == 1 + 10 + 3 + 4);
  REQUIRE(walk.files.size() == 4);
  CHECK(walk.files[1].sha256 == Sha256Hex("a longer b"));

  // A hash that is not 64 lowercase hex digits is not recorded.
  HashCache fresh;
  fresh.Record("a", StatOf(tree.Full("a")), "not a hash");
  CHECK(fresh.size() == 0);
}

TEST_CASE("a symlink is cached under its own path with the stat data of its target",
          "[snapshot][hash_cache]") {
  TempDir tree;
  TempDir state;
  const std::string cache_path = state.path() + "/cache";
  tree.Write("real/data.txt", "version one");
  REQUIRE(symlink("real/data.txt", tree.Full("link.txt").c_str()) == 0);
  Age(tree, {"real/data.txt"});
  WalkAndSave(tree.path(), cache_path);

  HashCache loaded = HashCache::Load(cache_path);
  CHECK(loaded.Lookup("link.txt", StatOf(tree.Full("real/data.txt"))) == Sha256Hex("version one"));

  tree.Write("real/data.txt", "version two!");
  Age(tree, {"real/data.txt"});
  HashCache cache = HashCache::Load(cache_path);
  Walk walk = MustWalk(tree.path(), &cache);
  REQUIRE(walk.files.size() == 2);
  CHECK(walk.files[0].path == "link.txt");
  CHECK(walk.files[0].sha256 == Sha256Hex("version two!"));
  CHECK(walk.files[1].sha256 == Sha256Hex("version two!"));
  CHECK(cache.hits() == 0);
  CHECK(walk.hashed_bytes == 2 * 12);
}

TEST_CASE("the saved snapshot id comes back only with the walk it belongs to",
          "[snapshot][hash_cache]") {
  TempDir tree;
  TempDir state;
  const std::string cache_path = state.path() + "/cache";
  tree.Write("a", "alpha");
  tree.Write("dir/b", "beta");
  Age(tree, {"a", "dir/b"});
  {
    HashCache cache = HashCache::Load(cache_path);
    CHECK(cache.loaded_snapshot_id().empty());
    Walk walk = MustWalk(tree.path(), &cache);
    cache.SetSnapshotId(SnapshotId(walk.files));
    REQUIRE(cache.Save(cache_path).ok());
  }
  HashCache loaded = HashCache::Load(cache_path);
  const Walk again = MustWalk(tree.path(), &loaded);
  CHECK(loaded.loaded_snapshot_id() == SnapshotId(again.files));
  CHECK(loaded.WalkMatchesLoaded(again.files.size()));
  CHECK(loaded.misses() == 0);
  CHECK(loaded.hits() == 2);
  // A racy entry (mtime now) is re-hashed; same content, same manifest line: still a match.
  SetMtimeNs(tree.Full("a"), NowNs());
  HashCache racy = HashCache::Load(cache_path);
  const Walk rehashed = MustWalk(tree.path(), &racy);
  CHECK(racy.misses() == 1);
  CHECK(racy.WalkMatchesLoaded(rehashed.files.size()));
  // The exec bit is part of the manifest line.
  REQUIRE(chmod(tree.Full("a").c_str(), 0755) == 0);
  Age(tree, {"a"});
  HashCache exec = HashCache::Load(cache_path);
  const Walk with_exec = MustWalk(tree.path(), &exec);
  CHECK_FALSE(exec.WalkMatchesLoaded(with_exec.files.size()));
  REQUIRE(chmod(tree.Full("a").c_str(), 0644) == 0);
  // Every file a hit is what lets a mount reuse the id; a change makes a miss.
  tree.Write("dir/b", "beta, changed");
  Age(tree, {"dir/b"});
  HashCache after_change = HashCache::Load(cache_path);
  const Walk changed = MustWalk(tree.path(), &after_change);
  CHECK(after_change.misses() == 2);  // dir/b, and a (its ctime moved with the chmods)
  CHECK_FALSE(after_change.WalkMatchesLoaded(changed.files.size()));
  // A removed file: fewer than were loaded. An added one: more.
  tree.Write("dir/b", "beta");
  Age(tree, {"dir/b"});
  REQUIRE(fs::remove(tree.Full("a")));
  HashCache after_remove = HashCache::Load(cache_path);
  const Walk fewer = MustWalk(tree.path(), &after_remove);
  CHECK(fewer.files.size() == 1);
  CHECK_FALSE(after_remove.WalkMatchesLoaded(fewer.files.size()));
  tree.Write("a", "alpha");
  tree.Write("c", "gamma");
  Age(tree, {"a", "c"});
  HashCache after_add = HashCache::Load(cache_path);
  const Walk more = MustWalk(tree.path(), &after_add);
  CHECK(more.files.size() == 3);
  CHECK_FALSE(after_add.WalkMatchesLoaded(more.files.size()));
}

TEST_CASE("known hashes are the loaded contents that the walk did not replace",
          "[snapshot][hash_cache]") {
  TempDir tree;
  TempDir state;
  const std::string cache_path = state.path() + "/cache";
  tree.Write("same", "unchanged");
  tree.Write("edited", "first");
  Age(tree, {"same", "edited"});
  WalkAndSave(tree.path(), cache_path);

  tree.Write("edited", "second version");
  tree.Write("added", "new file");
  Age(tree, {"edited", "added"});
  HashCache cache = HashCache::Load(cache_path);
  std::vector<std::string> before = cache.KnownHashes();
  std::sort(before.begin(), before.end());
  std::vector<std::string> expected_before = {Sha256Hex("unchanged"), Sha256Hex("first")};
  std::sort(expected_before.begin(), expected_before.end());
  CHECK(before == expected_before);
  MustWalk(tree.path(), &cache);
  // After the walk: the new contents are not known to taed yet; the kept one still is.
  CHECK(cache.KnownHashes() == std::vector<std::string>{Sha256Hex("unchanged")});
  // Take keeps an entry for Save without Record.
  REQUIRE(cache.Save(cache_path).ok());
  HashCache saved = HashCache::Load(cache_path);
  CHECK(saved.size() == 3);
  CHECK(saved.Lookup("same", StatOf(tree.Full("same"))) == Sha256Hex("unchanged"));
}

}  // namespace tae::snapshot
