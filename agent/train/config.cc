#include "agent/train/config.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "common/spec/checks.h"
#include "common/spec/run_spec.h"

namespace tae::train {
namespace {

using nlohmann::json;

// The C++ value of each name the schema allows for an enum key (common/spec/schema.cc); a name
// without one is refused with an error naming the key (config_test checks there is none).
template <typename E>
struct Named {
  const char* name;
  E value;
};

constexpr Named<Activation> kActivations[] = {{"relu", Activation::kRelu},
                                              {"gelu", Activation::kGelu},
                                              {"swiglu", Activation::kSwiGlu},
                                              {"geglu", Activation::kGeGlu}};
constexpr Named<NormKind> kNorms[] = {{"layernorm", NormKind::kLayerNorm},
                                      {"rmsnorm", NormKind::kRmsNorm},
                                      {"scalenorm", NormKind::kScaleNorm},
                                      {"none", NormKind::kNone}};
constexpr Named<NormPosition> kNormPositions[] = {{"pre", NormPosition::kPre},
                                                  {"post", NormPosition::kPost},
                                                  {"sandwich", NormPosition::kSandwich}};
constexpr Named<PosEncoding> kPosEncodings[] = {{"none", PosEncoding::kNone},
                                                {"sinusoidal", PosEncoding::kSinusoidal},
                                                {"learned", PosEncoding::kLearned},
                                                {"rope", PosEncoding::kRope},
                                                {"alibi", PosEncoding::kAlibi}};
constexpr Named<InitScheme> kInits[] = {{"gpt2", InitScheme::kGpt2}, {"torch", InitScheme::kTorch}};
constexpr Named<TaskKind> kTasks[] = {{"copy", TaskKind::kCopy},
                                      {"reverse", TaskKind::kReverse},
                                      {"sort", TaskKind::kSort},
                                      {"assoc_recall", TaskKind::kAssocRecall},
                                      {"induction", TaskKind::kInduction},
                                      {"mod_add", TaskKind::kModAdd},
                                      {"lm", TaskKind::kLm}};
constexpr Named<OptimizerKind> kOptimizers[] = {{"adamw", OptimizerKind::kAdamW},
                                                {"sgd", OptimizerKind::kSgd}};
constexpr Named<Schedule> kSchedules[] = {{"constant", Schedule::kConstant},
                                          {"linear", Schedule::kLinear},
                                          {"cosine", Schedule::kCosine}};
constexpr Named<Engine> kEngines[] = {{"libtorch", Engine::kLibtorch}, {"torch", Engine::kTorch}};
constexpr Named<Precision> kPrecisions[] = {{"fp32", Precision::kFp32}, {"bf16", Precision::kBf16}};
constexpr Named<Sharding> kShardings[] = {{"none", Sharding::kNone}, {"fsdp", Sharding::kFsdp}};
constexpr Named<Quantize> kQuantizes[] = {{"none", Quantize::kNone},
                                          {"int8-dynamic", Quantize::kInt8Dynamic}};

template <typename E, size_t N>
const char* NameOf(const Named<E> (&names)[N], E value) {
  for (const Named<E>& named : names) {
    if (named.value == value) {
      return named.name;
    }
  }
  return "?";
}

absl::Status KeyError(absl::string_view key, absl::string_view why) {
  return spec::RunSpecError(std::string_view(key.data(), key.size()),
                            std::string_view(why.data(), why.size()));
}

// Typed values of a run spec that spec::CheckRunSpec accepted: every key is there with a value of
// its type, so only an enum name the C++ code lacks is an error.
class Values {
 public:
  explicit Values(const json& checked) : checked_(checked) {}

  int64_t Int(const char* key) const { return checked_.at(key).get<int64_t>(); }
  double Double(const char* key) const { return checked_.at(key).get<double>(); }
  bool Bool(const char* key) const { return checked_.at(key).get<bool>(); }
  std::string String(const char* key) const { return checked_.at(key).get<std::string>(); }
  const json& Json(const char* key) const { return checked_.at(key); }

  // A list of distinct values, ascending.
  template <typename T>
  std::vector<T> Sorted(const char* key) const {
    auto values = checked_.at(key).get<std::vector<T>>();
    std::sort(values.begin(), values.end());
    return values;
  }

  template <typename E, size_t N>
  absl::Status Enum(const char* key, const Named<E> (&names)[N], E* out) const {
    const std::string text = String(key);
    for (const Named<E>& named : names) {
      if (text == named.name) {
        *out = named.value;
        return absl::OkStatus();
      }
    }
    return KeyError(key, absl::StrCat("\"", text, "\" is not implemented by this tae-train"));
  }

 private:
  const json& checked_;
};

#define TAE_RETURN_IF_ERROR(expr)             \
  do {                                        \
    if (absl::Status s_ = (expr); !s_.ok()) { \
      return s_;                              \
    }                                         \
  } while (false)

// A combination of keys that spec::CheckConfig refuses, as the run-spec error at its offending
// key: `run spec: key "model.heads": 3 does not divide model.d_model 64` (the problem's text
// starts with that key, which the error names once).
absl::Status CrossKeyError(const spec::CrossProblem& problem) {
  const std::string_view key = problem.keys.front();
  std::string_view why = problem.what;
  const std::string prefix = std::string(key) + ": ";
  if (why.substr(0, prefix.size()) == prefix) {
    why.remove_prefix(prefix.size());
  }
  return spec::RunSpecError(key, why);
}

// {"layer": [head, ...]} (shape checked by the schema, layers and heads by spec::CheckConfig) as
// one sorted list of pruned heads per layer.
void ParsePrunedHeads(const json& value, ModelConfig* m) {
  m->prune_heads.assign(static_cast<size_t>(m->layers), {});
  for (const auto& [layer_text, heads] : value.items()) {
    const int64_t layer = std::strtoll(layer_text.c_str(), nullptr, 10);
    std::vector<int64_t> pruned = heads.get<std::vector<int64_t>>();
    std::sort(pruned.begin(), pruned.end());
    m->prune_heads[static_cast<size_t>(layer)] = std::move(pruned);
  }
}

absl::Status ParseModel(const Values& v, ModelConfig* m) {
  m->layers = v.Int("model.layers");
  m->d_model = v.Int("model.d_model");
  m->heads = v.Int("model.heads");
  m->head_dim = v.Int("model.head_dim");
  // kv_heads 0 = "as many as model.heads" (the schema's default) stays 0: KvHeads() resolves it.
  m->kv_heads = v.Int("model.kv_heads");
  m->ffn_mult = v.Int("model.ffn_mult");
  TAE_RETURN_IF_ERROR(v.Enum("model.activation", kActivations, &m->activation));
  TAE_RETURN_IF_ERROR(v.Enum("model.norm", kNorms, &m->norm));
  TAE_RETURN_IF_ERROR(v.Enum("model.norm_position", kNormPositions, &m->norm_position));
  TAE_RETURN_IF_ERROR(v.Enum("model.pos_encoding", kPosEncodings, &m->pos_encoding));
  m->residual = v.Bool("model.residual");
  m->causal = v.Bool("model.causal");
  m->drop_attention_layers = v.Sorted<int64_t>("model.drop_attention_layers");
  m->drop_ffn_layers = v.Sorted<int64_t>("model.drop_ffn_layers");
  m->tie_embeddings = v.Bool("model.tie_embeddings");
  m->bias = v.Bool("model.bias");
  m->dropout = v.Double("model.dropout");
  TAE_RETURN_IF_ERROR(v.Enum("model.init", kInits, &m->init));
  ParsePrunedHeads(v.Json("model.prune_heads"), m);
  return absl::OkStatus();
}

absl::Status ParseTraining(const Values& v, TrainingConfig* t) {
  TAE_RETURN_IF_ERROR(v.Enum("train.task", kTasks, &t->task));
  t->data = v.String("train.data");
  t->vocab = v.Int("train.vocab");
  t->seq_len = v.Int("train.seq_len");
  t->batch_size = v.Int("train.batch_size");
  t->steps = v.Int("train.steps");
  TAE_RETURN_IF_ERROR(v.Enum("train.optimizer", kOptimizers, &t->optimizer));
  t->lr = v.Double("train.lr");
  TAE_RETURN_IF_ERROR(v.Enum("train.schedule", kSchedules, &t->schedule));
  t->warmup = v.Int("train.warmup");
  t->weight_decay = v.Double("train.weight_decay");
  t->grad_clip = v.Double("train.grad_clip");
  t->eval_every = v.Int("train.eval_every");
  t->eval_batches = v.Int("train.eval_batches");
  t->checkpoint_every = v.Int("train.checkpoint_every");
  t->head_importance = v.Bool("train.head_importance");
  t->threads = v.Int("train.threads");
  t->seed = static_cast<uint64_t>(v.Int("train.seed"));
  TAE_RETURN_IF_ERROR(v.Enum("train.engine", kEngines, &t->engine));
  t->profile_at = v.Sorted<int64_t>("train.profile_at");
  t->profile_steps = v.Int("train.profile_steps");
  t->log_every = v.Int("train.log_every");
  TAE_RETURN_IF_ERROR(v.Enum("train.precision", kPrecisions, &t->precision));
  TAE_RETURN_IF_ERROR(v.Enum("train.sharding", kShardings, &t->sharding));

  // bf16 and fsdp are the torch engine's.
  if (t->engine == Engine::kLibtorch && t->precision != Precision::kFp32) {
    return KeyError("train.precision", "bf16 is the torch engine's (train.engine = \"torch\")");
  }
  if (t->engine == Engine::kLibtorch && t->sharding != Sharding::kNone) {
    return KeyError("train.sharding", "fsdp is the torch engine's (train.engine = \"torch\")");
  }
  return absl::OkStatus();
}

absl::Status ParseEval(const Values& v, EvalConfig* e) {
  e->prune_fractions = v.Sorted<double>("eval.prune_heads_by_importance");
  return v.Enum("eval.quantize", kQuantizes, &e->quantize);
}

}  // namespace

absl::StatusOr<TrainConfig> ParseTrainConfig(const json& spec) {
  absl::StatusOr<json> checked = spec::CheckRunSpec(spec, "tae-train");
  if (!checked.ok()) {
    return checked.status();
  }
  // The combinations of keys, checked as taed checks every run it expands.
  if (std::optional<spec::CrossProblem> problem = spec::CheckConfig(*checked)) {
    return CrossKeyError(*problem);
  }
  const Values values(*checked);
  TrainConfig config;
  TAE_RETURN_IF_ERROR(ParseModel(values, &config.model));
  TAE_RETURN_IF_ERROR(ParseTraining(values, &config.train));
  TAE_RETURN_IF_ERROR(ParseEval(values, &config.eval));
  return config;
}

TrainConfig DefaultTrainConfig() {
  absl::StatusOr<TrainConfig> config = ParseTrainConfig(spec::DefaultRunSpec());
  if (!config.ok()) {
    // The schema's defaults are a valid run (config_test); anything else is a broken build.
    std::cerr << "tae-train: the schema's defaults do not parse: " << config.status().message()
              << std::endl;
    std::abort();
  }
  return *std::move(config);
}

absl::StatusOr<TrainConfig> LoadTrainConfig(const std::string& path) {
  absl::StatusOr<json> spec = LoadSpecJson(path);
  if (!spec.ok()) {
    return spec.status();
  }
  return ParseTrainConfig(*spec);
}

std::string ConfigFingerprint(const json& spec) { return spec::RunSpecFingerprint(spec); }

absl::StatusOr<json> LoadSpecJson(const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    return absl::InvalidArgumentError(absl::StrCat("run spec: cannot read \"", path, "\""));
  }
  std::stringstream text;
  text << in.rdbuf();
  json spec;
  try {
    spec = json::parse(text.str());
  } catch (const json::parse_error& e) {
    return absl::InvalidArgumentError(
        absl::StrCat("run spec: \"", path, "\" is not valid JSON: ", e.what()));
  }
  return spec;
}

const char* ActivationName(Activation activation) { return NameOf(kActivations, activation); }

const char* NormName(NormKind norm) { return NameOf(kNorms, norm); }

const char* NormPositionName(NormPosition position) { return NameOf(kNormPositions, position); }

const char* PosEncodingName(PosEncoding pos_encoding) {
  return NameOf(kPosEncodings, pos_encoding);
}

const char* TaskName(TaskKind task) { return NameOf(kTasks, task); }

const char* InitSchemeName(InitScheme init) { return NameOf(kInits, init); }

const char* EngineName(Engine engine) { return NameOf(kEngines, engine); }

int64_t KvHeads(const ModelConfig& config) {
  return config.kv_heads == 0 ? config.heads : config.kv_heads;
}

int64_t HeadDim(const ModelConfig& config) {
  return config.head_dim == 0 ? config.d_model / config.heads : config.head_dim;
}

std::vector<int64_t> KeptHeads(const ModelConfig& config, int64_t layer) {
  std::vector<int64_t> kept;
  const std::vector<int64_t>* pruned = nullptr;
  if (layer >= 0 && static_cast<size_t>(layer) < config.prune_heads.size()) {
    pruned = &config.prune_heads[static_cast<size_t>(layer)];
  }
  for (int64_t h = 0; h < config.heads; ++h) {
    if (pruned == nullptr || std::find(pruned->begin(), pruned->end(), h) == pruned->end()) {
      kept.push_back(h);
    }
  }
  return kept;
}

std::vector<int64_t> KvHeadsFor(const std::vector<int64_t>& kept, int64_t group) {
  std::vector<int64_t> kv;
  for (int64_t h : kept) {
    if (kv.empty() || kv.back() != h / group) {
      kv.push_back(h / group);
    }
  }
  return kv;
}

}  // namespace tae::train

#undef TAE_RETURN_IF_ERROR
