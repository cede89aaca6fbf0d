#pragma once

// A thin RAII layer over sqlite3: Db owns the connection, Statement a prepared statement.
// Errors come back as absl::Status with SQLite's message: SQLITE_BUSY/LOCKED as Unavailable (worth
// a retry), SQLITE_FULL as ResourceExhausted, anything else as Internal. Not thread-safe: the owner
// of a Db is one thread (see docs/threading.md).

#include <sqlite3.h>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "server/store/checkpointer.h"

namespace tae::store {

class StatementPool;

class Statement {
 public:
  Statement() = default;
  // Owns `stmt`; on destruction gives it back to `pool` (if any) rather than finalizing it.
  Statement(sqlite3* db, sqlite3_stmt* stmt, StatementPool* pool = nullptr)
      : db_(db), stmt_(stmt), pool_(pool) {}
  Statement(Statement&& other) noexcept;
  Statement& operator=(Statement&& other) noexcept;
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;
  ~Statement();

  // Binds are 1-based, as in SQLite. The first bind that fails is what the next Step or Run
  // returns (nothing runs with a missing value); Reset clears it.
  Statement& Bind(int index, int64_t value);
  Statement& Bind(int index, double value);
  Statement& Bind(int index, std::string_view value);
  Statement& BindNull(int index);
  Statement& BindBlob(int index, std::string_view bytes);

  // Steps once: true when a row is available, false when done; errors as status.
  absl::StatusOr<bool> Step();
  // Steps to completion, for statements without result rows.
  absl::Status Run();
  // Resets and clears bindings so the statement can be reused.
  void Reset();

  int64_t Int(int column) const;
  double Double(int column) const;
  std::string Text(int column) const;
  // A BLOB (or text) column's bytes, valid until the next Step or Reset.
  std::string_view Blob(int column) const;
  bool IsNull(int column) const;
  std::optional<double> OptionalDouble(int column) const;
  // How many columns a row of this statement has.
  int Columns() const;

 private:
  void CheckBind(int rc, int index);
  // Gives the statement back to its pool, or finalizes it.
  void Release();

  sqlite3* db_ = nullptr;
  sqlite3_stmt* stmt_ = nullptr;
  StatementPool* pool_ = nullptr;
  absl::Status bind_status_;
};

// A statement of Db::Cached, lent for one scope: reset when the scope ends, so that a query read
// only in part (one row of a lookup, a loop left early, an error return) does not stay busy. A
// busy statement holds a read transaction open on the connection, and while one is open no
// checkpoint can restart the WAL: it would grow with every write for as long as taed runs.
class CachedStatement {
 public:
  explicit CachedStatement(Statement* stmt) : stmt_(stmt) {}
  CachedStatement(CachedStatement&& other) noexcept : stmt_(std::exchange(other.stmt_, nullptr)) {}
  CachedStatement& operator=(CachedStatement&&) = delete;
  CachedStatement(const CachedStatement&) = delete;
  CachedStatement& operator=(const CachedStatement&) = delete;
  ~CachedStatement();

  Statement* operator->() const { return stmt_; }
  Statement& operator*() const { return *stmt_; }

 private:
  Statement* stmt_;
};

// The prepared statements a connection's Statements gave back, by SQL text, reset and unbound,
// for the next Prepare of the same text: parsing and planning are most of what a small statement
// costs, and the store prepares its statements where it runs them. Bounded: at most kPerText
// statements of one text and kMaxTexts texts; beyond that a statement is finalized.
class StatementPool {
 public:
  static constexpr size_t kMaxTexts = 512;
  static constexpr size_t kPerText = 4;
  StatementPool() = default;
  StatementPool(const StatementPool&) = delete;
  StatementPool& operator=(const StatementPool&) = delete;
  ~StatementPool();  // finalizes every statement it holds

  // A statement of exactly `sql`, or nullptr.
  sqlite3_stmt* Take(std::string_view sql);
  // Resets `stmt` and keeps it (or finalizes it when full).
  void Give(sqlite3_stmt* stmt);
  // How many statements it holds.
  size_t size() const { return size_; }

 private:
  std::unordered_map<std::string, std::vector<sqlite3_stmt*>> free_;
  size_t size_ = 0;
};

class Db {
 public:
  // Opens (creating if needed) the database file at path. A statement that finds the database
  // locked by another connection waits up to busy_timeout_ms, then fails Unavailable.
  static absl::StatusOr<Db> Open(const std::string& path, int busy_timeout_ms = 5000);

  Db(Db&& other) noexcept;
  Db& operator=(Db&& other) noexcept;
  Db(const Db&) = delete;
  Db& operator=(const Db&) = delete;
  ~Db();

  absl::Status Exec(std::string_view sql);
  // A statement of `sql`: one this connection prepared before and was given back when its
  // Statement went (StatementPool), or newly prepared.
  absl::StatusOr<Statement> Prepare(std::string_view sql);
  // The statement for `sql`, a string constant (its address is the key), prepared on first use
  // and kept for the connection's life; reset and unbound when lent and when its CachedStatement
  // goes. For statements that run often (ingest per event, the read side per request).
  absl::StatusOr<CachedStatement> Cached(const char* sql);
  int64_t LastInsertId() const;
  int Changes() const;
  absl::StatusOr<int64_t> QueryInt(std::string_view sql);
  // The first column of every row of `sql` (a query without parameters), in row order.
  absl::StatusOr<std::vector<int64_t>> QueryInts(std::string_view sql);
  // How many statements have started running on this connection (SQLite's statement trace):
  // lets tests assert that a listing costs a constant number of statements.
  int64_t statements_started() const { return *statements_; }
  // How many prepared statements wait in the pool for reuse (for tests).
  size_t pooled_statements() const { return pool_->size(); }
  // Rows changed through this connection since it opened (sqlite3_total_changes64): a version
  // of everything stored, which readers compare to learn that something changed.
  int64_t total_changes() const;
  // The SQL of every statement of this connection that has been stepped but neither finished nor
  // reset (sqlite3_stmt_busy). Such a statement holds a read transaction open, and while one is
  // open no checkpoint can restart the WAL, which then grows without bound; for tests.
  std::vector<std::string> BusyStatements() const;
  // From now on the WAL is checkpointed on a thread and connection of their own (Checkpointer),
  // not by this connection after its commits. Nothing for a database in memory.
  absl::Status CheckpointInBackground();
  // The background checkpointer, if one was started (for tests).
  const Checkpointer* checkpointer() const { return checkpointer_.get(); }

 private:
  explicit Db(sqlite3* db)
      : db_(db),
        statements_(std::make_unique<int64_t>(0)),
        pool_(std::make_unique<StatementPool>()) {}
  sqlite3* db_ = nullptr;
  std::unique_ptr<int64_t> statements_;         // on the heap: the trace callback keeps its address
  std::unique_ptr<StatementPool> pool_;         // on the heap: Statements keep its address
  std::map<const char*, Statement> cached_;     // finalized before db_ closes
  std::unique_ptr<Checkpointer> checkpointer_;  // stopped after db_ closes
};

// BEGIN IMMEDIATE on construction; ROLLBACK on destruction unless Commit() succeeded.
class Transaction {
 public:
  explicit Transaction(Db* db);
  ~Transaction();
  Transaction(const Transaction&) = delete;
  Transaction& operator=(const Transaction&) = delete;

  const absl::Status& begin_status() const { return begin_status_; }
  absl::Status Commit();

 private:
  Db* db_;
  absl::Status begin_status_;
  bool done_ = false;
};

}  // namespace tae::store
