#include "agent/journal/journal.h"

#include <catch2/catch.hpp>

namespace tae::agent {
namespace {

tae::v1::Event Log(const std::string& text) {
  tae::v1::Event event;
  event.mutable_log()->set_text(text);
  return event;
}

}  // namespace

TEST_CASE("the journal numbers events and sends each once per connection", "[journal]") {
  Journal journal;
  CHECK(journal.Append(Log("a")) == 1);
  CHECK(journal.Append(Log("b")) == 2);
  auto first = journal.TakeUnsent(10);
  REQUIRE(first.size() == 2);
  CHECK(first[0].seq() == 1);
  CHECK(first[1].log().text() == "b");
  CHECK(journal.TakeUnsent(10).empty());
  CHECK_FALSE(journal.has_unsent());
}

TEST_CASE("acked events are dropped and a reconnect resends exactly the unacked ones",
          "[journal]") {
  Journal journal;
  for (const char* t : {"a", "b", "c"}) {
    journal.Append(Log(t));
  }
  journal.TakeUnsent(10);
  journal.Ack(1);
  CHECK(journal.unacked() == 2);
  journal.ResetSent();  // the connection broke before 2 and 3 were acked
  auto resent = journal.TakeUnsent(10);
  REQUIRE(resent.size() == 2);
  CHECK(resent[0].seq() == 2);
  CHECK(resent[1].seq() == 3);
  journal.Ack(3);
  CHECK(journal.unacked() == 0);
}

TEST_CASE("batches respect the size limit", "[journal]") {
  Journal journal;
  for (int i = 0; i < 5; ++i) {
    journal.Append(Log("x"));
  }
  CHECK(journal.TakeUnsent(2).size() == 2);
  CHECK(journal.TakeUnsent(2).size() == 2);
  auto last = journal.TakeUnsent(2);
  REQUIRE(last.size() == 1);
  CHECK(last[0].seq() == 5);
}

TEST_CASE("in memory Sync is a no-op and appended events are takeable at once", "[journal]") {
  Journal journal;
  CHECK_FALSE(journal.durable());
  std::vector<tae::v1::Event> events;
  events.push_back(Log("a"));
  events.push_back(Log("b"));
  CHECK(journal.Append(std::move(events), {SourceMark{7, 1, 0, 10}}) == 2);
  CHECK(journal.has_unsent());
  CHECK(journal.Sync().ok());
  CHECK(journal.TakeUnsent(10).size() == 2);
  REQUIRE(journal.Marks().size() == 1);
  CHECK(journal.Marks()[0].offset == 10);
  journal.ForgetRun(7, 1);
  CHECK(journal.Marks().empty());
}

}  // namespace tae::agent
