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
};

// Errors name `path`:line:column and the key.
absl::StatusOr<std::vector<TpuPool>> ParseTpuPools(const std::string& text,
                                                   const std::string& path);

// gcloud command lines (argv without the gcloud binary itself).
std::vector<std::string> TpuCreateArgs(const TpuPool& pool, const std::string& name,
                                       const std::string& zone);
std::vector<std::string> TpuListArgs(const TpuPool& pool, const std::string& zone);
std::vector<std::string> TpuDeleteArgs(const TpuPool& pool, const std::string& name,
                                       const std::string& zone);

// True when gcloud's error text says the zone has no capacity for the request (try the next).
bool IsCapacityError(const std::string& text);

}  // namespace tae::provider
