#include "agent/train/schedule.h"

#include <catch2/catch.hpp>
#include <cmath>

#include "agent/train/config.h"

namespace tae::train {
namespace {

TrainingConfig Config(Schedule schedule) {
  TrainingConfig config = DefaultTrainConfig().train;
  config.lr = 1.0;
  config.steps = 110;
  config.warmup = 10;
  config.schedule = schedule;
  return config;
}

TEST_CASE("warmup ramps linearly to the peak", "[schedule]") {
  for (Schedule s : {Schedule::kConstant, Schedule::kLinear, Schedule::kCosine}) {
    const TrainingConfig config = Config(s);
    CHECK(LearningRate(config, 0) == Approx(0.1));
    CHECK(LearningRate(config, 4) == Approx(0.5));
    CHECK(LearningRate(config, 9) == Approx(1.0));
    CHECK(LearningRate(config, 10) == Approx(1.0));
  }
}

TEST_CASE("constant, linear and cosine decay after warmup", "[schedule]") {
  CHECK(LearningRate(Config(Schedule::kConstant), 109) == Approx(1.0));
  const TrainingConfig linear = Config(Schedule::kLinear);
  CHECK(LearningRate(linear, 60) == Approx(0.5));
  CHECK(LearningRate(linear, 85) == Approx(0.25));
  CHECK(LearningRate(linear, 109) == Approx(0.01));
  const TrainingConfig cosine = Config(Schedule::kCosine);
  CHECK(LearningRate(cosine, 60) == Approx(0.5));
  CHECK(LearningRate(cosine, 35) == Approx(0.5 * (1.0 + std::cos(std::acos(-1.0) * 0.25))));
  CHECK(LearningRate(cosine, 109) < 0.001);
  CHECK(LearningRate(cosine, 109) > 0.0);
}

TEST_CASE("no warmup starts at the peak, warmup past the end never decays", "[schedule]") {
  TrainingConfig config = Config(Schedule::kCosine);
  config.warmup = 0;
  CHECK(LearningRate(config, 0) == Approx(1.0));
  config.warmup = 200;
  CHECK(LearningRate(config, 109) == Approx(110.0 / 200.0));
}

}  // namespace
}  // namespace tae::train
