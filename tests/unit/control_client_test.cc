// taectl's reading of gRPC failures: "taed is not running" only when nothing listens.

#include "client/rpc/control_client.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "absl/strings/match.h"
#include "tests/unit/temp_dir.h"

namespace {

using tae::client::ControlClient;

// A unix socket that accepts connections (into its backlog) but never answers: a taed too busy
// to take the call, as far as a client can tell.
struct SilentListener {
  explicit SilentListener(const std::string& path) {
    fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
    REQUIRE(::bind(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) == 0);
    REQUIRE(::listen(fd, 16) == 0);
  }
  ~SilentListener() { ::close(fd); }
  int fd = -1;
};

}  // namespace

TEST_CASE("UNAVAILABLE says taed is not running only when nothing listens on its socket") {
  tae::testing::TempDir home("tae-client");
  ControlClient client(home.path());
  const grpc::Status unavailable(grpc::StatusCode::UNAVAILABLE, "failed to connect");

  // No socket file at all.
  CHECK_FALSE(tae::client::SocketAccepts(client.socket_path()));
  absl::Status status = client.Check(unavailable);
  CHECK(absl::IsUnavailable(status));
  CHECK(absl::StrContains(status.message(), "taed is not running on " + home.path()));

  {
    SilentListener listener(client.socket_path());
    CHECK(tae::client::SocketAccepts(client.socket_path()));
    status = client.Check(unavailable);
    CHECK(absl::IsUnavailable(status));
    CHECK_FALSE(absl::StrContains(status.message(), "not running"));
    CHECK(absl::StrContains(status.message(), "is running but did not answer (failed to connect)"));
  }

  // A socket file left behind by a taed that died: nothing accepts, so it is not running.
  REQUIRE(std::filesystem::exists(client.socket_path()));
  CHECK_FALSE(tae::client::SocketAccepts(client.socket_path()));
  CHECK(absl::StrContains(client.Check(unavailable).message(), "taed is not running"));

  CHECK(client.Check(grpc::Status::OK).ok());
  const grpc::Status bad(grpc::StatusCode::INVALID_ARGUMENT, "name: empty");
  CHECK(absl::IsInvalidArgument(client.Check(bad)));
}
