#include "server/search/asha.h"

#include <cmath>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace tae::search {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// "1st", "2nd", "3rd", "4th", "11th", "12th", "13th", "21st".
std::string Ordinal(int n) {
  const int tens = n % 100;
  const char* suffix = "th";
  if (tens < 11 || tens > 13) {
    switch (n % 10) {
      case 1:
        suffix = "st";
        break;
      case 2:
        suffix = "nd";
        break;
      case 3:
        suffix = "rd";
        break;
      default:
        break;
    }
  }
  return absl::StrCat(n, suffix);
}

std::string RungText(int rung, int64_t step) {
  return absl::StrCat("rung ", rung, " (step ", step, ")");
}

}  // namespace

AshaRule RuleOf(const spec::SearchPlan& plan) {
  return AshaRule{plan.metric, plan.maximize(), plan.min_steps, plan.reduction, plan.bootstrap};
}

int64_t RungStep(const AshaRule& rule, int rung) {
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  int64_t step = rule.min_steps;
  for (int k = 0; k < rung; ++k) {
    if (step > kMax / rule.reduction) {
      return kMax;
    }
    step *= rule.reduction;
  }
  return step;
}

std::vector<int64_t> RungSteps(const AshaRule& rule, int64_t last_step) {
  std::vector<int64_t> steps;
  for (int k = 0;; ++k) {
    const int64_t step = RungStep(rule, k);
    if (step >= last_step || (k > 0 && step == steps.back())) {
      return steps;
    }
    steps.push_back(step);
  }
}

std::string GroupOf(spec::SearchWithin within, std::string_view variant) {
  if (within == spec::SearchWithin::kStudy) {
    const int rung = spec::RungOf(variant);
    return rung < 0 ? "" : absl::StrCat("[rung=", rung, "]");
  }
  return spec::AblationAtRung(variant);  // a ladder's rungs never compete with each other
}

const char* VerdictName(Verdict verdict) {
  switch (verdict) {
    case Verdict::kKeep:
      return "keep";
    case Verdict::kPrune:
      return "prune";
    case Verdict::kNoData:
      return "nodata";
    case Verdict::kWait:
      return "wait";
    case Verdict::kIgnored:
      return "ignored";
  }
  return "?";
}

double AshaJudge::Worst() const {
  return rule_.maximize ? -std::numeric_limits<double>::infinity()
                        : std::numeric_limits<double>::infinity();
}

AshaJudge::PointState& AshaJudge::Point(const std::string& point, const std::string& group) {
  auto [it, fresh] = points_.try_emplace(point);
  if (fresh) {
    it->second.group = group;
  }
  return it->second;
}

void AshaJudge::AddPoint(const std::string& point, const std::string& group) {
  Point(point, group);
}

bool AshaJudge::Full(const std::string& group, int rung) const {
  if (rule_.bootstrap == 0) {
    return true;  // the finite rule judges at once: it prunes only what no arrival can save
  }
  auto it = rungs_.find({group, rung});
  const size_t recorded = it == rungs_.end() ? 0 : it->second.recorded.size();
  if (recorded >= static_cast<size_t>(std::max<int64_t>(1, rule_.bootstrap))) {
    return true;
  }
  // Or no other point of the group can still bring a value to the rung.
  for (const auto& [name, point] : points_) {
    if (point.group == group && !point.pruned && !point.closed &&
        (point.next_rung < rung || (point.next_rung == rung && !point.waiting))) {
      return false;
    }
  }
  return true;
}

Decision AshaJudge::DecisionAt(const RungValue& value, Verdict verdict) const {
  Decision d;
  d.verdict = verdict;
  d.point = value.point;
  d.group = value.group;
  d.rung = value.rung;
  d.step = RungStep(rule_, value.rung);
  d.value = value.value;
  d.seeds = value.seeds;
  return d;
}

Decision AshaJudge::Rank(PointState& point, const RungValue& value) {
  Decision d = DecisionAt(value, Verdict::kKeep);
  const std::vector<double>& recorded = rungs_[{value.group, value.rung}].recorded;
  int better = 0;
  for (double other : recorded) {
    if (rule_.maximize ? other > value.value : other < value.value) {
      ++better;
    }
  }
  d.competitors = static_cast<int>(recorded.size());
  if (rule_.bootstrap == 0) {
    // The finite rule: the rung keeps the best max(1, n_k / eta) of the n_k points that reach it
    // when every kept point does, n_0 being the group's grid points; a point is pruned once that
    // many values better than its own are recorded, which no later arrival can undo.
    int population = 0;
    for (const auto& [name, other] : points_) {
      population += other.group == value.group ? 1 : 0;
    }
    int keeps = std::max(1, population / static_cast<int>(rule_.reduction));
    for (int k = 0; k < value.rung; ++k) {
      keeps = std::max(1, keeps / static_cast<int>(rule_.reduction));
    }
    d.keeps = keeps;
  } else {
    d.keeps = std::max<int>(1, d.competitors / static_cast<int>(rule_.reduction));
  }
  d.rank = better + 1;
  const bool worst = !value.worst.empty();
  d.verdict = !worst && d.rank <= d.keeps ? Verdict::kKeep : Verdict::kPrune;
  point.waiting = false;
  point.pruned = d.verdict == Verdict::kPrune;
  point.next_rung = value.rung + 1;
  const std::string shown = worst ? value.worst : absl::StrFormat("%.4g", value.value);
  d.reason = absl::StrCat(RungText(d.rung, d.step), ": ", rule_.metric, " ", shown, ", ",
                          Ordinal(d.rank), " of ", d.competitors, ", keeps best ", d.keeps);
  return d;
}

std::vector<Decision> AshaJudge::Fire(const std::string& group, int rung) {
  std::vector<Decision> out;
  auto it = rungs_.find({group, rung});
  if (it == rungs_.end()) {
    return out;
  }
  std::vector<std::string> waiting = std::move(it->second.waiting);
  it->second.waiting.clear();
  for (const std::string& name : waiting) {
    PointState& point = points_.at(name);
    out.push_back(Rank(point, point.value));
  }
  return out;
}

std::vector<Decision> AshaJudge::FireReady(const std::string& group) {
  std::vector<Decision> out;
  // A rung judged (its points pruned) can let a higher one of the group fire: until none does.
  for (bool fired = true; fired;) {
    fired = false;
    for (auto& [key, rung] : rungs_) {
      if (key.first == group && !rung.waiting.empty() && Full(group, key.second)) {
        for (Decision& d : Fire(group, key.second)) {
          out.push_back(std::move(d));
        }
        fired = true;
        break;
      }
    }
  }
  return out;
}

std::vector<Decision> AshaJudge::Judge(const RungValue& given, bool fire) {
  PointState& point = Point(given.point, given.group);
  if (point.pruned || point.closed || point.waiting || given.rung != point.next_rung) {
    Decision d = DecisionAt(given, Verdict::kIgnored);
    d.reason = point.pruned    ? absl::StrCat("already pruned at rung ", point.next_rung - 1)
               : point.closed  ? "already closed without data"
               : point.waiting ? absl::StrCat("waits at rung ", point.next_rung)
                               : absl::StrCat("rung ", given.rung, " is not the point's next (",
                                              point.next_rung, ")");
    return {d};
  }
  RungValue value = given;
  if (!value.worst.empty() || !std::isfinite(value.value)) {
    if (value.worst.empty()) {
      value.worst = absl::StrFormat("%g", value.value);
    }
    value.value = Worst();
  }
  RungState& rung = rungs_[{value.group, value.rung}];
  rung.recorded.push_back(value.value);
  point.waiting = true;
  point.value = value;
  // A worst value never waits: whatever the others bring, it is pruned.
  if (!fire && value.worst.empty() && !Full(value.group, value.rung)) {
    rung.waiting.push_back(value.point);
    Decision d = DecisionAt(value, Verdict::kWait);
    d.competitors = static_cast<int>(rung.recorded.size());
    d.reason = absl::StrCat(
        RungText(d.rung, d.step), ": ", rule_.metric, " ",
        value.worst.empty() ? absl::StrFormat("%.4g", value.value) : value.worst, ", waits for ",
        rule_.bootstrap, " points at the rung (", d.competitors, " so far)");
    return {d};
  }
  std::vector<Decision> out = {Rank(point, value)};
  for (Decision& d : Fire(value.group, value.rung)) {
    out.push_back(std::move(d));
  }
  for (Decision& d : FireReady(value.group)) {
    out.push_back(std::move(d));
  }
  return out;
}

std::vector<Decision> AshaJudge::NoData(const std::string& point_name, const std::string& group,
                                        int rung) {
  PointState& point = Point(point_name, group);
  Decision d;
  d.verdict = Verdict::kNoData;
  d.point = point_name;
  d.group = group;
  d.rung = rung;
  d.step = RungStep(rule_, rung);
  d.value = kNaN;
  d.seeds = 0;
  d.reason = absl::StrCat(RungText(rung, d.step), ": no run of the point reported ", rule_.metric,
                          " at or after step ", d.step, "; not judged");
  point.closed = true;
  std::vector<Decision> out = {d};
  for (Decision& fired : FireReady(group)) {
    out.push_back(std::move(fired));
  }
  return out;
}

std::vector<Decision> AshaJudge::Close(const std::string& point_name) {
  auto it = points_.find(point_name);
  if (it == points_.end() || it->second.closed || it->second.waiting || it->second.pruned) {
    return {};
  }
  it->second.closed = true;
  return FireReady(it->second.group);
}

int AshaJudge::NextRung(const std::string& point) const {
  auto it = points_.find(point);
  return it == points_.end() ? 0 : it->second.next_rung;
}

bool AshaJudge::Pruned(const std::string& point) const {
  auto it = points_.find(point);
  return it != points_.end() && it->second.pruned;
}

bool AshaJudge::Waiting(const std::string& point) const {
  auto it = points_.find(point);
  return it != points_.end() && it->second.waiting;
}

std::vector<double> AshaJudge::Recorded(const std::string& group, int rung) const {
  auto it = rungs_.find({group, rung});
  return it == rungs_.end() ? std::vector<double>() : it->second.recorded;
}

GridSearch::GridSearch(AshaRule rule, spec::SearchWithin within, std::vector<SearchRun> runs)
    : judge_(std::move(rule)) {
  for (SearchRun& run : runs) {
    Point& point = points_[run.variant];
    point.group = GroupOf(within, run.variant);
    point.runs.push_back(run.run_id);
    judge_.AddPoint(run.variant, point.group);
    runs_[run.run_id].steps = run.steps;
    runs_[run.run_id].point = std::move(run.variant);
  }
}

std::vector<int64_t> GridSearch::Runs(const std::string& point) const {
  auto it = points_.find(point);
  return it == points_.end() ? std::vector<int64_t>() : it->second.runs;
}

std::vector<Decision> GridSearch::Observe(int64_t run_id, std::string_view metric, int64_t step,
                                          double value) {
  auto it = runs_.find(run_id);
  if (it == runs_.end() || metric != judge_.rule().metric) {
    return {};
  }
  Run& run = it->second;
  const Point& point = points_.at(run.point);
  if (point.closed || judge_.Pruned(run.point) || run.diverged_step.has_value()) {
    return {};
  }
  if (!std::isfinite(value)) {
    // Every rung it has no value for yet is its worst, known now.
    run.diverged_step = step;
    run.diverged_value = value;
    return Advance(run.point);
  }
  bool filled = false;
  for (int k = 0;; ++k) {
    const int64_t rung_step = RungStep(judge_.rule(), k);
    if (rung_step > step || (run.steps > 0 && (rung_step >= run.steps || step >= run.steps))) {
      // Not reached yet; or at or past the run's train.steps, or reported at its last step: a
      // run that trained to its end is not judged there.
      break;
    }
    filled |= run.values.emplace(k, value).second;
    if (rung_step == std::numeric_limits<int64_t>::max()) {
      break;
    }
  }
  return filled ? Advance(run.point) : std::vector<Decision>();
}

std::vector<Decision> GridSearch::Ended(int64_t run_id, int64_t last_step, bool failed) {
  auto it = runs_.find(run_id);
  if (it == runs_.end() || it->second.ended) {
    return {};
  }
  it->second.ended = true;
  it->second.failed = failed;
  it->second.last_step = last_step;
  return Advance(it->second.point);
}

std::optional<RungValue> GridSearch::NextValue(const std::string& point_name, bool* no_data,
                                               bool* beyond) {
  *no_data = false;
  *beyond = false;
  const Point& point = points_.at(point_name);
  const int rung = judge_.NextRung(point_name);
  const int64_t rung_step = RungStep(judge_.rule(), rung);
  double sum = 0;
  int seeds = 0;
  bool reached = false;
  bool pending = false;
  int within = 0;  // runs for which the rung is before their train.steps
  for (int64_t run_id : point.runs) {
    const Run& run = runs_.at(run_id);
    if (run.steps > 0 && rung_step >= run.steps) {
      continue;  // a rung at or past train.steps is not a rung: the run trains to its end
    }
    ++within;
    if (auto value = run.values.find(rung); value != run.values.end()) {
      sum += value->second;
      ++seeds;
    } else if (run.diverged_step.has_value()) {
      // One diverged seed decides the point: no need to wait for the others.
      return RungValue{point_name,
                       point.group,
                       rung,
                       0,
                       1,
                       absl::StrFormat("diverged at step %d (r%d: %g)", *run.diverged_step, run_id,
                                       run.diverged_value)};
    } else if (!run.ended && !run.diverged_step.has_value()) {
      pending = true;  // this run may still report the rung
    } else if (run.steps > 0 && run.last_step >= run.steps) {
      // Trained to its end with no report between the rung and its end (even one that failed
      // after its last step): no rung there.
      --within;
    } else if (run.failed) {
      return RungValue{
          point_name, point.group,
          rung,       0,
          1,          absl::StrFormat("failed at step %d (r%d)", run.last_step, run_id)};
    } else {
      reached |= run.last_step >= rung_step;
    }
  }
  if (within == 0 && seeds == 0) {
    *beyond = true;  // the point's runs train to their end: it reaches no more rungs
    return std::nullopt;
  }
  if (pending) {
    return std::nullopt;
  }
  if (seeds == 0) {
    *no_data = reached;
    return std::nullopt;
  }
  return RungValue{point_name, point.group, rung, sum / seeds, seeds, ""};
}

std::vector<Decision> GridSearch::AdvanceOne(const std::string& point_name) {
  std::vector<Decision> out;
  Point& point = points_.at(point_name);
  while (!point.closed && !judge_.Pruned(point_name) && !judge_.Waiting(point_name)) {
    bool no_data = false;
    bool beyond = false;
    std::optional<RungValue> value = NextValue(point_name, &no_data, &beyond);
    if (!value.has_value()) {
      if (beyond) {
        point.closed = true;
        const std::vector<Decision> closed = judge_.Close(point_name);
        out.insert(out.end(), closed.begin(), closed.end());
        return out;
      }
      bool ended = true;
      for (int64_t run_id : point.runs) {
        ended = ended && runs_.at(run_id).ended;
      }
      if (!ended) {
        return out;  // a run may still report the rung
      }
      point.closed = true;
      const std::vector<Decision> closed =
          no_data ? judge_.NoData(point_name, point.group, judge_.NextRung(point_name))
                  : judge_.Close(point_name);
      out.insert(out.end(), closed.begin(), closed.end());
      return out;
    }
    for (Decision& d : judge_.Judge(*value)) {
      out.push_back(std::move(d));
    }
  }
  return out;
}

std::vector<Decision> GridSearch::Advance(const std::string& point_name) {
  std::vector<Decision> out;
  std::vector<std::string> work = {point_name};
  // A decision that fills a rung can keep points that waited there: they go on to their next.
  for (size_t i = 0; i < work.size(); ++i) {
    const size_t first = out.size();
    for (Decision& d : AdvanceOne(work[i])) {
      out.push_back(std::move(d));
    }
    for (size_t j = first; j < out.size(); ++j) {
      if (out[j].verdict == Verdict::kKeep && out[j].point != work[i]) {
        work.push_back(out[j].point);
      }
    }
  }
  return out;
}

absl::Status GridSearch::Restore(const std::vector<Decision>& decisions) {
  std::vector<Decision> expected;  // what the last judgement decided beyond its own point
  size_t next_expected = 0;
  for (size_t i = 0; i < decisions.size(); ++i) {
    const Decision& stored = decisions[i];
    auto it = points_.find(stored.point);
    if (it == points_.end()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "stored decision ", i + 1, " is about ", stored.point, ", not a point of the search"));
    }
    Decision now;
    if (next_expected < expected.size()) {
      now = expected[next_expected++];
    } else {
      expected.clear();
      next_expected = 0;
      if (stored.verdict == Verdict::kNoData) {
        expected = judge_.NoData(stored.point, it->second.group, stored.rung);
        it->second.closed = true;
      } else if (judge_.Waiting(stored.point)) {
        // Judged when its rung filled by an event that is not a decision (a point closed).
        expected = judge_.Fire(it->second.group, judge_.NextRung(stored.point));
      } else {
        RungValue value{stored.point, it->second.group, stored.rung,
                        stored.value, stored.seeds,     ""};
        expected = judge_.Judge(value, /*fire=*/stored.verdict != Verdict::kWait);
      }
      if (expected.empty()) {
        return absl::FailedPreconditionError(
            absl::StrCat("stored decision ", i + 1, " (", stored.point, ") decides nothing now"));
      }
      now = expected[next_expected++];
    }
    if (now.verdict != stored.verdict || now.point != stored.point || now.rung != stored.rung) {
      return absl::FailedPreconditionError(
          absl::StrCat("stored decision ", i + 1, " (", stored.point, " rung ", stored.rung, " ",
                       VerdictName(stored.verdict), ": ", stored.reason, ") is now ", now.point,
                       " rung ", now.rung, " ", VerdictName(now.verdict), ": ", now.reason));
    }
  }
  if (next_expected < expected.size()) {
    return absl::FailedPreconditionError(absl::StrCat("the stored decisions end before ",
                                                      expected[next_expected].point,
                                                      "'s, which the rule now makes"));
  }
  return absl::OkStatus();
}

}  // namespace tae::search
