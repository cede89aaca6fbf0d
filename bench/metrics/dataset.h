#pragma once

// The query benchmark's data set: experiments submitted through a real taed, then filled in
// straight in SQLite with what ingest would have stored for finished runs.

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"

namespace tae::bench {

struct DatasetOptions {
  int big_runs = 500;
  int big_variants = 20;  // the large experiment's variants (baseline + ablations)
  int small_experiments = 50;
  int steps = 1500;
};

struct Dataset {
  std::string big_experiment;    // name of the large experiment
  std::string small_experiment;  // name of one small experiment
  int64_t experiments = 0;
  int64_t runs = 0;
  int64_t points = 0;
};

// Makes the data set in `home` (taed must not be running there), or reuses the one a previous
// call with the same options left there.
absl::StatusOr<Dataset> MakeDataset(const std::string& home, const DatasetOptions& options);

}  // namespace tae::bench
