#pragma once

// Parsing helpers shared by the experiment-file tests (common/spec).

#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "common/spec/spec.h"

namespace tae::spec::testing {

inline constexpr char kPath[] = "study.toml";

// The parsed spec (fails the test if ParseSpec does).
inline Spec MustParse(const std::string& text, const std::vector<std::string>& sets = {}) {
  absl::StatusOr<Spec> spec = ParseSpec(text, kPath, sets);
  INFO(spec.status().ToString());
  REQUIRE(spec.ok());
  return *spec;
}

// The message of the error ParseSpec returns (fails the test if it succeeds).
inline std::string ErrorOf(const std::string& text, const std::vector<std::string>& sets = {}) {
  absl::StatusOr<Spec> spec = ParseSpec(text, kPath, sets);
  REQUIRE_FALSE(spec.ok());
  CHECK(spec.status().code() == absl::StatusCode::kInvalidArgument);
  return std::string(spec.status().message());
}

}  // namespace tae::spec::testing
