#pragma once

// The ssh provider's host list: agents taed starts on other machines over ssh. Each host's
// agent is one long-lived `ssh` child of taed whose remote command is the agent and whose
// `-R` forward carries the agent link back to taed's loopback listener, so the link needs no
// TLS and no open port on the workstation. The token goes down the session's stdin, never on a
// command line; the session is the agent's lifeline (tae-agent --stdin).
//
// File (TOML, `taed --ssh-hosts FILE`, default $TAE_HOME/ssh-hosts.toml when it exists):
//
//   [[host]]
//   destination = "alice@gpu-box"   # required: what `ssh` is given
//   id = "gpu-box"                  # agent id; default: the host part of destination
//   port = 22
//   identity = "~/.ssh/id_ed25519"  # -i; default: ssh's own choice
//   known_hosts = "/path/file"      # UserKnownHostsFile; host keys are always checked
//   slots = 1
//   labels = { accelerator = "cpu" }
//   tunnel_port = 17733             # the agent dials 127.0.0.1:tunnel_port on the host
//   agent = "/opt/tae/bin/tae-agent"  # default: the path of this taed's tae-agent
//   work_dir = "/var/tmp/tae-agent"   # default: .tae-agent in the remote user's home
//   ssh_options = ["ConnectTimeout=10"]  # more -o options

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace tae::provider {

struct SshHost {
  std::string id;
  std::string destination;
  int port = 22;
  std::string identity;
  std::string known_hosts;
  int slots = 1;
  std::map<std::string, std::string> labels;
  int tunnel_port = 17733;
  std::string agent;
  std::string work_dir = ".tae-agent";
  std::vector<std::string> ssh_options;
};

// Parses the host list; errors name `path`:line:column and the key. `default_agent` is used
// where a host gives no `agent`.
absl::StatusOr<std::vector<SshHost>> ParseSshHosts(const std::string& text, const std::string& path,
                                                   const std::string& default_agent);

// The ssh command line for `host`: batch mode, strict host key checking, keepalives, the
// reverse forward of 127.0.0.1:tunnel_port to `tunnel_target` (taed's loopback agent address),
// and the remote command that starts the agent with --stdin.
std::vector<std::string> SshArgv(const SshHost& host, const std::string& tunnel_target,
                                 const std::string& ssh_binary = "/usr/bin/ssh");

}  // namespace tae::provider
