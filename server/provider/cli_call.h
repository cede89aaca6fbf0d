#pragma once

// One call of a cloud CLI (gcloud, kubectl) from a provider's thread: argv run in a process
// group of its own, `input` on its stdin, both output pipes read to the end, the group killed
// when the call runs past its time or the provider stops. The providers log every call with
// CallSummary. Blocks the calling thread only.

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

namespace tae::provider {

struct CliResult {
  bool ok = false;  // exited 0 within its time
  std::string out;
  std::string err;  // stderr; on a timeout or stop, prefixed with why it was cut short
  double seconds = 0;
};

// What of each output stream a call keeps. A stdout longer than this fails the call (its output
// is dropped and stderr says so), as a cut listing would read as a shorter one; a longer stderr
// is cut.
inline constexpr size_t kMaxCliOutputBytes = size_t{16} << 20;

// `aborted`, polled about once a second, ends the call at once when it answers true (taed is
// stopping). The variables that carry credentials (TAE_AGENT_TOKEN, TAE_TLS_KEY) are not passed.
CliResult RunCli(const std::vector<std::string>& argv, const std::string& input, double timeout_s,
                 const std::function<bool()>& aborted);

// What the tool said went wrong: gcloud's "ERROR:" line, kubectl's "Error from server" or
// "error:" line (progress comes first), else the last non-empty line.
std::string ErrorLine(const std::string& text);

// "ok in 1.2 s" or "failed: " + ErrorLine: what the provider log shows of a call.
std::string CallOutcome(const CliResult& result);

}  // namespace tae::provider
