// BlobStore (common/blobs): content-addressed blobs arrive in chunks in any order, become visible
// only when whole and verified, and a wrong or oversized upload never leaves a blob behind.
#include "common/blobs/blob_store.h"

#include <stdlib.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/snapshot/snapshot.h"
#include "tests/unit/temp_dir.h"

namespace tae::blobs {
namespace {

using snapshot::Sha256Hex;

using tae::testing::TempDir;

TEST_CASE("blob names are 64 lowercase hex digits", "[blobs]") {
  CHECK(IsBlobHash(Sha256Hex("x")));
  CHECK_FALSE(IsBlobHash("ABC"));
  CHECK_FALSE(IsBlobHash(std::string(64, 'g')));
  CHECK_FALSE(IsBlobHash("../../etc/passwd"));
}

TEST_CASE("a blob uploaded in chunks, out of order, appears whole and verified", "[blobs]") {
  TempDir dir;
  auto store = BlobStore::Open(dir.path() + "/blobs");
  REQUIRE(store.ok());
  std::string content;
  for (int i = 0; i < 100000; ++i) {
    content.push_back(static_cast<char>('a' + i % 26));
  }
  const std::string hash = Sha256Hex(content);
  CHECK(store->Missing({hash, hash}) == std::vector<std::string>{hash});
  auto second = store->WriteChunk(hash, 60000, content.size(), content.substr(60000));
  REQUIRE(second.ok());
  CHECK_FALSE(second->complete);
  CHECK_FALSE(store->Has(hash));  // not visible while incomplete
  auto first = store->WriteChunk(hash, 0, content.size(), content.substr(0, 60000));
  REQUIRE(first.ok());
  CHECK(first->complete);
  CHECK(store->Has(hash));
  CHECK(store->Missing({hash}).empty());
  CHECK(*store->Size(hash) == content.size());
  CHECK(*store->Read(hash, 0, content.size()) == content);
  CHECK(*store->Read(hash, 99990, 100) == content.substr(99990));
  CHECK(store->PathOf(hash) == dir.path() + "/blobs/" + hash.substr(0, 2) + "/" + hash.substr(2));
  // A resend of a stored blob's chunk changes nothing.
  auto again = store->WriteChunk(hash, 0, content.size(), content.substr(0, 10));
  REQUIRE(again.ok());
  CHECK(again->bytes_written == 0);
  CHECK(*store->List() == std::vector<std::string>{hash});
  REQUIRE(store->Remove(hash).ok());
  CHECK_FALSE(store->Has(hash));
  CHECK(store->Remove(hash).ok());
}

TEST_CASE(
    "a blob from 20,000 small chunks in a shuffled order, overlapping, is whole once every "
    "byte came and not before",
    "[blobs]") {
  TempDir dir;
  auto store = BlobStore::Open(dir.path() + "/blobs");
  REQUIRE(store.ok());
  std::string content;
  for (int i = 0; i < 100000; ++i) {
    content.push_back(static_cast<char>(i * 7919 % 251));
  }
  const std::string hash = Sha256Hex(content);
  // Chunks of 5 bytes at every 5th offset, plus 8-byte ones over their seams, shuffled by a fixed
  // permutation; the chunk at 0 comes last.
  std::vector<uint64_t> offsets;
  for (uint64_t at = 5; at < content.size(); at += 5) {
    offsets.push_back(at);
  }
  for (size_t i = offsets.size() - 1; i > 0; --i) {
    std::swap(offsets[i], offsets[(i * 2654435761u) % (i + 1)]);
  }
  int complete = 0;
  for (uint64_t at : offsets) {
    const size_t length = at % 10 == 0 ? 8 : 5;
    auto wrote = store->WriteChunk(hash, at, content.size(), content.substr(at, length));
    REQUIRE(wrote.ok());
    complete += wrote->complete ? 1 : 0;
  }
  CHECK(complete == 0);
  CHECK_FALSE(store->Has(hash));
  auto last = store->WriteChunk(hash, 0, content.size(), content.substr(0, 5));
  REQUIRE(last.ok());
  CHECK(last->complete);
  CHECK(*store->Read(hash, 0, content.size()) == content);
}

TEST_CASE("a dropped partial upload leaves neither its bytes nor its bookkeeping", "[blobs]") {
  TempDir dir;
  auto store = BlobStore::Open(dir.path() + "/blobs");
  REQUIRE(store.ok());
  const std::string content(100000, 'p');
  const std::string hash = snapshot::Sha256Hex(content);
  REQUIRE(store->WriteChunk(hash, 0, content.size(), content.substr(0, 1000)).ok());
  CHECK(store->partial_uploads() == 1);
  auto files = [&] {
    int n = 0;
    for (const auto& entry : std::filesystem::recursive_directory_iterator(dir.path())) {
      n += entry.is_regular_file() ? 1 : 0;
    }
    return n;
  };
  CHECK(files() == 1);  // the part file
  store->DropPartial(hash);
  CHECK(store->partial_uploads() == 0);
  CHECK(files() == 0);
  CHECK_FALSE(store->Has(hash));
  store->DropPartial(hash);  // nothing left to drop: no effect
  // Starting again from scratch works.
  REQUIRE(store->WriteChunk(hash, 0, content.size(), content).ok());
  CHECK(store->Has(hash));
}

TEST_CASE("each uploader's chunks make its own partial upload: another's bytes never mix in",
          "[blobs]") {
  TempDir dir;
  auto store = BlobStore::Open(dir.path() + "/blobs");
  REQUIRE(store.ok());
  const std::string content(3000, 'q');
  const std::string hash = Sha256Hex(content);
  // The honest agent sends the first two thirds; a rogue one that knows the hash writes garbage
  // over the same ranges, and then the last third, which would complete a shared upload.
  REQUIRE(store->WriteChunk(hash, 0, 3000, content.substr(0, 2000), "honest").ok());
  auto garbage = store->WriteChunk(hash, 0, 3000, std::string(2000, 'x'), "rogue");
  REQUIRE(garbage.ok());
  CHECK_FALSE(garbage->complete);
  auto tail = store->WriteChunk(hash, 2000, 3000, content.substr(2000), "rogue");
  CHECK(tail.status().code() == absl::StatusCode::kDataLoss);  // its own bytes, not honest's
  CHECK_FALSE(store->Has(hash));
  CHECK(store->partial_uploads() == 1);  // honest's, untouched
  auto done = store->WriteChunk(hash, 2000, 3000, content.substr(2000), "honest");
  REQUIRE(done.ok());
  CHECK(done->complete);
  CHECK(store->Has(hash));
  // Dropping one uploader's partial leaves another's.
  const std::string other(5000, 'r');
  const std::string other_hash = Sha256Hex(other);
  REQUIRE(store->WriteChunk(other_hash, 0, 5000, other.substr(0, 10), "a").ok());
  REQUIRE(store->WriteChunk(other_hash, 0, 5000, other.substr(0, 10), "b").ok());
  CHECK(store->partial_uploads() == 2);
  store->DropPartial(other_hash, "a");
  CHECK(store->partial_uploads() == 1);
  CHECK(store->WriteChunk(other_hash, 10, 5000, other.substr(10), "b")->complete);
}

TEST_CASE("RemoveAllBut removes every blob but those kept, and says how much", "[blobs]") {
  TempDir dir;
  auto store = BlobStore::Open(dir.path() + "/blobs");
  REQUIRE(store.ok());
  std::set<std::string> keep;
  for (int i = 0; i < 6; ++i) {
    const std::string content(100 + i, static_cast<char>('a' + i));
    REQUIRE(store->WriteChunk(Sha256Hex(content), 0, content.size(), content)->complete);
    if (i % 2 == 0) {
      keep.insert(Sha256Hex(content));
    }
  }
  auto removed = store->RemoveAllBut(keep);
  REQUIRE(removed.ok());
  CHECK(removed->blobs == 3);
  CHECK(removed->bytes == 101 + 103 + 105);
  auto left = store->List();
  REQUIRE(left.ok());
  CHECK(std::set<std::string>(left->begin(), left->end()) == keep);
}

// The checkpoint store: what an upload is answered must not tell the uploader whether someone
// else stored the blob already.
TEST_CASE("with answer_as_missing, a stored blob's upload is answered as a missing one's",
          "[blobs]") {
  TempDir dir;
  std::string content(3000, 'q');
  const std::string hash = Sha256Hex(content);
  // The same uploads, in the same order, against a store without the blob and one with it.
  auto answers = [&](bool stored) {
    auto store = BlobStore::Open(dir.path() + (stored ? "/with" : "/without"));
    REQUIRE(store.ok());
    store->set_answer_as_missing(true);
    if (stored) {
      REQUIRE(store->WriteChunk(hash, 0, content.size(), content).ok());
      REQUIRE(store->Has(hash));
    }
    std::vector<std::string> out;
    auto say = [&](const absl::StatusOr<ChunkResult>& r) {
      out.push_back(r.ok() ? absl::StrCat(r->complete, "/", r->bytes_written)
                           : absl::StrCat(absl::StatusCodeToString(r.status().code()), ": ",
                                          r.status().message()));
    };
    // Out of order in three chunks: complete only once every range came.
    say(store->WriteChunk(hash, 2000, content.size(), content.substr(2000)));
    say(store->WriteChunk(hash, 0, content.size(), content.substr(0, 1000)));
    say(store->WriteChunk(hash, 1000, content.size(), content.substr(1000, 1000)));
    // Whole, with the wrong bytes: refused either way.
    say(store->WriteChunk(hash, 0, content.size(), std::string(3000, 'x')));
    // Whole and right.
    say(store->WriteChunk(hash, 0, content.size(), content));
    CHECK(store->Has(hash));
    CHECK(*store->Read(hash, 0, content.size()) == content);
    return out;
  };
  const std::vector<std::string> missing = answers(false);
  CHECK(missing == std::vector<std::string>{"0/1000", "0/1000", "1/1000", missing[3], "1/3000"});
  CHECK(absl::StartsWith(missing[3], "DATA_LOSS"));
  CHECK(answers(true) == missing);
}

TEST_CASE("an empty blob is stored from one empty chunk", "[blobs]") {
  TempDir dir;
  auto store = BlobStore::Open(dir.path());
  REQUIRE(store.ok());
  const std::string hash = Sha256Hex("");
  auto result = store->WriteChunk(hash, 0, 0, "");
  REQUIRE(result.ok());
  CHECK(result->complete);
  CHECK(*store->Read(hash, 0, 10) == "");
}

TEST_CASE("content that does not match its hash is discarded with DataLoss", "[blobs]") {
  TempDir dir;
  auto store = BlobStore::Open(dir.path());
  REQUIRE(store.ok());
  const std::string claimed = Sha256Hex("the real content");
  auto result = store->WriteChunk(claimed, 0, 16, "forged content!!");
  REQUIRE_FALSE(result.ok());
  CHECK(result.status().code() == absl::StatusCode::kDataLoss);
  CHECK(std::string(result.status().message()).find("discarded") != std::string::npos);
  CHECK_FALSE(store->Has(claimed));
  CHECK(std::filesystem::is_empty(dir.path() + "/tmp"));  // no partial file left
  // The right bytes are still accepted afterwards.
  CHECK(store->WriteChunk(claimed, 0, 16, "the real content")->complete);
}

TEST_CASE("bad hashes and chunks past the size are refused", "[blobs]") {
  TempDir dir;
  auto store = BlobStore::Open(dir.path());
  REQUIRE(store.ok());
  auto bad_hash = store->WriteChunk("../../escape", 0, 1, "x");
  REQUIRE_FALSE(bad_hash.ok());
  CHECK(bad_hash.status().code() == absl::StatusCode::kInvalidArgument);
  const std::string hash = Sha256Hex("12345");
  auto past = store->WriteChunk(hash, 3, 5, "xyz");
  REQUIRE_FALSE(past.ok());
  CHECK(std::string(past.status().message()).find("past its size 5") != std::string::npos);
  REQUIRE(store->WriteChunk(hash, 0, 5, "12").ok());
  auto other_size = store->WriteChunk(hash, 2, 6, "345");
  REQUIRE_FALSE(other_size.ok());
  CHECK(std::string(other_size.status().message()).find("differs") != std::string::npos);
  CHECK(store->WriteChunk(hash, 2, 5, "345")->complete);
  CHECK_FALSE(store->Read(Sha256Hex("nope"), 0, 1).ok());
}

TEST_CASE("partial uploads of an earlier process are cleared at open", "[blobs]") {
  TempDir dir;
  {
    auto store = BlobStore::Open(dir.path());
    REQUIRE(store.ok());
    REQUIRE(store->WriteChunk(Sha256Hex("abcdef"), 0, 6, "abc").ok());
    CHECK_FALSE(std::filesystem::is_empty(dir.path() + "/tmp"));
  }
  auto reopened = BlobStore::Open(dir.path());
  REQUIRE(reopened.ok());
  CHECK(std::filesystem::is_empty(dir.path() + "/tmp"));
}

}  // namespace
}  // namespace tae::blobs
