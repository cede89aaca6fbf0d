// The Runner's side of a job's disk use (agent/runner/disk.h): what each held run wrote, the
// periodic resources.max_disk check, and stopping and reclaiming a job that filled the disk.
#include <algorithm>
#include <filesystem>
#include <memory>

#include "absl/strings/str_cat.h"
#include "agent/runner/runner.h"
#include "agent/runner/runner_job.h"
#include "boost/asio/post.hpp"
#include "common/fs/fs.h"
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

}  // namespace tae::agent
