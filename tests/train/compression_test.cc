// Compression evaluated after training (docs/engine.md "Compression"), checked against what the
// literature says and against fp32: most heads are redundant (Michel et al. 2019: the copy task
// with 4 heads per layer keeps its accuracy with half its heads masked by importance; measured,
// it keeps it even with one head left), and int8 dynamic quantisation of the linear layers stays
// close to fp32 while its weights shrink almost 4x.

#include "agent/train/compression.h"

#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include "agent/train/config.h"
#include "agent/train/metrics_sink.h"
#include "agent/train/tasks.h"
#include "agent/train/threads.h"
#include "agent/train/trainer.h"
#include "tests/train/spec_fixture.h"

namespace tae::train {
namespace {

// Every metric line the trainer wrote, as (key, step) -> value.
using Points = std::map<std::pair<std::string, int64_t>, double>;

Points TrainCopy(const nlohmann::json& eval, std::string* progress_text) {
  ConfigureThreads(1);
  nlohmann::json spec = testing::DefaultSpec();
  spec["train.steps"] = 600;
  spec["train.eval_every"] = 600;
  for (const auto& [key, value] : eval.items()) {
    spec[key] = value;
  }
  absl::StatusOr<TrainConfig> config = ParseTrainConfig(spec);
  REQUIRE(config.ok());
  absl::StatusOr<std::unique_ptr<Task>> task = MakeTask(*config);
  REQUIRE(task.ok());
  char path[] = "/tmp/tae-compression-XXXXXX";
  const int fd = ::mkstemp(path);
  REQUIRE(fd >= 0);
  MetricsSink sink(fd);
  std::ostringstream progress;
  Trainer trainer(*config, task->get(), &sink, &progress);
  absl::StatusOr<TrainSummary> summary = trainer.Run();
  ::close(fd);
  REQUIRE(summary.ok());
  *progress_text = progress.str();
  Points points;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    const nlohmann::json doc = nlohmann::json::parse(line, nullptr, false);
    if (!doc.is_object() || !doc.contains("step")) {
      continue;
    }
    for (const auto& [key, value] : doc.items()) {
      if (key != "step" && value.is_number()) {
        points[{key, doc["step"].get<int64_t>()}] = value.get<double>();
      }
    }
  }
  std::remove(path);
  return points;
}

TEST_CASE(
    "copy with 4 heads per layer keeps its accuracy with half its heads masked by "
    "importance") {
  std::string progress;
  const Points p = TrainCopy({{"eval.prune_heads_by_importance", {0.5, 0.875}}}, &progress);
  INFO(progress);
  const double full = p.at({"eval/acc", 600});
  const double half = p.at({"prune50/eval/acc", 600});
  const double one = p.at({"prune87.5/eval/acc", 600});
  INFO("acc: all 8 heads " << full << ", 4 kept " << half << ", 1 kept " << one);
  REQUIRE(full >= 0.95);  // the task is learned
  CHECK(p.at({"prune50/heads_kept", 600}) == 4);
  CHECK(p.at({"prune87.5/heads_kept", 600}) == 1);
  CHECK(half >= full - 0.05);
  // The masks took effect: the loss moved.
  const double full_loss = p.at({"eval/loss", 600});
  CHECK(p.at({"prune50/eval/loss", 600}) > full_loss);
  CHECK(p.at({"prune87.5/eval/loss", 600}) >= full_loss);
  // The curve: eval loss against heads kept, the unpruned model at 8.
  CHECK(p.at({"prune/eval/loss", 8}) == p.at({"eval/loss", 600}));
  CHECK(p.at({"prune/eval/acc", 4}) == half);
  CHECK(p.at({"prune/eval/acc", 1}) == one);
}

TEST_CASE(
    "int8 dynamic quantisation stays within 0.05 of fp32's loss and accuracy and shrinks "
    "the linear weights at least 3.5x") {
  REQUIRE(!QuantizedEngine().empty());
  std::string progress;
  const Points p = TrainCopy({{"eval.quantize", "int8-dynamic"}}, &progress);
  INFO(progress);
  const double fp32_loss = p.at({"eval/loss", 600});
  const double fp32_acc = p.at({"eval/acc", 600});
  INFO("fp32 " << fp32_loss << " / " << fp32_acc << ", int8 " << p.at({"quant/eval/loss", 600})
               << " / " << p.at({"quant/eval/acc", 600}));
  CHECK(std::abs(p.at({"quant/eval/loss", 600}) - fp32_loss) <= 0.05);
  CHECK(std::abs(p.at({"quant/eval/acc", 600}) - fp32_acc) <= 0.05);
  CHECK(p.at({"quant/eval/loss_delta", 600}) == p.at({"quant/eval/loss", 600}) - fp32_loss);
  const double fp32_bytes = p.at({"model/linear_bytes", 600});
  const double int8_bytes = p.at({"quant/linear_bytes", 600});
  CHECK(fp32_bytes > 0);
  CHECK(fp32_bytes / int8_bytes >= 3.5);
  CHECK(p.at({"quant/eval/tokens_per_s", 600}) > 0);
  CHECK(p.at({"eval/tokens_per_s", 600}) > 0);
}

}  // namespace
}  // namespace tae::train
