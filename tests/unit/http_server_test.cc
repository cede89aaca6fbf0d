// The dashboard's HTTP server against clients that misbehave, over real loopback sockets: a
// client that opens connections without end gets a 503 beyond the cap (and the server goes on),
// one that sends nothing is closed after the request timeout, and a handler that throws is a
// 500, never the end of the server's thread.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

#include "server/http/auth.h"
#include "server/http/server.h"

namespace tae::http {
namespace {

class Echo final : public Handler {
 public:
  void Handle(Request request, std::function<void(Response)> done) override {
    if (request.path == "/throw") {
      throw std::runtime_error("a handler bug");
    }
    done(Response::Json(200, "{\"ok\": true}"));
  }
};

int Connect(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0);
  return fd;
}

// Everything the server sends until it closes the connection or `timeout_s` passes.
std::string ReadUntilClosed(int fd, double timeout_s) {
  std::string out;
  const auto until = std::chrono::steady_clock::now() +
                     std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000));
  while (std::chrono::steady_clock::now() < until) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 50) <= 0) {
      continue;
    }
    char buffer[4096];
    const ssize_t n = read(fd, buffer, sizeof(buffer));
    if (n <= 0) {
      return out + "<closed>";
    }
    out.append(buffer, static_cast<size_t>(n));
  }
  return out;
}

std::string Get(int port, const std::string& path, const std::string& cookie) {
  const int fd = Connect(port);
  const std::string request = "GET " + path +
                              " HTTP/1.1\r\nHost: 127.0.0.1:" + std::to_string(port) +
                              "\r\nCookie: " + cookie + "\r\nConnection: close\r\n\r\n";
  REQUIRE(write(fd, request.data(), request.size()) == static_cast<ssize_t>(request.size()));
  // The server closes each answer's connection: the limit only ends a test whose server is broken.
  std::string reply = ReadUntilClosed(fd, 120);
  close(fd);
  return reply;
}

TEST_CASE("the dashboard server caps connections, times out silent ones, survives its handlers") {
  Echo echo;
  ServerOptions options;
  options.token = "tok";
  options.handler = &echo;
  options.max_connections = 4;
  options.request_timeout_s = 0.5;
  auto server = Server::Start(options);
  REQUIRE(server.ok());
  const int port = (*server)->port();

  // Four silent connections take the cap; the fifth is turned away with a 503.
  std::vector<int> silent;
  for (int i = 0; i < 4; ++i) {
    silent.push_back(Connect(port));
  }
  // The server counts a connection once it accepted it: the fifth may race the fourth's accept,
  // so open more until one is refused.
  std::string refused;
  std::vector<int> extra;
  for (int i = 0; i < 4 && refused.find("503") == std::string::npos; ++i) {
    extra.push_back(Connect(port));
    refused = ReadUntilClosed(extra.back(), 0.3);
  }
  CHECK(refused.find("HTTP/1.1 503") != std::string::npos);
  CHECK((*server)->refused_connections() >= 1);
  // The silent ones are closed after the request timeout, without an answer.
  for (int fd : silent) {
    CHECK(ReadUntilClosed(fd, 5) == "<closed>");
    close(fd);
  }
  for (int fd : extra) {
    close(fd);
  }
  // Then the server answers again; a handler that throws is a 500 and changes nothing.
  std::string cookie;
  {
    const int fd = Connect(port);
    const std::string signin =
        "GET /?token=tok HTTP/1.1\r\nHost: 127.0.0.1:" + std::to_string(port) +
        "\r\nConnection: close\r\n\r\n";
    REQUIRE(write(fd, signin.data(), signin.size()) == static_cast<ssize_t>(signin.size()));
    const  // The server closes each answer's connection: the limit only ends a test whose server is
           // broken.
        std::string reply = ReadUntilClosed(fd, 120);
    close(fd);
    const size_t at = reply.find("tae_session=");
    REQUIRE(at != std::string::npos);
    cookie = reply.substr(at, reply.find(';', at) - at);
  }
  CHECK(Get(port, "/throw", cookie).find("HTTP/1.1 500") == 0);
  CHECK(Get(port, "/fine", cookie).find("HTTP/1.1 200") == 0);
  (*server)->Stop();
}

// The most failed accepts the backoff allows within `elapsed` of the first: one, then one more
// for each wait of the doubling sequence (kAcceptBackoffFirst .. kAcceptBackoffMax) that fits.
// Load only delays tries, so a loaded machine stays under it; a loop that retried at once would
// be thousands over it within the first wait.
int64_t MaxFailedAccepts(std::chrono::steady_clock::duration elapsed) {
  int64_t failures = 1;
  std::chrono::steady_clock::duration waited{0};
  std::chrono::milliseconds wait = kAcceptBackoffFirst;
  while (waited + wait <= elapsed) {
    waited += wait;
    ++failures;
    wait = std::min(kAcceptBackoffMax, wait * 2);
  }
  return failures;
}

TEST_CASE("the accept backoff bound counts the doubling waits that fit") {
  using std::chrono::milliseconds;
  CHECK(MaxFailedAccepts(milliseconds(0)) == 1);
  CHECK(MaxFailedAccepts(milliseconds(49)) == 1);
  CHECK(MaxFailedAccepts(milliseconds(50)) == 2);
  CHECK(MaxFailedAccepts(milliseconds(350)) == 4);   // 50 + 100 + 200
  CHECK(MaxFailedAccepts(milliseconds(3149)) == 6);  // 50 .. 800 fit, 1600 does not
  CHECK(MaxFailedAccepts(milliseconds(7150)) == 9);  // 50 .. 1600, then 2000, 2000
}

TEST_CASE("out of descriptors, the server backs off between accepts instead of spinning") {
  Echo echo;
  ServerOptions options;
  options.token = "tok";
  options.handler = &echo;
  auto server = Server::Start(options);
  REQUIRE(server.ok());
  const int port = (*server)->port();
  // Another process connects (its descriptors are its own) once told to, and holds the
  // connections until its gate closes. It connects only after this process has run out of
  // descriptors, so no connection can be accepted before the first failure, however the two
  // processes are scheduled.
  int gate[2];
  REQUIRE(pipe(gate) == 0);
  const pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    close(gate[1]);
    char c;
    if (read(gate[0], &c, 1) != 1) {
      _exit(1);
    }
    for (int i = 0; i < 3; ++i) {
      const int fd = socket(AF_INET, SOCK_STREAM, 0);
      sockaddr_in addr{};
      addr.sin_family = AF_INET;
      addr.sin_port = htons(static_cast<uint16_t>(port));
      addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
    }
    while (read(gate[0], &c, 1) > 0) {
    }
    _exit(0);
  }
  close(gate[0]);
  // This process may open no more descriptors: every accept fails with EMFILE.
  rlimit saved{};
  REQUIRE(getrlimit(RLIMIT_NOFILE, &saved) == 0);
  int open_now = 0;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/fd")) {
    (void)entry;
    ++open_now;
  }
  rlimit tight = saved;
  tight.rlim_cur = static_cast<rlim_t>(open_now);
  REQUIRE(setrlimit(RLIMIT_NOFILE, &tight) == 0);
  // Every failure comes after `start`, so all of them fall within [start, now].
  const auto start = std::chrono::steady_clock::now();
  REQUIRE(write(gate[1], "g", 1) == 1);
  // The property, not a deadline: watch the failures for at least a few backoff periods (and
  // until there were two, i.e. the server did try again); at every look the count must stay
  // under what the doubling waits allow in the time that has passed. The 120 s limit only ends
  // a broken server that never fails or never retries; no healthy machine comes near it.
  int64_t failures = 0;
  int64_t allowed = 0;
  bool within = true;
  std::chrono::steady_clock::duration elapsed{0};
  while (elapsed < std::chrono::seconds(120)) {
    failures = (*server)->accept_errors();
    elapsed = std::chrono::steady_clock::now() - start;  // read after the count: a bound for it
    allowed = MaxFailedAccepts(elapsed);
    within = within && failures <= allowed;
    if (!within || (failures >= 2 && elapsed >= 4 * kAcceptBackoffFirst)) {
      break;
    }
    poll(nullptr, 0, 5);
  }
  REQUIRE(setrlimit(RLIMIT_NOFILE, &saved) == 0);
  INFO("failed accepts " << failures << ", at most " << allowed << " in "
                         << std::chrono::duration<double>(elapsed).count() << " s");
  CHECK(within);
  CHECK(failures >= 2);
  close(gate[1]);
  waitpid(child, nullptr, 0);
  // With descriptors back, the connections waiting are taken at the next try and answered.
  CHECK(Get(port, "/fine", "").find("HTTP/1.1 401") == 0);
  (*server)->Stop();
}

// Signs in over its own connection and returns the session cookie ("tae_session=...").
std::string SignIn(int port) {
  const int fd = Connect(port);
  const std::string signin = "GET /?token=tok HTTP/1.1\r\nHost: 127.0.0.1:" + std::to_string(port) +
                             "\r\nConnection: close\r\n\r\n";
  REQUIRE(write(fd, signin.data(), signin.size()) == static_cast<ssize_t>(signin.size()));
  const std::string reply = ReadUntilClosed(fd, 120);  // the limit ends only a broken server
  close(fd);
  const size_t at = reply.find("tae_session=");
  REQUIRE(at != std::string::npos);
  return reply.substr(at, reply.find(';', at) - at);
}

TEST_CASE(
    "connections that never sign in have a cap of their own: held at it, they cannot keep a "
    "signed-in browser out, and each is closed after its 401") {
  Echo echo;
  ServerOptions options;
  options.token = "tok";
  options.handler = &echo;
  options.max_connections = 8;
  options.max_unauthenticated = 4;
  options.request_timeout_s = 60;  // the held connections outlive the test
  auto server = Server::Start(options);
  REQUIRE(server.ok());
  const int port = (*server)->port();
  const std::string host = "Host: 127.0.0.1:" + std::to_string(port) + "\r\n";

  // An unauthenticated request is answered 401 and its connection closed (a keep-alive one too).
  {
    const int fd = Connect(port);
    const std::string request = "GET /api/experiments HTTP/1.1\r\n" + host + "\r\n";
    REQUIRE(write(fd, request.data(), request.size()) == static_cast<ssize_t>(request.size()));
    const std::string reply = ReadUntilClosed(fd, 120);
    close(fd);
    CHECK(reply.find("HTTP/1.1 401") == 0);
    CHECK(reply.size() >= 8);
    CHECK(reply.substr(reply.size() - 8) == "<closed>");
  }

  // Twice the whole cap of connections that never finish a request: without a cap of their
  // own they would hold every slot, and the browser below would get a 503.
  std::vector<int> held;
  for (int i = 0; i < 2 * options.max_connections; ++i) {
    held.push_back(Connect(port));
    const std::string partial = "GET /api/experiments HTTP/1.1\r\n" + host;
    REQUIRE(write(held.back(), partial.data(), partial.size()) ==
            static_cast<ssize_t>(partial.size()));
  }
  const std::string cookie = SignIn(port);
  const std::string reply = Get(port, "/api/experiments", cookie);
  INFO(reply);
  CHECK(reply.find("HTTP/1.1 200") == 0);
  CHECK((*server)->refused_connections() == 0);
  // The oldest held connections were closed to make room, the newest ones are still open.
  CHECK((*server)->evicted_connections() >= 2 * options.max_connections - 4);
  CHECK(ReadUntilClosed(held.front(), 5) == "<closed>");
  for (int fd : held) {
    close(fd);
  }
  (*server)->Stop();
}

TEST_CASE("a parameter that is not UTF-8 is a 400 that names it, without a library's text") {
  Echo echo;
  ServerOptions options;
  options.token = "tok";
  options.handler = &echo;
  auto server = Server::Start(options);
  REQUIRE(server.ok());
  const int port = (*server)->port();
  const std::string cookie = SignIn(port);
  const std::string bad = Get(port, "/api/experiments/1/curves?metric=%FF", cookie);
  INFO(bad);
  CHECK(bad.find("HTTP/1.1 400") == 0);
  CHECK(bad.find("the query parameter 'metric' is not valid UTF-8") != std::string::npos);
  // No library's words in the body (the Content-Type header says application/json, rightly).
  const std::string body = bad.substr(bad.find("\r\n\r\n") + 4);
  CHECK(body.find("json") == std::string::npos);
  CHECK(body.find("exception") == std::string::npos);
  CHECK(Get(port, "/x?%C0%AF=1", cookie).find("HTTP/1.1 400") == 0);  // an overlong name
  // Valid UTF-8 beyond ASCII passes.
  CHECK(Get(port, "/x?metric=%C3%A9", cookie).find("HTTP/1.1 200") == 0);
  (*server)->Stop();
}

}  // namespace
}  // namespace tae::http
