#include "agent/train/threads.h"

#include <torch/torch.h>

#include <catch2/catch.hpp>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace tae::train {
namespace {

TEST_CASE("thread count: train.threads, then TAE_THREADS, then the hardware", "[threads]") {
  CHECK(*ResolveThreadCount(3, "2") == 3);
  CHECK(*ResolveThreadCount(0, "2") == 2);
  CHECK(*ResolveThreadCount(0, nullptr) >= 1);
  CHECK_FALSE(ResolveThreadCount(0, "zero").ok());
  CHECK_FALSE(ResolveThreadCount(0, "0").ok());
  ConfigureThreads(1);
  CHECK(torch::get_num_threads() == 1);
}

TEST_CASE("OpenMP settings: passive waits with 2+ threads, binding only with every CPU",
          "[threads]") {
  using Settings = std::vector<std::pair<std::string, std::string>>;
  std::map<std::string, std::string> env;
  auto getenv = [&env](const char* name) -> const char* {
    auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  };
  CHECK(OpenMpSettingsToAdd(1, 1, getenv).empty());
  CHECK(OpenMpSettingsToAdd(1, 8, getenv).empty());
  CHECK(OpenMpSettingsToAdd(2, 2, getenv) ==
        Settings{{"OMP_WAIT_POLICY", "PASSIVE"}, {"OMP_PROC_BIND", "true"}});
  CHECK(OpenMpSettingsToAdd(4, 2, getenv) ==
        Settings{{"OMP_WAIT_POLICY", "PASSIVE"}, {"OMP_PROC_BIND", "true"}});
  // A share of the CPUs: no binding (every run would bind to the same first CPUs).
  CHECK(OpenMpSettingsToAdd(2, 8, getenv) == Settings{{"OMP_WAIT_POLICY", "PASSIVE"}});
  // What the environment already says is kept.
  env["OMP_WAIT_POLICY"] = "ACTIVE";
  env["OMP_PROC_BIND"] = "false";
  CHECK(OpenMpSettingsToAdd(2, 2, getenv).empty());
  CHECK(AllowedCpus() >= 1);
}

}  // namespace
}  // namespace tae::train
