// The agent link tried from the other side, through the real binaries (docs/security.md): a
// rogue holder of a valid agent credential tries every agent call against another agent's run
// and each is refused with nothing stored; the enrolment token enrols and does nothing else; an
// id cannot be enrolled twice; a revoked agent is locked out and nobody else is.

#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>

#include "common/snapshot/snapshot.h"
#include "grpcpp/create_channel.h"
#include "tae/v1/agent_link.grpc.pb.h"
#include "tests/integration/harness.h"

namespace tae::testing {
namespace {

// A job that logs and reports a metric, then waits for its gate file.
constexpr char kGatedJob[] =
    "#!/bin/sh\n"
    "echo \"{\\\"step\\\": 1, \\\"train/loss\\\": 1.5}\" >&$TAE_METRICS_FD\n"
    "echo 'job line'\n"
    "while [ ! -e \"$1\" ]; do sleep 0.05; done\n";

class AgentCalls {
 public:
  AgentCalls(const Cluster& cluster, std::string key)
      : stub_(tae::v1::AgentLink::NewStub(grpc::CreateChannel(
            FirstLine(cluster.home() + "/agent.addr"), grpc::InsecureChannelCredentials()))),
        key_(std::move(key)) {}

  void Prepare(grpc::ClientContext* ctx) const {
    ctx->AddMetadata("authorization", "Bearer " + key_);
    ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
  }
  grpc::Status Enrol(const std::string& id, std::string* credential = nullptr) {
    grpc::ClientContext ctx;
    Prepare(&ctx);
    tae::v1::EnrolRequest request;
    request.set_agent_id(id);
    tae::v1::EnrolResponse response;
    grpc::Status status = stub_->Enrol(&ctx, request, &response);
    if (credential != nullptr) {
      *credential = response.credential();
    }
    return status;
  }
  grpc::Status Manifest() {
    grpc::ClientContext ctx;
    Prepare(&ctx);
    tae::v1::GetManifestRequest request;
    request.set_snapshot_id(std::string(64, 'a'));
    tae::v1::GetManifestResponse response;
    return stub_->GetManifest(&ctx, request, &response);
  }
  grpc::Status Offer(int64_t run, const std::string& manifest, const std::string& artifact = "") {
    grpc::ClientContext ctx;
    Prepare(&ctx);
    tae::v1::OfferCheckpointRequest request;
    request.set_run_id(run);
    request.set_attempt(1);
    request.set_step(5);
    request.set_manifest(manifest);
    request.set_artifact(artifact);
    tae::v1::OfferCheckpointResponse response;
    return stub_->OfferCheckpoint(&ctx, request, &response);
  }
  grpc::Status Put(const std::string& data) {
    grpc::ClientContext ctx;
    Prepare(&ctx);
    tae::v1::PutCheckpointBlobsRequest request;
    tae::v1::BlobChunk* chunk = request.add_chunks();
    chunk->set_hash(snapshot::Sha256Hex(data));
    chunk->set_offset(0);
    chunk->set_total_size(data.size());
    chunk->set_data(data);
    tae::v1::PutCheckpointBlobsResponse response;
    return stub_->PutCheckpointBlobs(&ctx, request, &response);
  }
  grpc::Status Commit(int64_t run, const std::string& manifest, const std::string& artifact = "") {
    grpc::ClientContext ctx;
    Prepare(&ctx);
    tae::v1::CommitCheckpointRequest request;
    request.set_run_id(run);
    request.set_attempt(1);
    request.set_step(5);
    request.set_manifest(manifest);
    request.set_artifact(artifact);
    tae::v1::CommitCheckpointResponse response;
    return stub_->CommitCheckpoint(&ctx, request, &response);
  }
  // Opens a stream, registers as `id`, sends `events` and returns whether taed acked them
  // (false: the stream ended first).
  bool RegisterAndSend(const std::string& id, const tae::v1::EventBatch& events) {
    grpc::ClientContext ctx;
    Prepare(&ctx);
    auto stream = stub_->Connect(&ctx);
    tae::v1::AgentMessage hello;
    hello.mutable_register_()->set_agent_id(id);
    hello.mutable_register_()->set_slots(1);
    hello.mutable_register_()->set_host("rogue");
    if (!stream->Write(hello)) {
      return false;
    }
    tae::v1::AgentMessage batch;
    *batch.mutable_events() = events;
    stream->Write(batch);
    tae::v1::TaedMessage in;
    bool acked = false;
    while (stream->Read(&in)) {
      if (in.has_ack()) {
        acked = true;
        break;
      }
    }
    ctx.TryCancel();
    stream->Finish().ok();  // cancelled by us
    return acked;
  }

 private:
  std::unique_ptr<tae::v1::AgentLink::Stub> stub_;
  std::string key_;
};

std::string Manifest(const std::string& data) {
  return snapshot::ManifestText({{"model.pt", 0644, data.size(), snapshot::Sha256Hex(data)}});
}

int StoredBlobs(const Cluster& cluster) {
  int n = 0;
  for (const auto& entry :
       std::filesystem::recursive_directory_iterator(cluster.home() + "/checkpoints")) {
    n += entry.is_regular_file() ? 1 : 0;
  }
  return n;
}

TEST_CASE(
    "a rogue agent with its own valid credential can touch no other agent's run, and revoking "
    "it locks out only it",
    "[security]") {
  Cluster cluster(1, 1);
  REQUIRE(cluster.started());
  TempDir gates;
  const std::string gate = gates.path() + "/open";
  std::filesystem::create_directories(cluster.dir().path() + "/job");
  cluster.dir().Write("job/run.sh", kGatedJob);
  const std::string spec =
      cluster.dir().Write("victim.toml",
                          "name = \"victim\"\n[train]\nseeds = [0]\n[job]\ncode = \"job\"\n"
                          "command = \"sh run.sh " +
                              gate + "\"\n");
  const std::string exp =
      std::to_string(cluster.TaectlJson({"submit", spec}).at("experiment").get<int64_t>());
  int64_t run = 0;
  REQUIRE(WaitUntil(
      [&] {
        nlohmann::json runs = cluster.TaectlJson({"runs", exp});
        run = runs.at(0).at("id");
        return runs.at(0).at("state") == "running";
      },
      60));
  const std::string r = "r" + std::to_string(run);

  // The enrolment token enrols and does nothing else; an id is enrolled once.
  AgentCalls enrolment(cluster, FirstLine(cluster.home() + "/agent.token"));
  CHECK(enrolment.Manifest().error_code() == grpc::StatusCode::UNAUTHENTICATED);
  CHECK(enrolment.Enrol("local-0").error_code() == grpc::StatusCode::ALREADY_EXISTS);
  CHECK(AgentCalls(cluster, std::string(64, 'f')).Enrol("x").error_code() ==
        grpc::StatusCode::UNAUTHENTICATED);
  std::string credential;
  REQUIRE(enrolment.Enrol("rogue-1", &credential).ok());
  CHECK(credential.rfind("rogue-1.", 0) == 0);
  CHECK(enrolment.Enrol("rogue-1").error_code() == grpc::StatusCode::ALREADY_EXISTS);

  AgentCalls rogue(cluster, credential);
  CHECK(rogue.Manifest().error_code() == grpc::StatusCode::NOT_FOUND);  // authenticated

  // Events: as local-0 the stream is closed before anything is taken; as itself the batch is
  // acked but nothing of it is stored.
  tae::v1::EventBatch batch;
  {
    tae::v1::Event* metric = batch.add_events();
    metric->set_seq(1);
    metric->set_run_id(run);
    metric->set_attempt(1);
    metric->mutable_metrics()->set_step(999);
    tae::v1::Scalar* value = metric->mutable_metrics()->add_values();
    value->set_key("stolen/metric");
    value->set_value(42);
    tae::v1::Event* log = batch.add_events();
    log->set_seq(2);
    log->set_run_id(run);
    log->set_attempt(1);
    log->mutable_log()->set_stream("stdout");
    log->mutable_log()->set_text("rogue line");
    tae::v1::Event* exited = batch.add_events();
    exited->set_seq(3);
    exited->set_run_id(run);
    exited->set_attempt(1);
    exited->mutable_exited()->set_exit_code(1);
  }
  CHECK_FALSE(rogue.RegisterAndSend("local-0", batch));
  CHECK(rogue.RegisterAndSend("rogue-1", batch));
  nlohmann::json after = cluster.TaectlJson({"runs", exp}).at(0);
  CHECK(after.at("state") == "running");
  CommandResult logs = cluster.Taectl({"logs", r});
  CHECK(logs.out.find("job line") != std::string::npos);
  CHECK(logs.out.find("rogue line") == std::string::npos);
  CommandResult exported = cluster.Taectl({"export", exp, "--format", "csv"});
  CHECK(exported.out.find("train/loss") != std::string::npos);
  CHECK(exported.out.find("stolen/metric") == std::string::npos);
  nlohmann::json agents = cluster.TaectlJson({"agents"});
  bool local_connected = false;
  for (const auto& agent : agents) {
    if (agent.at("id") == "local-0") {
      local_connected = agent.at("state") != "lost";
    }
  }
  CHECK(local_connected);

  // Checkpoints and artifacts: refused at every step, nothing stored.
  const std::string data = "weights that would be unpickled";
  {
    grpc::Status offered = rogue.Offer(run, Manifest(data));
    INFO(offered.error_message());
    CHECK(offered.error_code() == grpc::StatusCode::PERMISSION_DENIED);
  }
  CHECK(rogue.Offer(run, Manifest(data)).error_code() == grpc::StatusCode::PERMISSION_DENIED);
  CHECK(rogue.Offer(run, Manifest(data), "profile-p1").error_code() ==
        grpc::StatusCode::PERMISSION_DENIED);
  CHECK(rogue.Put(data).error_code() == grpc::StatusCode::PERMISSION_DENIED);
  CHECK(rogue.Commit(run, Manifest(data)).error_code() == grpc::StatusCode::PERMISSION_DENIED);
  CHECK(rogue.Commit(run, Manifest(data), "profile-p1").error_code() ==
        grpc::StatusCode::PERMISSION_DENIED);
  CHECK(cluster.TaectlJson({"checkpoints", r}).at("checkpoints").empty());
  CHECK(StoredBlobs(cluster) == 0);
  // The run's own agent is let through (the refusals above are about who asks).
  AgentCalls owner(cluster, FirstLine(cluster.home() + "/agents/local-0/agent.credential"));
  grpc::Status owned = owner.Offer(run, Manifest(data));
  INFO(owned.error_message());
  CHECK(owned.ok());
  // An upload nobody offered is refused even for it.
  CHECK(owner.Put("a blob no offer named").error_code() == grpc::StatusCode::PERMISSION_DENIED);

  // Revoked: locked out for good; the other agent goes on.
  CommandResult revoked = cluster.Taectl({"agents", "revoke", "rogue-1", "test"});
  INFO(revoked.out << revoked.err);
  CHECK(revoked.exit_code == 0);
  CHECK(rogue.Manifest().error_code() == grpc::StatusCode::UNAUTHENTICATED);
  CHECK(enrolment.Enrol("rogue-1").error_code() == grpc::StatusCode::PERMISSION_DENIED);
  CHECK(owner.Manifest().error_code() == grpc::StatusCode::NOT_FOUND);
  std::ofstream(gate).put('\n');
  CommandResult waited = cluster.Taectl({"wait", exp, "--timeout", "120"}, 150);
  CHECK(waited.exit_code == 0);
  CHECK(cluster.TaectlJson({"runs", exp}).at(0).at("state") == "succeeded");
}

TEST_CASE("a local agent's job gets no variable that leads to taed, its socket or a token",
          "[security]") {
  // A researcher's shell often exports TAE_HOME: taed, its local agents and (before) their jobs
  // inherited it, and a job could drive taed through $TAE_HOME/taed.sock.
  TempDir elsewhere;
  setenv("TAE_HOME", elsewhere.path().c_str(), 1);
  Cluster cluster(1, 1);  // its taectl and taed are given --home: TAE_HOME is only inherited
  unsetenv("TAE_HOME");
  REQUIRE(cluster.started());
  std::filesystem::create_directories(cluster.dir().path() + "/job");
  cluster.dir().Write("job/env.sh", "#!/bin/sh\nenv | sort\n");
  const std::string spec = cluster.dir().Write(
      "env.toml",
      "name = \"env\"\n[train]\nseeds = [0]\n[job]\ncode = \"job\"\ncommand = \"sh env.sh\"\n");
  CommandResult submitted = cluster.Taectl({"submit", spec, "--wait", "--timeout", "120"}, 150);
  INFO(submitted.out << submitted.err);
  REQUIRE(submitted.exit_code == 0);
  const int64_t run = cluster.TaectlJson({"runs", "env"}).at(0).at("id");
  CommandResult logs = cluster.Taectl({"logs", "r" + std::to_string(run)});
  INFO(logs.out);
  CHECK(logs.out.find("TAE_RUN_ID=" + std::to_string(run)) != std::string::npos);
  for (const char* name : {"TAE_HOME=", "TAE_AGENT_TOKEN=", "TAE_TLS_"}) {
    INFO(name);
    CHECK(logs.out.find(name) == std::string::npos);
  }
  CHECK(logs.out.find(elsewhere.path()) == std::string::npos);
  // What is left is the filesystem: a local agent's work dir is under taed's directory and the
  // job runs as the same user (docs/security.md, "What a job can reach").

  // Nor in its agent's /proc/PID/environ, which the same user can read: the agent zeroed the
  // token's bytes there, not only unset the variable.
  cluster.dir().Write("job/peek.sh", R"SH(#!/bin/sh
for d in /proc/[0-9]*; do
  if tr '\0' ' ' < $d/cmdline 2>/dev/null | grep -q 'tae-agent --taed'; then
    echo "AGENT_ENV $d: $(tr '\0' '|' < $d/environ)"
  fi
done
)SH");
  const std::string peek = cluster.dir().Write(
      "peek.toml",
      "name = \"peek\"\n[train]\nseeds = [0]\n[job]\ncode = \"job\"\ncommand = \"sh peek.sh\"\n");
  REQUIRE(cluster.Taectl({"submit", peek, "--wait", "--timeout", "120"}, 150).exit_code == 0);
  const int64_t peeked = cluster.TaectlJson({"runs", "peek"}).at(0).at("id");
  CommandResult seen = cluster.Taectl({"logs", "r" + std::to_string(peeked)});
  INFO(seen.out);
  CHECK(seen.out.find("AGENT_ENV /proc/") != std::string::npos);  // it found and read its agent
  // The local agent was given its own credential in TAE_AGENT_TOKEN (the enrolment token never
  // leaves taed for it); neither is there.
  for (const std::string& secret : {FirstLine(cluster.home() + "/agents/local-0/agent.credential"),
                                    FirstLine(cluster.home() + "/agent.token")}) {
    REQUIRE(secret.size() > 8);
    CHECK(seen.out.find(secret) == std::string::npos);
  }
  CHECK(seen.out.find("TAE_AGENT_TOKEN=") == std::string::npos);
}

TEST_CASE("a stranger's 100,000 unauthenticated calls grow taed's log by a few lines",
          "[security]") {
  Cluster cluster(0, 1);
  REQUIRE(cluster.started());
  const std::string log = cluster.home() + "/logs/taed.log";
  auto channel = grpc::CreateChannel(FirstLine(cluster.home() + "/agent.addr"),
                                     grpc::InsecureChannelCredentials());
  auto stub = tae::v1::AgentLink::NewStub(channel);
  auto call = [&](bool enrol) {
    grpc::ClientContext ctx;
    ctx.AddMetadata("authorization", "Bearer nobody.0123456789abcdef");
    if (enrol) {
      tae::v1::EnrolRequest request;
      request.set_agent_id("stranger");
      tae::v1::EnrolResponse response;
      return stub->Enrol(&ctx, request, &response).error_code();
    }
    tae::v1::GetManifestRequest request;
    request.set_snapshot_id(std::string(64, 'a'));
    tae::v1::GetManifestResponse response;
    return stub->GetManifest(&ctx, request, &response).error_code();
  };
  REQUIRE(call(false) == grpc::StatusCode::UNAUTHENTICATED);  // the first is written
  REQUIRE(call(true) == grpc::StatusCode::UNAUTHENTICATED);
  const uintmax_t before = std::filesystem::file_size(log);
  int refused = 0;
  for (int i = 0; i < 100000; ++i) {
    refused += call(i % 10 == 0) == grpc::StatusCode::UNAUTHENTICATED ? 1 : 0;
  }
  CHECK(refused == 100000);
  // Within the minute: nothing more (the next line, after it, says how many were dropped); on a
  // machine slow enough to take over a minute, one such line a minute.
  const uintmax_t grown = std::filesystem::file_size(log) - before;
  std::ifstream in(log);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  INFO(text.substr(std::min<size_t>(before, text.size())));
  CHECK(grown < 1024);
}

}  // namespace
}  // namespace tae::testing
