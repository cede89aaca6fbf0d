// Every study in examples/ must submit (the spec parser accepts it) and every run it expands to
// must be one tae-train accepts and can build: a broken example is the first thing a new user
// would hit.

#include <catch2/catch.hpp>
#include <filesystem>
#include <string>
#include <vector>

#include "agent/train/config.h"
#include "agent/train/model.h"
#include "agent/train/tasks.h"
#include "common/spec/spec.h"

namespace tae::train {
namespace {

TEST_CASE("every example study parses, and tae-train accepts and builds each of its runs",
          "[examples]") {
  std::vector<std::string> files;
  for (const auto& entry : std::filesystem::directory_iterator(TAE_EXAMPLES_DIR)) {
    if (entry.path().extension() == ".toml") {
      files.push_back(entry.path().string());
    }
  }
  REQUIRE(files.size() >= 4);
  for (const std::string& file : files) {
    INFO(file);
    absl::StatusOr<spec::Spec> parsed = spec::ParseSpecFile(file, {});
    REQUIRE(parsed.ok());
    std::vector<spec::RunPlan> runs = spec::ExpandRuns(*parsed);
    CHECK(runs.size() >= 2);
    for (const spec::RunPlan& run : runs) {
      INFO(run.variant << " seed " << run.seed);
      nlohmann::json config = run.config;
      config["train.seed"] = run.seed;
      absl::StatusOr<TrainConfig> train = ParseTrainConfig(config);
      REQUIRE(train.ok());
      if (train->train.task == TaskKind::kLm) {
        continue;  // needs the text; covered by the lm tests
      }
      absl::StatusOr<std::unique_ptr<Task>> task = MakeTask(*train);
      REQUIRE(task.ok());
      TransformerLM model(train->model, (*task)->VocabSize(), train->train.seq_len);
      CHECK(model->ParameterCount() > 0);
    }
  }
}

}  // namespace
}  // namespace tae::train
