#pragma once

// A step record of a run: its initial weights and every step's batch, loss, grad norm, learning
// rate and updated weights, for checking another implementation of the same model and step against
// tae-train (`tae-train --record-steps DIR`; tests/train/torch_equivalence_test.py replays it in
// PyTorch). Not a trace: a profile's Chrome trace (StepProfiler, common/profile) says where time
// goes, this says what the numbers were. Everything is little-endian raw arrays plus JSON, readable
// without libtorch:
//
//   DIR/params.json    {"params": [{"name": "block0.attention.qkv.weight", "shape": [192, 64],
//                      "offset": 0}, ...], "count": N}   (offsets in floats, named_parameters
//                      order)
//   DIR/params_0.bin   the initial weights: N float32
//   DIR/params_S.bin   the weights after step S (S = 1 .. train.steps)
//   DIR/batch_S.bin    step S's batch: inputs [B*T] int64, targets [B*T] int64, mask [B*T] float32
//   DIR/eval_0.bin     the first eval batch, same layout
//   DIR/steps.jsonl    one {"step": S, "loss": .., "grad_norm": .., "lr": ..} per step
//
// A step record is for small runs (every step's weights are written); errors end the run.

#include <torch/torch.h>

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "agent/train/tasks.h"

namespace tae::train {

class StepRecorder {
 public:
  explicit StepRecorder(std::string dir) : dir_(std::move(dir)) {}

  // Creates DIR and writes params.json, params_0.bin and eval_0.bin.
  absl::Status Start(torch::nn::Module& model, const Batch& first_eval_batch);
  // Writes batch_S.bin, params_S.bin and appends to steps.jsonl.
  absl::Status Step(int64_t step, const Batch& batch, double loss, double grad_norm, double lr,
                    torch::nn::Module& model);

 private:
  absl::Status WriteParams(const std::string& name, torch::nn::Module& model);

  std::string dir_;
};

}  // namespace tae::train
