// tae-metrics-bench: the metrics benchmarks (bench/README.md). Parses flags and runs one of
//   ingest   simulated agents stream metric lines into a real taed; points/s vs raw SQLite
//   query    `taectl report` and `taectl ls` against a real taed holding 1,000 x 10,000 points
//   dataset  only make (or reuse) the query data set in a dir (bench/dashboard_bench.sh)
//   agent    one simulated agent (started by `ingest`, not by hand)

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "agent/link/enrol.h"
#include "bench/metrics/dataset.h"
#include "bench/metrics/ingest_bench.h"
#include "bench/metrics/query_bench.h"
#include "bench/metrics/sim_agent.h"
#include "common/cli/flags.h"

namespace {

constexpr char kUsage[] =
    "usage: tae-metrics-bench ingest|query|dataset [flags]\n\n"
    "The metrics benchmarks; `bash bench/metrics_bench.sh ingest|query|all` runs them.\n"
    "`tae-metrics-bench COMMAND --help` lists each one's flags.";

int Parse(tae::cli::FlagSet* flags, const std::vector<std::string>& args) {
  std::vector<std::string> positional;
  absl::Status parsed = flags->Parse(args, &positional);
  if (flags->help_requested()) {
    std::fputs(flags->Help().c_str(), stdout);
    return 0;
  }
  if (parsed.ok() && !positional.empty()) {
    parsed = absl::InvalidArgumentError(absl::StrCat("unexpected argument '", positional[0], "'"));
  }
  if (!parsed.ok()) {
    std::fprintf(stderr, "tae-metrics-bench: %s\n", std::string(parsed.message()).c_str());
    return 2;
  }
  return -1;
}

int Ingest(const std::vector<std::string>& args) {
  tae::bench::IngestOptions options;
  std::string agents = "4,16";
  bool no_references = false;
  tae::cli::FlagSet flags(
      "usage: tae-metrics-bench ingest [flags]\n\n"
      "Simulated agents stream metric lines through the agent link into a real taed; prints\n"
      "points/s stored, checks every point was stored once, and compares with raw SQLite.");
  flags.String("agents", &agents, "comma-separated agent counts, one configuration each");
  flags.Int("slots", &options.slots, "runs per agent");
  flags.Int("points", &options.points, "points per configuration");
  flags.Int("values", &options.values_per_event, "values per metric line");
  flags.Int("batch", &options.batch_events, "lines per batch (tae-agent's maximum: 2000)");
  flags.Int("window", &options.window_batches, "unacked batches per agent");
  flags.Bool("no-references", &no_references, "skip the raw SQLite and in-process references");
  flags.Bool("keep", &options.keep, "keep the temporary TAE_HOMEs and databases");
  flags.Int("rounds", &options.rounds,
            "run each configuration this many times, interleaved, and judge the median "
            "round's ratio to raw SQLite (one round's moves by tens of percent on a busy box)");
  flags.Path("store", &options.seed_home,
             "start each taed from a copy of this TAE_HOME's tae.db (e.g. the data set of "
             "`dataset`: ingest into a 30,000-run store)");
  if (int code = Parse(&flags, args); code >= 0) {
    return code;
  }
  options.references = !no_references;
  options.agent_counts.clear();
  for (absl::string_view item : absl::StrSplit(agents, ',', absl::SkipEmpty())) {
    int n = 0;
    if (!absl::SimpleAtoi(item, &n) || n < 1) {
      std::fprintf(stderr, "tae-metrics-bench: --agents: '%s' is not a positive count\n",
                   std::string(item).c_str());
      return 2;
    }
    options.agent_counts.push_back(n);
  }
  if (options.agent_counts.empty() || options.slots < 1 || options.points < 1 ||
      options.batch_events < 1 || options.window_batches < 1 || options.rounds < 1) {
    std::fprintf(stderr,
                 "tae-metrics-bench: --agents, --slots, --points, --batch, --window and "
                 "--rounds must be positive\n");
    return 2;
  }
  return tae::bench::RunIngestBench(options);
}

int Query(const std::vector<std::string>& args) {
  tae::bench::QueryOptions options;
  tae::cli::FlagSet flags(
      "usage: tae-metrics-bench query [flags]\n\n"
      "Fills a real taed's database with runs x points (as ingest leaves them) and times\n"
      "`taectl report` and `taectl ls` from process start to exit.");
  flags.Int("big-runs", &options.big_runs, "runs of the one large experiment");
  flags.Int("small-experiments", &options.small_experiments, "experiments of 10 runs each");
  flags.Int("steps", &options.steps,
            "training lines per run (6 values; an eval line of 4 "
            "every 6 steps)");
  flags.Int("repeats", &options.repeats, "timed invocations of each command");
  flags.Path("data", &options.data_dir,
             "reuse (or create) the data set in this dir instead of a temporary one");
  flags.Bool("keep", &options.keep, "keep the temporary TAE_HOME");
  if (int code = Parse(&flags, args); code >= 0) {
    return code;
  }
  if (options.big_runs < 2 || options.small_experiments < 0 || options.steps < 6 ||
      options.repeats < 1) {
    std::fprintf(stderr, "tae-metrics-bench: --big-runs >= 2, --steps >= 6, --repeats >= 1\n");
    return 2;
  }
  return tae::bench::RunQueryBench(options);
}

int Dataset(const std::vector<std::string>& args) {
  tae::bench::DatasetOptions options;
  std::string dir;
  tae::cli::FlagSet flags(
      "usage: tae-metrics-bench dataset --data DIR [flags]\n\n"
      "Makes the query data set in DIR (a TAE_HOME; reused when a previous call with the same\n"
      "options made it) and exits: runs submitted through a real taed, points filled in SQLite.");
  flags.Path("data", &dir, "the TAE_HOME to fill");
  flags.Int("big-runs", &options.big_runs, "runs of the one large experiment");
  flags.Int("big-variants", &options.big_variants, "variants of the large experiment");
  flags.Int("small-experiments", &options.small_experiments, "experiments of 10 runs each");
  flags.Int("steps", &options.steps, "training lines per run");
  if (int code = Parse(&flags, args); code >= 0) {
    return code;
  }
  if (dir.empty() || options.big_variants < 1 || options.big_runs < options.big_variants) {
    std::fprintf(stderr,
                 "tae-metrics-bench dataset: --data DIR, --big-runs >= --big-variants >= 1\n");
    return 2;
  }
  absl::StatusOr<tae::bench::Dataset> dataset = tae::bench::MakeDataset(dir, options);
  if (!dataset.ok()) {
    std::fprintf(stderr, "tae-metrics-bench dataset: %s\n", dataset.status().ToString().c_str());
    return 1;
  }
  std::printf("%s: %lld experiments, %lld runs, %lld points; large experiment %s\n", dir.c_str(),
              static_cast<long long>(dataset->experiments), static_cast<long long>(dataset->runs),
              static_cast<long long>(dataset->points), dataset->big_experiment.c_str());
  return 0;
}

int Agent(const std::vector<std::string>& args) {
  tae::bench::SimAgentOptions options;
  options.token = tae::cli::EnvOr("TAE_AGENT_TOKEN", "");
  std::string labels;
  tae::cli::FlagSet flags("usage: tae-metrics-bench agent [flags] (started by `ingest`)");
  flags.String("taed", &options.taed, "taed's agent link address");
  flags.String("id", &options.id, "agent id");
  flags.Int("slots", &options.slots, "runs it takes");
  flags.String("labels", &labels, "comma-separated key=value labels");
  flags.Int("steps", &options.steps_per_run, "metric lines per run");
  flags.Int("values", &options.values_per_event, "values per line");
  flags.Int("batch", &options.batch_events, "lines per batch");
  flags.Int("window", &options.window_batches, "unacked batches");
  if (int code = Parse(&flags, args); code >= 0) {
    return code;
  }
  for (absl::string_view item : absl::StrSplit(labels, ',', absl::SkipEmpty())) {
    std::pair<std::string, std::string> kv = absl::StrSplit(item, absl::MaxSplits('=', 1));
    options.labels[kv.first] = kv.second;
  }
  if (options.taed.empty() || options.id.empty() || options.token.empty()) {
    std::fprintf(stderr, "tae-metrics-bench agent: --taed, --id and TAE_AGENT_TOKEN are needed\n");
    return 2;
  }
  // Enrol like a real agent (its own credential from then on), keeping it in a scratch dir.
  char scratch[] = "/tmp/tae-sim-agent.XXXXXX";
  if (mkdtemp(scratch) == nullptr) {
    std::perror("tae-metrics-bench agent: mkdtemp");
    return 1;
  }
  absl::StatusOr<std::string> credential =
      tae::agent::ObtainCredential(options.taed, {}, options.token, options.id, scratch);
  std::filesystem::remove_all(scratch);
  if (!credential.ok()) {
    std::fprintf(stderr, "tae-metrics-bench agent: %s\n", credential.status().ToString().c_str());
    return 1;
  }
  options.token = *credential;
  return tae::bench::RunSimAgent(options);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "%s\n", kUsage);
    return 2;
  }
  std::string command = argv[1];
  std::vector<std::string> args(argv + 2, argv + argc);
  if (command == "ingest") {
    return Ingest(args);
  }
  if (command == "query") {
    return Query(args);
  }
  if (command == "dataset") {
    return Dataset(args);
  }
  if (command == "agent") {
    return Agent(args);
  }
  if (command == "-h" || command == "--help" || command == "help") {
    std::printf("%s\n", kUsage);
    return 0;
  }
  std::fprintf(stderr, "tae-metrics-bench: unknown command '%s'\n%s\n", command.c_str(), kUsage);
  return 2;
}
