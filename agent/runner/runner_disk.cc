// The Runner's side of a job's disk use (agent/runner/disk.h): what each held run wrote, the
// periodic resources.max_disk check, stopping and reclaiming a job that filled the disk, and
// removing what ended attempts left (PruneEndedAttempts).
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "agent/runner/runner.h"
#include "agent/runner/runner_job.h"
#include "boost/asio/post.hpp"
#include "common/fs/fs.h"
#include "nlohmann/json.hpp"
#include "spdlog/spdlog.h"

namespace tae::agent {

std::vector<std::string> Runner::DiskDirs(int64_t run_id, int attempt) const {
  return {RunDir(run_id, attempt), absl::StrCat(options_.work_dir, "/runs/r", run_id)};
}

std::vector<RunDisk> Runner::DiskUse() const {
  std::vector<RunDisk> out;
  for (const auto& [key, job] : jobs_) {
    out.push_back({key.first, key.second, DirsBytes(DiskDirs(key.first, key.second)),
                   job->free_at_start,
                   static_cast<uint64_t>(std::max<int64_t>(0, job->spec.max_disk_bytes()))});
  }
  return out;
}

int64_t Runner::MaxDisk(int64_t run_id, int attempt) const {
  auto it = jobs_.find({run_id, attempt});
  return it == jobs_.end() ? 0 : std::max<int64_t>(0, it->second->spec.max_disk_bytes());
}

void Runner::ReclaimDisk(int64_t run_id, int attempt) { reclaim_.insert({run_id, attempt}); }

bool Runner::StoppedForDisk(int64_t run_id, int attempt) const {
  auto it = jobs_.find({run_id, attempt});
  return it != jobs_.end() && !it->second->fail_reason.empty();
}

void Runner::StopAndReclaim(int64_t run_id, int attempt, const std::string& reason) {
  auto it = jobs_.find({run_id, attempt});
  if (it == jobs_.end()) {
    return;
  }
  for (const std::string& path : DiskDirs(run_id, attempt)) {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  std::shared_ptr<Job> job = it->second;
  if (!job->fail_reason.empty()) {
    return;  // being stopped already
  }
  job->fail_reason = reason;
  if (job->finishing) {
    return;  // its exit is being reported: nothing to stop
  }
  (void)fs::WriteFileAtomically(job->job_dir + "/fail", reason, {0644, fs::Durability::kNone});
  spdlog::warn("run r{}: {}", run_id, reason);
  // Not from here: the caller may be inside another job's exit.
  boost::asio::post(*io_, [this, job, reason] { Terminate(job, reason); });
}

void Runner::ScheduleDiskCheck() {
  if (disk_checking_ || options_.disk_check_s <= 0) {
    return;
  }
  bool limited = false;
  for (const auto& [key, job] : jobs_) {
    limited = limited || job->spec.max_disk_bytes() > 0;
  }
  if (!limited) {
    return;
  }
  disk_checking_ = true;
  disk_timer_.expires_after(
      std::chrono::microseconds(static_cast<int64_t>(options_.disk_check_s * 1e6)));
  disk_timer_.async_wait([this](const boost::system::error_code& error) {
    disk_checking_ = false;
    if (!error) {
      CheckDisk();
    }
  });
}

void Runner::CheckDisk() {
  for (auto& [key, job] : jobs_) {
    const int64_t limit = job->spec.max_disk_bytes();
    if (limit <= 0 || job->cancel_requested || job->finishing) {
      continue;
    }
    RunDisk use{key.first, key.second, DirsBytes(DiskDirs(key.first, key.second)),
                job->free_at_start, static_cast<uint64_t>(limit)};
    DiskVerdict verdict = BlameDisk(use, {}, {}, options_.work_dir);
    if (verdict.cause != DiskCause::kOverLimit) {
      continue;
    }
    job->fail_reason = absl::StrCat("stopped: ", verdict.why);
    (void)fs::WriteFileAtomically(job->job_dir + "/fail", job->fail_reason,
                                  {0644, fs::Durability::kNone});
    spdlog::warn("run r{}: {}", key.first, job->fail_reason);
    Terminate(job, job->fail_reason);
  }
  ScheduleDiskCheck();
}

namespace {

// In runs/rN: its attempts were pruned while an upload of its checkpoints was in flight.
constexpr char kPrunedMark[] = ".pruned";

// False when the attempt of `job_dir` kept its checkpoints only on the worker
// (resources.keep_checkpoints = 0, from its start.pb).
bool CheckpointsGoToTaed(const std::string& job_dir) {
  tae::v1::StartRun start;
  absl::StatusOr<std::string> bytes = fs::ReadFile(job_dir + "/start.pb");
  if (!bytes.ok() || !start.ParseFromString(*bytes)) {
    return true;
  }
  nlohmann::json config = nlohmann::json::parse(start.config_json(), nullptr, false);
  const auto keep = config.is_object() ? config.find("resources.keep_checkpoints") : config.end();
  return keep == config.end() || !keep->is_number_integer() || keep->get<int64_t>() > 0;
}

}  // namespace

void Runner::PruneEndedAttempts() {
  struct Ended {
    std::filesystem::file_time_type at;
    int64_t run_id = 0;
    int attempt = 0;
  };
  std::vector<Ended> ended;
  std::set<int64_t> waiting;  // runs/rN marked kPrunedMark: to go once its uploads are done
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(options_.work_dir + "/runs", ec)) {
    const std::string name = entry.path().filename().string();
    int64_t run_id = 0;
    int attempt = 0;
    std::error_code mark_ec;
    if (name.size() > 1 && name[0] == 'r' &&
        absl::SimpleAtoi(absl::string_view(name).substr(1), &run_id) &&
        std::filesystem::exists(entry.path() / kPrunedMark, mark_ec)) {
      waiting.insert(run_id);
      continue;
    }
    const size_t dash = name.find("-a");
    if (name.size() < 8 || name[0] != 'r' || !absl::EndsWith(name, ".job") ||
        dash == std::string::npos ||
        !absl::SimpleAtoi(absl::string_view(name).substr(1, dash - 1), &run_id) ||
        !absl::SimpleAtoi(absl::string_view(name).substr(dash + 2, name.size() - dash - 6),
                          &attempt) ||
        JobDir(run_id, attempt) != entry.path().string()) {
      continue;
    }
    std::error_code time_ec;
    const auto at = std::filesystem::last_write_time(entry.path() / "done", time_ec);
    if (!time_ec && jobs_.count({run_id, attempt}) == 0) {
      ended.push_back({at, run_id, attempt});
    }
  }
  if (ended.size() <= kKeepEndedAttempts && waiting.empty()) {
    return;
  }
  std::sort(ended.begin(), ended.end(), [](const Ended& a, const Ended& b) {
    return a.at != b.at ? a.at > b.at : a.run_id > b.run_id;
  });
  std::set<int64_t> kept_runs;
  for (const auto& [key, job] : jobs_) {
    kept_runs.insert(key.first);
  }
  for (size_t i = 0; i < std::min(kKeepEndedAttempts, ended.size()); ++i) {
    kept_runs.insert(ended[i].run_id);
  }
  std::map<int64_t, bool> on_taed;  // pruned run -> its checkpoints go to taed
  for (int64_t run_id : waiting) {
    on_taed[run_id] = true;  // marked only when they do
  }
  for (size_t i = kKeepEndedAttempts; i < ended.size(); ++i) {
    const Ended& gone = ended[i];
    bool& uploads = on_taed.try_emplace(gone.run_id, true).first->second;
    uploads = uploads && CheckpointsGoToTaed(JobDir(gone.run_id, gone.attempt));
    for (const std::string& path :
         {RunDir(gone.run_id, gone.attempt), JobDir(gone.run_id, gone.attempt)}) {
      std::error_code remove_ec;
      std::filesystem::remove_all(path, remove_ec);
    }
  }
  // A run none of whose attempts is kept or live: its TAE_CHECKPOINT_DIR goes too when its
  // checkpoints were uploaded to taed (a later attempt restores from there) and no upload of it
  // is in flight.
  int checkpoint_dirs = 0;
  for (const auto& [run_id, uploads] : on_taed) {
    const std::string dir = absl::StrCat(options_.work_dir, "/runs/r", run_id);
    std::error_code captures_ec;
    const bool capturing = std::filesystem::exists(dir + "/.captures", captures_ec) &&
                           !std::filesystem::is_empty(dir + "/.captures", captures_ec);
    if (!uploads || kept_runs.count(run_id) > 0) {
      continue;
    }
    if (capturing) {
      // Looked at again after a later attempt ends, until its uploads are done.
      std::ofstream(dir + "/" + kPrunedMark);
      continue;
    }
    std::error_code remove_ec;
    checkpoint_dirs += std::filesystem::remove_all(dir, remove_ec) > 0 ? 1 : 0;
  }
  if (ended.size() > kKeepEndedAttempts || checkpoint_dirs > 0) {
    spdlog::info(
        "removed the directories of {} attempts that ended before the newest {} ({} runs' "
        "checkpoint directories, their checkpoints on taed)",
        ended.size() - std::min(ended.size(), kKeepEndedAttempts), kKeepEndedAttempts,
        checkpoint_dirs);
  }
}

}  // namespace tae::agent
