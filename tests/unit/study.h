#pragma once

// A study to store in a test: `runs` runs, variants "baseline" and "ablated" in turn, seeds 0, 0,
// 1, 1, ..., one slot each, spec text naming it.

#include <string>

#include "server/model/records.h"

namespace tae::testing {

inline model::NewExperiment TwoVariantStudy(const std::string& name, int runs) {
  model::NewExperiment exp;
  exp.name = name;
  exp.spec_hash = name;
  exp.spec_text = "name = \"" + name + "\"";
  for (int i = 0; i < runs; ++i) {
    exp.runs.push_back({i % 2 == 0 ? "baseline" : "ablated", i / 2, "{}", {1, 0, 1, {}}});
  }
  return exp;
}

}  // namespace tae::testing
