// The manifests of one gke slice (server/provider/gke_pools.h): its JobSet and the Secret of its
// agents' credentials. Every field is checked, with the reference it follows, in
// tests/unit/gke_jobset_test.cc.

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/spec/spec.h"
#include "server/provider/gke_pools.h"

namespace tae::provider {
namespace {

using nlohmann::ordered_json;

constexpr char kTokenDir[] = "/var/run/tae";    // the pod's own credential (an emptyDir)
constexpr char kSliceDir[] = "/etc/tae/slice";  // the slice's Secret: the init container only
constexpr char kTlsDir[] = "/etc/tae/tls";
constexpr char kAgent[] = "/opt/tae/bin/tae-agent";  // deploy/docker/Dockerfile's layout
constexpr char kWorkDir[] = "/var/tmp/tae-agent";

ordered_json OwnedLabels(const GkePool& pool) {
  return {{kTaeLabel, "true"}, {kPoolLabel, pool.name}};
}

// The init container's command: the pod's own credential, the Secret's key for its completion
// index, copied into the pod's memory-backed emptyDir. The agent's container never mounts the
// Secret, so a job on one host cannot read another host's credential.
std::string CredentialScript() {
  return absl::StrCat("cp ", kSliceDir, "/token-$JOB_COMPLETION_INDEX ", kTokenDir,
                      "/token && chmod 0400 ", kTokenDir, "/token");
}

// The pod's command: its credential read from the emptyDir into the environment (never a flag
// or a plain environment value in the manifest) and the file removed, then tae-agent as
// SLICE-wW, which clears the variable from its environment block once read. What comes from the
// pool file is shell-quoted.
std::string AgentScript(const GkePool& pool, const std::string& slice) {
  std::vector<std::string> labels;
  for (const auto& [key, value] : pool.labels) {
    labels.push_back(absl::StrCat(key, "=", value));
  }
  std::string script =
      absl::StrCat("export TAE_AGENT_TOKEN=\"$(cat ", kTokenDir, "/token)\" && rm -f ", kTokenDir,
                   "/token && exec ", kAgent, " --taed ", spec::ShellQuote(pool.taed), " --id ",
                   slice, "-w$JOB_COMPLETION_INDEX --slots ", pool.slots, " --labels slice=", slice,
                   ",worker=$JOB_COMPLETION_INDEX,", spec::ShellQuote(absl::StrJoin(labels, ",")),
                   " --work-dir ", kWorkDir);
  if (!pool.tls_secret.empty()) {
    absl::StrAppend(&script, " --tls-ca ", kTlsDir, "/ca.crt");
  }
  return script;
}

}  // namespace

std::map<std::string, std::string> SliceAgentLabels(const GkePool& pool, const std::string& slice,
                                                    int worker) {
  std::map<std::string, std::string> labels = pool.labels;
  labels["slice"] = slice;
  labels["worker"] = absl::StrCat(worker);
  return labels;
}

ordered_json JobSetManifest(const GkePool& pool, const std::string& slice) {
  ordered_json labels = OwnedLabels(pool);
  labels["kueue.x-k8s.io/queue-name"] = pool.local_queue;
  if (!pool.priority_class.empty()) {
    labels["kueue.x-k8s.io/priority-class"] = pool.priority_class;
  }
  // The credential: the slice's Secret reaches the init container only, which leaves the pod's
  // own key in a memory-backed emptyDir for the agent's container.
  ordered_json mounts = ordered_json::array({{{"name", "credential"}, {"mountPath", kTokenDir}}});
  ordered_json volumes = ordered_json::array(
      {{{"name", "credential"}, {"emptyDir", {{"medium", "Memory"}, {"sizeLimit", "1Mi"}}}},
       {{"name", "slice-credentials"}, {"secret", {{"secretName", slice}}}}});
  if (!pool.tls_secret.empty()) {
    mounts.push_back({{"name", "tls"}, {"mountPath", kTlsDir}, {"readOnly", true}});
    volumes.push_back({{"name", "tls"}, {"secret", {{"secretName", pool.tls_secret}}}});
  }
  ordered_json init = {
      {"name", "tae-credential"},
      {"image", pool.image},
      {"command", {"/bin/sh", "-c", CredentialScript()}},
      {"volumeMounts",
       ordered_json::array(
           {{{"name", "slice-credentials"}, {"mountPath", kSliceDir}, {"readOnly", true}},
            {{"name", "credential"}, {"mountPath", kTokenDir}}})}};
  ordered_json container = {{"name", "tae-agent"},
                            {"image", pool.image},
                            {"command", {"/bin/sh", "-c", AgentScript(pool, slice)}},
                            {"resources", {{"limits", {{"google.com/tpu", pool.chips_per_host}}}}},
                            {"volumeMounts", mounts}};
  ordered_json pod = {{"metadata", {{"labels", OwnedLabels(pool)}}},
                      {"spec",
                       {{"restartPolicy", "Never"},
                        // No Kubernetes API token in the pod: the agent needs none, and a job
                        // would hold the namespace's default service account's.
                        {"automountServiceAccountToken", false},
                        {"nodeSelector",
                         {{"cloud.google.com/gke-tpu-accelerator", pool.tpu_type},
                          {"cloud.google.com/gke-tpu-topology", pool.topology}}},
                        {"initContainers", ordered_json::array({init})},
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
