#pragma once

// A blocking HTTP/1.1 client for the dashboard's tests (Boost.Beast): one request per
// connection, to 127.0.0.1:port.

#include <functional>
#include <map>
#include <string>

namespace tae::testing {

struct HttpReply {
  int status = 0;                              // 0: no answer (connection refused, ...)
  std::map<std::string, std::string> headers;  // lower-case names
  std::string body;
};

struct HttpCall {
  HttpCall(std::string method_, std::string target_, std::string host_ = "",
           std::map<std::string, std::string> headers_ = {}, std::string body_ = "")
      : method(std::move(method_)),
        target(std::move(target_)),
        host(std::move(host_)),
        headers(std::move(headers_)),
        body(std::move(body_)) {}
  std::string method;
  std::string target;
  std::string host;  // "": 127.0.0.1:port
  std::map<std::string, std::string> headers;
  std::string body;
};

HttpReply Http(int port, const HttpCall& call);

// An SSE stream: reads until `until` returns true for what arrived so far, or timeout_s passes.
// Returns what arrived.
std::string ReadEvents(int port, const std::string& target, const std::string& cookie,
                       const std::function<bool(const std::string&)>& until, double timeout_s);

}  // namespace tae::testing
