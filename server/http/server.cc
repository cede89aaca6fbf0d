#include "server/http/server.h"

#include <chrono>
#include <deque>
#include <list>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "boost/asio/ip/tcp.hpp"
#include "boost/asio/post.hpp"
#include "boost/asio/steady_timer.hpp"
#include "boost/asio/strand.hpp"
#include "boost/asio/write.hpp"
#include "boost/beast/core.hpp"
#include "boost/beast/http.hpp"
#include "common/clock/clock.h"
#include "common/text/utf8.h"
#include "common/tls/tls.h"
#include "nlohmann/json.hpp"
#include "spdlog/spdlog.h"

namespace tae::http {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using tcp = boost::asio::ip::tcp;

class Acceptor {
 public:
  explicit Acceptor(asio::io_context& io) : socket(io) {}
  tcp::acceptor socket;
};

namespace {

constexpr size_t kMaxBodyBytes = 64 << 10;
constexpr uint32_t kMaxHeaderBytes = 16 << 10;
// An answer must be taken by the client within this long (a log download is a few MB).
constexpr auto kWriteTimeout = std::chrono::seconds(60);

int HexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// A small page for a browser that is not signed in (a JSON error for /api).
std::string SignInPage(const std::string& message) {
  return absl::StrCat(
      "<!doctype html><meta charset=utf-8><title>TAE</title><body style=\"font: 15px "
      "system-ui, sans-serif; margin: 3em\"><h1>TAE</h1><p>",
      message,
      "</p><p>Run <code>taectl ui</code> (or <code>taectl ui --open</code>) and open the URL it "
      "prints.</p></body>");
}

}  // namespace

std::optional<std::string> PercentDecode(std::string_view text, bool plus_is_space) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '%') {
      if (i + 2 >= text.size()) {
        return std::nullopt;
      }
      const int hi = HexDigit(text[i + 1]);
      const int lo = HexDigit(text[i + 2]);
      if (hi < 0 || lo < 0) {
        return std::nullopt;
      }
      out.push_back(static_cast<char>(hi * 16 + lo));
      i += 2;
    } else if (plus_is_space && text[i] == '+') {
      out.push_back(' ');
    } else {
      out.push_back(text[i]);
    }
  }
  return out;
}

std::map<std::string, std::string> ParseQuery(std::string_view query) {
  std::map<std::string, std::string> out;
  for (absl::string_view part :
       absl::StrSplit(absl::string_view(query.data(), query.size()), '&', absl::SkipEmpty())) {
    const size_t eq = part.find('=');
    const absl::string_view k = part.substr(0, eq);
    const absl::string_view v = eq == absl::string_view::npos ? "" : part.substr(eq + 1);
    std::optional<std::string> key = PercentDecode(std::string_view(k.data(), k.size()), true);
    std::optional<std::string> value = PercentDecode(std::string_view(v.data(), v.size()), true);
    if (key && value) {
      out[*key] = *value;
    }
  }
  return out;
}

std::string Request::Param(const std::string& name, const std::string& fallback) const {
  auto it = query.find(name);
  return it == query.end() ? fallback : it->second;
}

Response Response::Json(int status, std::string body) {
  Response r;
  r.status = status;
  r.body = std::move(body);
  return r;
}

Response Response::Error(int status, const std::string& message) {
  // The message may quote what a client sent (a decoded path): never throw on invalid UTF-8.
  return Json(status, nlohmann::json{{"error", message}}.dump(
                          -1, ' ', false, nlohmann::json::error_handler_t::replace));
}

namespace {

// Which part of a request is not valid UTF-8, said without quoting it; nullopt when all are.
std::optional<std::string> NotUtf8(const Request& request) {
  for (const auto& [name, value] : request.query) {
    if (!text::IsValidUtf8(name)) {
      return "a query parameter's name is not valid UTF-8";
    }
    if (!text::IsValidUtf8(value)) {
      return absl::StrCat("the query parameter '", name, "' is not valid UTF-8");
    }
  }
  if (!text::IsValidUtf8(request.body)) {
    return "the request body is not valid UTF-8";
  }
  return std::nullopt;
}

// Hands an allowed request to the handler. `csrf`: the session's (empty for a bearer request).
// Returns true: the request was signed in.
bool Dispatch(Request request, std::string csrf, Handler* handler,
              const std::function<void(Response, bool)>& answer, bool keep_alive) {
  request.csrf = std::move(csrf);
  // Handlers take parameters and bodies as UTF-8 text (JSON needs it): anything else is the
  // client's error, answered here once for every route, never with a library's text.
  if (std::optional<std::string> bad = NotUtf8(request); bad.has_value()) {
    answer(Response::Error(400, *bad), keep_alive);
    return true;
  }
  try {
    handler->Handle(std::move(request), [answer, keep_alive](Response response) {
      answer(std::move(response), keep_alive);
    });
  } catch (const std::exception& e) {
    spdlog::warn("dashboard request failed: {}", e.what());
    answer(Response::Error(500, "the request failed inside taed (see taed.log)"), false);
  }
  return true;
}

// What a connection does with one parsed request: the sign-in rules, then the handler. `answer`
// gets the response and whether the connection may stay open (any thread, once per call unless
// the handler misbehaves; the Session guards against a second answer).
// `token`: the secrets the sign-in URL's token must derive; `sessions`: who is signed in.
// Returns whether the request was signed in (a valid session): only such a connection leaves the
// not-signed-in connections' cap (ServerOptions::max_unauthenticated). Every answer to a request
// that is not signed in closes its connection.
bool Decide(const bhttp::request<bhttp::string_body>& req, const Secrets& token,
            SessionTable* sessions, int port, Handler* handler,
            const std::function<void(Response, bool)>& answer) {
  const double now = clock::WallNow();
  const bool keep_alive = req.keep_alive();
  Request request;
  request.method = std::string(req.method_string());
  std::string_view target(req.target().data(), req.target().size());
  const size_t q = target.find('?');
  std::optional<std::string> path = PercentDecode(target.substr(0, q), false);
  if (!path.has_value() || path->empty() || (*path)[0] != '/') {
    answer(Response::Error(400, "malformed request path"), false);
    return false;
  }
  request.path = *path;
  if (q != std::string_view::npos) {
    request.query = ParseQuery(target.substr(q + 1));
  }
  request.body = req.body();
  auto header = [&](bhttp::field field) {
    auto it = req.find(field);
    return it == req.end() ? std::string_view()
                           : std::string_view(it->value().data(), it->value().size());
  };
  auto custom = [&](const char* name) {
    auto it = req.find(name);
    return it == req.end() ? std::string_view()
                           : std::string_view(it->value().data(), it->value().size());
  };
  RequestFacts facts{request.method,
                     header(bhttp::field::host),
                     header(bhttp::field::origin),
                     header(bhttp::field::cookie),
                     custom("X-CSRF-Token"),
                     custom("Sec-Fetch-Site"),
                     header(bhttp::field::authorization)};
  const bool api = request.path.rfind("/api/", 0) == 0;

  // The sign-in: /?token=T sets the cookie and drops the token from the address bar.
  if (request.method == "GET" && request.path == "/" && request.query.count("token") > 0) {
    Verdict host = Check({facts.method, facts.host, "", "", "", ""}, token, port);
    if (host == Verdict::kBadHost) {
      answer(Response::Error(421, Explain(host)), false);
      return false;
    }
    if (!SecretEquals(DeriveSecrets(request.query["token"]).session, token.session)) {
      Response r;
      r.status = 401;
      r.content_type = "text/html; charset=utf-8";
      r.body = SignInPage("That token is not this taed's.");
      answer(std::move(r), false);
      return false;
    }
    // Not a redirect: a redirect keeps the first hop's Sec-Fetch-Site (cross-site when the
    // link was opened from a file or another page), which the next request would be refused
    // for. This page moves on by itself, as a same-origin navigation, keeping the #route.
    absl::StatusOr<Secrets> session = sessions->Mint(now);
    if (!session.ok()) {
      answer(Response::Error(500, std::string(session.status().message())), false);
      return false;
    }
    Response r;
    r.status = 200;
    r.content_type = "text/html; charset=utf-8";
    r.headers = {{"Set-Cookie", SessionSetCookie(*session)}};
    r.body =
        "<!doctype html><meta charset=utf-8><title>TAE</title><noscript><meta "
        "http-equiv=refresh content=\"0;url=/\"></noscript><script>location.replace('/' + "
        "location.hash)</script>Signed in: opening the dashboard...";
    answer(std::move(r), keep_alive);
    return false;  // signed in from its next request on, which carries the cookie
  }
  // A program's request: the token itself in an Authorization header, /api only.
  if (!facts.authorization.empty()) {
    const Verdict bearer = api ? CheckBearer(facts, token, port) : Verdict::kBadToken;
    if (bearer != Verdict::kAllowed) {
      answer(Response::Error(StatusOf(bearer), Explain(bearer)), false);
      return false;
    }
    return Dispatch(std::move(request), "", handler, answer, keep_alive);
  }
  // The presented session's secrets, or none: Check never matches an empty session.
  std::optional<Secrets> session;
  for (const std::string& cookie : CookieValues(facts.cookie, kSessionCookie)) {
    if (!session.has_value()) {
      session = sessions->Find(cookie, now);
    }
  }
  const Verdict verdict = Check(facts, session.value_or(Secrets{}), port);
  if (verdict != Verdict::kAllowed) {
    Response r;
    if (api || (verdict != Verdict::kNoSession && verdict != Verdict::kCrossSite)) {
      r = Response::Error(StatusOf(verdict), Explain(verdict));
    } else {
      r.status = StatusOf(verdict);
      r.content_type = "text/html; charset=utf-8";
      r.body = SignInPage(verdict == Verdict::kNoSession
                              ? "Not signed in."
                              : "This page was opened from another site or another local port, "
                                "which the dashboard refuses.");
    }
    answer(std::move(r), false);
    return false;
  }
  if (!session.has_value()) {  // Check allows nothing without one; never go on without it
    answer(Response::Error(401, Explain(Verdict::kNoSession)), false);
    return false;
  }
  return Dispatch(std::move(request), session->csrf, handler, answer, keep_alive);
}

std::shared_ptr<bhttp::response<bhttp::string_body>> BuildResponse(Response response,
                                                                   bool keep_alive) {
  auto res = std::make_shared<bhttp::response<bhttp::string_body>>();
  res->version(11);
  res->result(static_cast<unsigned>(response.status));
  res->set(bhttp::field::content_type, response.content_type);
  res->set(bhttp::field::server, "taed");
  res->set("X-Content-Type-Options", "nosniff");
  res->set("X-Frame-Options", "DENY");
  res->set("Referrer-Policy", "no-referrer");
  bool has_cache = false;
  for (const auto& [name, value] : response.headers) {
    // A header value never carries a line break (a handler may quote what a client sent).
    std::string safe = value;
    for (char& c : safe) {
      if (c == '\r' || c == '\n' || c == '\0') {
        c = ' ';
      }
    }
    res->insert(name, safe);
    has_cache = has_cache || name == "Cache-Control";
  }
  if (!has_cache) {
    res->set(bhttp::field::cache_control, "no-store");
  }
  res->body() = std::move(response.body);
  res->keep_alive(keep_alive);
  res->prepare_payload();
  return res;
}

}  // namespace

// One SSE stream on a connection whose response header is written: polls its source every
// poll_s, writes what it says, and a comment line after heartbeat_s of silence.
class Server::Stream : public std::enable_shared_from_this<Server::Stream> {
 public:
  Stream(beast::tcp_stream stream, std::shared_ptr<EventSource> source, const ServerOptions& opt,
         int* connections)
      : connections_(connections),
        stream_(std::move(stream)),
        timer_(stream_.get_executor()),
        source_(std::move(source)),
        poll_(std::chrono::milliseconds(static_cast<int64_t>(opt.poll_s * 1000))),
        heartbeat_(std::chrono::milliseconds(static_cast<int64_t>(opt.heartbeat_s * 1000))) {
    ++*connections_;
  }
  ~Stream() { --*connections_; }

  void Start(std::string header) {
    stream_.expires_never();
    Write(std::move(header));
  }

 private:
  void Write(std::string text) {
    auto self = shared_from_this();
    pending_ = std::move(text);
    last_write_ = std::chrono::steady_clock::now();
    asio::async_write(stream_.socket(), asio::buffer(pending_),
                      [self](beast::error_code ec, size_t) {
                        if (ec) {
                          self->Close();
                          return;
                        }
                        self->Wait();
                      });
  }

  void Wait() {
    auto self = shared_from_this();
    timer_.expires_after(poll_);
    timer_.async_wait([self](beast::error_code ec) {
      if (ec) {
        return;
      }
      self->Poll();
    });
  }

  void Poll() {
    auto self = shared_from_this();
    auto executor = stream_.get_executor();
    source_->Poll([self, executor](std::optional<std::string> text) {
      asio::post(executor, [self, text = std::move(text)]() mutable {
        if (!text.has_value()) {
          self->Close();
          return;
        }
        if (text->empty() &&
            std::chrono::steady_clock::now() - self->last_write_ >= self->heartbeat_) {
          *text = ":\n\n";
        }
        if (text->empty()) {
          self->Wait();
        } else {
          self->Write(std::move(*text));
        }
      });
    });
  }

  void Close() {
    beast::error_code ignored;  // closing a connection that may already be gone
    stream_.socket().shutdown(tcp::socket::shutdown_both, ignored);
    stream_.close();
  }

  int* connections_;  // the server's count of open connections (its thread only)
  beast::tcp_stream stream_;
  asio::steady_timer timer_;
  std::shared_ptr<EventSource> source_;
  std::chrono::milliseconds poll_;
  std::chrono::milliseconds heartbeat_;
  std::string pending_;
  std::chrono::steady_clock::time_point last_write_;
};

// One HTTP/1.1 connection: read a request, answer, repeat while keep-alive.
class Server::Session : public std::enable_shared_from_this<Server::Session> {
 public:
  // A new connection has not signed in: it waits in the server's list of such connections until
  // one of its requests carries a valid session.
  Session(tcp::socket socket, Server* server) : stream_(std::move(socket)), server_(server) {
    ++server_->connections_;
    listed_ = server_->unauthenticated_.insert(server_->unauthenticated_.end(), this);
  }
  ~Session() {
    if (counted_) {
      --server_->connections_;
    }
    Unlist();
  }

  // The server took it off its list to make room for a newer connection: closed now, and no
  // longer counted against max_connections (its last callbacks may run later).
  void Evict() {
    listed_.reset();
    counted_ = false;
    --server_->connections_;
    beast::error_code ignored;  // the peer may have gone already
    stream_.socket().shutdown(tcp::socket::shutdown_both, ignored);
    stream_.close();
  }

  void Read() {
    parser_.emplace();
    parser_->body_limit(kMaxBodyBytes);
    parser_->header_limit(kMaxHeaderBytes);
    stream_.expires_after(std::chrono::milliseconds(
        static_cast<int64_t>(server_->options_.request_timeout_s * 1000)));
    auto self = shared_from_this();
    bhttp::async_read(stream_, buffer_, *parser_, [self](beast::error_code ec, size_t) {
      if (ec == bhttp::error::end_of_stream || ec) {
        if (ec == bhttp::error::body_limit) {
          self->Send(Response::Error(413, "request body larger than 64 KiB"), false);
          return;
        }
        if (ec == bhttp::error::header_limit) {
          self->Send(Response::Error(431, "request header larger than 16 KiB"), false);
          return;
        }
        self->Close();
        return;
      }
      self->Guarded();
    });
  }

 private:
  // OnRequest, and whatever a handler throws, answered as a 500: nothing a client sends ends
  // the server's thread.
  void Guarded() {
    try {
      OnRequest();
    } catch (const std::exception& e) {
      spdlog::warn("dashboard request failed: {}", e.what());
      Send(Response::Error(500, "the request failed inside taed (see taed.log)"), false);
    } catch (...) {
      spdlog::warn("dashboard request failed with an unknown exception");
      Send(Response::Error(500, "the request failed inside taed (see taed.log)"), false);
    }
  }

  void OnRequest() {
    const auto& req = parser_->get();
    keep_alive_ = req.keep_alive();
    auto self = shared_from_this();
    auto executor = stream_.get_executor();
    // A handler that throws after answering must not answer twice.
    auto answered = std::make_shared<std::atomic<bool>>(false);
    const bool signed_in = Decide(
        req, server_->secrets_, &server_->sessions_, server_->port_, server_->options_.handler,
        [self, executor, answered](Response response, bool keep_alive) {
          if (answered->exchange(true)) {
            return;
          }
          asio::post(executor, [self, response = std::move(response), keep_alive]() mutable {
            self->Send(std::move(response), keep_alive && self->keep_alive_);
          });
        });
    if (signed_in) {
      Unlist();
    }
  }

  void Unlist() {
    if (listed_.has_value()) {
      server_->unauthenticated_.erase(*listed_);
      listed_.reset();
    }
  }

  void Send(Response response, bool keep_alive) {
    if (response.stream != nullptr) {
      std::string header = absl::StrCat(
          "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-store\r\n"
          "Connection: close\r\nX-Content-Type-Options: nosniff\r\n\r\n",
          "retry: 1000\n\n");
      auto stream = std::make_shared<Stream>(std::move(stream_), std::move(response.stream),
                                             server_->options_, &server_->connections_);
      stream->Start(std::move(header));
      return;
    }
    auto res = BuildResponse(std::move(response), keep_alive);
    stream_.expires_after(kWriteTimeout);
    auto self = shared_from_this();
    bhttp::async_write(stream_, *res, [self, res, keep_alive](beast::error_code ec, size_t) {
      if (ec || !keep_alive) {
        self->Close();
        return;
      }
      self->Read();
    });
  }

  void Close() {
    beast::error_code ignored;  // the peer may have gone already
    stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
  }

  beast::tcp_stream stream_;
  Server* server_;
  beast::flat_buffer buffer_;
  std::optional<bhttp::request_parser<bhttp::string_body>> parser_;
  bool keep_alive_ = false;
  // Its place in server_->unauthenticated_ until it signs in, is evicted or ends.
  std::optional<std::list<Session*>::iterator> listed_;
  bool counted_ = true;  // in server_->connections_
};

Server::Server(ServerOptions options)
    : options_(std::move(options)), secrets_(DeriveSecrets(options_.token)) {}

absl::StatusOr<std::unique_ptr<Server>> Server::Start(ServerOptions options) {
  if (!tls::IsLoopback(options.listen)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--http ", options.listen,
        ": the dashboard listens on loopback only (127.0.0.1:PORT); reach it from elsewhere "
        "through an ssh tunnel (ssh -L PORT:127.0.0.1:PORT host)"));
  }
  if (options.handler == nullptr || options.token.empty()) {
    return absl::InvalidArgumentError("http server: a handler and a token are required");
  }
  const size_t colon = options.listen.rfind(':');
  int port = 0;
  if (colon == std::string::npos || !absl::SimpleAtoi(options.listen.substr(colon + 1), &port) ||
      port < 0 || port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("--http ", options.listen, ": expected HOST:PORT, e.g. 127.0.0.1:8750"));
  }
  std::string host = options.listen.substr(0, colon);
  if (host.size() > 2 && host.front() == '[') {
    host = host.substr(1, host.size() - 2);
  }
  if (host == "localhost") {
    host = "127.0.0.1";
  }
  std::unique_ptr<Server> server(new Server(std::move(options)));
  server->acceptor_ = std::make_unique<Acceptor>(server->io_);
  beast::error_code ec;
  const tcp::endpoint endpoint(asio::ip::make_address(host, ec), static_cast<uint16_t>(port));
  if (ec) {
    return absl::InvalidArgumentError(
        absl::StrCat("--http ", server->options_.listen, ": ", ec.message()));
  }
  tcp::acceptor& acceptor = server->acceptor_->socket;
  acceptor.open(endpoint.protocol(), ec);
  if (!ec) acceptor.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) acceptor.bind(endpoint, ec);
  if (!ec) acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    return absl::UnavailableError(
        absl::StrCat("cannot listen on ", server->options_.listen, ": ", ec.message()));
  }
  server->port_ = acceptor.local_endpoint().port();
  server->accept_timer_ = std::make_unique<asio::steady_timer>(server->io_);
  server->Accept();
  server->thread_ = std::thread([s = server.get()] { s->io_.run(); });
  return server;
}

void Server::Accept() {
  acceptor_->socket.async_accept(asio::make_strand(io_), [this](beast::error_code ec,
                                                                tcp::socket socket) {
    if (ec == asio::error::operation_aborted) {
      return;
    }
    if (ec) {
      // Out of descriptors or buffers: retrying at once would spin. Wait, then try again.
      accept_backoff_ = accept_backoff_.count() == 0
                            ? kAcceptBackoffFirst
                            : std::min(kAcceptBackoffMax, accept_backoff_ * 2);
      ++accept_errors_;
      spdlog::warn("dashboard: accept failed ({}); next try in {} ms", ec.message(),
                   accept_backoff_.count());
      accept_timer_->expires_after(accept_backoff_);
      accept_timer_->async_wait([this](beast::error_code wait) {
        if (!wait) {
          Accept();
        }
      });
      return;
    }
    accept_backoff_ = std::chrono::milliseconds(0);
    if (!unauthenticated_.empty() &&
        static_cast<int>(unauthenticated_.size()) >= options_.max_unauthenticated) {
      // Connections that have not signed in have a cap of their own: the oldest makes room, so
      // they can never hold every slot and a signed-in browser's new connection gets in.
      Session* oldest = unauthenticated_.front();
      unauthenticated_.pop_front();
      oldest->Evict();
      ++evicted_connections_;
    }
    if (connections_ >= options_.max_connections) {
      // Over the cap: a short answer and close, so a client that opens connections without
      // end cannot take every descriptor.
      ++refused_connections_;
      auto refused = std::make_shared<tcp::socket>(std::move(socket));
      auto text = std::make_shared<std::string>(
          "HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain\r\nConnection: "
          "close\r\nContent-Length: 33\r\n\r\ntoo many connections; try again\r\n");
      asio::async_write(*refused, asio::buffer(*text), [refused, text](beast::error_code, size_t) {
        beast::error_code ignored;  // the client may have gone already
        refused->shutdown(tcp::socket::shutdown_both, ignored);
        refused->close(ignored);
      });
    } else {
      std::make_shared<Session>(std::move(socket), this)->Read();
    }
    Accept();
  });
}

void Server::Stop() {
  if (stopped_) {
    return;
  }
  stopped_ = true;
  asio::post(io_, [this] {
    beast::error_code ignored;  // closing the listener at shutdown
    acceptor_->socket.close(ignored);
    accept_timer_->cancel();
  });
  io_.stop();
  if (thread_.joinable()) {
    thread_.join();
  }
}

Server::~Server() { Stop(); }

int ServeBytesForTest(std::string_view bytes, const ServerOptions& options, int port,
                      SessionTable* sessions, const std::function<void(std::string)>& answered) {
  const Secrets secrets = DeriveSecrets(options.token);
  int parsed = 0;
  auto serialize = [answered](Response response, bool keep_alive) {
    if (response.stream != nullptr) {
      answered("HTTP/1.1 200 OK (event stream)\r\n\r\n");
      return;
    }
    std::ostringstream out;
    out << *BuildResponse(std::move(response), keep_alive);
    answered(out.str());
  };
  while (!bytes.empty() && parsed < 8) {
    bhttp::request_parser<bhttp::string_body> parser;
    parser.body_limit(kMaxBodyBytes);
    parser.header_limit(kMaxHeaderBytes);
    parser.eager(true);
    beast::error_code ec;
    const size_t used = parser.put(asio::buffer(bytes.data(), bytes.size()), ec);
    if (ec == bhttp::error::body_limit) {
      serialize(Response::Error(413, "request body larger than 64 KiB"), false);
      return parsed;
    }
    if (ec == bhttp::error::header_limit) {
      serialize(Response::Error(431, "request header larger than 16 KiB"), false);
      return parsed;
    }
    if (ec || !parser.is_done()) {
      return parsed;  // malformed or incomplete: a connection would close or keep waiting
    }
    bytes.remove_prefix(used);
    ++parsed;
    const bool keep_alive = parser.get().keep_alive();
    try {
      Decide(parser.get(), secrets, sessions, port, options.handler, serialize);
    } catch (const std::exception& e) {
      serialize(Response::Error(500, "the request failed inside taed (see taed.log)"), false);
    }
    if (!keep_alive) {
      break;
    }
  }
  return parsed;
}

}  // namespace tae::http
