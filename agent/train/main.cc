// tae-train: the built-in ablation trainer that tae-agent starts per run.
//   tae-train --spec run.json
//   tae-train --check run.json...   (check run specs only)
//   tae-train --schema              (the run-spec schema as JSON, for the torch engine)
//   tae-train --runtime             (the libraries, kernels and threads it would compute with)
// Exit codes: 0 success, 1 runtime failure, 2 bad spec / flags / environment.

#include <malloc.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "agent/train/config.h"
#include "agent/train/distributed.h"
#include "agent/train/metrics_sink.h"
#include "agent/train/runtime_info.h"
#include "agent/train/step_record.h"
#include "agent/train/tasks.h"
#include "agent/train/threads.h"
#include "agent/train/trainer.h"
#include "common/cli/paths.h"
#include "common/spec/run_spec.h"

namespace {

constexpr int kExitRuntime = 1;
constexpr int kExitUsage = 2;

constexpr char kUsage[] =
    "usage: tae-train --spec run.json [--checkpoint-dir DIR]\n"
    "       tae-train --check run.json...\n"
    "       tae-train --schema\n"
    "       tae-train --runtime\n"
    "\n"
    "Trains and evaluates one Transformer ablation run described by run.json, a flat JSON object\n"
    "of experiment-file keys (\"model.layers\", \"train.lr\", ...; see docs/design.md section "
    "10).\n"
    "\n"
    "Checkpoints (every train.checkpoint_every steps, at the end, and on SIGTERM/SIGINT) go to\n"
    "DIR/checkpoint.pt. A run that finds a checkpoint of the same config there resumes after its\n"
    "step and produces the same losses as an uninterrupted run; one of another config is an\n"
    "error.\n"
    "\n"
    "options:\n"
    "  --checkpoint-dir DIR  default: $TAE_CHECKPOINT_DIR, else ./checkpoint\n"
    "  --no-checkpoint       neither write nor resume checkpoints\n"
    "  --record-steps DIR    write the initial weights and every step's batch, loss, grad norm\n"
    "                        and weights to DIR (agent/train/step_record.h; for small runs)\n"
    "  --check FILE...       only check each run spec as tae-train reads it: one line per\n"
    "                        file, \"FILE: ok\" or \"FILE: <error>\"; exit 2 if one is refused\n"
    "  --schema              print the keys of a run spec (names, types, defaults, ranges,\n"
    "                        allowed values) as JSON and exit; the build writes it to\n"
    "                        ../share/tae/python/tae_torch/schema.json, where the torch\n"
    "                        engine reads it\n"
    "  --runtime             print what this process would compute with (libtorch, BLAS and\n"
    "                        its kernel set, oneDNN's instruction set, the fast kernels,\n"
    "                        threads) as JSON and exit: the same facts a run's metadata has\n"
    "\n"
    "With train.engine = \"torch\" the run is trained by the PyTorch engine instead: tae-train\n"
    "starts `python3 -m tae_torch` (from ../share/tae/python beside this program) with the same\n"
    "flags and environment; TAE_PYTHON picks the interpreter (default: python3 on PATH).\n"
    "\n"
    "environment:\n"
    "  TAE_METRICS_FD      fd to write metric JSON lines to (default: stdout)\n"
    "  TAE_THREADS         CPU threads when train.threads is 0 (default: all hardware threads)\n"
    "  TAE_CHECKPOINT_DIR  checkpoint directory (the agent sets one per run)\n"
    "  TAE_FAST_KERNELS    0 or off: libtorch's ops instead of the oneDNN fast paths\n"
    "  ONEDNN_MAX_CPU_ISA  caps oneDNN's instruction set (e.g. AVX2); OPENBLAS_CORETYPE\n"
    "                      picks OpenBLAS's kernels (e.g. Haswell)\n"
    "  TAE_WORLD_SIZE      processes of a data-parallel run (default 1); above 1 also:\n"
    "  TAE_RANK            this process's rank, 0..TAE_WORLD_SIZE-1 (rank 0 reports/checkpoints)\n"
    "  MASTER_ADDR         rank 0's host; MASTER_PORT: the port rank 0's TCPStore listens on\n"
    "  TAE_PYTHON          the interpreter of the torch engine (default: python3)\n"
    "\n"
    "exit status: 0 success, 1 runtime failure, 2 bad spec, flag or environment,\n"
    "             143 stopped by SIGTERM/SIGINT after writing a checkpoint\n";

constexpr int kExitStopped = 128 + SIGTERM;

std::atomic<bool> g_stop{false};

void OnStopSignal(int) { g_stop.store(true); }

struct Args {
  std::string spec;
  std::string checkpoint_dir;
  bool no_checkpoint = false;
  std::string record_dir;  // --record-steps
};

int Fail(int code, const absl::Status& status) {
  std::cerr << "tae-train: " << status.message() << std::endl;
  return code;
}

// tae-train --check FILE...: each run spec as this program reads it, one line per file on stdout;
// kExitUsage when one is refused.
int CheckSpecs(const std::vector<std::string>& paths) {
  if (paths.empty()) {
    std::cerr << "tae-train: --check needs run spec files\n" << kUsage;
    return kExitUsage;
  }
  int code = 0;
  for (const std::string& path : paths) {
    absl::StatusOr<tae::train::TrainConfig> config = tae::train::LoadTrainConfig(path);
    std::cout << path << ": " << (config.ok() ? "ok" : std::string(config.status().message()))
              << "\n";
    if (!config.ok()) {
      code = kExitUsage;
    }
  }
  std::cout << std::flush;
  return code;
}

// Returns false after printing usage/help (exit code in *exit_code).
bool ParseArgs(int argc, char** argv, Args* args, int* exit_code) {
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      std::cout << kUsage;
      *exit_code = 0;
      return false;
    }
    if (arg == "--check") {
      *exit_code = CheckSpecs(std::vector<std::string>(argv + i + 1, argv + argc));
      return false;
    }
    if (arg == "--schema") {
      std::cout << tae::spec::RunSpecSchemaJson().dump(2) << std::endl;
      *exit_code = 0;
      return false;
    }
    if (arg == "--runtime") {
      // As a run with train.threads = 0 would configure its pools.
      absl::StatusOr<int> threads = tae::train::ResolveThreadCount(0, std::getenv("TAE_THREADS"));
      if (!threads.ok()) {
        std::cerr << "tae-train: " << threads.status().message() << "\n";
        *exit_code = kExitUsage;
        return false;
      }
      tae::train::ConfigureThreads(*threads);
      nlohmann::json runtime = nlohmann::json::object();
      for (const auto& [key, value] : tae::train::RuntimeMetadata()) {
        runtime[key] = value;
      }
      std::cout << runtime.dump(2) << std::endl;
      *exit_code = 0;
      return false;
    }
    if (arg == "--spec" && i + 1 < argc) {
      args->spec = argv[++i];
    } else if (arg.rfind("--spec=", 0) == 0) {
      args->spec = arg.substr(std::strlen("--spec="));
    } else if (arg == "--checkpoint-dir" && i + 1 < argc) {
      args->checkpoint_dir = argv[++i];
    } else if (arg.rfind("--checkpoint-dir=", 0) == 0) {
      args->checkpoint_dir = arg.substr(std::strlen("--checkpoint-dir="));
    } else if (arg == "--record-steps" && i + 1 < argc) {
      args->record_dir = argv[++i];
    } else if (arg == "--no-checkpoint") {
      args->no_checkpoint = true;
    } else {
      std::cerr << "tae-train: unexpected argument \"" << arg << "\"\n" << kUsage;
      *exit_code = kExitUsage;
      return false;
    }
  }
  if (args->spec.empty()) {
    std::cerr << "tae-train: --spec is required\n" << kUsage;
    *exit_code = kExitUsage;
    return false;
  }
  if (args->checkpoint_dir.empty()) {
    const char* env = std::getenv("TAE_CHECKPOINT_DIR");
    args->checkpoint_dir = env != nullptr && *env != '\0' ? env : "checkpoint";
  }
  if (args->no_checkpoint) {
    args->checkpoint_dir.clear();
  }
  return true;
}

// Replaces this process with the torch engine (python3 -m tae_torch) for the same run; returns
// only on failure, with the exit code.
int ExecTorchEngine(const Args& args) {
  if (!args.record_dir.empty()) {
    return Fail(kExitUsage,
                absl::InvalidArgumentError(
                    "--record-steps is tae-train's own; the torch engine does not record steps"));
  }
  const std::string python_dir = tae::cli::ProgramDir() + "/../share/tae/python";
  struct stat info {};
  if (::stat((python_dir + "/tae_torch/__main__.py").c_str(), &info) != 0) {
    return Fail(kExitUsage, absl::FailedPreconditionError(absl::StrCat(
                                "train.engine = \"torch\": the tae_torch package is not in ",
                                python_dir, " (install TAE with deploy/install.sh)")));
  }
  const char* existing = std::getenv("PYTHONPATH");
  const std::string path =
      existing != nullptr && *existing != '\0' ? python_dir + ":" + existing : python_dir;
  ::setenv("PYTHONPATH", path.c_str(), 1);
  const char* env_python = std::getenv("TAE_PYTHON");
  const std::string python = env_python != nullptr && *env_python != '\0' ? env_python : "python3";
  std::vector<std::string> words = {python, "-m", "tae_torch", "--spec", args.spec};
  if (args.checkpoint_dir.empty()) {
    words.emplace_back("--no-checkpoint");
  } else {
    words.emplace_back("--checkpoint-dir");
    words.push_back(args.checkpoint_dir);
  }
  std::vector<char*> argv;
  for (std::string& word : words) {
    argv.push_back(word.data());
  }
  argv.push_back(nullptr);
  std::cout << "tae-train: train.engine = \"torch\": running " << python << " -m tae_torch"
            << std::endl;
  ::execvp(argv[0], argv.data());
  return Fail(kExitUsage,
              absl::FailedPreconditionError(absl::StrCat(
                  "train.engine = \"torch\": cannot run ", python, ": ", std::strerror(errno),
                  " (install python3 and python3-torch, or set TAE_PYTHON)")));
}

}  // namespace

int main(int argc, char** argv) {
  using tae::train::MetricsSink;
  // Keep freed activation and gradient blocks in the heap between steps: with glibc's default
  // (dynamic) mmap threshold every block of a few MB went back to the kernel when freed and was
  // faulted in again the next step (~16,000 page faults per step at the benchmark's shapes).
  ::mallopt(M_MMAP_THRESHOLD, 32 << 20);
  ::mallopt(M_TRIM_THRESHOLD, 256 << 20);
  int exit_code = 0;
  Args args;
  if (!ParseArgs(argc, argv, &args, &exit_code)) {
    return exit_code;
  }
  absl::StatusOr<nlohmann::json> spec = tae::train::LoadSpecJson(args.spec);
  if (!spec.ok()) {
    return Fail(kExitUsage, spec.status());
  }
  absl::StatusOr<tae::train::TrainConfig> config = tae::train::ParseTrainConfig(*spec);
  if (!config.ok()) {
    return Fail(kExitUsage, config.status());
  }
  if (config->train.engine == tae::train::Engine::kTorch) {
    return ExecTorchEngine(args);
  }
  absl::StatusOr<int> threads =
      tae::train::ResolveThreadCount(config->train.threads, std::getenv("TAE_THREADS"));
  if (!threads.ok()) {
    return Fail(kExitUsage, threads.status());
  }
  absl::StatusOr<tae::train::DistributedEnv> dist =
      tae::train::ParseDistributedEnv([](const char* name) { return std::getenv(name); });
  if (!dist.ok()) {
    return Fail(kExitUsage, dist.status());
  }
  if (absl::Status s = tae::train::CheckShardable(config->train.batch_size, dist->world_size);
      !s.ok()) {
    return Fail(kExitUsage, s);
  }
  tae::train::ReexecWithOpenMpSettingsIfNeeded(*threads, argv);
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
  std::unique_ptr<tae::train::Collective> collective;
  if (dist->world_size > 1) {
    std::cout << "tae-train: rank " << dist->rank << " of " << dist->world_size
              << ", connecting to " << dist->master_addr << ":" << dist->master_port << std::endl;
    absl::StatusOr<std::unique_ptr<tae::train::Collective>> connected =
        tae::train::Collective::Connect(*dist);
    if (!connected.ok()) {
      return Fail(kExitRuntime, connected.status());
    }
    collective = std::move(*connected);
  }
  const bool primary = dist->rank == 0;
  auto runtime = tae::train::RuntimeMetadata();
  runtime.emplace_back("world_size", std::to_string(dist->world_size));
  runtime.emplace_back("rank", std::to_string(dist->rank));
  std::cout << "tae-train: runtime";
  for (const auto& [key, value] : runtime) {
    std::cout << " " << key << "=" << value;
  }
  std::cout << std::endl;
  if (primary) {
    if (absl::Status s = (*sink)->EmitMeta(runtime); !s.ok()) {
      return Fail(kExitRuntime, s);
    }
  }
  tae::train::TrainerOptions options;
  options.checkpoint_dir = args.checkpoint_dir;
  options.fingerprint = tae::train::ConfigFingerprint(*spec);
  options.should_stop = [](int64_t) { return g_stop.load(); };
  options.collective = collective.get();
  std::unique_ptr<tae::train::StepRecorder> step_record;
  if (!args.record_dir.empty()) {
    if (collective != nullptr) {
      return Fail(kExitUsage,
                  absl::InvalidArgumentError("--record-steps needs a single-process run"));
    }
    step_record = std::make_unique<tae::train::StepRecorder>(args.record_dir);
    options.step_record = step_record.get();
  }
  // Profiles (docs/profiles.md): where they go and how they are asked for, from the agent.
  std::unique_ptr<tae::train::StepProfiler> profiler;
  const char* profile_dir = std::getenv("TAE_PROFILE_DIR");
  const char* profile_request = std::getenv("TAE_PROFILE_REQUEST");
  if (profile_dir != nullptr && *profile_dir != '\0') {
    profiler = std::make_unique<tae::train::StepProfiler>(
        profile_dir, profile_request != nullptr ? profile_request : "", config->train.profile_at,
        config->train.profile_steps);
    options.profiler = profiler.get();
  } else if (!config->train.profile_at.empty() && primary) {
    std::cout << "tae-train: train.profile_at ignored: TAE_PROFILE_DIR is not set (the agent "
                 "sets it)"
              << std::endl;
  }
  std::signal(SIGTERM, OnStopSignal);
  std::signal(SIGINT, OnStopSignal);
  tae::train::Trainer trainer(*config, task->get(), sink->get(), primary ? &std::cout : nullptr,
                              options);
  absl::StatusOr<tae::train::TrainSummary> summary = trainer.Run();
  if (!summary.ok()) {
    return Fail(kExitRuntime, summary.status());
  }
  if (summary->interrupted) {
    return kExitStopped;
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (primary) {
    std::cout << absl::StrFormat("tae-train: done in %.1f s, eval/acc %.4f eval/loss %.4f\n",
                                 seconds, summary->final_eval.accuracy, summary->final_eval.loss)
              << std::flush;
  } else {
    std::cout << absl::StrFormat("tae-train: rank %d done in %.1f s\n", dist->rank, seconds)
              << std::flush;
  }
  return 0;
}
