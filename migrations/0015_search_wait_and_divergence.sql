-- An asha rung waits for search.bootstrap points before it judges (server/search/asha.h): a point
-- that arrives before then gets the decision 'wait', kept so that a restarted taed replays it. A
-- diverged or failed seed's worst value is stored as +-inf in value.
--
-- search_decisions' CHECK gains 'wait'. Widening a CHECK changes no stored row, so the schema text
-- is edited in place, as 0012 did for runs.
PRAGMA writable_schema = ON;
UPDATE sqlite_schema SET sql = replace(sql, '(''keep'', ''prune'', ''nodata'')',
                                       '(''keep'', ''prune'', ''nodata'', ''wait'')')
  WHERE type = 'table' AND name = 'search_decisions';
PRAGMA writable_schema = RESET;

-- The first non-finite report of each (run, metric): a diverged seed (a NaN or infinite loss).
-- metrics holds finite values only; a run's final value of a key listed here is "diverged at
-- step", never its last finite one (docs/design.md, "Diverged is worst").
CREATE TABLE metric_divergence (
  run_id INTEGER NOT NULL,
  key_id INTEGER NOT NULL,
  step INTEGER NOT NULL,                  -- the earliest step reported non-finite
  value TEXT NOT NULL CHECK (value IN ('nan', 'inf', '-inf')),
  attempt INTEGER NOT NULL,
  wall_time REAL NOT NULL,
  PRIMARY KEY (run_id, key_id)
) STRICT, WITHOUT ROWID;
