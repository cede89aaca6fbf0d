// Agent: whose fault a failed job is as far as the worker goes (its disk, its journal, its run
// directory), and giving back the disk a job filled (agent/runner/disk.h decides; this measures
// and acts).

#include <chrono>
#include <filesystem>
#include <optional>

#include "absl/strings/str_cat.h"
#include "agent/core/agent.h"
#include "boost/asio/post.hpp"
#include "common/text/bytes.h"

namespace tae::agent {

void Agent::BlameWorker(tae::v1::Event* event) {
  tae::v1::RunExited* exited = event->mutable_exited();
  if (exited->exit_code() == 0 || exited->cancelled() || exited->interrupted() || exited->infra()) {
    return;
  }
  if (runner_.StoppedForDisk(event->run_id(), event->attempt())) {
    runner_.ReclaimDisk(event->run_id(), event->attempt());
    RelieveDisk();
    return;  // the job's own doing, as its reason says; its directories may be gone already
  }
  // The disk as this job met it, before a job that filled it is stopped and its space freed. A
  // job's disk use is the job's (agent/runner/disk.h): over its max_disk or filling the disk
  // itself, it fails as its own fault; hurt by another job, it is requeued without blaming the
  // worker; only a disk something else filled is the worker's fault.
  const DiskSpace disk = DiskSpaceOf(options_.work_dir);
  std::vector<RunDisk> others;
  std::optional<RunDisk> self;
  // Measured only when it can matter: walking every run's directories is not free.
  const std::vector<RunDisk> uses =
      DiskFull(disk) || runner_.MaxDisk(event->run_id(), event->attempt()) > 0
          ? runner_.DiskUse()
          : std::vector<RunDisk>{};
  for (const RunDisk& use : uses) {
    if (use.run_id == event->run_id() && use.attempt == event->attempt()) {
      self = use;
    } else {
      others.push_back(use);
    }
  }
  DiskVerdict verdict = self ? BlameDisk(*self, others, disk, options_.work_dir) : DiskVerdict{};
  if (verdict.cause == DiskCause::kNone && ReliefUnderWay()) {
    // The disk has room again, but this job ran beside one that filled it moments ago.
    verdict = BlameRecentFill(event->run_id(), event->attempt(), last_fill_->fill);
  }
  if (verdict.cause == DiskCause::kOverLimit || verdict.cause == DiskCause::kFilledItself) {
    if (exited->reason().find("into its directories") == std::string::npos) {
      exited->set_reason(absl::StrCat(exited->reason().empty()
                                          ? absl::StrCat("exit code ", exited->exit_code())
                                          : exited->reason(),
                                      "; ", verdict.why));
    }
    if (DiskFull(disk) && DiskFiller({*self}, disk)) {
      NoteFill(*self, uses);
    }
    runner_.ReclaimDisk(event->run_id(), event->attempt());
    return;  // the job's failure
  }
  std::string why;
  const bool relieved = RelieveDisk();
  if (journal_ != nullptr && !relieved) {
    if (absl::Status healthy = journal_->Healthy(); !healthy.ok()) {
      why = absl::StrCat("the agent's journal failed (", healthy.message(), ")");
      if (verdict.cause == DiskCause::kWorkerFull) {
        // A disk full of what no job wrote is the cause, the journal's failure its effect.
        why = absl::StrCat(verdict.why, "; ", why);
      }
      // The agent cannot go on either; it stops once this exit is on its way.
      boost::asio::post(*io_, [this, message = why] { Fatal(message); });
    }
  }
  std::error_code ec;
  if (why.empty() &&
      !std::filesystem::exists(runner_.RunDir(event->run_id(), event->attempt()), ec)) {
    why = "its run directory was removed from the worker";
  }
  bool by_other_job = false;
  if (why.empty() && verdict.cause == DiskCause::kFilledByOther) {
    by_other_job = true;
    why = verdict.why;
  } else if (why.empty() && verdict.cause == DiskCause::kWorkerFull) {
    why = verdict.why;
  }
  if (why.empty()) {
    return;
  }
  exited->set_infra(true);
  exited->set_by_other_job(by_other_job);
  exited->set_reason(absl::StrCat(
      exited->reason().empty() ? absl::StrCat("exit code ", exited->exit_code()) : exited->reason(),
      "; ", why, by_other_job ? "" : ": the worker's fault, not the job's"));
}

bool Agent::RelieveDisk() {
  const DiskSpace disk = DiskSpaceOf(options_.work_dir);
  if (DiskFull(disk)) {
    const std::vector<RunDisk> uses = runner_.DiskUse();
    if (std::optional<RunDisk> filler = DiskFiller(uses, disk)) {
      runner_.StopAndReclaim(
          filler->run_id, filler->attempt,
          absl::StrCat("stopped: it filled the worker's disk: it wrote ",
                       text::FormatBytes(filler->bytes), " into its directories (",
                       text::FormatBytes(filler->free_at_start),
                       " were free when it started); set resources.max_disk to stop it sooner"));
      NoteFill(*filler, uses);
    }
  }
  return ReliefUnderWay();
}

bool Agent::ReliefUnderWay() const {
  return last_fill_.has_value() &&
         std::chrono::steady_clock::now() - last_fill_->at <
             std::chrono::milliseconds(static_cast<int64_t>(kReliefS * 1000));
}

void Agent::NoteFill(const RunDisk& filler, const std::vector<RunDisk>& uses) {
  DiskFill fill{filler, {}};
  for (const RunDisk& use : uses) {
    fill.beside.emplace_back(use.run_id, use.attempt);
  }
  last_fill_ = GivenBack{std::move(fill), std::chrono::steady_clock::now()};
}

}  // namespace tae::agent
