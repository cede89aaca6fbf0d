// Profiles on demand and run artifacts, through the real binaries (docs/profiles.md): taectl
// profile on a running tae-train run brings back a Chrome trace with matmul ranges and a flame
// chart; a command job using tae_log.profile with plain torch.profiler answers too;
// train.profile_at stores one artifact per step; profiling a queued or finished run is a clear
// error; artifacts survive a taed restart and scrap --artifacts frees them.

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include "tests/integration/harness.h"
#include "tests/skip.h"

namespace tae::testing {
namespace {

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream out;
  out << in.rdbuf();
  return out.str();
}

std::string Submit(Cluster& cluster, const std::string& name, const std::string& spec) {
  const std::string path = cluster.dir().Write(name + ".toml", spec);
  return std::to_string(cluster.TaectlJson({"submit", path}).at("experiment").get<int64_t>());
}

// A copy-task run long enough to be profiled while it runs.
std::string LongSpec(const std::string& name, const std::string& extra_train = "") {
  return "name = \"" + name +
         "\"\n[model]\nlayers = 2\nd_model = 32\n"
         "[train]\ntask = \"copy\"\nvocab = 8\nseq_len = 16\nbatch_size = 8\nlr = 0.01\n"
         "warmup = 5\nsteps = 200000\neval_every = 1000\neval_batches = 2\nthreads = 1\n"
         "seeds = [0]\n" +
         extra_train;
}

nlohmann::json Runs(Cluster& cluster, const std::string& exp) {
  return cluster.TaectlJson({"runs", exp});
}

// True once the run is running and has reported a training step.
bool Training(Cluster& cluster, int64_t run) {
  CommandResult shown = cluster.Taectl({"show", "r" + std::to_string(run), "--json"});
  if (shown.exit_code != 0) {
    return false;
  }
  const nlohmann::json doc = nlohmann::json::parse(shown.out, nullptr, false);
  return doc.is_object() && doc.value("state", "") == "running" &&
         shown.out.find("train/loss") != std::string::npos;
}

std::set<std::string> ArtifactNames(Cluster& cluster, const std::string& run) {
  std::set<std::string> names;
  for (const nlohmann::json& a : cluster.TaectlJson({"artifacts", run})) {
    names.insert(a.at("artifact").get<std::string>());
  }
  return names;
}

}  // namespace

TEST_CASE(
    "taectl profile captures a running tae-train run's steps as a Chrome trace and a flame "
    "chart, kept across a taed restart until scrap",
    "[profile]") {
  Cluster cluster(1, 2);
  REQUIRE(cluster.started());
  const std::string exp = Submit(cluster, "prof", LongSpec("prof"));
  const int64_t run = Runs(cluster, exp).at(0).at("id").get<int64_t>();
  const std::string r = "r" + std::to_string(run);
  REQUIRE(WaitUntil([&] { return Training(cluster, run); }, 120));

  TempDir out;
  const std::string dir = out.path() + "/profile";
  const std::string svg = out.path() + "/flame.svg";
  CommandResult profiled =
      cluster.Taectl({"profile", r, "--steps", "3", "-o", dir, "--svg", svg, "--json"}, 180);
  INFO(profiled.out << profiled.err);
  REQUIRE(profiled.exit_code == 0);
  const nlohmann::json result = nlohmann::json::parse(profiled.out);
  const std::string artifact = result.at("artifact").get<std::string>();
  CHECK(artifact.rfind("profile-p", 0) == 0);
  CHECK(result.at("summary").at("steps") == 3);
  CHECK(result.at("summary").at("shares").at("matmul").get<double>() > 0.0);
  CHECK(result.at("summary").at("peak_allocated_bytes").get<double>() > 0.0);

  // The trace is Chrome trace JSON with the matmuls of the model's linear layers in it.
  const nlohmann::json trace = nlohmann::json::parse(ReadAll(dir + "/trace.json"));
  REQUIRE(trace.at("traceEvents").is_array());
  int matmuls = 0;
  int steps = 0;
  int shaped = 0;
  for (const nlohmann::json& e : trace.at("traceEvents")) {
    const std::string name = e.value("name", "");
    // tae-train's linear layers: its own sgemm (agent/train/kernels.h), or libtorch's.
    if (e.value("ph", "") == "X" &&
        (name == "tae::linear_sgemm" || name == "aten::addmm" || name == "aten::mm")) {
      ++matmuls;
      CHECK(e.at("dur").get<double>() >= 0.0);
      shaped += e.contains("args") && e["args"].contains("Input Dims") ? 1 : 0;
    }
    steps += name.rfind("ProfilerStep#", 0) == 0 ? 1 : 0;
  }
  CHECK(matmuls > 0);
  CHECK(shaped > 0);        // input shapes, recorded in the capture's first step
  CHECK(shaped < matmuls);  // and only there
  CHECK(steps == 3);
  const std::string flame = ReadAll(svg);
  CHECK(flame.rfind("<svg", 0) == 0);
  CHECK(flame.find("aten::") != std::string::npos);
  CHECK(ArtifactNames(cluster, r) == std::set<std::string>{artifact});

  // Only a running run can be profiled.
  REQUIRE(cluster.Taectl({"cancel", r}).exit_code == 0);
  REQUIRE(WaitUntil([&] { return Runs(cluster, exp).at(0).at("state") == "cancelled"; }, 60));
  CommandResult finished = cluster.Taectl({"profile", r});
  CHECK(finished.exit_code != 0);
  CHECK(finished.err.find("only a running run can be profiled") != std::string::npos);

  // The artifact outlives taed; scrap frees it.
  REQUIRE(cluster.Taectl({"down"}).exit_code == 0);
  REQUIRE(cluster.Taectl({"up", "--agents", "1", "--slots", "2"}).exit_code == 0);
  CHECK(ArtifactNames(cluster, r) == std::set<std::string>{artifact});
  const std::string pulled = out.path() + "/pulled";
  REQUIRE(cluster.Taectl({"pull", r, "--artifact", artifact, "-o", pulled}).exit_code == 0);
  CHECK(ReadAll(pulled + "/trace.json") == ReadAll(dir + "/trace.json"));
  const nlohmann::json scrapped = cluster.TaectlJson({"scrap", "--artifacts", r});
  CHECK(scrapped.at("artifacts_removed") == 1);
  CHECK(scrapped.at("blobs_removed").get<int>() >= 1);
  CHECK(ArtifactNames(cluster, r).empty());
}

TEST_CASE(
    "train.profile_at stores one profile artifact per step without a request, and a queued run "
    "cannot be profiled",
    "[profile]") {
  Cluster cluster(1, 1);
  REQUIRE(cluster.started());
  std::string spec = LongSpec("profat", "profile_at = [5, 12]\nprofile_steps = 2\n");
  // Long enough that the second capture starts before the run ends however fast its steps are
  // (each capture waits until the agent has taken the one before).
  spec.replace(spec.find("steps = 200000"), 14, "steps = 300");
  spec.replace(spec.find("seeds = [0]"), 11, "seeds = [0, 1]");
  const std::string exp = Submit(cluster, "profat", spec);
  const nlohmann::json runs = Runs(cluster, exp);
  REQUIRE(runs.size() == 2);
  // One slot: while one run goes, the other waits in the queue.
  for (const nlohmann::json& run : runs) {
    if (run.at("state") == "queued") {
      CommandResult queued =
          cluster.Taectl({"profile", "r" + std::to_string(run.at("id").get<int>())});
      CHECK(queued.exit_code != 0);
      CHECK(queued.err.find("is queued; only a running run can be profiled") != std::string::npos);
    }
  }
  REQUIRE(cluster.Taectl({"wait", exp, "--timeout", "300"}, 330).exit_code == 0);
  for (const nlohmann::json& run : Runs(cluster, exp)) {
    const std::string r = "r" + std::to_string(run.at("id").get<int>());
    INFO(r);
    REQUIRE(WaitUntil([&] { return ArtifactNames(cluster, r).size() == 2; }, 60));
    CHECK(ArtifactNames(cluster, r) == std::set<std::string>{"profile-step5", "profile-step12"});
    // A capture starts when the agent has taken the previous one: at its step or soon after.
    for (const nlohmann::json& a : cluster.TaectlJson({"artifacts", r})) {
      CHECK(a.at("step").get<int>() >= (a.at("artifact") == "profile-step5" ? 5 : 12));
      CHECK(a.at("step").get<int>() < 300);
    }
  }
}

TEST_CASE("a command job's tae_log.profile answers taectl profile with torch.profiler's trace",
          "[profile]") {
  if (RunCommand({"/usr/bin/python3", "-c", "import torch"}).exit_code != 0) {
    TAE_SKIP("python3-torch is not installed for /usr/bin/python3");
  }
  Cluster cluster(1, 1);
  REQUIRE(cluster.started());
  std::filesystem::create_directories(cluster.dir().path() + "/torchjob");
  cluster.dir().Write("torchjob/job.py", R"(import torch, tae_log
model = torch.nn.Linear(64, 64)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for step in range(1, 10**9):
    with tae_log.profile(step):
        loss = model(torch.randn(32, 64)).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    if step % 50 == 0:
        tae_log.log(step=step, loss=float(loss))
)");
  const std::string exp =
      Submit(cluster, "torchjob",
             "name = \"torchjob\"\n[job]\ncode = \"torchjob\"\ncommand = \"/usr/bin/python3 "
             "job.py\"\n[train]\nseeds = [0]\n");
  const int64_t run = Runs(cluster, exp).at(0).at("id").get<int64_t>();
  const std::string r = "r" + std::to_string(run);
  REQUIRE(WaitUntil(
      [&] {
        CommandResult shown = cluster.Taectl({"show", r, "--json"});
        return shown.exit_code == 0 && shown.out.find("\"loss\"") != std::string::npos;
      },
      120));
  TempDir out;
  CommandResult profiled =
      cluster.Taectl({"profile", r, "--steps", "4", "-o", out.path() + "/p", "--json"}, 180);
  INFO(profiled.out << profiled.err);
  REQUIRE(profiled.exit_code == 0);
  const nlohmann::json result = nlohmann::json::parse(profiled.out);
  CHECK(result.at("summary").at("steps") == 4);
  const nlohmann::json trace = nlohmann::json::parse(ReadAll(out.path() + "/p/trace.json"));
  bool addmm = false;
  for (const nlohmann::json& e : trace.is_array() ? trace : trace.at("traceEvents")) {
    addmm = addmm || (e.value("name", "") == "aten::addmm" && e.value("ph", "") == "X");
  }
  CHECK(addmm);
  CHECK(std::filesystem::exists(out.path() + "/p/key_averages.txt"));
  REQUIRE(cluster.Taectl({"cancel", r}).exit_code == 0);
}

}  // namespace tae::testing
