// The bad-input matrix: hostile specs, garbage and oversized calls, unauthenticated and
// misbehaving agents. Each is refused with a message naming what is wrong, taed stays up, and
// nothing stored changes.

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "tae/v1/agent_link.grpc.pb.h"
#include "tae/v1/control.grpc.pb.h"
#include "tests/integration/harness.h"

namespace tae::testing {
namespace {

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream buffer;
  buffer << in.rdbuf();
  std::string text = buffer.str();
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) {
    text.pop_back();
  }
  return text;
}

// What the store holds, as taectl sees it: experiments and their runs.
std::string State(Cluster& cluster) {
  return cluster.TaectlJson({"ls"}).dump() + cluster.TaectlJson({"snapshots"}).dump();
}

TEST_CASE("hostile specs are refused with their position and change nothing") {
  Cluster cluster(1, 1);
  const std::string before = State(cluster);
  const std::string deep = "name = \"x\"\na = " + std::string(5000, '[') + std::string(5000, ']');
  struct Case {
    std::string text;
    std::string message;
  };
  const std::vector<Case> cases = {
      {std::string("\x00\xff\xfe garbage \x01", 14), "bad.toml:"},
      {"name = \"x\"\n[model]\nlayers = -1\n", "bad.toml:3:10: model.layers"},
      {"name = \"x\"\n[model]\nlayers = 1e400\n", "bad.toml:3:"},
      {"name = \"x\"\n[train]\nlr = nan\n", "bad.toml:3:"},
      {"name = \"x\"\n[model]\nlayrs = 2\n", "did you mean"},
      {"name = \"../../etc\"\n", "bad.toml:1:"},
      {"name = \"x\"\n[grid]\n\"train.lr\" = [" + std::string(20000, '1') + "]\n", "bad.toml:3:"},
      {"name = \"x\"\n[train]\nseeds = [" +
           [] {
             std::string s;
             for (int i = 0; i < 20000; ++i) {
               s += (i ? "," : "") + std::to_string(i);
             }
             return s;
           }() +
           "]\n",
       "at most 10000"},
      {deep, "bad.toml:"},
      {"name = \"x\"\n[job]\ncommand = \"x {train.nope}\"\n", "unknown placeholder"},
      {"name = \"x\"\ndescription = \"" + std::string(2 << 20, 'd') + "\"\n", ""},
  };
  int tried = 0;
  for (const Case& c : cases) {
    const std::string spec = cluster.dir().Write("bad.toml", c.text);
    CommandResult submitted = cluster.Taectl({"submit", spec});
    INFO(c.text.substr(0, 80) << " -> " << submitted.err);
    CHECK(submitted.exit_code != 0);
    CHECK(submitted.err.find(c.message) != std::string::npos);
    ++tried;
  }
  CHECK(State(cluster) == before);
  WARN("hostile specs tried: " << tried);
}

TEST_CASE("garbage and oversized control calls are refused and taed stays up") {
  Cluster cluster(1, 1);
  const std::string before = State(cluster);
  auto stub = tae::v1::Control::NewStub(grpc::CreateChannel(
      "unix://" + cluster.home() + "/taed.sock", grpc::InsecureChannelCredentials()));
  int tried = 0;
  {
    tae::v1::SubmitRequest request;
    request.set_spec_text(std::string((1 << 20) + 1, '#'));
    tae::v1::SubmitResponse response;
    grpc::ClientContext ctx;
    grpc::Status status = stub->Submit(&ctx, request, &response);
    CHECK(status.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
    CHECK(status.error_message().find("spec_text") == 0);
    ++tried;
  }
  {
    tae::v1::SubmitRequest request;
    request.set_spec_text("name = \"x\"\n");
    for (int i = 0; i < 300; ++i) {
      request.add_overrides("model.layers=2");
    }
    tae::v1::SubmitResponse response;
    grpc::ClientContext ctx;
    grpc::Status status = stub->Submit(&ctx, request, &response);
    CHECK(status.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
    CHECK(status.error_message().find("overrides") == 0);
    ++tried;
  }
  {
    tae::v1::PutBlobsRequest request;  // past the 16 MiB message limit
    tae::v1::BlobChunk* chunk = request.add_chunks();
    chunk->set_hash(std::string(64, 'a'));
    chunk->set_total_size(20 << 20);
    chunk->set_data(std::string(20 << 20, 'z'));
    tae::v1::PutBlobsResponse response;
    grpc::ClientContext ctx;
    grpc::Status status = stub->PutBlobs(&ctx, request, &response);
    CHECK(status.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED);
    ++tried;
  }
  {
    tae::v1::LogsRequest request;
    request.set_run_id(1);
    request.set_limit(-5);
    tae::v1::LogsResponse response;
    grpc::ClientContext ctx;
    CHECK(stub->Logs(&ctx, request, &response).error_code() == grpc::StatusCode::INVALID_ARGUMENT);
    ++tried;
  }
  {
    tae::v1::ScrapRequest request;
    request.add_ids("../../../etc/passwd");
    tae::v1::ScrapResponse response;
    grpc::ClientContext ctx;
    grpc::Status status = stub->Scrap(&ctx, request, &response);
    CHECK(status.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
    CHECK(status.error_message().find("ids: ") == 0);
    ++tried;
  }
  // Raw garbage on the control socket.
  for (const std::string& garbage :
       {std::string("GET / HTTP/1.1\r\nHost: x\r\n\r\n"), std::string(100000, '\xff'),
        std::string("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n") + std::string(5000, '\0')}) {
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    const std::string path = cluster.home() + "/taed.sock";
    std::snprintf(addr.sun_path, sizeof(addr.sun_path), "%s", path.c_str());
    REQUIRE(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0);
    (void)!write(fd, garbage.data(), garbage.size());
    close(fd);
    ++tried;
  }
  CHECK(State(cluster) == before);  // taed answers, nothing changed
  WARN("bad control calls tried: " << tried);
}

TEST_CASE(
    "agents without the token are refused and a misbehaving agent's bad events are not stored") {
  Cluster cluster(1, 1);
  const std::string address = ReadFile(cluster.home() + "/agent.addr");
  const std::string token = ReadFile(cluster.home() + "/agent.token");
  REQUIRE(!token.empty());
  auto stub =
      tae::v1::AgentLink::NewStub(grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
  int tried = 0;
  // The enrolment token itself only enrols: a stream with it is refused like no token at all.
  for (const std::string& header :
       {std::string(), std::string("Bearer wrong"), "Bearer " + token + "x", "bearer " + token,
        token, "Bearer " + token, "Bearer intruder." + std::string(64, '0')}) {
    grpc::ClientContext ctx;
    if (!header.empty()) {
      ctx.AddMetadata("authorization", header);
    }
    auto stream = stub->Connect(&ctx);
    tae::v1::AgentMessage hello;
    hello.mutable_register_()->set_agent_id("intruder");
    stream->Write(hello);
    stream->WritesDone();
    tae::v1::TaedMessage reply;
    while (stream->Read(&reply)) {
    }
    CHECK(stream->Finish().error_code() == grpc::StatusCode::UNAUTHENTICATED);
    ++tried;
  }
  for (int call = 0; call < 2; ++call) {
    grpc::ClientContext ctx;
    ctx.AddMetadata("authorization", "Bearer nope");
    grpc::Status status;
    if (call == 0) {
      tae::v1::GetManifestRequest request;
      tae::v1::GetManifestResponse response;
      status = stub->GetManifest(&ctx, request, &response);
    } else {
      tae::v1::FetchBlobsRequest request;
      request.add_hashes(std::string(64, 'a'));
      auto reader = stub->FetchBlobs(&ctx, request);
      tae::v1::FetchBlobsChunk chunk;
      while (reader->Read(&chunk)) {
      }
      status = reader->Finish();
    }
    CHECK(status.error_code() == grpc::StatusCode::UNAUTHENTICATED);
    ++tried;
  }
  nlohmann::json agents = cluster.TaectlJson({"agents"});
  for (const auto& agent : agents) {
    CHECK(agent.at("id") != "intruder");
  }

  // An enrolled agent that sends events beyond the limits (for a run it does not even hold):
  // they are acked (so it cannot wedge itself) but not stored, and taed stays up.
  std::string credential;
  {
    grpc::ClientContext ctx;
    ctx.AddMetadata("authorization", "Bearer " + token);
    tae::v1::EnrolRequest request;
    request.set_agent_id("rogue");
    tae::v1::EnrolResponse response;
    REQUIRE(stub->Enrol(&ctx, request, &response).ok());
    credential = response.credential();
  }
  const std::string spec = cluster.dir().Write("one.toml",
                                               "name = \"one\"\n[train]\nseeds = [0]\n"
                                               "[resources]\nlabels = { pool = \"nobody\" }\n");
  nlohmann::json submitted = cluster.TaectlJson({"submit", spec});
  const int64_t exp = submitted.at("experiment");
  const int64_t run = cluster.TaectlJson({"runs", std::to_string(exp)})[0].at("id");
  {
    grpc::ClientContext ctx;
    ctx.AddMetadata("authorization", "Bearer " + credential);
    auto stream = stub->Connect(&ctx);
    tae::v1::AgentMessage hello;
    hello.mutable_register_()->set_agent_id("rogue");
    hello.mutable_register_()->set_slots(1);
    REQUIRE(stream->Write(hello));
    tae::v1::AgentMessage batch;
    auto add = [&](uint64_t seq) {
      tae::v1::Event* event = batch.mutable_events()->add_events();
      event->set_seq(seq);
      event->set_run_id(run);
      event->set_attempt(1);
      return event;
    };
    add(1)->mutable_log()->set_text(std::string(1 << 20, 'L'));  // a 1 MiB log line
    add(2)->mutable_log()->set_stream("/etc/passwd");
    tae::v1::Scalar* bad_key = add(3)->mutable_metrics()->add_values();
    bad_key->set_key("has space");
    bad_key->set_value(1);
    tae::v1::MetricLine* many = add(4)->mutable_metrics();
    for (int i = 0; i < 2000; ++i) {
      tae::v1::Scalar* s = many->add_values();
      s->set_key("k" + std::to_string(i));
      s->set_value(i);
    }
    (*add(5)->mutable_meta()->mutable_values())["x"] = std::string(5000, 'm');
    REQUIRE(stream->Write(batch));
    tried += 5;
    tae::v1::TaedMessage reply;
    bool acked = false;
    while (!acked && stream->Read(&reply)) {
      acked = reply.has_ack() && reply.ack().seq() == 5;
    }
    CHECK(acked);
    ctx.TryCancel();
  }
  CommandResult logs = cluster.Taectl({"logs", "r" + std::to_string(run), "--json"});
  REQUIRE(logs.exit_code == 0);
  CHECK(nlohmann::json::parse(logs.out).empty());
  CHECK(cluster.TaectlJson({"runs", std::to_string(exp)})[0].value("last_step", 0) == 0);
  CHECK(cluster.TaectlJson({"runs", std::to_string(exp)})[0].at("state") == "queued");
  WARN("bad agent inputs tried: " << tried);
}

TEST_CASE("taed refuses an agent listener beyond loopback without TLS") {
  TempDir home;
  CommandResult started = RunCommand(
      {BinPath("taed"), "--home", home.path(), "--agents", "0", "--agent-listen", "0.0.0.0:0"}, 60);
  CHECK(started.exit_code != 0);
  CHECK(started.err.find("0.0.0.0:0") != std::string::npos);
}

}  // namespace
}  // namespace tae::testing
