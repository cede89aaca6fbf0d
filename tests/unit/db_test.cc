// server/store/db: SQLite's failures as statuses a caller can act on.

#include "server/store/db.h"

#include <catch2/catch.hpp>
#include <string>

#include "absl/strings/match.h"
#include "tests/unit/temp_dir.h"

namespace tae::store {

TEST_CASE("db: a failed bind is returned by the next step, and nothing runs without it") {
  absl::StatusOr<Db> db = Db::Open(":memory:");
  REQUIRE(db.ok());
  REQUIRE(db->Exec("CREATE TABLE t (a INTEGER NOT NULL DEFAULT 7, b TEXT)").ok());
  absl::StatusOr<Statement> insert = db->Prepare("INSERT INTO t (b) VALUES (?)");
  REQUIRE(insert.ok());
  insert->Bind(2, std::string_view("no such parameter"));  // out of range
  absl::Status status = insert->Run();
  CHECK(absl::IsInternal(status));
  CHECK(absl::StrContains(status.message(), "bind of parameter 2"));
  CHECK(*db->QueryInt("SELECT COUNT(*) FROM t") == 0);
  // Reset (which Run does) clears it: the statement is usable again.
  insert->Bind(1, std::string_view("ok"));
  CHECK(insert->Run().ok());
  CHECK(*db->QueryInt("SELECT COUNT(*) FROM t") == 1);
}

TEST_CASE("db: a locked database is Unavailable, a full one ResourceExhausted") {
  testing::TempDir dir("tae-db");
  const std::string path = dir.Full("taed.db");
  absl::StatusOr<Db> holder = Db::Open(path);
  REQUIRE(holder.ok());
  REQUIRE(holder->Exec("CREATE TABLE t (x BLOB)").ok());
  absl::StatusOr<Db> other = Db::Open(path, /*busy_timeout_ms=*/0);
  REQUIRE(other.ok());
  {
    Transaction tx(&*holder);
    REQUIRE(tx.begin_status().ok());
    Transaction blocked(&*other);
    CHECK(absl::IsUnavailable(blocked.begin_status()));
  }
  REQUIRE(holder->Exec("PRAGMA max_page_count = 3").ok());
  absl::Status full = holder->Exec("INSERT INTO t VALUES (zeroblob(100000))");
  CHECK(absl::IsResourceExhausted(full));
  CHECK(absl::StrContains(full.message(), "full"));
}

}  // namespace tae::store
