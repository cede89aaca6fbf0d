// SnapshotCache (agent/cache): snapshots arrive as verified manifests and blobs, are materialised
// into run directories as hard links (or copies across file systems) without ever writing outside
// the destination, are unmade again, and scrapping frees exactly the unreferenced blobs.
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "agent/cache/cache.h"
#include "common/snapshot/snapshot.h"
#include "tests/unit/temp_dir.h"

namespace tae::agent {
namespace {

namespace fs = std::filesystem;
using snapshot::Entry;
using snapshot::Sha256Hex;

using tae::testing::TempDir;

void WriteFile(const std::string& path, const std::string& content, mode_t mode = 0644) {
  fs::create_directories(fs::path(path).parent_path());
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out << content;
    REQUIRE(out.good());
  }
  REQUIRE(::chmod(path.c_str(), mode) == 0);
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  REQUIRE(in.good());
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

struct stat Lstat(const std::string& path) {
  struct stat st {};
  REQUIRE(::lstat(path.c_str(), &st) == 0);
  return st;
}

bool Exists(const std::string& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0;
}

// Every path below `dir`, relative, sorted; directories end with '/'. Does not follow symlinks.
std::vector<std::string> Tree(const std::string& dir) {
  std::vector<std::string> paths;
  for (const auto& entry : fs::recursive_directory_iterator(dir)) {
    std::string rel = entry.path().lexically_relative(dir).string();
    paths.push_back(entry.is_directory() && !entry.is_symlink() ? rel + "/" : rel);
  }
  std::sort(paths.begin(), paths.end());
  return paths;
}

Entry MakeEntry(const std::string& path, uint32_t mode, const std::string& content) {
  return Entry{path, mode, content.size(), Sha256Hex(content)};
}

// Uploads `content` in chunks of `chunk` bytes, last chunk first.
void Upload(SnapshotCache& cache, const std::string& content, size_t chunk = 1 << 20) {
  const std::string hash = Sha256Hex(content);
  std::vector<uint64_t> offsets;
  for (uint64_t offset = 0; offset < content.size(); offset += chunk) {
    offsets.push_back(offset);
  }
  if (offsets.empty()) {
    offsets.push_back(0);
  }
  std::reverse(offsets.begin(), offsets.end());
  for (size_t i = 0; i < offsets.size(); ++i) {
    auto result = cache.WriteChunk(hash, offsets[i], content.size(),
                                   std::string_view(content).substr(offsets[i], chunk));
    REQUIRE(result.ok());
    CHECK(result->complete == (i + 1 == offsets.size()));
  }
}

void Put(SnapshotCache& cache, const std::vector<Entry>& entries) {
  REQUIRE(cache.PutManifest(snapshot::SnapshotId(entries), snapshot::ManifestText(entries)).ok());
}

std::unique_ptr<SnapshotCache> OpenCache(const std::string& dir) {
  auto cache = SnapshotCache::Open(dir);
  REQUIRE(cache.ok());
  return std::move(*cache);
}

std::string Pattern(size_t size) {
  std::string content;
  for (size_t i = 0; i < size; ++i) {
    content.push_back(static_cast<char>((i * 7919) % 251));
  }
  return content;
}

TEST_CASE("a walked tree round-trips through the cache as hard links", "[agent_cache]") {
  TempDir tmp;
  const std::string src = tmp.path() + "/src";
  WriteFile(src + "/a.txt", "hello\n");
  WriteFile(src + "/sub/deep/b.bin", Pattern(200000));
  WriteFile(src + "/run.sh", "#!/bin/sh\necho hi\n", 0755);
  WriteFile(src + "/empty", "");
  WriteFile(src + "/sub/same.txt", "hello\n");
  auto walk = snapshot::WalkTree(src);
  REQUIRE(walk.ok());
  REQUIRE(walk->files.size() == 5);
  auto cache = OpenCache(tmp.path() + "/cache");

  std::vector<std::string> missing = cache->MissingBlobs(walk->files);
  CHECK(missing.size() == 4);  // a.txt and sub/same.txt share a blob
  for (const Entry& entry : walk->files) {
    const std::string content = ReadAll(src + "/" + entry.path);
    if (cache->MissingBlobs({entry}).empty()) {
      continue;
    }
    Upload(*cache, content, entry.size > 65536 ? 65536 : content.size() + 1);
  }
  CHECK(cache->MissingBlobs(walk->files).empty());

  const std::string id = snapshot::SnapshotId(walk->files);
  CHECK_FALSE(cache->HasManifest(id));
  Put(*cache, walk->files);
  CHECK(cache->HasManifest(id));
  CHECK(cache->ManifestIds() == std::vector<std::string>{id});
  auto entries = cache->GetManifest(id);
  REQUIRE(entries.ok());
  CHECK(snapshot::ManifestText(*entries) == snapshot::ManifestText(walk->files));

  for (const char* run : {"run1", "run2"}) {
    const std::string dest = tmp.path() + "/" + run;
    fs::create_directory(dest);
    auto stats = cache->Materialise(*entries, dest);
    REQUIRE(stats.ok());
    CHECK(stats->linked == 5);
    CHECK(stats->copied == 0);
    for (const Entry& entry : *entries) {
      INFO(entry.path);
      const std::string path = dest + "/" + entry.path;
      CHECK(ReadAll(path) == ReadAll(src + "/" + entry.path));
      const struct stat st = Lstat(path);
      const bool exec = entry.mode == 0755;
      CHECK((st.st_mode & 07777) == (exec ? 0555u : 0444u));
      const std::string cached =
          exec ? cache->ExecPath(entry.sha256) : cache->BlobPath(entry.sha256);
      CHECK(st.st_ino == Lstat(cached).st_ino);
    }
  }
  // One inode per blob: the cache's link plus one per run (a.txt and sub/same.txt share it).
  CHECK(Lstat(cache->BlobPath(Sha256Hex(std::string(Pattern(200000))))).st_nlink == 3);
  CHECK(Lstat(cache->BlobPath(Sha256Hex("hello\n"))).st_nlink == 5);
  CHECK(cache->BlobBytes() == walk->total_bytes - 6 + 18);  // one "hello\n", plus the exec copy
}

TEST_CASE("a manifest whose text does not hash to its id is refused and not stored",
          "[agent_cache]") {
  TempDir tmp;
  auto cache = OpenCache(tmp.path() + "/cache");
  const std::vector<Entry> entries = {MakeEntry("a.txt", 0644, "a")};
  const std::string text = snapshot::ManifestText(entries);
  const std::string wrong = Sha256Hex("something else");

  absl::Status status = cache->PutManifest(wrong, text);
  CHECK(absl::IsDataLoss(status));
  CHECK_THAT(std::string(status.message()), Catch::Contains(wrong));
  CHECK_FALSE(cache->HasManifest(wrong));
  CHECK(absl::IsNotFound(cache->GetManifest(wrong).status()));

  const std::string garbage = "not a manifest\n";
  CHECK(absl::IsDataLoss(cache->PutManifest(Sha256Hex(garbage), garbage)));
  CHECK(absl::IsInvalidArgument(cache->PutManifest("../../etc/passwd", text)));
  CHECK(cache->ManifestIds().empty());
  CHECK(Tree(tmp.path() + "/cache/manifests").empty());

  const std::string id = snapshot::SnapshotId(entries);
  CHECK(cache->PutManifest(id, text).ok());
  CHECK(cache->PutManifest(id, text).ok());  // idempotent
  CHECK(Tree(tmp.path() + "/cache/manifests") == std::vector<std::string>{id});
}

TEST_CASE("materialise never writes through a symlink planted in the destination",
          "[agent_cache]") {
  TempDir tmp;
  auto cache = OpenCache(tmp.path() + "/cache");
  Upload(*cache, "payload");
  const std::string dest = tmp.path() + "/dest";
  const std::string outside = tmp.path() + "/outside";
  fs::create_directories(dest + "/b");
  fs::create_directories(outside);
  fs::create_directory_symlink(outside, dest + "/a");
  fs::create_directory_symlink(outside, dest + "/b/c");
  fs::create_symlink(outside + "/z", dest + "/z");  // dangling, at the leaf

  for (const bool copy : {false, true}) {
    cache->SetForceCopyForTest(copy);
    INFO("copy " << copy);
    auto top = cache->Materialise({MakeEntry("a/x", 0644, "payload")}, dest);
    CHECK(absl::IsInvalidArgument(top.status()));
    CHECK_THAT(std::string(top.status().message()), Catch::Contains("a/x"));

    auto deep = cache->Materialise({MakeEntry("b/c/y", 0755, "payload")}, dest);
    CHECK(absl::IsInvalidArgument(deep.status()));
    CHECK_THAT(std::string(deep.status().message()), Catch::Contains("b/c/y"));

    auto leaf = cache->Materialise({MakeEntry("z", 0644, "payload")}, dest);
    CHECK(absl::IsAlreadyExists(leaf.status()));
    CHECK_THAT(std::string(leaf.status().message()), Catch::Contains("'z'"));

    CHECK(Tree(outside).empty());
    CHECK(Tree(dest) == std::vector<std::string>{"a", "b/", "b/c", "z"});
  }
}

TEST_CASE("materialise refuses an existing destination file", "[agent_cache]") {
  TempDir tmp;
  auto cache = OpenCache(tmp.path() + "/cache");
  Upload(*cache, "theirs");
  const std::string dest = tmp.path() + "/dest";
  WriteFile(dest + "/d/a.txt", "mine");
  auto result = cache->Materialise({MakeEntry("d/a.txt", 0644, "theirs")}, dest);
  CHECK(absl::IsAlreadyExists(result.status()));
  CHECK_THAT(std::string(result.status().message()), Catch::Contains("d/a.txt"));
  CHECK(ReadAll(dest + "/d/a.txt") == "mine");

  // The same path twice in one list is the same error.
  const std::string fresh = tmp.path() + "/fresh";
  fs::create_directory(fresh);
  auto twice = cache->Materialise(
      {MakeEntry("b.txt", 0644, "theirs"), MakeEntry("b.txt", 0644, "theirs")}, fresh);
  CHECK(absl::IsAlreadyExists(twice.status()));
}

TEST_CASE("materialise refuses a blob that is not cached before creating anything",
          "[agent_cache]") {
  TempDir tmp;
  auto cache = OpenCache(tmp.path() + "/cache");
  Upload(*cache, "here");
  const std::string dest = tmp.path() + "/dest";
  fs::create_directory(dest);
  const std::string absent = Sha256Hex("absent");
  auto result = cache->Materialise(
      {MakeEntry("a/here.txt", 0644, "here"), MakeEntry("b/gone.txt", 0644, "absent")}, dest);
  CHECK(absl::IsFailedPrecondition(result.status()));
  CHECK_THAT(std::string(result.status().message()), Catch::Contains("b/gone.txt"));
  CHECK_THAT(std::string(result.status().message()), Catch::Contains(absent));
  CHECK(Tree(dest).empty());
}

TEST_CASE("materialise refuses paths that would leave the destination", "[agent_cache]") {
  TempDir tmp;
  auto cache = OpenCache(tmp.path() + "/cache");
  Upload(*cache, "evil");
  const std::string dest = tmp.path() + "/run/dest";
  fs::create_directories(dest);
  fs::create_directories(tmp.path() + "/outside");
  const std::string absolute = tmp.path() + "/outside/abs";
  for (const std::string& bad : {std::string("../x"), absolute, std::string("a/../b"),
                                 std::string("./c"), std::string("d//e"), std::string("")}) {
    INFO("path '" << bad << "'");
    auto result = cache->Materialise(
        {MakeEntry("fine.txt", 0644, "evil"), MakeEntry(bad, 0644, "evil")}, dest);
    CHECK(absl::IsInvalidArgument(result.status()));
    auto removed = cache->RemoveMaterialised({MakeEntry(bad, 0644, "evil")}, dest);
    CHECK(absl::IsInvalidArgument(removed.status()));
  }
  CHECK(Tree(dest).empty());
  CHECK(Tree(tmp.path() + "/run") == std::vector<std::string>{"dest/"});
  CHECK(Tree(tmp.path() + "/outside").empty());
  CHECK_FALSE(Exists(tmp.path() + "/x"));
  CHECK_FALSE(Exists(tmp.path() + "/run/x"));
}

TEST_CASE("identical content with different modes materialises with both modes", "[agent_cache]") {
  TempDir tmp;
  auto cache = OpenCache(tmp.path() + "/cache");
  const std::string content = "#!/bin/sh\nexit 0\n";
  Upload(*cache, content);
  const std::string dest = tmp.path() + "/dest";
  fs::create_directory(dest);
  const std::vector<Entry> entries = {MakeEntry("a.sh", 0644, content),
                                      MakeEntry("b.sh", 0755, content),
                                      MakeEntry("c/d.sh", 0755, content)};
  auto stats = cache->Materialise(entries, dest);
  REQUIRE(stats.ok());
  CHECK(stats->linked == 3);
  const struct stat a = Lstat(dest + "/a.sh");
  const struct stat b = Lstat(dest + "/b.sh");
  const struct stat d = Lstat(dest + "/c/d.sh");
  CHECK((a.st_mode & 07777) == 0444);
  CHECK((b.st_mode & 07777) == 0555);
  CHECK((d.st_mode & 07777) == 0555);
  CHECK(a.st_ino != b.st_ino);
  CHECK(b.st_ino == d.st_ino);
  CHECK(a.st_ino == Lstat(cache->BlobPath(Sha256Hex(content))).st_ino);
  CHECK(b.st_ino == Lstat(cache->ExecPath(Sha256Hex(content))).st_ino);
  for (const Entry& entry : entries) {
    CHECK(ReadAll(dest + "/" + entry.path) == content);
  }
  CHECK(cache->BlobBytes() == 2 * content.size());
}

TEST_CASE("a blob changed through a hard link is detected by its size and discarded",
          "[agent_cache]") {
  TempDir tmp;
  auto cache = OpenCache(tmp.path() + "/cache");
  Upload(*cache, "source");
  const std::vector<Entry> entries = {MakeEntry("s.py", 0644, "source")};
  const std::string run1 = tmp.path() + "/run1";
  fs::create_directory(run1);
  REQUIRE(cache->Materialise(entries, run1).ok());
  {
    // A job that writes to its source file in place (root ignores the 0444 mode).
    REQUIRE(::chmod((run1 + "/s.py").c_str(), 0644) == 0);
    std::ofstream out(run1 + "/s.py", std::ios::binary | std::ios::app);
    out << " and more";
  }
  const std::string run2 = tmp.path() + "/run2";
  fs::create_directory(run2);
  auto result = cache->Materialise(entries, run2);
  CHECK(absl::IsDataLoss(result.status()));
  CHECK_THAT(std::string(result.status().message()), Catch::Contains("s.py"));
  CHECK(cache->MissingBlobs(entries) == std::vector<std::string>{Sha256Hex("source")});
  CHECK(Tree(run2).empty());
  // Fetched again, it materialises as before.
  Upload(*cache, "source");
  REQUIRE(cache->Materialise(entries, run2).ok());
  CHECK(ReadAll(run2 + "/s.py") == "source");
}

void CheckCopies(SnapshotCache& cache, const std::string& dest) {
  const std::vector<Entry> entries = {MakeEntry("a.txt", 0644, "copied"),
                                      MakeEntry("bin/x", 0755, "copied")};
  auto stats = cache.Materialise(entries, dest);
  REQUIRE(stats.ok());
  CHECK(stats->copied == 2);
  CHECK(stats->linked == 0);
  CHECK(ReadAll(dest + "/a.txt") == "copied");
  CHECK(ReadAll(dest + "/bin/x") == "copied");
  CHECK((Lstat(dest + "/a.txt").st_mode & 07777) == 0444);
  CHECK((Lstat(dest + "/bin/x").st_mode & 07777) == 0555);
  CHECK(Lstat(dest + "/a.txt").st_ino != Lstat(cache.BlobPath(Sha256Hex("copied"))).st_ino);
  // Copies are recognised by content when the run directory is cleaned up.
  auto removed = cache.RemoveMaterialised(entries, dest);
  REQUIRE(removed.ok());
  CHECK(removed->files_removed == 2);
  CHECK(removed->dirs_removed == 1);
  CHECK(Tree(dest).empty());
}

TEST_CASE("materialise copies when hard links are impossible", "[agent_cache]") {
  TempDir tmp;
  {
    auto cache = OpenCache(tmp.path() + "/cache");
    Upload(*cache, "copied");
    cache->SetForceCopyForTest(true);
    const std::string dest = tmp.path() + "/dest";
    fs::create_directory(dest);
    CheckCopies(*cache, dest);
  }
  // A real EXDEV when /dev/shm is another file system than /tmp.
  struct stat shm {};
  if (::stat("/dev/shm", &shm) == 0 && shm.st_dev != Lstat(tmp.path()).st_dev &&
      ::access("/dev/shm", W_OK) == 0) {
    TempDir other("tae-agent-cache", "/dev/shm");
    auto cache = OpenCache(other.path() + "/cache");
    Upload(*cache, "copied");
    const std::string dest = tmp.path() + "/cross";
    fs::create_directory(dest);
    CheckCopies(*cache, dest);
  }
}

TEST_CASE("scrap removes only unreferenced blobs and honours keep", "[agent_cache]") {
  TempDir tmp;
  auto cache = OpenCache(tmp.path() + "/cache");
  const std::vector<Entry> one = {MakeEntry("a", 0644, "shared"), MakeEntry("b", 0644, "only one"),
                                  MakeEntry("x.sh", 0755, "only one exec")};
  const std::vector<Entry> two = {MakeEntry("a", 0644, "shared"), MakeEntry("c", 0644, "two")};
  for (const char* content : {"shared", "only one", "only one exec", "two"}) {
    Upload(*cache, content);
  }
  Put(*cache, one);
  Put(*cache, two);
  const std::string dest = tmp.path() + "/dest";
  fs::create_directory(dest);
  REQUIRE(cache->Materialise(one, dest).ok());  // makes the exec copy
  const uint64_t before = cache->BlobBytes();
  CHECK(before == 6 + 8 + 2 * 13 + 3);

  CHECK(absl::IsInvalidArgument(cache->Scrap({"../manifests"}, false, {}).status()));
  auto first = cache->Scrap({snapshot::SnapshotId(one), Sha256Hex("not cached")}, false, {});
  REQUIRE(first.ok());
  CHECK(first->manifests_removed == 1);
  CHECK(first->blobs_removed == 2);
  CHECK(first->exec_copies_removed == 1);
  CHECK(first->bytes_freed == 8 + 2 * 13);
  CHECK(cache->BlobBytes() == before - first->bytes_freed);
  CHECK(cache->MissingBlobs(one) ==
        std::vector<std::string>{Sha256Hex("only one"), Sha256Hex("only one exec")});
  CHECK(cache->MissingBlobs(two).empty());
  CHECK_FALSE(Exists(cache->ExecPath(Sha256Hex("only one exec"))));
  CHECK(cache->ManifestIds() == std::vector<std::string>{snapshot::SnapshotId(two)});
  // The run directory keeps its hard links: scrapping never touches run directories.
  CHECK(ReadAll(dest + "/x.sh") == "only one exec");

  auto second = cache->Scrap({}, true, {Sha256Hex("two")});
  REQUIRE(second.ok());
  CHECK(second->manifests_removed == 1);
  CHECK(second->blobs_removed == 1);
  CHECK(second->bytes_freed == 6);
  CHECK(cache->ManifestIds().empty());
  CHECK(cache->MissingBlobs(two) == std::vector<std::string>{Sha256Hex("shared")});
  CHECK(cache->BlobBytes() == 3);

  auto last = cache->Scrap({}, true, {});
  REQUIRE(last.ok());
  CHECK(last->blobs_removed == 1);
  CHECK(cache->BlobBytes() == 0);
}

TEST_CASE("remove materialised deletes snapshot files and emptied dirs but keeps job output",
          "[agent_cache]") {
  TempDir tmp;
  auto cache = OpenCache(tmp.path() + "/cache");
  const std::vector<std::pair<std::string, std::string>> files = {
      {"a.txt", "aaaa"},   {"lib/z.py", "zzz"},     {"run.sh", "#!/bin/sh\n"},
      {"src/m.py", "mmm"}, {"src/pkg/n.py", "nnn"}, {"src/pkg/sub/o.py", "ooo"}};
  std::vector<Entry> entries;
  for (const auto& [path, content] : files) {
    entries.push_back(MakeEntry(path, path == "run.sh" ? 0755 : 0644, content));
    Upload(*cache, content);
  }
  REQUIRE(cache->MissingBlobs(entries).empty());
  const std::string dest = tmp.path() + "/dest";
  const std::string outside = tmp.path() + "/outside";
  fs::create_directory(dest);
  REQUIRE(cache->Materialise(entries, dest).ok());

  // What the job did: wrote a log next to its sources, replaced a.txt with other content of the
  // same size, and replaced lib/ by a symlink to a directory holding an identical z.py.
  WriteFile(dest + "/src/out.log", "log");
  REQUIRE(::unlink((dest + "/a.txt").c_str()) == 0);
  WriteFile(dest + "/a.txt", "AAAA");
  WriteFile(outside + "/z.py", "zzz");
  fs::remove_all(dest + "/lib");
  fs::create_directory_symlink(outside, dest + "/lib");

  auto removed = cache->RemoveMaterialised(entries, dest);
  REQUIRE(removed.ok());
  CHECK(removed->files_removed == 4);
  CHECK(removed->files_kept == 2);
  CHECK(removed->dirs_removed == 2);  // src/pkg/sub and src/pkg
  CHECK(Tree(dest) == std::vector<std::string>{"a.txt", "lib", "src/", "src/out.log"});
  CHECK(ReadAll(dest + "/a.txt") == "AAAA");
  CHECK(ReadAll(outside + "/z.py") == "zzz");
  // The cache itself is untouched.
  CHECK(cache->MissingBlobs(entries).empty());

  // Running it again finds nothing more to do.
  auto again = cache->RemoveMaterialised(entries, dest);
  REQUIRE(again.ok());
  CHECK(again->files_removed == 0);
}

}  // namespace
}  // namespace tae::agent
