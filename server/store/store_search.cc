// Store: what an experiment's [search] decided (migration 0012).

#include <cmath>

#include "absl/strings/str_cat.h"
#include "common/status/macros.h"
#include "server/store/store.h"

namespace tae::store {

absl::Status Store::RecordSearch(int64_t experiment_id,
                                 const std::vector<model::SearchDecisionRecord>& decisions,
                                 const std::vector<std::pair<int64_t, model::Decide>>& prune) {
  Transaction tx(&db_);
  RETURN_IF_ERROR(tx.begin_status());
  ASSIGN_OR_RETURN(
      Statement insert,
      db_.Prepare("INSERT INTO search_decisions (experiment_id, point, grp, rung, step, value, "
                  "seeds, verdict, rank, competitors, keeps, reason, at) VALUES "
                  "(?,?,?,?,?,?,?,?,?,?,?,?,?)"));
  for (const model::SearchDecisionRecord& d : decisions) {
    insert.Reset();
    insert.Bind(1, experiment_id)
        .Bind(2, d.point)
        .Bind(3, d.group)
        .Bind(4, static_cast<int64_t>(d.rung))
        .Bind(5, d.step)
        .Bind(7, static_cast<int64_t>(d.seeds))
        .Bind(8, d.verdict)
        .Bind(9, static_cast<int64_t>(d.rank))
        .Bind(10, static_cast<int64_t>(d.competitors))
        .Bind(11, static_cast<int64_t>(d.keeps))
        .Bind(12, d.reason)
        .Bind(13, d.at);
    if (d.value.has_value() && !std::isnan(*d.value)) {  // +-inf: a worst value
      insert.Bind(6, *d.value);
    } else {
      insert.BindNull(6);
    }
    RETURN_IF_ERROR(insert.Run());
  }
  for (const auto& [run_id, decide] : prune) {
    ASSIGN_OR_RETURN(model::RunRecord run, GetRun(run_id));
    if (run.experiment_id != experiment_id) {
      return absl::InvalidArgumentError(
          absl::StrCat("r", run_id, " is not a run of e", experiment_id));
    }
    ASSIGN_OR_RETURN(std::optional<model::RunTransition> end, decide(run));
    if (end) {
      RETURN_IF_ERROR(Apply(*end));
    }
  }
  return tx.Commit();
}

absl::StatusOr<std::vector<int64_t>> Store::SearchedExperiments() {
  return db_.QueryInts(
      "SELECT e.id FROM experiments e WHERE json_valid(e.report) AND "
      "json_extract(e.report, '$.search.method') = 'asha' AND EXISTS (SELECT 1 FROM runs r WHERE "
      "r.experiment_id = e.id AND r.state IN ('queued', 'assigned', 'running', 'lost')) ORDER BY "
      "e.id");
}

absl::StatusOr<std::vector<model::SearchDecisionRecord>> Store::SearchDecisions(
    int64_t experiment_id) {
  ASSIGN_OR_RETURN(Statement stmt,
                   db_.Prepare("SELECT point, grp, rung, step, value, seeds, verdict, rank, "
                               "competitors, keeps, reason, at FROM search_decisions WHERE "
                               "experiment_id = ? ORDER BY id"));
  stmt.Bind(1, experiment_id);
  std::vector<model::SearchDecisionRecord> out;
  while (true) {
    ASSIGN_OR_RETURN(bool more, stmt.Step());
    if (!more) {
      return out;
    }
    model::SearchDecisionRecord d;
    d.point = stmt.Text(0);
    d.group = stmt.Text(1);
    d.rung = static_cast<int>(stmt.Int(2));
    d.step = stmt.Int(3);
    if (!stmt.IsNull(4)) {
      d.value = stmt.Double(4);
    }
    d.seeds = static_cast<int>(stmt.Int(5));
    d.verdict = stmt.Text(6);
    d.rank = static_cast<int>(stmt.Int(7));
    d.competitors = static_cast<int>(stmt.Int(8));
    d.keeps = static_cast<int>(stmt.Int(9));
    d.reason = stmt.Text(10);
    d.at = stmt.Double(11);
    out.push_back(std::move(d));
  }
}

absl::StatusOr<std::vector<model::RunPoint>> Store::MetricPoints(int64_t experiment_id,
                                                                 const std::string& metric) {
  ASSIGN_OR_RETURN(
      Statement stmt,
      db_.Prepare("SELECT m.run_id, m.step, m.value, NULL FROM runs r JOIN metrics m ON "
                  "m.run_id = r.id AND m.key_id = (SELECT id FROM metric_keys WHERE name = ?1) "
                  "WHERE r.experiment_id = ?2 UNION ALL SELECT d.run_id, d.step, NULL, d.value "
                  "FROM runs r JOIN metric_divergence d ON d.run_id = r.id AND d.key_id = "
                  "(SELECT id FROM metric_keys WHERE name = ?1) WHERE r.experiment_id = ?2 "
                  "ORDER BY 1, 2"));
  stmt.Bind(1, metric).Bind(2, experiment_id);
  std::vector<model::RunPoint> out;
  while (true) {
    ASSIGN_OR_RETURN(bool more, stmt.Step());
    if (!more) {
      return out;
    }
    out.push_back({stmt.Int(0), stmt.Int(1),
                   stmt.IsNull(3) ? stmt.Double(2) : model::NonFiniteFromText(stmt.Text(3))});
  }
}

}  // namespace tae::store
