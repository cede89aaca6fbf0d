#include "agent/train/trainer.h"

#include <sys/resource.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <mutex>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "agent/train/compression.h"
#include "agent/train/fused_adamw.h"
#include "agent/train/head_importance.h"
#include "agent/train/schedule.h"
#include "common/metrics/names.h"
#include "common/status/macros.h"

namespace tae::train {
namespace {

constexpr double kSgdMomentum = 0.9;

using Clock = std::chrono::steady_clock;

std::string HumanRate(double tokens_per_s) {
  if (tokens_per_s >= 1e6) {
    return absl::StrFormat("%.2fM tok/s", tokens_per_s / 1e6);
  }
  return absl::StrFormat("%.1fk tok/s", tokens_per_s / 1e3);
}

// Empty groups are left out (e.g. no biases and no norms leaves nothing without decay).
void AddGroups(std::vector<torch::Tensor> decay, std::vector<torch::Tensor> no_decay,
               std::unique_ptr<torch::optim::OptimizerOptions> decay_options,
               std::unique_ptr<torch::optim::OptimizerOptions> no_decay_options,
               std::vector<torch::optim::OptimizerParamGroup>* groups) {
  if (!decay.empty()) {
    groups->emplace_back(std::move(decay), std::move(decay_options));
  }
  if (!no_decay.empty()) {
    groups->emplace_back(std::move(no_decay), std::move(no_decay_options));
  }
}

// The summed cross entropy over the positions where mask is 1.
torch::Tensor ScoredCrossEntropySum(const torch::Tensor& logits, const torch::Tensor& targets,
                                    const torch::Tensor& mask) {
  const int64_t vocab = logits.size(-1);
  torch::Tensor per_token =
      torch::nn::functional::cross_entropy(
          logits.reshape({-1, vocab}), targets.reshape({-1}),
          torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kNone))
          .view_as(mask);
  return (per_token * mask).sum();
}

}  // namespace

torch::Tensor MaskedCrossEntropy(const torch::Tensor& logits, const torch::Tensor& targets,
                                 const torch::Tensor& mask) {
  return ScoredCrossEntropySum(logits, targets, mask) / mask.sum().clamp_min(1.0);
}

std::unique_ptr<torch::optim::Optimizer> MakeOptimizer(const TrainingConfig& config,
                                                       TransformerLM& model) {
  std::vector<torch::Tensor> decay;
  std::vector<torch::Tensor> no_decay;
  for (const torch::Tensor& p : model->parameters()) {
    (p.dim() >= 2 ? decay : no_decay).push_back(p);
  }
  std::vector<torch::optim::OptimizerParamGroup> groups;
  if (config.optimizer == OptimizerKind::kAdamW) {
    auto options = [&](double wd) {
      return std::make_unique<torch::optim::AdamWOptions>(
          torch::optim::AdamWOptions(config.lr).weight_decay(wd));
    };
    AddGroups(std::move(decay), std::move(no_decay), options(config.weight_decay), options(0.0),
              &groups);
    return std::make_unique<FusedAdamW>(std::move(groups));
  }
  auto options = [&](double wd) {
    return std::make_unique<torch::optim::SGDOptions>(
        torch::optim::SGDOptions(config.lr).momentum(kSgdMomentum).weight_decay(wd));
  };
  AddGroups(std::move(decay), std::move(no_decay), options(config.weight_decay), options(0.0),
            &groups);
  return std::make_unique<torch::optim::SGD>(std::move(groups),
                                             torch::optim::SGDOptions(config.lr));
}

Trainer::Trainer(const TrainConfig& config, Task* task, MetricsSink* sink, std::ostream* progress,
                 TrainerOptions options)
    : config_(config),
      task_(task),
      sink_(sink),
      progress_(progress),
      options_(std::move(options)) {}

double PeakRssMb() {
  struct rusage usage {};
  ::getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_maxrss) / 1024.0;  // Linux reports KiB
}

absl::StatusOr<TrainSummary> Trainer::Run() {
  try {
    return RunOrThrow();
  } catch (const c10::Error& e) {
    return absl::InternalError(absl::StrCat("libtorch: ", e.what_without_backtrace()));
  } catch (const std::exception& e) {
    return absl::InternalError(e.what());
  }
}

absl::StatusOr<TrainSummary> Trainer::RunOrThrow() {
  const TrainingConfig& t = config_.train;
  if (options_.collective != nullptr) {
    if (absl::Status s = CheckShardable(t.batch_size, options_.collective->world_size()); !s.ok()) {
      return s;
    }
  }
  torch::manual_seed(t.seed);
  TransformerLM model(config_.model, task_->VocabSize(), t.seq_len);
  std::unique_ptr<torch::optim::Optimizer> optimizer = MakeOptimizer(t, model);
  TrainSummary summary;
  summary.params = model->ParameterCount();
  TrainWindow window;
  absl::StatusOr<int64_t> first_step = Resume(model, *optimizer, &window, &summary);
  if (!first_step.ok()) {
    return first_step.status();
  }
  if (options_.collective != nullptr) {
    *first_step = SyncStart(model, *optimizer, *first_step);
  }
  if (absl::Status s = ReportModel(model, summary); !s.ok()) {
    return s;
  }
  if (options_.step_record != nullptr) {
    if (absl::Status s = options_.step_record->Start(*model, task_->EvalBatches().front());
        !s.ok()) {
      return s;
    }
  }
  model->train();
  StepProfiler* profiler = Primary() ? options_.profiler : nullptr;
  for (int64_t step = *first_step; step <= t.steps; ++step) {
    if (profiler != nullptr) {
      profiler->BeforeStep(step);
    }
    const Clock::time_point start = Clock::now();
    double loss = 0;
    Batch batch;
    {
      // A step's operators under one range while a profile is captured (docs/profiles.md).
      std::optional<at::RecordFunction> range;
      if (profiler != nullptr && profiler->capturing()) {
        range.emplace(at::RecordScope::USER_SCOPE);
        if (range->isActive()) {
          range->before(absl::StrCat("ProfilerStep#", step));
        }
      }
      batch = task_->NextTrainBatch();
      loss = TrainStep(model, *optimizer, step, batch, &window.grad_norm);
    }
    window.loss_sum += loss;
    window.seconds += std::chrono::duration<double>(Clock::now() - start).count();
    if (options_.step_record != nullptr) {
      if (absl::Status s = options_.step_record->Step(step, batch, loss, window.grad_norm,
                                                      LearningRate(t, step - 1), *model);
          !s.ok()) {
        return s;
      }
    }
    if (profiler != nullptr) {
      if (std::optional<FinishedProfile> done = profiler->AfterStep(step); done.has_value()) {
        RETURN_IF_ERROR(sink_->EmitProfile(done->id, done->first_step, done->steps, done->error));
        if (progress_ != nullptr) {
          *progress_ << "tae-train: profile " << done->id << " of " << done->steps
                     << " step(s) from step " << done->first_step
                     << (done->error.empty() ? " written" : " failed: " + done->error) << std::endl;
        }
      }
    }
    window.lr = LearningRate(t, step - 1);
    window.steps += 1;
    window.tokens += t.batch_size * t.seq_len;
    bool any_rank_stops = false;
    if (step % t.log_every == 0 || step == t.steps) {
      if (options_.collective != nullptr) {
        any_rank_stops = SyncWindow(step, &window);
      }
      if (absl::Status s = ReportTrain(step, &window, &summary); !s.ok()) {
        return s;
      }
    }
    if (((t.eval_every > 0 && step % t.eval_every == 0) || step == t.steps) && Primary()) {
      if (absl::Status s = ReportEval(model, step, summary, &summary.final_eval); !s.ok()) {
        return s;
      }
    }
    const bool stop = options_.collective != nullptr
                          ? any_rank_stops
                          : options_.should_stop && step < t.steps && options_.should_stop(step);
    const bool scheduled = t.checkpoint_every > 0 && step % t.checkpoint_every == 0;
    if (stop || scheduled || step == t.steps) {
      if (absl::Status s = Checkpoint(model, *optimizer, step, window, summary); !s.ok()) {
        return s;
      }
    }
    if (stop) {
      summary.interrupted = true;
      if (progress_ != nullptr) {
        *progress_ << "tae-train: stopped after step " << step << ", checkpoint written"
                   << std::endl;
      }
      return summary;
    }
  }
  if (profiler != nullptr) {
    // A capture the last step left open (it asked for more steps than were left).
    if (std::optional<FinishedProfile> done = profiler->Finish(); done.has_value()) {
      RETURN_IF_ERROR(sink_->EmitProfile(done->id, done->first_step, done->steps, done->error));
    }
  }
  if (*first_step > t.steps && Primary()) {  // resumed from the final checkpoint: report again
    if (absl::Status s = ReportEval(model, t.steps, summary, &summary.final_eval); !s.ok()) {
      return s;
    }
  }
  const EvalConfig& e = config_.eval;
  if ((t.head_importance || !e.prune_fractions.empty()) && Primary()) {
    const HeadScores scores = ScoreHeads(model, *task_, config_.model.heads);
    if (t.head_importance) {
      RETURN_IF_ERROR(ReportHeads(scores, t.steps));
    }
    if (!e.prune_fractions.empty()) {
      RETURN_IF_ERROR(ReportPruning(model, scores, summary.final_eval));
    }
  }
  if (e.quantize == Quantize::kInt8Dynamic && Primary()) {
    RETURN_IF_ERROR(ReportQuantized(model));
  }
  return summary;
}

absl::Status Trainer::ReportModel(TransformerLM& model, const TrainSummary& summary) {
  const TrainingConfig& t = config_.train;
  const double flops = ForwardFlopsPerToken(config_.model, task_->VocabSize(), t.seq_len);
  if (!Primary()) {
    return absl::OkStatus();
  }
  if (absl::Status s = sink_->Emit(0, {{"model/params", static_cast<double>(summary.params)},
                                       {"model/params_non_embedding",
                                        static_cast<double>(model->NonEmbeddingParameterCount())},
                                       {"model/flops_per_token", flops}});
      !s.ok()) {
    return s;
  }
  if (progress_ != nullptr) {
    *progress_ << "tae-train: task " << TaskName(t.task) << " (vocab " << task_->VocabSize()
               << ", chance acc " << absl::StrFormat("%.3f", task_->ChanceAccuracy()) << "), "
               << config_.model.layers << " layers, d_model " << config_.model.d_model << ", "
               << summary.params << " params, " << absl::StrFormat("%.3g", flops)
               << " FLOPs/token, " << torch::get_num_threads() << " thread(s)";
    if (summary.resumed_from > 0) {
      *progress_ << ", resumed after step " << summary.resumed_from;
    }
    *progress_ << std::endl;
  }
  return absl::OkStatus();
}

absl::StatusOr<int64_t> Trainer::Resume(TransformerLM& model, torch::optim::Optimizer& optimizer,
                                        TrainWindow* window, TrainSummary* summary) {
  if (options_.checkpoint_dir.empty() || !Primary()) {
    return 1;
  }
  absl::StatusOr<std::optional<TrainerState>> state =
      LoadCheckpoint(options_.checkpoint_dir, options_.fingerprint, *model, optimizer);
  if (!state.ok()) {
    return state.status();
  }
  if (!state->has_value()) {
    return 1;
  }
  const TrainerState& loaded = **state;
  if (absl::Status s = task_->RestoreStreamState(loaded.task_stream); !s.ok()) {
    return s;
  }
  at::Generator generator = at::detail::getDefaultCPUGenerator();
  {
    std::lock_guard<std::mutex> lock(generator.mutex());
    generator.set_state(loaded.rng_state);
  }
  *window = loaded.window;
  summary->first_train_loss = loaded.first_train_loss;
  summary->last_train_loss = loaded.last_train_loss;
  summary->resumed_from = loaded.step;
  return loaded.step + 1;
}

absl::Status Trainer::Checkpoint(TransformerLM& model, torch::optim::Optimizer& optimizer,
                                 int64_t step, const TrainWindow& window,
                                 const TrainSummary& summary) {
  if (options_.checkpoint_dir.empty() || !Primary()) {
    return absl::OkStatus();
  }
  TrainerState state;
  state.step = step;
  state.fingerprint = options_.fingerprint;
  state.task_stream = task_->SaveStreamState();
  state.rng_state = at::detail::getDefaultCPUGenerator().get_state();
  state.window = window;
  state.first_train_loss = summary.first_train_loss;
  state.last_train_loss = summary.last_train_loss;
  RETURN_IF_ERROR(SaveCheckpoint(options_.checkpoint_dir, state, *model, optimizer));
  return sink_->EmitCheckpoint(step);
}

absl::Status Trainer::ReportHeads(const HeadScores& scores, int64_t step) {
  MetricValues values;
  for (const auto& [head, delta] : scores.masked) {
    values.emplace_back(MaskedHeadKey(head.first, head.second), delta);
  }
  for (const auto& [head, score] : scores.gradient) {
    values.emplace_back(GradientHeadKey(head.first, head.second), score);
  }
  if (progress_ != nullptr) {
    *progress_ << absl::StrFormat("tae-train: head importance of %d heads (eval loss %.4f)",
                                  scores.masked.size(), scores.base_loss)
               << std::endl;
  }
  return values.empty() ? absl::OkStatus() : sink_->Emit(step, values);
}

double Trainer::TrainStep(TransformerLM& model, torch::optim::Optimizer& optimizer, int64_t step,
                          const Batch& batch, double* grad_norm) {
  const double lr = LearningRate(config_.train, step - 1);
  for (torch::optim::OptimizerParamGroup& group : optimizer.param_groups()) {
    group.options().set_lr(lr);
  }
  // Before the forward pass: FusedAdamW may move a parameter back into its flat buffer here (after
  // a checkpoint load), which must not happen to a tensor the graph has saved.
  auto* fused = dynamic_cast<FusedAdamW*>(&optimizer);
  if (fused != nullptr) {
    fused->ZeroGrad();
  } else {
    optimizer.zero_grad();
  }
  torch::Tensor loss;
  if (options_.collective == nullptr) {
    torch::Tensor logits = model->forward(batch.inputs);
    loss = MaskedCrossEntropy(logits, batch.targets, batch.mask);
    loss.backward();
  } else {
    // This rank's rows of the global batch, scored against the whole batch's count of scored
    // positions: the ranks' losses (and gradients) sum to those of the whole batch.
    const int64_t rows = batch.inputs.size(0) / options_.collective->world_size();
    const int64_t first = rows * options_.collective->rank();
    torch::Tensor logits = model->forward(batch.inputs.narrow(0, first, rows));
    loss = ScoredCrossEntropySum(logits, batch.targets.narrow(0, first, rows),
                                 batch.mask.narrow(0, first, rows)) /
           batch.mask.sum().clamp_min(1.0);
    loss.backward();
    AllReduceGradients(model, fused);
  }
  const double max_norm = config_.train.grad_clip > 0.0 ? config_.train.grad_clip
                                                        : std::numeric_limits<double>::infinity();
  *grad_norm = fused != nullptr ? fused->ClipGradNorm(max_norm)
                                : torch::nn::utils::clip_grad_norm_(model->parameters(), max_norm);
  {
    RECORD_USER_SCOPE("Optimizer.step");  // named for profiles (docs/profiles.md)
    optimizer.step();
  }
  return loss.item<double>();
}

absl::Status Trainer::ReportTrain(int64_t step, TrainWindow* window, TrainSummary* summary) {
  const double loss = window->loss_sum / static_cast<double>(window->steps);
  if (std::isnan(summary->first_train_loss)) {
    summary->first_train_loss = loss;
  }
  summary->last_train_loss = loss;
  last_tokens_per_s_ =
      window->seconds > 0.0 ? static_cast<double>(window->tokens) / window->seconds : 0.0;
  const double step_ms = 1e3 * window->seconds / static_cast<double>(window->steps);
  MetricValues values = {
      {tae::metrics::kTrainLoss, loss},       {"train/lr", window->lr},
      {"train/grad_norm", window->grad_norm}, {tae::metrics::kTokensPerS, last_tokens_per_s_},
      {tae::metrics::kStepMs, step_ms},       {"perf/peak_rss_mb", PeakRssMb()}};
  if (options_.collective != nullptr) {
    values.emplace_back("perf/allreduce_ms",
                        1e3 * allreduce_seconds_ / static_cast<double>(window->steps));
  }
  allreduce_seconds_ = 0.0;
  *window = TrainWindow();
  return Primary() ? sink_->Emit(step, values) : absl::OkStatus();
}

absl::Status Trainer::ReportEval(TransformerLM& model, int64_t step, const TrainSummary& summary,
                                 EvalResult* result) {
  *result = Evaluate(model, *task_);
  absl::Status status = sink_->Emit(step, {{tae::metrics::kEvalLoss, result->loss},
                                           {tae::metrics::kEvalAcc, result->accuracy},
                                           {"eval/seq_acc", result->sequence_accuracy},
                                           {"eval/ppl", std::exp(result->loss)}});
  if (progress_ != nullptr) {
    *progress_ << absl::StrFormat(
                      "step %d/%d train/loss %.4f eval/loss %.4f eval/acc %.4f eval/seq_acc "
                      "%.3f %s",
                      step, config_.train.steps, summary.last_train_loss, result->loss,
                      result->accuracy, result->sequence_accuracy, HumanRate(last_tokens_per_s_))
               << std::endl;
  }
  return status;
}

bool Trainer::Primary() const {
  return options_.collective == nullptr || options_.collective->rank() == 0;
}

int64_t Trainer::SyncStart(TransformerLM& model, torch::optim::Optimizer& optimizer,
                           int64_t first_step) {
  Collective& collective = *options_.collective;
  torch::Tensor step = torch::tensor({first_step}, torch::kLong);
  collective.Broadcast(step);
  first_step = step.item<int64_t>();
  if (first_step > 1) {  // rank 0 resumed from its checkpoint
    std::string optimizer_state;
    std::string stream_state;
    if (collective.rank() == 0) {
      torch::serialize::OutputArchive archive;
      optimizer.save(archive);
      std::ostringstream out;
      archive.save_to(out);
      optimizer_state = out.str();
      stream_state = task_->SaveStreamState();
    }
    collective.BroadcastBytes(&optimizer_state);
    collective.BroadcastBytes(&stream_state);
    if (collective.rank() != 0) {
      torch::serialize::InputArchive archive;
      std::istringstream in(optimizer_state);
      archive.load_from(in);
      optimizer.load(archive);
      if (absl::Status s = task_->RestoreStreamState(stream_state); !s.ok()) {
        throw std::runtime_error(std::string(s.message()));
      }
    }
  }
  // Rank 0's parameters everywhere (the seeds already agree; this makes it certain), in one call.
  torch::NoGradGuard no_grad;
  std::vector<torch::Tensor> params = model->parameters();
  std::vector<torch::Tensor> flat_parts;
  for (const torch::Tensor& p : params) {
    flat_parts.push_back(p.reshape({-1}));
  }
  torch::Tensor flat = torch::cat(flat_parts);
  collective.Broadcast(flat);
  int64_t offset = 0;
  for (torch::Tensor& p : params) {
    p.copy_(flat.narrow(0, offset, p.numel()).view_as(p));
    offset += p.numel();
  }
  return first_step;
}

void Trainer::AllReduceGradients(TransformerLM& model, FusedAdamW* fused) {
  const Clock::time_point start = Clock::now();
  torch::NoGradGuard no_grad;
  if (fused != nullptr) {
    torch::Tensor grads = fused->FlatGrad();
    options_.collective->AllReduceSum(grads);
  } else {
    std::vector<torch::Tensor> grads;
    for (const torch::Tensor& p : model->parameters()) {
      if (p.grad().defined()) {
        grads.push_back(p.grad());
      }
    }
    std::vector<torch::Tensor> flat_parts;
    for (const torch::Tensor& g : grads) {
      flat_parts.push_back(g.reshape({-1}));
    }
    torch::Tensor flat = torch::cat(flat_parts);
    options_.collective->AllReduceSum(flat);
    int64_t offset = 0;
    for (torch::Tensor& g : grads) {
      g.copy_(flat.narrow(0, offset, g.numel()).view_as(g));
      offset += g.numel();
    }
  }
  allreduce_seconds_ += std::chrono::duration<double>(Clock::now() - start).count();
}

bool Trainer::SyncWindow(int64_t step, TrainWindow* window) {
  const bool stop =
      options_.should_stop && step < config_.train.steps && options_.should_stop(step);
  torch::Tensor values =
      torch::tensor({window->loss_sum, stop ? 1.0 : 0.0}, torch::TensorOptions(torch::kDouble));
  options_.collective->AllReduceSum(values);
  window->loss_sum = values[0].item<double>();
  return values[1].item<double>() > 0.0;
}

absl::Status Trainer::ReportPruning(TransformerLM& model, const HeadScores& scores,
                                    const EvalResult& unpruned) {
  const int64_t step = config_.train.steps;
  std::vector<PrunePoint> points =
      PruneByImportance(model, *task_, config_.model.heads, scores, config_.eval.prune_fractions);
  if (points.empty()) {
    return absl::OkStatus();
  }
  // The curve (x = heads kept), the unpruned model first; then the report's columns.
  RETURN_IF_ERROR(sink_->Emit(points.front().heads_total, {{"prune/eval/loss", unpruned.loss},
                                                           {"prune/eval/acc", unpruned.accuracy}}));
  MetricValues columns;
  for (const PrunePoint& p : points) {
    RETURN_IF_ERROR(sink_->Emit(
        p.heads_kept, {{"prune/eval/loss", p.eval.loss}, {"prune/eval/acc", p.eval.accuracy}}));
    const std::string prefix = absl::StrCat("prune", p.fraction * 100);
    columns.emplace_back(prefix + "/eval/loss", p.eval.loss);
    columns.emplace_back(prefix + "/eval/acc", p.eval.accuracy);
    columns.emplace_back(prefix + "/heads_kept", static_cast<double>(p.heads_kept));
    if (progress_ != nullptr) {
      *progress_ << absl::StrFormat(
                        "tae-train: %.0f%% of heads masked by importance (%d of %d kept): eval "
                        "loss %.4f (unpruned %.4f), acc %.4f (unpruned %.4f)",
                        p.fraction * 100, p.heads_kept, p.heads_total, p.eval.loss, unpruned.loss,
                        p.eval.accuracy, unpruned.accuracy)
                 << std::endl;
    }
  }
  return sink_->Emit(step, columns);
}

absl::Status Trainer::ReportQuantized(TransformerLM& model) {
  absl::StatusOr<QuantResult> q = EvaluateInt8Dynamic(model, *task_);
  if (!q.ok()) {
    return q.status();
  }
  RETURN_IF_ERROR(sink_->EmitMeta({{"quant_engine", q->engine}}));
  RETURN_IF_ERROR(sink_->Emit(config_.train.steps,
                              {{"quant/eval/loss", q->int8.loss},
                               {"quant/eval/acc", q->int8.accuracy},
                               {"quant/eval/loss_delta", q->int8.loss - q->fp32.loss},
                               {"quant/eval/acc_delta", q->int8.accuracy - q->fp32.accuracy},
                               {"quant/linear_bytes", static_cast<double>(q->int8_linear_bytes)},
                               {"model/linear_bytes", static_cast<double>(q->fp32_linear_bytes)},
                               {"quant/eval/tokens_per_s", q->int8_tokens_per_s},
                               {"eval/tokens_per_s", q->fp32_tokens_per_s}}));
  if (progress_ != nullptr) {
    *progress_ << absl::StrFormat(
                      "tae-train: int8 dynamic (%s): eval loss %.4f (fp32 %.4f), acc %.4f (fp32 "
                      "%.4f), linear weights %d -> %d bytes (%.2fx), eval %.0f -> %.0f tokens/s",
                      q->engine, q->int8.loss, q->fp32.loss, q->int8.accuracy, q->fp32.accuracy,
                      q->fp32_linear_bytes, q->int8_linear_bytes,
                      static_cast<double>(q->fp32_linear_bytes) /
                          static_cast<double>(std::max<int64_t>(1, q->int8_linear_bytes)),
                      q->fp32_tokens_per_s, q->int8_tokens_per_s)
               << std::endl;
  }
  return absl::OkStatus();
}

EvalResult Trainer::Evaluate(TransformerLM& model, const Task& task) {
  torch::NoGradGuard no_grad;
  model->eval();
  double loss_sum = 0.0;
  double correct = 0.0;
  double scored = 0.0;
  double rows_right = 0.0;
  double rows = 0.0;
  for (const Batch& batch : task.EvalBatches()) {
    torch::Tensor logits = model->forward(batch.inputs);
    const double batch_scored = batch.mask.sum().item<double>();
    loss_sum += MaskedCrossEntropy(logits, batch.targets, batch.mask).item<double>() * batch_scored;
    torch::Tensor hits = logits.argmax(-1).eq(batch.targets).to(torch::kFloat) * batch.mask;
    correct += hits.sum().item<double>();
    scored += batch_scored;
    rows_right += hits.sum(1).eq(batch.mask.sum(1)).sum().item<double>();
    rows += static_cast<double>(batch.inputs.size(0));
  }
  model->train();
  EvalResult result;
  if (scored > 0.0) {
    result.loss = loss_sum / scored;
    result.accuracy = correct / scored;
  }
  result.sequence_accuracy = rows > 0.0 ? rows_right / rows : 0.0;
  return result;
}

}  // namespace tae::train
