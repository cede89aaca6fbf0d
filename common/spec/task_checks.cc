#include "common/spec/task_checks.h"

#include <cstdint>
#include <string>
#include <string_view>

#include "common/spec/text.h"

namespace tae::spec {
namespace {

// The smallest train.seq_len of each generated task and what the positions are for; the layouts
// are in docs/tasks.md. tae-train's task constructors ask the same table (CheckTaskShape).
struct TaskNeeds {
  std::string_view task;
  int64_t min_seq_len;
  std::string_view needs;
  int64_t min_vocab = 2;
  std::string_view vocab_needs = "";  // what the symbols are for, when min_vocab > 2
};

constexpr TaskNeeds kNeeds[] = {
    {"copy", 2, "a symbol, SEP and its copy", 2, ""},
    {"reverse", 4, "a sequence of at least 2 symbols, SEP and its rearrangement", 2, ""},
    {"sort", 4, "a sequence of at least 2 symbols, SEP and its rearrangement", 2, ""},
    {"assoc_recall", 8, "2 key-value pairs, SEP and 2 queries with their answers", 4,
     "keys are the lower half of the symbols and values the upper half"},
    {"induction", 5, "a block of 2 or 3 symbols and its repeat, so the length can vary", 2, ""},
    {"mod_add", 4, "one problem a + b = c is 5 tokens", 2, ""},
};

}  // namespace

std::optional<CrossProblem> CheckTask(const nlohmann::json& config) {
  return CheckTaskShape(config.at("train.task").get<std::string>(),
                        config.at("train.vocab").get<int64_t>(),
                        config.at("train.seq_len").get<int64_t>());
}

std::optional<CrossProblem> CheckTaskShape(std::string_view task, int64_t vocab, int64_t seq_len) {
  for (const TaskNeeds& needs : kNeeds) {
    if (needs.task != task) {
      continue;
    }
    if (vocab < needs.min_vocab) {
      const std::string why =
          needs.vocab_needs.empty() ? std::string() : Cat(" (", needs.vocab_needs, ")");
      return CrossProblem{Cat("train.vocab: task ", task, " needs at least ", needs.min_vocab,
                              " symbols", why, ", got ", vocab),
                          {"train.vocab", "train.task"}};
    }
    if (seq_len < needs.min_seq_len) {
      return CrossProblem{Cat("train.seq_len: task ", task, " needs at least ", needs.min_seq_len,
                              " positions (", needs.needs, "), got ", seq_len),
                          {"train.seq_len", "train.task"}};
    }
  }
  return std::nullopt;
}

}  // namespace tae::spec
