// The dev loop through the real binaries: taectl mount uploads only what taed lacks, a run's
// directory holds the snapshot bit for bit, command jobs report metrics from the fd and from
// key=value stdout lines, sync --watch re-runs on a change, unsafe trees are refused, and scrap
// frees the space on taed and on the agents.

#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/types.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "tae/v1/control.grpc.pb.h"
#include "tests/integration/harness.h"

namespace tae::testing {
namespace {

namespace fs = std::filesystem;

std::string RandomBytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::string out(n, '\0');
  for (char& c : out) {
    c = static_cast<char>(rng() & 0xff);
  }
  return out;
}

void WriteFile(const std::string& path, const std::string& content) {
  fs::create_directories(fs::path(path).parent_path());
  std::ofstream(path, std::ios::binary | std::ios::trunc) << content;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

// Regular files below root (relative paths), skipping `skip` prefixes.
std::map<std::string, std::string> Files(const std::string& root) {
  std::map<std::string, std::string> out;
  for (const auto& entry : fs::recursive_directory_iterator(root)) {
    if (entry.is_regular_file()) {
      out[fs::relative(entry.path(), root).string()] = ReadFile(entry.path().string());
    }
  }
  return out;
}

int64_t BlobFiles(const std::string& dir) {
  int64_t n = 0;
  if (!fs::exists(dir)) {
    return 0;
  }
  for (const auto& entry : fs::recursive_directory_iterator(dir)) {
    if (entry.is_regular_file() && entry.path().parent_path().filename() != "tmp") {
      ++n;
    }
  }
  return n;
}

nlohmann::json ExportJson(Cluster& cluster, const std::string& experiment) {
  CommandResult exported = cluster.Taectl({"export", experiment, "--format", "json"});
  INFO(exported.err);
  REQUIRE(exported.exit_code == 0);
  nlohmann::json doc = nlohmann::json::parse(exported.out, nullptr, false);
  REQUIRE_FALSE(doc.is_discarded());
  return doc;
}

std::string Sha256(const std::string& text) {
  TempDir dir;
  const std::string path = dir.Write("text", text);
  CommandResult sum = RunCommand({"/usr/bin/sha256sum", path});
  REQUIRE(sum.exit_code == 0);
  return sum.out.substr(0, 64);
}

std::string RunDir(const Cluster& cluster, int64_t run) {
  return cluster.home() + "/agents/local-0/runs/r" + std::to_string(run) + "-a1";
}

int64_t RunIdFrom(const std::string& err) {
  // "r12 (e3) on snapshot ..." on stderr
  size_t at = err.find('r');
  while (at != std::string::npos && !(at + 1 < err.size() && std::isdigit(err[at + 1]))) {
    at = err.find('r', at + 1);
  }
  REQUIRE(at != std::string::npos);
  return std::stoll(err.substr(at + 1));
}

TEST_CASE("a mounted tree reaches the run directory bit for bit and a re-mount uploads nothing") {
  Cluster cluster(1, 1);
  TempDir src;
  const std::string root = src.path() + "/code";
  std::map<std::string, std::string> expected = {
      {"train.py", "print('hi')\n"},
      {"empty.txt", ""},
      {"data/big.bin", RandomBytes(9 << 20, 1)},  // several PutBlobs calls and fetch chunks
      {"data/small.bin", RandomBytes(3000, 2)},
      {"data/copy.bin", RandomBytes(3000, 2)},  // same content: one blob
      {"pkg/deep/er/mod.py", "x = 1\n"},
      {"run.sh", "#!/bin/sh\necho ok\n"},
      {".gitignore", "*.log\nbuild/\n"},
  };
  for (const auto& [path, content] : expected) {
    WriteFile(root + "/" + path, content);
  }
  chmod((root + "/run.sh").c_str(), 0755);
  WriteFile(root + "/debug.log", "ignored");
  WriteFile(root + "/build/out.o", "ignored");
  WriteFile(root + "/.git/HEAD", "ref: refs/heads/main\n");
  // Files changed in the second before a mount are hashed again by the next one (they may have
  // changed again within the clock's granularity); these were written well before.
  for (const auto& [path, content] : expected) {
    fs::last_write_time(root + "/" + path,
                        fs::file_time_type::clock::now() - std::chrono::hours(1));
  }

  nlohmann::json first = cluster.TaectlJson({"mount", root});
  uint64_t total = 0;
  for (const auto& [path, content] : expected) {
    total += content.size();
  }
  CHECK(first.at("files") == expected.size());
  CHECK(first.at("bytes") == total);
  CHECK(first.at("blobs_uploaded") == expected.size() - 1);  // copy.bin shares small.bin's blob
  CHECK(first.at("bytes_uploaded") == total - 3000);
  CHECK(first.at("existing") == false);

  nlohmann::json second = cluster.TaectlJson({"mount", root});
  CHECK(second.at("id") == first.at("id"));
  CHECK(second.at("bytes_uploaded") == 0);
  CHECK(second.at("blobs_uploaded") == 0);
  CHECK(second.at("hashed_bytes") == 0);  // every file came from the hash cache
  CHECK(second.at("existing") == true);

  // Touching files changes nothing: identity is by content.
  for (const auto& [path, content] : expected) {
    fs::last_write_time(root + "/" + path, fs::file_time_type::clock::now());
  }
  nlohmann::json touched = cluster.TaectlJson({"mount", root});
  CHECK(touched.at("id") == first.at("id"));
  CHECK(touched.at("bytes_uploaded") == 0);

  CommandResult run = cluster.Taectl({"run", root, "--", "sh", "-c", "test -x run.sh && ./run.sh"});
  INFO(run.out << run.err);
  REQUIRE(run.exit_code == 0);
  CHECK(run.out.find("ok") != std::string::npos);
  const int64_t run_id = RunIdFrom(run.err);
  const std::string dir = RunDir(cluster, run_id);
  CHECK(Files(dir) == expected);
  struct stat st {};
  REQUIRE(stat((dir + "/run.sh").c_str(), &st) == 0);
  CHECK((st.st_mode & 0111) != 0);
  REQUIRE(stat((dir + "/train.py").c_str(), &st) == 0);
  CHECK((st.st_mode & 0111) == 0);
  CHECK(st.st_nlink >= 2);  // a hard link into the agent's cache, not a copy
  CHECK(run.err.find("fetched 7 blobs") != std::string::npos);

  // A second run of the same snapshot on the same agent fetches nothing.
  CommandResult again = cluster.Taectl({"run", root, "--", "true"});
  INFO(again.err);
  REQUIRE(again.exit_code == 0);
  CHECK(again.err.find("fetched 0 blobs (0 bytes)") != std::string::npos);
}

TEST_CASE("command jobs report JSON-line and key=value metrics with their steps") {
  Cluster cluster(1, 1);
  TempDir src;
  const std::string root = src.path() + "/job";
  WriteFile(root + "/train.py", R"(import os, sys, tae_log
assert os.environ["TAE_RUN_DIR"] == os.getcwd()
tae_log.meta(framework="plain")
for step in (1, 2, 3):
    tae_log.log(step=step, loss=10.0 / step)
for step in (40, 80):
    print(f"Training Device=xla:0/3 Epoch=1 Step={step} Loss={step / 100:.2f} Rate=812.4 Time=21:19:06", flush=True)
print("done", os.environ["TAE_VARIANT"], os.environ["TAE_SEED"], os.environ["TAE_EXPERIMENT"],
      os.environ["TAE_RUN_ID"])
)");
  CommandResult run = cluster.Taectl({"run", root, "--name", "kv", "--", "python3", "train.py"});
  INFO(run.out << run.err);
  REQUIRE(run.exit_code == 0);
  const int64_t run_id = RunIdFrom(run.err);
  CHECK(run.out.find("done baseline 0 ") != std::string::npos);
  CHECK(run.out.find(" " + std::to_string(run_id) + "\n") != std::string::npos);

  nlohmann::json series = ExportJson(cluster, "kv");
  std::map<std::string, std::pair<std::vector<int64_t>, std::vector<double>>> got;
  for (const auto& s : series) {
    got[s.at("metric")] = {s.at("steps").get<std::vector<int64_t>>(),
                           s.at("values").get<std::vector<double>>()};
  }
  CHECK(got["loss"].first == std::vector<int64_t>{1, 2, 3});
  CHECK(got["loss"].second == std::vector<double>{10.0, 5.0, 10.0 / 3});
  CHECK(got["Loss"].first == std::vector<int64_t>{40, 80});
  CHECK(got["Loss"].second == std::vector<double>{0.4, 0.8});
  CHECK(got["Rate"].first == std::vector<int64_t>{40, 80});
  CHECK(got["Epoch"].second == std::vector<double>{1, 1});
  CHECK(got.count("Time") == 0);    // not a number
  CHECK(got.count("Device") == 0);  // not a number
  nlohmann::json shown = cluster.TaectlJson({"show", "r" + std::to_string(run_id)});
  CHECK(shown.dump().find("\"framework\":\"plain\"") != std::string::npos);
}

TEST_CASE("a spec's [job] command gets each run's values through placeholders") {
  Cluster cluster(1, 2);
  TempDir work;
  WriteFile(work.path() + "/src/report.sh", "#!/bin/sh\necho \"lr=$1 layers=$2 seed=$3\"\n");
  const std::string spec = work.Write("sweep.toml", R"(name = "cmd-sweep"
[model]
layers = 2
[train]
lr = 0.001
seeds = [0, 1]
[[ablation]]
name = "fast"
"train.lr" = 0.01
[grid]
"model.layers" = [1, 3]
[job]
code = "src"
command = "sh report.sh {train.lr} {model.layers} {train.seed}"
)");
  CommandResult submitted = cluster.Taectl({"submit", spec, "--wait", "--timeout", "240"});
  INFO(submitted.out << submitted.err);
  REQUIRE(submitted.exit_code == 0);
  nlohmann::json runs = cluster.TaectlJson({"runs", "cmd-sweep"});
  REQUIRE(runs.size() == 8);
  nlohmann::json series = ExportJson(cluster, "cmd-sweep");
  int checked = 0;
  for (const auto& s : series) {
    const std::string variant = s.at("variant");
    const double value = s.at("values")[0];
    if (s.at("metric") == "lr") {
      CHECK(value == (variant.rfind("fast", 0) == 0 ? 0.01 : 0.001));
      ++checked;
    } else if (s.at("metric") == "layers") {
      CHECK(value == (variant.find("layers=1") != std::string::npos ? 1 : 3));
      ++checked;
    } else if (s.at("metric") == "seed") {
      CHECK(value == s.at("seed").get<double>());
      ++checked;
    }
  }
  CHECK(checked == 24);

  // An unknown placeholder is refused at submit with the file position.
  const std::string bad = work.Write("bad.toml", R"(name = "bad"
[job]
command = "python3 train.py --lr {train.lrr}"
)");
  CommandResult refused = cluster.Taectl({"submit", bad});
  CHECK(refused.exit_code == 2);
  CHECK(refused.err.find("bad.toml:3:") != std::string::npos);
  CHECK(refused.err.find("unknown placeholder {train.lrr}") != std::string::npos);
  CHECK(refused.err.find("train.lr") != std::string::npos);  // did you mean
}

TEST_CASE("unsafe trees are refused by name and nothing is stored") {
  Cluster cluster(1, 1);
  TempDir outside;
  WriteFile(outside.path() + "/secret", "secret");
  struct Case {
    std::string what;
    std::function<void(const std::string&)> make;
    std::string message;
  };
  std::vector<Case> cases = {
      {"symlink outside",
       [&](const std::string& root) {
         fs::create_symlink(outside.path() + "/secret", root + "/link");
       },
       "\"link\": symlink points outside the tree"},
      {"symlink with ..",
       [&](const std::string& root) { fs::create_symlink("../../../../etc/passwd", root + "/up"); },
       "\"up\""},
      {"fifo", [](const std::string& root) { mkfifo((root + "/pipe").c_str(), 0644); },
       "\"pipe\": it is a fifo"},
      {"invalid UTF-8", [](const std::string& root) { WriteFile(root + "/bad\xff\xfename", "x"); },
       "not valid UTF-8"},
  };
  if (geteuid() == 0) {
    cases.push_back({"device",
                     [](const std::string& root) {
                       mknod((root + "/null").c_str(), S_IFCHR | 0644, makedev(1, 3));
                     },
                     "\"null\": it is a device file"});
  }
  for (const Case& c : cases) {
    SECTION(c.what) {
      TempDir src;
      const std::string root = src.path() + "/tree";
      WriteFile(root + "/ok.py", "print(1)\n");
      c.make(root);
      CommandResult mounted = cluster.Taectl({"mount", root});
      INFO(mounted.err);
      CHECK(mounted.exit_code != 0);
      CHECK(mounted.err.find(c.message) != std::string::npos);
      CommandResult ran = cluster.Taectl({"run", root, "--", "true"});
      CHECK(ran.exit_code != 0);
      CHECK(cluster.TaectlJson({"snapshots"}).at("snapshots").empty());
      CHECK(BlobFiles(cluster.home() + "/blobs") == 0);
    }
  }
}

TEST_CASE("sync --watch re-runs on a change and cancels the run it supersedes") {
  Cluster cluster(1, 1);
  TempDir src;
  const std::string root = src.path() + "/loop";
  WriteFile(root + "/mode", "slow\n");
  WriteFile(root + "/job.sh",
            "#!/bin/sh\necho \"mode $(cat mode)\"\n"
            "if [ \"$(cat mode)\" = slow ]; then sleep 300; fi\necho finished\n");
  CommandResult synced;
  std::thread loop([&] {
    synced = cluster.Taectl(
        {"sync", root, "--watch", "--quiet-ms", "200", "--max-runs", "2", "--", "sh", "job.sh"},
        300);
  });
  // The first run is running (its first line arrived) before the tree changes.
  bool first_running = WaitUntil(
      [&] {
        CommandResult logs = cluster.Taectl({"logs", "r1"});
        return logs.out.find("mode slow") != std::string::npos;
      },
      120);
  CHECK(first_running);
  WriteFile(root + "/mode", "fast\n");
  loop.join();
  INFO(synced.out << synced.err);
  CHECK(synced.exit_code == 0);
  CHECK(synced.out.find("mode fast") != std::string::npos);
  CHECK(synced.out.find("finished") != std::string::npos);
  nlohmann::json first = cluster.TaectlJson({"show", "r1"});
  nlohmann::json second = cluster.TaectlJson({"show", "r2"});
  CHECK(first.dump().find("\"state\":\"cancelled\"") != std::string::npos);
  CHECK(second.dump().find("\"state\":\"succeeded\"") != std::string::npos);
  // Each run keeps its own snapshot.
  auto snapshot_of = [](const nlohmann::json& shown) {
    const std::string text = shown.dump();
    size_t at = text.find("job.snapshot");
    REQUIRE(at != std::string::npos);
    return text.substr(at, 90);
  };
  CHECK(snapshot_of(first) != snapshot_of(second));
  CHECK(cluster.TaectlJson({"snapshots"}).at("snapshots").size() == 2);
}

TEST_CASE("scrap removes snapshots from taed and the agents and frees their space") {
  Cluster cluster(1, 1);
  TempDir src;
  const std::string root = src.path() + "/code";
  WriteFile(root + "/a.bin", RandomBytes(200000, 7));
  WriteFile(root + "/b.py", "print('b')\n");
  CommandResult run = cluster.Taectl({"run", root, "--", "sh", "-c", "echo out > result.txt"});
  INFO(run.err);
  REQUIRE(run.exit_code == 0);
  const std::string dir = RunDir(cluster, RunIdFrom(run.err));
  const std::string cache = cluster.home() + "/agents/local-0/cache";
  CHECK(fs::exists(dir + "/a.bin"));
  CHECK(BlobFiles(cluster.home() + "/blobs") == 2);
  CHECK(BlobFiles(cache + "/blobs") == 2);

  nlohmann::json dry = cluster.TaectlJson({"scrap", "--all", "--dry-run"});
  CHECK(dry.at("removed").size() == 1);
  CHECK(BlobFiles(cluster.home() + "/blobs") == 2);

  nlohmann::json scrapped = cluster.TaectlJson({"scrap", "--all"});
  CHECK(scrapped.at("removed").size() == 1);
  CHECK(scrapped.at("blobs_removed") == 2);
  CHECK(scrapped.at("bytes_freed") == 200000 + 11);
  CHECK(scrapped.at("agents_notified") == 1);
  CHECK(BlobFiles(cluster.home() + "/blobs") == 0);
  CHECK(cluster.TaectlJson({"snapshots"}).at("snapshots").empty());
  // The agent acts on the message asynchronously.
  CHECK(WaitUntil([&] { return BlobFiles(cache + "/blobs") == 0 && !fs::exists(dir + "/a.bin"); },
                  30));
  CHECK(!fs::exists(dir + "/b.py"));
  CHECK(ReadFile(dir + "/result.txt") == "out\n");  // what the job wrote stays

  // Bad scrap input changes nothing.
  CommandResult bad = cluster.Taectl({"scrap", "zz"});
  CHECK(bad.exit_code == 2);
  CommandResult none = cluster.Taectl({"scrap"});
  CHECK(none.exit_code == 2);
}

TEST_CASE("taed refuses hostile manifests and blobs over the Control API, storing nothing") {
  Cluster cluster(1, 1);
  auto channel = grpc::CreateChannel("unix://" + cluster.home() + "/taed.sock",
                                     grpc::InsecureChannelCredentials());
  auto stub = tae::v1::Control::NewStub(channel);
  const std::string content = "x";
  const std::string hash = "2d711642b726b04401627ca9fbac32f5c8530fb1903cc4db02258717921a4881";
  auto create = [&](const std::string& manifest) {
    tae::v1::CreateSnapshotRequest request;
    request.set_manifest(manifest);
    // The id of the text, so only the content is judged.
    request.set_id(manifest.empty() ? std::string(64, '0') : Sha256(manifest));
    tae::v1::CreateSnapshotResponse response;
    grpc::ClientContext ctx;
    return stub->CreateSnapshot(&ctx, request, &response);
  };
  // The blob is there, so only the paths are at fault.
  {
    tae::v1::PutBlobsRequest put;
    tae::v1::BlobChunk* chunk = put.add_chunks();
    chunk->set_hash(hash);
    chunk->set_total_size(1);
    chunk->set_data(content);
    tae::v1::PutBlobsResponse response;
    grpc::ClientContext ctx;
    REQUIRE(stub->PutBlobs(&ctx, put, &response).ok());
    CHECK(response.blobs_completed() == 1);
  }
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"0644 1 " + hash + " ../evil\n", "line 1"},
      {"0644 1 " + hash + " /etc/passwd\n", "line 1"},
      {"0644 1 " + hash + " a/../../b\n", "line 1"},
      {"0644 1 " + hash + " a\\b\n", "line 1"},
      {"0644 1 " + hash + " ok\n0644 1 " + hash + " ok\n", "line 2"},
      {"0644 1 " + std::string(64, 'g') + " ok\n", "line 1"},
      {"4755 1 " + hash + " ok\n", "line 1"},
      {"0644 1 " + hash + " ok", "newline"},
  };
  for (const auto& [manifest, where] : cases) {
    grpc::Status status = create(manifest);
    INFO(manifest << " -> " << status.error_message());
    CHECK(status.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
    CHECK(status.error_message().find("manifest: ") == 0);
    CHECK(status.error_message().find(where) != std::string::npos);
  }
  // A manifest whose blobs taed lacks, and an id that is not the manifest's.
  const std::string missing = "0644 5 " + std::string(64, 'a') + " train.py\n";
  grpc::Status status = create(missing);
  CHECK(status.error_code() == grpc::StatusCode::FAILED_PRECONDITION);
  CHECK(status.error_message().find("\"train.py\"") != std::string::npos);
  {
    tae::v1::CreateSnapshotRequest request;
    request.set_manifest("0644 1 " + hash + " ok\n");
    request.set_id(std::string(64, 'b'));
    tae::v1::CreateSnapshotResponse response;
    grpc::ClientContext ctx;
    grpc::Status wrong = stub->CreateSnapshot(&ctx, request, &response);
    CHECK(wrong.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
    CHECK(wrong.error_message().find("id: ") == 0);
  }
  // A blob whose bytes do not match its name is discarded.
  {
    tae::v1::PutBlobsRequest put;
    tae::v1::BlobChunk* chunk = put.add_chunks();
    chunk->set_hash(std::string(64, 'c'));
    chunk->set_total_size(1);
    chunk->set_data("y");
    tae::v1::PutBlobsResponse response;
    grpc::ClientContext ctx;
    grpc::Status bad = stub->PutBlobs(&ctx, put, &response);
    CHECK(bad.error_code() == grpc::StatusCode::DATA_LOSS);
    CHECK(bad.error_message().find("chunks[0]") == 0);
  }
  CHECK(cluster.TaectlJson({"snapshots"}).at("snapshots").empty());
  CHECK(BlobFiles(cluster.home() + "/blobs") == 1);
  // A submit naming a snapshot that does not exist is refused.
  tae::v1::SubmitRequest submit;
  submit.set_spec_text("name = \"j\"\n[job]\ncode = \"src\"\ncommand = \"true\"\n");
  submit.set_spec_path("j.toml");
  {
    tae::v1::SubmitResponse response;
    grpc::ClientContext ctx;
    grpc::Status refused = stub->Submit(&ctx, submit, &response);
    CHECK(refused.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
    CHECK(refused.error_message().find("snapshot_id: ") == 0);
  }
  submit.set_snapshot_id(std::string(64, 'd'));
  {
    tae::v1::SubmitResponse response;
    grpc::ClientContext ctx;
    grpc::Status refused = stub->Submit(&ctx, submit, &response);
    CHECK(refused.error_code() == grpc::StatusCode::FAILED_PRECONDITION);
    CHECK(refused.error_message().find("no snapshot") != std::string::npos);
  }
  CHECK(cluster.TaectlJson({"ls"}).empty());
}

}  // namespace
}  // namespace tae::testing
