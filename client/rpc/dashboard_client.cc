#include "client/rpc/dashboard_client.h"

#include <chrono>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "boost/asio/connect.hpp"
#include "boost/asio/ip/tcp.hpp"
#include "boost/beast/core.hpp"
#include "boost/beast/http.hpp"
#include "common/fs/fs.h"
#include "nlohmann/json.hpp"

namespace tae::client {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;

absl::Status StatusOfHttp(int status, const std::string& body) {
  nlohmann::json parsed = nlohmann::json::parse(body, nullptr, false);
  std::string message =
      parsed.is_object() && parsed.contains("error") && parsed["error"].is_string()
          ? parsed["error"].get<std::string>()
          : absl::StrCat("HTTP ", status);
  switch (status) {
    case 400:
      return absl::InvalidArgumentError(message);
    case 401:
    case 403:
      return absl::PermissionDeniedError(message);
    case 404:
      return absl::NotFoundError(message);
    case 503:
      return absl::UnavailableError(message);
    default:
      return absl::InternalError(absl::StrCat("taed's dashboard: ", message));
  }
}

}  // namespace

absl::StatusOr<DashboardClient> DashboardClient::FromHome(const std::string& home) {
  absl::StatusOr<std::string> address = fs::ReadFile(home + "/http.addr");
  absl::StatusOr<std::string> token = fs::ReadFile(home + "/http.token");
  if (!address.ok() || !token.ok()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "taed runs without its dashboard (no ", home, !address.ok() ? "/http.addr" : "/http.token",
        "): it was started with --http off, or is older than this "
        "taectl"));
  }
  DashboardClient client;
  client.address_ = std::string(absl::StripAsciiWhitespace(*address));
  client.token_ = std::string(absl::StripAsciiWhitespace(*token));
  return client;
}

absl::StatusOr<std::string> DashboardClient::Get(const std::string& target,
                                                 double timeout_s) const {
  const size_t colon = address_.rfind(':');
  if (colon == std::string::npos) {
    return absl::FailedPreconditionError(
        absl::StrCat("http.addr: '", address_, "' is not HOST:PORT"));
  }
  try {
    asio::io_context io;
    beast::tcp_stream stream(io);
    asio::ip::tcp::resolver resolver(io);
    stream.expires_after(std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000)));
    stream.connect(resolver.resolve(address_.substr(0, colon), address_.substr(colon + 1)));
    bhttp::request<bhttp::empty_body> request(bhttp::verb::get, target, 11);
    request.set(bhttp::field::host, address_);
    request.set(bhttp::field::authorization, absl::StrCat("Bearer ", token_));
    request.set(bhttp::field::connection, "close");
    bhttp::write(stream, request);
    beast::flat_buffer buffer;
    bhttp::response_parser<bhttp::string_body> parser;
    parser.body_limit(std::numeric_limits<std::uint64_t>::max());
    bhttp::read(stream, buffer, parser);
    bhttp::response<bhttp::string_body> response = parser.release();
    beast::error_code ignored;
    stream.socket().shutdown(asio::ip::tcp::socket::shutdown_both, ignored);  // closing anyway
    const int status = static_cast<int>(response.result_int());
    if (status < 200 || status >= 300) {
      return StatusOfHttp(status, response.body());
    }
    return std::move(response.body());
  } catch (const std::exception& e) {
    return absl::UnavailableError(
        absl::StrCat("taed's dashboard at ", address_, " did not answer ", target, ": ", e.what()));
  }
}

}  // namespace tae::client
