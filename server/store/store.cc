#include "server/store/store.h"

#include <algorithm>
#include <map>
#include <set>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/status/macros.h"
#include "nlohmann/json.hpp"
#include "server/store/rows.h"

namespace tae::store {
namespace {

using rows::kRunColumns;
using rows::LabelsToJson;
using rows::ReadRun;

}  // namespace

absl::StatusOr<std::unique_ptr<Store>> Store::Open(const std::string& path,
                                                   const std::vector<Migration>& migrations) {
  ASSIGN_OR_RETURN(Db db, Db::Open(path));
  RETURN_IF_ERROR(db.Exec("PRAGMA journal_mode = WAL"));
  RETURN_IF_ERROR(db.Exec("PRAGMA synchronous = NORMAL"));
  RETURN_IF_ERROR(db.Exec("PRAGMA foreign_keys = ON"));
  RETURN_IF_ERROR(Migrate(&db, migrations));
  // Column files beside a database on disk (not ":memory:", not a URI).
  std::string columns_dir;
  if (path != ":memory:" && !path.empty() && path.rfind("file:", 0) != 0) {
    columns_dir = path + ".columns";
  }
  return std::unique_ptr<Store>(new Store(std::move(db), std::move(columns_dir)));
}

absl::Status Store::MarkSeed() {
  RETURN_IF_ERROR(db_.Exec("ATTACH DATABASE ':memory:' AS seed"));
  ASSIGN_OR_RETURN(Statement tables,
                   db_.Prepare("SELECT name FROM main.sqlite_master WHERE type = 'table' AND "
                               "name NOT LIKE 'sqlite_%' ORDER BY name"));
  std::vector<std::string> names;
  while (true) {
    ASSIGN_OR_RETURN(bool row, tables.Step());
    if (!row) {
      break;
    }
    names.push_back(tables.Text(0));
  }
  // Parents before children (foreign keys), so that the tables go back without deferring the
  // checks: a PRAGMA that did would expire every prepared statement of the connection.
  std::map<std::string, std::set<std::string>> parents;
  for (const std::string& name : names) {
    ASSIGN_OR_RETURN(Statement fks,
                     db_.Prepare("SELECT DISTINCT \"table\" FROM pragma_foreign_key_list(?)"));
    fks.Bind(1, name);
    while (true) {
      ASSIGN_OR_RETURN(bool row, fks.Step());
      if (!row) {
        break;
      }
      if (fks.Text(0) != name) {
        parents[name].insert(fks.Text(0));
      }
    }
  }
  std::vector<std::string> order;
  std::set<std::string> placed;
  while (order.size() < names.size()) {
    const size_t before = order.size();
    for (const std::string& name : names) {
      const std::set<std::string>& of = parents[name];
      if (placed.count(name) == 0 && std::all_of(of.begin(), of.end(), [&](const std::string& p) {
            return placed.count(p) > 0 || std::find(names.begin(), names.end(), p) == names.end();
          })) {
        order.push_back(name);
        placed.insert(name);
      }
    }
    if (order.size() == before) {
      return absl::InternalError("MarkSeed: the tables' foreign keys form a cycle");
    }
  }
  seed_sql_.clear();
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    seed_sql_.push_back(absl::StrCat("DELETE FROM main.\"", *it, "\""));
  }
  for (const std::string& name : order) {
    RETURN_IF_ERROR(db_.Exec(
        absl::StrCat("CREATE TABLE seed.\"", name, "\" AS SELECT * FROM main.\"", name, "\"")));
    seed_sql_.push_back(
        absl::StrCat("INSERT INTO main.\"", name, "\" SELECT * FROM seed.\"", name, "\""));
  }
  seed_changes_ = db_.total_changes();
  return absl::OkStatus();
}

absl::Status Store::ResetToSeed() {
  metric_key_ids_.clear();
  packs_due_.clear();
  AbandonColumnBuild();
  columns_due_.clear();
  queue_changes_.all = true;
  if (db_.total_changes() == seed_changes_) {
    return absl::OkStatus();
  }
  Transaction tx(&db_);
  RETURN_IF_ERROR(tx.begin_status());
  for (const std::string& sql : seed_sql_) {
    ASSIGN_OR_RETURN(CachedStatement stmt, db_.Cached(sql.c_str()));
    RETURN_IF_ERROR(stmt->Run());
  }
  RETURN_IF_ERROR(tx.Commit());
  seed_changes_ = db_.total_changes();
  return absl::OkStatus();
}

absl::Status Store::RecordTransition(int64_t run_id, int attempt, model::RunState from,
                                     model::RunState to, const std::string& reason, double now) {
  ASSIGN_OR_RETURN(Statement stmt,
                   db_.Prepare("INSERT INTO run_transitions (run_id, attempt, "
                               "from_state, to_state, reason, at) VALUES (?,?,?,?,?,?)"));
  stmt.Bind(1, run_id)
      .Bind(2, static_cast<int64_t>(attempt))
      .Bind(3, ToString(from))
      .Bind(4, ToString(to))
      .Bind(5, reason)
      .Bind(6, now);
  return stmt.Run();
}

namespace {

// ", column = ?" for a field the transition sets or clears; its bind follows in BindField.
template <typename T>
void AddColumn(const model::RunField<T>& field, const char* column, std::string* sql) {
  if (field.op != model::RunField<T>::Op::kKeep) {
    absl::StrAppend(sql, ", ", column, " = ?");
  }
}

template <typename T>
void BindField(const model::RunField<T>& field, Statement* stmt, int* index) {
  if (field.op == model::RunField<T>::Op::kKeep) {
    return;
  }
  if (field.op == model::RunField<T>::Op::kNull) {
    stmt->BindNull((*index)++);
  } else {
    stmt->Bind((*index)++, field.value);
  }
}

}  // namespace

absl::Status Store::Apply(const model::RunTransition& t) {
  std::string sql = "UPDATE runs SET state = ?";
  AddColumn(t.reason, "reason", &sql);
  AddColumn(t.attempt_column, "attempt", &sql);
  AddColumn(t.max_attempts, "max_attempts", &sql);
  AddColumn(t.agent_id, "agent_id", &sql);
  AddColumn(t.pid, "pid", &sql);
  AddColumn(t.exit_code, "exit_code", &sql);
  AddColumn(t.started_at, "started_at", &sql);
  AddColumn(t.finished_at, "finished_at", &sql);
  AddColumn(t.not_before, "not_before", &sql);
  AddColumn(t.infra_faults, "infra_faults", &sql);
  AddColumn(t.start_fault, "start_fault", &sql);
  AddColumn(t.start_faults, "start_faults", &sql);
  AddColumn(t.gang_failure, "gang_failure", &sql);
  AddColumn(t.gang_failure_code, "gang_failure_code", &sql);
  AddColumn(t.gang_failure_at, "gang_failure_at", &sql);
  sql += " WHERE id = ?";
  ASSIGN_OR_RETURN(Statement stmt, db_.Prepare(sql));
  int index = 1;
  stmt.Bind(index++, ToString(t.state));
  BindField(t.reason, &stmt, &index);
  BindField(t.attempt_column, &stmt, &index);
  BindField(t.max_attempts, &stmt, &index);
  BindField(t.agent_id, &stmt, &index);
  BindField(t.pid, &stmt, &index);
  BindField(t.exit_code, &stmt, &index);
  BindField(t.started_at, &stmt, &index);
  BindField(t.finished_at, &stmt, &index);
  BindField(t.not_before, &stmt, &index);
  BindField(t.infra_faults, &stmt, &index);
  BindField(t.start_fault, &stmt, &index);
  BindField(t.start_faults, &stmt, &index);
  BindField(t.gang_failure, &stmt, &index);
  BindField(t.gang_failure_code, &stmt, &index);
  BindField(t.gang_failure_at, &stmt, &index);
  stmt.Bind(index, t.run_id);
  queue_changes_.runs.insert(t.run_id);
  RETURN_IF_ERROR(stmt.Run());
  if (model::IsFinal(t.state)) {
    packs_due_.push_back(t.run_id);  // packed by PackSome, after this transaction
  } else if (t.state == model::RunState::kQueued) {
    RETURN_IF_ERROR(DropPacks(t.run_id));  // its next attempt's points will replace these
    RETURN_IF_ERROR(DropColumnsOfRun(t.run_id, -1));
  }
  for (const model::RunTransition::Row& row : t.rows) {
    RETURN_IF_ERROR(RecordTransition(t.run_id, t.attempt, row.from, row.to, row.reason, t.at));
  }
  if (t.hosts.empty()) {
    return absl::OkStatus();
  }
  ASSIGN_OR_RETURN(Statement rank, db_.Prepare("INSERT INTO run_hosts (run_id, attempt, rank, "
                                               "agent_id) VALUES (?,?,?,?)"));
  for (size_t i = 0; i < t.hosts.size(); ++i) {
    rank.Bind(1, t.run_id)
        .Bind(2, static_cast<int64_t>(t.attempt))
        .Bind(3, static_cast<int64_t>(i))
        .Bind(4, t.hosts[i]);
    RETURN_IF_ERROR(rank.Run());
    rank.Reset();
  }
  return absl::OkStatus();
}

absl::StatusOr<int64_t> Store::CreateExperiment(const model::NewExperiment& experiment,
                                                double now) {
  Transaction tx(&db_);
  RETURN_IF_ERROR(tx.begin_status());
  ASSIGN_OR_RETURN(Statement exp, db_.Prepare("INSERT INTO experiments (name, description, "
                                              "spec_hash, spec_path, spec_text, overrides, "
                                              "created_at, report) VALUES (?,?,?,?,?,?,?,?)"));
  exp.Bind(1, experiment.name)
      .Bind(2, experiment.description)
      .Bind(3, experiment.spec_hash)
      .Bind(4, experiment.spec_path)
      .Bind(5, experiment.spec_text)
      .Bind(6, experiment.overrides_json)
      .Bind(7, now)
      .Bind(8, rows::ReportToJson(experiment.report));
  RETURN_IF_ERROR(exp.Run());
  int64_t experiment_id = db_.LastInsertId();
  RETURN_IF_ERROR(InsertRuns(experiment_id, experiment.runs, now));
  RETURN_IF_ERROR(tx.Commit());
  return experiment_id;
}

absl::Status Store::InsertRuns(int64_t experiment_id, const std::vector<model::NewRun>& runs,
                               double now) {
  RETURN_IF_ERROR(DropColumns(experiment_id, -1));  // a column holds every run of its experiment
  ASSIGN_OR_RETURN(Statement run,
                   db_.Prepare("INSERT INTO runs (experiment_id, variant, seed, "
                               "config, state, max_attempts, priority, slots, "
                               "labels, created_at, max_concurrent, hosts, "
                               "snapshot_id, command, attempts_granted, "
                               "keep_checkpoints, retry_on, confirm, max_disk, not_before) "
                               "VALUES (?,?,?,?,'queued',?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)"));
  ASSIGN_OR_RETURN(Statement transition,
                   db_.Prepare("INSERT INTO run_transitions (run_id, attempt, from_state, "
                               "to_state, reason, at) VALUES (?, 0, '', 'queued', ?, ?)"));
  for (const model::NewRun& new_run : runs) {
    const model::RunResources& r = new_run.resources;
    run.Bind(1, experiment_id)
        .Bind(2, new_run.variant)
        .Bind(3, new_run.seed)
        .Bind(4, new_run.config_json)
        .Bind(5, static_cast<int64_t>(r.max_attempts))
        .Bind(6, static_cast<int64_t>(r.priority))
        .Bind(7, static_cast<int64_t>(r.slots))
        .Bind(8, LabelsToJson(r.labels))
        .Bind(9, now)
        .Bind(10, static_cast<int64_t>(r.max_concurrent))
        .Bind(11, static_cast<int64_t>(r.hosts))
        .Bind(13, r.command)
        .Bind(14, static_cast<int64_t>(r.max_attempts))
        .Bind(15, static_cast<int64_t>(r.keep_checkpoints))
        .Bind(16, r.retry_on)
        .Bind(17, static_cast<int64_t>(new_run.confirm ? 1 : 0))
        .Bind(18, r.max_disk)
        .Bind(19, new_run.not_before);
    if (r.snapshot_id.empty()) {
      run.BindNull(12);
    } else {
      run.Bind(12, r.snapshot_id);
    }
    RETURN_IF_ERROR(run.Run());
    queue_changes_.runs.insert(db_.LastInsertId());
    transition.Bind(1, db_.LastInsertId()).Bind(2, new_run.reason).Bind(3, now);
    RETURN_IF_ERROR(transition.Run());
  }
  return absl::OkStatus();
}

absl::Status Store::AddRuns(int64_t experiment_id, const std::vector<model::NewRun>& runs,
                            double now) {
  Transaction tx(&db_);
  RETURN_IF_ERROR(tx.begin_status());
  ASSIGN_OR_RETURN(Statement taken,
                   db_.Prepare("SELECT id FROM runs WHERE experiment_id = ? AND variant = ? AND "
                               "seed = ?"));
  for (const model::NewRun& run : runs) {
    taken.Reset();
    taken.Bind(1, experiment_id).Bind(2, run.variant).Bind(3, run.seed);
    ASSIGN_OR_RETURN(bool exists, taken.Step());
    if (exists) {
      return absl::AlreadyExistsError(absl::StrCat("e", experiment_id, " already has ", run.variant,
                                                   " at seed ", run.seed, " (r", taken.Int(0),
                                                   ")"));
    }
  }
  RETURN_IF_ERROR(InsertRuns(experiment_id, runs, now));
  return tx.Commit();
}

absl::StatusOr<model::ExperimentSource> Store::GetExperimentSource(int64_t experiment_id) {
  ASSIGN_OR_RETURN(Statement stmt,
                   db_.Prepare("SELECT spec_text, spec_path, overrides, report FROM experiments "
                               "WHERE id = ?"));
  stmt.Bind(1, experiment_id);
  ASSIGN_OR_RETURN(bool row, stmt.Step());
  if (!row) {
    return absl::NotFoundError(absl::StrCat("no experiment e", experiment_id));
  }
  model::ExperimentSource source;
  source.spec_text = stmt.Text(0);
  source.spec_path = stmt.Text(1);
  const nlohmann::json overrides = nlohmann::json::parse(stmt.Text(2), nullptr, false);
  if (overrides.is_array()) {
    for (const nlohmann::json& o : overrides) {
      if (o.is_string()) {
        source.overrides.push_back(o.get<std::string>());
      }
    }
  }
  source.report = rows::ReportFromJson(stmt.Text(3));
  return source;
}

absl::StatusOr<std::vector<int64_t>> Store::AdaptiveExperiments() {
  return db_.QueryInts(
      "SELECT id FROM experiments WHERE json_valid(report) AND "
      "json_extract(report, '$.seeds.min') > 0 ORDER BY id");
}

absl::StatusOr<std::vector<int64_t>> Store::ConfirmingExperiments() {
  return db_.QueryInts(
      "SELECT id FROM experiments WHERE json_valid(report) AND "
      "json_extract(report, '$.search.confirm') > 0 ORDER BY id");
}

absl::StatusOr<std::optional<int64_t>> Store::FindExperimentByHash(const std::string& spec_hash) {
  ASSIGN_OR_RETURN(Statement stmt,
                   db_.Prepare("SELECT id FROM experiments WHERE spec_hash = ? ORDER BY id DESC "
                               "LIMIT 1"));
  stmt.Bind(1, spec_hash);
  ASSIGN_OR_RETURN(bool row, stmt.Step());
  if (!row) {
    return std::optional<int64_t>();
  }
  return std::optional<int64_t>(stmt.Int(0));
}

absl::StatusOr<int64_t> Store::ResolveExperiment(const std::string& ref) {
  std::string digits = ref;
  if (!digits.empty() && (digits[0] == 'e' || digits[0] == 'E')) {
    digits.erase(0, 1);
  }
  int64_t id = 0;
  ASSIGN_OR_RETURN(Statement stmt, db_.Prepare("SELECT id FROM experiments WHERE id = ?1 OR "
                                               "name = ?2 ORDER BY (id = ?1) DESC, id DESC "
                                               "LIMIT 1"));
  if (absl::SimpleAtoi(digits, &id)) {
    stmt.Bind(1, id);
  } else {
    stmt.BindNull(1);
  }
  stmt.Bind(2, ref);
  ASSIGN_OR_RETURN(bool row, stmt.Step());
  if (!row) {
    return absl::NotFoundError(absl::StrCat("no experiment '", ref, "' (see taectl ls)"));
  }
  return stmt.Int(0);
}

absl::StatusOr<std::vector<model::RunRecord>> Store::QueryRuns(const std::string& where,
                                                               int64_t arg) {
  ASSIGN_OR_RETURN(Statement stmt,
                   db_.Prepare(absl::StrCat("SELECT ", kRunColumns, " FROM runs ", where)));
  if (where.find('?') != std::string::npos) {
    stmt.Bind(1, arg);
  }
  std::vector<model::RunRecord> runs;
  while (true) {
    ASSIGN_OR_RETURN(bool more, stmt.Step());
    if (!more) {
      break;
    }
    runs.push_back(ReadRun(stmt));
  }
  return runs;
}

absl::StatusOr<std::vector<model::RunRecord>> Store::ListRuns(int64_t experiment_id) {
  return QueryRuns("WHERE experiment_id = ? ORDER BY id", experiment_id);
}

absl::StatusOr<std::vector<model::RunRecord>> Store::ListRunsBrief(int64_t experiment_id) {
  ASSIGN_OR_RETURN(CachedStatement stmt,
                   db_.Cached("SELECT id, variant, seed, state, attempt, confirm FROM runs "
                              "INDEXED BY runs_listing WHERE experiment_id = ? ORDER BY id"));
  stmt->Bind(1, experiment_id);
  std::vector<model::RunRecord> runs;
  // Sized first: a RunRecord is large, and 10,000 of them grown by doubling cost more than the
  // count (one pass over the same index entries).
  ASSIGN_OR_RETURN(CachedStatement count,
                   db_.Cached("SELECT COUNT(*) FROM runs INDEXED BY runs_listing WHERE "
                              "experiment_id = ?"));
  count->Bind(1, experiment_id);
  ASSIGN_OR_RETURN(bool counted, count->Step());
  runs.reserve(counted ? static_cast<size_t>(count->Int(0)) : 0);
  std::map<std::string, size_t> first;  // variant -> its first run's index
  while (true) {
    ASSIGN_OR_RETURN(bool more, stmt->Step());
    if (!more) {
      break;
    }
    model::RunRecord run;
    run.id = stmt->Int(0);
    run.experiment_id = experiment_id;
    run.variant = stmt->Text(1);
    run.seed = stmt->Int(2);
    run.state = model::RunStateFromString(stmt->Text(3)).value_or(model::RunState::kFailed);
    run.attempt = static_cast<int>(stmt->Int(4));
    run.confirm = stmt->Int(5) != 0;
    first.try_emplace(run.variant, runs.size());
    runs.push_back(std::move(run));
  }
  ASSIGN_OR_RETURN(CachedStatement config, db_.Cached("SELECT config FROM runs WHERE id = ?"));
  for (const auto& [variant, index] : first) {
    config->Reset();
    config->Bind(1, runs[index].id);
    ASSIGN_OR_RETURN(bool found, config->Step());
    if (found) {
      runs[index].config_json = config->Text(0);
    }
  }
  return runs;
}

absl::StatusOr<model::RunRecord> Store::GetRun(int64_t run_id) {
  ASSIGN_OR_RETURN(std::vector<model::RunRecord> runs, QueryRuns("WHERE id = ?", run_id));
  if (runs.empty()) {
    return absl::NotFoundError(absl::StrCat("no run r", run_id));
  }
  return std::move(runs.front());
}

absl::StatusOr<model::RunRecord> Store::Transition(int64_t run_id, const model::Decide& decide) {
  Transaction tx(&db_);
  RETURN_IF_ERROR(tx.begin_status());
  ASSIGN_OR_RETURN(model::RunRecord run, GetRun(run_id));
  ASSIGN_OR_RETURN(std::optional<model::RunTransition> transition, decide(run));
  if (!transition) {
    return run;
  }
  RETURN_IF_ERROR(Apply(*transition));
  RETURN_IF_ERROR(tx.Commit());
  return GetRun(run_id);
}

absl::StatusOr<int> Store::TransitionAll(int64_t experiment_id, const model::Decide& decide) {
  Transaction tx(&db_);
  RETURN_IF_ERROR(tx.begin_status());
  ASSIGN_OR_RETURN(std::vector<model::RunRecord> runs, ListRuns(experiment_id));
  int changed = 0;
  for (const model::RunRecord& run : runs) {
    ASSIGN_OR_RETURN(std::optional<model::RunTransition> transition, decide(run));
    if (!transition) {
      continue;
    }
    RETURN_IF_ERROR(Apply(*transition));
    ++changed;
  }
  RETURN_IF_ERROR(tx.Commit());
  return changed;
}

absl::StatusOr<std::vector<std::string>> Store::Gang(int64_t run_id, int attempt) {
  ASSIGN_OR_RETURN(Statement stmt, db_.Prepare("SELECT agent_id FROM run_hosts WHERE run_id = ? "
                                               "AND attempt = ? ORDER BY rank"));
  stmt.Bind(1, run_id).Bind(2, static_cast<int64_t>(attempt));
  std::vector<std::string> agents;
  while (true) {
    ASSIGN_OR_RETURN(bool more, stmt.Step());
    if (!more) {
      break;
    }
    agents.push_back(stmt.Text(0));
  }
  return agents;
}

absl::StatusOr<std::vector<std::string>> Store::AgentsOf(const model::RunRecord& run) {
  if (run.hosts <= 1 || run.attempt == 0) {
    return run.agent_id.empty() ? std::vector<std::string>{}
                                : std::vector<std::string>{run.agent_id};
  }
  return Gang(run.id, run.attempt);
}

absl::Status Store::UpsertAgent(const model::AgentRecord& agent) {
  ASSIGN_OR_RETURN(Statement stmt,
                   db_.Prepare("INSERT INTO agents (id, host, slots, labels, version, state, "
                               "first_seen, last_seen) VALUES (?,?,?,?,?,?,?,?) ON CONFLICT(id) "
                               "DO UPDATE SET host = excluded.host, slots = excluded.slots, "
                               "labels = excluded.labels, version = excluded.version, "
                               "state = excluded.state, last_seen = excluded.last_seen"));
  stmt.Bind(1, agent.id)
      .Bind(2, agent.host)
      .Bind(3, static_cast<int64_t>(agent.slots))
      .Bind(4, LabelsToJson(agent.labels))
      .Bind(5, agent.version)
      .Bind(6, agent.state)
      .Bind(7, agent.first_seen)
      .Bind(8, agent.last_seen);
  return stmt.Run();
}

absl::Status Store::SetAgentState(const std::string& id, const std::string& state, double now) {
  ASSIGN_OR_RETURN(Statement stmt,
                   db_.Prepare("UPDATE agents SET state = ?, last_seen = ? WHERE id = ?"));
  stmt.Bind(1, state).Bind(2, now).Bind(3, id);
  return stmt.Run();
}

absl::Status Store::SetAgentQuarantine(const std::string& id, const std::string& why) {
  ASSIGN_OR_RETURN(Statement stmt, db_.Prepare("UPDATE agents SET quarantine = ? WHERE id = ?"));
  stmt.Bind(1, why).Bind(2, id);
  return stmt.Run();
}

absl::Status Store::SetAgentInfraFaults(const std::string& id, int faults) {
  ASSIGN_OR_RETURN(Statement stmt, db_.Prepare("UPDATE agents SET infra_faults = ? WHERE id = ?"));
  stmt.Bind(1, static_cast<int64_t>(faults)).Bind(2, id);
  return stmt.Run();
}

absl::StatusOr<int> Store::AgentInfraFaults(const std::string& id) {
  ASSIGN_OR_RETURN(Statement stmt, db_.Prepare("SELECT infra_faults FROM agents WHERE id = ?"));
  stmt.Bind(1, id);
  ASSIGN_OR_RETURN(bool row, stmt.Step());
  return row ? static_cast<int>(stmt.Int(0)) : 0;
}

absl::StatusOr<std::map<std::string, std::string>> Store::AgentQuarantines() {
  ASSIGN_OR_RETURN(Statement stmt,
                   db_.Prepare("SELECT id, quarantine FROM agents WHERE quarantine != ''"));
  std::map<std::string, std::string> out;
  while (true) {
    ASSIGN_OR_RETURN(bool row, stmt.Step());
    if (!row) {
      break;
    }
    out[stmt.Text(0)] = stmt.Text(1);
  }
  return out;
}

absl::Status Store::PutCredential(const model::CredentialRecord& credential) {
  ASSIGN_OR_RETURN(
      Statement stmt,
      db_.Prepare(
          "INSERT INTO agent_credentials (agent_id, secret_sha256, how, enrolled_at, placement) "
          "VALUES (?,?,?,?,?) ON CONFLICT(agent_id) DO UPDATE SET secret_sha256 = "
          "excluded.secret_sha256, how = excluded.how, enrolled_at = excluded.enrolled_at, "
          "placement = excluded.placement"));
  stmt.Bind(1, credential.agent_id)
      .Bind(2, credential.secret_sha256)
      .Bind(3, credential.how)
      .Bind(4, credential.enrolled_at);
  if (credential.placement.has_value()) {
    stmt.Bind(5, nlohmann::json(*credential.placement).dump());
  } else {
    stmt.BindNull(5);
  }
  return stmt.Run();
}

absl::Status Store::BindCredentialPlacement(const std::string& agent_id,
                                            const std::map<std::string, std::string>& placement) {
  ASSIGN_OR_RETURN(Statement stmt,
                   db_.Prepare("UPDATE agent_credentials SET placement = ? WHERE agent_id = ? "
                               "AND revoked_at IS NULL"));
  stmt.Bind(1, nlohmann::json(placement).dump()).Bind(2, agent_id);
  return stmt.Run();
}

absl::Status Store::RevokeCredential(const std::string& agent_id, const std::string& reason,
                                     double now) {
  // A revoked id stays revoked even if it never enrolled (its row holds no secret).
  ASSIGN_OR_RETURN(
      Statement stmt,
      db_.Prepare("INSERT INTO agent_credentials (agent_id, secret_sha256, how, enrolled_at, "
                  "revoked_at, revoked_reason) VALUES (?1, '', 'revoked', ?2, ?2, ?3) ON "
                  "CONFLICT(agent_id) DO UPDATE SET revoked_at = ?2, revoked_reason = ?3"));
  stmt.Bind(1, agent_id).Bind(2, now).Bind(3, reason);
  return stmt.Run();
}

absl::Status Store::RetireCredential(const std::string& agent_id) {
  ASSIGN_OR_RETURN(Statement stmt,
                   db_.Prepare("UPDATE agent_credentials SET secret_sha256 = '', how = 'retired' "
                               "WHERE agent_id = ? AND revoked_at IS NULL"));
  stmt.Bind(1, agent_id);
  return stmt.Run();
}

absl::StatusOr<std::vector<model::CredentialRecord>> Store::ListCredentials() {
  ASSIGN_OR_RETURN(Statement stmt,
                   db_.Prepare("SELECT agent_id, secret_sha256, how, enrolled_at, revoked_at, "
                               "revoked_reason, placement FROM agent_credentials ORDER BY "
                               "agent_id"));
  std::vector<model::CredentialRecord> out;
  while (true) {
    ASSIGN_OR_RETURN(bool row, stmt.Step());
    if (!row) {
      break;
    }
    model::CredentialRecord c;
    c.agent_id = stmt.Text(0);
    c.secret_sha256 = stmt.Text(1);
    c.how = stmt.Text(2);
    c.enrolled_at = stmt.Double(3);
    if (!stmt.IsNull(4)) {
      c.revoked_at = stmt.Double(4);
    }
    c.revoked_reason = stmt.Text(5);
    if (!stmt.IsNull(6)) {
      // Written by this store only; unreadable (hand-edited): bound to nothing, which no
      // registration matches but an empty declaration.
      const nlohmann::json labels = nlohmann::json::parse(stmt.Text(6), nullptr, false);
      c.placement.emplace();
      if (labels.is_object()) {
        for (const auto& [key, value] : labels.items()) {
          if (value.is_string()) {
            (*c.placement)[key] = value.get<std::string>();
          }
        }
      }
    }
    out.push_back(std::move(c));
  }
  return out;
}

absl::Status Store::SetExperimentReport(int64_t experiment_id,
                                        const model::ExperimentReport& report) {
  ASSIGN_OR_RETURN(Statement stmt, db_.Prepare("UPDATE experiments SET report = ? WHERE id = ?"));
  stmt.Bind(1, rows::ReportToJson(report)).Bind(2, experiment_id);
  return stmt.Run();
}

absl::Status Store::SetExperimentPaused(int64_t experiment_id, bool paused) {
  ASSIGN_OR_RETURN(Statement stmt, db_.Prepare("UPDATE experiments SET paused = ? WHERE id = ?"));
  stmt.Bind(1, static_cast<int64_t>(paused ? 1 : 0)).Bind(2, experiment_id);
  queue_changes_.paused = true;
  return stmt.Run();
}

absl::Status Store::PutSnapshot(const model::SnapshotRecord& snapshot) {
  ASSIGN_OR_RETURN(Statement stmt,
                   db_.Prepare("INSERT INTO snapshots (id, manifest, files, bytes, source, "
                               "created_at) VALUES (?,?,?,?,?,?) ON CONFLICT(id) DO NOTHING"));
  stmt.Bind(1, snapshot.id)
      .Bind(2, snapshot.manifest)
      .Bind(3, snapshot.files)
      .Bind(4, snapshot.bytes)
      .Bind(5, snapshot.source)
      .Bind(6, snapshot.created_at);
  return stmt.Run();
}

absl::StatusOr<model::SnapshotRecord> Store::GetSnapshot(const std::string& id) {
  ASSIGN_OR_RETURN(Statement stmt,
                   db_.Prepare("SELECT id, manifest, files, bytes, source, created_at FROM "
                               "snapshots WHERE id = ?"));
  stmt.Bind(1, id);
  ASSIGN_OR_RETURN(bool row, stmt.Step());
  if (!row) {
    return absl::NotFoundError(absl::StrCat("no snapshot ", id));
  }
  return model::SnapshotRecord{stmt.Text(0), stmt.Text(1), stmt.Int(2),
                               stmt.Int(3),  stmt.Text(4), stmt.Double(5)};
}

absl::StatusOr<std::vector<model::SnapshotRecord>> Store::ListSnapshots() {
  ASSIGN_OR_RETURN(Statement stmt,
                   db_.Prepare("SELECT id, files, bytes, source, created_at FROM snapshots "
                               "ORDER BY created_at DESC, id"));
  std::vector<model::SnapshotRecord> out;
  while (true) {
    ASSIGN_OR_RETURN(bool more, stmt.Step());
    if (!more) {
      break;
    }
    out.push_back({stmt.Text(0), "", stmt.Int(1), stmt.Int(2), stmt.Text(3), stmt.Double(4)});
  }
  return out;
}

absl::StatusOr<std::map<std::string, model::SnapshotUsage>> Store::SnapshotUsages() {
  ASSIGN_OR_RETURN(
      Statement stmt,
      db_.Prepare("SELECT snapshot_id, COUNT(*), SUM(state IN ('queued', 'assigned', 'running')) "
                  "FROM runs WHERE snapshot_id IS NOT NULL GROUP BY snapshot_id"));
  std::map<std::string, model::SnapshotUsage> out;
  while (true) {
    ASSIGN_OR_RETURN(bool more, stmt.Step());
    if (!more) {
      break;
    }
    out[stmt.Text(0)] = model::SnapshotUsage{stmt.Int(1), stmt.Int(2)};
  }
  return out;
}

absl::StatusOr<bool> Store::DeleteSnapshot(const std::string& id) {
  ASSIGN_OR_RETURN(Statement stmt, db_.Prepare("DELETE FROM snapshots WHERE id = ?"));
  stmt.Bind(1, id);
  RETURN_IF_ERROR(stmt.Run());
  return db_.Changes() > 0;
}

}  // namespace tae::store
