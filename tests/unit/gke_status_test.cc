// A gke slice's state from its JobSet and Kueue Workload (server/provider/gke_status.h), on the
// objects as the controllers write them. Condition types and reasons: Kueue's Workload API
// (kueue.x-k8s.io/v1beta1, https://kueue.sigs.k8s.io/docs/reference/kueue.v1beta1/ ; a pending
// Workload's QuotaReserved=False, reason Pending, message "couldn't assign flavors to pod set
// ...", as in kubernetes-sigs/kueue issue #1344) and JobSet's (jobset.x-k8s.io/v1alpha2,
// conditions Completed and Failed, https://jobset.sigs.k8s.io/docs/reference/jobset.v1alpha2/).

#include "server/provider/gke_status.h"

#include <catch2/catch.hpp>

#include "absl/strings/match.h"

namespace tae::provider {
namespace {

nlohmann::json WithConditions(nlohmann::json conditions) {
  return {{"metadata", {{"name", "x"}}}, {"status", {{"conditions", std::move(conditions)}}}};
}

nlohmann::json Cond(const std::string& type, const std::string& status, const std::string& reason,
                    const std::string& message) {
  return {{"type", type}, {"status", status}, {"reason", reason}, {"message", message}};
}

const nlohmann::json kJobSet = {{"metadata", {{"name", "tae-v5e-1"}}},
                                {"spec", {{"suspend", true}}}};

}  // namespace

TEST_CASE("gke status: Kueue's hold, admission, eviction and the JobSet's end, in their words") {
  // No Workload yet: Kueue has not seen it.
  SliceStatus none = DescribeSlice(kJobSet, nullptr);
  CHECK(none.state == SliceState::kWaiting);
  CHECK(absl::StrContains(none.reason, "no Workload yet"));

  const std::string quota =
      "couldn't assign flavors to pod set slice: insufficient unused quota for google.com/tpu in "
      "flavor v5e, 16 more needed";
  SliceStatus held =
      DescribeSlice(kJobSet, WithConditions({Cond("QuotaReserved", "False", "Pending", quota)}));
  CHECK(held.state == SliceState::kWaiting);
  CHECK(held.reason == "waiting for quota: " + quota);

  SliceStatus inadmissible =
      DescribeSlice(kJobSet, WithConditions({Cond("QuotaReserved", "False", "Inadmissible",
                                                  "LocalQueue tpu doesn't exist")}));
  CHECK(inadmissible.state == SliceState::kWaiting);
  CHECK(inadmissible.reason == "Kueue cannot admit it: LocalQueue tpu doesn't exist");

  SliceStatus admitted = DescribeSlice(
      kJobSet, WithConditions({Cond("QuotaReserved", "True", "QuotaReserved",
                                    "Quota reserved in "
                                    "ClusterQueue tpu"),
                               Cond("Admitted", "True", "Admitted", "The workload is admitted")}));
  CHECK(admitted.state == SliceState::kAdmitted);

  // Preempted by a higher-priority workload: evicted, with Kueue's reason.
  SliceStatus evicted = DescribeSlice(
      kJobSet,
      WithConditions({Cond("Admitted", "False", "NoReservation", "The workload has no reservation"),
                      Cond("Evicted", "True", "Preempted",
                           "Preempted to accommodate a workload (UID: 1) due to prioritization in "
                           "the ClusterQueue")}));
  CHECK(evicted.state == SliceState::kEvicted);
  CHECK(absl::StrContains(evicted.reason, "evicted by Kueue: Preempted: Preempted to accommodate"));

  SliceStatus timeout = DescribeSlice(
      kJobSet, WithConditions({Cond("Evicted", "True", "PodsReadyTimeout",
                                    "Exceeded the PodsReady timeout default/jobset-x")}));
  CHECK(timeout.state == SliceState::kEvicted);

  // The JobSet failed (a pod failed, a node was lost): whatever Kueue says.
  nlohmann::json failed = kJobSet;
  failed["status"] = {
      {"conditions",
       {Cond("Failed", "True", "FailedJobs", "jobset failed due to one or more job failures")}}};
  SliceStatus gone = DescribeSlice(
      failed, WithConditions({Cond("Admitted", "True", "Admitted", "The workload is admitted")}));
  CHECK(gone.state == SliceState::kFailed);
  CHECK(absl::StrContains(gone.reason, "FailedJobs: jobset failed"));

  nlohmann::json done = kJobSet;
  done["status"] = {{"conditions", {Cond("Completed", "True", "AllJobsCompleted", "")}}};
  CHECK(DescribeSlice(done, nullptr).state == SliceState::kFinished);

  // Malformed objects read as absent, never throw.
  CHECK(DescribeSlice(nlohmann::json("x"), nlohmann::json::array()).state == SliceState::kWaiting);
  CHECK(DescribeSlice(kJobSet, {{"status", {{"conditions", 7}}}}).state == SliceState::kWaiting);
  CHECK(DescribeSlice(kJobSet, WithConditions({{{"type", 5}, {"status", true}}})).state ==
        SliceState::kWaiting);
  CHECK(std::string(SliceStateName(SliceState::kEvicted)) == "evicted");
}

}  // namespace tae::provider

namespace tae::provider {

// What a cluster (or something posing as one) answers is read, never trusted: the rounds of the
// provider read these every few seconds, and a throw there would end taed's provider thread.
TEST_CASE(
    "gke: a cluster's listings of any shape are read without a throw, and only the "
    "pool's own slices come back") {
  GkePool pool;
  pool.name = "v5e";
  CHECK_FALSE(ListItems("").has_value());
  CHECK_FALSE(ListItems("not json").has_value());
  CHECK_FALSE(ListItems("[1, 2]").has_value());
  CHECK_FALSE(ListItems(R"({"items": {"a": 1}})").has_value());
  CHECK(ListItems(R"({"items": []})")->empty());
  const std::optional<std::vector<nlohmann::json>> jobsets = ListItems(R"({"items": [
    1, "x", null, [], {}, {"metadata": 3}, {"metadata": {"name": 7}},
    {"metadata": {"name": "someone-else"}},
    {"metadata": {"name": "tae-v5e-big-1"}},
    {"metadata": {"name": "tae-v5e-2", "uid": ["u"]}, "status": "odd"},
    {"metadata": {"name": "tae-v5e-1", "uid": "u1"},
     "status": {"conditions": [7, {"type": "Failed", "status": true}]}},
    {"metadata": {"name": "tae-v5e-3", "uid": "u3"}}
  ]})");
  REQUIRE(jobsets.has_value());
  const std::optional<std::vector<nlohmann::json>> workloads = ListItems(R"({"items": [
    "w", {"metadata": {"labels": ["kueue.x-k8s.io/job-uid"]}},
    {"metadata": {"labels": {"kueue.x-k8s.io/job-uid": 5}}},
    {"metadata": {"labels": {"kueue.x-k8s.io/job-uid": "u3"}},
     "status": {"conditions": [{"type": "Admitted", "status": "True"}]}}
  ]})");
  REQUIRE(workloads.has_value());
  const std::vector<ListedSlice> slices = ReadSlices(pool, *jobsets, *workloads);
  REQUIRE(slices.size() == 3);
  CHECK(slices[0].name == "tae-v5e-2");
  CHECK(slices[0].status.state == SliceState::kWaiting);  // no Workload matches a non-string uid
  CHECK(slices[1].name == "tae-v5e-1");
  CHECK(slices[1].index == 1);
  CHECK(slices[1].status.state == SliceState::kWaiting);  // "status": true is not "True"
  CHECK(slices[2].name == "tae-v5e-3");
  CHECK(slices[2].status.state == SliceState::kAdmitted);
  // A large listing is read in one pass.
  std::vector<nlohmann::json> many;
  for (int i = 1; i <= 5000; ++i) {
    many.push_back({{"metadata", {{"name", "tae-v5e-" + std::to_string(i)}}}});
  }
  CHECK(ReadSlices(pool, many, {}).size() == 5000);
}

TEST_CASE("gke status: the Workloads listed are only those of the pool's JobSets, by uid") {
  std::vector<nlohmann::json> jobsets;
  for (int i = 0; i < 5; ++i) {
    jobsets.push_back(
        {{"metadata",
          {{"name", "tae-v5e-" + std::to_string(i + 1)}, {"uid", "uid-" + std::to_string(i)}}}});
  }
  // Whatever the cluster put in a uid cannot widen or break the selector.
  jobsets.push_back({{"metadata", {{"name", "tae-v5e-9"}, {"uid", "x),other in (y"}}}});
  jobsets.push_back({{"metadata", {{"name", "tae-v5e-10"}, {"uid", 42}}}});
  jobsets.push_back({{"metadata", {{"name", "tae-v5e-11"}, {"uid", std::string(64, 'a')}}}});
  jobsets.push_back("not an object");
  CHECK(WorkloadSelectors(jobsets, 2) ==
        std::vector<std::string>{"kueue.x-k8s.io/job-uid in (uid-0,uid-1)",
                                 "kueue.x-k8s.io/job-uid in (uid-2,uid-3)",
                                 "kueue.x-k8s.io/job-uid in (uid-4)"});
  CHECK(WorkloadSelectors(jobsets, kUidsPerCall).size() == 1);
  CHECK(WorkloadSelectors({}, kUidsPerCall).empty());
}

}  // namespace tae::provider
