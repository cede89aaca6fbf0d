#pragma once

// Whose fault a full disk is (docs/reliability.md, "Disk"). A job's disk use is the job's: a run
// that writes more than resources.max_disk into its directories, or that filled the worker's disk
// itself, fails as its own fault; a run hurt by another job's writes is requeued without blaming
// the worker; only a disk filled by something else than the jobs is the worker's fault (which
// counts towards its quarantine). The decision is a pure function of what was measured.

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace tae::agent {

// What a run has written on this worker, and what it may.
struct RunDisk {
  int64_t run_id = 0;
  int attempt = 0;
  uint64_t bytes = 0;          // RunDiskBytes of its directories
  uint64_t free_at_start = 0;  // the work dir's free bytes when its job started
  uint64_t max_disk = 0;       // resources.max_disk; 0: no limit
};

// The work dir's file system now.
struct DiskSpace {
  uint64_t free_bytes = 0;  // available to the agent's user
  uint64_t total_bytes = 0;
};

enum class DiskCause {
  kNone,           // the disk has nothing to do with it
  kOverLimit,      // the run wrote more than its max_disk: the job's fault
  kFilledItself,   // the disk was not full when the run started, is now, and the run wrote at
                   // least half of what was free then: the job's
  kFilledByOther,  // the disk is full and another run wrote that much: requeue, worker not blamed
  kWorkerFull,     // the disk is full, and not by a job here: the worker's fault
};

struct DiskVerdict {
  DiskCause cause = DiskCause::kNone;
  int64_t other_run = 0;  // kFilledByOther: which run
  std::string why;        // for the run's exit reason ("" for kNone)
};

// The file system `dir` is on (statvfs); zeros when it cannot be read.
DiskSpace DiskSpaceOf(const std::string& dir);

// Full: under 1% of the disk (at least 1 MiB) left.
bool DiskFull(const DiskSpace& disk);

// The run among `runs` that filled the disk: it started on a disk that was not full and wrote at
// least half of what was free then (any disk its size would have filled the same way). The one
// that wrote most when several did; nullopt when none did.
std::optional<RunDisk> DiskFiller(const std::vector<RunDisk>& runs, const DiskSpace& disk);

// Why the job of `run` failed, as far as the disk goes; `others`: the other runs on this worker.
// `work_dir` names the disk in the reason.
DiskVerdict BlameDisk(const RunDisk& run, const std::vector<RunDisk>& others, const DiskSpace& disk,
                      const std::string& work_dir);

// A job that filled the disk, as the agent saw it when it gave that space back, and the runs that
// were beside it then (run, attempt). A run beside it whose job fails soon after met the full
// disk, though the disk may have room again by the time its exit is seen.
struct DiskFill {
  RunDisk filler;
  std::vector<std::pair<int64_t, int>> beside;
};

// A failed run's verdict from a recent fill: kFilledByOther (the same words as BlameDisk's) when
// the run was beside the filler, kNone otherwise.
DiskVerdict BlameRecentFill(int64_t run_id, int attempt, const DiskFill& fill);

// Bytes written into `dirs` (recursively, links not followed): the blocks of regular files with
// one link. A file with more links is shared with the agent's cache (a snapshot's file), not
// written by the job.
uint64_t DirsBytes(const std::vector<std::string>& dirs);

}  // namespace tae::agent
