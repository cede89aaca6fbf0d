#include "agent/train/compression.h"

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/native/quantized/PackedParams.h>

#include <algorithm>
#include <cfloat>
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

using Packed = c10::intrusive_ptr<LinearPackedParamsBase>;

// Every nn.Linear weight of the model, quantised and packed: int8 per tensor, symmetric (zero
// point 0, scale max|w| / 127.5), as torch.ao.quantization.quantize_dynamic's default qconfig
// does; activations are quantised per tensor at run time by quantized::linear_dynamic. With
// onednn, activations use 7 bits (reduce_range), as PyTorch's module always asks: without it
// onednn saturates on CPUs without VNNI. qnnpack ignores it. The results equal PyTorch's
// quantize_dynamic bit for bit on both engines.
class Int8Linears : public LinearOverride {
 public:
  Int8Linears(TransformerLM& model, bool reduce_range) : reduce_range_(reduce_range) {
    static auto prepack = c10::Dispatcher::singleton()
                              .findSchemaOrThrow("quantized::linear_prepack", "")
                              .typed<Packed(at::Tensor, c10::optional<at::Tensor>)>();
    for (const auto& item : model->named_modules()) {
      auto* linear = item.value()->as<torch::nn::LinearImpl>();
      if (linear == nullptr) {
        continue;
      }
      const torch::Tensor w = linear->weight.detach().to(torch::kFloat).contiguous();
      const float scale = std::max(w.abs().max().item<float>() / 127.5f, FLT_EPSILON);
      const torch::Tensor q = torch::quantize_per_tensor(w, scale, 0, torch::kQInt8);
      packed_[linear->weight.unsafeGetTensorImpl()] = prepack.call(q, c10::nullopt);
      fp32_bytes_ += w.numel() * 4;
      int8_bytes_ += w.numel() + 8;  // the int8 weights, one scale and one zero point
    }
  }

  torch::Tensor Apply(const torch::Tensor& x, const torch::Tensor& weight) const override {
    auto it = packed_.find(weight.unsafeGetTensorImpl());
    if (it == packed_.end()) {
      return {};
    }
    return it->second->apply_dynamic(x.contiguous(), reduce_range_);
  }

  int64_t fp32_bytes() const { return fp32_bytes_; }
  int64_t int8_bytes() const { return int8_bytes_; }

 private:
  bool reduce_range_;
  std::map<const void*, Packed> packed_;  // by the fp32 weight's TensorImpl
  int64_t fp32_bytes_ = 0;
  int64_t int8_bytes_ = 0;
};

// Tokens per second of eval forward passes over the task's eval batches (best of three rounds).
double EvalTokensPerSecond(TransformerLM& model, const Task& task) {
  torch::NoGradGuard no_grad;
  model->eval();
  double best = 0;
  for (int round = 0; round < 3; ++round) {
    int64_t tokens = 0;
    const auto start = std::chrono::steady_clock::now();
    for (const Batch& batch : task.EvalBatches()) {
      (void)model->forward(batch.inputs);
      tokens += batch.inputs.numel();
    }
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    best = std::max(best, seconds > 0 ? static_cast<double>(tokens) / seconds : 0.0);
  }
  model->train();
  return best;
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

std::string QuantizedEngine() {
  // onednn first: on x86 it is 1.5-1.8x faster than fp32 here, qnnpack (built for ARM) 3-5x
  // slower.
  for (const auto& [engine, name] :
       {std::pair{at::QEngine::ONEDNN, "onednn"}, std::pair{at::QEngine::QNNPACK, "qnnpack"}}) {
    for (at::QEngine supported : at::globalContext().supportedQEngines()) {
      if (supported == engine) {
        return name;
      }
    }
  }
  return "";
}

absl::StatusOr<QuantResult> EvaluateInt8Dynamic(TransformerLM& model, const Task& task) {
  QuantResult result;
  result.engine = QuantizedEngine();
  if (result.engine.empty()) {
    return absl::FailedPreconditionError(
        "eval.quantize: this libtorch has no quantized engine (qnnpack or onednn)");
  }
  const bool onednn = result.engine == "onednn";
  at::globalContext().setQEngine(onednn ? at::QEngine::ONEDNN : at::QEngine::QNNPACK);
  result.fp32 = Eval(model, task);
  result.fp32_tokens_per_s = EvalTokensPerSecond(model, task);
  Int8Linears int8(model, /*reduce_range=*/onednn);
  {
    ScopedLinearOverride quantised(&int8);
    result.int8 = Eval(model, task);
    result.int8_tokens_per_s = EvalTokensPerSecond(model, task);
  }
  result.fp32_linear_bytes = int8.fp32_bytes();
  result.int8_linear_bytes = int8.int8_bytes();
  return result;
}

}  // namespace tae::train
