#include "tests/integration/netns.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "common/process/spawn.h"

namespace tae::testing {
namespace {

constexpr const char* kIp = "/usr/sbin/ip";
constexpr const char* kSshd = "/usr/sbin/sshd";
constexpr const char* kSshKeygen = "/usr/bin/ssh-keygen";

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::string Join(const std::vector<std::string>& words) {
  std::string out;
  for (const std::string& word : words) {
    out += (out.empty() ? "" : " ") + word;
  }
  return out;
}

}  // namespace

bool Ip(std::vector<std::string> args) {
  args.insert(args.begin(), kIp);
  return RunCommand(args, 30).exit_code == 0;
}

Slice::Slice(int hosts, const std::string& prefix, const std::string& bridge_prefix, int octet)
    : hosts_(hosts) {
  id_ = std::to_string(getpid() % 10000);
  prefix_ = prefix + id_;
  bridge_ = bridge_prefix + id_;
  subnet_ = "10." + std::to_string(octet) + "." + std::to_string(getpid() % 200 + 20);
  bridge_ip_ = subnet_ + ".1";
  if (access(kIp, X_OK) != 0) {
    why_not_ = std::string(kIp) + " is not installed";
    return;
  }
  if (!Run({"link", "add", bridge_, "type", "bridge"})) {
    return;
  }
  made_bridge_ = true;
  if (!Run({"link", "set", bridge_, "up"}) ||
      !Run({"addr", "add", bridge_ip_ + "/24", "dev", bridge_})) {
    return;
  }
  for (int i = 0; i < hosts_; ++i) {
    const std::string ns = Netns(i);
    const std::string outside = prefix_ + "h" + std::to_string(i);
    const std::string inside = prefix_ + "n" + std::to_string(i);
    if (!Run({"netns", "add", ns})) {
      return;
    }
    made_netns_.push_back(ns);
    if (!Run({"link", "add", outside, "type", "veth", "peer", "name", inside})) {
      return;
    }
    made_veths_.push_back(outside);
    if (!(Run({"link", "set", inside, "netns", ns}) &&
          Run({"link", "set", outside, "master", bridge_}) && Run({"link", "set", outside, "up"}) &&
          Run({"-n", ns, "addr", "add", HostIp(i) + "/24", "dev", inside}) &&
          Run({"-n", ns, "link", "set", inside, "up"}) &&
          Run({"-n", ns, "link", "set", "lo", "up"}))) {
      return;
    }
  }
  ok_ = true;
}

Slice::~Slice() {
  for (auto it = made_veths_.rbegin(); it != made_veths_.rend(); ++it) {
    Ip({"link", "del", *it});
  }
  for (auto it = made_netns_.rbegin(); it != made_netns_.rend(); ++it) {
    Ip({"netns", "del", *it});
  }
  if (made_bridge_) {
    Ip({"link", "del", bridge_});
  }
}

std::string Slice::Netns(int i) const { return prefix_ + "-" + std::to_string(i); }

std::string Slice::HostIp(int i) const { return subnet_ + "." + std::to_string(i + 2); }

bool Slice::Run(const std::vector<std::string>& args) {
  std::vector<std::string> argv = args;
  argv.insert(argv.begin(), kIp);
  CommandResult result = RunCommand(argv, 30);
  if (result.exit_code != 0) {
    why_not_ = Join(argv) + " failed: " + result.err;
    return false;
  }
  return true;
}

NsSshd::NsSshd(const std::string& netns, const std::string& listen_ip,
               const std::string& authorized_keys) {
  if (access(kSshd, X_OK) != 0 || access(kSshKeygen, X_OK) != 0) {
    why_not_ = "openssh-server is not installed";
    return;
  }
  const std::string d = dir_.path();
  CommandResult keygen = RunCommand(
      {kSshKeygen, "-q", "-t", "ed25519", "-N", "", "-C", "sshd@" + netns, "-f", d + "/host_key"},
      30);
  host_key_pub_ = ReadAll(d + "/host_key.pub");
  host_key_pub_.erase(host_key_pub_.find_last_not_of("\r\n") + 1);
  if (keygen.exit_code != 0 || host_key_pub_.empty()) {
    why_not_ = "ssh-keygen failed: " + keygen.err;
    return;
  }
  std::ofstream(d + "/sshd_config") << "ListenAddress " << listen_ip << "\n"
                                    << "HostKey " << d << "/host_key\n"
                                    << "PidFile " << pid_file() << "\n"
                                    << "AuthorizedKeysFile " << authorized_keys << "\n"
                                    << "PermitRootLogin prohibit-password\n"
                                    << "PasswordAuthentication no\n"
                                    << "KbdInteractiveAuthentication no\n"
                                    << "UsePAM no\n"
                                    << "StrictModes no\n"
                                    << "AllowTcpForwarding yes\n";
  std::error_code ignored;
  std::filesystem::create_directories("/run/sshd", ignored);  // its privilege separation dir

  // `ip netns exec` execs sshd in place, so pid_ is sshd's pid. Its stdio goes to /dev/null (with
  // -D it keeps what it inherits; its log is -E).
  process::SpawnRequest request;
  request.argv = {kIp,  "netns",        "exec", netns, kSshd, "-D", "-e", "-f", d + "/sshd_config",
                  "-E", d + "/sshd.log"};
  request.log_path = "/dev/null";
  absl::StatusOr<process::SpawnedProcess> spawned = process::Spawn(request);
  if (!spawned.ok()) {
    why_not_ = absl::StrCat("cannot start sshd: ", spawned.status().message());
    return;
  }
  pid_ = spawned->pid;
  // Up when its pid file is there (written once it listens); gone early means it failed.
  bool exited = false;
  WaitUntil(
      [&] {
        exited = waitpid(pid_, nullptr, WNOHANG) == pid_;
        return exited || access(pid_file().c_str(), F_OK) == 0;
      },
      30);
  if (exited) {
    pid_ = -1;
  }
  ok_ = !exited && access(pid_file().c_str(), F_OK) == 0;
  if (!ok_) {
    why_not_ = "sshd did not start: " + log();
  }
}

NsSshd::~NsSshd() {
  if (pid_ <= 0) {
    return;
  }
  kill(pid_, SIGTERM);
  if (!WaitUntil([&] { return waitpid(pid_, nullptr, WNOHANG) == pid_; }, 10)) {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
}

std::string NsSshd::log() const { return ReadAll(dir_.path() + "/sshd.log"); }

}  // namespace tae::testing
