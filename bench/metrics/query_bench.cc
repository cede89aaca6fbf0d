#include "bench/metrics/query_bench.h"

#include <sys/stat.h>

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "bench/metrics/children.h"
#include "bench/metrics/dataset.h"
#include "bench/metrics/format.h"

namespace tae::bench {
namespace {

struct Timed {
  std::string label;
  std::vector<std::string> args;
  double target_ms = 0;  // 0: none
  std::vector<double> ms;
  size_t output_bytes = 0;
};

int Fail(const absl::Status& status) {
  std::fprintf(stderr, "query: %s\n", status.ToString().c_str());
  return 1;
}

}  // namespace

int RunQueryBench(const QueryOptions& options) {
  AutogroupPriority priority;
  std::unique_ptr<TempDir> temp;
  std::string home = options.data_dir;
  if (home.empty()) {
    absl::StatusOr<std::unique_ptr<TempDir>> dir = TempDir::Make("tae-bench");
    if (!dir.ok()) {
      return Fail(dir.status());
    }
    temp = std::move(*dir);
    if (options.keep) {
      temp->keep();
    }
    home = temp->path() + "/home";
  }
  mkdir(home.c_str(), 0700);
  absl::StatusOr<Dataset> dataset =
      MakeDataset(home, DatasetOptions{options.big_runs, options.small_experiments, options.steps});
  if (!dataset.ok()) {
    return Fail(dataset.status());
  }
  std::fprintf(stderr, "query: taectl up --agents 0 on %s\n", home.c_str());
  absl::StatusOr<std::unique_ptr<Taed>> taed = Taed::Up(home);
  if (!taed.ok()) {
    return Fail(taed.status());
  }
  priority.Raise((*taed)->pid());
  std::vector<Timed> commands = {
      {"taectl report " + dataset->big_experiment, {"report", dataset->big_experiment}, 200, {}, 0},
      {"taectl report " + dataset->small_experiment,
       {"report", dataset->small_experiment},
       200,
       {},
       0},
      {"taectl ls", {"ls"}, 50, {}, 0},
      {"taectl agents (floor: start + 1 small RPC)", {"agents"}, 0, {}, 0},
  };
  // One untimed round (connects, warms taed's page cache and statement paths), then rounds in
  // rotating order so a drifting background load hits every command alike.
  for (int round = 0; round <= options.repeats; ++round) {
    for (size_t i = 0; i < commands.size(); ++i) {
      Timed& command = commands[(i + static_cast<size_t>(round)) % commands.size()];
      CommandResult result = (*taed)->Taectl(command.args, 60);
      if (result.exit_code != 0) {
        return Fail(absl::InternalError(absl::StrCat(command.label, ": ", result.err)));
      }
      if (round == 0) {
        command.output_bytes = result.out.size();
        if (&command == &commands[0]) {
          std::vector<std::string> lines = absl::StrSplit(result.out, '\n');
          lines.resize(std::min<size_t>(lines.size(), 6));
          std::fprintf(stderr, "  %s (first lines):\n    %s\n", command.label.c_str(),
                       absl::StrJoin(lines, "\n    ").c_str());
        }
        continue;
      }
      command.ms.push_back(result.seconds * 1000);
    }
    if (round > 0) {
      std::fprintf(stderr, "  round %d/%d done\n", round, options.repeats);
    }
  }
  if (absl::Status down = (*taed)->Down(); !down.ok()) {
    return Fail(down);
  }

  std::printf(
      "\nquery: %ld experiments, %ld runs, %s points (%s per run), taed on a warm page "
      "cache; process start to exit, %d runs each; %s\n\n",
      static_cast<long>(dataset->experiments), static_cast<long>(dataset->runs),
      Thousands(dataset->points).c_str(),
      Thousands(dataset->runs > 0 ? dataset->points / dataset->runs : 0).c_str(), options.repeats,
      priority.Describe().c_str());
  std::printf("%-46s %9s %9s %9s %8s %s\n", "command", "median ms", "min ms", "max ms", "output",
              "target");
  for (const Timed& command : commands) {
    double median = Median(command.ms);
    std::string target = "-";
    if (command.target_ms > 0) {
      bool met = median < command.target_ms;
      target = absl::StrCat("< ", command.target_ms, " ms: ", met ? "met" : "NOT met");
    }
    std::printf("%-46s %9.1f %9.1f %9.1f %7zuB %s\n", command.label.c_str(), median,
                *std::min_element(command.ms.begin(), command.ms.end()),
                *std::max_element(command.ms.begin(), command.ms.end()), command.output_bytes,
                target.c_str());
  }
  return 0;
}

}  // namespace tae::bench
