// The experiment file (docs/design.md §10): parse, validate and expand into runs.
//
// A Spec is the validated content of one experiment file. Configs are FLAT JSON objects whose
// keys are the full dotted names ("model.layers", "train.lr", "resources.labels", ...), with
// every key of the schema present (defaults filled in). A run's config additionally holds
// "train.seed"; the "train.seeds" list is experiment-level and lives in Spec::seeds.
//
// Errors are absl::InvalidArgumentError with one line "PATH:LINE:COL: what is wrong" (or
// "--set KEY=VALUE: what is wrong" for a bad override); only the first error is reported.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace tae::spec {

// The name of the implicit variant that runs the baseline config unchanged.
inline constexpr std::string_view kBaselineName = "baseline";

// One [[ablation]]: the baseline plus these overrides (flat dotted keys -> values).
struct Variant {
  std::string name;
  nlohmann::json overrides;
};

// One run to schedule: a variant at one seed, with its full flat config.
struct RunPlan {
  std::string variant;
  int64_t seed = 0;
  nlohmann::json config;
};

struct Spec {
  std::string name;
  std::string description;
  nlohmann::json base;             // full flat baseline config, without train.seeds/train.seed
  std::vector<int64_t> seeds;      // train.seeds, in file order
  std::vector<Variant> ablations;  // in file order; the baseline is implicit and not listed
};

// Parses and validates an experiment file. `path` is only used in messages. `overrides` are
// "KEY=VALUE" strings (`taectl submit --set`) applied to the baseline before the ablations, so
// the ablations inherit them. VALUE is TOML value syntax (4, 1e-3, true, "x", [0, 1]); text
// that is not a TOML value is taken as a bare string (rmsnorm).
absl::StatusOr<Spec> ParseSpec(std::string_view text, std::string_view path,
                               const std::vector<std::string>& overrides);

// Reads `path` and calls ParseSpec.
absl::StatusOr<Spec> ParseSpecFile(const std::string& path,
                                   const std::vector<std::string>& overrides);

// The runs of a spec: the baseline first, then the ablations in file order; each once per seed,
// seeds in order. Size: (1 + ablations) x seeds.
std::vector<RunPlan> ExpandRuns(const Spec& spec);

// The config of `variant` ("baseline" or an ablation name) at `seed`; null if no such variant.
nlohmann::json ResolveConfig(const Spec& spec, std::string_view variant, int64_t seed);

// A stable 16-hex-digit hash (FNV-1a 64) of the canonical content: name, description, base,
// seeds and ablations. Whitespace, comments and key order in the file do not change it.
std::string SpecHash(const Spec& spec);

// Every key an experiment file (or --set) may set, as full dotted names, in schema order.
std::vector<std::string> KnownKeys();

}  // namespace tae::spec
