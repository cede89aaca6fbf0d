// taed's gcloud-tpu provider and the deploy/tpu scripts issue the same gcloud command lines: the
// provider's builders (server/provider/tpu_pools.h) against deploy/tpu/lib.sh's, run by bash.

#include <catch2/catch.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "server/provider/tpu_pools.h"
#include "tests/integration/harness.h"

namespace tae::testing {
namespace {

// `gcloud ARGS...` as lib.sh builds it: CMD after `source lib.sh; BUILDER ARGS...`, one per line.
std::vector<std::string> LibCommand(const std::string& builder) {
  CommandResult result = RunCommand(
      {"/bin/bash", "-c", "set -eu; source \"$1\"; " + builder + "; printf '%s\\n' \"${CMD[@]}\"",
       "lib", std::string(TAE_SOURCE_DIR) + "/deploy/tpu/lib.sh"},
      30);
  INFO(builder << ": " << result.err);
  REQUIRE(result.exit_code == 0);
  std::vector<std::string> words;
  std::istringstream lines(result.out);
  for (std::string line; std::getline(lines, line);) {
    words.push_back(line);
  }
  return words;
}

std::vector<std::string> Gcloud(std::vector<std::string> args) {
  args.insert(args.begin(), "gcloud");
  return args;
}

}  // namespace

TEST_CASE("the provider's gcloud command lines are deploy/tpu/lib.sh's", "[gcloud]") {
  for (const std::string project : {"", "my-project"}) {
    INFO("project '" << project << "'");
    setenv("TAE_GCP_PROJECT", project.c_str(), 1);
    provider::TpuPool pool;
    pool.name = "v4";
    pool.accelerator_type = "v4-16";
    pool.zones = {"us-east5-a"};
    pool.project = project;
    pool.spot = true;
    const std::string labels = "tae=1,tae-pool=v4";
    CHECK(
        Gcloud(provider::TpuCreateArgs(pool, "tae-v4-1", "us-east5-a")) ==
        LibCommand("tpu_cmd_create tae-v4-1 us-east5-a v4-16 tpu-ubuntu2204-base spot " + labels));
    pool.spot = false;
    pool.preemptible = true;
    CHECK(Gcloud(provider::TpuCreateArgs(pool, "tae-v4-1", "us-east5-a")) ==
          LibCommand("tpu_cmd_create tae-v4-1 us-east5-a v4-16 tpu-ubuntu2204-base preemptible " +
                     labels));
    CHECK(Gcloud(provider::TpuListArgs(pool, "us-east5-a")) ==
          LibCommand("tpu_cmd_list us-east5-a labels.tae-pool=v4"));
    CHECK(Gcloud(provider::TpuDeleteArgs(pool, "tae-v4-1", "us-east5-a")) ==
          LibCommand("tpu_cmd_delete tae-v4-1 us-east5-a"));
    CHECK(Gcloud(provider::TpuGuestAttributesArgs(pool, "tae-v4-1", "us-east5-a")) ==
          LibCommand("tpu_cmd_guest_attributes tae-v4-1 us-east5-a"));
    pool.preemptible = false;
    pool.spot = true;
    pool.queued = true;
    pool.valid_until = "6h";
    CHECK(
        Gcloud(provider::TpuQueuedCreateArgs(pool, "tae-v4-2", "us-east5-a")) ==
        LibCommand("tpu_cmd_queued_create tae-v4-2 us-east5-a v4-16 tpu-ubuntu2204-base spot 6h " +
                   labels));
    CHECK(Gcloud(provider::TpuQueuedListArgs(pool, "us-east5-a")) ==
          LibCommand("tpu_cmd_queued_list us-east5-a"));
    CHECK(Gcloud(provider::TpuQueuedDeleteArgs(pool, "tae-v4-2", "us-east5-a")) ==
          LibCommand("tpu_cmd_queued_delete tae-v4-2 us-east5-a"));
  }
  unsetenv("TAE_GCP_PROJECT");
}

}  // namespace tae::testing
