#include "server/store/checkpointer.h"

#include <chrono>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "spdlog/spdlog.h"

namespace tae::store {

absl::StatusOr<std::unique_ptr<Checkpointer>> Checkpointer::Start(const std::string& path) {
  sqlite3* db = nullptr;
  const int rc =
      sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, nullptr);
  if (rc != SQLITE_OK) {
    std::string why = db != nullptr ? sqlite3_errmsg(db) : "out of memory";
    sqlite3_close_v2(db);
    return absl::UnavailableError(
        absl::StrCat("cannot open ", path, " for its checkpoints: ", why));
  }
  return std::unique_ptr<Checkpointer>(new Checkpointer(db));
}

Checkpointer::Checkpointer(sqlite3* db) : db_(db), thread_([this] { Loop(); }) {}

Checkpointer::~Checkpointer() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  thread_.join();
  // The last connection to close checkpoints what is left and removes the WAL.
  sqlite3_close_v2(db_);
}

void Checkpointer::Wake() {
  absl::MutexLock lock(&mu_);
  due_ = true;
}

int64_t Checkpointer::done() const {
  absl::MutexLock lock(&mu_);
  return done_;
}

int64_t Checkpointer::failed() const {
  absl::MutexLock lock(&mu_);
  return failed_;
}

void Checkpointer::Loop() {
  auto last_warning = std::chrono::steady_clock::time_point::min();
  while (true) {
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(
          +[](Checkpointer* self)
               ABSL_EXCLUSIVE_LOCKS_REQUIRED(self->mu_) { return self->due_ || self->stop_; },
          this));
      if (stop_) {
        return;
      }
      due_ = false;
    }
    const int rc =
        sqlite3_wal_checkpoint_v2(db_, "main", SQLITE_CHECKPOINT_PASSIVE, nullptr, nullptr);
    const auto now = std::chrono::steady_clock::now();
    if (rc != SQLITE_OK && rc != SQLITE_BUSY && now - last_warning > std::chrono::minutes(1)) {
      last_warning = now;
      spdlog::warn(
          "checkpoint of the database's WAL failed ({}); it is tried again after the next "
          "writes, and the WAL keeps every page meanwhile",
          sqlite3_errmsg(db_));
    }
    absl::MutexLock lock(&mu_);
    (rc == SQLITE_OK ? done_ : failed_) += 1;
  }
}

}  // namespace tae::store
