#pragma once

// Checkpoints a database's WAL on a thread and connection of its own, so that the connection that
// writes (taed's core thread, Db) only appends to the WAL and never stops to copy pages into the
// database file.
//
// Contract:
// - Db::CheckpointInBackground installs a WAL hook on the writing connection in place of SQLite's
//   autocheckpoint. After each commit the hook wakes this thread once the WAL holds
//   kWakeFrames pages (SQLite's own autocheckpoint threshold), and checkpoints inline, as SQLite
//   would, only once it holds kInlineFrames (this thread is far behind or failing), so the WAL
//   stays bounded whatever happens here.
// - This thread runs PASSIVE checkpoints: it never waits for the writer or for readers, and the
//   writer never waits for it. A checkpoint that copied every frame lets the writer's next
//   transaction restart the WAL from its beginning.
// - A failed checkpoint (a full disk) is logged, at most once a minute, and tried again at the
//   next wake; nothing is lost, the frames stay in the WAL.
// - Destruction stops the thread and closes its connection; the writer's Db must be closed or
//   unhooked first (Db does both in its destructor).

#include <sqlite3.h>

#include <cstdint>
#include <memory>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

namespace tae::store {

class Checkpointer {
 public:
  static constexpr int kWakeFrames = 1000;
  static constexpr int kInlineFrames = 4000;  // 16 MB of 4 KB pages

  // Opens its own connection to the database file at path and starts the thread.
  static absl::StatusOr<std::unique_ptr<Checkpointer>> Start(const std::string& path);
  ~Checkpointer();
  Checkpointer(const Checkpointer&) = delete;
  Checkpointer& operator=(const Checkpointer&) = delete;

  // Any thread: asks for a checkpoint soon (a wake while one runs asks for another after it).
  void Wake();
  // The checkpoints that ran to the end, and those that failed (for tests and logs).
  int64_t done() const;
  int64_t failed() const;

 private:
  explicit Checkpointer(sqlite3* db);
  void Loop();

  sqlite3* const db_;  // used by the thread only (and closed after it stopped)
  mutable absl::Mutex mu_;
  bool due_ ABSL_GUARDED_BY(mu_) = false;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  int64_t done_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t failed_ ABSL_GUARDED_BY(mu_) = 0;
  std::thread thread_;  // last: started once the members above exist
};

}  // namespace tae::store
