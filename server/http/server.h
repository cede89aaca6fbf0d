#pragma once

// The dashboard's HTTP server: Boost.Beast on its own io_context thread, loopback only. It knows
// nothing of experiments: it parses requests, applies the sign-in rules (server/http/auth.h),
// hands each allowed request to a Handler, writes the answer, and drives Server-Sent Events
// streams. Handlers do their work wherever they like (taed's API posts to the core) and answer
// through a callback that may run on any thread.

#include <atomic>
#include <chrono>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "boost/asio/io_context.hpp"
#include "boost/asio/steady_timer.hpp"
#include "server/http/auth.h"

namespace tae::http {

struct Request {
  std::string method;
  std::string path;                          // percent-decoded, without the query
  std::map<std::string, std::string> query;  // percent-decoded; a repeated name keeps the last
  std::string body;
  std::string csrf;  // the signed-in session's X-CSRF-Token (GET /api/session hands it out)

  // The query parameter `name`, or `fallback`.
  std::string Param(const std::string& name, const std::string& fallback = "") const;
};

// An open Server-Sent Events stream. The server calls Poll on its thread about every 100 ms, one
// call at a time; Poll answers once through `emit` (from any thread) with the text to send (""
// for nothing this time), or nullopt to end the stream.
class EventSource {
 public:
  virtual ~EventSource() = default;
  virtual void Poll(std::function<void(std::optional<std::string>)> emit) = 0;
};

struct Response {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;  // extra ones
  std::shared_ptr<EventSource> stream;                       // set: answer with this SSE stream

  static Response Json(int status, std::string body);
  // {"error": message}
  static Response Error(int status, const std::string& message);
};

class Handler {
 public:
  virtual ~Handler() = default;
  // Called on the server's thread for a signed-in request; `done` is called once, from any
  // thread.
  virtual void Handle(Request request, std::function<void(Response)> done) = 0;
};

// The default cap on connections that have not signed in (ServerOptions::max_unauthenticated):
// room for a browser's six parallel connections while it signs in, and then some.
inline constexpr int kMaxUnauthenticatedConnections = 16;

struct ServerOptions {
  std::string listen = "127.0.0.1:0";  // a loopback address; port 0 picks a free one
  std::string token;                   // the sign-in token (http.token)
  Handler* handler = nullptr;          // outlives the server
  double poll_s = 0.1;                 // between an SSE stream's polls
  double heartbeat_s = 15;             // an SSE comment line after this long without events
  // Open connections (SSE streams included) beyond this are answered 503 and closed at once.
  int max_connections = 128;
  // Connections that have not (yet) presented a valid session: a new one beyond this closes the
  // oldest of them, so clients that never sign in cannot keep a signed-in browser out. Every
  // answer to a request that is not signed in (401, 403, 421) also closes its connection.
  int max_unauthenticated = kMaxUnauthenticatedConnections;
  // A request must arrive whole within this long of the server starting to wait for it (also an
  // idle keep-alive connection's lifetime): a client that trickles a header holds nothing long.
  double request_timeout_s = 15;
};

// After a failed accept (EMFILE, ENFILE, ENOBUFS: descriptors are shared with the agent listener
// and SQLite), the next try waits kAcceptBackoffFirst, doubling up to kAcceptBackoffMax; a success
// resets it. So in any interval of length T after the first failure there are at most
// 1 + max{k : the first k waits sum to at most T} failed accepts, however loaded the machine.
inline constexpr std::chrono::milliseconds kAcceptBackoffFirst{50};
inline constexpr std::chrono::milliseconds kAcceptBackoffMax{2000};

class Server {
 public:
  // Binds and starts serving on its own thread. A listen address beyond loopback is refused.
  static absl::StatusOr<std::unique_ptr<Server>> Start(ServerOptions options);
  ~Server();

  int port() const { return port_; }
  // Connections turned away over max_connections, and failed accepts, so far (any thread; for
  // tests and taed's log).
  int64_t refused_connections() const { return refused_connections_.load(); }
  // Connections that had not signed in, closed to make room under max_unauthenticated.
  int64_t evicted_connections() const { return evicted_connections_.load(); }
  int64_t accept_errors() const { return accept_errors_.load(); }
  // Closes the listener and every connection, SSE streams included, and joins the thread.
  void Stop();

 private:
  explicit Server(ServerOptions options);
  class Session;
  class Stream;
  void Accept();

  ServerOptions options_;
  Secrets secrets_;        // derived from the token: what a sign-in is checked against
  SessionTable sessions_;  // the server's thread only
  // Declared before io_, so that they outlive it: destroying io_ destroys the sessions its
  // pending handlers still hold, and each takes itself off these.
  int connections_ = 0;                  // the server's thread only
  std::list<Session*> unauthenticated_;  // not signed in, oldest first (the server's thread only)
  boost::asio::io_context io_;
  std::unique_ptr<class Acceptor> acceptor_;
  std::unique_ptr<boost::asio::steady_timer> accept_timer_;  // the backoff after a failed accept
  std::chrono::milliseconds accept_backoff_{0};              // the server's thread only
  std::atomic<int64_t> refused_connections_{0};
  std::atomic<int64_t> evicted_connections_{0};
  std::atomic<int64_t> accept_errors_{0};
  std::thread thread_;
  int port_ = 0;
  bool stopped_ = false;
};

// For the HTTP fuzzer (fuzz/fuzz_http.cc) and tests: `bytes` through the same parser (the same
// limits) and the same request handling as a connection, without a socket: each request parsed
// whole (at most 8, pipelined) is decided (sign-in rules, then options.handler) and its answer,
// serialized as it would be sent, goes to `answered`, which may run later on whatever thread the
// handler answers from. `port`: the one the Host header must name; `sessions`: who is signed in
// (a sign-in adds to it). Returns how many requests
// were parsed whole.
int ServeBytesForTest(std::string_view bytes, const ServerOptions& options, int port,
                      SessionTable* sessions, const std::function<void(std::string)>& answered);

// Percent-decoding of a URL component ('+' is a space in a query); nullopt when malformed.
std::optional<std::string> PercentDecode(std::string_view text, bool plus_is_space);
// Splits "a=1&b=x%20y" into decoded pairs; malformed parts are skipped.
std::map<std::string, std::string> ParseQuery(std::string_view query);

}  // namespace tae::http
