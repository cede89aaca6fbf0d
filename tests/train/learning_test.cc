// What the engine learns, checked against the literature at the settings where an independent
// plain PyTorch model was measured (docs/engine.md "Initialisation and tied embeddings"):
// induction heads need two attention layers (Olsson et al. 2022).

#include <fcntl.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <sstream>

#include "agent/train/config.h"
#include "agent/train/metrics_sink.h"
#include "agent/train/tasks.h"
#include "agent/train/threads.h"
#include "agent/train/trainer.h"
#include "tests/train/spec_fixture.h"

namespace tae::train {
namespace {

// Attention-only induction: vocab 32, seq_len 64, d_model 64, 4 heads, batch 32, lr 1e-3
// cosine, warmup 50, 1,500 steps, untied embeddings (the default).
double InductionAccuracy(int64_t layers, const char* init) {
  ConfigureThreads(1);
  nlohmann::json spec = testing::DefaultSpec();
  spec["model.layers"] = layers;
  spec["model.drop_ffn_layers"] = layers == 1 ? nlohmann::json{0} : nlohmann::json{0, 1};
  spec["model.tie_embeddings"] = false;
  spec["model.init"] = init;
  spec["train.task"] = "induction";
  spec["train.vocab"] = 32;
  spec["train.seq_len"] = 64;
  spec["train.lr"] = 1e-3;
  spec["train.steps"] = 1500;
  spec["train.eval_every"] = 1500;
  absl::StatusOr<TrainConfig> config = ParseTrainConfig(spec);
  REQUIRE(config.ok());
  absl::StatusOr<std::unique_ptr<Task>> task = MakeTask(*config);
  REQUIRE(task.ok());
  const int null_fd = ::open("/dev/null", O_WRONLY | O_CLOEXEC);
  REQUIRE(null_fd >= 0);
  MetricsSink sink(null_fd);  // the summary carries the final eval
  std::ostringstream progress;
  Trainer trainer(*config, task->get(), &sink, &progress);
  absl::StatusOr<TrainSummary> summary = trainer.Run();
  ::close(null_fd);
  REQUIRE(summary.ok());
  return summary->final_eval.accuracy;
}

TEST_CASE("induction: two attention-only layers learn it, one layer does not") {
  // Measured (seed 0): gpt2 init 0.92 vs 0.36 (seeds 1, 2: 0.355, 0.355 for one layer);
  // PyTorch's default init 0.87 vs 0.32; the same to 1e-4 on oneDNN AVX-512, oneDNN AVX2 and
  // OpenBLAS. With tied embeddings two layers stayed at 0.30. The claim is the literature's: two
  // layers learn it (>= 0.8, as docs/tasks.md's calibration checks), one layer does not (<= 0.6,
  // the same check's bound), and the gap between them is most of the task (>= 0.4), not a
  // threshold fitted to one trajectory.
  for (const char* init : {"gpt2", "torch"}) {
    const double two = InductionAccuracy(2, init);
    const double one = InductionAccuracy(1, init);
    INFO(init << " init: 2 layers " << two << ", 1 layer " << one);
    CHECK(two >= 0.8);
    CHECK(one <= 0.6);
    CHECK(two - one >= 0.4);
  }
}

}  // namespace
}  // namespace tae::train
