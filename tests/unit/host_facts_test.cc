#include <stdlib.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>

#include "absl/strings/match.h"
#include "common/host/host.h"
#include "common/version/version.h"
#include "tests/skip.h"

namespace tae::host {
namespace {

namespace fs = std::filesystem;

struct ScratchDir {
  ScratchDir() {
    char tmpl[] = "/tmp/tae-facts-XXXXXX";
    path = mkdtemp(tmpl);
  }
  ~ScratchDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  std::string path;
};

TEST_CASE("facts: the BLAS an alternative resolves to") {
  CHECK(ClassifyBlas("/usr/lib/x86_64-linux-gnu/openblas-pthread/libblas.so.3") ==
        BlasKind::kOpenblasPthread);
  CHECK(ClassifyBlas("/usr/lib/x86_64-linux-gnu/openblas-openmp/libblas.so.3") ==
        BlasKind::kOpenblasOther);
  CHECK(ClassifyBlas("/usr/lib/x86_64-linux-gnu/blas/libblas.so.3") == BlasKind::kReference);
  CHECK(ClassifyBlas("/usr/lib/x86_64-linux-gnu/atlas/libblas.so.3") == BlasKind::kOther);
  CHECK(ClassifyBlas("") == BlasKind::kUnknown);
}

TEST_CASE("facts: libtorch's version from its file name") {
  CHECK(TorchVersionFromPath("/usr/lib/x86_64-linux-gnu/libtorch_cpu.so.1.13.0") == "1.13.0");
  CHECK(TorchVersionFromPath("libtorch_cpu.so.2.1") == "2.1");
  CHECK(TorchVersionFromPath("/opt/libtorch/lib/libtorch_cpu.so").empty());
  CHECK(TorchVersionFromPath("libtorch_cpu.so.1.x").empty());
}

TEST_CASE("facts: device nodes are described as ranges") {
  std::vector<std::string> dev = {"accel0", "accel1", "accel3", "accel2",
                                  "tty0",   "accel",  "accelx"};
  REQUIRE(DeviceIndices(dev, "accel") == std::vector<int>{0, 1, 2, 3});
  CHECK(DescribeDevices("/dev/accel", {0, 1, 2, 3}) == "/dev/accel0..3");
  CHECK(DescribeDevices("/dev/accel", {0, 2}) == "/dev/accel0,2");
  CHECK(DescribeDevices("/dev/vfio/", {5}) == "/dev/vfio/5");
  CHECK(DescribeDevices("/dev/accel", {}).empty());
  // /dev/vfio holds the chips as bare numbers next to the "vfio" control node.
  CHECK(DeviceIndices({"vfio", "0", "1"}, "") == std::vector<int>{0, 1});
  CHECK(DeviceIndices({"nvidiactl", "nvidia-uvm", "nvidia0"}, "nvidia") == std::vector<int>{0});
}

TEST_CASE("facts: nvidia-smi -L lists one model per GPU") {
  const std::string out =
      "GPU 0: NVIDIA A100-SXM4-40GB (UUID: GPU-1b2c3d4e-0000-1111-2222-333344445555)\n"
      "GPU 1: NVIDIA A100-SXM4-40GB (UUID: GPU-2b2c3d4e-0000-1111-2222-333344445555)\n"
      "  MIG 1g.5gb Device 0: (UUID: MIG-aaaa)\n"
      "GPU 2: Tesla T4 (UUID: GPU-3)\n";
  std::vector<std::string> models = ParseNvidiaSmiList(out);
  REQUIRE(models.size() == 3);
  CHECK(models[0] == "NVIDIA A100-SXM4-40GB");
  CHECK(SummariseModels(models) == "NVIDIA A100-SXM4-40GB x2, Tesla T4");
  CHECK(ParseNvidiaSmiList("NVIDIA-SMI has failed because it couldn't communicate").empty());
}

TEST_CASE("facts: tpu-info's chip table") {
  const std::string out =
      "TPU Chips\n"
      "\u250f\u2501\u2501\u2513\n"
      "\u2503 Chip        \u2503 Type        \u2503 Devices \u2503 PID  \u2503\n"
      "\u2502 /dev/accel0 \u2502 TPU v4 chip \u2502 1       \u2502 1234 \u2502\n"
      "\u2502 /dev/accel1 \u2502 TPU v4 chip \u2502 1       \u2502 1234 \u2502\n"
      "| /dev/vfio/0 | TPU v5 lite chip | 1 | None |\n";
  std::vector<std::string> chips = ParseTpuInfo(out);
  REQUIRE(chips.size() == 3);
  CHECK(SummariseModels(chips) == "TPU v4 chip x2, TPU v5 lite chip");
  CHECK(ParseTpuInfo("No TPU chips found\n").empty());
}

TEST_CASE("facts: Gather reads a fake machine") {
  ScratchDir root;
  fs::create_directories(root.path + "/alternatives");
  fs::create_directories(root.path + "/lib/openblas-pthread");
  fs::create_directories(root.path + "/dev/vfio");
  std::ofstream(root.path + "/lib/openblas-pthread/libblas.so.3") << "";
  std::ofstream(root.path + "/lib/libtorch_cpu.so.1.13.0") << "";
  fs::create_symlink(root.path + "/lib/libtorch_cpu.so.1.13.0", root.path + "/lib/libtorch_cpu.so");
  fs::create_symlink(root.path + "/lib/openblas-pthread/libblas.so.3",
                     root.path + "/alternatives/libblas.so.3-x86_64-linux-gnu");
  for (const char* chip : {"accel0", "accel1"}) {
    std::ofstream(root.path + "/dev/" + chip) << "";
  }
  GatherOptions options;
  options.alternatives_dir = root.path + "/alternatives";
  options.lib_dirs = {root.path + "/nowhere", root.path + "/lib"};
  options.dev_dir = root.path + "/dev";
  options.dirs = {{"work", root.path}, {"cache", root.path + "/not/made/yet"}};
  options.threads_per_run = 3;
  std::string saved_path = getenv("PATH") ? getenv("PATH") : "";
  setenv("PATH", (root.path + "/empty-bin").c_str(), 1);  // no tpu-info / nvidia-smi
  tae::v1::AgentFacts facts = Gather(options);
  setenv("PATH", saved_path.c_str(), 1);

  CHECK(facts.version() == std::string(version::Project()));
  CHECK(facts.cpu_count() > 0);
  CHECK(facts.threads_per_run() == 3);
  CHECK_FALSE(facts.kernel().empty());
  CHECK(facts.openblas_pthread());
  CHECK(facts.blas() == fs::canonical(root.path + "/lib/openblas-pthread/libblas.so.3").string());
  CHECK(TorchVersionFromPath(facts.torch()) == "1.13.0");
  REQUIRE(facts.dirs_size() == 2);
  CHECK(facts.dirs(0).role() == "work");
  CHECK(facts.dirs(0).free_bytes() > 0);
  // A dir the agent makes later is measured on its parent's file system.
  CHECK(facts.dirs(1).error().empty());
  CHECK(facts.dirs(1).total_bytes() > 0);
  REQUIRE(facts.accelerators_size() == 1);
  CHECK(facts.accelerators(0) == "tpu: " + root.path + "/dev/accel0..1");
  CHECK(facts.problems_size() == 0);
}

TEST_CASE("facts: the torch engine's probe output says what runs where") {
  auto engine = ParseTorchEngineProbe("/usr/bin/python3", "3.11.2 1.13.0a0 -\n", false);
  CHECK(engine.python() == "/usr/bin/python3");
  CHECK(engine.python_version() == "3.11.2");
  CHECK(engine.torch() == "1.13.0a0");
  CHECK(engine.torch_xla().empty());
  CHECK(engine.device() == "cpu");
  CHECK(engine.error().empty());
  CHECK(ParseTorchEngineProbe("p", "3.10.12 2.5.1 2.5.1\n", true).device() == "xla");
  CHECK(ParseTorchEngineProbe("p", "3.10.12 2.5.1 -\n", true).device() == "cuda");
  auto without = ParseTorchEngineProbe("p", "3.11.2 - -\n", false);
  CHECK(without.torch().empty());
  CHECK(without.device().empty());
  CHECK(without.error().empty());
  CHECK_FALSE(ParseTorchEngineProbe("p", "Traceback\n", false).error().empty());
}

TEST_CASE("facts: the probe runs with TAE_PYTHON's interpreter") {
  if (access("/usr/bin/python3", X_OK) != 0) {
    TAE_SKIP("no /usr/bin/python3");
  }
  setenv("TAE_PYTHON", "/usr/bin/python3", 1);
  tae::v1::AgentFacts facts = Gather(GatherOptions());
  unsetenv("TAE_PYTHON");
  const auto& engine = facts.torch_engine();
  INFO(engine.DebugString());
  CHECK(engine.python() == "/usr/bin/python3");
  CHECK(engine.error().empty());
  CHECK(absl::StartsWith(engine.python_version(), "3."));
  // Debian's python3-torch is in deploy/install-deps.sh's list; the CPU is its device here.
  CHECK(engine.device() == (engine.torch().empty() ? "" : "cpu"));
}

}  // namespace
}  // namespace tae::host
