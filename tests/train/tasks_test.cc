#include "agent/train/tasks.h"

#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include "agent/train/config.h"
#include "agent/train/copy_task.h"
#include "agent/train/corpus.h"
#include "agent/train/lm_task.h"

namespace tae::train {
namespace {

TEST_CASE("copy rows are  s SEP s  and only the second copy is scored", "[tasks]") {
  constexpr int64_t kVocab = 16;
  constexpr int64_t kSeqLen = 32;
  CopyTask task(kVocab, kSeqLen, /*batch_size=*/4, /*eval_batches=*/2, /*seed=*/0);
  const CopyLayout& layout = task.layout();
  CHECK(task.VocabSize() == kVocab + 3);  // SEP, PAD, MASK
  CHECK(task.ChanceAccuracy() == Approx(1.0 / kVocab));
  CHECK(layout.copy_length == 16);
  CHECK(layout.first_scored == 16);
  CHECK(layout.last_scored == 31);

  Batch batch = task.NextTrainBatch();
  REQUIRE(batch.inputs.sizes() == torch::IntArrayRef({4, kSeqLen}));
  REQUIRE(batch.targets.sizes() == torch::IntArrayRef({4, kSeqLen}));
  const int64_t length = layout.copy_length;
  for (int64_t b = 0; b < 4; ++b) {
    auto in = batch.inputs[b];
    auto out = batch.targets[b];
    auto mask = batch.mask[b];
    CHECK(in[length].item<int64_t>() == layout.separator);
    for (int64_t p = 0; p < kSeqLen; ++p) {
      const bool scored = mask[p].item<float>() == 1.0f;
      CHECK(scored == (p >= layout.first_scored && p <= layout.last_scored));
      if (p + 1 < kSeqLen) {
        CHECK(out[p].item<int64_t>() == in[p + 1].item<int64_t>());  // next-token targets
      }
      if (scored) {  // the target is the symbol L+1 positions back
        CHECK(out[p].item<int64_t>() == in[p - length].item<int64_t>());
        CHECK(out[p].item<int64_t>() < kVocab);
      }
    }
  }
}

TEST_CASE("an odd seq_len pads the tail and leaves it unscored", "[tasks]") {
  CopyTask task(/*vocab=*/4, /*seq_len=*/9, /*batch_size=*/2, /*eval_batches=*/1, /*seed=*/3);
  CHECK(task.layout().copy_length == 4);
  Batch batch = task.NextTrainBatch();
  CHECK(batch.targets[0][8].item<int64_t>() == task.layout().pad);
  CHECK(batch.mask.sum().item<float>() == 2 * 4);
}

TEST_CASE("for bidirectional models the second copy is hidden from the inputs", "[tasks]") {
  for (int64_t seq_len : {8, 9}) {
    CopyTask shown(5, seq_len, 3, 1, /*seed=*/1);
    CopyTask hidden(5, seq_len, 3, 1, /*seed=*/1, /*hide_answers=*/true);
    const CopyLayout& layout = hidden.layout();
    Batch a = shown.NextTrainBatch();
    Batch b = hidden.NextTrainBatch();
    CHECK(torch::equal(a.targets, b.targets));
    CHECK(torch::equal(a.mask, b.mask));
    for (int64_t p = 0; p < seq_len; ++p) {
      const bool second_copy = p > layout.copy_length && p <= 2 * layout.copy_length;
      INFO("seq_len " << seq_len << " position " << p);
      CHECK((b.inputs.select(1, p) == layout.mask_token).all().item<bool>() == second_copy);
      if (!second_copy) {
        CHECK(torch::equal(a.inputs.select(1, p), b.inputs.select(1, p)));
      }
    }
    // No scored target appears anywhere after its own position in the inputs.
    for (int64_t p = layout.first_scored; p < seq_len - 1; ++p) {
      CHECK((b.inputs.select(1, p + 1) == layout.mask_token).all().item<bool>());
    }
  }
}

TEST_CASE("task streams are deterministic per seed and eval differs from train", "[tasks]") {
  CopyTask a(16, 32, 8, 2, /*seed=*/5);
  CopyTask b(16, 32, 8, 2, /*seed=*/5);
  CopyTask c(16, 32, 8, 2, /*seed=*/6);
  torch::Tensor first = a.NextTrainBatch().inputs;
  CHECK(torch::equal(first, b.NextTrainBatch().inputs));
  CHECK_FALSE(torch::equal(first, c.NextTrainBatch().inputs));
  CHECK_FALSE(torch::equal(first, a.NextTrainBatch().inputs));
  REQUIRE(a.EvalBatches().size() == 2);
  CHECK(torch::equal(a.EvalBatches()[1].inputs, b.EvalBatches()[1].inputs));
  CHECK_FALSE(torch::equal(a.EvalBatches()[0].inputs, first));
}

TEST_CASE("TaskRng draws stay in range and cover it", "[tasks]") {
  TaskRng rng(0, TaskRng::kTrainStream);
  std::vector<int> counts(5, 0);
  for (int i = 0; i < 5000; ++i) {
    const int64_t v = rng.Below(5);
    REQUIRE(v >= 0);
    REQUIRE(v < 5);
    counts[static_cast<size_t>(v)] += 1;
  }
  for (int count : counts) {
    CHECK(count > 800);
  }
}

TEST_CASE("lm windows come from the right split and score every position", "[tasks]") {
  // Train part: bytes 'a'..'z' repeating; eval part (last 10%): all 'Z'.
  std::string text;
  for (int i = 0; i < 900; ++i) {
    text.push_back(static_cast<char>('a' + i % 26));
  }
  text += std::string(100, 'Z');
  absl::StatusOr<std::unique_ptr<LmTask>> task = LmTask::Create(text, 16, 4, 3, 0);
  REQUIRE(task.ok());
  CHECK((*task)->train_end() == 900);
  CHECK((*task)->VocabSize() == 256);
  Batch train = (*task)->NextTrainBatch();
  CHECK(train.mask.sum().item<float>() == 4 * 16);
  CHECK((train.inputs >= 'a').all().item<bool>());
  CHECK((train.inputs <= 'z').all().item<bool>());
  // Next byte of the alphabet cycle, scored everywhere.
  CHECK(torch::equal(train.targets, (train.inputs - 'a' + 1) % 26 + 'a'));
  REQUIRE((*task)->EvalBatches().size() == 3);
  for (const Batch& eval : (*task)->EvalBatches()) {
    CHECK((eval.inputs == 'Z').all().item<bool>());
    CHECK((eval.targets == 'Z').all().item<bool>());
  }
  CHECK_FALSE(LmTask::Create(std::string(50, 'x'), 16, 4, 1, 0).ok());
}

TEST_CASE("a missing train.data file is an error naming it", "[tasks]") {
  TrainConfig config = DefaultTrainConfig();
  config.train.task = TaskKind::kLm;
  config.train.data = "/nonexistent/corpus.txt";
  absl::StatusOr<std::unique_ptr<Task>> task = MakeTask(config);
  REQUIRE_FALSE(task.ok());
  CHECK(std::string(task.status().message()).find("/nonexistent/corpus.txt") != std::string::npos);
}

TEST_CASE("a cached KJV text is read from the cache", "[tasks]") {
  char dir[] = "/tmp/tae_kjv_XXXXXX";
  REQUIRE(::mkdtemp(dir) != nullptr);
  const std::string cache = std::string(dir) + "/kjv.txt";
  const std::string fake(2 << 20, 'k');  // larger than the sanity minimum
  std::ofstream(cache) << fake;
  absl::StatusOr<std::string> text = LoadKjvText(cache);
  REQUIRE(text.ok());
  CHECK(*text == fake);
  std::remove(cache.c_str());
  ::rmdir(dir);
}

TEST_CASE("the KJV cache path follows XDG_CACHE_HOME", "[tasks]") {
  const char* old = std::getenv("XDG_CACHE_HOME");
  const std::string saved = old != nullptr ? old : "";
  ::setenv("XDG_CACHE_HOME", "/var/cache/x", 1);
  CHECK(DefaultKjvCachePath() == "/var/cache/x/tae/kjv.txt");
  if (old != nullptr) {
    ::setenv("XDG_CACHE_HOME", saved.c_str(), 1);
  } else {
    ::unsetenv("XDG_CACHE_HOME");
  }
}

}  // namespace
}  // namespace tae::train
