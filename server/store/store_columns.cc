// Store: column files (column_file.h, migration 0021), one metric's packs of an ended
// experiment's runs in run order, written after its runs are packed.

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <random>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/fs/fs.h"
#include "common/status/macros.h"
#include "server/store/column_file.h"
#include "server/store/store.h"
#include "spdlog/spdlog.h"

namespace tae::store {
namespace {

// The first key of the experiment without a column whose every series is packed, where the
// experiment has at least ?2 runs and all of them ended.
constexpr char kColumnDueKey[] =
    "SELECT m.key_id FROM experiment_metrics m WHERE m.experiment_id = ?1 AND (SELECT COUNT(*) "
    "FROM runs WHERE experiment_id = ?1) >= ?2 AND NOT EXISTS (SELECT 1 FROM runs WHERE "
    "experiment_id = ?1 AND state NOT IN ('succeeded', 'failed', 'cancelled')) AND NOT EXISTS "
    "(SELECT 1 FROM metric_columns c WHERE c.experiment_id = ?1 AND c.key_id = m.key_id) AND NOT "
    "EXISTS (SELECT 1 FROM runs r JOIN run_summaries s ON s.run_id = r.id AND s.key_id = m.key_id "
    "WHERE r.experiment_id = ?1 AND NOT EXISTS (SELECT 1 FROM metric_packs p WHERE p.run_id = r.id "
    "AND p.key_id = m.key_id)) ORDER BY m.key_id LIMIT 1";
constexpr char kNextExperiment[] = "SELECT id FROM experiments WHERE id > ? ORDER BY id LIMIT 1";
// The experiment's packs of the key after run ?3, in run order, a window at a time.
constexpr char kColumnPacks[] =
    "SELECT p.run_id, p.data FROM runs r JOIN metric_packs p ON p.run_id = r.id AND p.key_id = ?2 "
    "WHERE r.experiment_id = ?1 AND r.id > ?3 ORDER BY r.id LIMIT ?4";
constexpr int64_t kColumnWindow = 256;
constexpr char kPutColumn[] =
    "INSERT OR REPLACE INTO metric_columns (experiment_id, key_id, generation, runs, bytes) VALUES "
    "(?, ?, ?, ?, ?)";
constexpr char kColumnRow[] =
    "SELECT c.key_id, c.generation, c.runs, c.bytes FROM metric_columns c JOIN metric_keys k ON "
    "k.id = c.key_id WHERE c.experiment_id = ? AND k.name = ?";
constexpr char kColumnKeysOf[] =
    "SELECT key_id FROM metric_columns WHERE experiment_id = ?1 AND (?2 < 0 OR key_id = ?2)";
constexpr char kDropColumns[] =
    "DELETE FROM metric_columns WHERE experiment_id = ?1 AND (?2 < 0 OR key_id = ?2)";
constexpr char kExperimentOfRun[] = "SELECT experiment_id FROM runs WHERE id = ?";

}  // namespace

std::string Store::ColumnPath(int64_t experiment_id, int64_t key_id) const {
  return absl::StrCat(columns_dir_, "/e", experiment_id, "-k", key_id, ".col");
}

void Store::AbandonColumnBuild() {
  if (building_.has_value()) {
    building_->fd.reset();
    ::unlink(building_->tmp.c_str());
    building_.reset();
  }
}

absl::Status Store::DropColumns(int64_t experiment_id, int64_t key_id) {
  if (building_.has_value() && building_->id.experiment_id == experiment_id &&
      (key_id < 0 || building_->id.key_id == key_id)) {
    AbandonColumnBuild();
  }
  if (columns_dir_.empty()) {
    return absl::OkStatus();
  }
  std::vector<int64_t> keys;
  {
    ASSIGN_OR_RETURN(CachedStatement of, db_.Cached(kColumnKeysOf));
    of->Bind(1, experiment_id).Bind(2, key_id);
    while (true) {
      ASSIGN_OR_RETURN(bool more, of->Step());
      if (!more) {
        break;
      }
      keys.push_back(of->Int(0));
    }
  }
  if (keys.empty()) {
    return absl::OkStatus();
  }
  ASSIGN_OR_RETURN(CachedStatement drop, db_.Cached(kDropColumns));
  drop->Bind(1, experiment_id).Bind(2, key_id);
  RETURN_IF_ERROR(drop->Run());
  // Gone at once (a reader never opens a file without its row; one whose row a rollback keeps is
  // read as missing and dropped then).
  for (int64_t key : keys) {
    ::unlink(ColumnPath(experiment_id, key).c_str());
  }
  columns_due_.insert(experiment_id);  // written again once it has ended again
  return absl::OkStatus();
}

absl::StatusOr<std::optional<int64_t>> Store::ExperimentOfRun(int64_t run_id) {
  ASSIGN_OR_RETURN(CachedStatement of, db_.Cached(kExperimentOfRun));
  of->Bind(1, run_id);
  ASSIGN_OR_RETURN(bool found, of->Step());
  if (!found) {
    return std::nullopt;
  }
  return of->Int(0);
}

absl::Status Store::DropColumnsOfRun(int64_t run_id, int64_t key_id) {
  if (columns_dir_.empty()) {
    return absl::OkStatus();
  }
  ASSIGN_OR_RETURN(std::optional<int64_t> experiment_id, ExperimentOfRun(run_id));
  return experiment_id.has_value() ? DropColumns(*experiment_id, key_id) : absl::OkStatus();
}

absl::Status Store::ColumnsMayBeDue(int64_t run_id) {
  if (columns_dir_.empty()) {
    return absl::OkStatus();
  }
  ASSIGN_OR_RETURN(std::optional<int64_t> experiment_id, ExperimentOfRun(run_id));
  if (experiment_id.has_value()) {
    columns_due_.insert(*experiment_id);
  }
  return absl::OkStatus();
}

absl::Status Store::BeginColumnBuild(int64_t experiment_id, int64_t key_id) {
  std::random_device entropy;
  ColumnBuild build;
  build.id.experiment_id = experiment_id;
  build.id.key_id = key_id;
  build.id.generation =
      ((static_cast<uint64_t>(entropy()) << 32) | entropy()) & 0x7fffffffffffffffULL;
  if (std::error_code error; !std::filesystem::create_directories(columns_dir_, error) && error) {
    return absl::InternalError(absl::StrCat("cannot create ", columns_dir_, ": ", error.message()));
  }
  build.tmp = absl::StrCat(ColumnPath(experiment_id, key_id), ".tmp");
  build.fd.reset(::open(build.tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600));
  if (!build.fd.valid()) {
    return fs::ErrnoStatus(errno, "create", build.tmp);
  }
  const std::string header = ColumnHeader(build.id);
  RETURN_IF_ERROR(fs::WriteAll(build.fd.get(), header, build.tmp));
  build.bytes = static_cast<int64_t>(header.size());
  building_ = std::move(build);
  return absl::OkStatus();
}

absl::StatusOr<bool> Store::ColumnSome(double budget_s) {
  if (columns_dir_.empty() || budget_s <= 0) {
    return columns_due();
  }
  const auto start = std::chrono::steady_clock::now();
  const auto spent = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  bool worked = false;  // one window at least per call
  while (!worked || spent() < budget_s) {
    if (!building_.has_value()) {
      // The next experiment to look at: those that ended since, then (once per open) every one.
      int64_t experiment_id = 0;
      if (!columns_due_.empty()) {
        experiment_id = *columns_due_.begin();
        columns_due_.erase(columns_due_.begin());
      } else if (!column_scan_done_) {
        ASSIGN_OR_RETURN(CachedStatement next, db_.Cached(kNextExperiment));
        next->Bind(1, column_scan_after_);
        ASSIGN_OR_RETURN(bool found, next->Step());
        if (!found) {
          column_scan_done_ = true;
          continue;
        }
        experiment_id = column_scan_after_ = next->Int(0);
      } else {
        break;
      }
      worked = true;
      int64_t key_id = 0;
      {
        ASSIGN_OR_RETURN(CachedStatement due, db_.Cached(kColumnDueKey));
        due->Bind(1, experiment_id).Bind(2, min_column_runs_);
        ASSIGN_OR_RETURN(bool found, due->Step());
        if (!found) {
          continue;  // nothing due in it: looked at again when one of its runs ends
        }
        key_id = due->Int(0);
      }
      columns_due_.insert(experiment_id);  // its other keys come next
      RETURN_IF_ERROR(BeginColumnBuild(experiment_id, key_id));
    }
    worked = true;
    ColumnBuild& build = *building_;
    std::string chunk;
    int64_t rows = 0;
    {
      ASSIGN_OR_RETURN(CachedStatement packs, db_.Cached(kColumnPacks));
      packs->Bind(1, build.id.experiment_id)
          .Bind(2, build.id.key_id)
          .Bind(3, build.after_run)
          .Bind(4, kColumnWindow);
      while (true) {
        ASSIGN_OR_RETURN(bool more, packs->Step());
        if (!more) {
          break;
        }
        ++rows;
        const std::string_view pack = packs->Blob(1);
        build.after_run = packs->Int(0);
        AppendColumnEntryHead(build.after_run, pack.size(), &chunk);
        chunk.append(pack);
      }
    }
    build.runs += rows;
    if (rows == kColumnWindow) {
      build.bytes += static_cast<int64_t>(chunk.size());
      if (absl::Status wrote = fs::WriteAll(build.fd.get(), chunk, build.tmp); !wrote.ok()) {
        AbandonColumnBuild();
        return wrote;
      }
      continue;
    }
    // The last window: the trailer, the data on disk, the name, then the row that makes it read.
    chunk.append(ColumnTrailer(build.runs));
    build.bytes += static_cast<int64_t>(chunk.size());
    const std::string path = ColumnPath(build.id.experiment_id, build.id.key_id);
    absl::Status done = fs::WriteAll(build.fd.get(), chunk, build.tmp);
    if (done.ok() && ::fdatasync(build.fd.get()) != 0) {
      done = fs::ErrnoStatus(errno, "sync", build.tmp);
    }
    if (done.ok()) {
      done = build.fd.Close(build.tmp);
    }
    if (done.ok() && ::rename(build.tmp.c_str(), path.c_str()) != 0) {
      done = fs::ErrnoStatus(errno, "rename", build.tmp);
    }
    if (!done.ok()) {
      AbandonColumnBuild();
      return done;
    }
    const ColumnBuild built = std::move(build);
    building_.reset();
    ASSIGN_OR_RETURN(CachedStatement put, db_.Cached(kPutColumn));
    put->Bind(1, built.id.experiment_id)
        .Bind(2, built.id.key_id)
        .Bind(3, static_cast<int64_t>(built.id.generation))
        .Bind(4, built.runs)
        .Bind(5, built.bytes);
    RETURN_IF_ERROR(put->Run());
  }
  return columns_due();
}

bool Store::columns_due() const {
  return !columns_dir_.empty() &&
         (building_.has_value() || !columns_due_.empty() || !column_scan_done_);
}

absl::StatusOr<bool> Store::ReadColumn(int64_t experiment_id, const std::string& key,
                                       std::string* bytes,
                                       std::vector<std::pair<int64_t, std::string_view>>* packs) {
  packs->clear();
  if (columns_dir_.empty()) {
    return false;
  }
  ColumnId id;
  int64_t runs = 0;
  int64_t size = 0;
  {
    ASSIGN_OR_RETURN(CachedStatement row, db_.Cached(kColumnRow));
    row->Bind(1, experiment_id).Bind(2, key);
    ASSIGN_OR_RETURN(bool found, row->Step());
    if (!found) {
      return false;
    }
    id = {experiment_id, row->Int(0), static_cast<uint64_t>(row->Int(1))};
    runs = row->Int(2);
    size = row->Int(3);
  }
  const std::string path = ColumnPath(experiment_id, id.key_id);
  absl::StatusOr<std::string> file = fs::ReadFile(path);
  absl::Status parsed = file.status();
  if (file.ok() && static_cast<int64_t>(file->size()) != size) {
    parsed = absl::DataLossError(
        absl::StrCat("column file: ", file->size(), " bytes where ", size, " were written"));
  }
  if (parsed.ok()) {
    *bytes = *std::move(file);
    parsed = ParseColumn(*bytes, id, runs, packs);
  }
  if (!parsed.ok()) {
    // Derived data: the packs say the same, and the column is written again.
    spdlog::warn("{}: {}; reading the packs", path, std::string(parsed.message()));
    packs->clear();
    RETURN_IF_ERROR(DropColumns(experiment_id, id.key_id));
    return false;
  }
  return true;
}

}  // namespace tae::store
