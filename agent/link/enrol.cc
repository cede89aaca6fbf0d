#include "agent/link/enrol.h"

#include <chrono>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "agent/link/link.h"
#include "common/auth/credential.h"
#include "common/fs/fs.h"
#include "common/status/macros.h"
#include "grpcpp/client_context.h"
#include "spdlog/spdlog.h"
#include "tae/v1/agent_link.grpc.pb.h"

namespace tae::agent {

absl::StatusOr<std::string> ObtainCredential(const std::string& taed, const tls::ClientConfig& tls,
                                             const std::string& key, const std::string& agent_id,
                                             const std::string& work_dir, double wait_s,
                                             const std::function<bool()>& stopping) {
  const std::string path = absl::StrCat(work_dir, "/", kCredentialFile);
  if (std::optional<auth::Credential> given = auth::ParseCredential(key); given.has_value()) {
    if (given->agent_id != agent_id) {
      return absl::InvalidArgumentError(absl::StrCat("the credential given is agent ",
                                                     given->agent_id, "'s, not ", agent_id, "'s"));
    }
    // Kept beside the work like an enrolled one (the provider sends a new one at every start).
    absl::Status written = fs::WriteFileAtomically(path, key + "\n", {0600, fs::Durability::kFile});
    if (!written.ok()) {
      return absl::Status(written.code(), absl::StrCat("cannot save the credential (", path,
                                                       "): ", written.message()));
    }
    return key;
  }
  if (absl::StatusOr<std::string> saved = fs::ReadFile(path); saved.ok()) {
    const std::string text(absl::StripAsciiWhitespace(*saved));
    std::optional<auth::Credential> c = auth::ParseCredential(text);
    if (c.has_value() && c->agent_id == agent_id) {
      return text;
    }
    spdlog::warn("{} holds no credential of agent {}: enrolling again", path, agent_id);
  }
  grpc::ChannelArguments args;
  std::unique_ptr<tae::v1::AgentLink::Stub> stub =
      tae::v1::AgentLink::NewStub(DialTaed(taed, tls, args));
  const auto until = std::chrono::steady_clock::now() +
                     std::chrono::milliseconds(static_cast<int64_t>(wait_s * 1000));
  auto backoff = std::chrono::milliseconds(250);
  ASSIGN_OR_RETURN(std::string request_id, auth::NewSecret());  // one per enrolment
  while (true) {
    grpc::ClientContext ctx;
    ctx.AddMetadata("authorization", "Bearer " + key);
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    tae::v1::EnrolRequest request;
    request.set_agent_id(agent_id);
    request.set_request_id(request_id);
    tae::v1::EnrolResponse response;
    grpc::Status status = stub->Enrol(&ctx, request, &response);
    if (status.ok()) {
      if (!auth::ParseCredential(response.credential()).has_value()) {
        return absl::InternalError("taed's Enrol answered something that is not a credential");
      }
      absl::Status written = fs::WriteFileAtomically(path, response.credential() + "\n",
                                                     {0600, fs::Durability::kFileAndDir});
      if (!written.ok()) {
        return absl::Status(written.code(),
                            absl::StrCat("enrolled, but cannot save the credential (", path,
                                         "): ", written.message()));
      }
      spdlog::info("enrolled with taed as {}; credential saved in {}", agent_id, path);
      return response.credential();
    }
    const bool retry = status.error_code() == grpc::StatusCode::UNAVAILABLE ||
                       status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED;
    if (!retry || std::chrono::steady_clock::now() + backoff > until) {
      return absl::Status(
          static_cast<absl::StatusCode>(status.error_code()),
          absl::StrCat("enrolling as ", agent_id, " at ", taed, ": ", status.error_message()));
    }
    // The link's words for the same trouble: an operator (and a test) looks for them.
    spdlog::warn("cannot reach taed at {} to enrol as {}: {}; retrying in {} ms", taed, agent_id,
                 status.error_message(), backoff.count());
    const auto wake = std::chrono::steady_clock::now() + backoff;
    while (std::chrono::steady_clock::now() < wake) {
      if (stopping && stopping()) {
        return absl::CancelledError(absl::StrCat("asked to stop while enrolling as ", agent_id));
      }
      std::this_thread::sleep_for(std::min<std::chrono::steady_clock::duration>(
          std::chrono::milliseconds(100), wake - std::chrono::steady_clock::now()));
    }
    backoff = std::min(backoff * 2, std::chrono::milliseconds(5000));
  }
}

}  // namespace tae::agent
