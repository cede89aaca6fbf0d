#pragma once

// taectl's reads of taed's HTTP API on loopback (docs/dashboard.md), for what only that API
// serves: the curves' bands and the columnar history that `taectl export --bundle` writes. The
// address and token come from $TAE_HOME (http.addr, http.token), the token goes as a bearer
// credential. Blocking, one request per connection, a deadline on each.

#include <string>

#include "absl/status/statusor.h"

namespace tae::client {

class DashboardClient {
 public:
  // Reads $TAE_HOME/http.addr and http.token; FailedPrecondition naming the file when taed runs
  // without its dashboard.
  static absl::StatusOr<DashboardClient> FromHome(const std::string& home);

  // The body of GET `target` ("/api/experiments/3/report?x=y"): a 2xx answer's body, else the
  // error taed sent ({"error": "..."}) as a Status of the matching code.
  absl::StatusOr<std::string> Get(const std::string& target, double timeout_s = 300) const;

  const std::string& address() const { return address_; }

 private:
  std::string address_;  // "127.0.0.1:PORT"
  std::string token_;
};

}  // namespace tae::client
