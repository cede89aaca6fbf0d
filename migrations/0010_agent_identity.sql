-- Each agent's own credential (docs/security.md). An agent enrols once, with the shared
-- enrolment token ($TAE_HOME/agent.token) or through the provider that starts it, and from then
-- on presents "ID.SECRET"; taed binds every agent call to that id. Only the secret's SHA-256 is
-- kept here. A revoked agent is locked out: its credential no longer authenticates and its id
-- cannot enrol again.
CREATE TABLE agent_credentials (
  agent_id TEXT PRIMARY KEY,
  secret_sha256 TEXT NOT NULL,
  how TEXT NOT NULL,                -- 'token' (enrolled with the shared token) or 'provider'
  enrolled_at REAL NOT NULL,
  revoked_at REAL,                  -- set: locked out
  revoked_reason TEXT NOT NULL DEFAULT ''
) STRICT;

-- An agent with repeated infrastructure faults (its work dir, journal or disk; staging) is
-- quarantined: it takes no runs until `taectl agents undrain ID`. Non-empty: why.
ALTER TABLE agents ADD COLUMN quarantine TEXT NOT NULL DEFAULT '';

-- Failures blamed on the right side (docs/reliability.md). A run's attempt that ends through the
-- worker's fault (the agent lost, its code not staged, its disk or work dir broken) is requeued
-- without spending resources.max_attempts; infra_faults counts those requeues (a run fails only
-- after kMaxInfraFaults of them). retry_on: "infra" (only those are retried) or "any" (the job's
-- own failures are retried too, within max_attempts).
ALTER TABLE runs ADD COLUMN infra_faults INTEGER NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN retry_on TEXT NOT NULL DEFAULT 'infra';
