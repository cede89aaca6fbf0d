-- Checkpoints off the worker (docs/checkpoints.md). A checkpoint is a manifest of the run's
-- checkpoint directory as its job marked it complete at `step` (snapshot manifest lines); its
-- blobs live in $TAE_HOME/checkpoints. A row is inserted incomplete before taed verifies that
-- every blob is stored, and only a complete row is listed, pulled or restored: so a half-uploaded
-- checkpoint is never offered, and blob garbage collection (which keeps every blob any row names)
-- never removes a blob a commit in progress relies on. Incomplete rows left by a crash are
-- deleted at start.

CREATE TABLE checkpoints (
  id INTEGER PRIMARY KEY,
  run_id INTEGER NOT NULL REFERENCES runs(id),
  attempt INTEGER NOT NULL,
  step INTEGER NOT NULL,
  manifest_id TEXT NOT NULL,
  manifest TEXT NOT NULL,
  files INTEGER NOT NULL,
  bytes INTEGER NOT NULL,
  complete INTEGER NOT NULL DEFAULT 0,
  created_at REAL NOT NULL
) STRICT;
CREATE INDEX checkpoints_by_run ON checkpoints (run_id, id);

-- The distinct blobs of each checkpoint, for garbage collection.
CREATE TABLE checkpoint_blobs (
  checkpoint_id INTEGER NOT NULL REFERENCES checkpoints(id),
  hash TEXT NOT NULL,
  PRIMARY KEY (checkpoint_id, hash)
) STRICT, WITHOUT ROWID;
CREATE INDEX checkpoint_blobs_by_hash ON checkpoint_blobs (hash);

-- resources.keep_checkpoints: how many of a run's checkpoints taed keeps (0: none are uploaded).
ALTER TABLE runs ADD COLUMN keep_checkpoints INTEGER NOT NULL DEFAULT 2;
UPDATE runs SET keep_checkpoints =
  CASE WHEN json_type(config, '$."resources.keep_checkpoints"') = 'integer'
            AND json_extract(config, '$."resources.keep_checkpoints"') >= 0
       THEN json_extract(config, '$."resources.keep_checkpoints"') ELSE 2 END
WHERE json_valid(config);
