// Placement labels bound to credentials (server/registry/placement.h): the decisions, one rule
// at a time, each with the case that passes beside the one refused.

#include "server/registry/placement.h"

#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "absl/strings/match.h"

namespace tae::registry {
namespace {

Registration Enrolled(const std::string& id, std::map<std::string, std::string> labels,
                      std::optional<PlacementLabels> bound = std::nullopt) {
  return {id, 1, std::move(labels), /*minted=*/false, std::move(bound)};
}

std::string Why(const absl::Status& status) { return std::string(status.message()); }

}  // namespace

TEST_CASE("placement labels are the six keys that place and count agents") {
  for (const char* key : {"slice", "worker", "pool", "provider", "addr", "zone"}) {
    CHECK(IsPlacementKey(key));
  }
  for (const char* key : {"accelerator", "Slice", "slice ", "gpu", ""}) {
    CHECK_FALSE(IsPlacementKey(key));
  }
  CHECK(PlacementOf({{"accelerator", "tpu"}, {"slice", "s"}, {"worker", "0"}}) ==
        PlacementLabels{{"slice", "s"}, {"worker", "0"}});
}

TEST_CASE("an agent a provider started registers with exactly the labels it was minted with") {
  const PlacementLabels assigned = {{"provider", "gke"}, {"slice", "tae-v5e-1"}, {"worker", "1"}};
  Registration r{
      "tae-v5e-1-w1",
      2,
      {{"accelerator", "tpu"}, {"provider", "gke"}, {"slice", "tae-v5e-1"}, {"worker", "1"}},
      true,
      assigned};
  CHECK(JudgeRegistration(r, {}).ok());
  // Its own other labels are its own to say.
  r.labels["accelerator"] = "v5e";
  CHECK(JudgeRegistration(r, {}).ok());
  // Another worker, another slice, an address of its choosing, a label dropped: refused.
  for (const auto& [key, value] : std::vector<std::pair<std::string, std::string>>{
           {"worker", "0"}, {"slice", "tae-v5e-2"}, {"addr", "10.9.9.9"}}) {
    Registration claimed = r;
    claimed.labels[key] = value;
    const absl::Status s = JudgeRegistration(claimed, {});
    INFO(key << "=" << value << ": " << s);
    CHECK(s.code() == absl::StatusCode::kPermissionDenied);
    CHECK(absl::StrContains(Why(s), "assigned by the provider"));
  }
  Registration dropped = r;
  dropped.labels.erase("worker");
  CHECK(JudgeRegistration(dropped, {}).code() == absl::StatusCode::kPermissionDenied);
}

TEST_CASE("an enrolled agent binds its placement at its first registration and keeps it") {
  CHECK(JudgeRegistration(Enrolled("gang-w0", {{"slice", "s1"}, {"worker", "0"}}), {}).ok());
  const PlacementLabels bound = {{"slice", "s1"}, {"worker", "0"}};
  CHECK(JudgeRegistration(Enrolled("gang-w0", {{"slice", "s1"}, {"worker", "0"}}, bound), {}).ok());
  const absl::Status moved =
      JudgeRegistration(Enrolled("gang-w0", {{"slice", "s1"}, {"worker", "1"}}, bound), {});
  CHECK(moved.code() == absl::StatusCode::kPermissionDenied);
  CHECK(absl::StrContains(Why(moved), "bound at its first registration"));
  CHECK(absl::StrContains(Why(moved), "slice=s1,worker=0"));
  // No placement labels at all: nothing to claim, and nothing to change later either.
  CHECK(JudgeRegistration(Enrolled("plain", {{"accelerator", "gpu"}}), {}).ok());
  CHECK(JudgeRegistration(Enrolled("plain", {{"zone", "x"}}, PlacementLabels{}), {}).code() ==
        absl::StatusCode::kPermissionDenied);
}

TEST_CASE("an enrolled agent cannot claim a provider's labels, its slices or a held worker") {
  const std::vector<PlacementHolder> others = {
      {"tae-v5e-1-w0", true, {{"pool", "v5e"}, {"slice", "tae-v5e-1"}, {"worker", "0"}}},
      {"gang-w0", false, {{"slice", "s1"}, {"worker", "0"}}}};
  for (const char* key : {"pool", "provider"}) {
    const absl::Status s = JudgeRegistration(Enrolled("rogue", {{key, "v5e"}}), others);
    CHECK(s.code() == absl::StatusCode::kPermissionDenied);
    CHECK(absl::StrContains(Why(s), "an enrolled agent cannot declare it"));
  }
  // A provider's slice: no worker of it, not even one it lacks.
  for (const char* worker : {"0", "1", "7"}) {
    const absl::Status s =
        JudgeRegistration(Enrolled("rogue", {{"slice", "tae-v5e-1"}, {"worker", worker}}), others);
    CHECK(s.code() == absl::StatusCode::kPermissionDenied);
    CHECK(absl::StrContains(Why(s), "slice tae-v5e-1 is made of agents taed started"));
  }
  // A hand-made slice: a held worker is refused, a new one joins.
  const absl::Status held =
      JudgeRegistration(Enrolled("rogue", {{"slice", "s1"}, {"worker", "0"}}), others);
  CHECK(held.code() == absl::StatusCode::kPermissionDenied);
  CHECK(absl::StrContains(Why(held), "worker 0 of slice s1 is agent gang-w0"));
  CHECK(JudgeRegistration(Enrolled("gang-w1", {{"slice", "s1"}, {"worker", "1"}}), others).ok());
  // The holder itself, registering again, is not its own rival.
  CHECK(JudgeRegistration(Enrolled("gang-w0", {{"slice", "s1"}, {"worker", "0"}}), others).ok());
  // A slice nobody holds yet.
  CHECK(JudgeRegistration(Enrolled("x", {{"slice", "s2"}, {"worker", "0"}}), others).ok());
}

TEST_CASE("an agent's slots are 1 to kMaxAgentSlots") {
  for (int slots : {1, 8, kMaxAgentSlots}) {
    Registration r = Enrolled("a", {});
    r.slots = slots;
    CHECK(JudgeRegistration(r, {}).ok());
  }
  for (int slots : {0, -1, kMaxAgentSlots + 1, 2147483647}) {
    Registration r = Enrolled("a", {});
    r.slots = slots;
    const absl::Status s = JudgeRegistration(r, {});
    CHECK(s.code() == absl::StatusCode::kInvalidArgument);
    CHECK(absl::StrContains(Why(s), "is not in 1..1024"));
  }
}

}  // namespace tae::registry
