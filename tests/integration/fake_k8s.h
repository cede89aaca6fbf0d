#pragma once

// The fake Kubernetes API server (tests/fake_k8s/fake_k8s.py) for integration tests: the
// process, a kubeconfig pointed at it, and the real kubectl run against it. Tests that need
// kubectl or python3 where they are absent end with TAE_SKIP(missing()).

#include <sys/types.h>

#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "tests/integration/harness.h"
#include "tests/skip.h"

namespace tae::testing {

class FakeK8s {
 public:
  // Serves namespace `ns` as the kubeconfig context's default. With `kubelet`, an admitted
  // JobSet's pods run as local processes (fake_k8s.py's kubelet): the image's /opt/tae/bin is
  // the build's bin directory, and each pod has a /var/tmp of its own.
  explicit FakeK8s(const std::string& ns = "default", bool kubelet = false);
  ~FakeK8s();
  FakeK8s(const FakeK8s&) = delete;
  FakeK8s& operator=(const FakeK8s&) = delete;

  // Empty when the test can run; else why not.
  std::string missing() const;
  int port() const { return port_; }
  const std::string& kubeconfig() const { return kubeconfig_; }
  const TempDir& dir() const { return dir_; }

  // `kubectl ARGS` with KUBECONFIG set to kubeconfig().
  CommandResult Kubectl(const std::vector<std::string>& args) const;
  // `kubectl ARGS -o json`, which must succeed, parsed.
  nlohmann::json KubectlJson(std::vector<std::string> args) const;
  // Sets KUBECONFIG to kubeconfig() in this process's environment (set) or removes it: a taed
  // started meanwhile inherits it.
  void SetEnv(bool set) const;
  // METHOD /_control/WHAT with a JSON body.
  nlohmann::json Control(const std::string& method, const std::string& what,
                         const nlohmann::json& body = nullptr) const;

 private:
  TempDir dir_;
  std::string kubectl_;
  std::string python_;
  std::string kubeconfig_;
  pid_t pid_ = 0;
  int port_ = 0;
};

}  // namespace tae::testing
