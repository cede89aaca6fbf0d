#pragma once

// Operating characteristics of an adaptive-seeds design by simulation: how often it calls
// comparisons different or equivalent, how many runs it uses, and how that compares with running
// max seeds for every comparison and testing once. Used by the simulation test
// (tests/unit/sequential_test.cc) and printed by bench/seeds_bench.sh.
//
// Pure and deterministic: a study's values come from a 64-bit Mersenne Twister seeded with `seed`
// (std::mt19937_64, whose output sequence the C++ standard fixes) through a Box–Muller transform
// written here, so every platform draws the same numbers.

#include <cstdint>
#include <random>

#include "common/stats/sequential.h"

namespace tae::stats {

// Standard normal draws from mt19937_64 by Box–Muller, identical on every platform (the standard
// fixes mt19937_64's output but not std::normal_distribution's algorithm).
class NormalSource {
 public:
  explicit NormalSource(uint64_t seed) : engine_(seed) {}

  double Next();
  // In (0, 1): 53 random bits, centred in their interval so that 0 never comes out.
  double Uniform();

 private:
  std::mt19937_64 engine_;
  bool has_spare_ = false;
  double spare_ = 0;
};

struct Simulation {
  int studies = 0;
  double effect = 0;  // true delta in seed standard deviations
  // Shares of studies per decision of the adaptive design (summing to 1 with undecided).
  double different = 0;
  double equivalent = 0;
  double futile = 0;  // undecided before max (futility)
  // The same studies with max seeds per arm and one test at alpha (Welch; TOST at alpha with a
  // margin), on the same values: the adaptive design sees a prefix of them.
  double fixed_different = 0;
  double fixed_equivalent = 0;
  double agreement = 0;  // share of studies with the same decision both ways
  double mean_runs = 0;  // runs of the adaptive design per study (both arms)
  int fixed_runs = 0;    // 2 * max
  // Naive repeated testing on the same looks: "different" as soon as Welch's p < alpha at any
  // n = min .. max. What the design guards against.
  double naive_different = 0;
};

// Simulates `studies` comparisons of a variant whose seeds are N(effect, 1) against a baseline
// whose seeds are N(0, 1) (the metric in units of the seed-to-seed standard deviation, so
// design.margin is in those units too). A valid design is required.
Simulation Simulate(const SequentialDesign& design, double effect, int studies, uint64_t seed);

}  // namespace tae::stats
