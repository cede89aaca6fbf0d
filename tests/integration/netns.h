#pragma once

// Network namespaces for integration tests: a bridge with "hosts" in their own namespaces
// (Slice), and Debian's sshd inside one of them (NsSshd). Both need root and iproute2; NsSshd
// also openssh-server. Each says why when it cannot be set up, so a test can WARN and return.

#include <sys/types.h>

#include <string>
#include <vector>

#include "tests/integration/harness.h"

namespace tae::testing {

// Runs /usr/sbin/ip ARGS; true when it exits 0.
bool Ip(std::vector<std::string> args);

// A bridge here (bridge_ip(), the subnet's .1) and `hosts` network namespaces on it, host i at
// HostIp(i) (.i+2) behind a veth pair, so the namespaces reach this host and each other, and
// nothing else. With id = pid % 10000 the names are: bridge BRIDGE_PREFIX<id>, namespace i
// PREFIX<id>-<i>, veth ends PREFIX<id>h<i> (here) and PREFIX<id>n<i> (inside); the subnet is
// 10.OCTET.<pid % 200 + 20>.0/24. Two Slices alive at once need different prefixes and octets.
// Interface names must fit in 15 characters, so keep the prefixes short.
class Slice {
 public:
  Slice(int hosts, const std::string& prefix, const std::string& bridge_prefix, int octet);
  // Deletes what the constructor created, also when it failed half way.
  ~Slice();
  Slice(const Slice&) = delete;
  Slice& operator=(const Slice&) = delete;

  bool ok() const { return ok_; }
  // Why ok() is false: the ip command that failed and what it said.
  const std::string& why_not() const { return why_not_; }
  int hosts() const { return hosts_; }
  const std::string& bridge() const { return bridge_; }
  const std::string& bridge_ip() const { return bridge_ip_; }
  // The first three octets, e.g. "10.232.57".
  const std::string& subnet() const { return subnet_; }
  std::string Netns(int i) const;
  std::string HostIp(int i) const;

 private:
  bool Run(const std::vector<std::string>& args);

  const int hosts_;
  std::string id_;
  std::string prefix_;
  std::string bridge_;
  std::string subnet_;
  std::string bridge_ip_;
  bool ok_ = false;
  std::string why_not_;
  bool made_bridge_ = false;
  std::vector<std::string> made_netns_;
  std::vector<std::string> made_veths_;  // the ends here; deleting one deletes its peer
};

// Debian's /usr/sbin/sshd in the foreground (-D -e) inside network namespace `netns`, listening
// on listen_ip:22 with a fresh ed25519 host key in its own directory. Key logins only (root
// too), no PAM, StrictModes off, TCP forwarding on; `authorized_keys` is its AuthorizedKeysFile
// (may contain %u). Stopped (SIGTERM, then SIGKILL) and reaped on destruction; the sessions it
// started are not its business.
class NsSshd {
 public:
  NsSshd(const std::string& netns, const std::string& listen_ip,
         const std::string& authorized_keys);
  ~NsSshd();
  NsSshd(const NsSshd&) = delete;
  NsSshd& operator=(const NsSshd&) = delete;

  // True once sshd has written its pid file (it does that once listening).
  bool ok() const { return ok_; }
  const std::string& why_not() const { return why_not_; }
  // The host key as an authorized_keys/known_hosts line: "ssh-ed25519 AAAA... comment".
  const std::string& host_key_pub() const { return host_key_pub_; }
  // The listener's pid file (the pid to spare when killing everything in the namespace).
  std::string pid_file() const { return dir_.path() + "/sshd.pid"; }
  // Its directory: host_key, sshd_config, sshd.pid, sshd.log.
  const std::string& dir() const { return dir_.path(); }
  // What sshd logged so far.
  std::string log() const;

 private:
  TempDir dir_;
  pid_t pid_ = -1;
  bool ok_ = false;
  std::string why_not_;
  std::string host_key_pub_;
};

}  // namespace tae::testing
