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
  // The experiment's runs once (the runs_listing index, in id order), then each wanted key's
  // summaries of them, then their divergences: never the runs' rows. All come in run id order,
  // so a run is found by walking forward.
  struct Brief {
    int64_t id = 0;
    std::string variant;
    int64_t seed = 0;
    model::RunState state = model::RunState::kQueued;
    bool confirm = false;
  };
  std::vector<Brief> runs;
  ASSIGN_OR_RETURN(CachedStatement listing,
                   db_.Cached("SELECT id, variant, seed, state, confirm FROM runs INDEXED BY "
                              "runs_listing WHERE experiment_id = ? ORDER BY id"));
  listing->Bind(1, experiment_id);
  while (true) {
    ASSIGN_OR_RETURN(bool more, listing->Step());
    if (!more) {
      break;
    }
    runs.push_back(
        Brief{listing->Int(0), listing->Text(1), listing->Int(2),
              model::RunStateFromString(listing->Text(3)).value_or(model::RunState::kQueued),
              listing->Int(4) != 0});
  }
  // The run of `run_id`, or null; `at` is where the last search ended (rows come in id order).
  auto find_run = [&runs](int64_t run_id, size_t* at) -> const Brief* {
    if (*at < runs.size() && runs[*at].id == run_id) {
      return &runs[*at];  // the same run as the row before (one row per key)
    }
    if (*at >= runs.size() || runs[*at].id > run_id) {
      *at = 0;  // out of order: search from the start
    }
    auto it = std::lower_bound(runs.begin() + static_cast<std::ptrdiff_t>(*at), runs.end(), run_id,
                               [](const Brief& b, int64_t id) { return b.id < id; });
    *at = static_cast<size_t>(it - runs.begin());
    return it != runs.end() && it->id == run_id ? &*it : nullptr;
  };
  constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
  std::vector<std::vector<model::FinalValue>> by_key(keys.size());
  for (const auto& [id, index] : wanted) {
    by_key[index].reserve(runs.size());
  }
  auto value_of = [&](const Brief& run, size_t key) {
    return model::FinalValue{run.id, run.variant, run.seed, run.state,   keys[key],
                             kNaN,   kNaN,        kNaN,     run.confirm, std::nullopt};
  };
  // Each wanted key's summaries in run id order, through run_summaries_by_key (migrations 0020,
  // 0023), so only the rows shown are read. A study's runs are mostly one block of ids (a submit is
  // one transaction): one range of the index per key, other studies' runs in it skipped. Runs added
  // much later (adaptive seeds, confirmations) spread the ids; where the range holds over 4 ids
  // per run of the study, its runs are joined with their summaries instead (a row of the range
  // costs ~0.13 us, a run's seek in the join ~0.8 us: 1.1-1.5 ms against 7.8 for 10,000 runs).
  const bool dense =
      !runs.empty() && runs.back().id - runs.front().id < 4 * static_cast<int64_t>(runs.size());
  ASSIGN_OR_RETURN(
      CachedStatement summaries,
      dense ? db_.Cached("SELECT run_id, last_value, min_value, max_value FROM run_summaries "
                         "INDEXED BY run_summaries_by_key WHERE key_id = ?1 AND run_id BETWEEN "
                         "?2 AND ?3")
            : db_.Cached("SELECT s.run_id, s.last_value, s.min_value, s.max_value FROM runs r "
                         "INDEXED BY runs_listing JOIN run_summaries s ON s.run_id = r.id AND "
                         "s.key_id = ?1 WHERE r.experiment_id = ?2 ORDER BY r.id"));
  for (const auto& [key_id, index] : wanted) {
    summaries->Reset();
    summaries->Bind(1, key_id);
    if (dense) {
      summaries->Bind(2, runs.front().id).Bind(3, runs.back().id);
    } else {
      summaries->Bind(2, experiment_id);
    }
    size_t at = 0;
    while (true) {
      ASSIGN_OR_RETURN(bool more, summaries->Step());
      if (!more) {
        break;
      }
      const Brief* run = find_run(summaries->Int(0), &at);
      if (run == nullptr) {
        continue;  // another study's run inside the range
      }
      model::FinalValue& value = by_key[index].emplace_back(value_of(*run, index));
      value.value = summaries->IsNull(1) ? kNaN : summaries->Double(1);
      value.min_value = summaries->IsNull(2) ? kNaN : summaries->Double(2);
      value.max_value = summaries->IsNull(3) ? kNaN : summaries->Double(3);
    }
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
  size_t at = 0;
  while (true) {
    ASSIGN_OR_RETURN(bool more, diverged->Step());
    if (!more) {
      break;
    }
    auto key = wanted.find(diverged->Int(1));
    if (key == wanted.end()) {
      continue;
    }
    const Brief* run = find_run(diverged->Int(0), &at);
    if (run == nullptr) {
      continue;
    }
    std::vector<model::FinalValue>& values = by_key[key->second];
    auto end = values.begin() + static_cast<std::ptrdiff_t>(summarised[key->second]);
    auto known =
        std::lower_bound(values.begin(), end, run->id,
                         [](const model::FinalValue& v, int64_t id) { return v.run_id < id; });
    if (known == end || known->run_id != run->id) {
      // Diverged before a finite point was summarised: no value, only the step.
      values.push_back(value_of(*run, key->second));
      unsorted = true;
      known = values.end() - 1;
    }
    model::FinalValue& value = *known;
    value.diverged_step = diverged->Int(2);
    value.value = kNaN;  // never the last finite value before it
  }
  size_t total = 0;
  for (const std::vector<model::FinalValue>& values : by_key) {
    total += values.size();
  }
  std::vector<model::FinalValue> out;
  out.reserve(total);
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
