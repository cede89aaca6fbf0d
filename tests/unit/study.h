#pragma once

// Studies to store in a test, with a spec text naming them and one slot a run.

#include <string>

#include "server/model/records.h"

namespace tae::testing {

// `runs` runs of "baseline", seeds 0, 1, 2, ...
inline model::NewExperiment OneVariantStudy(const std::string& name, int runs) {
  model::NewExperiment exp;
  exp.name = name;
  exp.spec_hash = name;
  exp.spec_text = "name = \"" + name + "\"";
  for (int i = 0; i < runs; ++i) {
    exp.runs.push_back({"baseline", i, "{}", {1, 0, 1, {}}});
  }
  return exp;
}

// `runs` runs, variants "baseline" and "ablated" in turn, seeds 0, 0, 1, 1, ...
inline model::NewExperiment TwoVariantStudy(const std::string& name, int runs) {
  model::NewExperiment exp = OneVariantStudy(name, runs);
  for (int i = 0; i < runs; ++i) {
    exp.runs[static_cast<size_t>(i)].variant = i % 2 == 0 ? "baseline" : "ablated";
    exp.runs[static_cast<size_t>(i)].seed = i / 2;
  }
  return exp;
}

}  // namespace tae::testing
