#pragma once

// The gke provider (gke_pools.h): on a thread of its own, every poll interval it lists each
// pool's JobSets (label tae.dev/pool) and their Kueue Workloads with the kubectl on PATH, reads
// what each slice is doing (gke_status.h), decides what to do (gke_plan.h) and does it:
//
// - a slice asked for: fresh credentials for its agents SLICE-w0 ... (minted by taed's core
//   through `mint`), a Secret holding them (`kubectl create`, never `apply`, whose annotation
//   would keep the tokens in plain text), then the JobSet (`kubectl apply`), suspended until
//   Kueue admits it. Its pods' agents dial taed themselves (the pool's `taed` address).
// - a slice deleted (evicted, preempted, failed, finished, or idle): its JobSet and Secret go
//   (`kubectl delete`) and its agents' credentials stop working (`retire`); the cluster stops its
//   pods, whose agents give their runs back as they stop (or, on a lost node, taed finds them gone
//   after its grace); taed requeues those runs as the worker's fault, and the next round asks for a
//   new slice while runs wait.
//
// Kueue decides when a slice runs: a held slice is shown with Kueue's words (`vms`, which taed
// shows in `taectl agents`, the dashboard and the queue's reasons). kubectl calls block this
// thread only; what it needs from taed comes through `demand` (the DemandBoard) and `mint`.

#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "server/provider/cli_call.h"
#include "server/provider/demand.h"
#include "server/provider/gke_plan.h"
#include "server/provider/gke_pools.h"
#include "server/provider/provider_log.h"
#include "server/provider/round_loop.h"

namespace tae::provider {

struct GkeProviderOptions {
  std::vector<GkePool> pools;
  std::string kubectl;          // path of the kubectl binary
  double poll_s = 10;           // between rounds
  double call_timeout_s = 120;  // one kubectl call
  // Called from the provider thread at the start of each round; must not block on the core.
  // No answer (nothing recent from the core): the round is skipped.
  std::function<std::optional<TpuDemand>()> demand;
  // Called from the provider thread: a fresh credential ("ID.SECRET") for each agent id, in
  // order, holding the placement labels of `labels` (the same order); it waits for taed's core
  // (bounded).
  std::function<absl::StatusOr<std::vector<std::string>>(
      std::vector<std::string> ids, std::vector<std::map<std::string, std::string>> labels)>
      mint;
  // Called from the provider thread once a slice's JobSet is deleted (and by DeleteAll): its
  // agents' ids, whose credentials die with it; it waits for taed's core (bounded).
  std::function<void(std::vector<std::string>)> retire;
  // Called from the provider thread for every kubectl call: (subject, event, detail).
  std::function<void(std::string, std::string, std::string)> log;
  // Called from the provider thread after each complete listing of a pool: its slices, with
  // their state and Kueue's or the JobSet's words.
  std::function<void(std::string pool, std::vector<CloudVm>)> slices;
};

class GkeProvider {
 public:
  explicit GkeProvider(GkeProviderOptions options);
  ~GkeProvider();  // Stop()
  void Start();
  // Ends the current round's wait and any kubectl call in flight, and joins the thread.
  void Stop();
  // After Stop(), on the calling thread: deletes every JobSet and Secret TAE made in every
  // pool's namespace (by their labels, nothing else); returns how many slices went.
  int DeleteAll();

 private:
  using Result = CliResult;
  void Round();
  void RoundPool(const GkePool& pool, const TpuDemand& demand, double now);
  // kubectl [--context C] --namespace NS ARGS, `input` on its stdin; logged as subject/event.
  Result Kubectl(const GkePool& pool, const std::string& subject, const std::string& event,
                 const std::vector<std::string>& args, const std::string& input = "");
  // Each true when kubectl did it.
  bool CreateSlice(const GkePool& pool, const GkeAction& action);
  bool DeleteSlice(const GkePool& pool, const GkeAction& action);
  // Secrets of the pool without their JobSet (a taed stopped between the two calls): deleted,
  // once per pool at the first complete listing.
  // `kubectl delete secret NAME`, gone or not.
  void DeleteSecret(const GkePool& pool, const std::string& name);
  // Its pods' own words for not starting (Pending, waiting: ErrImagePull ...), for the log.
  std::string PodReasons(const GkePool& pool, const std::string& slice);
  void DeleteOrphanSecrets(const GkePool& pool, const std::set<std::string>& jobsets);
  bool CallsAborted();

  GkeProviderOptions options_;
  std::map<std::string, double> idle_since_;  // slice -> when it was last seen busy (or made)
  // slice -> when first seen admitted, until all its agents registered (then 0: it started).
  std::map<std::string, double> admitted_since_;
  std::set<std::string> swept_;  // pools whose orphan Secrets were looked for
  RoundLoop loop_;               // last: its thread stops before the members it reads go
};

}  // namespace tae::provider
