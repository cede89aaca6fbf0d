// tae-train: the built-in ablation trainer that tae-agent starts per run.
//   tae-train --spec run.json
// Exit codes: 0 success, 1 runtime failure, 2 bad spec / flags / environment.

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "agent/train/config.h"
#include "agent/train/metrics_sink.h"
#include "agent/train/tasks.h"
#include "agent/train/threads.h"
#include "agent/train/trainer.h"

namespace {

constexpr int kExitRuntime = 1;
constexpr int kExitUsage = 2;

constexpr char kUsage[] =
    "usage: tae-train --spec run.json\n"
    "\n"
    "Trains and evaluates one Transformer ablation run described by run.json, a flat JSON object\n"
    "of experiment-file keys (\"model.layers\", \"train.lr\", ...; see docs/design.md section "
    "10).\n"
    "\n"
    "environment:\n"
    "  TAE_METRICS_FD  fd to write metric JSON lines to (default: stdout)\n"
    "  TAE_THREADS     CPU threads when train.threads is 0 (default: all hardware threads)\n"
    "\n"
    "exit status: 0 success, 1 runtime failure, 2 bad spec, flag or environment\n";

int Fail(int code, const absl::Status& status) {
  std::cerr << "tae-train: " << status.message() << std::endl;
  return code;
}

// Returns the --spec path, or "" after printing usage/help (exit code in *exit_code).
std::string ParseArgs(int argc, char** argv, int* exit_code) {
  std::string spec;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      std::cout << kUsage;
      *exit_code = 0;
      return "";
    }
    if (arg == "--spec" && i + 1 < argc) {
      spec = argv[++i];
    } else if (arg.rfind("--spec=", 0) == 0) {
      spec = arg.substr(std::strlen("--spec="));
    } else {
      std::cerr << "tae-train: unexpected argument \"" << arg << "\"\n" << kUsage;
      *exit_code = kExitUsage;
      return "";
    }
  }
  if (spec.empty()) {
    std::cerr << "tae-train: --spec is required\n" << kUsage;
    *exit_code = kExitUsage;
  }
  return spec;
}

}  // namespace

int main(int argc, char** argv) {
  using tae::train::MetricsSink;
  int exit_code = 0;
  const std::string spec_path = ParseArgs(argc, argv, &exit_code);
  if (spec_path.empty()) {
    return exit_code;
  }
  absl::StatusOr<tae::train::TrainConfig> config = tae::train::LoadTrainConfig(spec_path);
  if (!config.ok()) {
    return Fail(kExitUsage, config.status());
  }
  absl::StatusOr<int> threads =
      tae::train::ResolveThreadCount(config->train.threads, std::getenv("TAE_THREADS"));
  if (!threads.ok()) {
    return Fail(kExitUsage, threads.status());
  }
  tae::train::ReexecWithPassiveOpenMpIfNeeded(*threads, argv);
  tae::train::ConfigureThreads(*threads);
  absl::StatusOr<std::unique_ptr<MetricsSink>> sink =
      MetricsSink::FromEnvValue(std::getenv("TAE_METRICS_FD"));
  if (!sink.ok()) {
    return Fail(kExitUsage, sink.status());
  }
  const auto start = std::chrono::steady_clock::now();
  absl::StatusOr<std::unique_ptr<tae::train::Task>> task = tae::train::MakeTask(*config);
  if (!task.ok()) {
    return Fail(kExitRuntime, task.status());
  }
  tae::train::Trainer trainer(*config, task->get(), sink->get(), &std::cout);
  absl::StatusOr<tae::train::TrainSummary> summary = trainer.Run();
  if (!summary.ok()) {
    return Fail(kExitRuntime, summary.status());
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::cout << absl::StrFormat("tae-train: done in %.1f s, eval/acc %.4f eval/loss %.4f\n", seconds,
                               summary->final_eval.accuracy, summary->final_eval.loss)
            << std::flush;
  return 0;
}
