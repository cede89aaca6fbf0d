// server/search: the asha rule (rung steps, ranks, ties, direction, NaN), the grid search over
// seeds (means, waiting for a point's own seeds only, within variant or study, missing data), the
// reasons, and Restore after a restart. tests/search/asha_oracle_test.py checks the rule against
// Optuna over randomised studies.
#include "server/search/asha.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

namespace tae::search {
namespace {

AshaRule Rule(int64_t min_steps, int64_t reduction, bool maximize = false, int64_t bootstrap = 1) {
  return AshaRule{"eval/loss", maximize, min_steps, reduction, bootstrap};
}

// The judged point's own decision (the first; a filled rung's others follow it).
Decision One(const std::vector<Decision>& decisions) {
  REQUIRE_FALSE(decisions.empty());
  return decisions.front();
}

std::vector<std::string> Points(const std::vector<Decision>& decisions, Verdict verdict) {
  std::vector<std::string> out;
  for (const Decision& d : decisions) {
    if (d.verdict == verdict) {
      out.push_back(d.point);
    }
  }
  return out;
}

TEST_CASE("rungs are at min_steps times eta to the k", "[search]") {
  const AshaRule rule = Rule(10, 3);
  CHECK(RungStep(rule, 0) == 10);
  CHECK(RungStep(rule, 1) == 30);
  CHECK(RungStep(rule, 3) == 270);
  CHECK(RungSteps(rule, 300) == std::vector<int64_t>{10, 30, 90, 270});
  CHECK(RungSteps(rule, 270) == std::vector<int64_t>{10, 30, 90});  // the last step is no rung
  CHECK(RungSteps(rule, 10).empty());
  CHECK(RungStep(Rule(1'000'000'000, 1000), 5) == std::numeric_limits<int64_t>::max());
  CHECK(RungSteps(Rule(1'000'000'000, 1000), std::numeric_limits<int64_t>::max()).size() == 4);
}

TEST_CASE("a variant's grid points compete within it, or every point in the study", "[search]") {
  CHECK(GroupOf(spec::SearchWithin::kVariant, "no-pos[lr=0.001,layers=2]") == "no-pos");
  CHECK(GroupOf(spec::SearchWithin::kVariant, "baseline") == "baseline");
  CHECK(GroupOf(spec::SearchWithin::kStudy, "no-pos[lr=0.001]").empty());
  spec::SearchPlan plan;
  plan.method = spec::SearchMethod::kAsha;
  plan.metric = "eval/acc";
  plan.goal = "max";
  plan.min_steps = 30;
  plan.reduction = 4;
  const AshaRule rule = RuleOf(plan);
  CHECK(rule.metric == "eval/acc");
  CHECK(rule.maximize);
  CHECK(rule.min_steps == 30);
  CHECK(rule.reduction == 4);
}

TEST_CASE("a point is kept when it is in the best n/eta of the rung so far", "[search]") {
  AshaJudge judge(Rule(10, 3));
  auto at0 = [&](const std::string& point, double value) {
    return One(judge.Judge(RungValue{point, "g", 0, value, 1, ""}));
  };
  // The first eta - 1 points: keeps 1, so only a new best is kept (Optuna's -1 -> 0).
  CHECK(at0("a", 2.0).verdict == Verdict::kKeep);
  CHECK(at0("b", 3.0).verdict == Verdict::kPrune);
  CHECK(at0("c", 1.0).verdict == Verdict::kKeep);
  // 4 values: keeps 4 / 3 = 1.
  CHECK(at0("d", 1.5).verdict == Verdict::kPrune);
  // 6 values: keeps 2; 0.5 and 1.0 are the best two.
  CHECK(at0("e", 2.5).verdict == Verdict::kPrune);
  const Decision f = at0("f", 0.5);
  CHECK(f.verdict == Verdict::kKeep);
  CHECK(f.rank == 1);
  CHECK(f.competitors == 6);
  CHECK(f.keeps == 2);
  CHECK(judge.Recorded("g", 0) == std::vector<double>{2.0, 3.0, 1.0, 1.5, 2.5, 0.5});
  // A pruned point is not judged again; a point's rungs come in order.
  CHECK(One(judge.Judge(RungValue{"b", "g", 1, 0.0, 1, ""})).verdict == Verdict::kIgnored);
  CHECK(One(judge.Judge(RungValue{"a", "g", 2, 0.0, 1, ""})).verdict == Verdict::kIgnored);
  CHECK(One(judge.Judge(RungValue{"a", "g", 0, 0.0, 1, ""})).verdict == Verdict::kIgnored);
  CHECK(One(judge.Judge(RungValue{"a", "g", 1, 0.0, 1, ""})).verdict == Verdict::kKeep);
  CHECK(judge.NextRung("a") == 2);
  CHECK(judge.Pruned("b"));
  CHECK_FALSE(judge.Pruned("a"));
}

TEST_CASE("ties at the threshold are all kept, and max goals rank the other way", "[search]") {
  AshaJudge judge(Rule(10, 3));
  for (const char* point : {"a", "b", "c", "d", "e", "f"}) {
    INFO(point);
    CHECK(One(judge.Judge(RungValue{point, "", 0, 1.0, 1, ""})).verdict == Verdict::kKeep);
  }
  AshaJudge max(Rule(10, 2, /*maximize=*/true));
  CHECK(One(max.Judge(RungValue{"a", "", 0, 0.5, 1, ""})).verdict == Verdict::kKeep);
  CHECK(One(max.Judge(RungValue{"b", "", 0, 0.9, 1, ""})).verdict ==
        Verdict::kKeep);  // 2 / 2 = 1: best
  CHECK(One(max.Judge(RungValue{"c", "", 0, 0.1, 1, ""})).verdict == Verdict::kPrune);
  const Decision d =
      One(max.Judge(RungValue{"d", "", 0, 0.5, 1, ""}));  // 0.9 > 0.5 = 0.5 > 0.1: 2nd
  CHECK(d.rank == 2);
  CHECK(d.keeps == 2);
  CHECK(d.verdict == Verdict::kKeep);
}

TEST_CASE("the reason names the rung, the metric, its value and its rank", "[search]") {
  AshaJudge judge(Rule(30, 3));
  // Nine points through rungs 0 and 1 at one tied value, then ranked at rung 2 (step 270).
  std::vector<Decision> at2;
  for (int i = 0; i < 9; ++i) {
    const std::string point = "p" + std::to_string(i);
    REQUIRE(One(judge.Judge(RungValue{point, "", 0, 5.0, 2, ""})).verdict == Verdict::kKeep);
    REQUIRE(One(judge.Judge(RungValue{point, "", 1, 4.0, 2, ""})).verdict == Verdict::kKeep);
  }
  for (int i = 0; i < 9; ++i) {
    const double value = i == 8 ? 1.93 : 1.0 + 0.1 * i;  // p8 is the worst
    at2.push_back(One(judge.Judge(RungValue{"p" + std::to_string(i), "", 2, value, 2, ""})));
  }
  CHECK(at2[8].reason == "rung 2 (step 270): eval/loss 1.93, 9th of 9, keeps best 3");
  CHECK(at2[8].verdict == Verdict::kPrune);
  CHECK(at2[0].reason == "rung 2 (step 270): eval/loss 1, 1st of 1, keeps best 1");
  CHECK(at2[2].reason == "rung 2 (step 270): eval/loss 1.2, 3rd of 3, keeps best 1");
  AshaJudge ranks(Rule(30, 3));
  for (double value : {1.0, 1.1, 1.2, 1.3, 1.4, 1.5, 2.0, 2.1}) {
    One(ranks.Judge(RungValue{std::to_string(value), "", 0, value, 1, ""}));
  }
  const Decision seventh = One(ranks.Judge(RungValue{"x", "", 0, 1.93, 1, ""}));
  CHECK(seventh.reason == "rung 0 (step 30): eval/loss 1.93, 7th of 9, keeps best 3");
  const Decision nan = One(ranks.Judge(RungValue{"n", "", 0, std::nan(""), 1, ""}));
  CHECK(nan.verdict == Verdict::kPrune);
  CHECK(nan.reason == "rung 0 (step 30): eval/loss nan, 10th of 10, keeps best 3");
  // A diverged value is recorded as the worst: a competitor that lost.
  REQUIRE(ranks.Recorded("", 0).size() == 10);
  CHECK(ranks.Recorded("", 0).back() == std::numeric_limits<double>::infinity());
}

// Two variants x 3 learning rates x 2 seeds; run ids 1..12 in that order.
std::vector<SearchRun> TwoVariants() {
  std::vector<SearchRun> runs;
  int64_t id = 1;
  for (const char* variant : {"baseline", "no-pos"}) {
    for (const char* lr : {"0.1", "0.01", "0.001"}) {
      for (int seed = 0; seed < 2; ++seed) {
        runs.push_back({id++, std::string(variant) + "[lr=" + lr + "]"});
      }
    }
  }
  return runs;
}

TEST_CASE("a point is judged on the mean of its seeds once each has reported the rung",
          "[search]") {
  GridSearch search(Rule(10, 3), spec::SearchWithin::kVariant, TwoVariants());
  CHECK(search.Runs("baseline[lr=0.01]") == std::vector<int64_t>{3, 4});
  CHECK(search.Observe(1, "eval/loss", 5, 9.0).empty());   // before the rung
  CHECK(search.Observe(1, "eval/acc", 10, 0.5).empty());   // another metric
  CHECK(search.Observe(1, "eval/loss", 10, 2.0).empty());  // seed 1 has not reported
  CHECK(search.Observe(1, "eval/loss", 20, 0.0).empty());  // a later report changes nothing
  std::vector<Decision> d = search.Observe(2, "eval/loss", 12, 3.0);  // first report >= 10
  REQUIRE(d.size() == 1);
  CHECK(d[0].point == "baseline[lr=0.1]");
  CHECK(d[0].group == "baseline");
  CHECK(d[0].value == 2.5);
  CHECK(d[0].seeds == 2);
  CHECK(d[0].verdict == Verdict::kKeep);
  // The next baseline point is worse: pruned at once, without waiting for the third.
  search.Observe(3, "eval/loss", 10, 3.0);
  d = search.Observe(4, "eval/loss", 10, 3.0);
  REQUIRE(d.size() == 1);
  CHECK(d[0].verdict == Verdict::kPrune);
  CHECK(search.Pruned("baseline[lr=0.01]"));
  CHECK(search.Observe(3, "eval/loss", 30, 0.0).empty());  // its runs' later reports: ignored
  // no-pos competes on its own (within = variant): its first point is kept at 9.0.
  search.Observe(7, "eval/loss", 10, 9.0);
  d = search.Observe(8, "eval/loss", 10, 9.0);
  REQUIRE(d.size() == 1);
  CHECK(d[0].verdict == Verdict::kKeep);
  CHECK(d[0].competitors == 1);
}

TEST_CASE("within = study: every point competes with every other", "[search]") {
  GridSearch search(Rule(10, 3), spec::SearchWithin::kStudy, TwoVariants());
  search.Observe(1, "eval/loss", 10, 2.0);
  search.Observe(2, "eval/loss", 10, 2.0);
  search.Observe(7, "eval/loss", 10, 9.0);
  std::vector<Decision> d = search.Observe(8, "eval/loss", 10, 9.0);
  REQUIRE(d.size() == 1);
  CHECK(d[0].group.empty());
  CHECK(d[0].verdict == Verdict::kPrune);
  CHECK(d[0].reason == "rung 0 (step 10): eval/loss 9, 2nd of 2, keeps best 1");
}

TEST_CASE("one report past several rungs is judged at each in turn", "[search]") {
  GridSearch search(Rule(1, 3), spec::SearchWithin::kStudy,
                    {{1, "baseline[x=1]"}, {2, "baseline[x=2]"}});
  std::vector<Decision> d = search.Observe(1, "eval/loss", 10, 1.0);  // rungs 1, 3, 9
  REQUIRE(d.size() == 3);
  CHECK(d[2].rung == 2);
  CHECK(d[2].step == 9);
  d = search.Observe(2, "eval/loss", 10, 2.0);  // worse at rung 0: pruned there, not at 1 or 2
  REQUIRE(d.size() == 1);
  CHECK(d[0].rung == 0);
  CHECK(d[0].verdict == Verdict::kPrune);
}

TEST_CASE("missing data never prunes: a silent seed holds its point open", "[search]") {
  GridSearch search(Rule(10, 3), spec::SearchWithin::kStudy,
                    {{1, "baseline[x=1]"}, {2, "baseline[x=1]"}, {3, "baseline[x=2]"}});
  search.Observe(3, "eval/loss", 10, 0.0);
  CHECK(search.Observe(1, "eval/loss", 10, 5.0).empty());  // run 2 never reports the metric
  CHECK(search.Observe(1, "eval/loss", 100, 5.0).empty());
  // Run 2 is cancelled at step 50: the point is judged on run 1 alone, at rungs 0 and 1 ...
  std::vector<Decision> d = search.Ended(2, 50);
  REQUIRE(d.size() == 1);
  CHECK(d[0].seeds == 1);
  CHECK(d[0].verdict == Verdict::kPrune);
  // ... and a point whose runs all end without the metric is not judged; its decision says so.
  GridSearch silent(Rule(10, 3), spec::SearchWithin::kStudy, {{1, "baseline[x=1]"}});
  d = silent.Ended(1, 500);
  REQUIRE(d.size() == 1);
  CHECK(d[0].verdict == Verdict::kNoData);
  CHECK(d[0].reason ==
        "rung 0 (step 10): no run of the point reported eval/loss at or after step 10; not "
        "judged");
  CHECK(silent.Observe(1, "eval/loss", 20, 1.0).empty());
  // A run that ends before the rung owes it nothing.
  GridSearch early(Rule(10, 3), spec::SearchWithin::kStudy, {{1, "baseline[x=1]"}});
  CHECK(early.Ended(1, 5).empty());
}

TEST_CASE("after a restart the stored decisions are restored and replay decides nothing new",
          "[search]") {
  const AshaRule rule = Rule(10, 2);
  GridSearch first(rule, spec::SearchWithin::kVariant, TwoVariants());
  std::vector<Decision> stored;
  struct Report {
    int64_t run;
    int64_t step;
    double value;
  };
  const std::vector<Report> reports = {{1, 10, 1.0}, {2, 10, 1.0}, {3, 10, 2.0},
                                       {4, 10, 2.0}, {5, 10, 0.5}, {6, 10, 0.5},
                                       {1, 20, 0.9}, {5, 20, 0.4}, {6, 20, 0.4}};
  for (const Report& r : reports) {
    for (Decision& d : first.Observe(r.run, "eval/loss", r.step, r.value)) {
      stored.push_back(std::move(d));
    }
  }
  REQUIRE(Points(stored, Verdict::kPrune) == std::vector<std::string>{"baseline[lr=0.01]"});
  GridSearch second(rule, spec::SearchWithin::kVariant, TwoVariants());
  REQUIRE(second.Restore(stored).ok());
  for (const Report& r : reports) {
    CHECK(second.Observe(r.run, "eval/loss", r.step, r.value).empty());
  }
  CHECK(second.Pruned("baseline[lr=0.01]"));
  CHECK(second.judge().Recorded("baseline", 1) == first.judge().Recorded("baseline", 1));
  // Both go on alike: lr=0.1's second seed completes its rung 1, behind lr=0.001's 0.4.
  CHECK(second.Observe(3, "eval/loss", 40, 0.0).empty());
  const std::vector<Decision> a = first.Observe(2, "eval/loss", 20, 0.8);
  const std::vector<Decision> b = second.Observe(2, "eval/loss", 20, 0.8);
  REQUIRE(a.size() == 1);
  REQUIRE(b.size() == 1);
  CHECK(a[0].verdict == Verdict::kPrune);
  CHECK(b[0].reason == a[0].reason);
  // A rule that now judges a stored decision differently is refused, not silently re-decided.
  GridSearch changed(Rule(10, 3, /*maximize=*/true), spec::SearchWithin::kVariant, TwoVariants());
  const absl::Status status = changed.Restore(stored);
  CHECK(status.code() == absl::StatusCode::kFailedPrecondition);
  CHECK(std::string(status.message()).find("baseline[lr=0.01] rung 0 prune") != std::string::npos);
  GridSearch unknown(rule, spec::SearchWithin::kVariant, {{1, "other[x=1]"}});
  CHECK(unknown.Restore(stored).code() == absl::StatusCode::kFailedPrecondition);
}

// Nine points of one variant, one seed each: run i is point x=i.
std::vector<SearchRun> NinePoints() {
  std::vector<SearchRun> runs;
  for (int i = 1; i <= 9; ++i) {
    runs.push_back({i, "baseline[x=" + std::to_string(i) + "]"});
  }
  return runs;
}

TEST_CASE("a rung waits for bootstrap points and then judges them all against each other",
          "[search]") {
  GridSearch search(Rule(10, 3, false, /*bootstrap=*/3), spec::SearchWithin::kVariant,
                    NinePoints());
  // An ascending grid: each point better than the last. Without the wait the first two would
  // each be the best so far and kept.
  std::vector<Decision> d = search.Observe(1, "eval/loss", 10, 3.0);
  REQUIRE(d.size() == 1);
  CHECK(d[0].verdict == Verdict::kWait);
  CHECK(d[0].reason == "rung 0 (step 10): eval/loss 3, waits for 3 points at the rung (1 so far)");
  CHECK(One(search.Observe(2, "eval/loss", 10, 2.0)).verdict == Verdict::kWait);
  // The waiting points run on: their next rung's value is kept until they are judged.
  CHECK(search.Observe(1, "eval/loss", 30, 2.5).empty());
  d = search.Observe(3, "eval/loss", 10, 1.0);
  // The third fills the rung: it is judged first, then the others in the order they came, each
  // against all three values. Keeps max(1, 3 / 3) = 1.
  REQUIRE(d.size() == 3);
  CHECK(d[0].point == "baseline[x=3]");
  CHECK(d[0].verdict == Verdict::kKeep);
  CHECK(d[1].point == "baseline[x=1]");
  CHECK(d[1].verdict == Verdict::kPrune);
  CHECK(d[1].reason == "rung 0 (step 10): eval/loss 3, 3rd of 3, keeps best 1");
  CHECK(d[2].point == "baseline[x=2]");
  CHECK(d[2].verdict == Verdict::kPrune);
  CHECK(d[2].competitors == 3);
  // After the bootstrap a rung judges each arrival at once, as Optuna does.
  d = search.Observe(4, "eval/loss", 10, 0.5);
  REQUIRE(d.size() == 1);
  CHECK(d[0].verdict == Verdict::kKeep);
  CHECK(search.judge().Recorded("baseline", 0) == std::vector<double>{3.0, 2.0, 1.0, 0.5});
}

TEST_CASE("the finite rule keeps a rung's share of the whole grid and prunes only what is sure",
          "[search]") {
  // Nine points, eta 3: rung 0 keeps 3, rung 1 keeps 1. An ascending grid (each arrival better
  // than the last) is the order that makes Optuna's rule keep every early point.
  GridSearch search(Rule(10, 3, false, /*bootstrap=*/0), spec::SearchWithin::kVariant,
                    NinePoints());
  for (int64_t run = 1; run <= 3; ++run) {
    const Decision d = One(search.Observe(run, "eval/loss", 10, 10.0 - static_cast<double>(run)));
    CHECK(d.verdict == Verdict::kKeep);  // at most 3 values better than any of them can come
    CHECK(d.keeps == 3);
    CHECK(d.competitors == run);
  }
  // The fourth is better than all: kept. A fifth worse than three recorded is sure to be out.
  CHECK(One(search.Observe(4, "eval/loss", 10, 1.0)).verdict == Verdict::kKeep);
  const Decision out = One(search.Observe(5, "eval/loss", 10, 8.5));
  CHECK(out.verdict == Verdict::kPrune);
  CHECK(out.rank == 4);
  CHECK(out.reason == "rung 0 (step 10): eval/loss 8.5, 4th of 5, keeps best 3");
  // Rung 1 keeps 1 of the 3: the first there is kept, a worse second is pruned at once.
  CHECK(One(search.Observe(4, "eval/loss", 30, 0.9)).verdict == Verdict::kKeep);
  const Decision second = One(search.Observe(1, "eval/loss", 30, 5.0));
  CHECK(second.verdict == Verdict::kPrune);
  CHECK(second.keeps == 1);
  // Nothing ever waits.
  for (int64_t run = 6; run <= 9; ++run) {
    CHECK(One(search.Observe(run, "eval/loss", 10, 9.5)).verdict != Verdict::kWait);
  }
}

TEST_CASE("a rung that cannot fill judges once no other point can still reach it", "[search]") {
  GridSearch search(Rule(10, 3, false, /*bootstrap=*/3), spec::SearchWithin::kVariant,
                    {{1, "baseline[x=1]"}, {2, "baseline[x=2]"}, {3, "baseline[x=3]"}});
  CHECK(One(search.Observe(1, "eval/loss", 10, 1.0)).verdict == Verdict::kWait);
  CHECK(One(search.Observe(2, "eval/loss", 10, 2.0)).verdict == Verdict::kWait);
  // x=3 is cancelled before step 10: it will never reach the rung, which judges the two now.
  std::vector<Decision> d = search.Ended(3, 4);
  REQUIRE(d.size() == 2);
  CHECK(d[0].point == "baseline[x=1]");
  CHECK(d[0].verdict == Verdict::kKeep);
  CHECK(d[1].point == "baseline[x=2]");
  CHECK(d[1].verdict == Verdict::kPrune);
  // Rung 1 (step 30) has only x=1 left to reach it: judged at once.
  d = search.Observe(1, "eval/loss", 30, 0.9);
  REQUIRE(d.size() == 1);
  CHECK(d[0].verdict == Verdict::kKeep);
  CHECK(d[0].rung == 1);
  // A group smaller than the bootstrap judges when all of it has arrived.
  GridSearch small(Rule(10, 3, false, /*bootstrap=*/5), spec::SearchWithin::kVariant,
                   {{1, "baseline[x=1]"}, {2, "baseline[x=2]"}});
  CHECK(One(small.Observe(1, "eval/loss", 10, 1.0)).verdict == Verdict::kWait);
  CHECK(small.Observe(2, "eval/loss", 10, 2.0).size() == 2);
}

TEST_CASE("a diverged seed is its point's worst value at once and the point is pruned",
          "[search]") {
  GridSearch search(
      Rule(10, 3), spec::SearchWithin::kVariant,
      {{1, "baseline[x=1]"}, {2, "baseline[x=1]"}, {3, "baseline[x=2]"}, {4, "baseline[x=2]"}});
  // x=1's first seed goes NaN at step 6, before the rung: the point is judged there and then,
  // without waiting for its other seed, and even though it is the first at the rung.
  std::vector<Decision> d = search.Observe(1, "eval/loss", 6, std::nan(""));
  REQUIRE(d.size() == 1);
  CHECK(d[0].verdict == Verdict::kPrune);
  CHECK(d[0].value == std::numeric_limits<double>::infinity());
  CHECK(d[0].reason ==
        "rung 0 (step 10): eval/loss diverged at step 6 (r1: nan), 1st of 1, keeps best 1");
  // It counts as a competitor that lost: x=2 is 1st of 2.
  search.Observe(3, "eval/loss", 10, 5.0);
  d = search.Observe(4, "eval/loss", 10, 7.0);
  REQUIRE(d.size() == 1);
  CHECK(d[0].verdict == Verdict::kKeep);
  CHECK(d[0].competitors == 2);
  // A seed diverged later (+inf at step 40) decides the point's next rung (30) at once; with goal
  // max the worst is -inf.
  GridSearch later(Rule(10, 3, /*maximize=*/true), spec::SearchWithin::kVariant,
                   {{1, "baseline[x=1]"}, {2, "baseline[x=1]"}});
  later.Observe(1, "eval/acc", 10, 0.5);
  later.Observe(1, "eval/loss", 10, 0.5);
  CHECK(One(later.Observe(2, "eval/loss", 12, 0.7)).verdict == Verdict::kKeep);
  d = later.Observe(2, "eval/loss", 20, std::numeric_limits<double>::infinity());
  REQUIRE(d.size() == 1);
  CHECK(d[0].rung == 1);
  CHECK(d[0].verdict == Verdict::kPrune);
  CHECK(d[0].value == -std::numeric_limits<double>::infinity());
  CHECK(d[0].reason.find("diverged at step 20 (r2: inf)") != std::string::npos);
  // Its later finite reports change nothing: the series ended there for the search.
  CHECK(later.Observe(2, "eval/loss", 30, 0.9).empty());
  // A diverged point never waits for the bootstrap: pruned at once, and its worst value counts
  // toward filling the rung for the points that wait.
  GridSearch boot(Rule(10, 3, false, /*bootstrap=*/2), spec::SearchWithin::kVariant,
                  {{1, "baseline[x=1]"}, {2, "baseline[x=2]"}, {3, "baseline[x=3]"}});
  CHECK(One(boot.Observe(1, "eval/loss", 10, 1.0)).verdict == Verdict::kWait);
  d = boot.Observe(2, "eval/loss", 4, std::nan(""));
  REQUIRE(d.size() == 2);
  CHECK(d[0].point == "baseline[x=2]");
  CHECK(d[0].verdict == Verdict::kPrune);
  CHECK(d[1].point == "baseline[x=1]");
  CHECK(d[1].verdict == Verdict::kKeep);
}

TEST_CASE("a seed that failed before a rung is its point's worst value there", "[search]") {
  GridSearch search(Rule(10, 3), spec::SearchWithin::kVariant,
                    {{1, "baseline[x=1]"}, {2, "baseline[x=1]"}, {3, "baseline[x=2]"}});
  search.Observe(3, "eval/loss", 10, 9.0);
  std::vector<Decision> d = search.Ended(2, 8, /*failed=*/true);
  REQUIRE(d.size() == 1);
  CHECK(d[0].point == "baseline[x=1]");
  CHECK(d[0].verdict == Verdict::kPrune);
  CHECK(d[0].reason == "rung 0 (step 10): eval/loss failed at step 8 (r2), 2nd of 2, keeps best 1");
  // Failed after the rung: its value there stands, and the rung after counts it as the worst.
  GridSearch after(Rule(10, 3), spec::SearchWithin::kVariant, {{1, "baseline[x=1]"}});
  CHECK(One(after.Observe(1, "eval/loss", 10, 1.0)).verdict == Verdict::kKeep);
  d = after.Ended(1, 20, /*failed=*/true);
  REQUIRE(d.size() == 1);
  CHECK(d[0].rung == 1);
  CHECK(d[0].verdict == Verdict::kPrune);
}

TEST_CASE("restore replays waits and the batches a closed point fired", "[search]") {
  const AshaRule rule = Rule(10, 3, false, /*bootstrap=*/3);
  const std::vector<SearchRun> runs = {
      {1, "baseline[x=1]"}, {2, "baseline[x=2]"}, {3, "baseline[x=3]"}, {4, "baseline[x=4]"}};
  GridSearch first(rule, spec::SearchWithin::kVariant, runs);
  std::vector<Decision> stored;
  const auto keep = [&stored](std::vector<Decision> d) {
    stored.insert(stored.end(), d.begin(), d.end());
  };
  keep(first.Observe(1, "eval/loss", 10, 2.0));
  keep(first.Observe(2, "eval/loss", 10, 1.0));
  keep(first.Ended(3, 3));  // closed: the rung still waits for x=4
  keep(first.Ended(4, 0));  // closed: now nothing else can come, the two are judged
  keep(first.Observe(2, "eval/loss", 40, 0.5));
  REQUIRE(stored.size() == 5);
  CHECK(stored[2].verdict == Verdict::kPrune);  // x=1 at rung 0, after x=2's keep
  GridSearch second(rule, spec::SearchWithin::kVariant, runs);
  const absl::Status restored = second.Restore(stored);
  INFO(restored.ToString());
  REQUIRE(restored.ok());
  CHECK(second.Observe(1, "eval/loss", 10, 2.0).empty());
  CHECK(second.Observe(2, "eval/loss", 10, 1.0).empty());
  CHECK(second.Observe(2, "eval/loss", 40, 0.5).empty());
  CHECK(second.Ended(3, 3).empty());
  CHECK(second.Ended(4, 0).empty());
  CHECK(second.Pruned("baseline[x=1]"));
  CHECK(second.judge().NextRung("baseline[x=2]") == first.judge().NextRung("baseline[x=2]"));
}

}  // namespace
}  // namespace tae::search

namespace tae::search {
namespace {

TEST_CASE(
    "a rung at or past train.steps is not a rung: a run that trained to its end is never pruned",
    "[search]") {
  // min_steps 10, eta 3: rungs at 10, 30, 90; train.steps 90 (bench/search's 810/10 shape).
  GridSearch search(Rule(10, 3), spec::SearchWithin::kVariant,
                    {{1, "baseline[x=1]", 90}, {2, "baseline[x=2]", 90}});
  CHECK(One(search.Observe(1, "eval/loss", 10, 1.0)).verdict == Verdict::kKeep);
  CHECK(One(search.Observe(2, "eval/loss", 10, 1.0)).verdict == Verdict::kKeep);
  CHECK(One(search.Observe(1, "eval/loss", 30, 1.0)).verdict == Verdict::kKeep);
  CHECK(One(search.Observe(2, "eval/loss", 30, 1.0)).verdict == Verdict::kKeep);
  // Both report their last step, the worse one far worse: rung 2 (step 90) judges neither.
  CHECK(search.Observe(1, "eval/loss", 90, 0.5).empty());
  CHECK(search.Observe(2, "eval/loss", 90, 9.0).empty());
  CHECK_FALSE(search.Pruned("baseline[x=2]"));
  CHECK(search.Ended(2, 90).empty());
  CHECK(search.Ended(1, 90).empty());
  CHECK(search.judge().Recorded("baseline", 2).empty());

  // A rung before train.steps whose first report is at the last step: not judged there either.
  GridSearch late(Rule(25, 3), spec::SearchWithin::kVariant,
                  {{1, "baseline[x=1]", 30}, {2, "baseline[x=2]", 30}});
  CHECK(late.Observe(1, "eval/loss", 10, 1.0).empty());  // before rung 0
  CHECK(late.Observe(1, "eval/loss", 30, 1.0).empty());
  CHECK(late.Observe(2, "eval/loss", 30, 9.0).empty());
  CHECK_FALSE(late.Pruned("baseline[x=2]"));
  CHECK(late.Ended(2, 30).empty());  // closed, not "no data"

  // A seed that failed before its end is still its point's worst at the rung before train.steps.
  GridSearch failing(Rule(10, 3), spec::SearchWithin::kVariant,
                     {{1, "baseline[x=1]", 90}, {2, "baseline[x=2]", 90}});
  failing.Observe(1, "eval/loss", 10, 1.0);
  failing.Observe(2, "eval/loss", 10, 1.0);
  failing.Observe(1, "eval/loss", 30, 1.0);
  const std::vector<Decision> d = failing.Ended(2, 20, /*failed=*/true);
  REQUIRE(d.size() == 1);
  CHECK(d[0].rung == 1);
  CHECK(d[0].verdict == Verdict::kPrune);
}

}  // namespace
}  // namespace tae::search
