-- The first schema: experiments, their runs and every state transition, agents, metrics with
-- per-run summaries maintained on ingest, and log lines.

CREATE TABLE experiments (
  id INTEGER PRIMARY KEY,
  name TEXT NOT NULL,
  description TEXT NOT NULL DEFAULT '',
  spec_hash TEXT NOT NULL,
  spec_path TEXT NOT NULL DEFAULT '',
  spec_text TEXT NOT NULL,
  overrides TEXT NOT NULL DEFAULT '[]',   -- JSON array of "key=value"
  created_at REAL NOT NULL
) STRICT;
CREATE INDEX experiments_by_hash ON experiments(spec_hash);
CREATE INDEX experiments_by_name ON experiments(name);

CREATE TABLE runs (
  id INTEGER PRIMARY KEY,
  experiment_id INTEGER NOT NULL REFERENCES experiments(id),
  variant TEXT NOT NULL,
  seed INTEGER NOT NULL,
  config TEXT NOT NULL,                   -- flat JSON config
  state TEXT NOT NULL CHECK (state IN
    ('queued', 'assigned', 'running', 'succeeded', 'failed', 'cancelled', 'lost')),
  attempt INTEGER NOT NULL DEFAULT 0,     -- 0 until first assigned
  max_attempts INTEGER NOT NULL,
  priority INTEGER NOT NULL DEFAULT 0,
  slots INTEGER NOT NULL DEFAULT 1,
  labels TEXT NOT NULL DEFAULT '{}',      -- JSON object the agent's labels must contain
  agent_id TEXT,
  pid INTEGER NOT NULL DEFAULT 0,
  exit_code INTEGER,
  reason TEXT NOT NULL DEFAULT '',
  created_at REAL NOT NULL,
  started_at REAL,
  finished_at REAL
) STRICT;
CREATE INDEX runs_by_experiment ON runs(experiment_id);
CREATE INDEX runs_by_state ON runs(state);

CREATE TABLE run_transitions (
  id INTEGER PRIMARY KEY,
  run_id INTEGER NOT NULL REFERENCES runs(id),
  attempt INTEGER NOT NULL,
  from_state TEXT NOT NULL,
  to_state TEXT NOT NULL,
  reason TEXT NOT NULL,
  at REAL NOT NULL
) STRICT;
CREATE INDEX run_transitions_by_run ON run_transitions(run_id);

CREATE TABLE agents (
  id TEXT PRIMARY KEY,
  host TEXT NOT NULL,
  slots INTEGER NOT NULL,
  labels TEXT NOT NULL,
  version TEXT NOT NULL,
  state TEXT NOT NULL,
  first_seen REAL NOT NULL,
  last_seen REAL NOT NULL
) STRICT;

CREATE TABLE metric_keys (
  id INTEGER PRIMARY KEY,
  name TEXT NOT NULL UNIQUE
) STRICT;

-- One point per (run, key, step). A later attempt's point at the same step replaces the earlier
-- one, so a resumed run never holds duplicates.
CREATE TABLE metrics (
  run_id INTEGER NOT NULL,
  key_id INTEGER NOT NULL,
  step INTEGER NOT NULL,
  attempt INTEGER NOT NULL,
  value REAL NOT NULL,
  wall_time REAL NOT NULL,
  PRIMARY KEY (run_id, key_id, step)
) STRICT, WITHOUT ROWID;

CREATE TABLE run_summaries (
  run_id INTEGER NOT NULL,
  key_id INTEGER NOT NULL,
  last_step INTEGER NOT NULL,
  last_value REAL NOT NULL,
  min_value REAL NOT NULL,
  max_value REAL NOT NULL,
  count INTEGER NOT NULL,
  PRIMARY KEY (run_id, key_id)
) STRICT, WITHOUT ROWID;

CREATE TABLE logs (
  id INTEGER PRIMARY KEY,                 -- the cursor `taectl logs` pages with
  run_id INTEGER NOT NULL,
  attempt INTEGER NOT NULL,
  seq INTEGER NOT NULL,                   -- the agent's event sequence number
  agent_id TEXT NOT NULL,
  stream TEXT NOT NULL,
  line TEXT NOT NULL,
  wall_time REAL NOT NULL,
  UNIQUE (run_id, attempt, agent_id, seq)
) STRICT;
CREATE INDEX logs_by_run ON logs(run_id, id);
