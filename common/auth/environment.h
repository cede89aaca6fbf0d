#pragma once

// The environment variables that lead to taed's data, its CLI socket or a credential
// (docs/security.md, "What a job can reach"). Whatever taed starts that is not taed (a local agent,
// an ssh or TPU session) and whatever an agent starts (a job's supervisor and the job) gets an
// environment without them:
//  - TAE_HOME: taed's directory, with taed.sock (the whole Control API, no token: the
//    filesystem is the lock), agent.token (enrols new agent ids) and taed.db;
//  - TAE_AGENT_TOKEN: an enrolment token or an agent's credential;
//  - TAE_TLS_*: taed's own certificate and key, or an agent's client certificate.
// A child that needs one of them is given it explicitly (SpawnRequest::env wins over removal).

#include <string>
#include <vector>

namespace tae::auth {

inline std::vector<std::string> TaedOnlyEnv() {
  return {"TAE_HOME",    "TAE_AGENT_TOKEN",     "TAE_TLS_CA",       "TAE_TLS_CERT",
          "TAE_TLS_KEY", "TAE_TLS_SERVER_NAME", "TAE_TLS_CLIENT_CA"};
}

// Removes `name` from this process's environment and zeroes its bytes where the kernel shows
// them: unsetenv alone leaves the text in the block /proc/PID/environ reads (the process's
// initial stack), where a process of the same user (a job) can read it. Call before any thread
// starts; nothing of the variable is readable there afterwards.
void ScrubEnv(const std::string& name);

}  // namespace tae::auth
