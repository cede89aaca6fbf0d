-- An ended run's series of each metric packed as one blob (server/store/series_pack.h), written
-- by taed soon after the run ends and dropped when its points change (a retry, a late point): a
-- curve of a 10,000-run study reads these instead of 10 million rows. Runs that ended before this
-- migration are packed by taed after it starts (Store::PackSome).
-- A rowid table, not WITHOUT ROWID: in those the rows sit in the key's B-tree, and kilobyte rows
-- make it ten levels deep (a lookup took 42 us; here 3 levels of a small index, then the row).
CREATE TABLE metric_packs (
  run_id INTEGER NOT NULL,
  key_id INTEGER NOT NULL,
  data BLOB NOT NULL,
  PRIMARY KEY (run_id, key_id)
) STRICT;
