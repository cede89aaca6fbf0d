#include "common/spec/schema.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_join.h"
#include "common/spec/text.h"

namespace tae::spec {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

KeyInfo Int(std::string_view name, std::string_view def, double min, double max,
            std::string_view doc) {
  KeyInfo key;
  key.name = name;
  key.type = ValueType::kInt;
  key.default_json = def;
  key.min = min;
  key.max = max;
  key.doc = doc;
  return key;
}

KeyInfo Float(std::string_view name, std::string_view def, double min, bool min_open, double max,
              bool max_open, std::string_view doc) {
  KeyInfo key = Int(name, def, min, max, doc);
  key.type = ValueType::kFloat;
  key.min_open = min_open;
  key.max_open = max_open;
  return key;
}

KeyInfo Of(ValueType type, std::string_view name, std::string_view def, std::string_view doc) {
  KeyInfo key;
  key.name = name;
  key.type = type;
  key.default_json = def;
  key.doc = doc;
  return key;
}

KeyInfo Enum(std::string_view name, std::string_view def, std::string_view allowed,
             std::string_view doc) {
  KeyInfo key = Of(ValueType::kEnum, name, def, doc);
  key.allowed = allowed;
  return key;
}

KeyInfo IntArray(std::string_view name, std::string_view def, bool non_empty,
                 std::string_view doc) {
  KeyInfo key = Of(ValueType::kIntArray, name, def, doc);
  key.min = 0;
  key.unique = true;
  key.non_empty = non_empty;
  return key;
}

// A list of seeds, or { min, max, alpha, margin } for adaptive seeds (common/stats/sequential.h).
KeyInfo Seeds() {
  KeyInfo key = IntArray("train.seeds", "[0, 1, 2]", true,
                         "every variant runs once per seed; or { min = 3, max = 12 } (alpha = "
                         "0.05, margin = { metric = m }): min seeds, then one more for each "
                         "comparison with the baseline that is still undecided, up to max");
  key.type = ValueType::kSeeds;
  return key;
}

KeyInfo ProfileAt() {
  KeyInfo key = IntArray("train.profile_at", "[]", false,
                         "steps before which tae-train captures a profile of train.profile_steps "
                         "steps, stored as the run's artifact profile-stepN (docs/profiles.md)");
  key.min = 1;
  return key;
}

KeyInfo PruneFractions() {
  KeyInfo key = Of(ValueType::kFloatArray, "eval.prune_heads_by_importance", "[]",
                   "after training, mask this fraction of the least important heads (gradient "
                   "importance) and evaluate: prune/* metrics per fraction (tae-train)");
  key.min = 0;
  key.min_open = true;
  key.max = 1;
  key.max_open = true;
  key.unique = true;
  return key;
}

// Layer index (a string) -> head indices: min and unique are those of the head indices.
KeyInfo PrunedHeads() {
  KeyInfo key = Of(ValueType::kHeadMap, "model.prune_heads", "{}",
                   "heads removed from the start, per layer: { \"0\" = [1, 3] } (fewer "
                   "parameters and FLOPs)");
  key.min = 0;
  key.unique = true;
  return key;
}

KeyInfo Experiment(KeyInfo key) {
  key.scope = KeyScope::kExperiment;
  return key;
}

// A key added after the first run.json format: a run spec without it means `absent` (JSON text;
// by default the key's default), what runs stored before the key existed trained with.
KeyInfo AddedLater(KeyInfo key, std::string_view absent = {}) {
  key.absent_json = absent.empty() ? key.default_json : absent;
  return key;
}

// A key that does not change the training trajectory (not in the checkpoint fingerprint).
KeyInfo OffTrajectory(KeyInfo key) {
  key.trajectory = false;
  return key;
}

// train.seed: the element of train.seeds a run got (set by taed; a run-spec key only).
KeyInfo RunSeed() {
  return Int("train.seed", "0", 0, kInf,
             "the run's seed: its element of train.seeds (set by taed for each run)");
}

std::vector<KeyInfo> BuildSchema() {
  using T = ValueType;
  return {
      Experiment(Of(T::kName, "name", "", "experiment name, [A-Za-z0-9._-]+ (required)")),
      Experiment(Of(T::kString, "description", R"("")", "free text")),
      // [model]
      Int("model.layers", "2", 0, 64, "number of Transformer blocks"),
      Int("model.d_model", "64", 1, 8192, "residual stream width"),
      Int("model.heads", "4", 1, kInf,
          "attention heads; must divide model.d_model unless model.head_dim is set"),
      Int("model.head_dim", "0", 0, 65536,
          "width of one head; 0: model.d_model / model.heads (rope needs it even)"),
      // 0 stands for "= model.heads" (the spec has no key-to-key defaults).
      Int("model.kv_heads", "0", 0, kInf,
          "key/value heads (< heads: GQA, 1: MQA); must divide model.heads; 0: = model.heads"),
      Int("model.ffn_mult", "4", 1, 64, "d_ff = ffn_mult * d_model"),
      Enum("model.activation", R"("gelu")", "relu|gelu|swiglu|geglu",
           "FFN activation; swiglu/geglu are gated (3 matrices of d_ff, unscaled)"),
      Enum("model.norm", R"("layernorm")", "layernorm|rmsnorm|scalenorm|none",
           "normalisation layer"),
      Enum("model.norm_position", R"("pre")", "pre|post|sandwich",
           "norm before each sublayer, after the residual add, or before and after the sublayer"),
      Enum("model.pos_encoding", R"("learned")", "none|sinusoidal|learned|rope|alibi",
           "positional encoding: added to embeddings (sinusoidal, learned), rotary (rope) or "
           "linear attention biases (alibi)"),
      Of(T::kBool, "model.residual", "true", "residual connections around sublayers"),
      Of(T::kBool, "model.causal", "true", "causal mask; false: bidirectional encoder"),
      IntArray("model.drop_attention_layers", "[]", false,
               "layers whose attention sublayer is removed"),
      IntArray("model.drop_ffn_layers", "[]", false, "layers whose FFN sublayer is removed"),
      PrunedHeads(),
      Of(T::kBool, "model.tie_embeddings", "false",
         "output head = token embedding (tied, attention-only models learn induction poorly)"),
      Of(T::kBool, "model.bias", "true", "biases in linear layers"),
      Float("model.dropout", "0.0", 0, false, 0.99, false, "dropout probability"),
      AddedLater(Enum("model.init", R"("torch")", "gpt2|torch",
                      "initialisation: PyTorch's module defaults, or N(0, 0.02) matrices and "
                      "zero biases (a stored run spec without the key means gpt2)"),
                 R"("gpt2")"),
      // [train]
      Enum("train.task", R"("copy")", "copy|reverse|sort|assoc_recall|induction|mod_add|lm",
           "synthetic task (docs/tasks.md) or byte-level LM"),
      Of(T::kString, "train.data", R"("")", "text file for task = \"lm\" (\"\": built-in)"),
      Int("train.vocab", "16", 2, 65536, "alphabet size of synthetic tasks"),
      Int("train.seq_len", "32", 4, 65536, "sequence length"),
      Int("train.batch_size", "32", 1, 65536, "sequences per step"),
      Int("train.steps", "500", 1, 1e9, "optimiser steps"),
      Enum("train.optimizer", R"("adamw")", "adamw|sgd", "optimiser"),
      Float("train.lr", "3e-3", 0, true, 1e3, false, "peak learning rate"),
      Enum("train.schedule", R"("cosine")", "constant|linear|cosine", "lr schedule after warmup"),
      Int("train.warmup", "50", 0, kInf, "linear warmup steps; at most train.steps"),
      Float("train.weight_decay", "0.0", 0, false, 1e3, false, "decoupled weight decay"),
      Float("train.grad_clip", "1.0", 0, false, 1e9, false, "gradient norm clip; 0: off"),
      OffTrajectory(
          Int("train.eval_every", "100", 0, kInf, "steps between evaluations; 0: only at the end")),
      Int("train.eval_batches", "8", 1, 1 << 20, "batches per evaluation"),
      OffTrajectory(Int("train.checkpoint_every", "0", 0, kInf,
                        "steps between checkpoints in the run directory; 0: only at the end")),
      OffTrajectory(
          Int("train.threads", "0", 0, 4096, "intra-op threads; 0: all cores of the slot")),
      OffTrajectory(Of(T::kBool, "train.head_importance", "false",
                       "score every head at the end: mask-at-eval loss delta and gradient score")),
      AddedLater(Enum("train.engine", R"("libtorch")", "libtorch|torch",
                      "tae-train's own (C++) or the PyTorch engine (XLA/TPU, CUDA or CPU; needs "
                      "python3-torch on the agent)")),
      Experiment(Seeds()),
      AddedLater(OffTrajectory(ProfileAt())),
      AddedLater(OffTrajectory(
          Int("train.profile_steps", "5", 1, 1000, "steps each train.profile_at profile covers"))),
      AddedLater(OffTrajectory(
          Int("train.log_every", "10", 1, kInf, "steps per train/* and perf/* metrics line"))),
      AddedLater(Enum("train.precision", R"("fp32")", "fp32|bf16",
                      "bf16: forward passes under bf16 autocast, fp32 master weights "
                      "(train.engine = \"torch\")")),
      AddedLater(Enum("train.sharding", R"("none")", "none|fsdp",
                      "fsdp: weights, gradients and optimiser state fully sharded over the run's "
                      "hosts (train.engine = \"torch\")")),
      // [eval]
      AddedLater(OffTrajectory(PruneFractions())),
      AddedLater(OffTrajectory(
          Enum("eval.quantize", R"("none")", "none|int8-dynamic",
               "also evaluate the trained model with its linear layers quantised to int8 (dynamic "
               "activations): quant/* metrics beside the fp32 ones (tae-train)"))),
      // [resources]
      Int("resources.slots", "1", 1, kInf, "worker slots a run occupies"),
      Int("resources.hosts", "1", 1, 256,
          "agents of one slice (same `slice` label) a run spans, gang-scheduled; ranks 0..N-1"),
      Of(T::kStringMap, "resources.labels", "{}", "agent labels a run needs, e.g. accelerator"),
      Int("resources.max_attempts", "3", 1, kInf,
          "attempts a run gets for its job's own failures when resources.retry_on = \"any\"; "
          "the worker's faults (agent lost, code not staged, disk or work dir broken) never "
          "count"),
      Enum("resources.retry_on", R"("infra")", "infra|any",
           "which failures requeue a run: infra = only the worker's faults (the job's own "
           "failure ends it failed), any = the job's failures too, within max_attempts"),
      Int("resources.priority", "0", -kInf, kInf, "higher runs first"),
      Of(T::kBytes, "resources.max_disk", "0",
         "most a run may write into its directories on a worker (e.g. \"20GB\"): past it "
         "the job is stopped and fails, as it does when it fills the worker's disk itself; 0: "
         "no limit"),
      Int("resources.keep_checkpoints", "2", 0, 1000,
          "checkpoints of each run taed keeps, uploaded when the job marks one complete; 0: "
          "none leave the worker"),
      Int("resources.max_concurrent", "0", 0, kInf,
          "at most this many runs of the experiment at once; 0: no cap"),
      // [job]
      Experiment(Of(T::kString, "job.code", R"("")",
                    "directory (relative to the spec file) snapshotted and materialised in every "
                    "run directory")),
      Experiment(Of(T::kString, "job.command", R"("")",
                    "run this with /bin/sh -c in the run directory instead of tae-train; {key} "
                    "is replaced by the run's value of key (e.g. {train.lr}), {{ by {")),
      // [job.metrics]: a command job's own output lines as metrics (docs/metrics.md)
      OffTrajectory(
          Of(T::kPatterns, "job.metrics.pattern", "[]",
             "regular expressions (RE2) over the job's output lines: each named group is a "
             "metric (its name, or job.metrics.names' for it), the group `step` the step, "
             "e.g. 'iter (?P<step>\\d+): loss (?P<train_loss>\\S+)'; one or an array")),
      OffTrajectory(Of(T::kStringMap, "job.metrics.names", "{}",
                       "a pattern group -> the metric name it is stored as (e.g. train_loss = "
                       "\"train/loss\"); unnamed groups keep their own name")),
      OffTrajectory(Enum("job.metrics.stream", R"("both")", "stdout|stderr|both",
                         "which of the job's output streams job.metrics.pattern reads")),
      OffTrajectory(Enum("job.checkpoints", R"("mark")", "mark|watch",
                         "mark: a checkpoint is what the job marks (tae_log.checkpoint); watch: "
                         "also the files the job writes into TAE_CHECKPOINT_DIR itself, once "
                         "they stay unchanged for 2 s, at the run's last reported step")),
      OffTrajectory(Enum("job.wandb", R"("off")", "off|capture",
                         "capture: the job's `import wandb` gets a stand-in that sends wandb.log "
                         "points (wandb's own steps), config and summary to TAE, with no "
                         "network; off: nothing changed")),
      OffTrajectory(Of(T::kString, "job.tensorboard", R"("")",
                       "a directory (relative to the run directory; \".\" for all of it) where the "
                       "job writes TensorBoard event files: the agent stores their scalars as "
                       "metrics, as it reads them; \"\": none")),
      // [report]
      Experiment(Of(T::kMetricList, "report.metrics", "[]",
                    "the metrics taectl report and plot show when none is named; empty: "
                    "eval/loss and eval/acc, or the runs' own")),
      Experiment(Of(T::kFloorMap, "report.floor", "{}",
                    "per metric, the level at or beyond which a run has not learned (e.g. "
                    "\"val/acc\" = 0.5): rows there are marked, a baseline there gets a banner")),
      Experiment(Enum("report.correction", R"("holm")", "holm|bonferroni|none",
                      "how the table controls each metric's family of comparisons with the "
                      "baseline at alpha (0.05; train.seeds.alpha): holm (step-down), "
                      "bonferroni (alpha / K each), none (alpha each; the family is not "
                      "controlled)")),
      Experiment(Enum("report.pairing", R"("none")", "none|seed",
                      "how a fixed-seed table compares a variant with its baseline: none "
                      "(Welch's unequal-variance test of the two arms), seed (the paired t-test "
                      "of the per-seed differences: for studies where a seed fixes the data order "
                      "and the init of both arms, e.g. tae-train ablations that keep the "
                      "parameter shapes; docs/report.md, \"Pairing by seed\")")),
      Experiment(Of(T::kGoalMap, "report.goal", "{}",
                    "per metric, \"min\" or \"max\": which way is better (best, Δ colours); "
                    "unnamed metrics: max for accuracies and throughput, min for the rest")),
      // [search]
      Experiment(
          Enum("search.method", R"("grid")", "grid|asha",
               "grid: every [grid] point runs to the end; asha: asynchronous successive "
               "halving stops a point (all its seeds) that is not in the best 1/reduction "
               "of the points that reached a rung (steps min_steps * reduction^k) before it")),
      Experiment(Of(T::kString, "search.metric", R"("")",
                    "the metric grid points are judged and each variant's best point is chosen "
                    "on; \"\": [report]'s first metric, else eval/loss")),
      Experiment(Enum("search.goal", R"("")", "min|max",
                      "which way search.metric is better; unset: [report]'s goal for it, else max "
                      "for accuracies and throughput, min for the rest")),
      Experiment(Int("search.min_steps", "0", 1, 1e9,
                     "asha: the step of the first rung (required, below train.steps)")),
      Experiment(Int("search.reduction", "3", 2, 1000,
                     "asha: eta, each rung keeps the best 1/eta of the points that reached it")),
      Experiment(Int("search.bootstrap", "0", 0, 1e6,
                     "asha: 0: the finite rule, a rung keeps the best 1/reduction of the points "
                     "that can reach it (the grid's size known in advance) and stops a point only "
                     "once that many better values are in; N >= 1: a rung judges no point until "
                     "N points reached it (or every point that still can), keeping 1/reduction "
                     "of those so far; 1: Optuna's rule")),
      Experiment(Enum("search.order", R"("shuffled")", "shuffled|listed",
                      "asha: the order grid points start in: shuffled (by search.order_seed, the "
                      "same on every submit), or as the file lists them")),
      Experiment(Int("search.order_seed", "0", 0, 9e15,
                     "asha: the seed of the shuffled order of grid points")),
      Experiment(Enum("search.within", R"("variant")", "variant|study",
                      "asha: which points compete: each variant's grid points among themselves, "
                      "or all points of the study")),
      Experiment(Int("search.confirm", "0", 0, 1000,
                     "fresh seeds each variant's chosen [grid] point gets once the search is "
                     "over; the tuned table then reports those seeds alone (0: none, and its "
                     "estimates are optimistic: chosen on the same seeds)")),
  };
}

std::string_view Table(std::string_view name) {
  size_t dot = name.rfind('.');
  return dot == std::string_view::npos ? std::string_view() : name.substr(0, dot);
}

std::string_view Leaf(std::string_view name) {
  size_t dot = name.rfind('.');
  return dot == std::string_view::npos ? name : name.substr(dot + 1);
}

std::string FormatBound(const KeyInfo& key, double bound) {
  if (key.type == ValueType::kFloat || key.type == ValueType::kFloatArray) {
    return Cat(bound);
  }
  return Cat(static_cast<int64_t>(bound));
}

}  // namespace

const std::vector<KeyInfo>& Schema() {
  static const auto* const schema = new std::vector<KeyInfo>(BuildSchema());
  return *schema;
}

const KeyInfo* FindKey(std::string_view name) {
  for (const KeyInfo& key : Schema()) {
    if (key.name == name) {
      return &key;
    }
  }
  return nullptr;
}

const std::vector<KeyInfo>& RunSpecKeys() {
  static const auto* const keys = [] {
    auto* run_keys = new std::vector<KeyInfo>;
    const std::vector<std::string_view>& tables = RunSpecTables();
    for (const KeyInfo& key : Schema()) {
      if (key.name == "train.seeds") {
        run_keys->push_back(RunSeed());
      }
      bool trainer_table = std::find(tables.begin(), tables.end(), Table(key.name)) != tables.end();
      if (key.scope == KeyScope::kRun && trainer_table) {
        run_keys->push_back(key);
      }
    }
    return run_keys;
  }();
  return *keys;
}

const std::vector<std::string_view>& RunSpecTables() {
  static const auto* const tables = new std::vector<std::string_view>{"model", "train", "eval"};
  return *tables;
}

const std::vector<std::string_view>& Sections() {
  static const auto* const sections = new std::vector<std::string_view>{
      "model", "train", "eval", "resources", "job", "report", "search"};
  return *sections;
}

nlohmann::json DefaultConfig() {
  nlohmann::json config = nlohmann::json::object();
  for (const KeyInfo& key : Schema()) {
    if (key.scope == KeyScope::kRun) {
      config[std::string(key.name)] = nlohmann::json::parse(key.default_json);
    }
  }
  return config;
}

std::string DescribeRange(const KeyInfo& key) {
  bool has_min = std::isfinite(key.min);
  bool has_max = std::isfinite(key.max);
  if (has_min && has_max && !key.min_open && !key.max_open && key.type != ValueType::kFloat &&
      key.type != ValueType::kFloatArray) {
    return Cat(FormatBound(key, key.min), "..", FormatBound(key, key.max));
  }
  std::vector<std::string> parts;
  if (has_min) {
    parts.push_back(Cat(key.min_open ? "> " : ">= ", FormatBound(key, key.min)));
  }
  if (has_max) {
    parts.push_back(Cat(key.max_open ? "< " : "<= ", FormatBound(key, key.max)));
  }
  return absl::StrJoin(parts, " and ");
}

std::vector<std::string> AllowedValues(const KeyInfo& key) {
  std::vector<std::string> values;
  std::string_view rest = key.allowed;
  while (!rest.empty()) {
    size_t bar = std::min(rest.find('|'), rest.size());
    values.emplace_back(rest.substr(0, bar));
    rest.remove_prefix(std::min(bar + 1, rest.size()));
  }
  return values;
}

int EditDistance(std::string_view a, std::string_view b) {
  const size_t n = a.size();
  const size_t m = b.size();
  std::vector<std::vector<int>> d(n + 1, std::vector<int>(m + 1, 0));
  for (size_t i = 0; i <= n; ++i) {
    d[i][0] = static_cast<int>(i);
  }
  for (size_t j = 0; j <= m; ++j) {
    d[0][j] = static_cast<int>(j);
  }
  for (size_t i = 1; i <= n; ++i) {
    for (size_t j = 1; j <= m; ++j) {
      int cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
      }
    }
  }
  return d[n][m];
}

std::optional<std::string> Suggest(std::string_view unknown,
                                   const std::vector<std::string_view>& candidates) {
  constexpr int kMaxDistance = 2;
  constexpr size_t kMinPrefix = 3;
  int best_distance = kMaxDistance + 1;
  std::optional<std::string> best;
  for (std::string_view candidate : candidates) {
    int distance = EditDistance(unknown, candidate);
    if (distance < best_distance) {
      best_distance = distance;
      best = std::string(candidate);
    }
  }
  if (best) {
    return best;
  }
  for (std::string_view candidate : candidates) {
    if (Leaf(candidate) == Leaf(unknown)) {
      return std::string(candidate);
    }
  }
  std::string_view leaf = Leaf(unknown);
  for (std::string_view candidate : candidates) {
    std::string_view other = Leaf(candidate);
    bool prefix = leaf.size() >= kMinPrefix && other.size() >= kMinPrefix &&
                  (other.substr(0, leaf.size()) == leaf || leaf.substr(0, other.size()) == other);
    if (Table(candidate) == Table(unknown) && prefix) {
      return std::string(candidate);
    }
  }
  return std::nullopt;
}

std::string DidYouMean(std::string_view unknown, const std::vector<std::string_view>& candidates) {
  std::optional<std::string> suggestion = Suggest(unknown, candidates);
  return suggestion ? Cat(" (did you mean '", *suggestion, "'?)") : std::string();
}

}  // namespace tae::spec
