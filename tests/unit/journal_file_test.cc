// The durable journal on real temp directories: reopen, crash, torn tails, marks, segments, a
// full disk.

#include <fcntl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "agent/journal/journal.h"
#include "tests/skip.h"
#include "tests/unit/temp_dir.h"

namespace tae::agent {
namespace {

namespace fs = std::filesystem;

using tae::testing::TempDir;

tae::v1::Event Log(const std::string& text, int64_t run_id = 1) {
  tae::v1::Event event;
  event.set_run_id(run_id);
  event.set_attempt(1);
  event.mutable_log()->set_stream("stdout");
  event.mutable_log()->set_text(text);
  return event;
}

std::unique_ptr<Journal> OpenOk(const std::string& dir, JournalOptions options = {}) {
  absl::StatusOr<std::unique_ptr<Journal>> journal = Journal::Open(dir, options);
  INFO(journal.status().ToString());
  REQUIRE(journal.ok());
  return std::move(*journal);
}

std::vector<std::string> Segments(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& entry : fs::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("seg-", 0) == 0) {
      out.push_back(entry.path().string());
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<std::string> Texts(const std::vector<tae::v1::Event>& events) {
  std::vector<std::string> out;
  for (const tae::v1::Event& event : events) {
    out.push_back(event.log().text());
  }
  return out;
}

std::vector<uint64_t> Seqs(const std::vector<tae::v1::Event>& events) {
  std::vector<uint64_t> out;
  for (const tae::v1::Event& event : events) {
    out.push_back(event.seq());
  }
  return out;
}

void AppendBytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::app);
  out << bytes;
  REQUIRE(out.good());
}

bool SameMark(const SourceMark& a, const SourceMark& b) {
  return a.run_id == b.run_id && a.attempt == b.attempt && a.stream == b.stream &&
         a.offset == b.offset;
}

}  // namespace

TEST_CASE("a durable journal keeps unacked events across a reopen and continues the seqs",
          "[journal]") {
  TempDir tmp;
  const std::string dir = tmp.path() + "/journal";
  {
    auto journal = OpenOk(dir);
    CHECK(journal->durable());
    CHECK(journal->Append(Log("a")) == 1);
    CHECK(journal->Append(Log("b")) == 2);
    REQUIRE(journal->Sync().ok());
    CHECK(Seqs(journal->TakeUnsent(10)) == std::vector<uint64_t>{1, 2});
  }
  struct stat st {};
  REQUIRE(::stat(dir.c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0700);

  auto journal = OpenOk(dir);
  CHECK(journal->unacked() == 2);
  CHECK(journal->has_unsent());
  auto resent = journal->TakeUnsent(10);
  CHECK(Seqs(resent) == std::vector<uint64_t>{1, 2});
  CHECK(Texts(resent) == std::vector<std::string>{"a", "b"});
  CHECK(resent[0].run_id() == 1);
  CHECK(journal->Append(Log("c")) == 3);
}

TEST_CASE("acked events are not resent after a reopen", "[journal]") {
  TempDir tmp;
  {
    auto journal = OpenOk(tmp.path());
    for (const char* text : {"a", "b", "c", "d"}) {
      journal->Append(Log(text));
    }
    REQUIRE(journal->Sync().ok());
    journal->TakeUnsent(10);
    journal->Ack(2);
    CHECK(journal->acked() == 2);
  }
  auto journal = OpenOk(tmp.path());
  CHECK(journal->acked() == 2);
  CHECK(journal->unacked() == 2);
  CHECK(Texts(journal->TakeUnsent(10)) == std::vector<std::string>{"c", "d"});
  CHECK(journal->Append(Log("e")) == 5);
}

TEST_CASE("a failed write of the acked mark is unhealthy until a write of it succeeds again",
          "[journal]") {
  TempDir tmp;
  auto journal = OpenOk(tmp.path());
  for (const char* text : {"a", "b", "c"}) {
    journal->Append(Log(text));
  }
  REQUIRE(journal->Sync().ok());
  journal->TakeUnsent(10);
  journal->Ack(1);
  REQUIRE(journal->Healthy().ok());
  // A directory where the mark goes: replacing it fails, as on a full disk.
  fs::remove(tmp.path() + "/acked");
  fs::create_directory(tmp.path() + "/acked");
  fs::create_directory(tmp.path() + "/acked/in-the-way");
  journal->Ack(2);
  CHECK_FALSE(journal->Healthy().ok());  // written again, and failing again
  CHECK_FALSE(journal->Healthy().ok());
  fs::remove_all(tmp.path() + "/acked");
  // The fault passed: Healthy writes the mark again, and the journal is whole.
  CHECK(journal->Healthy().ok());
  journal.reset();
  auto reopened = OpenOk(tmp.path());
  CHECK(reopened->acked() == 2);
  CHECK(Texts(reopened->TakeUnsent(10)) == std::vector<std::string>{"c"});
}

TEST_CASE("appended events are takeable only once synced and lost in a crash before that",
          "[journal]") {
  TempDir tmp;
  {
    auto journal = OpenOk(tmp.path());
    journal->Append(Log("synced"));
    REQUIRE(journal->Sync().ok());
    CHECK(journal->Append(Log("pending")) == 2);
    CHECK(journal->unacked() == 2);
    auto sent = journal->TakeUnsent(10);
    CHECK(Texts(sent) == std::vector<std::string>{"synced"});
    CHECK_FALSE(journal->has_unsent());  // "pending" is not durable yet
    CHECK(journal->stats().pending_bytes > 0);
    // Destroyed without Sync: a crash.
  }
  auto journal = OpenOk(tmp.path());
  CHECK(Texts(journal->TakeUnsent(10)) == std::vector<std::string>{"synced"});
  // The lost event was never sent, so its seq may be given out again.
  CHECK(journal->Append(Log("again")) == 2);
  REQUIRE(journal->Sync().ok());
  CHECK(Texts(journal->TakeUnsent(10)) == std::vector<std::string>{"again"});
}

TEST_CASE("a torn tail is dropped with its marks and the journal works on", "[journal]") {
  TempDir tmp;
  std::string file;
  uintmax_t first_end = 0;
  {
    auto journal = OpenOk(tmp.path());
    journal->Append({Log("one"), Log("two")}, {SourceMark{1, 1, 0, 8}});
    REQUIRE(journal->Sync().ok());
    REQUIRE(Segments(tmp.path()).size() == 1);
    file = Segments(tmp.path())[0];
    first_end = fs::file_size(file);
    journal->Append({Log("three")}, {SourceMark{1, 1, 0, 14}, SourceMark{1, 1, 2, 40}});
    REQUIRE(journal->Sync().ok());
  }
  const uintmax_t size = fs::file_size(file);

  SECTION("cut off mid-record") { fs::resize_file(file, size - 5); }
  SECTION("cut off inside the header") { fs::resize_file(file, first_end + 3); }
  SECTION("zeros after a power cut") {
    // The file's size made it to disk, the last record's data did not.
    fs::resize_file(file, first_end);
    AppendBytes(file, std::string(size - first_end + 4096, '\0'));
  }

  {
    auto journal = OpenOk(tmp.path());
    CHECK(journal->stats().torn_bytes > 0);
    // Neither the last group's event nor its marks are back.
    CHECK(Texts(journal->TakeUnsent(10)) == std::vector<std::string>{"one", "two"});
    const std::vector<SourceMark> marks = journal->Marks();
    REQUIRE(marks.size() == 1);
    CHECK(SameMark(marks[0], SourceMark{1, 1, 0, 8}));
    CHECK(journal->Append(Log("three again")) == 3);
    REQUIRE(journal->Sync().ok());
  }
  auto journal = OpenOk(tmp.path());
  CHECK(journal->stats().torn_bytes == 0);
  CHECK(Texts(journal->TakeUnsent(10)) == std::vector<std::string>{"one", "two", "three again"});
}

TEST_CASE("garbage after the last record is dropped", "[journal]") {
  TempDir tmp;
  {
    auto journal = OpenOk(tmp.path());
    journal->Append(Log("kept"));
    REQUIRE(journal->Sync().ok());
  }
  const std::vector<std::string> files = Segments(tmp.path());
  REQUIRE(files.size() == 1);
  const auto size = fs::file_size(files[0]);
  std::string garbage("\x07\x00\x00\x00", 4);
  garbage += "garbage that is no record at all";
  AppendBytes(files[0], garbage);
  {
    auto journal = OpenOk(tmp.path());
    CHECK(fs::file_size(files[0]) == size);
    CHECK(Texts(journal->TakeUnsent(10)) == std::vector<std::string>{"kept"});
    journal->Append(Log("next"));
    REQUIRE(journal->Sync().ok());
  }
  auto journal = OpenOk(tmp.path());
  CHECK(Seqs(journal->TakeUnsent(10)) == std::vector<uint64_t>{1, 2});
}

TEST_CASE("a damaged record followed by intact ones is DataLoss naming file and offset",
          "[journal]") {
  TempDir tmp;
  {
    auto journal = OpenOk(tmp.path());
    for (int i = 0; i < 3; ++i) {
      journal->Append(Log("line " + std::to_string(i)));
      REQUIRE(journal->Sync().ok());
    }
  }
  const std::vector<std::string> files = Segments(tmp.path());
  REQUIRE(files.size() == 1);
  const auto size = fs::file_size(files[0]);
  {
    std::fstream file(files[0], std::ios::binary | std::ios::in | std::ios::out);
    file.seekp(12);  // inside the first record's payload
    file.put('\xff');
  }
  absl::StatusOr<std::unique_ptr<Journal>> journal = Journal::Open(tmp.path());
  REQUIRE_FALSE(journal.ok());
  CHECK(absl::IsDataLoss(journal.status()));
  CHECK_THAT(std::string(journal.status().message()),
             Catch::Contains(files[0]) && Catch::Contains("offset 0"));
  CHECK(fs::file_size(files[0]) == size);  // nothing was cut off
}

TEST_CASE("marks round-trip with their events and ForgetRun drops them", "[journal]") {
  TempDir tmp;
  {
    auto journal = OpenOk(tmp.path());
    journal->Append({Log("a", 5)}, {SourceMark{5, 1, 0, 2}});
    journal->Append({Log("b", 5), Log("c", 6)}, {SourceMark{5, 1, 0, 4}, SourceMark{6, 2, 1, 2}});
    journal->Append({}, {SourceMark{5, 1, 2, 100}});  // bytes that made no event
    REQUIRE(journal->Sync().ok());
  }
  {
    auto journal = OpenOk(tmp.path());
    const std::vector<SourceMark> marks = journal->Marks();
    REQUIRE(marks.size() == 3);
    CHECK(SameMark(marks[0], SourceMark{5, 1, 0, 4}));
    CHECK(SameMark(marks[1], SourceMark{5, 1, 2, 100}));
    CHECK(SameMark(marks[2], SourceMark{6, 2, 1, 2}));
    journal->ForgetRun(5, 1);
    CHECK(journal->Marks().size() == 1);
    REQUIRE(journal->Sync().ok());
  }
  auto journal = OpenOk(tmp.path());
  const std::vector<SourceMark> marks = journal->Marks();
  REQUIRE(marks.size() == 1);
  CHECK(SameMark(marks[0], SourceMark{6, 2, 1, 2}));
  CHECK(journal->Append(Log("d")) == 4);
}

TEST_CASE("acked segments are deleted and the marks carried forward survive a reopen",
          "[journal]") {
  TempDir tmp;
  JournalOptions options;
  options.segment_bytes = 1;  // every Sync after one with events starts a new segment
  {
    auto journal = OpenOk(tmp.path(), options);
    journal->Append({Log("start", 9)}, {SourceMark{9, 1, 0, 6}});
    REQUIRE(journal->Sync().ok());
    for (int i = 0; i < 4; ++i) {
      journal->Append({Log("other", 10)}, {SourceMark{10, 1, 0, 6u * (i + 1)}});
      REQUIRE(journal->Sync().ok());
    }
    CHECK(Segments(tmp.path()).size() == 5);
    CHECK(journal->stats().segments == 5);
    CHECK(journal->TakeUnsent(100).size() == 5);
    journal->Ack(3);
    // The segments of seqs 1, 2 and 3 are gone; the active one always stays.
    CHECK(Segments(tmp.path()).size() == 2);
    journal->Ack(5);
    CHECK(Segments(tmp.path()).size() == 1);
    CHECK(journal->stats().segments == 1);
  }
  {
    auto journal = OpenOk(tmp.path(), options);
    CHECK(journal->unacked() == 0);
    const std::vector<SourceMark> marks = journal->Marks();
    REQUIRE(marks.size() == 2);
    CHECK(SameMark(marks[0], SourceMark{9, 1, 0, 6}));
    CHECK(SameMark(marks[1], SourceMark{10, 1, 0, 24}));
    CHECK(journal->Append(Log("six")) == 6);
    REQUIRE(journal->Sync().ok());
  }
  // Without the acked file (it is not fsynced) the seqs still continue, never reused.
  fs::remove(tmp.path() + "/acked");
  auto journal = OpenOk(tmp.path(), options);
  CHECK(journal->Append(Log("seven")) == 7);
  CHECK(journal->Marks().size() == 2);
}

TEST_CASE("after a crash while starting a segment the older one stays until a checkpoint exists",
          "[journal]") {
  TempDir tmp;
  JournalOptions options;
  options.segment_bytes = 1;
  {
    auto journal = OpenOk(tmp.path(), options);
    journal->Append({Log("a", 4)}, {SourceMark{4, 1, 0, 3}});
    REQUIRE(journal->Sync().ok());
    journal->Append(Log("b", 4));
    REQUIRE(journal->Sync().ok());
  }
  std::vector<std::string> files = Segments(tmp.path());
  REQUIRE(files.size() == 2);
  fs::resize_file(files[1], 5);  // the new segment's checkpoint (and "b") never made it
  {
    auto journal = OpenOk(tmp.path(), options);
    CHECK(Texts(journal->TakeUnsent(10)) == std::vector<std::string>{"a"});
    CHECK(journal->Marks().size() == 1);
    journal->Ack(1);
    CHECK(Segments(tmp.path()).size() == 2);  // it holds the only copy of the marks
    CHECK(journal->Append(Log("b again", 4)) == 2);
    REQUIRE(journal->Sync().ok());
    journal->Ack(2);
    CHECK(Segments(tmp.path()).size() == 2);
    CHECK(journal->Append(Log("c", 4)) == 3);
    REQUIRE(journal->Sync().ok());  // a new segment, starting with a checkpoint
    journal->Ack(3);
    CHECK(Segments(tmp.path()).size() == 1);
  }
  auto journal = OpenOk(tmp.path(), options);
  REQUIRE(journal->Marks().size() == 1);
  CHECK(SameMark(journal->Marks()[0], SourceMark{4, 1, 0, 3}));
  CHECK(journal->Append(Log("d")) == 4);
}

TEST_CASE("a missing segment in the middle is DataLoss", "[journal]") {
  TempDir tmp;
  JournalOptions options;
  options.segment_bytes = 1;
  {
    auto journal = OpenOk(tmp.path(), options);
    for (int i = 0; i < 3; ++i) {
      journal->Append(Log("x"));
      REQUIRE(journal->Sync().ok());
    }
  }
  const std::vector<std::string> files = Segments(tmp.path());
  REQUIRE(files.size() == 3);
  fs::remove(files[1]);
  absl::StatusOr<std::unique_ptr<Journal>> journal = Journal::Open(tmp.path(), options);
  REQUIRE_FALSE(journal.ok());
  CHECK(absl::IsDataLoss(journal.status()));
  CHECK_THAT(std::string(journal.status().message()), Catch::Contains(files[2]));
}

TEST_CASE("a journal directory is opened by one journal at a time", "[journal]") {
  TempDir tmp;
  auto first = OpenOk(tmp.path());
  absl::StatusOr<std::unique_ptr<Journal>> second = Journal::Open(tmp.path());
  REQUIRE_FALSE(second.ok());
  CHECK(absl::IsFailedPrecondition(second.status()));
  first.reset();
  CHECK(Journal::Open(tmp.path()).ok());
}

TEST_CASE("Sync fails on a full disk and keeps the events until space is freed", "[journal]") {
  TempDir tmp;
  const std::string mount = tmp.path() + "/small";
  fs::create_directory(mount);
  if (::mount("tmpfs", mount.c_str(), "tmpfs", 0, "size=64k,mode=0700") != 0) {
    TAE_SKIP("cannot mount a small tmpfs here (needs root): " << std::strerror(errno));
  }
  struct Unmount {
    std::string path;
    ~Unmount() { ::umount2(path.c_str(), MNT_DETACH); }
  } unmount{mount};
  const std::string dir = mount + "/journal";
  const std::string filler = mount + "/filler";
  {
    auto journal = OpenOk(dir);
    journal->Append({Log("before", 3)}, {SourceMark{3, 1, 0, 7}});
    REQUIRE(journal->Sync().ok());
    {
      // Fill the file system up.
      const int fd = ::open(filler.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
      REQUIRE(fd >= 0);
      const std::string block(4096, 'f');
      while (::write(fd, block.data(), block.size()) > 0) {
      }
      ::close(fd);
    }
    const uint64_t on_disk = journal->stats().bytes_on_disk;
    journal->Append({Log(std::string(20000, 'x'), 3)}, {SourceMark{3, 1, 0, 20008}});
    absl::Status full = journal->Sync();
    REQUIRE_FALSE(full.ok());
    CHECK(absl::IsResourceExhausted(full));
    CHECK_THAT(std::string(full.message()), Catch::Contains(dir));
    // Not sendable, not lost, and no partial record left on disk.
    CHECK(Texts(journal->TakeUnsent(10)) == std::vector<std::string>{"before"});
    CHECK_FALSE(journal->has_unsent());
    CHECK(journal->unacked() == 2);
    CHECK(journal->stats().bytes_on_disk == on_disk);
    const std::vector<std::string> files = Segments(dir);
    REQUIRE(files.size() == 1);
    CHECK(fs::file_size(files[0]) == on_disk);
    CHECK_FALSE(journal->Sync().ok());  // still full

    fs::remove(filler);
    REQUIRE(journal->Sync().ok());
    auto sent = journal->TakeUnsent(10);
    REQUIRE(sent.size() == 1);
    CHECK(sent[0].seq() == 2);
  }
  auto journal = OpenOk(dir);
  CHECK(journal->stats().torn_bytes == 0);
  CHECK(Seqs(journal->TakeUnsent(10)) == std::vector<uint64_t>{1, 2});
  REQUIRE(journal->Marks().size() == 1);
  CHECK(journal->Marks()[0].offset == 20008);
}

TEST_CASE("opening a journal of 100000 events", "[journal]") {
  TempDir tmp;
  constexpr int kEvents = 100000;
  {
    auto journal = OpenOk(tmp.path());
    std::vector<tae::v1::Event> batch;
    for (int i = 0; i < kEvents; ++i) {
      tae::v1::Event event = Log("Epoch=1 Step=" + std::to_string(i) + " Loss=2.31 Rate=812", 1);
      event.set_wall_time(1.7e9 + i);
      batch.push_back(std::move(event));
      if (batch.size() == 100) {
        journal->Append(std::move(batch), {SourceMark{1, 1, 0, static_cast<uint64_t>(i) * 40}});
        batch.clear();
        if ((i + 1) % 10000 == 0) {
          REQUIRE(journal->Sync().ok());
        }
      }
    }
    REQUIRE(journal->Sync().ok());
  }
  const auto start = std::chrono::steady_clock::now();
  auto journal = OpenOk(tmp.path());
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  const JournalStats stats = journal->stats();
  WARN("opened " << kEvents << " unacked events, " << stats.bytes_on_disk / 1e6 << " MB in "
                 << stats.segments << " segments, in " << ms << " ms");
  CHECK(journal->unacked() == static_cast<size_t>(kEvents));
  auto first = journal->TakeUnsent(1);
  REQUIRE(first.size() == 1);
  CHECK(first[0].seq() == 1);
  journal->Ack(kEvents - 10);
  journal.reset();

  const auto again = std::chrono::steady_clock::now();
  journal = OpenOk(tmp.path());
  const double acked_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - again).count();
  WARN("reopened with all but 10 acked in " << acked_ms << " ms");
  CHECK(journal->unacked() == 10);
  CHECK(journal->Append(Log("next")) == kEvents + 1);
  REQUIRE(journal->Marks().size() == 1);
  CHECK(journal->Marks()[0].offset == (kEvents - 1) * 40u);
}

}  // namespace tae::agent
