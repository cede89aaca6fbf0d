// The Store's FinalValues: every run's last, min and max of the wanted metrics, and where they
// diverged, for a report.

#include <algorithm>
#include <iterator>
#include <limits>
#include <map>

#include "common/status/macros.h"
#include "server/store/store.h"

namespace tae::store {

absl::StatusOr<std::vector<model::FinalValue>> Store::FinalValues(
    int64_t experiment_id, const std::vector<std::string>& keys) {
  // The wanted keys' ids, in the order asked.
  std::map<int64_t, size_t> wanted;  // key id -> index into keys
  ASSIGN_OR_RETURN(CachedStatement key_id, db_.Cached("SELECT id FROM metric_keys WHERE name = ?"));
  for (size_t i = 0; i < keys.size(); ++i) {
    key_id->Reset();
    key_id->Bind(1, keys[i]);
    ASSIGN_OR_RETURN(bool found, key_id->Step());
    if (found) {
      wanted.try_emplace(key_id->Int(0), i);
    }
  }
  if (wanted.empty()) {
    return std::vector<model::FinalValue>{};
  }
  // The experiment's runs once (the runs_listing index, in id order), then the wanted keys'
  // summaries of them and their divergences: a few statements whatever the number of keys, and
  // never the runs' rows.
  struct Brief {
    std::string variant;
    int64_t seed = 0;
    model::RunState state = model::RunState::kQueued;
    bool confirm = false;
  };
  std::map<int64_t, Brief> runs;
  ASSIGN_OR_RETURN(CachedStatement listing,
                   db_.Cached("SELECT id, variant, seed, state, confirm FROM runs INDEXED BY "
                              "runs_listing WHERE experiment_id = ?"));
  listing->Bind(1, experiment_id);
  while (true) {
    ASSIGN_OR_RETURN(bool more, listing->Step());
    if (!more) {
      break;
    }
    runs.emplace_hint(
        runs.end(), listing->Int(0),
        Brief{listing->Text(1), listing->Int(2),
              model::RunStateFromString(listing->Text(3)).value_or(model::RunState::kQueued),
              listing->Int(4) != 0});
  }
  constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
  std::vector<std::vector<model::FinalValue>> by_key(keys.size());
  auto value_of = [&](int64_t run_id, size_t key) {
    const Brief& run = runs.at(run_id);
    return model::FinalValue{run_id, run.variant, run.seed, run.state,   keys[key],
                             kNaN,   kNaN,        kNaN,     run.confirm, std::nullopt};
  };
  ASSIGN_OR_RETURN(
      CachedStatement summaries,
      db_.Cached("SELECT s.run_id, s.key_id, s.last_value, s.min_value, s.max_value FROM runs r "
                 "INDEXED BY runs_listing JOIN run_summaries s ON s.run_id = r.id WHERE "
                 "r.experiment_id = ? ORDER BY r.id"));
  summaries->Bind(1, experiment_id);
  while (true) {
    ASSIGN_OR_RETURN(bool more, summaries->Step());
    if (!more) {
      break;
    }
    auto key = wanted.find(summaries->Int(1));
    if (key == wanted.end() || runs.count(summaries->Int(0)) == 0) {
      continue;
    }
    model::FinalValue value = value_of(summaries->Int(0), key->second);
    value.value = summaries->IsNull(2) ? kNaN : summaries->Double(2);
    value.min_value = summaries->IsNull(3) ? kNaN : summaries->Double(3);
    value.max_value = summaries->IsNull(4) ? kNaN : summaries->Double(4);
    by_key[key->second].push_back(std::move(value));
  }
  ASSIGN_OR_RETURN(CachedStatement diverged,
                   db_.Cached("SELECT r.id, d.key_id, d.step FROM runs r INDEXED BY runs_listing "
                              "JOIN metric_divergence d ON d.run_id = r.id WHERE r.experiment_id "
                              "= ? ORDER BY r.id"));
  diverged->Bind(1, experiment_id);
  std::vector<size_t> summarised(by_key.size());  // each key's values in run order so far
  for (size_t k = 0; k < by_key.size(); ++k) {
    summarised[k] = by_key[k].size();
  }
  bool unsorted = false;
  while (true) {
    ASSIGN_OR_RETURN(bool more, diverged->Step());
    if (!more) {
      break;
    }
    auto key = wanted.find(diverged->Int(1));
    if (key == wanted.end() || runs.count(diverged->Int(0)) == 0) {
      continue;
    }
    std::vector<model::FinalValue>& values = by_key[key->second];
    const int64_t run_id = diverged->Int(0);
    auto end = values.begin() + static_cast<std::ptrdiff_t>(summarised[key->second]);
    auto known =
        std::lower_bound(values.begin(), end, run_id,
                         [](const model::FinalValue& v, int64_t id) { return v.run_id < id; });
    if (known == end || known->run_id != run_id) {
      // Diverged before a finite point was summarised: no value, only the step.
      values.push_back(value_of(run_id, key->second));
      unsorted = true;
      known = values.end() - 1;
    }
    model::FinalValue& value = *known;
    value.diverged_step = diverged->Int(2);
    value.value = kNaN;  // never the last finite value before it
  }
  std::vector<model::FinalValue> out;
  for (std::vector<model::FinalValue>& values : by_key) {
    if (unsorted) {
      std::stable_sort(values.begin(), values.end(),
                       [](const model::FinalValue& a, const model::FinalValue& b) {
                         return a.run_id < b.run_id;
                       });
    }
    std::move(values.begin(), values.end(), std::back_inserter(out));
  }
  return out;
}

}  // namespace tae::store
