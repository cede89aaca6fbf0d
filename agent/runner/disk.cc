#include "agent/runner/disk.h"

#include <sys/stat.h>
#include <sys/statvfs.h>

#include <algorithm>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/text/bytes.h"

namespace tae::agent {

DiskSpace DiskSpaceOf(const std::string& dir) {
  struct statvfs fs {};
  if (statvfs(dir.c_str(), &fs) != 0) {
    return {};
  }
  return {static_cast<uint64_t>(fs.f_bavail) * fs.f_frsize,
          static_cast<uint64_t>(fs.f_blocks) * fs.f_frsize};
}

bool DiskFull(const DiskSpace& disk) {
  return disk.total_bytes > 0 &&
         disk.free_bytes < std::max<uint64_t>(disk.total_bytes / 100, uint64_t{1} << 20);
}

namespace {

DiskVerdict FilledByOther(const RunDisk& other) {
  return {DiskCause::kFilledByOther, other.run_id,
          absl::StrCat("the worker's disk was filled by run r", other.run_id, " (it wrote ",
                       text::FormatBytes(other.bytes), "); not this job's fault nor the worker's")};
}

}  // namespace

DiskVerdict BlameDisk(const RunDisk& run, const std::vector<RunDisk>& others, const DiskSpace& disk,
                      const std::string& work_dir) {
  if (run.max_disk > 0 && run.bytes > run.max_disk) {
    return {DiskCause::kOverLimit, 0,
            absl::StrCat("it wrote ", text::FormatBytes(run.bytes),
                         " into its directories on the worker, more than resources.max_disk = ",
                         text::FormatBytes(run.max_disk))};
  }
  if (!DiskFull(disk)) {
    return {};
  }
  if (DiskFiller({run}, disk)) {
    return {DiskCause::kFilledItself, 0,
            absl::StrCat("it filled the worker's disk: it wrote ", text::FormatBytes(run.bytes),
                         " into its directories (", text::FormatBytes(run.free_at_start),
                         " were free when it started); set resources.max_disk to stop it sooner")};
  }
  if (std::optional<RunDisk> other = DiskFiller(others, disk)) {
    return FilledByOther(*other);
  }
  return {DiskCause::kWorkerFull, 0,
          DiskFull({run.free_at_start, disk.total_bytes})
              ? absl::StrCat("the worker's disk was full before the job started (",
                             run.free_at_start >> 10, " KiB free in ", work_dir, ")")
              : absl::StrCat("the worker's disk is full (", disk.free_bytes >> 10, " KiB free in ",
                             work_dir, "; no job here wrote most of it)")};
}

std::optional<RunDisk> DiskFiller(const std::vector<RunDisk>& runs, const DiskSpace& disk) {
  std::optional<RunDisk> filler;
  for (const RunDisk& run : runs) {
    // A disk that was full already when the run started was not filled by it.
    if (run.bytes == 0 || DiskFull({run.free_at_start, disk.total_bytes}) ||
        run.bytes < run.free_at_start / 2) {
      continue;
    }
    if (!filler || run.bytes > filler->bytes) {
      filler = run;
    }
  }
  return filler;
}

DiskVerdict BlameRecentFill(int64_t run_id, int attempt, const DiskFill& fill) {
  const std::pair<int64_t, int> self{run_id, attempt};
  if (self == std::pair<int64_t, int>{fill.filler.run_id, fill.filler.attempt} ||
      std::find(fill.beside.begin(), fill.beside.end(), self) == fill.beside.end()) {
    return {};
  }
  return FilledByOther(fill.filler);
}

uint64_t DirsBytes(const std::vector<std::string>& dirs) {
  uint64_t total = 0;
  for (const std::string& dir : dirs) {
    std::error_code ec;
    std::filesystem::recursive_directory_iterator it(
        dir, std::filesystem::directory_options::skip_permission_denied, ec);
    for (; !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
      struct stat st {};
      if (lstat(it->path().c_str(), &st) == 0 && S_ISREG(st.st_mode) && st.st_nlink == 1) {
        total += static_cast<uint64_t>(st.st_blocks) * 512;
      }
    }
  }
  return total;
}

}  // namespace tae::agent
