// The gke provider end to end: taed, the real kubectl and tests/fake_k8s with its kubelet (an
// admitted JobSet's pods run as local tae-agent processes, mounts mapped to directories). A
// study on a gke pool waits, with Kueue's words, while Kueue holds its slice; runs as a 2-host
// gang on the slice once Kueue admits it; the idle slice is given back; an eviction mid-run
// requeues the run as the worker's fault (max_attempts = 1 still finishes) and it resumes from
// its checkpoint on a new JobSet; a lost node, and a pod that fails before its agent registers,
// do the same; `taectl down` leaves nothing of
// TAE's in the namespace and everything else as it was.
// Needs kubectl and python3; elsewhere it says it was skipped.

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "grpcpp/create_channel.h"
#include "nlohmann/json.hpp"
#include "tae/v1/agent_link.grpc.pb.h"
#include "tests/integration/fake_k8s.h"
#include "tests/integration/fake_tpu_api.h"  // ReadFile
#include "tests/integration/harness.h"
#include "tests/skip.h"

namespace tae::testing {
namespace {

// A loopback port nothing listens on now (the kernel's pick): taed's agent port, which the
// pool file must name before taed starts, as a real pool names an address the cluster reaches.
int FreeLoopbackPort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(fd >= 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0);
  socklen_t len = sizeof(addr);
  REQUIRE(getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0);
  close(fd);
  return ntohs(addr.sin_port);
}

std::string Write(const TempDir& dir, const std::string& name, const nlohmann::json& o) {
  const std::string path = dir.path() + "/" + name;
  std::ofstream(path) << o.dump(2);
  return path;
}

// The namespace's objects of `kind`, by name.
std::set<std::string> Names(const FakeK8s& k8s, const std::string& kind,
                            const std::string& selector = "") {
  std::vector<std::string> args = {"get", kind};
  if (!selector.empty()) {
    args.insert(args.end(), {"-l", selector});
  }
  std::set<std::string> names;
  const nlohmann::json listed = k8s.KubectlJson(args);  // held: the loop reads a member of it
  for (const nlohmann::json& item : listed.at("items")) {
    names.insert(item.at("metadata").at("name").get<std::string>());
  }
  return names;
}

nlohmann::json OnlyRun(Cluster& cluster, const std::string& experiment) {
  nlohmann::json runs = cluster.TaectlJson({"runs", experiment});
  REQUIRE(runs.size() == 1);
  return runs[0];
}

std::set<std::string> LiveAgents(Cluster& cluster) {
  std::set<std::string> out;
  for (const nlohmann::json& agent : cluster.TaectlJson({"agents"})) {
    if (agent.at("state") != "lost") {
      out.insert(agent.at("id").get<std::string>());
    }
  }
  return out;
}

// "subject: detail" of every gke provider event.
std::vector<std::string> Events(Cluster& cluster, const std::string& event = "") {
  std::vector<std::string> out;
  const nlohmann::json shown = cluster.TaectlJson({"agents", "--provider"});
  for (const nlohmann::json& e : shown.at("provider_events")) {
    if (e.at("provider") == "gke" && (event.empty() || e.at("event") == event)) {
      out.push_back(e.at("subject").get<std::string>() + ": " + e.at("detail").get<std::string>());
    }
  }
  return out;
}

size_t Count(const std::vector<std::string>& lines, const std::string& text) {
  size_t n = 0;
  for (const std::string& line : lines) {
    n += absl::StrContains(line, text) ? 1 : 0;
  }
  return n;
}

// What taed answers an agent that presents `credential` and registers as `id`: OK once it is
// registered, UNAUTHENTICATED for a credential that works no longer.
grpc::StatusCode RegisterWith(const Cluster& cluster, const std::string& id,
                              const std::string& credential) {
  auto stub = tae::v1::AgentLink::NewStub(grpc::CreateChannel(
      FirstLine(cluster.home() + "/agent.addr"), grpc::InsecureChannelCredentials()));
  grpc::ClientContext ctx;
  ctx.AddMetadata("authorization", "Bearer " + credential);
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  auto stream = stub->Connect(&ctx);
  tae::v1::AgentMessage hello;
  hello.mutable_register_()->set_agent_id(id);
  hello.mutable_register_()->set_slots(1);
  hello.mutable_register_()->set_host("kept-a-copy");
  stream->Write(hello);
  tae::v1::TaedMessage in;
  while (stream->Read(&in)) {
    if (in.has_registered()) {
      ctx.TryCancel();
      stream->Finish().ok();
      return grpc::StatusCode::OK;
    }
  }
  return stream->Finish().error_code();
}

// A cluster with the fake's kubelet, a LocalQueue `tpu-queue` in namespace ml (no quota yet),
// and a taed whose gke pool v5e asks for 2-host slices (2x4 chips, 4 a host) there.
struct GkeFixture {
  FakeK8s k8s{"ml", /*kubelet=*/true};
  std::unique_ptr<Cluster> cluster;

  bool Start(double idle_timeout_s, double start_timeout_s = 120) {
    if (!k8s.missing().empty()) {
      return false;
    }
    const nlohmann::json queue = {{"apiVersion", "kueue.x-k8s.io/v1beta1"},
                                  {"kind", "LocalQueue"},
                                  {"metadata", {{"name", "tpu-queue"}, {"namespace", "ml"}}},
                                  {"spec", {{"clusterQueue", "tpu"}}}};
    REQUIRE(k8s.Kubectl({"apply", "-f", Write(k8s.dir(), "queue.json", queue)}).exit_code == 0);
    const int port = FreeLoopbackPort();
    std::vector<std::pair<std::string, std::string>> vars = {
        {"TAE_TPU_POLL", "0.3"},
        {"TAE_AGENT_GRACE", "2"},
        {"TAE_RETRY_BACKOFF", "0.2"},
        {"TAE_AGENT_LISTEN", absl::StrCat("127.0.0.1:", port)}};
    for (const auto& [name, value] : vars) {
      setenv(name.c_str(), value.c_str(), 1);
    }
    k8s.SetEnv(true);
    cluster = std::make_unique<Cluster>(0, 1, [&](const std::string& home) {
      std::ofstream(home + "/gke-pools.toml")
          << "[[pool]]\nname = \"v5e\"\nnamespace = \"ml\"\nlocal_queue = \"tpu-queue\"\n"
          << "tpu_type = \"tpu-v5-lite-podslice\"\ntopology = \"2x4\"\nchips_per_host = 4\n"
          << "image = \"registry.example.org/tae-agent:1\"\ntaed = \"127.0.0.1:" << port
          << "\"\nmax_slices = 1\nstart_timeout_s = " << start_timeout_s
          << "\nidle_timeout_s = " << idle_timeout_s << "\nlabels = { accelerator = \"tpu\" }\n";
    });
    k8s.SetEnv(false);
    for (const auto& [name, value] : vars) {
      unsetenv(name.c_str());
    }
    return cluster->started();
  }
};

std::string GkeSpec(const std::string& name, int steps, int checkpoint_every,
                    int max_attempts = 3) {
  std::string spec = CopyTaskSpec(name, 2, steps, checkpoint_every);
  const std::string attempts = "max_attempts = 3\n";
  REQUIRE(spec.find(attempts) != std::string::npos);
  spec.replace(spec.find(attempts), attempts.size(),
               absl::StrCat("max_attempts = ", max_attempts, "\n"));
  return spec + "labels = { accelerator = \"tpu\" }\n";
}

}  // namespace

TEST_CASE(
    "a study on a gke pool waits with Kueue's words while its slice is held, runs as a 2-host "
    "gang on the slice once admitted, the idle slice is given back, and taectl down leaves "
    "nothing of TAE's in the namespace",
    "[gke]") {
  GkeFixture fx;
  if (!fx.k8s.missing().empty()) {
    TAE_SKIP(fx.k8s.missing());
  }
  REQUIRE(fx.Start(/*idle_timeout_s=*/2));
  Cluster& cluster = *fx.cluster;
  FakeK8s& k8s = fx.k8s;
  INFO("taed log:\n" << ReadFile(cluster.home() + "/logs/taed.log"));
  // Someone else's objects in the same namespace: TAE never touches them.
  const nlohmann::json foreign = {
      {"apiVersion", "v1"},
      {"kind", "Secret"},
      {"metadata", {{"name", "tae-v5e-9"}, {"namespace", "ml"}, {"labels", {{"team", "x"}}}}},
      {"stringData", {{"k", "v"}}}};
  REQUIRE(k8s.Kubectl({"apply", "-f", Write(k8s.dir(), "foreign.json", foreign)}).exit_code == 0);

  // 1. No quota: the slice is asked for and Kueue holds it; the run says why it waits.
  REQUIRE(cluster.Taectl({"submit", cluster.dir().Write("a.toml", GkeSpec("gke-a", 30, 0))})
              .exit_code == 0);
  std::string reason;
  const bool held = WaitUntil(
      [&] {
        const nlohmann::json queue = cluster.TaectlJson({"queue"});
        reason = queue.size() == 1 ? queue[0].value("reason", "") : "";
        return absl::StrContains(reason, "gke slice tae-v5e-1: waiting for quota");
      },
      60);
  INFO("events:\n" << nlohmann::json(Events(cluster)).dump(1));
  INFO("reason: " << reason);
  REQUIRE(held);
  CHECK(absl::StrContains(reason, "insufficient unused quota for google.com/tpu"));
  CHECK(Names(k8s, "jobsets.jobset.x-k8s.io", "tae.dev/owned=true") ==
        std::set<std::string>{"tae-v5e-1"});
  CHECK(Names(k8s, "secrets", "tae.dev/owned=true") == std::set<std::string>{"tae-v5e-1"});
  const nlohmann::json slices = cluster.TaectlJson({"agents", "--provider"}).at("vms");
  INFO(slices.dump());
  REQUIRE(slices.size() == 1);
  CHECK(slices[0].at("provider") == "gke");
  CHECK(slices[0].at("state") == "waiting");
  CHECK(slices[0].at("zone") == "ml");
  CHECK(absl::StrContains(slices[0].at("detail").get<std::string>(), "waiting for quota"));
  CHECK(LiveAgents(cluster).empty());  // no pods while Kueue holds it
  const std::string plain = cluster.Taectl({"agents"}).out;
  INFO(plain);
  CHECK(absl::StrContains(plain,
                          "gke slice tae-v5e-1 (pool v5e, namespace ml): waiting: waiting "
                          "for quota: couldn't assign flavors"));
  // One slice is asked for, however many rounds the wait lasts.
  CHECK(Count(Events(cluster, "create"), "kubectl") == 1);

  // 2. Quota: Kueue admits the slice, its pods' agents dial taed, and the gang runs on them.
  k8s.Control("POST", "quota", {{"chips", 8}});
  CommandResult waited = cluster.Taectl({"wait", "gke-a", "--timeout", "240"}, 300);
  INFO(waited.out << waited.err);
  INFO("pods: " << k8s.Control("GET", "pods").dump());
  REQUIRE(waited.exit_code == 0);
  const nlohmann::json run = OnlyRun(cluster, "gke-a");
  CHECK(run.at("state") == "succeeded");
  const std::string shown =
      cluster.Taectl({"show", "r" + std::to_string(run.at("id").get<int64_t>())}).out;
  INFO(shown);
  CHECK(absl::StrContains(shown, "tae-v5e-1-w0, tae-v5e-1-w1"));
  std::map<std::string, nlohmann::json> agents;
  for (const nlohmann::json& agent : cluster.TaectlJson({"agents"})) {
    agents[agent.at("id").get<std::string>()] = agent;
  }
  for (int w = 0; w < 2; ++w) {
    const std::string id = "tae-v5e-1-w" + std::to_string(w);
    REQUIRE(agents.count(id) == 1);
    const nlohmann::json& labels = agents.at(id).at("labels");
    INFO(labels.dump());
    CHECK(labels.at("slice") == "tae-v5e-1");
    CHECK(labels.at("worker") == std::to_string(w));
    CHECK(labels.at("pool") == "v5e");
    CHECK(labels.at("accelerator") == "tpu");
  }
  // Each pod's agent took its own credential out of the pod's credential volume as it started:
  // nothing there for its jobs to read.
  // (The kubelet keeps a pod's directory after the pod ends.)
  int pod_dirs = 0;
  for (const auto& pod : std::filesystem::directory_iterator(k8s.dir().path() + "/pods/ml")) {
    if (!absl::StartsWith(pod.path().filename().string(), "tae-v5e-1-")) {
      continue;
    }
    ++pod_dirs;
    const std::filesystem::path volume = pod.path() / "volumes" / "credential";
    INFO(volume);
    CHECK(std::filesystem::is_directory(volume));
    CHECK(std::filesystem::is_empty(volume));
  }
  CHECK(pod_dirs == 2);
  // The agents' credentials went into the Secret only: never into a provider event.
  const nlohmann::json secret = k8s.KubectlJson({"get", "secret", "tae-v5e-1"});
  std::vector<std::string> tokens;
  for (const auto& [key, value] : secret.at("data").items()) {
    std::string token;
    REQUIRE(absl::Base64Unescape(value.get<std::string>(), &token));
    CHECK(absl::StartsWith(token, "tae-v5e-1-w" + key.substr(key.size() - 1) + "."));
    tokens.push_back(token);
  }
  REQUIRE(tokens.size() == 2);
  for (const std::string& line : Events(cluster)) {
    for (const std::string& token : tokens) {
      CHECK_FALSE(absl::StrContains(line, token));
    }
  }

  // 3. Nothing more to do: after idle_timeout_s the slice is given back, its Secret with it.
  const bool given_back = WaitUntil(
      [&] { return Names(k8s, "jobsets.jobset.x-k8s.io", "tae.dev/owned=true").empty(); }, 60);
  INFO("events:\n" << nlohmann::json(Events(cluster)).dump(1));
  REQUIRE(given_back);
  CHECK(Count(Events(cluster, "delete"), "tae-v5e-1: idle for ") == 1);
  CHECK(WaitUntil([&] { return Names(k8s, "secrets", "tae.dev/owned=true").empty(); }, 30));
  CHECK(WaitUntil([&] { return k8s.Control("GET", "pods").empty(); }, 30));
  // A job on the slice that kept a copy of its pod's credential holds nothing once the slice is
  // deleted: the credentials died with it.
  for (size_t w = 0; w < tokens.size(); ++w) {
    CHECK(RegisterWith(cluster, "tae-v5e-1-w" + std::to_string(w), tokens[w]) ==
          grpc::StatusCode::UNAUTHENTICATED);
  }

  // 4. Work again, then the day ends: `taectl down` deletes what TAE made there, and only that.
  REQUIRE(cluster.Taectl({"submit", cluster.dir().Write("b.toml", GkeSpec("gke-b", 2000, 0))})
              .exit_code == 0);
  REQUIRE(WaitUntil([&] { return OnlyRun(cluster, "gke-b").at("state") == "running"; }, 120));
  // taed shows the slice as its next listing finds it.
  CHECK(WaitUntil(
      [&] {
        const nlohmann::json vms = cluster.TaectlJson({"agents", "--provider"}).at("vms");
        return vms.size() == 1 && vms[0].at("state") == "admitted";
      },
      30));
  CommandResult down = cluster.Taectl({"down"}, 120);
  INFO(down.out << down.err);
  REQUIRE(down.exit_code == 0);
  CHECK(absl::StrContains(down.out,
                          "giving back 1 GKE slice(s) (their JobSets deleted):\n  "
                          "tae-v5e-1  namespace ml  admitted  (pool v5e)"));
  CHECK_FALSE(absl::StrContains(down.out, "TPU VM"));
  CHECK(Names(k8s, "jobsets.jobset.x-k8s.io").empty());
  CHECK(Names(k8s, "secrets") == std::set<std::string>{"tae-v5e-9"});
  CHECK(Names(k8s, "localqueues.kueue.x-k8s.io") == std::set<std::string>{"tpu-queue"});
  CHECK(WaitUntil([&] { return k8s.Control("GET", "pods").empty(); }, 30));
}

TEST_CASE(
    "a run on a gke slice that Kueue evicts, or whose node is lost, goes back to the queue as "
    "the worker's fault and resumes from its checkpoint on a new JobSet",
    "[gke]") {
  GkeFixture fx;
  if (!fx.k8s.missing().empty()) {
    TAE_SKIP(fx.k8s.missing());
  }
  // 30 s: room for a loaded machine to start a good slice's agents (10 s was not, beside the
  // engine's tests on 2 cores: a second slice timed out), short enough for the bad one.
  REQUIRE(fx.Start(/*idle_timeout_s=*/600, /*start_timeout_s=*/30));
  Cluster& cluster = *fx.cluster;
  FakeK8s& k8s = fx.k8s;
  INFO("taed log:\n" << ReadFile(cluster.home() + "/logs/taed.log"));
  k8s.Control("POST", "quota", {{"chips", 8}});
  // The first slice's pods cannot pull their image: admitted, but no agent registers within
  // start_timeout_s, so TAE deletes it with the kubelet's words. Then the first pod of the next
  // fails before its agent registers: that JobSet fails, and TAE replaces it too.
  k8s.Control("POST", "pull_fail", {{"count", 2}});
  k8s.Control("POST", "fail_pods", {{"count", 1}});
  // max_attempts = 1: an attempt the cluster ends must not count, or the run would fail.
  REQUIRE(cluster
              .Taectl({"submit", cluster.dir().Write(
                                     "c.toml", GkeSpec("gke-c", 600, 10, /*max_attempts=*/1))})
              .exit_code == 0);
  const std::string run_id =
      "r" + std::to_string(OnlyRun(cluster, "gke-c").at("id").get<int64_t>());
  auto checkpointed_past = [&](int64_t step) {
    return WaitUntil(
        [&] {
          const nlohmann::json listed = cluster.TaectlJson({"checkpoints", run_id});
          for (const nlohmann::json& c : listed.at("checkpoints")) {
            if (c.value("step", int64_t{0}) > step) {
              return true;
            }
          }
          return false;
        },
        180);
  };
  // TAE's JobSets now, name -> uid, from one listing (a JobSet may go between two calls).
  auto slices = [&] {
    std::map<std::string, std::string> out;
    const nlohmann::json listed =
        k8s.KubectlJson({"get", "jobsets.jobset.x-k8s.io", "-l", "tae.dev/owned=true"});
    for (const nlohmann::json& item : listed.at("items")) {
      out[item.at("metadata").at("name")] = item.at("metadata").at("uid");
    }
    return out;
  };

  REQUIRE(checkpointed_past(0));
  CHECK(OnlyRun(cluster, "gke-c").at("attempt") == 1);  // the failed slice never ran it
  INFO("events:\n" << nlohmann::json(Events(cluster)).dump(1));
  const std::map<std::string, std::string> first = slices();
  REQUIRE(first.size() == 1);  // the slice that replaced the failed one
  const std::string first_uid = first.begin()->second;

  // 1. Kueue evicts the slice (a higher-priority workload): its pods stop, the run goes back
  // to the queue, TAE replaces the JobSet, and the run goes on from its checkpoint.
  k8s.Control("POST", "evict", {{"namespace", "ml"}, {"jobset", first.begin()->first}});
  const bool replaced = WaitUntil(
      [&] {
        const std::map<std::string, std::string> now = slices();
        return now.size() == 1 && now.begin()->second != first_uid;
      },
      120);
  INFO("events:\n" << nlohmann::json(Events(cluster)).dump(1));
  REQUIRE(replaced);
  CHECK(Count(Events(cluster, "delete"), "evicted: evicted by Kueue: Preempted") == 1);
  REQUIRE(WaitUntil([&] { return OnlyRun(cluster, "gke-c").value("attempt", 0) >= 2; }, 120));
  const int64_t before_loss = [&] {
    int64_t best = 0;
    const nlohmann::json listed = cluster.TaectlJson({"checkpoints", run_id});
    for (const nlohmann::json& c : listed.at("checkpoints")) {
      best = std::max(best, c.value("step", int64_t{0}));
    }
    return best;
  }();
  REQUIRE(checkpointed_past(before_loss));

  // 2. The node under the new slice is lost: its processes die without a word, the JobSet
  // fails, TAE replaces it, and the run comes back once more.
  const std::map<std::string, std::string> replacing = slices();
  REQUIRE(replacing.size() == 1);
  const std::string second = replacing.begin()->first;
  const std::string second_uid = replacing.begin()->second;
  const nlohmann::json killed =
      k8s.Control("POST", "node_lost", {{"namespace", "ml"}, {"jobset", second}});
  CHECK(killed.at("killed").size() == 2);  // the two agents
  CommandResult waited = cluster.Taectl({"wait", "gke-c", "--timeout", "400"}, 460);
  INFO(waited.out << waited.err);
  INFO("events:\n" << nlohmann::json(Events(cluster)).dump(1));
  REQUIRE(waited.exit_code == 0);
  const nlohmann::json run = OnlyRun(cluster, "gke-c");
  CHECK(run.at("state") == "succeeded");
  CHECK(run.at("attempt").get<int>() >= 3);
  CHECK(Count(Events(cluster, "delete"),
              "failed to start: 0 of its 2 agents registered within start_timeout_s = 30 s of its "
              "admission; pod tae-v5e-") == 1);
  CHECK(Count(Events(cluster, "delete"),
              "Pending: ErrImagePull: failed to pull image "
              "\"registry.example.org/tae-agent:1\": not found") == 1);
  // The pod that failed at its start, then the lost node.
  CHECK(Count(Events(cluster, "delete"), "failed: the JobSet failed: FailedJobs") == 2);
  CHECK(Count(Events(cluster, "delete"), "exited with code 1") == 1);
  CHECK(Count(Events(cluster, "delete"), "NodeLost") == 1);
  const std::map<std::string, std::string> last = slices();
  REQUIRE(last.size() == 1);
  CHECK(last.begin()->second != second_uid);
  // Each new slice's agents got the uploaded checkpoint, and training went on from it.
  CommandResult logs = cluster.Taectl({"logs", run_id});
  const std::string text = logs.out + logs.err;
  INFO(text);
  CHECK(absl::StrContains(text, "restored into TAE_CHECKPOINT_DIR"));
  CHECK(absl::StrContains(text, "resumed after step"));
}

}  // namespace tae::testing
