#pragma once

// The CLI's connection to taed's Control API on $TAE_HOME/taed.sock. Every call has a deadline.

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "tae/v1/control.grpc.pb.h"

namespace tae::client {

// True when something accepts connections on the unix socket at `path` (a connect(), no RPC).
bool SocketAccepts(const std::string& path);

class ControlClient {
 public:
  explicit ControlClient(const std::string& home);
  ~ControlClient();

  const std::string& home() const { return home_; }
  const std::string& socket_path() const { return socket_path_; }
  tae::v1::Control::Stub* stub() { return stub_.get(); }

  // A fresh context with the given deadline.
  static std::unique_ptr<grpc::ClientContext> Context(int timeout_ms = 10000);
  // Turns a gRPC failure into a message a researcher can act on: UNAVAILABLE says "taed is not
  // running" only when nothing accepts connections on the socket.
  absl::Status Check(const grpc::Status& status) const;
  // True when a taed answers on the socket.
  bool Ping();

 private:
  std::string home_;
  std::string socket_path_;
  std::unique_ptr<tae::v1::Control::Stub> stub_;
};

}  // namespace tae::client
