-- [search] method = "asha" (server/search): a run it stops early ends in the new final state
-- 'pruned', and each of its decisions (a grid point judged at a rung) is kept, so a restarted
-- taed replays them and changes none.
--
-- The runs table's CHECK gains 'pruned'. Widening a CHECK changes no stored row, so the schema
-- text is edited in place (SQLite's documented way for such changes; a rebuild of runs would
-- need foreign keys off, which a migration's transaction cannot do).
PRAGMA writable_schema = ON;
UPDATE sqlite_schema SET sql = replace(sql, '''cancelled'', ''lost'')',
                                       '''cancelled'', ''lost'', ''pruned'')')
  WHERE type = 'table' AND name = 'runs';
PRAGMA writable_schema = RESET;

CREATE TABLE search_decisions (
  id INTEGER PRIMARY KEY,                 -- the order they were made in
  experiment_id INTEGER NOT NULL REFERENCES experiments(id),
  point TEXT NOT NULL,                    -- the grid point's variant name
  grp TEXT NOT NULL,                      -- its competition: the ablation, or '' (within study)
  rung INTEGER NOT NULL,
  step INTEGER NOT NULL,                  -- the rung's step
  value REAL,                             -- the point's mean at the rung; NULL: no data
  seeds INTEGER NOT NULL,
  verdict TEXT NOT NULL CHECK (verdict IN ('keep', 'prune', 'nodata')),
  rank INTEGER NOT NULL,
  competitors INTEGER NOT NULL,
  keeps INTEGER NOT NULL,
  reason TEXT NOT NULL,
  at REAL NOT NULL
) STRICT;
CREATE INDEX search_decisions_by_experiment ON search_decisions(experiment_id, id);
