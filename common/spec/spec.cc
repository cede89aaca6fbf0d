// ParseSpecFile, expansion into runs and the spec hash.
#include "common/spec/spec.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <memory>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/spec/schema.h"

namespace tae::spec {
namespace {

constexpr std::string_view kSeedKey = "train.seed";
constexpr std::string_view kHashVersion = "tae-spec-v1\n";

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  std::unique_ptr<FILE, int (*)(FILE*)> file(std::fopen(path.c_str(), "rb"), &std::fclose);
  if (file == nullptr) {
    return absl::ErrnoToStatus(errno, absl::StrCat(path, ": cannot open"));
  }
  std::string text;
  char buffer[1 << 16];
  size_t n = 0;
  while ((n = std::fread(buffer, 1, sizeof(buffer), file.get())) > 0) {
    text.append(buffer, n);
  }
  if (std::ferror(file.get())) {
    return absl::ErrnoToStatus(errno, absl::StrCat(path, ": cannot read"));
  }
  return text;
}

uint64_t Fnv1a64(std::string_view data) {
  constexpr uint64_t kOffsetBasis = 14695981039346656037ULL;
  constexpr uint64_t kPrime = 1099511628211ULL;
  uint64_t hash = kOffsetBasis;
  for (char c : data) {
    hash ^= static_cast<unsigned char>(c);
    hash *= kPrime;
  }
  return hash;
}

}  // namespace

absl::StatusOr<Spec> ParseSpecFile(const std::string& path,
                                   const std::vector<std::string>& overrides) {
  absl::StatusOr<std::string> text = ReadFile(path);
  if (!text.ok()) {
    return text.status();
  }
  return ParseSpec(*text, path, overrides);
}

nlohmann::json ResolveConfig(const Spec& spec, std::string_view variant, int64_t seed) {
  nlohmann::json config = spec.base;
  if (variant != kBaselineName) {
    auto it = std::find_if(spec.ablations.begin(), spec.ablations.end(),
                           [&](const Variant& v) { return v.name == variant; });
    if (it == spec.ablations.end()) {
      return nullptr;
    }
    config.update(it->overrides);
  }
  config[std::string(kSeedKey)] = seed;
  return config;
}

std::vector<RunPlan> ExpandRuns(const Spec& spec) {
  std::vector<std::string_view> variants = {kBaselineName};
  for (const Variant& ablation : spec.ablations) {
    variants.push_back(ablation.name);
  }
  std::vector<RunPlan> runs;
  runs.reserve(variants.size() * spec.seeds.size());
  for (std::string_view variant : variants) {
    for (int64_t seed : spec.seeds) {
      runs.push_back(RunPlan{std::string(variant), seed, ResolveConfig(spec, variant, seed)});
    }
  }
  return runs;
}

std::string SpecHash(const Spec& spec) {
  nlohmann::json ablations = nlohmann::json::array();
  for (const Variant& ablation : spec.ablations) {
    ablations.push_back({{"name", ablation.name}, {"overrides", ablation.overrides}});
  }
  nlohmann::json canonical = {{"name", spec.name},
                              {"description", spec.description},
                              {"base", spec.base},
                              {"seeds", spec.seeds},
                              {"ablations", ablations}};
  std::string text = std::string(kHashVersion) +
                     canonical.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  return absl::StrCat(absl::Hex(Fnv1a64(text), absl::kZeroPad16));
}

std::vector<std::string> KnownKeys() {
  std::vector<std::string> keys;
  for (const KeyInfo& key : Schema()) {
    keys.emplace_back(key.name);
  }
  return keys;
}

}  // namespace tae::spec
