#include "agent/train/trainer.h"

#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "agent/train/config.h"
#include "agent/train/copy_task.h"
#include "agent/train/metrics_sink.h"
#include "agent/train/threads.h"
#include "nlohmann/json.hpp"
#include "tests/train/spec_fixture.h"

namespace tae::train {
namespace {

// A small copy run: 1 thread keeps it quick and free of OpenMP spinning on shared cores.
TrainConfig TinyCopyConfig(int64_t steps) {
  ConfigureThreads(1);
  nlohmann::json spec = testing::DefaultSpec();
  spec["model.d_model"] = 32;
  spec["train.vocab"] = 8;
  spec["train.seq_len"] = 16;
  spec["train.batch_size"] = 32;
  spec["train.lr"] = 0.01;  // learns to copy on every seed tried (0-4) within 150 steps
  spec["train.steps"] = steps;
  spec["train.warmup"] = 10;
  spec["train.eval_every"] = 50;
  spec["train.eval_batches"] = 4;
  absl::StatusOr<TrainConfig> config = ParseTrainConfig(spec);
  REQUIRE(config.ok());
  return *config;
}

// Runs `config` with metric lines going to a temp file; returns the parsed lines.
std::vector<nlohmann::json> RunAndCollect(const TrainConfig& config, TrainSummary* summary) {
  char path[] = "/tmp/tae_train_metrics_XXXXXX";
  const int fd = ::mkstemp(path);
  REQUIRE(fd >= 0);
  CopyTask task(config.train.vocab, config.train.seq_len, config.train.batch_size,
                config.train.eval_batches, config.train.seed);
  MetricsSink sink(fd);
  std::ostringstream progress;
  Trainer trainer(config, &task, &sink, &progress);
  absl::StatusOr<TrainSummary> result = trainer.Run();
  ::close(fd);
  REQUIRE(result.ok());
  *summary = *result;
  std::vector<nlohmann::json> lines;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) {
    lines.push_back(nlohmann::json::parse(line));
  }
  std::remove(path);
  CHECK(progress.str().find("step " + std::to_string(config.train.steps) + "/") !=
        std::string::npos);
  return lines;
}

TEST_CASE("a short copy run drives the loss well down and learns to copy", "[trainer]") {
  const TrainConfig config = TinyCopyConfig(150);
  TrainSummary summary;
  std::vector<nlohmann::json> lines = RunAndCollect(config, &summary);
  INFO("first loss " << summary.first_train_loss << ", last " << summary.last_train_loss
                     << ", eval acc " << summary.final_eval.accuracy);
  CHECK(summary.first_train_loss > 1.5);  // ~ln(8) at the start
  CHECK(summary.last_train_loss < 0.3 * summary.first_train_loss);
  CHECK(summary.final_eval.accuracy > 0.9);  // chance is 1/8

  REQUIRE(!lines.empty());
  CHECK(lines.front()["step"] == 0);
  CHECK(lines.front()["model/params"] == summary.params);
  int train_lines = 0;
  std::vector<int64_t> eval_steps;
  for (const nlohmann::json& line : lines) {
    train_lines += line.contains("train/loss") ? 1 : 0;
    if (line.contains("eval/acc")) {
      eval_steps.push_back(line["step"].get<int64_t>());
      CHECK(line.contains("eval/loss"));
    }
    if (line.contains("train/loss")) {
      CHECK(line["perf/tokens_per_s"].get<double>() > 0.0);
    }
  }
  CHECK(train_lines == 15);
  CHECK(eval_steps == std::vector<int64_t>{50, 100, 150});
  CHECK(lines.back()["step"] == 150);
  CHECK(lines.back()["eval/acc"].get<double>() == Approx(summary.final_eval.accuracy));
}

TEST_CASE("without attention the copy stays near chance", "[trainer]") {
  TrainConfig config = TinyCopyConfig(150);
  config.model.drop_attention_layers = {0, 1};
  TrainSummary summary;
  RunAndCollect(config, &summary);
  CHECK(summary.final_eval.accuracy < 2.0 / 8.0);
}

TEST_CASE("the final eval is emitted at step == train.steps off the eval grid", "[trainer]") {
  TrainConfig config = TinyCopyConfig(23);
  config.train.optimizer = OptimizerKind::kSgd;
  config.train.schedule = Schedule::kLinear;
  config.train.grad_clip = 0.0;
  config.model.bias = false;  // with no norms either, every parameter is a decayed matrix
  config.model.norm = NormKind::kNone;
  config.train.weight_decay = 0.1;
  TrainSummary summary;
  std::vector<nlohmann::json> lines = RunAndCollect(config, &summary);
  REQUIRE(lines.size() >= 2);
  CHECK(lines.back()["step"] == 23);
  CHECK(lines.back().contains("eval/acc"));
  CHECK(lines[lines.size() - 2]["step"] == 23);
  CHECK(lines[lines.size() - 2].contains("train/loss"));
}

TEST_CASE("the same seed gives the same run", "[trainer]") {
  const TrainConfig config = TinyCopyConfig(20);
  TrainSummary a;
  TrainSummary b;
  RunAndCollect(config, &a);
  RunAndCollect(config, &b);
  CHECK(a.last_train_loss == b.last_train_loss);
  CHECK(a.final_eval.loss == b.final_eval.loss);
}

TEST_CASE("masked cross entropy ignores unscored positions", "[trainer]") {
  torch::Tensor logits = torch::zeros({1, 2, 4});
  logits[0][0][1] = 10.0;  // confident and right at position 0
  torch::Tensor targets = torch::tensor({{1, 3}}, torch::kLong);
  torch::Tensor only_first = torch::tensor({{1.0f, 0.0f}});
  CHECK(MaskedCrossEntropy(logits, targets, only_first).item<double>() < 1e-3);
  torch::Tensor only_second = torch::tensor({{0.0f, 1.0f}});
  CHECK(MaskedCrossEntropy(logits, targets, only_second).item<double>() == Approx(std::log(4.0)));
}

}  // namespace
}  // namespace tae::train
