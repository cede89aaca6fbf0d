// The design notes `taectl submit` prints before an asha study runs (common/spec/notes.h).
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "common/spec/notes.h"
#include "common/spec/spec.h"
#include "tests/unit/spec_parse.h"

namespace tae::spec {
namespace {

using testing::MustParse;

// A tae-train study with a learning-rate grid of `points` values and one ablation.
std::string Study(int points, const std::string& search, const std::string& train = "") {
  std::string lrs;
  for (int i = 0; i < points; ++i) {
    lrs += (i ? ", " : "") + std::to_string(0.001 * (i + 1));
  }
  return "name = \"lr\"\n[train]\nsteps = 400\n" + train + "[grid]\n\"train.lr\" = [" + lrs +
         "]\n[[ablation]]\nname = \"no-pos\"\nmodel.pos_encoding = \"none\"\n[search]\n" + search;
}

int Count(const std::vector<std::string>& notes, const std::string& part) {
  int n = 0;
  for (const std::string& note : notes) {
    n += note.find(part) != std::string::npos ? 1 : 0;
  }
  return n;
}

TEST_CASE("a grid search that is not asha gets no notes", "[spec][notes]") {
  CHECK(DesignNotes(MustParse(Study(2, "metric = \"eval/loss\"\n"))).empty());
  CHECK(DesignNotes(MustParse("name = \"plain\"\n[train]\nsteps = 100\n")).empty());
}

TEST_CASE("an asha competition of fewer than eta^2 points is noted with the keys to change",
          "[spec][notes]") {
  const std::string asha = "method = \"asha\"\nmin_steps = 60\n";
  const std::vector<std::string> small = DesignNotes(MustParse(Study(4, asha, "warmup = 50\n")));
  REQUIRE(Count(small, "fewer than search.reduction^2 = 9") == 1);
  CHECK(Count(small, "4 grid points") == 1);
  CHECK(Count(small, "keeps the best 1 of them") == 1);
  // Nine points at eta 3: enough.
  CHECK(Count(DesignNotes(MustParse(Study(9, asha, "warmup = 50\n"))), "reduction^2") == 0);
  // eta 2 needs four.
  CHECK(Count(DesignNotes(MustParse(Study(4, asha + "reduction = 2\n", "warmup = 50\n"))),
              "reduction^2") == 0);
  // Competing across the study: 4 points x 2 variants = 8 < 9, 5 x 2 = 10 is enough.
  const std::vector<std::string> study =
      DesignNotes(MustParse(Study(4, asha + "within = \"study\"\n", "warmup = 50\n")));
  CHECK(Count(study, "8 grid points (search.within = \"study\")") == 1);
  CHECK(Count(DesignNotes(MustParse(Study(5, asha + "within = \"study\"\n", "warmup = 50\n"))),
              "reduction^2") == 0);
}

TEST_CASE("an asha rung 0 inside the learning-rate warmup is noted", "[spec][notes]") {
  const std::vector<std::string> early =
      DesignNotes(MustParse(Study(9, "method = \"asha\"\nmin_steps = 15\n", "warmup = 50\n")));
  REQUIRE(Count(early, "before train.warmup ends (step 50)") == 1);
  CHECK(Count(early, "set search.min_steps >= 50") == 1);
  CHECK(Count(DesignNotes(
                  MustParse(Study(9, "method = \"asha\"\nmin_steps = 50\n", "warmup = 50\n"))),
              "warmup") == 0);
  // An ablation with a longer warmup is the one that counts.
  const std::string longer = Study(9, "method = \"asha\"\nmin_steps = 60\n", "warmup = 50\n") +
                             "[[ablation]]\nname = \"slow\"\n\"train.warmup\" = 100\n";
  CHECK(Count(DesignNotes(MustParse(longer)), "(step 100)") == 1);
}

TEST_CASE("a command job that never passes its seed is noted once, with how to pass it",
          "[spec][notes]") {
  const auto notes = [](const std::string& command, const std::string& seeds) {
    return DesignNotes(MustParse("name = \"s\"\n[train]\nseeds = " + seeds +
                                 "\n[job]\ncode = \".\"\ncommand = \"" + command + "\"\n"));
  };
  const std::string said = "job.command never uses {train.seed}";
  CHECK(Count(notes("python3 train.py --lr={train.lr}", "[0, 1, 2]"), said) == 1);
  CHECK(Count(notes("python3 train.py", "{ min = 3, max = 6 }"), said) == 1);
  CHECK(Count(notes("python3 train.py --seed={train.seed}", "[0, 1, 2]"), said) == 0);
  CHECK(Count(notes("python3 train.py", "[0]"), said) == 0);  // one seed: nothing varies
  const std::vector<std::string> got = notes("python3 train.py", "[0, 1]");
  REQUIRE(got.size() == 1);
  CHECK(got[0].find("TAE_SEED") != std::string::npos);
  CHECK(got[0].find("--seed={train.seed}") != std::string::npos);
  // tae-train gets its seed itself: no note.
  CHECK(DesignNotes(MustParse("name = \"t\"\n[train]\nseeds = [0, 1]\n")).empty());
}

}  // namespace
}  // namespace tae::spec
