#pragma once

// Ingest benchmark: a real taed (`taectl up --agents 0` on a temporary TAE_HOME), one submitted
// experiment whose runs the scheduler places on N simulated agents (separate processes, each
// with its own AgentLink stream; see sim_agent.h), which stream every run's metric lines as fast
// as acks allow. Points/s stored is the points over the time from the start signal to the last
// agent's final ack; the metrics table is then checked to hold every point exactly once. The
// references of reference.h are measured in the same invocation with the same points.

#include <cstdint>
#include <string>
#include <vector>

namespace tae::bench {

struct IngestOptions {
  std::vector<int> agent_counts = {4, 16};
  int slots = 2;               // runs per agent
  int64_t points = 2'400'000;  // per configuration
  int values_per_event = 6;    // tae-train's training line
  int batch_events = 2000;     // tae-agent's kMaxEventsPerBatch
  int window_batches = 4;      // unacked batches per agent
  bool references = true;
  bool keep = false;  // keep the temporary TAE_HOMEs
  // A TAE_HOME whose tae.db each configuration's taed starts from (copied: it is not changed),
  // e.g. the 30,000-run data set of `tae-metrics-bench dataset`: ingest into a lab's store. The
  // references then write into that copy too (new run ids after taed's), so the ratio is taed
  // against raw SQLite on the same large store.
  std::string seed_home;
  // Each configuration this many times (a fresh TAE_HOME or copy each round, its references
  // right after it); the targets are judged on the median round's ratio. One round's ratio
  // moves by tens of percent on a 2-core machine with other work on it.
  int rounds = 1;
};

// Prints progress on stderr and the result table on stdout. Returns the exit code.
int RunIngestBench(const IngestOptions& options);

}  // namespace tae::bench
