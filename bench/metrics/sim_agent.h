#pragma once

// A simulated tae-agent for the ingest benchmark. It is tae-agent's own Link (the AgentLink
// Connect stream, token, backoff) and Journal (per-agent seq, resend of the unacked after a
// reconnect, drop on Ack), driven like agent/core/agent.cc drives them: Register first (slots,
// labels), RunStarted for every StartRun taed sends, then metric lines shaped like tae-train's
// training line, batches of at most `batch_events` events, and RunExited(0) at the end of each
// run. Only the runner is replaced: instead of reading a job's pipe it generates lines as fast
// as taed's acks allow, keeping at most `window_batches` batches unacked.
//
// Protocol with the parent, on stdout: "ready" once it holds `slots` runs; it starts streaming
// on SIGUSR1; "progress ACKED TOTAL" (events) every second; "done POINTS BATCHES CPU_SECONDS"
// when every event is acked; then it exits.

#include <map>
#include <string>

namespace tae::bench {

struct SimAgentOptions {
  std::string taed;  // host:port of taed's agent listener
  std::string token;
  std::string id;
  int slots = 2;
  std::map<std::string, std::string> labels;
  int64_t steps_per_run = 1000;  // metric lines per run
  int values_per_event = 6;      // tae-train's training line has 6
  int batch_events = 2000;       // tae-agent's kMaxEventsPerBatch
  int window_batches = 4;
};

// Runs one simulated agent to the end. Returns the process exit code.
int RunSimAgent(const SimAgentOptions& options);

// The metric names of a generated line, tae-train's first (train/loss, train/lr, ...).
const char* SimMetricKey(int index);

}  // namespace tae::bench
