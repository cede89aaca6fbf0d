#include "tests/integration/http_client.h"

#include <poll.h>

#include <algorithm>
#include <chrono>
#include <functional>

#include "absl/strings/ascii.h"
#include "boost/asio/connect.hpp"
#include "boost/asio/ip/tcp.hpp"
#include "boost/beast/core.hpp"
#include "boost/beast/http.hpp"

namespace tae::testing {

namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using tcp = boost::asio::ip::tcp;

HttpReply Http(int port, const HttpCall& call) {
  HttpReply reply;
  try {
    boost::asio::io_context io;
    beast::tcp_stream stream(io);
    stream.expires_after(std::chrono::seconds(30));
    stream.connect(
        tcp::endpoint(boost::asio::ip::make_address("127.0.0.1"), static_cast<uint16_t>(port)));
    bhttp::request<bhttp::string_body> req(bhttp::string_to_verb(call.method), call.target, 11);
    req.set(bhttp::field::host,
            call.host.empty() ? "127.0.0.1:" + std::to_string(port) : call.host);
    for (const auto& [name, value] : call.headers) {
      req.set(name, value);
    }
    req.body() = call.body;
    req.prepare_payload();
    bhttp::write(stream, req);
    beast::flat_buffer buffer;
    bhttp::response_parser<bhttp::string_body> parser;
    parser.body_limit(256 << 20);
    bhttp::read(stream, buffer, parser);
    const auto& res = parser.get();
    reply.status = static_cast<int>(res.result_int());
    for (const auto& field : res) {
      reply.headers[absl::AsciiStrToLower(std::string(field.name_string()))] =
          std::string(field.value());
    }
    reply.body = res.body();
  } catch (const std::exception&) {
    reply.status = 0;
  }
  return reply;
}

std::string ReadEvents(int port, const std::string& target, const std::string& cookie,
                       const std::function<bool(const std::string&)>& until, double timeout_s) {
  std::string got;
  try {
    boost::asio::io_context io;
    tcp::socket socket(io);
    socket.connect(
        tcp::endpoint(boost::asio::ip::make_address("127.0.0.1"), static_cast<uint16_t>(port)));
    const std::string request = "GET " + target +
                                " HTTP/1.1\r\nHost: 127.0.0.1:" + std::to_string(port) +
                                "\r\nCookie: " + cookie + "\r\nAccept: text/event-stream\r\n\r\n";
    boost::asio::write(socket, boost::asio::buffer(request));
    const auto deadline = std::chrono::steady_clock::now() +
                          std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000));
    char buf[4096];
    socket.non_blocking(true);
    while (std::chrono::steady_clock::now() < deadline && !until(got)) {
      beast::error_code ec;
      size_t n = socket.read_some(boost::asio::buffer(buf), ec);
      if (ec == boost::asio::error::would_block) {
        // Wait for the socket to be readable, at most until the deadline.
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
            deadline - std::chrono::steady_clock::now());
        pollfd fd{socket.native_handle(), POLLIN, 0};
        poll(&fd, 1, static_cast<int>(std::max<int64_t>(0, left.count())));
        continue;
      }
      if (ec) {
        break;
      }
      got.append(buf, n);
    }
  } catch (const std::exception&) {
  }
  return got;
}

}  // namespace tae::testing
