#pragma once

// The references the ingest benchmark measures in the same invocation, on a fresh database file
// (or, with `ingest --store`, in the same copy of the large store that taed ingested into)
// made by Store::Open (the embedded migrations/*.sql and the pragmas taed sets: WAL,
// synchronous = NORMAL, foreign_keys = ON), with the same points in the same order and the same
// points per transaction as the simulated agents send:
//
//   raw       one prepared plain INSERT INTO metrics per point, sqlite3 C API (the target's
//             reference: "the raw SQLite batched-insert rate");
//   raw+sql   taed's own two statements per point (the metrics upsert and the run_summaries
//             upsert of server/store/store_ingest.cc), still raw C API: what taed's SQL costs;
//   store     Store::Ingest called in-process with the decoded events (no gRPC, no protobuf,
//             no threads): what taed's store layer costs on top of its SQL.

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"

namespace tae::bench {

// The points of one benchmark configuration, in the order the simulated agents send them.
struct PointLayout {
  int runs = 8;
  int runs_per_agent = 2;  // an agent's batch holds lines of its own runs only
  int64_t steps_per_run = 1000;
  int values_per_event = 6;
  int batch_events = 2000;  // events (lines) per transaction

  int64_t points() const { return runs * steps_per_run * values_per_event; }
};

enum class Reference { kRaw, kRawWithTaedSql, kStoreIngest };

const char* ReferenceName(Reference reference);

// Inserts layout's points into a fresh database under dir, or, where store names one, into that
// existing database (a copy of a large store: the same run's taed ingested into it), under run ids
// past all it holds. Returns the seconds spent inserting (transactions included; creating the
// database and preparing statements excluded).
absl::StatusOr<double> MeasureReference(Reference reference, const std::string& dir,
                                        const PointLayout& layout, const std::string& store = "");

}  // namespace tae::bench
