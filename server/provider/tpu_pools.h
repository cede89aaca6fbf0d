#pragma once

// The gcloud-tpu provider's pools: Cloud TPU VMs taed creates when runs wait for them and deletes
// when they idle, through the gcloud CLI (every call logged, `taectl agents --provider`).
//
// File (TOML, `taed --tpu-pools FILE` / TAE_TPU_POOLS, default $TAE_HOME/tpu-pools.toml when it
// exists):
//
//   [[pool]]
//   name = "v4"                            # VMs are tae-v4-1, tae-v4-2, ...; label tae-pool=v4
//   accelerator_type = "v4-8"
//   zones = ["us-central2-b", "us-east5-a"]  # tried in order; the next on a capacity error
//   runtime_version = "tpu-ubuntu2204-base"
//   spot = false                           # or preemptible = true
//   project = ""                           # default: gcloud's configured project
//   max_vms = 1                            # at most this many VMs of the pool at once
//   idle_timeout_s = 600                   # a VM without a waiting or running run this long
//                                          # is deleted
//   labels = { accelerator = "tpu" }       # the labels its agents get (pool=NAME is added); a
//                                          # queued run whose labels they satisfy wants a VM
//   queued = false                         # true: ask through a queued resource (waits for
//                                          # capacity instead of failing; deleted with its VM)
//   valid_until = "6h"                     # queued: give up waiting after this long
//   # The agents, one per worker of a READY VM, each started by a long-lived
//   # `gcloud compute tpus tpu-vm ssh VM --worker=W --command 'exec AGENT --stdin ...'`
//   # whose -R forward carries the agent link back to taed (docs/providers.md):
//   agent = "/opt/tae/bin/tae-agent"       # on the VM; default: the path of taed's tae-agent
//   image = ""                             # set: run AGENT (default /opt/tae/bin/tae-agent) in
//                                          # this container image instead
//                                          # (sudo docker run --network host --privileged ...)
//   work_dir = "/var/tmp/tae-agent"        # each agent works in work_dir/ID
//   slots = 1                              # per worker
//   tunnel_port = 17733                    # the agent dials 127.0.0.1:tunnel_port on the worker
//   ssh_user = ""                          # default: gcloud's (the local login name)
//   internal_ip = false                    # true: ssh to the workers' internal addresses
//
// The same gcloud command lines as deploy/tpu/lib.sh (create, describe, list, delete).

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace tae::provider {

struct TpuPool {
  std::string name;
  std::string accelerator_type;
  std::vector<std::string> zones;
  std::string runtime_version = "tpu-ubuntu2204-base";
  bool spot = false;
  bool preemptible = false;
  std::string project;
  int max_vms = 1;
  double idle_timeout_s = 600;
  std::map<std::string, std::string> labels;  // with pool=NAME
  bool queued = false;
  std::string valid_until;  // queued: e.g. "6h"; "" = no limit
  std::string agent;
  std::string image;
  std::string work_dir = "/var/tmp/tae-agent";
  int slots = 1;
  int tunnel_port = 17733;
  std::string ssh_user;
  bool internal_ip = false;
};

// Errors name `path`:line:column and the key. `default_agent` is used where a pool gives no
// `agent`.
absl::StatusOr<std::vector<TpuPool>> ParseTpuPools(const std::string& text, const std::string& path,
                                                   const std::string& default_agent = "tae-agent");

// One worker of a READY VM, as its agent will be started.
struct TpuWorker {
  std::string vm;  // the VM (slice) name
  std::string zone;
  int index = 0;   // the worker number
  std::string ip;  // its internal address (MASTER_ADDR of gangs)
};

// gcloud command lines (argv without the gcloud binary itself).
std::vector<std::string> TpuCreateArgs(const TpuPool& pool, const std::string& name,
                                       const std::string& zone);
std::vector<std::string> TpuListArgs(const TpuPool& pool, const std::string& zone);
std::vector<std::string> TpuDeleteArgs(const TpuPool& pool, const std::string& name,
                                       const std::string& zone);
std::vector<std::string> TpuGuestAttributesArgs(const TpuPool& pool, const std::string& name,
                                                const std::string& zone);
std::vector<std::string> TpuQueuedCreateArgs(const TpuPool& pool, const std::string& name,
                                             const std::string& zone);
std::vector<std::string> TpuQueuedListArgs(const TpuPool& pool, const std::string& zone);
std::vector<std::string> TpuQueuedDeleteArgs(const TpuPool& pool, const std::string& name,
                                             const std::string& zone);

// The agent id of a worker: VM-wN.
std::string TpuAgentId(const TpuWorker& worker);
// The remote command that runs the worker's agent (one string for the worker's shell).
std::string TpuAgentCommand(const TpuPool& pool, const TpuWorker& worker);
// The labels TpuAgentCommand gives the worker's agent: the pool's, provider=gcloud-tpu,
// slice=VM, worker=INDEX, zone and (when known) addr=IP.
std::map<std::string, std::string> TpuAgentLabels(const TpuPool& pool, const TpuWorker& worker);
// `compute tpus tpu-vm ssh` of the worker's long-lived agent session: strict host key checking
// (taed pins the keys, TpuKnownHostsLine), the reverse forward of 127.0.0.1:tunnel_port to
// `tunnel_target` (taed's loopback agent address) and keepalives.
std::vector<std::string> TpuSshArgs(const TpuPool& pool, const TpuWorker& worker,
                                    const std::string& tunnel_target);
// The google_compute_known_hosts line gcloud's ssh looks up for a worker of the VM whose numeric
// id is `node_id`: alias tpu.ID-W-<last 6 characters of the key>, lowercase as ssh writes it.
std::string TpuKnownHostsLine(const std::string& node_id, int worker, const std::string& key_type,
                              const std::string& key);

// True when gcloud's error text says the zone has no capacity for the request (try the next).
bool IsCapacityError(const std::string& text);

}  // namespace tae::provider
