// tae-asha-sim: what ASHA on a finite grid costs and what it stops, by simulation through the
// real search code (server/search: GridSearch, as taed drives it); bash bench/asha_sim.sh runs
// it. Each study is one variant's grid of learning rates, every point with its seeds, run on a
// few slots in the order the grid is started (ascending, descending or shuffled); every run
// reports search.metric at each rung step and at its end, and a pruned point's runs stop at
// their current step (queued ones never start). The full grid runs the same runs with the same
// values (they are a function of the run and the step), so "the full grid's ranking" is the
// ranking of the points by their mean final value over their seeds, as `--set
// search.method=grid` would give.
//
//   tae-asha-sim [--studies N] [--seed S] [--threads T] [--only PREFIX]
//
// Per shape (curves x order x rule) it prints, each with its standard error over the studies:
//   steps     the share of the full grid's steps the search ran
//   best      how often the point the full grid ranks 1st was stopped (at any rung)
//   r1 r2 r3  how often the point the full grid ranks 1st, 2nd, 3rd was stopped at rung 0, the
//             one rung that judges every point (later rungs keep fewer by design: with eta 3
//             and 9 points, one point runs to the end)
//   miss      how often the point chosen (lowest mean final among the points that ran to the end)
//             is not the full grid's 1st
//   regret    the chosen point's true final quality minus the best point's, in units of the
//             seed SD
// Curves:
//   parallel  quality at every step keeps the final order (loss = f + c/sqrt(step) + noise):
//             the case ASHA is built for; the stop of a 2nd or 3rd is noise alone
//   crossing  higher rates learn faster and end worse (loss = f + c/(1 + v*step)): early rungs
//             favour them, the known failure of any early stop

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <numeric>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "server/search/asha.h"

namespace {

using tae::search::AshaRule;
using tae::search::Decision;
using tae::search::GridSearch;
using tae::search::SearchRun;
using tae::search::Verdict;

constexpr const char* kMetric = "eval/loss";

struct Options {
  int studies = 20000;
  unsigned long long seed = 27;
  int threads = 2;
  std::string only;
};

struct Shape {
  std::string name;
  bool crossing = false;
  std::string order;  // "ascending" | "descending" | "shuffled"
  int64_t bootstrap = 2;
  int points = 9;
  int seeds = 2;
  int slots = 2;
  int64_t steps = 405;
  int64_t min_steps = 15;
  int64_t reduction = 3;
  double seed_sd = 0.02;  // a run's offset from its point's curve, constant over its steps
  double eval_sd = 0.01;  // each report's own noise
};

// A point's true final value and its curve (loss, lower is better). Learning rates 1e-4 .. 1
// in equal log steps; the best at 0.03; quality falls off quadratically in log10(lr).
struct Curve {
  double final_value = 0;
  double speed = 0;
  double Value(bool crossing, int64_t step) const {
    return crossing ? final_value + 3.0 / (1.0 + speed * static_cast<double>(step))
                    : final_value + 1.0 / std::sqrt(static_cast<double>(step));
  }
};

std::vector<Curve> Curves(int points) {
  std::vector<Curve> out(points);
  for (int i = 0; i < points; ++i) {
    const double log_lr = -4.0 + 4.0 * i / std::max(1, points - 1);
    const double d = log_lr - std::log10(0.03);
    out[i].final_value = 2.0 + 0.05 * d * d;
    out[i].speed = 0.3 * std::pow(10.0, log_lr) / 0.03;  // lr 0.03 halves its gap by step 3
  }
  return out;
}

struct Outcome {
  double steps_share = 0;
  bool best_pruned = false;
  bool pruned_rank[3] = {false, false, false};  // at rung 0
  bool miss = false;
  double regret = 0;  // in seed SDs
};

struct Run {
  int point = 0;
  double offset = 0;
  std::vector<int64_t> reports;  // rung steps below train.steps, then train.steps
  std::vector<double> values;    // at each report
  int64_t started = -1;          // time it started; -1 queued
  int next = 0;                  // next report index
  bool done = false;
};

Outcome Simulate(const Shape& shape, std::mt19937_64& rng) {
  const std::vector<Curve> curves = Curves(shape.points);
  std::normal_distribution<double> normal(0.0, 1.0);
  AshaRule rule;
  rule.metric = kMetric;
  rule.min_steps = shape.min_steps;
  rule.reduction = shape.reduction;
  rule.bootstrap = shape.bootstrap;
  const std::vector<int64_t> rungs = tae::search::RungSteps(rule, shape.steps);

  // The start order of the points.
  std::vector<int> order(shape.points);
  std::iota(order.begin(), order.end(), 0);
  if (shape.order == "descending") {
    std::reverse(order.begin(), order.end());
  } else if (shape.order == "shuffled") {
    std::shuffle(order.begin(), order.end(), rng);
  }
  std::vector<Run> runs;
  std::vector<SearchRun> search_runs;
  std::vector<std::string> names(shape.points);
  for (int p = 0; p < shape.points; ++p) {
    names[p] = "baseline[train.lr=" + std::to_string(p) + "]";
  }
  for (int p : order) {
    for (int s = 0; s < shape.seeds; ++s) {
      Run run;
      run.point = p;
      run.offset = shape.seed_sd * normal(rng);
      run.reports = rungs;
      run.reports.push_back(shape.steps);
      for (int64_t step : run.reports) {
        run.values.push_back(curves[p].Value(shape.crossing, step) + run.offset +
                             shape.eval_sd * normal(rng));
      }
      search_runs.push_back({static_cast<int64_t>(runs.size()) + 1, names[p], shape.steps});
      runs.push_back(std::move(run));
    }
  }
  GridSearch search(rule, tae::spec::SearchWithin::kVariant, search_runs);

  // The full grid's ranking: each point's mean final value over its seeds.
  std::vector<double> full(shape.points, 0.0);
  for (const Run& run : runs) {
    full[run.point] += run.values.back() / shape.seeds;
  }
  std::vector<int> ranked(shape.points);
  std::iota(ranked.begin(), ranked.end(), 0);
  std::stable_sort(ranked.begin(), ranked.end(), [&](int a, int b) { return full[a] < full[b]; });

  std::vector<bool> pruned(shape.points, false);
  std::vector<int> pruned_at(shape.points, -1);  // the rung
  int64_t now = 0;
  int64_t steps_run = 0;
  size_t queued = 0;  // runs before this index have started or were dropped
  int active = 0;
  auto start_more = [&]() {
    while (active < shape.slots && queued < runs.size()) {
      Run& run = runs[queued++];
      if (run.done) {
        continue;
      }
      run.started = now;
      ++active;
    }
  };
  // Applies decisions: a pruned point's runs stop where they are (queued ones never start);
  // their ends can decide more.
  std::vector<Decision> pending;
  auto apply = [&](std::vector<Decision> decisions) {
    pending = std::move(decisions);
    for (size_t i = 0; i < pending.size(); ++i) {
      const Decision d = pending[i];
      if (d.verdict != Verdict::kPrune) {
        continue;
      }
      const int p = std::stoi(d.point.substr(d.point.find('=') + 1));
      if (pruned[p]) {
        continue;
      }
      pruned[p] = true;
      pruned_at[p] = d.rung;
      for (size_t r = 0; r < runs.size(); ++r) {
        Run& run = runs[r];
        if (run.point != p || run.done) {
          continue;
        }
        run.done = true;
        int64_t at = 0;
        if (run.started >= 0) {
          at = now - run.started;
          --active;
        }
        steps_run += at;
        for (Decision& more : search.Ended(static_cast<int64_t>(r) + 1, at)) {
          pending.push_back(std::move(more));
        }
      }
    }
  };
  start_more();
  while (active > 0) {
    // The next report of any running run.
    int64_t next_time = INT64_MAX;
    for (const Run& run : runs) {
      if (run.started >= 0 && !run.done) {
        next_time = std::min(next_time, run.started + run.reports[run.next]);
      }
    }
    now = next_time;
    for (size_t r = 0; r < runs.size(); ++r) {
      Run& run = runs[r];
      if (run.started < 0 || run.done || run.started + run.reports[run.next] != now) {
        continue;
      }
      const int64_t step = run.reports[run.next];
      const double value = run.values[run.next];
      ++run.next;
      apply(search.Observe(static_cast<int64_t>(r) + 1, kMetric, step, value));
      if (!run.done && step == shape.steps) {
        run.done = true;
        --active;
        steps_run += step;
        apply(search.Ended(static_cast<int64_t>(r) + 1, step));
      }
    }
    start_more();
  }

  Outcome out;
  out.steps_share = static_cast<double>(steps_run) /
                    static_cast<double>(shape.steps * shape.points * shape.seeds);
  out.best_pruned = pruned[ranked[0]];
  for (int k = 0; k < 3 && k < shape.points; ++k) {
    out.pruned_rank[k] = pruned_at[ranked[k]] == 0;
  }
  int chosen = -1;
  for (int p = 0; p < shape.points; ++p) {
    if (!pruned[p] && (chosen < 0 || full[p] < full[chosen])) {
      chosen = p;
    }
  }
  // True quality is the noiseless value at train.steps (a slow rate has not converged there).
  double best_true = curves[0].Value(shape.crossing, shape.steps);
  for (const Curve& c : curves) {
    best_true = std::min(best_true, c.Value(shape.crossing, shape.steps));
  }
  out.miss = chosen != ranked[0];
  out.regret =
      chosen < 0 ? 0
                 : (curves[chosen].Value(shape.crossing, shape.steps) - best_true) / shape.seed_sd;
  return out;
}

struct Totals {
  double steps = 0, steps_sq = 0;
  long long best = 0;
  long long pruned[3] = {0, 0, 0};
  long long miss = 0;
  double regret = 0, regret_sq = 0;
  long long n = 0;
  void Add(const Outcome& o) {
    steps += o.steps_share;
    steps_sq += o.steps_share * o.steps_share;
    best += o.best_pruned ? 1 : 0;
    for (int k = 0; k < 3; ++k) {
      pruned[k] += o.pruned_rank[k] ? 1 : 0;
    }
    miss += o.miss ? 1 : 0;
    regret += o.regret;
    regret_sq += o.regret * o.regret;
    ++n;
  }
  void Merge(const Totals& t) {
    steps += t.steps;
    steps_sq += t.steps_sq;
    best += t.best;
    for (int k = 0; k < 3; ++k) {
      pruned[k] += t.pruned[k];
    }
    miss += t.miss;
    regret += t.regret;
    regret_sq += t.regret_sq;
    n += t.n;
  }
};

std::string MeanSe(double sum, double sum_sq, long long n, const char* format) {
  const double mean = sum / static_cast<double>(n);
  const double var = std::max(0.0, sum_sq / static_cast<double>(n) - mean * mean);
  const double se = std::sqrt(var / static_cast<double>(n));
  char buf[64];
  std::snprintf(buf, sizeof(buf), format, mean, se);
  return buf;
}

// A rate's binomial standard error (a 0/1 outcome's sum of squares is its sum).
std::string RateSe(long long hits, long long n) {
  return MeanSe(static_cast<double>(hits), static_cast<double>(hits), n, "%.3f ± %.3f");
}

Totals RunShape(const Shape& shape, const Options& options, unsigned long long shape_seed) {
  std::vector<Totals> parts(options.threads);
  std::atomic<int> next{0};
  std::vector<std::thread> workers;
  for (int t = 0; t < options.threads; ++t) {
    workers.emplace_back([&, t]() {
      for (int i; (i = next.fetch_add(1)) < options.studies;) {
        std::mt19937_64 rng(shape_seed * 1000003ULL + static_cast<unsigned long long>(i));
        parts[t].Add(Simulate(shape, rng));
      }
    });
  }
  for (std::thread& w : workers) {
    w.join();
  }
  Totals total;
  for (const Totals& part : parts) {
    total.Merge(part);
  }
  return total;
}

std::vector<Shape> Shapes() {
  std::vector<Shape> shapes;
  for (bool crossing : {false, true}) {
    for (const char* order : {"ascending", "descending", "shuffled"}) {
      for (int64_t bootstrap : {1, 2, 3, 9, 0}) {
        Shape s;
        s.crossing = crossing;
        s.order = order;
        s.bootstrap = bootstrap;
        s.name = std::string(crossing ? "crossing/" : "parallel/") + order +
                 (bootstrap == 0 ? "/finite" : "/bootstrap" + std::to_string(bootstrap));
        shapes.push_back(s);
      }
    }
  }
  // Eight slots: the asynchrony of a fleet (every point's seeds start together).
  for (int64_t bootstrap : {1, 2, 9, 0}) {
    Shape s;
    s.order = "shuffled";
    s.slots = 8;
    s.bootstrap = bootstrap;
    s.name = "parallel/shuffled/slots8/" +
             (bootstrap == 0 ? std::string("finite") : "bootstrap" + std::to_string(bootstrap));
    shapes.push_back(s);
  }
  return shapes;
}

}  // namespace

int main(int argc, char** argv) {
  Options options;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&]() -> const char* {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "tae-asha-sim: %s needs a value\n", arg.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (arg == "--studies") {
      options.studies = std::atoi(value());
    } else if (arg == "--seed") {
      options.seed = std::strtoull(value(), nullptr, 10);
    } else if (arg == "--threads") {
      options.threads = std::max(1, std::atoi(value()));
    } else if (arg == "--only") {
      options.only = value();
    } else if (arg == "--help" || arg == "-h") {
      std::printf(
          "usage: tae-asha-sim [--studies N] [--seed S] [--threads T] [--only PREFIX]\n\n"
          "ASHA on a 9-point learning-rate grid (2 seeds, 405 steps, rungs 15/45/135, eta 3)\n"
          "through the real search code: per curve shape, start order and search.bootstrap,\n"
          "the share of the full grid's steps, how often the full grid's 1st/2nd/3rd point is\n"
          "stopped, how often the chosen point is not the full grid's best, and the regret.\n");
      return 0;
    } else {
      std::fprintf(stderr, "tae-asha-sim: unknown argument %s (see --help)\n", arg.c_str());
      return 2;
    }
  }
  if (options.studies < 1) {
    std::fprintf(stderr, "tae-asha-sim: --studies must be at least 1\n");
    return 2;
  }
  std::printf("%d studies per shape; 9 points x 2 seeds, 405 steps, rungs 15/45/135, eta 3\n",
              options.studies);
  std::printf("%-40s %-15s %-15s %-15s %-15s %-15s %-15s %s\n", "shape", "steps", "best stopped",
              "r1 at rung 0", "r2 at rung 0", "r3 at rung 0", "miss", "regret (SD)");
  unsigned long long index = 0;
  for (const Shape& shape : Shapes()) {
    ++index;
    if (!options.only.empty() && shape.name.rfind(options.only, 0) != 0) {
      continue;
    }
    const Totals t = RunShape(shape, options, options.seed * 7919ULL + index);
    std::printf("%-40s %-15s %-15s %-15s %-15s %-15s %-15s %s\n", shape.name.c_str(),
                MeanSe(t.steps, t.steps_sq, t.n, "%.3f ± %.3f").c_str(),
                RateSe(t.best, t.n).c_str(), RateSe(t.pruned[0], t.n).c_str(),
                RateSe(t.pruned[1], t.n).c_str(), RateSe(t.pruned[2], t.n).c_str(),
                RateSe(t.miss, t.n).c_str(),
                MeanSe(t.regret, t.regret_sq, t.n, "%.2f ± %.2f").c_str());
    std::fflush(stdout);
  }
  return 0;
}
