// Checkpoints and exact resume: a run stopped after any step and restarted from its checkpoint
// emits exactly the metrics of the uninterrupted run from then on; head importance scores.

#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "agent/train/checkpoint.h"
#include "agent/train/config.h"
#include "agent/train/copy_task.h"
#include "agent/train/head_importance.h"
#include "agent/train/metrics_sink.h"
#include "agent/train/threads.h"
#include "agent/train/trainer.h"  // before Catch: libtorch's glog defines CHECK too
#include "agent/train/trainer.h"
#include "nlohmann/json.hpp"
#include "tests/train/spec_fixture.h"

namespace tae::train {
namespace {

// Dropout on, so the torch RNG state matters as much as the data stream.
nlohmann::json ResumeSpec() {
  ConfigureThreads(1);
  nlohmann::json spec = testing::DefaultSpec();
  spec["model.d_model"] = 32;
  spec["model.dropout"] = 0.1;
  spec["train.vocab"] = 8;
  spec["train.seq_len"] = 16;
  spec["train.batch_size"] = 16;
  spec["train.steps"] = 60;
  spec["train.warmup"] = 10;
  spec["train.eval_every"] = 20;
  spec["train.eval_batches"] = 2;
  spec["train.checkpoint_every"] = 25;
  return spec;
}

class TempDir {
 public:
  TempDir() {
    char pattern[] = "/tmp/tae_resume_XXXXXX";
    REQUIRE(::mkdtemp(pattern) != nullptr);
    path_ = pattern;
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

using Points = std::map<std::pair<int64_t, std::string>, double>;

struct Outcome {
  absl::StatusOr<TrainSummary> summary;
  Points points;  // (step, key) -> value, perf/* left out (timings)
};

Outcome RunOnce(const nlohmann::json& spec, const std::string& checkpoint_dir,
                std::function<bool(int64_t)> should_stop) {
  absl::StatusOr<TrainConfig> config = ParseTrainConfig(spec);
  REQUIRE(config.ok());
  const TrainingConfig& t = config->train;
  CopyTask task(t.vocab, t.seq_len, t.batch_size, t.eval_batches, t.seed);
  char path[] = "/tmp/tae_resume_metrics_XXXXXX";
  const int fd = ::mkstemp(path);
  REQUIRE(fd >= 0);
  MetricsSink sink(fd);
  TrainerOptions options;
  options.checkpoint_dir = checkpoint_dir;
  options.fingerprint = ConfigFingerprint(spec);
  options.should_stop = std::move(should_stop);
  Trainer trainer(*config, &task, &sink, nullptr, options);
  Outcome outcome{trainer.Run(), {}};
  ::close(fd);
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) {
    nlohmann::json j = nlohmann::json::parse(line);
    const int64_t step = j["step"].get<int64_t>();
    for (const auto& [key, value] : j.items()) {
      if (key != "step" && key.rfind("perf/", 0) != 0) {
        outcome.points[{step, key}] = value.get<double>();
      }
    }
  }
  std::remove(path);
  return outcome;
}

TEST_CASE("a run stopped after any step resumes to exactly the uninterrupted losses",
          "[trainer][resume]") {
  const nlohmann::json spec = ResumeSpec();
  TempDir reference_dir;
  Outcome reference = RunOnce(spec, reference_dir.path(), nullptr);
  REQUIRE(reference.summary.ok());
  CHECK(reference.summary->resumed_from == 0);
  CHECK(std::filesystem::exists(CheckpointPath(reference_dir.path())));

  // 33: between scheduled checkpoints and off the 10-step log grid; 50: right on a checkpoint
  // and an eval step.
  for (int64_t stop_after : {1, 33, 50}) {
    INFO("stopped after step " << stop_after);
    TempDir dir;
    Outcome first =
        RunOnce(spec, dir.path(), [stop_after](int64_t step) { return step == stop_after; });
    REQUIRE(first.summary.ok());
    CHECK(first.summary->interrupted);
    for (const auto& [point, value] : first.points) {
      CHECK(point.first <= stop_after);
    }
    Outcome second = RunOnce(spec, dir.path(), nullptr);
    INFO(second.summary.status().ToString());
    REQUIRE(second.summary.ok());
    CHECK_FALSE(second.summary->interrupted);
    CHECK(second.summary->resumed_from == stop_after);
    // Together the two halves emitted every point of the reference, bit for bit.
    Points joined = first.points;
    for (const auto& [point, value] : second.points) {
      if (point.first > 0) {
        joined[point] = value;
      }
    }
    REQUIRE(joined.size() == reference.points.size());
    for (const auto& [point, value] : reference.points) {
      INFO(point.second << " at step " << point.first);
      REQUIRE(joined.count(point) == 1);
      CHECK(joined[point] == value);
    }
    CHECK(second.summary->final_eval.loss == reference.summary->final_eval.loss);
  }
}

TEST_CASE("a checkpoint of another config is refused, a finished run just reports again",
          "[trainer][resume]") {
  nlohmann::json spec = ResumeSpec();
  spec["train.steps"] = 20;
  TempDir dir;
  Outcome done = RunOnce(spec, dir.path(), nullptr);
  REQUIRE(done.summary.ok());
  Outcome again = RunOnce(spec, dir.path(), nullptr);
  REQUIRE(again.summary.ok());
  CHECK(again.summary->resumed_from == 20);
  CHECK(again.summary->final_eval.loss == done.summary->final_eval.loss);
  CHECK(again.points.count({20, "eval/loss"}) == 1);

  spec["train.lr"] = 0.001;
  Outcome other = RunOnce(spec, dir.path(), nullptr);
  REQUIRE_FALSE(other.summary.ok());
  CHECK(other.summary.status().code() == absl::StatusCode::kFailedPrecondition);
  CHECK(std::string(other.summary.status().message()).find("different run config") !=
        std::string::npos);

  // Thread count and reporting knobs are not part of the identity.
  nlohmann::json same = ResumeSpec();
  same["train.steps"] = 20;
  same["train.threads"] = 1;
  same["train.head_importance"] = true;
  nlohmann::json base = ResumeSpec();
  base["train.steps"] = 20;
  CHECK(ConfigFingerprint(same) == ConfigFingerprint(base));
}

TEST_CASE("a truncated checkpoint is a clear error", "[trainer][resume]") {
  nlohmann::json spec = ResumeSpec();
  spec["train.steps"] = 10;
  TempDir dir;
  REQUIRE(RunOnce(spec, dir.path(), nullptr).summary.ok());
  const std::string path = CheckpointPath(dir.path());
  std::filesystem::resize_file(path, std::filesystem::file_size(path) / 2);
  Outcome broken = RunOnce(spec, dir.path(), nullptr);
  REQUIRE_FALSE(broken.summary.ok());
  CHECK(broken.summary.status().code() == absl::StatusCode::kDataLoss);
}

TEST_CASE("head importance scores every kept head both ways", "[trainer][heads]") {
  nlohmann::json spec = ResumeSpec();
  spec["model.dropout"] = 0.0;
  spec["model.prune_heads"] = {{"1", {2}}};
  spec["train.steps"] = 80;
  spec["train.head_importance"] = true;
  Outcome outcome = RunOnce(spec, "", nullptr);
  REQUIRE(outcome.summary.ok());
  std::map<int64_t, double> squared_per_layer;
  for (int64_t layer : {0, 1}) {
    for (int64_t head = 0; head < 4; ++head) {
      const bool pruned = layer == 1 && head == 2;
      INFO("L" << layer << "H" << head);
      CHECK(outcome.points.count({80, MaskedHeadKey(layer, head)}) == (pruned ? 0 : 1));
      CHECK(outcome.points.count({80, GradientHeadKey(layer, head)}) == (pruned ? 0 : 1));
      if (!pruned) {
        const double g = outcome.points[{80, GradientHeadKey(layer, head)}];
        CHECK(g >= 0.0);
        squared_per_layer[layer] += g * g;
      }
    }
  }
  for (const auto& [layer, sum] : squared_per_layer) {
    CHECK(sum == Approx(1.0));  // normalised per layer
  }
}

TEST_CASE("masking a head the model relies on costs loss, the score says which", "[heads]") {
  // A 1-layer model with one head left that has learned the copy (chance is 1/8): masking that
  // head must hurt a lot. Whether a given seed settles within 400 steps at lr 0.01 is a matter of
  // its trajectory, which float rounding (the CPU's sgemm kernels) can tip: seed 0 stays at
  // eval/acc 0.34-0.58 here, seeds 1-5 reach 0.89-1.0 with masking costs of 4-7.6 nats. The
  // property is about a head the model relies on, so the test takes the first of seeds 1-5 whose
  // model has learned the copy, and requires that one of them has.
  nlohmann::json spec = ResumeSpec();
  spec["model.layers"] = 1;
  spec["model.heads"] = 2;
  spec["model.dropout"] = 0.0;
  spec["model.prune_heads"] = {{"0", {1}}};
  spec["train.steps"] = 400;
  spec["train.lr"] = 0.01;
  spec["train.head_importance"] = true;
  std::optional<Outcome> learned;
  for (int64_t seed = 1; seed <= 5 && !learned; ++seed) {
    spec["train.seed"] = seed;
    Outcome outcome = RunOnce(spec, "", nullptr);
    REQUIRE(outcome.summary.ok());
    UNSCOPED_INFO("seed " << seed << ": eval/acc " << outcome.summary->final_eval.accuracy);
    if (outcome.summary->final_eval.accuracy > 0.8) {  // the head does the copy
      learned = std::move(outcome);
    }
  }
  REQUIRE(learned.has_value());
  const double masked = learned->points[{400, MaskedHeadKey(0, 0)}];
  const double gradient = learned->points[{400, GradientHeadKey(0, 0)}];
  CHECK(masked > 0.5);  // nats, back towards ln(8) = 2.08
  CHECK(gradient == Approx(1.0));
}

}  // namespace
}  // namespace tae::train
