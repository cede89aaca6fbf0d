#pragma once

// What a valid experiment file's design will not do well, said before it runs (`taectl submit`
// and `submit --dry-run` print each as a "note: ..." line; --json carries them as "notes"). A
// note never refuses a file: the design is legal, only weaker than its author may think. Pure.
//
// Notes (each names the keys to change):
//  - a [job] command of more than one seed (or adaptive seeds) that never names {train.seed}: the
//    seed reaches the program only as TAE_SEED, and a script that seeds itself with a constant
//    runs every seed alike (the table then says "seeds identical").
//  - asha, a competition (a variant's grid points with search.within = "variant", all points
//    with "study") of fewer than eta^2 points: rung 0 already ranks fewer than eta^2 values and
//    keeps max(1, n / eta) of them, and every later rung judges one or two; bench/README.md,
//    "ASHA by simulation", measures how often a point the full grid ranks 2nd or 3rd is stopped.
//  - asha, rung 0 (search.min_steps) before train.warmup ends for tae-train and torch-engine runs:
//    points are ranked while their learning rates are still ramping, so a larger rate looks
//    better than it will be.

#include <string>
#include <vector>

#include "common/spec/spec.h"

namespace tae::spec {

std::vector<std::string> DesignNotes(const Spec& spec);

}  // namespace tae::spec
