#pragma once

// The learning-rate schedule: linear warmup from lr/warmup to lr over the first `warmup` steps,
// then constant, or a linear / cosine decay that reaches 0 at step `steps`.

#include <cstdint>

#include "agent/train/config.h"

namespace tae::train {

// Learning rate of the optimizer step with 0-based index `step` (0 <= step < steps).
double LearningRate(const TrainingConfig& config, int64_t step);

}  // namespace tae::train
