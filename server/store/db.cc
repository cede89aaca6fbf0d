#include "server/store/db.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace tae::store {
namespace {

// SQLite's result code as the status a caller can act on: a locked database is worth retrying
// (Unavailable), a full disk is ResourceExhausted, the rest are Internal.
absl::Status SqliteStatus(int code, const std::string& message) {
  switch (code & 0xff) {
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
      return absl::UnavailableError(message);
    case SQLITE_FULL:
      return absl::ResourceExhaustedError(message);
    default:
      return absl::InternalError(message);
  }
}

absl::Status SqliteError(sqlite3* db, std::string_view what) {
  return SqliteStatus(sqlite3_extended_errcode(db),
                      absl::StrCat("sqlite: ", std::string(what), ": ", sqlite3_errmsg(db)));
}

}  // namespace

Statement::Statement(Statement&& other) noexcept
    : db_(std::exchange(other.db_, nullptr)),
      stmt_(std::exchange(other.stmt_, nullptr)),
      pool_(std::exchange(other.pool_, nullptr)),
      bind_status_(std::exchange(other.bind_status_, absl::OkStatus())) {}

Statement& Statement::operator=(Statement&& other) noexcept {
  if (this != &other) {
    Release();
    db_ = std::exchange(other.db_, nullptr);
    stmt_ = std::exchange(other.stmt_, nullptr);
    pool_ = std::exchange(other.pool_, nullptr);
    bind_status_ = std::exchange(other.bind_status_, absl::OkStatus());
  }
  return *this;
}

void Statement::Release() {
  if (stmt_ == nullptr) {
    return;
  }
  if (pool_ != nullptr) {
    pool_->Give(std::exchange(stmt_, nullptr));
  } else {
    sqlite3_finalize(std::exchange(stmt_, nullptr));
  }
}

StatementPool::~StatementPool() {
  for (auto& [sql, stmts] : free_) {
    for (sqlite3_stmt* stmt : stmts) {
      sqlite3_finalize(stmt);
    }
  }
}

sqlite3_stmt* StatementPool::Take(std::string_view sql) {
  auto it = free_.find(std::string(sql));
  if (it == free_.end() || it->second.empty()) {
    return nullptr;
  }
  sqlite3_stmt* stmt = it->second.back();
  it->second.pop_back();
  --size_;
  return stmt;
}

void StatementPool::Give(sqlite3_stmt* stmt) {
  sqlite3_reset(stmt);
  sqlite3_clear_bindings(stmt);
  const char* sql = sqlite3_sql(stmt);
  auto it = sql == nullptr ? free_.end() : free_.find(sql);
  if (it == free_.end() && sql != nullptr && free_.size() < kMaxTexts) {
    it = free_.emplace(sql, std::vector<sqlite3_stmt*>()).first;
  }
  if (it == free_.end() || it->second.size() >= kPerText) {
    sqlite3_finalize(stmt);
    return;
  }
  it->second.push_back(stmt);
  ++size_;
}

void Statement::CheckBind(int rc, int index) {
  if (rc != SQLITE_OK && bind_status_.ok()) {
    bind_status_ = SqliteStatus(rc, absl::StrCat("sqlite: bind of parameter ", index, " of ",
                                                 sqlite3_sql(stmt_), ": ", sqlite3_errstr(rc)));
  }
}

Statement::~Statement() { Release(); }

int Statement::Columns() const { return sqlite3_column_count(stmt_); }

Statement& Statement::Bind(int index, int64_t value) {
  CheckBind(sqlite3_bind_int64(stmt_, index, value), index);
  return *this;
}

Statement& Statement::Bind(int index, double value) {
  CheckBind(sqlite3_bind_double(stmt_, index, value), index);
  return *this;
}

Statement& Statement::Bind(int index, std::string_view value) {
  CheckBind(sqlite3_bind_text(stmt_, index, value.data(), static_cast<int>(value.size()),
                              SQLITE_TRANSIENT),
            index);
  return *this;
}

Statement& Statement::BindBlob(int index, std::string_view bytes) {
  CheckBind(sqlite3_bind_blob64(stmt_, index, bytes.data(), bytes.size(), SQLITE_TRANSIENT), index);
  return *this;
}

Statement& Statement::BindNull(int index) {
  CheckBind(sqlite3_bind_null(stmt_, index), index);
  return *this;
}

absl::StatusOr<bool> Statement::Step() {
  if (!bind_status_.ok()) {
    return bind_status_;  // the first failed bind: stepping would run with a missing value
  }
  int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) {
    return true;
  }
  if (rc == SQLITE_DONE) {
    return false;
  }
  return SqliteError(db_, sqlite3_sql(stmt_));
}

absl::Status Statement::Run() {
  while (true) {
    absl::StatusOr<bool> row = Step();
    if (!row.ok()) {
      Reset();
      return row.status();
    }
    if (!*row) {
      Reset();
      return absl::OkStatus();
    }
  }
}

void Statement::Reset() {
  sqlite3_reset(stmt_);
  sqlite3_clear_bindings(stmt_);
  bind_status_ = absl::OkStatus();
}

int64_t Statement::Int(int column) const { return sqlite3_column_int64(stmt_, column); }

double Statement::Double(int column) const { return sqlite3_column_double(stmt_, column); }

std::string Statement::Text(int column) const {
  const unsigned char* text = sqlite3_column_text(stmt_, column);
  int size = sqlite3_column_bytes(stmt_, column);
  return text == nullptr ? std::string() : std::string(reinterpret_cast<const char*>(text), size);
}

std::string_view Statement::Blob(int column) const {
  const void* bytes = sqlite3_column_blob(stmt_, column);
  const int size = sqlite3_column_bytes(stmt_, column);
  return bytes == nullptr
             ? std::string_view()
             : std::string_view(static_cast<const char*>(bytes), static_cast<size_t>(size));
}

bool Statement::IsNull(int column) const {
  return sqlite3_column_type(stmt_, column) == SQLITE_NULL;
}

std::optional<double> Statement::OptionalDouble(int column) const {
  if (IsNull(column)) {
    return std::nullopt;
  }
  return Double(column);
}

absl::StatusOr<Db> Db::Open(const std::string& path, int busy_timeout_ms) {
  sqlite3* raw = nullptr;
  int rc =
      sqlite3_open_v2(path.c_str(), &raw,
                      SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, nullptr);
  Db db(raw);
  if (rc != SQLITE_OK) {
    return absl::UnavailableError(absl::StrCat("cannot open database ", path, ": ",
                                               raw ? sqlite3_errmsg(raw) : "out of memory"));
  }
  sqlite3_busy_timeout(raw, busy_timeout_ms);
  sqlite3_trace_v2(
      raw, SQLITE_TRACE_STMT,
      [](unsigned, void* counter, void*, void*) -> int {
        ++*static_cast<int64_t*>(counter);
        return 0;
      },
      db.statements_.get());
  return db;
}

std::vector<std::string> Db::BusyStatements() const {
  std::vector<std::string> busy;
  for (sqlite3_stmt* stmt = sqlite3_next_stmt(db_, nullptr); stmt != nullptr;
       stmt = sqlite3_next_stmt(db_, stmt)) {
    if (sqlite3_stmt_busy(stmt)) {
      busy.push_back(sqlite3_sql(stmt));
    }
  }
  return busy;
}

Db::Db(Db&& other) noexcept
    : db_(std::exchange(other.db_, nullptr)),
      statements_(std::move(other.statements_)),
      pool_(std::move(other.pool_)),
      cached_(std::move(other.cached_)),
      checkpointer_(std::move(other.checkpointer_)) {}

Db& Db::operator=(Db&& other) noexcept {
  if (this != &other) {
    cached_.clear();
    pool_.reset();
    sqlite3_close_v2(db_);
    checkpointer_.reset();  // after the connection whose hook wakes it
    db_ = std::exchange(other.db_, nullptr);
    statements_ = std::move(other.statements_);
    pool_ = std::move(other.pool_);
    cached_ = std::move(other.cached_);
    checkpointer_ = std::move(other.checkpointer_);
  }
  return *this;
}

Db::~Db() {
  cached_.clear();  // gives them back to the pool, which finalizes them
  pool_.reset();
  sqlite3_close_v2(db_);
  checkpointer_.reset();  // after the connection whose hook wakes it
}

namespace {

// The writing connection's WAL hook (sqlite3_wal_hook), called after each commit with the pages
// the WAL holds: wakes the checkpointer, or checkpoints here as SQLite's autocheckpoint would
// when the checkpointer has fallen far behind.
int WalHook(void* checkpointer, sqlite3* db, const char* name, int frames) {
  if (frames >= Checkpointer::kInlineFrames) {
    sqlite3_wal_checkpoint_v2(db, name, SQLITE_CHECKPOINT_PASSIVE, nullptr, nullptr);
  } else if (frames >= Checkpointer::kWakeFrames) {
    static_cast<Checkpointer*>(checkpointer)->Wake();
  }
  return SQLITE_OK;
}

}  // namespace

absl::Status Db::CheckpointInBackground() {
  const char* file = sqlite3_db_filename(db_, "main");
  if (file == nullptr || *file == '\0' || checkpointer_ != nullptr) {
    return absl::OkStatus();  // in memory (nothing to checkpoint), or already
  }
  absl::StatusOr<std::unique_ptr<Checkpointer>> started = Checkpointer::Start(file);
  if (!started.ok()) {
    return started.status();
  }
  checkpointer_ = std::move(*started);
  sqlite3_wal_hook(db_, &WalHook, checkpointer_.get());  // replaces the autocheckpoint
  return absl::OkStatus();
}

CachedStatement::~CachedStatement() {
  if (stmt_ != nullptr) {
    stmt_->Reset();
  }
}

absl::StatusOr<CachedStatement> Db::Cached(const char* sql) {
  auto it = cached_.find(sql);
  if (it == cached_.end()) {
    absl::StatusOr<Statement> stmt = Prepare(sql);
    if (!stmt.ok()) {
      return stmt.status();
    }
    it = cached_.emplace(sql, std::move(*stmt)).first;
  }
  it->second.Reset();
  return CachedStatement(&it->second);
}

absl::Status Db::Exec(std::string_view sql) {
  std::string owned(sql);
  char* error = nullptr;
  if (int rc = sqlite3_exec(db_, owned.c_str(), nullptr, nullptr, &error); rc != SQLITE_OK) {
    absl::Status status = SqliteStatus(rc, absl::StrCat("sqlite: ", error ? error : "error"));
    sqlite3_free(error);
    return status;
  }
  return absl::OkStatus();
}

absl::StatusOr<Statement> Db::Prepare(std::string_view sql) {
  if (sqlite3_stmt* pooled = pool_->Take(sql); pooled != nullptr) {
    return Statement(db_, pooled, pool_.get());
  }
  sqlite3_stmt* stmt = nullptr;
  if (sqlite3_prepare_v2(db_, sql.data(), static_cast<int>(sql.size()), &stmt, nullptr) !=
      SQLITE_OK) {
    return SqliteError(db_, sql);
  }
  return Statement(db_, stmt, pool_.get());
}

int64_t Db::LastInsertId() const { return sqlite3_last_insert_rowid(db_); }

int Db::Changes() const { return sqlite3_changes(db_); }

absl::StatusOr<std::vector<int64_t>> Db::QueryInts(std::string_view sql) {
  absl::StatusOr<Statement> stmt = Prepare(sql);
  if (!stmt.ok()) {
    return stmt.status();
  }
  std::vector<int64_t> out;
  while (true) {
    absl::StatusOr<bool> row = stmt->Step();
    if (!row.ok()) {
      return row.status();
    }
    if (!*row) {
      return out;
    }
    out.push_back(stmt->Int(0));
  }
}

absl::StatusOr<int64_t> Db::QueryInt(std::string_view sql) {
  absl::StatusOr<Statement> stmt = Prepare(sql);
  if (!stmt.ok()) {
    return stmt.status();
  }
  absl::StatusOr<bool> row = stmt->Step();
  if (!row.ok()) {
    return row.status();
  }
  if (!*row) {
    return absl::NotFoundError(absl::StrCat("no row for: ", std::string(sql)));
  }
  return stmt->Int(0);
}

Transaction::Transaction(Db* db) : db_(db), begin_status_(db->Exec("BEGIN IMMEDIATE")) {
  done_ = !begin_status_.ok();
}

Transaction::~Transaction() {
  if (!done_) {
    db_->Exec("ROLLBACK").IgnoreError();
  }
}

absl::Status Transaction::Commit() {
  absl::Status status = db_->Exec("COMMIT");
  if (status.ok()) {
    done_ = true;
  }
  return status;
}

int64_t Db::total_changes() const { return sqlite3_total_changes64(db_); }

}  // namespace tae::store
