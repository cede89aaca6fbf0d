#include "client/rpc/control_client.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"

namespace tae::client {

ControlClient::ControlClient(const std::string& home)
    : home_(home), socket_path_(home + "/taed.sock") {
  // Short reconnect backoff: `taectl up` polls a socket that appears a moment later.
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 50);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 50);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 500);
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  args.SetMaxReceiveMessageSize(256 << 20);  // export: every point of one run in one response
  stub_ = tae::v1::Control::NewStub(
      grpc::CreateCustomChannel("unix:" + socket_path_, grpc::InsecureChannelCredentials(), args));
}

// taectl is a short-lived process: the channel is left for the process exit (main ends with
// _Exit), which saves its orderly shutdown (several ms per command).
ControlClient::~ControlClient() { (void)stub_.release(); }

std::unique_ptr<grpc::ClientContext> ControlClient::Context(int timeout_ms) {
  auto ctx = std::make_unique<grpc::ClientContext>();
  ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(timeout_ms));
  return ctx;
}

absl::Status ControlClient::Check(const grpc::Status& status) const {
  if (status.ok()) {
    return absl::OkStatus();
  }
  if (status.error_code() == grpc::StatusCode::UNAVAILABLE) {
    // UNAVAILABLE also comes from a taed that is up but slow to take the connection (both cores
    // busy): only a socket nobody listens on means it is not running.
    if (!SocketAccepts(socket_path_)) {
      return absl::UnavailableError(
          absl::StrCat("taed is not running on ", home_, " (start it with `taectl up`)"));
    }
    return absl::UnavailableError(
        absl::StrCat("taed on ", home_, " is running but did not answer (", status.error_message(),
                     "); try again, and see ", home_, "/logs/taed.log if it keeps happening"));
  }
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()), status.error_message());
}

bool SocketAccepts(const std::string& path) {
  sockaddr_un addr{};
  if (path.size() >= sizeof(addr.sun_path)) {
    return false;
  }
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    return false;
  }
  const bool accepted = ::connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) == 0;
  ::close(fd);
  return accepted;
}

bool ControlClient::Ping() {
  tae::v1::ListAgentsRequest request;
  tae::v1::ListAgentsResponse response;
  return stub_->ListAgents(Context(2000).get(), request, &response).ok();
}

}  // namespace tae::client
