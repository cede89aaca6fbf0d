#include "common/spec/task_checks.h"

#include <string>

#include "common/spec/text.h"

namespace tae::spec {

std::optional<CrossProblem> CheckTask(const nlohmann::json& config) {
  const std::string task = config.at("train.task").get<std::string>();
  const int64_t vocab = config.at("train.vocab").get<int64_t>();
  if (task == "copy" && vocab < 2) {
    return CrossProblem{Cat("train.vocab: task copy needs at least 2 symbols, got ", vocab),
                        {"train.vocab", "train.task"}};
  }
  return std::nullopt;
}

}  // namespace tae::spec
