// tae-seeds-bench: operating characteristics of adaptive seeds (common/stats/sequential.h) by
// simulation; bash bench/seeds_bench.sh runs it. For each design and true effect it prints the
// share of comparisons called different (the false-positive rate when the effect is 0, the power
// otherwise) or equivalent, next to max seeds tested once, and the runs each uses.
//
//   tae-seeds-bench [--studies N] [--min N] [--max N] [--alpha A] [--seed S]

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "common/stats/sequential.h"
#include "common/stats/simulate.h"

namespace {

struct Options {
  int studies = 10000;
  int min_seeds = 3;
  int max_seeds = 12;
  double alpha = 0.05;
  unsigned long long seed = 1;
};

bool ParseOptions(int argc, char** argv, Options* options) {
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "--help" || flag == "-h" || i + 1 >= argc) {
      return false;
    }
    const char* value = argv[++i];
    char* end = nullptr;
    if (flag == "--studies") {
      options->studies = static_cast<int>(std::strtol(value, &end, 10));
    } else if (flag == "--min") {
      options->min_seeds = static_cast<int>(std::strtol(value, &end, 10));
    } else if (flag == "--max") {
      options->max_seeds = static_cast<int>(std::strtol(value, &end, 10));
    } else if (flag == "--alpha") {
      options->alpha = std::strtod(value, &end);
    } else if (flag == "--seed") {
      options->seed = std::strtoull(value, &end, 10);
    } else {
      return false;
    }
    if (end == value || *end != '\0') {
      return false;
    }
  }
  return options->studies > 0;
}

void PrintDesign(const char* label, const tae::stats::SequentialDesign& design,
                 const Options& options) {
  std::printf("\n%s (min %d, max %d, alpha %g, margin %g sigma, futility %g), %d studies each\n\n",
              label, design.min_seeds, design.max_seeds, design.alpha, design.margin,
              design.futility, options.studies);
  std::printf(
      "| effect | different: adaptive | fixed max | naive p<alpha each look | equivalent: "
      "adaptive | fixed | same decision | runs: adaptive | fixed | adaptive / fixed |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|---|\n");
  uint64_t seed = options.seed;
  for (double effect : {0.0, 0.5, 1.0, 1.5, 2.0}) {
    const tae::stats::Simulation result =
        tae::stats::Simulate(design, effect, options.studies, seed++);
    std::printf("| %.1f sigma | %.4f | %.4f | %.4f | %.4f | %.4f | %.3f | %.2f | %d | %.3f |\n",
                effect, result.different, result.fixed_different, result.naive_different,
                result.equivalent, result.fixed_equivalent, result.agreement, result.mean_runs,
                result.fixed_runs, result.mean_runs / result.fixed_runs);
  }
}

}  // namespace

int main(int argc, char** argv) {
  Options options;
  if (!ParseOptions(argc, argv, &options)) {
    std::fprintf(stderr,
                 "usage: tae-seeds-bench [--studies N] [--min N] [--max N] [--alpha A] "
                 "[--seed S]\n");
    return 2;
  }
  tae::stats::SequentialDesign design;
  design.min_seeds = options.min_seeds;
  design.max_seeds = options.max_seeds;
  design.alpha = options.alpha;
  if (const auto error = tae::stats::DesignError(design)) {
    std::fprintf(stderr, "tae-seeds-bench: %s\n", error->c_str());
    return 2;
  }
  const tae::stats::Boundaries boundaries = tae::stats::ComputeBoundaries(design);
  std::printf("Looks (O'Brien-Fleming-type alpha spending):\n\n| n | z | nominal p | spent |\n");
  std::printf("|---|---|---|---|\n");
  for (size_t k = 0; k < boundaries.z.size(); ++k) {
    std::printf("| %d | %.3f | %.5f | %.5f |\n", design.min_seeds + static_cast<int>(k),
                boundaries.z[k], boundaries.nominal_p[k], boundaries.spent[k]);
  }
  PrintDesign("Adaptive seeds", design, options);
  tae::stats::SequentialDesign margin = design;
  margin.margin = 1;
  PrintDesign("With an equivalence margin of 1 sigma", margin, options);
  tae::stats::SequentialDesign futile = design;
  futile.futility = 0.1;
  PrintDesign("With futility stopping", futile, options);

  // The figures the design is judged by, on fresh draws.
  const tae::stats::Simulation null = tae::stats::Simulate(design, 0, options.studies, 1000);
  const tae::stats::Simulation one = tae::stats::Simulate(design, 1, options.studies, 1001);
  const tae::stats::Simulation two = tae::stats::Simulate(design, 2, options.studies, 1002);
  const double se = std::sqrt(design.alpha * (1 - design.alpha) / options.studies);
  std::printf("\nSummary (min %d, max %d, alpha %g, %d studies each):\n", design.min_seeds,
              design.max_seeds, design.alpha, options.studies);
  std::printf(
      "  false-positive rate, identical variants: %.4f (alpha %g, Monte-Carlo SE %.4f; "
      "naive p < alpha at every look: %.4f)\n",
      null.different, design.alpha, se, null.naive_different);
  std::printf(
      "  1 sigma effect: power %.4f adaptive vs %.4f fixed max, same decision %.3f, "
      "runs %.2f vs %d (%.0f%%)\n",
      one.different, one.fixed_different, one.agreement, one.mean_runs, one.fixed_runs,
      100 * one.mean_runs / one.fixed_runs);
  std::printf(
      "  2 sigma effect: power %.4f adaptive vs %.4f fixed max, same decision %.3f, "
      "runs %.2f vs %d (%.0f%%)\n",
      two.different, two.fixed_different, two.agreement, two.mean_runs, two.fixed_runs,
      100 * two.mean_runs / two.fixed_runs);
  return 0;
}
