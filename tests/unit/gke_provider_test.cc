// The gke provider's small pure parts: which JobSet names are a pool's slices, what a kubectl
// call's failure says, when a listing changes what taed shows; and one CLI call with its input,
// its time limit and taed's stop.

#include "server/provider/gke_provider.h"

#include <catch2/catch.hpp>

#include "server/provider/cli_call.h"

namespace tae::provider {
namespace {

GkePool Pool(const std::string& name) {
  GkePool pool;
  pool.name = name;
  return pool;
}

}  // namespace

TEST_CASE("a JobSet is a pool's slice only by the exact names TAE gives") {
  CHECK(SliceIndex(Pool("v5e"), "tae-v5e-1") == 1);
  CHECK(SliceIndex(Pool("v5e"), "tae-v5e-12") == 12);
  CHECK(SliceIndex(Pool("v5e"), "tae-v5e-0") == 0);
  CHECK(SliceIndex(Pool("v5e"), "tae-v5e-02") == 0);  // not slice 2, tae-v5e-2 (found by fuzzing)
  CHECK(SliceIndex(Pool("v5e"), "tae-v5e-+2") == 0);
  CHECK(SliceIndex(Pool("v5e"), "tae-v5e-") == 0);
  CHECK(SliceIndex(Pool("v5e"), "tae-v5e-1x") == 0);
  CHECK(SliceIndex(Pool("v5e"), "tae-v5e-big-1") == 0);  // pool v5e-big's
  CHECK(SliceIndex(Pool("v5e-big"), "tae-v5e-big-1") == 1);
  CHECK(SliceIndex(Pool("v5e"), "tae-v5e-99999999999999999999") == 0);
  CHECK(SliceIndex(Pool("v5e"), "other-v5e-1") == 0);
}

TEST_CASE("a failed kubectl or gcloud call is told by its error line") {
  CHECK(ErrorLine("I1128 progress\nError from server (Forbidden): jobsets is forbidden\n") ==
        "Error from server (Forbidden): jobsets is forbidden");
  CHECK(ErrorLine("error: the server doesn't have a resource type \"jobsets\"\n") ==
        "error: the server doesn't have a resource type \"jobsets\"");
  CHECK(ErrorLine("Create request issued\nERROR: (gcloud) quota\nmore\n") ==
        "ERROR: (gcloud) quota");
  CHECK(ErrorLine("first\nlast\n\n") == "last");
  CHECK(ErrorLine("") == "");
}

TEST_CASE("a pool's listing tells taed when what it shows changed") {
  ProviderLog log;
  const CloudVm held{"gke", "v5e", "tae-v5e-1", "ml", "waiting", "waiting for quota: a"};
  CHECK(log.SetVms("v5e", {held}));
  CHECK_FALSE(log.SetVms("v5e", {held}));
  CloudVm reworded = held;
  reworded.detail = "waiting for quota: b";
  CHECK(log.SetVms("v5e", {reworded}));
  CHECK(log.SetVms("v5e", {}));
  CHECK_FALSE(log.SetVms("v5e", {}));
  CHECK(log.vms().empty());
}

TEST_CASE("a CLI call gets its input, and ends at its time limit or when taed stops") {
  const CliResult echoed = RunCli({"/bin/sh", "-c", "cat; echo err >&2"}, "manifest\n", 30, {});
  CHECK(echoed.ok);
  CHECK(echoed.out == "manifest\n");
  CHECK(echoed.err == "err\n");
  CHECK(CallOutcome(echoed).rfind("ok in ", 0) == 0);

  const CliResult failed = RunCli({"/bin/sh", "-c", "echo 'error: no' >&2; exit 3"}, "", 30, {});
  CHECK_FALSE(failed.ok);
  CHECK(CallOutcome(failed) == "failed: error: no");

  const CliResult slow = RunCli({"/bin/sleep", "30"}, "", 0.5, {});
  CHECK_FALSE(slow.ok);
  CHECK(slow.seconds < 10);
  CHECK(slow.err.rfind("no answer within 0.5 s", 0) == 0);

  const CliResult stopped = RunCli({"/bin/sleep", "30"}, "", 30, [] { return true; });
  CHECK_FALSE(stopped.ok);
  CHECK(stopped.seconds < 10);
  CHECK(stopped.err.rfind("taed is stopping", 0) == 0);

  const CliResult missing = RunCli({"/nonexistent/kubectl"}, "", 30, {});
  CHECK_FALSE(missing.ok);

  // An answer longer than what is kept fails the call, never reads as a shorter answer.
  const CliResult huge =
      RunCli({"/bin/sh", "-c", "head -c 17000000 /dev/zero; echo fine >&2"}, "", 60, {});
  CHECK_FALSE(huge.ok);
  CHECK(huge.out.empty());
  CHECK(CallOutcome(huge) == "failed: error: its output passed 16 MiB and was not read; fine");
  const CliResult just =
      RunCli({"/bin/sh", "-c", "head -c " + std::to_string(kMaxCliOutputBytes) + " /dev/zero"}, "",
             60, {});
  CHECK(just.ok);
  CHECK(just.out.size() == kMaxCliOutputBytes);
}

}  // namespace tae::provider
