// A gke slice's manifests (server/provider/gke_pools.h) through the real kubectl against
// tests/fake_k8s: accepted as a JobSet and Kueue cluster takes them, a field the API does not
// define refused as an API server with strict field validation refuses it, TAE's objects found
// and removed by their labels and nothing else, and `kubectl auth can-i` answered.

#include <catch2/catch.hpp>
#include <cstdlib>
#include <fstream>

#include "absl/strings/match.h"
#include "server/provider/gke_pools.h"
#include "server/provider/gke_status.h"
#include "tests/integration/fake_k8s.h"

namespace tae::testing {
namespace {

provider::GkePool Pool() {
  auto pools = provider::ParseGkePools(
      "[[pool]]\nname = \"v5e\"\nnamespace = \"ml\"\nlocal_queue = \"tpu-queue\"\n"
      "tpu_type = \"tpu-v5-lite-podslice\"\ntopology = \"2x4\"\nimage = \"reg/tae-agent:1\"\n"
      "taed = \"taed.example.org:7733\"\n",
      "gke-pools.toml");
  REQUIRE(pools.ok());
  return (*pools)[0];
}

std::string Write(const FakeK8s& k8s, const std::string& name, const nlohmann::ordered_json& o) {
  const std::string path = k8s.dir().path() + "/" + name;
  std::ofstream(path) << o.dump(2);
  return path;
}

}  // namespace

TEST_CASE(
    "a gke slice's JobSet and Secret go through the real kubectl to a JobSet and Kueue "
    "cluster") {
  FakeK8s k8s("ml");
  if (!k8s.missing().empty()) {
    TAE_SKIP(k8s.missing());
  }
  // kubectl before 1.27 never asks the server for strict field validation (Debian 12's
  // kubernetes-client is 1.20): an unknown field is then dropped, not refused.
  CommandResult version = k8s.Kubectl({"version", "--client", "-o", "json"});
  const nlohmann::json client = nlohmann::json::parse(version.out, nullptr, false);
  const int minor =
      client.is_object() ? std::atoi(client["clientVersion"].value("minor", "0").c_str()) : 0;
  if (minor < 27) {
    TAE_SKIP("kubectl " << version.out.substr(0, 80)
                        << ": before 1.27 kubectl sends no fieldValidation=Strict");
  }
  const provider::GkePool pool = Pool();
  const std::string slice = provider::SliceName(pool, 1);
  const std::string jobset = Write(k8s, "jobset.json", provider::JobSetManifest(pool, slice));
  const std::string secret =
      Write(k8s, "secret.json", provider::SecretManifest(pool, slice, {"c0", "c1"}));
  CommandResult applied = k8s.Kubectl({"apply", "-f", secret, "-f", jobset});
  INFO(applied.out << applied.err);
  REQUIRE(applied.exit_code == 0);
  // kubectl asked the server to validate, strictly: the fake refuses what the API lacks.
  bool strict = false;
  for (const auto& request : k8s.Control("GET", "requests")) {
    strict = strict ||
             absl::StrContains(request.at("path").get<std::string>(), "fieldValidation=Strict");
  }
  CHECK(strict);

  nlohmann::json listed = k8s.KubectlJson({"get", "jobsets", "-l", "tae.dev/owned=true"});
  REQUIRE(listed.at("items").size() == 1);
  const auto& stored = listed.at("items")[0];
  CHECK(stored.at("metadata").at("name") == "tae-v5e-1");
  CHECK(stored.at("metadata").at("labels").at("kueue.x-k8s.io/queue-name") == "tpu-queue");
  CHECK(stored.at("spec").at("suspend") == true);
  CHECK(stored.at("spec").at("replicatedJobs")[0].at("template").at("spec").at("completions") ==
        2);  // 2x4 = 8 chips, 4 per host

  // A field the JobSet API does not define is refused with the server's own words.
  nlohmann::ordered_json bad = provider::JobSetManifest(pool, "tae-v5e-2");
  bad["spec"]["replicatedJobs"][0]["template"]["spec"]["bogus"] = 1;
  CommandResult refused = k8s.Kubectl({"apply", "-f", Write(k8s, "bad.json", bad)});
  CHECK(refused.exit_code != 0);
  CHECK(absl::StrContains(refused.err,
                          "strict decoding error: unknown field "
                          "\"spec.replicatedJobs[0].template.spec.bogus\""));

  // TAE removes what carries its label, and nothing else.
  const nlohmann::ordered_json foreign = {{"apiVersion", "v1"},
                                          {"kind", "Secret"},
                                          {"metadata", {{"name", "someone-elses"}}},
                                          {"stringData", {{"k", "v"}}}};
  REQUIRE(k8s.Kubectl({"apply", "-f", Write(k8s, "foreign.json", foreign)}).exit_code == 0);
  CommandResult removed = k8s.Kubectl({"delete", "jobsets,secrets", "-l", "tae.dev/owned=true"});
  INFO(removed.out << removed.err);
  CHECK(removed.exit_code == 0);
  CHECK(k8s.KubectlJson({"get", "jobsets"}).at("items").empty());
  nlohmann::json left = k8s.KubectlJson({"get", "secrets"});
  REQUIRE(left.at("items").size() == 1);
  CHECK(left.at("items")[0].at("metadata").at("name") == "someone-elses");

  // What doctor will ask: may TAE create JobSets here?
  CHECK(k8s.Kubectl({"auth", "can-i", "create", "jobsets.jobset.x-k8s.io"}).exit_code == 0);
  k8s.Control("POST", "deny", {{"verb", "create"}, {"resource", "jobsets.jobset.x-k8s.io"}});
  CommandResult denied = k8s.Kubectl({"auth", "can-i", "create", "jobsets.jobset.x-k8s.io"});
  CHECK(denied.exit_code != 0);
  CHECK(absl::StrContains(denied.out, "no"));
}

TEST_CASE(
    "taectl doctor checks each gke pool's cluster: the JobSet API, its LocalQueue and "
    "what TAE may do there, each failure with its fix") {
  FakeK8s k8s("ml");
  if (!k8s.missing().empty()) {
    TAE_SKIP(k8s.missing());
  }
  TempDir home;
  home.Write("gke-pools.toml",
             "[[pool]]\nname = \"v5e\"\ncontext = \"fake\"\nnamespace = \"ml\"\n"
             "local_queue = \"tpu-queue\"\ntpu_type = \"tpu-v5-lite-podslice\"\n"
             "topology = \"2x4\"\nimage = \"reg/tae-agent:1\"\ntaed = \"taed.example.org:7733\"\n");
  // The gke checks of `taectl doctor --json` (no taed runs on this home: doctor still checks).
  auto gke = [&] {
    CommandResult doctor =
        RunCommand({"/usr/bin/env", "KUBECONFIG=" + k8s.kubeconfig(), BinPath("taectl"), "--home",
                    home.path(), "doctor", "--json"});
    const nlohmann::json report = nlohmann::json::parse(doctor.out, nullptr, false);
    INFO(doctor.out << doctor.err);
    REQUIRE(report.is_object());
    std::vector<nlohmann::json> checks;
    for (const auto& group : report.at("groups")) {
      for (const auto& check : group.at("checks")) {
        if (absl::StrContains(check.at("what").get<std::string>(), "gke pool v5e")) {
          checks.push_back(check);
        }
      }
    }
    return checks;
  };
  std::vector<nlohmann::json> checks = gke();
  REQUIRE(checks.size() == 1);
  CHECK(checks[0].at("level") == "FAIL");
  CHECK(absl::StrContains(checks[0].at("what").get<std::string>(),
                          "no LocalQueue tpu-queue in namespace ml"));
  CHECK(absl::StrContains(checks[0].at("fix").get<std::string>(), "a LocalQueue tpu-queue in ml"));

  const nlohmann::ordered_json queue = {{"apiVersion", "kueue.x-k8s.io/v1beta1"},
                                        {"kind", "LocalQueue"},
                                        {"metadata", {{"name", "tpu-queue"}, {"namespace", "ml"}}},
                                        {"spec", {{"clusterQueue", "tpu"}}}};
  REQUIRE(k8s.Kubectl({"apply", "-f", Write(k8s, "queue.json", queue)}).exit_code == 0);
  checks = gke();
  REQUIRE(checks.size() == 1);
  CHECK(checks[0].at("level") == "ok");

  k8s.Control("POST", "deny", {{"verb", "create"}, {"resource", "jobsets.jobset.x-k8s.io"}});
  checks = gke();
  REQUIRE(checks.size() == 1);
  CHECK(checks[0].at("level") == "FAIL");
  CHECK(absl::StrContains(checks[0].at("what").get<std::string>(),
                          "not allowed in namespace ml: create jobsets.jobset.x-k8s.io"));
  CHECK(absl::StrContains(checks[0].at("fix").get<std::string>(), "a Role in ml granting"));

  k8s.Control("POST", "drop_group", {{"group", "jobset.x-k8s.io"}});
  checks = gke();
  REQUIRE_FALSE(checks.empty());
  CHECK(checks[0].at("level") == "FAIL");
  CHECK(absl::StrContains(checks[0].at("what").get<std::string>(),
                          "has no JobSet API (jobsets.jobset.x-k8s.io)"));
  CHECK(absl::StrContains(checks[0].at("fix").get<std::string>(),
                          "https://jobset.sigs.k8s.io/docs/installation/"));
}

TEST_CASE("Kueue holds a gke slice until its quota, admits it, and an eviction reads as evicted") {
  FakeK8s k8s("ml");
  if (!k8s.missing().empty()) {
    TAE_SKIP(k8s.missing());
  }
  const provider::GkePool pool = Pool();  // 2 hosts x 4 chips
  REQUIRE(k8s.Kubectl({"apply", "-f",
                       Write(k8s, "jobset.json", provider::JobSetManifest(pool, "tae-v5e-1"))})
              .exit_code == 0);
  // The slice as the provider reads it: the JobSet, and its Workload by the JobSet's uid.
  auto describe = [&] {
    const nlohmann::json jobset = k8s.KubectlJson({"get", "jobsets.jobset.x-k8s.io", "tae-v5e-1"});
    const nlohmann::json workloads = k8s.KubectlJson(
        {"get", "workloads.kueue.x-k8s.io", "-l",
         "kueue.x-k8s.io/job-uid=" + jobset.at("metadata").at("uid").get<std::string>()});
    const nlohmann::json& items = workloads.at("items");
    return std::pair{provider::DescribeSlice(jobset, items.empty() ? nlohmann::json() : items[0]),
                     jobset.at("spec").at("suspend").get<bool>()};
  };
  auto [no_queue, suspended] = describe();
  CHECK(no_queue.state == provider::SliceState::kWaiting);
  CHECK(no_queue.reason == "Kueue cannot admit it: LocalQueue tpu-queue doesn't exist");
  CHECK(suspended);

  const nlohmann::ordered_json queue = {{"apiVersion", "kueue.x-k8s.io/v1beta1"},
                                        {"kind", "LocalQueue"},
                                        {"metadata", {{"name", "tpu-queue"}, {"namespace", "ml"}}},
                                        {"spec", {{"clusterQueue", "tpu"}}}};
  REQUIRE(k8s.Kubectl({"apply", "-f", Write(k8s, "queue.json", queue)}).exit_code == 0);
  k8s.Control("POST", "quota", {{"chips", 4}});  // half a slice
  auto [held, still_suspended] = describe();
  CHECK(held.state == provider::SliceState::kWaiting);
  CHECK(absl::StrContains(held.reason,
                          "waiting for quota: couldn't assign flavors to pod set "
                          "slice: insufficient unused quota for google.com/tpu"));
  CHECK(absl::StrContains(held.reason, "4 more needed"));
  CHECK(still_suspended);

  k8s.Control("POST", "quota", {{"chips", 8}});
  auto [admitted, running] = describe();
  CHECK(admitted.state == provider::SliceState::kAdmitted);
  CHECK_FALSE(running);  // Kueue unsuspended it

  k8s.Control("POST", "evict", {{"namespace", "ml"}, {"jobset", "tae-v5e-1"}});
  auto [evicted, suspended_again] = describe();
  CHECK(evicted.state == provider::SliceState::kEvicted);
  CHECK(absl::StrContains(evicted.reason, "evicted by Kueue: Preempted: Preempted to accommodate"));
  CHECK(suspended_again);

  // Deleting the JobSet takes its Workload with it.
  REQUIRE(k8s.Kubectl({"delete", "jobsets.jobset.x-k8s.io", "tae-v5e-1"}).exit_code == 0);
  CHECK(k8s.KubectlJson({"get", "workloads.kueue.x-k8s.io"}).at("items").empty());
}

}  // namespace tae::testing
