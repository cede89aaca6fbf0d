#include "tests/integration/fake_k8s.h"

#include <signal.h>
#include <sys/wait.h>

#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "tests/integration/fake_tpu_api.h"  // Http, ReadFile, FindOnPath

namespace tae::testing {
namespace {

// tests/fake_k8s in the source tree.
std::string FakeK8sScript() {
  std::filesystem::path here(__FILE__);  // tests/integration/fake_k8s.cc, absolute under CMake
  return (here.parent_path().parent_path() / "fake_k8s" / "fake_k8s.py").string();
}

}  // namespace

FakeK8s::FakeK8s(const std::string& ns, bool kubelet) {
  kubectl_ = FindOnPath("kubectl");
  python_ = FindOnPath("python3");
  if (kubectl_.empty() || python_.empty()) {
    return;
  }
  const std::string port_file = dir_.path() + "/port";
  const std::string log = dir_.path() + "/fake_k8s.log";
  process::SpawnRequest request;
  request.argv = {python_, FakeK8sScript(), "--port-file", port_file};
  if (kubelet) {
    const std::string pods = dir_.path() + "/pods";
    std::filesystem::create_directories(pods);
    request.argv.insert(request.argv.end(),
                        {"--kubelet-root", pods, "--image-path",
                         absl::StrCat("/opt/tae/bin=", TAE_BIN_DIR), "--pod-local", "/var/tmp"});
  }
  request.log_path = log;
  absl::StatusOr<process::SpawnedProcess> spawned = process::Spawn(request);
  INFO("spawn fake_k8s.py: " << spawned.status().ToString());
  REQUIRE(spawned.ok());
  pid_ = spawned->pid;
  const bool up = WaitUntil(
      [&] {
        const std::string text = ReadFile(port_file);
        return !text.empty() && text.back() == '\n';
      },
      30);
  INFO("fake_k8s.py log: " << ReadFile(log));
  REQUIRE(up);
  port_ = std::stoi(ReadFile(port_file));
  kubeconfig_ = dir_.path() + "/kubeconfig";
  std::ofstream(kubeconfig_) << absl::StrCat(
      "apiVersion: v1\nkind: Config\nclusters:\n- name: fake\n  cluster:\n    server: "
      "http://127.0.0.1:",
      port_,
      "\ncontexts:\n- name: fake\n  context:\n    cluster: fake\n    user: fake\n    "
      "namespace: ",
      ns, "\nusers:\n- name: fake\n  user:\n    token: fake\ncurrent-context: fake\n");
}

FakeK8s::~FakeK8s() { StopProcessGroup(pid_); }

std::string FakeK8s::missing() const {
  if (kubectl_.empty()) {
    return "kubectl not found: no kubectl on PATH";
  }
  if (python_.empty()) {
    return "python3 for the fake Kubernetes API server is not on PATH";
  }
  return "";
}

void FakeK8s::SetEnv(bool set) const {
  if (set) {
    setenv("KUBECONFIG", kubeconfig_.c_str(), 1);
  } else {
    unsetenv("KUBECONFIG");
  }
}

CommandResult FakeK8s::Kubectl(const std::vector<std::string>& args) const {
  std::vector<std::string> argv = {"/usr/bin/env", "KUBECONFIG=" + kubeconfig_, kubectl_};
  argv.insert(argv.end(), args.begin(), args.end());
  return RunCommand(argv, 120);
}

nlohmann::json FakeK8s::KubectlJson(std::vector<std::string> args) const {
  args.insert(args.end(), {"-o", "json"});
  CommandResult result = Kubectl(args);
  INFO("kubectl stderr: " << result.err);
  REQUIRE(result.exit_code == 0);
  return nlohmann::json::parse(result.out);
}

nlohmann::json FakeK8s::Control(const std::string& method, const std::string& what,
                                const nlohmann::json& body) const {
  return Http(port_, method, "/_control/" + what, body);
}

}  // namespace tae::testing
