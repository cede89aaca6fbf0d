#pragma once

// Query benchmark: a real taed on a data dir holding ~1,000 runs of 10,000 metric points each
// (one large experiment and many small ones), and `taectl report EXP` and `taectl ls` timed
// end to end, process start to exit, median of several. The experiments and runs are made by
// `taectl submit` (so their rows are taed's own); the points, run summaries, transitions and
// final states are then written straight into the stopped taed's SQLite file, as ingest would
// have left them (server/store/store_ingest.cc), which takes seconds instead of minutes.

#include <string>

namespace tae::bench {

struct QueryOptions {
  int big_runs = 500;          // one experiment: 20 variants x big_runs / 20 seeds
  int small_experiments = 50;  // 10 runs each: baseline + 4 ablations, 2 seeds
  int steps = 1500;            // per run: 6 x steps training points + 4 x steps / 6 eval points
  int repeats = 9;
  std::string data_dir;  // "": a temporary dir
  bool keep = false;
};

// Prints progress on stderr and the result table on stdout. Returns the exit code (0 when it
// ran, whether or not the targets were met).
int RunQueryBench(const QueryOptions& options);

}  // namespace tae::bench
