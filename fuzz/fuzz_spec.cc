// libFuzzer target for the experiment-file parser (common/spec/spec.h).
//
// Input: zero or more leading lines "--set KEY=VALUE", passed to ParseSpec as overrides (without
// the "--set " prefix), then the TOML text of the experiment file. For every accepted spec it
// checks what spec.h documents: at most kMaxRuns runs; the same text gives the same SpecHash, 16
// hex digits; the [job] command's placeholders parse; a snapshot (set as taed would for a [job]
// code) changes the hash; ExpandRuns yields grid points x variants x seeds runs whose configs are
// ResolveConfig's (plus the expanded command and the snapshot) and whose names are
// GridVariantName's. Specs of more than kMaxExpandedRuns runs are not expanded, to keep
// executions fast.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "common/spec/spec.h"

namespace {

constexpr std::string_view kSetPrefix = "--set ";
constexpr size_t kMaxExpandedRuns = 1000;
constexpr size_t kMaxCheckedRuns = 64;  // runs whose config is recomputed with ResolveConfig

void Fail(const char* what) {
  std::fprintf(stderr, "fuzz_spec: property violated: %s\n", what);
  std::abort();
}

void Check(bool ok, const char* what) {
  if (!ok) {
    Fail(what);
  }
}

bool IsLowerHex(std::string_view text) {
  for (char c : text) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) {
      return false;
    }
  }
  return true;
}

// Splits the input into the --set overrides and the file text.
void SplitInput(std::string_view input, std::vector<std::string>* overrides,
                std::string_view* text) {
  while (input.substr(0, kSetPrefix.size()) == kSetPrefix) {
    size_t end = input.find('\n');
    std::string_view line =
        input.substr(kSetPrefix.size(), end == std::string_view::npos ? std::string_view::npos
                                                                      : end - kSetPrefix.size());
    overrides->emplace_back(line);
    input = end == std::string_view::npos ? std::string_view() : input.substr(end + 1);
  }
  *text = input;
}

void CheckRuns(const tae::spec::Spec& spec, size_t expected) {
  std::vector<tae::spec::RunPlan> runs = tae::spec::ExpandRuns(spec);
  Check(runs.size() == expected, "ExpandRuns size != grid points x variants x seeds");
  for (size_t i = 0; i < runs.size() && i < kMaxCheckedRuns; ++i) {
    const tae::spec::RunPlan& run = runs[i];
    Check(run.config.is_object(), "run config is not an object");
    auto seed = run.config.find("train.seed");
    Check(seed != run.config.end() && seed->is_number_integer() && seed->get<int64_t>() == run.seed,
          "run config train.seed != RunPlan::seed");
    // ExpandRuns adds the expanded [job] command and the snapshot to ResolveConfig's config.
    nlohmann::json expected = tae::spec::ResolveConfig(spec, run.ablation, run.seed, run.grid);
    if (!spec.job_command.empty()) {
      expected["job.command"] = tae::spec::ExpandCommand(spec.job_command, expected);
    }
    if (!spec.snapshot_id.empty()) {
      expected["job.snapshot"] = spec.snapshot_id;
    }
    Check(expected == run.config, "ResolveConfig(ablation, seed, grid) != ExpandRuns config");
    Check(run.variant == tae::spec::GridVariantName(run.ablation, run.grid, spec.grid),
          "RunPlan::variant != GridVariantName");
    (void)tae::spec::BaselineFor(run.variant);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view input(reinterpret_cast<const char*>(data), size);
  std::vector<std::string> overrides;
  std::string_view text;
  SplitInput(input, &overrides, &text);

  absl::StatusOr<tae::spec::Spec> spec = tae::spec::ParseSpec(text, "fuzz.toml", overrides);
  if (!spec.ok()) {
    Check(!spec.status().message().empty(), "error without a message");
    return 0;
  }

  double points = 1;
  for (const tae::spec::GridAxis& axis : spec->grid) {
    Check(!axis.values.empty(), "grid axis without values");
    points *= static_cast<double>(axis.values.size());
  }
  const double runs = points * static_cast<double>(1 + spec->ablations.size()) *
                      static_cast<double>(spec->seeds.size());
  Check(!spec->seeds.empty(), "accepted spec without seeds");
  Check(runs <= static_cast<double>(tae::spec::kMaxRuns), "accepted spec over kMaxRuns runs");

  const std::string hash = tae::spec::SpecHash(*spec);
  Check(hash.size() == 16 && IsLowerHex(hash), "SpecHash is not 16 lowercase hex digits");
  absl::StatusOr<tae::spec::Spec> again = tae::spec::ParseSpec(text, "other.toml", overrides);
  Check(again.ok(), "the same text is accepted once and refused once");
  Check(tae::spec::SpecHash(*again) == hash, "SpecHash differs for the same text");

  if (!spec->job_command.empty()) {
    Check(tae::spec::CommandPlaceholders(spec->job_command).ok(),
          "accepted [job] command whose placeholders do not parse");
  }
  if (runs <= static_cast<double>(kMaxExpandedRuns)) {
    if (!spec->job_code.empty()) {
      spec->snapshot_id = std::string(64, 'a');  // as taed sets it after mounting the code
      Check(tae::spec::SpecHash(*spec) != hash, "SpecHash ignores the snapshot");
    }
    CheckRuns(*spec, static_cast<size_t>(runs));
  }
  return 0;
}
