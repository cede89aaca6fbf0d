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
  return AshaRule{plan.metric, plan.maximize(), plan.min_steps, plan.reduction};
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
    return "";
  }
  return std::string(variant.substr(0, variant.find('[')));
}

const char* VerdictName(Verdict verdict) {
  switch (verdict) {
    case Verdict::kKeep:
      return "keep";
    case Verdict::kPrune:
      return "prune";
    case Verdict::kNoData:
      return "nodata";
    case Verdict::kIgnored:
      return "ignored";
  }
  return "?";
}

Decision AshaJudge::Judge(const RungValue& value) {
  PointState& point = points_[value.point];
  Decision d;
  d.point = value.point;
  d.group = value.group;
  d.rung = value.rung;
  d.step = RungStep(rule_, value.rung);
  d.value = value.value;
  d.seeds = value.seeds;
  if (point.pruned || point.closed || value.rung != point.next_rung) {
    d.verdict = Verdict::kIgnored;
    d.reason = point.pruned   ? absl::StrCat("already pruned at rung ", point.next_rung - 1)
               : point.closed ? "already closed without data"
                              : absl::StrCat("rung ", value.rung, " is not the point's next (",
                                             point.next_rung, ")");
    return d;
  }
  ++point.next_rung;
  const std::string head = absl::StrCat(RungText(d.rung, d.step), ": ", rule_.metric, " ",
                                        absl::StrFormat("%.4g", d.value));
  if (std::isnan(value.value)) {
    point.pruned = true;
    d.verdict = Verdict::kPrune;
    d.reason = absl::StrCat(head, ", not a number");
    return d;
  }
  std::vector<double>& recorded = recorded_[{value.group, value.rung}];
  recorded.push_back(value.value);
  int better = 0;
  for (double other : recorded) {
    if (rule_.maximize ? other > value.value : other < value.value) {
      ++better;
    }
  }
  d.competitors = static_cast<int>(recorded.size());
  d.keeps = std::max<int>(1, d.competitors / static_cast<int>(rule_.reduction));
  d.rank = better + 1;
  d.verdict = d.rank <= d.keeps ? Verdict::kKeep : Verdict::kPrune;
  point.pruned = d.verdict == Verdict::kPrune;
  d.reason =
      absl::StrCat(head, ", ", Ordinal(d.rank), " of ", d.competitors, ", keeps best ", d.keeps);
  return d;
}

Decision AshaJudge::NoData(const std::string& point_name, const std::string& group, int rung) {
  PointState& point = points_[point_name];
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
  return d;
}

int AshaJudge::NextRung(const std::string& point) const {
  auto it = points_.find(point);
  return it == points_.end() ? 0 : it->second.next_rung;
}

bool AshaJudge::Pruned(const std::string& point) const {
  auto it = points_.find(point);
  return it != points_.end() && it->second.pruned;
}

std::vector<double> AshaJudge::Recorded(const std::string& group, int rung) const {
  auto it = recorded_.find({group, rung});
  return it == recorded_.end() ? std::vector<double>() : it->second;
}

GridSearch::GridSearch(AshaRule rule, spec::SearchWithin within, std::vector<SearchRun> runs)
    : judge_(std::move(rule)) {
  for (SearchRun& run : runs) {
    Point& point = points_[run.variant];
    point.group = GroupOf(within, run.variant);
    point.runs.push_back(run.run_id);
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
  if (point.closed || judge_.Pruned(run.point)) {
    return {};
  }
  bool filled = false;
  for (int k = 0;; ++k) {
    const int64_t rung_step = RungStep(judge_.rule(), k);
    if (rung_step > step) {
      break;
    }
    filled |= run.values.emplace(k, value).second;
    if (rung_step == std::numeric_limits<int64_t>::max()) {
      break;
    }
  }
  return filled ? Advance(run.point) : std::vector<Decision>();
}

std::vector<Decision> GridSearch::Ended(int64_t run_id, int64_t last_step) {
  auto it = runs_.find(run_id);
  if (it == runs_.end() || it->second.ended) {
    return {};
  }
  it->second.ended = true;
  it->second.last_step = last_step;
  return Advance(it->second.point);
}

std::vector<Decision> GridSearch::Advance(const std::string& point_name) {
  std::vector<Decision> out;
  Point& point = points_.at(point_name);
  while (!point.closed && !judge_.Pruned(point_name)) {
    const int rung = judge_.NextRung(point_name);
    const int64_t rung_step = RungStep(judge_.rule(), rung);
    double sum = 0;
    int seeds = 0;
    bool reached = false;
    for (int64_t run_id : point.runs) {
      const Run& run = runs_.at(run_id);
      if (auto value = run.values.find(rung); value != run.values.end()) {
        sum += value->second;
        ++seeds;
      } else if (!run.ended) {
        return out;  // this run may still report the rung
      } else {
        reached |= run.last_step >= rung_step;
      }
    }
    if (seeds == 0) {
      point.closed = true;
      if (reached) {
        out.push_back(judge_.NoData(point_name, point.group, rung));
      }
      return out;
    }
    out.push_back(judge_.Judge(RungValue{point_name, point.group, rung, sum / seeds, seeds}));
  }
  return out;
}

absl::Status GridSearch::Restore(const std::vector<Decision>& decisions) {
  for (size_t i = 0; i < decisions.size(); ++i) {
    const Decision& stored = decisions[i];
    auto it = points_.find(stored.point);
    if (it == points_.end()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "stored decision ", i + 1, " is about ", stored.point, ", not a point of the search"));
    }
    Decision now;
    if (stored.verdict == Verdict::kNoData) {
      now = judge_.NoData(stored.point, it->second.group, stored.rung);
      it->second.closed = true;
    } else {
      now = judge_.Judge(
          RungValue{stored.point, it->second.group, stored.rung, stored.value, stored.seeds});
    }
    if (now.verdict != stored.verdict) {
      return absl::FailedPreconditionError(absl::StrCat(
          "stored decision ", i + 1, " (", stored.point, " ", VerdictName(stored.verdict), ": ",
          stored.reason, ") is now ", VerdictName(now.verdict), ": ", now.reason));
    }
  }
  return absl::OkStatus();
}

}  // namespace tae::search
