#pragma once

// The facts about the machine an agent runs on, in the wire's type (AgentFacts, agent_link.proto):
// what tae-agent registers with and taed shows in `taectl doctor`, and what taectl doctor gathers
// for its own machine. Gathered once at agent start, cheaply: file system look-ups, statvfs, and
// at most three short-lived tools (tpu-info, nvidia-smi -L, the torch engine's python) run with a
// timeout through process::RunTool (common/process/tool.h). tae-agent does not link libtorch, so
// the BLAS and libtorch facts come from what Debian's alternatives and the library directories
// say libtorch will load.
//
// The parsers are pure functions, unit-tested on captured outputs; Gather does the I/O. The
// project version the facts carry is common/version's.

#include <map>
#include <string>
#include <vector>

#include "tae/v1/agent_link.pb.h"

namespace tae::host {

struct GatherOptions {
  std::vector<std::pair<std::string, std::string>> dirs;  // (role, path) to report free space of
  int threads_per_run = 0;
  // Where to look; overridable so tests can point at a fake tree.
  std::string alternatives_dir = "/etc/alternatives";
  std::vector<std::string> lib_dirs = {"/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu",
                                       "/usr/local/lib", "/usr/lib"};
  std::string dev_dir = "/dev";
  int tool_timeout_ms = 3000;  // per vendor tool: a wedged driver must not stall agent start
};

// This machine's facts: version, hostname, kernel, CPUs this process may use, BLAS, libtorch, the
// free space of options.dirs, accelerators (device nodes, then tpu-info and nvidia-smi) and the
// torch engine. Never fails: what could not be found or looks wrong is in `problems` (or a fact's
// own error). Blocks for up to options.tool_timeout_ms per tool run.
tae::v1::AgentFacts Gather(const GatherOptions& options);

// The probe tae-agent runs with the torch engine's interpreter: one line "PYTHON_VERSION TORCH
// TORCH_XLA" ("-" for a package that is absent), from package metadata, without importing torch
// (which takes seconds).
extern const char kTorchEngineProbe[];
// The TorchEngine fact of a probe's output; `has_gpu`: nvidia-smi listed a GPU (the engine then
// uses CUDA when torch has it). Unparseable output sets error.
tae::v1::AgentFacts::TorchEngine ParseTorchEngineProbe(const std::string& python,
                                                       const std::string& out, bool has_gpu);

// --- Pure parsers and classifiers ---

// The BLAS a libblas.so.3 alternative resolves to.
enum class BlasKind { kUnknown, kOpenblasPthread, kOpenblasOther, kReference, kOther };
BlasKind ClassifyBlas(const std::string& resolved_path);
const char* ToString(BlasKind kind);

// "libtorch_cpu.so.1.13.0" (or a path ending in it) -> "1.13.0"; "" when there is no version.
std::string TorchVersionFromPath(const std::string& path);

// Device node names of one family in a directory listing: Indices({"accel0","accel3","tty"},
// "accel") -> {0, 3}, sorted.
std::vector<int> DeviceIndices(const std::vector<std::string>& names, const std::string& prefix);
// "/dev/accel" + {0,1,2,3} -> "/dev/accel0..3"; gaps are listed: "/dev/accel0,2".
std::string DescribeDevices(const std::string& path_prefix, const std::vector<int>& indices);

// `nvidia-smi -L` output ("GPU 0: NVIDIA A100-SXM4-40GB (UUID: GPU-...)" per line) -> the
// model names, one per GPU.
std::vector<std::string> ParseNvidiaSmiList(const std::string& output);
// Several GPUs of one model -> "NVIDIA A100 x4"; different models are joined with ", ".
std::string SummariseModels(const std::vector<std::string>& models);

// `tpu-info` output: its chip table has one row per chip naming the device node
// ("│ /dev/accel0 │ TPU v4 chip │ 1 │ 1234 │"). Returns the chip type of each row.
std::vector<std::string> ParseTpuInfo(const std::string& output);

}  // namespace tae::host
