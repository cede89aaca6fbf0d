#pragma once

// The fake Cloud TPU API (tests/fake_tpu/fake_tpu.py) for integration tests: the process, a temp
// gcloud configuration pointed at it, the real gcloud run against it, and its /_control
// endpoints. Tests that need gcloud or python3 where they are absent WARN and return.

#include <sys/types.h>

#include <string>
#include <vector>

#include "common/process/tool.h"
#include "nlohmann/json.hpp"
#include "tests/integration/harness.h"
#include "tests/skip.h"

namespace tae::testing {

inline constexpr const char* kProject = "tae-test-project";
inline constexpr const char* kZone = "us-central2-b";
inline constexpr const char* kVersion = "tpu-ubuntu2204-base";

using tae::process::FindOnPath;  // the full path of an executable found on PATH, or ""

// tests/fake_tpu in the source tree (fake_tpu.py, gcloud_env.sh).
std::string FakeTpuDir();

// The whole file, or "" when it cannot be read.
std::string ReadFile(const std::string& path);

// A minimal HTTP/1.1 client for the fake's /_control endpoints on 127.0.0.1:port. Returns the
// parsed JSON body, or a discarded value on any failure.
nlohmann::json Http(int port, const std::string& method, const std::string& path,
                    const nlohmann::json& body = nullptr);

// The fake Cloud TPU API (its own process group, killed on destruction) plus a temp gcloud
// configuration pointed at it.
class FakeTpu {
 public:
  FakeTpu();
  ~FakeTpu();
  FakeTpu(const FakeTpu&) = delete;
  FakeTpu& operator=(const FakeTpu&) = delete;

  // Empty when the test can't run; then WARN with this reason and return.
  std::string missing() const;

  pid_t pid() const { return pid_; }
  // The fake's port on 127.0.0.1 (0 when it was not started).
  int port() const { return port_; }
  // VAR=VALUE lines of the temp gcloud configuration (today CLOUDSDK_CONFIG).
  const std::vector<std::string>& env() const { return env_; }

  // Sets (or unsets) env() in this process, e.g. around starting taed.
  void SetEnv(bool set) const;

  // Runs `gcloud ARGS` with the temp configuration.
  CommandResult Gcloud(const std::vector<std::string>& args) const;

  // `gcloud ARGS --format=json`, which must succeed, parsed.
  nlohmann::json GcloudJson(std::vector<std::string> args) const;

  // `gcloud compute tpus tpu-vm create NAME --zone ZONE --accelerator-type TYPE --version V
  // EXTRA...`.
  CommandResult Create(const std::string& name, const std::string& zone, const std::string& type,
                       const std::vector<std::string>& extra = {}) const;

  // `gcloud compute tpus tpu-vm describe NAME --zone ZONE`, which must succeed, parsed.
  nlohmann::json Describe(const std::string& name, const std::string& zone = kZone) const;

  // Node names (basenames) that `gcloud ... list --zone ZONE` shows.
  std::vector<std::string> List(const std::string& zone = kZone) const;

  // METHOD /_control/WHAT with a JSON body; the reply must be JSON.
  nlohmann::json Control(const std::string& method, const std::string& what,
                         const nlohmann::json& body = nullptr) const;

 private:
  TempDir dir_;
  std::string gcloud_;
  std::string python_;
  pid_t pid_ = -1;
  int port_ = 0;
  std::vector<std::string> env_;
};

#define SKIP_WITHOUT_GCLOUD(fake)  \
  if (!(fake).missing().empty()) { \
    TAE_SKIP((fake).missing());    \
  }

}  // namespace tae::testing
