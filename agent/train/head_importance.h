#pragma once

// Head importance without retraining (docs/engine.md "Head importance"), computed on the task's
// held-out eval batches at the end of a run:
//  - masked: the eval loss increase when head h of layer l alone is masked (its output gated to 0),
//  - gradient: Michel et al. 2019's |dL/d xi_h| for a head-mask variable xi (all 1), averaged over
//    the eval batches and normalised to unit L2 norm within each layer.
// Heads that prune_heads removed and layers whose attention is removed have no score.

#include <cstdint>
#include <map>
#include <string>
#include <utility>

#include "agent/train/model.h"
#include "agent/train/tasks.h"

namespace tae::train {

struct HeadScores {
  double base_loss = 0.0;
  std::map<std::pair<int64_t, int64_t>, double> masked;    // (layer, head) -> loss delta
  std::map<std::pair<int64_t, int64_t>, double> gradient;  // (layer, head) -> normalised score
};

HeadScores ScoreHeads(TransformerLM& model, const Task& task, int64_t heads);

// "heads/L{l}H{h}" and "heads_grad/L{l}H{h}".
std::string MaskedHeadKey(int64_t layer, int64_t head);
std::string GradientHeadKey(int64_t layer, int64_t head);

}  // namespace tae::train
