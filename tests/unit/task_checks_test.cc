// Submit-time checks that a run's task fits train.vocab and train.seq_len
// (common/spec/task_checks): the minimum shape of every task, and how ParseSpec reports a
// violation.
#include "common/spec/task_checks.h"

#include <catch2/catch.hpp>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/spec/schema.h"
#include "common/spec/spec.h"
#include "tests/unit/spec_parse.h"

namespace tae::spec {
namespace {

using testing::ErrorOf;
using testing::MustParse;

nlohmann::json Config(const std::string& task, int64_t vocab, int64_t seq_len) {
  nlohmann::json config = DefaultConfig();
  config["train.task"] = task;
  config["train.vocab"] = vocab;
  config["train.seq_len"] = seq_len;
  return config;
}

// The smallest train.seq_len each task accepts (docs/tasks.md).
struct Minimum {
  std::string task;
  int64_t seq_len;
  std::string needs;
  int64_t vocab = 2;
  std::string vocab_needs;
};

const std::vector<Minimum>& Minimums() {
  static const std::vector<Minimum> minimums = {
      {"copy", 2, "a symbol, SEP and its copy", 2, ""},
      {"reverse", 4, "a sequence of at least 2 symbols, SEP and its rearrangement", 2, ""},
      {"sort", 4, "a sequence of at least 2 symbols, SEP and its rearrangement", 2, ""},
      {"assoc_recall", 8, "2 key-value pairs, SEP and 2 queries with their answers", 4,
       " (keys are the lower half of the symbols and values the upper half)"},
      {"induction", 5, "a block of 2 or 3 symbols and its repeat, so the length can vary", 2, ""},
      {"mod_add", 4, "one problem a + b = c is 5 tokens", 2, ""},
  };
  return minimums;
}

TEST_CASE("every task accepts the default shape", "[spec][tasks]") {
  for (const std::string task :
       {"copy", "reverse", "sort", "assoc_recall", "induction", "mod_add", "lm"}) {
    INFO(task);
    CHECK_FALSE(CheckTask(Config(task, 16, 32)).has_value());
  }
}

TEST_CASE("a train.seq_len below a task's minimum names the key and the need", "[spec][tasks]") {
  for (const Minimum& minimum : Minimums()) {
    INFO(minimum.task);
    CHECK_FALSE(CheckTask(Config(minimum.task, minimum.vocab, minimum.seq_len)).has_value());
    std::optional<CrossProblem> problem =
        CheckTask(Config(minimum.task, minimum.vocab, minimum.seq_len - 1));
    REQUIRE(problem.has_value());
    CHECK(problem->what == "train.seq_len: task " + minimum.task + " needs at least " +
                               std::to_string(minimum.seq_len) + " positions (" + minimum.needs +
                               "), got " + std::to_string(minimum.seq_len - 1));
    CHECK(problem->keys == std::vector<std::string_view>{"train.seq_len", "train.task"});
  }
}

TEST_CASE("generated tasks need their symbols, lm ignores train.vocab", "[spec][tasks]") {
  for (const Minimum& minimum : Minimums()) {
    INFO(minimum.task);
    std::optional<CrossProblem> problem = CheckTask(Config(minimum.task, minimum.vocab - 1, 32));
    REQUIRE(problem.has_value());
    CHECK(problem->what == "train.vocab: task " + minimum.task + " needs at least " +
                               std::to_string(minimum.vocab) + " symbols" + minimum.vocab_needs +
                               ", got " + std::to_string(minimum.vocab - 1));
    CHECK(problem->keys == std::vector<std::string_view>{"train.vocab", "train.task"});
  }
  CHECK_FALSE(CheckTask(Config("lm", 1, 2)).has_value());
}

TEST_CASE("a task too big for its sequence is refused at submit where it was set",
          "[spec][tasks][errors]") {
  CHECK(ErrorOf("name = \"x\"\n[train]\ntask = \"assoc_recall\"\nseq_len = 6\n") ==
        "study.toml:4:11: train.seq_len: task assoc_recall needs at least 8 positions (2 key-value "
        "pairs, SEP and 2 queries with their answers), got 6");
  CHECK(ErrorOf("name = \"x\"\n[train]\nseq_len = 4\n[[ablation]]\nname = \"ind\"\n"
                "\"train.task\" = \"induction\"\n") ==
        "study.toml:6:16: train.seq_len: task induction needs at least 5 positions (a block of 2 "
        "or 3 symbols and its repeat, so the length can vary), got 4");
  CHECK(ErrorOf("name = \"x\"\n[train]\ntask = \"assoc_recall\"\n", {"train.seq_len=7"}) ==
        "--set train.seq_len=7: train.seq_len: task assoc_recall needs at least 8 positions (2 "
        "key-value pairs, SEP and 2 queries with their answers), got 7");
  CHECK(MustParse("name = \"x\"\n[train]\ntask = \"induction\"\nseq_len = 5\n")
            .base.at("train.task") == "induction");
  CHECK(MustParse("name = \"x\"\n[train]\ntask = \"assoc_recall\"\nseq_len = 8\nvocab = 4\n")
            .base.at("train.seq_len") == 8);
  CHECK(ErrorOf("name = \"x\"\n[train]\ntask = \"assoc_recall\"\nvocab = 3\n") ==
        "study.toml:4:9: train.vocab: task assoc_recall needs at least 4 symbols (keys are the "
        "lower half of the symbols and values the upper half), got 3");
}

}  // namespace
}  // namespace tae::spec
