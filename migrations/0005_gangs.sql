-- Multi-host runs (resources.hosts = N): a run spans N agents of one slice, gang-scheduled.
-- run_hosts lists, per attempt, the agent of each rank and each rank's exit: the run succeeds when
-- every rank exited 0, and fails, is cancelled or is lost as a whole when any rank does.

ALTER TABLE runs ADD COLUMN hosts INTEGER NOT NULL DEFAULT 1;

CREATE TABLE run_hosts (
  run_id INTEGER NOT NULL REFERENCES runs(id),
  attempt INTEGER NOT NULL,
  rank INTEGER NOT NULL,
  agent_id TEXT NOT NULL,
  exit_code INTEGER,                      -- NULL until that rank's process exited
  PRIMARY KEY (run_id, attempt, rank),
  UNIQUE (run_id, attempt, agent_id)
) STRICT;
