#include "server/provider/gke_status.h"

#include <algorithm>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace tae::provider {
namespace {

// object[key] when it is a string, else "" (what a controller wrote is read, never trusted).
std::string Text(const nlohmann::json& object, const char* key) {
  auto it = object.find(key);
  return it != object.end() && it->is_string() ? it->get<std::string>() : std::string();
}

// object[key], or null when object is not an object or has no such member.
nlohmann::json Child(const nlohmann::json& object, const char* key) {
  if (!object.is_object()) {
    return nullptr;
  }
  auto it = object.find(key);
  return it != object.end() ? *it : nlohmann::json();
}

// The condition of `type` in object.status.conditions, or null.
const nlohmann::json* Condition(const nlohmann::json& object, const char* type) {
  if (!object.is_object()) {
    return nullptr;
  }
  auto status = object.find("status");
  if (status == object.end() || !status->is_object()) {
    return nullptr;
  }
  auto conditions = status->find("conditions");
  if (conditions == status->end() || !conditions->is_array()) {
    return nullptr;
  }
  for (const nlohmann::json& condition : *conditions) {
    if (condition.is_object() && Text(condition, "type") == type) {
      return &condition;
    }
  }
  return nullptr;
}

bool IsTrue(const nlohmann::json* condition) {
  return condition != nullptr && Text(*condition, "status") == "True";
}

std::string Words(const nlohmann::json* condition) {
  if (condition == nullptr) {
    return "";
  }
  const std::string reason = Text(*condition, "reason");
  const std::string message = Text(*condition, "message");
  if (message.empty()) {
    return reason;
  }
  return reason.empty() ? message : absl::StrCat(reason, ": ", message);
}

}  // namespace

const char* SliceStateName(SliceState state) {
  switch (state) {
    case SliceState::kWaiting:
      return "waiting";
    case SliceState::kAdmitted:
      return "admitted";
    case SliceState::kEvicted:
      return "evicted";
    case SliceState::kFailed:
      return "failed";
    case SliceState::kFinished:
      return "finished";
  }
  return "waiting";
}

SliceStatus DescribeSlice(const nlohmann::json& jobset, const nlohmann::json& workload) {
  // The JobSet's own end first: nothing Kueue says brings it back.
  if (const nlohmann::json* failed = Condition(jobset, "Failed"); IsTrue(failed)) {
    return {SliceState::kFailed, absl::StrCat("the JobSet failed: ", Words(failed))};
  }
  if (const nlohmann::json* done = Condition(jobset, "Completed"); IsTrue(done)) {
    return {SliceState::kFinished, absl::StrCat("the JobSet completed: ", Words(done))};
  }
  if (!workload.is_object()) {
    return {SliceState::kWaiting, "waiting for Kueue to queue it (no Workload yet)"};
  }
  for (const char* type : {"Evicted", "Preempted"}) {
    if (const nlohmann::json* gone = Condition(workload, type); IsTrue(gone)) {
      return {SliceState::kEvicted,
              absl::StrCat(type == std::string("Evicted") ? "evicted" : "preempted",
                           " by Kueue: ", Words(gone))};
    }
  }
  if (const nlohmann::json* finished = Condition(workload, "Finished"); IsTrue(finished)) {
    return {SliceState::kFinished, absl::StrCat("finished: ", Words(finished))};
  }
  if (IsTrue(Condition(workload, "Admitted"))) {
    return {SliceState::kAdmitted, "admitted by Kueue; its pods are starting"};
  }
  const nlohmann::json* reserved = Condition(workload, "QuotaReserved");
  if (IsTrue(reserved)) {
    return {SliceState::kWaiting, "quota reserved; waiting for Kueue's admission checks"};
  }
  const std::string why = reserved == nullptr ? "" : Text(*reserved, "message");
  if (reserved != nullptr && Text(*reserved, "reason") == "Inadmissible") {
    // Not a wait for quota: Kueue cannot queue it at all (e.g. its LocalQueue is missing).
    return {SliceState::kWaiting, absl::StrCat("Kueue cannot admit it: ", why)};
  }
  return {SliceState::kWaiting, why.empty() ? std::string("waiting for quota in Kueue")
                                            : absl::StrCat("waiting for quota: ", why)};
}

std::optional<std::vector<nlohmann::json>> ListItems(const std::string& text) {
  const nlohmann::json list = nlohmann::json::parse(text, nullptr, false);
  if (!list.is_object()) {
    return std::nullopt;
  }
  auto items = list.find("items");
  if (items == list.end() || !items->is_array()) {
    return std::nullopt;
  }
  return items->get<std::vector<nlohmann::json>>();
}

std::vector<std::string> WorkloadSelectors(const std::vector<nlohmann::json>& jobsets,
                                           size_t per_selector) {
  std::vector<std::string> uids;
  for (const nlohmann::json& jobset : jobsets) {
    const nlohmann::json meta = Child(jobset, "metadata");
    const std::string uid = meta.is_object() ? Text(meta, "uid") : "";
    const bool plain =
        !uid.empty() && uid.size() <= 63 && std::all_of(uid.begin(), uid.end(), [](char c) {
          return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                 c == '-';
        });
    if (plain) {
      uids.push_back(uid);
    }
  }
  std::vector<std::string> out;
  for (size_t i = 0; i < uids.size(); i += std::max<size_t>(per_selector, 1)) {
    const size_t end = std::min(uids.size(), i + std::max<size_t>(per_selector, 1));
    out.push_back(absl::StrCat("kueue.x-k8s.io/job-uid in (",
                               absl::StrJoin(uids.begin() + i, uids.begin() + end, ","), ")"));
  }
  return out;
}

std::string ObjectName(const nlohmann::json& object) {
  const nlohmann::json meta = Child(object, "metadata");
  return meta.is_object() ? Text(meta, "name") : std::string();
}

std::string DescribePods(const std::vector<nlohmann::json>& pods) {
  std::string out;
  for (const nlohmann::json& pod : pods) {
    const nlohmann::json status = Child(pod, "status");
    if (!status.is_object()) {
      continue;
    }
    std::string why = Text(status, "phase");
    const nlohmann::json containers = Child(status, "containerStatuses");
    if (containers.is_array() && !containers.empty()) {
      const nlohmann::json waiting = Child(Child(containers[0], "state"), "waiting");
      if (waiting.is_object()) {
        absl::StrAppend(&why, ": ", Text(waiting, "reason"), ": ", Text(waiting, "message"));
      }
    }
    const nlohmann::json conditions = Child(status, "conditions");
    if (conditions.is_array()) {
      for (const nlohmann::json& condition : conditions) {
        if (condition.is_object() && Text(condition, "status") == "False" &&
            !Text(condition, "message").empty()) {
          absl::StrAppend(&why, ": ", Text(condition, "reason"), ": ", Text(condition, "message"));
          break;
        }
      }
    }
    absl::StrAppend(&out, "; pod ", ObjectName(pod), ": ", why);
  }
  return out;
}

std::vector<ListedSlice> ReadSlices(const GkePool& pool, const std::vector<nlohmann::json>& jobsets,
                                    const std::vector<nlohmann::json>& workloads) {
  std::map<std::string, const nlohmann::json*> by_uid;
  for (const nlohmann::json& workload : workloads) {
    const nlohmann::json labels = Child(Child(workload, "metadata"), "labels");
    const std::string uid = labels.is_object() ? Text(labels, "kueue.x-k8s.io/job-uid") : "";
    if (!uid.empty()) {
      by_uid.emplace(uid, &workload);
    }
  }
  std::vector<ListedSlice> slices;
  for (const nlohmann::json& jobset : jobsets) {
    const nlohmann::json meta = Child(jobset, "metadata");
    if (!meta.is_object()) {
      continue;
    }
    ListedSlice slice;
    slice.name = Text(meta, "name");
    slice.index = SliceIndex(pool, slice.name);
    if (slice.index == 0) {
      continue;  // labelled as the pool's, but not a name TAE gives: not touched
    }
    const std::string uid = Text(meta, "uid");
    auto workload = uid.empty() ? by_uid.end() : by_uid.find(uid);
    slice.status =
        DescribeSlice(jobset, workload == by_uid.end() ? nlohmann::json() : *workload->second);
    slices.push_back(std::move(slice));
  }
  return slices;
}

}  // namespace tae::provider
