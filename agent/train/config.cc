#include "agent/train/config.h"

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <limits>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"

namespace tae::train {
namespace {

using nlohmann::json;

constexpr int64_t kMaxSeqLen = 1 << 16;
constexpr int64_t kMaxVocab = 1 << 20;

absl::Status KeyError(absl::string_view key, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat("run spec: key \"", key, "\": ", why));
}

std::string Shown(const json& value) {
  std::string text = value.dump();
  constexpr size_t kMaxShown = 60;
  if (text.size() > kMaxShown) {
    text = text.substr(0, kMaxShown) + "...";
  }
  return text;
}

// Reads typed values out of the spec; every accessor names the key in its error.
class SpecReader {
 public:
  explicit SpecReader(const json& spec) : spec_(spec) {}

  bool Has(const std::string& key) const { return spec_.contains(key); }

  absl::StatusOr<const json*> Get(const std::string& key) const {
    auto it = spec_.find(key);
    if (it == spec_.end()) {
      return KeyError(key, "missing");
    }
    return &*it;
  }

  absl::Status Int(const std::string& key, int64_t min, int64_t max, int64_t* out) const {
    absl::StatusOr<const json*> value = Get(key);
    if (!value.ok()) {
      return value.status();
    }
    if (!(*value)->is_number_integer()) {
      return KeyError(key, absl::StrCat("must be an integer, got ", Shown(**value)));
    }
    if ((*value)->is_number_unsigned() &&
        (*value)->get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return KeyError(key, absl::StrCat("out of range, got ", Shown(**value)));
    }
    const int64_t v = (*value)->get<int64_t>();
    if (v < min || v > max) {
      return KeyError(key, absl::StrCat("must be in [", min, ", ", max, "], got ", v));
    }
    *out = v;
    return absl::OkStatus();
  }

  absl::Status Double(const std::string& key, double min, double max, double* out) const {
    absl::StatusOr<const json*> value = Get(key);
    if (!value.ok()) {
      return value.status();
    }
    if (!(*value)->is_number()) {
      return KeyError(key, absl::StrCat("must be a number, got ", Shown(**value)));
    }
    const double v = (*value)->get<double>();
    if (!(v >= min && v <= max)) {
      return KeyError(key, absl::StrCat("must be in [", min, ", ", max, "], got ", v));
    }
    *out = v;
    return absl::OkStatus();
  }

  absl::Status Bool(const std::string& key, bool* out) const {
    absl::StatusOr<const json*> value = Get(key);
    if (!value.ok()) {
      return value.status();
    }
    if (!(*value)->is_boolean()) {
      return KeyError(key, absl::StrCat("must be true or false, got ", Shown(**value)));
    }
    *out = (*value)->get<bool>();
    return absl::OkStatus();
  }

  absl::Status String(const std::string& key, std::string* out) const {
    absl::StatusOr<const json*> value = Get(key);
    if (!value.ok()) {
      return value.status();
    }
    if (!(*value)->is_string()) {
      return KeyError(key, absl::StrCat("must be a string, got ", Shown(**value)));
    }
    *out = (*value)->get<std::string>();
    return absl::OkStatus();
  }

  template <typename E>
  absl::Status Enum(const std::string& key, const std::vector<std::pair<std::string, E>>& names,
                    E* out) const {
    std::string text;
    if (absl::Status status = String(key, &text); !status.ok()) {
      return status;
    }
    std::vector<std::string> allowed;
    for (const auto& [name, value] : names) {
      if (name == text) {
        *out = value;
        return absl::OkStatus();
      }
      allowed.push_back(name);
    }
    return KeyError(
        key, absl::StrCat("must be one of ", absl::StrJoin(allowed, "|"), ", got \"", text, "\""));
  }

  // A list of distinct numbers in [min, max] (integers when `integers`), ascending.
  absl::Status NumberList(const std::string& key, double min, double max, bool integers,
                          std::vector<double>* out) const {
    absl::StatusOr<const json*> value = Get(key);
    if (!value.ok()) {
      return value.status();
    }
    if (!(*value)->is_array()) {
      return KeyError(key, absl::StrCat("must be a list, got ", Shown(**value)));
    }
    std::set<double> seen;
    for (const json& item : **value) {
      const bool typed = integers ? item.is_number_integer() : item.is_number();
      if (!typed || !(item.get<double>() >= min && item.get<double>() <= max)) {
        return KeyError(key, absl::StrCat("entries must be ", integers ? "integers" : "numbers",
                                          " in [", min, ", ", max, "], got ", Shown(item)));
      }
      seen.insert(item.get<double>());
    }
    out->assign(seen.begin(), seen.end());
    return absl::OkStatus();
  }

  // A list of distinct layer indices in [0, layers).
  absl::Status LayerList(const std::string& key, int64_t layers, std::vector<int64_t>* out) const {
    absl::StatusOr<const json*> value = Get(key);
    if (!value.ok()) {
      return value.status();
    }
    if (!(*value)->is_array()) {
      return KeyError(key, absl::StrCat("must be a list of layer indices, got ", Shown(**value)));
    }
    std::set<int64_t> seen;
    for (const json& item : **value) {
      if (!item.is_number_integer() || item.get<int64_t>() < 0 || item.get<int64_t>() >= layers) {
        return KeyError(key, absl::StrCat("entries must be layer indices in [0, ", layers,
                                          "), got ", Shown(item)));
      }
      seen.insert(item.get<int64_t>());
    }
    out->assign(seen.begin(), seen.end());
    return absl::OkStatus();
  }

  // {"layer": [head, ...]} with existing layers and heads; a layer that keeps its attention must
  // keep at least one head.
  absl::Status HeadMap(const std::string& key, const ModelConfig& m,
                       std::vector<std::vector<int64_t>>* out) const {
    absl::StatusOr<const json*> value = Get(key);
    if (!value.ok()) {
      return value.status();
    }
    if (!(*value)->is_object()) {
      return KeyError(
          key, absl::StrCat("must be an object of layer -> head indices, got ", Shown(**value)));
    }
    out->assign(static_cast<size_t>(m.layers), {});
    for (const auto& [layer_text, heads] : (*value)->items()) {
      int64_t layer = -1;
      if (!absl::SimpleAtoi(layer_text, &layer) || layer < 0 || layer >= m.layers) {
        return KeyError(
            key, absl::StrCat("\"", layer_text, "\" is not a layer index in [0, ", m.layers, ")"));
      }
      if (!heads.is_array()) {
        return KeyError(key, absl::StrCat("layer ", layer, ": must be a list of head indices"));
      }
      std::set<int64_t> seen;
      for (const json& head : heads) {
        if (!head.is_number_integer() || head.get<int64_t>() < 0 ||
            head.get<int64_t>() >= m.heads) {
          return KeyError(key, absl::StrCat("layer ", layer, ": head indices must be in [0, ",
                                            m.heads, "), got ", Shown(head)));
        }
        seen.insert(head.get<int64_t>());
      }
      const bool attention_kept =
          std::find(m.drop_attention_layers.begin(), m.drop_attention_layers.end(), layer) ==
          m.drop_attention_layers.end();
      if (attention_kept && static_cast<int64_t>(seen.size()) == m.heads) {
        return KeyError(key, absl::StrCat("layer ", layer,
                                          ": every head is pruned but the attention sublayer is "
                                          "kept (use model.drop_attention_layers)"));
      }
      (*out)[static_cast<size_t>(layer)].assign(seen.begin(), seen.end());
    }
    return absl::OkStatus();
  }

 private:
  const json& spec_;
};

#define TAE_RETURN_IF_ERROR(expr)             \
  do {                                        \
    if (absl::Status s_ = (expr); !s_.ok()) { \
      return s_;                              \
    }                                         \
  } while (false)

absl::Status ParseModel(const SpecReader& r, ModelConfig* m) {
  TAE_RETURN_IF_ERROR(r.Int("model.layers", 0, 256, &m->layers));
  TAE_RETURN_IF_ERROR(r.Int("model.d_model", 1, 1 << 16, &m->d_model));
  TAE_RETURN_IF_ERROR(r.Int("model.heads", 1, 1 << 16, &m->heads));
  TAE_RETURN_IF_ERROR(r.Int("model.head_dim", 0, 1 << 16, &m->head_dim));
  if (m->head_dim == 0 && m->d_model % m->heads != 0) {
    return KeyError("model.heads",
                    absl::StrCat("must divide model.d_model (", m->d_model, "), got ", m->heads));
  }
  // 0 = "as many as model.heads" (the spec schema's default).
  TAE_RETURN_IF_ERROR(r.Int("model.kv_heads", 0, 1 << 16, &m->kv_heads));
  if (m->kv_heads == 0) {
    m->kv_heads = m->heads;
  }
  if (m->heads % m->kv_heads != 0) {
    return KeyError("model.kv_heads",
                    absl::StrCat("must divide model.heads (", m->heads, "), got ", m->kv_heads));
  }
  TAE_RETURN_IF_ERROR(r.Int("model.ffn_mult", 1, 64, &m->ffn_mult));
  TAE_RETURN_IF_ERROR(r.Enum<Activation>("model.activation",
                                         {{"relu", Activation::kRelu},
                                          {"gelu", Activation::kGelu},
                                          {"swiglu", Activation::kSwiGlu},
                                          {"geglu", Activation::kGeGlu}},
                                         &m->activation));
  TAE_RETURN_IF_ERROR(r.Enum<NormKind>("model.norm",
                                       {{"layernorm", NormKind::kLayerNorm},
                                        {"rmsnorm", NormKind::kRmsNorm},
                                        {"scalenorm", NormKind::kScaleNorm},
                                        {"none", NormKind::kNone}},
                                       &m->norm));
  TAE_RETURN_IF_ERROR(r.Enum<NormPosition>("model.norm_position",
                                           {{"pre", NormPosition::kPre},
                                            {"post", NormPosition::kPost},
                                            {"sandwich", NormPosition::kSandwich}},
                                           &m->norm_position));
  TAE_RETURN_IF_ERROR(r.Enum<PosEncoding>("model.pos_encoding",
                                          {{"none", PosEncoding::kNone},
                                           {"sinusoidal", PosEncoding::kSinusoidal},
                                           {"learned", PosEncoding::kLearned},
                                           {"rope", PosEncoding::kRope},
                                           {"alibi", PosEncoding::kAlibi}},
                                          &m->pos_encoding));
  if (m->pos_encoding == PosEncoding::kRope && HeadDim(*m) % 2 != 0) {
    return KeyError("model.pos_encoding",
                    absl::StrCat("rope needs an even head width, got ", HeadDim(*m)));
  }
  TAE_RETURN_IF_ERROR(r.Bool("model.residual", &m->residual));
  TAE_RETURN_IF_ERROR(r.Bool("model.causal", &m->causal));
  TAE_RETURN_IF_ERROR(
      r.LayerList("model.drop_attention_layers", m->layers, &m->drop_attention_layers));
  TAE_RETURN_IF_ERROR(r.LayerList("model.drop_ffn_layers", m->layers, &m->drop_ffn_layers));
  TAE_RETURN_IF_ERROR(r.HeadMap("model.prune_heads", *m, &m->prune_heads));
  TAE_RETURN_IF_ERROR(r.Bool("model.tie_embeddings", &m->tie_embeddings));
  TAE_RETURN_IF_ERROR(r.Bool("model.bias", &m->bias));
  TAE_RETURN_IF_ERROR(r.Double("model.dropout", 0.0, 0.99, &m->dropout));
  m->init = kLegacyInit;
  if (r.Has("model.init")) {
    TAE_RETURN_IF_ERROR(r.Enum<InitScheme>(
        "model.init", {{"gpt2", InitScheme::kGpt2}, {"torch", InitScheme::kTorch}}, &m->init));
  }
  return absl::OkStatus();
}

absl::Status ParseTraining(const SpecReader& r, TrainingConfig* t) {
  TAE_RETURN_IF_ERROR(r.Enum<TaskKind>("train.task",
                                       {{"copy", TaskKind::kCopy},
                                        {"reverse", TaskKind::kReverse},
                                        {"sort", TaskKind::kSort},
                                        {"assoc_recall", TaskKind::kAssocRecall},
                                        {"induction", TaskKind::kInduction},
                                        {"mod_add", TaskKind::kModAdd},
                                        {"lm", TaskKind::kLm}},
                                       &t->task));
  TAE_RETURN_IF_ERROR(r.String("train.data", &t->data));
  TAE_RETURN_IF_ERROR(r.Int("train.vocab", 1, kMaxVocab, &t->vocab));
  if (t->task == TaskKind::kCopy && t->vocab < 2) {
    return KeyError("train.vocab", "must be at least 2 for task copy");
  }
  TAE_RETURN_IF_ERROR(r.Int("train.seq_len", 2, kMaxSeqLen, &t->seq_len));
  TAE_RETURN_IF_ERROR(r.Int("train.batch_size", 1, 1 << 16, &t->batch_size));
  TAE_RETURN_IF_ERROR(r.Int("train.steps", 1, int64_t{1} << 40, &t->steps));
  TAE_RETURN_IF_ERROR(r.Enum<OptimizerKind>(
      "train.optimizer", {{"adamw", OptimizerKind::kAdamW}, {"sgd", OptimizerKind::kSgd}},
      &t->optimizer));
  TAE_RETURN_IF_ERROR(r.Double("train.lr", 1e-12, 1e3, &t->lr));
  TAE_RETURN_IF_ERROR(r.Enum<Schedule>("train.schedule",
                                       {{"constant", Schedule::kConstant},
                                        {"linear", Schedule::kLinear},
                                        {"cosine", Schedule::kCosine}},
                                       &t->schedule));
  TAE_RETURN_IF_ERROR(r.Int("train.warmup", 0, int64_t{1} << 40, &t->warmup));
  TAE_RETURN_IF_ERROR(r.Double("train.weight_decay", 0.0, 1e3, &t->weight_decay));
  TAE_RETURN_IF_ERROR(r.Double("train.grad_clip", 0.0, 1e9, &t->grad_clip));
  TAE_RETURN_IF_ERROR(r.Int("train.eval_every", 0, int64_t{1} << 40, &t->eval_every));
  TAE_RETURN_IF_ERROR(r.Int("train.eval_batches", 1, 1 << 20, &t->eval_batches));
  TAE_RETURN_IF_ERROR(r.Int("train.checkpoint_every", 0, int64_t{1} << 40, &t->checkpoint_every));
  TAE_RETURN_IF_ERROR(r.Bool("train.head_importance", &t->head_importance));
  TAE_RETURN_IF_ERROR(r.Int("train.threads", 0, 4096, &t->threads));
  int64_t seed = 0;
  TAE_RETURN_IF_ERROR(r.Int("train.seed", 0, std::numeric_limits<int64_t>::max(), &seed));
  t->seed = static_cast<uint64_t>(seed);
  // Profiles (docs/profiles.md): optional, they do not change the trajectory.
  if (r.Has("train.profile_at")) {
    std::vector<double> steps;
    TAE_RETURN_IF_ERROR(r.NumberList("train.profile_at", 1, 1e15, true, &steps));
    t->profile_at.assign(steps.begin(), steps.end());
  }
  if (r.Has("train.profile_steps")) {
    TAE_RETURN_IF_ERROR(r.Int("train.profile_steps", 1, 1000, &t->profile_steps));
  }
  if (r.Has("train.engine")) {
    TAE_RETURN_IF_ERROR(r.Enum<Engine>(
        "train.engine", {{"libtorch", Engine::kLibtorch}, {"torch", Engine::kTorch}}, &t->engine));
  }
  if (r.Has("train.log_every")) {
    TAE_RETURN_IF_ERROR(r.Int("train.log_every", 1, int64_t{1} << 40, &t->log_every));
  }
  if (r.Has("train.precision")) {
    TAE_RETURN_IF_ERROR(r.Enum<Precision>("train.precision",
                                          {{"fp32", Precision::kFp32}, {"bf16", Precision::kBf16}},
                                          &t->precision));
  }
  if (r.Has("train.sharding")) {
    TAE_RETURN_IF_ERROR(r.Enum<Sharding>(
        "train.sharding", {{"none", Sharding::kNone}, {"fsdp", Sharding::kFsdp}}, &t->sharding));
  }
  if (t->engine == Engine::kLibtorch && t->precision != Precision::kFp32) {
    return KeyError("train.precision", "bf16 is the torch engine's (train.engine = \"torch\")");
  }
  if (t->engine == Engine::kLibtorch && t->sharding != Sharding::kNone) {
    return KeyError("train.sharding", "fsdp is the torch engine's (train.engine = \"torch\")");
  }
  return absl::OkStatus();
}

absl::Status ParseEval(const SpecReader& r, EvalConfig* e) {
  if (r.Has("eval.prune_heads_by_importance")) {
    TAE_RETURN_IF_ERROR(
        r.NumberList("eval.prune_heads_by_importance", 0.0, 1.0, false, &e->prune_fractions));
    for (double f : e->prune_fractions) {
      if (f <= 0.0 || f >= 1.0) {
        return KeyError("eval.prune_heads_by_importance",
                        absl::StrCat("fractions must be in (0, 1), got ", f));
      }
    }
  }
  if (r.Has("eval.quantize")) {
    TAE_RETURN_IF_ERROR(r.Enum<Quantize>(
        "eval.quantize", {{"none", Quantize::kNone}, {"int8-dynamic", Quantize::kInt8Dynamic}},
        &e->quantize));
  }
  return absl::OkStatus();
}

const std::set<std::string>& KnownKeys() {
  static const auto* const kKeys = new std::set<std::string>{"model.layers",
                                                             "model.d_model",
                                                             "model.heads",
                                                             "model.kv_heads",
                                                             "model.head_dim",
                                                             "model.ffn_mult",
                                                             "model.activation",
                                                             "model.norm",
                                                             "model.norm_position",
                                                             "model.pos_encoding",
                                                             "model.residual",
                                                             "model.causal",
                                                             "model.drop_attention_layers",
                                                             "model.drop_ffn_layers",
                                                             "model.prune_heads",
                                                             "model.tie_embeddings",
                                                             "model.bias",
                                                             "model.dropout",
                                                             "model.init",
                                                             "train.task",
                                                             "train.data",
                                                             "train.vocab",
                                                             "train.seq_len",
                                                             "train.batch_size",
                                                             "train.steps",
                                                             "train.optimizer",
                                                             "train.lr",
                                                             "train.schedule",
                                                             "train.warmup",
                                                             "train.weight_decay",
                                                             "train.grad_clip",
                                                             "train.eval_every",
                                                             "train.eval_batches",
                                                             "train.checkpoint_every",
                                                             "train.head_importance",
                                                             "train.threads",
                                                             "train.seed",
                                                             "train.engine",
                                                             "train.profile_at",
                                                             "train.profile_steps",
                                                             "train.log_every",
                                                             "train.precision",
                                                             "train.sharding",
                                                             "eval.prune_heads_by_importance",
                                                             "eval.quantize"};
  return *kKeys;
}

// Every model.* / train.* key must be one this version knows: a spec from a newer taectl that asks
// for something this tae-train cannot do fails loudly instead of being silently ignored.
// train.seeds is the experiment's list; taed expands it into train.seed.
absl::Status CheckUnknownKeys(const json& spec) {
  for (const auto& [key, value] : spec.items()) {
    if (KnownKeys().count(key) > 0 || key == "train.seeds" ||
        (key.rfind("model.", 0) != 0 && key.rfind("train.", 0) != 0 &&
         key.rfind("eval.", 0) != 0)) {
      continue;
    }
    return KeyError(key, "unknown key (is tae-train older than taectl?)");
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<TrainConfig> ParseTrainConfig(const json& spec) {
  if (!spec.is_object()) {
    return absl::InvalidArgumentError("run spec: must be a JSON object");
  }
  SpecReader reader(spec);
  TrainConfig config;
  TAE_RETURN_IF_ERROR(ParseModel(reader, &config.model));
  TAE_RETURN_IF_ERROR(ParseTraining(reader, &config.train));
  TAE_RETURN_IF_ERROR(ParseEval(reader, &config.eval));
  TAE_RETURN_IF_ERROR(CheckUnknownKeys(spec));
  return config;
}

absl::StatusOr<TrainConfig> LoadTrainConfig(const std::string& path) {
  absl::StatusOr<json> spec = LoadSpecJson(path);
  if (!spec.ok()) {
    return spec.status();
  }
  return ParseTrainConfig(*spec);
}

std::string ConfigFingerprint(const json& spec) {
  json kept = json::object();
  for (const auto& [key, value] : spec.items()) {
    const bool run_key = key.rfind("model.", 0) == 0 || key.rfind("train.", 0) == 0;
    if (run_key && key != "train.threads" && key != "train.checkpoint_every" &&
        key != "train.head_importance" && key != "train.eval_every" && key != "train.seeds" &&
        key != "train.profile_at" && key != "train.profile_steps" && key != "train.log_every") {
      kept[key] = value;
    }
  }
  return kept.dump();
}

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

const char* ActivationName(Activation activation) {
  switch (activation) {
    case Activation::kRelu:
      return "relu";
    case Activation::kGelu:
      return "gelu";
    case Activation::kSwiGlu:
      return "swiglu";
    case Activation::kGeGlu:
      return "geglu";
  }
  return "?";
}

const char* NormName(NormKind norm) {
  switch (norm) {
    case NormKind::kLayerNorm:
      return "layernorm";
    case NormKind::kRmsNorm:
      return "rmsnorm";
    case NormKind::kScaleNorm:
      return "scalenorm";
    case NormKind::kNone:
      return "none";
  }
  return "?";
}

const char* NormPositionName(NormPosition position) {
  switch (position) {
    case NormPosition::kPre:
      return "pre";
    case NormPosition::kPost:
      return "post";
    case NormPosition::kSandwich:
      return "sandwich";
  }
  return "?";
}

const char* PosEncodingName(PosEncoding pos_encoding) {
  switch (pos_encoding) {
    case PosEncoding::kNone:
      return "none";
    case PosEncoding::kSinusoidal:
      return "sinusoidal";
    case PosEncoding::kLearned:
      return "learned";
    case PosEncoding::kRope:
      return "rope";
    case PosEncoding::kAlibi:
      return "alibi";
  }
  return "?";
}

const char* TaskName(TaskKind task) {
  switch (task) {
    case TaskKind::kCopy:
      return "copy";
    case TaskKind::kReverse:
      return "reverse";
    case TaskKind::kSort:
      return "sort";
    case TaskKind::kAssocRecall:
      return "assoc_recall";
    case TaskKind::kInduction:
      return "induction";
    case TaskKind::kModAdd:
      return "mod_add";
    case TaskKind::kLm:
      return "lm";
  }
  return "?";
}

const char* InitSchemeName(InitScheme init) { return init == InitScheme::kGpt2 ? "gpt2" : "torch"; }

const char* EngineName(Engine engine) { return engine == Engine::kLibtorch ? "libtorch" : "torch"; }

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
