#pragma once

// sysstat: what a run costs the machine, sampled by the agent every few seconds and reported as
// ordinary `sys/...` metric points of the run (docs/engine.md lists the keys).
//
// The parsers are pure functions over the text of /proc files and vendor tools' output; ScanGroups
// does the I/O. JobSampler turns successive scans of one job's process group into CPU rates.
// AcceleratorProbe runs tpu-info / nvidia-smi on its own thread with process::RunTool, which the
// Runner's waitpid(-1) reaper cannot steal from (common/process/tool.h explains how).

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"

namespace tae::agent::sysstat {

// --- Pure parsers ---

// One process, from /proc/PID/stat.
struct ProcStat {
  pid_t pid = 0;
  pid_t pgid = 0;           // field 5
  uint64_t cpu_ticks = 0;   // utime + stime (fields 14, 15), in clock ticks
  uint64_t start_time = 0;  // field 22: tells a reused pid from the process that had it
  int64_t rss_pages = 0;    // field 24 (the same count as /proc/PID/statm's `resident`)
};
// The command name (field 2) may hold spaces and ')': fields are counted after its last ')'.
std::optional<ProcStat> ParseProcStat(absl::string_view text);

// The machine's CPU counters: the aggregate `cpu` line of /proc/stat, in clock ticks, and the
// number of `cpuN` lines (online CPUs).
struct HostCpu {
  uint64_t busy = 0;   // every column but idle and iowait
  uint64_t total = 0;  // every column (guest time is already inside user and nice)
  int cpus = 0;
};
std::optional<HostCpu> ParseHostCpu(absl::string_view proc_stat);

// MemAvailable of /proc/meminfo, in MiB.
std::optional<double> ParseMemAvailableMb(absl::string_view meminfo);

// One accelerator's reading; a field a tool does not report (N/A) is absent.
struct AcceleratorReading {
  int index = 0;
  std::optional<double> mem_mb;
  std::optional<double> busy_percent;  // GPU utilisation, TPU duty cycle
};

// `nvidia-smi --query-gpu=index,utilization.gpu,memory.used --format=csv,noheader,nounits`:
// "0, 97, 10807" per GPU (memory in MiB); "[N/A]" or "[Not Supported]" for what a GPU lacks.
std::vector<AcceleratorReading> ParseNvidiaSmiQuery(absl::string_view output);

// `tpu-info`: its "TPU Runtime Utilization" table, one row per chip:
// "| 0 | 18.45 GiB / 31.25 GiB | 100.00% |" (cells separated by '|' or box-drawing bars).
// Chips are numbered by their row (0, 1, ...): the Chip column may hold global device ids
// (8, 9, 12, 13 on a multi-host slice), which would not match the host's /dev/accelN.
std::vector<AcceleratorReading> ParseTpuInfo(absl::string_view output);

// --- Sampling ---

// Every process in proc_dir (normally /proc) whose group is `pgid`: one pass over the directory.
std::vector<ProcStat> ScanGroup(pid_t pgid, const std::string& proc_dir = "/proc");
// One pass over proc_dir, the processes grouped by process group (for several jobs at once).
std::map<pid_t, std::vector<ProcStat>> ScanGroups(const std::string& proc_dir = "/proc");

// One job's CPU and host CPU averaged over a window: each Observe adds the CPU its processes used
// since the previous Observe (a process first seen counts whole, as it started since then; the
// time of a process that exited between two Observes is not seen); Take closes the window.
class JobSampler {
 public:
  explicit JobSampler(double ticks_per_second);

  void Observe(const std::vector<ProcStat>& group, const HostCpu& host, double now_s);
  struct Rates {
    double cpu_percent = 0;       // 100 = one core
    double host_cpu_percent = 0;  // 0 .. 100 * cpus
  };
  // The averages since the previous Take (or the first Observe), or nullopt when less than two
  // Observes span the window. Starts a new window.
  std::optional<Rates> Take();

 private:
  double ticks_per_second_;
  std::map<std::pair<pid_t, uint64_t>, uint64_t> last_ticks_;  // (pid, start time) -> ticks
  bool observed_ = false;
  double window_start_s_ = 0;
  double last_s_ = 0;
  uint64_t window_ticks_ = 0;
  HostCpu host_start_;
  HostCpu host_last_;
};

// tpu-info and nvidia-smi, run on a thread of their own every interval when they are on PATH
// (no thread otherwise). The io thread only reads the latest points.
class AcceleratorProbe {
 public:
  AcceleratorProbe(double interval_s, int timeout_ms);
  ~AcceleratorProbe();
  AcceleratorProbe(const AcceleratorProbe&) = delete;
  AcceleratorProbe& operator=(const AcceleratorProbe&) = delete;

  // ("sys/gpu0_util_percent", 97), ... from the latest probe; empty before the first one ends.
  std::vector<std::pair<std::string, double>> Latest() const;

 private:
  void Loop();
  void ProbeOnce();

  double interval_s_;
  int timeout_ms_;
  std::string tpu_info_;
  std::string nvidia_smi_;
  mutable absl::Mutex mu_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::pair<std::string, double>> latest_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;
};

// The points of one sample: sys/cpu_percent, sys/host_cpu_percent, sys/rss_mb,
// sys/host_mem_available_mb (each when known).
std::vector<std::pair<std::string, double>> JobPoints(const JobSampler::Rates& rates,
                                                      const std::vector<ProcStat>& group,
                                                      std::optional<double> mem_available_mb,
                                                      int64_t page_size);

}  // namespace tae::agent::sysstat
