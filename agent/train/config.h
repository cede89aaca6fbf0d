#pragma once

// The typed configuration of one tae-train run, parsed from the flat run.json that taed writes
// (keys are the experiment-file names of docs/design.md §10, e.g. "model.layers"). The keys, their
// types, ranges, allowed values and defaults are the schema's (common/spec/schema.cc, checked by
// common/spec/run_spec.h) and the combinations of keys are checked as taed checks them
// (spec::CheckConfig, common/spec/checks.h); what is here is their typed form and the few checks
// of tae-train's own (bf16 and fsdp are the torch engine's). The structs hold no defaults of their
// own: DefaultTrainConfig() is the schema's.
// No libtorch here.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace tae::train {

enum class Activation { kRelu, kGelu, kSwiGlu, kGeGlu };
enum class NormKind { kLayerNorm, kRmsNorm, kScaleNorm, kNone };
enum class NormPosition { kPre, kPost, kSandwich };
enum class PosEncoding { kNone, kSinusoidal, kLearned, kRope, kAlibi };
enum class OptimizerKind { kAdamW, kSgd };
enum class Schedule { kConstant, kLinear, kCosine };
enum class InitScheme { kGpt2, kTorch };
enum class Engine { kLibtorch, kTorch };
enum class Precision { kFp32, kBf16 };  // bf16: the torch engine's autocast
enum class Sharding { kNone, kFsdp };   // fsdp: the torch engine's FSDP
enum class TaskKind { kCopy, kReverse, kSort, kAssocRecall, kInduction, kModAdd, kLm };

struct ModelConfig {
  int64_t layers{};
  int64_t d_model{};
  int64_t heads{};
  // Key/value heads of grouped-query attention; must divide heads. 0 (the spec's default) means
  // "= heads" (plain multi-head attention); 1 is multi-query attention.
  int64_t kv_heads{};
  // Width of one head; 0 (the spec's default) means d_model / heads.
  int64_t head_dim{};
  int64_t ffn_mult{};
  Activation activation{};
  NormKind norm{};
  NormPosition norm_position{};
  PosEncoding pos_encoding{};
  bool residual{};
  bool causal{};
  std::vector<int64_t> drop_attention_layers;
  std::vector<int64_t> drop_ffn_layers;
  // Query heads removed from the start, per layer: prune_heads[l] is a sorted list of head indices
  // (empty for layers that keep every head). Sized `layers`.
  std::vector<std::vector<int64_t>> prune_heads;
  bool tie_embeddings{};
  bool bias{};
  double dropout{};
  // torch: PyTorch's module defaults; gpt2: N(0, 0.02) matrices, zero biases, unit gains
  // (docs/engine.md "Initialisation"). A run spec without model.init means gpt2 (the schema's
  // absent value for it), not the default torch.
  InitScheme init{};
};

struct TrainingConfig {
  TaskKind task{};
  std::string data;  // text file for task lm; "" = the KJV text from bible-kjv
  int64_t vocab{};
  int64_t seq_len{};
  int64_t batch_size{};
  int64_t steps{};
  OptimizerKind optimizer{};
  double lr{};
  Schedule schedule{};
  int64_t warmup{};
  double weight_decay{};
  double grad_clip{};
  int64_t eval_every{};
  int64_t eval_batches{};
  int64_t checkpoint_every{};  // 0 = only at the end
  bool head_importance{};
  int64_t threads{};  // 0 = TAE_THREADS, else all cores
  uint64_t seed{};
  // libtorch: this program; torch: the PyTorch engine (agent/python/tae_torch), which tae-train
  // starts in its place.
  Engine engine{};
  // Profiles captured without a request (docs/profiles.md): before each of these steps, for
  // profile_steps steps. Optional keys.
  std::vector<int64_t> profile_at;
  int64_t profile_steps{};
  // Steps per train/* and perf/* line (optional key). precision and sharding other than fp32
  // and none are the torch engine's; tae-train refuses them.
  int64_t log_every{};
  Precision precision{};
  Sharding sharding{};
};

enum class Quantize { kNone, kInt8Dynamic };

// What is evaluated after training besides the model itself (docs/engine.md "Compression").
// Optional keys.
struct EvalConfig {
  // eval.prune_heads_by_importance: fractions in (0, 1) of the heads masked, least important
  // (gradient importance) first, ascending.
  std::vector<double> prune_fractions;
  Quantize quantize{};  // eval.quantize
};

struct TrainConfig {
  ModelConfig model;
  TrainingConfig train;
  EvalConfig eval;
};

// Parses and validates a run spec: its keys by the schema (spec::CheckRunSpec: every key of
// model.*, train.* and eval.* is required except those added later, which stand for their absent
// value when missing, e.g. model.init for gpt2; unknown keys of those tables are refused; others
// such as resources.* are ignored), then the combinations of keys by spec::CheckConfig, as taed
// checks them (heads that do not divide d_model, rope with an odd head width, missing layers or
// heads, a task that does not fit seq_len or vocab, warmup > steps, ...), then tae-train's own
// (bf16 or fsdp without the torch engine). Errors are InvalidArgument with a one-line message that
// names the key: `run spec: key "model.heads": 3 does not divide model.d_model 64`.
absl::StatusOr<TrainConfig> ParseTrainConfig(const nlohmann::json& spec);

// The config of a run spec with every key at the schema's default (spec::DefaultRunSpec()).
TrainConfig DefaultTrainConfig();

// Reads `path` and parses it as above; an unreadable file or bad JSON is InvalidArgument too.
absl::StatusOr<TrainConfig> LoadTrainConfig(const std::string& path);

// The JSON object in `path` (InvalidArgument when unreadable or not JSON).
absl::StatusOr<nlohmann::json> LoadSpecJson(const std::string& path);

// What identifies a run for checkpoints: the keys of `spec` on the training trajectory (the
// schema's, spec::RunSpecFingerprint: not train.threads, train.checkpoint_every, train.eval_every,
// ...), as compact JSON.
std::string ConfigFingerprint(const nlohmann::json& spec);

// Names used in specs and progress output.
const char* ActivationName(Activation activation);
const char* NormName(NormKind norm);
const char* NormPositionName(NormPosition position);
const char* PosEncodingName(PosEncoding pos_encoding);
const char* TaskName(TaskKind task);
const char* InitSchemeName(InitScheme init);
const char* EngineName(Engine engine);

// The number of key/value heads a config asks for: kv_heads, or heads when kv_heads is 0.
int64_t KvHeads(const ModelConfig& config);

// The width of one head: head_dim, or d_model / heads when head_dim is 0.
int64_t HeadDim(const ModelConfig& config);

// The heads of `layer` that prune_heads keeps, ascending.
std::vector<int64_t> KeptHeads(const ModelConfig& config, int64_t layer);

// The K/V heads (original indices, ascending) that the query heads `kept` (ascending) read when
// each K/V head serves `group` = heads / kv_heads consecutive query heads: a K/V head whose whole
// group is pruned is absent.
std::vector<int64_t> KvHeadsFor(const std::vector<int64_t>& kept, int64_t group);

}  // namespace tae::train
