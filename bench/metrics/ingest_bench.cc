#include "bench/metrics/ingest_bench.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "bench/metrics/children.h"
#include "bench/metrics/format.h"
#include "bench/metrics/reference.h"
#include "bench/metrics/sql.h"
#include "common/status/macros.h"

namespace tae::bench {
namespace {

constexpr double kReadyTimeoutS = 60;
constexpr double kStreamTimeoutS = 170;

struct ConfigResult {
  int agents = 0;
  int round = 1;
  PointLayout layout;
  double seconds = 0;
  double taed_cpu_s = 0;
  double agents_cpu_s = 0;
  double other_cpu_s = 0;  // other processes on the machine meanwhile
  int64_t batches = 0;
  std::string check;  // "yes", or what is wrong
  std::map<Reference, double> reference_s;
};

std::string SpecText(const std::string& name, int runs) {
  std::vector<int> seeds;
  for (int i = 0; i < runs; ++i) {
    seeds.push_back(i);
  }
  return absl::StrCat("name = \"", name, "\"\n",
                      "description = \"metrics ingest benchmark (bench/metrics_bench.sh)\"\n\n",
                      "[train]\ntask = \"copy\"\nsteps = 1000\nseeds = [",
                      absl::StrJoin(seeds, ", "), "]\n\n",
                      "[resources]\nlabels = { bench = \"ingest\" }\n");
}

// Every point stored exactly once: each (run, key) holds steps 1..S once (the primary key is
// (run_id, key_id, step)), the row count is the points sent, the summaries counted each point
// once, every run succeeded, and each agent got `slots` runs.
absl::StatusOr<std::string> Check(const std::string& db_path, const std::string& name,
                                  const PointLayout& layout, int agents) {
  SqlFile db;
  RETURN_IF_ERROR(db.Open(db_path, /*read_only=*/true));
  ASSIGN_OR_RETURN(int64_t exp,
                   db.Int(absl::StrCat("SELECT id FROM experiments WHERE name = '", name, "'")));
  const std::string runs = absl::StrCat("(SELECT id FROM runs WHERE experiment_id = ", exp, ")");
  const int64_t series = static_cast<int64_t>(layout.runs) * layout.values_per_event;
  const int64_t steps = layout.steps_per_run;
  std::vector<std::string> problems;
  ASSIGN_OR_RETURN(int64_t rows,
                   db.Int(absl::StrCat("SELECT COUNT(*) FROM metrics WHERE run_id IN ", runs)));
  if (rows != layout.points()) {
    problems.push_back(absl::StrCat(rows, " rows for ", layout.points(), " points"));
  }
  ASSIGN_OR_RETURN(
      int64_t complete,
      db.Int(absl::StrCat("SELECT COUNT(*) FROM (SELECT COUNT(*) c, MIN(step) lo, MAX(step) hi "
                          "FROM metrics WHERE run_id IN ",
                          runs,
                          " GROUP BY run_id, key_id) "
                          "WHERE c = ",
                          steps, " AND lo = 1 AND hi = ", steps)));
  if (complete != series) {
    problems.push_back(absl::StrCat(complete, " of ", series, " series hold steps 1..", steps));
  }
  ASSIGN_OR_RETURN(int64_t summaries,
                   db.Int(absl::StrCat("SELECT COUNT(*) FROM run_summaries WHERE run_id IN ", runs,
                                       " AND count = ", steps, " AND last_step = ", steps)));
  if (summaries != series) {
    problems.push_back(absl::StrCat(summaries, " of ", series, " summaries count ", steps));
  }
  ASSIGN_OR_RETURN(int64_t succeeded,
                   db.Int(absl::StrCat("SELECT COUNT(*) FROM runs WHERE experiment_id = ", exp,
                                       " AND state = 'succeeded' AND attempt = 1")));
  if (succeeded != layout.runs) {
    problems.push_back(absl::StrCat(succeeded, " of ", layout.runs, " runs succeeded"));
  }
  ASSIGN_OR_RETURN(int64_t placed,
                   db.Int(absl::StrCat("SELECT COUNT(DISTINCT agent_id) FROM runs WHERE "
                                       "experiment_id = ",
                                       exp)));
  if (placed != agents) {
    problems.push_back(absl::StrCat("runs on ", placed, " agents"));
  }
  return problems.empty() ? std::string("yes") : absl::StrJoin(problems, "; ");
}

struct AgentState {
  std::unique_ptr<LineChild> child;
  bool ready = false;
  bool done = false;
  int64_t acked = 0;
  int64_t total = 1;
  int64_t batches = 0;
  double cpu_s = 0;
};

absl::Status SpawnAgents(const IngestOptions& options, const Taed& taed, int n,
                         const PointLayout& layout, std::vector<AgentState>* agents) {
  for (int i = 0; i < n; ++i) {
    std::string id = absl::StrCat("sim-", n, "-", i);
    std::vector<std::string> argv = {BinDir() + "/tae-metrics-bench",
                                     "agent",
                                     "--taed",
                                     taed.agent_address(),
                                     "--id",
                                     id,
                                     "--slots",
                                     absl::StrCat(options.slots),
                                     "--labels",
                                     "bench=ingest",
                                     "--steps",
                                     absl::StrCat(layout.steps_per_run),
                                     "--values",
                                     absl::StrCat(layout.values_per_event),
                                     "--batch",
                                     absl::StrCat(layout.batch_events),
                                     "--window",
                                     absl::StrCat(options.window_batches)};
    ASSIGN_OR_RETURN(std::unique_ptr<LineChild> child,
                     LineChild::Spawn(id, argv, {{"TAE_AGENT_TOKEN", taed.agent_token()}}));
    agents->push_back(AgentState{std::move(child)});
  }
  return absl::OkStatus();
}

// Reads the agents' lines until pred holds for all of them or timeout_s passes.
template <typename Pred>
absl::Status PollAgents(std::vector<AgentState>* agents, double timeout_s, const char* what,
                        Pred pred, double progress_every_s = 0, int64_t points = 0) {
  std::vector<LineChild*> children;
  for (AgentState& agent : *agents) {
    children.push_back(agent.child.get());
  }
  const double start = SteadyNow();
  double next_progress = start + progress_every_s;
  while (true) {
    bool all = true;
    for (AgentState& agent : *agents) {
      for (const std::string& line : agent.child->TakeLines()) {
        std::vector<std::string> words = absl::StrSplit(line, ' ');
        if (words[0] == "ready") {
          agent.ready = true;
        } else if (words[0] == "progress" && words.size() == 3) {
          (void)absl::SimpleAtoi(words[1], &agent.acked);
          (void)absl::SimpleAtoi(words[2], &agent.total);
        } else if (words[0] == "done" && words.size() == 4) {
          agent.done = true;
          agent.acked = agent.total;
          (void)absl::SimpleAtoi(words[2], &agent.batches);
          (void)absl::SimpleAtod(words[3], &agent.cpu_s);
        }
      }
      all = all && pred(agent);
      if (!pred(agent) && agent.child->eof()) {
        return absl::InternalError(
            absl::StrCat("agent ", agent.child->name(), " exited before it was ", what));
      }
    }
    if (all) {
      return absl::OkStatus();
    }
    const double now = SteadyNow();
    if (now - start > timeout_s) {
      return absl::DeadlineExceededError(
          absl::StrCat("agents not ", what, " after ", timeout_s, " s"));
    }
    if (progress_every_s > 0 && now >= next_progress) {
      double fraction = 0;
      for (const AgentState& agent : *agents) {
        fraction += static_cast<double>(agent.acked) /
                    static_cast<double>(std::max<int64_t>(agent.total, 1)) /
                    static_cast<double>(agents->size());
      }
      std::fprintf(stderr, "  %3.0f%% acked (~%s points) after %.1f s\n", fraction * 100,
                   Thousands(static_cast<int64_t>(fraction * static_cast<double>(points))).c_str(),
                   now - start);
      next_progress += progress_every_s;
    }
    LineChild::Poll(children, 100);
  }
}

absl::StatusOr<ConfigResult> RunConfig(const IngestOptions& options, int n, int round,
                                       const TempDir& dir, const AutogroupPriority& priority) {
  ConfigResult result;
  result.agents = n;
  result.round = round;
  PointLayout& layout = result.layout;
  layout.runs = n * options.slots;
  layout.runs_per_agent = options.slots;
  layout.values_per_event = options.values_per_event;
  layout.batch_events = options.batch_events;
  layout.steps_per_run =
      std::max<int64_t>(1, options.points / (layout.runs * options.values_per_event));

  const std::string home = absl::StrCat(dir.path(), "/home-", n, "-", round);
  const std::string name = absl::StrCat("ingest-bench-", n, "-", round);
  if (!options.seed_home.empty()) {
    std::fprintf(stderr, "%d agents, round %d: copying %s/tae.db (a store of its own)...\n", n,
                 round, options.seed_home.c_str());
    std::error_code error;
    std::filesystem::create_directories(home, error);
    for (const char* suffix : {"", "-wal"}) {
      const std::string from = absl::StrCat(options.seed_home, "/tae.db", suffix);
      if (std::filesystem::exists(from) &&
          !std::filesystem::copy_file(from, absl::StrCat(home, "/tae.db", suffix),
                                      std::filesystem::copy_options::overwrite_existing, error)) {
        return absl::InternalError(absl::StrCat("copy ", from, ": ", error.message()));
      }
    }
    ::sync();  // the copy's gigabytes written back now, not while the points stream
  }
  std::fprintf(stderr, "%d agents, round %d: taectl up --agents 0 on %s\n", n, round, home.c_str());
  ASSIGN_OR_RETURN(std::unique_ptr<Taed> taed, Taed::Up(home));
  priority.Raise(taed->pid());
  std::vector<AgentState> agents;
  RETURN_IF_ERROR(SpawnAgents(options, *taed, n, layout, &agents));
  const std::string spec_path = absl::StrCat(dir.path(), "/", name, ".toml");
  std::ofstream(spec_path) << SpecText(name, layout.runs);
  CommandResult submit = taed->Taectl({"submit", spec_path});
  if (submit.exit_code != 0) {
    return absl::InternalError(absl::StrCat("taectl submit: ", submit.out, submit.err,
                                            "the end of taed.log:\n", taed->LogTail()));
  }
  std::fprintf(stderr, "  submitted %d runs; waiting for the scheduler to place them\n",
               layout.runs);
  RETURN_IF_ERROR(
      PollAgents(&agents, kReadyTimeoutS, "ready", [](const AgentState& a) { return a.ready; }));

  std::fprintf(stderr, "  streaming %s points (%ld lines per run)\n",
               Thousands(layout.points()).c_str(), static_cast<long>(layout.steps_per_run));
  const double taed_cpu0 = ProcessCpuSeconds(taed->pid());
  const double busy0 = MachineBusySeconds();
  const double start = SteadyNow();
  for (AgentState& agent : agents) {
    kill(agent.child->pid(), SIGUSR1);
  }
  RETURN_IF_ERROR(PollAgents(
      &agents, kStreamTimeoutS, "done", [](const AgentState& a) { return a.done; }, 2.0,
      layout.points()));
  result.seconds = SteadyNow() - start;
  result.taed_cpu_s = ProcessCpuSeconds(taed->pid()) - taed_cpu0;
  const double busy = MachineBusySeconds() - busy0;
  for (AgentState& agent : agents) {
    result.agents_cpu_s += agent.cpu_s;
    result.batches += agent.batches;
    agent.child->Wait(10);
  }
  result.other_cpu_s = std::max(0.0, busy - result.taed_cpu_s - result.agents_cpu_s);
  RETURN_IF_ERROR(taed->Down());
  ASSIGN_OR_RETURN(result.check, Check(home + "/tae.db", name, layout, n));
  std::fprintf(stderr, "  %s points in %.2f s; stored exactly once: %s\n",
               Thousands(layout.points()).c_str(), result.seconds, result.check.c_str());

  if (options.references) {
    for (Reference reference :
         {Reference::kRaw, Reference::kRawWithTaedSql, Reference::kStoreIngest}) {
      std::fprintf(stderr, "  reference: %s...\n", ReferenceName(reference));
      ASSIGN_OR_RETURN(result.reference_s[reference],
                       MeasureReference(reference, dir.path(), layout,
                                        options.seed_home.empty() ? "" : home + "/tae.db"));
    }
  }
  if (!options.keep) {
    std::error_code error;  // a copy of a large store is gigabytes: not kept for every round
    std::filesystem::remove_all(home, error);
  }
  return result;
}

// The median of a configuration's rounds by their ratio to raw SQLite (by taed's rate where the
// references were not run); of an even count, the lower of the middle two.
const ConfigResult& MedianRound(std::vector<const ConfigResult*> rounds) {
  auto key = [](const ConfigResult* r) {
    auto raw = r->reference_s.find(Reference::kRaw);
    return raw == r->reference_s.end() ? 1 / r->seconds : raw->second / r->seconds;
  };
  std::sort(rounds.begin(), rounds.end(),
            [&](const ConfigResult* a, const ConfigResult* b) { return key(a) < key(b); });
  return *rounds[(rounds.size() - 1) / 2];
}

double Rate(int64_t points, double seconds) {
  return seconds > 0 ? static_cast<double>(points) / seconds : 0;
}

void PrintTable(const IngestOptions& options, const std::vector<ConfigResult>& results,
                const AutogroupPriority& priority) {
  std::printf(
      "\ningest: %d values per line, at most %d lines (%s points) per batch, %d batches "
      "in flight per agent, %d runs per agent; %s\n\n",
      options.values_per_event, options.batch_events,
      Thousands(static_cast<int64_t>(options.batch_events) * options.values_per_event).c_str(),
      options.window_batches, options.slots, priority.Describe().c_str());
  std::printf("%-7s %5s %5s %10s %8s %10s %9s %11s %10s %8s %s\n", "agents", "round", "runs",
              "points", "seconds", "points/s", "taed CPU", "agents CPU", "other CPU", "batches",
              "stored exactly once");
  for (const ConfigResult& r : results) {
    std::printf("%-7d %5d %5d %10s %8.2f %10s %8.2fc %10.2fc %9.2fc %8ld %s\n", r.agents, r.round,
                r.layout.runs, Thousands(r.layout.points()).c_str(), r.seconds,
                Thousands(static_cast<int64_t>(Rate(r.layout.points(), r.seconds))).c_str(),
                r.taed_cpu_s / r.seconds, r.agents_cpu_s / r.seconds, r.other_cpu_s / r.seconds,
                static_cast<long>(r.batches), r.check.c_str());
  }
  std::printf("(CPU columns: cores used on average while streaming; 'c' = cores of %ld)\n",
              sysconf(_SC_NPROCESSORS_ONLN));
  if (!options.references) {
    return;
  }
  std::printf(
      "\nreferences (same points, order and points per transaction; one thread, measured after "
      "taed and the agents stopped; %s):\n\n",
      options.seed_home.empty() ? "each in a fresh database"
                                : "each in the copy of the store taed ingested into, new run ids");
  std::printf("%-7s %5s %-44s %10s %10s %14s\n", "agents", "round", "reference", "seconds",
              "points/s", "taed's rate");
  for (const ConfigResult& r : results) {
    for (const auto& [reference, seconds] : r.reference_s) {
      std::printf("%-7d %5d %-44s %10.2f %10s %12.0f%% of it\n", r.agents, r.round,
                  ReferenceName(reference), seconds,
                  Thousands(static_cast<int64_t>(Rate(r.layout.points(), seconds))).c_str(),
                  100 * seconds / r.seconds);
    }
  }
  // Into a large store (--store) the goal is the store's own raw rate, nearly: what taed adds
  // must not grow with the store.
  const double goal = options.seed_home.empty() ? 0.45 : 0.85;
  std::printf(
      "\ntargets (product issue): >= 300,000 points/s stored, >= %.0f%% of the raw rate%s\n",
      100 * goal, options.seed_home.empty() ? "" : " in the same store");
  for (int n : options.agent_counts) {
    std::vector<const ConfigResult*> rounds;
    std::vector<std::string> ratios;
    for (const ConfigResult& r : results) {
      if (r.agents == n) {
        rounds.push_back(&r);
        auto raw = r.reference_s.find(Reference::kRaw);
        ratios.push_back(absl::StrCat(static_cast<int>(100 * raw->second / r.seconds + 0.5), "%"));
      }
    }
    const ConfigResult& r = MedianRound(rounds);
    double rate = Rate(r.layout.points(), r.seconds);
    double ratio = r.reference_s.at(Reference::kRaw) / r.seconds;
    std::printf("%2d agents: %s points/s (%s), %.0f%% of raw (%s)%s\n", r.agents,
                Thousands(static_cast<int64_t>(rate)).c_str(), rate >= 300000 ? "met" : "NOT met",
                100 * ratio, ratio >= goal ? "met" : "NOT met",
                rounds.size() == 1 ? ""
                                   : absl::StrCat("; the median of ", rounds.size(),
                                                  " rounds: ", absl::StrJoin(ratios, ", "))
                                         .c_str());
  }
}

}  // namespace

int RunIngestBench(const IngestOptions& options) {
  absl::StatusOr<std::unique_ptr<TempDir>> dir = TempDir::Make("tae-bench");
  if (!dir.ok()) {
    std::fprintf(stderr, "ingest: %s\n", std::string(dir.status().message()).c_str());
    return 1;
  }
  if (options.keep) {
    (*dir)->keep();
  }
  AutogroupPriority priority;
  std::vector<ConfigResult> results;
  for (int round = 1; round <= options.rounds; ++round) {
    for (int n : options.agent_counts) {
      absl::StatusOr<ConfigResult> result = RunConfig(options, n, round, **dir, priority);
      if (!result.ok()) {
        std::fprintf(stderr, "ingest with %d agents, round %d: %s\n", n, round,
                     result.status().ToString().c_str());
        return 1;
      }
      results.push_back(*result);
    }
  }
  PrintTable(options, results, priority);
  for (const ConfigResult& r : results) {
    if (r.check != "yes") {
      return 1;
    }
  }
  return 0;
}

}  // namespace tae::bench
