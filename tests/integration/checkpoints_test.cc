// Checkpoints off the worker, through the real binaries (docs/checkpoints.md): a run whose agent
// and work directory are destroyed resumes on another agent from its last uploaded checkpoint
// and ends where an uninterrupted run ends; a command job's tae_log.checkpoint uploads only new
// contents, taed keeps the last resources.keep_checkpoints, taectl pull fetches them, scrap frees
// them; and what must be refused (corrupt or partial uploads, a checkpoint over the cap) is.

#include <signal.h>
#include <stdlib.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <thread>

#include "common/snapshot/snapshot.h"
#include "grpcpp/create_channel.h"
#include "tae/v1/agent_link.grpc.pb.h"
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

// Environment for the taed a Cluster starts, unset again once it is up.
class ScopedEnv {
 public:
  explicit ScopedEnv(std::vector<std::pair<std::string, std::string>> vars)
      : vars_(std::move(vars)) {
    for (const auto& [name, value] : vars_) {
      setenv(name.c_str(), value.c_str(), 1);
    }
  }
  ~ScopedEnv() {
    for (const auto& var : vars_) {
      unsetenv(var.first.c_str());
    }
  }

 private:
  std::vector<std::pair<std::string, std::string>> vars_;
};

// A tae-agent on loopback with its own work directory, started by the test (not by taed, which
// would restart it).
class LoopAgent {
 public:
  LoopAgent(const Cluster& cluster, std::string id, std::string work_dir)
      : id_(std::move(id)), work_dir_(std::move(work_dir)) {
    const std::string token = FirstLine(cluster.home() + "/agent.token");
    const std::string addr = FirstLine(cluster.home() + "/agent.addr");
    thread_ = std::thread([this, token, addr] {
      RunCommand({"/usr/bin/env", "TAE_AGENT_TOKEN=" + token, BinPath("tae-agent"), "--taed", addr,
                  "--id", id_, "--slots", "1", "--work-dir", work_dir_},
                 900);
    });
  }
  ~LoopAgent() { Stop(SIGTERM); }
  const std::string& id() const { return id_; }
  const std::string& work_dir() const { return work_dir_; }
  void Stop(int signal) {
    if (!thread_.joinable()) {
      return;
    }
    if (long pid = FindProcess("tae-agent", "--id " + id_ + " --slots"); pid > 0) {
      kill(static_cast<pid_t>(pid), signal);
    }
    thread_.join();
  }

 private:
  std::string id_;
  std::string work_dir_;
  std::thread thread_;
};

// The machine of the run's first attempt goes away: its agent, the job's supervisor and the
// job die, and its disk with them. Returns that agent.
const LoopAgent* DestroyHost(std::vector<std::unique_ptr<LoopAgent>>& agents, int64_t run) {
  LoopAgent* host = nullptr;
  std::string job_dir;
  for (auto& agent : agents) {
    const std::string dir = agent->work_dir() + "/runs/r" + std::to_string(run) + "-a1.job";
    if (std::filesystem::exists(dir)) {
      host = agent.get();
      job_dir = dir;
    }
  }
  REQUIRE(host != nullptr);
  const long pgid = std::stol(FirstLine(job_dir + "/pgid"));
  const long supervisor = std::stol(FirstLine(job_dir + "/supervisor.pid"));
  host->Stop(SIGKILL);
  kill(static_cast<pid_t>(supervisor), SIGKILL);
  kill(static_cast<pid_t>(-pgid), SIGKILL);
  std::filesystem::remove_all(host->work_dir());
  REQUIRE(WaitUntil([&] { return !ProcessGroupExists(pgid); }, 30));
  return host;
}

nlohmann::json OnlyRun(Cluster& cluster, const std::string& experiment) {
  nlohmann::json runs = cluster.TaectlJson({"runs", experiment});
  REQUIRE(runs.size() == 1);
  return runs[0];
}

std::vector<int64_t> CheckpointSteps(Cluster& cluster, int64_t run) {
  std::vector<int64_t> steps;
  const nlohmann::json listed = cluster.TaectlJson({"checkpoints", "r" + std::to_string(run)});
  for (const auto& c : listed.at("checkpoints")) {
    steps.push_back(c.at("step").get<int64_t>());
  }
  return steps;
}

std::string Submit(Cluster& cluster, const std::string& name, const std::string& spec) {
  const std::string path = cluster.dir().Write(name + ".toml", spec);
  return std::to_string(cluster.TaectlJson({"submit", path}).at("experiment").get<int64_t>());
}

// The last value of each metric of the experiment's (only) run.
std::map<std::string, double> FinalValues(Cluster& cluster, const std::string& experiment) {
  CommandResult exported = cluster.Taectl({"export", experiment, "--format", "json"});
  REQUIRE(exported.exit_code == 0);
  std::map<std::string, double> out;
  for (const nlohmann::json& series : nlohmann::json::parse(exported.out)) {
    if (!series.at("values").empty()) {
      out[series.at("metric").get<std::string>()] = series.at("values").back().get<double>();
    }
  }
  return out;
}

// Blob files in taed's checkpoint store.
int StoredBlobs(const Cluster& cluster) {
  int n = 0;
  for (const auto& entry :
       std::filesystem::recursive_directory_iterator(cluster.home() + "/checkpoints")) {
    if (entry.is_regular_file() && entry.path().parent_path().filename() != "tmp") {
      n += 1;
    }
  }
  return n;
}

TEST_CASE(
    "a run whose agent and work dir are destroyed resumes on another agent from its last "
    "uploaded checkpoint",
    "[checkpoints]") {
  ScopedEnv env({{"TAE_AGENT_GRACE", "2"}, {"TAE_RETRY_BACKOFF", "0.2"}});
  Cluster cluster(0, 1);
  REQUIRE(cluster.started());
  TempDir work;
  std::vector<std::unique_ptr<LoopAgent>> agents;
  for (const char* id : {"ck-a", "ck-b"}) {
    agents.push_back(std::make_unique<LoopAgent>(cluster, id, work.path() + "/" + id));
  }
  REQUIRE(WaitUntil([&] { return cluster.TaectlJson({"agents"}).size() == 2; }, 60));

  const std::string spec = CopyTaskSpec("resume", 1, 3000, 100);
  const std::string exp = Submit(cluster, "resume", spec);
  const int64_t run = OnlyRun(cluster, exp).at("id").get<int64_t>();
  REQUIRE(WaitUntil(
      [&] {
        std::vector<int64_t> steps = CheckpointSteps(cluster, run);
        return !steps.empty() && steps.front() >= 300;
      },
      180));
  const LoopAgent* host = DestroyHost(agents, run);

  CommandResult waited = cluster.Taectl({"wait", exp, "--timeout", "300"}, 330);
  INFO(waited.out << waited.err);
  REQUIRE(waited.exit_code == 0);
  const nlohmann::json final_run = OnlyRun(cluster, exp);
  CHECK(final_run.at("state") == "succeeded");
  CHECK(final_run.at("attempt") == 2);
  CHECK(final_run.at("agent") != host->id());
  // The new attempt got the last uploaded checkpoint, and tae-train went on after its step.
  CommandResult logs = cluster.Taectl({"logs", "r" + std::to_string(run)});
  const std::string text = logs.out + logs.err;
  INFO(text);
  std::smatch restored;
  std::smatch resumed;
  REQUIRE(std::regex_search(text, restored, std::regex(R"(checkpoint at step (\d+) restored)")));
  REQUIRE(std::regex_search(text, resumed, std::regex(R"(resumed after step (\d+))")));
  CHECK(restored[1] == resumed[1]);
  CHECK(std::stol(restored[1]) >= 300);

  // The same study without the interruption ends with the same losses.
  const std::string straight = Submit(cluster, "straight", CopyTaskSpec("straight", 1, 3000, 100));
  CommandResult done = cluster.Taectl({"wait", straight, "--timeout", "300"}, 330);
  REQUIRE(done.exit_code == 0);
  std::map<std::string, double> interrupted = FinalValues(cluster, exp);
  std::map<std::string, double> uninterrupted = FinalValues(cluster, straight);
  for (const char* key : {"train/loss", "eval/loss", "eval/acc"}) {
    INFO(key);
    REQUIRE(interrupted.count(key) == 1);
    CHECK(interrupted[key] == uninterrupted[key]);
  }
}

// A command job that writes checkpoint N (a constant 1 MiB file and a small state file that
// changes), marks it, and waits for the test's gate file N before the next.
constexpr char kCheckpointJob[] = R"(import os, sys, time
import tae_log

gates, steps = sys.argv[1], int(sys.argv[2])
d = os.environ["TAE_CHECKPOINT_DIR"]
os.makedirs(d, exist_ok=True)

def put(name, data):
    tmp = os.path.join(d, name + ".tmp")
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, os.path.join(d, name))

put("const.bin", bytes(range(256)) * 4096)
for step in range(1, steps + 1):
    put("state.bin", f"state {step}\n".encode() * 1000)
    tae_log.log(step=step, loss=1.0 / step)
    tae_log.checkpoint(step)
    while not os.path.exists(os.path.join(gates, str(step))):
        time.sleep(0.02)
)";

std::string CheckpointJobSpec(const std::string& name, const std::string& gates, int steps) {
  return "name = \"" + name + "\"\n[train]\nseeds = [0]\n[job]\ncode = \"ckjob\"\n" +
         "command = \"/usr/bin/python3 job.py " + gates + " " + std::to_string(steps) + "\"\n";
}

std::string StateContent(int step) {
  std::string one = "state " + std::to_string(step) + "\n";
  std::string out;
  for (int i = 0; i < 1000; ++i) {
    out += one;
  }
  return out;
}

grpc::Status Call(
    const Cluster& cluster,
    const std::function<grpc::Status(tae::v1::AgentLink::Stub&, grpc::ClientContext&)>& fn) {
  auto channel = grpc::CreateChannel(FirstLine(cluster.home() + "/agent.addr"),
                                     grpc::InsecureChannelCredentials());
  auto stub = tae::v1::AgentLink::NewStub(channel);
  grpc::ClientContext ctx;
  // The run's own agent's credential: the calls are refused to anyone else (boundaries_test.cc).
  ctx.AddMetadata("authorization",
                  "Bearer " + FirstLine(cluster.home() + "/agents/local-0/agent.credential"));
  return fn(*stub, ctx);
}

TEST_CASE(
    "tae_log.checkpoint uploads only new contents, taed keeps the last two, pull fetches "
    "them and scrap frees them",
    "[checkpoints]") {
  Cluster cluster(1, 1);
  REQUIRE(cluster.started());
  TempDir gates;
  std::filesystem::create_directories(cluster.dir().path() + "/ckjob");
  cluster.dir().Write("ckjob/job.py", kCheckpointJob);
  const std::string exp = Submit(cluster, "ckjob", CheckpointJobSpec("ckjob", gates.path(), 3));
  const int64_t run = OnlyRun(cluster, exp).at("id").get<int64_t>();
  const std::string r = "r" + std::to_string(run);
  for (int step = 1; step <= 3; ++step) {
    INFO("step " << step);
    REQUIRE(WaitUntil(
        [&] {
          std::vector<int64_t> steps = CheckpointSteps(cluster, run);
          return !steps.empty() && steps.front() == step;
        },
        120));
    if (step < 3) {
      gates.Write(std::to_string(step), "");
    }
  }

  // While the run is live (its job waits at gate 3), uploads that must never be offered: a blob
  // that is not there, bytes that do not match their hash, half a blob. Nothing stored changes.
  const std::string half = "half of a blob that never completes";
  const std::string manifest =
      snapshot::ManifestText({{"model.pt", 0644, half.size(), snapshot::Sha256Hex(half)}});
  auto commit = [&](int attempt) {
    return Call(cluster, [&](tae::v1::AgentLink::Stub& stub, grpc::ClientContext& ctx) {
      tae::v1::CommitCheckpointRequest request;
      request.set_run_id(run);
      request.set_attempt(attempt);
      request.set_step(9);
      request.set_manifest(manifest);
      tae::v1::CommitCheckpointResponse response;
      return stub.CommitCheckpoint(&ctx, request, &response);
    });
  };
  auto put = [&](const std::string& data, uint64_t offset) {
    return Call(cluster, [&](tae::v1::AgentLink::Stub& stub, grpc::ClientContext& ctx) {
      tae::v1::PutCheckpointBlobsRequest request;
      tae::v1::BlobChunk* chunk = request.add_chunks();
      chunk->set_hash(snapshot::Sha256Hex(half));
      chunk->set_offset(offset);
      chunk->set_total_size(half.size());
      chunk->set_data(data);
      tae::v1::PutCheckpointBlobsResponse response;
      return stub.PutCheckpointBlobs(&ctx, request, &response);
    });
  };
  grpc::Status missing = commit(1);
  CHECK(missing.error_code() == grpc::StatusCode::FAILED_PRECONDITION);
  CHECK(missing.error_message().find("1 of its 1 blobs are not stored") != std::string::npos);
  // No offer named it yet: refused before a byte is written.
  CHECK(put(half, 0).error_code() == grpc::StatusCode::PERMISSION_DENIED);
  grpc::Status offered =
      Call(cluster, [&](tae::v1::AgentLink::Stub& stub, grpc::ClientContext& ctx) {
        tae::v1::OfferCheckpointRequest request;
        request.set_run_id(run);
        request.set_attempt(1);
        request.set_step(9);
        request.set_manifest(manifest);
        tae::v1::OfferCheckpointResponse response;
        return stub.OfferCheckpoint(&ctx, request, &response);
      });
  REQUIRE(offered.ok());
  grpc::Status corrupt = put(std::string(half.size(), 'x'), 0);
  CHECK(corrupt.error_code() == grpc::StatusCode::DATA_LOSS);
  REQUIRE(put(half.substr(0, 10), 0).ok());  // the first 10 bytes only
  CHECK(commit(1).error_code() == grpc::StatusCode::FAILED_PRECONDITION);
  grpc::Status wrong_attempt = commit(7);
  CHECK(wrong_attempt.error_code() == grpc::StatusCode::FAILED_PRECONDITION);
  CHECK(wrong_attempt.error_message().find("attempt") != std::string::npos);
  grpc::Status garbage =
      Call(cluster, [&](tae::v1::AgentLink::Stub& stub, grpc::ClientContext& ctx) {
        tae::v1::OfferCheckpointRequest request;
        request.set_run_id(run);
        request.set_attempt(1);
        request.set_step(9);
        request.set_manifest("not a manifest\n");
        tae::v1::OfferCheckpointResponse response;
        return stub.OfferCheckpoint(&ctx, request, &response);
      });
  CHECK(garbage.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
  CHECK(garbage.error_message().find("manifest: ") == 0);
  CHECK(CheckpointSteps(cluster, run) == std::vector<int64_t>{3, 2});

  gates.Write("3", "");
  CommandResult waited = cluster.Taectl({"wait", exp, "--timeout", "120"}, 150);
  REQUIRE(waited.exit_code == 0);

  // Only what changed crossed the link: both files once, then only the state file.
  CommandResult logs = cluster.Taectl({"logs", r});
  const std::string text = logs.out + logs.err;
  INFO(text);
  CHECK(text.find("checkpoint at step 1 uploaded: 2 files, 1056576 bytes; sent 2 new") !=
        std::string::npos);
  CHECK(text.find("checkpoint at step 2 uploaded: 2 files, 1056576 bytes; sent 1 new (8000 "
                  "bytes)") != std::string::npos);
  CHECK(text.find("checkpoint at step 3 uploaded: 2 files, 1056576 bytes; sent 1 new (8000 "
                  "bytes)") != std::string::npos);
  // keep_checkpoints = 2: step 1 went, and with it its state file's blob.
  const nlohmann::json listed = cluster.TaectlJson({"checkpoints", r});
  CHECK(listed.at("keep") == 2);
  CHECK(CheckpointSteps(cluster, run) == std::vector<int64_t>{3, 2});
  CHECK(StoredBlobs(cluster) == 3);

  // pull: the newest, one by step, and clear refusals.
  TempDir out;
  const std::string newest = out.path() + "/newest";
  CommandResult pulled = cluster.Taectl({"pull", r, "-o", newest});
  INFO(pulled.out << pulled.err);
  REQUIRE(pulled.exit_code == 0);
  CHECK(ReadAll(newest + "/state.bin") == StateContent(3));
  CHECK(ReadAll(newest + "/const.bin").size() == 1 << 20);
  REQUIRE(cluster.Taectl({"pull", r, "--step", "2", "-o", out.path() + "/two"}).exit_code == 0);
  CHECK(ReadAll(out.path() + "/two/state.bin") == StateContent(2));
  CommandResult gone = cluster.Taectl({"pull", r, "--step", "1", "-o", out.path() + "/one"});
  CHECK(gone.exit_code != 0);
  CHECK(gone.err.find("no checkpoint at step 1; it has steps 3, 2") != std::string::npos);
  CommandResult occupied = cluster.Taectl({"pull", r, "-o", newest});
  CHECK(occupied.exit_code != 0);
  CHECK(occupied.err.find("is not an empty directory") != std::string::npos);

  // scrap --checkpoints: the run's checkpoints and every blob (also the half-uploaded one's
  // leftovers) go.
  nlohmann::json scrapped = cluster.TaectlJson({"scrap", "--checkpoints", r});
  CHECK(scrapped.at("checkpoints_removed") == 2);
  CHECK(CheckpointSteps(cluster, run).empty());
  CHECK(StoredBlobs(cluster) == 0);
}

TEST_CASE("a checkpoint over taed's cap is refused with a clear reason, nothing stored",
          "[checkpoints]") {
  ScopedEnv env({{"TAE_MAX_CHECKPOINT_BYTES", "100000"}, {"TAE_AGENT_GRACE", "30"}});
  Cluster cluster(1, 1);
  REQUIRE(cluster.started());
  TempDir gates;
  gates.Write("1", "");  // no waiting
  std::filesystem::create_directories(cluster.dir().path() + "/ckjob");
  cluster.dir().Write("ckjob/job.py", kCheckpointJob);
  const std::string exp = Submit(cluster, "capped", CheckpointJobSpec("capped", gates.path(), 1));
  REQUIRE(cluster.Taectl({"wait", exp, "--timeout", "120"}, 150).exit_code == 0);
  const int64_t run = OnlyRun(cluster, exp).at("id").get<int64_t>();
  std::string text;
  REQUIRE(WaitUntil(
      [&] {
        CommandResult logs = cluster.Taectl({"logs", "r" + std::to_string(run)});
        text = logs.out + logs.err;
        return text.find("checkpoint at step 1 not uploaded") != std::string::npos;
      },
      60));
  INFO(text);
  CHECK(text.find("the checkpoint is 1056576 bytes, over taed's cap of 100000") !=
        std::string::npos);
  CHECK(CheckpointSteps(cluster, run).empty());
  CHECK(StoredBlobs(cluster) == 0);
}

}  // namespace
}  // namespace tae::testing

namespace tae::testing {
namespace {

// examples/configurator/train.py, a single-file trainer in the style of public ones, as the user
// runs it: its own flags ({params:python}), its checkpoint torch.save'd in place into --out_dir
// and never marked, --init_from=resume on a resumed attempt only. `extra` is more of the file.
std::string ConfiguratorSpec(const std::string& name, const std::string& params,
                             const std::string& job) {
  return "name = \"" + name + "\"\n[params]\nmax_iters = 60\neval_interval = 20\n" + params +
         "[train]\nseeds = [0]\n[job]\ncode = \"" + TAE_SOURCE_DIR +
         "/examples/configurator\"\ncommand = \"/usr/bin/python3 train.py {params:python} "
         "--out_dir=$TAE_CHECKPOINT_DIR {resume:--init_from=resume}\"\n" +
         job;
}

// Debian's python3 with python3-torch, which the example needs.
bool HaveTorch() {
  return RunCommand({"/usr/bin/python3", "-c", "import torch"}, 120).exit_code == 0;
}

// Steps of each stored metric of the experiment's runs, in order (duplicates kept: none should be).
std::map<std::string, std::vector<int64_t>> StoredSteps(Cluster& cluster, const std::string& exp) {
  CommandResult exported = cluster.Taectl({"export", exp, "--format", "json"});
  REQUIRE(exported.exit_code == 0);
  std::map<std::string, std::vector<int64_t>> out;
  for (const nlohmann::json& series : nlohmann::json::parse(exported.out)) {
    auto& steps = out[series.at("metric").get<std::string>()];
    for (const auto& step : series.at("steps")) {
      steps.push_back(step.get<int64_t>());
    }
  }
  return out;
}

TEST_CASE(
    "a script that saves its own checkpoint in place and never marks it resumes on another agent "
    "from that checkpoint through {resume:...}, every point stored once",
    "[checkpoints][watch]") {
  if (!HaveTorch()) {
    TAE_SKIP("/usr/bin/python3 cannot import torch (apt-get install python3-torch)");
  }
  ScopedEnv env({{"TAE_AGENT_GRACE", "2"}, {"TAE_RETRY_BACKOFF", "0.2"}});
  Cluster cluster(0, 1);
  REQUIRE(cluster.started());
  TempDir work;
  std::vector<std::unique_ptr<LoopAgent>> agents;
  for (const char* id : {"w-a", "w-b"}) {
    agents.push_back(std::make_unique<LoopAgent>(cluster, id, work.path() + "/" + id));
  }
  REQUIRE(WaitUntil([&] { return cluster.TaectlJson({"agents"}).size() == 2; }, 60));
  // The trainer waits after each save while this file exists: the first attempt stops after its
  // step-20 checkpoint until the test has destroyed its machine.
  const std::string pause = work.path() + "/pause";
  { std::ofstream(pause) << "hold\n"; }
  const std::string exp = Submit(
      cluster, "watch",
      ConfiguratorSpec("watch", "pause_file = \"" + pause + "\"\n",
                       "checkpoints = \"watch\"\n[job.metrics]\npattern = 'step (?P<step>\\d+): "
                       "train loss (?P<train_loss>\\S+), val loss (?P<val_loss>\\S+)'\n"));
  const int64_t run = OnlyRun(cluster, exp).at("id").get<int64_t>();
  REQUIRE(WaitUntil(
      [&] {
        std::vector<int64_t> steps = CheckpointSteps(cluster, run);
        return !steps.empty() && steps.front() == 20;
      },
      180));
  CommandResult first_logs = cluster.Taectl({"logs", "r" + std::to_string(run)});
  CHECK_THAT(first_logs.out + first_logs.err,
             Catch::Contains("settled: captured as the checkpoint at step 20"));
  const LoopAgent* host = DestroyHost(agents, run);
  std::filesystem::remove(pause);

  CommandResult waited = cluster.Taectl({"wait", exp, "--timeout", "300"}, 330);
  INFO(waited.out << waited.err);
  REQUIRE(waited.exit_code == 0);
  const nlohmann::json final_run = OnlyRun(cluster, exp);
  CHECK(final_run.at("state") == "succeeded");
  CHECK(final_run.at("attempt") == 2);
  CHECK(final_run.at("agent") != host->id());
  CommandResult logs = cluster.Taectl({"logs", "r" + std::to_string(run)});
  const std::string text = logs.out + logs.err;
  INFO(text);
  CHECK_THAT(text, Catch::Contains("checkpoint at step 20 restored"));
  CHECK_THAT(text, Catch::Contains("Resuming training from"));  // --init_from=resume came
  CHECK_THAT(text, Catch::Contains("Overriding: init_from = resume"));
  // Every eval's point once, the resumed attempt's step 20 in place of the first's.
  const std::map<std::string, std::vector<int64_t>> steps = StoredSteps(cluster, exp);
  for (const char* metric : {"train_loss", "val_loss"}) {  // the pattern's groups
    INFO(metric);
    REQUIRE(steps.count(metric) == 1);
    CHECK(steps.at(metric) == std::vector<int64_t>{0, 20, 40, 60});
  }
  // The end: its last save, captured when the job ended.
  CHECK(CheckpointSteps(cluster, run).front() == 60);
}

TEST_CASE(
    "a script's wandb calls reach TAE with job.wandb = \"capture\": wandb's steps, commit=False "
    "with the next commit, config kept with the run, summary among its finals",
    "[wandb]") {
  if (!HaveTorch()) {
    TAE_SKIP("/usr/bin/python3 cannot import torch (apt-get install python3-torch)");
  }
  Cluster cluster(1, 1);
  REQUIRE(cluster.started());
  const std::string exp =
      Submit(cluster, "wb", ConfiguratorSpec("wb", "wandb_log = true\n", "wandb = \"capture\"\n"));
  CommandResult waited = cluster.Taectl({"wait", exp, "--timeout", "300"}, 330);
  INFO(waited.out << waited.err);
  REQUIRE(waited.exit_code == 0);
  const nlohmann::json run = OnlyRun(cluster, exp);
  REQUIRE(run.at("state") == "succeeded");
  // Four evals (iters 0, 20, 40, 60), four wandb.log commits: steps 0..3.
  const std::map<std::string, std::vector<int64_t>> steps = StoredSteps(cluster, exp);
  for (const char* metric : {"train/loss", "val/loss", "iter", "lr", "mfu"}) {
    INFO(metric);
    REQUIRE(steps.count(metric) == 1);
    CHECK(steps.at(metric) == std::vector<int64_t>{0, 1, 2, 3});
  }
  CommandResult exported = cluster.Taectl({"export", exp, "--format", "json", "--metric", "iter"});
  REQUIRE(exported.exit_code == 0);
  CHECK(nlohmann::json::parse(exported.out)[0].at("values") ==
        nlohmann::json::array({0.0, 20.0, 40.0, 60.0}));
  CHECK(run.at("final_metrics").contains("best_val_loss"));
  const nlohmann::json shown =
      cluster.TaectlJson({"show", "r" + std::to_string(run.at("id").get<int64_t>())});
  INFO(shown.dump());
  CHECK(shown.dump().find("wandb.config.learning_rate") != std::string::npos);

  // Without job.wandb nothing changes: where wandb is not installed, the run fails and says how.
  if (RunCommand({"/usr/bin/python3", "-c", "import wandb"}, 120).exit_code != 0) {
    const std::string plain =
        Submit(cluster, "wb-off", ConfiguratorSpec("wb-off", "wandb_log = true\n", ""));
    cluster.Taectl({"wait", plain, "--timeout", "300"}, 330);
    const nlohmann::json failed = OnlyRun(cluster, plain);
    CHECK(failed.at("state") == "failed");
    CHECK_THAT(
        failed.at("reason").get<std::string>(),
        Catch::Contains("No module named 'wandb'") && Catch::Contains("job.wandb = \"capture\""));
  }
}

}  // namespace
}  // namespace tae::testing
