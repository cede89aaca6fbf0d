// Checkpoints off the worker, the parts without processes: the store's retention and garbage
// collection, TreeFill (restore and pull), the agent's capture, and the checkpoint mark of a
// metric line.

#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "agent/checkpoints/checkpoint_sync.h"
#include "agent/runner/runner.h"
#include "common/clock/clock.h"
#include "common/metrics/metric_line.h"
#include "common/snapshot/fill.h"
#include "common/snapshot/snapshot.h"
#include "server/store/store.h"
#include "tests/unit/temp_dir.h"

namespace tae {
namespace {

using testing::TempDir;

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream out;
  out << in.rdbuf();
  return out.str();
}

std::string Hash(const std::string& data) { return snapshot::Sha256Hex(data); }

// A store with one experiment of one run that keeps `keep` checkpoints.
std::unique_ptr<store::Store> StoreWithRun(int keep) {
  auto store = store::Store::Open(":memory:");
  REQUIRE(store.ok());
  model::NewExperiment exp;
  exp.name = "ckpt";
  exp.spec_hash = "h";
  exp.spec_text = "name = \"ckpt\"";
  model::NewRun run;
  run.variant = "baseline";
  run.config_json = "{}";
  run.resources.keep_checkpoints = keep;
  exp.runs.push_back(run);
  REQUIRE((*store)->CreateExperiment(exp, 1.0).ok());
  return std::move(*store);
}

model::CheckpointRecord Checkpoint(int64_t step) {
  model::CheckpointRecord c;
  c.run_id = 1;
  c.attempt = 1;
  c.step = step;
  c.manifest_id = Hash(std::to_string(step));
  c.manifest = "m";
  c.files = 2;
  c.bytes = 10;
  c.created_at = static_cast<double>(step);
  return c;
}

std::vector<int64_t> Steps(store::Store& store) {
  auto list = store.ListCheckpoints(1);
  REQUIRE(list.ok());
  std::vector<int64_t> steps;
  for (const model::CheckpointRecord& c : *list) {
    steps.push_back(c.step);
  }
  return steps;
}

TEST_CASE("a run keeps its newest complete checkpoints, and freed blobs are those no row names",
          "[checkpoints]") {
  std::unique_ptr<store::Store> store = StoreWithRun(2);
  const std::string shared = Hash("weights that never change");
  auto first = store->BeginCheckpoint(Checkpoint(10), {shared, Hash("opt 10")});
  REQUIRE(first.ok());
  // Incomplete: not listed, not restored.
  CHECK(Steps(*store).empty());
  CHECK(!store->LatestCheckpoint(1)->has_value());
  auto done = store->CompleteCheckpoint(*first, 2);
  REQUIRE(done.ok());
  CHECK(done->checkpoints == 0);
  CHECK(Steps(*store) == std::vector<int64_t>{10});

  auto second = store->BeginCheckpoint(Checkpoint(20), {shared, Hash("opt 20")});
  REQUIRE(store->CompleteCheckpoint(*second, 2).ok());
  auto third = store->BeginCheckpoint(Checkpoint(30), {shared, Hash("opt 30")});
  REQUIRE(third.ok());
  // While the third is incomplete, garbage collection keeps its blobs.
  CHECK(store->CheckpointBlobs()->count(Hash("opt 30")) == 1);
  auto dropped = store->CompleteCheckpoint(*third, 2);
  REQUIRE(dropped.ok());
  CHECK(dropped->checkpoints == 1);
  // The shared blob is still named by the kept ones: only step 10's own blob is freed.
  CHECK(dropped->unreferenced == std::vector<std::string>{Hash("opt 10")});
  CHECK(Steps(*store) == std::vector<int64_t>{30, 20});
  auto latest = store->LatestCheckpoint(1);
  REQUIRE(latest.ok());
  REQUIRE(latest->has_value());
  CHECK((*latest)->step == 30);
  CHECK((*latest)->manifest == "m");
  CHECK(store->CheckpointBlobs()->count(Hash("opt 10")) == 0);
}

TEST_CASE("a later attempt's checkpoint of the same step replaces the earlier one",
          "[checkpoints]") {
  std::unique_ptr<store::Store> store = StoreWithRun(5);
  auto a = store->BeginCheckpoint(Checkpoint(40), {Hash("a")});
  REQUIRE(store->CompleteCheckpoint(*a, 5).ok());
  model::CheckpointRecord again = Checkpoint(40);
  again.attempt = 2;
  auto b = store->BeginCheckpoint(again, {Hash("b")});
  auto dropped = store->CompleteCheckpoint(*b, 5);
  REQUIRE(dropped.ok());
  CHECK(dropped->checkpoints == 1);
  CHECK(dropped->unreferenced == std::vector<std::string>{Hash("a")});
  auto list = store->ListCheckpoints(1);
  REQUIRE(list->size() == 1);
  CHECK(list->front().attempt == 2);
}

TEST_CASE("incomplete checkpoints left by a crash are deleted, complete ones stay",
          "[checkpoints]") {
  std::unique_ptr<store::Store> store = StoreWithRun(2);
  auto kept = store->BeginCheckpoint(Checkpoint(1), {Hash("k")});
  REQUIRE(store->CompleteCheckpoint(*kept, 2).ok());
  REQUIRE(store->BeginCheckpoint(Checkpoint(2), {Hash("half")}).ok());
  auto deleted = store->DeleteIncompleteCheckpoints();
  REQUIRE(deleted.ok());
  CHECK(*deleted == 1);
  CHECK(Steps(*store) == std::vector<int64_t>{1});
  CHECK(*store->CheckpointBlobs() == std::set<std::string>{Hash("k")});
  // Completing a row that is gone (or already complete) is NotFound, and changes nothing.
  CHECK(absl::IsNotFound(store->CompleteCheckpoint(*kept, 2).status()));
}

// ---- TreeFill ----

std::vector<snapshot::Entry> Manifest(const std::vector<std::pair<std::string, std::string>>& files,
                                      uint32_t mode = 0644) {
  std::vector<snapshot::Entry> entries;
  for (const auto& [path, content] : files) {
    entries.push_back({path, mode, content.size(), Hash(content)});
  }
  return entries;
}

TEST_CASE("TreeFill keeps what is there, writes the rest, and removes what the manifest lacks",
          "[checkpoints]") {
  TempDir dir;
  dir.Write("model.pt", "weights");        // right content: kept
  dir.Write("opt.pt", "stale optimizer");  // wrong content: replaced
  dir.Write("extra/old.pt", "gone");       // not named: removed
  auto entries = Manifest({{"model.pt", "weights"},
                           {"opt.pt", "optimizer"},
                           {"sub/a.bin", "same"},
                           {"sub/b.bin", "same"}});
  auto fill = snapshot::TreeFill::Start(entries, dir.path(), {true});
  REQUIRE(fill.ok());
  CHECK((*fill)->missing() == std::vector<std::string>{Hash("optimizer"), Hash("same")});
  CHECK((*fill)->stats().files_kept == 1);
  CHECK((*fill)->stats().removed == 1);
  CHECK(!std::filesystem::exists(dir.Full("extra")));
  // Chunks in order; the second blob lands on both paths that have it.
  REQUIRE((*fill)->Write(Hash("optimizer"), 0, 9, "optim").ok());
  REQUIRE((*fill)->Write(Hash("optimizer"), 5, 9, "izer").ok());
  REQUIRE((*fill)->Write(Hash("same"), 0, 4, "same").ok());
  REQUIRE((*fill)->Finish().ok());
  CHECK(ReadAll(dir.Full("opt.pt")) == "optimizer");
  CHECK(ReadAll(dir.Full("model.pt")) == "weights");
  CHECK(ReadAll(dir.Full("sub/a.bin")) == "same");
  CHECK(ReadAll(dir.Full("sub/b.bin")) == "same");
  CHECK((*fill)->stats().blobs_written == 2);
  CHECK(!std::filesystem::exists(dir.Full(".tae-fill.tmp")));
}

TEST_CASE("TreeFill never puts bytes that do not match their hash in place", "[checkpoints]") {
  TempDir dir;
  dir.Write("model.pt", "old weights");
  auto fill = snapshot::TreeFill::Start(Manifest({{"model.pt", "new weights"}}), dir.path());
  REQUIRE(fill.ok());
  absl::Status corrupt = (*fill)->Write(Hash("new weights"), 0, 11, "bad weights");
  CHECK(absl::IsDataLoss(corrupt));
  CHECK(ReadAll(dir.Full("model.pt")) == "old weights");
  // A chunk out of order, a blob not asked for, a size the manifest does not say: refused.
  CHECK(absl::IsInvalidArgument((*fill)->Write(Hash("new weights"), 4, 11, "weights")));
  CHECK(absl::IsInvalidArgument((*fill)->Write(Hash("other"), 0, 5, "other")));
  CHECK(absl::IsInvalidArgument((*fill)->Write(Hash("new weights"), 0, 12, "new weights!")));
  // Half a blob, then the stream ends: Finish says what never arrived.
  REQUIRE((*fill)->Write(Hash("new weights"), 0, 11, "new ").ok());
  absl::Status finished = (*fill)->Finish();
  CHECK(absl::IsDataLoss(finished));
  CHECK(std::string(finished.message()).find("model.pt") != std::string::npos);
  CHECK(ReadAll(dir.Full("model.pt")) == "old weights");
}

TEST_CASE("TreeFill replaces a symlink in the way instead of writing through it", "[checkpoints]") {
  TempDir dir;
  TempDir outside;
  std::filesystem::create_directories(dir.Full("ckpt"));
  std::filesystem::create_directory_symlink(outside.path(), dir.Full("ckpt/sub"));
  auto fill = snapshot::TreeFill::Start(Manifest({{"sub/x.bin", "data"}}), dir.Full("ckpt"));
  REQUIRE(fill.ok());
  REQUIRE((*fill)->Write(Hash("data"), 0, 4, "data").ok());
  REQUIRE((*fill)->Finish().ok());
  CHECK(std::filesystem::is_directory(std::filesystem::symlink_status(dir.Full("ckpt/sub"))));
  CHECK(ReadAll(dir.Full("ckpt/sub/x.bin")) == "data");
  CHECK(std::filesystem::is_empty(outside.path()));
}

// ---- capture ----

TEST_CASE("a capture links the marked files and refuses one written after the mark",
          "[checkpoints]") {
  TempDir dir;
  dir.Write("ckpt/model.pt", "weights");
  dir.Write("ckpt/meta/step.txt", "40");
  const double marked = clock::WallNow() + 1;  // everything above was written before it
  auto capture = agent::CaptureCheckpoint(dir.Full("ckpt"), dir.Full("cap"), marked);
  REQUIRE(capture.ok());
  CHECK(capture->files == 2);
  struct stat original;
  struct stat captured;
  REQUIRE(stat(dir.Full("ckpt/model.pt").c_str(), &original) == 0);
  REQUIRE(stat(dir.Full("cap/model.pt").c_str(), &captured) == 0);
  CHECK(original.st_ino == captured.st_ino);  // a link: no content copied
  CHECK(ReadAll(dir.Full("cap/meta/step.txt")) == "40");

  // A file modified after the mark belongs to a later save.
  auto late = agent::CaptureCheckpoint(dir.Full("ckpt"), dir.Full("cap2"), marked - 3600);
  CHECK(absl::IsFailedPrecondition(late.status()));
  CHECK(std::string(late.status().message()).find("changed after the checkpoint was marked") !=
        std::string::npos);
  CHECK(!std::filesystem::exists(dir.Full("cap2")));
}

TEST_CASE("a watched directory is captured as copies, which a rewrite in place cannot reach",
          "[checkpoints][watch]") {
  TempDir dir;
  dir.Write("ckpt/ckpt.pt", "step 20 weights");
  dir.Write("ckpt/sub/opt.pt", "moments");
  const double marked = clock::WallNow() + 1;
  auto capture = agent::CaptureCheckpoint(dir.Full("ckpt"), dir.Full("cap"), marked, true);
  REQUIRE(capture.ok());
  CHECK(capture->files == 2);
  struct stat original;
  struct stat captured;
  REQUIRE(stat(dir.Full("ckpt/ckpt.pt").c_str(), &original) == 0);
  REQUIRE(stat(dir.Full("cap/ckpt.pt").c_str(), &captured) == 0);
  CHECK(original.st_ino != captured.st_ino);  // a copy of its own
  // The identity the upload checks is the copy's, so the copy passes it ...
  CHECK(capture->identity.at("ckpt.pt").first == static_cast<uint64_t>(captured.st_size));
  // ... and the job rewriting its file in place (torch.save onto it) leaves the capture whole.
  { std::ofstream(dir.Full("ckpt/ckpt.pt"), std::ios::trunc) << "step 40 weights, longer"; }
  CHECK(ReadAll(dir.Full("cap/ckpt.pt")) == "step 20 weights");
  CHECK(ReadAll(dir.Full("cap/sub/opt.pt")) == "moments");
}

TEST_CASE("a checkpoint directory's signature changes with any file's size or time, and only then",
          "[checkpoints][watch]") {
  TempDir dir;
  CHECK(agent::CheckpointDirSignature(dir.Full("none")).empty());
  dir.Write("ckpt/a.pt", "one");
  const std::string first = agent::CheckpointDirSignature(dir.Full("ckpt"));
  CHECK_FALSE(first.empty());
  CHECK(agent::CheckpointDirSignature(dir.Full("ckpt")) == first);  // nothing changed
  std::filesystem::create_symlink(dir.Full("ckpt/a.pt"), dir.Full("ckpt/link.pt"));
  CHECK(agent::CheckpointDirSignature(dir.Full("ckpt")) == first);  // symlinks are not kept
  dir.Write("ckpt/sub/b.pt", "two");
  const std::string second = agent::CheckpointDirSignature(dir.Full("ckpt"));
  CHECK(second != first);
  CHECK(second.find("sub/b.pt") != std::string::npos);
  { std::ofstream(dir.Full("ckpt/a.pt"), std::ios::trunc) << "three"; }  // in place, longer
  CHECK(agent::CheckpointDirSignature(dir.Full("ckpt")) != second);
}

// ---- the mark ----

TEST_CASE("a metric line can mark a checkpoint complete", "[checkpoints]") {
  auto record = metrics::ParseJsonLine(R"({"checkpoint": {"step": 40, "time": 1732000000.5}})");
  REQUIRE(record.ok());
  REQUIRE(record->checkpoint.has_value());
  CHECK(record->checkpoint->step == 40);
  CHECK(record->checkpoint->time == 1732000000.5);
  CHECK(record->values.empty());
  for (const char* bad : {R"({"checkpoint": 40})", R"({"checkpoint": {"step": -1, "time": 1}})",
                          R"({"checkpoint": {"step": 4}})"}) {
    INFO(bad);
    auto parsed = metrics::ParseJsonLine(bad);
    CHECK(absl::IsInvalidArgument(parsed.status()));
  }
}

}  // namespace
}  // namespace tae
