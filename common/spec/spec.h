// The experiment file (docs/design.md §10): parse, validate and expand into runs.
//
// A Spec is the validated content of one experiment file. Configs are FLAT JSON objects whose
// keys are the full dotted names ("model.layers", "train.lr", "resources.labels", ...), with
// every key of the schema present (defaults filled in). A run's config additionally holds
// "train.seed"; the "train.seeds" list is experiment-level and lives in Spec::seeds.
//
// Errors are absl::InvalidArgumentError with one line "PATH:LINE:COL: what is wrong" (or
// "--set KEY=VALUE: what is wrong" for a bad override); only the first error is reported.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace tae::spec {

// The name of the implicit variant that runs the baseline config unchanged.
inline constexpr std::string_view kBaselineName = "baseline";

// One [[ablation]]: the baseline plus these overrides (flat dotted keys -> values).
struct Variant {
  std::string name;
  nlohmann::json overrides;
};

// One [grid] axis: a run-scope key and the values it takes (converted, in file order).
struct GridAxis {
  std::string key;
  std::vector<nlohmann::json> values;
};

// One run to schedule: a variant at one seed, with its full flat config. Without a [grid] the
// variant is the ablation's name; with one it is the ablation's name followed by the grid point,
// e.g. "no-pos[layers=2,lr=0.001]" (GridVariantName).
struct RunPlan {
  std::string variant;
  std::string ablation;                            // "baseline" or the [[ablation]] name
  nlohmann::json grid = nlohmann::json::object();  // the grid point: key -> value
  int64_t seed = 0;
  nlohmann::json config;
};

// train.seeds = { min = 3, max = 12, alpha = 0.05, margin = { "eval/acc" = 0.01 } }.
struct SeedsDesign {
  bool adaptive = false;  // false: train.seeds is a list
  int min = 0;
  int max = 0;
  double alpha = 0.05;
  std::map<std::string, double> margin;  // metric -> equivalence margin
};

// [search]: how the points of a [grid] are searched, and the metric each variant's best point is
// chosen on (taectl report --tuned). server/search/asha.h decides with it.
enum class SearchMethod {
  kGrid,  // every point runs to the end (also without a [search] table)
  kAsha,  // asynchronous successive halving stops the points that fall behind at a rung
};
enum class SearchWithin {
  kVariant,  // the baseline's and each ablation's grid points compete among themselves
  kStudy,    // all grid points of all variants compete
};
struct SearchPlan {
  bool declared = false;  // the file or a --set names a search.* key
  SearchMethod method = SearchMethod::kGrid;
  // Resolved: search.metric, else [report]'s first metric, else eval/loss.
  std::string metric = "eval/loss";
  // Resolved: search.goal, else [report]'s goal for the metric, else "max" for accuracies and
  // throughput (metrics::LargerIsBetterByDefault), else "min".
  std::string goal = "min";
  int64_t min_steps = 0;  // asha: the first rung's step, >= 1 and below every run's train.steps
  int64_t reduction = 3;  // eta >= 2
  // asha: 0, the finite rule (server/search/asha.h); N >= 1: a rung judges no point until N
  // reached it (or all that still can).
  int64_t bootstrap = 0;
  // asha: the order the grid points start in: shuffled by `order_seed` (the same on every
  // submit), or as the file lists them.
  bool shuffle = true;
  int64_t order_seed = 0;
  SearchWithin within = SearchWithin::kVariant;
  // search.confirm: fresh seeds per variant at its chosen point once the search is over; 0: none.
  int64_t confirm = 0;

  bool asha() const { return method == SearchMethod::kAsha; }
  bool maximize() const { return goal == "max"; }
};

// [scale] stop_if = { rungs = K, band = B }: after the first K rungs, a variant whose
// multiplier's 95% CI lies within [1 - B, 1 + B] skips its larger rungs. rungs 0: never.
struct ScaleStop {
  int rungs = 0;
  double band = 0;
};

// [scale]: a ladder of model sizes. Each rung is a set of run-key overrides (every laddered key
// at its value there), applied to the baseline and to every variant alike; rung 0 is the
// smallest, and rungs run in order (ExpandRuns puts them first, slowest). A rung's size N is
// params[r] when given, else what its runs report (model/params, or a command job's params).
struct ScaleLadder {
  std::vector<std::string> keys;      // the laddered run keys, in key order
  std::vector<nlohmann::json> rungs;  // per rung: key -> value; empty: no [scale]
  std::vector<double> params;         // scale.params: N per rung; empty: from the runs
  ScaleStop stop_if;

  bool declared() const { return !rungs.empty(); }
};

// The grid-point key that names a run's rung (its value: the rung's index); it is in every
// ladder run's config and grid point, and reads "rung" in variant names ("no-pos[rung=2]").
inline constexpr char kRungKey[] = "scale.rung";

// The rung of a variant name ("no-pos[rung=2,lr=0.1]" -> 2), or -1 without one.
int RungOf(std::string_view variant);

// The variant's name without its grid point but with its rung: what competes (an asha search
// within variants, the tuned view) and what a ladder fits. "no-pos[rung=2,lr=0.1]" ->
// "no-pos[rung=2]", "no-pos[lr=0.1]" -> "no-pos", "no-pos" -> "no-pos".
std::string AblationAtRung(std::string_view variant);

// The variant's name without its rung ("no-pos[rung=2,lr=0.1]" -> "no-pos[lr=0.1]",
// "no-pos[rung=2]" -> "no-pos").
std::string WithoutRung(std::string_view variant);

struct Spec {
  std::string name;
  std::string description;
  nlohmann::json base;             // full flat baseline config, without train.seeds/train.seed
  std::vector<int64_t> seeds;      // train.seeds, in file order
  std::vector<Variant> ablations;  // in file order; the baseline is implicit and not listed
  std::vector<GridAxis> grid;      // in key order (TOML tables are unordered); empty: no [grid]
  std::string job_code;            // [job] code: the directory to snapshot ("" : none)
  std::string job_command;         // [job] command template ("" : tae-train)
  // The snapshot of job_code, set by whoever mounted it (taed, from the Submit request); part of
  // the hash and of every run's config ("job.snapshot").
  std::string snapshot_id;
  // [report]: what taectl report and plot show by default, and which way each metric is better
  // (metric -> "min" | "max"). Not part of the hash: changing them changes no run.
  std::vector<std::string> report_metrics;
  std::map<std::string, std::string> report_goal;
  std::map<std::string, double> report_floor;  // [report] floor: metric -> level
  std::string report_correction = "holm";      // [report] correction: holm | bonferroni | none
  std::string report_pairing = "none";         // [report] pairing: none | seed
  // train.seeds as a table { min, max, alpha, margin }: adaptive seeds. Then `seeds` is
  // 0 .. min-1, the seeds every variant starts with; more are added while undecided, up to max.
  SeedsDesign seeds_design;
  // [search]. With method asha it is part of the hash (below); with grid it only names the metric
  // the tuned table chooses on, and is not.
  SearchPlan search;
  // [scale]: part of the hash when declared.
  ScaleLadder scale;
};

// At most this many runs per experiment (variants x grid points x seeds); more is refused.
inline constexpr int64_t kMaxRuns = 10000;

// Parses and validates an experiment file. `path` is only used in messages. `overrides` are
// "KEY=VALUE" strings (`taectl submit --set`) applied to the baseline before the ablations, so
// the ablations inherit them. VALUE is TOML value syntax (4, 1e-3, true, "x", [0, 1]); text
// that is not a TOML value is taken as a bare string (rmsnorm).
absl::StatusOr<Spec> ParseSpec(std::string_view text, std::string_view path,
                               const std::vector<std::string>& overrides);

// Reads `path` and calls ParseSpec.
absl::StatusOr<Spec> ParseSpecFile(const std::string& path,
                                   const std::vector<std::string>& overrides);

// The runs of a spec: for each grid point (the cartesian product of the [grid] axes, the first
// axis varying slowest; one empty point without a grid; with an asha [search] whose points are
// shuffled, in the order GridOrder gives), the baseline and then the ablations in file order,
// each once per seed, seeds in order. Runs start in this order. A run's config is the baseline,
// then the grid point, then the ablation's overrides (which never touch a grid key), then
// train.seed; with a [job], also "job.command" (ExpandCommand of the template) and "job.snapshot"
// (snapshot_id). Size: grid points x (1 + ablations) x seeds.
std::vector<RunPlan> ExpandRuns(const Spec& spec);

// The order an asha search starts `points` grid points in: a permutation of 0..points-1,
// Fisher–Yates driven by SplitMix64 seeded with `seed` (portable: the same on every machine and
// compiler). Listing a grid in ascending order of a hyperparameter that quality follows would
// otherwise make every point the best so far at its rung when it arrives (docs/design.md).
std::vector<size_t> GridOrder(size_t points, int64_t seed);

// The config of `variant` ("baseline" or an ablation name) at `seed` and grid point `grid`
// (key -> value; empty without a grid); null if no such variant.
nlohmann::json ResolveConfig(const Spec& spec, std::string_view variant, int64_t seed,
                             const nlohmann::json& grid = nlohmann::json::object());

// The config of a stored run's config at another seed: what ExpandRuns gives that run's variant
// and grid point at `seed`, derived from the stored config (not from the spec's base), so keys
// whose defaults changed since it was stored keep their stored values. A [job] command
// (`job_command`, the spec's template; "" without a [job]) is expanded again, as it may name
// {train.seed}; job.snapshot is kept.
nlohmann::json ConfigAtSeed(const nlohmann::json& config, int64_t seed,
                            std::string_view job_command);

// The variant name of `ablation` at grid point `point`: the ablation's name alone for an empty
// point, else name[short=value,...] in axis order, where short is the key without its section
// ("model.layers" -> "layers") unless two axes would then look the same.
std::string GridVariantName(std::string_view ablation, const nlohmann::json& point,
                            const std::vector<GridAxis>& grid);

// The name of the baseline variant that `variant` is compared with: "baseline" plus the same
// grid suffix ("no-pos[layers=2]" -> "baseline[layers=2]"); `baseline` replaces "baseline".
std::string BaselineFor(std::string_view variant, std::string_view baseline = kBaselineName);

// A stable 16-hex-digit hash (FNV-1a 64) of the canonical content: name, description, base,
// seeds and ablations (and the grid, the job, and [search] when its method is asha). Whitespace,
// comments and key order in the file do not change it. [report] does not enter it (it changes no
// run), nor does a grid [search] (it only changes which point the tuned table shows); an asha
// [search] does, whole: it decides which runs are stopped early, so the same file run with
// `--set search.method=grid` is another experiment, with runs and results of its own.
// search.confirm > 0 enters it with the metric and goal (it adds runs at the points they choose).
std::string SpecHash(const Spec& spec);

// Whether a run config key reaches a command job as something it may read: params.*, job.*,
// resources.*, the seed (train.seed), or a key its command template names (`command_keys`,
// CommandPlaceholders). The rest (tae-train's model.*, train.*, eval.*) is in every config but
// a command job that does not name it never sees it; show and compare leave it out unless asked.
bool ReachesCommand(std::string_view key, const std::vector<std::string>& command_keys);

// The placeholder keys of a [job] command template, in order ("{train.lr}" -> "train.lr"; "{{"
// is a literal "{" and "}}" a literal "}"). InvalidArgument for an unclosed or empty placeholder.
absl::StatusOr<std::vector<std::string>> CommandPlaceholders(std::string_view command);

// The command of one run: every {key} replaced by the config's value (strings as they are,
// numbers in their shortest JSON form, lists as JSON), shell-quoted unless it is made only of
// characters that need no quoting; {params:STYLE} by RenderParams(STYLE, config); {resume:TEXT}
// kept as it is, for the agent to resolve at each attempt (agent/runner/resume.h: TEXT on an
// attempt that starts from a restored checkpoint). A command may not write "{{resume:" (its
// literal text would read as the placeholder at the agent); the parser refuses it.
inline constexpr char kResumePrefix[] = "resume:";
// The run key of a run's seed (its value in every run's config).
inline constexpr std::string_view kSeedKey = "train.seed";
std::string ExpandCommand(std::string_view command, const nlohmann::json& config);

// The styles {params:STYLE} renders every [params] key in: "argparse" (--rotary false
// --dropout 0.1), "ml_collections" (--config.rotary=False --config.dropout=0.1, absl flags of an
// ml_collections config) and "hydra" (rotary=false dropout=0.1). Nested params keep their dots
// (--model.dim 64).
const std::vector<std::string_view>& ParamRenderers();

// The config's params.* keys as command-line words in `style`, each shell-quoted, joined by
// spaces, in key order; "" for an unknown style or no params.
std::string RenderParams(std::string_view style, const nlohmann::json& config);

// `text` quoted for /bin/sh when it holds anything but [A-Za-z0-9_./:=+,@%-].
std::string ShellQuote(std::string_view text);

// Every key an experiment file (or --set) may set, as full dotted names, in schema order.
std::vector<std::string> KnownKeys();

}  // namespace tae::spec
