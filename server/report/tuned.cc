#include "server/report/tuned.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "absl/strings/str_cat.h"

namespace tae::report {
namespace {

struct Split {
  std::string ablation;
  std::string point;
};

// "no-pos[lr=0.001]" -> {"no-pos", "lr=0.001"}; a name without a point is its own ablation.
Split SplitVariant(const std::string& variant) {
  const size_t bracket = variant.find('[');
  if (bracket == std::string::npos || variant.back() != ']') {
    return {variant, ""};
  }
  return {variant.substr(0, bracket), variant.substr(bracket + 1, variant.size() - bracket - 2)};
}

}  // namespace

std::vector<TunedChoice> ChooseTuned(const std::vector<std::string>& variants,
                                     const std::vector<model::FinalValue>& values,
                                     const std::string& metric, bool maximize,
                                     const std::string& baseline,
                                     const std::set<std::string>& failed) {
  struct Sum {
    double total = 0;
    int n = 0;
  };
  std::map<std::string, Sum> sums;  // variant -> its succeeded runs' final values
  for (const model::FinalValue& v : values) {
    if (v.key == metric && v.state == model::RunState::kSucceeded) {
      Sum& sum = sums[v.variant];
      // A diverged seed (NaN) makes its point's score NaN: never a candidate.
      sum.total += v.diverged_step.has_value() ? kNaN : v.value;
      ++sum.n;
    }
  }
  std::vector<TunedChoice> choices;
  std::map<std::string, size_t> index;  // ablation -> its choice
  for (const std::string& variant : variants) {
    const Split split = SplitVariant(variant);
    auto [it, inserted] = index.emplace(split.ablation, choices.size());
    if (inserted) {
      choices.push_back(TunedChoice{split.ablation, "", "", 0, 0, 0, 0});
    }
    TunedChoice& choice = choices[it->second];
    ++choice.points;
    auto sum = sums.find(variant);
    if (sum == sums.end() || failed.count(variant) > 0) {
      continue;  // no score, or a seed failed: never judged on the seeds that survived
    }
    const double score = sum->second.total / sum->second.n;
    if (!std::isfinite(score)) {
      continue;  // a seed diverged: the point cannot be chosen
    }
    ++choice.candidates;
    const bool better = maximize ? score > choice.score : score < choice.score;
    if (choice.variant.empty() || better) {
      choice.variant = variant;
      choice.point = split.point;
      choice.score = score;
      choice.n = sum->second.n;
    }
  }
  std::stable_partition(choices.begin(), choices.end(),
                        [&](const TunedChoice& c) { return c.ablation == baseline; });
  return choices;
}

std::vector<Row> BuildTunedReport(
    const std::vector<std::string>& variants, const std::vector<model::RunRecord>& runs,
    const std::vector<model::FinalValue>& values, const std::vector<std::string>& metrics,
    const std::string& search_metric, bool maximize, const std::string& baseline,
    const std::map<std::string, std::string>& goal, const ReportOptions& options) {
  const std::string base_ablation = SplitVariant(baseline).ablation;
  // The choice rests on the search's seeds alone, never on a confirmation run's.
  std::vector<model::FinalValue> searched;
  for (const model::FinalValue& value : values) {
    if (!value.confirm && value.key == search_metric) {
      searched.push_back(value);
    }
  }
  std::set<std::string> failed;  // points with a search seed that failed
  for (const model::RunRecord& run : runs) {
    if (!run.confirm && run.state == model::RunState::kFailed) {
      failed.insert(run.variant);
    }
  }
  const std::vector<TunedChoice> choices =
      ChooseTuned(variants, searched, search_metric, maximize, base_ablation, failed);
  std::vector<std::string> chosen;
  std::string base_variant = base_ablation;
  for (const TunedChoice& choice : choices) {
    chosen.push_back(choice.variant.empty() ? choice.ablation : choice.variant);
    if (choice.ablation == base_ablation) {
      base_variant = chosen.back();
    }
  }
  // With search.confirm, each row is its chosen point's confirmation runs alone.
  ReportOptions rows_of = options;
  rows_of.confirmation_runs = options.confirm > 0;
  rows_of.selected = options.confirm <= 0;
  std::vector<Row> rows = BuildReport(chosen, runs, values, metrics, base_variant, goal, rows_of);
  for (size_t i = 0; i < rows.size() && i < choices.size(); ++i) {
    rows[i].ablation = choices[i].ablation;
    rows[i].point = choices[i].point;
    rows[i].points = choices[i].points;
    rows[i].candidates = choices[i].candidates;
    if (!choices[i].variant.empty()) {
      if (options.confirm > 0) {
        for (const model::RunRecord& run : runs) {
          if (run.confirm && run.variant == choices[i].variant) {
            ++rows[i].confirm_runs;
            rows[i].confirm_pending += model::IsFinal(run.state) ? 0 : 1;
          }
        }
      }
      continue;
    }
    // No point has a score: the row says what became of the ablation's runs at all its points
    // ("0/18 (18 pruned)"), not "0/0", which reads as if it never ran.
    for (const model::RunRecord& run : runs) {
      if (!run.confirm && SplitVariant(run.variant).ablation == choices[i].ablation) {
        CountRun(run, &rows[i]);
      }
    }
  }
  return rows;
}

std::string TunedEstimates(int confirm, const std::vector<Row>& rows) {
  if (confirm <= 0) {
    return "optimistic: chosen on the same seeds";
  }
  int due = 0;      // confirmation runs the chosen points are to have
  int missing = 0;  // of which not added yet (the search is still running) or not final
  for (const Row& row : rows) {
    if (row.candidates == 0) {
      continue;  // nothing to confirm
    }
    due += confirm;
    missing += std::max(0, confirm - row.confirm_runs) + row.confirm_pending;
  }
  if (missing == 0) {
    return absl::StrCat("confirmed: ", confirm, " fresh seeds");
  }
  return absl::StrCat("pending: ", missing, " of ", due, " confirmation runs (", confirm,
                      " fresh seeds per chosen point) not finished");
}

}  // namespace tae::report
