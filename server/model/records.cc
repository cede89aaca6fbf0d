#include "server/model/records.h"

#include <cmath>
#include <limits>

#include "nlohmann/json.hpp"

namespace tae::model {
namespace {

constexpr std::pair<RunState, const char*> kRunStateNames[] = {
    {RunState::kQueued, "queued"},   {RunState::kAssigned, "assigned"},
    {RunState::kRunning, "running"}, {RunState::kSucceeded, "succeeded"},
    {RunState::kFailed, "failed"},   {RunState::kCancelled, "cancelled"},
    {RunState::kLost, "lost"},       {RunState::kPruned, "pruned"},
};

}  // namespace

const char* ToString(RunState state) {
  for (const auto& [value, name] : kRunStateNames) {
    if (value == state) {
      return name;
    }
  }
  return "unknown";
}

std::optional<RunState> RunStateFromString(std::string_view text) {
  for (const auto& [value, name] : kRunStateNames) {
    if (std::string_view(name) == text) {
      return value;
    }
  }
  return std::nullopt;
}

bool IsFinal(RunState state) {
  return state == RunState::kSucceeded || state == RunState::kFailed ||
         state == RunState::kCancelled || state == RunState::kPruned;
}

std::string ExperimentState(const RunCounts& counts) {
  if (counts.total == 0) {
    return "empty";
  }
  if (counts.running > 0 || counts.lost > 0) {
    return "running";
  }
  if (counts.queued == counts.total) {
    return "queued";
  }
  if (counts.queued > 0) {
    return "running";
  }
  if (counts.failed > 0) {
    return "failed";
  }
  if (counts.cancelled > 0) {
    return "cancelled";
  }
  return "succeeded";
}

}  // namespace tae::model

namespace tae::model {

std::optional<int64_t> TrainSteps(std::string_view config_json) {
  const nlohmann::json config = nlohmann::json::parse(config_json, nullptr, false);
  const auto steps = config.is_object() ? config.find("train.steps") : config.end();
  if (steps == config.end() || !steps->is_number_integer()) {
    return std::nullopt;
  }
  return steps->get<int64_t>();
}

std::string NonFiniteText(double value) {
  if (std::isnan(value)) {
    return "nan";
  }
  return value > 0 ? "inf" : "-inf";
}

double NonFiniteFromText(std::string_view text) {
  if (text == "inf") {
    return std::numeric_limits<double>::infinity();
  }
  if (text == "-inf") {
    return -std::numeric_limits<double>::infinity();
  }
  return std::numeric_limits<double>::quiet_NaN();
}

}  // namespace tae::model
