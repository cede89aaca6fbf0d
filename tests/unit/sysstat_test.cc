#include "agent/sysstat/sysstat.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <set>
#include <thread>

#include "agent/runner/runner.h"
#include "boost/asio/io_context.hpp"
#include "tests/skip.h"

namespace tae::agent::sysstat {
namespace {

// A real line of /proc/PID/stat (Linux 6.x), with a command name that holds a space and a ')'.
constexpr char kProcStat[] =
    "4242 (my job) x) R 4200 4242 4200 34816 4242 4194304 1180 0 0 0 250 50 0 0 20 0 3 0 "
    "987654 123456789 2560 18446744073709551615 1 1 0 0 0 0 0 4096 0 0 0 0 17 1 0 0 0 0 0\n";

TEST_CASE("sysstat: /proc/PID/stat fields are counted after the command name") {
  std::optional<ProcStat> stat = ParseProcStat(kProcStat);
  REQUIRE(stat.has_value());
  CHECK(stat->pid == 4242);
  CHECK(stat->pgid == 4242);
  CHECK(stat->cpu_ticks == 300);  // utime 250 + stime 50
  CHECK(stat->start_time == 987654);
  CHECK(stat->rss_pages == 2560);
  CHECK_FALSE(ParseProcStat("4242 (truncated) R 1 2").has_value());
  CHECK_FALSE(ParseProcStat("").has_value());
}

TEST_CASE("sysstat: /proc/stat gives busy and total ticks and the CPU count") {
  constexpr char kStat[] =
      "cpu  100 10 50 800 40 0 0 0 0 0\n"
      "cpu0 50 5 25 400 20 0 0 0 0 0\n"
      "cpu1 50 5 25 400 20 0 0 0 0 0\n"
      "intr 12345 0 0\n"
      "ctxt 999\n";
  std::optional<HostCpu> cpu = ParseHostCpu(kStat);
  REQUIRE(cpu.has_value());
  CHECK(cpu->total == 1000);
  CHECK(cpu->busy == 160);  // all but idle (800) and iowait (40)
  CHECK(cpu->cpus == 2);
  CHECK_FALSE(ParseHostCpu("intr 1\n").has_value());
}

TEST_CASE("sysstat: MemAvailable in MiB") {
  constexpr char kMeminfo[] =
      "MemTotal:       16303460 kB\n"
      "MemFree:         1014396 kB\n"
      "MemAvailable:    8388608 kB\n";
  std::optional<double> mb = ParseMemAvailableMb(kMeminfo);
  REQUIRE(mb.has_value());
  CHECK(*mb == Approx(8192.0));
  CHECK_FALSE(ParseMemAvailableMb("MemTotal: 1 kB\n").has_value());
}

TEST_CASE("sysstat: nvidia-smi query output, with what a GPU does not support left out") {
  // `nvidia-smi --query-gpu=index,utilization.gpu,memory.used --format=csv,noheader,nounits`
  std::vector<AcceleratorReading> gpus =
      ParseNvidiaSmiQuery("0, 97, 10807\n1, [N/A], 512\nNVIDIA-SMI has failed\n");
  REQUIRE(gpus.size() == 2);
  CHECK(gpus[0].index == 0);
  CHECK(*gpus[0].busy_percent == 97);
  CHECK(*gpus[0].mem_mb == 10807);
  CHECK(gpus[1].index == 1);
  CHECK_FALSE(gpus[1].busy_percent.has_value());
  CHECK(*gpus[1].mem_mb == 512);
  CHECK(ParseNvidiaSmiQuery("").empty());
}

TEST_CASE("sysstat: tpu-info's runtime utilization table, plain and box-drawn") {
  // tpu-info's static output as its README shows it (0.5+, not a terminal): tables with '|'.
  // Chip ids can be global on a slice (8, 9, ...): chips are numbered by row.
  constexpr char kPlain[] =
      "Libtpu version: 0.0.19\n"
      "Accelerator type: v6e\n\n"
      "TPU Chips\n\n"
      "| Chip        | Type         | Devices | PID     |\n"
      "|-------------|--------------|---------|---------|\n"
      "| /dev/vfio/0 | TPU v6e chip | 1       | 1469584 |\n\n"
      "TPU Runtime Utilization\n\n"
      "| Chip | HBM Usage (GiB)       | Duty cycle |\n"
      "|------|-----------------------|------------|\n"
      "| 8    | 18.45 GiB / 31.25 GiB |    100.00% |\n"
      "| 9    |  9.26 GiB / 31.25 GiB |     12.50% |\n\n"
      "TensorCore Utilization\n\n"
      "| Core ID | TensorCore Utilization |\n"
      "|---------|------------------------|\n"
      "| 0       | 13.60%                 |\n";
  std::vector<AcceleratorReading> chips = ParseTpuInfo(kPlain);
  REQUIRE(chips.size() == 2);
  CHECK(chips[0].index == 0);
  CHECK(*chips[0].mem_mb == Approx(18.45 * 1024));
  CHECK(*chips[0].busy_percent == Approx(100.0));
  CHECK(chips[1].index == 1);
  CHECK(*chips[1].mem_mb == Approx(9.26 * 1024));
  CHECK(*chips[1].busy_percent == Approx(12.5));

  // Rich's box-drawing form (what tpu-info prints to a terminal, and older releases always).
  constexpr char kBoxed[] =
      "TPU Runtime Utilization\n"
      "\u250f\u2501\u2501\u2501\u2533\u2501\u2501\u2501\u2533\u2501\u2501\u2501\u2513\n"
      "\u2503 Device \u2503 Memory usage         \u2503 Duty cycle \u2503\n"
      "\u2521\u2501\u2501\u2501\u2547\u2501\u2501\u2501\u2547\u2501\u2501\u2501\u2529\n"
      "\u2502 0      \u2502 0.00 GiB / 31.75 GiB \u2502      0.00% \u2502\n"
      "\u2502 1      \u2502 2.00 GiB / 31.75 GiB \u2502     50.00% \u2502\n"
      "\u2514\u2500\u2500\u2500\u2534\u2500\u2500\u2500\u2534\u2500\u2500\u2500\u2518\n";
  chips = ParseTpuInfo(kBoxed);
  REQUIRE(chips.size() == 2);
  CHECK(*chips[0].mem_mb == Approx(0.0));
  CHECK(*chips[1].mem_mb == Approx(2048.0));
  CHECK(*chips[1].busy_percent == Approx(50.0));

  // No workload on the chips: tpu-info prints the chip table only.
  CHECK(ParseTpuInfo("TPU Chips\n| /dev/accel0 | TPU v4 chip | 1 | 1234 |\n").empty());
}

TEST_CASE("sysstat: CPU percent is ticks over wall time, windows close on Take") {
  JobSampler sampler(100);  // 100 ticks per second
  auto proc = [](pid_t pid, uint64_t start, uint64_t ticks) {
    ProcStat p;
    p.pid = pid;
    p.pgid = 10;
    p.start_time = start;
    p.cpu_ticks = ticks;
    return p;
  };
  HostCpu host{100, 1000, 2};
  sampler.Observe({proc(10, 1, 500)}, host, 0.0);
  CHECK_FALSE(sampler.Take().has_value());  // one scan: only a baseline
  // 1 s later: pid 10 used 50 ticks (0.5 s), a new pid 11 used 30 since it started.
  sampler.Observe({proc(10, 1, 550), proc(11, 7, 30)}, HostCpu{200, 1200, 2}, 1.0);
  // 1 s later: pid 11 exited; pid 10 is now another process (reused pid, new start time).
  sampler.Observe({proc(10, 9, 20)}, HostCpu{300, 1400, 2}, 2.0);
  std::optional<JobSampler::Rates> rates = sampler.Take();
  REQUIRE(rates.has_value());
  CHECK(rates->cpu_percent == Approx(100.0 * (50 + 30 + 20) / 100.0 / 2.0));
  CHECK(rates->host_cpu_percent == Approx(100.0 * 2 * 200 / 400));
  CHECK_FALSE(sampler.Take().has_value());  // an empty window
  sampler.Observe({proc(10, 9, 120)}, HostCpu{400, 1600, 2}, 3.0);
  rates = sampler.Take();
  REQUIRE(rates.has_value());
  CHECK(rates->cpu_percent == Approx(100.0));

  std::vector<ProcStat> group = {proc(10, 9, 0), proc(11, 9, 0)};
  group[0].rss_pages = 256;
  group[1].rss_pages = 256;
  std::vector<std::pair<std::string, double>> points = JobPoints(*rates, group, 4096.0, 4096);
  CHECK(points ==
        std::vector<std::pair<std::string, double>>{{"sys/cpu_percent", 100.0},
                                                    {"sys/host_cpu_percent", 100.0},
                                                    {"sys/rss_mb", 2.0},
                                                    {"sys/host_mem_available_mb", 4096.0}});
}

TEST_CASE("sysstat: ScanGroup finds the processes of a real process group") {
  pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    setpgid(0, 0);
    execl("/bin/sh", "sh", "-c", "sleep 30 & sleep 30; wait", static_cast<char*>(nullptr));
    _exit(127);
  }
  setpgid(pid, pid);
  std::vector<ProcStat> group;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (std::chrono::steady_clock::now() < deadline) {
    group = ScanGroup(pid);
    // sh and its two sleeps, each past exec (a process mid-exec shows no resident pages yet).
    if (group.size() >= 3 && std::all_of(group.begin(), group.end(),
                                         [](const ProcStat& p) { return p.rss_pages > 0; })) {
      break;
    }
    std::this_thread::yield();
  }
  kill(-pid, SIGKILL);
  waitpid(pid, nullptr, 0);
  REQUIRE(group.size() >= 3);
  std::set<pid_t> pids;
  for (const ProcStat& proc : group) {
    CHECK(proc.pgid == pid);
    CHECK(proc.rss_pages > 0);
    pids.insert(proc.pid);
  }
  CHECK(pids.count(pid) == 1);
  CHECK(ScanGroup(getpgrp()).size() >= 1);  // this test process's own group
}

// The real Runner and tae-job (beside this test binary in the build tree): a busy job gets a
// sys/cpu_percent point.
TEST_CASE("sysstat: the Runner reports a busy job's sys/cpu_percent") {
  const std::filesystem::path bin = std::filesystem::read_symlink("/proc/self/exe").parent_path();
  if (!std::filesystem::exists(bin / "tae-job")) {
    TAE_SKIP("no tae-job beside " << bin);
  }
  char tmpl[] = "/tmp/tae-sysstat-XXXXXX";
  REQUIRE(mkdtemp(tmpl) != nullptr);
  const std::string work_dir = tmpl;
  {
    boost::asio::io_context io;
    RunnerOptions options;
    options.work_dir = work_dir;
    options.job_binary = (bin / "tae-job").string();
    options.poll_ms = 20;
    options.kill_grace_ms = 500;
    options.sys_interval_s = 0.2;
    std::optional<double> cpu;
    bool has_rss = false;
    bool exited = false;
    Runner runner(&io, options, [&](tae::v1::Event event, std::optional<OutputMark>) {
      if (event.has_exited()) {
        exited = true;
      }
      if (!event.has_metrics()) {
        return;
      }
      for (const tae::v1::Scalar& value : event.metrics().values()) {
        if (value.key() == "sys/cpu_percent" && !cpu.has_value()) {
          cpu = value.value();
        }
        has_rss = has_rss || (value.key() == "sys/rss_mb" && value.value() > 0);
      }
    });
    tae::v1::StartRun start;
    start.set_run_id(1);
    start.set_attempt(1);
    start.set_command("while :; do :; done");
    REQUIRE(runner.Start(start).ok());
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (!cpu.has_value() && std::chrono::steady_clock::now() < deadline) {
      io.restart();
      io.run_for(std::chrono::milliseconds(50));
    }
    runner.Cancel(1, 1, "test over");
    while (!exited && std::chrono::steady_clock::now() < deadline + std::chrono::seconds(10)) {
      io.restart();
      io.run_for(std::chrono::milliseconds(50));
    }
    REQUIRE(cpu.has_value());
    CHECK(*cpu > 0);
    CHECK(has_rss);
    CHECK(exited);
  }
  std::error_code ec;
  std::filesystem::remove_all(work_dir, ec);
}

}  // namespace
}  // namespace tae::agent::sysstat
