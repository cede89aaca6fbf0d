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
