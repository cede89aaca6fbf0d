#pragma once

// The agent's own credential (docs/security.md, "Agents"). What the agent is given
// (TAE_AGENT_TOKEN, or stdin's first line with --stdin) is either
//  - a credential "ID.SECRET" that taed's provider minted for it: used as it is (and saved in
//    WORK_DIR/agent.credential, 0600, like an enrolled one); or
//  - the shared enrolment token: then the credential an earlier enrolment saved in
//    WORK_DIR/agent.credential (0600) is used, or, without one, taed's Enrol is called once and
//    its answer saved there before anything else happens.
// From then on every call presents the credential; the enrolment token is not kept.

#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "common/tls/tls.h"

namespace tae::agent {

inline constexpr char kCredentialFile[] = "agent.credential";

// The credential to present. Unavailable from taed (not up yet) is retried with backoff for up
// to wait_s seconds; a refusal (an id enrolled elsewhere, revoked, a bad token) is returned at
// once with taed's reason. `stopping` (when set) is asked between tries, every 100 ms while
// waiting: once it says true, Cancelled is returned (the agent was asked to stop).
absl::StatusOr<std::string> ObtainCredential(const std::string& taed, const tls::ClientConfig& tls,
                                             const std::string& key, const std::string& agent_id,
                                             const std::string& work_dir, double wait_s = 300,
                                             const std::function<bool()>& stopping = {});

}  // namespace tae::agent
