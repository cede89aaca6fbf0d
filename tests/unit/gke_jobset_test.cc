// The gke provider's pool file and the manifests of a slice (server/provider/gke_pools.h),
// field by field, each with the reference it follows:
// [JS]  JobSet API v1alpha2, https://jobset.sigs.k8s.io/docs/reference/jobset.v1alpha2/ and its
//       concepts page (exclusive placement: the annotation on the JobSet's metadata),
//       https://jobset.sigs.k8s.io/docs/concepts/#exclusive-job-to-topology-placement
// [JOB] Kubernetes Job, Indexed completion mode: completions indexes 0..N-1, the index in
//       JOB_COMPLETION_INDEX, https://kubernetes.io/docs/concepts/workloads/controllers/job/
//       and https://kubernetes.io/docs/tasks/job/indexed-parallel-processing-static/
// [KQ]  Kueue: a Job or JobSet is queued through the label kueue.x-k8s.io/queue-name naming a
//       LocalQueue, kept suspended until its Workload is admitted,
//       https://kueue.sigs.k8s.io/docs/tasks/run/jobsets/ and
//       https://kueue.sigs.k8s.io/docs/reference/labels-and-annotations/
// [GKE] GKE TPUs: node labels cloud.google.com/gke-tpu-accelerator and
//       cloud.google.com/gke-tpu-topology, chips requested as google.com/tpu,
//       https://cloud.google.com/kubernetes-engine/docs/how-to/tpus
// [K8S] core/v1 Secret (stringData, type Opaque) and Pod (secret volumes, restartPolicy),
//       https://kubernetes.io/docs/reference/kubernetes-api/

#include <catch2/catch.hpp>
#include <fstream>
#include <iterator>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_join.h"
#include "server/provider/gke_pools.h"

namespace tae::provider {
namespace {

constexpr char kPools[] = R"([[pool]]
name = "v5e"
namespace = "ml"
local_queue = "tpu-queue"
priority_class = "low"
tpu_type = "tpu-v5-lite-podslice"
topology = "4x4"
chips_per_host = 4
image = "registry.example/tae-agent:1"
taed = "taed.example.org:7733"
tls_secret = "tae-agent-tls"
slots = 2
labels = { accelerator = "tpu" }
)";

GkePool Pool() {
  absl::StatusOr<std::vector<GkePool>> pools = ParseGkePools(kPools, "gke-pools.toml");
  REQUIRE(pools.ok());
  REQUIRE(pools->size() == 1);
  return (*pools)[0];
}

std::string Error(const std::string& text) {
  absl::StatusOr<std::vector<GkePool>> pools = ParseGkePools(text, "g.toml");
  REQUIRE_FALSE(pools.ok());
  return std::string(pools.status().message());
}

}  // namespace

TEST_CASE("gke pools: a slice's hosts come from its topology, and bad files say where and why") {
  const GkePool pool = Pool();
  CHECK(pool.hosts == 4);  // 4x4 = 16 chips, 4 per host
  CHECK(pool.namespace_ == "ml");
  CHECK(pool.labels.at("pool") == "v5e");
  CHECK(SliceName(pool, 3) == "tae-v5e-3");

  const std::string base =
      "[[pool]]\nname = \"p\"\nlocal_queue = \"q\"\ntpu_type = \"t\"\n"
      "image = \"i\"\ntaed = \"h:1\"\n";
  absl::StatusOr<std::vector<GkePool>> v4 =
      ParseGkePools(base + "topology = \"2x2x4\"\n", "g.toml");
  REQUIRE(v4.ok());
  CHECK((*v4)[0].hosts == 4);
  CHECK((*v4)[0].start_timeout_s == 900);  // the default
  absl::StatusOr<std::vector<GkePool>> quick =
      ParseGkePools(base + "topology = \"4x4\"\nstart_timeout_s = 120\n", "g.toml");
  REQUIRE(quick.ok());
  CHECK((*quick)[0].start_timeout_s == 120);
  CHECK(absl::StrContains(Error(base + "topology = \"4x4\"\nstart_timeout_s = -1\n"),
                          "start_timeout_s"));
  CHECK(absl::StrContains(Error(base + "topology = \"4x4\"\nchips_per_host = 3\n"),
                          "g.toml:1:1: [[pool]]: topology 4x4 has 16 chips, not a multiple of "
                          "chips_per_host 3"));
  CHECK(absl::StrContains(Error(base + "topology = \"4by4\"\n"),
                          "g.toml:7:12: topology: expected chips per dimension"));
  CHECK(absl::StrContains(Error(base + "topology = \"4x4\"\nname2 = 1\n"),
                          "unknown key 'name2' in [[pool]]"));
  CHECK(absl::StrContains(Error("[[pool]]\nname = \"p\"\n"),
                          "name, local_queue, tpu_type, topology, image and taed are required"));
  CHECK(absl::StrContains(Error(base + "topology = \"4x4\"\nnamespace = \"Team A\"\n"),
                          "namespace: a Kubernetes name"));
  std::string shell = base + "topology = \"4x4\"\n";
  shell.replace(shell.find("image = \"i\""), 11, "image = \"x; rm -rf /\"");
  CHECK(absl::StrContains(Error(shell), "image: no spaces, quotes, shell characters"));
  CHECK(absl::StrContains(Error(base + "topology = \"4x4\"\n" + base + "topology = \"4x4\"\n"),
                          "pool 'p' is defined twice"));
}

TEST_CASE("gke: a slice is one JobSet with a pod per host, queued in Kueue, on one TPU slice") {
  const GkePool pool = Pool();
  const nlohmann::ordered_json js = JobSetManifest(pool, "tae-v5e-1");
  // [JS] group, version and kind.
  CHECK(js.at("apiVersion") == "jobset.x-k8s.io/v1alpha2");
  CHECK(js.at("kind") == "JobSet");
  CHECK(js.at("metadata").at("name") == "tae-v5e-1");
  CHECK(js.at("metadata").at("namespace") == "ml");
  const auto& labels = js.at("metadata").at("labels");
  // [KQ] the LocalQueue, and the WorkloadPriorityClass.
  CHECK(labels.at("kueue.x-k8s.io/queue-name") == "tpu-queue");
  CHECK(labels.at("kueue.x-k8s.io/priority-class") == "low");
  // What TAE owns: taectl down removes what carries these labels and nothing else.
  CHECK(labels.at(kTaeLabel) == "true");
  CHECK(labels.at(kPoolLabel) == "v5e");
  // [JS] exclusive placement: one JobSet's job per node pool, i.e. per TPU slice.
  CHECK(js.at("metadata").at("annotations").at("alpha.jobset.sigs.k8s.io/exclusive-topology") ==
        "cloud.google.com/gke-nodepool");
  const auto& spec = js.at("spec");
  // [KQ] created suspended; Kueue unsuspends it once admitted. [JS] failurePolicy.maxRestarts:
  // a failed host ends the JobSet (taed replaces it) instead of restarting it in place.
  CHECK(spec.at("suspend") == true);
  CHECK(spec.at("failurePolicy").at("maxRestarts") == 0);
  REQUIRE(spec.at("replicatedJobs").size() == 1);
  const auto& rj = spec.at("replicatedJobs")[0];
  CHECK(rj.at("name") == "slice");
  CHECK(rj.at("replicas") == 1);  // [JS] one Job per replica: one slice
  const auto& job = rj.at("template").at("spec");
  // [JOB] a pod per host, indexes 0..hosts-1, no retry of a failed pod.
  CHECK(job.at("completionMode") == "Indexed");
  CHECK(job.at("completions") == 4);
  CHECK(job.at("parallelism") == 4);
  CHECK(job.at("backoffLimit") == 0);
  const auto& pod = job.at("template");
  CHECK(pod.at("metadata").at("labels").at(kTaeLabel) == "true");
  const auto& pod_spec = pod.at("spec");
  CHECK(pod_spec.at("restartPolicy") == "Never");  // [K8S] required for a Job's pods
  // [GKE] the slice's accelerator and topology.
  CHECK(pod_spec.at("nodeSelector").at("cloud.google.com/gke-tpu-accelerator") ==
        "tpu-v5-lite-podslice");
  CHECK(pod_spec.at("nodeSelector").at("cloud.google.com/gke-tpu-topology") == "4x4");
  REQUIRE(pod_spec.at("containers").size() == 1);
  const auto& container = pod_spec.at("containers")[0];
  CHECK(container.at("image") == "registry.example/tae-agent:1");
  CHECK(container.at("resources").at("limits").at("google.com/tpu") == 4);  // [GKE]
  // The agent: SLICE-wW with labels slice and worker (the scheduler's gang labels), the
  // credential read from the pod's own copy of its [JOB] index's key, TLS from the pool's secret.
  const std::string script = container.at("command")[2];
  CHECK(container.at("command")[0] == "/bin/sh");
  CHECK(absl::StrContains(script,
                          "TAE_AGENT_TOKEN=\"$(cat /var/run/tae/token)\" && rm -f "
                          "/var/run/tae/token && exec "));
  CHECK(absl::StrContains(script, "--id tae-v5e-1-w$JOB_COMPLETION_INDEX"));
  CHECK(absl::StrContains(
      script, "--labels slice=tae-v5e-1,worker=$JOB_COMPLETION_INDEX,accelerator=tpu,pool=v5e"));
  CHECK(absl::StrContains(script, "--taed taed.example.org:7733"));
  CHECK(absl::StrContains(script, "--slots 2"));
  CHECK(absl::StrContains(script, "--tls-ca /etc/tae/tls/ca.crt"));
  CHECK_FALSE(absl::StrContains(script, "--token"));  // never a flag (ps shows flags)
  CHECK_FALSE(absl::StrContains(script, "/etc/tae/slice"));
  // [K8S] no service account token mounted (automountServiceAccountToken).
  CHECK(pod_spec.at("automountServiceAccountToken") == false);
  // [K8S] the slice's Secret is a volume only the init container mounts (read-only); it copies
  // the pod's own key into a memory-backed emptyDir, the one credential the agent's container
  // sees. The TLS secret is read-only.
  const auto& volumes = pod_spec.at("volumes");
  REQUIRE(volumes.size() == 3);
  CHECK(volumes[0].at("name") == "credential");
  CHECK(volumes[0].at("emptyDir").at("medium") == "Memory");
  CHECK(volumes[1].at("secret").at("secretName") == "tae-v5e-1");
  CHECK(volumes[2].at("secret").at("secretName") == "tae-agent-tls");
  std::set<std::string> agent_mounts;
  for (const auto& mount : container.at("volumeMounts")) {
    agent_mounts.insert(mount.at("name").get<std::string>());
  }
  CHECK(agent_mounts == std::set<std::string>{"credential", "tls"});
  REQUIRE(pod_spec.at("initContainers").size() == 1);
  const auto& init = pod_spec.at("initContainers")[0];
  CHECK(init.at("image") == "registry.example/tae-agent:1");
  CHECK(init.at("command")[2] ==
        "cp /etc/tae/slice/token-$JOB_COMPLETION_INDEX /var/run/tae/token && chmod 0400 "
        "/var/run/tae/token");
  const auto& init_mounts = init.at("volumeMounts");
  REQUIRE(init_mounts.size() == 2);
  CHECK(init_mounts[0].at("name") == "slice-credentials");
  CHECK(init_mounts[0].at("mountPath") == "/etc/tae/slice");
  CHECK(init_mounts[0].at("readOnly") == true);
  CHECK(init_mounts[1].at("mountPath") == "/var/run/tae");
}

// What the pool file holds goes into the pod's `sh -c` quoted: a label value with shell syntax
// stays one word of tae-agent's arguments.
TEST_CASE("gke: the pool's labels and address are shell-quoted in the pods' command") {
  GkePool pool = Pool();
  pool.labels["note"] = "$(touch /tmp/x); `id` 'q'";
  pool.taed = "taed.example.org:7733;reboot";
  const std::string script =
      JobSetManifest(pool, "tae-v5e-1")["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]
                                       ["spec"]["containers"][0]["command"][2];
  CHECK(absl::StrContains(script, "--taed 'taed.example.org:7733;reboot' "));
  CHECK(absl::StrContains(script,
                          "--labels slice=tae-v5e-1,worker=$JOB_COMPLETION_INDEX,'accelerator=tpu,"
                          "note=$(touch /tmp/x); `id` '\\''q'\\'',pool=v5e' "));
}

TEST_CASE("gke: a slice's credentials are one Secret, a key per host index, owned by TAE") {
  const GkePool pool = Pool();
  const nlohmann::ordered_json secret = SecretManifest(pool, "tae-v5e-1", {"c0", "c1", "c2", "c3"});
  CHECK(secret.at("apiVersion") == "v1");  // [K8S]
  CHECK(secret.at("kind") == "Secret");
  CHECK(secret.at("type") == "Opaque");
  CHECK(secret.at("metadata").at("name") == "tae-v5e-1");
  CHECK(secret.at("metadata").at("namespace") == "ml");
  CHECK(secret.at("metadata").at("labels").at(kTaeLabel) == "true");
  CHECK(secret.at("stringData").size() == 4);
  CHECK(secret.at("stringData").at("token-3") == "c3");
}

}  // namespace tae::provider

namespace tae::provider {

// deploy/docker/Dockerfile is the image a pool names: what the pods' command runs must be where
// that image puts it. (Building the image needs its base from a registry, which the tests do
// not reach; this reads the Dockerfile's runtime stage instead.)
TEST_CASE("gke: the pods' command runs the programs where deploy/docker's image puts them") {
  std::ifstream in(std::string(TAE_TEST_DATA_DIR) + "/../../deploy/docker/Dockerfile");
  REQUIRE(in.good());
  // The runtime stage: from the last FROM on, continuation lines joined.
  std::vector<std::string> lines;
  std::string line;
  std::string joined;
  while (std::getline(in, line)) {
    if (line.rfind("#", 0) == 0) {
      continue;
    }
    if (!line.empty() && line.back() == '\\') {
      joined += line.substr(0, line.size() - 1) + " ";
      continue;
    }
    joined += line;
    if (joined.rfind("FROM ", 0) == 0) {
      lines.clear();
    }
    lines.push_back(joined);
    joined.clear();
  }
  std::set<std::string> in_bin;  // programs the runtime stage copies into /opt/tae/bin/
  for (const std::string& l : lines) {
    std::istringstream words(l);
    std::vector<std::string> w{std::istream_iterator<std::string>(words), {}};
    if (w.size() >= 3 && w[0] == "COPY" && w.back() == "/opt/tae/bin/") {
      for (size_t i = 1; i + 1 < w.size(); ++i) {
        if (w[i].rfind("--", 0) != 0) {
          in_bin.insert(w[i].substr(w[i].rfind('/') + 1));
        }
      }
    }
  }
  INFO(absl::StrJoin(in_bin, " "));
  // tae-agent runs jobs through tae-job and trains with tae-train, found next to itself.
  for (const char* program : {"tae-agent", "tae-job", "tae-train"}) {
    CHECK(in_bin.count(program) == 1);
  }
  auto pools = ParseGkePools(kPools, "gke-pools.toml");
  REQUIRE(pools.ok());
  const std::string script =
      JobSetManifest((*pools)[0], "tae-v5e-1")["spec"]["replicatedJobs"][0]["template"]["spec"]
                                              ["template"]["spec"]["containers"][0]["command"][2];
  CHECK(absl::StrContains(script, "exec /opt/tae/bin/tae-agent "));
  // The work dir is under /var/tmp, which every Debian image has writable by all (the image
  // runs as user tae).
  CHECK(absl::StrContains(script, " --work-dir /var/tmp/"));
}

}  // namespace tae::provider
