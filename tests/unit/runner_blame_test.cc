// The Runner's side of blame (docs/reliability.md), with the real tae-job beside this test
// binary: a missing engine is a start fault, a job past resources.max_disk is stopped and fails,
// a job that kills its supervisor fails as its own doing.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <optional>
#include <string>

#include "agent/runner/runner.h"
#include "boost/asio/io_context.hpp"
#include "tests/skip.h"
#include "tests/unit/temp_dir.h"

namespace tae::agent {
namespace {

struct RunnerFixture {
  RunnerFixture() : dir("tae-runner-blame") {
    options.work_dir = dir.path();
    options.job_binary = (bin / "tae-job").string();
    options.train_binary = dir.Full("no-such-tae-train");
    options.poll_ms = 20;
    options.kill_grace_ms = 500;
    options.sys_interval_s = 0;
    options.disk_check_s = 0.1;
  }
  // Runs the command as run `run_id` until it exits (at most 30 s); returns its exit event.
  std::optional<tae::v1::RunExited> Run(const std::string& command, int64_t max_disk = 0,
                                        int64_t run_id = 1) {
    boost::asio::io_context io;
    std::optional<tae::v1::RunExited> exited;
    Runner runner(&io, options, [&](tae::v1::Event event, std::optional<OutputMark>) {
      if (event.has_exited()) {
        exited = event.exited();
      }
    });
    tae::v1::StartRun start;
    start.set_run_id(run_id);
    start.set_attempt(1);
    start.set_command(command);
    start.set_max_disk_bytes(max_disk);
    REQUIRE(runner.Start(start).ok());
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (!exited.has_value() && std::chrono::steady_clock::now() < deadline) {
      io.restart();
      io.run_for(std::chrono::milliseconds(50));
    }
    return exited;
  }
  const std::filesystem::path bin = std::filesystem::read_symlink("/proc/self/exe").parent_path();
  testing::TempDir dir;
  RunnerOptions options;
};

TEST_CASE("runner: a missing engine binary is a start fault, not a job that ran") {
  RunnerFixture f;
  boost::asio::io_context io;
  Runner runner(&io, f.options, [](tae::v1::Event, std::optional<OutputMark>) {});
  tae::v1::StartRun start;
  start.set_run_id(1);
  start.set_attempt(1);  // no command: tae-train
  const absl::Status status = runner.Start(start);
  CHECK(absl::IsFailedPrecondition(status));
  CHECK(std::string(status.message())
            .find("the engine binary " + f.options.train_binary +
                  " is missing or not executable on this worker") == 0);
  CHECK(runner.idle());
}

TEST_CASE(
    "runner: the directories of attempts that ended longest ago go, and their checkpoint "
    "directories unless the checkpoints stay only on the worker or are being uploaded") {
  RunnerFixture f;
  boost::asio::io_context io;
  Runner runner(&io, f.options, [](tae::v1::Event, std::optional<OutputMark>) {});
  const size_t total = Runner::kKeepEndedAttempts + 8;
  for (size_t i = 1; i <= total; ++i) {
    const std::string run = "runs/r" + std::to_string(i);
    tae::v1::StartRun start;
    start.set_run_id(static_cast<int64_t>(i));
    start.set_attempt(1);
    // r1: keep_checkpoints = 0 (the worker's copy is the only one); r2: an upload in flight.
    start.set_config_json(i == 1 ? R"({"resources.keep_checkpoints": 0})" : "{}");
    f.dir.Write(run + "-a1/out.txt", "what the job wrote");
    f.dir.Write(run + "-a1.job/start.pb", start.SerializeAsString());
    f.dir.Write(run + "/checkpoint/state.txt", "a checkpoint");
    if (i == 2) {
      f.dir.Write(run + "/.captures/step-10/state.txt", "being uploaded");
    }
    runner.MarkDone(static_cast<int64_t>(i), 1);  // ended in this order
  }
  for (size_t i = 1; i <= total; ++i) {
    const std::string run = f.dir.Full("runs/r" + std::to_string(i));
    INFO("r" << i);
    const bool kept = i > total - Runner::kKeepEndedAttempts;
    CHECK(std::filesystem::exists(run + "-a1") == kept);
    CHECK(std::filesystem::exists(run + "-a1.job") == kept);
    CHECK(std::filesystem::exists(run + "/checkpoint/state.txt") == (kept || i <= 2));
  }
  // r2's upload ends: its directory goes at the next attempt's end; r1's stays.
  std::filesystem::remove_all(f.dir.Full("runs/r2/.captures/step-10"));
  f.dir.Write("runs/r999-a1/out.txt", "");
  f.dir.Write("runs/r999-a1.job/start.pb", "");
  runner.MarkDone(999, 1);
  CHECK_FALSE(std::filesystem::exists(f.dir.Full("runs/r2")));
  CHECK(std::filesystem::exists(f.dir.Full("runs/r1/checkpoint/state.txt")));
}

TEST_CASE("runner: a job past resources.max_disk is stopped and reported failed, not cancelled") {
  RunnerFixture f;
  if (!std::filesystem::exists(f.bin / "tae-job")) {
    TAE_SKIP("no tae-job beside " << f.bin);
  }
  const auto exited = f.Run("head -c 3000000 /dev/zero > big.bin; sleep 30", 1'000'000);
  REQUIRE(exited.has_value());
  CHECK_FALSE(exited->cancelled());
  CHECK_FALSE(exited->interrupted());
  CHECK_FALSE(exited->infra());
  CHECK(exited->exit_code() == -1);
  CHECK(exited->reason().find("stopped: it wrote 3.0 MB into its directories on the worker, "
                              "more than resources.max_disk = 1.0 MB") == 0);
  // Under its limit, a job is left alone (the check runs several times while it sleeps).
  const auto fine = f.Run("head -c 300000 /dev/zero > small.bin; sleep 0.5", 1'000'000, 2);
  REQUIRE(fine.has_value());
  CHECK(fine->exit_code() == 0);
}

TEST_CASE("runner: a job that kills its supervisor fails as its own doing") {
  RunnerFixture f;
  if (!std::filesystem::exists(f.bin / "tae-job")) {
    TAE_SKIP("no tae-job beside " << f.bin);
  }
  const auto exited = f.Run("sleep 0.3; kill -9 $PPID; sleep 30");
  REQUIRE(exited.has_value());
  CHECK_FALSE(exited->interrupted());
  CHECK_FALSE(exited->infra());
  CHECK_FALSE(exited->cancelled());
  CHECK(exited->exit_code() == -1);
  CHECK(exited->reason().find("while the job still ran (was it killed by the job?)") !=
        std::string::npos);
}

}  // namespace
}  // namespace tae::agent
