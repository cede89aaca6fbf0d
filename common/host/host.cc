#include "common/host/host.h"

#include <sched.h>
#include <sys/statvfs.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <thread>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/process/tool.h"
#include "common/version/version.h"

namespace tae::host {
namespace {

namespace fs = std::filesystem;

int CpuCount() {
  // The CPUs this process may run on (a cgroup cpuset or taskset narrows them), not the host's.
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) {
    return std::max(1, CPU_COUNT(&set));
  }
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

void AddDir(const std::string& role, const std::string& path, tae::v1::AgentFacts* out) {
  tae::v1::AgentFacts::Dir* dir = out->add_dirs();
  dir->set_role(role);
  dir->set_path(path);
  // A dir the agent makes later (the cache, on first use) lives on its parent's file system.
  std::error_code ec;
  fs::path probe = path;
  while (!fs::exists(probe, ec) && probe.has_parent_path() && probe.parent_path() != probe) {
    probe = probe.parent_path();
  }
  struct statvfs st {};
  if (statvfs(probe.c_str(), &st) != 0) {
    dir->set_error(std::strerror(errno));
    out->add_problems(absl::StrCat("cannot stat the ", role, " dir ", path, ": ", dir->error()));
    return;
  }
  dir->set_free_bytes(static_cast<uint64_t>(st.f_bavail) * st.f_frsize);
  dir->set_total_bytes(static_cast<uint64_t>(st.f_blocks) * st.f_frsize);
}

void FindBlas(const GatherOptions& options, tae::v1::AgentFacts* out) {
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(options.alternatives_dir, ec)) {
    std::string name = entry.path().filename().string();
    if (!absl::StartsWith(name, "libblas.so.3-")) {
      continue;
    }
    fs::path resolved = fs::canonical(entry.path(), ec);
    out->set_blas(ec ? entry.path().string() : resolved.string());
    out->set_openblas_pthread(ClassifyBlas(out->blas()) == BlasKind::kOpenblasPthread);
    return;
  }
}

void FindTorch(const GatherOptions& options, tae::v1::AgentFacts* out) {
  for (const std::string& dir : options.lib_dirs) {
    std::error_code ec;
    fs::path lib = fs::path(dir) / "libtorch_cpu.so";
    if (!fs::exists(lib, ec)) {
      continue;
    }
    fs::path resolved = fs::canonical(lib, ec);
    out->set_torch(ec ? lib.string() : resolved.string());
    return;
  }
}

std::vector<std::string> ListDir(const std::string& dir) {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    names.push_back(entry.path().filename().string());
  }
  return names;
}

// Device nodes the agent's user cannot open are as good as absent to a run.
void CheckDevicesOpen(const std::string& prefix, const std::vector<int>& indices,
                      tae::v1::AgentFacts* out) {
  for (int i : indices) {
    std::string path = absl::StrCat(prefix, i);
    if (access(path.c_str(), R_OK | W_OK) != 0) {
      out->add_problems(absl::StrCat(path, " is not readable and writable by this user (",
                                     std::strerror(errno),
                                     "): add the agent's user to the group that owns it"));
      return;
    }
  }
}

void FindAccelerators(const GatherOptions& options, tae::v1::AgentFacts* out) {
  // TPU VMs expose chips as /dev/accelN (v4 and later) or /dev/vfio/N (v5e, v6e).
  std::vector<int> accel = DeviceIndices(ListDir(options.dev_dir), "accel");
  if (!accel.empty()) {
    std::string prefix = options.dev_dir + "/accel";
    out->add_accelerators(absl::StrCat("tpu: ", DescribeDevices(prefix, accel)));
    CheckDevicesOpen(prefix, accel, out);
  }
  std::vector<int> vfio = DeviceIndices(ListDir(options.dev_dir + "/vfio"), "");
  if (!vfio.empty()) {
    std::string prefix = options.dev_dir + "/vfio/";
    out->add_accelerators(absl::StrCat("tpu: ", DescribeDevices(prefix, vfio)));
    CheckDevicesOpen(prefix, vfio, out);
  }
  std::vector<int> nvidia = DeviceIndices(ListDir(options.dev_dir), "nvidia");
  if (!nvidia.empty()) {
    out->add_accelerators(
        absl::StrCat("gpu: ", DescribeDevices(options.dev_dir + "/nvidia", nvidia)));
  }
  if (std::string tool = process::FindOnPath("tpu-info"); !tool.empty()) {
    process::ToolResult r = process::RunTool({tool}, options.tool_timeout_ms);
    std::vector<std::string> chips = r.ok ? ParseTpuInfo(r.out) : std::vector<std::string>{};
    if (!chips.empty()) {
      out->add_accelerators(absl::StrCat("tpu: ", SummariseModels(chips), " (tpu-info)"));
    } else if (!r.ok) {
      out->add_problems(absl::StrCat(tool, " ", r.error));
    }
  }
  if (std::string tool = process::FindOnPath("nvidia-smi"); !tool.empty()) {
    process::ToolResult r = process::RunTool({tool, "-L"}, options.tool_timeout_ms);
    std::vector<std::string> gpus = r.ok ? ParseNvidiaSmiList(r.out) : std::vector<std::string>{};
    if (!gpus.empty()) {
      out->add_accelerators(absl::StrCat("gpu: ", SummariseModels(gpus), " (nvidia-smi)"));
    } else if (!r.ok) {
      // nvidia-smi present but failing is the classic driver/library version mismatch.
      out->add_problems(absl::StrCat(tool, " -L ", r.error));
    }
  }
}

// The interpreter tae-train would start for train.engine = "torch", and what it can import.
void FindTorchEngine(const GatherOptions& options, tae::v1::AgentFacts* out) {
  const char* env = std::getenv("TAE_PYTHON");
  std::string python = env != nullptr && *env != '\0' ? env : "python3";
  if (python.find('/') == std::string::npos) {
    python = process::FindOnPath(python);
  }
  tae::v1::AgentFacts::TorchEngine* engine = out->mutable_torch_engine();
  if (python.empty() || access(python.c_str(), X_OK) != 0) {
    engine->set_error("no python3 on PATH (nor TAE_PYTHON)");
    return;
  }
  const bool has_gpu =
      std::any_of(out->accelerators().begin(), out->accelerators().end(),
                  [](const std::string& a) { return absl::StartsWith(a, "gpu:"); });
  process::ToolResult r =
      process::RunTool({python, "-c", kTorchEngineProbe}, options.tool_timeout_ms);
  if (!r.ok) {
    engine->set_python(python);
    engine->set_error(r.error);
    return;
  }
  *engine = ParseTorchEngineProbe(python, r.out, has_gpu);
}

}  // namespace

tae::v1::AgentFacts Gather(const GatherOptions& options) {
  tae::v1::AgentFacts out;
  out.set_version(version::Project());
  struct utsname uts {};
  if (uname(&uts) == 0) {
    out.set_hostname(uts.nodename);
    out.set_kernel(uts.release);
  }
  out.set_cpu_count(CpuCount());
  out.set_threads_per_run(options.threads_per_run);
  FindBlas(options, &out);
  FindTorch(options, &out);
  for (const auto& [role, path] : options.dirs) {
    AddDir(role, path, &out);
  }
  FindAccelerators(options, &out);
  FindTorchEngine(options, &out);
  return out;
}

const char kTorchEngineProbe[] =
    "import importlib.util as u, importlib.metadata as m, sys\n"
    "def v(n):\n"
    "    if u.find_spec(n) is None: return '-'\n"
    "    try: return m.version(n).split('+')[0]\n"
    "    except Exception: return 'unknown'\n"
    "print(sys.version.split()[0], v('torch'), v('torch_xla'))\n";

tae::v1::AgentFacts::TorchEngine ParseTorchEngineProbe(const std::string& python,
                                                       const std::string& out, bool has_gpu) {
  tae::v1::AgentFacts::TorchEngine engine;
  engine.set_python(python);
  std::vector<std::string> words =
      absl::StrSplit(absl::StripAsciiWhitespace(out), ' ', absl::SkipEmpty());
  if (words.size() != 3) {
    engine.set_error(absl::StrCat("unexpected probe output \"", absl::CEscape(out), "\""));
    return engine;
  }
  engine.set_python_version(words[0]);
  if (words[1] != "-") {
    engine.set_torch(words[1]);
    if (words[2] != "-") {
      engine.set_torch_xla(words[2]);
    }
    engine.set_device(words[2] != "-" ? "xla" : has_gpu ? "cuda" : "cpu");
  }
  return engine;
}

BlasKind ClassifyBlas(const std::string& resolved_path) {
  if (resolved_path.empty()) {
    return BlasKind::kUnknown;
  }
  // Debian installs each BLAS in its own directory under the multiarch lib dir:
  // openblas-pthread/, openblas-openmp/, openblas-serial/, blas/ (netlib reference), atlas/ ...
  std::string dir = fs::path(resolved_path).parent_path().filename().string();
  if (dir == "openblas-pthread") {
    return BlasKind::kOpenblasPthread;
  }
  if (absl::StartsWith(dir, "openblas")) {
    return BlasKind::kOpenblasOther;
  }
  if (dir == "blas") {
    return BlasKind::kReference;
  }
  return BlasKind::kOther;
}

const char* ToString(BlasKind kind) {
  switch (kind) {
    case BlasKind::kUnknown:
      return "unknown";
    case BlasKind::kOpenblasPthread:
      return "OpenBLAS (pthread)";
    case BlasKind::kOpenblasOther:
      return "OpenBLAS (not the pthread build)";
    case BlasKind::kReference:
      return "reference BLAS (netlib)";
    case BlasKind::kOther:
      return "other BLAS";
  }
  return "unknown";
}

std::string TorchVersionFromPath(const std::string& path) {
  std::string name = fs::path(path).filename().string();
  constexpr absl::string_view kStem = "libtorch_cpu.so.";
  if (!absl::StartsWith(name, kStem)) {
    return "";
  }
  std::string version = name.substr(kStem.size());
  for (absl::string_view part : absl::StrSplit(version, '.')) {
    int n = 0;
    if (!absl::SimpleAtoi(part, &n)) {
      return "";
    }
  }
  return version;
}

std::vector<int> DeviceIndices(const std::vector<std::string>& names, const std::string& prefix) {
  std::vector<int> indices;
  for (const std::string& name : names) {
    if (!absl::StartsWith(name, prefix) || name.size() == prefix.size()) {
      continue;
    }
    absl::string_view digits = absl::string_view(name).substr(prefix.size());
    int index = 0;
    if (std::all_of(digits.begin(), digits.end(), [](char c) { return absl::ascii_isdigit(c); }) &&
        absl::SimpleAtoi(digits, &index)) {
      indices.push_back(index);
    }
  }
  std::sort(indices.begin(), indices.end());
  indices.erase(std::unique(indices.begin(), indices.end()), indices.end());
  return indices;
}

std::string DescribeDevices(const std::string& path_prefix, const std::vector<int>& indices) {
  if (indices.empty()) {
    return "";
  }
  bool contiguous = indices.back() - indices.front() + 1 == static_cast<int>(indices.size());
  if (indices.size() > 1 && contiguous) {
    return absl::StrCat(path_prefix, indices.front(), "..", indices.back());
  }
  return absl::StrCat(path_prefix, absl::StrJoin(indices, ","));
}

std::vector<std::string> ParseNvidiaSmiList(const std::string& output) {
  std::vector<std::string> models;
  for (absl::string_view line : absl::StrSplit(output, '\n', absl::SkipEmpty())) {
    line = absl::StripAsciiWhitespace(line);
    if (!absl::StartsWith(line, "GPU ")) {
      continue;
    }
    size_t colon = line.find(':');
    if (colon == absl::string_view::npos) {
      continue;
    }
    absl::string_view model = line.substr(colon + 1);
    if (size_t uuid = model.rfind(" (UUID:"); uuid != absl::string_view::npos) {
      model = model.substr(0, uuid);
    }
    model = absl::StripAsciiWhitespace(model);
    if (!model.empty()) {
      models.emplace_back(model);
    }
  }
  return models;
}

std::string SummariseModels(const std::vector<std::string>& models) {
  std::vector<std::pair<std::string, int>> counts;  // in order of first appearance
  for (const std::string& model : models) {
    auto it = std::find_if(counts.begin(), counts.end(),
                           [&](const auto& entry) { return entry.first == model; });
    if (it == counts.end()) {
      counts.emplace_back(model, 1);
    } else {
      ++it->second;
    }
  }
  std::vector<std::string> parts;
  for (const auto& [model, n] : counts) {
    parts.push_back(n > 1 ? absl::StrCat(model, " x", n) : model);
  }
  return absl::StrJoin(parts, ", ");
}

std::vector<std::string> ParseTpuInfo(const std::string& output) {
  std::vector<std::string> chips;
  for (absl::string_view line : absl::StrSplit(output, '\n', absl::SkipEmpty())) {
    // Table cells are separated by '│' (UTF-8) or '|' depending on the terminal.
    std::string row = absl::StrReplaceAll(line, {{"\u2502", "|"}, {"\u2503", "|"}});
    std::vector<absl::string_view> cells = absl::StrSplit(row, '|');
    for (size_t i = 0; i + 1 < cells.size(); ++i) {
      absl::string_view cell = absl::StripAsciiWhitespace(cells[i]);
      if (absl::StartsWith(cell, "/dev/accel") || absl::StartsWith(cell, "/dev/vfio/")) {
        absl::string_view type = absl::StripAsciiWhitespace(cells[i + 1]);
        chips.emplace_back(type.empty() ? "TPU chip" : type);
        break;
      }
    }
  }
  return chips;
}

}  // namespace tae::host
