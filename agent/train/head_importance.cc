#include "agent/train/head_importance.h"

#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"
#include "agent/train/trainer.h"

namespace tae::train {
namespace {

// Mean masked cross entropy over the eval batches (weighted by scored positions), no grad.
double EvalLoss(TransformerLM& model, const Task& task) {
  torch::NoGradGuard no_grad;
  double loss_sum = 0.0;
  double scored = 0.0;
  for (const Batch& batch : task.EvalBatches()) {
    const double batch_scored = batch.mask.sum().item<double>();
    loss_sum +=
        MaskedCrossEntropy(model->forward(batch.inputs), batch.targets, batch.mask).item<double>() *
        batch_scored;
    scored += batch_scored;
  }
  return scored > 0.0 ? loss_sum / scored : 0.0;
}

}  // namespace

std::string MaskedHeadKey(int64_t layer, int64_t head) {
  return absl::StrCat("heads/L", layer, "H", head);
}

std::string GradientHeadKey(int64_t layer, int64_t head) {
  return absl::StrCat("heads_grad/L", layer, "H", head);
}

HeadScores ScoreHeads(TransformerLM& model, const Task& task, int64_t heads) {
  const bool was_training = model->is_training();
  model->eval();
  HeadScores scores;
  scores.base_loss = EvalLoss(model, task);
  std::vector<Block>& blocks = model->blocks();
  const auto layers = static_cast<int64_t>(blocks.size());

  for (int64_t l = 0; l < layers; ++l) {
    Attention& attention = blocks[static_cast<size_t>(l)]->attention();
    if (attention.is_empty()) {
      continue;
    }
    for (int64_t h : attention->kept_heads()) {
      std::vector<torch::Tensor> gates(static_cast<size_t>(l + 1));
      gates[static_cast<size_t>(l)] = torch::ones({heads});
      gates[static_cast<size_t>(l)][h] = 0.0;
      model->SetHeadGates(gates);
      scores.masked[{l, h}] = EvalLoss(model, task) - scores.base_loss;
    }
  }

  std::vector<torch::Tensor> xi;
  std::vector<torch::Tensor> with_attention;
  for (int64_t l = 0; l < layers; ++l) {
    xi.push_back(torch::ones({heads}, torch::requires_grad()));
    if (!blocks[static_cast<size_t>(l)]->attention().is_empty()) {
      with_attention.push_back(xi.back());
    }
  }
  std::vector<torch::Tensor> total(xi.size());
  if (!with_attention.empty()) {
    model->SetHeadGates(xi);
    for (const Batch& batch : task.EvalBatches()) {
      torch::Tensor loss =
          MaskedCrossEntropy(model->forward(batch.inputs), batch.targets, batch.mask);
      std::vector<torch::Tensor> grads = torch::autograd::grad({loss}, with_attention);
      size_t g = 0;
      for (size_t l = 0; l < xi.size(); ++l) {
        if (blocks[l]->attention().is_empty()) {
          continue;
        }
        torch::Tensor magnitude = grads[g++].abs();
        total[l] = total[l].defined() ? total[l] + magnitude : magnitude;
      }
    }
  }
  model->ClearHeadGates();
  for (int64_t l = 0; l < layers; ++l) {
    if (!total[static_cast<size_t>(l)].defined()) {
      continue;
    }
    Attention& attention = blocks[static_cast<size_t>(l)]->attention();
    torch::Tensor kept = torch::tensor(attention->kept_heads(), torch::kLong);
    torch::Tensor layer = total[static_cast<size_t>(l)].index_select(0, kept);
    const double norm = layer.norm().item<double>();
    for (size_t i = 0; i < attention->kept_heads().size(); ++i) {
      const double value = layer[static_cast<int64_t>(i)].item<double>();
      scores.gradient[{l, attention->kept_heads()[i]}] = norm > 0.0 ? value / norm : 0.0;
    }
  }
  if (was_training) {
    model->train();
  }
  return scores;
}

}  // namespace tae::train
