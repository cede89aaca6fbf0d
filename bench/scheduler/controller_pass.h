#pragma once

// Scheduling through taed's controller and store (bench/README.md, "Scheduling"): a store on
// disk filled through Controller::Submit with one large study and many 10-run ones, no agent up
// (every run queued), then timed: a 10-run submit at 0, half and all of the small studies
// queued; one scheduling pass with no agent, with every agent busy, and with a free agent; each
// beside the reference measured in the same run: one read of the whole queue from SQLite, which
// every pass made (twice) before the controller kept the queue between passes.

namespace tae::bench {

struct ControllerPassOptions {
  int big_runs = 10000;    // the large study's runs
  int experiments = 2000;  // 10-run studies
  int repeat = 9;          // timed repetitions (median)
};

// Prints the table; returns 0 when every placement was made once and the figures were taken.
int RunControllerPass(const ControllerPassOptions& options);

}  // namespace tae::bench
