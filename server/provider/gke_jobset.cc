// The manifests of one gke slice (server/provider/gke_pools.h): its JobSet and the Secret of its
// agents' credentials. Every field is checked, with the reference it follows, in
// tests/unit/gke_jobset_test.cc.

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "server/provider/gke_pools.h"

namespace tae::provider {
namespace {

using nlohmann::ordered_json;

constexpr char kTokenDir[] = "/var/run/tae";
constexpr char kTlsDir[] = "/etc/tae/tls";
constexpr char kAgent[] = "/opt/tae/bin/tae-agent";  // deploy/docker/Dockerfile's layout
constexpr char kWorkDir[] = "/var/tmp/tae-agent";

ordered_json OwnedLabels(const GkePool& pool) {
  return {{kTaeLabel, "true"}, {kPoolLabel, pool.name}};
}

// The pod's command: its credential from the Secret's key for its completion index (never a
// flag or a plain environment value in the manifest), then tae-agent as SLICE-wW.
std::string AgentScript(const GkePool& pool, const std::string& slice) {
  std::vector<std::string> labels = {absl::StrCat("slice=", slice), "worker=$JOB_COMPLETION_INDEX"};
  for (const auto& [key, value] : pool.labels) {
    labels.push_back(absl::StrCat(key, "=", value));
  }
  std::string script = absl::StrCat(
      "export TAE_AGENT_TOKEN=\"$(cat ", kTokenDir, "/token-$JOB_COMPLETION_INDEX)\" && exec ",
      kAgent, " --taed ", pool.taed, " --id ", slice, "-w$JOB_COMPLETION_INDEX --slots ",
      pool.slots, " --labels ", absl::StrJoin(labels, ","), " --work-dir ", kWorkDir);
  if (!pool.tls_secret.empty()) {
    absl::StrAppend(&script, " --tls-ca ", kTlsDir, "/ca.crt");
  }
  return script;
}

}  // namespace

ordered_json JobSetManifest(const GkePool& pool, const std::string& slice) {
  ordered_json labels = OwnedLabels(pool);
  labels["kueue.x-k8s.io/queue-name"] = pool.local_queue;
  if (!pool.priority_class.empty()) {
    labels["kueue.x-k8s.io/priority-class"] = pool.priority_class;
  }
  ordered_json mounts =
      ordered_json::array({{{"name", "tokens"}, {"mountPath", kTokenDir}, {"readOnly", true}}});
  ordered_json volumes =
      ordered_json::array({{{"name", "tokens"}, {"secret", {{"secretName", slice}}}}});
  if (!pool.tls_secret.empty()) {
    mounts.push_back({{"name", "tls"}, {"mountPath", kTlsDir}, {"readOnly", true}});
    volumes.push_back({{"name", "tls"}, {"secret", {{"secretName", pool.tls_secret}}}});
  }
  ordered_json container = {{"name", "tae-agent"},
                            {"image", pool.image},
                            {"command", {"/bin/sh", "-c", AgentScript(pool, slice)}},
                            {"resources", {{"limits", {{"google.com/tpu", pool.chips_per_host}}}}},
                            {"volumeMounts", mounts}};
  ordered_json pod = {{"metadata", {{"labels", OwnedLabels(pool)}}},
                      {"spec",
                       {{"restartPolicy", "Never"},
                        {"nodeSelector",
                         {{"cloud.google.com/gke-tpu-accelerator", pool.tpu_type},
                          {"cloud.google.com/gke-tpu-topology", pool.topology}}},
                        {"containers", ordered_json::array({container})},
                        {"volumes", volumes}}}};
  ordered_json job = {{"parallelism", pool.hosts},
                      {"completions", pool.hosts},
                      {"completionMode", "Indexed"},
                      {"backoffLimit", 0},
                      {"template", pod}};
  return {{"apiVersion", "jobset.x-k8s.io/v1alpha2"},
          {"kind", "JobSet"},
          {"metadata",
           {{"name", slice},
            {"namespace", pool.namespace_},
            {"labels", labels},
            // One slice per node pool: a slice's hosts are one TPU slice.
            {"annotations",
             {{"alpha.jobset.sigs.k8s.io/exclusive-topology", "cloud.google.com/gke-nodepool"}}}}},
          {"spec",
           {// Kueue starts it when the LocalQueue's ClusterQueue has the quota.
            {"suspend", true},
            // A failed host ends the slice: taed requeues its runs and makes a new JobSet.
            {"failurePolicy", {{"maxRestarts", 0}}},
            {"replicatedJobs",
             ordered_json::array(
                 {{{"name", "slice"}, {"replicas", 1}, {"template", {{"spec", job}}}}})}}}};
}

ordered_json SecretManifest(const GkePool& pool, const std::string& slice,
                            const std::vector<std::string>& tokens) {
  ordered_json data = ordered_json::object();
  for (size_t w = 0; w < tokens.size(); ++w) {
    data[absl::StrCat("token-", w)] = tokens[w];
  }
  return {{"apiVersion", "v1"},
          {"kind", "Secret"},
          {"metadata",
           {{"name", slice}, {"namespace", pool.namespace_}, {"labels", OwnedLabels(pool)}}},
          {"type", "Opaque"},
          {"stringData", data}};
}

}  // namespace tae::provider
