// The real gcloud CLI against the fake Cloud TPU v2 REST API (tests/fake_tpu/fake_tpu.py) on
// loopback: the commands the gcloud-tpu provider will run, and what gcloud sends for them.
// Where gcloud (or python3) is absent each test warns and returns.

#include <signal.h>
#include <sys/wait.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdlib>
#include <fstream>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "tests/integration/fake_tpu_api.h"
#include "tests/integration/harness.h"
#include "tests/skip.h"

namespace tae::testing {
namespace {

std::string NodePath(const std::string& zone, const std::string& name = "") {
  std::string path = std::string("/v2/projects/") + kProject + "/locations/" + zone + "/nodes";
  return name.empty() ? path : path + "/" + name;
}

}  // namespace

TEST_CASE("gcloud creates a v4-8 node on the fake TPU API and describe shows it READY",
          "[gcloud]") {
  FakeTpu fake;
  SKIP_WITHOUT_GCLOUD(fake);
  CommandResult create = fake.Create("tae-a", kZone, "v4-8");
  INFO("create: " << create.out << create.err);
  REQUIRE(create.exit_code == 0);
  nlohmann::json node = fake.Describe("tae-a");
  CHECK(node.at("name") ==
        std::string("projects/") + kProject + "/locations/" + kZone + "/nodes/tae-a");
  CHECK(node.at("state") == "READY");
  CHECK(node.at("acceleratorType") == "v4-8");
  CHECK(node.at("runtimeVersion") == kVersion);
  REQUIRE(node.at("networkEndpoints").size() == 1);
  CHECK_FALSE(node.at("networkEndpoints")[0].at("ipAddress").get<std::string>().empty());

  // The requests gcloud sent: the create, polls of its operation until done, then describe's GET.
  nlohmann::json requests = fake.Control("GET", "requests");
  REQUIRE(requests.size() >= 3);
  CHECK(requests[0].at("method") == "POST");
  CHECK(requests[0].at("path") == NodePath(kZone));
  CHECK(requests[0].at("query").at("nodeId") == "tae-a");
  std::string op_path = requests[1].at("path");
  CHECK(requests[1].at("method") == "GET");
  CHECK(op_path.rfind(std::string("/v2/projects/") + kProject + "/locations/" + kZone +
                          "/operations/operation-",
                      0) == 0);
  CHECK(requests.back().at("path") == NodePath(kZone, "tae-a"));
}

TEST_CASE("a v4-32 node has four workers and list shows both nodes", "[gcloud]") {
  FakeTpu fake;
  SKIP_WITHOUT_GCLOUD(fake);
  REQUIRE(fake.Create("tae-small", kZone, "v4-8").exit_code == 0);
  CommandResult create = fake.Create("tae-big", kZone, "v4-32");
  INFO("create: " << create.out << create.err);
  REQUIRE(create.exit_code == 0);
  nlohmann::json big = fake.Describe("tae-big");
  CHECK(big.at("state") == "READY");
  REQUIRE(big.at("networkEndpoints").size() == 4);
  std::vector<std::string> ips;
  for (const auto& endpoint : big.at("networkEndpoints")) {
    ips.push_back(endpoint.at("ipAddress"));
  }
  std::sort(ips.begin(), ips.end());
  CHECK(std::unique(ips.begin(), ips.end()) == ips.end());
  std::vector<std::string> names = fake.List();
  std::sort(names.begin(), names.end());
  CHECK(names == std::vector<std::string>{"tae-big", "tae-small"});
  // A `value()` format the provider can parse without JSON: name, state, worker IPs.
  CommandResult value = fake.Gcloud({"compute", "tpus", "tpu-vm", "list", "--zone", kZone,
                                     "--format=value(name.basename(),state,"
                                     "networkEndpoints[].ipAddress.list())"});
  INFO("list: " << value.out << value.err);
  REQUIRE(value.exit_code == 0);
  CHECK(value.out.find("tae-big\tREADY\t" + ips[0]) != std::string::npos);
}

TEST_CASE("gcloud sends --spot --preemptible and --labels in the create request body", "[gcloud]") {
  FakeTpu fake;
  SKIP_WITHOUT_GCLOUD(fake);
  REQUIRE(fake.Create("tae-spot", kZone, "v4-8", {"--spot", "--labels", "tae=yes,study=s1"})
              .exit_code == 0);
  REQUIRE(fake.Create("tae-pre", kZone, "v4-8", {"--preemptible"}).exit_code == 0);
  nlohmann::json bodies;
  for (const auto& request : fake.Control("GET", "requests")) {
    if (request.at("method") == "POST" && request.at("path") == NodePath(kZone)) {
      bodies[request.at("query").at("nodeId").get<std::string>()] = request.at("body");
    }
  }
  INFO("create bodies: " << bodies.dump(1));
  REQUIRE(bodies.contains("tae-spot"));
  REQUIRE(bodies.contains("tae-pre"));
  const auto& spot = bodies["tae-spot"];
  CHECK(spot.at("acceleratorType") == "v4-8");
  CHECK(spot.at("runtimeVersion") == kVersion);
  CHECK(spot.at("schedulingConfig").at("spot") == true);
  CHECK(spot.at("schedulingConfig").at("preemptible") == false);
  CHECK(spot.at("labels") == nlohmann::json{{"tae", "yes"}, {"study", "s1"}});
  CHECK(bodies["tae-pre"].at("schedulingConfig").at("preemptible") == true);
  CHECK(bodies["tae-pre"].at("schedulingConfig").at("spot") == false);
  CHECK(fake.Describe("tae-spot").at("schedulingConfig").at("spot") == true);
}

TEST_CASE("a zone without capacity fails the create and another zone still works", "[gcloud]") {
  FakeTpu fake;
  SKIP_WITHOUT_GCLOUD(fake);
  fake.Control("POST", "no_capacity", {{"zone", "us-east5-a"}});
  CommandResult stockout = fake.Create("tae-x", "us-east5-a", "v4-8");
  INFO("create in us-east5-a: " << stockout.out << stockout.err);
  CHECK(stockout.exit_code != 0);
  CHECK(stockout.err.find("no more capacity in the zone") != std::string::npos);
  CHECK(stockout.err.find("\"code\": 8") != std::string::npos);
  CHECK(fake.List("us-east5-a").empty());

  CommandResult other = fake.Create("tae-x", kZone, "v4-8");
  INFO("create in " << kZone << ": " << other.out << other.err);
  REQUIRE(other.exit_code == 0);
  CHECK(fake.Describe("tae-x").at("state") == "READY");

  // Capacity back: the same create now works there too.
  fake.Control("POST", "capacity", {{"zone", "us-east5-a"}});
  REQUIRE(fake.Create("tae-x", "us-east5-a", "v4-8").exit_code == 0);
}

TEST_CASE("a preempted node is described as PREEMPTED and can be deleted", "[gcloud]") {
  FakeTpu fake;
  SKIP_WITHOUT_GCLOUD(fake);
  REQUIRE(fake.Create("tae-p", kZone, "v4-8", {"--spot"}).exit_code == 0);
  fake.Control("POST", "preempt", {{"zone", kZone}, {"node", "tae-p"}});
  CHECK(fake.Describe("tae-p").at("state") == "PREEMPTED");
  CommandResult del =
      fake.Gcloud({"compute", "tpus", "tpu-vm", "delete", "tae-p", "--zone", kZone, "--quiet"});
  INFO("delete: " << del.out << del.err);
  REQUIRE(del.exit_code == 0);
  CHECK(fake.List().empty());
}

TEST_CASE("a deleted node leaves the list and describe then fails NOT_FOUND", "[gcloud]") {
  FakeTpu fake;
  SKIP_WITHOUT_GCLOUD(fake);
  REQUIRE(fake.Create("tae-keep", kZone, "v4-8").exit_code == 0);
  REQUIRE(fake.Create("tae-gone", kZone, "v4-8").exit_code == 0);
  CommandResult del =
      fake.Gcloud({"compute", "tpus", "tpu-vm", "delete", "tae-gone", "--zone", kZone, "--quiet"});
  INFO("delete: " << del.out << del.err);
  REQUIRE(del.exit_code == 0);
  CHECK(fake.List() == std::vector<std::string>{"tae-keep"});
  CommandResult describe =
      fake.Gcloud({"compute", "tpus", "tpu-vm", "describe", "tae-gone", "--zone", kZone});
  CHECK(describe.exit_code != 0);
  CHECK(describe.err.find("NOT_FOUND") != std::string::npos);
  bool sent_delete = false;
  for (const auto& request : fake.Control("GET", "requests")) {
    sent_delete |=
        request.at("method") == "DELETE" && request.at("path") == NodePath(kZone, "tae-gone");
  }
  CHECK(sent_delete);
}

TEST_CASE("an async create returns at once and the node is READY when next looked at", "[gcloud]") {
  FakeTpu fake;
  SKIP_WITHOUT_GCLOUD(fake);
  CommandResult create = fake.Create("tae-async", kZone, "v4-8", {"--async"});
  INFO("create: " << create.out << create.err);
  REQUIRE(create.exit_code == 0);
  CHECK(create.err.find("Check operation [projects/") != std::string::npos);
  nlohmann::json nodes = fake.Control("GET", "nodes");
  REQUIRE(nodes.size() == 1);
  CHECK(nodes[0].at("state") == "CREATING");
  CHECK(fake.Describe("tae-async").at("state") == "READY");
  CommandResult del = fake.Gcloud(
      {"compute", "tpus", "tpu-vm", "delete", "tae-async", "--zone", kZone, "--quiet", "--async"});
  REQUIRE(del.exit_code == 0);
  CHECK(fake.List().empty());
}

TEST_CASE("stop and start move a node through STOPPED back to READY", "[gcloud]") {
  FakeTpu fake;
  SKIP_WITHOUT_GCLOUD(fake);
  REQUIRE(fake.Create("tae-s", kZone, "v4-8").exit_code == 0);
  REQUIRE(fake.Gcloud({"compute", "tpus", "tpu-vm", "stop", "tae-s", "--zone", kZone}).exit_code ==
          0);
  CHECK(fake.Describe("tae-s").at("state") == "STOPPED");
  REQUIRE(fake.Gcloud({"compute", "tpus", "tpu-vm", "start", "tae-s", "--zone", kZone}).exit_code ==
          0);
  CHECK(fake.Describe("tae-s").at("state") == "READY");
}

TEST_CASE("a queued resource waits for capacity then becomes ACTIVE with its node", "[gcloud]") {
  FakeTpu fake;
  SKIP_WITHOUT_GCLOUD(fake);
  fake.Control("POST", "no_capacity", {{"zone", kZone}});
  CommandResult create = fake.Gcloud({"compute", "tpus", "queued-resources", "create", "tae-q",
                                      "--node-id", "tae-qn", "--zone", kZone, "--accelerator-type",
                                      "v4-32", "--runtime-version", kVersion, "--spot"});
  INFO("create: " << create.out << create.err);
  REQUIRE(create.exit_code == 0);
  nlohmann::json qr = fake.GcloudJson(
      {"compute", "tpus", "queued-resources", "describe", "tae-q", "--zone", kZone});
  CHECK(qr.at("state").at("state") == "WAITING_FOR_RESOURCES");
  CHECK(fake.List().empty());

  fake.Control("POST", "capacity", {{"zone", kZone}});
  qr = fake.GcloudJson(
      {"compute", "tpus", "queued-resources", "describe", "tae-q", "--zone", kZone});
  CHECK(qr.at("state").at("state") == "ACTIVE");
  nlohmann::json node = fake.Describe("tae-qn");
  CHECK(node.at("state") == "READY");
  CHECK(node.at("networkEndpoints").size() == 4);
  CHECK(node.at("schedulingConfig").at("spot") == true);

  // Spot preemption suspends the queued resource.
  fake.Control("POST", "preempt", {{"zone", kZone}, {"node", "tae-qn"}});
  qr = fake.GcloudJson(
      {"compute", "tpus", "queued-resources", "describe", "tae-q", "--zone", kZone});
  CHECK(qr.at("state").at("state") == "SUSPENDED");

  // Deleting it needs --force while it still has its node; --force takes the node too.
  CHECK(fake.Gcloud({"compute", "tpus", "queued-resources", "delete", "tae-q", "--zone", kZone,
                     "--quiet"})
            .exit_code != 0);
  CommandResult del = fake.Gcloud({"compute", "tpus", "queued-resources", "delete", "tae-q",
                                   "--zone", kZone, "--quiet", "--force"});
  INFO("delete: " << del.out << del.err);
  REQUIRE(del.exit_code == 0);
  CHECK(fake.List().empty());
  CHECK(fake.GcloudJson({"compute", "tpus", "queued-resources", "list", "--zone", kZone}).empty());

  nlohmann::json post;
  for (const auto& request : fake.Control("GET", "requests")) {
    if (request.at("method") == "POST" && request.at("query").contains("queuedResourceId")) {
      post = request;
    }
  }
  INFO("queued resource create: " << post.dump(1));
  CHECK(post.at("path") ==
        std::string("/v2/projects/") + kProject + "/locations/" + kZone + "/queuedResources");
  CHECK(post.at("body").at("spot") == nlohmann::json::object());
  CHECK(post.at("body").at("tpu").at("nodeSpec")[0].at("nodeId") == "tae-qn");
}

TEST_CASE("the fake TPU API process is gone once the test is over", "[gcloud]") {
  pid_t pid = -1;
  {
    FakeTpu fake;
    SKIP_WITHOUT_GCLOUD(fake);
    pid = fake.pid();
    CHECK(fake.List().empty());
  }
  // Reaped by the destructor: the pid no longer names our child.
  CHECK(waitpid(pid, nullptr, WNOHANG) == -1);
  CHECK(kill(pid, 0) == -1);
}

namespace {

// The fake's nodes by short name: name -> (zone, state).
std::map<std::string, std::pair<std::string, std::string>> Nodes(const FakeTpu& fake) {
  std::map<std::string, std::pair<std::string, std::string>> out;
  for (const nlohmann::json& node : fake.Control("GET", "nodes")) {
    const std::string name = node.at("name");
    out[name.substr(name.rfind('/') + 1)] = {node.at("zone"), node.value("state", "")};
  }
  return out;
}

// Node-creating POSTs the fake received, in order: (zone, node id).
std::vector<std::pair<std::string, std::string>> Creates(const FakeTpu& fake) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const nlohmann::json& request : fake.Control("GET", "requests")) {
    const std::string path = request.at("path");
    if (request.at("method") == "POST" && path.size() > 6 &&
        path.compare(path.size() - 6, 6, "/nodes") == 0) {
      const std::string zone = path.substr(path.find("/locations/") + 11);
      out.emplace_back(zone.substr(0, zone.find('/')),
                       request.at("query").at("nodeId").get<std::string>());
    }
  }
  return out;
}

}  // namespace

TEST_CASE(
    "taed's TPU pool creates a VM for waiting runs, falls over to the next zone, "
    "replaces a preempted VM and deletes an idle one",
    "[gcloud]") {
  FakeTpu fake;
  if (!fake.missing().empty()) {
    TAE_SKIP(fake.missing());
  }
  const std::string first_zone = "us-east5-a";
  fake.Control("POST", "no_capacity", {{"zone", first_zone}});
  fake.SetEnv(true);
  setenv("TAE_TPU_POLL", "0.3", 1);
  Cluster cluster(0, 1, [&](const std::string& home) {
    std::ofstream(home + "/tpu-pools.toml")
        << "[[pool]]\nname = \"v4\"\naccelerator_type = \"v4-8\"\nzones = [\"" << first_zone
        << "\", \"" << kZone
        << "\"]\nspot = true\nmax_vms = 1\nidle_timeout_s = 1\nlabels = { accelerator = "
           "\"tpu\" }\n";
  });
  unsetenv("TAE_TPU_POLL");
  fake.SetEnv(false);

  // A run that only a TPU agent can take: the pool creates a VM for it, in the second zone.
  const std::string spec =
      cluster.dir().Write("tpu.toml",
                          "name = \"on-tpu\"\n[train]\nseeds = [0]\n[resources]\nlabels = { "
                          "accelerator = \"tpu\" }\n");
  REQUIRE(cluster.Taectl({"submit", spec}).exit_code == 0);
  auto ready = [&] {
    auto nodes = Nodes(fake);
    auto it = nodes.find("tae-v4-1");
    return it != nodes.end() && it->second.second == "READY";
  };
  const bool created = WaitUntil(ready, 120);
  INFO("taed log:\n" << ReadFile(cluster.home() + "/logs/taed.log"));
  REQUIRE(created);
  CHECK(Nodes(fake).at("tae-v4-1").first == kZone);
  std::vector<std::pair<std::string, std::string>> creates = Creates(fake);
  REQUIRE(creates.size() >= 2);
  CHECK(creates[0] == std::make_pair(first_zone, std::string("tae-v4-1")));
  CHECK(creates[1] == std::make_pair(std::string(kZone), std::string("tae-v4-1")));
  CHECK(Nodes(fake).size() == 1);  // max_vms

  // Preempted: deleted, and (the run still waits) created again.
  fake.Control("POST", "preempt", {{"zone", kZone}, {"node", "tae-v4-1"}});
  REQUIRE(WaitUntil([&] { return Creates(fake).size() >= creates.size() + 1; }, 120));
  REQUIRE(WaitUntil(ready, 120));
  bool deleted = false;
  for (const nlohmann::json& request : fake.Control("GET", "requests")) {
    deleted |=
        request.at("method") == "DELETE" && request.at("path") == NodePath(kZone, "tae-v4-1");
  }
  CHECK(deleted);

  // Nothing waits any more: after idle_timeout_s the VM is deleted.
  REQUIRE(cluster.Taectl({"cancel", "on-tpu"}).exit_code == 0);
  CHECK(WaitUntil([&] { return Nodes(fake).empty(); }, 120));

  // Every gcloud call is in `taectl agents --provider`.
  const nlohmann::json shown = cluster.TaectlJson({"agents", "--provider"});
  std::vector<std::string> details;
  for (const nlohmann::json& event : shown.at("provider_events")) {
    if (event.at("provider") == "gcloud-tpu") {
      details.push_back(event.at("detail"));
    }
  }
  auto has = [&](const std::string& text) {
    for (const std::string& detail : details) {
      if (detail.find(text) != std::string::npos) {
        return true;
      }
    }
    return false;
  };
  INFO("gcloud calls:\n" << nlohmann::json(details).dump(1));
  CHECK(has("gcloud compute tpus tpu-vm create tae-v4-1 --zone " + first_zone +
            " --accelerator-type v4-8 --version tpu-ubuntu2204-base --spot --labels "
            "tae=1,tae-pool=v4 -> failed:"));
  CHECK(has("gcloud compute tpus tpu-vm create tae-v4-1 --zone " + std::string(kZone) +
            " --accelerator-type v4-8 --version tpu-ubuntu2204-base --spot --labels "
            "tae=1,tae-pool=v4 -> ok"));
  CHECK(has("gcloud compute tpus tpu-vm delete tae-v4-1 --zone " + std::string(kZone) +
            " --quiet -> ok"));
  CHECK(has("gcloud compute tpus tpu-vm list --zone " + std::string(kZone) +
            " --filter labels.tae-pool=v4 --format=json -> ok"));
}

TEST_CASE(
    "a queued TPU pool waits for capacity with one queued resource, and deletes its VM through "
    "it",
    "[gcloud]") {
  FakeTpu fake;
  SKIP_WITHOUT_GCLOUD(fake);
  fake.Control("POST", "no_capacity", {{"zone", kZone}});
  fake.SetEnv(true);
  setenv("TAE_TPU_POLL", "0.3", 1);
  Cluster cluster(0, 1, [&](const std::string& home) {
    std::ofstream(home + "/tpu-pools.toml")
        << "[[pool]]\nname = \"q\"\naccelerator_type = \"v4-8\"\nzones = [\"" << kZone
        << "\"]\nqueued = true\nspot = true\nvalid_until = \"6h\"\nidle_timeout_s = 1\n"
           "labels = { accelerator = \"tpu\" }\n";
  });
  unsetenv("TAE_TPU_POLL");
  fake.SetEnv(false);
  INFO("taed log:\n" << ReadFile(cluster.home() + "/logs/taed.log"));

  // Queued resources: name -> state.
  auto queued = [&] {
    std::map<std::string, std::string> out;
    for (const nlohmann::json& qr :
         fake.GcloudJson({"compute", "tpus", "queued-resources", "list", "--zone", kZone})) {
      const std::string name = qr.at("name");
      out[name.substr(name.rfind('/') + 1)] = qr.at("state").at("state");
    }
    return out;
  };
  auto qr_creates = [&] {
    int n = 0;
    for (const nlohmann::json& request : fake.Control("GET", "requests")) {
      n += request.at("method") == "POST" && request.at("query").contains("queuedResourceId");
    }
    return n;
  };
  const std::string spec = cluster.dir().Write(
      "tpu.toml",
      "name = \"queued\"\n[train]\nseeds = [0]\n[resources]\nlabels = { accelerator = \"tpu\" "
      "}\n");
  REQUIRE(cluster.Taectl({"submit", spec}).exit_code == 0);
  REQUIRE(WaitUntil([&] { return queued().count("tae-q-1") == 1; }, 120));
  CHECK(queued().at("tae-q-1") == "WAITING_FOR_RESOURCES");
  // It waits: rounds go by (each lists the queued resources) and no second request is made.
  const auto lists = [&] {
    int n = 0;
    for (const nlohmann::json& request : fake.Control("GET", "requests")) {
      const std::string path = request.at("path");
      n += request.at("method") == "GET" && path.size() > 16 &&
           path.compare(path.size() - 16, 16, "/queuedResources") == 0;
    }
    return n;
  };
  const int lists_before = lists();
  REQUIRE(WaitUntil([&] { return lists() >= lists_before + 3; }, 60));
  CHECK(qr_creates() == 1);
  CHECK(queued().size() == 1);

  // Capacity: the request's VM comes up.
  fake.Control("POST", "capacity", {{"zone", kZone}});
  REQUIRE(WaitUntil([&] { return Nodes(fake).count("tae-q-1") == 1; }, 60));
  CHECK(Nodes(fake).at("tae-q-1").second == "READY");

  // Preempted: deleted through its queued resource, and asked for again (the run still waits).
  fake.Control("POST", "preempt", {{"zone", kZone}, {"node", "tae-q-1"}});
  REQUIRE(WaitUntil([&] { return qr_creates() == 2; }, 120));
  REQUIRE(WaitUntil(
      [&] {
        auto nodes = Nodes(fake);
        return nodes.count("tae-q-1") == 1 && nodes.at("tae-q-1").second == "READY";
      },
      120));

  // Nothing waits any more: after idle_timeout_s the VM and its request are gone.
  REQUIRE(cluster.Taectl({"cancel", "queued"}).exit_code == 0);
  CHECK(WaitUntil([&] { return Nodes(fake).empty() && queued().empty(); }, 120));

  std::vector<std::string> details;
  const nlohmann::json shown = cluster.TaectlJson({"agents", "--provider"});
  for (const nlohmann::json& event : shown.at("provider_events")) {
    details.push_back(event.at("detail"));
  }
  auto has = [&](const std::string& text) {
    return std::any_of(details.begin(), details.end(), [&](const std::string& detail) {
      return detail.find(text) != std::string::npos;
    });
  };
  INFO("provider events:\n" << nlohmann::json(details).dump(1));
  CHECK(has("gcloud compute tpus queued-resources create tae-q-1 --node-id tae-q-1 --zone " +
            std::string(kZone) +
            " --accelerator-type v4-8 --runtime-version tpu-ubuntu2204-base --spot "
            "--valid-until-duration 6h --labels tae=1,tae-pool=q -> ok"));
  CHECK(has("gcloud compute tpus queued-resources delete tae-q-1 --zone " + std::string(kZone) +
            " --force --quiet -> ok"));
  CHECK_FALSE(has("gcloud compute tpus tpu-vm delete"));  // never the VM alone
}

}  // namespace tae::testing
