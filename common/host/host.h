#pragma once

// This machine and its tools, shared by tae-agent and taectl: the project version, FindOnPath,
// RunTool, and the facts about the machine an agent runs on, for `taectl doctor`: gathered once
// at agent start
// (and by taectl for its own machine), cheaply: file system look-ups, statvfs, and at most two
// short-lived vendor tools (tpu-info, nvidia-smi -L) with a timeout. tae-agent does not link
// libtorch, so the BLAS and libtorch facts come from what Debian's alternatives and the library
// directories say libtorch will load.
//
// The parsers are pure functions, unit-tested on captured outputs; Gather does the I/O.

#include <map>
#include <string>
#include <vector>

#include "tae/v1/agent_link.pb.h"

namespace tae::host {

// The project version every TAE binary reports (CMake's PROJECT_VERSION).
const char* Version();

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

tae::v1::AgentFacts Gather(const GatherOptions& options);

// The probe tae-agent runs with the torch engine's interpreter: one line "PYTHON_VERSION TORCH
// TORCH_XLA" ("-" for a package that is absent), from package metadata, without importing torch
// (which takes seconds).
extern const char kTorchEngineProbe[];
// The TorchEngine fact of a probe's output; `has_gpu`: nvidia-smi listed a GPU (the engine then
// uses CUDA when torch has it). Unparseable output sets error.
tae::v1::AgentFacts::TorchEngine ParseTorchEngineProbe(const std::string& python,
                                                       const std::string& out, bool has_gpu);

// A short-lived tool's stdout, when it exited 0; else why not (error).
struct ToolResult {
  bool ok = false;
  std::string out;
  std::string error;
};
// The executable `name` in $PATH, or "".
std::string FindOnPath(const std::string& name);
// Runs argv (argv[0] a path, no $PATH search) in a process group of its own, stdout captured (the
// first MiB), stdin and stderr /dev/null; SIGKILLs the group after timeout_ms. A tool killed by
// signal N "exited with status" 128 + N. Blocks for up to timeout_ms and about a second more.
//
// It runs beside a waitpid(-1) reaper (tae-agent's Runner, on every SIGCHLD) without a race. A
// fork()ed tool could be reaped there first: its status lost, and our waitpid(pid) could then
// wait on an unrelated child that reused the pid (a new tae-job). So the tool runs under a helper
// started by clone() with exit signal 0, a "clone child": it sends no SIGCHLD and waitpid(-1)
// without __WCLONE/__WALL never returns it; only RunTool's waitpid(helper, __WCLONE) does. The
// helper must not exec (exec resets the exit signal to SIGCHLD): it vforks the tool, waits and
// exits with its status, so the tool is never the caller's child. A tool (or something it left)
// that outlives the helper goes to the nearest subreaper, in tae-agent the agent, as an ordinary
// child: the Runner reaps it and ignores its pid; RunTool never waits on it.
//
// Callers guarantee only that (1) nothing in the process waits for any child (pid -1, 0 or a
// group) with __WCLONE or __WALL, and (2) they are not on a thread that must stay responsive
// (tae-agent's io thread). No signal mask is needed: RunTool blocks every signal around clone and
// the helper resets every handler to SIG_DFL before unblocking, so no handler of the caller's runs
// in the child; the caller's own signals are only deferred for that moment, and EINTR is retried.
// So any thread may call it, before or after a reaper starts, concurrently too: taectl doctor,
// Gather in Agent::Start and AcceleratorProbe's thread.
ToolResult RunTool(std::vector<std::string> argv, int timeout_ms);

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
