-- Code snapshots (taectl mount): a manifest of files, each a content-addressed blob in
-- $TAE_HOME/blobs. The id is the SHA-256 of the manifest text, so equal trees share one row.

CREATE TABLE snapshots (
  id TEXT PRIMARY KEY,
  manifest TEXT NOT NULL,       -- "mode size sha256 path" lines (common/snapshot)
  files INTEGER NOT NULL,
  bytes INTEGER NOT NULL,
  source TEXT NOT NULL,         -- the directory it was taken from, for display
  created_at REAL NOT NULL
) STRICT, WITHOUT ROWID;
