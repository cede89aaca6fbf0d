#include "agent/sysstat/sysstat.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/time/time.h"
#include "common/process/tool.h"

namespace tae::agent::sysstat {
namespace {

std::optional<double> ParseNumber(absl::string_view text) {
  text = absl::StripAsciiWhitespace(text);
  double value = 0;
  if (!absl::SimpleAtod(text, &value)) {
    return std::nullopt;
  }
  return value;
}

// "18.45 GiB" -> MiB; the unit may be missing (then MiB) or any of KiB/MiB/GiB/TiB/KB/MB/GB/TB.
std::optional<double> ParseMemoryMb(absl::string_view text) {
  text = absl::StripAsciiWhitespace(text);
  size_t unit_at = text.find_first_not_of("0123456789.");
  std::optional<double> number = ParseNumber(text.substr(0, unit_at));
  if (!number.has_value()) {
    return std::nullopt;
  }
  std::string unit = absl::AsciiStrToLower(
      absl::StripAsciiWhitespace(unit_at == absl::string_view::npos ? "" : text.substr(unit_at)));
  constexpr double kMiB = 1024.0 * 1024.0;
  static const std::map<std::string, double> kBytes = {
      {"", kMiB},           {"b", 1},
      {"kib", 1024.0},      {"mib", kMiB},
      {"gib", kMiB * 1024}, {"tib", kMiB * 1024 * 1024},
      {"kb", 1e3},          {"mb", 1e6},
      {"gb", 1e9},          {"tb", 1e12}};
  auto it = kBytes.find(unit);
  if (it == kBytes.end()) {
    return std::nullopt;
  }
  return *number * it->second / kMiB;
}

std::optional<std::string> ReadFile(const std::string& path) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return std::nullopt;
  }
  std::string out;
  char buf[4096];
  while (true) {
    ssize_t n = read(fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n <= 0) {
      break;
    }
    out.append(buf, static_cast<size_t>(n));
  }
  close(fd);
  return out;
}

double MonotonicSeconds() {
  using namespace std::chrono;
  return duration_cast<duration<double>>(steady_clock::now().time_since_epoch()).count();
}

}  // namespace

std::optional<ProcStat> ParseProcStat(absl::string_view text) {
  const size_t open = text.find('(');
  const size_t close = text.rfind(')');
  if (open == absl::string_view::npos || close == absl::string_view::npos || close < open) {
    return std::nullopt;
  }
  ProcStat stat;
  if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(text.substr(0, open)), &stat.pid)) {
    return std::nullopt;
  }
  // After the name: field 3 (state) is rest[0], so field N is rest[N - 3].
  std::vector<absl::string_view> rest =
      absl::StrSplit(text.substr(close + 1), ' ', absl::SkipWhitespace());
  if (rest.size() < 22) {
    return std::nullopt;
  }
  uint64_t utime = 0;
  uint64_t stime = 0;
  if (!absl::SimpleAtoi(rest[5 - 3], &stat.pgid) || !absl::SimpleAtoi(rest[14 - 3], &utime) ||
      !absl::SimpleAtoi(rest[15 - 3], &stime) ||
      !absl::SimpleAtoi(rest[22 - 3], &stat.start_time) ||
      !absl::SimpleAtoi(rest[24 - 3], &stat.rss_pages)) {
    return std::nullopt;
  }
  stat.cpu_ticks = utime + stime;
  return stat;
}

std::optional<HostCpu> ParseHostCpu(absl::string_view proc_stat) {
  std::optional<HostCpu> host;
  int cpus = 0;
  for (absl::string_view line : absl::StrSplit(proc_stat, '\n', absl::SkipEmpty())) {
    if (!absl::StartsWith(line, "cpu")) {
      continue;
    }
    std::vector<absl::string_view> fields = absl::StrSplit(line, ' ', absl::SkipWhitespace());
    if (fields[0] != "cpu") {
      cpus += absl::ascii_isdigit(fields[0].size() > 3 ? fields[0][3] : 'x') ? 1 : 0;
      continue;
    }
    // user nice system idle iowait irq softirq steal [guest guest_nice]
    if (fields.size() < 5) {
      return std::nullopt;
    }
    HostCpu cpu;
    for (size_t i = 1; i < fields.size() && i <= 8; ++i) {
      uint64_t value = 0;
      if (!absl::SimpleAtoi(fields[i], &value)) {
        return std::nullopt;
      }
      cpu.total += value;
      if (i != 4 && i != 5) {  // idle, iowait
        cpu.busy += value;
      }
    }
    host = cpu;
  }
  if (host.has_value()) {
    host->cpus = std::max(1, cpus);
  }
  return host;
}

std::optional<double> ParseMemAvailableMb(absl::string_view meminfo) {
  for (absl::string_view line : absl::StrSplit(meminfo, '\n', absl::SkipEmpty())) {
    if (absl::ConsumePrefix(&line, "MemAvailable:")) {
      return ParseMemoryMb(absl::StrReplaceAll(line, {{"kB", "KiB"}}));  // /proc's kB is KiB
    }
  }
  return std::nullopt;
}

std::vector<AcceleratorReading> ParseNvidiaSmiQuery(absl::string_view output) {
  std::vector<AcceleratorReading> out;
  for (absl::string_view line : absl::StrSplit(output, '\n', absl::SkipWhitespace())) {
    std::vector<absl::string_view> cells = absl::StrSplit(line, ',');
    if (cells.size() != 3) {
      continue;
    }
    AcceleratorReading reading;
    if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(cells[0]), &reading.index)) {
      continue;
    }
    reading.busy_percent = ParseNumber(cells[1]);  // "[N/A]" is simply absent
    reading.mem_mb = ParseNumber(cells[2]);
    out.push_back(reading);
  }
  return out;
}

std::vector<AcceleratorReading> ParseTpuInfo(absl::string_view output) {
  std::vector<AcceleratorReading> out;
  bool in_table = false;
  for (absl::string_view raw : absl::StrSplit(output, '\n')) {
    // Rich prints box-drawing bars when it thinks it has a terminal; plain '|' otherwise.
    std::string line = absl::StrReplaceAll(raw, {{"\u2502", "|"}, {"\u2503", "|"}});
    absl::string_view stripped = absl::StripAsciiWhitespace(line);
    if (absl::StrContains(stripped, "Runtime Utilization")) {
      in_table = true;
      continue;
    }
    if (!in_table || stripped.empty()) {
      continue;
    }
    if (stripped.find('|') == absl::string_view::npos) {
      // A border (┏━━┓, |---|) keeps the table; any other text is the next section's title.
      if (std::any_of(stripped.begin(), stripped.end(),
                      [](char c) { return absl::ascii_isalnum(static_cast<unsigned char>(c)); })) {
        in_table = false;
      }
      continue;
    }
    std::vector<absl::string_view> cells = absl::StrSplit(stripped, '|', absl::SkipWhitespace());
    int chip = 0;
    if (cells.empty() || !absl::SimpleAtoi(absl::StripAsciiWhitespace(cells[0]), &chip)) {
      continue;  // the header row, a separator
    }
    AcceleratorReading reading;
    reading.index = static_cast<int>(out.size());
    for (size_t i = 1; i < cells.size(); ++i) {
      absl::string_view cell = absl::StripAsciiWhitespace(cells[i]);
      if (absl::ConsumeSuffix(&cell, "%")) {
        reading.busy_percent = ParseNumber(cell);
      } else if (size_t slash = cell.find('/'); slash != absl::string_view::npos) {
        reading.mem_mb = ParseMemoryMb(cell.substr(0, slash));  // "used / total"
      }
    }
    out.push_back(reading);
  }
  return out;
}

std::map<pid_t, std::vector<ProcStat>> ScanGroups(const std::string& proc_dir) {
  std::map<pid_t, std::vector<ProcStat>> groups;
  DIR* dir = opendir(proc_dir.c_str());
  if (dir == nullptr) {
    return groups;
  }
  while (dirent* entry = readdir(dir)) {
    if (!absl::ascii_isdigit(static_cast<unsigned char>(entry->d_name[0]))) {
      continue;
    }
    // A process that exits meanwhile has no stat file any more: it is simply not counted.
    std::optional<std::string> text = ReadFile(absl::StrCat(proc_dir, "/", entry->d_name, "/stat"));
    if (!text.has_value()) {
      continue;
    }
    if (std::optional<ProcStat> stat = ParseProcStat(*text)) {
      groups[stat->pgid].push_back(*stat);
    }
  }
  closedir(dir);
  return groups;
}

std::vector<ProcStat> ScanGroup(pid_t pgid, const std::string& proc_dir) {
  std::map<pid_t, std::vector<ProcStat>> groups = ScanGroups(proc_dir);
  auto it = groups.find(pgid);
  return it == groups.end() ? std::vector<ProcStat>{} : std::move(it->second);
}

JobSampler::JobSampler(double ticks_per_second) : ticks_per_second_(ticks_per_second) {}

void JobSampler::Observe(const std::vector<ProcStat>& group, const HostCpu& host, double now_s) {
  std::map<std::pair<pid_t, uint64_t>, uint64_t> ticks;
  for (const ProcStat& proc : group) {
    const std::pair<pid_t, uint64_t> key{proc.pid, proc.start_time};
    ticks[key] = proc.cpu_ticks;
    if (!observed_) {
      continue;  // the first scan is the baseline
    }
    auto it = last_ticks_.find(key);
    const uint64_t before = it == last_ticks_.end() ? 0 : std::min(it->second, proc.cpu_ticks);
    window_ticks_ += proc.cpu_ticks - before;
  }
  last_ticks_ = std::move(ticks);
  if (!observed_) {
    observed_ = true;
    window_start_s_ = now_s;
    host_start_ = host;
  }
  last_s_ = now_s;
  host_last_ = host;
}

std::optional<JobSampler::Rates> JobSampler::Take() {
  const double seconds = last_s_ - window_start_s_;
  if (!observed_ || seconds <= 0) {
    return std::nullopt;
  }
  Rates rates;
  rates.cpu_percent = 100.0 * static_cast<double>(window_ticks_) / ticks_per_second_ / seconds;
  const uint64_t total = host_last_.total - std::min(host_last_.total, host_start_.total);
  const uint64_t busy = host_last_.busy - std::min(host_last_.busy, host_start_.busy);
  if (total > 0) {
    rates.host_cpu_percent = 100.0 * std::max(1, host_last_.cpus) * static_cast<double>(busy) /
                             static_cast<double>(total);
  }
  window_ticks_ = 0;
  window_start_s_ = last_s_;
  host_start_ = host_last_;
  return rates;
}

AcceleratorProbe::AcceleratorProbe(double interval_s, int timeout_ms)
    : interval_s_(interval_s),
      timeout_ms_(timeout_ms),
      tpu_info_(process::FindOnPath("tpu-info")),
      nvidia_smi_(process::FindOnPath("nvidia-smi")) {
  if (interval_s_ > 0 && (!tpu_info_.empty() || !nvidia_smi_.empty())) {
    thread_ = std::thread([this] { Loop(); });
  }
}

AcceleratorProbe::~AcceleratorProbe() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  if (thread_.joinable()) {
    thread_.join();
  }
}

std::vector<std::pair<std::string, double>> AcceleratorProbe::Latest() const {
  absl::MutexLock lock(&mu_);
  return latest_;
}

void AcceleratorProbe::Loop() {
  // Signals are the io thread's (asio's signal_set): this thread keeps out of their way.
  // (process::RunTool does not need it; it blocks signals around its clone itself.)
  sigset_t all;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, nullptr);
  while (true) {
    const double started = MonotonicSeconds();
    ProbeOnce();
    const double wait_s = std::max(0.1, interval_s_ - (MonotonicSeconds() - started));
    absl::MutexLock lock(&mu_);
    auto stopping = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stop_; };
    if (mu_.AwaitWithTimeout(absl::Condition(&stopping), absl::Seconds(wait_s))) {
      return;
    }
  }
}

void AcceleratorProbe::ProbeOnce() {
  std::vector<std::pair<std::string, double>> points;
  // A tool that fails is tried again next time (a driver may come back); it costs one timeout.
  if (!tpu_info_.empty()) {
    process::ToolResult r = process::RunTool({tpu_info_}, timeout_ms_);
    for (const AcceleratorReading& chip :
         r.ok ? ParseTpuInfo(r.out) : std::vector<AcceleratorReading>{}) {
      if (chip.mem_mb.has_value()) {
        points.emplace_back(absl::StrCat("sys/tpu", chip.index, "_mem_mb"), *chip.mem_mb);
      }
      if (chip.busy_percent.has_value()) {
        points.emplace_back(absl::StrCat("sys/tpu", chip.index, "_duty_percent"),
                            *chip.busy_percent);
      }
    }
  }
  if (!nvidia_smi_.empty()) {
    process::ToolResult r =
        process::RunTool({nvidia_smi_, "--query-gpu=index,utilization.gpu,memory.used",
                          "--format=csv,noheader,nounits"},
                         timeout_ms_);
    for (const AcceleratorReading& gpu :
         r.ok ? ParseNvidiaSmiQuery(r.out) : std::vector<AcceleratorReading>{}) {
      if (gpu.busy_percent.has_value()) {
        points.emplace_back(absl::StrCat("sys/gpu", gpu.index, "_util_percent"), *gpu.busy_percent);
      }
      if (gpu.mem_mb.has_value()) {
        points.emplace_back(absl::StrCat("sys/gpu", gpu.index, "_mem_mb"), *gpu.mem_mb);
      }
    }
  }
  absl::MutexLock lock(&mu_);
  latest_ = std::move(points);
}

std::vector<std::pair<std::string, double>> JobPoints(const JobSampler::Rates& rates,
                                                      const std::vector<ProcStat>& group,
                                                      std::optional<double> mem_available_mb,
                                                      int64_t page_size) {
  int64_t rss_pages = 0;
  for (const ProcStat& proc : group) {
    rss_pages += proc.rss_pages;
  }
  std::vector<std::pair<std::string, double>> points = {
      {"sys/cpu_percent", rates.cpu_percent},
      {"sys/host_cpu_percent", rates.host_cpu_percent},
      {"sys/rss_mb", static_cast<double>(rss_pages) * static_cast<double>(page_size) / 1048576.0},
  };
  if (mem_available_mb.has_value()) {
    points.emplace_back("sys/host_mem_available_mb", *mem_available_mb);
  }
  return points;
}

}  // namespace tae::agent::sysstat
