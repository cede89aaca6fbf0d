#pragma once

// Stager: puts a run's code snapshot into its run directory before the job starts. It owns the
// agent's SnapshotCache and its own thread, so fetching blobs from taed (GetManifest, FetchBlobs
// on the agent link's service) and hard-linking thousands of files never block the agent's
// io_context. Callbacks run on the stager thread: they must only post to the agent's io_context.

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "agent/cache/cache.h"
#include "boost/asio/executor_work_guard.hpp"
#include "boost/asio/io_context.hpp"
#include "common/tls/tls.h"
#include "tae/v1/agent_link.grpc.pb.h"

namespace tae::agent {

struct StageResult {
  absl::Status status;
  int files = 0;
  uint64_t bytes = 0;     // of the snapshot
  int blobs_fetched = 0;  // missing from the cache, fetched from taed
  uint64_t bytes_fetched = 0;
  bool manifest_fetched = false;
  double seconds = 0;
};

class Stager {
 public:
  // cache_dir: the SnapshotCache; runs_dir: where run directories are (for scrap). Dials taed
  // like the Link does (DialTaed, same tls).
  static absl::StatusOr<std::unique_ptr<Stager>> Start(const std::string& taed,
                                                       const std::string& token,
                                                       const std::string& cache_dir,
                                                       const std::string& runs_dir,
                                                       const tls::ClientConfig& tls = {});
  ~Stager();

  // Fetches what the cache lacks and materialises snapshot `id` into `run_dir` (created; an
  // existing one, left by an earlier agent process for the same attempt, is replaced).
  void Stage(const std::string& id, const std::string& run_dir,
             std::function<void(StageResult)> done);
  // Drops snapshots (all: every one) from the cache, removes their files from the run
  // directories that materialised them (except `active_run_dirs`), and garbage-collects blobs.
  void Scrap(std::vector<std::string> ids, bool all, std::set<std::string> active_run_dirs);

 private:
  Stager(std::unique_ptr<SnapshotCache> cache, const std::string& taed,
         const tls::ClientConfig& tls, std::string token, std::string runs_dir);
  StageResult StageNow(const std::string& id, const std::string& run_dir);
  absl::Status FetchBlobs(const std::vector<std::string>& hashes, StageResult* result);
  void ScrapNow(const std::vector<std::string>& ids, bool all,
                const std::set<std::string>& active_run_dirs);
  std::unique_ptr<grpc::ClientContext> NewContext() const;

  std::unique_ptr<SnapshotCache> cache_;
  std::string token_;
  std::string runs_dir_;
  std::string used_dir_;  // runs_dir/.snapshots/<id>/<run dir name>: who materialised what
  std::unique_ptr<tae::v1::AgentLink::Stub> stub_;
  boost::asio::io_context io_;
  std::optional<boost::asio::executor_work_guard<boost::asio::io_context::executor_type>> guard_;
  std::thread thread_;
};

}  // namespace tae::agent
