#pragma once

// One metric's packs (series_pack.h) of every run of an ended experiment, in run id order, as one
// file beside the database (table metric_columns, migration 0021). A curve or history() of that
// metric reads it front to back: on a cold page cache one sequential read of ~13 bytes a point
// instead of one random read per run among the other metrics' packs.
//
// Layout, version 1, integers little-endian:
//   header:  "TAECPK1\n", experiment id (u64), key id (u64), generation (u64)
//   entries: per run, ascending ids: run id (u64), pack size (u64), the pack's bytes
//   trailer: run count (u64), "TAECPKE\n"
// The generation is the metric_columns row's: a file left from another row is not read. A file
// is written whole to a temporary name and renamed (store_columns.cc); a reader takes it only
// where ParseColumn does, and each pack is still checked as a pack (CheckPack).
//
// Pure: no files here.

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"

namespace tae::store {

struct ColumnId {
  int64_t experiment_id = 0;
  int64_t key_id = 0;
  uint64_t generation = 0;
};

constexpr size_t kColumnHeaderBytes = 32;
constexpr size_t kColumnTrailerBytes = 16;

// The header of a column file.
std::string ColumnHeader(const ColumnId& id);
// One entry's bytes before its pack (run id, size), appended to `out`.
void AppendColumnEntryHead(int64_t run_id, size_t pack_bytes, std::string* out);
// The trailer of a file of `runs` entries.
std::string ColumnTrailer(int64_t runs);

// The entries of a whole column file of `id` with `runs` entries, as views into `file`, in run
// id order. DataLoss (with `entries` cleared) for anything else: another id or generation, a
// truncated file, trailing bytes, ids not ascending, a count that does not match.
absl::Status ParseColumn(std::string_view file, const ColumnId& id, int64_t runs,
                         std::vector<std::pair<int64_t, std::string_view>>* entries);

}  // namespace tae::store
