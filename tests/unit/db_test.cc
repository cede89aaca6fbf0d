// server/store/db: SQLite's failures as statuses a caller can act on.

#include "server/store/db.h"

#include <catch2/catch.hpp>
#include <string>
#include <vector>

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

TEST_CASE("db: a statement given back is reused reset and unbound, and holds nothing open") {
  absl::StatusOr<Db> db = Db::Open(":memory:");
  REQUIRE(db.ok());
  REQUIRE(
      db->Exec("CREATE TABLE t (a INTEGER, b TEXT); INSERT INTO t VALUES (1, 'x'), (2, 'x')").ok());
  constexpr char kSelect[] = "SELECT a FROM t WHERE b = ? ORDER BY a";
  CHECK(db->pooled_statements() == 0);
  {
    absl::StatusOr<Statement> select = db->Prepare(kSelect);
    REQUIRE(select.ok());
    select->Bind(1, std::string_view("x"));
    REQUIRE(*select->Step());
    CHECK(select->Int(0) == 1);  // left in the middle of its rows
  }
  CHECK(db->pooled_statements() == 1);
  // Nothing is left running: the table can be dropped and made again (an active statement on it
  // would make that SQLITE_LOCKED).
  REQUIRE(db->Exec("DROP TABLE t; CREATE TABLE t (a INTEGER, b TEXT); "
                   "INSERT INTO t VALUES (3, 'y'), (4, NULL)")
              .ok());
  {
    absl::StatusOr<Statement> again = db->Prepare(kSelect);
    REQUIRE(again.ok());
    CHECK(db->pooled_statements() == 0);  // the same one, taken from the pool
    // Unbound (b = NULL matches no row), and from the first row once bound.
    CHECK_FALSE(*again->Step());
    again->Reset();
    again->Bind(1, std::string_view("y"));
    REQUIRE(*again->Step());
    CHECK(again->Int(0) == 3);
  }
  // Bounded: many different texts keep at most kMaxTexts x kPerText statements.
  for (size_t i = 0; i < StatementPool::kMaxTexts + 10; ++i) {
    for (int copy = 0; copy < 6; ++copy) {
      std::vector<Statement> open;
      for (int n = 0; n < 6; ++n) {
        open.push_back(*db->Prepare("SELECT " + std::to_string(i)));
      }
    }
  }
  CHECK(db->pooled_statements() <= StatementPool::kMaxTexts * StatementPool::kPerText);
  CHECK(db->pooled_statements() >= StatementPool::kMaxTexts);
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
