// Whose fault a full disk is (agent/runner/disk.h): the rules, and what is measured.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <string>

#include "agent/runner/disk.h"
#include "common/text/bytes.h"
#include "tests/unit/temp_dir.h"

namespace tae::agent {
namespace {

constexpr uint64_t kGB = 1'000'000'000;
const DiskSpace kFull{kGB / 200, 100 * kGB};  // 0.5% free
const DiskSpace kRoomy{50 * kGB, 100 * kGB};

TEST_CASE("disk blame: a run over its max_disk fails as its own fault, full disk or not") {
  const RunDisk run{7, 1, 3 * kGB, 60 * kGB, 2 * kGB};
  for (const DiskSpace& disk : {kFull, kRoomy}) {
    const DiskVerdict v = BlameDisk(run, {}, disk, "/w");
    CHECK(v.cause == DiskCause::kOverLimit);
    CHECK(v.why ==
          "it wrote 3.0 GB into its directories on the worker, more than resources.max_disk = "
          "2.0 GB");
  }
  CHECK(BlameDisk({7, 1, 2 * kGB, 60 * kGB, 2 * kGB}, {}, kRoomy, "/w").cause ==
        DiskCause::kNone);  // at the limit is within it
}

TEST_CASE("disk blame: on a full disk the run that wrote it fails, the runs it hurt do not") {
  // r7 started with 60 GB free and wrote 59 GB: it filled the disk itself.
  const RunDisk hog{7, 1, 59 * kGB, 60 * kGB, 0};
  const RunDisk small{8, 2, kGB / 10, 40 * kGB, 0};
  DiskVerdict v = BlameDisk(hog, {small}, kFull, "/w");
  CHECK(v.cause == DiskCause::kFilledItself);
  CHECK(v.why ==
        "it filled the worker's disk: it wrote 59.0 GB into its directories (60.0 GB were free "
        "when it started); set resources.max_disk to stop it sooner");
  // r8, which wrote 100 MB, was hurt by r7: requeued, and the worker is not blamed.
  v = BlameDisk(small, {hog}, kFull, "/w");
  CHECK(v.cause == DiskCause::kFilledByOther);
  CHECK(v.other_run == 7);
  CHECK(v.why.find("filled by run r7 (it wrote 59.0 GB)") != std::string::npos);
  // Nobody here wrote it (a ballast file, logs of another program): the worker's fault.
  v = BlameDisk(small, {{9, 1, kGB / 10, 40 * kGB, 0}}, kFull, "/w");
  CHECK(v.cause == DiskCause::kWorkerFull);
  CHECK(v.why.find("in /w; no job here wrote most of it") != std::string::npos);
  // A disk already full when the job started was not filled by it, whatever it wrote.
  v = BlameDisk({10, 1, kGB / 400, kGB / 200, 0}, {}, kFull, "/w");
  CHECK(v.cause == DiskCause::kWorkerFull);
  CHECK(v.why.find("was full before the job started") != std::string::npos);
  // A disk with room says nothing, whoever wrote what.
  CHECK(BlameDisk(hog, {small}, kRoomy, "/w").cause == DiskCause::kNone);
  CHECK(BlameDisk(small, {hog}, kRoomy, "/w").cause == DiskCause::kNone);
}

TEST_CASE("disk blame: a run beside a fill that was given back is still hurt by it, no other") {
  // r7 filled the disk and its space came back before r8's failed exit was seen: the disk has
  // room again, yet r8 met it full.
  const RunDisk hog{7, 1, 59 * kGB, 60 * kGB, 0};
  const DiskFill fill{hog, {{7, 1}, {8, 2}, {9, 1}}};
  DiskVerdict v = BlameRecentFill(8, 2, fill);
  CHECK(v.cause == DiskCause::kFilledByOther);
  CHECK(v.other_run == 7);
  CHECK(v.why == BlameDisk({8, 2, kGB / 10, 40 * kGB, 0}, {hog}, kFull, "/w").why);
  // Not the filler itself, not another attempt of a run that was beside it, not a run started
  // after the fill.
  CHECK(BlameRecentFill(7, 1, fill).cause == DiskCause::kNone);
  CHECK(BlameRecentFill(8, 3, fill).cause == DiskCause::kNone);
  CHECK(BlameRecentFill(10, 1, fill).cause == DiskCause::kNone);
}

TEST_CASE("disk blame: full means under 1% or 1 MiB free") {
  CHECK(DiskFull({(1 << 20) - 1, 50 << 20}));
  CHECK_FALSE(DiskFull({2 << 20, 50 << 20}));
  CHECK(DiskFull({kGB - 1, 100 * kGB}));
  CHECK_FALSE(DiskFull({kGB, 100 * kGB}));
  CHECK_FALSE(DiskFull({}));  // unknown: not full
}

TEST_CASE("disk use counts what a job wrote, not files shared with the agent's cache") {
  testing::TempDir dir("tae-disk");
  dir.Write("run/out.bin", std::string(100000, 'x'));
  dir.Write("run/sub/more.bin", std::string(50000, 'y'));
  dir.Write("cache/code.py", std::string(200000, 'z'));
  std::filesystem::create_hard_link(dir.Full("cache/code.py"), dir.Full("run/code.py"));
  std::filesystem::create_symlink(dir.Full("cache/code.py"), dir.Full("run/link.py"));
  const uint64_t bytes = DirsBytes({dir.Full("run")});
  // Blocks, not lengths: at least what was written, at most a block more per file.
  CHECK(bytes >= 150000);
  CHECK(bytes < 150000 + 2 * 65536);
  CHECK(DirsBytes({dir.Full("run"), dir.Full("missing")}) == bytes);
  CHECK(text::FormatBytes(999) == "999 B");
  CHECK(text::FormatBytes(1'500'000) == "1.5 MB");
}

}  // namespace
}  // namespace tae::agent
