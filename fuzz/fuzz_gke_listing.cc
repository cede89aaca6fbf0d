// libFuzzer target for what taed reads from a GKE cluster every round (server/provider/gke_status:
// ListItems, ReadSlices, DescribeSlice): `kubectl get jobsets -o json` and `kubectl get workloads
// -o json` answers, which a cluster, or something posing as one, writes.
//
// Input: arbitrary bytes; up to the first NUL byte is the JobSets answer, the rest the Workloads
// answer. Checks:
//  - nothing throws (a throw would end taed's provider thread);
//  - every slice read back is the pool's: its name is SliceName(pool, index) with index >= 1,
//    and it came from a JobSet of that name in the answer;
//  - at most one slice per JobSet item, and its state has a name.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <string>
#include <string_view>

#include "server/provider/gke_status.h"

namespace {

void Check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "fuzz_gke_listing: property violated: %s\n", what);
    std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const size_t split = input.find('\0');
  const std::string jobsets_text(input.substr(0, split));
  const std::string workloads_text(split == std::string_view::npos ? std::string_view()
                                                                   : input.substr(split + 1));
  tae::provider::GkePool pool;
  pool.name = "v5e";
  const auto jobsets = tae::provider::ListItems(jobsets_text);
  const auto workloads = tae::provider::ListItems(workloads_text);
  if (!jobsets.has_value()) {
    return 0;
  }
  std::set<std::string> named;
  for (const nlohmann::json& item : *jobsets) {
    if (item.is_object() && item.contains("metadata") && item["metadata"].is_object() &&
        item["metadata"].contains("name") && item["metadata"]["name"].is_string()) {
      named.insert(item["metadata"]["name"].get<std::string>());
    }
  }
  const auto slices = tae::provider::ReadSlices(
      pool, *jobsets, workloads.has_value() ? *workloads : std::vector<nlohmann::json>());
  Check(slices.size() <= jobsets->size(), "more slices than JobSets");
  for (const tae::provider::ListedSlice& slice : slices) {
    Check(slice.index >= 1, "a slice index below 1");
    Check(slice.name == tae::provider::SliceName(pool, slice.index), "a name not the pool's");
    Check(named.count(slice.name) == 1, "a slice no JobSet in the answer is named");
    Check(std::string(tae::provider::SliceStateName(slice.status.state)).size() > 0,
          "a state without a name");
  }
  return 0;
}
