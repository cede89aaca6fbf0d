#include "bench/seeds/planner.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <thread>

#include "common/stats/simulate.h"
#include "server/model/records.h"
#include "server/seeds/seeds.h"

namespace tae::bench {
namespace {

constexpr char kMetric[] = "score";

struct Counts {
  std::vector<int> different;
  std::vector<int> futile;
  std::vector<int> held;
  int64_t runs = 0;
  int64_t failed = 0;
  int64_t ends = 0;
  int64_t in_flight = 0;
};

struct Run {
  model::RunRecord record;
  double ends_at = 0;  // when it finishes, if in flight
};

// A run's duration: uniform in [0.5, 1.5), so runs started together finish in random order.
double Duration(stats::NormalSource* random) { return 0.5 + random->Uniform(); }

void OneStudy(const PlannerStudy& study, const model::ExperimentReport& report,
              const stats::Boundaries& boundaries, uint64_t seed, Counts* counts) {
  stats::NormalSource random(seed);
  std::vector<std::string> variants = {"baseline"};
  for (size_t i = 0; i < study.effects.size(); ++i) {
    variants.push_back("v" + std::to_string(i + 1));
  }
  std::vector<model::RunRecord> runs;
  std::vector<double> ends_at;  // per run; < 0 once finished
  std::vector<model::FinalValue> values;
  double now = 0;
  auto add = [&](const std::string& variant, int64_t run_seed) {
    model::RunRecord run;
    run.id = static_cast<int64_t>(runs.size()) + 1;
    run.variant = variant;
    run.seed = run_seed;
    run.state = model::RunState::kRunning;
    runs.push_back(std::move(run));
    ends_at.push_back(now + Duration(&random));
  };
  for (const std::string& variant : variants) {  // submit: min seeds each
    for (int s = 0; s < study.design.min_seeds; ++s) {
      add(variant, s);
    }
  }
  while (true) {
    size_t next = runs.size();
    int64_t in_flight = 0;
    for (size_t i = 0; i < runs.size(); ++i) {
      if (ends_at[i] >= 0) {
        in_flight += 1;
        if (next == runs.size() || ends_at[i] < ends_at[next]) {
          next = i;
        }
      }
    }
    if (next == runs.size()) {
      break;
    }
    counts->ends += 1;
    counts->in_flight += in_flight;
    now = ends_at[next];
    ends_at[next] = -1;
    model::RunRecord& run = runs[next];
    if (random.Uniform() < study.fail_rate) {
      run.state = model::RunState::kFailed;
      counts->failed += 1;
    } else {
      run.state = model::RunState::kSucceeded;
      const size_t arm =
          std::find(variants.begin(), variants.end(), run.variant) - variants.begin();
      const double value = (arm == 0 ? 0 : study.effects[arm - 1]) + random.Next();
      values.push_back({run.id, run.variant, run.seed, run.state, kMetric, value, value, value,
                        false, std::nullopt});
    }
    const seeds::Plan plan = seeds::PlanSeeds(report, boundaries, runs, values);
    for (const seeds::NewSeeds& seeds : plan.add) {
      for (int64_t s : seeds.seeds) {
        add(seeds.variant, s);
      }
    }
  }
  counts->runs += static_cast<int64_t>(runs.size());
  const auto outcomes = seeds::SeedOutcomes(runs, values, kMetric);
  for (size_t i = 1; i < variants.size(); ++i) {
    const stats::Course course = stats::FollowLooks(
        study.design, boundaries, outcomes.at(variants[i]), outcomes.at("baseline"));
    counts->different[i - 1] += course.verdict.decision == stats::Decision::kDifferent;
    counts->futile[i - 1] += course.verdict.futile;
    counts->held[i - 1] += !course.held.empty();
  }
}

}  // namespace

PlannerResult SimulatePlanner(const PlannerStudy& study) {
  model::ExperimentReport report;
  report.metrics = {kMetric};
  report.min_seeds = study.design.min_seeds;
  report.max_seeds = study.design.max_seeds;
  report.alpha = study.design.alpha;
  const stats::Boundaries boundaries = stats::ComputeBoundaries(study.design);
  const size_t k = study.effects.size();
  const int threads = std::max(1, study.threads);
  std::vector<Counts> counts(
      threads, Counts{std::vector<int>(k), std::vector<int>(k), std::vector<int>(k), 0, 0, 0, 0});
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      for (int i = t; i < study.studies; i += threads) {
        OneStudy(study, report, boundaries, study.seed + static_cast<uint64_t>(i), &counts[t]);
      }
    });
  }
  for (std::thread& worker : workers) {
    worker.join();
  }
  PlannerResult result;
  result.different.assign(k, 0);
  result.futile.assign(k, 0);
  result.held.assign(k, 0);
  double runs = 0;
  double failed = 0;
  double ends = 0;
  double in_flight = 0;
  for (const Counts& c : counts) {
    for (size_t i = 0; i < k; ++i) {
      result.different[i] += c.different[i];
      result.futile[i] += c.futile[i];
      result.held[i] += c.held[i];
    }
    runs += c.runs;
    failed += c.failed;
    ends += c.ends;
    in_flight += c.in_flight;
  }
  const double n = study.studies;
  for (size_t i = 0; i < k; ++i) {
    result.different[i] /= n;
    result.futile[i] /= n;
    result.held[i] /= n;
  }
  result.mean_runs = runs / n;
  result.mean_failed = failed / n;
  result.mean_in_flight = ends > 0 ? in_flight / ends : 0;
  result.fixed_runs = static_cast<int>(k + 1) * study.design.max_seeds;
  return result;
}

}  // namespace tae::bench
