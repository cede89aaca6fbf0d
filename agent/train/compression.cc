#include "agent/train/compression.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <memory>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "agent/train/layers.h"
#include "agent/train/trainer.h"

namespace tae::train {
namespace {

EvalPoint Eval(TransformerLM& model, const Task& task) {
  const EvalResult result = Trainer::Evaluate(model, task);
  return {result.loss, result.accuracy};
}

}  // namespace

std::vector<std::pair<int64_t, int64_t>> RankHeads(const HeadScores& scores) {
  std::vector<std::pair<int64_t, int64_t>> heads;
  for (const auto& [head, score] : scores.gradient) {
    heads.push_back(head);
  }
  const auto masked = [&](const std::pair<int64_t, int64_t>& head) {
    auto it = scores.masked.find(head);
    return it == scores.masked.end() ? 0.0 : it->second;
  };
  std::sort(heads.begin(), heads.end(), [&](const auto& a, const auto& b) {
    const double ga = scores.gradient.at(a);
    const double gb = scores.gradient.at(b);
    return std::make_tuple(ga, masked(a), a) < std::make_tuple(gb, masked(b), b);
  });
  return heads;
}

std::vector<PrunePoint> PruneByImportance(TransformerLM& model, const Task& task, int64_t heads,
                                          const HeadScores& scores,
                                          const std::vector<double>& fractions) {
  const std::vector<std::pair<int64_t, int64_t>> ranked = RankHeads(scores);
  const auto total = static_cast<int64_t>(ranked.size());
  const auto layers = static_cast<int64_t>(model->blocks().size());
  std::vector<PrunePoint> out;
  for (double fraction : fractions) {
    const auto masked = std::min<int64_t>(
        total - 1, static_cast<int64_t>(std::llround(fraction * static_cast<double>(total))));
    std::vector<torch::Tensor> gates;
    for (int64_t l = 0; l < layers; ++l) {
      gates.push_back(torch::ones({heads}));
    }
    for (int64_t i = 0; i < std::max<int64_t>(0, masked); ++i) {
      gates[static_cast<size_t>(ranked[static_cast<size_t>(i)].first)]
           [ranked[static_cast<size_t>(i)].second] = 0.0;
    }
    model->SetHeadGates(gates);
    PrunePoint point;
    point.fraction = fraction;
    point.heads_total = total;
    point.heads_kept = total - std::max<int64_t>(0, masked);
    point.eval = Eval(model, task);
    model->ClearHeadGates();
    out.push_back(point);
  }
  return out;
}

}  // namespace tae::train
