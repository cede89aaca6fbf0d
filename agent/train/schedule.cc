#include "agent/train/schedule.h"

#include <algorithm>
#include <cmath>

namespace tae::train {
namespace {

constexpr double kPi = 3.14159265358979323846;

}  // namespace

double LearningRate(const TrainingConfig& config, int64_t step) {
  const double peak = config.lr;
  if (step < config.warmup) {
    return peak * static_cast<double>(step + 1) / static_cast<double>(config.warmup);
  }
  const int64_t decay_steps = config.steps - config.warmup;
  if (config.schedule == Schedule::kConstant || decay_steps <= 0) {
    return peak;
  }
  const double progress = std::clamp(
      static_cast<double>(step - config.warmup) / static_cast<double>(decay_steps), 0.0, 1.0);
  if (config.schedule == Schedule::kLinear) {
    return peak * (1.0 - progress);
  }
  return peak * 0.5 * (1.0 + std::cos(kPi * progress));
}

}  // namespace tae::train
