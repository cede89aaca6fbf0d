// A gke slice's manifests (server/provider/gke_pools.h) through the real kubectl against
// tests/fake_k8s: accepted as a JobSet and Kueue cluster takes them, a field the API does not
// define refused as an API server with strict field validation refuses it, TAE's objects found
// and removed by their labels and nothing else, and `kubectl auth can-i` answered.

#include <catch2/catch.hpp>
#include <cstdlib>
#include <fstream>

#include "absl/strings/match.h"
#include "server/provider/gke_pools.h"
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
  // kubectl before 1.27 validates on the client from OpenAPI v2, which the fake does not serve
  // yet (Debian 12's kubernetes-client is 1.20).
  CommandResult version = k8s.Kubectl({"version", "--client", "-o", "json"});
  const nlohmann::json client = nlohmann::json::parse(version.out, nullptr, false);
  const int minor =
      client.is_object() ? std::atoi(client["clientVersion"].value("minor", "0").c_str()) : 0;
  if (minor < 27) {
    TAE_SKIP("kubectl " << version.out.substr(0, 80)
                        << ": the fake Kubernetes API serves OpenAPI v3 only (kubectl >= 1.27)");
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

}  // namespace tae::testing
