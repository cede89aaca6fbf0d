#pragma once

// AgentSession: an agent that lives as one long-running local command whose far end is the
// agent, e.g. `ssh HOST 'exec tae-agent --stdin ...'` (ssh provider) or `gcloud compute tpus
// tpu-vm ssh VM --worker=W --command 'exec tae-agent --stdin ...'` (gcloud-tpu provider). The
// command's stdin is a pipe held by taed: the token is its first line, `stop` asks the agent to
// stop its runs and exit, and closing it (taed gone) makes the agent exit and leave its runs to
// be adopted. LocalProvider supervises sessions like its local agents (restart with backoff).

#include <map>
#include <string>
#include <utility>
#include <vector>

namespace tae::provider {

struct AgentSession {
  std::string id;                 // the agent's id
  std::string provider;           // "ssh", "gcloud-tpu": what `taectl agents --provider` shows
  std::vector<std::string> argv;  // argv[0] is the path to execute
  std::vector<std::pair<std::string, std::string>> env;  // added to taed's environment
  // The labels its command gives the agent (--labels): its credential is minted with their
  // placement labels (server/registry/placement.h), which it must then register with.
  std::map<std::string, std::string> labels;
};

}  // namespace tae::provider
