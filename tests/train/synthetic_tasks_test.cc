// The generated tasks reverse, sort, assoc_recall, induction and mod_add (docs/tasks.md): each
// row's layout and answers recomputed independently here, the streams, hiding for bidirectional
// models, checkpointed stream positions, and agreement with the submit-time shape checks.

#include <algorithm>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "agent/train/config.h"
#include "agent/train/tasks.h"
#include "common/spec/task_checks.h"
#include "tests/train/spec_fixture.h"

// clang-format off
// After the libtorch headers: they pull in glog, whose CHECK (abort on failure) would otherwise
// replace Catch's.
#include <catch2/catch.hpp>
// clang-format on

namespace tae::train {
namespace {

constexpr int64_t kVocab = 16;
constexpr int64_t kSeqLen = 32;
// Special tokens after the symbols (the same ids for every task).
constexpr int64_t kSep = kVocab;
constexpr int64_t kPad = kVocab + 1;
constexpr int64_t kMask = kVocab + 2;
constexpr int64_t kPlus = kVocab + 3;
constexpr int64_t kEq = kVocab + 4;

const std::vector<TaskKind> kGenerated = {TaskKind::kReverse, TaskKind::kSort,
                                          TaskKind::kAssocRecall, TaskKind::kInduction,
                                          TaskKind::kModAdd};

struct Options {
  Options& Vocab(int64_t value) {
    vocab = value;
    return *this;
  }
  Options& SeqLen(int64_t value) {
    seq_len = value;
    return *this;
  }
  Options& BatchSize(int64_t value) {
    batch_size = value;
    return *this;
  }
  Options& Seed(uint64_t value) {
    seed = value;
    return *this;
  }
  Options& Bidirectional() {
    causal = false;
    return *this;
  }

  int64_t vocab = kVocab;
  int64_t seq_len = kSeqLen;
  int64_t batch_size = 8;
  int64_t eval_batches = 2;
  uint64_t seed = 0;
  bool causal = true;
};

TrainConfig Config(TaskKind kind, const Options& options) {
  TrainConfig config = DefaultTrainConfig();
  config.train.task = kind;
  config.train.vocab = options.vocab;
  config.train.seq_len = options.seq_len;
  config.train.batch_size = options.batch_size;
  config.train.eval_batches = options.eval_batches;
  config.train.seed = options.seed;
  config.model.causal = options.causal;
  return config;
}

std::unique_ptr<Task> Make(TaskKind kind, const Options& options = Options()) {
  absl::StatusOr<std::unique_ptr<Task>> task = MakeTask(Config(kind, options));
  INFO(TaskName(kind) << ": " << task.status().ToString());
  REQUIRE(task.ok());
  return *std::move(task);
}

std::vector<int64_t> Values(const torch::Tensor& tensor) {
  torch::Tensor flat = tensor.contiguous().to(torch::kLong);
  return std::vector<int64_t>(flat.data_ptr<int64_t>(), flat.data_ptr<int64_t>() + flat.numel());
}

// One row of a causal batch: the seq_len + 1 tokens (inputs, then the last target) and the
// scored input positions.
struct Row {
  std::vector<int64_t> tokens;
  std::vector<int64_t> scored;
};

std::vector<Row> Rows(const Batch& batch) {
  std::vector<Row> rows;
  for (int64_t b = 0; b < batch.inputs.size(0); ++b) {
    Row row;
    row.tokens = Values(batch.inputs[b]);
    row.tokens.push_back(batch.targets[b][-1].item<int64_t>());
    std::vector<int64_t> mask = Values(batch.mask[b]);
    for (size_t p = 0; p < mask.size(); ++p) {
      if (mask[p] != 0) {
        row.scored.push_back(static_cast<int64_t>(p));
      }
    }
    rows.push_back(std::move(row));
  }
  return rows;
}

std::vector<int64_t> Range(int64_t first, int64_t last, int64_t step = 1) {
  std::vector<int64_t> out;
  for (int64_t i = first; i <= last; i += step) {
    out.push_back(i);
  }
  return out;
}

std::vector<int64_t> Slice(const std::vector<int64_t>& v, int64_t begin, int64_t end) {
  return std::vector<int64_t>(v.begin() + begin, v.begin() + end);
}

bool Equal(const Batch& a, const Batch& b) {
  return torch::equal(a.inputs, b.inputs) && torch::equal(a.targets, b.targets) &&
         torch::equal(a.mask, b.mask);
}

TEST_CASE("generated tasks are next-token prediction with special tokens after the symbols",
          "[tasks][synthetic]") {
  for (TaskKind kind : kGenerated) {
    INFO(TaskName(kind));
    std::unique_ptr<Task> task = Make(kind);
    CHECK(task->VocabSize() == kVocab + (kind == TaskKind::kModAdd ? 5 : 3));
    CHECK(task->ChanceAccuracy() == Approx(1.0 / kVocab));
    Batch batch = task->NextTrainBatch();
    REQUIRE(batch.inputs.sizes() == torch::IntArrayRef({8, kSeqLen}));
    REQUIRE(batch.targets.sizes() == torch::IntArrayRef({8, kSeqLen}));
    REQUIRE(batch.mask.sizes() == torch::IntArrayRef({8, kSeqLen}));
    CHECK(batch.inputs.dtype() == torch::kLong);
    CHECK(batch.mask.dtype() == torch::kFloat);
    CHECK(torch::equal(batch.targets.slice(1, 0, kSeqLen - 1), batch.inputs.slice(1, 1, kSeqLen)));
    CHECK(((batch.mask == 0) | (batch.mask == 1)).all().item<bool>());
    CHECK((batch.mask.sum(1) > 0).all().item<bool>());
    CHECK((batch.inputs >= 0).all().item<bool>());
    CHECK((batch.inputs < task->VocabSize()).all().item<bool>());
    CHECK((batch.inputs != kMask).all().item<bool>());  // causal: nothing hidden
    // Every answer is a symbol.
    CHECK((batch.targets.masked_select(batch.mask > 0) < kVocab).all().item<bool>());
  }
}

TEST_CASE("reverse rows are  s SEP reversed(s)  scored on the reversal", "[tasks][synthetic]") {
  for (int64_t seq_len : {kSeqLen, int64_t{9}}) {
    INFO("seq_len " << seq_len);
    const int64_t length = seq_len / 2;
    std::unique_ptr<Task> task = Make(TaskKind::kReverse, Options().SeqLen(seq_len));
    for (const Row& row : Rows(task->NextTrainBatch())) {
      std::vector<int64_t> s = Slice(row.tokens, 0, length);
      CHECK(std::all_of(s.begin(), s.end(), [](int64_t t) { return t < kVocab; }));
      CHECK(row.tokens[length] == kSep);
      std::reverse(s.begin(), s.end());
      CHECK(Slice(row.tokens, length + 1, 2 * length + 1) == s);
      CHECK(row.scored == Range(length, 2 * length - 1));
      if (seq_len % 2 == 1) {
        CHECK(row.tokens.back() == kPad);
      }
    }
  }
}

TEST_CASE("sort rows are  s SEP sorted(s)  scored on the sorted part", "[tasks][synthetic]") {
  std::unique_ptr<Task> task = Make(TaskKind::kSort, Options().Vocab(5).SeqLen(12));
  bool some_row_was_unsorted = false;
  for (const Row& row : Rows(task->NextTrainBatch())) {
    std::vector<int64_t> s = Slice(row.tokens, 0, 6);
    some_row_was_unsorted |= !std::is_sorted(s.begin(), s.end());
    CHECK(row.tokens[6] == 5);  // SEP = vocab
    std::sort(s.begin(), s.end());
    CHECK(Slice(row.tokens, 7, 13) == s);
    CHECK(row.scored == Range(6, 11));
  }
  CHECK(some_row_was_unsorted);
}

TEST_CASE("assoc_recall answers each query with the value paired with its key",
          "[tasks][synthetic]") {
  struct Case {
    int64_t vocab, seq_len, pairs, queries;
  };
  // keys: the lower vocab / 2 symbols; values: the rest
  for (Case c : {Case{kVocab, kSeqLen, 8, 8}, Case{5, kSeqLen, 2, 14}, Case{kVocab, 11, 2, 3}}) {
    INFO("vocab " << c.vocab << " seq_len " << c.seq_len);
    std::unique_ptr<Task> task =
        Make(TaskKind::kAssocRecall, Options().Vocab(c.vocab).SeqLen(c.seq_len).BatchSize(16));
    std::set<int64_t> queried_pairs;
    for (const Row& row : Rows(task->NextTrainBatch())) {
      std::map<int64_t, int64_t> value_of;
      for (int64_t i = 0; i < c.pairs; ++i) {
        const int64_t key = row.tokens[2 * i];
        CHECK(key < c.vocab / 2);
        CHECK(row.tokens[2 * i + 1] >= c.vocab / 2);
        CHECK(row.tokens[2 * i + 1] < c.vocab);
        CHECK(value_of.count(key) == 0);  // keys are distinct within the row
        value_of[key] = row.tokens[2 * i + 1];
      }
      CHECK(row.tokens[2 * c.pairs] == c.vocab);  // SEP
      CHECK(row.scored == Range(2 * c.pairs + 1, 2 * (c.pairs + c.queries) - 1, 2));
      for (int64_t p : row.scored) {
        const int64_t key = row.tokens[static_cast<size_t>(p)];
        REQUIRE(value_of.count(key) == 1);
        CHECK(row.tokens[static_cast<size_t>(p + 1)] == value_of[key]);
        for (int64_t i = 0; i < c.pairs; ++i) {
          if (row.tokens[2 * i] == key) {
            queried_pairs.insert(i);
          }
        }
      }
      for (size_t i = static_cast<size_t>(2 * (c.pairs + c.queries) + 1); i < row.tokens.size();
           ++i) {
        CHECK(row.tokens[i] == c.vocab + 1);  // PAD
      }
    }
    CHECK(static_cast<int64_t>(queried_pairs.size()) == c.pairs);  // every pair gets queried
  }
}

TEST_CASE("induction rows repeat a block of random length to the end", "[tasks][synthetic]") {
  std::unique_ptr<Task> task = Make(TaskKind::kInduction, Options().BatchSize(64));
  std::set<int64_t> block_lengths;
  for (const Row& row : Rows(task->NextTrainBatch())) {
    // Scored: inputs n .. T-1, i.e. every prediction of the repeats but that of their first token.
    const int64_t n = kSeqLen - static_cast<int64_t>(row.scored.size());
    REQUIRE(n >= 2);
    REQUIRE(n <= (kSeqLen + 1) / 2);
    block_lengths.insert(n);
    CHECK(row.scored == Range(n, kSeqLen - 1));
    for (int64_t i = n; i <= kSeqLen; ++i) {
      CHECK(row.tokens[static_cast<size_t>(i)] == row.tokens[static_cast<size_t>(i - n)]);
    }
    CHECK(std::all_of(row.tokens.begin(), row.tokens.end(), [](int64_t t) { return t < kVocab; }));
  }
  CHECK(block_lengths.size() >= 5);  // the length varies per row (15 possible here)
}

TEST_CASE("mod_add rows pack  a PLUS b EQ c  problems scored on c = (a + b) mod vocab",
          "[tasks][synthetic]") {
  for (int64_t vocab : {kVocab, int64_t{7}}) {
    INFO("vocab " << vocab);
    std::unique_ptr<Task> task = Make(TaskKind::kModAdd, Options().Vocab(vocab).BatchSize(16));
    for (const Row& row : Rows(task->NextTrainBatch())) {
      CHECK(row.scored == Range(3, 28, 5));  // (32 + 1) / 5 = 6 problems
      for (size_t j = 0; j < 6; ++j) {
        const int64_t* problem = row.tokens.data() + 5 * j;
        CHECK(problem[0] < vocab);
        CHECK(problem[1] == vocab + 3);  // PLUS
        CHECK(problem[2] < vocab);
        CHECK(problem[3] == vocab + 4);  // EQ
        CHECK(problem[4] == (problem[0] + problem[2]) % vocab);
      }
      CHECK(Slice(row.tokens, 30, 33) == std::vector<int64_t>(3, vocab + 1));  // PAD
    }
  }
  // The ids the other tests assume for the default vocab.
  Batch batch = Make(TaskKind::kModAdd)->NextTrainBatch();
  CHECK((batch.inputs.select(1, 1) == kPlus).all().item<bool>());
  CHECK((batch.inputs.select(1, 3) == kEq).all().item<bool>());
}

TEST_CASE("generated streams are deterministic per seed and eval differs from train",
          "[tasks][synthetic]") {
  for (TaskKind kind : kGenerated) {
    INFO(TaskName(kind));
    std::unique_ptr<Task> a = Make(kind, Options().Seed(5));
    std::unique_ptr<Task> b = Make(kind, Options().Seed(5));
    std::unique_ptr<Task> c = Make(kind, Options().Seed(6));
    Batch first = a->NextTrainBatch();
    CHECK(Equal(first, b->NextTrainBatch()));
    CHECK_FALSE(torch::equal(first.targets, c->NextTrainBatch().targets));
    CHECK_FALSE(torch::equal(first.targets, a->NextTrainBatch().targets));
    REQUIRE(a->EvalBatches().size() == 2);
    CHECK(Equal(a->EvalBatches()[0], b->EvalBatches()[0]));
    CHECK(Equal(a->EvalBatches()[1], b->EvalBatches()[1]));
    CHECK_FALSE(torch::equal(a->EvalBatches()[0].targets, a->EvalBatches()[1].targets));
    CHECK_FALSE(torch::equal(a->EvalBatches()[0].targets, first.targets));
  }
}

TEST_CASE("for bidirectional models every answer is MASK in the inputs", "[tasks][synthetic]") {
  for (TaskKind kind : kGenerated) {
    INFO(TaskName(kind));
    std::unique_ptr<Task> shown = Make(kind, Options().Seed(2));
    std::unique_ptr<Task> hidden = Make(kind, Options().Seed(2).Bidirectional());
    for (int round = 0; round < 2; ++round) {
      const Batch a = round == 0 ? shown->NextTrainBatch() : shown->EvalBatches()[0];
      const Batch b = round == 0 ? hidden->NextTrainBatch() : hidden->EvalBatches()[0];
      CHECK(torch::equal(a.targets, b.targets));
      CHECK(torch::equal(a.mask, b.mask));
      CHECK(torch::equal(a.inputs.select(1, 0), b.inputs.select(1, 0)));
      for (int64_t p = 1; p < kSeqLen; ++p) {
        INFO("position " << p);
        // Input p is the target of position p - 1: hidden exactly when that one is scored.
        torch::Tensor answer = a.mask.select(1, p - 1) > 0;
        torch::Tensor expected = torch::where(
            answer, torch::full_like(a.inputs.select(1, p), kMask), a.inputs.select(1, p));
        CHECK(torch::equal(b.inputs.select(1, p), expected));
      }
      CHECK((b.inputs == kMask).sum().item<int64_t>() > 0);
    }
  }
}

TEST_CASE("a restored stream state continues the training stream exactly", "[tasks][synthetic]") {
  for (TaskKind kind : kGenerated) {
    INFO(TaskName(kind));
    std::unique_ptr<Task> a = Make(kind, Options().Seed(3));
    a->NextTrainBatch();
    const std::string state = a->SaveStreamState();
    const Batch next = a->NextTrainBatch();
    const Batch after = a->NextTrainBatch();

    std::unique_ptr<Task> b = Make(kind, Options().Seed(9));  // the state carries the position
    REQUIRE(b->RestoreStreamState(state).ok());
    CHECK(Equal(b->NextTrainBatch(), next));
    CHECK(Equal(b->NextTrainBatch(), after));
    CHECK(b->SaveStreamState() == a->SaveStreamState());

    absl::Status bad = b->RestoreStreamState("not a state");
    CHECK(bad.code() == absl::StatusCode::kInvalidArgument);
  }
}

TEST_CASE("shapes a generated task cannot fill are refused naming the key", "[tasks][synthetic]") {
  struct Case {
    TaskKind kind;
    int64_t vocab, seq_len;
    std::string message;
  };
  const std::vector<Case> cases = {
      {TaskKind::kAssocRecall, kVocab, 7,
       "train.seq_len: task assoc_recall needs at least 8 positions (2 key-value pairs, SEP and 2 "
       "queries with their answers), got 7"},
      {TaskKind::kInduction, kVocab, 4,
       "train.seq_len: task induction needs at least 5 positions (a block of 2 or 3 symbols and "
       "its repeat, so the length can vary), got 4"},
      {TaskKind::kReverse, kVocab, 3,
       "train.seq_len: task reverse needs at least 4 positions (a sequence of at least 2 symbols, "
       "SEP and its rearrangement), got 3"},
      {TaskKind::kModAdd, kVocab, 3,
       "train.seq_len: task mod_add needs at least 4 positions (one problem a + b = c is 5 "
       "tokens), got 3"},
      {TaskKind::kSort, 1, kSeqLen, "train.vocab: task sort needs at least 2 symbols, got 1"},
      {TaskKind::kAssocRecall, 3, kSeqLen,
       "train.vocab: task assoc_recall needs at least 4 symbols (keys are the lower half of the "
       "symbols and values the upper half), got 3"},
  };
  for (const Case& c : cases) {
    absl::StatusOr<std::unique_ptr<Task>> task =
        MakeTask(Config(c.kind, Options().Vocab(c.vocab).SeqLen(c.seq_len)));
    REQUIRE_FALSE(task.ok());
    CHECK(task.status().code() == absl::StatusCode::kInvalidArgument);
    CHECK(std::string(task.status().message()) == c.message);
  }
}

TEST_CASE("tae-train refuses exactly the task shapes that submit refuses", "[tasks][synthetic]") {
  int refused = 0;
  for (TaskKind kind : kGenerated) {
    for (int64_t vocab : {1, 2, 3}) {
      for (int64_t seq_len = 2; seq_len <= 10; ++seq_len) {
        INFO(TaskName(kind) << " vocab " << vocab << " seq_len " << seq_len);
        nlohmann::json flat = testing::DefaultSpec();
        flat["train.task"] = TaskName(kind);
        flat["train.vocab"] = vocab;
        flat["train.seq_len"] = seq_len;
        std::optional<spec::CrossProblem> problem = spec::CheckTask(flat);
        absl::StatusOr<std::unique_ptr<Task>> task =
            MakeTask(Config(kind, Options().Vocab(vocab).SeqLen(seq_len).BatchSize(2)));
        REQUIRE(problem.has_value() == !task.ok());
        if (problem.has_value()) {
          CHECK(problem->what == std::string(task.status().message()));
          refused += 1;
        }
      }
    }
  }
  CHECK(refused > 0);
}

}  // namespace
}  // namespace tae::train
