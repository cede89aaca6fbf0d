// The gcloud-tpu provider's rounds against a stand-in `gcloud` (a shell script): the cases the
// fake TPU API cannot stage, where gcloud itself fails. Each call is appended to a file; what a
// call answers comes from files the test writes:
//   nodes-ZONE.json   what `tpu-vm list --zone ZONE` prints (default: [])
//   fail-list-ZONE    present: that list fails
//   fail-delete       present: every delete fails

#include "server/provider/tpu_provider.h"

#include <sys/stat.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <fstream>
#include <mutex>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "tests/integration/fake_tpu_api.h"
#include "tests/integration/harness.h"

namespace tae::testing {
namespace {

constexpr const char* kStandIn = R"(#!/bin/sh
dir=$(dirname "$0")
echo "$*" >>"$dir/calls"
verb=$4
zone=$6
case $verb in
  list)
    if [ -e "$dir/fail-list-$zone" ]; then echo "ERROR: (gcloud) 503 unavailable" >&2; exit 1; fi
    if [ -e "$dir/nodes-$zone.json" ]; then cat "$dir/nodes-$zone.json"; else echo "[]"; fi ;;
  delete)
    if [ -e "$dir/fail-delete" ]; then echo "ERROR: (gcloud) 500 backend error" >&2; exit 1; fi ;;
esac
exit 0
)";

class StandIn {
 public:
  StandIn() {
    dir_.Write("gcloud", kStandIn);
    REQUIRE(chmod((dir_.path() + "/gcloud").c_str(), 0755) == 0);
  }
  std::string gcloud() const { return dir_.path() + "/gcloud"; }
  void Write(const std::string& name, const std::string& text) const { dir_.Write(name, text); }
  void Remove(const std::string& name) const { std::remove((dir_.path() + "/" + name).c_str()); }
  // The calls so far whose arguments contain `text`.
  std::vector<std::string> Calls(const std::string& text = "") const {
    std::vector<std::string> out;
    std::istringstream lines(ReadFile(dir_.path() + "/calls"));
    for (std::string line; std::getline(lines, line);) {
      if (line.find(text) != std::string::npos) {
        out.push_back(line);
      }
    }
    return out;
  }

 private:
  TempDir dir_;
};

provider::TpuPool Pool(std::vector<std::string> zones, double idle_timeout_s = 600) {
  provider::TpuPool pool;
  pool.name = "v4";
  pool.accelerator_type = "v4-8";
  pool.zones = std::move(zones);
  pool.idle_timeout_s = idle_timeout_s;
  return pool;
}

// What the core would answer, settable by the test.
struct Demand {
  std::mutex mu;
  std::optional<provider::TpuDemand> answer = provider::TpuDemand{};
  int asked = 0;  // rounds so far: each asks once
  void Set(std::optional<provider::TpuDemand> value) {
    std::lock_guard<std::mutex> lock(mu);
    answer = std::move(value);
  }
  std::optional<provider::TpuDemand> Get() {
    std::lock_guard<std::mutex> lock(mu);
    ++asked;
    return answer;
  }
  int Asked() {
    std::lock_guard<std::mutex> lock(mu);
    return asked;
  }
};

provider::TpuProviderOptions Options(const StandIn& standin, provider::TpuPool pool,
                                     Demand* demand) {
  provider::TpuProviderOptions options;
  options.pools = {std::move(pool)};
  options.gcloud = standin.gcloud();
  options.poll_s = 0.05;
  options.call_timeout_s = 30;
  options.demand = [demand] { return demand->Get(); };
  return options;
}

provider::TpuDemand Waiting(int runs) {
  provider::TpuDemand demand;
  demand.waiting["v4"] = runs;
  return demand;
}

}  // namespace

TEST_CASE("a pool creates no VM while one of its zones cannot be listed", "[gcloud][provider]") {
  StandIn standin;
  standin.Write("fail-list-b", "");
  Demand demand;
  demand.Set(Waiting(1));
  provider::TpuProvider tpu(Options(standin, Pool({"a", "b"}), &demand));
  tpu.Start();
  // Zone b may hold a tae-v4-1 that zone a's listing cannot show: three rounds, no create.
  REQUIRE(WaitUntil([&] { return standin.Calls("list --zone b").size() >= 3; }, 60));
  CHECK(standin.Calls("create").empty());
  // b answers again: the VM is created, in the first zone.
  standin.Remove("fail-list-b");
  REQUIRE(WaitUntil([&] { return !standin.Calls("create").empty(); }, 60));
  tpu.Stop();
  CHECK(standin.Calls("create")[0].rfind("compute tpus tpu-vm create tae-v4-1 --zone a ", 0) == 0);
}

TEST_CASE("a preempted VM whose delete failed keeps its name", "[gcloud][provider]") {
  StandIn standin;
  standin.Write("nodes-a.json",
                R"([{"name": "projects/p/locations/a/nodes/tae-v4-1", "state": "PREEMPTED",
                     "id": 17, "networkEndpoints": "not a list"}])");
  standin.Write("fail-delete", "");
  Demand demand;
  demand.Set(Waiting(1));
  provider::TpuProvider tpu(Options(standin, Pool({"a"}), &demand));
  tpu.Start();
  REQUIRE(WaitUntil([&] { return !standin.Calls("create").empty(); }, 60));
  tpu.Stop();
  CHECK(standin.Calls("delete tae-v4-1 --zone a").size() >= 1);
  // tae-v4-1 still exists (its delete failed), so the new VM may not take its name. (The odd
  // types in the listing, a numeric id and a string for the endpoints, are read without harm.)
  CHECK(standin.Calls("create")[0].rfind("compute tpus tpu-vm create tae-v4-2 --zone a ", 0) == 0);
}

TEST_CASE("a round without the core's answer deletes nothing, however idle", "[gcloud][provider]") {
  StandIn standin;
  standin.Write("nodes-a.json",
                R"([{"name": "projects/p/locations/a/nodes/tae-v4-1", "state": "READY"}])");
  Demand demand;
  demand.Set(std::nullopt);  // the core did not answer in time
  provider::TpuProvider tpu(Options(standin, Pool({"a"}, /*idle_timeout_s=*/0), &demand));
  tpu.Start();
  // Five rounds go by (each asks the core once), skipped: no listing, no deletion.
  REQUIRE(WaitUntil([&] { return demand.Asked() >= 5; }, 60));
  CHECK(standin.Calls().empty());
  // The core answers: nothing waits, nothing is busy, the idle VM is deleted.
  demand.Set(provider::TpuDemand{});
  REQUIRE(WaitUntil([&] { return !standin.Calls("delete tae-v4-1 --zone a").empty(); }, 60));
  tpu.Stop();
}

}  // namespace tae::testing
