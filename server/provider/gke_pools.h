#pragma once

// The gke provider's pools: TPU slices on a GKE cluster, one JobSet per slice, admitted by Kueue
// through a LocalQueue (docs/providers.md, "gke"). This file holds the pool file's parser and
// what a slice is asked for as (the JobSet, and the Secret of its agents' credentials): pure, so
// every field is checked against the API references in tests/unit/gke_jobset_test.cc. The
// provider that applies them through kubectl is built on these.
//
// File (TOML, $TAE_HOME/gke-pools.toml):
//
//   [[pool]]
//   name = "v5e"                        # JobSets tae-v5e-1, tae-v5e-2, ...; label tae-pool=v5e
//   context = ""                        # kubeconfig context; "" = kubectl's current one
//   namespace = "default"
//   local_queue = "tpu"                 # Kueue LocalQueue (label kueue.x-k8s.io/queue-name)
//   priority_class = ""                 # Kueue WorkloadPriorityClass; "" = the queue's default
//   tpu_type = "tpu-v5-lite-podslice"   # node label cloud.google.com/gke-tpu-accelerator
//   topology = "4x4"                    # node label cloud.google.com/gke-tpu-topology
//   chips_per_host = 4                  # google.com/tpu of each pod; hosts = chips / this
//   image = "REGISTRY/tae-agent:TAG"    # deploy/docker's image, with tae-agent
//   taed = "taed.example.org:7733"      # the agent link address the pods dial
//   tls_secret = "tae-agent-tls"        # a Secret holding ca.crt, mounted for --tls-ca
//   max_slices = 1
//   idle_timeout_s = 600
//   start_timeout_s = 900               # admitted, but its agents not all registered: replaced
//   slots = 1                           # per host
//   labels = { accelerator = "tpu" }    # the agents' labels (pool=NAME is added)

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace tae::provider {

struct GkePool {
  std::string name;
  std::string context;
  std::string namespace_ = "default";
  std::string local_queue;
  std::string priority_class;
  std::string tpu_type;
  std::string topology;
  int chips_per_host = 4;
  int hosts = 1;  // the topology's chips / chips_per_host
  std::string image;
  std::string taed;
  std::string tls_secret;
  int max_slices = 1;
  double idle_timeout_s = 600;
  // A slice Kueue admitted whose agents have not all registered this long after (an image that
  // cannot be pulled, pods that cannot be scheduled, an address the pods cannot reach) is
  // deleted as failed, with its pods' own reasons, and asked for again while runs wait.
  double start_timeout_s = 900;
  int slots = 1;
  std::map<std::string, std::string> labels;  // with pool=NAME
};

// Errors name `path`:line:column and the key.
absl::StatusOr<std::vector<GkePool>> ParseGkePools(const std::string& text,
                                                   const std::string& path);

// The labels on everything TAE creates in a cluster: `taectl down` and `taectl scrap` remove
// what carries them, and nothing else.
inline constexpr char kTaeLabel[] = "tae.dev/owned";
inline constexpr char kPoolLabel[] = "tae.dev/pool";

// The name of a pool's `index`th slice (its JobSet, its Secret, its agents' slice label).
std::string SliceName(const GkePool& pool, int index);

// The pool's slice index of a JobSet named `name` (tae-POOL-N, N >= 1), or 0 when it is not
// one (pool "v5" is not pool "v5-big"'s).
int SliceIndex(const GkePool& pool, const std::string& name);

// One slice: a JobSet of one replicated job with a pod per host, each running tae-agent as
// agent SLICE-wW (W: its completion index) with labels slice=SLICE, worker=W, the pool's labels;
// suspended until Kueue admits it. Its agents' credentials come from the Secret `SliceName`
// (keys token-0, token-1, ...; SecretManifest).
nlohmann::ordered_json JobSetManifest(const GkePool& pool, const std::string& slice);
// The labels the JobSet's pod of completion index `worker` gives its agent: slice=SLICE,
// worker=W and the pool's (with pool=NAME); its credential is minted with them.
std::map<std::string, std::string> SliceAgentLabels(const GkePool& pool, const std::string& slice,
                                                    int worker);

// The Secret holding `tokens[w]` as key token-W for the slice's agents.
nlohmann::ordered_json SecretManifest(const GkePool& pool, const std::string& slice,
                                      const std::vector<std::string>& tokens);

}  // namespace tae::provider
